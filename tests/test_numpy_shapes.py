"""NumPy's manipulation and creation functions on gpuarrays arrays (issue 31, part C).

NumPy is the oracle: each function runs both ways -- ``np.<name>(garray, ...)`` through
NumPy's ``__array_function__`` and ``ga.<name>(garray, ...)`` -- on arrays holding the same
host data NumPy gets (contiguous and not, zero-size, several dtypes); values and dtypes must
agree, and the functions NumPy documents as returning views return views of the input's
storage with NumPy's layout.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuarrays as ga

_SETTINGS = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])


def _dtypes(device, *names):
    return [np.dtype(n) for n in names if device.supports(np.dtype(n))]


def _host(shape, dt, seed=0):
    """Distinct-ish values, exactly representable in every dtype used here."""
    n = int(np.prod(shape, dtype=np.int64))
    base = (np.arange(n, dtype=np.int64) * 7 + seed) % 23 - 8
    dt = np.dtype(dt)
    if dt.kind == "b":
        return (base % 3 == 0).reshape(shape)
    if dt.kind == "u":
        base = base + 8
    if dt.kind == "c":
        return (base + 1j * (base % 5)).astype(dt).reshape(shape)
    return base.astype(dt).reshape(shape)


def _tol(dt):
    dt = np.dtype(dt)
    if dt.kind in "fc":
        return {"rtol": 5e-3 if dt.itemsize == 2 else 1e-5 if dt.itemsize <= 8 else 1e-12,
                "atol": 1e-5}
    return {"rtol": 0, "atol": 0}


def _same(got, want, layout=None):
    """``got`` (gpuarrays results) has ``want``'s (NumPy's) values, dtypes and shapes."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)), type(got)
        assert len(got) == len(want), (len(got), len(want))
        for g, w in zip(got, want, strict=True):
            _same(g, w)
        return
    assert isinstance(got, ga.GPUArray), type(got)
    h = got.get()
    want = np.asarray(want)
    assert h.shape == want.shape, (h.shape, want.shape)
    assert h.dtype == want.dtype, (h.dtype, want.dtype)
    np.testing.assert_allclose(h, want, equal_nan=True, **_tol(want.dtype))


def _free(r):
    if isinstance(r, (tuple, list)):
        for x in r:
            _free(x)
    elif isinstance(r, ga.GPUArray):
        r.free()


def both(fn, host_args, dev_args, **kw):
    """``fn(np, *host_args)`` against ``fn(np, *dev_args)`` and ``fn(ga, *dev_args)``."""
    want = fn(np, *host_args, **kw)
    for mod in (np, ga):
        got = fn(mod, *dev_args, **kw)
        try:
            _same(got, want)
        finally:
            _free(got)
    return want


def raises_both(exc, fn, host_args, dev_args, match=None):
    with pytest.raises(exc):
        fn(np, *host_args)
    for mod in (np, ga):
        with pytest.raises(exc, match=match):
            fn(mod, *dev_args)


def _pair(device, shape, dt, seed=0, step=None):
    """(host, device) arrays with equal values; with ``step`` both are the same strided view
    of a larger array (so layouts can be compared too)."""
    if step is None:
        h = _host(shape, dt, seed)
        return h, ga.asarray(h, device=device)
    big = _host(tuple(n * step for n in shape), dt, seed)
    sl = tuple(slice(None, None, step) for _ in shape)
    return big[sl], ga.asarray(big, device=device)[sl]


def _layout(got, want):
    assert got.shape == want.shape and got.strides == want.strides, (
        got.shape, got.strides, want.shape, want.strides)


# --------------------------------------------------------------------------- views
def test_atleast_nd_views(device):
    for shape in [(), (3,), (2, 3), (2, 3, 2), (0, 3)]:
        big = _host(tuple(2 * n for n in shape) or (), np.float32)
        g_big = ga.asarray(big, device=device)
        h = big[tuple(slice(None, None, 2) for _ in shape)]
        g = g_big[tuple(slice(None, None, 2) for _ in shape)]
        for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
            want = getattr(np, name)(h)
            for mod in (np, ga):
                got = getattr(mod, name)(g)
                _same(got, want)
                _layout(got, want)
                assert got.storage is g.storage and got is not g
                got.free()
            assert not g.is_freed
        g.free()
    a, b = ga.asarray([1, 2], device=device), ga.asarray(3, device=device)
    r = ga.atleast_2d(a, b)
    assert isinstance(r, tuple) and [x.shape for x in r] == [(1, 2), (1, 1)]
    r = np.atleast_3d(a, b)
    assert [x.shape for x in r] == [(1, 2, 1), (1, 1, 1)]
    with pytest.raises(TypeError, match="gpuarrays array"):
        ga.atleast_1d([1, 2])


