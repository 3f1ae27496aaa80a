"""Per-device memory manager: pools, limits, the out-of-memory ladder, counters.

One :class:`MemoryManager` per device holds one pool per memory kind.  Sizes
are rounded up to ``GRANULARITY`` (512 B).  A freed block first waits in an
exact-size free list (a dict of lists), where the next request of the same size
finds it in O(1) -- a loop's warm hit.  On a miss, the request takes the
best-fitting free piece of a platform allocation, after the waiting blocks that
matter merged with their free neighbours (``segments.py``: splitting, merging,
arenas, the bound on oversize splits); only when nothing fits does the pool go
to the platform, giving wholly free platform allocations back first as far as
the budget (``IDLE_HEADROOM``) asks.

The warm-pool hit and every free are compiled (``_core.Pool``, the base class
of :class:`MemoryManager`); misses, the ladder, trim, resets and statistics
are here.

Locking (PITFALLS): the critical sections are tiny.  Frees arriving while the
lock is held -- from a finalizer interrupting an allocation on the same thread,
or from another thread -- never wait: they are appended to ``pending`` (an
atomic list append) and applied at the next allocation, in the ladder, and
before any statistic or ``trim`` is reported.

Every block and storage is stamped with the device's :class:`~.storage.Epoch`;
a free from an epoch that a reset ended is dropped, both when it is queued and
when it is applied, so it can never reach memory handed out since.
"""

from __future__ import annotations

import gc
import os
import threading
import time
import warnings
import weakref
from collections.abc import Callable

from .. import _core
from .._common.errors import BackendError, GPUArraysWarning, OutOfMemoryError
from .._common.sizes import format_bytes, parse_size
from ..backends.base import KINDS, BackendOutOfMemory
from .segments import HUGE, LARGE, SMALL, SMALL_MAX, Segments, arena_of
from .state import state
from .storage import Epoch

__all__ = ["MemoryManager", "GRANULARITY", "round_size", "ladder_hooks", "usage_hooks"]

GRANULARITY = _core.GRANULARITY  # 512: the compiled hit rounds the same way
_MASK = -GRANULARITY
# Wholly free segments stay cached while the reserved bytes stay within this factor of the
# most used since the last trim (or the most reserved since); beyond it a miss gives them
# back before it calls the platform (docs/decisions.md, "Memory accounting").
IDLE_HEADROOM = 1.1
# Churn: a miss that gave segments back and then called the platform.  While churn passes
# CHURN_MAX of the misses (a moving average over about CHURN_WINDOW), idle large segments
# serve requests of any size (the split bound of segments.py is lifted).
CHURN_MAX = 0.04
CHURN_WINDOW = 256

# Steps other modules add to the out-of-memory ladder: fn(device) -> None.
ladder_hooks: list[Callable] = []
# Reporters of memory held outside the pool, for memory_status: fn(device) -> (bytes, free, busy).
usage_hooks: list[Callable] = []

LADDER_STEPS = ("apply queued frees", "release unused pool blocks", "synchronize the device",
                "gc.collect() and release again", "release unreferenced cached buffers")


def round_size(nbytes: int) -> int:
    """Block size the pool uses for a request of ``nbytes`` (a multiple of 512)."""
    return (nbytes + GRANULARITY - 1) & _MASK


