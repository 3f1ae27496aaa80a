"""Allocation caches that never alias, on every device.

The scenarios of GPUArrays.jl's cache tests, plus the non-aliasing promise:
a cached buffer is handed out again only when no live array uses it.
Addresses (``storage.ptr``) are real, so "the same buffer" and "no aliasing"
are checked on them; data is checked with NumPy.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
import weakref

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._memory.pool import LADDER_STEPS

KiB = 1024
MiB = 1024 * KiB
IN_USE = "cannot free an AllocCache that is in active use"
CACHE_FREED = "its AllocCache was freed"


def u8(n: int, device, **kw) -> ga.GPUArray:
    return ga.empty(n, dtype=np.uint8, device=device, **kw)


def ptr(a: ga.GPUArray) -> int:
    return a.storage.ptr


def counts(cache: ga.AllocCache) -> tuple[int, int, int, int]:
    return cache.n_free, cache.n_busy, cache.hits, cache.misses


@pytest.fixture
def trimmed(device):
    gc.collect()
    ga.trim(device)
    return device


# the basic scenarios ---------------------------------------------------------------------------
def test_first_allocation_populates_the_cache(device, used):
    base = used()
    cache = ga.AllocCache()
    assert counts(cache) == (0, 0, 0, 0) and cache.nbytes == 0
    with ga.cached(cache):
        a = ga.zeros((10, 10), np.float32, device=device)
        assert counts(cache) == (0, 1, 0, 1)
        assert cache.nbytes == 400
    assert a.get().sum() == 0 and a.shape == (10, 10) and a.dtype == np.float32
    del a
    assert counts(cache) == (1, 0, 0, 1)
    assert used() > base  # the buffer stays in the cache, not in the pool
    cache.free()
    assert used() == base


def test_second_identical_allocation_reuses_the_buffer(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.empty((10, 10), np.float32, device=device)
        p = ptr(a)
        del a
    with ga.cached(cache):
        b = ga.ones((10, 10), np.float32, device=device)
        assert ptr(b) == p
        assert counts(cache) == (0, 1, 1, 1)
        assert np.all(b.get() == 1)
    del b
    cache.free()


def test_same_byte_size_with_other_shape_or_dtype_reuses(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.empty((10, 10), np.float32, device=device)  # 400 bytes
        p = ptr(a)
        del a
        for shape, dtype in [((100,), np.int32), ((5, 10), np.int64), ((400,), np.uint8),
                             ((2, 5, 5), np.complex64)]:
            b = ga.full(shape, 3, dtype, device=device)
            assert ptr(b) == p
            assert b.shape == shape and b.dtype == np.dtype(dtype)  # what was asked for
            assert np.all(b.get() == 3)
            del b
    assert counts(cache) == (1, 0, 4, 1)
    cache.free()


def test_another_size_adds_a_second_buffer(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.empty(100, np.float32, device=device)
        del a
        b = ga.empty(101, np.float32, device=device)
        del b
        c = ga.empty(100, np.float32, device=device)  # served by the first buffer again
        del c
    assert counts(cache) == (2, 0, 1, 2)
    assert cache.nbytes == 400 + 404
    cache.free()


def test_buffers_are_keyed_by_kind_and_device(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        ptrs = set()
        for kind in device.kinds:
            a = u8(1000, device, kind=kind)
            assert a.kind == kind
            ptrs.add(ptr(a))
            del a
        assert cache.misses == len(device.kinds) and len(ptrs) == len(device.kinds)
        for kind in device.kinds:  # each kind finds its own buffer again
            a = u8(1000, device, kind=kind)
            assert a.kind == kind
            del a
        assert cache.hits == len(device.kinds)
        others = [d for d in ga.devices() if d != device]
        for other in others:
            b = u8(1000, other)
            assert b.device == other and ptr(b) not in ptrs
            del b
    assert cache.misses == len(device.kinds) + len(others)
    cache.free()


def test_zero_size_arrays_do_not_touch_the_cache(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.empty((0, 5), device=device)
        assert a.size == 0 and a.get().shape == (0, 5)
    assert counts(cache) == (0, 0, 0, 0)


def test_uncached_inside_a_scope_allocates_from_the_pool(device, used):
    cache = ga.AllocCache()
    base = used()
    with ga.cached(cache):
        with ga.uncached():
            a = ga.full(1000, 5, np.int32, device=device)
            assert ga.memory_stats(device)["used_bytes"] > base
        assert counts(cache) == (0, 0, 0, 0)
        b = ga.empty(1000, np.int32, device=device)  # cached again after the inner block
        assert counts(cache) == (0, 1, 0, 1)
        assert ptr(b) != ptr(a)
    assert np.all(a.get() == 5)
    del a
    assert cache.n_busy == 1 and cache.n_free == 0  # a went to the pool, not to the cache
    del b
    cache.free()
    assert used() == base


def test_exception_inside_the_scope_propagates_and_closes_it(device):
    cache = ga.AllocCache()

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with ga.cached(cache):
            a = ga.empty(100, device=device)
            raise Boom
    assert cache.misses == 1
    b = ga.empty(100, device=device)  # outside any scope: the pool serves it
    assert counts(cache) == (0, 1, 0, 1)
    cache.free()  # no scope is active any more
    assert a.is_freed and not b.is_freed
    with pytest.raises(ga.FreedArrayError, match=CACHE_FREED):
        a.get()


def test_nested_scopes_of_one_cache(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.full(64, 1, np.int32, device=device)
        with ga.cached(cache):
            b = ga.full(64, 2, np.int32, device=device)
            with pytest.raises(ga.CacheInUseError, match=IN_USE):
                cache.free()
        assert ptr(a) != ptr(b)
        with pytest.raises(ga.CacheInUseError, match=IN_USE):
            cache.free()  # the outer block is still open
        c = ga.full(64, 3, np.int32, device=device)
        assert len({ptr(a), ptr(b), ptr(c)}) == 3
    assert cache.misses == 3 and cache.n_busy == 3
    assert [x.get()[0] for x in (a, b, c)] == [1, 2, 3]
    del a, b, c
    cache.free()
    assert counts(cache)[:2] == (0, 0)


def test_nested_scopes_the_innermost_cache_wins(device):
    outer, inner = ga.AllocCache(), ga.AllocCache()
    with ga.cached(outer):
        a = u8(100, device)
        with ga.cached(inner):
            b = u8(100, device)
            with ga.cached(outer):
                c = u8(100, device)
            d = u8(100, device)
        e = u8(100, device)
    assert outer.misses == 3 and inner.misses == 2
    del a, b, c, d, e
    outer.free()
    inner.free()


def test_cached_rejects_what_is_not_a_cache():
    with pytest.raises(TypeError, match="AllocCache"):
        with ga.cached(object()):
            pass


# cache.free() -------------------------------------------------------------------------------
def test_free_inside_an_active_scope_raises_cache_in_use(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.full(10, 4.0, device=device)
        with pytest.raises(ga.CacheInUseError, match=IN_USE) as info:
            cache.free()
        assert isinstance(info.value, RuntimeError) and isinstance(info.value, ga.GPUArraysError)
        assert np.all(a.get() == 4.0)  # nothing was freed
        assert counts(cache) == (0, 1, 0, 1)
    del a
    cache.free()


def test_free_while_a_scope_is_active_in_another_thread_raises(device):
    cache = ga.AllocCache()
    entered, leave = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with ga.cached(cache):
                a = ga.full(100, 9, np.int16, device=device)
                entered.set()
                leave.wait(20)
                assert np.all(a.get() == 9)
        except BaseException as e:
            errors.append(e)
            entered.set()

    t = threading.Thread(target=worker, daemon=True)
    t.start()
    assert entered.wait(20)
    try:
        with pytest.raises(ga.CacheInUseError, match=IN_USE):
            cache.free()
    finally:
        leave.set()
        t.join(20)
    assert not t.is_alive() and not errors
    assert counts(cache) == (1, 0, 0, 1)
    cache.free()
    assert counts(cache)[:2] == (0, 0)


def test_free_while_a_scope_is_active_in_another_task_raises(device):
    cache = ga.AllocCache()

    async def holder(entered: asyncio.Event, leave: asyncio.Event) -> int:
        with ga.cached(cache):
            a = u8(256, device)
            entered.set()
            await leave.wait()
            return ptr(a)

    async def main() -> None:
        entered, leave = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(holder(entered, leave))
        await entered.wait()
        with pytest.raises(ga.CacheInUseError, match=IN_USE):
            cache.free()
        leave.set()
        await task
        cache.free()

    asyncio.run(main())
    assert counts(cache)[:2] == (0, 0)


def test_free_releases_everything_and_frees_live_arrays(device, used):
    base = used()
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.arange(100, dtype=np.int32, device=device)
        v = a[10:20]
        r = a.reshape(10, 10).T
        dead = u8(3000, device)
        del dead
    assert counts(cache) == (1, 1, 0, 2)
    cache.free()
    assert counts(cache) == (0, 0, 0, 2) and cache.nbytes == 0
    assert used() == base  # even a's buffer, though a is alive
    for x in (a, v, r):
        assert x.is_freed
        with pytest.raises(ga.FreedArrayError, match=CACHE_FREED) as info:
            x.get()
        assert "Attempt to use a freed array" in str(info.value)
        assert not isinstance(info.value, ga.DeviceResetError)
        with pytest.raises(ga.FreedArrayError, match=CACHE_FREED):
            x[0]
    # metadata keeps working
    assert a.shape == (100,) and a.dtype == np.int32 and v.offset == 40 and r.shape == (10, 10)
    assert "freed" in repr(a) and a.storage.is_freed and a.device == device
    # the late death of the arrays must not give their buffer back a second time
    n = a.nbytes
    del a, v, r
    gc.collect()
    assert used() == base
    b, c = u8(n, device), u8(n, device)
    assert ptr(b) != ptr(c)
    del b, c
    assert used() == base


def test_cache_is_usable_after_free(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        u8(500, device).free()
    cache.free()
    with ga.cached(cache):
        a = ga.full(500, 1, np.uint8, device=device)
        assert np.all(a.get() == 1)
    assert counts(cache) == (0, 1, 0, 2)
    del a
    cache.free()


# never aliasing ----------------------------------------------------------------------------------
def test_escaped_arrays_keep_distinct_buffers_and_their_data(device):
    cache = ga.AllocCache()
    kept = []
    for i in range(5):
        with ga.cached(cache):
            tmp = ga.full(1000, -1, np.int32, device=device)  # dies inside: its buffer is reused
            a = ga.full(1000, i, np.int32, device=device)
            view = ga.full((10, 100), 100 + i, np.int32, device=device)[2:5]  # base dropped
            kept.append((i, a, view))
            del tmp, a, view
    ptrs = [ptr(x) for _, a, v in kept for x in (a, v)]
    assert len(set(ptrs)) == len(ptrs) == 10
    for i, a, v in kept:
        assert np.all(a.get() == i)
        assert np.all(v.get() == 100 + i) and v.shape == (3, 100)
    assert cache.n_busy == 10 and cache.n_free == 1  # the temporaries' one buffer
    assert cache.hits == 4 and cache.misses == 11
    del a, v  # the loop variables
    kept.clear()
    assert cache.n_busy == 0 and cache.n_free == 11
    cache.free()


def test_host_view_keeps_the_buffer_busy(device):
    kind = "host" if "host" in device.kinds else None
    if kind is None:
        pytest.skip(f"{device} has no host memory kind")
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.full(64, 7, np.int64, device=device, kind=kind)
        h = a.host_view()
        del a  # only the NumPy view still uses the buffer
        b = ga.full(64, 8, np.int64, device=device, kind=kind)
        assert ptr(b) != h.__array_interface__["data"][0]
        assert np.all(h == 7)
        del h
        c = ga.full(64, 9, np.int64, device=device, kind=kind)
        assert cache.hits == 1
        assert np.all(b.get() == 8) and np.all(c.get() == 9)
    del b, c
    cache.free()


@pytest.mark.parametrize("inside", [True, False], ids=["inside", "outside"])
def test_free_makes_the_buffer_reusable_at_once(device, inside):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.full(300, 1.5, np.float32, device=device)
        p = ptr(a)
        if inside:
            a.free()
    if not inside:
        a.free()
    assert a.is_freed and cache.n_free == 1
    with ga.cached(cache):
        b = ga.full(300, 2.5, np.float32, device=device)
    assert ptr(b) == p and cache.hits == 1
    assert np.all(b.get() == 2.5)
    with pytest.raises(ga.FreedArrayError):
        a.get()
    del b
    cache.free()


def test_free_with_a_sharer_alive_keeps_the_buffer_busy(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.arange(300, dtype=np.float32, device=device)
        v = a[::3]
        a.free()
        b = ga.zeros(300, np.float32, device=device)
        assert ptr(b) != ptr(v)
        assert np.array_equal(v.get(), np.arange(300, dtype=np.float32)[::3])
        v.free()
        c = ga.zeros(300, np.float32, device=device)
        assert ptr(c) == ptr(v)
    del b, c
    cache.free()


def test_forced_free_gives_the_buffer_back_to_the_cache(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.arange(64, dtype=np.int64, device=device)
        v, w = a[1:], a.reshape(8, 8)
        a.free(force=True)
        for x in (a, v, w):
            with pytest.raises(ga.FreedArrayError, match="forced free"):
                x.get()
        assert cache.n_free == 1 and cache.n_busy == 0
        b = ga.full(64, 3, np.int64, device=device)
        assert ptr(b) == ptr(a) and np.all(b.get() == 3)
        del v, w, a  # late deaths of the freed sharers change nothing
        assert cache.n_busy == 1 and cache.n_free == 0
        c = ga.zeros(64, np.int64, device=device)
        assert ptr(c) != ptr(b)
    del b, c
    cache.free()


# threads and tasks ------------------------------------------------------------------------------
def test_two_threads_with_separate_scopes(device):
    caches = [ga.AllocCache(), ga.AllocCache()]
    barrier = threading.Barrier(2, timeout=20)
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            with ga.cached(caches[k]):
                barrier.wait()  # both scopes open at once
                arrays = [ga.full(200 + k, k * 10 + j, np.int32, device=device)
                          for j in range(3)]
                barrier.wait()
                results[k] = [(ptr(a), a.get()) for a in arrays]
                del arrays
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and not any(t.is_alive() for t in threads)
    for k in range(2):
        assert caches[k].misses == 3 and caches[k].n_free == 3 and caches[k].n_busy == 0
        assert caches[k].nbytes == 3 * 4 * (200 + k)
        for j, (_, values) in enumerate(results[k]):
            assert np.all(values == k * 10 + j)
    ptrs = [p for k in range(2) for p, _ in results[k]]
    assert len(set(ptrs)) == 6
    for c in caches:
        c.free()


def test_two_asyncio_tasks_with_separate_scopes(device):
    caches = [ga.AllocCache(), ga.AllocCache()]
    outside = ga.AllocCache()

    async def task(k: int) -> list:
        with ga.cached(caches[k]):
            out = []
            for j in range(4):
                a = ga.full(128, k * 100 + j, np.int64, device=device)
                await asyncio.sleep(0)  # the other task runs inside its own scope
                out.append(a)
            with ga.uncached():
                await asyncio.sleep(0)
                tmp = u8(64, device)
            del tmp
            return out

    async def main() -> list:
        with ga.cached(outside):
            return await asyncio.gather(task(0), task(1))

    r0, r1 = asyncio.run(main())
    assert caches[0].misses == 4 and caches[1].misses == 4 and counts(outside) == (0, 0, 0, 0)
    assert [int(a.get()[0]) for a in r0] == [0, 1, 2, 3]
    assert [int(a.get()[0]) for a in r1] == [100, 101, 102, 103]
    assert len({ptr(a) for a in r0 + r1}) == 8
    del r0, r1
    for c in caches:
        assert c.n_busy == 0 and c.n_free == 4
        c.free()


def test_one_cache_shared_by_threads_stays_consistent_and_never_aliases(device):
    cache = ga.AllocCache()
    sizes = (256, 512, 1000)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        rng = np.random.default_rng(k)
        live: list[tuple[ga.GPUArray, int]] = []
        try:
            with ga.cached(cache):
                for it in range(60):
                    n = int(rng.choice(sizes))
                    value = k * 1000 + it
                    live.append((ga.full(n, value, np.int32, device=device), value))
                    if len(live) > 4:
                        live.pop(int(rng.integers(len(live))))
                    for a, v in live:
                        got = a.get()
                        if not np.all(got == v):
                            raise AssertionError(f"thread {k}: buffer of value {v} overwritten")
                    if it % 7 == 0:
                        gc.collect()
            del live
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    gc.collect()
    assert cache.n_busy == 0
    assert cache.n_free == cache.misses  # every buffer ever made is back, none lost or doubled
    assert cache.hits + cache.misses == 4 * 60
    cache.free()


# loops -------------------------------------------------------------------------------------------
def test_loop_reaches_zero_allocations_after_the_first_iteration(device):
    cache = ga.AllocCache()
    per_iteration = []
    for i in range(100):
        with ga.record_allocations() as rec, ga.cached(cache):
            x = ga.full((16, 16), i, np.float32, device=device)
            y = x.T.copy()
            z = y.astype(np.int32)
            w = z[::2, 1:].copy()
            assert int(w[0, 0]) == i
            del x, y, z, w
        per_iteration.append((rec.count, rec.cache_hits))
    assert per_iteration[0][0] > 0
    assert all(count == 0 for count, _ in per_iteration[1:])
    assert all(hits > 0 for _, hits in per_iteration[1:])
    assert cache.hits > 0 and cache.n_busy == 0
    assert cache.misses == per_iteration[0][0]
    cache.free()


def test_loop_rebinding_a_name_keeps_two_buffers_per_site(device):
    """PITFALLS: ``x = f(...)`` keeps last iteration's x alive while the new one is made."""
    cache = ga.AllocCache()
    allocations = []
    x = None
    for i in range(20):
        with ga.record_allocations() as rec, ga.cached(cache):
            x = ga.full(100, i, np.int16, device=device)
        allocations.append(rec.count)
        assert np.all(x.get() == i)
    assert allocations[:2] == [1, 1] and all(n == 0 for n in allocations[2:])
    assert cache.misses == 2 and cache.n_busy == 1 and cache.n_free == 1
    del x
    cache.free()