def test_splits_are_views(device):
    h, g = _pair(device, (6, 4, 3), np.int32, step=2)
    cases = [
        lambda m, x: m.array_split(x, 4),
        lambda m, x: m.array_split(x, 3, axis=1),
        lambda m, x: m.array_split(x, [1, 5, 2, 9], axis=-1),
        lambda m, x: m.split(x, 3),
        lambda m, x: m.split(x, [1, 3], axis=1),
        lambda m, x: m.hsplit(x, 2),
        lambda m, x: m.vsplit(x, [2]),
        lambda m, x: m.dsplit(x, 3),
        lambda m, x: m.hsplit(x[0, 0], [1]),
    ]
    for fn in cases:
        want = fn(np, h)
        for mod in (np, ga):
            got = fn(mod, g)
            assert isinstance(got, list)
            _same(got, want)
            for a, b in zip(got, want, strict=True):
                _layout(a, b)
                assert a.size == 0 or ga.shares_memory(a, g)
            _free(got)
    idx = ga.asarray([1, 4], device=device)
    _same(ga.split(g, idx), np.split(h, [1, 4]))
    raises_both(ValueError, lambda m, x: m.split(x, 4), (h,), (g,), match="equal division")
    raises_both(ValueError, lambda m, x: m.array_split(x, 0), (h,), (g,))
    raises_both(ValueError, lambda m, x: m.hsplit(x, 1), (h[0, 0, 0],), (g[0, 0, 0],))
    raises_both(ValueError, lambda m, x: m.vsplit(x, 1), (h[0, 0],), (g[0, 0],))
    raises_both(ValueError, lambda m, x: m.dsplit(x, 1), (h[0],), (g[0],))


def test_rot90_flips_rollaxis_are_views(device):
    h, g = _pair(device, (3, 4, 2), np.float32, step=2)
    cases = [lambda m, x, k=k: m.rot90(x, k) for k in range(-1, 5)]
    cases += [
        lambda m, x: m.rot90(x, 1, axes=(1, 2)),
        lambda m, x: m.rot90(x, 2, axes=(2, 0)),
        lambda m, x: m.fliplr(x),
        lambda m, x: m.flipud(x),
        lambda m, x: m.flipud(x[0, 0]),
        lambda m, x: m.rollaxis(x, 2),
        lambda m, x: m.rollaxis(x, -1, 1),
        lambda m, x: m.rollaxis(x, 0, 3),
    ]
    for fn in cases:
        want = fn(np, h)
        for mod in (np, ga):
            got = fn(mod, g)
            _same(got, want)
            _layout(got, want)
            assert got.storage is g.storage
            got.free()
    raises_both(ValueError, lambda m, x: m.rot90(x, 1, axes=(0, 0)), (h,), (g,))
    raises_both(ValueError, lambda m, x: m.rot90(x, 1, axes=(0, 5)), (h,), (g,))
    raises_both(ValueError, lambda m, x: m.fliplr(x), (h[0, 0],), (g[0, 0],))
    raises_both(np.exceptions.AxisError, lambda m, x: m.rollaxis(x, 3), (h,), (g,))
    raises_both(np.exceptions.AxisError, lambda m, x: m.rollaxis(x, 0, 5), (h,), (g,))


# --------------------------------------------------------------------------- stacks
def test_stacks_and_append(device):
    dts = _dtypes(device, "int8", "float32", "bool", "float16", "float64")
    for dt1, dt2 in [(dts[0], dts[1]), (dts[2], dts[0]), (dts[-1], dts[-1])]:
        h1, g1 = _pair(device, (3, 4), dt1, step=2)
        h2, g2 = _pair(device, (3, 4), dt2, seed=3)
        v1, w1 = h1[0], g1[0]
        v2, w2 = h2[1], g2[1]
        both(lambda m, a, b: m.hstack([a, b]), (h1, h2), (g1, g2))
        both(lambda m, a, b: m.hstack((a, b)), (v1, v2), (w1, w2))
        both(lambda m, a, b: m.vstack([a, b, a]), (h1, h2), (g1, g2))
        both(lambda m, a, b: m.vstack([a, b]), (v1, v1), (w1, w1))
        both(lambda m, a, b: m.dstack([a, b]), (h1, h2), (g1, g2))
        both(lambda m, a, b: m.dstack([a, b]), (v1, v2), (w1, w2))
        both(lambda m, a, b: m.column_stack([a, b]), (h2[:, 1], h2), (g2[:, 1], g2))
        both(lambda m, a, b: m.append(a, b), (h1, h2), (g1, g2))
        both(lambda m, a, b: m.append(a, b, axis=0), (h1, h2), (g1, g2))
        both(lambda m, a, b: m.append(a, b, axis=1), (h1, h2), (g1, g2))
    h, g = _pair(device, (0, 3), np.int32)
    both(lambda m, a: m.vstack([a, a]), (h,), (g,))
    both(lambda m, a: m.hstack([a, a]), (h,), (g,))
    both(lambda m, a: m.append(a, [1, 2, 3]), (h,), (g,))
    both(lambda m, a: m.append(a, 7.5), (h,), (g,))
    # scalars through atleast_*
    h, g = np.asarray(5, np.int16), ga.asarray(np.asarray(5, np.int16), device=device)
    both(lambda m, a: m.hstack([a, a]), (h,), (g,))
    both(lambda m, a: m.column_stack([a, a]), (h,), (g,))
    # dtype= and casting=
    h1, g1 = _pair(device, (2, 3), np.int32)
    hf, gf = _pair(device, (2, 3), np.float32, seed=1)
    both(lambda m, a, b: m.hstack([a, b], dtype=np.float32), (h1, hf), (g1, gf))
    both(lambda m, a, b: m.vstack([a, b], dtype=np.int16, casting="unsafe"), (h1, hf),
         (g1, gf))
    raises_both(TypeError, lambda m, a, b: m.vstack([a, b], dtype=np.int32), (h1, hf),
                (g1, gf))
    raises_both(TypeError, lambda m, a: m.hstack(x for x in [a]), (h1,), (g1,))
    with pytest.warns(DeprecationWarning, match="row_stack"):
        r = ga.row_stack([g1, g1])
    _same(r, np.vstack([h1, h1]))
    raises_both(ValueError, lambda m, a, b: m.append(a, b, axis=0), (h1, h1[0]),
                (g1, g1[0]), match=r"append\(\).*\(2, 3\), \(3,\)")
    raises_both(ValueError, lambda m, a, b: m.vstack([a, b]), (h1, h1[:, :2]),
                (g1, g1[:, :2]), match="vstack.*make the other axes match")


