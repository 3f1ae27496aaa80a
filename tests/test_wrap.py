"""Foreign memory: ``ga.unsafe_wrap`` and ``ga.pointer_info``, on every device.

Back-end calls (``free``, ``register_host``, ``unregister_host``) are counted
with the fault wrapper of ``faults.py`` around the real back-end.

On ``opencl`` (PoCL's CPU device) memory that gpuarrays did not allocate
through SVM has no kind the back-end can detect: wrapping it needs
``kind=``.  PoCL's kernels happen to reach any host address, so the data
tests run there too; a GPU OpenCL device could not run kernels on such memory.
"""

from __future__ import annotations

import array
import ctypes
import gc
import sys
import weakref

import faults
import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._memory.pins import PAGE, pin_count, pin_registry
from gpuarrays.backends.base import PointerInfo
from hypothesis import given, settings
from hypothesis import strategies as st

faulty = faults.faulty  # the fixture: a FaultyBackend installed on the test's device

_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.restype = None
_libc.free.argtypes = [ctypes.c_void_p]


class Owner:
    """Any object: kept alive by the arrays that name it as owner."""


def detects_host(device) -> bool:
    """Whether the back-end can tell that a foreign host address is host memory."""
    return device.backend == "cpu" or ga.pointer_info(id(Owner), device) is not None


def host_kind(device) -> str | None:
    """``kind=`` to pass when wrapping foreign host memory on ``device``."""
    return None if detects_host(device) else "host"


def frees_of(fb, ptr: int) -> int:
    return sum(1 for p, _ in fb.freed if p == ptr)


def raw_allocation(device, kind: str, nbytes: int) -> int:
    """Memory from the device's back-end, outside gpuarrays' pools (as foreign code would)."""
    return device.impl.allocate(device.index, kind, nbytes)


# NumPy arrays and buffers ----------------------------------------------------------------------
def test_wrap_numpy_array_shares_memory_both_ways(device):
    n = np.arange(12, dtype=np.float64).reshape(3, 4)
    a = ga.unsafe_wrap(n, device=device)
    assert a.shape == n.shape and a.dtype == n.dtype and a.strides == n.strides
    assert a.kind == "host" and a.device == device
    assert a.storage.ptr == n.ctypes.data and a.storage.nbytes == n.nbytes
    assert not a.storage.owned
    np.testing.assert_array_equal(a.get(), n)
    n[1, 1] = -1.0  # host writes are visible to the array
    assert a.get()[1, 1] == -1.0
    a[2] = 7.0  # array writes are visible to the host
    a[0, ::2] = ga.asarray(np.array([10.0, 20.0]), device=device)
    device.synchronize()
    np.testing.assert_array_equal(n[2], [7.0] * 4)
    np.testing.assert_array_equal(n[0], [10.0, 1.0, 20.0, 3.0])
    c = a.copy()  # a copy is an ordinary allocation (of the same kind)
    assert c.kind == "host" and c.storage.owned and not ga.shares_memory(a, c)
    np.testing.assert_array_equal(c.get(), n)


def test_wrap_numpy_views_and_odd_layouts(device):
    base = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    for n in (base[1], base[:, ::2, 1:], base[::-1, :, ::-2], base.T, base[..., 2]):
        a = ga.unsafe_wrap(n, device=device)
        assert a.shape == n.shape and a.strides == n.strides
        np.testing.assert_array_equal(a.get(), n)
        assert a.storage.refcount == 1


def test_wrap_numpy_array_keeps_it_alive(device):
    n = np.arange(100, dtype=np.int16)
    ref = weakref.ref(n)
    a = ga.unsafe_wrap(n, device=device)
    del n
    gc.collect()
    assert ref() is not None  # the array keeps its owner alive
    v = a[10:20]
    del a
    gc.collect()
    assert ref() is not None  # so does a derived array
    np.testing.assert_array_equal(v.get(), np.arange(10, 20))
    del v
    gc.collect()
    assert ref() is None


