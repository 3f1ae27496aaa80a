"""NumPy's index helpers, searching, sets, logic comparisons, partition and bit packing
(_compute/numpy_api/indexing.py) on every device, both ways: ``np.<name>(gpuarray)`` through
the protocol and ``ga.<name>(...)``.  NumPy on the same host data is the oracle (values and
dtype); layouts include transposes, steps and zero-size arrays."""

from __future__ import annotations

import gc
import inspect

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuarrays as ga

SET = settings(max_examples=12, deadline=None, derandomize=True, database=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture,
                                      HealthCheck.too_slow])

NAMES = ["argwhere", "flatnonzero", "choose", "compress", "extract", "place", "put",
         "put_along_axis", "putmask", "select", "unravel_index", "ravel_multi_index",
         "lexsort", "partition", "argpartition", "sort_complex", "isclose", "allclose",
         "array_equal", "array_equiv", "unique", "intersect1d", "union1d", "setdiff1d",
         "setxor1d", "packbits", "unpackbits"]


def _dtypes(device, names=("bool", "int8", "uint16", "int64", "float16", "float32",
                           "float64", "complex64")):
    return [np.dtype(n) for n in names if device.supports(np.dtype(n))]


def _host(shape, dtype, seed=0, zeros=True):
    rng = np.random.default_rng(seed)
    v = rng.integers(-3 if np.dtype(dtype).kind != "u" else 0, 4, size=shape)
    if not zeros:
        v[v == 0] = 5
    if np.dtype(dtype).kind == "b":
        return (v > 0)
    if np.dtype(dtype).kind == "c":
        return (v + 1j * rng.integers(0, 2, size=shape)).astype(dtype)
    return v.astype(dtype)


def _same(got, expected):
    """``got`` (a GPUArray, a tuple of them, or a Python bool) is NumPy's ``expected``."""
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            _same(g, e)
        return
    if isinstance(expected, bool):
        assert type(got) is bool and got == expected
        return
    assert isinstance(got, ga.GPUArray), type(got)
    e = np.asarray(expected)
    g = got.get()
    assert g.dtype == e.dtype, (g.dtype, e.dtype)
    assert g.shape == e.shape, (g.shape, e.shape)
    np.testing.assert_array_equal(g, e)


def _both(name, garrays, harrays, **kw):
    """Run ``np.<name>`` and ``ga.<name>`` on the device arrays and NumPy on the host ones."""
    expected = getattr(np, name)(*harrays, **kw)
    for fn in (getattr(np, name), getattr(ga, name)):
        _same(fn(*garrays, **kw), expected)
    return expected


def _layouts(h, device):
    """(host, device) pairs: contiguous, transposed, stepped."""
    g = ga.asarray(h, device=device)
    out = [(h, g)]
    if h.ndim >= 2:
        out.append((h.T, g.T))
    if h.ndim >= 1:
        out.append((h[::2], g[::2]))
    return out


def test_signatures_are_numpys():
    for name in NAMES:
        assert inspect.signature(getattr(ga, name)) == inspect.signature(getattr(np, name)), \
            name


# --------------------------------------------------------------------------- nonzero family
def test_argwhere_flatnonzero(device):
    for dt in _dtypes(device, ("bool", "uint16", "float16", "float64", "complex64")):
        for shape in [(3, 4), (5,), (0, 3)]:
            for h, g in _layouts(_host(shape, dt), device):
                _both("argwhere", [g], [h])
                _both("flatnonzero", [g], [h])
    for v in (0, 3):
        _both("argwhere", [ga.asarray(np.int32(v), device=device)], [np.int32(v)])
        _both("flatnonzero", [ga.asarray(np.int32(v), device=device)], [np.int32(v)])


