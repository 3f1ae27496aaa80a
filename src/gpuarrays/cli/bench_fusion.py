"""The ``fusion`` group of ``gpuarrays bench`` (docs/fusion.md, "Measured").

Side by side in one process, each ratio beside its target (issue 33):

* a 9-operation chain with ``where`` and broadcasting over 4096 x 4096 float32:
  ``ga.fuse`` against the same namespace calls unfused (target <= 0.35x) and, on an
  OpenCL device, against one hand-written OpenCL kernel of the same expression built by
  PyOpenCL (target <= 1.25x); on ``cpu`` against NumPy's unfused calls (<= 0.5x) and
  numexpr's one-pass evaluation where numexpr is installed (<= 1x);
* ``ga.fuse``'d ``sum((x - m) ** 2, axis=0)`` against ``ga.sum(x, axis=0)`` alone
  (<= 1.3x);
* the host overhead of a cached fused call on 1,000 elements against one unfused
  ``a + b`` (<= 2x);
* warm start: a fresh process whose fused kernel is in the disk cache, its first call
  beyond the trace and a steady call (<= 20 ms), measured in subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

import gpuarrays as ga

from . import bench as b

__all__ = ["bench_fusion", "chain"]


def chain(x, m, a):
    """The benchmark's expression: 9 operations, a ``where``, ``m`` broadcast along rows."""
    t = (x - m) * a
    u = ga.where(t > 0, t, t * 0.5)
    return ga.sqrt(u * u + 1.0) - m


def _chain_numpy(x, m, a):
    t = (x - m) * a
    u = np.where(t > 0, t, t * np.float32(0.5))
    return np.sqrt(u * u + np.float32(1.0)) - m


_KERNEL = """
__kernel void k(__global float *o, __global const float *x, __global const float *m,
                float a, int ncol)
{ size_t i = get_global_id(0); float mm = m[i % ncol]; float t = (x[i] - mm) * a;
  float u = t > 0 ? t : t * 0.5f; o[i] = sqrt(u * u + 1.0f) - mm; }
"""


def _deviation(x, m):
    return ga.sum((x - m) ** 2, axis=0)