# memory pressure, statistics, garbage collection ----------------------------------------------
def test_ladder_takes_unreferenced_cached_buffers(device, trimmed):
    base = ga.memory_stats(device)["reserved_bytes"]
    ga.set_memory_limit(base + 64 * KiB, device)
    cache = ga.AllocCache()
    with ga.cached(cache):
        keep = ga.full(16 * KiB, 7, np.uint8, device=device)
        for n in (16, 15, 14):
            u8(n * KiB, device).free()
    assert cache.n_free == 3 and cache.n_busy == 1
    before = ga.memory_stats(device)
    assert before["cache_held_bytes"] == (16 + 16 + 15 + 14) * KiB
    a = ga.full(40 * KiB, 1, np.uint8, device=device)  # needs the cache's free buffers
    after = ga.memory_stats(device)
    assert after["oom_last_step"] == "release unreferenced cached buffers" == LADDER_STEPS[-1]
    assert cache.n_free == 0 and cache.n_busy == 1
    assert after["cache_held_bytes"] == 16 * KiB
    assert np.all(keep.get() == 7) and np.all(a.get() == 1)
    assert after["reserved_bytes"] <= base + 64 * KiB
    a.free()
    keep.free()
    cache.free()


def test_ladder_inside_a_scope_takes_the_scopes_own_unused_buffers(device, trimmed):
    base = ga.memory_stats(device)["reserved_bytes"]
    ga.set_memory_limit(base + 48 * KiB, device)
    cache = ga.AllocCache()
    with ga.cached(cache):
        for n in (16, 15, 14):
            u8(n * KiB, device).free()
        a = ga.full(40 * KiB, 2, np.uint8, device=device)  # a miss needing the others' memory
        assert ga.memory_stats(device)["oom_last_step"] == "release unreferenced cached buffers"
        assert np.all(a.get() == 2)
        assert cache.n_free == 0 and cache.n_busy == 1
        with pytest.raises(ga.OutOfMemoryError) as info:
            u8(40 * KiB, device)  # a is alive: its buffer is not taken
        assert "40.0 KiB" in str(info.value)
        assert np.all(a.get() == 2)
    del a
    cache.free()


