"""Real clients of the array API on gpuarrays arrays, on every device (docs/compute.md,
"Libraries that speak the array API"): scikit-learn with ``array_api_dispatch``,
array-api-extra and einops.  Results must be gpuarrays arrays on the input's device (or
the Python scalars the library returns) and equal the library's results on NumPy arrays.

A case that needs a namespace function this build lacks (``ga.linalg.svd`` before the
linear algebra functions are merged, ``ga.unique_values`` before sorting ...) must fail
with the library's ``AttributeError`` naming it; once the function exists the same case
checks the result.  The libraries are skipped only when they are not installed.
``tests/conftest.py`` sets ``SCIPY_ARRAY_API=1`` before anything imports SciPy.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import gpuarrays as ga


def _missing(*paths: str) -> list[str]:
    """The namespace paths (``"linalg.svd"``) this build lacks."""
    out = []
    for path in paths:
        obj = ga
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if obj is None:
            out.append(path)
    return out


def _check(device, call, oracle, needs=(), rtol=1e-7, host_only=()):
    """``call()`` equals ``oracle()``; or, when ``needs`` names a missing namespace
    function, ``call()`` raises the ``AttributeError`` naming one of them.

    ``host_only``: namespace functions that may exist for cpu only (the linalg extension
    on devices without a linear algebra library): off cpu, ``call()`` either works or
    raises the namespace's ``NotImplementedError`` naming the function and the device
    (an explicit refusal, never a silent host copy)."""
    missing = _missing(*needs)
    if missing:
        names = "|".join(part for p in missing for part in p.split("."))
        with pytest.raises(AttributeError, match=names):
            call()
        return
    if host_only and device.backend != "cpu":
        try:
            got = call()
        except NotImplementedError as e:
            assert str(device) in str(e) and any(f in str(e) for f in host_only), e
            return
        _same(got, oracle(), device, rtol)
        return
    _same(call(), oracle(), device, rtol)


def _same(got, want, device, rtol):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w, device, rtol)
        return
    if isinstance(want, np.ndarray):
        assert isinstance(got, ga.GPUArray), type(got)
        assert got.device == device
        assert got.shape == want.shape
        np.testing.assert_allclose(got.get(), want, rtol=rtol, atol=1e-12)
        return
    if isinstance(got, ga.GPUArray):
        assert got.device == device
        got = got.get()
    np.testing.assert_allclose(got, want, rtol=rtol)


def _float(device):
    return np.float64 if device.supports(np.float64) else np.float32


# --------------------------------------------------------------------------- scikit-learn
sklearn = pytest.importorskip("sklearn", reason="scikit-learn is not installed")


@pytest.fixture
def dispatch():
    if os.environ.get("SCIPY_ARRAY_API") != "1":
        pytest.fail("SCIPY_ARRAY_API=1 must be set before SciPy is imported (tests/conftest.py)")
    with sklearn.config_context(array_api_dispatch=True):
        yield


def _data(device, n=40, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(n, d)) * [1.0, 5.0, 0.1, 2.0][:d] + [0.0, 3.0, -1.0, 10.0][:d])
    return X.astype(_float(device))


SCALERS = ["StandardScaler", "MinMaxScaler", "MaxAbsScaler", "Normalizer"]


@pytest.mark.parametrize("name", SCALERS)
def test_sklearn_scalers(device, dispatch, name):
    from sklearn import preprocessing

    X = _data(device)
    dX = ga.asarray(X, device=device)
    est = getattr(preprocessing, name)()
    got = est.fit_transform(dX)
    want = getattr(preprocessing, name)().fit_transform(X)
    rtol = 1e-6 if X.dtype == np.float32 else 1e-10
    _same(got, want, device, rtol)
    back = est.transform(dX[:5])  # a fitted estimator transforms new device data
    _same(back, want[:5], device, rtol)
    if name == "StandardScaler":  # the fitted state lives on the device too
        assert isinstance(est.mean_, ga.GPUArray) and est.mean_.device == device
        _same(est.inverse_transform(got), X, device, 1e-5)


@pytest.mark.parametrize("name", ["r2_score", "mean_squared_error"])
def test_sklearn_regression_metrics(device, dispatch, name):
    from sklearn import metrics

    rng = np.random.default_rng(1)
    y = rng.normal(size=50).astype(_float(device))
    p = (y + rng.normal(scale=0.3, size=50)).astype(y.dtype)
    fn = getattr(metrics, name)
    got = fn(ga.asarray(y, device=device), ga.asarray(p, device=device))
    assert np.isclose(float(got), fn(y, p), rtol=1e-5)


def test_sklearn_accuracy_score(device, dispatch):
    from sklearn.metrics import accuracy_score

    rng = np.random.default_rng(2)
    y, p = rng.integers(0, 3, 60), rng.integers(0, 3, 60)
    _check(device,
           lambda: float(accuracy_score(ga.asarray(y, device=device),
                                        ga.asarray(p, device=device))),
           lambda: accuracy_score(y, p), needs=("unique_values",))


def test_sklearn_pca_full(device, dispatch):
    from sklearn.decomposition import PCA

    X = _data(device, n=30)
    dX = ga.asarray(X, device=device)

    def run(x):
        pca = PCA(n_components=2, svd_solver="full").fit(x)
        return pca.transform(x), pca.explained_variance_

    def fitted():
        z, var = run(dX)
        return abs(z), var  # components are defined up to their sign

    def oracle():
        z, var = run(X)
        return np.abs(z), var

    _check(device, fitted, oracle, needs=("linalg.svd",), rtol=1e-4, host_only=("svd",))


def test_sklearn_linear_discriminant_analysis(device, dispatch):
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    X = _data(device, n=60)
    y = (X[:, 0] + X[:, 3] > 10).astype(np.int64) + (X[:, 1] > 3)

    def fitted():
        m = LinearDiscriminantAnalysis(solver="svd").fit(ga.asarray(X, device=device),
                                                         ga.asarray(y, device=device))
        return m.predict(ga.asarray(X, device=device))

    def oracle():
        return LinearDiscriminantAnalysis(solver="svd").fit(X, y).predict(X)

    _check(device, fitted, oracle, needs=("unique_values", "linalg.svd"), host_only=("svd",))


def test_sklearn_sees_the_namespace_and_device(device, dispatch):
    """What scikit-learn asks of an array library besides the functions themselves."""
    from sklearn.utils._array_api import get_namespace_and_device

    dX = ga.asarray(_data(device), device=device)
    xp, is_array_api, dev = get_namespace_and_device(dX)
    assert is_array_api and dev == device
    assert xp.__name__ in ("gpuarrays", "sklearn.externals.array_api_compat.gpuarrays") or \
        xp.sum is ga.sum
    info = xp.__array_namespace_info__()
    assert "float32" in info.dtypes(device=device)
    mask = dX > 3
    dX[mask] = 0.0  # boolean mask assignment
    assert float(ga.max(dX)) <= 3


def test_sklearn_moves_arrays_between_namespaces(device, dispatch):
    """scikit-learn's move_to: DLPack both ways (from_dlpack(device=), __dlpack__ with
    dl_device=CPU for a copy to the host), as it does for mixed inputs and fitted state."""
    from sklearn.utils._array_api import move_to

    h = _data(device, n=6)
    a = ga.asarray(h, device=device)
    back = move_to(a, xp=np, device="cpu")
    assert type(back) is np.ndarray
    np.testing.assert_array_equal(back, h)
    there = move_to(h[:, ::-1], xp=ga, device=device)
    assert isinstance(there, ga.GPUArray) and there.device == device
    np.testing.assert_array_equal(there.get(), h[:, ::-1])


# ------------------------------------------------------------------------ array-api-extra
xpx = pytest.importorskip("array_api_extra", reason="array-api-extra is not installed")

# (name, call over (xpx, ga-or-np module, a, n, i, device) -> result, needs)
XPX_CASES = [
    ("angle", lambda x, m, a, n, i, d: x.angle(a * 1j + 1), ()),
    ("apply_where", lambda x, m, a, n, i, d: x.apply_where(a > 2, (a,), lambda v: v * 2,
                                                           fill_value=0.0), ("broadcast_arrays",)),
    ("argpartition", lambda x, m, a, n, i, d: x.argpartition(a[0], 2)[2:3], ("argsort",)),
    ("at", lambda x, m, a, n, i, d: x.at(a)[a > 3].add(1.0), ()),
    ("atleast_nd", lambda x, m, a, n, i, d: x.atleast_nd(a[0], ndim=3), ()),
    ("cov", lambda x, m, a, n, i, d: x.cov(a), ("matrix_transpose",)),
    ("create_diagonal", lambda x, m, a, n, i, d: x.create_diagonal(a[0]), ()),
    ("deg2rad", lambda x, m, a, n, i, d: x.deg2rad(a), ()),
    ("isclose", lambda x, m, a, n, i, d: x.isclose(a, a + 1e-9), ("broadcast_arrays",)),
    ("isin", lambda x, m, a, n, i, d: x.isin(i, i[:2]), ()),
    ("kron", lambda x, m, a, n, i, d: x.kron(a[:2, :2], a[:2, :3]), ()),
    ("nan_to_num", lambda x, m, a, n, i, d: x.nan_to_num(n), ()),
    ("nanmax", lambda x, m, a, n, i, d: x.nanmax(n), ()),
    ("nanmean", lambda x, m, a, n, i, d: x.nanmean(n), ()),
    ("nansum", lambda x, m, a, n, i, d: x.nansum(n), ()),
    ("nunique", lambda x, m, a, n, i, d: x.nunique(i), ("unique_counts",)),
    ("one_hot", lambda x, m, a, n, i, d: x.one_hot(i % 3, 3), ()),
    ("pad", lambda x, m, a, n, i, d: x.pad(a, 1), ()),
    ("partition", lambda x, m, a, n, i, d: x.partition(a[0], 2)[2:3], ("sort",)),
    ("searchsorted", lambda x, m, a, n, i, d: x.searchsorted(a[0], a[1] - 4.0), ("searchsorted",)),
    ("setdiff1d", lambda x, m, a, n, i, d: x.setdiff1d(i, i[:1]), ("unique_values",)),
    ("sinc", lambda x, m, a, n, i, d: x.sinc(a), ()),
    ("union1d", lambda x, m, a, n, i, d: x.union1d(i, i + 1), ("unique_values",)),
    ("unravel_index", lambda x, m, a, n, i, d: x.unravel_index(i, (3, 4)), ()),
    ("tril_indices", lambda x, m, a, n, i, d: x.tril_indices(3, xp=m, device=d), ("nonzero",)),
]


@pytest.mark.parametrize(("name", "call", "needs"), XPX_CASES, ids=[c[0] for c in XPX_CASES])
def test_array_api_extra(device, name, call, needs):
    dt = _float(device)
    a = (np.arange(12, dtype=dt).reshape(3, 4) - 5) * 0.5
    n = np.array([1.0, np.nan, 3.0, np.inf, -2.5], dtype=dt)
    i = np.array([3, 7, 11, 2], dtype=np.int64)
    da, dn, di = (ga.asarray(v, device=device) for v in (a, n, i))
    _check(device, lambda: call(xpx, ga, da, dn, di, device),
           lambda: call(xpx, np, a, n, i, None), needs=needs, rtol=1e-6)


# ------------------------------------------------------------------------------- einops
einops_array_api = pytest.importorskip("einops.array_api", reason="einops is not installed")

EINOPS_CASES = [
    ("rearrange", "a b c -> c (a b)", {}, ("permute_dims",)),
    ("rearrange", "a b c -> (a b) c", {}, ()),
    ("reduce", "a b c -> a", {"reduction": "sum"}, ()),
    ("reduce", "a b c -> a c", {"reduction": "max"}, ("permute_dims",)),
    ("reduce", "a (b1 b2) c -> a c", {"reduction": "mean", "b1": 3}, ("permute_dims",)),
    ("repeat", "a b c -> a b c r", {"r": 2}, ()),
    ("repeat", "a b c -> (a r) b c", {"r": 2}, ()),
]


@pytest.mark.parametrize(("fn", "pattern", "kwargs", "needs"), EINOPS_CASES,
                         ids=[f"{c[0]}-{n}" for n, c in enumerate(EINOPS_CASES)])
def test_einops(device, fn, pattern, kwargs, needs):
    import einops

    x = np.arange(24, dtype=_float(device)).reshape(2, 3, 4)
    kw = dict(kwargs)
    reduction = kw.pop("reduction", None)
    args = (pattern,) if reduction is None else (pattern, reduction)
    dx = ga.asarray(x, device=device)
    _check(device, lambda: getattr(einops_array_api, fn)(dx, *args, **kw),
           lambda: getattr(einops, fn)(x, *args, **kw), needs=needs)