def test_wrap_buffer_protocol_objects_keep_them_alive(device):
    buf = bytearray(b"abcdefgh")
    count = sys.getrefcount(buf)
    a = ga.unsafe_wrap(buf, device=device)
    assert sys.getrefcount(buf) > count
    assert a.dtype == np.uint8 and a.shape == (8,)
    assert bytes(a.get()) == b"abcdefgh"
    a[0] = ord("X")
    device.synchronize()
    assert buf[0:1] == b"X"
    del a
    gc.collect()
    assert sys.getrefcount(buf) == count

    arr = array.array("d", [1.0, 2.0, 3.0])
    ref = weakref.ref(arr)
    w = ga.unsafe_wrap(arr, device=device)
    assert w.dtype == np.float64
    del arr
    gc.collect()
    assert ref() is not None
    np.testing.assert_array_equal(w.get(), [1.0, 2.0, 3.0])
    del w
    gc.collect()
    assert ref() is None


def test_wrap_read_only_numpy_array_is_read_only(device):
    n = np.arange(5.0)
    n.flags.writeable = False
    a = ga.unsafe_wrap(n, device=device)
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1.0
    np.testing.assert_array_equal(a.get(), n)


def test_wrap_rejects_what_is_not_memory(device):
    with pytest.raises(TypeError):
        ga.unsafe_wrap("not memory", device=device)
    with pytest.raises(TypeError):
        ga.unsafe_wrap(True, (1,), device=device)
    with pytest.raises(ValueError, match="own"):
        ga.unsafe_wrap(np.zeros(3), device=device, own=True)
    with pytest.raises(ValueError, match="shape"):
        ga.unsafe_wrap(12345, device=device, kind="host")
    with pytest.raises(ValueError, match="kind"):
        ga.unsafe_wrap(np.zeros(3), device=device, kind="pinned")


# int addresses --------------------------------------------------------------------------------
def test_wrap_ctypes_buffer_address(device):
    buf = ctypes.create_string_buffer(64)
    addr = ctypes.addressof(buf)
    a = ga.unsafe_wrap(addr, (16,), np.int32, device=device, kind=host_kind(device), owner=buf)
    assert a.kind == "host" and a.storage.ptr == addr and not a.storage.owned
    a[:] = ga.arange(16, dtype=np.int32, device=device)
    device.synchronize()
    np.testing.assert_array_equal(np.frombuffer(buf.raw, np.int32), np.arange(16))
    ctypes.memmove(addr, np.full(4, 99, np.int32).ctypes.data, 16)
    np.testing.assert_array_equal(a.get()[:5], [99, 99, 99, 99, 4])


def test_owner_is_kept_alive_while_any_array_lives(device):
    buf = ctypes.create_string_buffer(80)
    owner = Owner()
    owner.buf = buf
    ref = weakref.ref(owner)
    a = ga.unsafe_wrap(ctypes.addressof(buf), (10,), np.float64, device=device,
                       kind=host_kind(device), owner=owner)
    del owner
    gc.collect()
    assert ref() is not None
    views = [a[::2], a.reshape(2, 5).T, a.view(np.int32)]
    a.free()
    gc.collect()
    assert ref() is not None
    views.pop(0).free()
    del views[0]
    gc.collect()
    assert ref() is not None
    views.clear()
    gc.collect()
    assert ref() is None


def test_forced_free_of_a_wrap_drops_the_owner(device):
    owner = Owner()
    owner.n = np.zeros(8)
    ref = weakref.ref(owner)
    a = ga.unsafe_wrap(owner.n.ctypes.data, (8,), device=device, kind="host", owner=owner)
    v = a[1:]
    del owner
    a.free(force=True)
    gc.collect()
    assert ref() is None  # released at once, although a and v are still referenced
    for x in (a, v):
        with pytest.raises(ga.FreedArrayError, match="forced free"):
            x.get()


