"""The ``compute`` group of ``gpuarrays bench`` (docs/kernels.md, "Measurements").

``a + b``, ``a * 2``, ``exp(a)`` and ``where(a > 0, a, 0)`` over float32 at 1,
1 000, 1 M and 16 M elements, side by side with NumPy, PyTorch CPU and, on
OpenCL devices, ``pyopencl.array`` and a one-item-per-work-item PyOpenCL
kernel (the device's ceiling); on CUDA devices CuPy and PyTorch CUDA.  Small
arrays are timed as 100 calls then one synchronize (per call); large ones as
one call and a synchronize (GB/s of the traffic the operation needs: every
array operand read once, the result written once).  On device back-ends also
the enqueue path (``a + a`` through the namespace, and one call of the Python
launcher, against a bare ``clEnqueueNDRangeKernel`` of the same kernel, no
synchronize), ``astype`` between pairs of dtypes (bench_astype.py) and a strided fill
against one-item kernels doing the same.
"""

from __future__ import annotations

import ctypes
import dataclasses

import numpy as np

import gpuarrays as ga

from . import bench as b
from .bench_astype import bench_conversions

__all__ = ["bench_compute"]

# name, gpuarrays / numpy / torch statement, pyopencl.array statement, one-item kernel body,
# array operands (for the traffic)
_OPS = (
    ("a + b", "c = a + y", "c = a + y", "o[i] = a[i] + y[i];", 2),
    ("a * 2", "c = a * 2", "c = a * 2", "o[i] = a[i] * 2.0f;", 1),
    ("exp(a)", "c = M.exp(a)", "c = clmath.exp(a)", "o[i] = exp(a[i]);", 1),
    ("where(a > 0, a, 0)", "c = M.where(a > 0, a, 0)", "c = cl_array.if_positive(a, a, z)",
     "o[i] = a[i] > 0 ? a[i] : 0.0f;", 1),
)
_KERNELS = """
__kernel void k0(__global float *o, __global const float *a, __global const float *y)
{ size_t i = get_global_id(0); %s }
"""
_CALLS = 100  # small arrays: calls per synchronize


def _one_item_kernel(ocl, body: str):
    cl, _, ctx, _ = ocl
    return cl.Program(ctx, _KERNELS % body).build().k0


