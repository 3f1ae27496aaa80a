"""float16 on every device (docs/compute.md): stored as 16 bits, computed in float32 by every
kernel family, rounded to float16 once at the store, NumPy as the oracle.

OpenCL devices without ``cl_khr_fp16`` (both PoCLs) hold and compute float16 like any other
device: kernels load it with ``vload_half`` and store it with ``vstore_half_rte``.  Where
NumPy's float16 loop computes in float32 and rounds once (arithmetic, ``sqrt``, rounding,
comparisons, conversions), the results are compared bit for bit; the transcendental
functions within 1 ulp of float16 (the device's float32 ``sin`` is not NumPy's).  Sums,
means and products accumulate in float32 (NumPy's contiguous pairwise sum does, its
reductions over an outer axis and its cumulative sums round every step to float16): they
are compared with the exact result rounded to float16.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuarrays as ga
import gpuarrays.fft as gfft
import gpuarrays.linalg as glinalg
from strategies import supported

F16 = np.dtype(np.float16)
ALL_BITS = np.arange(65536, dtype=np.uint16).view(np.float16)  # every float16, NaNs included
FINITE = ALL_BITS[np.isfinite(ALL_BITS)]


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _ordered(x: np.ndarray) -> np.ndarray:
    """float16 bits as integers that order like the values (distance = ulps)."""
    i = np.atleast_1d(np.asarray(x, F16)).view(np.int16).astype(np.int64)
    return np.where(i < 0, -32768 - i, i)


def ulps(got, expected) -> np.ndarray:
    """Per element, how many float16 steps apart (0 where both are NaN)."""
    got, expected = np.asarray(got), np.asarray(expected)
    d = np.abs(_ordered(got) - _ordered(expected))
    d[np.atleast_1d(np.isnan(got) & np.isnan(expected))] = 0
    return d


def same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    got, expected = np.atleast_1d(got), np.atleast_1d(expected)
    bad = np.nonzero(got.view(np.uint16) != expected.view(np.uint16))
    assert not bad[0].size, (got[bad][:5], expected[bad][:5])


def same_bits_but_nan(got: np.ndarray, expected: np.ndarray) -> None:
    """NaN where ``expected`` is NaN (any payload), the same bits elsewhere."""
    got, expected = np.atleast_1d(np.asarray(got)), np.atleast_1d(np.asarray(expected))
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan), (got, expected)
    same_bits(got[~nan], expected[~nan])


def same_values(got: np.ndarray, expected: np.ndarray) -> None:
    """Bit for bit, except that a NaN the operation makes may have any sign and payload
    (the C library's, not NumPy's)."""
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), nan)
    same_bits(got[~nan], expected[~nan])


def near(got: np.ndarray, exact: np.ndarray, ulp: int = 1, numpy=None) -> None:
    """``got`` (float16) within ``ulp`` float16 steps of ``exact`` (float64) rounded, or
    NumPy's own float16 result ``numpy`` (which rounds every step of an outer-axis sum)."""
    got, exact = np.asarray(got), np.asarray(exact)
    assert got.dtype == F16, got.dtype
    assert got.shape == exact.shape
    with np.errstate(over="ignore"):
        d = ulps(got, exact.astype(F16))
    if numpy is not None:
        d[np.atleast_1d(ulps(got, numpy) == 0)] = 0
    assert d.max(initial=0) <= ulp, (d.max(), got.ravel()[d.argmax()], exact.ravel()[d.argmax()])


def put(h: np.ndarray, device) -> ga.GPUArray:
    return ga.asarray(h, device=device)


# holding float16 -------------------------------------------------------------------------
def test_every_device_holds_and_computes_float16(device):
    assert device.supports(np.float16) and device.supports("f2") and device.info.float16
    assert ga.check_dtype("float16", device) == F16
    assert F16 in supported(device)
    a = ga.empty((2, 3), dtype=np.float16, device=device)
    assert a.dtype == F16 and a.nbytes == 12
    if device.backend == "opencl":  # native half arithmetic is a separate fact
        cl_dev = device.impl._devices[device.index]
        native = "cl_khr_fp16" in cl_dev.extensions.split() or bool(cl_dev.half_fp_config)
        assert device.impl.half_arithmetic(device.index) is native


