"""Creation functions on every device and kind, NumPy as the oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import (
    ALL_DTYPES,
    NUMERIC_DTYPES,
    SETTINGS,
    STRUCT_DTYPE,
    dtypes,
    pair,
    same_values,
    shapes,
    supported,
)

import gpuarrays as ga


def check_new(a, shape, dtype, device, kind="device"):
    assert type(a) is ga.GPUArray
    assert a.shape == shape and a.dtype == np.dtype(dtype)
    assert a.device == device and a.kind == kind
    assert a.offset == 0 and a.flags.c_contiguous and a.flags.writeable
    assert a.storage.refcount == 1 and a.storage.owned
    assert a.storage.nbytes == a.nbytes
    if a.size:
        assert a.strides == np.empty(shape, dtype).strides


@SETTINGS
@given(shape=shapes(), data=st.data())
def test_empty_zeros_ones_full(device, shape, data):
    dtype = data.draw(dtypes(device))
    for kind in device.kinds:
        check_new(ga.empty(shape, dtype, device=device, kind=kind), shape, dtype, device, kind)
        z = ga.zeros(shape, dtype, device=device, kind=kind)
        check_new(z, shape, dtype, device, kind)
        same_values(z.get(), np.zeros(shape, dtype))
    if dtype.fields is None:
        same_values(ga.ones(shape, dtype, device=device).get(), np.ones(shape, dtype))
        same_values(ga.full(shape, 3, dtype, device=device).get(), np.full(shape, 3, dtype))


def test_shape_spellings(device):
    for spec, shape in [(3, (3,)), ((), ()), ((2, 3), (2, 3)), ([2, 3], (2, 3)),
                        (np.int64(4), (4,)), ((np.int32(2), 1), (2, 1)), (0, (0,)),
                        ((0, 4), (0, 4))]:
        check_new(ga.empty(spec, device=device), shape, "f8", device)
        assert ga.zeros(spec, device=device).shape == shape


def test_dtype_defaults_follow_numpy(device):
    assert ga.empty(2, device=device).dtype == np.float64
    assert ga.zeros(2, device=device).dtype == np.float64
    assert ga.ones(2, device=device).dtype == np.float64
    for fill in [1, 1.5, True, 2 + 1j, np.float32(1), np.int8(3), np.uint16(5)]:
        a = ga.full(3, fill, device=device)
        assert a.dtype == np.full(3, fill).dtype
        same_values(a.get(), np.full(3, fill))
    for args in [(5,), (1, 7), (2, 11, 3), (0.5, 3.0, 0.5), (10, 0, -2), (3, 3), (np.int16(4),)]:
        a = ga.arange(*args, device=device)
        same_values(a.get(), np.arange(*args))
    same_values(ga.arange(6, dtype="f4", device=device).get(), np.arange(6, dtype="f4"))


def test_full_with_array_fill(device):
    row = np.array([1, 2, 3], dtype="i2")
    a = ga.full((2, 3), row, device=device)
    same_values(a.get(), np.full((2, 3), row))
    with pytest.raises(ValueError):
        ga.full((2, 3), [1, 2], device=device)


def test_like_functions(device):
    for kind in device.kinds:
        n, g = pair((2, 3), "i4", device, kind=kind)
        src = g.T  # the template's layout does not matter: results are C-contiguous
        for fn, expected in [(ga.zeros_like, np.zeros((3, 2), "i4")),
                             (ga.ones_like, np.ones((3, 2), "i4"))]:
            r = fn(src)
            check_new(r, (3, 2), "i4", device, kind)
            same_values(r.get(), expected)
        check_new(ga.empty_like(src), (3, 2), "i4", device, kind)
        r = ga.full_like(src, 7)
        same_values(r.get(), np.full((3, 2), 7, "i4"))
        r = ga.zeros_like(g, dtype="u1", shape=(4,))
        check_new(r, (4,), "u1", device, kind)
        r = ga.ones_like(g, kind="device")
        assert r.kind == "device"
        r = ga.full_like(g, 2.5, dtype="f4")
        same_values(r.get(), np.full((2, 3), 2.5, "f4"))
    for other in ga.devices():
        assert ga.empty_like(g, device=other).device == other
    with pytest.raises(TypeError):
        ga.zeros_like(np.zeros(3))


# asarray ---------------------------------------------------------------------------------------
def test_asarray_from_numpy(device):
    for dtype in supported(device, ALL_DTYPES):
        n, g = pair((3, 2), dtype, device)
        check_new(g, (3, 2), dtype, device)
        same_values(g.get(), n)
        # non-contiguous and negative-stride sources
        for src in [n.T, n[::-1], n[:, 1], n[:0]]:
            a = ga.asarray(src, device=device)
            check_new(a, src.shape, dtype, device)
            same_values(a.get(), src)
    src = np.arange(6.0)
    a = ga.asarray(src, device=device)
    src[0] = 99  # a copy: later host writes do not show
    assert a[0].item() == 0.0


def test_asarray_nested_lists_and_scalars(device):
    for obj in [[1, 2, 3], [[1.5, 2], [3, 4]], [[[True], [False]]], [1 + 2j, 3], [], [[], []],
                7, 2.5, True, 1j, np.float32(1.25), np.int8(-3), ((1, 2), (3, 4))]:
        a = ga.asarray(obj, device=device)
        expected = np.asarray(obj)
        check_new(a, expected.shape, expected.dtype, device)
        same_values(a.get(), expected)
    a = ga.asarray([1, 2, 3], dtype="f4", device=device)
    same_values(a.get(), np.asarray([1, 2, 3], dtype="f4"))
    with pytest.raises(ValueError):
        ga.asarray([[1, 2], [3]], device=device)  # ragged


def test_asarray_kinds(device):
    n = np.arange(4, dtype="i8")
    assert ga.asarray(n, device=device).kind == "device"  # kind=None means device for non-GPUArrays
    assert ga.asarray([1, 2], device=device).kind == "device"
    for kind in device.kinds:
        g = ga.asarray(n, device=device, kind=kind)
        assert g.kind == kind
        assert ga.asarray(g).kind == kind  # kind=None keeps a GPUArray's kind
        assert ga.asarray(g) is g
        for other in device.kinds:
            m = ga.asarray(g, kind=other)
            assert m.kind == other and (m is g) == (other == kind)
            same_values(m.get(), n)


def test_asarray_gpuarray_copy_semantics(device):
    n, g = pair((2, 3), "f4", device)
    assert ga.asarray(g) is g
    assert ga.asarray(g, copy=None) is g
    assert ga.asarray(g, copy=False) is g
    assert ga.asarray(g, dtype="f4", device=device, kind=g.kind, copy=False) is g
    c = ga.asarray(g, copy=True)
    assert c is not g and c.storage is not g.storage
    same_values(c.get(), n)
    v = g.T
    assert ga.asarray(v) is v  # views are kept as they are
    d = ga.asarray(g, dtype="f8")
    assert d.dtype == np.float64 and d.storage is not g.storage
    same_values(d.get(), n.astype("f8"))
    with pytest.raises(ValueError):
        ga.asarray(g, dtype="f8", copy=False)
    for other in ga.devices():
        m = ga.asarray(g, device=other)
        assert m.device == other and (m is g) == (other == device)
        same_values(m.get(), n)
        if other != device:
            with pytest.raises(ValueError):
                ga.asarray(g, device=other, copy=False)
    if "host" in device.kinds:
        with pytest.raises(ValueError):
            ga.asarray(g, kind="host", copy=False)
        h = ga.asarray(g, kind="host", copy=True)
        assert h.kind == "host"


def test_asarray_numpy_copy_semantics(device):
    n = np.arange(3.0)
    assert ga.asarray(n, device=device, copy=True).storage.refcount == 1
    with pytest.raises(ValueError):
        ga.asarray(n, device=device, copy=False)  # host memory is never wrapped implicitly
    with pytest.raises(ValueError):
        ga.asarray([1, 2], device=device, copy=False)


def test_asarray_uses_current_device(device):
    with ga.use_device(device):
        assert ga.asarray([1, 2]).device == device
        assert ga.empty(2).device == device
        assert ga.arange(3).device == device
        assert ga.full(2, 1).device == device


def test_creation_kinds_are_honoured(device):
    for kind in device.kinds:
        for a in [ga.empty(3, device=device, kind=kind), ga.zeros(3, device=device, kind=kind),
                  ga.ones(3, device=device, kind=kind), ga.full(3, 1, device=device, kind=kind),
                  ga.arange(3, device=device, kind=kind),
                  ga.asarray([1], device=device, kind=kind)]:
            assert a.kind == kind and a.storage.kind == kind
    with pytest.raises(ValueError):
        ga.empty(3, device=device, kind="nonsense")


def test_zero_size_creation(device, used):
    before = used()
    for shape in [0, (0,), (2, 0), (0, 3, 4)]:
        for fn in (ga.empty, ga.zeros, ga.ones):
            a = fn(shape, device=device)
            assert a.size == 0 and a.nbytes == 0 and a.storage.nbytes == 0
            assert a.get().shape == np.empty(shape).shape
        assert ga.full(shape, 5, device=device).size == 0
        assert ga.asarray(np.empty(shape), device=device).size == 0
        assert ga.arange(0, device=device).shape == (0,)
        assert ga.empty_like(a).size == 0
    del a
    assert used() == before


def test_structured_dtypes(device):
    n, g = pair((4,), STRUCT_DTYPE, device)
    same_values(g.get(), n)
    same_values(g[1:3].get(), n[1:3])
    z = ga.zeros(3, STRUCT_DTYPE, device=device)
    same_values(z.get(), np.zeros(3, STRUCT_DTYPE))
    nested = np.dtype([("p", [("a", "i2"), ("b", "u1")]), ("q", "f4")])
    h = np.zeros(2, nested)
    h["p"]["a"] = [5, -6]
    h["q"] = [1.5, 2.5]
    same_values(ga.asarray(h, device=device).get(), h)


def test_all_numeric_dtypes_round_trip(device):
    for dtype in supported(device, NUMERIC_DTYPES):
        n, g = pair((2, 5), dtype, device)
        same_values(g.get(), n)
        same_values(ga.asarray(n.tolist(), dtype=dtype, device=device).get(), n)