# --------------------------------------------------------------------------- gather
def test_choose(device):
    h = np.array([[0, 1, 2], [2, 1, 0]])
    choices = [np.arange(3, dtype=np.int8), np.full((2, 3), 7, np.int16),
               np.arange(6, dtype=np.float32).reshape(2, 3)]
    gc_ = [ga.asarray(c, device=device) for c in choices]
    g = ga.asarray(h, device=device)
    _both("choose", [g, gc_], [h, choices])
    _both("choose", [g.T, [c.T for c in gc_[1:]]], [h.T, [c.T for c in choices[1:]]],
          mode="clip")
    wild = np.array([-4, -1, 0, 3, 7])
    for mode in ("wrap", "clip"):
        stack = np.stack([np.arange(5) * k for k in range(3)])
        _both("choose", [ga.asarray(wild, device=device), ga.asarray(stack, device=device)],
              [wild, stack], mode=mode)
    out = ga.empty((2, 3), np.float32, device=device)
    assert np.choose(g, gc_, out=out) is out
    _same(out, np.choose(h, choices))
    with pytest.raises(ValueError, match=r"invalid entry .* 3 .*mode="):
        ga.choose(ga.asarray(np.array([0, 3, 1]), device=device), gc_[:1] * 3)
    with pytest.raises(TypeError, match="integers"):
        ga.choose(ga.asarray(np.array([0.5]), device=device), gc_)
    with pytest.raises(ValueError, match="mode must be"):
        ga.choose(g, gc_, mode="bounce")


def test_compress_extract(device):
    for dt in _dtypes(device, ("int32", "complex64")):
        h = _host((4, 5), dt, seed=1)
        for hh, gg in _layouts(h, device):
            for axis in (None, 0, -1):
                n = hh.size if axis is None else hh.shape[axis]
                cond = (np.arange(n) % 3 != 1)[: max(n - 1, 1)]
                _both("compress", [ga.asarray(cond, device=device), gg], [cond, hh],
                      axis=axis)
            cond = _host(hh.shape, np.int8, seed=2)
            _both("extract", [ga.asarray(cond, device=device), gg], [cond, hh])
    z = np.zeros((0, 3), np.float32)
    _both("compress", [ga.asarray(np.array([True, False, True]), device=device),
                       ga.asarray(z, device=device)], [np.array([True, False, True]), z],
          axis=1)
    g = ga.asarray(np.arange(3), device=device)
    with pytest.raises(IndexError, match="beyond the axis' size 3"):
        ga.compress(ga.asarray(np.array([0, 0, 0, 1]), device=device), g)
    with pytest.raises(ValueError, match="condition must be 1-d"):
        ga.compress(ga.asarray(np.ones((1, 3), bool), device=device), g)
    out = ga.empty((2,), np.int64, device=device)
    assert np.compress(ga.asarray(np.array([1, 0, 1]), device=device), g, out=out) is out
    _same(out, np.array([0, 2]))


# --------------------------------------------------------------------------- in place
def _inplace(device, dt, call, noncontig):
    """``call(module, a, up)`` writes into ``a`` and returns None, for NumPy on host data and
    for ``np`` and ``ga`` on device arrays of the same values and layout; ``up`` turns host
    data into the module's kind of array."""
    def fresh(make):
        a = make(_host((4, 6), dt, seed=3))
        return a.T[::2] if noncontig else a

    h = fresh(np.asarray)
    assert call(np, h, np.asarray) is None
    up = lambda x: ga.asarray(x, device=device)  # noqa: E731
    for module in (np, ga):
        g = fresh(up)
        assert call(module, g, up) is None
        _same(g, h)


