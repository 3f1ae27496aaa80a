"""Device reset, on every device.

The regression at the heart of it: after a reset the platform hands the same
addresses out again (the cpu back-end really frees its allocations, so the C
allocator reuses them), and the finalizers of arrays from before the reset
must never give that memory back to anyone.  Every fresh array is filled with
its own values and checked, and no address range is live twice.
"""

from __future__ import annotations

import gc
import json
import threading
import warnings

import numpy as np
import pytest
from faults import inject

import gpuarrays as ga
from gpuarrays._memory.pins import pin_count

RESET = "was reset"
SIZES = [64, 100, 512, 1000, 2048, 4096, 8000, 16384]


def fill_distinct(arrays: list[ga.GPUArray], start: int) -> list[int]:
    values = []
    for i, a in enumerate(arrays):
        v = start + i
        a.fill(v)
        values.append(v)
    return values


def check_intact(arrays, values) -> None:
    for a, v in zip(arrays, values, strict=True):
        got = a.get()
        assert np.all(got == v), f"array of value {v} at 0x{a.storage.ptr:x} was overwritten"


def check_no_overlap(arrays) -> None:
    ranges = sorted((a.storage.ptr, a.storage.ptr + a.storage.nbytes) for a in arrays
                    if a.storage.nbytes)
    for (s0, e0), (s1, e1) in zip(ranges, ranges[1:], strict=False):
        assert e0 <= s1, f"two live arrays share memory: [{s0:x}, {e0:x}) and [{s1:x}, {e1:x})"


