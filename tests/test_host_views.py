"""Host views: a.host_view() and np.asarray(a).

Zero-copy for "host"/"unified" memory, keep-alive through the storage's refcount
(the NumPy array holds a handle), TypeError pointing to .get() for "device" memory in
a.host_view(). np.asarray(a) of "device" memory follows the memory:
tests/test_numpy_conversion.py.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from strategies import LAYOUTS, address

import gpuarrays as ga

HOST_KINDS = ("host", "unified")





def kinds_of(device) -> list[str]:
    return [k for k in HOST_KINDS if k in device.kinds]


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_host_view_is_zero_copy(device, layout):
    host = np.arange(120, dtype=np.float32).reshape(4, 5, 6)
    for kind in kinds_of(device):
        a = ga.asarray(host, device=device, kind=kind)
        v = LAYOUTS[layout](a)
        expected = LAYOUTS[layout](host)
        for n in (v.host_view(), np.asarray(v)):
            assert isinstance(n, np.ndarray)
            assert n.shape == expected.shape and n.dtype == expected.dtype
            np.testing.assert_array_equal(n, expected)
            if expected.size:
                assert n.strides == expected.strides
                assert address(n) == v.data_ptr


def test_writes_visible_both_ways(device):
    for kind in kinds_of(device):
        a = ga.zeros((3, 4), device=device, kind=kind)
        n = a.host_view()
        n[1, 2] = 5.0
        assert a.get()[1, 2] == 5.0
        a[0, 0] = 7.0
        ga.synchronize(device)  # device work is asynchronous (OpenCL, CUDA): wait, then read
        assert n[0, 0] == 7.0
        np.asarray(a[2])[:] = 1.0
        np.testing.assert_array_equal(a.get()[2], np.ones(4))


def test_host_view_counts_in_refcount_and_keeps_memory(device, used):
    for kind in kinds_of(device):
        baseline = used()
        a = ga.arange(1000.0, device=device, kind=kind)
        storage = a.storage
        n = a.host_view()
        m = np.asarray(a[10:])
        assert storage.refcount == 3
        a.free()
        assert not storage.is_freed and storage.refcount == 2
        assert used() > baseline
        np.testing.assert_array_equal(n, np.arange(1000.0))  # still valid memory
        np.testing.assert_array_equal(m[:3], [10.0, 11.0, 12.0])
        del n
        assert storage.refcount == 1
        derived = m[::2]  # NumPy views of the view keep it alive too
        del m
        assert storage.refcount == 1
        del derived
        assert storage.is_freed
        assert used() == baseline


def test_host_view_released_in_another_thread(device, used):
    for kind in kinds_of(device):
        baseline = used()
        a = ga.ones(4096, device=device, kind=kind)
        box = [a.host_view(), np.asarray(a)]
        a.free()
        t = threading.Thread(target=box.clear)
        t.start()
        t.join()
        assert used() == baseline


def test_device_memory_refused_pointing_to_get(device, monkeypatch):
    monkeypatch.setenv("GPUARRAYS_STRICT_HOST", "1")  # np.asarray refuses as on a GPU
    a = ga.arange(4.0, device=device)
    with pytest.raises(TypeError, match=r"\.get\(\)"):
        a.host_view()
    with pytest.raises(TypeError, match=r"\.get\(\)"):
        np.asarray(a)
    with pytest.raises(TypeError, match="kind='host'"):
        np.asarray(a[1:])
    gc.collect()
    assert a.storage.refcount == 1  # a refused view takes no handle
    np.testing.assert_array_equal(a.get(), np.arange(4.0))  # the explicit copy works


def test_cpu_backend_enforces_device_semantics(monkeypatch):
    """The reference back-end's device memory is host memory: host_view() and np.asarray()
    view it in place, and refuse it with GPUARRAYS_STRICT_HOST=1, as a GPU would."""
    a = ga.zeros(3, device="cpu:0", kind="device")
    assert a.host_view().ctypes.data == a.data_ptr
    monkeypatch.setenv("GPUARRAYS_STRICT_HOST", "1")
    with pytest.raises(TypeError):
        a.host_view()
    with pytest.raises(TypeError):
        np.asarray(a)


def test_read_only_views_stay_read_only(device):
    for kind in kinds_of(device):
        a = ga.arange(6.0, device=device, kind=kind)
        b = ga.broadcast_to(a, (2, 6))
        n = b.host_view()
        assert not n.flags.writeable
        assert n.strides == (0, 8)
        with pytest.raises(ValueError):
            n[0, 0] = 1.0
        assert a.host_view().flags.writeable


def test_asarray_dtype_and_copy_arguments(device):
    for kind in kinds_of(device):
        a = ga.arange(4, dtype="int32", device=device, kind=kind)
        f = np.asarray(a, dtype=np.float64)
        assert f.dtype == np.float64
        np.testing.assert_array_equal(f, [0.0, 1.0, 2.0, 3.0])
        assert not np.shares_memory(f, a.host_view())
        c = np.array(a)  # copy=True
        assert address(c) != a.data_ptr
        c[0] = 9
        assert a.get()[0] == 0
        with pytest.raises(ValueError, match="without a copy"):
            np.asarray(a, dtype=np.float64, copy=False)
        assert address(np.asarray(a, copy=False)) == a.data_ptr


def test_freed_arrays_have_no_host_view(device):
    for kind in kinds_of(device):
        a = ga.ones(3, device=device, kind=kind)
        a.free()
        with pytest.raises(ga.FreedArrayError):
            a.host_view()
        with pytest.raises(ga.FreedArrayError):
            np.asarray(a)


def test_structured_and_complex_dtypes(device):
    dt = np.dtype([("x", "f4"), ("y", "i2")])
    host = np.zeros(4, dtype=dt)
    host["x"] = np.arange(4)
    host["y"] = -np.arange(4)
    for kind in kinds_of(device):
        a = ga.asarray(host, device=device, kind=kind)
        n = a.host_view()
        assert n.dtype == dt
        np.testing.assert_array_equal(n, host)
        c = ga.asarray(np.array([1 + 2j, 3 - 4j], dtype=np.complex64), device=device, kind=kind)
        np.testing.assert_array_equal(c.imag.host_view(), [2.0, -4.0])
        assert address(c.imag.host_view()) == c.data_ptr + 4