def bench_fusion(dev, settings, libs, rows, targets) -> None:
    """Measure the group on ``dev``; append ``bench.Row``/``bench.Target`` objects."""
    side = 512 if settings.name == "smoke" else 4096
    rng = np.random.default_rng(0)
    hx = rng.standard_normal((side, side)).astype(np.float32)
    hm = rng.standard_normal(side).astype(np.float32)
    x, m = ga.asarray(hx, device=dev), ga.asarray(hm, device=dev)
    fused = ga.fuse(chain)
    fused(x, m, 2.0).free()
    chain(x, m, 2.0)
    ns = {"ga": ga, "dev": dev, "f": fused, "chain": chain, "x": x, "m": m, "np": np,
          "hx": hx, "hm": hm, "npchain": _chain_numpy}
    cases = {"ga.fuse": b.Case("f(x, m, 2.0).free()\nga.synchronize(dev)", ns),
             "unfused namespace": b.Case("chain(x, m, 2.0).free()\nga.synchronize(dev)", ns),
             "numpy": b.Case("npchain(hx, hm, np.float32(2.0))", ns)}
    try:
        import numexpr
        ns.update(ne=numexpr, a=np.float32(2.0))
        cases["numexpr"] = b.Case(
            "ne.evaluate('sqrt(where((hx - hm) * a > 0, (hx - hm) * a, (hx - hm) * a * 0.5) ** 2"
            " + 1.0) - hm', local_dict={'hx': hx, 'hm': hm, 'a': a})", ns)
    except ImportError:
        pass
    ocl = libs["pyopencl"] if dev.backend == "opencl" else None
    if ocl is not None:
        cl, cl_array, ctx, queue = ocl
        kernel = cl.Program(ctx, _KERNEL).build().k
        dx, dm = cl_array.to_device(queue, hx), cl_array.to_device(queue, hm)
        do = cl_array.empty(queue, hx.size, np.float32)
        ns.update(kernel=kernel, queue=queue, n=(hx.size,),
                  args=(do.data, dx.data, dm.data, np.float32(2.0), np.int32(side)))
        cases["hand-written kernel"] = b.Case("kernel(queue, n, None, *args)\nqueue.finish()", ns)
    t = b.side_by_side(cases, settings)
    label = f"9-op chain with where, {side}x{side} float32"
    rows.append(b.Row("fusion", label, "ms", {k: None if v is None else v / 1e6
                                              for k, v in t.items()}))
    targets.append(b.Target(f"fusion {label}: fused / unfused", t["ga.fuse"]
                            / t["unfused namespace"], 0.35, None, "unfused namespace", ""))
    if "hand-written kernel" in t:
        targets.append(b.Target(f"fusion {label}: fused / hand-written kernel",
                                t["ga.fuse"] / t["hand-written kernel"], 1.25, None,
                                "hand-written kernel", "same expression, same device"))
    if dev.backend == "cpu":
        targets.append(b.Target(f"fusion {label}: fused / NumPy unfused",
                                t["ga.fuse"] / t["numpy"], 0.5, None, "numpy", ""))
        if "numexpr" in t:
            targets.append(b.Target(f"fusion {label}: fused / numexpr",
                                    t["ga.fuse"] / t["numexpr"], 1.0, None, "numexpr", ""))
    libs["progress"].step("fusion chain")

    deviation = ga.fuse(_deviation)
    deviation(x, m).free()
    ns.update(dev_f=deviation, alone=lambda x: ga.sum(x, axis=0))
    t = b.side_by_side({"ga.fuse sum((x - m) ** 2, axis=0)": b.Case(
        "dev_f(x, m).free()\nga.synchronize(dev)", ns),
        "ga.sum(x, axis=0)": b.Case("alone(x).free()\nga.synchronize(dev)", ns)}, settings)
    rows.append(b.Row("fusion", f"fused reduction, {side}x{side} float32", "ms",
                      {k: v / 1e6 for k, v in t.items()}))
    targets.append(b.Target("fusion sum((x - m) ** 2, axis=0) / sum(x, axis=0)",
                            t["ga.fuse sum((x - m) ** 2, axis=0)"] / t["ga.sum(x, axis=0)"],
                            1.3, None, "sum(x, axis=0)", ""))
    libs["progress"].step("fusion reduction")

    a = ga.asarray(rng.standard_normal(1000).astype(np.float32), device=dev)
    add = ga.fuse(lambda p, q: p + q)
    add(a, a)
    ns.update(a=a, add=add)
    t = b.side_by_side({"ga.fuse(a + b)": b.Case("add(a, a)", ns),
                        "a + b": b.Case("a + a", ns)}, settings)
    rows.append(b.Row("fusion", "call overhead, 1,000 float32", "us",
                      {k: v / 1e3 for k, v in t.items()}))
    targets.append(b.Target("fusion call overhead at 1,000 elements / unfused a + b",
                            t["ga.fuse(a + b)"] / t["a + b"], 2.0, None, "a + b", ""))
    libs["progress"].step("fusion overhead")

    if settings.name != "smoke":
        warm = warm_start(str(dev))
        rows.append(b.Row("fusion", "fresh process, kernel on disk: first call", "ms", warm))
        targets.append(b.Target("fusion warm start: first call beyond trace and steady call",
                                warm["beyond trace"], 20.0, None, "ms", "fresh process"))
    libs["progress"].step("fusion warm start")


_CHILD = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    import numpy as np
    import gpuarrays as ga
    from gpuarrays.cli.bench_fusion import chain
    dev = ga.get_device(sys.argv[1])
    x = ga.asarray(np.ones((64, 64), np.float32), device=dev)
    m = ga.asarray(np.ones(64, np.float32), device=dev)
    ga.synchronize(dev)
    f = ga.fuse(chain)
    t1 = time.perf_counter(); f(x, m, 2.0); ga.synchronize(dev); first = time.perf_counter() - t1
    t1 = time.perf_counter(); f(x, m, 2.0); ga.synchronize(dev); steady = time.perf_counter() - t1
    g = ga.fuse(chain)
    t1 = time.perf_counter(); g._trace((x, m, 2.0), dev); trace = time.perf_counter() - t1
    print(json.dumps({"first": first * 1e3, "steady": steady * 1e3, "trace": trace * 1e3}))
""")


def warm_start(device: str) -> dict:
    """First-call times (ms) of a fused function in two fresh processes sharing a new kernel
    cache folder: the first compiles (cold), the second finds the kernel on disk."""
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, GPUARRAYS_KERNEL_CACHE=folder)
        env.setdefault("POCL_CACHE_DIR", tempfile.mkdtemp())
        runs = []
        for _ in range(2):
            env["POCL_CACHE_DIR"] = tempfile.mkdtemp()  # PoCL's own cache starts empty
            out = subprocess.run([sys.executable, "-c", _CHILD, device], env=env, check=True,
                                 capture_output=True, text=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
    cold, warm = runs
    return {"cold first call": cold["first"], "warm first call": warm["first"],
            "trace": warm["trace"], "steady": warm["steady"],
            "beyond trace": warm["first"] - warm["trace"] - warm["steady"]}
