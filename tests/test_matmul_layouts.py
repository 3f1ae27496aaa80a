"""The vector matmul kernel's layouts on CPU OpenCL devices (``_compute/device/matmul.py``),
NumPy as the oracle, on every device: results narrower than a block of columns (the layout
is chosen by N), K over several chunks, and symmetric products (``x.mT @ x``, ``x @ x.mT``:
the blocks below the diagonal are left out and mirrored), with odd sizes, transposed,
strided, reversed and batched operands, float32 and float64.  A few shapes per layout: a
PoCL compile costs about a second."""

from __future__ import annotations

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._compute.device import matmul

DTYPES = ["float32", "float64"]


def values(shape, dtype, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def check(got, want: np.ndarray, k: int) -> np.ndarray:
    g = got.get()
    assert g.shape == want.shape and g.dtype == want.dtype, (g.shape, g.dtype, want.shape)
    eps = np.finfo(want.dtype).eps
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(g, want, rtol=8 * eps * k, atol=8 * eps * k * scale)
    return g


def skip_without(device, dtype) -> None:
    if not device.supports(np.dtype(dtype)):
        pytest.skip(f"{device} has no {dtype}")


def vector_device(device) -> bool:
    """Whether ``device``'s real products take the vector kernel (CPU OpenCL devices)."""
    return device.backend == "opencl" and device.impl.launch_hint(device.index) == "cpu"


@pytest.mark.parametrize("dtype", DTYPES)
def test_narrow_results_match_numpy(device, dtype):
    """N below, at and across every layout's block of columns (16, 8, 4), M not a
    multiple of the rows per group; the tail columns take the scalar loop."""
    skip_without(device, dtype)
    a = values((37, 45), dtype, 1)
    A = ga.asarray(a, device=device)
    for n in (1, 3, 4, 5, 8, 9, 15, 16, 17, 31, 33, 63, 65):
        b = values((45, n), dtype, n)
        check(A @ ga.asarray(b, device=device), a @ b, 45)


@pytest.mark.parametrize("dtype", DTYPES)
def test_narrow_results_of_transposed_and_strided_operands(device, dtype):
    """``A.T @ b`` and ``A @ x`` of the least-squares program, K over several chunks of a
    narrow panel (2048 rows of 8 float32 columns, 1024 of 8 float64), strided and reversed
    views of both operands (a B whose rows are not contiguous is copied first)."""
    skip_without(device, dtype)
    m, n = 4500, 21
    a, b, x = values((m, n), dtype, 1), values((m, 8), dtype, 2), values((n, 8), dtype, 3)
    A, B, X = (ga.asarray(v, device=device) for v in (a, b, x))
    check(A.T @ B, a.T @ b, m)
    check(A @ X, a @ x, n)
    check(A[::3].T @ B[::3, ::-1], a[::3].T @ b[::3, ::-1], m)
    check(A[:, ::2] @ X[::2, 1:6], a[:, ::2] @ x[::2, 1:6], n)
    check(A[5:70, 2:19] @ B[3:20, ::2].mT.mT, a[5:70, 2:19] @ b[3:20, ::2], 17)
    wide = values((8, 9), dtype, 4)
    check(A[:40, :8] @ ga.asarray(wide, device=device).mT.mT, a[:40, :8] @ wide, 8)


@pytest.mark.parametrize("dtype", DTYPES)
def test_symmetric_products_match_numpy(device, dtype, monkeypatch):
    """``x.mT @ x`` and ``x @ x.mT``: odd sizes (a scalar column tail), K over several
    chunks, strided, reversed and offset views, a batch; on the vector kernel the result
    is exactly symmetric (the mirror copies computed values).  Small products mirror too
    here (the least work for it lowered to none)."""
    skip_without(device, dtype)
    monkeypatch.setattr(matmul, "SYMMETRIC_MIN", 0)
    x = values((600, 70), dtype, 1)
    X = ga.asarray(x, device=device)
    cases = [(X.T @ X, x.T @ x, 600), (X[:50] @ X[:50].T, x[:50] @ x[:50].T, 70),
             (X[::2, 1:].mT @ X[::2, 1:], x[::2, 1:].T @ x[::2, 1:], 300),
             (X[::-1, 3:40].T @ X[::-1, 3:40], x[::-1, 3:40].T @ x[::-1, 3:40], 600),
             (X[7:16, :5].T @ X[7:16, :5], x[7:16, :5].T @ x[7:16, :5], 9)]
    s = values((3, 45, 70), dtype, 2)
    S = ga.asarray(s, device=device)
    cases += [(S.mT @ S, np.swapaxes(s, -1, -2) @ s, 45),
              (S[:, :, ::3] @ S[:, :, ::3].mT, s[:, :, ::3] @ np.swapaxes(s[:, :, ::3], -1, -2),
               24)]
    for got, want, k in cases:
        g = check(got, want, k)
        if vector_device(device):
            np.testing.assert_array_equal(g, np.swapaxes(g, -1, -2))


@pytest.mark.parametrize("dtype", DTYPES)
def test_products_of_one_buffer_that_are_not_symmetric(device, dtype, monkeypatch):
    """Operands of the same memory that are not each other's transpose: no mirror."""
    skip_without(device, dtype)
    monkeypatch.setattr(matmul, "SYMMETRIC_MIN", 0)
    x = values((80, 70), dtype, 3)
    X = ga.asarray(x, device=device)
    check(X[:, :60].T @ X[:, 1:61], x[:, :60].T @ x[:, 1:61], 80)   # shifted by a column
    check(X[:70].T @ X[:70], x[:70].T @ x[:70], 70)                  # the same: symmetric
    check(X[:70, :70] @ X[:70, :70], x[:70, :70] @ x[:70, :70], 70)  # square, not transposed
    check(X[::-1, :60].T @ X[:, :60], x[::-1, :60].T @ x[:, :60], 80)  # reversed rows
    s = values((2, 40, 30), dtype, 4)
    S = ga.asarray(s, device=device)
    check(S[:1].mT @ S[1:], np.swapaxes(s[:1], -1, -2) @ s[1:], 40)  # other matrices


def test_symmetric_products_take_the_mirror(device, monkeypatch):
    """On the vector kernel, ``x.mT @ x`` runs the mirror kernel; ``x.mT @ y`` does not, nor
    a symmetric product below ``SYMMETRIC_MIN`` or within one block of columns."""
    if not vector_device(device):
        pytest.skip("the vector kernel runs on CPU OpenCL devices")
    monkeypatch.setattr(matmul, "_kernels", {})

    def mirrored() -> bool:
        return any(isinstance(spec, matmul.Mirror) for _, spec in matmul._kernels)
    x, y = values((1200, 70), "float32", 1), values((1200, 70), "float32", 2)
    X, Y = ga.asarray(x, device=device), ga.asarray(y, device=device)
    check(X.T @ Y, x.T @ y, 1200)
    check(X[:800].T @ X[:800], x[:800].T @ x[:800], 800)  # 3.9M multiply-adds
    check(X[:, :8].T @ X[:, :8], x[:, :8].T @ x[:, :8], 1200)  # one block of 8 columns
    assert not mirrored()
    g = check(X.T @ X, x.T @ x, 1200)  # 5.9M
    assert mirrored()
    np.testing.assert_array_equal(g, g.T)


@pytest.mark.parametrize(("off", "key", "n", "want"), [
    ((), "f4", 256, (4, 6, 1, 16)), ((), "f4", 16, (4, 6, 1, 16)),
    ((), "f4", 15, (4, 16, 1, 8)), ((), "f4", 3, (4, 16, 1, 8)),
    (("matmul_vector_f4x16",), "f4", 256, (4, 6, 2, 8)),
    (("matmul_vector_f4x16",), "f4", 12, (4, 16, 1, 8)),
    (("matmul_vector_f4x8",), "f4", 12, (4, 6, 1, 16)),
    (("matmul_vector_f4x16", "matmul_vector_f4x8"), "f4", 256, None),
    ((), "f8", 256, (4, 8, 1, 8)), ((), "f8", 8, (4, 8, 1, 8)), ((), "f8", 7, (4, 16, 1, 4)),
    (("matmul_vector_f8x8",), "f8", 256, (4, 6, 2, 4)),
    (("matmul_vector_f8x8",), "f8", 2, (4, 16, 1, 4)),
    ((), "c8", 256, None)])
def test_the_layout_follows_n_and_the_qualified_widths(monkeypatch, off, key, n, want):
    """The first qualified layout whose block of columns fits in N, else the narrowest
    qualified one, else none (the generic kernel)."""
    monkeypatch.setattr(matmul.qualify, "allows", lambda dev, shape: shape not in off)
    assert matmul._vector_layout(None, "cpu", key, n) == want
