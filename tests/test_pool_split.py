"""The splitting pool: best fit, merging, arenas, bounded splits, trim, resets, limits.

docs/design.md, "Pools, limits and the out-of-memory ladder".  ``check_pool`` recounts
the pool from its own structures after every step of the state machine: the
pieces of every platform allocation (live blocks, blocks waiting in the
exact-size lists, merged free pieces) tile it exactly, merged free pieces are
never neighbours, no two live storages overlap, and every counter equals its
recount.  Platform calls are counted by the ``faults.FaultyBackend`` wrapper
around the real back-end.
"""

from __future__ import annotations

import gc
import threading

import _profiles
import numpy as np
import pytest
from faults import inject
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import gpuarrays as ga
from gpuarrays._memory import segments as seg
from gpuarrays._memory.pool import round_size

KiB, MiB = 1 << 10, 1 << 20


def u8(n: int, device, **kw) -> ga.GPUArray:
    return ga.empty(n, dtype=np.uint8, device=device, **kw)


def check_pool(mgr, faulty=None) -> None:
    """Recount the pool of ``mgr`` from its structures and compare with its counters."""
    with mgr.lock:
        live = dict(mgr.live)
        total_free = total_seg = free_blocks = 0
        for kind, segments in mgr.segments.items():
            waiting = {ptr: size for size, ptrs in mgr.free_lists[kind].items() for ptr in ptrs}
            assert len(waiting) == sum(len(p) for p in mgr.free_lists[kind].values())
            merged = dict(segments.free)
            assert set(waiting).isdisjoint(merged)
            pieces = {**live, **waiting, **merged}
            by_base: dict[int, list[tuple[int, int]]] = {}
            for ptr, base in segments.base.items():
                assert ptr in pieces, f"piece {ptr:#x} of segment {base:#x} is in no list"
                by_base.setdefault(base, []).append((ptr, pieces[ptr]))
            assert set(by_base) == set(segments.segments)
            for base, (size, arena) in segments.segments.items():
                if arena == seg.SMALL:  # small segments are at most SMALL_SEGMENT
                    assert size <= seg.SMALL_SEGMENT
                else:  # a large or huge segment was opened by a request of its arena
                    assert arena == seg.arena_of(size) != seg.SMALL
                at = base
                previous_merged = False
                for ptr, n in sorted(by_base[base]):  # the pieces tile the segment
                    assert ptr == at, f"gap or overlap at {at:#x} in segment {base:#x}"
                    assert n > 0 and n % 512 == 0
                    is_merged = ptr in merged
                    assert not (is_merged and previous_merged), "free neighbours not merged"
                    previous_merged = is_merged
                    at += n
                assert at == base + size
                total_seg += size
            for base, ptrs in by_base.items():  # blocks and merged pieces per segment
                assert segments.busy[base] == sum(1 for p, _ in ptrs if p not in merged)
                assert segments.pieces[base] == {p for p, _ in ptrs if p in merged}
            for ptr, n in merged.items():  # each merged piece is indexed in the right tree
                base = segments.base[ptr]
                size, arena = segments.segments[base]
                if ptr == base and n == size:
                    tree = segments.idle[arena]
                elif arena == seg.SMALL:
                    tree = segments.small
                else:
                    tree = segments.busiest[arena][min(segments.busy[base], seg.BUSY_CAP)]
                entries = tree.bins[seg._bin(n)]
                assert (n, ptr) in entries and entries == sorted(entries)
                assert segments.ends[ptr + n] == ptr
            assert len(segments.ends) == len(merged)
            trees = [*segments.idle, segments.small, *segments.busiest[seg.LARGE],
                     *segments.busiest[seg.HUGE]]
            assert sum(len(e) for t in trees for e in t.bins.values()) == len(merged)
            for tree in trees:
                assert tree.mask == sum(1 << b for b in tree.bins)
            total_free += sum(waiting.values()) + sum(merged.values())
            free_blocks += len(waiting) + len(merged)
        assert mgr.used == sum(live.values())
        assert mgr.pool_bytes == total_free
        assert mgr.reserved == total_seg == mgr.used + mgr.pool_bytes
        if faulty is not None:  # what the platform holds for us is a segment of that size
            segments = {ptr: size for x in mgr.segments.values()
                        for ptr, (size, _) in x.segments.items()}
            for ptr, nbytes in faulty.live.items():
                assert segments.get(ptr) == nbytes, f"platform block {ptr:#x} is no segment"
    s = ga.memory_stats(mgr.device)  # applies queued frees: recount after it
    with mgr.lock:
        assert s["pool_segments"] == sum(len(x.segments) for x in mgr.segments.values())
        assert s["reserved_bytes"] == mgr.reserved
        assert s["pool_cached_bytes"] == mgr.pool_bytes
        assert s["pool_free_blocks"] == (
            sum(len(p) for f in mgr.free_lists.values() for p in f.values())
            + sum(len(x.free) for x in mgr.segments.values()))


