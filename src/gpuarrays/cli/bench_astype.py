"""``astype`` between pairs of dtypes on an OpenCL device, against a one-item kernel.

Part of the ``compute`` group of ``gpuarrays bench`` (docs/performance.md,
"Conversions").  Each pair converts 16 M elements (64 K with ``--smoke``) whose values
every destination holds exactly (0 to 99), so the one-item kernel's plain C cast
(``o[i] = (DST)a[i]``; ``vload_half``/``vstore_half`` for float16) is the device's limit
for the conversion.  The full run measures every ordered pair of the real dtypes and bool
the device holds; ``--quick`` and ``--smoke`` a fixed selection.  The environment
variable ``GPUARRAYS_BENCH_ASTYPE_PAIRS`` narrows any run to the pairs it names, comma-separated
``src:dst`` kernel keys where ``*`` is any key (``f2:*,b1:i1,u1:i1``), to measure a few pairs
again without the full run.
"""

from __future__ import annotations

import os

import numpy as np

import gpuarrays as ga

from . import bench as b

__all__ = ["bench_conversions"]

_C_TYPES = {
    "b1": "uchar", "i1": "char", "u1": "uchar", "i2": "short", "u2": "ushort", "i4": "int",
    "u4": "uint", "i8": "long", "u8": "ulong", "f2": "half", "f4": "float", "f8": "double",
}
# --quick and --smoke: the conversions programs meet most (widening and narrowing floats,
# ints to and from floats, bool, float16)
_SELECTION = (("f4", "f8"), ("f8", "f4"), ("i4", "f4"), ("f4", "i4"), ("u1", "f4"),
              ("f4", "f2"), ("f2", "f4"), ("b1", "f4"), ("i8", "i4"), ("f4", "u1"))


def _kernel_name(src: str, dst: str) -> str:
    return f"conv_{src}_{dst}"


def _kernel(src: str, dst: str) -> str:
    load = "vload_half(i, a)" if src == "f2" else "a[i]"
    if dst == "f2":
        store = f"vstore_half((float){load}, i, o);"
    elif dst == "b1":
        store = f"o[i] = {load} != 0;"
    else:
        store = f"o[i] = ({_C_TYPES[dst]}){load};"
    src_t = "half" if src == "f2" else _C_TYPES[src]
    dst_t = "half" if dst == "f2" else _C_TYPES[dst]
    return (f"__kernel void {_kernel_name(src, dst)}(__global {dst_t} *o, "
            f"__global const {src_t} *a) {{ size_t i = get_global_id(0); {store} }}\n")


def _pairs(dev, full: bool) -> list[tuple[str, str]]:
    keys = [k for k in _C_TYPES if dev.supports(k)]
    if not full:
        pairs = [(s, d) for s, d in _SELECTION if s in keys and d in keys]
    else:
        pairs = [(s, d) for s in keys for d in keys if s != d]
    wanted = os.environ.get("GPUARRAYS_BENCH_ASTYPE_PAIRS", "").strip()
    if wanted:
        patterns = []
        for item in wanted.split(","):
            s, sep, d = item.strip().partition(":")
            if not sep or not all(k == "*" or k in _C_TYPES for k in (s, d)):
                raise ValueError(f"GPUARRAYS_BENCH_ASTYPE_PAIRS: {item!r} is not src:dst with "
                                 f"keys among {', '.join(_C_TYPES)} or *")
            patterns.append((s, d))
        pairs = [(s, d) for s, d in pairs
                 if any(ps in ("*", s) and pd in ("*", d) for ps, pd in patterns)]
    return pairs


def bench_conversions(dev, settings, libs, rows, targets, n: int) -> None:
    """Time ``a.astype(dst)`` and the one-item kernel for each pair; a target per pair."""
    ocl = libs["pyopencl"]
    if ocl is None:
        return
    cl, cl_array, ctx, queue = ocl
    pairs = _pairs(dev, settings.name not in ("quick", "smoke"))
    if not pairs:
        return
    fp64 = any("f8" in p for p in pairs)
    source = (("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if fp64 else "")
              + "".join(_kernel(s, d) for s, d in pairs))
    program = cl.Program(ctx, source).build()
    values = np.random.default_rng(3).integers(0, 100, n)
    hosts: dict[str, tuple] = {}  # source key -> (gpuarrays array, PyOpenCL buffer)
    for src, dst in pairs:
        if src not in hosts:
            h = values.astype(np.dtype(src))
            hosts[src] = (ga.asarray(h, device=dev), cl_array.to_device(queue, h))
        a, pa = hosts[src]
        out = cl_array.empty(queue, n, np.dtype(dst))
        kernel = getattr(program, _kernel_name(src, dst))
        kernel.set_args(out.data, pa.data)
        ns = {"a": a, "np": np, "dev": dev, "cl": cl, "queue": queue, "k": kernel,
              "dst": np.dtype(dst)}
        times = b.side_by_side({
            "gpuarrays": b.Case("c = a.astype(dst)\ndev.synchronize()", ns),
            "one-item kernel": b.Case(f"cl.enqueue_nd_range_kernel(queue, k, ({n},), None)\n"
                                      "queue.finish()", ns)}, settings)
        nbytes = n * (np.dtype(src).itemsize + np.dtype(dst).itemsize)
        name = f"astype {np.dtype(src)} -> {np.dtype(dst)}"
        rows.append(b.Row("compute bandwidth", f"{name}, {n:,} elements", "GB/s",
                          {k: nbytes / v for k, v in times.items()}, {"elements": n}))
        targets.append(b.Target(f"conversion {name}",
                                times["gpuarrays"] / times["one-item kernel"], 1.25, None,
                                "one-item kernel", "at least 0.8x its GB/s"))
        out.data.release()
    for a, _ in hosts.values():
        a.free()
    libs["progress"].step(f"compute astype ({len(pairs)} pairs)")