def test_place_put_putmask_put_along_axis(device):
    for dt in _dtypes(device, ("bool", "int64", "float16", "float32")):
        v = _host((5,), dt, seed=4)
        for nc in (False, True):
            _inplace(device, dt, lambda m, a, up, v=v: m.place(a, up(np.arange(a.size).reshape(
                a.shape) % 3 == 0), up(v[:2])), nc)
            _inplace(device, dt, lambda m, a, up, v=v: m.putmask(a, up(np.arange(a.size).reshape(
                a.shape) % 4 == 1), up(v)), nc)
            _inplace(device, dt, lambda m, a, up, v=v: m.put(a, up(np.array([0, -1, 7])), up(v[:2])),
                     nc)
            _inplace(device, dt, lambda m, a, up, v=v: m.put(a, up(np.array([-30, 100, 5])),
                                                        up(v[:3]), mode="clip"), nc)
            _inplace(device, dt, lambda m, a, up, v=v: m.put(a, up(np.array([25, 14, -1])),
                                                        up(v[:3]), mode="wrap"), nc)
            _inplace(device, dt, lambda m, a, up, v=v: m.put_along_axis(
                a, up((np.arange(a.shape[0]) * 2 % a.shape[1]).reshape(-1, 1)),
                up(v[:1]), axis=1), nc)
            _inplace(device, dt, lambda m, a, up, v=v: m.put_along_axis(
                a, up((np.arange(a.shape[1]) * 3 % a.shape[0]).reshape(1, -1)),
                up(v[:1]), axis=0), nc)
        _inplace(device, dt, lambda m, a, up, v=v: m.put_along_axis(
            a, up(np.array([3, 0, 5])), up(v[:3]), axis=None), False)
    g = ga.zeros((3,), np.int32, device=device)
    with pytest.raises(IndexError, match="index 5 is out of bounds for size 3"):
        ga.put(g, ga.asarray(np.array([0, 5]), device=device), 1)
    with pytest.raises(ValueError, match="mask and data must be the same size"):
        ga.putmask(g, ga.asarray(np.array([True]), device=device), 1)
    with pytest.raises(ValueError, match="empty vals"):
        ga.place(g, ga.asarray(np.array([True, False, True]), device=device),
                 ga.asarray(np.array([], np.int32), device=device))
    with pytest.raises(ValueError, match="read-only"):
        ga.put(ga.broadcast_to(g, (2, 3)), [0], 1)
    with pytest.raises(TypeError, match="ga.asarray"):
        ga.put(np.zeros(3), [0], 1)
    _same(g, np.zeros(3, np.int32))  # nothing written by the refused calls


# --------------------------------------------------------------------------- select
def test_select(device):
    h = np.arange(12, dtype=np.int16).reshape(3, 4)
    g = ga.asarray(h, device=device)
    for hh, gg in _layouts(h, device):
        conds = [hh < 3, hh > 8]
        gconds = [gg < 3, gg > 8]
        _both("select", [gconds, [gg, gg * 2]], [conds, [hh, hh * 2]])
        _both("select", [gconds, [gg, 1.5]], [conds, [hh, 1.5]], default=-1)
        dflt = np.full(hh.shape[-1], 9, np.int8)
        e = np.select(conds, [hh, hh], default=dflt)
        for fn in (np.select, ga.select):
            _same(fn(gconds, [gg, gg], default=ga.asarray(dflt, device=device)), e)
    if device.supports(np.float16):
        c = ga.asarray(np.ones(3, np.float16), device=device)
        _both("select", [[c > 0], [c]], [[np.ones(3) > 0], [np.ones(3, np.float16)]])
    with pytest.raises(TypeError, match="invalid entry 0 in condlist"):
        ga.select([g], [g])
    with pytest.raises(ValueError, match="same length"):
        ga.select([g > 1], [g, g])
    with pytest.raises(ValueError, match="empty condition list"):
        ga.select([], [])


# --------------------------------------------------------------------------- flat <-> multi
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.sampled_from("CF"),
       st.integers(0, 2**31))
@SET
def test_unravel_ravel_round_trip(device, dims, order, seed):
    dims = tuple(dims)
    size = int(np.prod(dims))
    flat = np.random.default_rng(seed).integers(0, size, size=(2, 3)).astype(np.int32)
    g = ga.asarray(flat, device=device)
    coords = _both("unravel_index", [g, dims], [flat, dims], order=order)
    gcoords = tuple(ga.asarray(c, device=device) for c in coords)
    _both("ravel_multi_index", [gcoords, dims], [coords, dims], order=order)
    _both("unravel_index", [g.T[::2], dims], [flat.T[::2], dims], order=order)


