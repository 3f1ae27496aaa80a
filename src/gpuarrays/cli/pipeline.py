"""A memory-heavy batch pipeline (data movement only), without and with an allocation cache:
the iterative workload of ``gpuarrays bench`` (the ``workload`` group).  It was the first
``gpuarrays demo``; the demo now runs a compute job (``demo.py``).

The workload is what a data-loading stage of a training or inference loop does
with device memory, written with nothing but gpuarrays:

* a batch of images arrives from the host as ``uint8`` in NHWC layout (NumPy);
* it is uploaded (``ga.asarray``), viewed channels-first (``transpose``),
  converted to float32 (``astype``), cropped (a strided view), copied into a
  work buffer through the strided view, flipped (negative strides) and
  down-sampled into a second buffer (step-2 slices), flattened (``reshape``),
  reinterpreted as raw bytes (``view``) and packed behind a small header into a
  message buffer, which is copied back to the host (``.get()``).

Every iteration allocates the same few buffers.  Without a cache each of them
is an allocation from the device pool; inside ``ga.cached(cache)`` the cache
hands the same buffers back on every iteration (cache hits, not allocations).
:func:`run_pipeline` runs the loop both ways and prints time, allocations, cache
hits and peak memory side by side; with ``plot`` it records ``ga.memory_history``
during both runs and draws one memory timeline.  ``gpuarrays bench`` times
:func:`run_workload`.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import TextIO

import numpy as np

import gpuarrays as ga

from .plot import block_names

__all__ = ["Batch", "Progress", "RunResult", "pipeline_step", "numpy_step", "run_workload",
           "run_pipeline"]

# Shape of one host batch: (images, height, width, channels), uint8, NHWC.
BATCH_SHAPE = (64, 128, 128, 3)
CROP = 8  # pixels cropped from every border
HEADER = 8  # bytes of header in front of every packed image


@dataclasses.dataclass(frozen=True)
class Batch:
    """One host batch and its sequence number."""

    index: int
    images: np.ndarray  # uint8 (N, H, W, C)


def make_batches(count: int, shape: tuple[int, ...] = BATCH_SHAPE, seed: int = 0) -> list[Batch]:
    """``count`` deterministic host batches (made before timing starts)."""
    rng = np.random.default_rng(seed)
    return [Batch(i, rng.integers(0, 256, size=shape, dtype=np.uint8)) for i in range(count)]


def _feature_dtype(device: ga.Device) -> np.dtype:
    return np.dtype(np.float16 if device.supports(np.float16) else np.float32)


def pipeline_step(batch: Batch, device: ga.Device) -> np.ndarray:
    """Run one batch through the device pipeline; returns the packed messages (uint8).

    Every device array here is a temporary: it dies when the function returns,
    so an allocation cache needs one buffer per allocation site.
    """
    n, h, w, c = batch.images.shape
    raw = ga.asarray(batch.images, device=device)          # upload: uint8 NHWC
    chw = raw.transpose(0, 3, 1, 2)                        # view: channels first
    x = chw.astype(np.float32)                             # convert: new C-contiguous buffer
    crop = x[:, :, CROP:h - CROP, CROP:w - CROP]           # strided view, no copy
    work = ga.empty(crop.shape, np.float32, device=device)  # work buffer
    work[...] = crop                                       # strided write
    flipped = work[:, :, :, ::-1]                          # negative strides, no copy
    small = ga.empty((n, c, (h - 2 * CROP) // 2, (w - 2 * CROP) // 2), np.float32,
                     device=device)
    small[...] = flipped[:, :, ::2, ::2]                   # down-sample through step-2 views
    features = small.reshape(n, -1).astype(_feature_dtype(device))  # flatten (view), convert
    payload = features.view(np.uint8)                      # reinterpret as raw bytes
    packet = ga.empty((n, HEADER + payload.shape[1]), np.uint8, device=device)
    header = np.zeros((n, HEADER), np.uint8)
    header[:, :4] = np.frombuffer(np.uint32(batch.index).tobytes(), np.uint8)
    header[:, 4:] = np.arange(n, dtype=np.uint32).view(np.uint8).reshape(n, 4)
    packet[:, :HEADER] = header                            # write through a strided view
    packet[:, HEADER:] = payload
    return packet.get()                                    # download


def numpy_step(batch: Batch, device: ga.Device) -> np.ndarray:
    """The same pipeline in NumPy: the oracle the demo checks its results against."""
    n, h, w, c = batch.images.shape
    x = batch.images.transpose(0, 3, 1, 2).astype(np.float32)
    work = x[:, :, CROP:h - CROP, CROP:w - CROP][:, :, :, ::-1]
    small = np.ascontiguousarray(work[:, :, ::2, ::2])
    payload = small.reshape(n, -1).astype(_feature_dtype(device)).view(np.uint8)
    header = np.zeros((n, HEADER), np.uint8)
    header[:, :4] = np.frombuffer(np.uint32(batch.index).tobytes(), np.uint8)
    header[:, 4:] = np.arange(n, dtype=np.uint32).view(np.uint8).reshape(n, 4)
    return np.concatenate([header, payload], axis=1)


@dataclasses.dataclass
class RunResult:
    """What one run of the workload measured."""

    label: str
    iterations: int
    seconds: float
    allocations: int
    allocated_bytes: int
    cache_hits: int
    peak_bytes: int
    checksum: int
    correct: bool

    @property
    def per_iteration_ms(self) -> float:
        return 1e3 * self.seconds / self.iterations


class Progress:
    """A one-line progress bar on a stream (redrawn in place on a terminal, at most
    ten times a second; only the final state elsewhere)."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self._last = 0.0

    def __call__(self, label: str, done: int, total: int) -> None:
        if self.stream is None:
            return
        now = time.perf_counter()
        if done < total and (not self.tty or now - self._last < 0.1):
            return
        self._last = now
        _draw(label, done, total, self.stream, self.tty)