def test_derived_arrays_of_wrapped_memory_match_numpy(device):
    n = np.arange(48, dtype=np.int32)
    a = ga.unsafe_wrap(n.ctypes.data, (48,), np.int32, device=device, kind=host_kind(device),
                       owner=n)
    m = n.reshape(4, 12)
    g = a.reshape(4, 12)
    cases = [
        (g[1:3, ::-2], m[1:3, ::-2]),
        (g.T, m.T),
        (g.reshape(2, 2, 12)[:, 1], m.reshape(2, 2, 12)[:, 1]),
        (g.view(np.uint8)[1:, 3::4], m.view(np.uint8)[1:, 3::4]),
        (g[1].view(np.int64), m[1].view(np.int64)),
        (g[:, 1:].view(np.int16)[::2], m[:, 1:].view(np.int16)[::2]),
        (g[2, 5], m[2, 5, ...]),
    ]
    for d, e in cases:
        assert ga.shares_memory(d, a)
        assert d.shape == e.shape and d.strides == e.strides and d.dtype == e.dtype
        assert d.storage.ptr + d.offset == e.__array_interface__["data"][0]
        np.testing.assert_array_equal(d.get(), e)
    g[::3, ::5] = -1  # writes through a strided view of wrapped memory
    device.synchronize()
    expected = np.arange(48, dtype=np.int32).reshape(4, 12)
    expected[::3, ::5] = -1
    np.testing.assert_array_equal(m, expected)


def test_wrap_with_explicit_and_negative_strides(device):
    n = np.arange(10, dtype=np.float64)
    last = n.ctypes.data + 9 * 8
    r = ga.unsafe_wrap(last, (10,), np.float64, strides=(-8,), device=device,
                       kind=host_kind(device), owner=n)
    assert r.strides == (-8,)
    assert r.storage.ptr == n.ctypes.data and r.storage.nbytes == 80  # the whole range
    np.testing.assert_array_equal(r.get(), n[::-1])
    cols = ga.unsafe_wrap(n.ctypes.data, (5, 2), np.float64, strides=(8, 40), device=device,
                          kind=host_kind(device), owner=n)
    np.testing.assert_array_equal(cols.get(), n.reshape(2, 5).T)
    with pytest.raises(ValueError, match="strides"):
        ga.unsafe_wrap(n.ctypes.data, (5, 2), np.float64, strides=(8,), device=device,
                       kind="host", owner=n)


def test_null_pointer(device):
    z = ga.unsafe_wrap(0, (0,), np.float32, device=device)
    assert z.shape == (0,) and z.size == 0 and z.get().shape == (0,)
    z2 = ga.unsafe_wrap(0, (3, 0, 2), np.int8, device=device, kind="host")
    assert z2.kind == "host" and z2.get().shape == (3, 0, 2)
    z2.free()
    z.free()
    for shape in [(1,), (2, 3), ()]:
        with pytest.raises(ValueError, match="NULL"):
            ga.unsafe_wrap(0, shape, np.float32, device=device)
    with pytest.raises(ValueError):
        ga.unsafe_wrap(-8, (1,), np.float32, device=device, kind="host")


# ownership ---------------------------------------------------------------------------------------
def test_own_and_owner_exclude_each_other(device):
    buf = ctypes.create_string_buffer(8)
    with pytest.raises(ValueError, match="own"):
        ga.unsafe_wrap(ctypes.addressof(buf), (1,), device=device, kind="host", own=True,
                       owner=buf)


def test_own_true_frees_exactly_once_through_the_backend(device, faulty):
    for kind in device.kinds:
        faulty.reset_counts()  # the C allocator may hand the same address back
        ptr = raw_allocation(device, kind, 256)
        a = ga.unsafe_wrap(ptr, (32,), np.float64, device=device, own=True)
        assert a.kind == kind  # detected: the back-end made it
        assert a.storage.owned
        a[:] = 3.0
        views = [a[1:], a.reshape(4, 8), a.view(np.int64)[::2]]
        a.free()
        views[0].free()
        assert frees_of(faulty, ptr) == 0
        np.testing.assert_array_equal(views[1].get(), np.full((4, 8), 3.0))
        views.clear()
        gc.collect()
        assert frees_of(faulty, ptr) == 1
        assert a.storage.is_freed