def test_unravel_ravel_modes_and_errors(device):
    a = np.array([-3, 0, 4, 9])
    b = np.array([2, -1, 1, 5])
    ga_, gb = (ga.asarray(x, device=device) for x in (a, b))
    for mode in ("wrap", "clip", ("clip", "wrap"), ("wrap", "clip")):
        for order in "CF":
            _both("ravel_multi_index", [(ga_, gb), (3, 4)], [(a, b), (3, 4)], mode=mode,
                  order=order)
    z = np.zeros((0,), np.int64)
    _both("unravel_index", [ga.asarray(z, device=device), (2, 3)], [z, (2, 3)])
    _both("unravel_index", [ga.asarray(np.uint8(5), device=device), 7], [np.uint8(5), 7])
    with pytest.raises(ValueError, match="index 6 is out of bounds for array with size 6"):
        ga.unravel_index(ga.asarray(np.array([1, 6]), device=device), (2, 3))
    with pytest.raises(TypeError, match="only int indices"):
        ga.unravel_index(ga.asarray(np.array([1.0]), device=device), (2, 3))
    with pytest.raises(ValueError, match=r"invalid entry in coordinates array: -3 .*\[0, 3\)"):
        ga.ravel_multi_index((ga_, gb), (3, 4))
    with pytest.raises(ValueError, match="length 2"):
        ga.ravel_multi_index((ga_,), (3, 4))


# --------------------------------------------------------------------------- sorting
@given(st.integers(1, 3), st.integers(0, 9), st.sampled_from(["int8", "uint32", "float32",
                                                              "bool", "float64"]),
       st.integers(0, 2**31))
@SET
def test_lexsort(device, nkeys, n, dtname, seed):
    dt = np.dtype(dtname)
    if not device.supports(dt):
        dt = np.dtype(np.float32)
    rng = np.random.default_rng(seed)
    keys = [rng.integers(0, 3, size=(n,)).astype(dt) for _ in range(nkeys)]
    if dt.kind == "f" and n:
        keys[0][0] = np.nan
    gkeys = [ga.asarray(k, device=device) for k in keys]
    _both("lexsort", [tuple(gkeys)], [keys])  # NumPy dispatches a tuple of keys, not a list
    _same(ga.lexsort(gkeys), np.lexsort(keys))
    k2 = np.stack([rng.integers(0, 3, size=(3, 4)) for _ in range(2)])
    g2 = ga.asarray(k2, device=device)
    _both("lexsort", [g2], [k2])
    _both("lexsort", [g2], [k2], axis=0)
    _both("lexsort", [(g2[0].T, g2[1].T)], [(k2[0].T, k2[1].T)])


def _is_partition(p, src, kth, axis):
    """``p`` is ``src`` partitioned at every ``kth`` along ``axis``."""
    s = np.sort(src, axis=axis)
    np.testing.assert_array_equal(np.sort(p, axis=axis), s)
    p = np.moveaxis(p, axis, -1)
    s = np.moveaxis(s, axis, -1)
    for k in np.atleast_1d(kth):
        np.testing.assert_array_equal(p[..., k], s[..., k])
        kk = k % p.shape[-1]
        assert (p[..., :kk] <= p[..., kk:kk + 1]).all()
        assert (p[..., kk + 1:] >= p[..., kk:kk + 1]).all()


@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.integers(0, 2**31),
       st.sampled_from(["int16", "float32", "uint64"]), st.data())
@SET
def test_partition_argpartition(device, shape, seed, dtname, data):
    h = np.random.default_rng(seed).integers(0, 50, size=shape).astype(dtname)
    axis = data.draw(st.sampled_from([None, -1, 0]))
    n = h.size if axis is None else h.shape[axis]
    kth = data.draw(st.one_of(st.integers(-n, n - 1),
                              st.lists(st.integers(-n, n - 1), min_size=1, max_size=3)))
    src = h.reshape(-1) if axis is None else h
    ax = -1 if axis is None else axis
    for g in (ga.asarray(h, device=device), ga.asarray(h.T.copy(), device=device).T):
        for fn in (np.partition, ga.partition):
            p = fn(g, kth, axis=axis)
            assert p.dtype == h.dtype
            _is_partition(p.get(), src, kth, ax)
        for fn in (np.argpartition, ga.argpartition):
            i = fn(g, kth, axis=axis)
            assert i.dtype == np.int64
            _is_partition(np.take_along_axis(src, i.get(), axis=ax), src, kth, ax)


