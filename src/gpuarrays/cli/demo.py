"""``gpuarrays demo``: mini-batch k-means over a stream of batches, without and with an
allocation cache.

The workload is what an online clustering job does with a device: batches of
points arrive from the host, and each one moves the cluster centres
(Sculley's mini-batch k-means, a per-centre learning rate of one over the
points it has seen).  One step, written with nothing but the array API
(:func:`kmeans_step`, which also runs on NumPy -- the oracle):

* squared distances of every point to every centre (broadcasting, ``sum``);
* each point's nearest centre (``argmin``) and the batch's inertia (``min``, ``sum``);
* a one-hot assignment (``==`` against ``arange``, ``astype``), the points and
  their sum per centre (``sum`` over a broadcast product);
* the centre update (``maximum``, divide, add).

Every step allocates the same twenty-odd temporaries.  Without a cache each is
an allocation from the device pool; inside ``ga.cached(cache)`` the cache hands
the same buffers back on every step.  The demo runs the stream both ways
(``--repeats`` times each, alternating), checks the final centres and inertia
against NumPy running the same code, and prints the median time, the time
range, allocations, platform allocations, peak memory and cache hits side by
side.  Its verdict rests on the allocation counts and the peak; it claims a
speed difference only when the repeats of the two runs do not overlap.  With
``--plot`` it records ``ga.memory_history`` during one repeat of each and
draws the memory timeline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import sys
import time
from typing import TextIO

import numpy as np

import gpuarrays as ga

from .pipeline import Progress
from .plot import block_names

__all__ = ["KMeansResult", "make_stream", "kmeans_step", "run_kmeans", "numpy_kmeans",
           "run_demo", "conclusion", "buffer_names", "main"]

POINTS = 4096   # points per batch
DIM = 16        # features per point
K = 8           # clusters
DTYPE = np.float32


def make_stream(count: int, points: int = POINTS, dim: int = DIM, k: int = K,
                seed: int = 0) -> list[np.ndarray]:
    """``count`` host batches of ``points`` float32 points around ``k`` well-separated
    centres (made before timing starts)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=8.0, size=(k, dim))
    out = []
    for _ in range(count):
        which = rng.integers(0, k, points)
        out.append((centres[which] + rng.normal(size=(points, dim))).astype(DTYPE))
    return out


def kmeans_step(xp, x, centres, counts, ks):
    """One mini-batch k-means step with the array API namespace ``xp``.

    ``x``: (n, d) points; ``centres``: (k, d); ``counts``: (k,) points seen per centre;
    ``ks``: ``arange(k)``.  Returns the new centres, the new counts and the batch's
    inertia (a 0-d array: nothing reaches the host).
    """
    diff = x[:, None, :] - centres[None, :, :]                      # (n, k, d)
    d2 = xp.sum(diff * diff, axis=2)                                # (n, k)
    labels = xp.argmin(d2, axis=1)                                  # (n,)
    inertia = xp.sum(xp.min(d2, axis=1))                            # ()
    onehot = xp.astype(labels[:, None] == ks[None, :], x.dtype)     # (n, k)
    batch_counts = xp.sum(onehot, axis=0)                           # (k,)
    batch_sums = xp.sum(onehot[:, :, None] * x[:, None, :], axis=0)  # (k, d)
    new_counts = counts + batch_counts
    step = (batch_sums - batch_counts[:, None] * centres) / xp.maximum(new_counts, 1.0)[:, None]
    return centres + step, new_counts, inertia


@dataclasses.dataclass
class KMeansResult:
    """What one run of the stream measured (one repeat)."""

    label: str
    batches: int
    seconds: float
    allocations: int
    platform_allocations: int
    cache_hits: int
    peak_bytes: int
    centres: np.ndarray
    inertia: float


def _start(stream: list[np.ndarray], k: int):
    return stream[0][:k].copy(), np.zeros(k, DTYPE)


def numpy_kmeans(stream: list[np.ndarray], batches: int, k: int = K):
    """The same job on NumPy: (final centres, total inertia)."""
    centres, counts = _start(stream, k)
    ks = np.arange(k)
    total = 0.0
    for i in range(batches):
        centres, counts, inertia = kmeans_step(np, stream[i % len(stream)], centres, counts, ks)
        total += float(inertia)
    return centres, total