# --------------------------------------------------------------------------- delete / resize
def test_delete(device):
    cases = [(2, 0), (-1, 1), (np.int64(3), None), (slice(1, 4), 1),
             (slice(None, None, 2), 1), (slice(None, None, -2), 0), (slice(4, 1, -1), None),
             (slice(3, 3), 1), ([0, 2, -1], 1), ([], 0), ([4], 0),
             ([True, False, True, False, True], 0), ([1, 1, 3], None)]
    for dt in _dtypes(device, "int32", "float32", "bool"):
        h, g = _pair(device, (5, 6), dt, step=2)
        for obj, axis in cases if dt == np.int32 else cases[::4]:
            both(lambda m, x, obj=obj, axis=axis: m.delete(x, obj, axis=axis), (h,), (g,))
        mask = ga.asarray(np.array([False, True] * 3), device=device)
        idx = ga.asarray(np.array([0, 5, -2]), device=device)
        _same(ga.delete(g, mask, axis=1), np.delete(h, np.array([False, True] * 3), axis=1))
        _same(np.delete(g, idx, axis=1), np.delete(h, [0, 5, -2], axis=1))
    h, g = _pair(device, (4,), np.int32)
    raises_both(IndexError, lambda m, x: m.delete(x, 4), (h,), (g,), match="out of bounds")
    raises_both(IndexError, lambda m, x: m.delete(x, [1, 9]), (h,), (g,))
    raises_both(IndexError, lambda m, x: m.delete(x, [1.5]), (h,), (g,))
    raises_both(ValueError, lambda m, x: m.delete(x, [True, False]), (h,), (g,))
    raises_both(np.exceptions.AxisError, lambda m, x: m.delete(x, 1, axis=2), (h,), (g,))
    with pytest.raises(IndexError):
        ga.delete(g, ga.asarray([7], device=device))


def test_resize(device):
    for dt in _dtypes(device, "int16", "float32", "complex64"):
        h, g = _pair(device, (3, 4), dt, step=2)
        for shape in [(5, 7), 30, (2, 2), (12,), (2, 3, 2), (0,), (3, 0)]:
            both(lambda m, x, shape=shape: m.resize(x, shape), (h,), (g,))
    h, g = _pair(device, (0, 3), np.float32)
    both(lambda m, x: m.resize(x, (2, 2)), (h,), (g,))
    raises_both(ValueError, lambda m, x: m.resize(x, (2, -1)), (h,), (g,))


@st.composite
def _reshaping_cases(draw):
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=nd, max_size=nd)))
    axis = draw(st.integers(-nd, nd - 1))
    n = shape[axis]
    sections = draw(st.one_of(st.integers(1, 6),
                              st.lists(st.integers(-n - 2, n + 2), max_size=4)))
    obj = draw(st.one_of(st.integers(-n, n - 1) if n else st.just([]),
                         st.lists(st.integers(-n, n - 1), max_size=4) if n else st.just([]),
                         st.builds(slice, st.none() | st.integers(-6, 6),
                                   st.none() | st.integers(-6, 6),
                                   st.sampled_from([None, 1, 2, -1, -3]))))
    new_shape = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=3)))
    zeros = draw(st.lists(st.booleans(), min_size=max(1, int(np.prod(shape))),
                          max_size=max(1, int(np.prod(shape)))))
    return shape, axis, sections, obj, new_shape, zeros, draw(st.booleans())


