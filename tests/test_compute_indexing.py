"""Indexing on every device, NumPy as the oracle, bit for bit (docs/indexing.md): the
compaction helper, nonzero, boolean masks, integer arrays, take, take_along_axis, and
assignment through all of them; bad input refused with nothing allocated or changed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import SETTINGS, STRUCT_DTYPE

import gpuarrays as ga
from gpuarrays._compute.compaction import select

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def supported(device) -> list[str]:
    """Every numeric dtype the device holds (opencl may lack float16/float64)."""
    return [d for d in DTYPES if device.supports(d)]


def data(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    v = rng.integers(-100, 100, shape)
    if dt.kind == "c":
        v = v + 1j * rng.integers(-100, 100, shape)
    return v.astype(dt)


def same(got, want: np.ndarray) -> None:
    """Bit-exact: dtype, shape and every byte."""
    g = got.get() if isinstance(got, ga.GPUArray) else np.asarray(got)
    assert g.dtype == want.dtype and g.shape == want.shape, (g.dtype, want.dtype, g.shape,
                                                             want.shape)
    assert g.tobytes() == np.ascontiguousarray(want).tobytes(), (g, want)


# compaction.select (the building block of masks, nonzero and unique) -------------------------
def test_select_every_dtype_matches_numpy(device):
    m = np.random.default_rng(2).random(1000) < 0.4
    gm = ga.asarray(m, device=device)
    for dtype in supported(device):
        h = data((1000,), dtype, seed=1)
        same(select(ga.asarray(h, device=device), gm), h[m])


@pytest.mark.parametrize("n", [0, 1, 2, 255, 256, 257, 4097, 70_000])
def test_select_sizes_and_masks(device, n):
    h = data((n,), "float32", seed=n)
    x = ga.asarray(h, device=device)
    for m in (np.zeros(n, bool), np.ones(n, bool), np.random.default_rng(n).random(n) < 0.5):
        same(select(x, ga.asarray(m, device=device)), h[m])


def test_select_strided_and_reversed_inputs(device):
    h = data((3000,), "int32", seed=3)
    m = np.random.default_rng(4).random(3000) < 0.5
    x, gm = ga.asarray(h, device=device), ga.asarray(m, device=device)
    same(select(x[::-2], gm[::2]), h[::-2][m[::2]])
    same(select(x[1::3], gm[:1000]), h[1::3][m[:1000]])


def test_select_refuses_bad_arguments_before_allocating(device, used):
    x = ga.ones(5, device=device)
    m = ga.ones(5, dtype=ga.bool, device=device)
    before = used()
    with ga.record_allocations() as rec:
        with pytest.raises(TypeError, match="bool"):
            select(x, x)
        with pytest.raises(ValueError, match="1-d"):
            select(x, m[:4])
        with pytest.raises(ValueError, match="1-d"):
            select(x.reshape(5, 1), m)
        with pytest.raises(TypeError, match="gpuarrays array"):
            select(np.ones(5), m)
    assert rec.count == 0 and used() == before
    m.free()
    with pytest.raises(ga.FreedArrayError):
        select(x, m)


def test_select_results_and_temporaries_come_from_the_pool(device, used):
    x = ga.asarray(data((5000,), "float32"), device=device)
    m = x > 0
    base = used()
    r = select(x, m)
    assert r.nbytes <= used() - base < 2 * r.nbytes  # the running counts (8 B each) went back
    r.free()
    assert used() == base


@given(st.integers(0, 300), st.floats(0, 1), st.integers(0, 2**16))
@SETTINGS
def test_select_random_masks(device, n, p, seed):
    h = data((n,), "int16", seed=seed)
    m = np.random.default_rng(seed).random(n) < p
    same(select(ga.asarray(h, device=device), ga.asarray(m, device=device)), h[m])


def test_select_moves_structured_elements(device):
    h = np.zeros(37, STRUCT_DTYPE)
    h["x"], h["y"], h["z"] = np.arange(37), np.arange(37) * 0.5, np.arange(37) % 7
    m = np.arange(37) % 3 == 1
    same(select(ga.asarray(h, device=device), ga.asarray(m, device=device)), h[m])


# CUDA: the generated kernels compile with NVRTC ---------------------------------------------
def test_index_kernels_compile_with_nvrtc(nvrtc):
    from gpuarrays._compute.device import indexing as kernels
    from gpuarrays.backends import cuda

    programs = [kernels.compact_program(cuda.DIALECT, kernels.CompactSpec("cuda", kind, size,
                                                                          w, nd))
                for kind, size, w, nd in [("select", 4, 4, 1), ("select", 16, 8, 5),
                                          ("select", 13, 1, 2), ("coords", 8, 8, 3),
                                          ("coords", 8, 8, 1)]]
    programs += [kernels.index_program(cuda.DIALECT, kernels.IndexSpec("cuda", mode, size, w,
                                                                       nd, idx, checked))
                 for mode, size, w, nd, idx, checked in [
                     ("gather", 4, 4, 1, ("i8",), True), ("gather", 2, 1, 3, ("u1", "i2"), True),
                     ("scatter", 16, 8, 6, ("u8", "i4", "i8"), False),
                     ("check", 8, 8, 2, ("i1", "u4"), True), ("gather", 8, 8, 1, ("i8",), False),
                     ("scatter", 13, 1, 1, ("i8",), False)]]
    for text, name, _ in programs:
        image, kind = cuda.compile_image(text, 90)
        assert image and kind == "cubin", name


# a[key] and a[key] = value: integer arrays, masks, mixed keys ---------------------------------
def as_index(h: np.ndarray, how: str, device):
    """An index array as a gpuarrays array, a NumPy array or a list."""
    if how == "ga":
        return ga.asarray(h, device=device)
    return h if how == "np" else h.tolist()


@st.composite
def keys(draw):
    """(shape, key with NumPy arrays, which slots are arrays) covering NumPy's index forms."""
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=4)))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    bshape = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=2)))
    use_mask = draw(st.booleans()) and draw(st.booleans())
    key, axis, masked = [], 0, False
    while axis < len(shape):
        if draw(st.integers(0, 5)) == 0:
            key.append(None)
        n = shape[axis]
        choice = draw(st.sampled_from(["slice", "int", "arr", "arr"] + (["mask"] * 3 if use_mask
                                                                         and not masked else [])))
        if choice == "int" and n == 0:
            choice = "slice"
        if choice == "slice":
            start, stop = draw(st.integers(-5, 5)), draw(st.integers(-5, 5))
            key.append(slice(start, stop, draw(st.sampled_from([None, 1, 2, -1, -2]))))
            axis += 1
        elif choice == "int":
            key.append(int(rng.integers(-n, n)))
            axis += 1
        elif choice == "arr":
            if use_mask:  # masks and arrays would have to broadcast: keep one kind per key
                key.append(slice(None))
            else:
                # each array broadcasts to bshape (some of its axes 1)
                sub = tuple(1 if draw(st.integers(0, 3)) == 0 else b for b in bshape)
                lo = -n if n else 0
                key.append(rng.integers(lo, max(n, 1), sub) if n else np.zeros(sub, np.intp)
                           if 0 in sub else np.zeros((0,), np.intp))
            axis += 1
        else:
            k = min(len(shape) - axis, draw(st.integers(1, 2)))
            key.append(rng.random(shape[axis:axis + k]) < draw(st.sampled_from([0, 0.5, 1])))
            masked = True
            axis += k
    if draw(st.booleans()) and len(key) > 1:  # an Ellipsis for a run of full slices
        cut = draw(st.integers(0, len(key) - 1))
        if all(type(k) is slice and k == slice(None) for k in key[cut:]):
            key = key[:cut] + [Ellipsis]
    return shape, tuple(key)