def run_kmeans(stream: list[np.ndarray], batches: int, device=None,
               cache: ga.AllocCache | None = None, label: str | None = None,
               progress: Progress | None = None, k: int = K) -> KMeansResult:
    """Run ``batches`` steps on ``device`` (inside ``ga.cached(cache)`` when a cache is
    given) and measure them: time, allocations and cache hits (``ga.record_allocations``),
    platform allocations (the pool's ``backend_alloc_count``) and the peak in use."""
    if batches < 1:
        raise ValueError(f"batches must be at least 1, got {batches}")
    dev = ga.get_device(device)
    label = label or ("with cache" if cache is not None else "without cache")
    c0, n0 = _start(stream, k)
    centres = ga.asarray(c0, device=dev)
    counts = ga.asarray(n0, device=dev)
    ks = ga.arange(k, device=dev)
    total = ga.zeros((), DTYPE, device=dev)
    ga.synchronize(dev)
    ga.reset_peak_memory_stats(dev)
    platform = ga.memory_stats(dev)["backend_alloc_count"]
    with ga.record_allocations() as rec:
        t0 = time.perf_counter()
        for i in range(batches):
            with ga.cached(cache) if cache is not None else contextlib.nullcontext():
                x = ga.asarray(stream[i % len(stream)], device=dev)  # the batch arrives
                centres, counts, inertia = kmeans_step(ga, x, centres, counts, ks)
                total = total + inertia
                del x, inertia
            if progress is not None:
                progress(label, i + 1, batches)
        ga.synchronize(dev)
        seconds = time.perf_counter() - t0
    platform = ga.memory_stats(dev)["backend_alloc_count"] - platform
    peak = ga.memory_stats(dev)["peak_used_bytes"]
    result = KMeansResult(label, batches, seconds, rec.count, platform, rec.cache_hits, peak,
                          centres.get(), float(total))
    for a in (centres, counts, ks, total):  # before the cache goes: nothing of it stays busy
        a.free()
    return result


def _range(seconds: list[float]) -> str:
    return f"{1e3 * min(seconds):.1f}-{1e3 * max(seconds):.1f} ms"


def _table(rows: list[tuple[KMeansResult, list[float], bool]]) -> str:
    from .._common.sizes import format_bytes

    lines = [
        ("", *(r.label for r, _, _ in rows)),
        ("median time", *(f"{1e3 * statistics.median(t):.1f} ms" for _, t, _ in rows)),
        ("time range", *(_range(t) for _, t, _ in rows)),
        ("allocations", *(str(r.allocations) for r, _, _ in rows)),
        ("platform allocations", *(str(r.platform_allocations) for r, _, _ in rows)),
        ("cache hits", *(str(r.cache_hits) for r, _, _ in rows)),
        ("peak memory", *(format_bytes(r.peak_bytes) for r, _, _ in rows)),
        ("matches NumPy", *("yes" if ok else "NO" for _, _, ok in rows)),
    ]
    widths = [max(len(row[i]) for row in lines) for i in range(len(lines[0]))]
    out = []
    for row in lines:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in
                                             zip(row[1:], widths[1:], strict=True)]
        out.append("  " + "   ".join(cells))
    return "\n".join(out)


def conclusion(plain: KMeansResult, cached: KMeansResult, plain_times: list[float],
               cached_times: list[float]) -> str:
    """What the cache changed: allocations and peak (stable), and speed only when the
    repeats of the two runs do not overlap (at least three each)."""
    from .._common.sizes import format_bytes

    if cached.allocations:
        allocs = (f"{cached.allocations} allocations instead of {plain.allocations} "
                  f"({cached.cache_hits} cache hits)")
    else:
        allocs = f"no allocations instead of {plain.allocations} ({cached.cache_hits} cache hits)"
    peak = cached.peak_bytes - plain.peak_bytes
    peak_text = ("the same peak memory" if peak == 0 else
                 f"{format_bytes(abs(peak))} {'more' if peak > 0 else 'less'} peak memory")
    if min(len(plain_times), len(cached_times)) < 3:
        speed = "no speed claim (fewer than three repeats)"
    elif max(cached_times) < min(plain_times):
        ratio = statistics.median(plain_times) / statistics.median(cached_times)
        speed = f"{ratio:.2f}x faster (every repeat)"
    elif min(cached_times) > max(plain_times):
        ratio = statistics.median(cached_times) / statistics.median(plain_times)
        speed = f"{ratio:.2f}x slower (every repeat)"
    else:
        speed = "no speed claim: the repeats overlap (the warm pool is already cheap here)"
    return f"With the cache: {allocs}, {peak_text}; {speed}."