def test_reshaping_hypothesis(device):
    """array_split, delete, resize and trim_zeros on shapes, axes and indices hypothesis
    picks (zero-size axes, negative and repeated indices, empty lists, odd slices)."""

    @_SETTINGS
    @given(case=_reshaping_cases())
    def run(case):
        shape, axis, sections, obj, new_shape, zeros, strided = case
        h, g = _pair(device, shape, np.int32, step=2 if strided else None)
        both(lambda m, x: m.array_split(x, sections, axis=axis), (h,), (g,))
        both(lambda m, x: m.delete(x, obj, axis=axis), (h,), (g,))
        both(lambda m, x: m.resize(x, new_shape), (h,), (g,))
        hz = np.where(np.asarray(zeros[:h.size]).reshape(shape), 0, h) if h.size else h
        gz = ga.asarray(hz, device=device)
        both(lambda m, x: m.trim_zeros(x, "fb", axis=axis), (hz,), (gz,))
        both(lambda m, x: m.trim_zeros(x), (hz,), (gz,))

    run()


# --------------------------------------------------------------------------- pad
_MODES = ["constant", "edge", "linear_ramp", "maximum", "mean", "median", "minimum",
          "reflect", "symmetric", "wrap"]


def _pad_kwargs(draw, mode, nd, dt):
    widths = st.integers(0, 7)
    if mode == "constant" and draw(st.booleans()):
        vals = draw(st.lists(st.tuples(st.integers(-5, 9), st.integers(-5, 9)),
                             min_size=nd, max_size=nd))
        return {"constant_values": tuple(vals) if draw(st.booleans()) else vals[0]}
    if mode == "linear_ramp" and draw(st.booleans()):
        return {"end_values": (draw(st.integers(-9, 9)), draw(st.integers(-9, 9)))}
    if mode in ("maximum", "minimum", "mean", "median") and draw(st.booleans()):
        return {"stat_length": draw(st.one_of(
            st.integers(1, 4), st.tuples(st.integers(1, 4), st.integers(1, 4))))}
    if mode in ("reflect", "symmetric") and draw(st.booleans()):
        return {"reflect_type": draw(st.sampled_from(["even", "odd"]))}
    del widths
    return {}


@st.composite
def _pad_cases(draw, dts):
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd)))
    dt = draw(st.sampled_from(dts))
    mode = draw(st.sampled_from(_MODES))
    form = draw(st.sampled_from(["int", "pair", "axes"]))
    if form == "int":
        pw = draw(st.integers(0, 7))
    elif form == "pair":
        pw = (draw(st.integers(0, 7)), draw(st.integers(0, 7)))
    else:
        pw = tuple((draw(st.integers(0, 7)), draw(st.integers(0, 7))) for _ in range(nd))
    return shape, dt, mode, pw, _pad_kwargs(draw, mode, nd, dt), draw(st.booleans())


def test_pad_every_mode(device):
    dts = [np.dtype(np.int32), np.dtype(np.float32)]

    @_SETTINGS
    @given(case=_pad_cases(dts))
    def run(case):
        shape, dt, mode, pw, kw, strided = case
        h, g = _pair(device, shape, dt, seed=len(shape), step=2 if strided else None)
        both(lambda m, x: m.pad(x, pw, mode, **kw), (h,), (g,))

    run()


def test_pad_dtypes_and_shapes(device):
    # the modes that only copy, in the other dtypes (the kernel-heavy modes run in int32
    # and float32 in test_pad_every_mode and below; odd reflection wraps in uint8)
    for dt in _dtypes(device, "float16", "float64", "uint8", "bool", "complex64"):
        h, g = _pair(device, (3, 2), dt, step=2)
        both(lambda m, x: m.pad(x, ((1, 2), (3, 0))), (h,), (g,))
        both(lambda m, x: m.pad(x, 2, "edge"), (h,), (g,))
        both(lambda m, x: m.pad(x, (4, 1), "symmetric"), (h,), (g,))
        both(lambda m, x: m.pad(x, (1, 5), "wrap"), (h,), (g,))
        if dt == np.uint8:
            both(lambda m, x: m.pad(x, 3, "reflect", reflect_type="odd"), (h,), (g,))
        if dt.kind == "c":  # ga.max/min take real data only (the standard's rule)
            with pytest.raises(TypeError, match="real"):
                ga.pad(g, 2, "minimum")
    # every mode on a 1-d array, a long pad, and a length-1 axis (NumPy's legacy edge rule)
    h, g = _pair(device, (5,), np.int32)
    h1, g1 = _pair(device, (1, 3), np.float32)
    for mode in _MODES:
        both(lambda m, x, mode=mode: m.pad(x, (11, 13), mode), (h,), (g,))
        both(lambda m, x, mode=mode: m.pad(x, 2, mode), (h1,), (g1,))
    # mean of integers rounds half to even as NumPy; median of an even count
    h = np.array([1, 2, 4, 3], np.int32)
    g = ga.asarray(h, device=device)
    both(lambda m, x: m.pad(x, 2, "mean"), (h,), (g,))
    both(lambda m, x: m.pad(x, 2, "median"), (h,), (g,))
    both(lambda m, x: m.pad(x, 2, "median", stat_length=(2, 1)), (h,), (g,))
    hf = np.array([1.0, np.nan, 3.0, 4.0], np.float32)
    both(lambda m, x: m.pad(x, 1, "median"), (hf,), (ga.asarray(hf, device=device),))
    # zero-size: constant and empty extend it, others refuse an empty axis
    h, g = _pair(device, (0, 3), np.float32)
    both(lambda m, x: m.pad(x, 1, constant_values=4), (h,), (g,))
    r = ga.pad(g, 2, "empty")
    assert r.shape == (4, 7)
    r.free()
    both(lambda m, x: m.pad(x, ((0, 0), (1, 1)), "edge"), (h,), (g,))
    raises_both(ValueError, lambda m, x: m.pad(x, 1, "edge"), (h,), (g,), match="empty axis")
    # dict pad_width, pad_width from an array, a function as mode
    h, g = _pair(device, (2, 3), np.int32)
    both(lambda m, x: m.pad(x, {1: (1, 2)}), (h,), (g,))
    both(lambda m, x: m.pad(x, {-1: 2, 0: (3, 0)}, "edge"), (h,), (g,))
    _same(ga.pad(g, ga.asarray([1, 2], device=device)), np.pad(h, [1, 2]))

    def pad_with(vector, pad_width, iaxis, kwargs):
        vector[:pad_width[0]] = kwargs.get("padder", 10)
        vector[vector.shape[0] - pad_width[1]:] = kwargs.get("padder", 10)

    both(lambda m, x: m.pad(x, 2, pad_with, padder=100), (h,), (g,))
    r = ga.pad(g, 1, "empty")
    _same(r[1:3, 1:4], h)
    r.free()


