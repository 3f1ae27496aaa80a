"""Micro-benchmarks side by side in one process (``gpuarrays bench``); targets in docs/design.md.

One implementation, used by ``gpuarrays bench`` and by ``python benchmarks/run.py``.
Every figure is the median, over many repetitions, of the mean time per
operation of a loop timed with ``time.perf_counter_ns`` (the loop is compiled
from source, as ``timeit`` does, so no function call is added to the
operation; the garbage collector is off while a loop runs, as in ``timeit``).

Groups:

* ``derive``   -- ``a[1:]``, ``a.reshape(4096)``, ``a.view(np.int32)``, ``a.T`` of
  a 64x64 float32 array: gpuarrays vs NumPy vs PyTorch (vs ``pyopencl.array``
  on OpenCL devices);
* ``alloc``    -- allocate + free of a 4 KiB array from a warm pool vs
  ``np.empty`` / ``torch.empty`` (vs raw SVM and ``pyopencl.array.empty``);
* ``cache``    -- the same inside ``ga.cached`` (a cache hit) vs the pool path;
* ``fragmentation`` -- the pool path with 10, 1000 and 10000 free blocks of
  assorted sizes in the pool;
* ``dlpack``   -- ``numpy.from_dlpack(a)`` and ``ga.from_dlpack(np_array)`` vs
  PyTorch doing the same;
* ``copy``     -- host-to-device (``ga.asarray``) and device-to-host
  (``a.get(out=...)``) throughput vs a NumPy copy;
* ``workload`` -- a data-movement pipeline (``cli/pipeline.py``) without and with a cache;
* ``random``   -- ``random`` and ``standard_normal`` of 16 M float32 vs NumPy's
  ``default_rng`` and PyTorch CPU (vs a one-item-per-work-item write kernel on
  device back-ends: docs/random.md, "Speed");
* ``reduce``   -- ``sum``/``max``/``mean`` over all axes and axis 0 / 1 of a 4096x4096
  float32 array and of 16 M elements, ``cumulative_sum`` of 1 M and 16 M, vs NumPy,
  PyTorch CPU and ``pyopencl.array``/``pyopencl.scan`` (docs/reductions.md, "Speed").
* ``compute``  -- elementwise ``a + b``, ``a * 2``, ``exp(a)``, ``where(a > 0, a, 0)``
  at 1 to 16 M float32 vs NumPy, PyTorch, ``pyopencl.array`` and a one-item
  kernel; the enqueue path; data-movement kernels (cli/bench_compute.py);
* ``linalg``   -- ``matmul`` of N x N float32/float64 vs NumPy, PyTorch (cli/bench_linalg.py);
* ``sort``     -- ``sort``/``argsort`` of 1 M and 16 M float32 (cli/bench_sort.py);
* ``programs`` -- six whole programs written once against an array namespace (least
  squares, an MLP training loop, a 2-D stencil, a Monte-Carlo estimate, image filtering
  with a histogram, k-nearest neighbours), each checked against NumPy and timed under
  NumPy, PyTorch CPU and gpuarrays (cli/bench_programs.py; docs/performance.md);
* ``creation`` -- ``zeros``, ``ones``, ``full``, ``*_like``, ``arange``, ``linspace``, ``eye``,
  ``asarray`` of 100 and 1000 elements per call beside ``ga.empty``, NumPy and PyTorch CPU
  (the least time over interleaved loops; cli/bench_creation.py);
* ``pool-trace`` -- a seeded mixed-size trace replayed through the pool
  (``pool_trace.py``): peak reserved / peak used, platform allocations per
  request after warm-up, allocation time per request beside the exact-size hit.

Optional libraries (PyTorch; PyOpenCL and Mako on OpenCL devices) are imported
lazily.  Without one the run still completes: the columns it would fill read
``n/a``, the report names the library and how to install it, and the targets
measured against it are not checked.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import TextIO

import numpy as np

import gpuarrays as ga

__all__ = ["Settings", "run", "format_report", "main", "add_arguments"]

_clock = time.perf_counter_ns


@dataclasses.dataclass(frozen=True)
class Settings:
    """How long to measure: repetitions per figure and the time one repetition aims at."""

    repeat: int = 101
    target_ns: int = 500_000  # one repetition's loop runs for about this long
    copy_sizes: tuple[int, ...] = (1 << 20, 64 << 20)
    fragment_counts: tuple[int, ...] = (10, 1000, 10_000)
    workload_iterations: int = 40
    workload_repeat: int = 5
    fragment_rounds: int = 3
    trace_requests: int = 6000
    trace_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    name: str = "full"

    @classmethod
    def quick(cls) -> Settings:
        return cls(repeat=41, target_ns=300_000, copy_sizes=(1 << 20, 16 << 20),
                   workload_iterations=10, workload_repeat=3, fragment_rounds=1,
                   trace_seeds=(0, 1, 2), name="quick")

    @classmethod
    def smoke(cls) -> Settings:
        """A run that only checks the harness works (figures mean nothing)."""
        return cls(repeat=2, target_ns=100_000, copy_sizes=(1 << 16,),
                   fragment_counts=(10, 100), workload_iterations=2, workload_repeat=1,
                   fragment_rounds=1, trace_requests=300, trace_seeds=(0,), name="smoke")


# timing ---------------------------------------------------------------------------

def _compile(stmt: str, setup: str, teardown: str, ns: dict) -> Callable[[int], int]:
    def block(code: str, indent: str) -> str:
        lines = code.strip("\n").splitlines() or ["pass"]
        return "\n".join(indent + line for line in lines)

    src = (f"def _bench(_n):\n{block(setup, '    ')}\n    _t0 = _clock()\n"
           f"    for _ in range(_n):\n{block(stmt, '        ')}\n    _t1 = _clock()\n"
           f"{block(teardown, '    ')}\n    return _t1 - _t0\n")
    scope = dict(ns)
    scope["_clock"] = _clock
    exec(compile(src, "<gpuarrays-bench>", "exec"), scope)
    return scope["_bench"]


@dataclasses.dataclass
class Case:
    """One statement to time: ``stmt`` runs in a loop in namespace ``ns``."""

    stmt: str
    ns: dict
    setup: str = ""
    teardown: str = ""


def _calibrate(fn: Callable[[int], int], settings: Settings) -> int:
    """The loop count that takes about ``settings.target_ns``."""
    fn(2)  # warm up (first-use costs, kernel compilation)
    n = 1
    while True:
        t = fn(n)
        if t >= settings.target_ns // 5 or n >= 1 << 24:
            break
        n *= 4 if t < settings.target_ns // 50 else 2
    return max(1, int(n * settings.target_ns / max(t, 1)))


def side_by_side(cases: dict[str, Case | None], settings: Settings) -> dict[str, float | None]:
    """Median time per operation (ns) of each case, measured interleaved.

    Each repetition runs every case once, in turn, so that a change in the
    machine's load during the measurement affects all of them alike and their
    ratios stay meaningful.  ``None`` cases (a library that is not installed)
    give ``None``.
    """
    fns = {name: _compile(c.stmt, c.setup, c.teardown, c.ns)
           for name, c in cases.items() if c is not None}
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        numbers = {name: _calibrate(fn, settings) for name, fn in fns.items()}
        times: dict[str, list[float]] = {name: [] for name in fns}
        for _ in range(settings.repeat):
            for name, fn in fns.items():
                times[name].append(fn(numbers[name]) / numbers[name])
    finally:
        if gc_was_on:
            gc.enable()
    return {name: statistics.median(times[name]) if name in times else None for name in cases}


def measure(stmt: str, ns: dict, settings: Settings, setup: str = "",
            teardown: str = "") -> float:
    """Median over ``settings.repeat`` repetitions of the time per run of ``stmt`` (ns)."""
    return side_by_side({"x": Case(stmt, ns, setup, teardown)}, settings)["x"]


# optional libraries ------------------------------------------------------------------

def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _has_mako() -> bool:
    """Whether Mako imports: pyopencl's reductions, scans and RadixSort are built with it."""
    try:
        import mako.template  # noqa: F401
    except ImportError:
        return False
    return True


