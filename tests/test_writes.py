"""Writes, copies, conversions and host round trips, NumPy as oracle."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import (
    NUMERIC_DTYPES,
    SETTINGS,
    STRUCT_DTYPE,
    basic_indices,
    dtypes,
    pair,
    same_values,
    shapes,
    supported,
    values,
)

import gpuarrays as ga

ComplexWarning = np.exceptions.ComplexWarning


# a[idx] = value -------------------------------------------------------------------------
def _value_for(data, target_shape, dtype, device, seed):
    """A value broadcastable to ``target_shape``: scalar, NumPy array, list or GPUArray."""
    form = data.draw(st.sampled_from(["scalar", "numpy", "list", "gpuarray", "gpuarray_view"]))
    # a broadcastable shape: drop leading axes, turn some axes into 1
    k = data.draw(st.integers(0, len(target_shape)))
    shape = tuple(1 if data.draw(st.booleans()) else n for n in target_shape[k:])
    host = values(shape, dtype, seed)
    if form == "scalar":
        return values((), dtype, seed)[()], values((), dtype, seed)
    if form == "numpy":
        return host, host
    if form == "list":
        if dtype.fields is not None:
            return host, host
        return host.tolist(), host.tolist()  # (NumPy gets the list too: [] loses the shape)
    g = ga.asarray(host, device=device)
    if form == "gpuarray_view" and host.ndim:
        big = ga.asarray(np.concatenate([host, host], axis=-1), device=device)
        g = big[..., ::2]
        host = np.concatenate([host, host], axis=-1)[..., ::2]
    return g, host


def _both_assign(n, g, key, host_value, value):
    """``n[key] = host_value`` and ``g[key] = value``: same result, or both refuse it."""
    try:
        n[key] = host_value
    except ValueError:
        before = g.get()
        with pytest.raises(ValueError):
            g[key] = value
        same_values(g.get(), before)
        return
    g[key] = value
    same_values(g.get(), n)


@SETTINGS
@given(data=st.data())
def test_setitem_matches_numpy(device, data):
    dtype = data.draw(dtypes(device))
    shape = data.draw(shapes(max_dims=3))
    n, g = pair(shape, dtype, device)
    # write through a strided view (any steps, negative too) of the array
    key = data.draw(basic_indices(shape))
    target_shape = n[key].shape if isinstance(n[key], np.ndarray) else ()
    value, host_value = _value_for(data, target_shape, dtype, device, seed=5)
    _both_assign(n, g, key, host_value, value)


@SETTINGS
@given(data=st.data())
def test_setitem_through_derived_views(device, data):
    dtype = data.draw(dtypes(device, NUMERIC_DTYPES))
    n, g = pair((4, 5), dtype, device)
    vn, vg = n[::-1, 1::2], g[::-1, 1::2]
    if data.draw(st.booleans()):
        vn, vg = vn.T, vg.T
    key = data.draw(basic_indices(vn.shape))
    value, host_value = _value_for(data, np.asarray(vn[key]).shape, dtype, device, seed=3)
    _both_assign(vn, vg, key, host_value, value)
    same_values(g.get(), n)


def test_setitem_forms(device):
    n, g = pair((3, 4), "f4", device)
    cases = [
        (1, 7.5), ((slice(None), 2), [1, 2, 3]), ((Ellipsis, slice(None, None, -1)), np.arange(4)),
        (slice(None, None, -2), np.array([[9.0], [8.0]])), ((0, slice(None)), np.float64(3.25)),
        ((None, 1), [[4, 5, 6, 7]]), ((), 0), ((2, -1), 11),
    ]
    for key, value in cases:
        n[key] = value
        g[key] = value
        same_values(g.get(), n)
    src_n, src_g = pair((4,), "i8", device)
    n[1:] = src_n
    g[1:] = src_g  # GPUArray value of another dtype, broadcast over rows
    same_values(g.get(), n)


def test_setitem_broadcast_errors(device, used):
    n, g = pair((3, 4), "f8", device)
    before = used()
    for value in [np.ones(3), [1, 2], ga.ones((2, 4), device=device), np.ones((2, 3, 4))]:
        with pytest.raises(ValueError):
            g[...] = value
        with pytest.raises(ValueError):
            n[...] = value.get() if isinstance(value, ga.GPUArray) else value
    del value
    same_values(g.get(), values((3, 4), np.dtype("f8")))
    assert used() == before


@pytest.mark.parametrize("dtype", ["int16", "float64", "complex64", "bool"])
def test_advanced_index_assignment(device, dtype):
    if not device.supports(dtype):
        pytest.skip(f"{device} lacks {dtype}")
    n, g = pair((4, 5), dtype, device)
    mask = values((4, 5), np.dtype("i8")) % 3 == 0
    cases = [
        (np.array([0, 2]), 1), ([3, 1], values((2, 5), np.dtype(dtype), 4)),
        ((np.array([0, 1, 3]), np.array([4, 0, 2])), [7, 8, 9]), (mask, 0),
        ((slice(None), [1, 3]), values((4, 2), np.dtype(dtype), 2)),
        (mask[:, 0], values((5,), np.dtype(dtype), 6)),
        (np.array([], dtype=np.intp), 5),
        (ga.asarray(np.array([2, 0]), device=device), 3),
        (ga.asarray(mask, device=device), 1),
    ]
    for key, value in cases:
        n[key.get() if isinstance(key, ga.GPUArray) else key] = value
        g[key] = value
        same_values(g.get(), n)
    # values from a GPUArray
    v = ga.asarray(values((2, 5), np.dtype(dtype), 8), device=device)
    n[[1, 2]] = v.get()
    g[[1, 2]] = v
    same_values(g.get(), n)


def test_advanced_assignment_through_view(device):
    n, g = pair((6, 4), "i4", device)
    vn, vg = n[::-2, 1:], g[::-2, 1:]
    vn[[0, 2]] = -1
    vg[[0, 2]] = -1
    vn[vn > 20] = 100
    vg[vn > 20] = 100
    same_values(g.get(), n)


# fill / copy / copyto -----------------------------------------------------------------------
def test_fill(device):
    for dtype in supported(device, NUMERIC_DTYPES):
        n, g = pair((3, 5), dtype, device)
        g[:, ::-2].fill(1)
        n[:, ::-2].fill(1)
        same_values(g.get(), n)
        g.fill(0)
        same_values(g.get(), np.zeros((3, 5), dtype))
    e = ga.empty((0, 3), device=device)
    e.fill(2.0)
    z = ga.empty((), "i4", device=device)
    z.fill(-4)
    assert z.item() == -4
    s_n, s_g = pair((2,), STRUCT_DTYPE, device)
    fill = np.zeros((), STRUCT_DTYPE)
    fill["x"], fill["y"], fill["z"] = 3, 1.5, 7
    s_g.fill(fill)
    s_n.fill(fill)
    same_values(s_g.get(), s_n)


def test_copy_is_new_c_contiguous_storage(device):
    n, g = pair((4, 6), "f8", device)
    for vn, vg in [(n, g), (n.T, g.T), (n[::-1, ::3], g[::-1, ::3]), (n[1, ::-1], g[1, ::-1]),
                   (np.broadcast_to(n[0], (3, 6)), ga.broadcast_to(g[0], (3, 6))), (n[2, 3, ...], g[2, 3])]:
        c = vg.copy()
        assert c.storage is not g.storage
        assert c.storage.refcount == 1
        assert c.offset == 0 and c.flags.c_contiguous and c.flags.writeable
        assert c.strides == np.ascontiguousarray(vn).strides or c.size <= 1
        assert c.device == g.device and c.kind == g.kind
        same_values(c.get(), vn)
    c = g.copy()
    c[0] = -1  # independent of the original
    same_values(g.get(), n)
    f = g.copy(order="F")
    assert f.flags.f_contiguous and f.strides == np.asfortranarray(n).strides
    same_values(f.get(), n)


def test_copyto_broadcasting(device):
    n, g = pair((3, 4), "i4", device)
    src_n, src_g = pair((4,), "i2", device, seed=3)
    np.copyto(n, src_n, casting="unsafe")
    ga.copyto(g, src_g)
    same_values(g.get(), n)
    ga.copyto(g[:, 1:3], 5)
    n[:, 1:3] = 5
    same_values(g.get(), n)
    ga.copyto(g.T, np.arange(3, dtype="i4"))
    n.T[...] = np.arange(3)
    same_values(g.get(), n)
    with pytest.raises(ValueError):
        ga.copyto(g, ga.zeros(3, "i4", device=device))
    with pytest.raises(TypeError):
        ga.copyto(n, g)


@pytest.mark.parametrize("case", [
    "shift_right", "shift_left", "reverse", "transpose", "strided_reverse", "column_shift",
    "overlap_view_dtype",
])
def test_overlapping_copies_in_one_storage(device, case):
    n, g = pair((6, 6), "i8", device)
    if case == "shift_right":
        n[1:] = n[:-1]
        g[1:] = g[:-1]
    elif case == "shift_left":
        ga.copyto(g[:-1], g[1:])
        n[:-1] = n[1:].copy()
    elif case == "reverse":
        ga.copyto(g, g[::-1])
        n[...] = n[::-1].copy()
    elif case == "transpose":
        g[...] = g.T
        n[...] = n.T.copy()
    elif case == "strided_reverse":
        g[::2] = g[1::2][::-1]
        n[::2] = n[1::2][::-1]
    elif case == "column_shift":
        g[:, 1:] = g[:, :-1]
        n[:, 1:] = n[:, :-1]
    else:  # the same bytes reinterpreted: flat shift by 3 elements of a reshaped view
        flat_g, flat_n = g.reshape(36), n.reshape(36)
        flat_g[3:] = flat_g[:-3]
        flat_n[3:] = flat_n[:-3].copy()
    same_values(g.get(), n)


def test_overlap_between_derived_views_of_different_dtype(device):
    n, g = pair((16,), "u1", device)
    wn, wg = n[1:9].view("u2"), g[1:9].view("u2")
    # write 2-byte words over bytes 0..7, read from the overlapping word view at byte 1
    g[0:4] = wg
    n[0:4] = wn.copy()
    same_values(g.get(), n)


# astype -------------------------------------------------------------------------------------
CAST_VALUES = [0, 1, 2, 3, 5, 7, 100, 127]


def _expect_cast(host: np.ndarray, dt: np.dtype) -> tuple[np.ndarray, bool]:
    """NumPy's result and whether NumPy warns (ComplexWarning)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = host.astype(dt)
    return out, any(issubclass(x.category, ComplexWarning) for x in w)