def test_pad_errors(device):
    h, g = _pair(device, (2, 3), np.float32)
    raises_both(ValueError, lambda m, x: m.pad(x, -1), (h,), (g,), match="negative")
    raises_both(ValueError, lambda m, x: m.pad(x, ((1, 2), (3, -1))), (h,), (g,))
    raises_both(TypeError, lambda m, x: m.pad(x, 1.5), (h,), (g,), match="integral")
    raises_both(ValueError, lambda m, x: m.pad(x, 1, "nearest"), (h,), (g,), match="mode")
    raises_both(ValueError, lambda m, x: m.pad(x, 1, "edge", constant_values=1), (h,), (g,),
                match="unsupported keyword")
    raises_both(ValueError, lambda m, x: m.pad(x, 1, "maximum", stat_length=0), (h,), (g,),
                match="stat_length")
    raises_both(ValueError, lambda m, x: m.pad(x, ((1, 2), (3, 4), (5, 6))), (h,), (g,))


# --------------------------------------------------------------------------- trim_zeros
def test_trim_zeros(device):
    for dt in _dtypes(device, "int32", "bool", "complex64"):
        h = np.zeros((5, 7), dt)
        h[1:4, 2] = 1
        h[2, 5] = 1
        big = np.zeros((10, 14), dt)
        big[::2, ::2] = h
        g = ga.asarray(big, device=device)[::2, ::2]
        for trim in ("fb", "f", "b", "BF"):
            for axis in (None, 0, 1, -1, (0, 1)):
                want = np.trim_zeros(h, trim, axis=axis)
                for mod in (np, ga):
                    got = mod.trim_zeros(g, trim, axis=axis)
                    _same(got, want)
                    assert got.size == 0 or ga.shares_memory(got, g)
                    got.free()
        both(lambda m, x: m.trim_zeros(x), (h[:, 0],), (g[:, 0],))
        both(lambda m, x: m.trim_zeros(x, "b"), (h[2],), (g[2],))
        both(lambda m, x: m.trim_zeros(x), (h[:0],), (g[:0],))
    raises_both(ValueError, lambda m, x: m.trim_zeros(x, "x"), (h,), (g,), match="trim")


# --------------------------------------------------------------------------- diagonals
def test_diag_and_diagflat(device):
    for dt in _dtypes(device, "int8", "float32", "complex64", "bool"):
        h, g = _pair(device, (4,), dt, step=2)
        for k in (0, 2, -3):
            both(lambda m, x, k=k: m.diag(x, k), (h,), (g,))
        h2, g2 = _pair(device, (3, 5), dt, step=2)
        for k in (0, 1, -2, 7):
            want = np.diag(h2, k)
            for mod in (np, ga):
                got = mod.diag(g2, k)
                _same(got, want)
                assert got.storage is g2.storage and not got.flags.writeable
                got.free()
        both(lambda m, x: m.diagflat(x, 1), (h2,), (g2,))
        both(lambda m, x: m.diagflat(x, -1), (h2.T,), (g2.T,))
    h, g = _pair(device, (0,), np.float32)
    both(lambda m, x: m.diag(x, 1), (h,), (g,))
    raises_both(ValueError, lambda m, x: m.diag(x), (h.reshape(0, 1, 1),), (g.reshape(0, 1, 1),))


