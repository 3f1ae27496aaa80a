"""Generated elementwise kernels (docs/kernels.md): the launcher on opencl:0 against NumPy,
the special cases C leaves undefined, layouts, index widths, the kernel caches, every
kernel through NVRTC for sm_80 and sm_90, and CUDA's disk cache."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from compute_cases import standard

import gpuarrays as ga
from gpuarrays._common.errors import GPUArraysWarning
from gpuarrays._compute.device import diskcache, expressions, generator, launcher
from gpuarrays.backends import cuda
from gpuarrays.backends._kernels import launch_shape
from gpuarrays.backends.base import KernelBackend, RawView

KEYS = {"bool": ["b1"], "signed integer": ["i1", "i2", "i4", "i8"],
        "unsigned integer": ["u1", "u2", "u4", "u8"], "real floating": ["f2", "f4", "f8"],
        "complex floating": ["c8", "c16"]}
DT = {k: np.dtype(generator._DTYPE_OF[k]) for keys in KEYS.values() for k in keys}


KERNEL_DEVICES = [str(d) for d in ga.devices() if d.backend in ("opencl", "cuda") and d.index == 0]


@pytest.fixture(scope="module", params=KERNEL_DEVICES or ["opencl:0"])
def kdev(request):
    """opencl:0, and cuda:0 where a GPU is present (benchmarks/gpu_check.sh runs ``-k cuda``)."""
    try:
        return ga.get_device(request.param)
    except ValueError as e:
        pytest.skip(f"no {request.param} device here: {e}")


@pytest.fixture(scope="module")
def ocl():
    try:
        return ga.get_device("opencl:0")
    except ValueError as e:
        pytest.skip(f"no OpenCL device here: {e}")


def _to(dev, a: np.ndarray):
    return ga.asarray(np.array(a, order="C"), device=dev)


def launch(dev, op, out_dtype, *operands, arg_dtypes=None, out_shape=None):
    """Run ``op`` through the launcher: ``operands`` are ga arrays (their views) or 0-d NumPy."""
    views = [x._raw() if isinstance(x, ga.GPUArray) else x for x in operands]
    shape = out_shape if out_shape is not None else next(
        v.shape for v in views if isinstance(v, RawView))
    out = ga.empty(shape, dtype=out_dtype, device=dev)
    if arg_dtypes is None:
        arg_dtypes = [v.dtype for v in views]
    launcher.elementwise(dev, op, out._raw(), views, [np.dtype(d) for d in arg_dtypes])
    return out.get()


# The oracle ----------------------------------------------------------------------------
_UFUNC = {"abs": np.absolute, "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin,
          "asinh": np.arcsinh, "atan": np.arctan, "atan2": np.arctan2, "atanh": np.arctanh,
          "bitwise_left_shift": np.left_shift, "bitwise_right_shift": np.right_shift,
          "bitwise_invert": np.invert, "conj": np.conjugate, "divide": np.true_divide,
          "pow": np.power, "round": np.rint, "pow_rsqrt": np.power, "pow_int": np.power}


def oracle(op: str, *xs: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if op == "where":
            return np.where(xs[0], xs[1], xs[2])
        if op == "real":
            return np.real(xs[0]).copy()
        if op == "imag":
            return np.imag(xs[0]).copy()
        if op == "clip":
            return np.clip(*xs)
        if op in ("round", "ceil", "floor", "trunc") and xs[0].dtype.kind in "iu":
            return xs[0].copy()  # integers stay themselves (the standard; NumPy gives floats)
        if op == "pow_sqrt":  # x ** 0.5: sqrt, with pow's +0 at -0 and +inf at -inf
            r = np.sqrt(xs[0])
            if r.dtype.kind == "f":
                r[xs[0] == 0] = 0.0
                r[np.isneginf(xs[0])] = np.inf
            return r
        if op == "float_power":  # computed in the operands' type (float64 unless the
            return np.power(*xs)  # device lacks it: then float32, which this checks)
        fn = _UFUNC.get(op) or getattr(np, op)
        return standard(op, fn(*xs), *xs)  # the standard where NumPy differs


def same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise identical: bit for bit (so -0.0 differs from 0.0), NaNs equal."""
    if a.dtype != b.dtype:
        return np.zeros(a.shape, bool)
    if a.dtype.kind in "fc":
        comp = np.dtype(f"f{a.dtype.itemsize // 2}") if a.dtype.kind == "c" else a.dtype
        x, y = a.reshape(-1).view(comp), b.reshape(-1).view(comp)
        bits = np.dtype(f"u{comp.itemsize}")
        eq = (x.view(bits) == y.view(bits)) | (np.isnan(x) & np.isnan(y))
        return (eq.reshape(-1, 2).all(1) if a.dtype.kind == "c" else eq).reshape(a.shape)
    return a == b


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in units in the last place of ``want``'s type (0 for equal values and NaNs)."""
    got, want = got.astype(want.dtype), want
    with np.errstate(all="ignore"):
        return _ulps(got, want)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    finite = np.isfinite(want) & np.isfinite(got)
    d = np.where(finite, np.abs(got.astype(np.float64) - want.astype(np.float64)), 0.0)
    spacing = np.spacing(np.abs(want).astype(want.dtype)).astype(np.float64)
    out = np.where(finite, d / np.where(spacing > 0, spacing, 1), 0.0)
    mismatch = ~finite & ~(same(got, want) | (got == want))
    return np.where(mismatch, np.inf, out)