def test_own_true_forced_free_frees_once(device, faulty):
    ptr = raw_allocation(device, "device", 128)
    a = ga.unsafe_wrap(ptr, (16,), np.float64, device=device, own=True)
    v = a[::2]
    v.free(force=True)
    assert frees_of(faulty, ptr) == 1
    assert a.is_freed
    a.free()
    a.free(force=True)
    del a, v
    gc.collect()
    assert frees_of(faulty, ptr) == 1


def test_own_true_of_malloc_memory_on_cpu(faulty, device):
    if device.backend != "cpu":
        pytest.skip("only the cpu back-end frees C-allocator memory it did not make")
    ptr = _libc.malloc(40)
    a = ga.unsafe_wrap(ptr, (10,), np.int32, device=device, own=True)
    assert a.kind == "host"
    a[:] = 5
    np.testing.assert_array_equal(a.get(), [5] * 10)
    del a
    gc.collect()
    assert frees_of(faulty, ptr) == 1


def test_own_false_never_frees(device, faulty):
    kinds = list(device.kinds)
    ptrs = [raw_allocation(device, kind, 512) for kind in kinds]
    malloced = _libc.malloc(64)
    try:
        for ptr, kind in zip(ptrs, kinds, strict=True):
            a = ga.unsafe_wrap(ptr, (64,), np.int64, device=device)
            assert a.kind == kind and not a.storage.owned
            v = a[3:]
            a.free(force=True)
            del a, v
        w = ga.unsafe_wrap(malloced, (8,), np.int64, device=device, kind=host_kind(device))
        w[:] = 1
        del w
        gc.collect()
        assert faulty.calls["free"] == 0
    finally:
        for ptr, kind in zip(ptrs, kinds, strict=True):
            device.impl.free(device.index, kind, ptr, 512)
        _libc.free(malloced)


def test_failing_free_of_owned_memory_warns_and_goes_on(device, faulty):
    ptr = raw_allocation(device, "device", 64)
    a = ga.unsafe_wrap(ptr, (8,), np.float64, device=device, own=True)
    faulty.fail("free")
    with pytest.warns(ga.GPUArraysWarning, match="wrapped memory"):
        a.free()
    assert a.is_freed
    faulty.heal()
    device.impl.free(device.index, "device", ptr, 64)  # what gpuarrays could not free


# kinds ---------------------------------------------------------------------------------------------
def test_kind_detection_inside_gpuarrays_allocations(device):
    for kind in device.kinds:
        x = ga.arange(32, dtype=np.int32, device=device, kind=kind)
        info = ga.pointer_info(x.storage.ptr + 16, device)
        assert isinstance(info, ga.PointerInfo)
        assert info.kind == kind and info.device == device
        assert info.base <= x.storage.ptr and x.storage.ptr + 128 <= info.base + info.size
        w = ga.unsafe_wrap(x.storage.ptr + 16, (4,), np.int32, device=device)
        assert w.kind == kind and not w.storage.owned
        np.testing.assert_array_equal(w.get(), [4, 5, 6, 7])
        assert ga.shares_memory(w, x) and ga.shares_memory(x, w)
        assert ga.may_share_memory(w, x)
        assert not ga.shares_memory(w, x[8:])
        w[0] = -4
        assert x.get()[4] == -4
        del w
        np.testing.assert_array_equal(x.get()[5:8], [5, 6, 7])  # x unaffected by the wrap's end