def test_fill_diagonal(device):
    cases = [((3, 5), 7, False), ((5, 3), 2.5, False), ((7, 2), [1, 2, 3], True),
             ((8, 3), [4, 5], True), ((6, 6), [9], True), ((3, 3, 3), [1, 2, 3, 4], False),
             ((4, 2), np.arange(9), True), ((0, 3), 1, False), ((9, 1), [3, 4], True)]
    for dt in _dtypes(device, "float32", "int16"):
        for shape, val, wrap in cases:
            h = _host(tuple(2 * n for n in shape), dt)
            g_big = ga.asarray(h, device=device)
            h = h[tuple(slice(None, None, 2) for _ in shape)].copy()
            g = g_big[tuple(slice(None, None, 2) for _ in shape)]
            np.fill_diagonal(h, val, wrap=wrap)
            for mod in (np, ga):
                gv = ga.asarray(np.asarray(val), device=device) if mod is np and \
                    not np.isscalar(val) else val
                g_copy = g.copy()
                assert mod.fill_diagonal(g_copy, gv, wrap=wrap) is None
                _same(g_copy, h)
                g_copy.free()
            gt = ga.asarray(np.ascontiguousarray(h.T), device=device).T  # F-ordered
            ht = h.copy()
            ga.fill_diagonal(gt, 0, wrap=wrap)
            np.fill_diagonal(ht, 0, wrap=wrap)
            _same(gt, ht)
    h, g = _pair(device, (3,), np.float32)
    raises_both(ValueError, lambda m, x: m.fill_diagonal(x, 1), (h,), (g,), match="2-d")
    raises_both(ValueError, lambda m, x: m.fill_diagonal(x, 1), (np.zeros((2, 2, 3)),),
                (ga.zeros((2, 2, 3), device=device),), match="equal length")
    with pytest.raises(ValueError, match="read-only"):
        ga.fill_diagonal(ga.broadcast_to(g, (3, 3)), 1)


# --------------------------------------------------------------------------- creation
def test_tri_and_index_functions(device):
    floats = np.float64 if device.supports(np.float64) else np.float32
    _same(ga.tri(3, 5, 1, device=device), np.tri(3, 5, 1).astype(floats))
    _same(ga.tri(4, dtype=np.int8, device=device), np.tri(4, dtype=np.int8))
    _same(ga.tri(0, 3, device=device, dtype=bool), np.tri(0, 3, dtype=bool))
    g = ga.zeros((2, 2), device=device)
    _same(np.tri(3, 2, -1, dtype=np.int32, like=g), np.tri(3, 2, -1, dtype=np.int32))
    for n, k, m in [(4, 0, None), (4, -1, 5), (3, 2, 2), (0, 0, None)]:
        _same(ga.tril_indices(n, k, m, device=device), np.tril_indices(n, k, m))
        _same(ga.triu_indices(n, k, m, device=device), np.triu_indices(n, k, m))
    h, g = _pair(device, (3, 5), np.float32, step=2)
    for k in (0, 1, -2):
        both(lambda m, x, k=k: m.tril_indices_from(x, k), (h,), (g,))
        both(lambda m, x, k=k: m.triu_indices_from(x, k), (h,), (g,))
    raises_both(ValueError, lambda m, x: m.tril_indices_from(x), (h[0],), (g[0],))
    _same(ga.diag_indices(4, device=device), np.diag_indices(4))
    _same(ga.diag_indices(3, 3, device=device), np.diag_indices(3, 3))
    h3, g3 = _pair(device, (3, 3, 3), np.int32)
    both(lambda m, x: m.diag_indices_from(x), (h3,), (g3,))
    raises_both(ValueError, lambda m, x: m.diag_indices_from(x), (h,), (g,))
    raises_both(ValueError, lambda m, x: m.diag_indices_from(x), (h[0],), (g[0],))
    for k in (0, 1, -1):
        _same(ga.mask_indices(4, np.triu, k, device=device), np.mask_indices(4, np.triu, k))
        _same(ga.mask_indices(3, ga.tril, k, device=device), np.mask_indices(3, np.tril, k))
    _same(ga.mask_indices(2, lambda m, k: m, device=device),
          np.mask_indices(2, lambda m, k: m))
    for dims in [(2, 3), (3,), (2, 0, 2), ()]:
        _same(ga.indices(dims, device=device), np.indices(dims))
        _same(ga.indices(dims, sparse=True, device=device), np.indices(dims, sparse=True))
    _same(ga.indices((2, 2), dtype=np.float32, device=device),
          np.indices((2, 2), dtype=np.float32))
    hi, gi = ga.asarray([0, 2], device=device), ga.asarray([True, False, True], device=device)
    both(lambda m, a, b: m.ix_(a, b), (np.array([0, 2]), np.array([True, False, True])),
         (hi, gi))
    _same(ga.ix_([1, 0], [], device_arr := ga.asarray([3], device=device)),
          np.ix_([1, 0], [], [3]))
    del device_arr
    raises_both(ValueError, lambda m, a: m.ix_(a), (np.zeros((2, 2)),),
                (ga.zeros((2, 2), device=device),), match="1 dimensional")