# Transcendental functions: within this many ulps of NumPy (docs/kernels.md, "Accuracy").
_ULPS = {"f4": 4, "f8": 4}
_EXACT = {"add", "subtract", "multiply", "divide", "sqrt", "negative", "positive", "square",
          "reciprocal", "abs", "sign", "round", "ceil", "floor", "trunc", "copysign",
          "nextafter", "maximum", "minimum", "clip", "floor_divide", "remainder", "real",
          "imag", "conj", "where", "signbit", "isnan", "isinf", "isfinite", "hypot",
          "pow_sqrt"}

# CUDA's math library is not glibc: the CUDA C Programming Guide ("Mathematical Functions")
# documents maximum errors (hypotf 3 ulp, hypot 2; expf 2, logf/log1pf 1; exp, log1p 1), where
# PoCL's built-ins give glibc's (NumPy's) bits.  On cuda these results are held to that bound
# plus one ulp for NumPy's own rounding (docs/kernels.md, "Accuracy on CUDA"); logaddexp and
# logaddexp2 (max(x, y) + a log1p term) in ulps of the larger of the two summands, whose
# rounding cancellation can magnify in the result.
_CUDA_ULPS = {("hypot", "f4"): 4, ("hypot", "f8"): 3, ("logaddexp", "f4"): 4,
              ("logaddexp", "f8"): 3, ("logaddexp2", "f4"): 4, ("logaddexp2", "f8"): 3}
_SUMMANDS = ("logaddexp", "logaddexp2")


def cuda_ulps(op: str, got: np.ndarray, want: np.ndarray, x: np.ndarray,
              y: np.ndarray) -> np.ndarray:
    """``ulps`` (0 for equal values and NaNs, inf for a non-finite mismatch); for
    logaddexp/logaddexp2 in units of the larger summand, max(|want|, |want - max(x, y)|)."""
    u = ulps(got, want)
    if op not in _SUMMANDS:
        return u
    with np.errstate(all="ignore"):
        big = np.maximum(x, y).astype(np.float64)
        ref = np.maximum(abs(want.astype(np.float64)), abs(want.astype(np.float64) - big))
        ref = np.where(np.isfinite(ref), ref, 0).astype(want.dtype)
        spacing = np.spacing(ref).astype(np.float64)
        scaled = abs(got.astype(np.float64) - want.astype(np.float64)) / spacing
    return np.where(np.isfinite(u), np.fmin(u, scaled), u)


_SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0,
            1e-30, -1e-30, 1e30, 0.75, 2.0, -3.0, 7.0]


def sample(key: str, n: int = 64, seed: int = 0) -> np.ndarray:
    """Values of one dtype: special values first, then random ones."""
    rng = np.random.default_rng(seed)
    dt = DT[key]
    with np.errstate(all="ignore"):
        if dt.kind == "b":
            return rng.integers(0, 2, n).astype(bool)
        if dt.kind in "iu":
            info = np.iinfo(dt)
            edge = np.array([info.min, info.max, 0, 1, 2, 3, 7, -1 % (info.max + 1) if dt.kind == "u"
                             else -1, -7, info.min + 1], dtype=np.float64)
            edge = np.clip(edge, info.min, info.max).astype(dt)
            return np.concatenate([edge, rng.integers(info.min, info.max, n - edge.size,
                                                      dtype=dt, endpoint=True)])
        special = np.array(_SPECIAL, dtype=np.float64)
        rnd = rng.standard_normal(n) * 3
        if dt.kind == "c":
            re = np.concatenate([special, rnd[: n - special.size]])
            im = np.concatenate([special[::-1], rng.standard_normal(n - special.size) * 3])
            return (re + 1j * im).astype(dt)
        return np.concatenate([special, rnd[: n - special.size]]).astype(dt)