def test_transfers_keep_every_bit(device):
    a = put(ALL_BITS, device)
    same_bits(a.get(), ALL_BITS)
    same_bits(a[::-3].get(), ALL_BITS[::-3])
    same_bits(ga.asarray(a[1::2], copy=True).get(), ALL_BITS[1::2])
    same_bits(a.to_device("cpu:0").get(), ALL_BITS)


# creation -------------------------------------------------------------------------------
def test_creation(device):
    kw = dict(dtype="float16", device=device)
    same_bits(ga.zeros((2, 3), **kw).get(), np.zeros((2, 3), F16))
    same_bits(ga.ones(4, **kw).get(), np.ones(4, F16))
    same_bits(ga.full(5, 0.1, **kw).get(), np.full(5, 0.1, F16))  # 0.1 rounded once
    with pytest.warns(RuntimeWarning, match="overflow"):  # as NumPy's np.full
        same_bits(ga.full((2, 2), 70000.0, **kw).get(), np.full((2, 2), np.inf, F16))
    same_bits(ga.arange(-3, 3, 0.37, **kw).get(), np.arange(-3, 3, 0.37, dtype=F16))
    same_bits(ga.linspace(-3, 7, 21, **kw).get(), np.linspace(-3, 7, 21, dtype=F16))
    same_bits(ga.eye(4, 5, k=1, **kw).get(), np.eye(4, 5, k=1, dtype=F16))
    h = ALL_BITS[:12].reshape(3, 4)
    a = put(h, device)
    same_bits(ga.zeros_like(a).get(), np.zeros_like(h))
    same_bits(ga.full_like(a, 2.5).get(), np.full_like(h, 2.5))
    m = FINITE[:20].reshape(4, 5)
    same_bits(ga.tril(put(m, device)).get(), np.tril(m))
    same_bits(ga.zeros((0, 3), **kw).get(), np.zeros((0, 3), F16))


# elementwise ----------------------------------------------------------------------------
# NumPy computes these float16 loops in float32 and rounds once: bit for bit
# (a sample of each kind: every kernel costs a PoCL build; /tmp checks ran all of them)
EXACT_UNARY = ["negative", "sqrt", "reciprocal", "floor", "rint", "log1p", "isnan"]
EXACT_BINARY = ["add", "multiply", "divide", "remainder", "maximum", "power"]
# transcendental: the device's float32 libm, within 1 ulp of float16
NEAR_UNARY = ["exp", "sin", "arcsinh"]

_GA_NAME = {"rint": "round", "arctan": "atan", "arcsinh": "asinh", "power": "pow"}


def _both_routes(name: str, *args):
    """``np.<ufunc>(garrays)`` (``__array_ufunc__``) and ``ga.<name>(garrays)``."""
    via_numpy = getattr(np, name)(*args)
    via_ga = getattr(ga, _GA_NAME.get(name, name))(*args)
    assert type(via_numpy) is ga.GPUArray and type(via_ga) is ga.GPUArray
    return via_numpy.get(), via_ga.get()


@pytest.mark.parametrize("name", EXACT_UNARY + NEAR_UNARY)
def test_unary_on_every_float16(device, name):
    a = put(ALL_BITS, device)
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(ALL_BITS)
        got_np, got_ga = _both_routes(name, a)
    for got in (got_np, got_ga):
        if expected.dtype != F16:
            np.testing.assert_array_equal(got, expected, strict=True)
        elif name in NEAR_UNARY:
            near(got, expected.astype(np.float64))
            assert ulps(got, expected).max() <= 1
        else:
            same_values(got, expected)


@pytest.mark.parametrize("name", EXACT_BINARY)
def test_binary_on_float16_pairs(device, name):
    rng = _rng(1)
    x = rng.permutation(ALL_BITS)
    y = rng.permutation(ALL_BITS)
    if name == "power":  # NaN bits of pow differ by C library; keep to real results
        x, y = np.abs(FINITE[::7]), rng.choice(FINITE[np.abs(FINITE) < 8], FINITE[::7].size)
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(x, y)
        got_np, got_ga = _both_routes(name, put(x, device), put(y, device))
    for got in (got_np, got_ga):
        if expected.dtype != F16:
            np.testing.assert_array_equal(got, expected, strict=True)
        elif name == "power":
            assert ulps(got, expected).max() <= 1
        else:
            same_values(got, expected)


