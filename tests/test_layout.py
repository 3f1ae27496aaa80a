"""Derived arrays against NumPy as the oracle, on every device.

Every derived array must be a ``GPUArray`` over its parent's storage (one more
handle) with exactly NumPy's shape, strides, byte offset, flags and values;
copies (reshape that cannot be a view, advanced indexing) get new storage.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import (
    ALL_DTYPES,
    SETTINGS,
    STRUCT_DTYPE,
    assert_matches,
    basic_indices,
    derivation,
    dtypes,
    np_index,
    np_offset,
    pair,
    same_values,
    shapes,
    supported,
)

import gpuarrays as ga

pytestmark = pytest.mark.filterwarnings("error")


def root(x: np.ndarray) -> np.ndarray:
    """The NumPy array that owns ``x``'s memory."""
    while isinstance(x.base, np.ndarray):
        x = x.base
    return x


def check_derived(g, n, r_ga, r_np, refcount_before):
    """``r_ga`` (from ``g``) matches ``r_np`` (from ``n``), view iff NumPy's is a view."""
    assert type(r_ga) is ga.GPUArray
    is_view = root(r_np) is root(n)
    if r_ga is g:  # reshape to the same shape returns the array itself (docs/design.md, "The storage model")
        assert r_np.shape == n.shape and is_view
        assert g.storage.refcount == refcount_before
        # NumPy may pick other strides for length-1 axes; the layout is g's own
        same_values(g.get(), r_np)
        return
    elif is_view:
        assert r_ga.storage is g.storage
        assert g.storage.refcount == refcount_before + 1
    else:
        assert r_ga.storage is not g.storage
        assert r_ga.offset == 0 and r_ga.flags.c_contiguous
        assert r_ga.storage.refcount == 1
        assert g.storage.refcount == refcount_before
    assert_matches(r_ga, r_np, root(r_np))


# hypothesis: basic indexing and chains of derivations ------------------------------------------
@SETTINGS
@given(data=st.data())
def test_basic_index_matches_numpy(device, data):
    dtype = data.draw(dtypes(device))
    shape = data.draw(shapes())
    n, g = pair(shape, dtype, device)
    key = data.draw(basic_indices(shape))
    before = g.storage.refcount
    r_np = np_index(n, key)
    r_ga = g[key]
    check_derived(g, n, r_ga, r_np, before)


@SETTINGS
@given(data=st.data())
def test_derivation_chains_match_numpy(device, data):
    dtype = data.draw(dtypes(device))
    shape = data.draw(shapes(max_dims=3))
    n, g = pair(shape, dtype, device)
    keep = [g]  # intermediate arrays stay alive, as in real code
    used = ga.memory_stats(device)["used_bytes"]
    for _ in range(data.draw(st.integers(1, 4))):
        desc, fn_np, fn_ga = data.draw(derivation(n.shape, n.dtype))
        try:
            r_np = fn_np(n)
        except (ValueError, IndexError, TypeError) as e:
            before = g.storage.refcount
            with pytest.raises(type(e)):
                fn_ga(g)
            assert g.storage.refcount == before
            assert ga.memory_stats(device)["used_bytes"] == used
            continue
        before = g.storage.refcount
        r_ga = fn_ga(g)
        note = f"{desc} on {g.shape} {g.strides} {g.dtype}"
        try:
            check_derived(g, n, r_ga, r_np, before)
        except AssertionError as e:
            raise AssertionError(note) from e
        keep.append(r_ga)
        if r_ga is not g:  # (when reshape returned g itself, g's layout stays the oracle's)
            n, g = r_np, r_ga
        used = ga.memory_stats(device)["used_bytes"]


# explicit cases ---------------------------------------------------------------------------
def test_every_derived_array_shares_storage(device):
    n, g = pair((3, 4), "f4", device)
    derived = [g[1:], g[::-1, ::2], g[None, ..., 1], g.reshape(12), g.reshape(2, 6),
               g.view("i4"), g.view("u1"), g.T, g.mT, g.transpose(1, 0), g.swapaxes(0, 1),
               ga.moveaxis(g, 0, -1), g[:1].squeeze(0), ga.expand_dims(g, 1), g.ravel(),
               ga.broadcast_to(g, (2, 3, 4)), g.diagonal(), g.real, g[1, 2]]
    assert g.storage.refcount == 1 + len(derived)
    for d in derived:
        assert type(d) is ga.GPUArray
        assert d.storage is g.storage
        assert d.device == g.device and d.kind == g.kind
    del derived, d
    assert g.storage.refcount == 1