def _check(op: str, key: str, got: np.ndarray, want: np.ndarray, xs,
           backend: str = "opencl") -> None:
    if backend == "cuda" and (op, key) in _CUDA_ULPS:
        u = cuda_ulps(op, got, want, *xs)
        limit = _CUDA_ULPS[op, key]
        assert (u <= limit).all(), (op, key, [x[u > limit] for x in xs], got[u > limit],
                                    want[u > limit], u[u > limit])
        return
    if want.dtype.kind not in "fc" or op in _EXACT and key[0] != "c":
        bad = ~same(got, want)
        if op in ("sign", "round", "ceil", "floor", "trunc") or want.dtype.kind not in "fc":
            bad = ~(same(got, want) | (got == want))  # -0.0 vs 0.0 aside where NumPy is vague
        assert not bad.any(), (op, key, [x[bad] for x in xs], got[bad], want[bad])
        return
    if key[0] == "c":
        finite = np.all([np.isfinite(x) & (abs(x) < 1e10) & (abs(x) > 1e-10) for x in xs
                         if x.dtype.kind == "c"], axis=0) & np.isfinite(want)
        tol = 2e-5 if key == "c8" else 1e-12
        scale = np.maximum(abs(want[finite]), 1e-3)
        err = abs(got[finite] - want[finite]) / scale
        assert (err <= tol).all(), (op, key, [x[finite][err > tol] for x in xs],
                                    got[finite][err > tol], want[finite][err > tol])
        return
    u = ulps(got, want)
    limit = _ULPS.get(key, 1)
    assert (u <= limit).all(), (op, key, [x[u > limit] for x in xs], got[u > limit],
                                want[u > limit])


def _representative(cls: str) -> list[str]:
    return {"bool": ["b1"], "signed integer": ["i4", "i1"], "unsigned integer": ["u2"],
            "real floating": ["f4", "f8"], "complex floating": ["c8", "c16"]}[cls]


_CASES = [(op, key) for op, by_class in expressions.EXPRESSIONS.items() for cls in by_class
          for key in _representative(cls)]


@pytest.mark.parametrize(("op", "key"), _CASES, ids=[f"{o}-{k}" for o, k in _CASES])
def test_every_operation_matches_numpy_on_opencl(kdev, op, key):
    nin = expressions.NIN[op]
    xs = [sample(key, seed=s) for s in range(nin)]
    if op == "where":
        xs[0] = sample("b1")
    if op in ("bitwise_left_shift", "bitwise_right_shift"):
        xs[1] = (np.arange(64) % (DT[key].itemsize * 8 + 3) - 2).astype(DT[key])
    if op == "pow" and key[0] in "iu":
        xs[1] = (np.arange(64) % 9).astype(DT[key])
    if op == "ldexp":  # an integer exponent (NumPy's loops)
        xs[1] = (np.arange(64) % 40 - 20).astype(np.int32)
    if op == "pow_int":  # table.SMALL_POWERS, as the dispatch passes them
        xs[1] = (np.arange(64) % 10 - 3).astype(DT[key])
    if op == "pow_rsqrt":
        xs[1] = np.full(64, -0.5, DT[key])
    if op == "clip":
        xs[1], xs[2] = np.minimum(xs[1], xs[2]), np.maximum(xs[1], xs[2])
    want = oracle(op, *xs)
    got = launch(kdev, op, want.dtype, *[_to(kdev, x) for x in xs])
    _check(op, key, got, want, xs, kdev.backend)


def test_expressions_cover_every_operation_of_the_table():
    from gpuarrays._compute import table
    assert set(expressions.EXPRESSIONS) == set(table.OPS) | set(table.POWERS)
    for name, row in {**table.OPS, **table.POWERS}.items():
        assert expressions.NIN[name] == row.nin, name


# Special cases C leaves undefined, checked exactly -------------------------------------------
@pytest.mark.parametrize("key", ["i1", "i2", "i4", "i8", "u1", "u8"])
def test_integer_division_by_zero_and_min_by_minus_one_are_numpys(kdev, key):
    dt = DT[key]
    info = np.iinfo(dt)
    x = np.array([info.min, info.min, 7, -7 if dt.kind == "i" else 7, 0, info.max, 5, -5
                  if dt.kind == "i" else 5], dt)
    y = np.array([-1 if dt.kind == "i" else 1, 0, 0, 2, 0, -1 if dt.kind == "i" else 3, -3
                  if dt.kind == "i" else 3, 3], dt)
    for op in ("floor_divide", "remainder"):
        got = launch(kdev, op, dt, _to(kdev, x), _to(kdev, y))
        np.testing.assert_array_equal(got, oracle(op, x, y), err_msg=op)