def test_garbage_collected_cache_gives_its_buffers_back(device, used):
    base = used()
    cache = ga.AllocCache()
    with ga.cached(cache):
        for n in (1000, 2000, 3000):
            u8(n, device).free()
    assert used() > base
    ref = weakref.ref(cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del cache
        gc.collect()
    assert ref() is None
    assert used() == base


def test_cache_in_a_reference_cycle_is_collected_without_warnings(device, used):
    base = used()
    cache = ga.AllocCache()
    with ga.cached(cache):
        u8(4096, device).free()
    cycle: list = [cache]
    cycle.append(cycle)
    ref = weakref.ref(cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del cache, cycle
        gc.collect()
    assert ref() is None and used() == base


def test_a_live_cached_array_keeps_its_cache_alive(device, used):
    base = used()
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.full(100, 6, np.int32, device=device)
        u8(5000, device).free()
    ref = weakref.ref(cache)
    del cache
    gc.collect()
    assert ref() is not None  # a's storage holds it
    assert np.all(a.get() == 6)
    del a
    gc.collect()
    assert ref() is None and used() == base


def test_stats_and_repr(device):
    cache = ga.AllocCache()
    assert repr(cache) == "AllocCache(n_free=0, n_busy=0, nbytes=0 B)"
    with ga.cached(cache):
        a = u8(4 * MiB, device)
        b = ga.empty((1024, 512), np.float64, device=device)  # also 4 MiB
        assert repr(cache) == "AllocCache(n_free=0, n_busy=2, nbytes=8.0 MiB)"
        del a, b
    assert repr(cache) == "AllocCache(n_free=2, n_busy=0, nbytes=8.0 MiB)"
    assert (cache.n_free, cache.n_busy, cache.hits, cache.misses) == (2, 0, 0, 2)
    assert cache.nbytes == 8 * MiB
    with ga.cached(cache):
        c = ga.empty(2 * MiB, np.uint16, device=device)
        d = u8(1000, device)  # nbytes counts the requested size, not the pool block
        assert (cache.n_free, cache.n_busy, cache.hits, cache.misses) == (1, 2, 1, 3)
        assert cache.nbytes == 8 * MiB + 1000
    del c, d
    cache.free()
    assert repr(cache) == "AllocCache(n_free=0, n_busy=0, nbytes=0 B)"
    assert (cache.hits, cache.misses) == (1, 3)  # counters survive free()


def test_record_allocations_counts_cache_hits_separately(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        u8(2048, device).free()
    hits_before = ga.memory_stats(device)["cache_hits"]
    with ga.record_allocations() as rec, ga.cached(cache):
        a = u8(2048, device)  # hit
        b = u8(3000, device)  # miss: a real allocation
        a.free()
        c = u8(2048, device)  # hit again
    assert rec.count == 1 and rec.bytes == 3072  # one pool block of 3000 B rounded up
    assert rec.cache_hits == 2
    assert ga.memory_stats(device)["cache_hits"] - hits_before == 2
    assert cache.hits == 2 and cache.misses == 2
    del b, c
    cache.free()


def test_memory_stats_report_what_caches_hold(device, used):
    base_stats = ga.memory_stats(device)
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = u8(1024, device)
        u8(2048, device).free()
    s = ga.memory_stats(device)
    assert s["cache_held_bytes"] - base_stats["cache_held_bytes"] == 3072
    assert s["cache_buffers_busy"] - base_stats["cache_buffers_busy"] == 1
    assert s["cache_buffers_free"] - base_stats["cache_buffers_free"] == 1
    assert s["used_bytes"] - base_stats["used_bytes"] == 3072  # cached buffers count as used
    del a
    cache.free()
    assert ga.memory_stats(device)["cache_held_bytes"] == base_stats["cache_held_bytes"]