def test_two_wraps_of_one_range_share_memory(device):
    n = np.zeros(16, np.uint8)
    a = ga.unsafe_wrap(n, device=device)
    b = ga.unsafe_wrap(n.ctypes.data + 8, (8,), np.uint8, device=device, kind=host_kind(device),
                       owner=n)
    assert ga.shares_memory(a, b) and ga.shares_memory(a[8:], b)
    assert not ga.shares_memory(a[:8], b)


def test_kind_detection_of_foreign_host_memory(device):
    buf = ctypes.create_string_buffer(32)
    addr = ctypes.addressof(buf)
    info = ga.pointer_info(addr, device)
    if device.backend == "cpu":
        assert info == ga.PointerInfo("host", device, addr, 0)  # size 0: not ours
        assert ga.unsafe_wrap(addr, (4,), np.int64, device=device, owner=buf).kind == "host"
    if info is None:  # opencl: the back-end only knows its own SVM allocations
        with pytest.raises(ValueError, match="kind=") as e:
            ga.unsafe_wrap(addr, (4,), np.int64, device=device, owner=buf)
        assert hex(addr) in str(e.value) and str(device) in str(e.value)
        for kind in device.kinds:
            assert ga.unsafe_wrap(addr, (4,), np.int64, device=device, kind=kind,
                                  owner=buf).kind == kind


def test_explicit_kind_wins_and_is_checked(device):
    x = ga.zeros(8, device=device, kind="device")
    assert ga.unsafe_wrap(x.storage.ptr, (8,), device=device, kind="unified").kind == "unified"
    with pytest.raises(ValueError, match="kind"):
        ga.unsafe_wrap(x.storage.ptr, (8,), device=device, kind="Device")


def test_pointer_info_rejects_non_addresses(device):
    for bad in ("0x10", 1.5, None, True):
        with pytest.raises(TypeError):
            ga.pointer_info(bad, device)


def test_wrapped_device_memory_has_no_host_view(device, monkeypatch):
    monkeypatch.setenv("GPUARRAYS_STRICT_HOST", "1")  # device memory refuses, as on a GPU
    x = ga.zeros(8, device=device, kind="device")
    w = ga.unsafe_wrap(x.storage.ptr, (8,), device=device)
    with pytest.raises(TypeError, match=r"\.get\(\)"):
        w.host_view()
    n = np.arange(4.0)
    h = ga.unsafe_wrap(n, device=device).host_view()
    assert np.shares_memory(h, n)