@pytest.mark.parametrize("key", ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"])
def test_integer_overflow_wraps_and_abs_of_min_is_min(kdev, key):
    dt = DT[key]
    info = np.iinfo(dt)
    x = np.array([info.max, info.min, info.max, info.min], dt)
    y = np.array([1, -1 if dt.kind == "i" else 1, info.max, info.min], dt)
    for op in ("add", "subtract", "multiply"):
        np.testing.assert_array_equal(launch(kdev, op, dt, _to(kdev, x), _to(kdev, y)),
                                      oracle(op, x, y), err_msg=op)
    for op in ("negative", "abs", "square"):
        np.testing.assert_array_equal(launch(kdev, op, dt, _to(kdev, x)), oracle(op, x), err_msg=op)


@pytest.mark.parametrize("key", ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"])
def test_shifts_by_the_width_or_more_or_negative_counts_are_numpys(kdev, key):
    dt = DT[key]
    bits = dt.itemsize * 8
    counts = [0, 1, bits - 1, bits, bits + 1, 2 * bits, 127 if bits > 8 else 100]
    if dt.kind == "i":
        counts += [-1, -bits]
    x = np.array([1, -1 if dt.kind == "i" else np.iinfo(dt).max, 5, -5 if dt.kind == "i" else 9]
                 * len(counts), dt)
    y = np.repeat(np.array(counts), 4).astype(dt)
    for op in ("bitwise_left_shift", "bitwise_right_shift"):
        np.testing.assert_array_equal(launch(kdev, op, dt, _to(kdev, x), _to(kdev, y)),
                                      oracle(op, x, y), err_msg=op)


@pytest.mark.parametrize("key", ["f4", "f8"])
def test_nan_inf_and_signed_zeros_through_extrema_sign_round_copysign_nextafter(kdev, key):
    dt = DT[key]
    v = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5,
                  -3.5, 4.5], dt)
    x, y = np.repeat(v, v.size), np.tile(v, v.size)
    for op in ("maximum", "minimum", "copysign", "nextafter", "floor_divide", "remainder",
               "logaddexp", "hypot", "atan2"):
        got, want = launch(kdev, op, dt, _to(kdev, x), _to(kdev, y)), oracle(op, x, y)
        bad = ~same(got, want)
        if op in ("logaddexp", "hypot", "atan2"):  # exact at the special values, else 2 ulp
            # (a zero is special for hypot and atan2; logaddexp(0, y) is log1p(exp(y)),
            # rounded as the library rounds, and logaddexp(a, a) is a + log(2) exactly)
            zero = (x == y) if op == "logaddexp" else (x == 0) | (y == 0)
            u, limit = ulps(got, want), 2
            if kdev.backend == "cuda" and (op, key) in _CUDA_ULPS:
                u, limit = cuda_ulps(op, got, want, x, y), _CUDA_ULPS[op, key]
            bad &= ~np.isfinite(x) | ~np.isfinite(y) | zero | (u > limit)
        assert not bad.any(), (op, x[bad], y[bad], got[bad], want[bad])
    for op in ("sign", "round", "signbit", "isnan", "isinf", "isfinite", "abs", "negative"):
        want = oracle(op, v)
        got = launch(kdev, op, want.dtype, _to(kdev, v))
        ok = same(got, want) if op != "sign" else (same(got, want) | (got == want))
        assert ok.all(), (op, v[~ok], got[~ok], want[~ok])


def _half_view(dev, values: np.ndarray):
    """A float16 view over uint16 device memory (PoCL refuses float16 arrays, not kernels)."""
    arr = _to(dev, values.astype(np.float16).view(np.uint16))
    r = arr._raw()
    return arr, RawView(r.ptr, r.shape, r.strides, np.dtype(np.float16))


def test_float16_is_computed_in_float32_and_stepped_in_its_own_spacing(kdev):
    v = np.array([0.0, -0.0, 1.0, -1.0, 65504, 6e-8, np.inf, np.nan, 0.1, 2.5], np.float16)
    w = np.array([1.0, -1.0, 2.0, -2.0, np.inf, 0.0, 0.0, 1.0, 0.2, 2.5], np.float16)
    keep = []
    for op in ("add", "multiply", "nextafter", "exp", "sqrt", "maximum"):
        xs = [v, w] if expressions.NIN[op] == 2 else [v]
        views = []
        for x in xs:
            arr, view = _half_view(kdev, x)
            keep.append(arr)
            views.append(view)
        out_arr, out = _half_view(kdev, np.zeros(v.size, np.float16))
        launcher.elementwise(kdev, op, out, views, [np.dtype(np.float16)] * len(xs))
        got = out_arr.get().view(np.float16)
        want = oracle(op, *xs)
        assert same(got, want).all(), (op, got, want)


# Conversions on load and store, scalars ------------------------------------------------------
def test_operands_are_converted_to_the_compute_dtype_and_the_result_to_the_output(kdev):
    i8 = np.array([-3, 0, 5, 127], np.int8)
    f = np.array([0.25, -1.5, 2.0, 1e3], np.float64)
    got = launch(kdev, "add", np.float32, _to(kdev, i8), _to(kdev, f), arg_dtypes=["f8", "f8"])
    np.testing.assert_array_equal(got, (i8.astype(np.float64) + f).astype(np.float32))
    c = np.array([1 + 2j, -3j, 0, 2], np.complex64)
    got = launch(kdev, "multiply", np.complex128, _to(kdev, c), _to(kdev, i8),
                 arg_dtypes=["c16", "c16"])
    np.testing.assert_array_equal(got, c.astype(np.complex128) * i8)
    got = launch(kdev, "abs", np.float32, _to(kdev, c), arg_dtypes=["c8"])
    np.testing.assert_allclose(got, np.abs(c), rtol=1e-6)
    got = launch(kdev, "greater", np.bool_, _to(kdev, f), _to(kdev, i8), arg_dtypes=["f8", "f8"])
    np.testing.assert_array_equal(got, f > i8)


