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
            r = standard(op_name, r, *xs)
    r = np.asarray(r)
    return r if out_dtype is None else r.astype(out_dtype)


# Where the standard's special cases differ from NumPy's, the standard is the oracle
# (docs/conformance.md): written here from its text, element by element.
def _std_floor_divide(r, a, b):
    if r.dtype.kind != "f":
        return r
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    one_inf = np.isinf(a) != np.isinf(b)
    r = np.array(r, copy=True)
    r[one_inf] = (a[one_inf] / b[one_inf]).astype(r.dtype)  # signed infinity or zero
    return r


def _std_complex(fn):
    def fix(r, x):
        if r.dtype.kind != "c":
            return r
        r = np.array(r, copy=True)
        flat = r.reshape(-1)
        for i, z in enumerate(np.asarray(x).reshape(-1)):
            got = fn(complex(z))
            if got is not None:
                flat[i] = got
        return r
    return fix


def _std_expm1(z: complex):
    a, b = z.real, z.imag
    if a == 0 and b == 0:
        return complex(0.0, b)
    if np.isposinf(a):
        if b == 0:
            return complex(a, b)
        return complex(a, np.nan) if not np.isfinite(b) else None
    if np.isneginf(a):
        return complex(-1.0, np.copysign(0.0, np.sin(b)) if np.isfinite(b) else 0.0)
    if np.isnan(a):
        return complex(np.nan, b if b == 0 else np.nan)
    return None


def _std_tanh(z: complex):
    if np.isinf(z.real):
        return complex(np.copysign(1.0, z.real), np.copysign(0.0, z.imag))
    return None


def _std_sign(z: complex):
    return complex(np.nan, np.nan) if np.isnan(z.real) or np.isnan(z.imag) else None


_STANDARD = {"floor_divide": _std_floor_divide, "expm1": _std_complex(_std_expm1),
             "tanh": _std_complex(_std_tanh), "sign": _std_complex(_std_sign)}


def standard(op_name: str, r, *xs) -> np.ndarray:
    """NumPy's result ``r`` of ``op_name`` on ``xs``, with the standard's special values
    where they differ from NumPy's."""
    fix = _STANDARD.get(op_name)
    return np.asarray(r) if fix is None else fix(np.asarray(r), *xs)


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


def close_within_cuda_bounds(got, want, what, name, *hosts, backend: str = "cuda") -> bool:
    """On cuda, logaddexp/logaddexp2 and non-integer complex powers against CUDA's documented
    bounds (docs/kernels.md, "Accuracy on CUDA"): 4 eps of the larger summand max(|want|,
    |want - max(x, y)|) for logaddexp*, and 4 eps of |want| times (1 + |w log z|) for
    z ** w = exp(w log z), whose exponent carries CUDA's log/exp/sin/cos error of a few
    ulp.  False where this does not apply (the caller's assert_close does)."""
    want = np.asarray(want)
    if name in ("logaddexp", "logaddexp2") and want.dtype.kind == "f":
        x, y = (np.asarray(h, np.float64) for h in hosts)
        with np.errstate(all="ignore"):
            w = want.astype(np.float64)
            scale = np.maximum(abs(w), abs(w - np.maximum(x, y)))
    elif name in ("power", "float_power") and want.dtype.kind == "c" and backend == "cuda":
        z, e = (np.asarray(h).astype(np.complex128) for h in hosts)
        with np.errstate(all="ignore"):
            scale = abs(want.astype(np.complex128)) * (1 + abs(e * np.log(z)))
    else:
        return False
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN")
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)],
                                  err_msg=f"{what}: infinities")
    eps = np.finfo(want.dtype).eps
    with np.errstate(all="ignore"):
        diff = abs(got.astype(np.complex128) - want.astype(np.complex128))
    bad = finite & ~(diff <= 4 * eps * np.where(np.isfinite(scale), scale, np.inf))
    assert not bad.any(), (what, got[bad][:5], want[bad][:5])
    return True


def assert_close_for(got, want, backend: str, what: str, name: str, *hosts) -> None:
    """``assert_close``, but ``close_within_cuda_bounds`` where it applies: logaddexp* on every device
    (PoCL's float64 log1p/exp2 are not glibc's either), complex powers on cuda."""
    if backend != "cpu" and close_within_cuda_bounds(got, want, what, name, *hosts, backend=backend):
        return
    assert_close(got, want, backend, what)