def test_partition_errors(device):
    g = ga.asarray(np.arange(5), device=device)
    with pytest.raises(ValueError, match=r"kth\(=5\) out of bounds \(5\)"):
        np.partition(g, 5)
    with pytest.raises(ValueError, match="booleans"):
        ga.argpartition(g, True)
    with pytest.raises(ValueError, match="kind must be 'introselect'"):
        ga.partition(g, 1, kind="quick")
    with pytest.raises(TypeError, match="structured"):
        ga.partition(g, 1, order="x")
    z = ga.asarray(np.zeros((2, 0)), device=device)
    _same(ga.partition(z, 0, axis=0), np.zeros((2, 0)))


def test_sort_complex(device):
    for dt in _dtypes(device, ("int8", "uint16", "int32", "float16", "float32", "float64",
                               "complex64", "bool")):
        h = _host((3, 5), dt, seed=5)
        for hh, gg in _layouts(h, device):
            if not device.supports(np.sort_complex(hh).dtype):
                continue
            _both("sort_complex", [gg], [hh])


# --------------------------------------------------------------------------- comparisons
def test_isclose_allclose(device):
    specials = np.array([0.0, 1.0, -1.0, 1e-9, np.inf, -np.inf, np.nan, 1e3, 1.001e3])
    for dt in _dtypes(device, ("float16", "float32", "complex64")):
        a = specials.astype(dt)
        b = (specials * (1 + 2e-6)).astype(dt)[::-1].copy()
        b[:3] = a[:3]
        ga_, gb = ga.asarray(a, device=device), ga.asarray(b, device=device)
        for kw in ({}, {"equal_nan": True}):
            _both("isclose", [ga_, gb], [a, b], **kw)
            _both("allclose", [ga_, gb], [a, b], **kw)
        _both("allclose", [ga_, ga_], [a, a], equal_nan=True)
    a = specials.astype(np.float32)
    g = ga.asarray(a, device=device)
    _both("isclose", [g[::-1], g], [a[::-1], a], rtol=1e-3, atol=0.5)
    _both("isclose", [1, g], [1, a])
    h = _host((2, 4), np.int8, seed=6)
    g = ga.asarray(h, device=device)
    _both("isclose", [g, 2], [h, 2], atol=1)
    _both("allclose", [g, g], [h, h], equal_nan=True)
    h = np.float32(3)
    _same(ga.isclose(ga.asarray(h, device=device), 3.0), np.asarray(np.isclose(h, 3.0)))
    z = np.zeros((0, 2), np.float32)
    _both("isclose", [ga.asarray(z, device=device)] * 2, [z, z])
    _both("allclose", [ga.asarray(z, device=device)] * 2, [z, z])


def test_array_equal_equiv(device):
    for dt in _dtypes(device, ("bool", "int16", "float16", "float32")):
        h = _host((3, 4), dt, seed=7)
        g = ga.asarray(h, device=device)
        other = h.copy()
        other[1, 2] = other[1, 2] + 1 if dt.kind != "b" else not other[1, 2]
        go = ga.asarray(other, device=device)
        for eq in (False, True):
            _both("array_equal", [g, g.copy()], [h, h.copy()], equal_nan=eq)
            _both("array_equal", [g, go], [h, other], equal_nan=eq)
            _both("array_equal", [g, g.T], [h, h.T], equal_nan=eq)
        _both("array_equiv", [g[:1], g[:1] * 0 + g[:1]], [h[:1], h[:1]])
        _both("array_equiv", [g[0], g], [h[0], h])
        _both("array_equiv", [g, g.T], [h, h.T])
    n = np.array([1.0, np.nan], np.float32)
    gn = ga.asarray(n, device=device)
    for eq in (False, True):
        _both("array_equal", [gn, gn], [n, n], equal_nan=eq)
    z = np.zeros((0,), np.int8)
    _both("array_equal", [ga.asarray(z, device=device)] * 2, [z, z])


# --------------------------------------------------------------------------- unique
@given(st.sampled_from(["int8", "uint16", "float16", "float32", "float64", "complex64",
                        "bool"]),
       st.lists(st.integers(0, 5), min_size=0, max_size=2), st.integers(0, 2**31),
       st.lists(st.booleans(), min_size=3, max_size=3), st.booleans())