@pytest.mark.parametrize("src", NUMERIC_DTYPES, ids=str)
def test_astype_all_pairs(device, src):
    if not device.supports(src):
        pytest.skip(f"{device} lacks {src}")
    host = np.array(CAST_VALUES, dtype=src)
    if src.kind == "c":
        host = host + np.array([0, 1j, 0, 2j, 0, 0, 1j, 0]).astype(src)
    g = ga.asarray(host, device=device)
    for dst in supported(device, NUMERIC_DTYPES):
        expected, warns = _expect_cast(host, dst)
        if warns:
            with pytest.warns(ComplexWarning):
                out = g.astype(dst)
        else:
            out = g.astype(dst)
        assert out.dtype == dst and out.storage is not g.storage
        same_values(out.get(), expected)
        # and through a strided view
        if warns:
            with pytest.warns(ComplexWarning):
                out = g[::-3].astype(dst)
        else:
            out = g[::-3].astype(dst)
        same_values(out.get(), expected[::-3])


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("float64", "int8"),
                                     ("float64", "int64"), ("float32", "int16")])
def test_astype_truncates_toward_zero(device, src, dst):
    host = np.array([2.5, -2.5, 0.9, -0.9, 100.75, -100.75], dtype=src)
    g = ga.asarray(host, device=device)
    same_values(g.astype(dst).get(), host.astype(dst))