def test_scalars_travel_by_value_without_allocating(kdev):
    x = np.array([1.0, -2.0, np.nan, 4.0], np.float32)
    a = _to(kdev, x)
    out = ga.empty(4, dtype=np.float32, device=kdev)
    launch(kdev, "multiply", np.float32, a, np.array(2.5, np.float32))  # compile first
    with ga.record_allocations() as rec:
        launcher.elementwise(kdev, "multiply", out._raw(), [a._raw(), np.array(-0.5, np.float32)],
                             [np.dtype(np.float32)] * 2)
    assert rec.count == 0
    np.testing.assert_array_equal(out.get(), x * np.float32(-0.5))
    c = _to(kdev, np.array([1 + 1j, 2, -1j, 0], np.complex128))
    got = launch(kdev, "add", np.complex128, c, np.array(0.5 - 2j))
    np.testing.assert_array_equal(got, c.get() + (0.5 - 2j))
    cond = _to(kdev, np.array([True, False, True, False]))
    got = launch(kdev, "where", np.float32, cond, a, np.array(0, np.float32))
    np.testing.assert_array_equal(got, np.where(cond.get(), x, np.float32(0)))
    # a changed scalar is passed again (the kernel remembers only addresses and integers)
    for s in (0.0, -0.0, np.nan, 3.0):
        got = launch(kdev, "copysign", np.float32, a, np.array(s, np.float32))
        assert same(got, np.copysign(x, np.float32(s))).all(), s


# Layouts -------------------------------------------------------------------------------------------
def test_strided_negative_offset_and_transposed_views(kdev):
    base = np.arange(4 * 6 * 5, dtype=np.float64).reshape(4, 6, 5) - 50
    a = _to(kdev, base)
    b = _to(kdev, base * 0.5 + 1)
    cases = [
        (a[::-1, 1::2, ::-2], b[:, :3, 1:4]),
        (a.transpose(2, 0, 1)[1:], b.transpose(2, 1, 0)[1:].transpose(0, 2, 1)),
        (a[2], b[2, ::-1]),
        (a[1:3, 2:4, 0:1], b[::-1, ::-1, ::-1][1:3, 2:4, 0:1]),
    ]
    for x, y in cases:
        want = x.get() * y.get()
        got = launch(kdev, "multiply", np.float64, x, y)
        np.testing.assert_array_equal(got, want)


def test_broadcast_zero_strides_and_dimension_collapse(kdev):
    m = _to(kdev, np.arange(12, dtype=np.int32).reshape(3, 4))
    row = _to(kdev, np.array([10, 20, 30, 40], np.int32))
    r = row._raw()
    bcast = RawView(r.ptr, (3, 4), (0, 4), r.dtype)
    out = ga.empty((3, 4), dtype=np.int32, device=kdev)
    launcher.elementwise(kdev, "add", out._raw(), [m._raw(), bcast], [np.dtype(np.int32)] * 2)
    np.testing.assert_array_equal(out.get(), m.get() + row.get())
    sig = launcher.describe("add", out._raw(), [m._raw(), bcast], [np.dtype(np.int32)] * 2)
    assert sig.ndim == 2 and sig.out_contiguous and not sig.operands[1].contiguous
    # contiguous 3-d operands collapse to the flat path
    c = _to(kdev, np.ones((2, 3, 4), np.float32))
    o = ga.empty((2, 3, 4), dtype=np.float32, device=kdev)
    sig = launcher.describe("add", o._raw(), [c._raw(), c._raw()], [np.dtype("f4")] * 2)
    assert sig.ndim == 1 and all(op.contiguous for op in sig.operands) and sig.out_contiguous
    # a 0-d view
    s = _to(kdev, np.array(3.0, np.float32))
    assert launch(kdev, "sqrt", np.float32, s).shape == ()


def test_in_place_output_equal_to_an_input(kdev):
    x = np.arange(10, dtype=np.float32)
    a = _to(kdev, x)
    launcher.elementwise(kdev, "add", a._raw(), [a._raw(), np.array(1, np.float32)],
                         [np.dtype("f4")] * 2)
    np.testing.assert_array_equal(a.get(), x + 1)