@SET
def test_unique(device, dtname, shape, seed, flags, equal_nan):
    dt = np.dtype(dtname)
    if not device.supports(dt):
        dt = np.dtype(np.float32)
    rng = np.random.default_rng(seed)
    h = rng.integers(0, 4, size=shape).astype(dt)
    if dt.kind in "fc" and h.size:
        nan = rng.random(h.shape) < 0.3
        h[nan] = np.nan
        if dt.kind == "c":
            h[rng.random(h.shape) < 0.2] = complex(1, np.nan)
    kw = dict(zip(("return_index", "return_inverse", "return_counts"), flags, strict=True))
    expected = np.unique(h, equal_nan=equal_nan, **kw)
    for g in (ga.asarray(h, device=device),) + (
            (ga.asarray(h.T.copy(), device=device).T,) if h.ndim == 2 else ()):
        for fn in (np.unique, ga.unique):
            got = fn(g, equal_nan=equal_nan, **kw)
            if not isinstance(expected, tuple):
                got, exp = (got,), (expected,)
            else:
                exp = expected
            # values, counts and the inverse are NumPy's; the index of a value NumPy finds
            # with its stable sort is the first occurrence, as ours
            _same(got, exp)


def test_unique_axis(device):
    h = np.array([[1, 2, 1, 1], [0, 5, 0, 0], [1, 2, 1, 1], [0, 5, 0, 1]], np.int16)
    for dt in _dtypes(device, ("int16", "float32", "bool")):
        hh = h.astype(dt)
        g = ga.asarray(hh, device=device)
        for hx, gx in ((hh, g), (hh.T, g.T), (hh[::2], g[::2])):
            for axis in (0, 1, -1):
                _both("unique", [gx], [hx], axis=axis, return_index=True,
                      return_inverse=True, return_counts=True)
                _both("unique", [gx], [hx], axis=axis)
    h3 = np.arange(24).reshape(2, 3, 4) % 3
    _both("unique", [ga.asarray(h3, device=device)], [h3], axis=2, return_inverse=True)
    for shape, axis in (((3, 0), 0), ((0, 3), 0), ((0, 3), 1)):
        z = np.zeros(shape, np.float32)
        _both("unique", [ga.asarray(z, device=device)], [z], axis=axis, return_index=True,
              return_inverse=True, return_counts=True)
    z = np.zeros((0, 2), np.float32)
    _both("unique", [ga.asarray(z, device=device)], [z], return_inverse=True,
          return_counts=True)
    with pytest.raises(np.exceptions.AxisError):
        ga.unique(g, axis=2)
    with pytest.raises(TypeError, match="return_index must be True or False"):
        ga.unique(g, return_index=1)


# --------------------------------------------------------------------------- sets
@given(st.sampled_from(["int32", "uint8", "float32", "float64"]), st.integers(0, 8),
       st.integers(0, 8), st.integers(0, 2**31), st.booleans())
@SET
def test_set_functions(device, dtname, n1, n2, seed, nan):
    dt = np.dtype(dtname)
    if not device.supports(dt):
        dt = np.dtype(np.float32)
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 6, size=n1).astype(dt)
    b = rng.integers(0, 6, size=(n2, 1)).astype(np.int16)
    if nan and dt.kind == "f" and n1:
        a[0] = np.nan
    g1, g2 = ga.asarray(a, device=device), ga.asarray(b, device=device)
    _both("intersect1d", [g1, g2], [a, b])
    _both("intersect1d", [g1, g2], [a, b], return_indices=True)
    _both("union1d", [g1, g2], [a, b])
    _both("setdiff1d", [g1, g2], [a, b])
    _both("setxor1d", [g1, g2], [a, b])
    ua, ub = np.unique(a), np.unique(b)
    gu1, gu2 = ga.asarray(ua, device=device), ga.asarray(ub, device=device)
    for name in ("intersect1d", "setdiff1d", "setxor1d"):
        _both(name, [gu1, gu2], [ua, ub], assume_unique=True)
    _both("intersect1d", [gu1, gu2], [ua, ub], assume_unique=True, return_indices=True)
    if n1 > 1:
        _both("setdiff1d", [g1[::2], g2.T], [a[::2], b.T])


# --------------------------------------------------------------------------- bits
@given(st.lists(st.integers(0, 11), min_size=1, max_size=3), st.data(),
       st.sampled_from(["big", "little"]), st.sampled_from(["bool", "uint8", "int32"]))
