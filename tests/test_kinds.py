"""Memory kinds and host views, on every device and kind.

Every creation function takes ``kind=`` and the array reports it; only
``"host"`` and ``"unified"`` memory can be viewed from NumPy without a copy,
and such a view shares the memory both ways.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays.backends.base import KINDS

HOST_KINDS = ("host", "unified")


def host_kinds(device) -> list[str]:
    return [k for k in device.kinds if k in HOST_KINDS]


def creations(device, kind):
    """Every creation function, called with ``kind=``: (name, array, expected values)."""
    src = ga.arange(6, dtype=np.int32, device=device)
    n = np.arange(6, dtype=np.int32)
    return [
        ("empty", ga.empty((2, 3), np.int32, device=device, kind=kind), None),
        ("zeros", ga.zeros((2, 3), np.int32, device=device, kind=kind), np.zeros((2, 3), "i4")),
        ("ones", ga.ones((2, 3), np.int32, device=device, kind=kind), np.ones((2, 3), "i4")),
        ("full", ga.full((2, 3), 7, np.int32, device=device, kind=kind), np.full((2, 3), 7, "i4")),
        ("empty_like", ga.empty_like(src, kind=kind), None),
        ("zeros_like", ga.zeros_like(src, kind=kind), np.zeros_like(n)),
        ("ones_like", ga.ones_like(src, kind=kind), np.ones_like(n)),
        ("full_like", ga.full_like(src, 5, kind=kind), np.full_like(n, 5)),
        ("arange", ga.arange(6, dtype=np.int32, device=device, kind=kind), n),
        ("asarray", ga.asarray(n, device=device, kind=kind), n),
        ("asarray(GPUArray)", ga.asarray(src, kind=kind), n),
    ]


# Device.kinds --------------------------------------------------------------------------------
def test_device_kinds(device):
    assert isinstance(device.kinds, tuple) and device.kinds
    assert set(device.kinds) <= set(KINDS)
    assert len(set(device.kinds)) == len(device.kinds)
    if device.backend == "cpu":
        assert device.kinds == ("device", "host", "unified")


# creation ----------------------------------------------------------------------------------------
def test_every_creation_function_takes_kind(device):
    for kind in device.kinds:
        for name, a, expected in creations(device, kind):
            assert a.kind == kind, name
            assert a.storage.kind == kind, name
            assert a.device == device, name
            if expected is not None:
                np.testing.assert_array_equal(a.get(), expected, err_msg=name)


def test_default_kind_is_device(device):
    assert ga.empty(3, device=device).kind == "device"
    assert ga.zeros(3, device=device).kind == "device"
    assert ga.arange(3, device=device).kind == "device"
    assert ga.asarray([1, 2], device=device).kind == "device"
    for kind in device.kinds:
        src = ga.zeros(3, device=device, kind=kind)
        assert ga.empty_like(src).kind == kind  # *_like keep the kind of their model
        assert ga.full_like(src, 2).kind == kind
        assert ga.asarray(src).kind == kind


def test_derived_arrays_and_copies_keep_the_kind(device):
    for kind in device.kinds:
        a = ga.arange(24, dtype=np.float32, device=device, kind=kind).reshape(4, 6)
        for d in (a[1:], a.T, a.reshape(6, 4), a.view(np.int32), a[::2, ::-1], a.ravel(),
                  a.copy(), a.astype(np.int64)):
            assert d.kind == kind


def test_zero_size_arrays_of_every_kind(device):
    for kind in device.kinds:
        a = ga.empty((0, 4), device=device, kind=kind)
        assert a.kind == kind and a.get().shape == (0, 4)
        if kind in HOST_KINDS:
            assert a.host_view().shape == (0, 4)


@pytest.mark.parametrize("bad", ["Device", "pinned", "managed", "", "host "])
def test_unknown_kind_is_a_value_error(device, bad):
    before = ga.memory_stats(device)
    src = ga.zeros(4, device=device)
    calls = [
        lambda: ga.empty(4, device=device, kind=bad),
        lambda: ga.empty(0, device=device, kind=bad),
        lambda: ga.zeros(4, device=device, kind=bad),
        lambda: ga.ones(4, device=device, kind=bad),
        lambda: ga.full(4, 1.0, device=device, kind=bad),
        lambda: ga.arange(4, device=device, kind=bad),
        lambda: ga.asarray([1, 2], device=device, kind=bad),
        lambda: ga.asarray(src, kind=bad),
        lambda: ga.empty_like(src, kind=bad),
        lambda: ga.zeros_like(src, kind=bad),
        lambda: src.to_device(device, kind=bad),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="kind") as info:
            call()
        assert repr(bad) in str(info.value)
        assert "device" in str(info.value)  # names what is accepted
    src.free()
    gc.collect()
    after = ga.memory_stats(device)
    assert after["used_bytes"] == before["used_bytes"]


# to_device(kind=...) -------------------------------------------------------------------------
def test_to_device_with_kind(device):
    n = np.arange(12, dtype=np.int16).reshape(3, 4)
    for src_kind in device.kinds:
        a = ga.asarray(n, device=device, kind=src_kind)
        assert a.to_device(device) is a
        assert a.to_device(device, kind=src_kind) is a
        assert a.to_device(str(device), kind=None) is a
        for kind in device.kinds:
            b = a.to_device(device, kind=kind)
            assert b.kind == kind and b.device == device
            np.testing.assert_array_equal(b.get(), n)
            if kind != src_kind:
                assert not ga.shares_memory(a, b)
                b[0, 0] = 99  # a copy: the source is unchanged
                assert a.get()[0, 0] == 0
        # a strided source
        v = a[:, ::-2]
        for kind in device.kinds:
            np.testing.assert_array_equal(v.to_device(device, kind=kind).get(), n[:, ::-2])


def test_to_device_across_devices_with_kind(device):
    n = np.arange(10, dtype=np.float32)
    a = ga.asarray(n, device=device)
    for other in ga.devices():
        for kind in other.kinds:
            b = a.to_device(other, kind=kind)
            assert b.device == other and b.kind == kind
            np.testing.assert_array_equal(b.get(), n)
            if kind in device.kinds:
                back = b.to_device(device)  # kind=None keeps the kind
                assert back.kind == kind and back.device == device
                np.testing.assert_array_equal(back.get(), n)


# host views ----------------------------------------------------------------------------------
def test_host_view_is_zero_copy_both_ways(device):
    for kind in host_kinds(device):
        a = ga.arange(12, dtype=np.float64, device=device, kind=kind).reshape(3, 4)
        h = a.host_view()
        assert isinstance(h, np.ndarray)
        assert h.shape == a.shape and h.dtype == a.dtype and h.strides == a.strides
        assert h.__array_interface__["data"][0] == a.storage.ptr + a.offset
        np.testing.assert_array_equal(h, np.arange(12.0).reshape(3, 4))
        h[1, 2] = -5.0  # NumPy writes are visible to the device array
        assert a.get()[1, 2] == -5.0
        # Device writes are visible through the view once the device has finished them:
        # like CUDA/CuPy, work on a device is asynchronous (opencl enqueues kernels), so
        # the host synchronizes before reading memory a kernel wrote.
        a[0] = 42.0
        ga.synchronize(device)
        assert np.all(h[0] == 42.0)
        a[2, ::2] = ga.asarray(np.array([7.0, 8.0]), device=device)
        device.synchronize()
        np.testing.assert_array_equal(h[2], [7.0, 9.0, 8.0, 11.0])


def test_np_asarray_is_zero_copy_for_host_kinds(device):
    for kind in host_kinds(device):
        a = ga.zeros((2, 5), np.int32, device=device, kind=kind)
        h = np.asarray(a)
        assert h.__array_interface__["data"][0] == a.storage.ptr
        h += 3
        np.testing.assert_array_equal(a.get(), np.full((2, 5), 3))
        a[:, 0] = 9
        ga.synchronize(device)  # the device write is asynchronous on opencl
        assert np.all(h[:, 0] == 9)
        assert np.shares_memory(np.asarray(a), h)
        c = np.array(a)  # np.array copies by default
        c[0, 0] = -1
        assert a.get()[0, 0] == 9
        f = np.asarray(a, dtype=np.float64)  # another dtype: a converted copy
        assert f.dtype == np.float64 and not np.shares_memory(f, h)
        with pytest.raises(ValueError):
            np.asarray(a, dtype=np.float64, copy=False)


def test_host_view_of_derived_arrays_matches_numpy(device):
    n = np.arange(60, dtype=np.int16).reshape(3, 4, 5)
    for kind in host_kinds(device):
        a = ga.asarray(n, device=device, kind=kind)
        for key in [(1,), (slice(None), slice(None, None, -1)), (Ellipsis, slice(1, 4, 2)),
                    (slice(2, 0, -1), None, 0)]:
            h = a[key].host_view()
            expected = n[key]
            assert h.shape == expected.shape and h.strides == expected.strides
            np.testing.assert_array_equal(h, expected)
        t = a.T.host_view()
        assert t.strides == n.T.strides
        np.testing.assert_array_equal(t, n.T)
        r = a.view(np.uint8).host_view()
        np.testing.assert_array_equal(r, n.view(np.uint8))


def test_host_view_of_a_read_only_view_is_read_only(device):
    for kind in host_kinds(device):
        a = ga.arange(4, dtype=np.float32, device=device, kind=kind)
        b = ga.broadcast_to(a, (3, 4))
        h = b.host_view()
        assert not h.flags.writeable and h.strides == (0, 4)
        with pytest.raises(ValueError):
            h[0, 0] = 1.0
        np.testing.assert_array_equal(h, np.broadcast_to(np.arange(4, dtype="f4"), (3, 4)))
        d = ga.arange(9, device=device, kind=kind).reshape(3, 3).diagonal().host_view()
        assert not d.flags.writeable
        np.testing.assert_array_equal(d, [0, 4, 8])


def test_host_view_keeps_the_storage_alive(device, used):
    for kind in host_kinds(device):
        base = used()
        a = ga.full(100, 3, np.int64, device=device, kind=kind)
        st = a.storage
        h = a.host_view()
        assert st.refcount == 2  # the array and the NumPy view
        a.free()
        assert not st.is_freed and st.refcount == 1
        assert np.all(h == 3)  # still valid memory
        h[:] = 4
        assert used() > base
        del a
        del h
        assert st.is_freed and used() == base


def test_device_memory_has_no_implicit_host_view(device, monkeypatch):
    # np.asarray follows the memory (every kind on a CPU device converts);
    # GPUARRAYS_STRICT_HOST=1 refuses "device" memory everywhere, as a GPU does
    monkeypatch.setenv("GPUARRAYS_STRICT_HOST", "1")
    a = ga.arange(5, dtype=np.int32, device=device)  # kind="device"
    with pytest.raises(TypeError, match=r"\.get\(\)") as info:
        a.host_view()
    assert "'device'" in str(info.value)
    with pytest.raises(TypeError, match=r"\.get\(\)"):
        np.asarray(a)
    with pytest.raises(TypeError, match=r"\.get\(\)"):
        np.array(a)
    with pytest.raises(TypeError, match=r"\.get\(\)"):
        a[1:].host_view()
    assert a.storage.refcount == 1  # a failed view takes no handle
    np.testing.assert_array_equal(a.get(), np.arange(5))  # the explicit copy works
    np.testing.assert_array_equal(ga.to_numpy(a), np.arange(5))


def test_host_view_of_a_freed_array_raises(device):
    for kind in host_kinds(device):
        a = ga.zeros(4, device=device, kind=kind)
        a.free()
        with pytest.raises(ga.FreedArrayError):
            a.host_view()
        with pytest.raises(ga.FreedArrayError):
            np.asarray(a)