def _draw(label: str, done: int, total: int, stream: TextIO, tty: bool) -> None:
    width = 24
    filled = width * done // total
    bar = "#" * filled + "." * (width - filled)
    end = "\n" if done == total else ""
    stream.write(f"{chr(13) if tty else ''}  {label:<14} [{bar}] {done}/{total}{end}")
    stream.flush()


def run_workload(iterations: int, device=None, cache: ga.AllocCache | None = None,
                 batches: list[Batch] | None = None, label: str | None = None,
                 progress: TextIO | Progress | None = None, check: bool = True) -> RunResult:
    """Run the pipeline ``iterations`` times on ``device`` (inside ``ga.cached(cache)``
    when a cache is given) and measure it.

    Peak memory is ``memory_stats()["peak_used_bytes"]`` after
    ``reset_peak_memory_stats``; allocations and cache hits come from
    ``ga.record_allocations``.  With ``check`` the first batch is compared
    against :func:`numpy_step`.
    """
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    dev = ga.get_device(device)
    if batches is None:
        batches = make_batches(min(iterations, 4))
    label = label or ("with cache" if cache is not None else "without cache")
    correct = True
    checksum = 0
    report = progress if isinstance(progress, Progress) else Progress(progress)
    ga.synchronize(dev)
    ga.reset_peak_memory_stats(dev)
    with ga.record_allocations() as rec:
        t0 = time.perf_counter()
        for i in range(iterations):
            batch = batches[i % len(batches)]
            batch = Batch(i, batch.images)
            if cache is None:
                out = pipeline_step(batch, dev)
            else:
                with ga.cached(cache):
                    out = pipeline_step(batch, dev)
            checksum = (checksum + int(out[:, HEADER:].sum(dtype=np.uint64))) % (1 << 61)
            if i == 0:
                first = (batch, out)
            report(label, i + 1, iterations)
        ga.synchronize(dev)
        seconds = time.perf_counter() - t0
    peak = ga.memory_stats(dev)["peak_used_bytes"]
    if check:  # outside the timed loop
        correct = bool(np.array_equal(first[1], numpy_step(first[0], dev)))
    return RunResult(label, iterations, seconds, rec.count, rec.bytes, rec.cache_hits, peak,
                     checksum, correct)


