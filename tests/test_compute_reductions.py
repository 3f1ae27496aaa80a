"""Reductions, statistics, searching and diff on every device, NumPy as the oracle
(docs/reductions.md): every function x dtype x axis form x keepdims, strided, transposed and
negative-stride inputs, sizes 0, 1, odd and 2^k +- 1, one case of >= 2^24 elements per
function, accuracy, NaN and inf, integer wrapping, empty reductions, errors refused before
anything is allocated, partial buffers returned and cached loops that allocate nothing."""

from __future__ import annotations

import warnings

import gc
import weakref

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuarrays as ga
from gpuarrays._compute import reductions
from gpuarrays._compute.device import reduce as device_reduce
from gpuarrays._compute.statistical import reduce_ufunc

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
NAMES = ["sum", "prod", "max", "min", "mean", "var", "std", "all", "any", "count_nonzero",
         "argmax", "argmin"]
_ACCEPTS = {"any": set("biufc"), "real": set("biuf")}


def takes(name: str, dtype) -> bool:
    return np.dtype(dtype).kind in _ACCEPTS[reductions.REDUCTIONS[name].category]


def values(dtype, shape, seed=0, name="sum") -> np.ndarray:
    """Host values: small integers (products stay readable), floats near 1 for ``prod``."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        lo = 0 if dt.kind == "u" else -4
        return rng.integers(lo, 5, shape).astype(dt)
    if name == "prod":
        v = rng.uniform(0.5, 1.5, shape)
    else:
        v = rng.standard_normal(shape) * 3
    if dt.kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return np.asarray(v).astype(dt)


def reference(name: str, x: np.ndarray, axis, keepdims=False, correction=0.0, dtype=None):
    """What the standard says, computed by NumPy (float16 accumulating in float32)."""
    dev = ga.get_device("cpu:0")
    rd = reductions._result_dtype(reductions.REDUCTIONS[name], x.dtype, dtype, dev)
    acc = reductions.accumulator_dtype(rd)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy warns on empty slices, dof <= 0
        if name in ("sum", "prod"):
            r = getattr(np, name)(x, axis=axis, keepdims=keepdims, dtype=acc)
        elif name in ("max", "min", "all", "any"):
            r = getattr(np, name)(x, axis=axis, keepdims=keepdims)
        elif name == "mean":
            r = np.mean(x, axis=axis, keepdims=keepdims, dtype=acc)
        elif name in ("var", "std"):
            r = getattr(np, name)(x.astype(acc), axis=axis, keepdims=keepdims, ddof=correction)
        elif name == "count_nonzero":
            r = np.count_nonzero(x, axis=axis, keepdims=keepdims)
        else:
            r = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    return np.asarray(r).astype(rd)


def assert_matches(got: np.ndarray, want: np.ndarray, name: str, n: int = 1) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                 got.shape, want.shape)
    if want.dtype.kind in "biu" or name in ("max", "min"):
        np.testing.assert_array_equal(got, want)
        return
    eps = np.finfo(want.dtype).eps
    tol = eps * (8 + 4 * np.sqrt(n)) if want.dtype.itemsize > 2 else 4e-3
    scale = 1.0 if name != "prod" else 2.0
    np.testing.assert_allclose(got, want, rtol=tol * scale, atol=tol * scale * 4)


def call(name: str, a, axis, keepdims=False, **kw):
    return getattr(ga, name)(a, axis=axis, keepdims=keepdims, **kw)


# The matrix -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_every_function_and_dtype_matches_numpy(device, name, dtype):
    if not device.supports(dtype):
        pytest.skip(f"{device} has no {dtype}")
    if not takes(name, dtype):
        with pytest.raises(TypeError, match=f"{name}\\(\\) does not accept {dtype}"):
            call(name, ga.zeros(3, dtype=dtype, device=device), None)
        return
    h = values(dtype, (3, 4, 5), name=name)
    a = ga.asarray(h, device=device)
    forms = [(None, False), (-1, True), (0, False)]
    if name not in ("argmax", "argmin"):
        forms += [((0, 2), False), ((2, 0), True), ((), False)]
    for axis, keepdims in forms:
        got = call(name, a, axis, keepdims)
        assert got.device == device
        n = h.size if axis is None else 5
        assert_matches(got.get(), reference(name, h, axis, keepdims), name, n)


_LAYOUTS = {
    "contiguous": lambda v: v,
    "transposed": lambda v: v.T,
    "negative": lambda v: v[::-1, :, ::-1],
    "strided": lambda v: v[:, 1::2, ::3],
}


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
@pytest.mark.parametrize("name", NAMES)
def test_axis_forms_keepdims_and_layouts_match_numpy(device, name, layout):
    h = values("float32", (6, 8, 9), seed=1, name=name)
    view = _LAYOUTS[layout]
    x, a = view(h), view(ga.asarray(h, device=device))
    assert a.strides == x.strides
    forms = [None, 0, 1, 2, -1, -3]
    if name not in ("argmax", "argmin"):
        forms += [(0, 1), (1, 2), (0, 2), (-1, -3), (0, 1, 2), ()]
    for axis in forms:
        for keepdims in (False, True):
            got = call(name, a, axis, keepdims).get()
            assert_matches(got, reference(name, x, axis, keepdims), name, x.size)


@pytest.mark.parametrize("n", [0, 1, 7, 255, 257, 4095, 4097, 65535, 65537])
def test_sizes_zero_one_odd_and_powers_of_two_plus_minus_one(device, n):
    h = values("float32", (n,), seed=n)
    a = ga.asarray(h, device=device)
    for name in ("sum", "mean", "var", "max", "argmin", "count_nonzero", "any"):
        if n == 0 and name in ("max", "argmin"):
            with pytest.raises(ValueError, match="empty"):
                call(name, a, None)
            continue
        assert_matches(call(name, a, None).get(), reference(name, h, None), name, n)
    m = values("int32", (3, n), seed=n)
    b = ga.asarray(m, device=device)
    for axis in (0, 1):
        assert_matches(ga.sum(b, axis=axis).get(), reference("sum", m, axis), "sum")
        if n:
            assert_matches(ga.argmax(b, axis=axis).get(), reference("argmax", m, axis), "argmax")


@pytest.mark.parametrize("name", NAMES)
def test_large_reductions_take_the_multi_stage_paths(device, name):
    n = 2**24 + 3
    dtype = "int16" if name in ("all", "any", "count_nonzero") else "float32"
    h = values(dtype, (n,), seed=5, name=name)
    if name in ("all", "any"):
        h[:] = 1 if name == "all" else 0
        h[n - 2] = 0 if name == "all" else 3
    if name == "prod":
        h[:] = 1
        h[::1000] = -1
    a = ga.asarray(h, device=device)
    assert_matches(call(name, a, None).get(), reference(name, h, None), name, n)
    # few long rows: several work-groups share each output
    h2, a2 = h[: 4 * (n // 4)].reshape(4, -1), a[: 4 * (n // 4)].reshape(4, -1)
    assert_matches(call(name, a2, 1).get(), reference(name, h2, 1), name, n // 4)


# Accuracy, NaN, inf, integers ---------------------------------------------------------------
def test_float_sums_are_at_least_as_accurate_as_pairwise_summation(device):
    h = np.full(4 * 2**20, 0.1, dtype=np.float32)
    exact = h.astype(np.float64).sum()
    a = ga.asarray(h, device=device)
    assert abs(float(ga.sum(a)) - exact) / exact <= 1e-5
    assert abs(float(ga.mean(a)) - 0.1) / 0.1 <= 1e-5
    rows = ga.sum(a.reshape(4, -1), axis=1).get()
    np.testing.assert_allclose(rows, exact / 4, rtol=1e-5)
    big = np.full(2**20, 1e4, dtype=np.float32) + np.float32(0.5)
    assert abs(float(ga.var(ga.asarray(big, device=device)))) <= 1e-3  # large mean, two passes


def test_sum_with_an_infinity_is_inf_not_nan(device):
    # regression: compensated summation turned inf into NaN ((inf - inf) in the correction)
    h = np.ones(100000, dtype=np.float32)
    h[1234] = np.inf
    a = ga.asarray(h, device=device)
    assert float(ga.sum(a)) == np.inf
    assert float(ga.mean(a)) == np.inf
    h[5000] = -np.inf
    assert np.isnan(float(ga.sum(ga.asarray(h, device=device))))
    over = np.full(1000, 3e38, dtype=np.float32)
    assert float(ga.sum(ga.asarray(over, device=device))) == np.inf  # overflow, as NumPy


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_nan_propagates_in_max_min_and_argmax_finds_the_first_nan(device, dtype):
    if not device.supports(dtype):
        pytest.skip(f"{device} has no {dtype}")
    h = np.arange(50000, dtype=dtype) % 97
    h[30000] = np.nan
    h[40000] = np.nan
    a = ga.asarray(h, device=device)
    assert np.isnan(float(ga.max(a))) and np.isnan(float(ga.min(a)))
    assert int(ga.argmax(a)) == 30000 and int(ga.argmin(a)) == 30000
    m = h.reshape(500, 100)
    b = a.reshape(500, 100)
    np.testing.assert_array_equal(ga.max(b, axis=0).get(), np.max(m, axis=0))
    np.testing.assert_array_equal(ga.min(b, axis=0).get(), np.min(m, axis=0))
    np.testing.assert_array_equal(ga.argmax(b, axis=1).get(), np.argmax(m, axis=1))
    inf = np.array([1, -np.inf, 3, np.inf, np.inf], dtype=dtype)
    c = ga.asarray(inf, device=device)
    assert float(ga.max(c)) == np.inf and int(ga.argmax(c)) == 3 and int(ga.argmin(c)) == 1


def test_argmax_and_argmin_return_the_first_index_on_ties(device):
    h = np.zeros((300, 1000), dtype=np.int32)
    h[:, 700] = 5
    h[:, 900] = 5
    h[:, 100] = -5
    h[:, 950] = -5
    a = ga.asarray(h, device=device)
    assert int(ga.argmax(a)) == 700 and int(ga.argmin(a)) == 100
    np.testing.assert_array_equal(ga.argmax(a, axis=1).get(), np.full(300, 700))
    np.testing.assert_array_equal(ga.argmax(a, axis=0).get(), np.argmax(h, axis=0))
    flat = ga.asarray(np.full(2**20 + 1, 7, dtype=np.uint8), device=device)
    assert int(ga.argmax(flat)) == 0 and int(ga.argmin(flat)) == 0
    # the flat index is into the C-order flattening, also for a transposed view
    assert int(ga.argmax(a.T)) == int(np.argmax(h.T))


def test_integer_overflow_wraps_as_numpy(device):
    big = np.array([2**62, 2**62, 2**62, 5], dtype=np.int64)
    a = ga.asarray(big, device=device)
    assert int(ga.sum(a)) == int(np.sum(big))
    u = np.full(1000, 2**63 + 7, dtype=np.uint64)
    assert int(ga.sum(ga.asarray(u, device=device))) == int(np.sum(u))
    p = np.full(70, 3, dtype=np.int8)
    got = ga.prod(ga.asarray(p, device=device))
    assert got.dtype == np.int64 and int(got) == int(np.prod(p.astype(np.int64)))
    small = ga.asarray(np.array([100, 100, 100], dtype=np.int8), device=device)
    r = ga.sum(small, dtype=ga.int8)
    assert r.dtype == np.int8 and int(r) == int(np.sum(np.int8([100, 100, 100]), dtype=np.int8))
    assert ga.cumulative_sum(small, dtype=ga.int8).get().tolist() == [100, -56, 44]


def test_result_dtypes_follow_the_standard(device):
    for dtype, want in [("bool", "int64"), ("int8", "int64"), ("uint16", "uint64"),
                        ("int64", "int64"), ("float16", "float16"), ("float32", "float32")]:
        if not device.supports(dtype):
            continue
        a = ga.ones(5, dtype=dtype, device=device)
        assert ga.sum(a).dtype == want and ga.prod(a).dtype == want
        assert ga.cumulative_sum(a).dtype == want
    mean_int = "float64" if device.info.float64 else "float32"
    assert ga.mean(ga.ones(5, dtype="int32", device=device)).dtype == mean_int
    assert ga.var(ga.ones(5, dtype="int8", device=device)).dtype == mean_int
    a = ga.ones(5, dtype="float32", device=device)
    assert ga.argmax(a).dtype == ga.int64 and ga.count_nonzero(a).dtype == ga.int64
    assert ga.all(a).dtype == ga.bool and ga.max(a).dtype == ga.float32
    if device.info.float64:
        assert ga.sum(a, dtype=ga.float64).dtype == ga.float64
        assert ga.mean(a, dtype="float64").dtype == ga.float64


def test_float16_accumulates_in_float32(device):
    h = np.full(10000, 0.1, dtype=np.float16)
    a = ga.asarray(h, device=device)
    assert float(ga.sum(a)) == float(np.float16(np.sum(h, dtype=np.float32)))
    assert abs(float(ga.mean(a)) - 0.1) < 1e-3
    assert abs(float(ga.cumulative_sum(a)[-1].get()) - 1000) < 1  # float16 alone stalls at 256


def test_var_and_std_with_correction(device):
    h = values("float64" if device.info.float64 else "float32", (7, 11), seed=3)
    a = ga.asarray(h, device=device)
    for c in (0, 1, 2.5):
        for axis in (None, 0, 1):
            assert_matches(ga.var(a, axis=axis, correction=c).get(),
                           reference("var", h, axis, correction=c), "var", h.size)
            assert_matches(ga.std(a, axis=axis, correction=c).get(),
                           reference("std", h, axis, correction=c), "std", h.size)
    one = ga.asarray(h[:1, :1], device=device)
    assert np.isnan(float(ga.var(one, correction=1)))  # 0 / 0, as NumPy
    assert ga.std(a, correction=100).get() == np.inf  # N - correction < 0: divides by 0


def test_empty_reductions_as_the_standard_says(device):
    e = ga.zeros((0, 3), dtype="float32", device=device)
    assert float(ga.sum(e)) == 0 and float(ga.prod(e)) == 1
    assert bool(ga.all(e)) and not bool(ga.any(e)) and int(ga.count_nonzero(e)) == 0
    assert np.isnan(float(ga.mean(e)))
    np.testing.assert_array_equal(ga.sum(e, axis=0).get(), np.zeros(3, np.float32))
    assert ga.sum(e, axis=1).shape == (0,)
    assert ga.max(e, axis=1).shape == (0,)  # nothing to reduce into: no error
    for name in ("max", "min", "argmax", "argmin"):
        with pytest.raises(ValueError, match="empty"):
            call(name, e, None)
        with pytest.raises(ValueError, match="empty"):
            call(name, e, 0)


def test_a_full_reduction_is_a_0d_array_on_the_device(device):
    a = ga.arange(10, dtype="float32", device=device)
    for name in ("sum", "max", "mean", "argmax", "all"):
        r = call(name, a, None)
        assert isinstance(r, ga.GPUArray) and r.shape == () and r.device == device
    assert ga.sum(a, keepdims=True).shape == (1,)
    assert ga.argmax(a.reshape(2, 5), keepdims=True).shape == (1, 1)


# Errors, refused before anything is allocated ---------------------------------------------
def test_bad_arguments_are_refused_before_anything_is_allocated(device, used):
    a = ga.ones((3, 4), dtype="float32", device=device)
    z = ga.ones(3, dtype="complex64", device=device)
    before = used()
    with ga.record_allocations() as rec:
        with pytest.raises(np.exceptions.AxisError, match="out of bounds"):
            ga.sum(a, axis=2)
        with pytest.raises(ValueError, match="out of bounds"):
            ga.mean(a, axis=(0, -3))
        with pytest.raises(ValueError, match="repeats"):
            ga.sum(a, axis=(1, -1))
        with pytest.raises(TypeError, match="axis must be"):
            ga.sum(a, axis=1.0)
        with pytest.raises(TypeError, match="axis must be None or an int"):
            ga.argmax(a, axis=(0, 1))
        with pytest.raises(TypeError, match="complex64"):
            ga.max(z)
        with pytest.raises(TypeError, match="complex64"):
            ga.var(z)
        with pytest.raises(TypeError, match="gpuarrays array"):
            ga.sum(np.ones(3))
        with pytest.raises(TypeError, match="dtype"):
            ga.sum(a, dtype="U4")
        with pytest.raises(TypeError, match="complex"):
            ga.sum(z, dtype=ga.float32)
        with pytest.raises(TypeError, match="floating"):
            ga.mean(a, dtype=ga.int32)
        with pytest.raises(ValueError, match="correction"):
            ga.var(a, correction=-1)
        with pytest.raises(TypeError, match="correction"):
            ga.std(a, correction="1")
    assert rec.count == 0 and used() == before
    b = ga.ones(3, device=device)
    b.free()
    with pytest.raises(ga.FreedArrayError):
        ga.sum(b)


# Memory ------------------------------------------------------------------------------------
def test_partial_buffers_go_back_when_a_reduction_ends(device, used):
    a = ga.asarray(values("float32", (5 * 209717,), seed=2), device=device)
    m = a.reshape(-1, 5)
    before = used()
    for name in ("sum", "var", "argmax", "count_nonzero", "mean"):
        r = call(name, a, None)
        ga.synchronize(device)
        assert used() == before + 512, name  # the 0-d result's block only
        del r
        r = call(name, m, 0)
        del r
        assert used() == before
    r = ga.cumulative_sum(a)
    del r
    assert used() == before


def test_a_cached_loop_of_reductions_allocates_nothing_after_the_first_iteration(device):
    cache = ga.AllocCache()
    h = values("float32", (1000, 300), seed=4)
    x = ga.asarray(h, device=device)
    counts = []
    for _ in range(4):
        with ga.record_allocations() as rec, ga.cached(cache):
            s = ga.sum(x)
            v = ga.var(x, axis=0)
            k = ga.argmax(x, axis=1)
            c = ga.cumulative_sum(x, axis=1)
            assert abs(float(s) - h.sum(dtype=np.float64)) < 1e-2
            np.testing.assert_array_equal(k.get(), np.argmax(h, axis=1))
            assert v.shape == (300,) and c.shape == x.shape
            del s, v, k, c
        counts.append(rec.count)
    assert all(n == 0 for n in counts[1:]), counts
    cache.free()


# diff --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "float32", "complex64"])
def test_diff_matches_numpy(device, dtype):
    h = values(dtype, (5, 9), seed=6)
    a = ga.asarray(h, device=device)
    for axis in (0, 1, -1):
        for n in (0, 1, 2, 6):
            np.testing.assert_array_equal(ga.diff(a, axis=axis, n=n).get(),
                                          np.diff(h, axis=axis, n=n))
    p = values(dtype, (5, 2), seed=7)
    q = values(dtype, (5, 1), seed=8)
    got = ga.diff(a, prepend=ga.asarray(p, device=device), append=ga.asarray(q, device=device))
    np.testing.assert_array_equal(got.get(), np.diff(h, prepend=p, append=q))
    # a Python scalar is weak (it takes x's dtype), where NumPy makes it an int64 array
    zero = False if dtype == "bool" else 0
    got = ga.diff(a.T, axis=0, prepend=zero)
    want = np.diff(h.T, axis=0, prepend=np.zeros((1, 5), h.dtype))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.get(), want)


def test_diff_refuses_bad_arguments(device):
    a = ga.ones((3, 4), device=device)
    with pytest.raises(ValueError, match="0-d"):
        ga.diff(ga.ones((), device=device))
    with pytest.raises(ValueError, match=">= 0"):
        ga.diff(a, n=-1)
    with pytest.raises(TypeError, match="n must be"):
        ga.diff(a, n=1.5)
    with pytest.raises(ValueError, match="does not match"):
        ga.diff(a, prepend=ga.ones((2, 4), device=device))
    with pytest.raises(TypeError, match="prepend"):
        ga.diff(a, prepend=np.ones((3, 1)))
    with pytest.raises(np.exceptions.AxisError):
        ga.diff(a, axis=2)


# NumPy's ufunc methods ----------------------------------------------------------------------
def test_reduce_ufunc_maps_numpy_reduce_and_accumulate(device):
    h = values("int16", (4, 6), seed=9)
    a = ga.asarray(h, device=device)
    for ufunc in (np.add, np.multiply, np.maximum, np.minimum, np.logical_and, np.logical_or):
        for kw in ({}, {"axis": 1}, {"axis": None, "keepdims": True}):
            got = reduce_ufunc(ufunc, "reduce", (a,), kw)
            want = ufunc.reduce(h, **kw)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.get(), want)
    for ufunc in (np.add, np.multiply):
        got = reduce_ufunc(ufunc, "accumulate", (a,), {"axis": 1})
        want = ufunc.accumulate(h, axis=1)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.get(), want)
    # ufuncs without a namespace reduction fold on the device (tests/test_numpy_ufuncs.py)
    np.testing.assert_array_equal(reduce_ufunc(np.subtract, "reduce", (a,), {}).get(),
                                  np.subtract.reduce(h))
    assert reduce_ufunc(np.add, "reduceat", (a,), {}) is NotImplemented
    assert reduce_ufunc(np.add, "reduce", (a,), {"out": h}) is NotImplemented  # host out
    assert reduce_ufunc(np.add, "reduce", (a,), {"where": m_host(a)}) is NotImplemented


def m_host(a) -> np.ndarray:
    """A host mask: ``where=`` takes a gpuarrays bool array only."""
    return np.ones(a.shape, bool)


# Hypothesis: shapes, slices and axes nobody thought of ---------------------------------------
@st.composite
def _cases(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim)))
    steps = tuple(draw(st.sampled_from([1, 2, -1, -2])) for _ in range(ndim))
    axes = draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1),
                          st.lists(st.integers(0, ndim - 1), unique=True).map(tuple)))
    name = draw(st.sampled_from(NAMES))
    if name in ("argmax", "argmin") and isinstance(axes, tuple):
        axes = axes[0] if axes else None
    return shape, steps, axes, name, draw(st.booleans()), draw(st.sampled_from(
        ["float32", "int32", "uint8", "bool"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_cases())
def test_random_layouts_and_axes_match_numpy(device, case):
    shape, steps, axis, name, keepdims, dtype = case
    h = values(dtype, shape, seed=len(shape), name=name)
    idx = tuple(slice(None, None, s) for s in steps)
    x, a = h[idx], ga.asarray(h, device=device)[idx]
    try:
        want = reference(name, x, axis, keepdims)
    except ValueError:
        with pytest.raises(ValueError):
            call(name, a, axis, keepdims)
        return
    assert_matches(call(name, a, axis, keepdims).get(), want, name, max(x.size, 1))


# CUDA: the generated kernels compile with NVRTC ---------------------------------------------
def test_reduction_kernels_compile_with_nvrtc(nvrtc):
    from gpuarrays.backends import cuda

    cases = [("sum", "f2", "f4", "f2"), ("sum", "i1", "i8", "i8"), ("sum", "c8", "c8", "c8"),
             ("prod", "u2", "u8", "u8"), ("max", "f8", "f8", "f8"), ("min", "b1", "b1", "b1"),
             ("argmax", "f4", "f4", "i8"), ("argmin", "i2", "i2", "i8"),
             ("any", "c16", "b1", "b1"), ("var", "f2", "f4", "f2"), ("std", "f8", "f8", "f8"),
             ("count_nonzero", "f4", "i8", "i8"), ("mean", "c16", "c16", "c16")]
    for name, inp, acc, out in cases:
        row = reductions.REDUCTIONS[name]
        combine = row.bool_combine if inp == "b1" and row.bool_combine else row.combine
        for strategy, final, pairs in [("item", True, False), ("block", True, False),
                                       ("group", False, False), ("group", True, True)]:
            spec = device_reduce.Spec(
                "cuda", name, combine, "x" if pairs else row.map, row.finalize, row.identity,
                acc if pairs else inp, acc, out if final else acc, strategy, final, pairs, 2, 2,
                256 if strategy == "group" else 1, 4 if strategy != "item" else 1)
            text, _, _ = device_reduce.program(cuda.DIALECT, spec)
            image, kind = cuda.compile_image(text, 90)
            assert image and kind == "cubin", (name, strategy)


@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.maximum, np.minimum])
def test_ufunc_reduce_with_out_initial_and_where_as_numpy(device, ufunc):
    """NumPy's reduce options run on the device (a refused reduce leaks its operand in
    NumPy 2.4: every option answered here is one leak fewer), and the operand is not kept."""
    h = np.arange(12, dtype=np.float64).reshape(3, 4) - 5
    m = (h % 3) != 0
    a, gm = ga.asarray(h, device=device), ga.asarray(m, device=device)
    for kw in ({"initial": 2.0}, {"where": True, "initial": 1.5}, {"axis": 1, "keepdims": True,
               "initial": -1.0}, {"axis": None, "where": True, "initial": 0.5}):
        mask = kw.pop("where", None)
        want = ufunc.reduce(h, **kw, **({} if mask is None else {"where": m}))
        got = ufunc.reduce(a, **kw, **({} if mask is None else {"where": gm}))
        np.testing.assert_allclose(got.get(), want)
        assert got.shape == np.shape(want)
    out = ga.empty(4, device=device)
    assert ufunc.reduce(a, out=out) is out and ufunc.reduce(a, out=(out,)) is out
    np.testing.assert_allclose(out.get(), ufunc.reduce(h))
    empty = np.zeros((0, 3))
    np.testing.assert_array_equal(
        ufunc.reduce(ga.asarray(empty, device=device), initial=7.0).get(),
        ufunc.reduce(empty, initial=7.0))
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None  # nothing kept the operand
    if ufunc in (np.maximum, np.minimum):  # refused (NumPy 2.4 then keeps this operand)
        with pytest.raises(ValueError, match="specify 'initial'"):  # NumPy's words
            ufunc.reduce(ga.zeros(0, device=device), where=ga.zeros(0, bool, device=device))