# How to install each optional library the comparisons use (pyproject.toml's extras).
_INSTALL = {"torch": 'pip install "gpuarrays[bench]"', "mako": 'pip install "gpuarrays[bench]"'}
# The report's columns each optional library fills, in every group or ("group: column") in
# one; without the library they read "n/a".
_COLUMNS_OF = {"torch": {"torch", "torch (cuda)", "gpuarrays/torch", "torch/numpy"},
               "mako": {"reduce: pyopencl.array", "reduce: pyopencl.scan",
                        "sort: pyopencl RadixSort"}}
# What the report says of a run without the library.
_WITHOUT = {"torch": "PyTorch's columns read n/a and the targets against it are not checked",
            "mako": "pyopencl's reductions, scans and RadixSort need it: their columns read n/a "
                    "and the targets against them are not checked"}


def _unavailable(torch, ocl) -> dict[str, str]:
    """The optional libraries this run cannot compare with, each with the reason.

    (PyOpenCL itself is not optional here: the opencl back-end needs it.)
    """
    missing = {}
    if torch is None:
        missing["torch"] = "torch not installed"
    if ocl is not None and not _has_mako():
        missing["mako"] = "mako not installed"
    return missing


def _cuda_peers(dev) -> dict:
    """On a CUDA device: CuPy and PyTorch's CUDA device string, where installed."""
    peers: dict = {"cupy": None, "torch_cuda": None}
    if dev.backend != "cuda":
        return peers
    try:
        import cupy

        peers["cupy"] = cupy
    except ImportError:
        pass
    torch = _torch()
    if torch is not None and torch.cuda.is_available() and dev.index < torch.cuda.device_count():
        peers["torch_cuda"] = f"cuda:{dev.index}"
    return peers


_CUPY_SETUP = "_d = cupy.cuda.Device(idx)\n_d.__enter__()"
_CUPY_TEARDOWN = "cupy.cuda.Device(idx).synchronize()\n_d.__exit__(None, None, None)"


def _pyopencl(dev):
    """(cl, cl_array, context, queue) on ``dev``'s OpenCL device, or None."""
    if dev.backend != "opencl":
        return None
    try:
        import pyopencl as cl
        import pyopencl.array as cl_array
    except ImportError:
        return None
    try:
        from ..interop.pyopencl import context_and_queue

        ctx, queue = context_and_queue(dev)
    except ImportError:
        found = [d for p in cl.get_platforms() for d in p.get_devices()]
        ctx = cl.Context([found[dev.index]])
        queue = cl.CommandQueue(ctx)
    return cl, cl_array, ctx, queue


# results ----------------------------------------------------------------------------

@dataclasses.dataclass
class Row:
    group: str
    name: str
    unit: str  # "ns" (per operation), "GB/s", "ms/iter", ...
    values: dict[str, float | None]
    extra: dict[str, object] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"group": self.group, "name": self.name, "unit": self.unit,
                "values": self.values, **self.extra}


@dataclasses.dataclass
class Target:
    name: str
    ratio: float | None  # measured ratio (ours / reference)
    limit: float  # pass when ratio <= limit
    aim: float | None = None
    reference: str = ""
    note: str = ""

    @property
    def met(self) -> bool | None:
        return None if self.ratio is None else self.ratio <= self.limit

    def as_dict(self) -> dict:
        return {"name": self.name, "ratio": self.ratio, "limit": self.limit, "aim": self.aim,
                "reference": self.reference, "met": self.met, "note": self.note}


class Progress:
    """A progress bar on stderr: ``[#####.....] 12/40 derive a[1:]``."""

    def __init__(self, total: int, stream: TextIO | None) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())

    def step(self, label: str) -> None:
        self.done += 1
        if self.stream is None:
            return
        width = 30
        filled = width * self.done // self.total
        bar = "#" * filled + "." * (width - filled)
        text = f"[{bar}] {self.done}/{self.total} {label}"
        if self.tty:
            end = "\n" if self.done >= self.total else ""
            self.stream.write(f"\r{text:<78.78}{end}")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


# the benchmarks ----------------------------------------------------------------------

_DERIVES = (("a[1:]", "a[1:]"), ("a.reshape(4096)", "a.reshape(4096)"),
            ("a.view(int32)", None), ("a.T", "a.T"))


