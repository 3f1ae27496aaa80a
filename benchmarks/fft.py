"""The device FFT beside NumPy: ``python benchmarks/fft.py [--device opencl:0] [--quick]``.

For each (batch, length) and complex type: the device's ``fft`` (the result
synchronised, best of five) with the default passes (radix 8), with radix 4
only, and for lengths that are not powers of two with the direct DFT and with
Bluestein forced; NumPy's pocketfft on the host in the same process; the error
of each against a complex128 reference, relative to max|X|.  The figures in
docs/linalg.md ("How the device FFT works") come from this script.
"""

from __future__ import annotations

import argparse
import os
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
import gpuarrays.fft as gf  # noqa: E402
from gpuarrays._compute.device import fft as device_fft  # noqa: E402

CASES = [(1, 1 << 20), (256, 4096), (4096, 64), (16384, 7), (4096, 13), (4096, 20), (4096, 30), (2080, 63),
         (1310, 100), (64, 1000), (1, 65537)]
"""(batch, length): n^2 work for the direct DFT is only timed up to n = 1000."""
QUICK = [(1, 1 << 16), (4096, 64), (4096, 30), (1310, 100)]


def best(f, reps: int) -> float:
    f()
    out = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f()
        out = min(out, time.perf_counter() - t)
    return out * 1e3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="opencl:0")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    dev = ga.asarray([0], device=a.device).device
    dtypes = [np.complex64] + ([np.complex128] if dev.supports(np.dtype("float64")) else [])
    rng = np.random.default_rng(0)
    reps = 2 if a.quick else 5
    print(f"device {dev}; ms, best of {reps}; error relative to max|X| (complex128 reference)")
    for dt in dtypes:
        for rows, n in QUICK if a.quick else CASES:
            x = (rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n))).astype(dt)
            ref = np.fft.fft(x.astype(np.complex128))
            scale = np.abs(ref).max()
            X = ga.asarray(x, device=dev)

            def run(X=X) -> None:
                r = gf.fft(X)
                dev.synchronize()
                r.free()

            def err(X=X, ref=ref, scale=scale) -> float:
                r = gf.fft(X)
                e = np.abs(r.get() - ref).max() / scale
                r.free()
                return e
            cols = [f"default {best(run, reps):8.1f} ({err():.1e})"]
            knobs = ([("radix 4", device_fft.override_radix, 4)] if n & (n - 1) == 0 else
                     [("direct", device_fft.direct_max, 1 << 30)] * (n <= 1000)
                     + [("bluestein", device_fft.direct_max, 0)])
            for label, stack, value in knobs:
                stack.append(value)
                try:
                    cols.append(f"{label} {best(run, reps):8.1f} ({err():.1e})")
                finally:
                    stack.pop()
            t_np = best(lambda x=x: np.fft.fft(x), reps)
            e_np = np.abs(np.fft.fft(x) - ref).max() / scale
            print(f"{np.dtype(dt).name:10} {rows:6} x {n:<8} " + "  ".join(cols)
                  + f"  numpy {t_np:8.1f} ({e_np:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
