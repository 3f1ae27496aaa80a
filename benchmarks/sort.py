"""The sorting benchmark: ``python benchmarks/sort.py [--device DEVICE] [--json PATH] [--quick]``.

The same as ``gpuarrays bench --only sort``: sort and argsort of 1 M and 16 M float32 beside
NumPy, PyTorch CPU and pyopencl.algorithm.RadixSort (CuPy on CUDA); docs/sorting.md,
"Measurements".  ``--crossover`` instead times the device's two sort kernels against each
other (the per-row merge kernel and the radix passes, both forced) over rows x lengths: the
measurement behind ``ROWS_MAX``/``ROWS_TOTAL`` in ``_compute/device/sort.py``
(docs/sorting.md, "The decision").
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402 -- after the path fix above
import time  # noqa: E402

try:
    from gpuarrays.cli import bench
except ImportError:  # a source checkout without an install: use src/
    sys.path.insert(0, os.path.join(_HERE, "..", "src"))
    from gpuarrays.cli import bench


def crossover(device: str) -> None:
    import numpy as np

    import gpuarrays as ga
    from gpuarrays._compute.device import sort as device_sort

    dev = ga.get_device(device)

    def best(f, repeat=3) -> float:
        f().free()
        ga.synchronize(dev)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            y = f()
            ga.synchronize(dev)
            times.append(time.perf_counter() - t0)
            y.free()
        return min(times) * 1e3

    saved = device_sort.ROWS_MAX, device_sort.ROWS_TOTAL
    print(f"argsort of float32 on {dev}: merge (one work-item per row) vs radix, best of 3")
    try:
        for n in (64, 256, 1024, 4096, 16384, 65536):
            for total in (n, 1 << 20):
                h = np.random.default_rng(0).standard_normal(total).astype(np.float32)
                a = ga.asarray(h.reshape(-1, n), device=dev)
                device_sort.ROWS_MAX, device_sort.ROWS_TOTAL = 1 << 62, 0
                merge = best(lambda a=a: ga.argsort(a))
                device_sort.ROWS_MAX, device_sort.ROWS_TOTAL = 0, 0
                radix = best(lambda a=a: ga.argsort(a))
                print(f"  {total // n:6d} x {n:6d}   merge {merge:9.2f} ms   radix {radix:9.2f} ms")
                a.free()
    finally:
        device_sort.ROWS_MAX, device_sort.ROWS_TOTAL = saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/sort.py", description=__doc__)
    bench.add_arguments(parser)
    parser.add_argument("--crossover", action="store_true",
                        help="time the merge and radix kernels against each other instead")
    args = parser.parse_args(argv)
    if args.crossover:
        crossover(args.device or "opencl:0")
        return 0
    args.only = "sort"
    return bench.main(args)


if __name__ == "__main__":
    sys.exit(main())
