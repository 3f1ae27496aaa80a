"""Quarantine: handles gpuarrays cannot revoke keep their block out of reuse.

A NumPy host view, a DLPack capsule not consumed yet, and a capsule consumed by
another library whose deleter has not run all still point at the memory.  A forced
free, ``cache.free()``, the out-of-memory ladder and ``trim`` invalidate every
gpuarrays array at once, but the block goes back to its pool, cache or owner only
when the last such handle goes; until then ``memory_stats()["quarantined_bytes"]``
counts it (docs/design.md, "Release").  Each test is named after what broke.
"""

from __future__ import annotations

import gc
import warnings

import faults
import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._memory.pool import round_size

faulty = faults.faulty


class Producer:
    """Hands one capsule to ``np.from_dlpack`` (a capsule taken earlier, consumed now)."""

    def __init__(self, capsule) -> None:
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def consume(capsule, device):
    """Another library consuming the capsule now: a host array reading the memory.

    cpu: NumPy (``np.from_dlpack``); elsewhere ga.from_dlpack, whose import keeps the
    capsule's deleter pending until the imported array dies, as an outside consumer's.
    """
    if device.backend == "cpu":
        return np.from_dlpack(Producer(capsule))
    return ga.from_dlpack(capsule)


def read(obj) -> np.ndarray:
    return obj.copy() if isinstance(obj, np.ndarray) else obj.get()


def host_kind(device) -> str:
    if "host" not in device.kinds:
        pytest.skip(f"{device} has no host memory")
    return "host"


def addresses(obj) -> tuple[int, int]:
    if isinstance(obj, np.ndarray):
        ptr = obj.__array_interface__["data"][0]
        return ptr, ptr + obj.nbytes
    return obj.storage.ptr, obj.storage.ptr + obj.storage.nbytes


def disjoint(x, y) -> bool:
    (a, b), (c, d) = addresses(x), addresses(y)
    return b <= c or d <= a


def quarantined(device) -> int:
    return ga.memory_stats(device)["quarantined_bytes"]


N = 1000  # float64 elements: 8000 bytes, one 8192-byte block


def test_forced_free_with_a_live_host_view_never_reuses_the_block(device, used):
    kind = host_kind(device)
    baseline = used()
    a = ga.full((N,), 1.0, device=device, kind=kind)
    hv = a.host_view()
    a.free(force=True)
    with pytest.raises(ga.FreedArrayError, match="forced free"):
        a.get()
    assert quarantined(device) == round_size(8 * N)
    assert used() == baseline + round_size(8 * N)  # quarantined bytes are in use
    b = ga.full((N,), 2.0, device=device, kind=kind)
    assert disjoint(hv, b)
    hv[:] = 5.0  # writing through the view never reaches b
    np.testing.assert_array_equal(b.get(), np.full(N, 2.0))
    np.testing.assert_array_equal(hv, np.full(N, 5.0))
    del hv
    gc.collect()
    assert quarantined(device) == 0
    b.free()
    assert used() == baseline


def test_capsule_taken_before_a_forced_free_and_consumed_after_reads_the_old_bytes(device):
    a = ga.asarray(np.arange(N, dtype=np.float64), device=device)
    capsule = a.__dlpack__(max_version=(1, 0))
    a.free(force=True)
    assert quarantined(device) == round_size(8 * N)
    b = ga.full((N,), -1.0, device=device)
    view = consume(capsule, device)
    del capsule
    np.testing.assert_array_equal(read(view), np.arange(N, dtype=np.float64))
    assert disjoint(view, b)
    del view
    gc.collect()
    assert quarantined(device) == 0
    np.testing.assert_array_equal(b.get(), np.full(N, -1.0))


def test_unconsumed_capsule_keeps_a_force_freed_block_until_it_dies(device):
    a = ga.zeros((N,), device=device)
    ptr = a.storage.ptr
    capsule = a.__dlpack__(max_version=(1, 0))
    a.free(force=True)
    b = ga.zeros((N,), device=device)
    assert b.storage.ptr != ptr
    del capsule
    gc.collect()
    assert quarantined(device) == 0
    c = ga.zeros((N,), device=device)  # the block is back in the pool (exact-size reuse)
    assert c.storage.ptr == ptr


