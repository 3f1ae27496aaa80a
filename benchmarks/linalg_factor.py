"""The device factorisations beside NumPy: ``python benchmarks/linalg_factor.py [--device DEV]``.

Milliseconds per call (best of ``--repeat``, each call followed by a synchronize, results
freed) of ``det``, ``solve``, ``inv``, ``cholesky``, ``eigh``, ``eig``, ``svd`` and ``qr`` on a batch of
1000 matrices 8 x 8 and on one 200 x 200 matrix, float64, and NumPy's (LAPACK) on the same
data in the same process.  The kernels are serial per matrix (one work-item each,
docs/linalg.md, "Factorisations on device back-ends"): a batch spreads over the cores, one
large matrix runs on one.  A figure, not a target.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import numpy as np  # noqa: E402 -- after the path fix above

try:
    import gpuarrays as ga
except ImportError:  # a source checkout without an install: use src/
    sys.path.insert(0, os.path.join(_HERE, "..", "src"))
    import gpuarrays as ga
import gpuarrays.linalg as gl  # noqa: E402


def _best(fn, repeat: int) -> float:
    fn()  # compile, warm the pool
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out) * 1e3


def _free(r) -> None:
    for x in (r if isinstance(r, tuple) else (r,)):
        x.free()


def _cases(A, B, H, a, b, h) -> dict:
    """(gpuarrays call, NumPy call) by name: ``A``/``a`` general, ``H``/``h`` positive
    definite, ``B``/``b`` right-hand sides."""
    return {
        "det": (lambda: gl.det(A), lambda: np.linalg.det(a)),
        "solve": (lambda: gl.solve(A, B), lambda: np.linalg.solve(a, b)),
        "inv": (lambda: gl.inv(A), lambda: np.linalg.inv(a)),
        "cholesky": (lambda: gl.cholesky(H), lambda: np.linalg.cholesky(h)),
        "eigh": (lambda: gl.eigh(H), lambda: np.linalg.eigh(h)),
        "eig": (lambda: gl.eig(A), lambda: np.linalg.eig(a)),
        "svd": (lambda: gl.svd(A), lambda: np.linalg.svd(a)),
        "qr": (lambda: gl.qr(A), lambda: np.linalg.qr(a)),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/linalg_factor.py", description=__doc__)
    p.add_argument("--device", default="opencl:0")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    dev = ga.get_device(args.device)
    rng = np.random.default_rng(0)
    print(f"device {dev}; ms per call, best of {args.repeat}")
    print(f"{'case':<24}{'gpuarrays':>12}{'NumPy':>12}")
    for batch, n in (((1000,), 8), ((), 200)):
        a = rng.standard_normal((*batch, n, n)) / np.sqrt(n) + 2 * np.eye(n)
        h = a @ np.swapaxes(a, -1, -2)
        b = rng.standard_normal((*batch, n, 1))
        A, H, B = (ga.asarray(v, device=dev) for v in (a, h, b))
        cases = _cases(A, B, H, a, b, h)
        label = f"{batch[0]} x {n}x{n}" if batch else f"{n}x{n}"
        for name, (ours, theirs) in cases.items():
            def run(f=ours):
                r = f()
                dev.synchronize()
                _free(r)
            t1 = _best(run, args.repeat)
            t2 = _best(theirs, args.repeat)
            print(f"{name + ' ' + label:<24}{t1:>12.2f}{t2:>12.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