def test_python_scalars_round_to_float16_once(device):
    """Regression: a Python float operand reached the kernel as float, not rounded to float16
    as NumPy converts it (a * 1.7 was an ulp off NumPy's)."""
    h = (_rng(2).standard_normal(4000) * 40).astype(F16)
    a = put(h, device)
    for got, expected in [(a * 1.7, h * 1.7), (0.1 + a, 0.1 + h), (a % 0.3, h % 0.3),
                          (a / 3, h / 3), (2.2 - a, 2.2 - h), (a ** 2, h ** 2),
                          (ga.where(a > 0, a, 0.1), np.where(h > 0, h, np.float16(0.1)))]:
        same_bits(got.get(), expected)
    t = put(np.float16([0.1, 0.0999, 0.1001]), device)
    np.testing.assert_array_equal((t > 0.1).get(), np.float16([0.1, 0.0999, 0.1001]) > 0.1)
    np.testing.assert_array_equal((t == 0.1).get(), [True, False, False])


def test_mixed_dtypes_follow_numpy(device):
    h = FINITE[::97]
    a = put(h, device)
    i8 = put(np.arange(h.size, dtype=np.int8), device)
    f32 = put(np.linspace(-1, 1, h.size, dtype=np.float32), device)
    for got, expected in [(a + i8, h + np.arange(h.size, dtype=np.int8)),
                          (a * f32, h * np.linspace(-1, 1, h.size, dtype=np.float32)),
                          (a + True, h + True)]:
        r = got.get()
        assert r.dtype == expected.dtype
        np.testing.assert_array_equal(r, expected)


def test_noncontiguous_and_zero_size(device):
    h = FINITE[: 48 * 30].reshape(48, 30)
    a = put(h, device)
    for view, hv in [(a.T, h.T), (a[::3, 1::2], h[::3, 1::2]), (a[::-1, 5], h[::-1, 5])]:
        same_bits((view * 1.5 + 1).get(), hv * 1.5 + 1)
        same_bits(np.sqrt(np.abs(view)).get(), np.sqrt(np.abs(hv)))
    e = put(np.zeros((0, 4), F16), device)
    same_bits((e + 1).get(), np.zeros((0, 4), F16) + 1)
    same_bits(ga.sum(e, axis=0).get(), np.zeros(4, F16))


def test_nan_bits_pass_through_as_in_numpy(device):
    """PoCL's vstore_half stores every NaN as 0x7fff and vload_half quiets signalling ones:
    the conversions keep the payload as NumPy's do."""
    h = np.array([0x7C01, 0x7D00, 0x7E00, 0x7E01, 0x7FFF, 0xFC01, 0xFE00, 0xFFFF, 0x3C00, 1,
                  0x8001, 0x7C00], np.uint16).view(np.float16)
    a = put(h, device)
    m = put(np.zeros(h.size, bool), device)
    same_bits(ga.where(m, 0.0, a).get(), h)
    # CUDA's arithmetic returns its canonical NaN (docs/kernels.md, "Accuracy on CUDA")
    arithmetic = same_bits_but_nan if device.backend == "cuda" else same_bits
    arithmetic((-a).get(), -h)  # negation too, on an H200
    with np.errstate(invalid="ignore"):
        arithmetic((a * 1).get(), h * np.float16(1))
        arithmetic(ga.sqrt(put(np.float16([-1.0]), device)).get(), np.sqrt(np.float16([-1.0])))
    b = put(h, device)
    b[put(h > 0.5, device)] = 0.25
    expected = h.copy()
    expected[h > 0.5] = 0.25
    arithmetic(b.get(), expected)  # the masked store, on CUDA canonical NaNs too (an H200)
    f32 = ga.astype(a, "float32").get()
    np.testing.assert_array_equal(f32.view(np.uint32), h.astype(np.float32).view(np.uint32))
    same_bits(ga.astype(put(h.astype(np.float32), device), "float16").get(), h)
    if device.supports(np.float64):
        d = np.array([0x7FF0000000000001, 0xFFF8000000000000, 0x7FF4000000000000,
                      0x3FF0000000000000], np.uint64).view(np.float64)
        same_bits(ga.astype(put(d, device), "float16").get(), d.astype(F16))