def buffer_names(device: ga.Device, points: int = POINTS, dim: int = DIM,
                 k: int = K) -> dict[int, str]:
    """Pool block size (requests rounded up to 512 B) -> the step's buffers of that size.

    The demo's own frames are inside the gpuarrays package, which the history leaves
    out of allocation stacks, so the timeline names its bands after the buffers of
    :func:`kmeans_step` instead."""
    f = np.dtype(DTYPE).itemsize
    buffers = (
        ("batch (upload)", points * dim * f),
        ("differences (n, k, d)", points * k * dim * f),
        ("squared distances (n, k)", points * k * f),
        ("labels (argmin)", points * 8),
        ("one-hot (n, k)", points * k),
        ("nearest distance (n,)", points * f),
        ("centres and updates (k, d)", k * dim * f),
        ("counts (k,)", k * f),
    )
    return block_names(buffers)


def _plot(snapshots: list[tuple[str, dict]], path: str, device) -> None:
    from .plot import plot_runs

    names = buffer_names(device)
    plot_runs(snapshots, path, device, names,
              title=f"gpuarrays demo on {device}: k-means memory in use, "
                    "without and with a cache")


def run_demo(device=None, iterations: int = 60, repeats: int = 5, plot: str | None = None,
             out: TextIO | None = None, progress: TextIO | None = None) -> int:
    """The ``gpuarrays demo`` command; returns the exit status."""
    out = sys.stdout if out is None else out
    dev = ga.get_device(device)
    stream = make_stream(min(iterations, 8))
    print(f"gpuarrays demo on {dev} ({dev.name}): mini-batch k-means, {iterations} batches of "
          f"{POINTS} points x {DIM} features into {K} clusters, {repeats} repeats without and "
          "with an allocation cache", file=out)
    run_kmeans(stream, 1, dev)  # warm-up outside the measurement: compiles kernels (OpenCL)
    t0 = time.perf_counter()
    want_centres, want_inertia = numpy_kmeans(stream, iterations)  # the oracle, timed once
    numpy_seconds = time.perf_counter() - t0
    report = Progress(progress)
    times: dict[str, list[float]] = {"without cache": [], "with cache": []}
    first: dict[str, KMeansResult] = {}
    snapshots: list[tuple[str, dict]] = []
    for rep in range(repeats):  # alternate, so drift hits both alike
        order = (None, "cache") if rep % 2 == 0 else ("cache", None)
        for which in order:
            cache = ga.AllocCache() if which else None
            label = "with cache" if which else "without cache"
            ga.trim(dev)  # every run starts from an empty pool
            record = plot and rep == 0
            if record:
                ga.memory_history.start(stacks=True)
            try:
                r = run_kmeans(stream, iterations, dev, cache, label,
                               progress=report if rep == repeats - 1 else None)
            finally:
                if record:
                    ga.memory_history.stop()
                    snapshots.append((label, ga.memory_history.snapshot()))
                if cache is not None:
                    cache.free()
            times[label].append(r.seconds)
            first.setdefault(label, r)
    rows = []
    for label in ("without cache", "with cache"):
        r = first[label]
        ok = (np.allclose(r.centres, want_centres, rtol=1e-4, atol=1e-3)
              and abs(r.inertia - want_inertia) <= 1e-4 * abs(want_inertia))
        rows.append((r, times[label], ok))
    print(_table(rows), file=out)
    print(conclusion(rows[0][0], rows[1][0], rows[0][1], rows[1][1]), file=out)
    print(f"For scale: the same job on NumPy (the oracle, one run) took "
          f"{1e3 * numpy_seconds:.1f} ms.", file=out)
    ok = all(good for _, _, good in rows)
    if not ok:
        print("ERROR: the device results differ from NumPy's", file=out)
    if plot:
        snapshots.sort(key=lambda s: s[0] != "without cache")
        _plot(snapshots, plot, dev)
        print(f"memory timeline written to {plot}", file=out)
    return 0 if ok else 1


def add_arguments(parser) -> None:
    parser.add_argument("--device", default=None,
                        help="device spec such as cpu:0 or opencl:0 (default: the default device)")
    parser.add_argument("--plot", metavar="PATH", default=None,
                        help="record the memory history and write a PNG timeline of both runs")
    parser.add_argument("--iterations", type=int, default=60, metavar="N",
                        help="batches per run (default 60)")
    parser.add_argument("--repeats", type=int, default=5, metavar="R",
                        help="runs without and with the cache, alternating (default 5)")


def main(args) -> int:
    """Entry point used by ``gpuarrays demo``."""
    for name in ("iterations", "repeats"):
        if getattr(args, name) < 1:
            print(f"gpuarrays demo: --{name} must be at least 1, got {getattr(args, name)}",
                  file=sys.stderr)
            return 2
    return run_demo(args.device, args.iterations, args.repeats, args.plot, progress=sys.stderr)