@SET
def test_packbits_unpackbits(device, shape, data, bitorder, dtname):
    rng = np.random.default_rng(len(shape))
    h = rng.integers(-1, 2, size=shape).astype(dtname)
    axis = data.draw(st.sampled_from([None, *range(-len(shape), len(shape))]))
    g = ga.asarray(h, device=device)
    packed = _both("packbits", [g], [h], axis=axis, bitorder=bitorder)
    if h.ndim >= 2:
        _both("packbits", [g.T], [h.T], axis=axis, bitorder=bitorder)
    gp = ga.asarray(packed, device=device)
    n = packed.size * 8 if axis is None else packed.shape[axis] * 8
    count = data.draw(st.one_of(st.none(), st.integers(-n, n + 9)))
    want = np.unpackbits(packed, axis=axis, count=count, bitorder=bitorder)
    if packed.size == 0:  # NumPy's bug: from no bytes, count > 0 bits are left uninitialized
        want = np.zeros_like(want)  # the padding bits, as NumPy documents them
    for fn in (np.unpackbits, ga.unpackbits):
        _same(fn(gp, axis=axis, count=count, bitorder=bitorder), want)
    if packed.ndim >= 1 and packed.shape[0] > 1:
        _both("unpackbits", [gp[::2]], [packed[::2]], axis=axis, bitorder=bitorder)


def test_bits_errors_and_0d(device):
    g0 = ga.asarray(np.uint8(5), device=device)
    _both("packbits", [g0], [np.uint8(5)])
    _both("unpackbits", [g0], [np.uint8(5)])
    empty = ga.asarray(np.array([], np.uint8), device=device)
    for bitorder in ("big", "little"):  # no bytes, count > 0: all padding, zeros
        _same(ga.unpackbits(empty, count=11, bitorder=bitorder), np.zeros(11, np.uint8))
        _same(np.unpackbits(empty, count=3, bitorder=bitorder), np.zeros(3, np.uint8))
    _same(ga.unpackbits(ga.zeros((2, 0), np.uint8, device=device), axis=1, count=5),
          np.zeros((2, 5), np.uint8))
    with pytest.raises(TypeError, match="integer or boolean"):
        ga.packbits(ga.asarray(np.ones(3, np.float32), device=device))
    with pytest.raises(TypeError, match="uint8"):
        ga.unpackbits(ga.asarray(np.ones(3, np.int8), device=device))
    with pytest.raises(ValueError, match="bitorder must be"):
        ga.packbits(g0, bitorder="middle")
    with pytest.raises(np.exceptions.AxisError):
        ga.packbits(g0, axis=0)


# --------------------------------------------------------------------------- memory
def test_temporaries_go_back(device, used):
    h = np.array([[3.0, np.nan, 1.0], [np.nan, 3.0, 2.0]], np.float32)
    g = ga.asarray(h, device=device)
    i = ga.asarray(np.array([[0, 1, 2], [2, 1, 0]]), device=device)
    w = ga.zeros((2, 3), np.float32, device=device)
    gc.collect()
    before = used()
    results = [
        np.unique(g, return_index=True, return_inverse=True, return_counts=True),
        np.unique(i, axis=0, return_inverse=True), np.choose(i, [g, g * 2, g * 3]),
        np.isclose(g, g.T.T, equal_nan=True), np.select([g > 1, g < 3], [g, -g]),
        np.intersect1d(g, i, return_indices=True), np.setxor1d(g, i),
        np.packbits(i, axis=1), np.lexsort((g.T, i.T)), np.argwhere(i),
        np.unravel_index(i, (3, 3)), np.partition(g, 1)]
    np.put(w, i[0], g[1])
    np.putmask(w, g > 1, g)
    np.place(w, i == 0, g[0])
    np.put_along_axis(w, i[:, :1], 7.0, axis=1)
    assert np.allclose(g, g, equal_nan=True) and np.array_equal(i, i)
    del results
    gc.collect()
    assert used() == before