# conversions ----------------------------------------------------------------------------
def test_astype_from_float16_every_value(device):
    a = put(ALL_BITS, device)
    small = FINITE[np.abs(FINITE) < 100]
    s = put(small, device)
    for dt in supported(device, [np.dtype(t) for t in ("float32", "float64", "complex64", "bool")]):
        got = ga.astype(a, dt).get()
        np.testing.assert_array_equal(got, ALL_BITS.astype(dt), strict=True)
    for dt in ("int8", "int16", "int32", "int64", "uint8", "uint64"):
        src, h = (s, small) if dt[0] == "i" else (ga.abs(s), np.abs(small))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            np.testing.assert_array_equal(ga.astype(src, dt).get(), h.astype(dt), strict=True)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint16", "bool",
                                   "complex64"])
def test_astype_to_float16_rounds_as_numpy(device, dtype):
    if not device.supports(dtype):
        pytest.skip(f"{device} has no {dtype}")
    dt = np.dtype(dtype)
    rng = _rng(3)
    if dt.kind == "f":  # every float16, the values between them, overflow, subnormals, ties
        h = np.concatenate([FINITE.astype(dt) * dt.type(1.0001), FINITE.astype(dt),
                            (rng.standard_normal(3000) * 40000).astype(dt),
                            np.array([65519, 65520, 6e-8, 2.98e-8, -0.0, np.inf, np.nan], dt)])
        h = np.concatenate([h, (h[:-1] + h[1:]) / 2])
    elif dt.kind == "c":
        h = (rng.standard_normal(500) + 1j).astype(dt)
    elif dt.kind == "b":
        h = rng.random(100) > 0.5
    else:
        info = np.iinfo(dt)
        h = np.concatenate([rng.integers(info.min, info.max, 20000, dtype=dt, endpoint=True),
                            np.array([info.min, info.max, 65519, 65520, 2049, 2051], dt)])
    with warnings.catch_warnings(), np.errstate(over="ignore"):  # overflow to inf, as NumPy
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        same_bits(ga.astype(put(h, device), "float16").get(), h.astype(F16))


@pytest.mark.parametrize(("dtype", "uint"), [("float32", np.uint32), ("float64", np.uint64)])
def test_astype_to_float16_of_random_bit_patterns(device, dtype, uint):
    """Random bits (NaN payloads, subnormals of both types, huge and tiny values) and the
    neighbours of every float16's rounding edges (one unit of the source below and above
    each midpoint) round as NumPy's: the OpenCL dialect converts with bit operations."""
    if not device.supports(dtype):
        pytest.skip(f"{device} has no {dtype}")
    dt = np.dtype(dtype)
    edges = FINITE.astype(dt).view(uint)
    half_unit = uint(1) << uint(12 if dt.itemsize == 4 else 41)  # half a float16 mantissa unit
    near = (edges[:, None] + np.array([half_unit - 1, half_unit, half_unit + 1], uint)).ravel()
    h = np.concatenate([_rng(4).integers(0, np.iinfo(uint).max, 200_000, dtype=uint,
                                         endpoint=True), near]).view(dt)
    with np.errstate(all="ignore"):
        same_bits(ga.astype(put(h, device), "float16").get(), h.astype(F16))


# reductions -----------------------------------------------------------------------------
@pytest.mark.parametrize(("shape", "axes", "names"), [
    ((300_000,), [None], ("sum", "std")),  # partials in float32
    ((37, 1100), [0, 1], ("sum", "mean")),
    ((3, 200, 70), [(0, 2)], ("mean", "var"))])
def test_reductions(device, shape, axes, names):
    h = _rng(4).standard_normal(shape).astype(F16)
    a = put(h, device)
    x = h.astype(np.float64)
    for axis in axes:
        for name in names:
            got_np, got_ga = getattr(np, name)(a, axis=axis), getattr(ga, name)(a, axis=axis)
            with np.errstate(over="ignore"):
                theirs = getattr(np, name)(h, axis=axis)
            assert got_np.dtype == theirs.dtype == F16
            for got in (got_np.get(), got_ga.get()):
                near(got, getattr(np, name)(x, axis=axis), numpy=theirs)
        same_bits(np.asarray(ga.max(a, axis=axis).get()), np.asarray(np.max(h, axis=axis)))
        if not isinstance(axis, tuple):
            np.testing.assert_array_equal(np.argmin(a, axis=axis).get(), np.argmin(h, axis=axis),
                                          strict=True)
    if len(shape) == 2:
        hs = h[:30, :30] * np.float16(0.5) + np.float16(1)
        near(ga.prod(put(hs, device), axis=1).get(), np.prod(hs.astype(np.float64), axis=1))