def bench_compute(dev, settings, libs, rows, targets) -> None:
    """Measure the group on ``dev``; append ``bench.Row``/``bench.Target`` objects."""
    smoke = settings.name == "smoke"
    sizes = (1, 1000, 1 << 16) if smoke else (1, 1000, 1 << 20, 1 << 24)
    few = dataclasses.replace(settings, repeat=min(settings.repeat, 11))
    torch, ocl = libs["torch"], libs["pyopencl"]
    cupy, tdev = libs["cuda"]["cupy"], libs["cuda"]["torch_cuda"]
    rng = np.random.default_rng(0)
    for n in sizes:
        small = n <= 1000
        h = rng.standard_normal(n).astype(np.float32)
        h2 = rng.standard_normal(n).astype(np.float32)
        ns = {"np": np, "ga": ga, "dev": dev, "r": range(_CALLS), "M": ga,
              "a": ga.asarray(h, device=dev), "y": ga.asarray(h2, device=dev)}
        refs = {"numpy": {"M": np, "a": h, "y": h2}}
        # without PyTorch its column stays, empty: the report marks it n/a
        refs["torch"] = None if torch is None else {
            "M": torch, "a": torch.from_numpy(h), "y": torch.from_numpy(h2)}
        if ocl is not None:
            import pyopencl.clmath as clmath

            cl, cl_array, _, queue = ocl
            pa, py = cl_array.to_device(queue, h), cl_array.to_device(queue, h2)
            refs["pyopencl.array"] = {"a": pa, "y": py, "z": cl_array.zeros_like(pa),
                                      "clmath": clmath, "cl_array": cl_array, "queue": queue}
        if cupy is not None:
            with cupy.cuda.Device(dev.index):
                refs["cupy"] = {"M": cupy, "a": cupy.asarray(h), "y": cupy.asarray(h2),
                                "idx": dev.index, "cupy": cupy}
        if tdev is not None:
            refs["torch (cuda)"] = {"M": torch, "a": torch.from_numpy(h).to(tdev),
                                    "y": torch.from_numpy(h2).to(tdev), "torch": torch}
        for name, stmt, cl_stmt, body, arrays in _OPS:
            sync = "dev.synchronize()"
            syncs = {"numpy": "", "torch": "", "pyopencl.array": "queue.finish()",
                     "cupy": "cupy.cuda.Device(idx).synchronize()",
                     "torch (cuda)": "torch.cuda.synchronize()"}
            cases = {"gpuarrays": _case(stmt, ns, {}, sync, small)}
            for lib, names in refs.items():
                cases[lib] = None if names is None else _case(
                    cl_stmt if lib == "pyopencl.array" else stmt, ns, names, syncs[lib], small)
            if ocl is not None:
                k = _one_item_kernel(ocl, body)
                o = ocl[1].empty_like(refs["pyopencl.array"]["a"])
                k.set_args(o.data, refs["pyopencl.array"]["a"].data,
                           refs["pyopencl.array"]["y"].data)
                cases["one-item kernel"] = _case(
                    "cl.enqueue_nd_range_kernel(queue, k, (n,), None)", ns,
                    {"cl": ocl[0], "k": k, "n": n, "queue": ocl[3]}, "queue.finish()", small)
            times = b.side_by_side(cases, few if n >= 1 << 20 else settings)
            per_call = {k: None if t is None else t / (_CALLS if small else 1)
                        for k, t in times.items()}
            nbytes = 4 * n * (arrays + 1)
            if small:
                rows.append(b.Row("compute", f"{name}, {n} float32", "ns", per_call,
                                  {"elements": n, "calls_per_sync": _CALLS}))
            else:
                rows.append(b.Row("compute bandwidth", f"{name}, {n:,} float32", "GB/s",
                                  {k: None if t is None else nbytes / t
                                   for k, t in per_call.items()}, {"elements": n}))
            _targets(dev, name, n, small, per_call, targets)
            libs["progress"].step(f"compute {name} {n}")
        ns["a"].free()
        ns["y"].free()
    if dev.backend == "opencl":
        _enqueue(dev, settings, libs, rows, targets)
        _data_movement(dev, few, libs, rows, targets, 1 << 16 if smoke else 1 << 24)
        bench_conversions(dev, few, libs, rows, targets, 1 << 16 if smoke else 1 << 24)


def _case(text: str, ns: dict, names: dict, end: str, small: bool) -> b.Case:
    """Small arrays: 100 calls, then the synchronize ``end``; large: one call and ``end``."""
    code = f"for _ in r:\n    {text}\n{end}" if small else f"{text}\n{end}"
    return b.Case(code, {**ns, **names})


def _targets(dev, name, n, small, t, targets) -> None:
    ours = t["gpuarrays"]
    if dev.backend == "cpu":
        if n == 1000 and t.get("torch"):
            targets.append(b.Target(f"compute {name}, 1 000 float32", ours / t["torch"], 1.0,
                                    None, "torch", "per call, at most PyTorch CPU's"))
        if n == 1 << 24:
            targets.append(b.Target(f"compute {name}, 16 M float32", ours / t["numpy"], 0.8,
                                    None, "numpy", "warm pool: at most 0.8x NumPy's time"))
        return
    if dev.backend == "opencl" and t.get("pyopencl.array"):
        if small:
            targets.append(b.Target(f"compute {name}, {n} float32", ours / t["pyopencl.array"],
                                    0.2, None, "pyopencl.array", "100 calls, one synchronize"))
        elif n == 1 << 24:
            targets.append(b.Target(f"compute {name}, 16 M float32", ours / t["one-item kernel"],
                                    1.25, None, "one-item kernel", "at least 0.8x its GB/s"))
            targets.append(b.Target(f"compute {name}, 16 M float32", ours / t["pyopencl.array"],
                                    0.05, None, "pyopencl.array", "at least 20x its GB/s"))
    if dev.backend == "cuda" and t.get("cupy") and small:
        targets.append(b.Target(f"compute {name}, {n} float32", ours / t["cupy"], 1.0, None,
                                "cupy", "host time per call at most CuPy's"))