# pins ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("own_memory", [False, True], ids=["numpy", "malloc-owned"])
def test_pins_balance_over_overlapping_wraps(device, faulty, own_memory):
    pins = pin_count
    registers = device.impl.needs_host_registration and detects_host(device)
    assert pins(device) == {}
    if own_memory and device.backend != "cpu":
        pytest.skip("only the cpu back-end frees C-allocator memory it did not make")
    if own_memory:
        ptr = _libc.malloc(800)
        outer = ga.unsafe_wrap(ptr, (100,), np.float64, device=device, own=True)
        keep = None
    else:
        keep = np.zeros(100)
        ptr = keep.ctypes.data
        outer = ga.unsafe_wrap(keep, device=device)
    kind = host_kind(device)
    inner = ga.unsafe_wrap(ptr + 80, (10,), np.float64, device=device, kind=kind)
    same = ga.unsafe_wrap(ptr, (100,), np.float64, device=device, kind=kind)
    pages = (ptr - ptr % PAGE, -(-(ptr + 800) // PAGE) * PAGE)  # registered whole pages
    if registers:
        assert pins(device) == {pages: 3}  # one registration, counted 3 times
        assert faulty.calls["register_host"] == 1
    else:
        assert pins(device) == {} and faulty.calls["register_host"] == 0
    views = [outer[5:], inner.reshape(2, 5)]
    outer.free()
    inner.free()
    del outer, inner
    if registers:
        assert pins(device) == {pages: 3}  # the views still hold two of them
    del same
    gc.collect()
    if registers:
        assert pins(device) == {pages: 2}
        assert faulty.calls["unregister_host"] == 0
    views.clear()
    gc.collect()
    assert pins(device) == {}
    assert faulty.calls["unregister_host"] == faulty.calls["register_host"] == int(registers)
    assert frees_of(faulty, ptr) == int(own_memory)


def test_pins_of_partly_overlapping_and_disjoint_wraps_balance(device, faulty):
    n = np.zeros(256, np.uint8)
    p = n.ctypes.data
    kind = host_kind(device)
    arrays = [ga.unsafe_wrap(p + lo, (size,), np.uint8, device=device, kind=kind, owner=n)
              for lo, size in [(0, 100), (50, 100), (200, 56), (210, 10), (0, 100)]]
    if device.impl.needs_host_registration and detects_host(device):
        assert sum(pin_count(device).values()) == 5
        assert faulty.calls["register_host"] >= 1  # whole pages: one or two ranges here
    for i in (4, 0, 2, 1, 3):
        arrays[i].free()
        gc.collect()
    assert pin_count(device) == {}
    assert faulty.calls["unregister_host"] == faulty.calls["register_host"]


class RegistersLikeCuda:
    """The cpu back-end, registering host memory as the cuda back-end does on a GPU.

    CUDA registers whole pages; a range overlapping pages already registered is refused,
    which ``backends/cuda.py`` records as another library's registration (left alone at
    unregistration); the driver reports a registered range from ``cuPointerGetAttributes``;
    an unregistration unmaps its pages for the device.  Which bytes the device may reach
    is recorded, so a wrap that outlives its pages' registration is seen (on a GPU: an
    illegal address, seen on an H200 before the pins were counted per page)."""

    needs_host_registration = True

    def __init__(self, real) -> None:
        self.real, self.name = real, real.name
        self.mapped: dict[int, tuple[int, int]] = {}  # registered address -> its pages
        self.foreign: set[int] = set()
        self.registrations = 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def register_host(self, index: int, ptr: int, nbytes: int) -> None:
        lo, hi = ptr - ptr % PAGE, -(-(ptr + nbytes) // PAGE) * PAGE
        if any(s < hi and lo < e for s, e in self.mapped.values()):
            self.foreign.add(ptr)  # CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
            return
        self.mapped[ptr] = (lo, hi)
        self.registrations += 1

    def unregister_host(self, index: int, ptr: int) -> None:
        if ptr in self.foreign:
            self.foreign.discard(ptr)
            return
        del self.mapped[ptr]  # a KeyError: unregistering what was never registered

    def pointer_info(self, ptr: int) -> PointerInfo | None:
        for s, e in self.mapped.values():
            if s <= ptr < e:
                return PointerInfo("host", 0, s, e - s)
        return self.real.pointer_info(ptr)

    def reachable(self, lo: int, hi: int) -> bool:
        """Whether every page of the bytes ``[lo, hi)`` is registered."""
        page = lo - lo % PAGE
        while page < hi:
            if not any(s <= page < e for s, e in self.mapped.values()):
                return False
            page += PAGE
        return True


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3 * PAGE), st.integers(1, 2 * PAGE)), min_size=1,
                max_size=6), st.randoms(use_true_random=False))
def test_wraps_sharing_pages_keep_them_registered_until_the_last_goes(wraps, rnd):
    device = ga.get_device("cpu:0")
    real = device.impl
    before = pin_count(device)  # another test's wraps not collected yet may hold pages
    fake = RegistersLikeCuda(real)
    fake.mapped = {s: (s, e) for s, e in before}
    n = np.zeros(6 * PAGE, np.uint8)
    p = n.ctypes.data
    arrays = {}
    device.impl = device.memory.impl = fake
    try:
        for i, (lo, size) in enumerate(wraps):
            arrays[i] = ga.unsafe_wrap(p + lo, (size,), np.uint8, device=device, owner=n)
        order = list(arrays)
        rnd.shuffle(order)
        for i in order:
            arrays.pop(i).free()  # the last handle: released now
            for j in arrays:  # every live wrap still reaches all of its bytes
                lo = p + wraps[j][0]
                assert fake.reachable(lo, lo + wraps[j][1]), (wraps, order, j)
        assert pin_count(device) == before and not fake.foreign
        assert fake.mapped == {s: (s, e) for s, e in before}
    finally:
        for a in arrays.values():  # a failed example leaves no pin to the next one
            a.free()
        device.impl = device.memory.impl = real


