"""Replay of a mixed-size allocation trace through a device's pool (``gpuarrays bench``'s
``pool-trace`` group and ``benchmarks/pool_trace.py``); targets in docs/design.md, "Performance".

A trace is a list of events: ``requests`` allocations, each freed before the allocation of
the step it dies in.  Every family is seeded, so every run replays the same sequence
(:data:`FAMILIES`, :func:`make_trace`):

* ``mixed``: sizes log-uniform from 256 B to 64 MiB, lifetimes geometric of mean 48;
* ``long-short``: a tenth of the arrays live for most of the trace (model weights,
  buffers), the rest for a few steps (temporaries), sizes log-uniform as ``mixed``;
* ``growing``: a working set whose sizes grow by about 0.1 % a step from 64 KiB to about
  24 MiB (an array rebuilt bigger each iteration), the old one freed a few steps later;
* ``sawtooth``: phases that allocate arrays of rising sizes and then free them all at once
  (a batch pipeline), each phase's sizes drawn anew;
* ``split-edges``: sizes just above the pool's own thresholds (the small arena's 1 MiB,
  the huge arena's 32 MiB, powers of two and the 1.5x split bound of a segment), where a
  pool that rounds or splits badly loses most.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

import gpuarrays as ga

__all__ = ["make_trace", "replay", "TraceResult"]


FAMILIES = ("mixed", "long-short", "growing", "sawtooth", "split-edges")


def make_trace(requests: int = 6000, seed: int = 0, low: int = 256, high: int = 64 << 20,
               lifetime: int = 48, family: str = "mixed") -> list[tuple[int, int]]:
    """Events ``(id, size)``: an allocation when ``size > 0``, the free of ``id`` when 0."""
    rng = np.random.default_rng(seed)
    if family == "sawtooth":
        return _sawtooth(rng, requests, low, high)
    sizes = np.exp(rng.uniform(math.log(low), math.log(high), requests)).astype(np.int64)
    lives = rng.geometric(1.0 / lifetime, requests)
    if family == "long-short":
        long = rng.random(requests) < 0.1
        lives = np.where(long, rng.integers(requests // 4, requests, requests),
                         rng.geometric(1.0 / 4, requests))
    elif family == "growing":
        sizes = (64 << 10) * np.exp(np.arange(requests) * (math.log(384) / requests))
        sizes = (sizes * rng.uniform(0.98, 1.02, requests)).astype(np.int64)
        lives = rng.integers(1, 8, requests)
    elif family == "split-edges":
        edges = np.array([1 << 20, 32 << 20, 2 << 20, 4 << 20, 8 << 20, 3 << 19, 3 << 21])
        sizes = (edges[rng.integers(0, len(edges), requests)]
                 + rng.integers(1, 4096, requests)).astype(np.int64)
        lives = rng.geometric(1.0 / 16, requests)
    elif family != "mixed":
        raise ValueError(f"unknown trace family {family!r}; expected one of {FAMILIES}")
    return _events(sizes, lives)


def _sawtooth(rng, requests: int, low: int, high: int) -> list[tuple[int, int]]:
    """Phases of 20-80 allocations of rising sizes, all freed when the phase ends."""
    events: list[tuple[int, int]] = []
    i = 0
    while i < requests:
        n = min(int(rng.integers(20, 80)), requests - i)
        top = math.exp(rng.uniform(math.log(low * 64), math.log(high / 4)))
        sizes = np.geomspace(low, top, n) * rng.uniform(0.9, 1.1, n)
        events.extend((i + k, int(size)) for k, size in enumerate(sizes))
        events.extend((i + k, 0) for k in range(n))
        i += n
    return events


def _events(sizes, lives) -> list[tuple[int, int]]:
    requests = len(sizes)
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
