"""NumPy's statistics functions on gpuarrays arrays (issue 31, part B), NumPy as the oracle.

Each function is called both ways -- ``np.<name>(garray, ...)`` through NumPy's
``__array_function__`` and ``ga.<name>(garray, ...)`` -- on the same host data NumPy gets;
values, dtypes and NumPy's RuntimeWarnings must agree, on every device.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuarrays as ga

NAN = np.nan


def _dtypes(device, *names):
    return [np.dtype(n) for n in names if device.supports(np.dtype(n))]


def _tol(dt):
    dt = np.dtype(dt)
    if dt.kind in "fc" and dt.itemsize <= (4 if dt.kind == "f" else 8):
        return {"rtol": 1e-2 if dt.itemsize == 2 else 2e-5, "atol": 1e-2 if dt.itemsize == 2
                else 1e-5}
    return {"rtol": 1e-12, "atol": 1e-12}


def _run(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    # NumPy's floating-point warnings ("invalid value encountered in ...") are silenced
    # on every gpuarrays back-end (docs/compute.md, "Engines"); the functions' own compare
    return out, sorted({str(w.message) for w in seen if w.category is RuntimeWarning
                        and " encountered in " not in str(w.message)})


def _get(r):
    if isinstance(r, (tuple, list)):
        return type(r)(_get(x) for x in r)
    assert isinstance(r, ga.GPUArray), type(r)
    return r.get()


def _same(got, want, tol=None):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w, tol)
        return
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, equal_nan=True, **(tol or _tol(want.dtype)))


def _leaves(r):
    if isinstance(r, (tuple, list)):
        return [x for item in r for x in _leaves(item)]
    return [r]


def check(device, name, host, *args, tol=None, warn=True, **kwargs):
    """``np.<name>`` and ``ga.<name>`` on ``host`` uploaded to ``device`` agree with NumPy
    on ``host`` (values, dtype, RuntimeWarnings).  ``host`` may be a tuple of arrays."""
    hosts = host if isinstance(host, tuple) else (host,)
    want, want_w = _run(getattr(np, name), *hosts, *args, **kwargs)
    dev = tuple(ga.asarray(h, device=device) for h in hosts)
    if tol is None:  # the least precise float among the inputs and the result
        kinds = [np.asarray(w).dtype for w in _leaves(want)] + [h.dtype for h in hosts]
        tol = max((_tol(k) for k in kinds), key=lambda d: d["rtol"])
    for fn in (getattr(np, name), getattr(ga, name)):
        got, got_w = _run(fn, *dev, *args, **kwargs)
        _same(_get(got), want, tol)
        if warn:
            assert got_w == want_w, (name, fn, got_w, want_w)
    return want


def _data(dt, shape=(4, 5), nan=True, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0, 9, shape).astype(dt)
    h = rng.normal(size=shape) * 4
    if dt.kind == "c":
        h = h + 1j * rng.normal(size=shape)
    h = h.astype(dt)
    if nan and h.size > 3:
        flat = h.reshape(-1)
        flat[[1, h.size // 2]] = NAN
    return h


# --------------------------------------------------------------------------- nan reductions

NAN_REDUCTIONS = ["nansum", "nanprod", "nanmean", "nanmax", "nanmin", "nanvar", "nanstd"]


@pytest.mark.parametrize("name", NAN_REDUCTIONS)
def test_nan_reductions_match_numpy(device, name):
    h = _data("float64")
    h[2] = NAN  # an all-NaN row
    for axis in (None, 0, -1, (0, 1)):
        check(device, name, h, axis=axis)
    others = {"nansum": ("float32", "int32", "bool"), "nanmean": ("int32", "float16")}.get(
        name, ("float32", "int32"))
    for dt in _dtypes(device, *others):
        if not (dt.kind == "b" and name in ("nanvar", "nanstd", "nanmean")):
            check(device, name, _data(dt), axis=1)
    h = _data("float64", (3, 4, 2))
    check(device, name, h, axis=(0, 2), keepdims=True)
    check(device, name, h.transpose(2, 0, 1)[:, ::2], axis=1)  # non-contiguous
    if name in ("nansum", "nanprod", "nanmean", "nanvar", "nanstd"):
        check(device, name, h, axis=1, dtype=np.float64 if device.supports(np.float64)
              else np.float32)
    if name in ("nansum", "nanmean", "nanvar", "nanstd"):
        mask = np.arange(24).reshape(3, 4, 2) % 3 != 0
        want = getattr(np, name)(h, axis=1, where=mask)
        got = getattr(np, name)(ga.asarray(h, device=device), axis=1,
                                where=ga.asarray(mask, device=device))
        _same(got.get(), want)
    for shape, axis in (((0,), None), ((0, 3), 0), ((3, 0), 1)):
        z = np.zeros(shape, np.float64)
        if name in ("nanmax", "nanmin") and z.size == 0 and (axis is None or shape[axis] == 0):
            with pytest.raises(ValueError):
                getattr(np, name)(z, axis=axis)
            with pytest.raises(ValueError):
                getattr(ga, name)(ga.asarray(z, device=device), axis=axis)
            continue
        check(device, name, z, axis=axis)


def test_nan_reductions_complex_and_options(device):
    h = _data("complex128", (3, 4))
    for name in ("nansum", "nanvar"):
        check(device, name, h, axis=1)
    h = _data("float64", (3, 4))
    check(device, "nanvar", h, axis=1, ddof=1)
    check(device, "nanstd", h, axis=0, correction=2)
    check(device, "nanvar", h[:, :1], axis=1, ddof=1)  # dof <= 0 warns, NaN
    check(device, "nanmax", h, axis=1, initial=-1.0)
    check(device, "nanmin", h, axis=0, keepdims=True)
    check(device, "nansum", h, axis=0, initial=5.0)
    mean = np.nanmean(h, axis=1, keepdims=True)
    want = np.nanvar(h, axis=1, mean=mean)
    got = ga.nanvar(ga.asarray(h, device=device), axis=1, mean=ga.asarray(mean, device=device))
    _same(got.get(), want)
    with pytest.raises(ValueError, match="ddof and correction"):
        ga.nanvar(ga.asarray(h, device=device), ddof=1, correction=1)
    out = ga.empty((4,), np.float64, device=device)
    r = np.nansum(ga.asarray(h, device=device), axis=0, out=out)
    assert r is out
    _same(out.get(), np.nansum(h, axis=0))


@pytest.mark.parametrize("name", ["nanargmax", "nanargmin"])
def test_nanargmax_matches_numpy_and_refuses_all_nan_slices(device, name):
    h = _data("float64", (4, 5))
    h[1, :3] = NAN
    for axis in (None, 0, 1):
        check(device, name, h, axis=axis)
    check(device, name, h.T[::2], axis=1, keepdims=True)
    check(device, name, _data("int16", (4, 5)), axis=0)
    h[2] = NAN
    with pytest.raises(ValueError, match="All-NaN slice"):
        np.nanargmax(h, axis=1)
    for fn in (getattr(np, name), getattr(ga, name)):
        with pytest.raises(ValueError, match="All-NaN slice"):
            fn(ga.asarray(h, device=device), axis=1)
        with pytest.raises(ValueError):
            fn(ga.asarray(np.zeros(0, np.float64), device=device))


@pytest.mark.parametrize("name", ["nancumsum", "nancumprod"])
def test_nan_scans_match_numpy(device, name):
    for axis in (None, 0, 1):
        check(device, name, _data("float64", (3, 4)), axis=axis)
    for dt in _dtypes(device, "float16", "int8", "bool"):
        check(device, name, _data(dt, (3, 4)), axis=0)
    check(device, name, _data("float64", (4, 6)).T[::2], axis=0)
    check(device, name, np.zeros((0, 2), np.float64), axis=0)


def test_ptp_matches_numpy(device):
    for dt in _dtypes(device, "int8", "float64"):
        h = _data(dt, (3, 4), nan=False)
        for axis in (None, 0, (0, 1)):
            check(device, "ptp", h, axis=axis)
    check(device, "ptp", _data("float64", (3, 4)), axis=1, keepdims=True)
    with pytest.raises(TypeError):
        ga.ptp(ga.asarray(np.ones(3, bool), device=device))


def test_nan_functions_refuse_host_data(device):
    with pytest.raises(TypeError, match="ga.asarray"):
        ga.nanmean([1.0, 2.0])


@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_nan_reductions_hypothesis(device, data):
    shape = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple))
    vals = data.draw(st.lists(st.sampled_from([NAN, -1.5, 0.0, 2.0, 3.25, np.inf]),
                              min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    h = np.array(vals, np.float64).reshape(shape)
    axis = data.draw(st.sampled_from([None, 0, -1]))
    name = data.draw(st.sampled_from(["nansum", "nanmean", "nanvar", "nancumsum"]))
    check(device, name, h, axis=axis)


def test_xarray_skipna_reductions_run_on_the_device(device):
    xr = pytest.importorskip("xarray", reason="xarray is in the test extra")
    host = np.arange(12.0).reshape(3, 4)
    host[1, 2] = NAN
    host[0, 0] = NAN
    on_device = xr.DataArray(ga.asarray(host, device=device), dims=("y", "x"))
    on_host = xr.DataArray(host, dims=("y", "x"))
    for call in (lambda d: d.mean(), lambda d: d.mean("y"), lambda d: d.max("x"),
                 lambda d: d.std(), lambda d: d.var("x", ddof=1), lambda d: d.sum("y"),
                 lambda d: d.median("x"), lambda d: d.cumsum("x")):
        got, want = call(on_device), call(on_host)
        assert isinstance(got.data, ga.GPUArray), type(got.data)
        np.testing.assert_allclose(got.data.get(), want.data, equal_nan=True)


# --------------------------------------------------------------------------- order statistics

METHODS = ["linear", "lower", "higher", "nearest", "midpoint", "inverted_cdf",
           "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
           "hazen", "weibull", "median_unbiased", "normal_unbiased"]


@pytest.mark.parametrize("method", METHODS)
def test_quantile_every_method_matches_numpy(device, method):
    h = np.random.default_rng(3).normal(size=(4, 7)) * 5
    for q, axis, keepdims in ((0.5, None, False), ([0.0, 0.1, 0.33, 1.0], 1, False),
                              ([[0.2], [0.7]], (0, 1), True), (0.25, 0, True)):
        check(device, "quantile", h, q, axis=axis, method=method, keepdims=keepdims)
    check(device, "percentile", h.T[::2], [5, 50, 99.5], axis=1, method=method)


def test_quantile_result_types_match_numpy(device):
    h = np.random.default_rng(3).normal(size=(4, 7)) * 5
    for dt, methods in (("float32", ("linear",)), ("int32", ("linear", "lower")),
                        ("float16", ("linear",))):
        for method in methods if device.supports(np.dtype(dt)) else ():
            check(device, "quantile", h.astype(dt), [0.25, 0.5], axis=1, method=method)
    check(device, "quantile", h.astype(np.float32), 0.5)  # a Python q keeps float32
    check(device, "quantile", h.astype(np.float32), np.float32(0.25), axis=0)


def test_median_and_quantile_with_nan_and_layouts(device):
    h = _data("float64", (5, 4))
    h[3] = NAN
    for name in ("median", "nanmedian"):
        for axis in (None, 0, 1, (0, 1)):
            check(device, name, h, axis=axis)
        check(device, name, h.T[:, ::2], axis=1, keepdims=True)
        for dt in _dtypes(device, "int16", "float16", "float32"):
            check(device, name, _data(dt, (3, 6)), axis=1)
        check(device, name, np.zeros((0, 3), np.float64), axis=0)
    check(device, "quantile", h, [0.3, 0.9], axis=0)
    check(device, "nanmedian", np.full((2, 3), NAN, np.float64), axis=1)


def test_weighted_inverted_cdf_matches_numpy(device):
    rng = np.random.default_rng(4)
    h = rng.normal(size=(5, 4))
    w = rng.random((5, 4))
    w[0, 1] = 0
    q = [0.0, 0.3, 1.0]
    for axis in (None, 0, 1):
        want = np.quantile(h, q, axis=axis, method="inverted_cdf", weights=w)
        for fn in (np.quantile, ga.quantile):
            got = fn(ga.asarray(h, device=device), q, axis=axis, method="inverted_cdf",
                     weights=ga.asarray(w, device=device))
            _same(got.get(), want)
    want = np.percentile(h, 40, axis=1, method="inverted_cdf", weights=w[0])
    got = ga.percentile(ga.asarray(h, device=device), 40, axis=1, method="inverted_cdf",
                        weights=ga.asarray(w[0], device=device))
    _same(got.get(), want)


def test_quantile_refuses_what_numpy_refuses(device):
    x = ga.asarray(np.arange(6.0), device=device)
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        ga.quantile(x, 1.5)
    with pytest.raises(ValueError, match=r"range \[0, 100\]"):
        np.percentile(x, -1)
    with pytest.raises(ValueError, match="not a valid method"):
        ga.quantile(x, 0.5, method="cubic")
    with pytest.raises(ValueError, match="inverted_cdf"):
        ga.quantile(x, 0.5, weights=x)
    with pytest.raises(ValueError, match="non-negative"):
        ga.quantile(x, 0.5, method="inverted_cdf", weights=ga.negative(x))
    with pytest.raises(IndexError):
        ga.quantile(ga.asarray(np.zeros(0), device=device), 0.5)


# --------------------------------------------------------------------------- histograms

def test_histogram_bins_ranges_density_weights_match_numpy(device):
    rng = np.random.default_rng(2)
    h = rng.normal(size=120)
    w = rng.random(120)
    for bins in (10, 3, [-1.0, 0.0, 0.5, 2.0]):
        for rng_ in (None, (-1.0, 1.5)):
            check(device, "histogram", h, bins=bins, range=rng_)
        check(device, "histogram", h, bins=bins, density=True)
        want = np.histogram(h, bins=bins, weights=w)
        for fn in (np.histogram, ga.histogram):
            got = fn(ga.asarray(h, device=device), bins=bins,
                     weights=ga.asarray(w, device=device))
            _same(_get(got), want)
    hi = rng.integers(0, 10, (5, 6)).astype(np.int16)
    check(device, "histogram", hi)  # int data: float64 edges, 2-d flattened
    check(device, "histogram", hi.T[::2], bins=4, range=(2, 7))
    check(device, "histogram", np.full(7, 3.0, np.float64))  # one value: range +- 0.5
    check(device, "histogram", np.zeros(0, np.float64), bins=3)


@pytest.mark.parametrize("estimator", ["auto", "fd", "sturges", "sqrt", "rice", "scott",
                                       "doane", "stone"])
def test_histogram_bin_estimators_match_numpy(device, estimator):
    h = np.random.default_rng(6).normal(size=150)
    check(device, "histogram", h, bins=estimator)
    check(device, "histogram", h, bins=estimator, range=(-1.0, 2.0))


def test_histogram_refuses_what_numpy_refuses(device):
    x = ga.asarray(np.array([1.0, NAN, 2.0]), device=device)
    with pytest.raises(ValueError, match="not finite"):
        np.histogram(x)
    with pytest.raises(ValueError, match="positive"):
        ga.histogram(x, bins=0, range=(0, 1))
    with pytest.raises(ValueError, match="monotonically"):
        ga.histogram(x, bins=[2.0, 1.0])
    with pytest.raises(ValueError, match="not a valid estimator"):
        ga.histogram(x, bins="best", range=(0, 1))
    with pytest.raises(TypeError, match="weighted"):
        ga.histogram(x, bins="auto", weights=x)
    with pytest.raises(ValueError, match="max must be larger"):
        ga.histogram(x, range=(2, 1))


def test_histogramdd_and_histogram2d_match_numpy(device):
    rng = np.random.default_rng(7)
    s = rng.normal(size=(80, 3))
    w = rng.random(80)
    for bins in (5, (2, 3, 4), [[-1, 0, 1], [0, 1], [-2, 2]]):
        for density in (None, True):
            check(device, "histogramdd", s, bins=bins, density=density)
    want = np.histogramdd(s, bins=4, weights=w, range=[(-1, 1), (-2, 2), (0, 1)])
    for fn in (np.histogramdd, ga.histogramdd):
        got = fn(ga.asarray(s, device=device), bins=4, weights=ga.asarray(w, device=device),
                 range=[(-1, 1), (-2, 2), (0, 1)])
        _same(_get(got), want)
    x, y = s[:, 0].copy(), s[:, 1].copy()
    check(device, "histogram2d", (x, y), bins=(4, 6))
    check(device, "histogram2d", (x, y), bins=3, density=True)
    want = np.histogram2d(x, y, bins=[[-1, 0, 1], [-2, 0, 2]], weights=w)
    got = np.histogram2d(ga.asarray(x, device=device), ga.asarray(y, device=device),
                         bins=[[-1, 0, 1], [-2, 0, 2]], weights=ga.asarray(w, device=device))
    _same(_get(got), want)


def test_bincount_matches_numpy(device):
    rng = np.random.default_rng(8)
    for dt in ("int64", "uint8", "bool"):
        h = rng.integers(0, 9, 40).astype(dt)
        check(device, "bincount", h)
        check(device, "bincount", h, minlength=20)
        w = rng.random(40)
        want = np.bincount(h, weights=w)
        for fn in (np.bincount, ga.bincount):
            got = fn(ga.asarray(h, device=device), weights=ga.asarray(w, device=device))
            _same(got.get(), want)
    check(device, "bincount", np.zeros(0, np.int64), minlength=3)
    check(device, "bincount", np.arange(10)[::3])
    with pytest.raises(ValueError, match="negative"):
        ga.bincount(ga.asarray(np.array([1, -1]), device=device))
    with pytest.raises(TypeError, match="safe"):
        np.bincount(ga.asarray(np.array([1.0]), device=device))
    with pytest.raises(ValueError, match="minlength"):
        ga.bincount(ga.asarray(np.array([1]), device=device), minlength=-1)


def test_digitize_matches_numpy(device):
    rng = np.random.default_rng(9)
    h = rng.normal(size=(4, 5)) * 3
    h[0, 0] = 1.0
    for bins in ([-2.0, 0.0, 1.0, 2.5], [2.5, 1.0, 0.0, -2.0], [1.0], [0.0, 0.0, 1.0]):
        for right in (False, True):
            want = np.digitize(h, bins, right=right)
            for fn in (np.digitize, ga.digitize):
                got = fn(ga.asarray(h, device=device), ga.asarray(np.array(bins), device=device),
                         right=right)
                _same(got.get(), want)
    got = ga.digitize(ga.asarray(h.T[::2].astype(np.float32), device=device), [0.0, 1.0])
    _same(got.get(), np.digitize(h.T[::2].astype(np.float32), [0.0, 1.0]))
    with pytest.raises(ValueError, match="monotonically"):
        ga.digitize(ga.asarray(h, device=device), [0.0, 2.0, 1.0])


# --------------------------------------------------------------------------- the rest

def test_interp_matches_numpy(device):
    rng = np.random.default_rng(5)
    xp = np.sort(rng.normal(size=8))
    fp = rng.normal(size=8)
    x = np.concatenate([rng.normal(size=20) * 2, xp[[0, 3, 7]], [NAN]])
    check(device, "interp", (x, xp, fp))
    check(device, "interp", (x, xp, fp), left=-5.0, right=7.0)
    check(device, "interp", (x, xp, fp), period=2.5)
    check(device, "interp", (x, xp[:1], fp[:1]))
    check(device, "interp", (x[::2], xp, (fp + 1j * fp)))
    check(device, "interp", (x.astype(np.float32), xp, fp))
    check(device, "interp", (x.reshape(4, 6), np.arange(4), np.arange(4) ** 2))
    with pytest.raises(ValueError, match="empty"):
        ga.interp(ga.asarray(x, device=device), [], [])
    with pytest.raises(ValueError, match="same length"):
        ga.interp(ga.asarray(x, device=device), [0.0, 1.0], [1.0])
    with pytest.raises(ValueError, match="period"):
        ga.interp(ga.asarray(x, device=device), [0.0, 1.0], [1.0, 2.0], period=0)


def test_ediff1d_and_trapezoid_match_numpy(device):
    rng = np.random.default_rng(10)
    h = rng.integers(0, 9, (3, 4))
    check(device, "ediff1d", h)
    check(device, "ediff1d", (h, np.array([1]), np.array([7, 8])))
    check(device, "ediff1d", h.astype(np.float64).T, to_begin=-1)
    check(device, "ediff1d", np.zeros(0, np.int8))
    with pytest.raises(TypeError, match="same_kind"):
        ga.ediff1d(ga.asarray(h, device=device), to_end=[0.5])
    y = rng.normal(size=(4, 6))
    x = np.cumsum(rng.random(6))
    for dt in _dtypes(device, "int16", "float16"):
        check(device, "trapezoid", y.astype(dt))
    check(device, "trapezoid", (y, x))
    check(device, "trapezoid", (y.T, y.T), axis=0)
    check(device, "trapezoid", y, dx=0.5, axis=0)
    check(device, "trapezoid", y[:, :1])


def test_average_matches_numpy(device):
    rng = np.random.default_rng(11)
    y = rng.normal(size=(4, 6))
    w = rng.random((4, 6))
    check(device, "average", y)
    check(device, "average", rng.integers(0, 5, (3, 4)), axis=0, returned=True)
    for fn in (np.average, ga.average):
        A = ga.asarray
        _same(_get(fn(A(y, device=device), axis=1, weights=A(w, device=device))),
              np.average(y, axis=1, weights=w))
        _same(_get(fn(A(y, device=device), axis=1, weights=A(w[0], device=device),
                      returned=True)), np.average(y, axis=1, weights=w[0], returned=True))
        _same(_get(fn(A(y.T, device=device), axis=(0, 1), weights=A(w.T, device=device),
                      keepdims=True)), np.average(y.T, axis=(0, 1), weights=w.T, keepdims=True))
    with pytest.raises(ZeroDivisionError):
        ga.average(ga.asarray(y, device=device), weights=ga.zeros_like(
            ga.asarray(y, device=device)))
    with pytest.raises(TypeError, match="Axis must be specified"):
        ga.average(ga.asarray(y, device=device), weights=ga.asarray(w[0], device=device))


def test_cov_and_corrcoef_match_numpy(device):
    rng = np.random.default_rng(12)
    y = rng.normal(size=(4, 6))
    check(device, "cov", y)
    check(device, "cov", y.T, rowvar=False, bias=True)
    check(device, "cov", (y[0], y[1]))
    check(device, "cov", rng.integers(0, 5, (3, 5)), ddof=2)
    fw = rng.integers(1, 4, 6)
    aw = rng.random(6)
    want = np.cov(y, fweights=fw, aweights=aw)
    for fn in (np.cov, ga.cov):
        got = fn(ga.asarray(y, device=device), fweights=ga.asarray(fw, device=device),
                 aweights=ga.asarray(aw, device=device))
        _same(got.get(), want)
    check(device, "cov", y[:, :1])  # one observation: dof <= 0 warns
    check(device, "corrcoef", y)
    check(device, "corrcoef", (y[0], y[1]))
    check(device, "corrcoef", y.T, rowvar=False)


def test_gradient_matches_numpy(device):
    rng = np.random.default_rng(13)
    f = rng.normal(size=(5, 6))
    xs = np.cumsum(rng.random(6))
    for eo in (1, 2):
        check(device, "gradient", f, edge_order=eo)
        check(device, "gradient", f, 2.0, edge_order=eo)
        check(device, "gradient", (f, xs), axis=1, edge_order=eo)
        check(device, "gradient", (f.T, xs), axis=0, edge_order=eo)
        check(device, "gradient", (f, np.arange(5.0), xs), edge_order=eo)
        check(device, "gradient", (f, np.arange(6.0)), axis=-1, edge_order=eo)
    check(device, "gradient", rng.integers(0, 9, 7))
    for dt in _dtypes(device, "float16"):
        check(device, "gradient", f.astype(dt)[::2], axis=(1, 0))
    check(device, "gradient", f[::2], axis=(1, 0))
    with pytest.raises(ValueError, match="too small"):
        ga.gradient(ga.asarray(np.ones(2), device=device), edge_order=2)
    with pytest.raises(TypeError, match="invalid number of arguments"):
        ga.gradient(ga.asarray(f, device=device), 1.0, 2.0, 3.0)


def test_temporaries_go_back_to_the_pool(device, used):
    h = _data("float64", (4, 5))
    x = ga.asarray(h, device=device)
    w = ga.asarray(np.abs(h[0]) + 1, device=device)
    calls = (lambda: [np.nanmean(x, axis=0)], lambda: [np.nanvar(x, axis=1, ddof=1)],
             lambda: [np.nanmax(x)], lambda: [np.nanmedian(x, axis=1)],
             lambda: [np.quantile(x, [0.2, 0.9], axis=0, method="hazen")],
             lambda: list(np.histogram(x, bins=4, range=(-5, 5))),
             lambda: [np.interp(x, ga.sort(x[0]), w)], lambda: [np.cov(x)],
             lambda: list(np.gradient(x)), lambda: [np.average(x, axis=1, weights=w)])
    for call in calls:
        for r in call():  # warm: kernels, plans
            r.free()
    before = used()
    for call in calls:
        for r in call():
            r.free()
    assert used() == before


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_quantile_hypothesis(device, data):
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=2).map(tuple))
    n = int(np.prod(shape))
    vals = data.draw(st.lists(st.sampled_from([NAN, -2.0, 0.0, 0.5, 1.0, 7.0]), min_size=n,
                              max_size=n))
    h = np.array(vals).reshape(shape)
    q = data.draw(st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, 1.0]), min_size=1,
                           max_size=3))
    method = data.draw(st.sampled_from(METHODS))
    axis = data.draw(st.sampled_from([None, 0, -1]))
    check(device, "quantile", h, q, axis=axis, method=method)
    check(device, "nanmedian", h, axis=axis)


@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_histogram_and_bincount_hypothesis(device, data):
    ints = data.draw(st.lists(st.integers(0, 6), min_size=0, max_size=12))
    k = np.array(ints, np.int64)
    check(device, "bincount", k, minlength=data.draw(st.integers(0, 8)))
    h = k.astype(np.float64) * 0.5 - 1
    bins = data.draw(st.sampled_from([1, 3, 4, [-1.0, 0.0, 0.5, 2.0]]))
    range_ = data.draw(st.sampled_from([None, (-0.5, 1.0), (0.0, 0.0)]))
    check(device, "histogram", h, bins=bins, range=range_)