def test_reductions_propagate_nan_and_overflow(device):
    h = (np.arange(50000) % 97).astype(F16)
    h[30000] = np.nan
    h[40000] = np.nan
    a = put(h, device)
    assert np.isnan(float(ga.max(a))) and np.isnan(float(ga.sum(a)))
    assert int(ga.argmax(a)) == int(np.argmax(h)) == 30000
    big = put(np.full(1000, 60000, F16), device)
    with np.errstate(over="ignore"):
        assert float(ga.sum(big)) == np.inf == float(np.sum(np.full(1000, 60000, F16)))
    assert float(ga.mean(big)) == 60000.0  # accumulates in float32, as NumPy's mean


def test_cumulative_sum_accumulates_in_float32(device):
    """NumPy's float16 cumsum rounds every step to float16; ours once, from float32 partial
    sums: closer to the exact running sum (compared with it)."""
    h = _rng(5).standard_normal((40, 700)).astype(F16)
    a = put(h, device)
    for axis in (0, 1):
        got = ga.cumulative_sum(a, axis=axis).get()
        assert got.dtype == np.cumsum(h, axis=axis).dtype == F16
        exact = np.cumsum(h.astype(np.float64), axis=axis)
        scale = np.cumsum(np.abs(h.astype(np.float64)), axis=axis)
        err = np.abs(got.astype(np.float64) - exact)
        ulp16 = np.spacing(np.abs(exact).astype(F16)).astype(np.float64)
        assert (err <= ulp16 + scale * 2.0**-21).all()
    via_np = np.cumsum(a, axis=1)
    assert type(via_np) is ga.GPUArray
    same_bits(via_np.get(), ga.cumulative_sum(a, axis=1).get())


# sorting --------------------------------------------------------------------------------
def test_sort_every_float16(device):
    h = _rng(6).permutation(ALL_BITS)
    a = put(h, device)
    expected = np.sort(h)
    n = int((~np.isnan(expected)).sum())
    for got in (np.sort(a).get(), ga.sort(a).get()):
        same_bits(got[:n], expected[:n])  # -inf ... -0.0 ... +0.0 ... inf in NumPy's order
        assert np.isnan(got[n:]).all()  # NaNs last
    order = ga.argsort(a, stable=True).get()
    np.testing.assert_array_equal(order[:n], np.argsort(h, stable=True)[:n])
    srt = put(expected[:n], device)
    np.testing.assert_array_equal(ga.searchsorted(srt, a[:5000]).get(),
                                  np.searchsorted(expected[:n], h[:5000]))


def test_sort_axes_ties_and_special_values(device):
    h = _rng(7).choice(np.array([0.0, -0.0, 1, np.inf, -np.inf, np.nan, 2.5, -1], F16), (50, 40))
    a = put(h, device)
    for axis in (0, 1):
        np.testing.assert_array_equal(ga.sort(a, axis=axis).get(), np.sort(h, axis=axis))
        np.testing.assert_array_equal(ga.argsort(a, axis=axis, stable=True).get(),
                                      np.argsort(h, axis=axis, stable=True))
        np.testing.assert_array_equal(np.argsort(a.T, axis=axis, stable=True).get(),
                                      np.argsort(h.T, axis=axis, stable=True))
    finite = h[np.isfinite(h)]
    np.testing.assert_array_equal(ga.unique_values(put(finite, device)).get(), np.unique(finite))