def _table(results: list[RunResult]) -> str:
    from .._common.sizes import format_bytes

    rows = [
        ("", *(r.label for r in results)),
        ("wall time", *(f"{r.seconds:.3f} s" for r in results)),
        ("time / iteration", *(f"{r.per_iteration_ms:.2f} ms" for r in results)),
        ("allocations", *(str(r.allocations) for r in results)),
        ("allocated bytes", *(format_bytes(r.allocated_bytes) for r in results)),
        ("cache hits", *(str(r.cache_hits) for r in results)),
        ("peak memory", *(format_bytes(r.peak_bytes) for r in results)),
        ("matches NumPy", *("yes" if r.correct else "NO" for r in results)),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  " + "   ".join(cells))
    return "\n".join(lines)


def conclusion(plain: RunResult, cached: RunResult) -> str:
    """One line saying what the cache changed."""
    from .._common.sizes import format_bytes

    speed = plain.seconds / cached.seconds if cached.seconds > 0 else float("inf")
    if cached.allocations:
        allocs = (f"{plain.allocations / cached.allocations:.0f}x fewer allocations "
                  f"({cached.allocations} instead of {plain.allocations}; "
                  f"{cached.cache_hits} cache hits)")
    else:
        allocs = f"no allocations instead of {plain.allocations} ({cached.cache_hits} cache hits)"
    if speed >= 1.05:
        timing = f"{speed:.2f}x faster"
    elif speed <= 0.95:
        timing = f"{1 / speed:.2f}x slower"
    else:
        timing = "the same speed (the warm pool is already cheap here)"
    peak = cached.peak_bytes - plain.peak_bytes
    peak_text = ("the same peak memory" if peak == 0 else
                 f"{format_bytes(abs(peak))} {'more' if peak > 0 else 'less'} peak memory")
    return f"With the cache: {allocs}, {timing}, {peak_text}."


def buffer_names(device: ga.Device, shape: tuple[int, ...] = BATCH_SHAPE) -> dict[int, str]:
    """Pool block size (requests rounded up to 512 B) -> the pipeline buffers of that size.

    The demo's own frames are inside the gpuarrays package, which the history
    leaves out of allocation stacks, so the timeline names its bands after the
    buffers of :func:`pipeline_step` instead.
    """
    n, h, w, c = shape
    ch, cw = h - 2 * CROP, w - 2 * CROP
    feature = _feature_dtype(device).itemsize * c * (ch // 2) * (cw // 2)
    buffers = (
        ("upload (ga.asarray)", n * h * w * c),
        ("float32 copy (astype)", 4 * n * c * h * w),
        ("work buffer (crop)", 4 * n * c * ch * cw),
        ("down-sampled buffer", 4 * n * c * (ch // 2) * (cw // 2)),
        ("features (astype)", n * feature),
        ("packet (header + bytes)", n * (HEADER + feature)),
        ("header staging (upload)", n * HEADER),
    )
    return block_names(buffers)


def _plot(snapshots: list[tuple[str, dict]], path: str, device) -> None:
    """Draw both runs' histories, one panel each, with gpuarrays.cli.plot."""
    from .plot import plot_runs

    names = buffer_names(device)
    plot_runs(snapshots, path, device, names,
              title=f"gpuarrays pipeline on {device}: memory in use, without and with a cache")


def run_pipeline(device=None, iterations: int = 100, plot: str | None = None,
             out: TextIO | None = None, progress: TextIO | None = None) -> int:
    """Run the pipeline without and with a cache and print the comparison; the exit status."""
    out = sys.stdout if out is None else out
    dev = ga.get_device(device)
    batches = make_batches(min(iterations, 4))
    n, h, w, c = BATCH_SHAPE
    print(f"gpuarrays pipeline on {dev} ({dev.name}): {iterations} batches of {n} images "
          f"{h}x{w}x{c} uint8 -> crop, flip, down-sample, convert, pack", file=out)
    # Warm-up outside the measurement: compiles the device's kernels (OpenCL) once.
    pipeline_step(batches[0], dev)
    snapshots: list[tuple[str, dict]] = []
    results = []
    report = Progress(progress)
    for label, cache in (("without cache", None), ("with cache", ga.AllocCache())):
        ga.trim(dev)  # both runs start from an empty pool
        if plot:
            ga.memory_history.start(stacks=True)
        try:
            results.append(run_workload(iterations, dev, cache, batches, label,
                                        progress=report))
        finally:
            if plot:
                ga.memory_history.stop()
                snapshots.append((label, ga.memory_history.snapshot()))
        if cache is not None:
            print(f"  cache after the run: {cache!r}", file=out)
            cache.free()
    print(_table(results), file=out)
    print(conclusion(*results), file=out)
    ok = all(r.correct for r in results) and results[0].checksum == results[1].checksum
    if not ok:
        print("ERROR: the device results differ from NumPy's", file=out)
    if plot:
        _plot(snapshots, plot, dev)
        print(f"memory timeline written to {plot}", file=out)
    return 0 if ok else 1
