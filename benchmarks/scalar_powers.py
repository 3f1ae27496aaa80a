"""Scalar exponents beside NumPy: ``python benchmarks/scalar_powers.py [--device D ...] [--n N]``.

Times ``x ** s`` for the exponents ``2``, ``0.5``, ``-1``, ``3`` and ``-0.5`` on ``N``
float32 elements (default 2 M) on each device beside NumPy's own ``x ** s`` on a host copy
(the median of 5 rounds, each the best of 3 calls), and the time per call of ``x ** 2``,
``x * x``, ``x ** 0.5``, ``x ** -1`` and ``x ** 3`` on 1 000 float32 elements.  Device work
is waited for (``ga.synchronize``) inside the timed region, and every case runs once before
it is timed (kernel compiles, the pool warm).  Figures: docs/performance.md, "Scalar
exponents".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

import numpy as np  # noqa: E402

try:
    import gpuarrays as ga
except ImportError:  # a source checkout without an install: use src/
    sys.path.insert(0, os.path.join(_HERE, "..", "src"))
    import gpuarrays as ga

EXPONENTS = (2, 0.5, -1, 3, -0.5)


def _best(fn, calls: int) -> float:
    best = float("inf")
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _median(fn, rounds: int = 5, calls: int = 3) -> float:
    return statistics.median(_best(fn, calls) for _ in range(rounds))


def _per_call(fn, dev, n_calls: int = 500, rounds: int = 11) -> float:
    """µs per call of ``fn``: ``n_calls`` calls then one synchronize, best of 3, median of
    ``rounds``."""
    def loop():
        for _ in range(n_calls):
            fn()
        ga.synchronize(dev)
    return statistics.median(_best(loop, 3) for _ in range(rounds)) / n_calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/scalar_powers.py", description=__doc__)
    parser.add_argument("--device", action="append", help="a device (repeatable); default "
                        "cpu:0 and opencl:0 where there is one")
    parser.add_argument("--n", type=int, default=2_000_000, help="elements (default 2 M)")
    args = parser.parse_args(argv)
    names = args.device or [str(d) for d in ga.devices() if str(d) in ("cpu:0", "opencl:0")]
    rng = np.random.default_rng(0)
    host = (rng.random(args.n, dtype=np.float32) * 4 + 0.25).astype(np.float32)
    small = host[:1000].copy()
    with np.errstate(all="ignore"):
        ref = {s: _median(lambda s=s: host ** s) for s in EXPONENTS}
    print(f"{args.n} float32, ms (median of 5); ratio = gpuarrays / NumPy")
    print(f"{'device':<10} " + " ".join(f"{'x ** ' + str(s):>18}" for s in EXPONENTS))
    print(f"{'NumPy':<10} " + " ".join(f"{ref[s] * 1e3:>18.3f}" for s in EXPONENTS))
    for name in names:
        dev = ga.get_device(name)
        x = ga.asarray(host, device=dev)
        cells = []
        for s in EXPONENTS:
            def run(s=s):
                r = x ** s
                ga.synchronize(dev)
                return r
            run()  # compile, warm the pool
            t = _median(run)
            cells.append(f"{t * 1e3:8.3f} ({t / ref[s]:5.2f}x)")
        print(f"{name:<10} " + " ".join(f"{c:>18}" for c in cells))
    print("\n1 000 float32, us per call (500 calls then one synchronize, best of 3, median "
          "of 11)")
    small_cases = (("x ** 2", lambda v: v ** 2), ("x * x", lambda v: v * v),
                   ("x ** 0.5", lambda v: v ** 0.5), ("x ** -1", lambda v: v ** -1),
                   ("x ** 3", lambda v: v ** 3))
    print(f"{'device':<10} " + " ".join(f"{name:>10}" for name, _ in small_cases))
    with np.errstate(all="ignore"):
        cpu = ga.get_device("cpu:0")
        print(f"{'NumPy':<10} " + " ".join(
            f"{_per_call(lambda f=f: f(small), cpu):>10.2f}" for _, f in small_cases))
    for name in names:
        dev = ga.get_device(name)
        xs = ga.asarray(small, device=dev)
        cells = []
        for _, f in small_cases:
            f(xs)  # compile, make the layout's launch
            ga.synchronize(dev)
            cells.append(f"{_per_call(lambda f=f: f(xs), dev):>10.2f}")
        print(f"{name:<10} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