def _convert(key, how, device):
    return tuple(as_index(k, how, device) if isinstance(k, np.ndarray) else k for k in key)


@given(keys(), st.sampled_from(["ga", "np", "list"]), st.sampled_from(DTYPES))
@SETTINGS
def test_random_keys_get_and_set_as_numpy(device, case, how, dtype):
    shape, key = case
    if not device.supports(dtype):
        dtype = "float32"
    h = data(shape, dtype, seed=len(key))
    x = ga.asarray(h, device=device)
    gkey = _convert(key, how, device)
    if how == "list":  # a list loses an empty array's shape: NumPy gets the lists too
        key = gkey
    try:
        want = h[key]
    except IndexError:
        with pytest.raises(IndexError):
            x[gkey]
        return
    same(x[gkey], np.asarray(want))
    # assignment: an array of the result's shape, then a scalar, then a broadcast row
    h2 = h.copy()
    val = data(np.shape(want), dtype, seed=99)
    h2[key] = val
    x[gkey] = ga.asarray(val, device=device)
    same(x, h2)
    h2[key] = 1
    x[gkey] = 1
    same(x, h2)
    if np.ndim(want):
        row = data(np.shape(want)[-1:], dtype, seed=5)
        h2[key] = row
        x[gkey] = row
        same(x, h2)