# examples --------------------------------------------------------------------------------

def test_a_freed_block_serves_a_smaller_request(device):
    ga.trim(device)
    with inject(device) as fb:
        a = u8(9 * MiB // 2, device)
        ptr = a.storage.ptr
        a.free()
        calls = fb.calls["allocate"]
        b = u8(3 * MiB, device)  # splits the 4.5 MiB platform allocation (at most 1.5x)
        c = u8(3 * MiB // 2, device)  # the rest of it, exactly
        assert b.storage.ptr == ptr and c.storage.ptr == ptr + 3 * MiB
        assert fb.calls["allocate"] == calls
        check_pool(device.memory)
        b.free()
        c.free()
        check_pool(device.memory)


def test_free_neighbours_merge_into_one_block(device):
    ga.trim(device)
    arrays = [u8(100 * KiB, device) for _ in range(4)]
    ptrs = [a.storage.ptr for a in arrays]
    assert all(q == p + 100 * KiB for p, q in zip(ptrs, ptrs[1:], strict=False))  # one segment
    for a in (arrays[0], arrays[2], arrays[1]):  # the middle one last: merges both ways
        a.free()
    ga.trim(device)  # merges the waiting blocks; the segment still holds arrays[3]
    segments = device.memory.segments["device"]
    assert segments.free[ptrs[0]] == 300 * KiB
    big = u8(300 * KiB, device)  # the best fit: exactly the merged piece
    assert big.storage.ptr == ptrs[0]
    check_pool(device.memory)
    big.free()
    arrays[3].free()


def test_large_waiting_blocks_merge_before_a_large_request(device):
    ga.trim(device)
    u8(20 * MiB, device).free()
    keep = u8(16 * MiB, device)  # carved from the idle 20 MiB segment ...
    a = u8(4 * MiB, device)  # ... and the rest of it
    ptr = keep.storage.ptr
    assert a.storage.ptr == ptr + 16 * MiB
    with inject(device) as fb:
        keep.free()  # waits in the exact-size lists, not merged yet
        other = u8(14 * MiB, device)  # a miss: the waiting block joins the index first
        assert fb.calls["allocate"] == 0 and other.storage.ptr == ptr
        check_pool(device.memory)
    other.free()
    a.free()


def test_cycling_small_sizes_are_served_by_waiting_blocks(device):
    sizes = [3000, 5000, 7000, 9000]
    for n in sizes:
        u8(n, device).free()
    ptrs = {}
    with inject(device) as fb:
        for i in range(40):
            with u8(sizes[i % 4], device) as x:
                ptrs.setdefault(sizes[i % 4], set()).add(x.storage.ptr)
        assert fb.calls["allocate"] == 0
    assert all(len(p) == 1 for p in ptrs.values())  # each size kept its block: exact hits
    check_pool(device.memory)


def test_small_requests_share_segments(device):
    ga.trim(device)
    with inject(device) as fb:
        arrays = [u8(n, device) for n in range(1000, 200_000, 2000)]  # ~10 MB in small blocks
        assert fb.calls["allocate"] <= 10 * MiB // seg.SMALL_SEGMENT
        assert all(size == seg.SMALL_SEGMENT for _, size in fb.allocated)
        check_pool(device.memory)
        for a in arrays:
            a.free()


def test_large_requests_get_their_own_platform_allocation(device):
    ga.trim(device)
    with inject(device) as fb:
        a = u8(5 * MiB + 3, device)
        assert fb.allocated == [(a.storage.ptr, round_size(5 * MiB + 3))]
        a.free()


def test_an_idle_large_segment_is_not_carved_for_a_much_smaller_request(device):
    ga.trim(device)
    reserved0 = ga.memory_stats(device)["reserved_bytes"]
    with inject(device) as fb:
        big = u8(32 * MiB, device)
        ptr = big.storage.ptr
        big.free()
        small = u8(3 * MiB, device)  # < 32 MiB / MAX_SPLIT_RATIO: its own allocation
        assert fb.calls["allocate"] == 2 and small.storage.ptr != ptr
        # 35 MiB reserved: within IDLE_HEADROOM of the 32 MiB once used, the idle one stays
        assert fb.freed == []
        check_pool(device.memory)
        other = u8(4 * MiB, device)  # 39 MiB would pass the budget: the idle 32 MiB goes
        assert fb.freed == [(ptr, 32 * MiB)]
        assert ga.memory_stats(device)["reserved_bytes"] == reserved0 + 7 * MiB
        check_pool(device.memory)
        small.free()
        other.free()


def test_huge_and_large_requests_never_share_a_segment(device):
    ga.trim(device)
    u8(100 * MiB, device).free()  # room in the budget: idle segments are kept below
    with inject(device) as fb:
        huge = u8(40 * MiB, device)  # the idle 100 MiB is more than 1.5x: a new one
        ptr = huge.storage.ptr
        huge.free()
        large = u8(30 * MiB, device)  # 40 MiB is within 1.5x, but of the huge arena
        assert large.storage.ptr != ptr and fb.calls["allocate"] == 2
        assert ga.memory_stats(device)["pool_segments"] >= 2
        other = u8(36 * MiB, device)  # huge: carved from the idle huge segment
        assert other.storage.ptr == ptr and fb.calls["allocate"] == 2
        check_pool(device.memory)
        large.free()
        other.free()


def test_cycling_large_sizes_rarely_reach_the_platform(device):
    ga.trim(device)
    keep = u8(10 * MiB, device)
    sizes = [3 * MiB, 5 * MiB, 7 * MiB, 9 * MiB]
    with inject(device) as fb:
        for i in range(400):
            u8(sizes[i % 4], device).free()
        # the split bound alone would send every allocation to the platform
        assert fb.calls["allocate"] <= 40
    check_pool(device.memory)
    keep.free()


def test_trim_gives_back_only_wholly_free_segments(device):
    ga.trim(device)
    with inject(device) as fb:
        keep = u8(10 * KiB, device)
        other = u8(10 * KiB, device)
        other.free()
        lone = u8(3 * MiB, device)
        lone.free()
        released = ga.trim(device)
        assert released == 3 * MiB  # the small segment still holds `keep`
        assert [size for _, size in fb.freed] == [3 * MiB]
        check_pool(device.memory)
        keep.free()
        assert ga.trim(device) == seg.SMALL_SEGMENT
        check_pool(device.memory)


def test_a_limit_shrinks_the_small_segment(device):
    ga.trim(device)
    base = ga.memory_stats(device)["reserved_bytes"]
    ga.set_memory_limit(base + 64 * KiB, device)
    try:
        a = u8(10 * KiB, device)
        assert ga.memory_stats(device)["reserved_bytes"] == base + 64 * KiB
        b = u8(50 * KiB, device)  # from the shrunk segment
        with pytest.raises(ga.OutOfMemoryError):
            u8(10 * KiB, device)
        check_pool(device.memory)
        a.free()
        b.free()
    finally:
        ga.set_memory_limit(None, device)


def test_queued_free_of_a_piece_after_a_reset_never_reaches_new_memory(device):
    mgr = device.memory
    stale = u8(10 * KiB, device)
    ga.device_reset(device)
    fresh = [ga.full(10 * KiB, i, dtype=np.uint8, device=device) for i in range(4)]
    before = ga.memory_stats(device)
    with mgr.lock:  # the free cannot take the lock: it would be queued -- but it is stale
        stale.free()
    after = ga.memory_stats(device)  # applies the queue
    assert {k: after[k] - before[k] for k in ("pool_cached_bytes", "pool_free_blocks",
                                             "free_count", "used_bytes")} == {
        "pool_cached_bytes": 0, "pool_free_blocks": 0, "free_count": 0, "used_bytes": 0}
    again = [u8(10 * KiB, device) for _ in range(4)]
    spans = sorted((a.storage.ptr, a.storage.ptr + 10 * KiB) for a in fresh + again)
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert end <= start  # the stale piece was not handed out over fresh memory
    for i, f in enumerate(fresh):
        assert (f.get() == i).all()
    check_pool(mgr)
    for a in fresh + again:
        a.free()


# the state machine ----------------------------------------------------------------------

SIZES = st.one_of(st.integers(1, 64 * KiB), st.integers(64 * KiB, 2 * MiB),
                  st.integers(MiB, 24 * MiB))


class SplitPool(RuleBasedStateMachine):
    """Mixed-size allocations and every way of freeing, with the pool recounted after each."""

    def __init__(self, device, fb) -> None:
        super().__init__()
        self.device = device
        self.mgr = device.memory
        self.fb = fb
        self.live: list[tuple[ga.GPUArray, int]] = []  # (array, fill value)
        self.stale: list[ga.GPUArray] = []  # allocated before a reset, not freed yet
        self.counter = 0

    def _new(self, n: int) -> None:
        self.counter = (self.counter + 1) % 251
        a = ga.full(n, self.counter, dtype=np.uint8, device=self.device)
        self.live.append((a, self.counter))

    @rule(n=SIZES)
    def allocate(self, n) -> None:
        self._new(n)

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, 1000), how=st.sampled_from(["local", "forced", "gc", "thread",
                                                        "queued"]))
    def free(self, i, how) -> None:
        a, _ = self.live.pop(i % len(self.live))
        note(f"free {how} {a.storage.ptr:#x} {a.nbytes}")
        if how == "local":
            a.free()
        elif how == "forced":
            view = a[1:]
            view.free(force=True)
            assert a.is_freed
        elif how == "gc":
            cycle = [a]
            cycle.append(cycle)
            del a, cycle
            gc.collect()
        elif how == "thread":
            t = threading.Thread(target=a.free)
            t.start()
            t.join()
        else:  # the lock is busy: the free is queued and applied later
            with self.mgr.lock:
                a.free()

    @rule()
    def trim(self) -> None:
        ga.trim(self.device)
        for segments in self.mgr.segments.values():  # nothing wholly free is left
            assert not any(t.bins for t in segments.idle)

    @precondition(lambda self: self.live)
    @rule(n=SIZES)
    def allocate_under_a_limit(self, n) -> None:
        reserved = ga.memory_stats(self.device)["reserved_bytes"]
        ga.set_memory_limit(reserved + round_size(n) // 2, self.device)
        try:
            self._new(n)
        except ga.OutOfMemoryError:
            pass
        finally:
            ga.set_memory_limit(None, self.device)
        assert ga.memory_stats(self.device)["reserved_bytes"] <= reserved + round_size(n)

    @rule(data=st.data())
    def reset(self, data) -> None:
        if not data.draw(st.integers(0, 9), label="reset only rarely"):
            ga.device_reset(self.device)
            self.stale.extend(a for a, _ in self.live)
            self.live.clear()

    @precondition(lambda self: self.stale)
    @rule(queued=st.booleans())
    def free_stale(self, queued) -> None:
        a = self.stale.pop()
        if queued:
            with self.mgr.lock:
                a.free()
        else:
            a.free()

    @invariant()
    def pool_is_consistent(self) -> None:
        check_pool(self.mgr, self.fb)
        spans = sorted((a.storage.ptr, a.storage.ptr + round_size(a.nbytes))
                       for a, _ in self.live)
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert end <= start, "two live storages overlap"

    @invariant()
    def data_is_intact(self) -> None:
        for a, value in self.live[-3:]:  # the newest ones: the most likely to be clobbered
            assert int(a[0].get()) == value and int(a[-1].get()) == value

    def teardown(self) -> None:
        for a, _ in self.live:
            a.free()
        for a in self.stale:
            a.free()
        self.live.clear()
        self.stale.clear()
        ga.trim(self.device)
        check_pool(self.mgr, self.fb)
        assert not self.fb.live, "a platform allocation made during the run is still held"


def test_split_pool_state_machine(device):
    ga.trim(device)
    with inject(device) as fb:
        run_state_machine_as_test(lambda: SplitPool(device, fb), settings=_profiles.PROFILE)