def test_no_pin_for_memory_gpuarrays_allocated(device, faulty):
    for kind in device.kinds:
        x = ga.zeros(64, device=device, kind=kind)
        w = ga.unsafe_wrap(x.storage.ptr, (64,), device=device)
        del w
    assert faulty.calls["register_host"] == 0 and pin_count(device) == {}


# wraps are not allocations -------------------------------------------------------------------------
def test_wraps_bypass_caches_and_statistics(device):
    n = np.arange(1000, dtype=np.float32)
    raw = raw_allocation(device, "device", 4096)
    try:
        x = ga.zeros(100, device=device)
        gc.collect()
        before = ga.memory_stats(device)
        cache = ga.AllocCache()
        with ga.record_allocations() as rec, ga.cached(cache):
            arrays = [ga.unsafe_wrap(n, device=device),
                      ga.unsafe_wrap(raw, (1024,), np.float32, device=device),
                      ga.unsafe_wrap(x.storage.ptr, (100,), device=device),
                      ga.unsafe_wrap(0, (0,), device=device)]
            derived = [a[1:].reshape(-1) for a in arrays]
        assert rec.count == 0 and rec.bytes == 0 and rec.cache_hits == 0
        assert (cache.n_free, cache.n_busy, cache.hits, cache.misses) == (0, 0, 0, 0)
        during = ga.memory_stats(device)
        for key in ("used_bytes", "reserved_bytes", "alloc_count", "alloc_bytes",
                    "live_allocations", "cache_hits"):
            assert during[key] == before[key], key
        del arrays, derived
        gc.collect()
        after = ga.memory_stats(device)
        for key in ("used_bytes", "reserved_bytes", "free_count", "free_bytes",
                    "pool_free_blocks"):
            assert after[key] == before[key], key
        np.testing.assert_array_equal(x.get(), np.zeros(100))
    finally:
        device.impl.free(device.index, "device", raw, 4096)


def test_wrap_survives_memory_pressure_and_trim(device):
    n = np.arange(64, dtype=np.int64)
    a = ga.unsafe_wrap(n, device=device)
    ga.trim(device)
    cache = ga.AllocCache()
    with ga.cached(cache):
        ga.zeros(64, np.int64, device=device).free()
    cache.free()
    np.testing.assert_array_equal(a.get(), np.arange(64))


def test_dlpack_export_of_a_wrap_on_cpu(device):
    if device.backend != "cpu":
        pytest.skip("numpy.from_dlpack reads cpu arrays only")
    n = np.arange(6, dtype=np.int32)
    a = ga.unsafe_wrap(n, device=device)
    m = np.from_dlpack(a)
    assert np.shares_memory(m, n)
    np.testing.assert_array_equal(m, n)
    del a
    gc.collect()
    np.testing.assert_array_equal(m, n)


# ------------------------------------------------------------- regressions (issue 15)
def test_owned_wrap_with_negative_strides_frees_the_allocation_address(device, faulty):
    ptr = device.impl.allocate(device.index, "device", 80)
    a = ga.unsafe_wrap(ptr + 72, (10,), np.float64, strides=(-8,), device=device,
                       kind="device", own=True)
    assert a.storage.ptr == ptr
    a[...] = np.arange(10.0)
    np.testing.assert_array_equal(a[::-1].get(), np.arange(10.0)[::-1])
    a.free()
    assert [p for p, _ in faulty.freed] == [ptr]