def test_every_dtype_through_arrays_and_masks(device):
    idx = np.array([3, -1, 0, 3, 7])
    m = np.arange(24).reshape(3, 8) % 3 == 0
    for dtype in supported(device):
        h = data((3, 8), dtype, seed=7)
        x = ga.asarray(h, device=device)
        gi, gm = ga.asarray(idx, device=device), ga.asarray(m, device=device)
        same(x[:, gi], h[:, idx])
        same(x[gm], h[m])
        same(x[gi[:3] % 3, gi[1:4]], h[idx[:3] % 3, idx[1:4]])
        same(ga.take(x, gi, axis=1), np.take(h, idx, axis=1))
        v = data((3, 5), dtype, seed=8)
        h[:, [0, 2, 5, 6, 7]] = v
        x[:, ga.asarray([0, 2, 5, 6, 7], device=device)] = ga.asarray(v, device=device)
        same(x, h)
        h[m] = h[m][::-1]
        x[gm] = x[gm][::-1]
        same(x, h)
        h[~m] = h[0, 0]
        x[~gm] = h[0, 0]
        same(x, h)


def test_masks_all_false_all_true_and_of_leading_axes(device):
    h = data((4, 5, 6), "int32", seed=3)
    x = ga.asarray(h, device=device)
    for m in (np.zeros((4, 5, 6), bool), np.ones((4, 5, 6), bool)):
        same(x[ga.asarray(m, device=device)], h[m])
    for m in (np.zeros(4, bool), np.ones(4, bool), np.arange(4) % 2 == 0):
        same(x[ga.asarray(m, device=device)], h[m])
        same(x[..., ga.asarray(np.resize(m, 6), device=device)], h[..., np.resize(m, 6)])
    m2 = np.arange(30).reshape(5, 6) % 4 == 1
    same(x[1:, ga.asarray(m2, device=device)], h[1:, m2])
    same(x[ga.asarray(True, device=device)], h[np.True_])
    same(x[False], h[False])
    same(x[None, :, ga.asarray(m2, device=device)], h[None, :, m2])
    h[:, m2] = 9
    x[:, ga.asarray(m2, device=device)] = 9
    same(x, h)


def test_integer_array_dtypes_negative_repeated_and_empty_indices(device):
    h = data((6, 7), "float32", seed=5)
    x = ga.asarray(h, device=device)
    raw = np.array([[0, -1, 5], [2, 2, -6]])
    for dt in ["int8", "uint8", "int16", "int32", "uint32", "int64", "uint64"]:
        idx = raw % 6 if dt[0] == "u" else raw
        same(x[ga.asarray(idx.astype(dt), device=device)], h[idx.astype(dt)])
    same(x[ga.asarray(np.zeros((0, 3), np.int64), device=device)], h[np.zeros((0, 3), np.int64)])
    same(x[[]], h[[]])
    same(x[:, [[]]], h[:, [[]]])


def test_strided_views_and_strided_index_arrays(device):
    h = data((8, 9), "int16", seed=9)
    x = ga.asarray(h, device=device)
    big = np.arange(40) % 8
    gbig = ga.asarray(big, device=device)
    same(x[::-2, 1::2][gbig[::-5] % 4, :], h[::-2, 1::2][big[::-5] % 4, :])
    same(x.T[gbig[1:30:3] % 9], h.T[big[1:30:3] % 9])
    y = ga.asarray(h, device=device)
    hy = h.copy()
    hy.T[big[:5]] = hy.T[big[5:10] + 1]
    y.T[gbig[:5]] = y.T[gbig[5:10] + 1]
    same(y, hy)