# indexing -------------------------------------------------------------------------------
def test_indexing(device):
    rng = _rng(8)
    h = rng.permutation(ALL_BITS)
    a = put(h, device)
    idx = rng.integers(0, h.size, 5000)
    same_bits(ga.take(a, put(idx, device)).get(), h[idx])
    same_bits(np.take(a, put(idx, device)).get(), h[idx])
    same_bits(a[put(idx[:50], device)].get(), h[idx[:50]])
    m = h > 1
    same_bits(a[put(m, device)].get(), h[m])
    np.testing.assert_array_equal(ga.nonzero(a > 1)[0].get(), np.nonzero(m)[0])
    b = put(h, device)
    hb = h.copy()
    dst = rng.choice(h.size, 300, replace=False)
    b[put(dst, device)] = put(FINITE[:300], device)
    hb[dst] = FINITE[:300]
    b[10:20] = 0.1
    hb[10:20] = 0.1
    b[put(hb < -100, device)] = put(hb[hb < -100] * np.float16(0.5), device)
    hb[hb < -100] *= np.float16(0.5)
    same_bits(b.get(), hb)
    h2 = FINITE[:600].reshape(20, 30)
    a2 = put(h2, device)
    same_bits(a2[::2, [3, 1, 4]].get(), h2[::2, [3, 1, 4]])
    same_bits(ga.concat([a2, a2.T[:20]], axis=1).get(), np.concatenate([h2, h2.T[:20]], axis=1))
    same_bits(np.stack([a2[:, 0], a2[:, 1]]).get(), np.stack([h2[:, 0], h2[:, 1]]))
    same_bits(ga.where(put(h2 > 0, device), a2, -a2).get(), np.where(h2 > 0, h2, -h2))
    reps = np.arange(30) % 3
    same_bits(ga.repeat(a2[0], put(reps, device)).get(), np.repeat(h2[0], reps))
    same_bits(np.repeat(a2, 2, axis=0).get(), np.repeat(h2, 2, axis=0))


# matmul ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("sa", "sb"), [((33, 47), (47, 29)), ((3, 8, 70), (70, 5)),
                                          ((70,), (70, 6)), ((200,), (200,))])
def test_matmul(device, sa, sb):
    rng = _rng(9)
    ha, hb = rng.standard_normal(sa).astype(F16), rng.standard_normal(sb).astype(F16)
    a, b = put(ha, device), put(hb, device)
    exact = np.matmul(ha.astype(np.float64), hb.astype(np.float64))
    scale = np.matmul(np.abs(ha.astype(np.float64)), np.abs(hb.astype(np.float64)))
    k = sa[-1]
    for got in (np.matmul(a, b).get(), (a @ b).get(), ga.matmul(a, b).get()):
        assert got.dtype == np.matmul(ha, hb).dtype == F16
        err = np.abs(got.astype(np.float64) - exact)
        assert (err <= np.spacing(np.abs(exact).astype(F16)).astype(np.float64)
                + k * scale * 2.0**-23).all()
    if len(sa) == 2:  # transposed operands
        got = ga.matmul(put(ha.T.copy(), device).T, put(hb.T.copy(), device).T).get()
        same_bits(got, ga.matmul(a, b).get())


def test_matmul_mixed_with_float32_and_dot(device):
    ha = _rng(10).standard_normal((6, 9)).astype(F16)
    hb = _rng(11).standard_normal((9, 4)).astype(np.float32)
    got = ga.matmul(put(ha, device), put(hb, device)).get()
    assert got.dtype == np.matmul(ha, hb).dtype == np.float32
    np.testing.assert_allclose(got, np.matmul(ha, hb), rtol=1e-5, atol=1e-5)
    d = np.dot(put(ha, device), put(ha.T.copy(), device))
    assert type(d) is ga.GPUArray and d.dtype == F16
    near(d.get(), ha.astype(np.float64) @ ha.T.astype(np.float64), ulp=2)


# linalg and fft -------------------------------------------------------------------------
def test_linalg_refuses_float16_as_numpy(device):
    h = (np.eye(4) * 2 + 0.5).astype(F16)
    a = put(h, device)
    for np_fn, ga_fn in [(np.linalg.inv, glinalg.inv), (np.linalg.det, glinalg.det),
                         (np.linalg.cholesky, glinalg.cholesky)]:
        with pytest.raises(TypeError, match="float16"):
            np_fn(h)
        with pytest.raises(TypeError, match="float16"):
            ga_fn(a)
        with pytest.raises(TypeError, match="float16"):
            np_fn(a)


