"""The one entry point every new allocation goes through.

Dispatches to the active allocation cache (``ga.cached``) or to the device's
pool, and times the allocator for ``record_allocations``.  Zero-size requests
need no memory: they get a NULL storage without touching pools or caches.
"""

from __future__ import annotations

from .cache import current_cache
from .pool import timed
from .state import state
from .storage import NULL_HOME, Storage


def new_storage(device, kind: str, nbytes: int) -> Storage:
    """A fresh storage of ``nbytes`` on ``device`` with no handles yet."""
    if nbytes == 0:
        mgr = device.memory
        if kind not in mgr.free_lists:
            raise mgr._bad_kind(kind)
        return Storage(0, 0, device, kind, NULL_HOME, mgr.epoch)
    cache = current_cache.get()
    if state.recorders:  # timed only while a record_allocations() block is open
        if cache is not None:
            return timed(cache.storage, device, kind, nbytes)
        return timed(device.memory.new_storage, kind, nbytes)
    if cache is None:
        return device.memory.new_storage(kind, nbytes)  # the hot path: a warm pool
    return cache.storage(device, kind, nbytes)