@pytest.mark.parametrize("src,dst", [("int64", "int8"), ("int32", "uint8"), ("int16", "uint16"),
                                     ("uint32", "int32"), ("int8", "int64"), ("uint8", "int8"),
                                     ("int64", "uint64"), ("int8", "uint32")])
def test_astype_integer_wraparound(device, src, dst):
    info = np.iinfo(src)
    host = np.array([info.min, -1 if info.min < 0 else 0, info.max, 300 % (info.max + 1), 0],
                    dtype=src)
    g = ga.asarray(host, device=device)
    same_values(g.astype(dst).get(), host.astype(dst))


def test_astype_copy_false_and_same_dtype(device):
    n, g = pair((3,), "i4", device)
    assert g.astype("i4", copy=False) is g
    c = g.astype("i4")
    assert c is not g and c.storage is not g.storage
    d = g.astype("f8", copy=False)
    assert d.dtype == np.float64 and d.storage is not g.storage
    e = ga.empty((0, 2), "i4", device=device).astype("c8")
    assert e.shape == (0, 2) and e.dtype == np.complex64


def test_astype_structured_same_dtype(device):
    n, g = pair((3,), STRUCT_DTYPE, device)
    c = g.astype(STRUCT_DTYPE)
    same_values(c.get(), n)


