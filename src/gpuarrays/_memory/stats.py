"""Memory statistics, limits and reports.

Figures come from each device's ``pool.MemoryManager``; queued frees are
applied before anything is reported, so the numbers are exact.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TextIO

from .._common.sizes import format_bytes
from .devices import get_device
from .pool import usage_hooks
from .state import state
from .storage import quarantined

__all__ = ["memory_stats", "reset_peak_memory_stats", "memory_status", "record_allocations",
           "trim", "set_memory_limit", "synchronize", "Recorder"]


def memory_stats(device=None) -> dict:
    """Counters of one device: ``used_bytes``, ``reserved_bytes``, ``peak_used_bytes``,
    ``alloc_count``, ``alloc_bytes``, ``free_count``, ``free_bytes``, ``cache_hits``,
    ``oom_retries``, ``limit_bytes`` and more (docs/design.md, "Pools, limits and the
    out-of-memory ladder", lists every key).

    Byte counts are in pool blocks (requests rounded up to 512 B).
    """
    dev = get_device(device)
    stats = dev.memory.stats()
    held, n_free, n_busy = _cache_usage(dev)
    stats["cache_held_bytes"] = held
    stats["cache_buffers_free"] = n_free
    stats["cache_buffers_busy"] = n_busy
    stats["quarantined_bytes"] = sum(st.block for st in quarantined(dev))
    return stats


def _cache_usage(dev) -> tuple[int, int, int]:
    held = n_free = n_busy = 0
    for hook in usage_hooks:
        h, f, b = hook(dev)
        held, n_free, n_busy = held + h, n_free + f, n_busy + b
    return held, n_free, n_busy


def reset_peak_memory_stats(device=None) -> None:
    """Set ``peak_used_bytes`` to the current ``used_bytes``."""
    get_device(device).memory.reset_peak()


def trim(device=None) -> int:
    """Give every unused pool block of the device back to the platform; returns bytes."""
    return get_device(device).memory.trim()


def set_memory_limit(limit, device=None) -> None:
    """Bound the device's reserved bytes (``"8GiB"``, ``"75%"``, bytes); ``None`` removes it."""
    get_device(device).memory.set_limit(limit)


def synchronize(device=None) -> None:
    """Wait for the device's queued work (queued frees are applied first)."""
    get_device(device).synchronize()


def status_text(device=None, top: int = 5) -> str:
    """The human report printed by ``memory_status`` and in ``OutOfMemoryError``."""
    dev = get_device(device)
    mgr = dev.memory
    s = mgr.stats()
    held, n_free, n_busy = _cache_usage(dev)
    lines = [
        f"memory of {dev} ({dev.name}):",
        f"  in use         {format_bytes(s['used_bytes'] - held)} in "
        f"{s['live_allocations'] - n_free - n_busy} allocations",
        f"  held by caches {format_bytes(held)} ({n_busy} buffers in use, {n_free} free)",
        f"  cached in pool {format_bytes(s['pool_cached_bytes'])} "
        f"({s['pool_free_blocks']} free blocks)",
        f"  reserved       {format_bytes(s['reserved_bytes'])}, limit "
        f"{format_bytes(s['limit_bytes'])}, device total {format_bytes(dev.total_memory)}",
        f"  peak used      {format_bytes(s['peak_used_bytes'])}",
    ]
    held_back = quarantined(dev)
    if held_back:
        lines.append(f"  quarantined    {format_bytes(sum(st.block for st in held_back))} in "
                     f"{len(held_back)} freed allocations that host views or DLPack capsules "
                     f"still use")
    largest = sorted(list(mgr.live.items()), key=lambda item: -item[1])[:top]
    if largest:
        lines.append("  largest live allocations:")
        for ptr, size in largest:
            site = mgr.sites.get(ptr)
            where = f"  at {site}" if site else ""
            lines.append(f"    {format_bytes(size):>10}  0x{ptr:x}{where}")
        if state.history is None:
            lines.append("  (start ga.memory_history to see where allocations were made)")
    return "\n".join(lines)


def memory_status(device=None, file: TextIO | None = None) -> None:
    """Print a short human report of the device's memory."""
    print(status_text(device), file=sys.stdout if file is None else file)


class Recorder:
    """What a ``record_allocations()`` block allocated (cache hits and wraps excluded)."""

    __slots__ = ("count", "bytes", "cache_hits", "seconds")

    def __init__(self) -> None:
        self.count = 0
        self.bytes = 0
        self.cache_hits = 0
        self.seconds = 0.0

    def __repr__(self) -> str:
        return (f"Recorder(count={self.count}, bytes={self.bytes}, cache_hits={self.cache_hits}, "
                f"seconds={self.seconds:.6f})")


@contextlib.contextmanager
def record_allocations() -> Iterator[Recorder]:
    """Count allocations (all threads, all devices) made inside the block."""
    rec = Recorder()
    state.recorders.append(rec)
    try:
        yield rec
    finally:
        state.recorders.remove(rec)