def test_array_form_refuses_a_shape_larger_than_the_source_buffer(device):
    with pytest.raises(ValueError, match=r"800000 bytes.*buffer of 16 bytes"):
        ga.unsafe_wrap(np.arange(2.0), (100000,), device=device)
    with pytest.raises(ValueError, match="outside the source array's buffer"):
        ga.unsafe_wrap(np.arange(4.0), (2,), strides=(-8,), device=device)


def test_array_form_with_dtype_alone_reinterprets_the_whole_buffer_as_numpy_view(device):
    host = np.arange(8.0)
    a = ga.unsafe_wrap(host, dtype=np.int32, device=device)
    expected = host.view(np.int32)
    assert (a.shape, a.strides) == (expected.shape, expected.strides) == ((16,), (4,))
    np.testing.assert_array_equal(a.get(), expected)
    with pytest.raises(ValueError, match="cannot wrap a float64 array"):
        ga.unsafe_wrap(np.arange(9.0)[::2], dtype=np.int32, device=device)


def test_array_form_refuses_own_true_for_a_numpy_array(device):
    for own in (True, 1, np.True_):
        with pytest.raises(ValueError, match="belongs to that object"):
            ga.unsafe_wrap(np.arange(8.0), own=own, device=device)


def test_impossible_addresses_are_value_errors(device):
    for ptr in (-1, 2**80, 2**64):
        with pytest.raises(ValueError, match="cannot be an address"):
            ga.pointer_info(ptr, device=device)
    with pytest.raises(ValueError, match="cannot be an address"):
        ga.unsafe_wrap(2**80, (1,), device=device, kind="device")
    with pytest.raises(ValueError, match="cannot be an address"):
        ga.unsafe_wrap(2**64 - 8, (2,), device=device, kind="device")  # runs past the end


def test_storage_owned_whose_truth_raises_propagates_the_error(device):
    class Undecided:
        def __bool__(self):
            raise ZeroDivisionError("no truth value")

    with pytest.raises(ZeroDivisionError, match="no truth value"):
        ga.Storage(0, 0, device, "device", None, device.memory.epoch, 0, Undecided())


def test_cpu_backend_frees_with_the_allocator_it_allocates_with():
    from gpuarrays.backends import cpu

    def address(fn) -> int:
        return ctypes.cast(fn, ctypes.c_void_p).value

    process = ctypes.CDLL(None)  # the process's scope: a preloaded allocator comes first
    assert address(cpu._malloc) == address(process.malloc)
    assert address(cpu._free) == address(process.free)
    ptr = _libc.malloc(64)  # the process allocator's memory, owned by a wrap
    a = ga.unsafe_wrap(ptr, (8,), np.float64, device="cpu:0", kind="host", own=True)
    a[...] = 1.0
    a.free()


@pytest.mark.parametrize("lock_busy", [False, True])
def test_wrapped_memory_is_unregistered_before_its_owner_goes(device, lock_busy):
    """The owner keeps the memory mapped: it may go only once no registration covers the
    memory, or the next mapping at that address starts inside a stale registration (on an
    H200, uploads from such a NumPy array failed with CUDA_ERROR_INVALID_VALUE).  Also when
    the unpin has to wait for the registry's lock (a finalizer on another thread)."""
    if not device.impl.needs_host_registration:
        pytest.skip(f"{device} registers no host memory")
    memory = np.arange(4 * PAGE // 8, dtype=np.float64)
    start, end = memory.ctypes.data, memory.ctypes.data + memory.nbytes
    a = ga.unsafe_wrap(memory, device=device)
    registered_at_death = []
    weakref.finalize(memory, lambda: registered_at_death.append(
        any(s < end and start < e for s, e in pin_registry(device).ranges)))
    del memory
    pins = pin_registry(device)
    if lock_busy:
        with pins.lock:
            a.free()
            gc.collect()
            assert registered_at_death == []  # kept alive while its unpin waits
        pin_count(device)  # applies the queued unpin
    else:
        a.free()
    gc.collect()
    assert registered_at_death == [False]