def test_more_dimensions_than_a_kernel_takes_loop_on_the_host(kdev):
    nd = launcher.KERNEL_DIMS + 2
    x = np.arange(2**nd, dtype=np.int16).reshape((2,) * nd)
    a = _to(kdev, x)
    t = a.transpose(*reversed(range(nd)))  # no two axes merge
    got = launch(kdev, "multiply", np.int16, t, _to(kdev, np.ascontiguousarray(x.T)))
    np.testing.assert_array_equal(got, x.T * x.T)


def test_unaligned_views_load_and_store_bytewise(kdev):
    raw = _to(kdev, np.zeros(4 * 9, np.uint8))
    x = np.array([1.5, -2.0, 3.25, 1e20, -0.0, np.inf, 7.0, 8.0], np.float32)
    r = raw._raw()
    view = RawView(r.ptr + 1, (8,), (4,), np.dtype(np.float32))
    ga.asarray(x, device=kdev)  # same values uploaded through a staging array
    staged = np.zeros(36, np.uint8)
    staged[1:33] = x.view(np.uint8)
    raw2 = _to(kdev, staged)
    r2 = raw2._raw()
    src = RawView(r2.ptr + 1, (8,), (4,), np.dtype(np.float32))
    launcher.elementwise(kdev, "negative", view, [src], [np.dtype("f4")])
    got = raw.get()[1:33].view(np.float32)
    assert same(got, -x).all()
    assert not launcher.describe("negative", view, [src], [np.dtype("f4")]).out_aligned


def test_sixty_four_bit_index_path_gives_the_same_values(kdev, monkeypatch):
    x = np.arange(-50, 50, dtype=np.int64).reshape(10, 10)
    a = _to(kdev, x)
    ops = [("multiply", a.T, a[::-1]), ("floor_divide", a, a.T), ("add", a[::2], a[1::2])]
    want = [launch(kdev, op, np.int64, p, q) for op, p, q in ops]
    monkeypatch.setattr(launcher, "INDEX32_LIMIT", 0)
    launcher.clear()
    try:
        for (op, p, q), w in zip(ops, want, strict=True):
            out = ga.empty(p.shape, dtype=np.int64, device=kdev)
            assert launcher.describe(op, out._raw(), [p._raw(), q._raw()],
                                     [np.dtype("i8")] * 2).index64
            np.testing.assert_array_equal(launch(kdev, op, np.int64, p, q), w)
            np.testing.assert_array_equal(w, oracle(op, p.get(), q.get()))
    finally:
        launcher.clear()


def test_empty_output_launches_nothing(kdev):
    a = _to(kdev, np.zeros((0, 3), np.float32))
    assert launch(kdev, "exp", np.float32, a).shape == (0, 3)


def test_a_second_call_of_a_signature_compiles_nothing(kdev):
    impl = kdev.impl
    assert isinstance(impl, KernelBackend)
    x = _to(kdev, np.arange(40, dtype=np.float32))
    launch(kdev, "hypot", np.float32, x, x)
    builds = impl.builds
    launch(kdev, "hypot", np.float32, x, x)
    launch(kdev, "hypot", np.float32, x[:7], x[3:10])  # another size, the same signature
    assert impl.builds == builds
    launcher.clear()  # plans and handles gone: the back-end still has the program
    launch(kdev, "hypot", np.float32, x[1:8], x[20:27])
    assert impl.builds == builds
    launch(kdev, "hypot", np.float32, x[::-1][:5], x[:5])  # a negative stride: a new signature
    assert impl.builds == builds + 1
    launch(kdev, "hypot", np.float32, x[::-1][:9], x[10:19])
    assert impl.builds == builds + 1


def test_bad_requests_raise_value_error_before_compiling(kdev):
    x = _to(kdev, np.arange(4, dtype=np.float32))
    builds = kdev.impl.builds
    with pytest.raises(ValueError, match="no elementwise kernel for 'frobnicate'"):
        launch(kdev, "frobnicate", np.float32, x)
    with pytest.raises(ValueError, match="takes 2 operand"):
        launch(kdev, "add", np.float32, x)
    with pytest.raises(ValueError, match="has no device expression for float32"):
        launch(kdev, "bitwise_and", np.float32, x, x)
    launch(kdev, "add", np.float32, x, x)  # a cached plan for the same output must not hide it
    builds = kdev.impl.builds
    with pytest.raises(ValueError, match="does not have the output's shape"):
        launch(kdev, "add", np.float32, x, _to(kdev, np.ones(3, np.float32)), out_shape=(4,))
    assert kdev.impl.builds == builds


def test_a_kernel_survives_a_device_reset(kdev):
    x = np.arange(5, dtype=np.float32)
    launch(kdev, "exp", np.float32, _to(kdev, x))
    ga.device_reset(kdev)
    got = launch(kdev, "exp", np.float32, _to(kdev, x))
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-6)


_ONES = {
    "opencl": "__kernel void ones(__global float *x) { x[get_global_id(0)] = 1.0f; }",
    "cuda": 'extern "C" __global__ void ones(float *x) '
            "{ x[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }",
}