def test_all_integer_index_gives_0d_array(device):
    n, g = pair((3, 4), "i8", device)
    for key in [(1, 2), (-1, -1), (0, -4)]:
        r = g[key]
        assert type(r) is ga.GPUArray
        assert r.shape == () and r.ndim == 0 and r.size == 1
        assert r.offset == np_offset(n[key + (...,)], n)
        assert r.item() == n[key]
        assert r.storage is g.storage
    z, gz = pair((), "f8", device)
    r = gz[()]
    assert type(r) is ga.GPUArray and r.shape == ()
    assert gz[...].shape == () and gz[None].shape == (1,)


def test_negative_steps_offsets(device):
    n, g = pair((5, 6), "i2", device)
    for key in [(slice(None, None, -1),), (slice(None, None, -2), slice(4, 0, -3)),
                (slice(-1, -6, -1), 3), (Ellipsis, slice(None, None, -1))]:
        assert_matches(g[key], n[key], n)
    assert g[::-1].strides == (-12, 2) and g[::-1].offset == 48


def test_zero_size_results(device):
    n, g = pair((4, 3), "f8", device)
    for key in [slice(2, 2), (slice(None), slice(3, 0)), (slice(5, 9),),
                (slice(None, None, -1), slice(1, 1)), (slice(1, 3), None, slice(2, 2, -1))]:
        r_np, r_ga = n[key], g[key]
        assert r_ga.size == 0
        assert r_ga.storage is g.storage
        assert_matches(r_ga, r_np, n, strict_empty=True)
        assert r_ga.get().shape == r_np.shape
    e_ga = ga.empty((0, 5), "i4", device=device)
    e_np = np.empty((0, 5), "i4")
    for r_ga, r_np in [(e_ga, e_np), (e_ga.T, e_np.T), (e_ga.reshape(5, 0), e_np.reshape(5, 0)),
                       (e_ga.reshape(1, 0, 5), e_np.reshape(1, 0, 5)), (e_ga[:, 1:3], e_np[:, 1:3]),
                       (e_ga[:, ::-2], e_np[:, ::-2]), (e_ga.view("u1"), e_np.view("u1")),
                       (ga.expand_dims(e_ga, 1), np.expand_dims(e_np, 1)), (e_ga.ravel(), e_np.ravel())]:
        # NumPy 2's strides for empty arrays are conventions that differ between
        # np.empty ((0, 0) here) and reshape; only shape, flags and values are compared.
        assert_matches(r_ga, r_np)


def test_zero_size_flags_are_contiguous(device):
    n, g = pair((3, 4), "f8", device)
    r_np, r_ga = n[:0, ::2], g[:0, ::2]
    assert r_ga.flags.c_contiguous == r_np.flags.c_contiguous
    assert r_ga.flags.f_contiguous == r_np.flags.f_contiguous


# reshape -------------------------------------------------------------------------------------
def test_reshape_view_when_numpy_views(device):
    n, g = pair((4, 6), "f4", device)
    for shape in [(24,), (2, 12), (2, 2, 6), (-1,), (3, -1), (-1, 4, 2), (1, 24, 1)]:
        r = g.reshape(shape)
        assert r.storage is g.storage
        assert_matches(r, n.reshape(shape), n)
    # a view of a strided array that NumPy can still reshape without a copy
    s_np, s_ga = n[:, ::2], g[:, ::2]
    r = s_ga.reshape(2, 2, 3)
    assert r.storage is g.storage
    assert_matches(r, s_np.reshape(2, 2, 3), n)
    # *args and ga.reshape spellings
    assert_matches(g.reshape(6, 4), n.reshape(6, 4), n)
    assert_matches(ga.reshape(g, (8, 3)), n.reshape(8, 3), n)