def _bench_derive(dev, settings, libs, rows, targets) -> None:
    torch = libs["torch"]
    ocl = libs["pyopencl"]
    a = ga.empty((64, 64), np.float32, device=dev)
    h = np.empty((64, 64), np.float32)
    t = torch.empty((64, 64), dtype=torch.float32) if torch else None
    c = ocl[1].empty(ocl[3], (64, 64), np.float32) if ocl else None
    cupy, tdev = libs["cuda"]["cupy"], libs["cuda"]["torch_cuda"]
    if cupy is not None:
        with cupy.cuda.Device(dev.index):
            g = cupy.empty((64, 64), np.float32)
    tc = torch.empty((64, 64), dtype=torch.float32, device=tdev) if tdev else None
    for name, stmt in _DERIVES:
        cases = {
            "gpuarrays": Case(stmt or "a.view(np.int32)", {"a": a, "np": np}),
            "numpy": Case(stmt or "a.view(np.int32)", {"a": h, "np": np}),
            "torch": Case(stmt or "a.view(torch.int32)", {"a": t, "torch": torch})
            if torch else None,
        }
        if ocl:
            cases["pyopencl.array"] = Case(stmt or "a.view(np.int32)", {"a": c, "np": np})
        if cupy is not None:
            cases["cupy"] = Case(stmt or "a.view(np.int32)", {"a": g, "np": np})
        if tdev:
            cases["torch (cuda)"] = Case(stmt or "a.view(torch.int32)", {"a": tc, "torch": torch})
        values = side_by_side(cases, settings)
        rows.append(Row("derive", name, "ns", values))
        libs["progress"].step(f"derive {name}")
        if dev.backend == "cpu" and values["torch"]:
            targets.append(Target(f"derived {name}", values["gpuarrays"] / values["torch"],
                                  1.0, 0.5, "torch"))
        if ocl:
            targets.append(Target(f"derived {name}",
                                  values["gpuarrays"] / values["pyopencl.array"], 0.1, None,
                                  "pyopencl.array"))
    a.free()


def _bench_alloc(dev, settings, libs, rows, targets) -> None:
    torch = libs["torch"]
    ocl = libs["pyopencl"]
    ns = {"ga": ga, "np": np, "f32": np.dtype(np.float32), "dev": dev, "cache": ga.AllocCache()}
    ga.empty((1024,), np.float32, device=dev).free()  # warm pool: one 4 KiB block
    cache = ns["cache"]
    with ga.cached(cache):
        ga.empty((1024,), np.float32, device=dev).free()  # one cached buffer
    stmt = "x = ga.empty((1024,), f32, device=dev)\nx.free()"
    cases = {
        "gpuarrays": Case(stmt, ns),
        "numpy": Case("x = np.empty(1024, np.float32)\ndel x", ns),
        "torch": Case("x = torch.empty(1024, dtype=torch.float32)\ndel x", {"torch": torch})
        if torch else None,
        "cache hit": Case(stmt, ns, setup="_cm = ga.cached(cache)\n_cm.__enter__()",
                          teardown="_cm.__exit__(None, None, None)"),
    }
    if ocl:
        cl, cl_array, ctx, queue = ocl
        flags = cl.svm_mem_flags.READ_WRITE
        cases["raw SVM"] = Case("x = cl.SVMAllocation(ctx, 4096, 0, flags)\nx.release()",
                                {"cl": cl, "ctx": ctx, "flags": flags})
        cases["pyopencl.array"] = Case("x = cl_array.empty(queue, (1024,), np.float32)\ndel x",
                                       {"cl_array": cl_array, "queue": queue, "np": np})
    cupy, tdev = libs["cuda"]["cupy"], libs["cuda"]["torch_cuda"]
    if cupy is not None:
        cases["cupy"] = Case("x = cupy.empty(1024, cupy.float32)\ndel x",
                             {"cupy": cupy, "idx": dev.index}, _CUPY_SETUP, _CUPY_TEARDOWN)
    if tdev:
        cases["torch (cuda)"] = Case(
            "x = torch.empty(1024, dtype=torch.float32, device=tdev)\ndel x",
            {"torch": torch, "tdev": tdev})
    values = side_by_side(cases, settings)
    if ocl:
        queue.finish()
    cache.free()
    hit = values.pop("cache hit")
    pool = values["gpuarrays"]
    rows.append(Row("alloc", "allocate+free 4 KiB (warm pool)", "ns", values))
    libs["progress"].step("alloc 4 KiB")
    if dev.backend == "cpu" and values["torch"]:
        targets.append(Target("pooled allocate+free", pool / values["torch"], 0.7, None,
                              "torch.empty+release"))
    for peer, what in (("cupy", "CuPy's memory pool"), ("torch (cuda)", "PyTorch's caching "
                                                                       "allocator")):
        if values.get(peer):
            targets.append(Target("pooled allocate+free", pool / values[peer], 1.0, None, what))
    if ocl:
        targets.append(Target("pooled allocate+free", pool / values["pyopencl.array"], 0.1,
                              None, "pyopencl.array.empty"))
        targets.append(Target("pooled allocate+free", pool / values["raw SVM"], 1.0, None,
                              "raw clSVMAlloc+clSVMFree", "must be cheaper"))

    rows.append(Row("cache", "allocate+free 4 KiB", "ns",
                    {"cache hit (ga.cached)": hit, "pool path": pool}))
    libs["progress"].step("cache hit")
    targets.append(Target("cache hit vs pool path", hit / pool, 1.0, None, "pool path",
                          "must be cheaper"))