def test_vander(device):
    for dt in _dtypes(device, "int8", "float32", "complex64", "bool", "float16", "uint64"):
        h, g = _pair(device, (5,), dt, step=2)
        for n in (None, 0, 1, 3, 7):
            both(lambda m, x, n=n: m.vander(x, n), (h,), (g,))
            both(lambda m, x, n=n: m.vander(x, n, increasing=True), (h,), (g,))
    h, g = _pair(device, (0,), np.float32)
    both(lambda m, x: m.vander(x), (h,), (g,))
    raises_both(ValueError, lambda m, x: m.vander(x), (np.zeros((2, 2)),),
                (ga.zeros((2, 2), device=device),), match="one-dimensional")


def test_logspace(device):
    fdt = _dtypes(device, "float64", "float32")[0]
    _same(ga.logspace(0, 2, 5, device=device), np.logspace(0, 2, 5).astype(fdt))
    _same(ga.logspace(1, -1, 4, endpoint=False, base=2.0, device=device),
          np.logspace(1, -1, 4, endpoint=False, base=2.0).astype(fdt))
    _same(ga.logspace(0, 3, 4, dtype=np.int32, device=device),
          np.logspace(0, 3, 4, dtype=np.int32))
    _same(ga.logspace(0, 1, 0, device=device), np.logspace(0, 1, 0).astype(fdt))
    _same(ga.logspace(0, 1, 1, device=device), np.logspace(0, 1, 1).astype(fdt))
    hs = np.array([0.0, 1.0, 2.0], fdt)
    gs = ga.asarray(hs, device=device)
    for axis in (0, 1, -1):
        _same(ga.logspace(gs, 3.0, 4, axis=axis), np.logspace(hs, 3.0, 4, axis=axis))
        _same(ga.logspace(0.0, gs, 3, base=[2.0, 3.0, 10.0], axis=axis),
              np.logspace(0.0, hs, 3, base=[2.0, 3.0, 10.0], axis=axis))
    _same(ga.logspace(gs, gs[::-1], 5, endpoint=False),
          np.logspace(hs, hs[::-1], 5, endpoint=False))
    hb = np.array([[2.0], [3.0]], fdt)
    _same(ga.logspace(gs, 4.0, 3, base=ga.asarray(hb, device=device)),
          np.logspace(hs, 4.0, 3, base=hb))
    with pytest.raises(ValueError, match="non-negative"):
        ga.logspace(gs, 1, -1)


def test_fromfunction(device):
    fdt = _dtypes(device, "float64", "float32")[0]
    _same(ga.fromfunction(lambda i, j: i * 10 + j, (3, 4), device=device),
          np.fromfunction(lambda i, j: i * 10 + j, (3, 4)).astype(fdt))
    _same(ga.fromfunction(lambda i, j, k: i + j * k, (2, 3, 2), dtype=int, device=device),
          np.fromfunction(lambda i, j, k: i + j * k, (2, 3, 2), dtype=int))
    got = ga.fromfunction(lambda i, j, off: ga.where(i == j, off, 0), (3, 3), dtype=np.int32,
                          device=device, off=5)
    _same(got, np.fromfunction(lambda i, j, off: np.where(i == j, off, 0), (3, 3),
                               dtype=np.int32, off=5))
    # a function returning one of its arguments: the result outlives the index arrays
    _same(ga.fromfunction(lambda i, j: j, (2, 3), dtype=np.int64, device=device),
          np.fromfunction(lambda i, j: j, (2, 3), dtype=np.int64))
    like = ga.zeros(1, device=device)
    r = np.fromfunction(lambda i: i * 2, (4,), dtype=np.float32, like=like)
    assert r.device == device
    _same(r, np.arange(4, dtype=np.float32) * 2)


# --------------------------------------------------------------------------- applying
def test_apply_along_and_over_axes(device):
    h, g = _pair(device, (3, 4, 2), np.float32, step=2)
    for axis in (0, 1, -1):
        both(lambda m, x, axis=axis: m.apply_along_axis(lambda v: v[::-1] * 2, axis, x),
             (h,), (g,))
        both(lambda m, x, axis=axis: m.apply_along_axis(np.sum, axis, x), (h,), (g,))
    both(lambda m, x: m.apply_along_axis(lambda v, s: m.stack([v * s, v + s]), 1, x, 3.0),
         (h,), (g,))
    both(lambda m, x: m.apply_along_axis(np.diag, -1, x), (h,), (g,))
    both(lambda m, x: m.apply_along_axis(lambda v: v, 0, x), (h,), (g,))
    both(lambda m, x: m.apply_along_axis(lambda v: 2.5, 0, x), (h,), (g,))
    both(lambda m, x: m.apply_over_axes(lambda a, ax: a, x, [0, 1]), (h,), (g,))
    raises_both(ValueError, lambda m, x: m.apply_along_axis(np.sum, 1, x), (h[:0],),
                (g[:0],), match="dimensions are 0")
    for axes in (0, [0, 2], (1, -1), []):
        both(lambda m, x, axes=axes: m.apply_over_axes(np.sum, x, axes), (h,), (g,))
        both(lambda m, x, axes=axes: m.apply_over_axes(np.max, x, axes), (h,), (g,))
    r = ga.apply_over_axes(ga.sum, g, [])
    assert r is not g and r.storage is g.storage
    raises_both(ValueError, lambda m, x: m.apply_over_axes(lambda a, ax: a[0, 0], x, 0),
                (h,), (g,), match="correct shape")