class MemoryManager(_core.Pool):
    """Pools, counters, limit and epoch of one device.  Created by ``Device``.

    The compiled base (``_core.Pool``) holds ``lock``, ``pending``, ``free_lists``,
    ``live``, ``epoch``, ``device`` and the counters ``used``, ``pool_bytes``,
    ``peak``, ``alloc_count``, ``alloc_bytes``, ``cache_hits``, and runs the two
    hot paths: ``new_storage`` (a warm-pool hit; anything else comes back to
    :meth:`take_block`) and ``give_block`` / ``release_storage`` (every free).
    """

    __slots__ = (
        "impl", "index", "sites", "reserved", "dropped_count", "dropped_bytes", "oom_retries",
        "oom_last_step", "backend_allocs", "backend_frees", "limit", "_in_report",
        "platform_lock", "segments", "high_used", "high_reserved", "churn", "ordered",
        "by_stream", "live_streams",
    )

    def __init__(self, device) -> None:
        self.device = device
        self.impl = device.impl
        self.index = device.index
        # Held while blocks taken out of the books are freed through the platform (trim)
        # and while a reset ends the epoch and resets the platform: a reset can never
        # free what trim is freeing, or the reverse.  Never taken by finalizers.
        self.platform_lock = threading.RLock()
        self.segments: dict[str, Segments] = {}
        for kind in device.kinds:
            self.free_lists[kind] = {}
            self.segments[kind] = Segments()
        self.sites: dict[int, str | None] = {}  # ptr -> allocation site (while recording)
        self.epoch = Epoch(0)
        self.reserved = 0
        # high-water marks since the last trim or reset, the budget of cached idle segments
        self.high_used = self.high_reserved = 0
        self.churn = 0.0
        # Stream-ordered frees not yet reusable by every stream: (kind, ptr, size, epoch,
        # freeing stream handle, [(stream handle, event)]); appended without the lock.
        self.ordered: list[tuple] = []
        # Stream-ordered frees used by their freeing stream alone, reused by it with no event:
        # {stream handle: {(kind, size): [ptr]}}
        self.by_stream: dict[int, dict[tuple[str, int], list[int]]] = {}
        # The device's live non-default streams (weak: a stream goes when its last user does);
        # ``streams``, the compiled count, is their number.
        self.live_streams: weakref.WeakSet = weakref.WeakSet()
        # Blocks that left the books at a reset without being freed (free counts exclude them).
        self.dropped_count = self.dropped_bytes = 0
        self.oom_retries = self.backend_allocs = self.backend_frees = 0
        self.oom_last_step: str | None = None
        self._in_report = False
        env = os.environ.get("GPUARRAYS_MEMORY_LIMIT")
        try:
            self.limit = parse_size(env, device.total_memory) if env else None
        except ValueError as e:
            raise ValueError(f"GPUARRAYS_MEMORY_LIMIT is not a valid size: {e}") from None

    # allocation -----------------------------------------------------------------
    def after_fork(self) -> None:
        """In a fork's child: a new platform lock (a thread that held it for a platform
        call at the fork did not survive, and would hold it forever)."""
        self.platform_lock = threading.RLock()

    def take_block(self, kind: str, nbytes: int) -> tuple[int, int, Epoch]:
        """Take a block of at least ``nbytes`` out of the pool: ``(ptr, block_size, epoch)``.

        ``epoch`` is the one the block was counted in: a reset running during the call
        makes it a dead epoch (the block is born reset, and is not in the new books).
        """
        size = (nbytes + GRANULARITY - 1) & _MASK
        if kind not in self.free_lists:
            raise self._bad_kind(kind)
        if self.ordered or self.by_stream:
            found = self._take_stream_ordered(kind, size)
        else:
            found = self._try_pool(kind, size)
        if found is None:
            found = self._grow(kind, size)
        return found[0], size, found[1]

    def _count_taken_locked(self, ptr: int, size: int, kind: str) -> None:
        used = self.used = self.used + size
        if used > self.peak:
            self.peak = used
        if used > self.high_used:  # the compiled hit leaves it: it only reuses blocks
            self.high_used = used
        self.alloc_count += 1
        self.alloc_bytes += size
        self.live[ptr] = size

    def _note_taken(self, ptr: int, size: int, kind: str) -> None:
        """History and record_allocations bookkeeping (only while they are active)."""
        history = state.history
        if history is not None:
            self.sites[ptr] = history.site()
            history.record("alloc", self.device, size, ptr, kind)
        for rec in state.recorders:
            rec.count += 1
            rec.bytes += size

    def _grow(self, kind: str, size: int) -> tuple[int, Epoch]:
        """A new block from the back-end, running the ladder when needed: (ptr, epoch).

        Wholly free platform allocations go back first, largest first, until the new one
        fits in the budget (``IDLE_HEADROOM``); one small segment is always kept.
        """
        if self._release_idle(Segments.segment_size(size)):
            self.churn += 1 / CHURN_WINDOW
        found = self._try_backend(kind, size)
        if found is None:
            found = self._ladder(kind, size)
        return found

    def _try_backend(self, kind: str, size: int) -> tuple[int, Epoch] | None:
        # The platform lock keeps a reset from running between the platform call and the
        # books: a block allocated just before a reset would otherwise be freed by the
        # reset and again by its storage.
        with self.platform_lock:
            return self._try_backend_locked(kind, size)

    def _try_backend_locked(self, kind: str, size: int) -> tuple[int, Epoch] | None:
        """A new platform allocation (a segment) whose first ``size`` bytes are taken."""
        with self.lock:
            seg_size = Segments.segment_size(size)
            if self.limit is not None:
                if self.reserved + size > self.limit:
                    return None
                # a small segment shrinks to the room the limit leaves (never below size)
                seg_size = max(size, min(seg_size, (self.limit - self.reserved) & _MASK))
            self.reserved += seg_size  # reserve before the call so threads respect the limit
            epoch = self.epoch
        try:
            ptr = self.impl.allocate(self.index, kind, seg_size)
        except BackendOutOfMemory:
            ptr = None
        except BaseException:
            with self.lock:
                if self.epoch is epoch:
                    self.reserved -= seg_size
            raise
        with self.lock:
            if self.epoch is not epoch:
                # A reset ran during the call (only the calling thread itself can, the
                # platform lock keeps others out): the block may predate it (the platform
                # dropped it) -- never count or reuse it; the storage is born reset.
                return (ptr, epoch) if ptr is not None else None
            if ptr is None:
                self.reserved -= seg_size
                return None
            self.backend_allocs += 1
            self.segments[kind].add_segment(ptr, seg_size, size)
            self.pool_bytes += seg_size - size
            if self.reserved > self.high_reserved:
                self.high_reserved = self.reserved
            self._count_taken_locked(ptr, size, kind)
        self._note_taken(ptr, size, kind)
        return ptr, epoch

    def _try_pool(self, kind: str, size: int) -> tuple[int, Epoch] | None:
        with self.lock:
            self._apply_pending_locked()
            exact = self.free_lists[kind]
            blocks = exact.get(size)
            if blocks:
                ptr = blocks.pop()
            else:  # a miss: merge the waiting blocks (small ones only if needed), best fit
                segments = self.segments[kind]
                bound = self.churn <= CHURN_MAX
                self.churn -= self.churn / CHURN_WINDOW
                if size > SMALL_MAX:  # large: the best fit needs every free piece merged
                    segments.flush(exact, (arena_of(size),))
                ptr = segments.take(size, bound)
                if ptr is None and size <= SMALL_MAX and exact:
                    segments.flush(exact, (SMALL,))  # small: waiting blocks serve hits
                    ptr = segments.take(size, bound)
                if ptr is None:
                    return None
            self.pool_bytes -= size
            self._count_taken_locked(ptr, size, kind)
            epoch = self.epoch
        self._note_taken(ptr, size, kind)
        return ptr, epoch

    def _ladder(self, kind: str, size: int) -> tuple[int, Epoch]:
        """Reclaim, cheapest first, retrying after each step; then fail (docs/design.md, "Pools")."""
        for number, name in enumerate(LADDER_STEPS, 1):
            with self.lock:
                self.oom_retries += 1
            if number == 1:
                self._wait_stream_ordered()  # frees waiting for streams' work: wait
            elif number == 2:
                self.trim()
            elif number == 3:
                self._synchronize_quietly()
            elif number == 4:
                gc.collect()
                self.trim()
            elif number == 5:
                for hook in list(ladder_hooks):
                    hook(self.device)
                self.trim()
            found = self._try_pool(kind, size)
            if found is None:
                found = self._try_backend(kind, size)
            if found is not None:
                self.oom_last_step = name
                return found
        raise OutOfMemoryError(self._oom_message(kind, size))

    def _oom_message(self, kind: str, size: int) -> str:
        if self._in_report:  # building the report must never recurse into the ladder
            return f"out of memory on {self.device}: cannot allocate {format_bytes(size)}"
        self._in_report = True
        try:
            from .stats import status_text

            limit = "" if self.limit is None else f" (limit {format_bytes(self.limit)})"
            return (f"out of memory on {self.device}: cannot allocate {format_bytes(size)} "
                    f"({size} bytes) of {kind!r} memory{limit} after reclaiming what could "
                    f"be reclaimed; free or cache.free() arrays you no longer need, or raise "
                    f"the limit with ga.set_memory_limit.\n{status_text(self.device)}")
        finally:
            self._in_report = False

    def _synchronize_quietly(self) -> None:
        try:
            self.impl.synchronize(self.index)
        except BackendError as e:
            warnings.warn(f"synchronize during out-of-memory handling failed: {e}",
                          GPUArraysWarning, stacklevel=2)

    def _bad_kind(self, kind: object) -> ValueError:
        if kind in KINDS:
            return ValueError(f"device {self.device} ({self.device.name}) does not support "
                              f"memory kind {kind!r}; it supports {', '.join(self.device.kinds)}")
        return ValueError(f"unknown memory kind {kind!r}: expected one of "
                          f"{', '.join(repr(k) for k in KINDS)}")

    # release ----------------------------------------------------------------------
    def _put_locked(self, kind: str, ptr: int, size: int) -> None:
        free = self.free_lists[kind]
        blocks = free.get(size)
        if blocks is None:
            free[size] = [ptr]
        else:
            blocks.append(ptr)
        self.used -= size
        self.pool_bytes += size
        del self.live[ptr]
        if state.history is not None:
            self._note_put(kind, ptr, size)

    def _note_put(self, kind: str, ptr: int, size: int) -> None:
        self.sites.pop(ptr, None)
        state.history.record("free", self.device, size, ptr, kind)

    def _apply_pending_locked(self) -> None:
        pending = self.pending
        while pending:
            kind, ptr, size, epoch = pending.pop()
            if epoch is self.epoch:
                self._put_locked(kind, ptr, size)

    def apply_pending(self) -> None:
        """Apply queued frees now (done before any statistic is reported)."""
        if self.pending:
            with self.lock:
                self._apply_pending_locked()

    # stream-ordered frees (docs/streams.md) ---------------------------------------------
    def add_stream(self, stream) -> None:
        """A new stream of the device: from now on every free is stream-ordered."""
        self.live_streams.add(stream)
        self.streams += 1
        _core.add_streams(1)

    def remove_stream(self, handle: int) -> None:
        """Stream ``handle`` is gone, its work drained: the blocks only it used serve every
        stream again (all kept blocks when it was the last).  Runs in its finalizer."""
        if self.streams <= 0:
            return
        self.streams -= 1
        _core.add_streams(-1)
        self.release_stream_blocks(None if self.streams == 0 else handle)

    def give_ordered(self, kind: str, ptr: int, size: int, epoch: Epoch, recorded) -> None:
        """A free while the device has streams (the compiled free calls it).  ``recorded``:
        the storage's streams (None in it: the default one), None when no stream used it
        since the device has streams, ``...`` when unknown (every stream of the device).

        - used on no stream since: its earlier work is done (a device's first stream
          synchronizes it): straight back to the free lists;
        - used on the freeing stream alone: into that stream's own list (``by_stream``),
          reused by it with no event (the stream orders it);
        - else it waits in ``ordered`` with an event on each stream that used it and on the
          freeing one.
        Never takes the lock: it may run in a finalizer."""
        if epoch is not self.epoch:
            return
        current = _core.thread_stream(self.device)
        free_handle = 0 if current is None or current._epoch is not epoch else current.handle
        if recorded is ...:
            users = {0} | {s.handle for s in list(self.live_streams) if s.handle}
        elif recorded is None:
            users = set()
        else:
            users = {0 if s is None else s.handle for s in recorded
                     if s is None or (s._epoch is epoch and s.handle)}
        if not users:
            self.pending.append((kind, ptr, size, epoch))  # applied under the lock, soon
            return
        if users == {free_handle}:
            lists = self.by_stream.get(free_handle)
            if lists is None:
                lists = self.by_stream.setdefault(free_handle, {})
            lists.setdefault((kind, size), []).append(ptr)
            return
        impl, index = self.impl, self.index
        events = [(h, impl.event_record(index, h)) for h in users | {free_handle}]
        self.ordered.append((kind, ptr, size, epoch, free_handle, events))

    def _take_stream_ordered(self, kind: str, size: int) -> tuple[int, Epoch] | None:
        """A block of exactly ``size`` for the calling thread's current stream from the
        stream-ordered frees: its own list first (no wait), then (after the ordered frees
        whose work is done went to the free lists) the free lists, a pending block (the
        stream waits for its other streams' events), another stream's list (one event)."""
        current = _core.thread_stream(self.device)
        handle = 0 if current is None else current.handle
        key = (kind, size)
        own = self.by_stream.get(handle)
        if own:
            ptr = _pop(own.get(key))
            if ptr is not None:
                return self._count_reused(ptr, size)
        if self.ordered:
            self._poll_ordered()
        found = self._try_pool(kind, size)
        if found is not None:
            return found
        impl, index = self.impl, self.index
        for entry in list(self.ordered):
            if entry[0] != kind or entry[2] != size or entry[3] is not self.epoch:
                continue
            try:
                self.ordered.remove(entry)
            except ValueError:  # another thread took it
                continue
            for h, event in entry[5]:
                if h != handle:
                    impl.stream_wait_event(index, handle, event)
                impl.event_free(index, event)
            return self._count_reused(entry[1], size)
        for other, lists in list(self.by_stream.items()):
            ptr = _pop(lists.get(key)) if other != handle else None
            if ptr is not None:
                try:
                    event = impl.event_record(index, other)
                    impl.stream_wait_event(index, handle, event)
                    impl.event_free(index, event)
                except BaseException:
                    lists[key].append(ptr)
                    raise
                return self._count_reused(ptr, size)
        return None

    def _count_reused(self, ptr: int, size: int) -> tuple[int, Epoch]:
        """A block that never left ``live`` and ``used`` is handed out again."""
        with self.lock:
            self.alloc_count += 1
            self.alloc_bytes += size
            return ptr, self.epoch

    def _poll_ordered(self, wait: bool = False) -> None:
        """Blocks whose streams' work is done go to the free lists (``wait``: wait on the
        host for all of them first -- the out-of-memory ladder)."""
        ordered, keep, ready = self.ordered, [], []
        impl, index = self.impl, self.index
        while ordered:
            try:
                entry = ordered.pop(0)
            except IndexError:  # another thread took the last one
                break
            left = []
            for handle, event in entry[5]:
                if wait:
                    impl.event_wait(index, event)
                if wait or impl.event_done(index, event):
                    impl.event_free(index, event)
                else:
                    left.append((handle, event))
            (keep.append(entry[:5] + (left,)) if left else ready.append(entry))
        ordered.extend(keep)
        if ready:
            with self.lock:
                for kind, ptr, size, epoch, _, _ in ready:
                    if epoch is self.epoch:
                        self._put_locked(kind, ptr, size)

    def release_stream_blocks(self, handle: int | None = None) -> None:
        """The blocks kept for stream ``handle`` (None: every stream) go to the free lists:
        that stream's work is done (it was synchronized or destroyed).  Queued as frees,
        never under the lock: a stream's finalizer calls it."""
        handles = list(self.by_stream) if handle is None else [handle]
        epoch = self.epoch
        for h in handles:
            lists = self.by_stream.pop(h, None)
            for (kind, size), ptrs in (lists or {}).items():
                while ptrs:
                    self.pending.append((kind, ptrs.pop(), size, epoch))

    def _wait_stream_ordered(self) -> None:
        """Every stream-ordered free becomes reusable: the device's streams are drained."""
        if self.ordered or self.by_stream:
            self._synchronize_quietly()
            self._poll_ordered(wait=True)
            self.release_stream_blocks()

    def _drop_ordered(self) -> None:
        """At a reset (the lock held, the device drained): the waiting blocks are gone."""
        impl, index = self.impl, self.index
        while self.ordered:
            for _, event in self.ordered.pop()[5]:
                try:
                    impl.event_free(index, event)
                except Exception:  # noqa: BLE001 -- the context is being thrown away
                    pass
        self.by_stream.clear()

    # maintenance --------------------------------------------------------------------
    def trim(self) -> int:
        """Give every wholly free platform allocation back; returns the bytes released."""
        if self.ordered:
            self._poll_ordered()
        return self._release_idle(None)

    def _release_idle(self, need: int | None) -> int:
        """Give back wholly free segments: all of them when ``need`` is None (trim, after
        merging every waiting block), else (a miss, after merging the large waiting
        blocks) the largest first until ``need`` more bytes fit in the budget, keeping
        one small segment.  Returns the bytes released."""
        with self.platform_lock:
            with self.lock:
                self._apply_pending_locked()
                idle = []
                for kind, segments in self.segments.items():
                    # a miss leaves small waiting blocks alone: they serve exact-size hits
                    segments.flush(self.free_lists[kind], None if need is None else (LARGE, HUGE))
                    idle.extend((size, base, arena, kind)
                                for size, base, arena in segments.idle_segments())
                if need is None:
                    chosen = idle
                else:
                    budget = max(IDLE_HEADROOM * self.high_used, self.high_reserved)
                    chosen, reserved, kept_small = [], self.reserved, False
                    for entry in sorted(idle, reverse=True):
                        if reserved + need <= budget:
                            break
                        if entry[2] == SMALL and not kept_small:
                            kept_small = True
                            continue
                        chosen.append(entry)
                        reserved -= entry[0]
                blocks = [(kind, base, self.segments[kind].release(base))
                          for _, base, _, kind in chosen]
                self.pool_bytes -= sum(size for _, _, size in blocks)
            released = 0
            for kind, ptr, size in blocks:
                try:
                    if not state.shutting_down:
                        self.impl.free(self.index, kind, ptr, size)
                except BackendError as e:
                    warnings.warn(f"freeing a pool segment of {size} bytes on {self.device} "
                                  f"failed: {e}", GPUArraysWarning, stacklevel=3)
                released += size
            with self.lock:
                self.reserved -= released
                self.backend_frees += len(blocks)
                if need is None:  # trimmed: the budget and the churn average start again
                    self.high_reserved, self.high_used = self.reserved, self.used
                    self.churn = 0.0
        return released

    def synchronize(self) -> None:
        self.apply_pending()
        self.impl.synchronize(self.index)
        self._poll_ordered()
        self.release_stream_blocks()

    def set_limit(self, limit: int | str | None) -> None:
        self.limit = None if limit is None else parse_size(limit, self.device.total_memory)

    def segment_of(self, kind: str, ptr: int) -> tuple[int, int]:
        """``(base, size)`` of the platform allocation holding the pool block at ``ptr``.

        A block is a piece of a segment; the platform knows only the segment.  A block the
        segment books do not know (never the case for a live pooled block) is its own.
        """
        with self.lock:
            segments = self.segments.get(kind)
            base = None if segments is None else segments.base.get(ptr)
            if base is None:
                return ptr, 0
            return base, segments.segments[base][0]

    def new_epoch(self) -> Epoch:
        """Forget every block of the current epoch without freeing it (device reset)."""
        with self.lock:
            old = self.epoch
            old.live = False
            self.epoch = Epoch(old.generation + 1)
            self.pending.clear()
            self._drop_ordered()
            _core.add_streams(-self.streams)
            self.streams = 0  # the epoch's streams are gone with it
            self.live_streams = weakref.WeakSet()
            for free in self.free_lists.values():
                free.clear()
            for segments in self.segments.values():
                segments.clear()
            self.dropped_count += len(self.live)
            self.dropped_bytes += self.used
            self.live.clear()
            self.sites.clear()
            self.used = self.pool_bytes = self.reserved = 0
            self.high_used = self.high_reserved = 0
            self.churn = 0.0
            return old

    def stats(self) -> dict:
        """A consistent snapshot of the counters (queued frees applied first)."""
        if self.ordered:
            self._poll_ordered()
        with self.lock:
            self._apply_pending_locked()
            return {
                "pending_free_bytes": sum(entry[2] for entry in list(self.ordered))
                + sum(size * len(ptrs) for lists in list(self.by_stream.values())
                      for (_, size), ptrs in list(lists.items())),
                "streams": self.streams,
                "used_bytes": self.used,
                "reserved_bytes": self.used + self.pool_bytes,
                "peak_used_bytes": self.peak,
                "alloc_count": self.alloc_count,
                "alloc_bytes": self.alloc_bytes,
                "free_count": self.alloc_count - len(self.live) - self.dropped_count,
                "free_bytes": self.alloc_bytes - self.used - self.dropped_bytes,
                "cache_hits": self.cache_hits,
                "oom_retries": self.oom_retries,
                "oom_last_step": self.oom_last_step,
                "limit_bytes": self.limit,
                "pool_cached_bytes": self.pool_bytes,
                "pool_free_blocks": sum(len(p) for f in self.free_lists.values()
                                        for p in f.values())
                + sum(len(s.free) for s in self.segments.values()),
                "pool_segments": sum(len(s.segments) for s in self.segments.values()),
                "live_allocations": len(self.live),
                "backend_alloc_count": self.backend_allocs,
                "backend_free_count": self.backend_frees,
                "generation": self.epoch.generation,
            }

    def reset_peak(self) -> None:
        with self.lock:
            self._apply_pending_locked()
            self.peak = self.used


def _pop(ptrs: list[int] | None) -> int | None:
    """The last of ``ptrs`` (None when empty or None); safe against another thread."""
    try:
        return ptrs.pop() if ptrs else None
    except IndexError:
        return None


def timed(fn: Callable, *args):
    """Run ``fn`` and add its time to every active recorder (only called while recording)."""
    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        dt = time.perf_counter() - t0
        for rec in state.recorders:
            rec.seconds += dt