def _enqueue(dev, settings, libs, rows, targets) -> None:
    """``a + a`` and one Python launcher call vs a bare clEnqueueNDRangeKernel of the same
    kernel (no waiting)."""
    from .._compute.device import launcher

    a = ga.ones(1000, np.float32, device=dev)
    out = ga.empty(1000, np.float32, device=dev)
    f4 = np.dtype(np.float32)
    view, args = out._raw(), [a._raw(), a._raw()]
    launcher.elementwise(dev, "add", view, args, [f4, f4])
    dev.synchronize()
    kernel = dev.impl.compile_kernel(dev.index, *_launched(launcher, dev, view, args, f4))
    lib = dev.impl._lib
    gsize, lsize = ctypes.c_size_t(1024), ctypes.c_size_t(256)
    ns = {"launcher": launcher, "dev": dev, "view": view, "args": args, "dt": [f4, f4],
          "enqueue": lib.clEnqueueNDRangeKernel, "q": kernel._state.q, "k": kernel._handle,
          "g": ctypes.byref(gsize), "l": ctypes.byref(lsize), "a": a}
    cases = {
        "launcher": b.Case("launcher.elementwise(dev, 'add', view, args, dt)", ns,
                           teardown="dev.synchronize()"),
        "a + a": b.Case("c = a + a", ns, teardown="dev.synchronize()"),
        "bare clEnqueueNDRangeKernel": b.Case("enqueue(q, k, 1, None, g, l, 0, None, None)", ns,
                                              teardown="dev.synchronize()"),
    }
    t = b.side_by_side(cases, settings)
    rows.append(b.Row("compute", "enqueue path, 1000 float32", "ns", t))
    bare = t["bare clEnqueueNDRangeKernel"]
    # the whole path a user takes (typing, the result from the pool, the compiled launch
    # of src/native/core/launch.c, the previous result freed); "launcher" is the Python
    # engine that given outputs and broadcasting still take
    targets.append(b.Target("compute enqueue path", t["a + a"] / (bare + 5000), 1.0, None,
                            "bare enqueue + 5 us", "a + a within 5 us of a bare enqueue"))
    libs["progress"].step("compute enqueue path")
    a.free()
    out.free()


def _launched(launcher, dev, view, args, f4):
    """(source, name, params) of the kernel the launcher runs for ``add``."""
    from .._compute.device import generator

    sig = launcher.describe("add", view, args, [f4, f4])
    return (generator.source(dev.impl.dialect, [sig]), generator.kernel_name(sig),
            [p.type for p in generator.params(sig)])


def _data_movement(dev, settings, libs, rows, targets, n) -> None:
    """A strided fill vs a one-item PyOpenCL kernel doing the same."""
    ocl = libs["pyopencl"]
    if ocl is None:
        return
    cl, cl_array, ctx, queue = ocl
    a = ga.asarray(np.zeros(n, np.float32), device=dev)
    fill2 = cl.Program(ctx, """
__kernel void fill2(__global float *o) { size_t i = get_global_id(0); o[2 * i] = 1.5f; }
""").build().fill2
    pa = cl_array.empty(queue, n, np.float32)
    fill2.set_args(pa.data)
    ns = {"v": a[::2], "dev": dev, "cl": cl, "queue": queue, "fill2": fill2}
    cases = {"gpuarrays": b.Case("v[...] = 1.5\ndev.synchronize()", ns),
             "one-item kernel": b.Case(f"cl.enqueue_nd_range_kernel(queue, fill2, ({n // 2},), "
                                       "None)\nqueue.finish()", ns)}
    t = b.side_by_side(cases, settings)
    rows.append(b.Row("compute bandwidth", f"fill a[::2] = 1.5, {n:,} float32", "GB/s",
                      {k: 2 * n / v for k, v in t.items()}, {"elements": n}))
    targets.append(b.Target("data movement fill a[::2] = 1.5",
                            t["gpuarrays"] / t["one-item kernel"], 1.25, None,
                            "one-item kernel", "at least 0.8x its GB/s"))
    libs["progress"].step("compute fill a[::2] = 1.5")
    a.free()