def test_a_work_group_above_the_kernels_limit_is_refused(kdev):
    """A kernel written for groups of L items must never run in smaller groups: launching
    above ``max_local`` raises and runs nothing (it used to be lowered silently)."""
    kernel = kdev.impl.compile_kernel(kdev.index, _ONES[kdev.backend], "ones", ["ptr"])
    most = kernel.max_local
    assert most >= 1
    x = ga.zeros(2 * most, dtype=np.float32, device=kdev)
    with pytest.raises(ValueError, match=f"at most {most} for this kernel"):
        kernel.launch([x._raw().ptr], 2 * most, 2 * most)
    assert not x.get().any()
    kernel.launch([x._raw().ptr], 2 * most, most)
    assert x.get().all()


def test_free_launch_shapes_fit_the_kernel():
    assert launch_shape("gpu", 1000) == (1024, 256)
    assert launch_shape("cpu", 1000, 100) == (1024, 64)
    assert launch_shape("gpu", 5, 1) == (5, 1)


@pytest.mark.parametrize("n", [255, 256, 257, 512, 3 * 256])
def test_whole_work_groups_run_without_the_bounds_check(kdev, n):
    """A launch whose work-groups cover exactly the elements runs the kernel without the
    bounds check (PoCL vectorises it 20-25 % faster); every other size keeps the check."""
    x = np.linspace(-3, 3, n, dtype=np.float32)
    got = launch(kdev, "exp", np.float32, _to(kdev, x))
    np.testing.assert_allclose(got, np.exp(x), rtol=2e-6)
    (plan,) = [p for key, p in launcher._plans.items()
               if key[2] == "exp" and key[4] == (n,) and key[0] is kdev.impl]
    assert plan.kernel._name.endswith("_x") == (n % plan.lsize == 0)


def test_the_unchecked_kernel_differs_only_by_its_bounds_check():
    sig = generator.Signature("exp", "f4", (generator.Operand("f4", "f4"),))
    exact = generator.Signature("exp", "f4", (generator.Operand("f4", "f4"),), exact=True)
    checked, unchecked = (generator.source(cuda.DIALECT, [s]) for s in (sig, exact))
    assert "if (i >= n) return;" in checked and "if (i >= n) return;" not in unchecked
    assert generator.kernel_name(exact) == generator.kernel_name(sig) + "_x"


# CUDA: every kernel through NVRTC, and the disk cache --------------------------------------
def _signatures(op: str, every_dtype: bool = True) -> list[generator.Signature]:
    """Every compute dtype the operation has an expression for, both index widths, the flat
    path and a strided, unaligned 3-d layout with a scalar operand (launched by rows with
    32-bit indices, an operand's last stride its item size)."""
    nin = expressions.NIN[op]
    sigs = []
    for cls, expr in expressions.EXPRESSIONS[op].items():
        for key in KEYS[cls] if every_dtype else dict.fromkeys(KEYS[cls][::len(KEYS[cls]) - 1
                                                                          or 1]):
            keys = ["b1", key, key] if op == "where" else [key] * nin
            out = expressions.result_key(expr, key)
            for index64 in (False, True):
                sigs.append(generator.Signature(
                    op, out, tuple(generator.Operand(k, k) for k in keys), 1, index64))
                if not index64:  # whole blocks: no bounds check
                    sigs.append(generator.Signature(
                        op, out, tuple(generator.Operand(k, k) for k in keys), 1, exact=True))
                strided = [generator.Operand(k, k, False, False) for k in keys[:-1]]
                sigs.append(generator.Signature(
                    op, out, (*strided, generator.Operand(None, keys[-1])), 3, index64,
                    False, False, rows=not index64, unit_rows=(1,) if nin > 1 else ()))
    return sigs


@pytest.mark.parametrize("arch", [80, 90])
def test_every_kernel_compiles_with_nvrtc(nvrtc, arch):
    """Every signature for sm_90 (the GPU these kernels are measured on); for sm_80 the
    narrowest and widest dtype of each class (float16 and float64 among them: what could
    differ between architectures is in the helpers of those, not in the dtypes between)."""
    for op in expressions.EXPRESSIONS:
        text = generator.source(cuda.DIALECT, _signatures(op, every_dtype=arch == 90))
        image, kind = cuda.compile_image(text, arch)
        assert kind == "cubin" and image, op