def _bench_fragmentation(dev, settings, libs, rows, targets) -> None:
    rng = np.random.default_rng(1)
    ns = {"ga": ga, "f32": np.dtype(np.float32), "dev": dev}
    values: dict[str, float | None] = {}
    blocks: dict[str, object] = {}
    ga.trim(dev)
    stmt = "x = ga.empty((1024,), f32, device=dev)\nx.free()"
    samples: dict[int, list[float]] = {count: [] for count in settings.fragment_counts}
    rounds = settings.fragment_rounds  # rounds spread the machine's load over every level
    per_round = dataclasses.replace(settings, repeat=max(1, settings.repeat // rounds))
    for round_ in range(rounds):
        for count in settings.fragment_counts:
            sizes = rng.integers(1, 33, size=count) * 512 - rng.integers(0, 100, size=count)
            held = [ga.empty((int(s),), np.uint8, device=dev) for s in sizes]
            for x in held:
                x.free()
            del held
            ga.empty((1024,), np.float32, device=dev).free()
            blocks[str(count)] = ga.memory_stats(dev)["pool_free_blocks"]
            samples[count].append(side_by_side({"x": Case(stmt, ns)}, per_round)["x"])
            ga.trim(dev)
            if round_ == rounds - 1:
                libs["progress"].step(f"fragmentation {count}")
    for count, found in samples.items():
        values[f"{count} free blocks"] = statistics.median(found)
    rows.append(Row("fragmentation", "allocate+free 4 KiB", "ns", values,
                    {"pool_free_blocks": blocks}))
    first, last = values[next(iter(values))], values[list(values)[-1]]
    targets.append(Target(f"allocation with {settings.fragment_counts[-1]} vs "
                          f"{settings.fragment_counts[0]} free blocks", last / first, 1.5, 1.0,
                          f"{settings.fragment_counts[0]} free blocks",
                          "time must not grow with the number of free blocks"))


def _bench_dlpack(dev, settings, libs, rows, targets) -> None:
    torch = libs["torch"]
    a = ga.zeros((64, 64), np.float32, device=dev)
    h = np.zeros((64, 64), np.float32)
    ns = {"np": np, "ga": ga, "a": a, "h": h, "torch": torch, "dev": dev}
    skipped = None
    try:
        from .._array import dlpack  # noqa: F401
    except ImportError as e:
        skipped = f"gpuarrays._array.dlpack is not available ({e})"
    if skipped is None:
        try:
            np.from_dlpack(a)
            ga.from_dlpack(h, device=dev)
        # SystemError: NumPy's from_dlpack lost the exception of a refused capsule (seen
        # with kDLOpenCL capsules); the row is skipped with the reason either way.
        except (BufferError, TypeError, ValueError, RuntimeError, NotImplementedError,
                SystemError) as e:
            skipped = f"DLPack exchange with NumPy is not possible on {dev}: {e}"
    t = torch.zeros((64, 64), dtype=torch.float32) if torch else None
    ns["t"] = t
    export = side_by_side({"gpuarrays": None if skipped else Case("np.from_dlpack(a)", ns),
                           "torch": Case("np.from_dlpack(t)", ns) if torch else None}, settings)
    rows.append(Row("dlpack", "export: numpy.from_dlpack(x)", "ns", export,
                    {"skipped": skipped} if skipped else {}))
    libs["progress"].step("dlpack export")
    imp = side_by_side({"gpuarrays": None if skipped else Case("ga.from_dlpack(h, device=dev)",
                                                               ns),
                        "torch": Case("torch.from_dlpack(h)", ns) if torch else None}, settings)
    rows.append(Row("dlpack", "import: from_dlpack(np_array)", "ns", imp,
                    {"skipped": skipped} if skipped else {}))
    libs["progress"].step("dlpack import")
    if dev.backend == "cpu" and torch:
        for name, vals in (("DLPack export to numpy.from_dlpack", export),
                           ("DLPack import from NumPy", imp)):
            ratio = None if vals["gpuarrays"] is None else vals["gpuarrays"] / vals["torch"]
            targets.append(Target(name, ratio, 1.0, None, "torch", skipped or ""))
    a.free()


def _bench_copy(dev, settings, libs, rows, targets) -> None:
    from .._common.sizes import format_bytes

    for nbytes in settings.copy_sizes:
        h = np.ones(nbytes // 4, np.float32)
        o = np.empty_like(h)
        a = ga.asarray(h, device=dev)
        ns = {"ga": ga, "np": np, "h": h, "o": o, "a": a, "dev": dev}
        cases = {"up": Case("x = ga.asarray(h, device=dev)\nx.free()", ns),
                 "down": Case("a.get(out=o)\ndev.synchronize()", ns),
                 "ref": Case("np.copyto(o, h)", ns)}
        if "host" in dev.kinds:  # from/to page-locked "host" memory: the link's speed
            ns["hk"] = ga.asarray(h, device=dev, kind="host")
            cases["pinned_up"] = Case("ga.copyto(a, hk)\ndev.synchronize()", ns)
            cases["pinned_down"] = Case("ga.copyto(hk, a)\ndev.synchronize()", ns)
        times = side_by_side(cases, settings)
        values = {"host->device (ga.asarray)": nbytes / times["up"],
                  "device->host (a.get(out=))": nbytes / times["down"]}
        if "pinned_up" in times:
            values["host kind->device (copyto)"] = nbytes / times["pinned_up"]
            values["device->host kind (copyto)"] = nbytes / times["pinned_down"]
            ns["hk"].free()
        values["numpy copy (np.copyto)"] = nbytes / times["ref"]
        rows.append(Row("copy", f"{format_bytes(nbytes)}", "GB/s", values, {"nbytes": nbytes}))
        a.free()
        libs["progress"].step(f"copy {format_bytes(nbytes)}")


def _bench_workload(dev, settings, libs, rows, targets) -> None:
    from .pipeline import make_batches, pipeline_step, run_workload

    batches = make_batches(min(settings.workload_iterations, 4))
    pipeline_step(batches[0], dev)  # warm-up: kernels, pool
    runs: dict[str, list] = {"without cache": [], "with cache": []}
    for rep in range(settings.workload_repeat):  # alternate, so drift hits both alike
        for cache in ((None, ga.AllocCache()) if rep % 2 == 0 else (ga.AllocCache(), None)):
            ga.trim(dev)
            r = run_workload(settings.workload_iterations, dev, cache, batches, check=False)
            runs[r.label].append(r)
            if cache is not None:
                cache.free()
    results = []
    for label, rs in runs.items():  # the run of median time stands for its configuration
        rs.sort(key=lambda r: r.seconds)
        results.append(rs[len(rs) // 2])
        libs["progress"].step(f"workload {label}")
    for field, unit, fn in (
            ("time per iteration", "ms/iter", lambda r: r.per_iteration_ms),
            ("allocations per iteration", "allocs/iter", lambda r: r.allocations / r.iterations),
            ("cache hits per iteration", "hits/iter", lambda r: r.cache_hits / r.iterations),
            ("peak memory", "bytes", lambda r: r.peak_bytes)):
        rows.append(Row("workload", field, unit, {r.label: float(fn(r)) for r in results},
                        {"iterations": settings.workload_iterations,
                         "runs": settings.workload_repeat}))


def _bench_random(dev, settings, libs, rows, targets) -> None:
    from .._compute.rng import kernels

    n = 1 << 16 if settings.name == "smoke" else 1 << 24
    few = dataclasses.replace(settings, repeat=min(settings.repeat, 9))  # 16 M per run
    torch = libs["torch"]
    ns = {"g": ga.random.default_rng(0, device=dev), "rng": np.random.default_rng(0), "n": n,
          "np": np, "torch": torch, "dev": dev, "kernels": kernels}
    device_side = dev.backend != "cpu"
    if device_side:
        ns["ref"] = ga.empty(n, np.float32, device=dev)
        ns["raw"] = ns["ref"]._raw()
    for method, torch_fn in (("random", "rand"), ("standard_normal", "randn")):
        cases = {
            # each run synchronizes: the loop's clock stops before a teardown would
            "gpuarrays": Case(f"g.{method}(n, dtype=np.float32).free()\ndev.synchronize()", ns),
            "numpy default_rng": Case(f"rng.{method}(n, dtype=np.float32)", ns),
            "torch": None if torch is None else Case(f"torch.{torch_fn}(n)", ns),
            "write kernel": Case("kernels.write_reference(dev, raw)\ndev.synchronize()", ns)
            if device_side else None,
        }
        # Two passes: ours beside the write kernel, then the libraries.  Interleaved with them,
        # the PoCL kernels ran up to twice as long after NumPy's and PyTorch's 16 M runs (the
        # write kernel less so: docs/random.md, "Speed"), which would skew the target's ratio.
        ours = ("gpuarrays", "write kernel")
        times = side_by_side({k: cases[k] for k in ours}, few)
        times.update(side_by_side({k: c for k, c in cases.items() if k not in ours}, few))
        times = {k: times[k] for k in cases}  # the columns in their usual order
        rows.append(Row("random", f"{method} 16 M float32" if n == 1 << 24 else method, "GB/s",
                        {k: None if t is None else 4 * n / t for k, t in times.items()},
                        {"elements": n}))
        if device_side:
            targets.append(Target(f"random: {method} vs a one-item-per-work-item write",
                                  times["gpuarrays"] / times["write kernel"], 1.25, None,
                                  "write kernel", "at least 0.8x its bandwidth"))
        libs["progress"].step(f"random {method}")
    if device_side:
        ns["ref"].free()


class _OtherThread:
    """Runs a call on a waiting worker thread and waits for its result: the hand-off every
    device queue makes (PoCL runs kernels on its own worker threads).  NumPy's time through
    it is the reduce group's control column: on a loaded machine a thread that has to be
    woken waits for a core, and NumPy's own sum then takes several times as long
    (docs/reductions.md, "Speed")."""

    def __init__(self) -> None:
        import queue
        import threading

        self._in: queue.SimpleQueue = queue.SimpleQueue()
        self._out: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="bench-handoff", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (item := self._in.get()) is not None:
            fn, args = item
            self._out.put(fn(*args))

    def __call__(self, fn, *args):
        self._in.put((fn, args))
        return self._out.get()

    def close(self) -> None:
        self._in.put(None)
        self._thread.join()


def _bench_reduce(dev, settings, libs, rows, targets) -> None:
    """sum/max/mean over all axes and over axis 0/1, cumulative_sum (docs/reductions.md)."""
    smoke = settings.name == "smoke"
    side = 256 if smoke else 4096
    n = side * side
    few = dataclasses.replace(settings, repeat=min(settings.repeat, 15))
    torch = libs["torch"]
    cl = libs["pyopencl"]
    h2 = np.random.default_rng(0).random((side, side), dtype=np.float32)
    a2 = ga.asarray(h2, device=dev)
    other = _OtherThread() if dev.backend != "cpu" else None
    ns = {"ga": ga, "np": np, "torch": torch, "dev": dev, "h2": h2, "a2": a2,
          "h1": h2.reshape(-1), "a1": a2.reshape(-1), "other": other}
    if torch is not None:
        ns["t2"] = torch.from_numpy(h2)
        ns["t1"] = ns["t2"].reshape(-1)
    if cl is not None:
        ns["cl_array"], ns["queue"] = cl[1], cl[3]
        ns["c1"] = cl[1].to_device(cl[3], ns["h1"])
    cupy = libs["cuda"]["cupy"]
    if cupy is not None:  # on a GPU: CuPy beside us (the target is 0.9x its throughput)
        with cupy.cuda.Device(dev.index):
            ns["cupy"], ns["idx"] = cupy, dev.index
            ns["x2"] = cupy.asarray(h2)
            ns["x1"] = ns["x2"].reshape(-1)
    torch_name = {"sum": "sum", "max": "amax", "mean": "mean"}
    forms = (("all axes of 4096x4096", "2", None), ("axis 0 of 4096x4096", "2", 0),
             ("axis 1 of 4096x4096", "2", 1), ("16 M elements", "1", None))
    device_side = dev.backend != "cpu"
    for op in ("sum", "max", "mean"):
        for label, nd, axis in forms:
            ax = "" if axis is None else f", axis={axis}"
            tax = "" if axis is None else f", dim={axis}"
            cases = {
                "gpuarrays": Case(f"ga.{op}(a{nd}{ax}).free()\ndev.synchronize()", ns),
                "numpy": Case(f"np.{op}(h{nd}{ax})", ns),
                # the control: NumPy handed to a worker thread, as a device queue does
                "numpy, handed to a thread": None if other is None else Case(
                    f"other(np.{op}, h{nd}, {axis})", ns),
                "torch": None if torch is None else Case(
                    f"torch.{torch_name[op]}(t{nd}{tax})", ns),
                "pyopencl.array": Case(f"cl_array.{op}(c1).get()", ns)
                if cl is not None and libs["mako"] and nd == "1" and op != "mean" else None,
                "cupy": None if cupy is None else Case(
                    f"cupy.{op}(x{nd}{ax})", ns, _CUPY_SETUP, _CUPY_TEARDOWN),
            }
            times = side_by_side(cases, few)
            rows.append(Row("reduce", f"{op} {label}" if not smoke else f"{op} {nd}-d {axis}",
                            "GB/s", {k: None if t is None else 4 * n / t
                                     for k, t in times.items()}, {"elements": n}))
            ratio = times["gpuarrays"] / times["numpy"]
            targets.append(Target(f"reduce: {op} {label}", ratio, 1.25 if device_side else 1.2,
                                  None, "numpy", "at least 0.8x NumPy's throughput"
                                  if device_side else "at most 1.2x NumPy's time"))
            if cupy is not None:
                targets.append(Target(f"reduce: {op} {label} vs CuPy",
                                      times["gpuarrays"] / times["cupy"], 1 / 0.9, None, "cupy",
                                      "at least 0.9x CuPy's throughput"))
            libs["progress"].step(f"reduce {op} {label}")
    scan = None
    if cl is not None and libs["mako"]:
        from pyopencl.scan import InclusiveScanKernel

        scan = InclusiveScanKernel(cl[2], np.float32, "a+b", neutral="0")
    for m in ((1 << 12, 1 << 16) if smoke else (1 << 20, 1 << 24)):
        ns["s1"], ns["g1"] = ns["h1"][:m], ns["a1"][:m]
        if torch is not None:
            ns["u1"] = ns["t1"][:m]
        if scan is not None:
            ns["scan"] = scan
            ns["c2"] = cl[1].to_device(cl[3], ns["s1"])
        cases = {
            "gpuarrays": Case("ga.cumulative_sum(g1).free()\ndev.synchronize()", ns),
            "numpy": Case("np.cumsum(s1)", ns),
            "torch": None if torch is None else Case("torch.cumsum(u1, 0)", ns),
            "pyopencl.scan": None if scan is None else Case(
                "scan(c2.copy(), queue=queue)\nqueue.finish()", ns),
            "cupy": None if cupy is None else Case(
                f"cupy.cumsum(x1[:{m}])", ns, _CUPY_SETUP, _CUPY_TEARDOWN),
        }
        times = side_by_side(cases, few)
        label = f"cumulative_sum {m >> 20} M" if m >= 1 << 20 else f"cumulative_sum {m}"
        rows.append(Row("reduce", label, "ms", {k: None if t is None else t / 1e6
                                                for k, t in times.items()}, {"elements": m}))
        if scan is not None:
            targets.append(Target(f"reduce: {label} vs pyopencl.scan",
                                  times["gpuarrays"] / times["pyopencl.scan"], 1.0, None,
                                  "pyopencl.scan", "at most its time (it copies its input "
                                  "first: the scan is in place)"))
        libs["progress"].step(f"reduce {label}")
    a2.free()
    if other is not None:
        other.close()


def _bench_compute(dev, settings, libs, rows, targets) -> None:
    from .bench_compute import bench_compute  # its own module, built on this harness

    bench_compute(dev, settings, libs, rows, targets)


def _bench_linalg(dev, settings, libs, rows, targets) -> None:  # linear algebra (docs/linalg.md)
    from .bench_linalg import bench_linalg  # its own module, built on this harness

    bench_linalg(dev, settings, libs, rows, targets)


def _bench_sort(dev, settings, libs, rows, targets) -> None:
    from .bench_sort import bench_sort  # its own module (docs/sorting.md) -- sorting's block

    bench_sort(dev, settings, libs, rows, targets)


def _bench_programs(dev, settings, libs, rows, targets) -> None:
    from .bench_programs import bench_programs  # its own module: whole programs

    bench_programs(dev, settings, libs, rows, targets)


def _bench_elementwise(dev, settings, libs, rows, targets) -> None:
    from .bench_elementwise import bench_elementwise  # every function vs the device builtin

    bench_elementwise(dev, settings, libs, rows, targets)


def _bench_creation(dev, settings, libs, rows, targets) -> None:
    from .bench_creation import bench_creation  # creation at allocation speed (issue 32)

    bench_creation(dev, settings, libs, rows, targets)


def _bench_fusion(dev, settings, libs, rows, targets) -> None:
    from .bench_fusion import bench_fusion  # ga.fuse against unfused, hand-written, numexpr

    bench_fusion(dev, settings, libs, rows, targets)


def _bench_pool_trace(dev, settings, libs, rows, targets) -> None:
    from .pool_trace import FAMILIES, make_trace, replay

    for family in FAMILIES:
        runs = [replay(dev, make_trace(settings.trace_requests, seed=seed, family=family))
                for seed in settings.trace_seeds]
        libs["progress"].step(f"pool trace ({family})")
        ratio = statistics.median(r.reserved_over_used for r in runs)
        platform = max(r.platform_fraction for r in runs)
        n = len(runs)
        extra = {"family": family, "seeds": list(settings.trace_seeds),
                 "requests": settings.trace_requests,
                 "reserved_over_used": [r.reserved_over_used for r in runs],
                 "platform_fraction": [r.platform_fraction for r in runs],
                 "peak_used_bytes": [r.peak_used for r in runs],
                 "peak_reserved_bytes": [r.peak_reserved for r in runs]}
        rows.append(Row("pool-trace", f"{family}: peak reserved / peak used (median of {n})",
                        "x", {"gpuarrays": ratio}, extra))
        rows.append(Row("pool-trace", f"{family}: platform allocations per request after "
                        f"warm-up (max of {n})", "%", {"gpuarrays": 100 * platform}))
        targets.append(Target(f"pool trace {family}: peak reserved", ratio, 1.15, None,
                              "peak used", f"median of {n} seeded traces"))
        if family == "mixed":
            rows.append(Row("pool-trace", "mixed: allocation per request after warm-up", "ns",
                            {"trace mean": statistics.median(r.alloc_ns_mean for r in runs),
                             "trace median": statistics.median(r.alloc_ns_median for r in runs),
                             "exact-size hit": statistics.median(r.hit_ns_median
                                                                 for r in runs)}))
            # a growing working set misses by nature (each size is new): the bound on
            # platform calls is for the traces that reuse sizes
            targets.append(Target("pool trace mixed: platform allocations after warm-up",
                                  platform, 0.05, None, "requests",
                                  f"max of {n} seeded traces"))


def _bench_streams(dev, settings, libs, rows, targets) -> None:
    """What streams cost (docs/streams.md): the pooled allocate+free with no stream, with a
    stream alive (every free stream-ordered), inside ``with stream:``; a block freed on one
    stream and reused on another (one event wait); beside a device synchronisation."""
    f32 = np.dtype(np.float32)
    ns = {"ga": ga, "f32": f32, "dev": dev}
    alloc = "x = ga.empty((1024,), f32, device=dev)\nx.free()"
    ga.empty((1024,), f32, device=dev).free()
    plain = side_by_side({"no stream alive": Case(alloc, ns)}, settings)["no stream alive"]
    s1, s2 = ga.Stream(dev), ga.Stream(dev)
    ns.update(s1=s1, s2=s2, impl=dev.impl, index=dev.index)
    cases = {
        "a stream alive": Case(alloc, ns),
        "inside with stream": Case(alloc, ns, setup="s1.__enter__()",
                                   teardown="s1.__exit__(None, None, None)"),
        "freed on s1, reused on s2 (1 MiB)": Case(
            "with s1:\n    x = ga.empty((1 << 18,), f32, device=dev)\n"
            "    x.free()\nwith s2:\n    y = ga.empty((1 << 18,), f32, device=dev)\n"
            "    y.free()", ns),
        "event record+query": Case("s1.record().query()", ns),
        "device synchronize": Case("impl.synchronize(index)", ns),
    }
    values = {"no stream alive": plain, **side_by_side(cases, settings)}
    del s1, s2
    rows.append(Row("streams", "per call", "ns", values))
    libs["progress"].step("streams")


_GROUPS = (("derive", _bench_derive, 4), ("alloc", _bench_alloc, 2),
           ("fragmentation", _bench_fragmentation, None), ("dlpack", _bench_dlpack, 2),
           ("copy", _bench_copy, None), ("workload", _bench_workload, 2),
           ("random", _bench_random, 2), ("reduce", _bench_reduce, 14),
           ("compute", _bench_compute, 19), ("elementwise", _bench_elementwise, 1),
           ("linalg", _bench_linalg, 6),
           ("sort", _bench_sort, 4), ("programs", _bench_programs, 6),
           ("fusion", _bench_fusion, 4), ("creation", _bench_creation, 2),
           ("pool-trace", _bench_pool_trace, 5), ("streams", _bench_streams, 1))

_ALIASES = {"cache": "alloc"}  # the cache group is measured with the alloc group


def run(device=None, settings: Settings | None = None, progress: TextIO | None = None,
        groups: tuple[str, ...] | None = None) -> dict:
    """Run the benchmarks on ``device``; returns the JSON-serialisable results."""
    settings = settings or Settings()
    dev = ga.get_device(device)
    torch = _torch()
    libs = {"torch": torch, "pyopencl": _pyopencl(dev), "cuda": _cuda_peers(dev)}
    unavailable = _unavailable(torch, libs["pyopencl"])
    libs["mako"] = libs["pyopencl"] is not None and "mako" not in unavailable
    chosen = [g for g in _GROUPS if groups is None or g[0] in groups]
    total = sum(len(settings.fragment_counts) if name == "fragmentation" else
                len(settings.copy_sizes) if name == "copy" else n for name, _, n in chosen)
    libs["progress"] = Progress(total, progress)
    rows: list[Row] = []
    targets: list[Target] = []
    started = time.perf_counter()
    with ga.use_device(dev):
        for _, fn, _ in chosen:
            fn(dev, settings, libs, rows, targets)
    versions = {"gpuarrays": ga.__version__, "numpy": np.__version__,
                "torch": getattr(torch, "__version__", None)}
    if libs["pyopencl"]:
        versions["pyopencl"] = libs["pyopencl"][0].VERSION_TEXT
    if libs["cuda"]["cupy"] is not None:
        versions["cupy"] = libs["cuda"]["cupy"].__version__
    return {
        "device": str(dev),
        "device_name": dev.name,
        "settings": dataclasses.asdict(settings),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
        "unavailable": unavailable,
        "seconds": time.perf_counter() - started,
        "results": [r.as_dict() for r in rows],
        "targets": [t.as_dict() for t in targets],
    }


# the report --------------------------------------------------------------------------

def _fmt(value: float | None, unit: str, why: str | None = None) -> str:
    if value is None:
        return "n/a" if why else "-"
    if unit == "ns":
        if value < 1000:
            return f"{value:.0f} ns"
        if value < 1e6:
            return f"{value / 1e3:.2f} us"
        return f"{value / 1e6:.2f} ms"
    if unit == "bytes":
        from .._common.sizes import format_bytes

        return format_bytes(int(value))
    if unit == "GB/s":
        return f"{value:.2f} GB/s"
    return f"{value:.2f}"


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    out = ["  " + "  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                            for i, (h, w) in enumerate(zip(header, widths, strict=True)))]
    for r in body:
        out.append("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                    for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    return out


def format_report(result: dict) -> str:
    """The human-readable report: one table per group, then the Targets."""
    lines = [f"gpuarrays bench on {result['device']} ({result['device_name']}), "
             f"{result['settings']['name']} settings: median of "
             f"{result['settings']['repeat']} repetitions per figure",
             "versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v)]
    unavailable = result.get("unavailable", {})
    for lib, why in unavailable.items():
        lines.append(f"{why}: {_WITHOUT[lib]} ({_INSTALL[lib]})")
    groups: dict[str, list[dict]] = {}
    for row in result["results"]:
        groups.setdefault(row["group"], []).append(row)
    for group, rows in groups.items():
        lines.append("")
        columns: list[str] = []
        for row in rows:
            for col in row["values"]:
                if col not in columns:
                    columns.append(col)
        ratio = group in ("derive", "alloc", "dlpack") and "torch" in columns
        header = [f"{group} ({rows[0]['unit']})" if group not in ("workload", "pool-trace")
                  else group, *columns]
        if ratio:
            header.append("gpuarrays/torch")
        vs_numpy = ["gpuarrays/numpy", "torch/numpy"] if group == "programs" else []
        header.extend(vs_numpy)
        # why a column cannot be filled in this run (a library that is not installed)
        why = {c: next((unavailable[lib] for lib in _COLUMNS_OF if lib in unavailable and (
            c in _COLUMNS_OF[lib] or f"{group}: {c}" in _COLUMNS_OF[lib])), None)
            for c in [*columns, "gpuarrays/torch", *vs_numpy]}
        body = []
        for row in rows:
            vals = row["values"]
            cells = [row["name"]] + [_fmt(vals.get(c), row["unit"], why[c]) for c in columns]
            if group == "pool-trace" and row["unit"] != "ns":  # mixed units: say which
                digits = 3 if row["unit"] == "x" else 2
                cells[1:] = ["-" if vals.get(c) is None else f"{vals[c]:.{digits}f}{row['unit']}"
                             for c in columns]
            if ratio:
                g, t = vals.get("gpuarrays"), vals.get("torch")
                cells.append(f"{g / t:.2f}x" if g and t else "n/a" if why["gpuarrays/torch"]
                             else "-")
            for col in vs_numpy:
                x, ref = vals.get(col.split("/")[0]), vals.get("numpy")
                cells.append(f"{x / ref:.2f}x" if x and ref else "n/a" if why[col] else "-")
            body.append(cells)
        lines.extend(_table(header, body))
        notes = [why[c] for c in header[1:] if why.get(c)
                 and any(row["values"].get(c) is None for row in rows)]
        for note in dict.fromkeys(notes):
            lines.append(f"  (n/a: {note})")
        for row in rows:
            if row.get("skipped"):
                lines.append(f"  ({row['name']}: skipped: {row['skipped']})")
            if row.get("disagrees"):
                lines.append(f"  ({row['name']}: DISAGREES with NumPy: {row['disagrees']})")
        if group == "programs":
            loads = [x for row in rows for x in row.get("load_average", []) if x is not None]
            load = (f"; load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs"
                    if loads else "")
            lines.append(f"  (median of {rows[0].get('rounds')} rounds{load};")
            lines.append("  every program's results checked against NumPy's before timing; "
                         "gpuarrays runs the loops inside ga.cached)")
        if group == "creation":
            lines.append("  (least time per call over interleaved loops, not the median; "
                         "x ga.empty: gpuarrays / ga.empty, same n)")
        if group == "pool-trace":
            for row in rows:
                if row.get("reserved_over_used"):
                    lines.append(f"  {row.get('family', 'mixed')}: reserved / used per seed: "
                                 + ", ".join(f"{x:.3f}" for x in row["reserved_over_used"]))
        if group == "fragmentation":
            blocks = rows[0].get("pool_free_blocks", {})
            lines.append("  free blocks in the pool while measuring: "
                         + ", ".join(f"{v}" for v in blocks.values()))
    if result["targets"]:
        lines.append("")
        lines.append("Targets (ratio = gpuarrays / reference; lower is better):")
        body = []
        for t in result["targets"]:
            verdict = {True: "ok", False: "MISSED", None: "n/a"}[t["met"]]
            aim = f", aim {t['aim']:g}" if t["aim"] is not None else ""
            body.append([t["name"], f"vs {t['reference']}",
                         "-" if t["ratio"] is None else f"{t['ratio']:.2f}x",
                         f"<= {t['limit']:g}{aim}", verdict])
        lines.extend(_table(["target", "reference", "ratio", "limit", ""], body))
        if unavailable:
            lines.append(f"  (not checked: the targets that need {', '.join(unavailable)}, "
                         "which this run could not import)")
    lines.append("")
    lines.append(f"({result['seconds']:.1f} s)")
    return "\n".join(lines)


# command line -------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("--device", default=None,
                        help="device spec such as cpu:0 or opencl:0 (default: the default device)")
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="also write the results as JSON to PATH")
    parser.add_argument("--quick", action="store_true",
                        help="fewer repetitions and smaller copies (a few seconds)")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny run that only checks the harness (figures mean nothing)")
    # The names are listed with ", " so that help text wraps between them; the parser's
    # formatter (commands.py) never breaks a word or a hyphenated name such as pool-trace.
    parser.add_argument("--only", metavar="GROUPS", default=None,
                        help="the groups to run, comma-separated without spaces (such as "
                             "--only derive,alloc); the groups: "
                             + ", ".join(group_names()) + " (cache runs with alloc)")


def group_names() -> list[str]:
    """The names ``--only`` accepts, in the order the groups run."""
    names = [name for name, _, _ in _GROUPS]
    for alias, group in _ALIASES.items():
        names.insert(names.index(group) + 1, alias)
    return names


def command_line(args) -> str:
    """The ``gpuarrays bench ...`` command that reproduces this run."""
    words = ["gpuarrays", "bench"]
    if args.device:
        words += ["--device", args.device]
    for flag in ("quick", "smoke"):
        if getattr(args, flag):
            words.append(f"--{flag}")
    if args.only:
        words += ["--only", args.only]
    return " ".join(words)


def main(args) -> int:
    """Entry point used by ``gpuarrays bench`` and ``benchmarks/run.py``."""
    settings = (Settings.smoke() if args.smoke else Settings.quick() if args.quick
                else Settings())
    groups = None
    if args.only:
        groups = tuple(_ALIASES.get(g.strip(), g.strip()) for g in args.only.split(",")
                       if g.strip())
        unknown = [g for g in groups if g not in {name for name, _, _ in _GROUPS}]
        if unknown:
            print(f"gpuarrays bench: unknown group(s) {', '.join(unknown)}; expected "
                  f"{', '.join(group_names())}", file=sys.stderr)
            return 2
    try:
        ga.get_device(args.device)
    except ValueError as e:  # an unknown or unavailable device: the message names the others
        print(f"gpuarrays bench: {e}", file=sys.stderr)
        return 2
    result = run(args.device, settings, progress=sys.stderr, groups=groups)
    result["command"] = command_line(args)
    print(format_report(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
        print(f"results written to {args.json}")
    return 0
