"""Allocation caches that never alias.

Inside ``with ga.cached(cache):`` every allocation is served by ``cache``:
buffers are keyed by (device, kind, exact byte size) and a buffer is handed
out again only once no live array uses it.  Buffers stay in the cache when
their arrays die; ``cache.free()``, garbage collection of the cache, or the
out-of-memory ladder (unused buffers only) give them back to the pool.

Lifetimes: a storage served by a cache has the cache as its home, so it keeps
the cache alive; the cache tracks its busy storages to invalidate them in
``free()``.  Releases may come from finalizers: they only append to
``_returned`` (atomic) and are applied under the cache's lock later.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections.abc import Iterator
from contextvars import ContextVar

from .. import _core
from .._common.errors import CacheInUseError, GPUArraysWarning
from .._common.sizes import format_bytes
from .pool import ladder_hooks, usage_hooks
from .state import state
from .storage import FREED_CACHE

__all__ = ["AllocCache", "cached", "uncached", "current_cache"]

current_cache: ContextVar[AllocCache | None] = ContextVar("gpuarrays_cache", default=None)
_caches: weakref.WeakSet[AllocCache] = weakref.WeakSet()


class AllocCache(_core.Cache):
    """A set of reusable buffers for loops; use it with ``ga.cached(cache)``.

    Statistics: ``nbytes`` (sum of the requested sizes of its buffers),
    ``n_free``, ``n_busy``, ``hits``, ``misses``.  ``free()`` raises
    ``CacheInUseError`` while a ``cached(cache)`` block is active anywhere.
    """

    # The buffers (_lock, _free, _returned, _scopes, hits, misses, the busy storages) and
    # the hot paths -- storage(device, kind, nbytes), a hit or a new block from the pool;
    # release_storage(storage), which never waits for the lock; _drain_locked() -- are
    # compiled (_core.Cache, whose source says how).  _free: (manager, kind) -> {nbytes ->
    # [(ptr, block, epoch)]}; _busy_list() / _take_busy(): the storages served and not
    # yet released.
    __slots__ = ()

    def __init__(self) -> None:
        _caches.add(self)

    def _note_reuse(self, device, kind: str, ptr: int, block: int) -> None:
        """record_allocations and history bookkeeping of a hit (only while they are active)."""
        for rec in state.recorders:
            rec.cache_hits += 1
        if state.history is not None:
            state.history.record("reuse", device, block, ptr, kind)

    # giving back --------------------------------------------------------------------
    def free(self) -> None:
        """Release every buffer to the pool; arrays still using one become freed.

        Raises ``CacheInUseError`` while a ``cached(cache)`` block is active.
        """
        if self._scopes:
            raise CacheInUseError(
                f"cannot free an AllocCache that is in active use ({len(self._scopes)} "
                f"cached() block(s) still open); call free() after the block ends")
        with self._lock:
            self._drain_locked()
            blocks = self._take_free_locked(None)
            busy = self._take_busy()
        for st in busy:  # to the pool now, or once no host view or capsule holds it
            st._release_to(FREED_CACHE, st.device.memory)
        for mgr, kind, ptr, block, epoch in blocks:
            mgr.give_block(kind, ptr, block, epoch)

    def _take_free_locked(self, mgr) -> list[tuple]:
        """Take the free buffers (of one manager, or all): [(mgr, kind, ptr, block, epoch)].

        The inner dicts and lists stay (emptied): the compiled hot paths keep them.
        """
        out = []
        for (owner, kind), sizes in self._free.items():
            if mgr is None or owner is mgr:
                for buffers in sizes.values():
                    out.extend((owner, kind, ptr, block, epoch) for ptr, block, epoch in buffers)
                    buffers.clear()
        return out

    def release_unused(self, device) -> None:
        """Ladder step: give the device's unused buffers back to the pool."""
        with self._lock:
            self._drain_locked()
            blocks = self._take_free_locked(device.memory)
        for mgr, kind, ptr, block, epoch in blocks:
            mgr.give_block(kind, ptr, block, epoch)

    def __del__(self) -> None:
        try:
            if state.shutting_down:
                return
            self._drain_locked()
            for mgr, kind, ptr, block, epoch in self._take_free_locked(None):
                mgr.give_block(kind, ptr, block, epoch)
        except Exception as e:  # a finalizer never raises
            try:
                warnings.warn(f"releasing an AllocCache failed: {e!r}", GPUArraysWarning,
                              stacklevel=1)
            except Exception:
                pass

    # statistics ---------------------------------------------------------------------
    def _snapshot(self) -> tuple[list, list]:
        with self._lock:
            self._drain_locked()
            free = [((mgr, kind, nbytes), buf) for (mgr, kind), sizes in self._free.items()
                    for nbytes, buffers in sizes.items() for buf in buffers if buf[2].live]
            busy = [st for st in self._busy_list() if st._epoch.live]
        return free, busy

    @property
    def n_free(self) -> int:
        return len(self._snapshot()[0])

    @property
    def n_busy(self) -> int:
        return len(self._snapshot()[1])

    @property
    def nbytes(self) -> int:
        free, busy = self._snapshot()
        return sum(key[2] for key, _ in free) + sum(st.nbytes for st in busy)

    def usage(self, device) -> tuple[int, int, int]:
        """(block bytes held, free buffers, busy buffers) on ``device``."""
        free, busy = self._snapshot()
        mgr = device.memory
        held = sum(buf[1] for key, buf in free if key[0] is mgr)
        held += sum(st.block for st in busy if st.device.memory is mgr)
        return (held, sum(1 for key, _ in free if key[0] is mgr),
                sum(1 for st in busy if st.device.memory is mgr))

    def __repr__(self) -> str:
        free, busy = self._snapshot()
        nbytes = sum(key[2] for key, _ in free) + sum(st.nbytes for st in busy)
        return f"AllocCache(n_free={len(free)}, n_busy={len(busy)}, nbytes={format_bytes(nbytes)})"


@contextlib.contextmanager
def cached(cache: AllocCache) -> Iterator[AllocCache]:
    """Serve every allocation in the block (this thread/task) from ``cache``."""
    if not isinstance(cache, AllocCache):
        raise TypeError(f"cached() expects a ga.AllocCache, got {type(cache).__name__} {cache!r}")
    token = current_cache.set(cache)
    cache._scopes.append(None)
    try:
        yield cache
    finally:
        cache._scopes.pop()
        current_cache.reset(token)


@contextlib.contextmanager
def uncached() -> Iterator[None]:
    """Turn caching off inside the block (allocations go to the pool)."""
    token = current_cache.set(None)
    try:
        yield
    finally:
        current_cache.reset(token)


def _ladder_step(device) -> None:
    for cache in list(_caches):
        cache.release_unused(device)


def _usage(device) -> tuple[int, int, int]:
    held = n_free = n_busy = 0
    for cache in list(_caches):
        h, f, b = cache.usage(device)
        held, n_free, n_busy = held + h, n_free + f, n_busy + b
    return held, n_free, n_busy


ladder_hooks.append(_ladder_step)
usage_hooks.append(_usage)