def test_piecewise(device):
    for dt in _dtypes(device, "float32", "int32"):
        h, g = _pair(device, (4, 5), dt, step=2)
        both(lambda m, x: m.piecewise(x, [x < 0, x >= 5], [lambda v: v * 2, -1, 7]),
             (h,), (g,))
        if dt == np.int32:
            continue
        both(lambda m, x: m.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v]),
             (h,), (g,))
        both(lambda m, x: m.piecewise(x, x > 2, [lambda v: v + 1, 0]), (h[1],), (g[1],))
        both(lambda m, x: m.piecewise(x, [x > 100], [lambda v, k: v * k, 1], 3), (h,), (g,))
    h0 = np.array(3.0, np.float32)
    both(lambda m, x: m.piecewise(x, [True, False], [lambda v: v * 2, 5]), (h0,),
         (ga.asarray(h0, device=device),))
    raises_both(ValueError, lambda m, x: m.piecewise(x, [x > 0], [1, 2, 3]), (h,), (g,),
                match="functions are expected")


# --------------------------------------------------------------------------- conversions
def test_conversions(device):
    h, g = _pair(device, (3, 4), np.float32, step=2)
    for fn in (lambda m, x: m.asanyarray(x, like=x), lambda m, x: m.asanyarray(x, np.int16,
                                                                               like=x),
               lambda m, x: m.asfortranarray(x, like=x),
               lambda m, x: m.require(x, requirements="C", like=x),
               lambda m, x: m.require(x, np.int32, ["F", "W"], like=x)):
        both(fn, (h,), (g,))
    r = ga.asanyarray(g)
    assert r is not g and r.storage is g.storage
    r.free()
    for mod in (np, ga):
        f = mod.asfortranarray(g, like=g) if mod is np else ga.asfortranarray(g)
        assert f.flags.f_contiguous and not f.flags.c_contiguous
        f2 = ga.asfortranarray(f)
        assert f2.storage is f.storage
        c = mod.require(f, requirements=["C_CONTIGUOUS"], like=f) if mod is np \
            else ga.require(f, requirements="C")
        assert c.flags.c_contiguous
        o = ga.require(c, requirements="O")
        assert o.storage is not c.storage
        _free([f, f2, c, o])
    hb = np.array([1.0, np.inf], np.float32)
    gb = ga.asarray(hb, device=device)
    # NumPy 2.4 does not dispatch asarray_chkfinite (no __array_function__): ga route only
    _same(ga.asarray_chkfinite(g), h)
    with pytest.raises(ValueError, match="infs or NaNs"):
        ga.asarray_chkfinite(gb)
    ok = ga.asarray_chkfinite(ga.asarray([1, 2], device=device))
    _same(ok, np.array([1, 2]))
    with pytest.raises(ValueError, match="C.*F"):
        ga.require(g, requirements="CF")


# --------------------------------------------------------------------------- memory
def test_temporaries_go_back(device, used):
    h, g = _pair(device, (4, 5), np.float32, step=2)
    calls = [
        lambda: ga.pad(g, 2, "reflect", reflect_type="odd"),
        lambda: ga.pad(g, (1, 3), "median", stat_length=2),
        lambda: ga.pad(g, 2, "linear_ramp", end_values=1),
        lambda: ga.delete(g, [0, 2], axis=1),
        lambda: ga.resize(g, (7, 3)),
        lambda: ga.vander(g[0]),
        lambda: ga.trim_zeros(g),
        lambda: ga.logspace(g[0], 2.0, 3),
        lambda: ga.piecewise(g, [g > 3], [lambda v: v * 2, 0]),
        lambda: ga.tril_indices(4, device=device),
        lambda: ga.hstack([g, g]),
    ]
    for call in calls:
        _free(call())  # warm up kernels and pools
    before = used()
    for call in calls:
        _free(call())
    assert used() == before


def test_atleast_of_scalars_is_on_the_arrays_device(device):
    """``atleast_1d(rank)`` of a NumPy or Python scalar (lstsq's rank) makes a 1-d array, on
    the device of the other arguments, as NumPy accepts scalars."""
    a = ga.asarray(np.arange(3.0, dtype=np.float32), device=device)
    r, v = np.atleast_1d(np.int32(2), a)
    assert r.device == device and r.dtype == np.int32 and r.get().tolist() == [2]
    assert ga.atleast_2d(1.5).shape == (1, 1) and v.shape == (3,)
    assert ga.atleast_3d(True).dtype == np.bool_