def make(device, repeat: int = 3) -> list[ga.GPUArray]:
    return [ga.empty(n // 4, np.int32, device=device) for _ in range(repeat) for n in SIZES]


# the regression ------------------------------------------------------------------------------
def test_stale_finalizers_never_free_reused_addresses(device):
    stale = make(device)
    stale_values = fill_distinct(stale, 1)
    views = [a[1:] for a in stale[::3]]
    stale_spans = [(a.storage.ptr, a.storage.ptr + a.nbytes) for a in stale]
    for _ in range(5):
        ga.device_reset(device)
        fresh = make(device)
        reused = [a for a in fresh if any(lo < a.storage.ptr + a.nbytes and a.storage.ptr < hi
                                          for lo, hi in stale_spans)]
        if reused or device.backend != "cpu":
            break
        # Segments are large enough for the C allocator to map them anew at other addresses
        # now and then: reset again (these arrays become stale too) until memory is reused.
        stale += fresh
        stale_spans += [(a.storage.ptr, a.storage.ptr + a.nbytes) for a in fresh]
    fresh_values = fill_distinct(fresh, 10_000)
    if device.backend == "cpu":
        # The point of the test: the platform handed the same memory out again (the pool
        # carves both generations from platform segments, so compare ranges, not addresses).
        assert reused, "the C allocator reused no memory; the test proves nothing"
    del stale, views
    gc.collect()  # stale finalizers run now, on addresses fresh arrays own
    more = make(device)
    more_values = fill_distinct(more, 20_000)
    live = fresh + more
    check_no_overlap(live)
    check_intact(fresh, fresh_values)
    check_intact(more, more_values)
    assert len(stale_values) == len(fresh_values)
    # freeing and reallocating in the new epoch still never aliases
    for a in fresh[::2]:
        a.free()
    again = make(device, repeat=1)
    again_values = fill_distinct(again, 30_000)
    live = fresh[1::2] + more + again
    check_no_overlap(live)
    check_intact(fresh[1::2], fresh_values[1::2])
    check_intact(again, again_values)


def test_stale_arrays_never_reach_the_backend_or_the_pool(device):
    stale = make(device)
    pooled = [ga.empty(n, np.uint8, device=device) for n in (700, 3000)]
    del pooled  # blocks in the pool
    with inject(device) as fb:
        ga.device_reset(device)
        s = ga.memory_stats(device)
        assert s["used_bytes"] == 0 and s["reserved_bytes"] == 0 and s["pool_free_blocks"] == 0
        assert fb.calls["reset"] == 1
        del stale
        gc.collect()
        ga.trim(device)
        assert fb.calls["free"] == 0  # nothing from before the reset is freed by gpuarrays
        assert ga.memory_stats(device)["pool_free_blocks"] == 0  # nor put back in a pool


def test_stale_free_while_the_pool_lock_is_held(device):
    stale = [ga.full(256, 1, np.int32, device=device) for _ in range(8)]
    ga.device_reset(device)
    fresh = [ga.full(256, 100 + i, np.int32, device=device) for i in range(8)]
    with device.memory.lock:  # as if an allocation were running on this thread
        del stale
        gc.collect()
    assert device.memory.pending == []  # stale frees are dropped, not queued
    more = [ga.full(256, 200 + i, np.int32, device=device) for i in range(8)]
    check_no_overlap(fresh + more)
    check_intact(fresh + more, [100 + i for i in range(8)] + [200 + i for i in range(8)])


def test_free_queued_before_a_reset_is_never_applied_after_it(device):
    a = ga.full(300, 3, np.int32, device=device)
    with device.memory.lock:
        del a  # queued: the lock is busy
        assert len(device.memory.pending) == 1
    ga.device_reset(device)
    b = [ga.full(300, 10 + i, np.int32, device=device) for i in range(4)]
    ga.memory_stats(device)  # applies queued frees, if any were left
    c = [ga.full(300, 20 + i, np.int32, device=device) for i in range(4)]
    check_no_overlap(b + c)
    check_intact(b + c, [10, 11, 12, 13, 20, 21, 22, 23])


# stale arrays ------------------------------------------------------------------------------------
def test_stale_arrays_raise_device_reset_error(device):
    a = ga.arange(24, dtype=np.float32, device=device).reshape(4, 6)
    v = a[1:, ::2]
    t = a.T
    z = ga.empty(0, device=device)
    ga.device_reset(device)
    for x in (a, v, t):
        assert x.is_freed and x.storage.is_freed and x.storage.refcount == 0
        uses = [x.get, lambda x=x: x[0], lambda x=x: x.fill(1), x.copy,
                lambda x=x: x.reshape(-1), lambda x=x: x.astype(np.int32),
                lambda x=x: ga.asarray(x), lambda x=x: x.to_device("cpu:0"),
                lambda x=x: x.view(np.int32), x.tolist]
        for use in uses:
            with pytest.raises(ga.DeviceResetError, match=RESET) as info:
                use()
            assert isinstance(info.value, ga.FreedArrayError)
            assert "Attempt to use a freed array" in str(info.value)
            assert str(device) in str(info.value)
    # metadata keeps working
    assert a.shape == (4, 6) and a.dtype == np.float32 and a.strides == (24, 4)
    assert v.offset == 24 and v.shape == (3, 3) and t.flags.f_contiguous
    assert a.device == device and a.kind == "device" and a.ndim == 2 and a.size == 24
    assert "reset" in repr(a) and "reset" in str(v)
    assert z.is_freed  # even zero-size arrays belong to the old epoch
    # releasing stale arrays is harmless
    v.free()
    t.free(force=True)
    a.free()
    a.free()
    assert ga.memory_stats(device)["used_bytes"] == 0


def test_forced_free_before_reset_keeps_its_reason(device):
    a = ga.zeros(10, device=device)
    b = a[2:]
    a.free(force=True)
    ga.device_reset(device)
    with pytest.raises(ga.FreedArrayError):
        b.get()


def test_device_is_usable_after_reset(device):
    ga.device_reset(device)
    ga.device_reset(device)  # twice in a row, nothing allocated in between
    for kind in device.kinds:
        n = np.arange(50, dtype=np.int64).reshape(5, 10)
        a = ga.asarray(n, device=device, kind=kind)
        np.testing.assert_array_equal(a[::2, 3:].copy().get(), n[::2, 3:])
        np.testing.assert_array_equal(a.astype(np.float32).get(), n.astype(np.float32))
    s = ga.memory_stats(device)
    assert s["generation"] >= 2
    assert s["reserved_bytes"] == s["used_bytes"] + s["pool_cached_bytes"]
    ga.synchronize(device)


def test_reset_of_one_device_leaves_the_others_alone(device):
    others = [d for d in ga.devices() if d != device]
    kept = [ga.full(100, 5, np.int32, device=d) for d in others]
    mine = ga.zeros(10, device=device)
    ga.device_reset(device)
    assert mine.is_freed
    for a in kept:
        assert not a.is_freed and np.all(a.get() == 5)


def test_wrapped_memory_over_a_reset(device):
    n = np.arange(8.0)
    w = ga.unsafe_wrap(n, device=device)
    v = w[2:]
    ga.device_reset(device)
    with pytest.raises(ga.DeviceResetError):
        v.get()
    del w, v
    gc.collect()
    assert pin_count(device) == {}  # the platform dropped the registrations
    np.testing.assert_array_equal(n, np.arange(8.0))  # the host memory is untouched
    w2 = ga.unsafe_wrap(n, device=device)
    np.testing.assert_array_equal(w2.get(), n)
    del w2
    gc.collect()
    assert pin_count(device) == {}


def test_owned_wrap_is_not_freed_after_reset(device):
    ptr = device.impl.allocate(device.index, "device", 256)
    a = ga.unsafe_wrap(ptr, (32,), device=device, own=True)
    with inject(device) as fb:
        ga.device_reset(device)  # the platform freed ptr
        del a
        gc.collect()
        assert fb.calls["free"] == 0


# hooks -----------------------------------------------------------------------------------------
def test_reset_hooks_are_called_newest_first_with_the_device(device):
    calls = []
    unregister = [ga.register_reset_hook(lambda d, i=i: calls.append((i, d))) for i in range(3)]
    try:
        seen_alive = []

        def check(d) -> None:
            seen_alive.append(not a.is_freed)  # hooks run before storages are invalidated

        a = ga.zeros(4, device=device)
        unregister.append(ga.register_reset_hook(check))
        ga.device_reset(device)
        assert calls == [(2, device), (1, device), (0, device)]
        assert all(d is device for _, d in calls)
        assert seen_alive == [True] and a.is_freed
        unregister[1]()
        unregister[1]()  # idempotent
        calls.clear()
        ga.device_reset(device)
        assert [i for i, _ in calls] == [2, 0]
    finally:
        for u in unregister:
            u()
    calls.clear()
    ga.device_reset(device)
    assert calls == []


def test_same_function_registered_twice_is_called_twice(device):
    calls = []

    def hook(d) -> None:
        calls.append(d)

    u1 = ga.register_reset_hook(hook)
    u2 = ga.register_reset_hook(hook)
    try:
        ga.device_reset(device)
        assert calls == [device, device]
        u1()
        ga.device_reset(device)
        assert calls == [device] * 3
    finally:
        u1()
        u2()


def test_failing_hook_warns_and_the_reset_continues(device):
    calls = []

    def bad(d) -> None:
        raise RuntimeError("hook exploded")

    u1 = ga.register_reset_hook(calls.append)
    u2 = ga.register_reset_hook(bad)
    try:
        a = ga.zeros(4, device=device)
        with pytest.warns(ga.GPUArraysWarning, match="hook exploded"):
            ga.device_reset(device)
        assert calls == [device]  # the older hook still ran
        assert a.is_freed
        with pytest.raises(ga.DeviceResetError):
            a.get()
        np.testing.assert_array_equal(ga.ones(3, device=device).get(), np.ones(3))
    finally:
        u2()
        u1()


def test_register_reset_hook_rejects_non_callables():
    with pytest.raises(TypeError):
        ga.register_reset_hook(42)


def test_failing_synchronize_warns_and_the_reset_continues(device):
    a = ga.zeros(4, device=device)
    with inject(device) as fb:
        fb.fail("synchronize")
        with pytest.warns(ga.GPUArraysWarning, match="synchronize"):
            ga.device_reset(device)
        assert fb.calls["reset"] == 1
    assert a.is_freed
    np.testing.assert_array_equal(ga.full(3, 2.0, device=device).get(), [2.0] * 3)


# caches and history ------------------------------------------------------------------------------
def test_reset_with_caches(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        busy = ga.full(500, 1, np.int32, device=device)
        for n in (100, 200, 300):
            ga.empty(n, np.int32, device=device).free()
    assert cache.n_free == 3 and cache.n_busy == 1
    ga.device_reset(device)
    assert cache.n_free == 0 and cache.n_busy == 0 and cache.nbytes == 0
    with pytest.raises(ga.DeviceResetError):
        busy.get()
    misses = cache.misses
    with ga.cached(cache):
        fresh = [ga.full(n, 10 + i, np.int32, device=device)
                 for i, n in enumerate((100, 200, 300, 500))]
    assert cache.misses == misses + 4 and cache.n_busy == 4  # no stale buffer was handed out
    del busy  # its release does not bring the stale buffer back
    gc.collect()
    assert cache.n_free == 0
    check_no_overlap(fresh)
    check_intact(fresh, [10, 11, 12, 13])
    del fresh
    assert cache.n_free == 4
    with ga.cached(cache):
        again = ga.full(100, 7, np.int32, device=device)
    assert cache.hits >= 1 and np.all(again.get() == 7)
    del again
    cache.free()


def test_reset_inside_an_active_cached_block(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.full(64, 1, np.int64, device=device)
        ga.empty(64, np.int64, device=device).free()
        ga.device_reset(device)
        b = ga.full(64, 2, np.int64, device=device)
        c = ga.full(64, 3, np.int64, device=device)
        assert a.is_freed
        del a
        d = ga.full(64, 4, np.int64, device=device)
        check_no_overlap([b, c, d])
        check_intact([b, c, d], [2, 3, 4])
    del b, c, d
    cache.free()


def test_cache_free_after_reset_with_stale_busy_arrays(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.full(64, 1, np.int64, device=device)
    ga.device_reset(device)
    fresh = [ga.full(64, 50 + i, np.int64, device=device) for i in range(4)]
    with inject(device) as fb:
        cache.free()
        ga.trim(device)
        assert fb.calls["free"] == 0  # the pool got nothing stale to give back
    with pytest.raises(ga.DeviceResetError):
        a.get()
    check_intact(fresh, [50, 51, 52, 53])


def test_garbage_collected_cache_after_reset(device):
    cache = ga.AllocCache()
    with ga.cached(cache):
        ga.empty(256, device=device).free()
    ga.device_reset(device)
    fresh = [ga.full(256, i, device=device) for i in range(4)]
    before = ga.memory_stats(device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del cache
        gc.collect()
    after = ga.memory_stats(device)
    assert after["pool_free_blocks"] == before["pool_free_blocks"]  # nothing stale came back
    assert after["pool_cached_bytes"] == before["pool_cached_bytes"]
    check_intact(fresh, [0, 1, 2, 3])


def test_reset_is_recorded_in_the_history(device):
    ga.memory_history.clear()
    ga.memory_history.start()
    try:
        a = ga.zeros(128, device=device)
        ga.device_reset(device)
        del a
        gc.collect()
        b = ga.zeros(128, device=device)
        del b
    finally:
        ga.memory_history.stop()
    events = ga.memory_history.snapshot()["events"]
    ga.memory_history.clear()
    mine = [e for e in events if e["device"] == str(device)]
    actions = [e["action"] for e in mine]
    assert actions.count("reset") == 1
    i = actions.index("reset")
    assert "alloc" in actions[:i] and "alloc" in actions[i + 1:]
    assert "free" not in actions[i + 1:-1]  # the stale array's death records no free
    json.dumps(events)


# threads ----------------------------------------------------------------------------------------
def test_reset_from_another_thread_while_allocations_run(device):
    stop = threading.Event()
    errors: list[BaseException] = []
    stale_errors = [0]
    done = [0]

    def worker(k: int) -> None:
        rng = np.random.default_rng(k)
        live: list[tuple[ga.GPUArray, int]] = []
        it = 0
        try:
            while not stop.is_set() and it < 2000:
                it += 1
                n = int(rng.choice([16, 100, 256, 1000]))
                value = k * 100_000 + it
                try:
                    gen = device.memory.epoch.generation
                    a = ga.empty(n, np.int32, device=device)
                    a.fill(value)
                    live.append((a, value))
                    if len(live) > 6:
                        live.pop(int(rng.integers(len(live))))
                    for b, v in live:
                        got = b.get()
                        if not np.all(got == v) and device.memory.epoch.generation == gen:
                            raise AssertionError(f"thread {k}: array of value {v} overwritten "
                                                 f"without a reset in between")
                except ga.FreedArrayError:  # DeviceResetError: a reset came in between
                    stale_errors[0] += 1
                    live.clear()
                if it % 50 == 0:
                    gc.collect()
            done[0] += 1
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(15):
            ga.device_reset(device)
            stop.wait(0.02)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not any(t.is_alive() for t in threads), "deadlock: a worker did not finish"
    assert not errors, errors
    assert done[0] == 3
    # after the storm the device works and nothing aliases
    arrays = [ga.empty(n // 4, np.int32, device=device) for n in SIZES * 4]
    values = fill_distinct(arrays, 7)
    check_no_overlap(arrays)
    check_intact(arrays, values)


def test_reset_from_another_thread_between_allocations_never_aliases(device):
    """Fresh arrays made after a reset in another thread are intact and distinct."""
    for round_ in range(5):
        stale = [ga.full(n // 4, -1, np.int32, device=device) for n in SIZES]
        t = threading.Thread(target=ga.device_reset, args=(device,), daemon=True)
        t.start()
        t.join(30)
        assert not t.is_alive()
        fresh = [ga.empty(n // 4, np.int32, device=device) for n in SIZES]
        values = fill_distinct(fresh, round_ * 100)
        del stale
        gc.collect()
        more = [ga.empty(n // 4, np.int32, device=device) for n in SIZES]
        more_values = fill_distinct(more, round_ * 100 + 50)
        check_no_overlap(fresh + more)
        check_intact(fresh + more, values + more_values)



class ResetDuringAllocate:
    """A real back-end whose ``allocate`` starts a reset in another thread right after the
    platform returned the memory (the window of a reset racing an allocation).  The pool
    serialises platform allocations with resets, so the reset must wait for the allocation
    to be booked; ``reset_done_inside`` records whether it (wrongly) finished inside."""

    def __init__(self, device) -> None:
        self.device = device
        self.real = device.impl
        self.armed = True
        self.thread: threading.Thread | None = None
        self.reset_done_inside = False

    def allocate(self, index: int, kind: str, nbytes: int) -> int:
        ptr = self.real.allocate(index, kind, nbytes)
        if self.armed:
            self.armed = False
            self.thread = threading.Thread(target=ga.device_reset, args=(self.device,),
                                           daemon=True)
            self.thread.start()
            self.thread.join(0.5)
            self.reset_done_inside = not self.thread.is_alive()
        return ptr

    def __getattr__(self, name: str):
        return getattr(self.real, name)


@pytest.mark.parametrize("cached", [False, True], ids=["pool", "cache"])
def test_regression_reset_racing_an_allocation_never_aliases(device, cached):
    """An allocation that the platform served just before a reset (in another thread) freed
    everything must not come out as a live array of the new epoch: its address is handed
    out again right away."""
    ga.trim(device)
    cache = ga.AllocCache()
    racer = ResetDuringAllocate(device)
    device.impl = device.memory.impl = racer
    try:
        with ga.cached(cache) if cached else ga.uncached():
            a = ga.empty(1000, np.int32, device=device)
        assert not racer.armed  # the reset was started inside the allocation
        racer.thread.join(30)
        assert not racer.thread.is_alive()
    finally:
        device.impl = device.memory.impl = racer.real
    assert not racer.reset_done_inside  # it waited until the block was booked
    assert a.is_freed  # ... so the block belongs to the old epoch and the reset took it
    fresh = [ga.empty(1000, np.int32, device=device) for _ in range(4)]
    values = fill_distinct(fresh, 1)
    if a.is_freed:
        with pytest.raises(ga.DeviceResetError):
            a.get()
    else:  # a live array must own its memory
        check_no_overlap([a, *fresh])
        a.fill(-1)
    check_intact(fresh, values)
    del a
    gc.collect()
    more = [ga.empty(1000, np.int32, device=device) for _ in range(4)]
    more_values = fill_distinct(more, 100)
    check_no_overlap(fresh + more)
    check_intact(fresh + more, values + more_values)
    cache.free()
