"""Memory statistics: memory_stats, peaks, memory_status, record_allocations."""

from __future__ import annotations

import gc
import io
import json
import threading

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._memory.pool import round_size

KiB = 1024
REQUIRED_KEYS = ("used_bytes", "reserved_bytes", "peak_used_bytes", "alloc_count", "alloc_bytes",
             "free_count", "free_bytes", "cache_hits", "oom_retries", "limit_bytes")
COUNTERS = ("used_bytes", "alloc_count", "alloc_bytes", "free_count", "free_bytes", "cache_hits")


def u8(n: int, device, **kw) -> ga.GPUArray:
    return ga.empty(n, dtype=np.uint8, device=device, **kw)


def stats(device) -> dict:
    return ga.memory_stats(device)


def delta(after: dict, before: dict, keys=COUNTERS) -> dict:
    return {k: after[k] - before[k] for k in keys}


def test_memory_stats_has_every_key_of_the_spec(device):
    s = stats(device)
    for key in REQUIRED_KEYS:
        assert key in s, key
    for key in REQUIRED_KEYS:
        if key != "limit_bytes":
            assert type(s[key]) is int and s[key] >= 0, (key, s[key])
    assert s["limit_bytes"] is None
    ga.set_memory_limit("1GiB", device)
    assert stats(device)["limit_bytes"] == 2**30
    json.dumps(s)  # plain data
    assert s["reserved_bytes"] >= s["used_bytes"]
    assert s["peak_used_bytes"] >= s["used_bytes"]


def test_memory_stats_device_argument(device):
    assert stats(str(device)) == stats(device)
    with ga.use_device(device):
        assert ga.memory_stats() == stats(device)
    with pytest.raises(ValueError, match="available"):
        ga.memory_stats("nosuchbackend:0")


def test_counters_are_exact_after_a_known_sequence(device):
    gc.collect()
    before = stats(device)
    a = u8(1000, device)
    b = ga.empty((30, 100), dtype=np.float32, device=device)  # 12000 B
    c = a[2:].view(np.int16)  # derived: no allocation
    d = b.T.reshape(-1)  # a copy (not a view of the transpose): one allocation
    z = ga.empty((0, 5), device=device)  # zero-size: no memory at all
    mid = stats(device)
    blocks = round_size(1000) + 2 * round_size(12000)
    assert delta(mid, before) == {"used_bytes": blocks, "alloc_count": 3, "alloc_bytes": blocks,
                                  "free_count": 0, "free_bytes": 0, "cache_hits": 0}
    a.free()  # c still holds the storage
    assert delta(stats(device), before)["free_count"] == 0
    c.free()
    s = stats(device)
    assert delta(s, before)["free_count"] == 1
    assert delta(s, before)["free_bytes"] == round_size(1000)
    del b, d, z  # garbage collection releases the rest
    after = stats(device)
    assert delta(after, before) == {"used_bytes": 0, "alloc_count": 3, "alloc_bytes": blocks,
                                    "free_count": 3, "free_bytes": blocks, "cache_hits": 0}
    assert after["reserved_bytes"] == after["used_bytes"] + after["pool_cached_bytes"]


def test_forced_free_counts_once(device):
    before = stats(device)
    a = u8(5000, device)
    views = [a[i:] for i in range(5)]
    a.free(force=True)
    for v in views:
        v.free()
    a.free(force=True)
    del views
    assert delta(stats(device), before) == {
        "used_bytes": 0, "alloc_count": 1, "alloc_bytes": round_size(5000), "free_count": 1,
        "free_bytes": round_size(5000), "cache_hits": 0}


def test_used_bytes_back_to_baseline_after_everything_is_freed(device):
    gc.collect()
    base = stats(device)["used_bytes"]
    arrays = [ga.zeros(n, dtype=np.float32, device=device) for n in (1, 10, 100, 1000, 10000)]
    copies = [a.copy() for a in arrays] + [a.astype(np.float64) for a in arrays
                                            if device.supports(np.float64)]
    views = [a[::2] for a in copies]
    host = ga.asarray(np.ones((50, 50)), device=device, kind="host")
    cache = ga.AllocCache()
    with ga.cached(cache):
        cached = [u8(n, device) for n in (100, 200, 300)]
    assert stats(device)["used_bytes"] > base
    del arrays, copies, views, host, cached
    gc.collect()
    assert stats(device)["used_bytes"] > base  # the cache still holds its buffers
    cache.free()
    assert stats(device)["used_bytes"] == base


def test_allocations_on_one_device_leave_the_others_alone(device):
    others = [d for d in ga.devices() if d != device]
    before = {d: stats(d) for d in others}
    a = u8(10 * KiB, device)
    a.free()
    for d in others:
        assert delta(stats(d), before[d]) == dict.fromkeys(COUNTERS, 0)


