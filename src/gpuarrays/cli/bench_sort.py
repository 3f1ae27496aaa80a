"""The ``sort`` group of ``gpuarrays bench`` (docs/sorting.md, "Measurements").

``sort`` and ``argsort`` of 1 M and 16 M float32 (smoke: 4 096 and 16 384),
side by side with NumPy (``np.sort``/``np.argsort``, stable), PyTorch CPU
(``torch.sort(stable=True)``, which gives values and indices together) and, on
OpenCL devices, ``pyopencl.algorithm.RadixSort`` sorting the same float32 keys
(mapped to order-preserving uint32 in its key expression) with their indices;
on CUDA devices CuPy.  One call and a synchronize per repetition.  The target
(docs/design.md): on ``opencl`` at most RadixSort's time.
"""

from __future__ import annotations

import dataclasses

import numpy as np

import gpuarrays as ga

from . import bench as b

__all__ = ["bench_sort"]

# float32 bits -> uint32 that sorts as the floats (negatives inverted, positives sign-set)
_KEY = "(as_uint(ary[i]) ^ ((as_int(ary[i]) >> 31) | 0x80000000u))"


def _radix_sort(ocl):
    from pyopencl.algorithm import RadixSort

    _, _, ctx, _ = ocl
    return RadixSort(ctx, "float *ary, int *idx", key_expr=_KEY, sort_arg_names=["ary", "idx"],
                     bits_at_a_time=4, key_dtype=np.uint32)


def bench_sort(dev, settings, libs, rows, targets) -> None:
    """Measure the group on ``dev``; append ``bench.Row``/``bench.Target`` objects."""
    smoke = settings.name == "smoke"
    few = dataclasses.replace(settings, repeat=min(settings.repeat, 5 if smoke else 7),
                              target_ns=1)
    torch, ocl, cupy = libs["torch"], libs["pyopencl"], libs["cuda"]["cupy"]
    radix = _radix_sort(ocl) if ocl is not None and libs["mako"] else None  # Mako builds it
    rng = np.random.default_rng(0)
    for n in ((1 << 12, 1 << 14) if smoke else (1 << 20, 1 << 24)):
        h = rng.standard_normal(n).astype(np.float32)
        a = ga.asarray(h, device=dev)
        ns = {"ga": ga, "np": np, "dev": dev, "a": a, "h": h, "torch": torch}
        if torch is not None:
            ns["t"] = torch.from_numpy(h)
        if radix is not None:
            cl_array, queue = ocl[1], ocl[3]
            ns.update(radix=radix, queue=queue, c=cl_array.to_device(queue, h),
                      ci=cl_array.arange(queue, n, dtype=np.int32))
        if cupy is not None:
            with cupy.cuda.Device(dev.index):
                ns.update(cupy=cupy, idx=dev.index, x=cupy.asarray(h))
        label = f"{n >> 20} M" if n >= 1 << 20 else str(n)
        for op in ("sort", "argsort"):
            cases = {
                "gpuarrays": b.Case(f"ga.{op}(a).free()\ndev.synchronize()", ns),
                "numpy": b.Case(f"np.{op}(h, kind='stable')", ns),
                "torch": None if torch is None else b.Case("torch.sort(t, stable=True)", ns),
                "pyopencl RadixSort": None if radix is None else b.Case(
                    "radix(c, ci, key_bits=32, queue=queue)\nqueue.finish()", ns),
                "cupy": None if cupy is None else b.Case(
                    f"cupy.{op}(x)", ns, b._CUPY_SETUP, b._CUPY_TEARDOWN),
            }
            # pyopencl's RadixSort takes seconds per 1 M on PoCL here: few repetitions
            times = b.side_by_side(cases, few if n < 1 << 24 else dataclasses.replace(
                few, repeat=min(few.repeat, 3)))
            rows.append(b.Row("sort", f"{op} {label} float32", "ms",
                              {k: None if t is None else t / 1e6 for k, t in times.items()},
                              {"elements": n}))
            if radix is not None:
                targets.append(b.Target(f"sort: {op} {label} float32 vs pyopencl RadixSort",
                                        times["gpuarrays"] / times["pyopencl RadixSort"], 1.0,
                                        None, "pyopencl RadixSort", "at most its time"))
            libs["progress"].step(f"sort {op} {label}")
        a.free()