def test_refusals_name_the_remedy(device):
    g = ga.asarray(np.arange(4), device=device)
    with pytest.raises(TypeError, match=r"ga\.asarray"):
        ga.argwhere(np.arange(3))
    with pytest.raises(TypeError, match="NumPy array"):
        ga.extract(np.ones(4, bool), g)
    with pytest.raises(TypeError):  # the protocol refuses a NumPy operand, as everywhere
        np.isclose(g, np.arange(4))
    # host lists of indices are uploaded, as a[[0, 2]] does
    _same(ga.compress([True, False, True], g), np.array([0, 2]))
    _same(np.setdiff1d(g, [1, 2]), np.array([0, 3]))


def test_zero_size_inputs(device):
    z = np.zeros((0, 3), np.int64)
    zf = np.zeros((0, 3), np.float32)
    gz, gzf = ga.asarray(z, device=device), ga.asarray(zf, device=device)
    _both("choose", [gz, [gzf, gzf]], [z, [zf, zf]])
    _both("select", [[gz > 0], [gzf]], [[z > 0], [zf]])
    _both("extract", [gz, gzf], [z, zf])
    _both("compress", [ga.asarray(np.zeros(0, bool), device=device), gzf], [np.zeros(0, bool),
                                                                            zf], axis=0)
    for name in ("intersect1d", "union1d", "setdiff1d", "setxor1d"):
        _both(name, [gzf, gz], [zf, z])
    _both("intersect1d", [gzf, gz], [zf, z], return_indices=True)
    _both("isclose", [gzf, gzf], [zf, zf])
    _both("unravel_index", [gz, (4, 5)], [z, (4, 5)])
    _both("ravel_multi_index", [(gz, gz), (4, 5)], [(z, z), (4, 5)])
    _both("packbits", [ga.asarray(z.T, device=device)], [z.T], axis=1)
    _both("unpackbits", [ga.asarray(z.astype(np.uint8), device=device)], [z.astype(np.uint8)])
    g = ga.asarray(np.arange(4.0), device=device)
    for call in (lambda m, up: m.put(g, up(np.array([], np.int64)), 1.0),
                 lambda m, up: m.place(g, up(np.zeros(4, bool)), 1.0),
                 lambda m, up: m.putmask(up(zf), up(z > 0), 1.0),
                 lambda m, up: m.put_along_axis(up(zf), up(z), 1.0, axis=1)):
        for m in (np, ga):
            assert call(m, lambda x: ga.asarray(x, device=device)) is None
    _same(g, np.arange(4.0))


def test_repeated_indices_leave_one_of_the_written_values(device):
    """docs/numpy.md: put, put_along_axis and setitem with integer arrays that name an element
    more than once leave one of the values written to it -- which one is unspecified on a
    parallel device (NumPy's last one on cpu and PoCL, by the order they happen to run)."""
    up = lambda x: ga.asarray(np.asarray(x), device=device)  # noqa: E731
    for dt in _dtypes(device, ("int32", "float32")):
        g = ga.zeros(6, dt, device=device)
        ga.put(g, up([1, 4, 1, -5]), up(np.array([10, 20, 30, 40], dt)))
        h = g.get()
        assert h[1] in (10, 30, 40) and h[4] == 20 and not h[[0, 2, 3, 5]].any(), h
        g = ga.zeros(6, dt, device=device)
        np.put(g, up([7, 13, 2]), up(np.array([10, 20, 30], dt)), mode="wrap")
        h = g.get()
        assert h[1] in (10, 20) and h[2] == 30 and not h[[0, 3, 4, 5]].any(), h
        g = ga.zeros((2, 3), dt, device=device)
        ga.put_along_axis(g, up([[0, 0, 2], [1, 1, 1]]), up(np.array([[1, 2, 3], [4, 5, 6]], dt)),
                          axis=1)
        h = g.get()
        assert h[0, 0] in (1, 2) and h[0, 2] == 3 and h[1, 1] in (4, 5, 6), h
        assert h[0, 1] == h[1, 0] == h[1, 2] == 0, h
        g = ga.zeros(4, dt, device=device)
        g[up([2, 2, 2, 0])] = up(np.array([7, 8, 9, 5], dt))
        h = g.get()
        assert h[2] in (7, 8, 9) and h[0] == 5 and h[1] == h[3] == 0, h
