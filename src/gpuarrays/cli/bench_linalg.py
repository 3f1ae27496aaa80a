"""The ``linalg`` group of ``gpuarrays bench`` (docs/linalg.md, "Speed").

``matmul`` of two N x N matrices, N = 256, 1024 and 2048, float32 and float64, side by side
with NumPy (OpenBLAS) and PyTorch CPU on the host; on a CUDA device CuPy (cuBLAS) too.  The
figure is GFLOP/s (2 N^3 operations per product), each call followed by a synchronize.  The
target (docs/design.md, "Performance"): 1024 x 1024 float32 on a device back-end at least
0.25x NumPy's GFLOP/s on the same cores.

Then the normal equations' products of the least-squares program (cli/bench_programs.py),
``x.T @ x`` and ``x.T @ y`` of a tall ``x`` (24000 x 256; quick 8000 x 128) and ``y`` of 8
columns, float32 and float64: a transposed view read in place, a symmetric result (NumPy's
OpenBLAS computes half of it, as gpuarrays' CPU OpenCL kernel does) and a result narrower
than a block of columns.  Their figure counts the whole product's 2 m n k operations.
"""

from __future__ import annotations

import dataclasses

import numpy as np

import gpuarrays as ga

from . import bench as b

__all__ = ["bench_linalg"]

SIZES = (256, 1024, 2048)
TALL = {"full": (24_000, 256), "quick": (8_000, 128), "smoke": (400, 16)}
"""``(m, n)`` of the tall ``x`` of the normal-equation products, by settings name."""


def bench_linalg(dev, settings, libs, rows, targets) -> None:
    """Measure the group on ``dev``; append ``bench.Row``/``bench.Target`` objects."""
    smoke = settings.name == "smoke"
    sizes = (64,) if smoke else SIZES
    # a 2048^2 float64 product takes most of a second on a CPU device: few repetitions
    few = dataclasses.replace(settings, repeat=min(settings.repeat, 2 if smoke else 5),
                              target_ns=min(settings.target_ns, 200_000_000))
    torch = libs["torch"]
    cupy = libs["cuda"]["cupy"]
    rng = np.random.default_rng(0)
    device_side = dev.backend != "cpu"
    for dtype in ("float32", "float64"):
        if not dev.supports(np.dtype(dtype)):
            continue
        for n in sizes:
            h1 = rng.standard_normal((n, n)).astype(dtype)
            h2 = rng.standard_normal((n, n)).astype(dtype)
            a1, a2 = ga.asarray(h1, device=dev), ga.asarray(h2, device=dev)
            ns = {"ga": ga, "np": np, "dev": dev, "a1": a1, "a2": a2, "h1": h1, "h2": h2}
            if torch is not None:
                ns["t1"], ns["t2"], ns["torch"] = torch.from_numpy(h1), torch.from_numpy(h2), torch
            if cupy is not None:
                with cupy.cuda.Device(dev.index):
                    ns["cupy"], ns["idx"] = cupy, dev.index
                    ns["x1"], ns["x2"] = cupy.asarray(h1), cupy.asarray(h2)
            cases = {
                "gpuarrays": b.Case("(a1 @ a2).free()\ndev.synchronize()", ns),
                "numpy": b.Case("h1 @ h2", ns),
                "torch": None if torch is None else b.Case("t1 @ t2", ns),
                "cupy": None if cupy is None else b.Case(
                    "x1 @ x2", ns, b._CUPY_SETUP, b._CUPY_TEARDOWN),
            }
            times = b.side_by_side(cases, few)
            flops = 2.0 * n ** 3
            label = f"matmul {n}x{n} {dtype}"
            rows.append(b.Row("linalg", label, "GFLOP/s",
                              {k: None if t is None else flops / t for k, t in times.items()},
                              {"n": n, "dtype": dtype}))
            if device_side and n == 1024 and dtype == "float32":
                targets.append(b.Target(
                    "linalg: matmul 1024x1024 float32", times["gpuarrays"] / times["numpy"],
                    4.0, None, "numpy", "at least 0.25x NumPy's GFLOP/s on the same cores"))
            a1.free()
            a2.free()
            libs["progress"].step(f"linalg {label}")
        _normal_equations(dev, dtype, TALL.get(settings.name, TALL["full"]), few, libs, rows)


def _normal_equations(dev, dtype: str, size: tuple[int, int], settings, libs, rows) -> None:
    """Rows for ``x.T @ x`` and ``x.T @ y`` (``y`` of 8 columns) of a tall ``x``."""
    m, n = size
    torch = libs["torch"]
    rng = np.random.default_rng(1)
    hx = rng.standard_normal((m, n)).astype(dtype)
    hy = rng.standard_normal((m, 8)).astype(dtype)
    x, y = ga.asarray(hx, device=dev), ga.asarray(hy, device=dev)
    ns = {"ga": ga, "dev": dev, "x": x, "y": y, "hx": hx, "hy": hy}
    if torch is not None:
        ns["tx"], ns["ty"] = torch.from_numpy(hx), torch.from_numpy(hy)
    for label, expr, cols in ((f"x.T @ x {m}x{n} {dtype}", "{x}.T @ {x}", n),
                              (f"x.T @ y {m}x{n} by 8 {dtype}", "{x}.T @ {y}", 8)):
        cases = {
            "gpuarrays": b.Case(f"({expr.format(x='x', y='y')}).free()\ndev.synchronize()", ns),
            "numpy": b.Case(expr.format(x="hx", y="hy"), ns),
            "torch": None if torch is None else b.Case(expr.format(x="tx", y="ty"), ns),
        }
        times = b.side_by_side(cases, settings)
        flops = 2.0 * m * n * cols
        rows.append(b.Row("linalg", label, "GFLOP/s",
                          {k: None if t is None else flops / t for k, t in times.items()},
                          {"m": m, "n": n, "columns": cols, "dtype": dtype}))
    x.free()
    y.free()