# host round trips -------------------------------------------------------------------------
def test_get_out(device):
    n, g = pair((3, 4), "f4", device)
    out = np.empty((3, 4), "f4")
    assert g.get(out=out) is out
    same_values(out, n)
    out_f = np.empty((3, 4), "f4", order="F")
    g.get(out=out_f)
    same_values(out_f, n)
    out_t = np.empty((4, 3), "f4").T
    g.get(out=out_t)
    same_values(np.ascontiguousarray(out_t), n)
    out_d = np.empty((4, 3), "f8")
    g.T.get(out=out_d)
    same_values(out_d, n.T.astype("f8"))
    with pytest.raises(ValueError):
        g.get(out=np.empty((4, 3), "f4"))
    with pytest.raises(TypeError):
        g.get(out=[0] * 12)
    assert ga.to_numpy(g[1]).tolist() == n[1].tolist()


def test_scalar_access(device):
    n, g = pair((2, 3), "f8", device)
    assert g[1, 2].item() == n[1, 2] and type(g[1, 2].item()) is float
    assert float(g[0, 1]) == float(n[0, 1])
    assert int(g[1, 0]) == int(n[1, 0])
    assert bool(g[0, 0]) is bool(n[0, 0])
    assert bool(g[0, 1]) is True
    assert g[1:2, 2:3].item() == n[1, 2]
    i = ga.asarray(np.array([-7], dtype="i2"), device=device)
    assert i.item() == -7 and type(i.item()) is int
    assert int(i) == -7 and float(i) == -7.0
    c = ga.asarray(np.array(1 + 2j, dtype="c8"), device=device)
    assert c.item() == 1 + 2j and complex(c) == 1 + 2j
    b = ga.asarray(np.array([True]), device=device)
    assert b.item() is True and bool(b) is True
    for bad in [g, g[0], ga.empty(0, device=device)]:
        with pytest.raises(ValueError):
            bad.item()
        with pytest.raises((ValueError, TypeError)):
            float(bad)
    with pytest.raises(ValueError):
        bool(g)


def test_tolist(device):
    for dtype in supported(device, NUMERIC_DTYPES):
        for shape in [(), (0,), (3,), (2, 3), (2, 0, 2)]:
            n, g = pair(shape, dtype, device)
            assert g.tolist() == n.tolist()
            assert g.T.tolist() == n.T.tolist()


def test_len_and_iter_yield_views(device):
    n, g = pair((3, 4), "i4", device)
    assert len(g) == 3 and len(g.T) == 4 and len(g[:0]) == 0
    rows = list(g)
    assert len(rows) == 3
    for r, rn in zip(rows, n, strict=True):
        assert type(r) is ga.GPUArray
        assert r.storage is g.storage
        same_values(r.get(), rn)
    assert g.storage.refcount == 1 + len(rows)
    rows[1][0] = 99  # writes go through the views
    assert g[1, 0].item() == 99
    assert list(g[:0]) == []
    elems = list(g[0])
    assert all(e.shape == () for e in elems)
    z = ga.asarray(np.float32(3), device=device)
    with pytest.raises(TypeError):
        len(z)
    with pytest.raises(TypeError):
        iter(z).__next__()


def test_repr_and_str(device):
    n, g = pair((2, 3), "i4", device)
    r = repr(g)
    assert r.startswith("GPUArray(")
    for v in n.ravel():
        assert str(v) in r
    assert "int32" in r and str(device) in r and "device" in r
    h = ga.asarray(n, device=device, kind="host") if "host" in device.kinds else g
    assert f"'{h.kind}'" in repr(h)
    s = str(g)
    assert s == str(n)
    assert "float64" in repr(ga.zeros(2, device=device))
    assert "[]" in repr(ga.empty((0,), device=device))
    z = ga.asarray(np.float32(1.5), device=device)
    assert "1.5" in repr(z) and "float32" in repr(z)
    assert f"{z:.2f}" == "1.50"
    s_n, s_g = pair((2,), STRUCT_DTYPE, device)
    assert str(s_g) == str(s_n)


