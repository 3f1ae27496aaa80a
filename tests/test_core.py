"""The compiled core (``gpuarrays._core``) through the public API and its own small surface.

The shared suite covers the behaviour (release, pools, caches, threads, resets);
these tests pin what is specific to the C implementation: its lock, argument
checking, size overflow, finalizer failures, and cycles through storage owners.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays import _core
from gpuarrays._common.errors import GPUArraysWarning
from gpuarrays._memory.storage import Epoch, Storage


# the lock -------------------------------------------------------------------------
def test_lock_behaves_like_threading_lock():
    lock = _core.Lock()
    assert lock.acquire() is True and lock.locked()
    assert lock.acquire(False) is False
    assert lock.acquire(timeout=0.01) is False
    lock.release()
    assert not lock.locked()
    with pytest.raises(RuntimeError, match="release unlocked lock"):
        lock.release()
    with lock:
        assert lock.locked()
    assert not lock.locked()
    with pytest.raises(ValueError, match="non-blocking"):
        lock.acquire(False, 1.0)
    with pytest.raises(ValueError, match="timeout"):
        lock.acquire(True, -5.0)
    with pytest.raises(TypeError):
        _core.Lock(1)


def test_lock_wait_releases_the_gil():
    lock = _core.Lock()
    lock.acquire()
    released = []

    def holder():
        time.sleep(0.05)
        released.append(True)
        lock.release()

    t = threading.Thread(target=holder)
    t.start()
    assert lock.acquire(timeout=5)  # the other thread runs while this one waits
    assert released == [True]
    lock.release()
    t.join()


# storages and arrays ----------------------------------------------------------------
def test_storage_constructor_checks_its_arguments(device):
    epoch = device.memory.epoch
    with pytest.raises(TypeError):
        Storage("0", 0, device, "device", None, epoch)
    with pytest.raises(TypeError):
        Storage(0, 0, device, "device", None, "not an epoch")
    st = Storage(0, 0, device, "device", None, epoch)
    assert st.refcount == 0 and not st.is_freed and st.owned is True and st.owner is None
    assert st.release("local") is True and st.release("local") is False and st.is_freed


def test_epoch():
    e = Epoch(3)
    assert e.live and e.generation == 3
    with pytest.raises(TypeError):
        Epoch("3")


def test_gpuarray_has_no_public_constructor():
    with pytest.raises(TypeError, match="no public constructor"):
        ga.GPUArray()
    with pytest.raises(TypeError):
        _core.Array()


def test_fields_are_read_only(device):
    a = ga.empty(4, device=device)
    for name in ("_storage", "_shape", "_strides", "_offset", "_dtype", "_freed", "_writeable"):
        with pytest.raises(AttributeError):
            setattr(a, name, None)
    a.free()


def test_free_arguments(device, used):
    base = used()
    a = ga.empty(4, device=device)
    with pytest.raises(TypeError, match="unexpected keyword"):
        a.free(forse=True)
    with pytest.raises(TypeError, match="at most one"):
        a.free(True, True)
    assert not a.is_freed  # a refused call changes nothing
    a.free(force=True)
    assert a.is_freed and used() == base


def test_make_checks_its_storage():
    with pytest.raises(TypeError, match="needs a Storage"):
        _core.make(object(), (1,), (8,), 0, np.dtype(np.float64))
    with pytest.raises(TypeError, match="5 to 7"):
        _core.make(1, 2)


def test_weak_references(device):
    a = ga.empty(4, device=device)
    ref, sref = weakref.ref(a), weakref.ref(a.storage)
    del a
    gc.collect()
    assert ref() is None and sref() is None


def test_cycle_through_a_storage_owner_is_collected(device, used):
    """array -> storage -> owner -> array: the collector finds and frees it."""
    base = used()
    host = np.zeros(16, np.float32)
    if device.backend != "cpu":
        pytest.skip("wrapping NumPy memory as device memory needs the cpu back-end")

    class Owner:
        pass

    owner = Owner()
    a = ga.unsafe_wrap(host.ctypes.data, host.shape, host.dtype, device=device, kind="host",
                       owner=owner)
    owner.array = a  # the cycle
    ref = weakref.ref(owner)
    del a, owner
    gc.collect()
    assert ref() is None and used() == base


def test_finalizer_failure_is_a_warning_not_an_exception(device):
    """A home that raises while the last handle goes: a GPUArraysWarning, never a raise."""

    class BrokenHome:
        def release_storage(self, storage):
            raise RuntimeError("boom")

    st = Storage(0, 0, device, "device", BrokenHome(), device.memory.epoch)
    a = _core.make(st, (0,), (8,), 0, np.dtype(np.float64))
    with pytest.warns(GPUArraysWarning, match="releasing a GPUArray failed.*boom"):
        del a
        gc.collect()
    b = _core.make(Storage(0, 0, device, "device", BrokenHome(), device.memory.epoch),
                   (0,), (8,), 0, np.dtype(np.float64))
    with pytest.raises(RuntimeError, match="boom"):
        b.free()  # an explicit free reports the failure
    assert b.is_freed


# allocation --------------------------------------------------------------------------
def test_empty_arguments(device):
    a = ga.empty(shape=(2, 3), dtype=np.int16, device=device, kind="device")
    assert a.shape == (2, 3) and a.dtype == np.int16 and a.strides == (6, 2)
    assert ga.empty(3, None, device=device).dtype == np.float64  # None is float64, as NumPy
    with pytest.raises(TypeError, match="positional"):
        ga.empty(3, np.float32, device)
    with pytest.raises(TypeError, match="unexpected or repeated"):
        ga.empty(3, shape=3)
    with pytest.raises(TypeError, match="missing required"):
        ga.empty(dtype=np.float32)
    with pytest.raises(ValueError):
        ga.empty(-1, device=device)
    with pytest.raises(ValueError, match="kind"):
        ga.empty(3, device=device, kind="nope")
    with pytest.raises(TypeError):
        ga.empty(3, device=device, kind=[])  # unhashable kind


def test_shapes_through_the_python_path(device):
    """Large, negative and non-int sizes leave the C fast path with the right error."""
    assert ga.empty(np.int64(3), device=device).shape == (3,)
    assert ga.empty([2, np.int32(2)], device=device).shape == (2, 2)
    with pytest.raises(ValueError):
        ga.empty((2, -2), device=device)
    with pytest.raises(ValueError, match="more than"):
        ga.empty((2**40, 2**40), np.float64, device=device)  # past 2**63 bytes
    with pytest.raises(ValueError, match="more than"):
        ga.empty(2**62, np.float64, device=device)  # 2**65 bytes
    with pytest.raises(ga.OutOfMemoryError):
        ga.empty(2**62, np.uint8, device=device)  # possible, but no device has it


def test_strides_match_numpy(device):
    from gpuarrays._common.raw import c_strides

    for shape in [(), (0,), (3, 0, 2), (1, 1), (4, 5, 6), (2, 0), (7,)]:
        a = ga.empty(shape, np.complex64, device=device)
        assert a.strides == c_strides(shape, 8), shape
        if 0 not in shape:  # NumPy 2.4 gives empty arrays zero strides; we keep C strides
            assert a.strides == np.empty(shape, np.complex64).strides, shape
        a.free()


def test_pool_methods_check_arguments(device):
    mgr = device.memory
    with pytest.raises(TypeError):
        mgr.new_storage("device")
    with pytest.raises(TypeError, match="int size"):
        mgr.new_storage("device", 1.5)
    with pytest.raises(ValueError, match="kind"):
        mgr.new_storage("nope", 64)
    with pytest.raises(TypeError, match="needs a Storage"):
        mgr.release_storage(object())
    with pytest.raises(TypeError):
        mgr.give_block("device", 1)


def test_core_configure_refuses_bad_values():
    with pytest.raises(TypeError, match="subclass"):
        _core.configure(storage_type=int)
    with pytest.raises(TypeError, match="ContextVar"):
        _core.configure(cache_var=1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        _core.configure(nothing=1)
    with pytest.raises(TypeError, match="keyword arguments only"):
        _core.configure(1)


# caches and orphans -------------------------------------------------------------------
def test_cache_serves_several_devices_and_kinds(device):
    """The cache remembers its last (device, kind): switching between them stays exact."""
    cpu = ga.get_device("cpu:0")
    cache = ga.AllocCache()
    with ga.cached(cache):
        for _ in range(3):
            arrays = [ga.empty(100, device=device), ga.empty(100, device=cpu, kind="host"),
                      ga.empty(100, device=device, kind="host"), ga.empty(50, device=device)]
            assert len({a.storage.ptr for a in arrays}) == 4  # never aliased
            del arrays
    assert (cache.n_busy, cache.n_free, cache.misses, cache.hits) == (0, 4, 4, 8)
    cache.free()
    assert cache.n_free == 0


def test_cache_bad_kind_leaves_it_unchanged(device):
    cache = ga.AllocCache()
    with ga.cached(cache), pytest.raises(ValueError, match="kind"):
        ga.empty(8, device=device, kind="nope")
    assert cache._free == {} and cache.n_busy == 0 and cache.n_free == 0


@pytest.mark.parametrize("home", ["pool", "cache"])
def test_storage_dropped_before_any_handle_gives_memory_back(device, used, home):
    base = used()
    cache = ga.AllocCache()
    st = (device.memory.new_storage("device", 1000) if home == "pool"
          else cache.storage(device, "device", 1000))
    assert used() > base
    del st
    gc.collect()
    if home == "cache":
        assert cache.n_busy == 0 and cache.n_free == 1
        cache.free()
    assert used() == base


def test_remembered_lookups_follow_the_arguments(device):
    """empty() remembers its last device/dtype/size lookups: changing any of them is seen."""
    cpu = ga.get_device("cpu:0")
    spec = [("a", np.float32)]
    a = ga.empty(3, spec, device=device)
    spec.append(("b", np.int8))  # an unhashable dtype description is never remembered
    b = ga.empty(3, spec, device=device)
    assert a.dtype.names == ("a",) and b.dtype.names == ("a", "b")
    for dt, n, dev in [(np.float32, 10, device), (np.float32, 10, cpu), (np.int16, 10, device),
                       (np.int16, 11, device), ("f8", 11, cpu), (np.float32, (2, 5), device)]:
        x = ga.empty(n, dt, device=dev)
        want = np.empty(n, dt)
        assert (x.device, x.dtype, x.shape, x.strides, x.nbytes) == (
            dev, want.dtype, want.shape, want.strides, want.nbytes)
        x.free()
    a.free()
    b.free()