def test_reshape_copy_when_numpy_copies(device):
    n, g = pair((4, 6), "i4", device)
    t_np, t_ga = n.T, g.T
    r = t_ga.reshape(24)
    assert r.storage is not g.storage
    assert r.flags.c_contiguous and r.offset == 0
    same_values(r.get(), t_np.reshape(24))
    with pytest.raises(ValueError):
        t_ga.reshape(24, copy=False)
    with pytest.raises(ValueError):
        ga.reshape(g[:, 1:4], 12, copy=False)
    r = ga.reshape(g[:, ::2], 12, copy=False)  # strides (24, 8): still one uniform stride
    assert r.storage is g.storage
    assert_matches(r, n[:, ::2].reshape(12, copy=False), n)
    assert g.reshape((4, 6), copy=False) is g
    r = g.reshape((4, 6), copy=True)
    assert r is not g and r.storage is not g.storage
    same_values(r.get(), n)


def test_reshape_same_shape_returns_self(device):
    n, g = pair((2, 3), "u2", device)
    before = g.storage.refcount
    assert g.reshape(2, 3) is g
    assert g.reshape((2, 3)) is g
    assert g.reshape(-1, 3) is g
    assert g.storage.refcount == before
    # The function, like numpy.reshape, gives a new handle on the same storage: freeing
    # it never frees g (docs/manipulation.md).
    r = ga.reshape(g, (2, 3))
    assert r is not g and r.storage is g.storage and g.storage.refcount == before + 1
    r.free()
    assert g.storage.refcount == before and not g.is_freed
    t = g.T
    assert t.reshape(3, 2) is t


def test_reshape_bad(device):
    n, g = pair((4, 6), "f8", device)
    for shape in [(5, 5), (7, -1), (-1, -1), (25,)]:
        with pytest.raises(ValueError):
            g.reshape(shape)


# view(dtype) ---------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["u1", "i2", "f4", "i8", "c16"])
def test_view_itemsize_changes(device, target):
    n, g = pair((4, 8), "i4", device)
    assert_matches(g.view(target), n.view(target), n)
    assert_matches(g[1:3].view(target), n[1:3].view(target), n)
    assert_matches(g[:, 2:6].view(target), n[:, 2:6].view(target), n)


def test_view_on_offset_not_multiple_of_new_itemsize(device):
    n, g = pair((64,), "u1", device)
    for start, stop, target in [(1, 9, "i4"), (3, 19, "f8"), (5, 7, "u2"), (7, 39, "c16"),
                                (13, 29, "i8")]:
        r_np = n[start:stop].view(target)
        r_ga = g[start:stop].view(target)
        assert r_ga.offset == start
        assert r_ga.storage is g.storage
        assert_matches(r_ga, r_np, n)
        # and back to bytes: nothing was lost
        assert_matches(r_ga.view("u1"), r_np.view("u1"), n)
    # chains: offset view -> reinterpret -> index -> reinterpret
    r_np = n[3:35].view("i4")[1::2][:, None].view("u2")
    r_ga = g[3:35].view("i4")[1::2][:, None].view("u2")
    assert_matches(r_ga, r_np, n)
    r_np = n[3:35].view("i4").reshape(2, 4).view("u2")
    r_ga = g[3:35].view("i4").reshape(2, 4).view("u2")
    assert_matches(r_ga, r_np, n)


def test_view_structured(device):
    n, g = pair((5,), STRUCT_DTYPE, device)
    assert_matches(g.view("u1"), n.view("u1"), n)
    b_np = n.view("u1")
    assert_matches(g.view("u1").view(STRUCT_DTYPE), b_np.view(STRUCT_DTYPE), n)


def test_view_impossible_raises(device):
    n, g = pair((4, 6), "i2", device)
    for arr, target in [(g.T, "i4"), (g[:, ::2], "i8"), (g[:, :3], "i4"), (g[1, 2], "i4")]:
        with pytest.raises(ValueError):
            arr.view(target)
    with pytest.raises(ValueError):
        np.arange(3, dtype="i2").view("i4")  # the oracle agrees on the divisibility rule
    with pytest.raises(ValueError):
        g[:, :3].view("i4")