def test_cache_free_with_an_exported_array_never_hands_its_buffer_out(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.asarray(np.arange(N, dtype=np.float64), device=device)
    if device.backend == "cpu":
        torch = pytest.importorskip("torch")
        outside = torch.from_dlpack(a)
    else:
        outside = consume(a.__dlpack__(max_version=(1, 0)), device)
    cache.free()
    with pytest.raises(ga.FreedArrayError, match="AllocCache was freed"):
        a.get()
    assert quarantined(device) == round_size(8 * N)
    b = ga.full((N,), 7.0, device=device)
    c = ga.full((N,), 8.0, device=device)
    for new in (b, c):
        assert new.storage.ptr != a.storage.ptr
    expected = np.arange(N, dtype=np.float64)
    got = outside.numpy().copy() if hasattr(outside, "numpy") else read(outside)
    np.testing.assert_array_equal(got, expected)
    del outside
    gc.collect()
    assert quarantined(device) == 0
    d = ga.zeros((N,), device=device)  # back to the pool, not to the freed cache
    assert d.storage.ptr == a.storage.ptr
    assert cache.n_free == cache.n_busy == 0


def test_forced_free_of_a_cached_array_with_a_host_view_then_cache_free_returns_the_block(
        device, used):
    kind = host_kind(device)
    baseline = used()
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.zeros((N,), device=device, kind=kind)
    hv = a.host_view()
    a.free(force=True)  # quarantined, its home still the cache
    cache.free()  # the cache lets go of it: its block goes to the pool when hv goes
    assert quarantined(device) == round_size(8 * N)
    del hv
    gc.collect()
    assert quarantined(device) == 0
    assert used() == baseline


def test_trim_after_forced_free_never_frees_a_block_a_host_view_reads(device, faulty):
    kind = host_kind(device)
    a = ga.full((N,), 3.0, device=device, kind=kind)
    ptr = a.storage.ptr
    hv = a.host_view()
    a.free(force=True)
    ga.trim(device)
    # The block may be a piece of a larger platform allocation (a pool segment): what matters
    # is that no platform free covers it while the view reads it.
    assert not freed_ranges_covering(faulty, ptr)
    np.testing.assert_array_equal(hv, np.full(N, 3.0))
    del hv
    gc.collect()
    ga.trim(device)
    assert len(freed_ranges_covering(faulty, ptr)) == 1


def freed_ranges_covering(faulty, ptr: int) -> list[tuple[int, int]]:
    """The platform frees (address, size) whose range contains ``ptr``."""
    return [(p, n) for p, n in faulty.freed if p <= ptr < p + max(n, 1)]


def test_ladder_never_hands_out_a_cached_buffer_a_host_view_holds(device):
    kind = host_kind(device)
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.full((N,), 4.0, device=device, kind=kind)
    hv = a.host_view()
    ptr = a.storage.ptr
    del a  # the buffer is busy while hv lives
    gc.collect()
    ga.trim(device)
    stats = ga.memory_stats(device)
    ga.set_memory_limit(stats["reserved_bytes"], device)  # no room: the next needs the ladder
    try:
        # Larger than any free room of a pool segment: only the platform could serve it, so the
        # ladder runs, and it must not take the buffer the view holds.
        with pytest.raises(ga.OutOfMemoryError):
            ga.zeros((4 * 2**20,), device=device, kind=kind)
    finally:
        ga.set_memory_limit(None, device)
    b = ga.zeros((N,), device=device, kind=kind)
    assert b.storage.ptr != ptr
    np.testing.assert_array_equal(hv, np.full(N, 4.0))


def test_quarantine_ends_with_the_last_of_several_outside_handles(device):
    kind = host_kind(device)
    a = ga.ones((N,), device=device, kind=kind)
    views = [a.host_view(), np.asarray(a[10:])]
    capsule = a.__dlpack__(max_version=(1, 0))
    assert a.storage.refcount == 4
    a.free(force=True)
    for _ in range(len(views)):
        assert quarantined(device) == round_size(8 * N)
        views.pop()
        gc.collect()
    assert quarantined(device) == round_size(8 * N)
    del capsule
    gc.collect()
    assert quarantined(device) == 0


def test_forced_free_of_an_owned_wrap_with_a_host_view_defers_the_free(device, faulty):
    kind = host_kind(device)
    ptr = device.impl.allocate(device.index, kind, 4096)
    a = ga.unsafe_wrap(ptr, (512,), np.float64, device=device, kind=kind, own=True)
    hv = a.host_view()
    a.free(force=True)
    assert ptr not in [p for p, _ in faulty.freed]
    hv[:] = 1.0
    del hv
    gc.collect()
    assert [p for p, _ in faulty.freed] == [ptr]


def test_reset_with_outside_handles_warns_once_with_how_many(device):
    kind = host_kind(device)
    a = ga.full((N,), 6.0, device=device, kind=kind)
    hv = a.host_view()
    capsule = a.__dlpack__(max_version=(1, 0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ga.device_reset(device)
    mine = [w for w in caught if issubclass(w.category, ga.GPUArraysWarning)]
    assert len(mine) == 1
    assert "2 NumPy host view(s) or DLPack capsule(s)" in str(mine[0].message)
    assert str(device) in str(mine[0].message)
    with pytest.raises(ga.DeviceResetError):
        a.get()
    del hv, capsule
    gc.collect()


def test_reset_keeps_memory_a_host_view_reads_where_it_stays_addressable(device, faulty):
    kind = host_kind(device)
    a = ga.full((N,), 9.0, device=device, kind=kind)
    ptr = a.storage.ptr
    hv = a.host_view()
    if getattr(faulty.real, "detach", None) is None:  # opencl, cuda: the reset frees it
        with pytest.warns(ga.GPUArraysWarning, match="the reset frees the memory"):
            ga.device_reset(device)
        del hv
        gc.collect()
        assert ptr not in [p for p, _ in faulty.freed]  # the platform's reset did it
        return
    with pytest.warns(ga.GPUArraysWarning, match="kept until they are dropped"):
        ga.device_reset(device)
    b = ga.zeros((N,), device=device, kind=kind)
    assert disjoint(hv, b)
    np.testing.assert_array_equal(hv, np.full(N, 9.0))
    assert ptr not in [p for p, _ in faulty.freed]
    del a
    gc.collect()
    assert ptr not in [p for p, _ in faulty.freed]
    del hv
    gc.collect()
    assert [p for p, _ in faulty.freed].count(ptr) == 1  # freed once, when the view went


def test_from_dlpack_of_our_capsule_exported_before_a_reset_raises_device_reset_error(device):
    a = ga.zeros((N,), device=device)
    capsule = a.__dlpack__(max_version=(1, 0))
    with pytest.warns(ga.GPUArraysWarning, match="1 NumPy host view"):
        ga.device_reset(device)
    with pytest.raises(ga.DeviceResetError, match="was reset"):
        ga.from_dlpack(capsule)
    gc.collect()
    assert quarantined(device) == 0


def test_reset_keeps_the_segment_of_held_pieces_and_frees_it_once(device, faulty):
    # Regression: the reset kept (and later freed) each held block by its own address; with
    # blocks carved from pool segments that freed a pointer inside a segment (the process
    # aborted in free()) and left the segment's base to the reset.
    kind = host_kind(device)
    ga.trim(device)
    first = ga.full((N,), 1.0, device=device, kind=kind)
    second = ga.full((N,), 2.0, device=device, kind=kind)
    base, size = device.memory.segment_of(kind, second.storage.ptr)
    assert base <= second.storage.ptr < base + size
    views = [first.host_view(), second.host_view()]
    with pytest.warns(ga.GPUArraysWarning, match="2 NumPy host view"):
        ga.device_reset(device)
    if getattr(faulty.real, "detach", None) is None:  # opencl, cuda: the reset frees it
        del views, first, second
        gc.collect()
        return
    del first, second  # arrays from before the reset hold handles until they go
    np.testing.assert_array_equal(views[1], np.full(N, 2.0))
    views.pop()
    gc.collect()
    assert not freed_ranges_covering(faulty, base)  # the first block still uses the segment
    np.testing.assert_array_equal(views[0], np.full(N, 1.0))
    views.pop()
    gc.collect()
    assert [p for p, _ in faulty.freed].count(base) == 1
