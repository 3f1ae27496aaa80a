"""Manipulation functions on every device, NumPy as the oracle (docs/manipulation.md).

Views share the storage (``r.storage is x.storage``, a new handle); copies do not. Every dtype
moves bit-exactly through the copies; inputs with offsets, negative strides and transposes
are read in place. Bad input raises the standard's/NumPy's error before anything is
allocated; freed arrays raise FreedArrayError.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import NUMERIC_DTYPES, SETTINGS, same_values, supported, values

import gpuarrays as ga

FEW = settings(SETTINGS, max_examples=12)

LAYOUTS = {
    "contiguous": lambda x: x,
    "offset": lambda x: x[1:, 2:],
    "negative": lambda x: x[::-1, :, ::-2],
    "transposed": lambda x: x.transpose(2, 0, 1),
}


def make(device, shape=(4, 5, 6), dtype="int32", layout="contiguous", seed=0):
    h = values(shape, np.dtype(dtype), seed)
    g = ga.asarray(h, device=device)
    return LAYOUTS[layout](h), LAYOUTS[layout](g)


def check(got, want, base=None, view=None):
    assert isinstance(got, ga.GPUArray)
    same_values(got.get(), np.asarray(want))
    if base is not None:
        assert got is not base
        assert (got.storage is base.storage) == view, (got.storage, base.storage)


# Views ---------------------------------------------------------------------------------------
VIEWS = {
    "broadcast_to": (lambda g: ga.broadcast_to(g[:, :1], (2,) + g[:, :1].shape),
                     lambda n: np.broadcast_to(n[:, :1], (2,) + n[:, :1].shape)),
    "expand_dims": (lambda g: ga.expand_dims(g, 1), lambda n: np.expand_dims(n, 1)),
    "expand_dims_tuple": (lambda g: ga.expand_dims(g, (0, -1)),
                          lambda n: np.expand_dims(n, (0, -1))),
    "squeeze": (lambda g: ga.squeeze(g[:1], 0), lambda n: np.squeeze(n[:1], 0)),
    "squeeze_tuple": (lambda g: ga.squeeze(g[:1, :, :1], (0, 2)),
                      lambda n: np.squeeze(n[:1, :, :1], (0, 2))),
    "flip": (lambda g: ga.flip(g), lambda n: np.flip(n)),
    "flip_axis": (lambda g: ga.flip(g, axis=1), lambda n: np.flip(n, 1)),
    "flip_axes": (lambda g: ga.flip(g, axis=(0, -1)), lambda n: np.flip(n, (0, -1))),
    "moveaxis": (lambda g: ga.moveaxis(g, 0, -1), lambda n: np.moveaxis(n, 0, -1)),
    "moveaxis_tuple": (lambda g: ga.moveaxis(g, (0, 1), (2, 0)),
                       lambda n: np.moveaxis(n, (0, 1), (2, 0))),
    "permute_dims": (lambda g: ga.permute_dims(g, (1, 2, 0)), lambda n: n.transpose(1, 2, 0)),
    "transpose": (lambda g: ga.transpose(g), lambda n: np.transpose(n)),
    "transpose_axes": (lambda g: ga.transpose(g, (2, 0, 1)), lambda n: np.transpose(n, (2, 0, 1))),
    "reshape_contiguous": (lambda g: ga.reshape(g[1:], (-1,)), lambda n: n[1:].reshape(-1)),
    "reshape_same": (lambda g: ga.reshape(g, g.shape), lambda n: n),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_views_share_storage_and_match_numpy(device, layout):
    n, g = make(device, layout=layout)
    for name, (gf, nf) in VIEWS.items():
        if name == "reshape_contiguous" and layout != "contiguous":
            continue
        r, want = gf(g), nf(n)
        assert r.shape == want.shape, name
        assert r.strides == want.strides, (name, r.strides, want.strides)
        assert r.flags.writeable == want.flags.writeable, name
        check(r, want, g, True)
        r.free()
        assert not g.is_freed  # a view is one more handle: freeing it leaves x alive


def test_unstack_and_broadcast_arrays_are_tuples_of_views(device):
    n, g = make(device, layout="negative")
    parts = ga.unstack(g, axis=1)
    assert isinstance(parts, tuple) and len(parts) == n.shape[1]
    for p, q in zip(parts, np.moveaxis(n, 1, 0), strict=True):
        check(p, q, g, True)
    a, b = ga.broadcast_arrays(g[:, :1], g[0])
    na, nb = np.broadcast_arrays(n[:, :1], n[0])
    check(a, na, g, True)
    check(b, nb, g, True)
    assert not a.flags.writeable
    (same,) = ga.broadcast_arrays(g)
    check(same, n, g, True)
    assert ga.broadcast_arrays() == ()


def test_broadcast_shapes():
    assert ga.broadcast_shapes((2, 1, 3), (4, 1), ()) == (2, 4, 3)
    assert ga.broadcast_shapes() == ()
    assert ga.broadcast_shapes((0, 1), (1, 5)) == (0, 5)
    assert ga.broadcast_shapes((None, 3), (2, 1)) == (2, 3)
    with pytest.raises(ValueError, match="do not broadcast"):
        ga.broadcast_shapes((2, 3), (4, 3))


def test_reshape_copy_keyword(device):
    n, g = make(device)
    v = ga.reshape(g, (6, 20), copy=False)
    check(v, n.reshape(6, 20), g, True)
    c = ga.reshape(g, (6, 20), copy=True)
    check(c, n.reshape(6, 20), g, False)
    t = g.mT  # not reshapeable without a copy
    with pytest.raises(ValueError, match="without a copy"):
        ga.reshape(t, (-1,), copy=False)
    check(ga.reshape(t, (-1,)), np.swapaxes(n, -1, -2).reshape(-1), g, False)
    with pytest.raises(ValueError):
        ga.reshape(g, (7, -1))


# Copies: every dtype, strided inputs -----------------------------------------------------------
def _copies(g, n):
    """(name, gpuarrays result, NumPy result) for every copying function."""
    yield "concat", ga.concat([g, g[:1]], axis=0), np.concatenate([n, n[:1]], axis=0)
    yield "concat_last", ga.concat([g[..., :2], g], axis=-1), np.concatenate([n[..., :2], n], -1)
    yield "concat_none", ga.concat([g, g[0]], axis=None), np.concatenate([n, n[0]], axis=None)
    yield "concatenate", ga.concatenate((g, g), 1), np.concatenate((n, n), 1)
    yield "stack", ga.stack([g, g[::-1]], axis=1), np.stack([n, n[::-1]], axis=1)
    yield "stack_last", ga.stack([g, g], axis=-1), np.stack([n, n], axis=-1)
    yield "roll", ga.roll(g, 2, axis=1), np.roll(n, 2, axis=1)
    yield "roll_none", ga.roll(g, -7), np.roll(n, -7)
    yield "roll_tuple", ga.roll(g, (1, -2, 3), axis=(0, 2, 0)), np.roll(n, (1, -2, 3), (0, 2, 0))
    yield "tile", ga.tile(g, (2, 1, 1, 3)), np.tile(n, (2, 1, 1, 3))
    yield "tile_short", ga.tile(g, (2,)), np.tile(n, (2,))
    yield "repeat", ga.repeat(g, 2, axis=1), np.repeat(n, 2, axis=1)
    yield "repeat_none", ga.repeat(g, 3), np.repeat(n, 3)
    yield "repeat_zero", ga.repeat(g, 0, axis=2), np.repeat(n, 0, axis=2)
    yield "reshape_copy", ga.reshape(g, (-1,), copy=True), n.reshape(-1)


def test_copies_of_every_dtype_match_numpy(device):
    for dtype in supported(device, NUMERIC_DTYPES):  # the dtypes this device holds
        n, g = make(device, (3, 4, 5), dtype, "negative")
        for name, got, want in _copies(g, n):
            assert got.dtype == want.dtype, (dtype, name)
            check(got, want, g, False)
            assert got.flags.c_contiguous, (dtype, name)
            got.free()


@pytest.mark.parametrize("layout", ["offset", "transposed"])
def test_copies_of_offset_and_transposed_inputs(device, layout):
    n, g = make(device, layout=layout, dtype="float32")
    for name, got, want in _copies(g, n):
        check(got, want, g, False)
        got.free(), name


def test_concat_and_stack_promote_as_result_type(device):
    cases = [("int8", "uint8"), ("bool", "int16"), ("float32", "int64"), ("uint32", "int64"),
             ("float32", "complex64"), ("bool", "bool")]
    for a, b in cases:
        if not (device.supports(a) and device.supports(b)):
            continue
        want_dt = ga.result_type(np.dtype(a), np.dtype(b))
        if not device.supports(want_dt):
            continue
        na, ga_a = make(device, (2, 3), a)
        nb, ga_b = make(device, (2, 3), b, seed=3)
        got = ga.concat([ga_a, ga_b], axis=1)
        assert got.dtype == want_dt
        same_values(got.get(), np.concatenate([na, nb], axis=1).astype(want_dt))
        got = ga.stack([ga_a, ga_b])
        assert got.dtype == want_dt
        same_values(got.get(), np.stack([na, nb]).astype(want_dt))


def test_concatenate_dtype_and_zero_size_parts(device):
    n, g = make(device, (2, 3))
    got = ga.concatenate([g, g[:0], g], axis=0, dtype=ga.float32)
    same_values(got.get(), np.concatenate([n, n[:0], n]).astype(np.float32))
    same_values(ga.concat([g[:0], g[:0]]).get(), n[:0])
    same_values(ga.stack([g[:, :0]] * 3, axis=2).get(), np.stack([n[:, :0]] * 3, axis=2))
    same_values(ga.concat([g[0, 0], g], axis=None).get(), np.concatenate([n[0, 0, None], n.ravel()]))
    same_values(ga.roll(g[:0], 3).get(), n[:0])
    same_values(ga.tile(g[0, 0], ()).get(), np.tile(n[0, 0], ()))


# Hypothesis: shapes and axes ------------------------------------------------------------------
@st.composite
def shape_and_axis(draw, min_dims=1):
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=min_dims, max_size=4)))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return shape, axis


@FEW
@given(data=st.data())
def test_hypothesis_concat_stack_roll_repeat_tile(device, data):
    shape, axis = data.draw(shape_and_axis())
    lengths = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    parts_n = []
    for k, m in enumerate(lengths):
        s = list(shape)
        s[axis] = m
        parts_n.append(values(tuple(s), np.dtype("int16"), k))
    parts_g = [ga.asarray(p, device=device) for p in parts_n]
    same_values(ga.concat(parts_g, axis=axis).get(), np.concatenate(parts_n, axis=axis))
    same_values(ga.concat(parts_g, axis=None).get(), np.concatenate(parts_n, axis=None))
    n = values(shape, np.dtype("int16"), 7)
    g = ga.asarray(n, device=device)
    same_values(ga.stack([g, g], axis=axis).get(), np.stack([n, n], axis=axis))
    shift = data.draw(st.integers(-9, 9))
    same_values(ga.roll(g, shift, axis=axis).get(), np.roll(n, shift, axis=axis))
    same_values(ga.roll(g, shift).get(), np.roll(n, shift))
    r = data.draw(st.integers(0, 3))
    same_values(ga.repeat(g, r, axis=axis).get(), np.repeat(n, r, axis=axis))
    reps = tuple(data.draw(st.lists(st.integers(0, 2), max_size=4)))
    same_values(ga.tile(g, reps).get(), np.tile(n, reps))
    same_values(ga.flip(g, axis=axis).get(), np.flip(n, axis=axis))
    same_values(ga.expand_dims(g, axis).get(), np.expand_dims(n, axis))
    dst = data.draw(st.integers(-len(shape), len(shape) - 1))
    same_values(ga.moveaxis(g, axis, dst).get(), np.moveaxis(n, axis, dst))


@FEW
@given(data=st.data())
def test_hypothesis_views_match_numpy_layouts(device, data):
    shape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=4)))
    h = values(shape, np.dtype("uint8"), 2)
    g = ga.asarray(h, device=device)
    n, v = h[::-1], g[::-1]  # a negative stride on the first axis
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    ones = tuple(k for k, m in enumerate(shape) if m == 1)
    k = data.draw(st.integers(0, 2))  # new axes, then k distinct ones in the result's range
    new = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) + k - 1), min_size=k,
                                         max_size=k))))
    cases = [(ga.permute_dims(v, perm), np.transpose(n, perm)),
             (ga.expand_dims(v, new), np.expand_dims(n, new)),
             (ga.squeeze(v, ones), np.squeeze(n, ones)),
             (ga.flip(v), np.flip(n))]
    ax = data.draw(st.integers(-len(shape), len(shape) - 1))
    cases += list(zip(ga.unstack(v, axis=ax), np.moveaxis(n, ax, 0), strict=True))
    for got, want in cases:
        assert got.shape == want.shape and got.strides == want.strides
        assert got.storage is g.storage
        same_values(got.get(), want)


# repeat with an array of repeats (a data-dependent shape) --------------------------------------
@pytest.mark.parametrize("dtype", ["bool", "int8", "float32", "complex64", "uint64"])
def test_repeat_with_array_repeats(device, dtype):
    n, g = make(device, (3, 4, 5), dtype, "negative")
    reps_n = np.array([2, 0, 1, 3], dtype=np.int32)
    reps = ga.asarray(reps_n, device=device)
    same_values(ga.repeat(g, reps, axis=1).get(), np.repeat(n, reps_n, axis=1))
    flat = np.arange(n.size) % 3
    same_values(ga.repeat(g, ga.asarray(flat.astype(np.uint8), device=device)).get(),
                np.repeat(n, flat))
    same_values(ga.repeat(g, ga.asarray(np.array([2]), device=device), axis=-1).get(),
                np.repeat(n, 2, axis=-1))
    same_values(ga.repeat(g, ga.asarray(np.zeros(3, np.int64), device=device), axis=0).get(),
                np.repeat(n, 0, axis=0))
    same_values(ga.repeat(g[:, :0], ga.asarray(np.zeros(0, np.int64), device=device),
                          axis=1).get(), n[:, :0])


@FEW
@given(data=st.data())
def test_hypothesis_repeat_array(device, data):
    shape, axis = data.draw(shape_and_axis())
    n = values(shape, np.dtype("int32"), 1)
    g = ga.asarray(n, device=device)
    reps_n = np.array(data.draw(st.lists(st.integers(0, 3), min_size=shape[axis],
                                         max_size=shape[axis])), dtype=np.int64)
    got = ga.repeat(g, ga.asarray(reps_n, device=device), axis=axis)
    same_values(got.get(), np.repeat(n, reps_n, axis=axis))


def test_repeat_array_reads_one_count_and_frees_its_temporaries(device, used):
    n, g = make(device, (50, 3), "float32")
    reps = ga.asarray(np.arange(50) % 4, device=device)
    ga.repeat(g, reps, axis=0).free()  # warm up kernels and the pool
    before = used()
    r = ga.repeat(g, reps, axis=0)
    with_result = used()  # the result only: positions and the count went back
    r.free()
    assert used() == before
    with ga.empty(r.shape, r.dtype, device=device):
        assert used() == with_result


# Bad input: the right error, nothing allocated ------------------------------------------------
def _bad_cases(g, h):
    """(what, call, error class, message part): ``g`` is (4, 5, 6), ``h`` (2, 3)."""
    neg = ga.asarray(np.array([1, -1, 2, 0, 1]), device=g.device)
    return [
        ("concat shapes", lambda: ga.concat([g, h]), ValueError, "same shape"),
        ("concat off-axis", lambda: ga.concat([g, g[:, :2]], axis=0), ValueError, "same shape"),
        ("concat axis", lambda: ga.concat([g, g], axis=3), np.exceptions.AxisError, "axis 3"),
        ("concat empty", lambda: ga.concat([]), ValueError, "at least one"),
        ("concat 0-d", lambda: ga.concat([g[0, 0, 0], g[0, 0, 1]]), ValueError, "0-d"),
        ("concat not a list", lambda: ga.concat(g), TypeError, "list or tuple"),
        ("concat numpy", lambda: ga.concat([g, np.zeros((4, 5, 6))]), TypeError, "ga.asarray"),
        ("stack shapes", lambda: ga.stack([g, g[:2]]), ValueError, "same shape"),
        ("stack axis", lambda: ga.stack([g, g], axis=5), np.exceptions.AxisError, "axis 5"),
        ("squeeze non-1", lambda: ga.squeeze(g, 1), ValueError, "length 5"),
        ("squeeze axis", lambda: ga.squeeze(g, 4), np.exceptions.AxisError, "axis 4"),
        ("squeeze repeated", lambda: ga.squeeze(g[:1], (0, 0)), ValueError, "repeats"),
        ("expand_dims axis", lambda: ga.expand_dims(g, 5), IndexError, "axis 5"),
        ("expand_dims repeated", lambda: ga.expand_dims(g, (1, 1)), ValueError, "repeats"),
        ("flip axis", lambda: ga.flip(g, axis=-4), np.exceptions.AxisError, "axis -4"),
        ("permute_dims short", lambda: ga.permute_dims(g, (0, 1)), ValueError, "once"),
        ("permute_dims repeated", lambda: ga.permute_dims(g, (0, 1, 1)), ValueError, "repeats"),
        ("moveaxis lengths", lambda: ga.moveaxis(g, (0, 1), 2), ValueError, "as many"),
        ("moveaxis axis", lambda: ga.moveaxis(g, 0, 3), np.exceptions.AxisError, "axis 3"),
        ("broadcast_to", lambda: ga.broadcast_to(g, (4, 5, 7)), ValueError, "(4, 5, 7)"),
        ("broadcast_arrays", lambda: ga.broadcast_arrays(g, h), ValueError, "broadcast"),
        ("reshape size", lambda: ga.reshape(g, (7, 7)), ValueError, "size 120"),
        ("reshape copy=False", lambda: ga.reshape(g.mT, (-1,), copy=False), ValueError, "copy"),
        ("roll lengths", lambda: ga.roll(g, (1, 2), axis=(0,)), ValueError, "same length"),
        ("roll tuple no axis", lambda: ga.roll(g, (1, 2)), ValueError, "tuple axis"),
        ("roll axis", lambda: ga.roll(g, 1, axis=3), np.exceptions.AxisError, "axis 3"),
        ("roll float", lambda: ga.roll(g, 1.5), TypeError, "shift"),
        ("tile negative", lambda: ga.tile(g, (2, -1)), ValueError, ">= 0"),
        ("repeat negative", lambda: ga.repeat(g, -1), ValueError, ">= 0"),
        ("repeat negative array", lambda: ga.repeat(g[0], neg, axis=0), ValueError, "negative"),
        ("repeat length", lambda: ga.repeat(g, neg[:3], axis=0), ValueError, "1 or 4"),
        ("repeat float array", lambda: ga.repeat(g, ga.astype(neg, ga.float32), axis=1),
         TypeError, "integer dtype"),
        ("repeat float", lambda: ga.repeat(g, 1.5), TypeError, "int"),
        ("repeat axis", lambda: ga.repeat(g, 2, axis=3), np.exceptions.AxisError, "axis 3"),
        ("unstack 0-d", lambda: ga.unstack(g[0, 0, 0]), ValueError, "0-d"),
    ]


def test_bad_input_raises_before_allocating(device, used):
    _, g = make(device)
    _, h = make(device, (2, 3))
    cases = _bad_cases(g, h)
    for _, call, err, _ in cases:  # warm: kernels compiled, pool blocks made
        with pytest.raises(err):
            call()
    before = used()
    for what, call, err, part in cases:
        with pytest.raises(err, match=re.escape(part)):
            call()
        assert used() == before, what


def test_mixed_devices_raise_value_error():
    devs = ga.devices()
    if len({d.backend for d in devs}) < 2:
        pytest.skip("one back-end only")
    a = ga.zeros((2, 3), device=devs[0])
    b = next(ga.zeros((2, 3), device=d) for d in devs if d.backend != devs[0].backend)
    for call in (lambda: ga.concat([a, b]), lambda: ga.stack([a, b]),
                 lambda: ga.broadcast_arrays(a, b),
                 lambda: ga.repeat(a, ga.asarray(np.array([1, 2]), device=b.device), axis=0)):
        with pytest.raises(ValueError, match="device"):
            call()


def test_freed_arrays_raise(device):
    _, g = make(device)
    other = ga.zeros((4, 5, 6), dtype=g.dtype, device=device)
    g.free()
    calls = [lambda: ga.concat([other, g]), lambda: ga.stack([g, other]),
             lambda: ga.broadcast_to(g, (2, 4, 5, 6)), lambda: ga.broadcast_arrays(other, g),
             lambda: ga.expand_dims(g, 0), lambda: ga.squeeze(g, 0), lambda: ga.flip(g),
             lambda: ga.moveaxis(g, 0, 1), lambda: ga.permute_dims(g, (0, 1, 2)),
             lambda: ga.transpose(g), lambda: ga.reshape(g, (-1,)), lambda: ga.roll(g, 1),
             lambda: ga.tile(g, (2,)), lambda: ga.repeat(g, 2), lambda: ga.unstack(g),
             lambda: ga.repeat(other, g, axis=0)]
    for call in calls:
        with pytest.raises(ga.FreedArrayError):
            call()


def test_a_cached_loop_allocates_nothing_after_the_first_iteration(device):
    _, g = make(device, (8, 9), "float32")
    reps = ga.asarray(np.arange(8) % 3, device=device)
    cache = ga.AllocCache()
    counts = []
    for _ in range(3):
        with ga.record_allocations() as rec, ga.cached(cache):
            for r in (ga.concat([g, g]), ga.stack([g, g]), ga.roll(g, 1, axis=0),
                      ga.tile(g, (2, 1)), ga.repeat(g, 2, axis=1), ga.repeat(g, reps, axis=0),
                      ga.roll(g.mT, 3)):
                del r
        counts.append(rec.count)
    assert counts[1:] == [0, 0], counts
    cache.free()


@pytest.mark.parametrize("reps, dtype", [
    ([2**62, 2**62, 2**62], np.int64),        # wraps to a negative total
    ([2**63 - 1, 2**63 - 1, 3], np.int64),    # wraps to a small positive total
    ([2**63, 1, 1], np.uint64),               # past int64 as one count
])
def test_repeat_counts_whose_sum_overflows_int64_are_a_value_error(device, reps, dtype):
    """Regression: the running sum wrapped, and the result was a SystemError, a segfault
    (np.repeat on cpu, the kernel on OpenCL) or a silently short array (uint64 counts)."""
    x = ga.asarray(np.arange(3.0), device=device)
    counts = ga.asarray(np.array(reps, dtype=dtype), device=device)
    before = ga.memory_stats(device)["used_bytes"]
    with pytest.raises(ValueError, match=r"repeat\(\): the repeats add up to more than"):
        ga.repeat(x, counts)
    assert ga.memory_stats(device)["used_bytes"] == before  # temporaries went back
    with pytest.raises(ValueError, match=r"repeat\(\): 3 elements repeated"):
        ga.repeat(x, 2**62)
    assert ga.repeat(x, ga.asarray(np.array([1, 2, 3], dtype=dtype), device=device)).get(
    ).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 2.0]
