"""Replay of a mixed-size allocation trace through a device's pool (``gpuarrays bench``'s
``pool-trace`` group and ``benchmarks/pool_trace.py``); targets in docs/design.md, "Performance".

The trace: ``requests`` allocations whose sizes are log-uniform from 256 B to 64 MiB;
each array lives a geometric number of steps of mean ``lifetime`` (so about that many
are alive at once) and is freed before the allocation of the step it dies in.  It is
seeded, so every run replays the same sequence.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

import gpuarrays as ga

__all__ = ["make_trace", "replay", "TraceResult"]


def make_trace(requests: int = 6000, seed: int = 0, low: int = 256, high: int = 64 << 20,
               lifetime: int = 48) -> list[tuple[int, int]]:
    """Events ``(id, size)``: an allocation when ``size > 0``, the free of ``id`` when 0."""
    rng = np.random.default_rng(seed)
    sizes = np.exp(rng.uniform(math.log(low), math.log(high), requests)).astype(np.int64)
    lives = rng.geometric(1.0 / lifetime, requests)
    deaths: dict[int, list[int]] = {}
    events: list[tuple[int, int]] = []
    for i in range(requests):
        events.extend((j, 0) for j in deaths.pop(i, ()))
        events.append((i, int(sizes[i])))
        deaths.setdefault(i + int(lives[i]), []).append(i)
    for step in sorted(deaths):
        events.extend((j, 0) for j in deaths[step])
    return events


@dataclasses.dataclass
class TraceResult:
    requests: int
    peak_used: int  # bytes, above what the device held before the replay
    peak_requested: int  # bytes asked for (not rounded), at its peak
    peak_reserved: int
    platform_allocs_after_warmup: int  # in the second half of the requests
    requests_after_warmup: int
    alloc_ns_mean: float  # per request of the second half
    alloc_ns_median: float
    hit_ns_median: float  # an exact-size warm hit, timed the same way

    @property
    def reserved_over_used(self) -> float:
        return self.peak_reserved / self.peak_used

    @property
    def platform_fraction(self) -> float:
        return self.platform_allocs_after_warmup / self.requests_after_warmup


def _hit_ns(device, repeat: int = 2001) -> float:
    ga.empty(4096, np.uint8, device=device).free()
    times = []
    clock = time.perf_counter_ns
    for _ in range(repeat):
        t0 = clock()
        a = ga.empty(4096, np.uint8, device=device)
        times.append(clock() - t0)
        a.free()
    return float(np.median(times))


def replay(device=None, events: list[tuple[int, int]] | None = None) -> TraceResult:
    """Replay ``events`` (default: ``make_trace()``) on ``device``'s pool, from a trimmed pool."""
    dev = ga.get_device(device)
    events = make_trace() if events is None else events
    ga.trim(dev)
    start = ga.memory_stats(dev)
    used0, reserved0 = start["used_bytes"], start["reserved_bytes"]
    ga.reset_peak_memory_stats(dev)
    total = sum(1 for _, size in events if size)
    half = total // 2
    live: dict[int, ga.GPUArray] = {}
    times: list[int] = []
    peak_reserved = requested = peak_requested = 0
    allocs_at_half = None
    clock = time.perf_counter_ns
    done = 0
    for ident, size in events:
        if size == 0:
            a = live.pop(ident)
            requested -= a.nbytes
            a.free()
            continue
        if done == half:
            allocs_at_half = ga.memory_stats(dev)["backend_alloc_count"]
        t0 = clock()
        a = ga.empty(size, np.uint8, device=dev)
        t1 = clock()
        done += 1
        if done > half:
            times.append(t1 - t0)
        live[ident] = a
        requested += size
        peak_requested = max(peak_requested, requested)
        peak_reserved = max(peak_reserved, ga.memory_stats(dev)["reserved_bytes"] - reserved0)
    end = ga.memory_stats(dev)
    result = TraceResult(
        requests=total, peak_used=end["peak_used_bytes"] - used0,
        peak_requested=peak_requested, peak_reserved=peak_reserved,
        platform_allocs_after_warmup=end["backend_alloc_count"] - (allocs_at_half or 0),
        requests_after_warmup=total - half, alloc_ns_mean=float(np.mean(times)),
        alloc_ns_median=float(np.median(times)), hit_ns_median=_hit_ns(dev))
    ga.trim(dev)
    return result