def test_view_same_dtype_and_no_dtype(device):
    n, g = pair((3,), "f8", device)
    v = g.view()
    assert v is not g and v.storage is g.storage
    assert_matches(v, n.view(), n)
    v = g.view("i8")
    assert_matches(v, n.view("i8"), n)


# transposes, axes -----------------------------------------------------------------------------
def test_transposes_and_axes(device):
    n, g = pair((2, 3, 4), "f4", device)
    cases = [
        (g.T, n.T), (g.mT, n.mT), (g.transpose(), n.transpose()),
        (g.transpose(1, 0, 2), n.transpose(1, 0, 2)), (g.transpose((2, 0, 1)), n.transpose((2, 0, 1))),
        (g.transpose(-1, 0, 1), n.transpose(-1, 0, 1)),
        (g.swapaxes(0, 2), n.swapaxes(0, 2)), (g.swapaxes(-1, 1), n.swapaxes(-1, 1)),
        (ga.moveaxis(g, 0, -1), np.moveaxis(n, 0, -1)),
        (ga.moveaxis(g, [0, 1], [2, 0]), np.moveaxis(n, [0, 1], [2, 0])),
        (g[:, :1].squeeze(), n[:, :1].squeeze()), (g[:, :1].squeeze(1), n[:, :1].squeeze(1)),
        (ga.expand_dims(g, 0), np.expand_dims(n, 0)), (ga.expand_dims(g, -1), np.expand_dims(n, -1)),
        (ga.expand_dims(g, (0, 2)), np.expand_dims(n, (0, 2))),
        (g[::-1, 1:, ::2].T, n[::-1, 1:, ::2].T),
    ]
    for r_ga, r_np in cases:
        assert r_ga.storage is g.storage
        assert_matches(r_ga, r_np, n)


def test_transpose_of_1d_and_0d(device):
    n, g = pair((5,), "i8", device)
    assert_matches(g.T, n.T, n)
    z, gz = pair((), "i8", device)
    assert_matches(gz.T, z.T, z)
    with pytest.raises(ValueError):
        _ = g.mT


def test_squeeze_non_unit_axis_raises(device):
    n, g = pair((2, 1, 3), "f8", device)
    with pytest.raises(ValueError):
        g.squeeze(0)
    assert_matches(g.squeeze(), n.squeeze(), n)


# ravel ---------------------------------------------------------------------------------------
def test_ravel_view_iff_numpy(device):
    n, g = pair((3, 4), "i4", device)
    cases = [(n, g), (n[1:], g[1:]), (n.T, g.T), (n[:, ::2], g[:, ::2]), (n[::2], g[::2]),
             (n[:, :1], g[:, :1]), (n[1], g[1]), (n[:, 1], g[:, 1]), (n[None, 1:2], g[None, 1:2]),
             (n[:0], g[:0])]
    for a_np, a_ga in cases:
        r_np, r_ga = a_np.ravel(), a_ga.ravel()
        np_view = root(r_np) is root(n)
        assert (r_ga.storage is g.storage) == np_view, (a_ga.shape, a_ga.strides)
        same_values(r_ga.get(), r_np)
        assert r_ga.shape == r_np.shape and r_ga.flags.c_contiguous


# broadcast_to, diagonal, real/imag ------------------------------------------------------------
def test_broadcast_to_zero_strides_read_only(device):
    n, g = pair((3, 1), "f4", device)
    b_np = np.broadcast_to(n, (2, 3, 4))
    b_ga = ga.broadcast_to(g, (2, 3, 4))
    assert b_ga.strides == (0, 4, 0)
    assert not b_ga.flags.writeable
    assert b_ga.storage is g.storage
    assert_matches(b_ga, b_np, n)
    assert not b_ga[1:].flags.writeable  # derived from read-only stays read-only
    assert not b_ga.T.flags.writeable
    with pytest.raises(ValueError):
        ga.broadcast_to(g, (2, 2))
    s_np, s_ga = pair((), "i8", device)
    assert_matches(ga.broadcast_to(s_ga, (2, 2)), np.broadcast_to(s_np, (2, 2)), s_np)


