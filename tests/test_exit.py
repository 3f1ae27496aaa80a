"""A silent exit: programs that end with memory still in use exit with status 0,
print nothing, and free nothing through the platform once shutdown has started.

Every scenario runs in a fresh interpreter on every device (``GPUARRAYS_DEVICE``),
with a counting wrapper around the real back-end (``faults.FaultyBackend``) that
writes to a side file any ``free``/``unregister_host``/``reset`` call reaching
the platform after interpreter shutdown began.  The script prints ``done`` as
its last statement, so the test knows it ran to the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gpuarrays as ga

ROOT = Path(__file__).resolve().parents[1]

PRELUDE = """\
import asyncio, ctypes, gc, os, sys, threading, weakref
import numpy as np
import gpuarrays as ga
from gpuarrays._memory import lifecycle
from gpuarrays._memory.pins import pin_registry
from gpuarrays._memory.state import state
from faults import FaultyBackend

dev = ga.get_device()
assert str(dev) == os.environ["GPUARRAYS_DEVICE"], dev
_fd = os.open(os.environ["GA_EXIT_LOG"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
_write, _state = os.write, state


class Watched(FaultyBackend):
    def _enter(self, method, args, nbytes=0):
        if _state.shutting_down and method in ("free", "unregister_host", "reset"):
            _write(_fd, f"{method} after shutdown began\\n".encode())
        return super()._enter(method, args, nbytes)


watch = Watched(dev.impl)
dev.impl = dev.memory.impl = watch
"""

SCENARIOS = {
    "live arrays and views": """
        keep = []
        for kind in dev.kinds:
            a = ga.arange(1000, dtype=np.float32, device=dev, kind=kind)
            keep += [a, a[1:], a.reshape(10, 100).T, a.view(np.int32)[::3]]
            if kind != "device":
                keep.append(a.host_view())
        big = ga.zeros((256, 1024), device=dev)
        zero = ga.empty(0, device=dev)
        pooled = [ga.empty(n, device=dev) for n in (10, 100, 1000)]
        del pooled  # blocks left in the pool
        forced = ga.ones(10, device=dev)
        forced_view = forced[2:]
        forced.free(force=True)
    """,
    "caches with buffers": """
        cache = ga.AllocCache()
        with ga.cached(cache):
            busy = [ga.full(n, 3.0, device=dev) for n in (64, 512, 4096)]
            for n in (128, 1024):
                ga.empty(n, device=dev).free()
        other = ga.AllocCache()
        with ga.cached(other):
            escaped = ga.zeros(100, device=dev)[::2]

        def open_scope():  # a generator suspended inside an active cached() block
            with ga.cached(cache):
                x = ga.empty(77, device=dev)
                yield x

        gen = open_scope()
        inside = next(gen)
        assert cache.n_busy == 4 and cache.n_free == 2
    """,
    "wrapped memory": """
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = [ctypes.c_size_t]
        host_kind = None if dev.backend == "cpu" else "host"
        n = np.arange(100.0)
        w1 = ga.unsafe_wrap(n, device=dev)
        w2 = ga.unsafe_wrap(n.ctypes.data + 80, (10,), device=dev, kind=host_kind, owner=n)
        views = [w1[::2], w2.reshape(2, 5)]
        raw = dev.impl.allocate(dev.index, "device", 4096)
        owned = ga.unsafe_wrap(raw, (512,), device=dev, own=True)
        owned_view = owned[10:]
        not_owned_raw = dev.impl.allocate(dev.index, "device", 1024)
        not_owned = ga.unsafe_wrap(not_owned_raw, (128,), device=dev)
        if dev.backend == "cpu":
            m = libc.malloc(800)
            owned_malloc = ga.unsafe_wrap(m, (100,), device=dev, own=True)
        buf = ctypes.create_string_buffer(64)
        w3 = ga.unsafe_wrap(ctypes.addressof(buf), (8,), device=dev, kind=host_kind, owner=buf)
    """,
    "reference cycles holding arrays": """
        gc.disable()

        class Node:
            pass

        for i in range(50):
            a, b = Node(), Node()
            a.other, b.other = b, a
            a.arr = ga.full(100 + i, i, device=dev)
            b.view = a.arr[1:]
        cycle = [ga.zeros(10, device=dev)]
        cycle.append(cycle)
        del cycle, a, b
        cache = ga.AllocCache()
        loop = [cache]
        loop.append(loop)
        with ga.cached(cache):
            loop.append(ga.ones(64, device=dev))
        del loop, cache
    """,
    "pending queued frees": """
        arrays = [ga.full(256, i, device=dev) for i in range(20)]
        with dev.memory.lock:  # as if an allocation held the lock: the frees are queued
            del arrays
            gc.collect()
        assert len(dev.memory.pending) == 20, len(dev.memory.pending)
        cache = ga.AllocCache()
        with ga.cached(cache):
            cached_arrays = [ga.empty(64, device=dev) for _ in range(5)]
        with cache._lock:  # the cache queues releases it cannot take its lock for
            del cached_arrays
        n = np.zeros(16)
        wraps = [ga.unsafe_wrap(n, device=dev) for _ in range(3)]
        pins = pin_registry(dev)
        with pins.lock:
            del wraps
    """,
    "reset just before exit": """
        stale = [ga.full(n, 1.0, device=dev) for n in (10, 1000, 10000)]
        stale_view = stale[1][5:]
        cache = ga.AllocCache()
        with ga.cached(cache):
            cached = ga.zeros(64, device=dev)
            ga.empty(32, device=dev).free()
        raw = dev.impl.allocate(dev.index, "device", 512)
        owned = ga.unsafe_wrap(raw, (64,), device=dev, own=True)
        ga.register_reset_hook(lambda d: None)
        ga.device_reset(dev)
        fresh = [ga.full(n, 2.0, device=dev) for n in (10, 1000, 10000)]
        assert float(fresh[0][0]) == 2.0
        ga.device_reset(dev)
    """,
    "daemon thread still allocating": """
        started = threading.Event()

        def churn():
            keep = []
            cache = ga.AllocCache()
            i = 0
            while True:
                i += 1
                with ga.cached(cache) if i % 2 else ga.uncached():
                    keep.append(ga.full(64 + i % 7, i, dtype=np.int32, device=dev))
                    keep.append(keep[-1][1:])
                if len(keep) > 40:
                    del keep[:20]
                if i % 25 == 0:
                    gc.collect()
                started.set()

        for _ in range(2):
            threading.Thread(target=churn, daemon=True).start()
        assert started.wait(30)
        main_arrays = [ga.zeros(100, device=dev) for _ in range(10)]
    """,
    "dlpack capsules and consumers": """
        a = ga.arange(100, dtype=np.float64, device=dev)
        capsule = a.__dlpack__()  # never consumed: its deleter runs at exit
        versioned = ga.arange(10, device=dev).__dlpack__(max_version=(1, 0))
        if dev.backend == "cpu":
            consumer = np.from_dlpack(ga.arange(50, device=dev))
            assert consumer[49] == 49
        roundtrip = ga.from_dlpack(ga.ones(8, device=dev))
        del a
    """,
    "a bit of everything, with explicit device=": """
        dev2 = ga.get_device(str(dev))
        arrays = [ga.zeros((8, 8), device=dev2)[::2, 1:] for _ in range(10)]
        cache = ga.AllocCache()
        with ga.cached(cache):
            c = ga.ones(500, device=dev2)
        n = np.ones(10)
        w = ga.unsafe_wrap(n, device=dev2)
        ga.memory_history.start()
        h = ga.empty(300, device=dev2)
        ga.set_memory_limit("1GiB", dev2)
        ga.trim(dev2)

        async def task():
            with ga.cached(cache):
                return ga.full(500, 9.0, device=dev2)

        t = asyncio.run(task())
        capsule = h.__dlpack__()
        with dev2.memory.lock:
            del h
        stale = ga.zeros(4, device=dev2)
        import warnings
        with warnings.catch_warnings(record=True) as caught:  # the capsule outlives the reset
            warnings.simplefilter("always")
            ga.device_reset(dev2)
        assert [str(w.message).count("1 NumPy host view(s) or DLPack capsule(s)")
                for w in caught] == [1], caught
        new = ga.zeros(4, device=dev2)
    """,
}


def run_scenario(device: ga.Device, body: str, tmp_path: Path) -> None:
    log = tmp_path / "after_shutdown.log"
    script = PRELUDE + textwrap.dedent(body) + "\nprint('done')\n"
    env = dict(os.environ)
    env.pop("GPUARRAYS_MEMORY_LIMIT", None)
    env.update(GPUARRAYS_DEVICE=str(device), GA_EXIT_LOG=str(log),
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.stderr == "", proc.stderr
    assert proc.returncode == 0, proc.returncode
    assert proc.stdout == "done\n"
    calls = log.read_text() if log.exists() else ""
    assert calls == "", f"the platform was called after shutdown began:\n{calls}"


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_silent_exit(device, name, tmp_path):
    run_scenario(device, SCENARIOS[name], tmp_path)


def test_the_harness_sees_output_and_late_frees(device, tmp_path):
    """The checks above can fail: a warning printed at exit, and a platform free after
    shutdown began, are both caught."""
    with pytest.raises(AssertionError, match="GPUArraysWarning"):
        run_scenario(device, """
            import atexit, warnings
            atexit.register(lambda: warnings.warn("late", ga.GPUArraysWarning))
        """, tmp_path)
    with pytest.raises(AssertionError, match="free after shutdown began"):
        run_scenario(device, """
            import atexit
            ptr = dev.impl.allocate(dev.index, "device", 64)
            # registered before gpuarrays' own handler: runs after it, during shutdown
            atexit.unregister(lifecycle._at_exit)
            atexit.register(lambda: watch.free(dev.index, "device", ptr, 64))
            atexit.register(lifecycle._at_exit)
        """, tmp_path)