def test_pickle_round_trip(device):
    for dtype in supported(device, [np.dtype("f4"), np.dtype("c16"), np.dtype("u2"),
                                    np.dtype("bool"), STRUCT_DTYPE]):
        for kind in device.kinds:
            n, g = pair((3, 2), dtype, device, kind=kind)
            for src_n, src_g in [(n, g), (n.T, g.T), (n[::-1, 1], g[::-1, 1]), (n[:0], g[:0])]:
                back = pickle.loads(pickle.dumps(src_g))
                assert type(back) is ga.GPUArray
                assert back.device == device and back.kind == kind
                assert back.storage is not g.storage
                same_values(back.get(), src_n)
                assert back.flags.writeable


# to_device ---------------------------------------------------------------------------------
def test_to_device_between_devices_and_kinds(device):
    n, g = pair((3, 4), "i2", device)
    assert g.to_device(device) is g
    assert g.to_device(str(device), kind=g.kind) is g
    for other in ga.devices():
        for kind in other.kinds:
            for src_n, src_g in [(n, g), (n.T[::-1], g.T[::-1])]:
                m = src_g.to_device(other, kind=kind)
                assert m.device == other and m.kind == kind
                if other != device or kind != src_g.kind:
                    assert m.storage is not g.storage
                same_values(m.get(), src_n)
    e = ga.empty((0, 3), device=device).to_device("cpu")
    assert e.shape == (0, 3) and e.device == ga.get_device("cpu")
    with pytest.raises(ValueError):
        g.to_device("nope:0")
    with pytest.raises(ValueError):
        g.to_device(device, kind="nonsense")


# zero-size everywhere --------------------------------------------------------------------------
def test_zero_size_everywhere(device, used):
    before = used()
    for shape in [(0,), (3, 0), (0, 0, 2)]:
        a = ga.zeros(shape, "f4", device=device)
        assert a.size == 0 and a.nbytes == 0
        assert a.get().shape == shape
        a[...] = 1
        a.fill(2)
        ga.copyto(a, ga.ones(shape[-1:], "f4", device=device))
        assert a.copy().shape == shape
        assert a.astype("i8").dtype == np.int64
        assert a.T.shape == shape[::-1]
        assert a.reshape(-1).shape == (0,)
        assert a[..., :0].shape == shape[:-1] + (0,)
        assert a.tolist() == np.zeros(shape).tolist()
        assert pickle.loads(pickle.dumps(a)).shape == shape
        assert a[a.get() > 0].shape == (0,)
        a[a.get() > 0] = 3
        b = a.to_device("cpu")
        assert b.shape == shape
        assert repr(a)
    del a, b
    assert used() == before


def test_complex_to_real_copy_warns_on_every_backend(device):
    """Regression: device-to-device complex->real copies warned only on cpu (via NumPy)."""
    c = ga.asarray(np.array([1 + 2j, 3 - 1j]), device=device)
    r = ga.zeros(2, "f4", device=device)
    with pytest.warns(ComplexWarning) as rec:
        r[...] = c
    assert rec[0].filename == __file__  # points at the caller
    with pytest.raises(TypeError, match="same_kind"):  # copyto's default casting, as NumPy
        ga.copyto(r, c)
    with pytest.warns(ComplexWarning):
        ga.copyto(r, c, casting="unsafe")
    with pytest.warns(ComplexWarning) as rec:
        out = c.astype("i8")
    assert rec[0].filename == __file__
    assert out.tolist() == [1, 3]
    b = c.astype(bool)  # complex -> bool tests the whole value and does not warn, as NumPy
    assert b.tolist() == [True, True]
    assert ga.asarray(np.array([1j, 0]), device=device).astype(bool).tolist() == [True, False]


def test_assigning_an_array_from_another_device_is_explicit(device):
    """Regression: a[0:2] = array_on_another_device copied through the host without asking;
    it is a ValueError naming to_device, and the destination is unchanged."""
    others = [d for d in ga.devices() if d != device]
    if not others:
        pytest.skip("one device only: nothing to mix")
    a = ga.asarray(np.arange(4.0), device=device)
    src = ga.asarray(np.array([9.0, 9.0]), device=others[0])
    for write in (lambda: a.__setitem__(slice(0, 2), src), lambda: ga.copyto(a[:2], src)):
        with pytest.raises(ValueError, match=r"transfers between devices are explicit.*"
                                             r"to_device"):
            write()
    assert a.get().tolist() == [0.0, 1.0, 2.0, 3.0]
    a[0:2] = src.to_device(device)
    assert a.get().tolist() == [9.0, 9.0, 2.0, 3.0]