def test_peak_and_reset_peak_memory_stats(device):
    gc.collect()
    ga.reset_peak_memory_stats(device)
    s = stats(device)
    assert s["peak_used_bytes"] == s["used_bytes"]
    a = u8(64 * KiB, device)
    b = u8(32 * KiB, device)
    top = s["used_bytes"] + 96 * KiB
    assert stats(device)["peak_used_bytes"] == top
    a.free()
    b.free()
    s = stats(device)
    assert s["peak_used_bytes"] == top and s["used_bytes"] == top - 96 * KiB
    ga.reset_peak_memory_stats(str(device))
    s = stats(device)
    assert s["peak_used_bytes"] == s["used_bytes"]
    c = u8(KiB, device)
    assert stats(device)["peak_used_bytes"] == s["used_bytes"] + KiB
    c.free()


def test_cache_hits_are_counted_and_are_not_allocations(device):
    before = stats(device)
    cache = ga.AllocCache()
    with ga.cached(cache):
        for _ in range(5):
            a = ga.empty(250, dtype=np.float32, device=device)  # 1000 B each time
            a.free()
    s = stats(device)
    assert delta(s, before) == {"used_bytes": round_size(1000), "alloc_count": 1,
                                "alloc_bytes": round_size(1000), "free_count": 0,
                                "free_bytes": 0, "cache_hits": 4}
    assert s["cache_held_bytes"] - before["cache_held_bytes"] == round_size(1000)
    cache.free()
    s = stats(device)
    assert delta(s, before)["used_bytes"] == 0 and delta(s, before)["free_count"] == 1


def test_unsafe_wrap_is_not_an_allocation(device):
    host = np.arange(4096, dtype=np.float32)
    before = stats(device)
    w = ga.unsafe_wrap(host, device=device)
    v = w[10:20]
    assert delta(stats(device), before) == dict.fromkeys(COUNTERS, 0)
    with ga.record_allocations() as rec:
        w2 = ga.unsafe_wrap(host, device=device)
    assert rec.count == 0 and rec.bytes == 0
    del w, v, w2
    assert delta(stats(device), before) == dict.fromkeys(COUNTERS, 0)


def test_memory_status_report(device):
    ga.set_memory_limit("3GiB", device)
    keep = u8(300 * KiB, device)
    out = io.StringIO()
    ga.memory_status(device, file=out)
    text = out.getvalue()
    assert text.endswith("\n")
    assert str(device) in text and device.name in text
    for part in ("in use", "held by caches", "cached in pool", "reserved", "limit 3.0 GiB",
                 "peak used", "largest live allocations", f"0x{keep.storage.ptr:x}", "300.0 KiB"):
        assert part in text, part
    assert len(text.splitlines()) < 20  # a short report
    keep.free()
    ga.set_memory_limit(None, device)
    out = io.StringIO()
    ga.memory_status(str(device), file=out)
    assert "limit none" in out.getvalue()


def test_memory_status_prints_to_stdout_by_default(device, capsys):
    ga.memory_status(device)
    assert str(device) in capsys.readouterr().out


def test_record_allocations_counts_what_the_block_allocated(device):
    keep = u8(10, device)  # before the block: not counted
    with ga.record_allocations() as rec:
        a = u8(1000, device)
        b = ga.zeros((10, 10), dtype=np.float32, device=device)
        c = a[1:]  # derived: not an allocation
        z = ga.empty(0, device=device)  # zero-size: not an allocation
        a.free()
        u8(1000, device).free()  # reuses a's block: still an allocation
    assert rec.count == 3
    assert rec.bytes == round_size(1000) * 2 + round_size(400)
    assert rec.cache_hits == 0
    assert isinstance(rec.seconds, float) and 0 < rec.seconds < 5
    n = rec.count
    u8(10, device).free()  # after the block
    assert rec.count == n
    assert "count=3" in repr(rec)
    for x in (keep, b, c, z):
        x.free()


def test_record_allocations_with_a_cache(device):
    cache = ga.AllocCache()
    with ga.record_allocations() as rec, ga.cached(cache):
        for _ in range(4):
            with u8(3000, device):
                pass
        with ga.uncached():
            u8(100, device).free()
    assert rec.count == 2  # one cache miss, one uncached allocation
    assert rec.cache_hits == 3
    assert rec.bytes == round_size(3000) + round_size(100)
    cache.free()


def test_record_allocations_nest_and_see_other_threads(device):
    with ga.record_allocations() as outer:
        u8(10, device).free()
        with ga.record_allocations() as inner:
            u8(20, device).free()
            t = threading.Thread(target=lambda: u8(30, device).free())
            t.start()
            t.join(30)
        u8(40, device).free()
    assert inner.count == 2 and outer.count == 4


def test_record_allocations_ends_on_error(device):
    with pytest.raises(KeyError), ga.record_allocations() as rec:
        u8(10, device).free()
        raise KeyError("boom")
    u8(10, device).free()
    assert rec.count == 1


def test_bad_input_changes_no_statistic(device):
    u8(10, device).free()
    before = stats(device)
    with ga.record_allocations() as rec:
        for bad in (lambda: ga.empty(-3, device=device),
                    lambda: ga.empty((2, -1), device=device),
                    lambda: ga.zeros(10, dtype="U3", device=device),
                    lambda: ga.full(5, 1, kind="shared", device=device),
                    lambda: ga.asarray(np.zeros(3, dtype=object), device=device)):
            with pytest.raises((ValueError, TypeError)):
                bad()
    assert rec.count == 0 and rec.bytes == 0
    assert stats(device) == before