def test_assignment_that_overlaps_its_value(device):
    h = data((10,), "int64", seed=1)
    x = ga.asarray(h, device=device)
    idx = np.arange(10)[::-1]
    h[idx] = h
    x[ga.asarray(idx, device=device)] = x
    same(x, h)
    h[[1, 2, 3]] = h[2:5]
    x[[1, 2, 3]] = x[2:5]
    same(x, h)


def test_duplicate_indices_write_one_of_their_values(device):
    x = ga.zeros(4, dtype=ga.int32, device=device)
    x[ga.asarray([1, 1, 1, 3], device=device)] = ga.asarray([5, 6, 7, 8], device=device)
    got = x.get()
    assert got[1] in (5, 6, 7) and got[3] == 8 and got[0] == got[2] == 0
    if device.backend == "cpu":
        assert got[1] == 7  # NumPy: the last wins


def test_assignment_converts_and_broadcasts_values(device):
    h = np.zeros((4, 3), np.float32)
    x = ga.asarray(h, device=device)
    idx = [0, 2]
    h[idx] = np.array([1, 2, 3], np.int64)
    x[idx] = ga.asarray(np.array([1, 2, 3], np.int64), device=device)
    same(x, h)
    h[idx] = [[7], [8]]
    x[idx] = [[7], [8]]
    same(x, h)
    h[[3]] = np.ones((1, 1, 3))
    x[[3]] = np.ones((1, 1, 3))
    same(x, h)


# take, take_along_axis, nonzero ------------------------------------------------------------
def test_take_matches_numpy(device):
    h = data((4, 5, 3), "float32", seed=2)
    x = ga.asarray(h, device=device)
    idx = np.array([4, -1, 0, 2, 2])
    gi = ga.asarray(idx, device=device)
    for axis in (1, -2):
        same(ga.take(x, gi, axis=axis), np.take(h, idx, axis=axis))
    same(ga.take(x, ga.asarray([0, 2], device=device), axis=0), np.take(h, [0, 2], axis=0))
    same(ga.take(x, gi % 3, axis=2), np.take(h, idx % 3, axis=2))
    same(ga.take(x, gi), np.take(h, idx))  # axis=None: the flattened array
    same(ga.take(x[0, :, 0], gi), np.take(h[0, :, 0], idx))
    same(ga.take(x, ga.asarray(np.zeros(0, np.int64), device=device), axis=1),
         np.take(h, np.zeros(0, np.int64), axis=1))


@given(st.integers(1, 4), st.integers(0, 2**16))
@SETTINGS
def test_take_along_axis_matches_numpy(device, ndim, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(1, 5, ndim))
    h = data(shape, "int32", seed=seed)
    axis = int(rng.integers(-ndim, ndim))
    jshape = list(shape)
    jshape[axis] = int(rng.integers(0, 6))
    for k in range(ndim):  # broadcast along the other axes sometimes
        if k != axis % ndim and rng.random() < 0.3:
            jshape[k] = 1
    n = shape[axis]
    idx = rng.integers(-n, n, jshape)
    x = ga.asarray(h, device=device)
    want = np.take_along_axis(h, idx, axis)
    same(ga.take_along_axis(x, ga.asarray(idx, device=device), axis=axis), want)
    sort = np.argsort(h, axis=axis)
    same(ga.take_along_axis(x, ga.asarray(sort, device=device), axis=axis),
         np.take_along_axis(h, sort, axis))


@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (3, 4), (2, 3, 4), (2, 0, 3), (5, 1, 2, 3)])
def test_nonzero_matches_numpy(device, shape):
    for dtype in supported(device):
        h = data(shape, dtype, seed=len(shape)) * (np.arange(np.prod(shape)).reshape(shape) % 3
                                                    != 0).astype(dtype)
        got = ga.nonzero(ga.asarray(h, device=device))
        want = np.nonzero(h)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            same(g, w.astype(np.int64))