def test_fft_of_float16_follows_numpy_dtypes(device):
    h = _rng(12).standard_normal(64).astype(F16)
    a = put(h, device)
    for np_fn, ga_fn in [(np.fft.fft, gfft.fft), (np.fft.rfft, gfft.rfft)]:
        expected = np_fn(h)
        if not device.supports(expected.dtype):
            continue
        for got in (np_fn(a).get(), ga_fn(a).get()):
            assert got.dtype == expected.dtype
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


# NumPy's protocols ----------------------------------------------------------------------
PROTOCOL = [
    lambda h: np.clip(h, -1, 0.5),
    lambda h: np.where(h > 0, h, np.float16(0)),
    lambda h: np.concatenate([h, h[::-1]]),
    lambda h: np.reshape(h, (-1, 2)).T,
    lambda h: np.round(h, 1),
    lambda h: np.maximum(h, 0.3),
    lambda h: np.isfinite(h),
    lambda h: np.diff(h),
    lambda h: np.sort(h)[::-1],
    lambda h: np.abs(h) ** 0.5,
]


@pytest.mark.parametrize("k", range(len(PROTOCOL)))
def test_numpy_protocol_calls(device, k):
    h = (_rng(13).standard_normal(40) * 5).astype(F16)
    h[3] = np.nan
    expected = PROTOCOL[k](h)
    got = PROTOCOL[k](put(h, device))
    assert type(got) is ga.GPUArray
    np.testing.assert_array_equal(got.get(), expected, strict=True)


@settings(max_examples=10, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(0, 6), min_size=1, max_size=3).map(tuple),
       step=st.sampled_from([1, 2, -1]), scale=st.sampled_from([1e-6, 1.0, 3e4]),
       op=st.sampled_from(["add", "multiply", "divide", "subtract", "maximum"]))
def test_binary_views_match_numpy(device, shape, step, scale, op):
    n = int(np.prod(shape))
    h = (np.linspace(-1, 1, n * 2 + 1) * scale).astype(F16)[: n * 2]
    h = h.reshape(*shape[:-1], shape[-1] * 2)
    hv = h[..., ::2][..., ::step]
    gv = put(h, device)[..., ::2][..., ::step]
    with np.errstate(all="ignore"):
        same_bits(getattr(ga, op)(gv, gv[..., ::-1]).get(), getattr(np, op)(hv, hv[..., ::-1]))


@pytest.mark.parametrize("spec", [str(d) for d in ga.devices() if d.backend != "cpu"
                                  and d.index == 0] or ["cpu:0"])
def test_float16_scalar_kernel_for_a_device_without_float64(spec):
    """A device without float64 gets the float16 scalar as a float (no double in the
    source); the Python launch passes the scalar already rounded to float16."""
    from gpuarrays._compute.device import generator, launcher
    from gpuarrays.backends._kernels import launch_shape

    device = ga.get_device(spec)
    sig = generator.Signature("multiply", "f2", (generator.Operand("f2", "f2"),
                                                 generator.Operand(None, "f2")))
    wide = generator.Signature("multiply", "f2", (generator.Operand("f2", "f2"),
                                                  generator.Operand(None, "f2", wide=True)))
    assert [p.type for p in generator.params(sig)][2] == "f4"
    assert [p.type for p in generator.params(wide)][2] == "f8"
    if device.backend == "cpu":  # no generated kernels: the sources are all there is to check
        return
    text = generator.source(device.impl.dialect, [sig])
    if device.backend == "cuda":
        # Every CUDA device has float64, and the CUDA prelude always defines its double
        # helpers (double_to_half, the x86 float-to-integer casts); the kernel itself
        # still computes the float16 scalar as a float, with no double.
        text = text[text.index('extern "C" __global__'):]
    assert "double" not in text and "fp64" not in text
    h = (_rng(14).standard_normal(5000) * 30).astype(F16)
    x, out = put(h, device), ga.empty(h.size, dtype=F16, device=device)
    kernel = launcher._kernel(device, sig)
    gsize, lsize = launch_shape(device.impl.launch_hint(device.index), h.size, kernel.max_local)
    kernel.launch([out._raw().ptr, x._raw().ptr, np.float16(1.7).item(), h.size], gsize, lsize)
    same_bits(out.get(), h * 1.7)
