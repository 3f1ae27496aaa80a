"""Inputs, NumPy references and tolerances shared by the compute tests (docs/compute.md).

NumPy is the oracle: :func:`reference` computes on host copies what an
operation should give, :func:`inputs` makes operand values inside each
operation's domain where NumPy itself would raise (integer ``pow`` with a
negative exponent), and :func:`assert_close` compares: bit-exact for bool and
integer results, within :data:`ULP` units in the last place for floating
point (cpu: exact, it runs NumPy itself).
"""

from __future__ import annotations

import numpy as np
from numpy._core import umath

from gpuarrays._compute.table import OPS

ULP = {"cpu": 0, "opencl": 4, "cuda": 4}
"""Floating-point bound per back-end, in units of the result dtype's epsilon at the value
(OpenCL's built-ins are specified within 4 ULP for the functions used; complex results are
compared on their magnitude)."""

_SHIFTS = {"bitwise_left_shift", "bitwise_right_shift"}


def inputs(op_name: str, dtypes, shape, seed: int = 0) -> list[np.ndarray]:
    """Host operands of ``dtypes`` and ``shape``: small values, zeros included, each in the
    operation's domain where NumPy would otherwise raise."""
    rng = np.random.default_rng(seed)
    out = []
    for k, dt in enumerate(dtypes):
        dt = np.dtype(dt)
        if dt.kind == "b":
            v = rng.integers(0, 2, shape).astype(bool)
        elif dt.kind in "iu":
            lo, hi = (0, 4) if op_name == "pow" and k == 1 else (-20, 21)
            if op_name in _SHIFTS and k == 1:
                lo, hi = 0, dt.itemsize * 8
            if dt.kind == "u":
                lo = max(lo, 0)
            v = rng.integers(lo, hi, shape).astype(dt)
        elif dt.kind == "f":
            v = (rng.standard_normal(shape) * 2).astype(dt)
        else:
            v = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
        out.append(np.asarray(v))
    return out


def reference(op_name: str, *xs, out_dtype=None):
    """What NumPy gives for ``op_name`` on host operands (warnings silenced)."""
    op = OPS[op_name]
    with np.errstate(all="ignore"):
        if op.typing == "where":
            r = np.where(*xs)
        elif op.typing == "first":
            r = umath.clip(xs[0], xs[1], xs[2], dtype=np.asarray(xs[0]).dtype, casting="unsafe")
        elif op.typing == "part":
            r = np.real(xs[0]) if op_name == "real" else np.imag(xs[0])
            r = np.array(r, copy=True)
        elif op.typing == "round" and np.asarray(xs[0]).dtype.kind in "biu":
            r = np.array(xs[0], copy=True)
        else:
            r = op.ufunc(*xs)
    r = np.asarray(r)
    return r if out_dtype is None else r.astype(out_dtype)


def assert_close(got: np.ndarray, want: np.ndarray, backend: str, what: str = "") -> None:
    """Equal dtype and shape; exact for bool/int, NaN where NumPy has NaN, infinities equal,
    finite floats within ``ULP[backend]`` (scaled by the magnitude)."""
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if want.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    ulp = ULP[backend]
    if ulp == 0:
        assert np.array_equal(got, want, equal_nan=True), (what, got, want)
        return
    parts = [(got.real, want.real)] + ([(got.imag, want.imag)] if want.dtype.kind == "c" else [])
    for g, w in parts:
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{what}: NaN")
        finite = np.isfinite(w)
        np.testing.assert_array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)],
                                      err_msg=f"{what}: infinities")
    eps = np.finfo(want.dtype).eps
    wide = np.complex128 if want.dtype.kind == "c" else np.float64
    with np.errstate(all="ignore"):
        scale = np.maximum(np.abs(want), np.finfo(want.dtype).tiny)
        diff = np.abs(got.astype(wide) - want.astype(wide))
    finite = np.isfinite(want)
    bad = finite & ~(diff <= ulp * eps * scale)
    assert not bad.any(), (what, got[bad][:5], want[bad][:5])