def test_nonzero_of_views_and_of_all_false_and_all_true(device):
    h = data((6, 7), "float32", seed=4)
    x = ga.asarray(h, device=device)
    for g, w in zip(ga.nonzero(x.T[::-1] > 0), np.nonzero(h.T[::-1] > 0), strict=True):
        same(g, w.astype(np.int64))
    for v in (0, 1):
        z = ga.full((5, 4), v, dtype=ga.int8, device=device)
        for g, w in zip(ga.nonzero(z), np.nonzero(np.full((5, 4), v)), strict=True):
            same(g, w.astype(np.int64))


def test_big_mask_and_nonzero(device):
    rng = np.random.default_rng(0)
    h = rng.standard_normal(300_001).astype(np.float32)
    x = ga.asarray(h, device=device)
    same(x[x > 0.5], h[h > 0.5])
    (g,) = ga.nonzero(x > 0.5)
    same(g, np.nonzero(h > 0.5)[0].astype(np.int64))


# Bad input: the right error, nothing allocated, nothing changed ------------------------------
def test_bad_indices_raise_index_error_and_change_nothing(device, used):
    h = data((4, 5), "float32", seed=1)
    x = ga.asarray(h, device=device)
    bad_ga = ga.asarray(np.array([0, 4, 1]), device=device)
    big = ga.asarray(np.array([0, 2**40], np.uint64), device=device)
    fidx = ga.asarray(np.array([0.0, 1.0]), device=device)
    mask_wrong = ga.asarray(np.ones((4, 4), bool), device=device)
    one = ga.ones(1, device=device)
    pair = ga.asarray([5, -6], device=device)
    before = used()
    cases = [(bad_ga,), (slice(None), pair), ([0, 9],),
             (np.array([-5]),), (big,), (fidx,), (np.array([0.5]),), (mask_wrong,),
             (np.ones(5, bool),), (0, 1, [0]), ([0, 1], [[0], [1], [2]], None, Ellipsis, 0),
             ([0, 1], [0, 1, 2]), ("a",), (1.5,), (Ellipsis, Ellipsis, [0])]
    for key in cases:
        with pytest.raises(IndexError):
            x[key]
        with pytest.raises(IndexError):
            x[key] = 1.0
        with pytest.raises(IndexError):
            x[key] = one
        assert used() == before, key
    same(x, h)
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        x[bad_ga]
    with pytest.raises(IndexError, match="index 1099511627776 is out of bounds"):
        x[big]
    with pytest.raises(IndexError, match="boolean index did not match"):
        x[mask_wrong]
    with pytest.raises(IndexError):
        ga.take(x, bad_ga, axis=0)
    with pytest.raises(IndexError):
        ga.take(x, fidx, axis=0)
    with pytest.raises(IndexError):
        ga.take_along_axis(x, ga.asarray(np.full((4, 1), 5), device=device), axis=1)
    assert used() == before
    same(x, h)


def test_bad_values_and_arguments_are_refused_before_anything_is_allocated(device, used):
    x = ga.asarray(data((4, 5), "int32"), device=device)
    idx = ga.asarray([0, 1], device=device)
    before = used()
    with ga.record_allocations() as rec:
        with pytest.raises(ValueError, match="shape mismatch"):
            x[[0, 1]] = np.ones(3)
        with pytest.raises(ValueError, match="shape mismatch"):
            x[[0, 1]] = np.ones((2, 4))
        with pytest.raises(ValueError):
            x[[0, 1]] = "abc"
        with pytest.raises(np.exceptions.AxisError):
            ga.take(x, idx, axis=2)
        with pytest.raises(ValueError, match="same number of dimensions"):
            ga.take_along_axis(x, idx, axis=0)
        with pytest.raises(ValueError, match="0-d"):
            ga.nonzero(ga.asarray(1, device=device) if False else x[0, 0])
        with pytest.raises(TypeError, match="gpuarrays array"):
            ga.take(np.ones(3), idx)
    assert rec.count == 0 and used() == before
    ro = ga.broadcast_to(x[0], (3, 5))
    with pytest.raises(ValueError, match="read-only"):
        ro[[0]] = 1