def test_mixed_conversions_compile_with_nvrtc(nvrtc):
    keys = [k for ks in KEYS.values() for k in ks]
    sigs = [generator.Signature("add" if c != "b1" else "logical_and", c if c != "b1" else "b1",
                                (generator.Operand(s, c), generator.Operand(c, c)))
            for s in keys for c in keys if expressions.dtype_class(DT[c]) != "bool" or True]
    sigs = [s for s in sigs if expressions.dtype_class(DT[s.operands[1].compute])
            in expressions.EXPRESSIONS[s.op]]
    stores = [generator.Signature("add", o, (generator.Operand("f8", "f8"),) * 2) for o in keys]
    stores += [generator.Signature("add", o, (generator.Operand("c16", "c16"),) * 2) for o in keys]
    cuda.compile_image(generator.source(cuda.DIALECT, sigs + stores), 90)


def test_every_kernel_builds_on_opencl(ocl):
    """Every signature of the NVRTC sweep also builds as OpenCL C (one program per operation;
    float16 included: it is loaded and stored with vload_half/vstore_half, computed in float)."""
    impl = ocl.impl
    for op in expressions.EXPRESSIONS:
        sigs = _signatures(op)
        text = generator.source(impl.dialect, sigs)
        impl.compile_kernel(ocl.index, text, generator.kernel_name(sigs[0]),
                            [p.type for p in generator.params(sigs[0])])


@pytest.fixture
def fresh_images(monkeypatch):
    """NVRTC's in-process image cache emptied for the test, restored after."""
    monkeypatch.setattr(cuda, "_images", {})


_SOURCE = generator.source(cuda.DIALECT, [generator.Signature(
    "logaddexp", "f8", (generator.Operand("f8", "f8"), generator.Operand("f4", "f8")))])


def test_the_disk_cache_serves_a_second_compile(nvrtc, tmp_path, fresh_images):
    cache = diskcache.DiskCache(tmp_path)
    runs = cuda.nvrtc_compiles
    first = cuda.compile_image(_SOURCE, 90, cache)
    assert cuda.nvrtc_compiles == runs + 1 and cache.writes == 1 and cache.misses == 1
    cuda._images.clear()  # a new process: only the disk remembers
    second = cuda.compile_image(_SOURCE, 90, cache)
    assert second == first and cuda.nvrtc_compiles == runs + 1 and cache.hits == 1
    names = [p.name for p in tmp_path.iterdir()]
    assert names == [cache.path(_entry_key(_SOURCE, 90)).name]


def test_a_damaged_entry_is_compiled_again_and_replaced(nvrtc, tmp_path, fresh_images):
    cache = diskcache.DiskCache(tmp_path)
    image, _ = cuda.compile_image(_SOURCE, 80, cache)
    (entry,) = list(tmp_path.iterdir())
    data = bytearray(entry.read_bytes())
    data[-10] ^= 0xFF
    entry.write_bytes(bytes(data))
    cuda._images.clear()
    runs = cuda.nvrtc_compiles
    again, _ = cuda.compile_image(_SOURCE, 80, cache)
    assert again == image and cuda.nvrtc_compiles == runs + 1 and cache.hits == 0
    cuda._images.clear()
    assert cuda.compile_image(_SOURCE, 80, cache)[0] == image and cache.hits == 1
    entry.write_bytes(b"garbage")  # not even a header
    assert cache.load(_entry_key(_SOURCE, 80)) is None


def _entry_key(source, arch):
    """The key compile_image uses (so the test can ask the cache directly)."""
    opts = [f"--gpu-architecture=sm_{arch}".encode(), *(o.encode() for o in cuda.COMPILE_OPTIONS)]
    version = "{}.{}".format(*cuda.nvrtc_version())
    return b"\0".join([b"nvrtc", version.encode(), b"cubin", *opts, source.encode()])


def test_entries_are_written_atomically_and_keyed_by_source_options_and_arch(tmp_path):
    cache = diskcache.DiskCache(tmp_path / "k")
    cache.save(b"key", b"image bytes")
    assert cache.load(b"key") == b"image bytes"
    assert cache.load(b"key2") is None
    names = sorted(p.name for p in (tmp_path / "k").iterdir())
    assert names == [cache.path(b"key").name] and not any(n.startswith(".tmp") for n in names)
    cache.save(b"key", b"other")  # replaced whole
    assert cache.load(b"key") == b"other"
    assert cache.path(b"a") != cache.path(b"b")


def test_the_folder_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUARRAYS_KERNEL_CACHE", str(tmp_path / "explicit"))
    assert diskcache.location() == tmp_path / "explicit"
    monkeypatch.delenv("GPUARRAYS_KERNEL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert diskcache.location() == tmp_path / "xdg" / "gpuarrays" / "kernels"
    assert diskcache.default() is diskcache.default()


def test_an_unwritable_folder_warns_once_and_keeps_working(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    cache = diskcache.DiskCache(blocker / "sub")  # a folder below a file cannot exist
    with pytest.warns(GPUArraysWarning, match="cannot be written"):
        cache.save(b"k", b"v")
    cache.save(b"k", b"v")  # no second warning (filterwarnings = error would raise)
    assert cache.load(b"k") is None and os.path.isfile(blocker)