def test_diagonal_read_only_view(device):
    n, g = pair((4, 5), "i4", device)
    for k in (0, 1, -2, 4, 7):
        d = g.diagonal(k)
        assert d.storage is g.storage
        assert not d.flags.writeable
        assert_matches(d, n.diagonal(k), n)
    n3, g3 = pair((2, 3, 4), "f8", device)
    assert_matches(g3.diagonal(0, 1, 2), n3.diagonal(0, 1, 2), n3)
    assert_matches(g3.diagonal(1, 0, 2), n3.diagonal(1, 0, 2), n3)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_real_imag_views(device, dtype):
    if not device.supports(dtype):
        pytest.skip(f"{device} lacks {dtype}")
    n, g = pair((3, 4), dtype, device)
    for r_ga, r_np in [(g.real, n.real), (g.imag, n.imag), (g.T.imag, n.T.imag),
                       (g[1:, ::-2].real, n[1:, ::-2].real), (g[1, 1].imag, n[1, 1, ...].imag)]:
        assert r_ga.storage is g.storage
        assert_matches(r_ga, r_np, n)
    g.imag[0] = 7
    n.imag[0] = 7
    same_values(g.get(), n)


def test_real_of_real_dtype_is_a_view(device):
    n, g = pair((3,), "f4", device)
    r = g.real
    assert r.storage is g.storage
    assert_matches(r, n.real, n)


# advanced indexing ------------------------------------------------------------------------------
def _adv_cases(n):
    mask = (n.real % 3 == 0) if n.dtype.kind != "b" else n
    return [
        np.array([0, 2, 1, 0]), np.array([-1, -3]), [2, 0], np.array([], dtype=np.intp),
        (np.array([0, 1]), np.array([2, 3])), (slice(None), np.array([3, 0, 0])),
        (np.array([[0], [2]]), np.array([1, 3])), mask, mask[:, 0], (1, mask[0]),
        (Ellipsis, np.array([1])), np.array([True, False, True]),
    ]


@pytest.mark.parametrize("dtype", ["int32", "float64", "complex64", "bool"])
def test_advanced_indexing_returns_copy(device, dtype):
    n, g = pair((3, 4), dtype, device)
    before = g.storage.refcount
    for key in _adv_cases(n):
        r_np = n[key]
        r_ga = g[key]
        assert type(r_ga) is ga.GPUArray
        assert r_ga.storage is not g.storage
        assert r_ga.flags.c_contiguous and r_ga.offset == 0
        same_values(r_ga.get(), r_np)
        del r_ga
    assert g.storage.refcount == before


def test_advanced_indexing_with_gpuarray_indices(device):
    n, g = pair((5, 3), "f4", device)
    idx = ga.asarray(np.array([4, 0, 2, 2]), device=device)
    same_values(g[idx].get(), n[np.array([4, 0, 2, 2])])
    mask_np = n[:, 0] > 10
    mask = ga.asarray(mask_np, device=device)
    same_values(g[mask].get(), n[mask_np])
    same_values(g[mask, 1:].get(), n[mask_np, 1:])
    same_values(g[1:, ga.asarray(np.array([2, 0]), device=device)].get(), n[1:, [2, 0]])


def test_advanced_indexing_on_views(device):
    n, g = pair((6, 5), "i8", device)
    v_np, v_ga = n[::-2, 1:], g[::-2, 1:]
    for key in [np.array([2, 0]), (np.array([0, 1, 2]), np.array([3, 2, 1])), v_np > 10]:
        same_values(v_ga[key].get(), v_np[key])
    b_np, b_ga = np.broadcast_to(n[0], (3, 5)), ga.broadcast_to(g[0], (3, 5))
    same_values(b_ga[[2, 0]].get(), b_np[[2, 0]])


def test_all_dtypes_index_and_values(device):
    for dtype in supported(device, ALL_DTYPES):
        n, g = pair((2, 3), dtype, device)
        assert_matches(g[::-1, 1:], n[::-1, 1:], n)
        same_values(g[[1, 0]].get(), n[[1, 0]])