def test_freed_arrays_and_mixed_devices(device):
    x = ga.ones((3, 3), device=device)
    idx = ga.asarray([0, 2], device=device)
    dead = ga.asarray([0, 1], device=device)
    dead.free()
    for fn in (lambda: x[dead], lambda: x.__setitem__(dead, 1), lambda: ga.take(x, dead),
               lambda: ga.take_along_axis(x, dead.reshape(1, 2), axis=1)):
        with pytest.raises(ga.FreedArrayError):
            fn()
    y = ga.ones(3, device=device)
    y.free()
    for fn in (lambda: y[idx], lambda: y.__setitem__(idx, 1), lambda: ga.take(y, idx),
               lambda: ga.nonzero(y), lambda: y[[0]]):
        with pytest.raises(ga.FreedArrayError):
            fn()
    with pytest.raises(ga.FreedArrayError):
        x[idx] = y
    other = [d for d in ga.devices() if d != device][:1]
    for d in other:
        far = ga.asarray([0, 1], device=d)
        with pytest.raises(ValueError, match="move it with to_device"):
            x[far]
        with pytest.raises(ValueError, match="move it with to_device"):
            x[[0, 1]] = ga.ones((2, 3), device=d)


def test_temporaries_go_back_and_results_come_from_the_pool(device, used):
    h = data((50, 40), "float32", seed=3)
    x = ga.asarray(h, device=device)
    m = x > 0
    idx = ga.asarray(np.arange(30) % 50, device=device)
    base = used()
    for fn in (lambda: x[m], lambda: x[idx], lambda: x[[1, 2]], lambda: x[m[:, 0]],
               lambda: ga.take(x, idx, axis=1)):
        r = fn()
        r.free()
        assert used() == base
    x[m] = 0
    x[idx] = ga.zeros(40, device=device)
    x[[1, 2], [3, 4]] = 7
    assert used() == base
    cache = ga.AllocCache()
    with ga.cached(cache):
        for _ in range(3):
            with ga.record_allocations() as rec:
                x[idx, :5].free()
    assert rec.count == 0
    cache.free()


def test_mask_assignment_of_a_scalar_converts_as_numpy(device):
    for dtype in supported(device):
        h = data((5, 6), dtype, seed=11)
        x = ga.asarray(h, device=device)
        m = h.real > 10 if h.dtype.kind == "c" else h > 10 if h.dtype.kind != "b" else h
        gm = ga.asarray(m, device=device)
        value = 3 if h.dtype.kind in "biu" else 2.5
        h[m] = value
        x[gm] = value
        same(x, h)
        h[~m] = np.asarray(1, h.dtype)[()]
        x[~gm] = np.asarray(1, h.dtype)[()]
        same(x, h)
    x = ga.asarray(np.arange(6, dtype=np.int8), device=device)
    with pytest.raises(OverflowError):
        x[x > 2] = 1000  # does not fit an int8 (NumPy 2)
    same(x, np.arange(6, dtype=np.int8))


def test_assignment_through_indices_that_live_in_the_target(device):
    h = np.array([2, 0, 1, 5, 4, 3, 9, 8], np.int64)
    x = ga.asarray(h, device=device)
    h[h[:4]] = 7
    x[x[:4]] = 7
    same(x, h)


def test_structured_and_unaligned_elements_move_as_bytes(device):
    h = np.zeros(20, STRUCT_DTYPE)
    h["x"], h["y"], h["z"] = np.arange(20), np.arange(20) * 0.25, np.arange(20) % 5
    x = ga.asarray(h, device=device)
    idx = np.array([19, 0, 3, 3, -2])
    same(x[ga.asarray(idx, device=device)], h[idx])
    m = np.arange(20) % 3 == 0
    same(x[ga.asarray(m, device=device)], h[m])
    h[[1, 2]] = h[[5, 6]]
    x[ga.asarray([1, 2], device=device)] = x[ga.asarray([5, 6], device=device)]
    same(x, h)
    raw = np.arange(4 * 16 + 1, dtype=np.uint8)
    b = ga.asarray(raw, device=device)
    u = b[1:].view(np.int32)  # element addresses 1 byte past alignment
    hu = raw[1:].view(np.int32)
    same(u[ga.asarray([3, 0, 15], device=device)], hu[[3, 0, 15]])
    same(u[u > 0x08070605], hu[hu > 0x08070605])
    u[ga.asarray([2, 4], device=device)] = np.array([-1, 7], np.int32)
    hu = hu.copy()
    hu[[2, 4]] = [-1, 7]
    same(u, hu)
