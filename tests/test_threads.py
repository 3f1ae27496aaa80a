"""Threads: concurrent allocation, deriving, freeing, caches and GC, with a reset in the middle.

Several threads run random operations on every device at once -- allocate (in
the pool, in a shared cache, in a thread-local cache), derive, write, verify
values, free, drop references, free their local cache, try to free the shared
cache from inside its scope, ``gc.collect()`` -- while the main thread resets
the test's device half-way through.

Allowed errors: ``DeviceResetError`` on arrays of the reset device that
were allocated before the reset finished, and ``CacheInUseError`` when freeing
a cache in use.  Everything else is a failure, and so is a wrong value (two
live arrays sharing memory they should not), a thread that does not finish
(deadlock), a double free at the back-end, or counters that do not return to
their baseline once everything is freed.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import random
import subprocess
import sys
import threading
import time

import _profiles
import numpy as np
import pytest
from faults import inject

import gpuarrays as ga

JOIN_TIMEOUT = 120.0


class Item:
    __slots__ = ("arr", "values", "after_reset", "local")

    def __init__(self, arr, values, after_reset: bool, local: bool) -> None:
        self.arr = arr
        self.values = values
        self.after_reset = after_reset  # allocated after the reset finished
        self.local = local  # served by the thread's own cache


class Worker:
    def __init__(self, tid: int, devices, reset_dev, shared, reset_done, seed: int) -> None:
        self.tid = tid
        self.devices = devices
        self.reset_dev = reset_dev
        self.shared = shared
        self.reset_done = reset_done
        self.rng = random.Random(seed)
        self.items: list[Item] = []
        self.local = ga.AllocCache()
        self.errors: list[str] = []
        self.ops = 0
        self.reset_errors = 0
        self.in_use_errors = 0

    # helpers ------------------------------------------------------------------------
    def _allowed(self, item: Item, exc: BaseException) -> bool:
        return (isinstance(exc, ga.DeviceResetError) and item.arr.device == self.reset_dev
                and not item.after_reset)

    def _use(self, item: Item, fn):
        try:
            return fn(item.arr)
        except ga.FreedArrayError as e:
            if not self._allowed(item, e):
                raise
            self.reset_errors += 1
            self._forget(item)
            return None

    def _forget(self, item: Item) -> None:
        if item in self.items:
            self.items.remove(item)

    # operations -------------------------------------------------------------------------
    def allocate(self) -> None:
        rng = self.rng
        dev = rng.choice(self.devices)
        kind = rng.choice(dev.kinds)
        n = rng.choice([0, 1, 7, 64, 300, 1000])
        values = (np.arange(n, dtype=np.int32) * 31 + self.tid * 100003 + self.ops) % 65521
        after = self.reset_done.is_set()
        where = rng.choice(["pool", "shared", "local"])
        scope = (ga.cached(self.shared) if where == "shared" else
                 ga.cached(self.local) if where == "local" else contextlib.nullcontext())
        with scope:
            try:
                a = ga.asarray(values, device=dev, kind=kind)
            except ga.DeviceResetError:
                # the reset ran between the allocation and the upload: the new array was
                # born in the epoch the reset ended, and asarray says so (it freed it)
                if dev != self.reset_dev or after:
                    raise
                self.reset_errors += 1
                return
            if where == "shared" and rng.random() < 0.2:
                try:
                    self.shared.free()
                except ga.CacheInUseError:
                    self.in_use_errors += 1
                else:
                    self.errors.append("shared cache freed while this thread is in its scope")
        self.items.append(Item(a, values, after, where == "local" and n > 0))  # 0 bytes: no buffer

    def derive(self) -> None:
        item = self.rng.choice(self.items)
        how = self.rng.choice(["slice", "reverse", "reshape", "view"])
        if how == "slice":
            key = slice(1, None, 2)
        elif how == "reverse":
            key = slice(None, None, -1)
        else:
            key = None
        if key is not None:
            arr = self._use(item, lambda a: a[key])
            values = item.values[key]
        elif how == "reshape" and item.values.size % 2 == 0 and item.values.size:
            arr = self._use(item, lambda a: a.reshape(2, -1))
            values = item.values.reshape(2, -1)
        else:
            arr = self._use(item, lambda a: a.view(np.uint32))
            values = item.values.view(np.uint32)
        if arr is not None and arr is not item.arr:  # reshape to the same shape is a itself
            self.items.append(Item(arr, values, item.after_reset, item.local))

    def verify(self) -> None:
        item = self.rng.choice(self.items)
        got = self._use(item, lambda a: a.get())
        if got is not None and not np.array_equal(got, item.values):
            self.errors.append(f"thread {self.tid}: wrong values in a {item.arr.shape} array "
                               f"on {item.arr.device}: memory shared with another array?")

    def write(self) -> None:
        item = self.rng.choice(self.items)
        fresh = (item.values.astype(np.int64) * 3 + 1) % 65521
        fresh = fresh.astype(item.values.dtype)

        def do(a):
            a[...] = fresh
            return True

        if self._use(item, do):
            item.values[...] = fresh  # views share the values array like NumPy views

    def free(self) -> None:
        item = self.rng.choice(self.items)
        self._forget(item)
        if self.rng.random() < 0.5:
            item.arr.free()
        # else: dropped; its finalizer releases the handle (maybe during another allocation)

    def free_local_cache(self) -> None:
        mine = [it for it in self.items if it.local]
        self.local.free()
        for it in mine:
            self._forget(it)
            try:
                it.arr.get()
            except ga.FreedArrayError as e:
                if not isinstance(e, ga.DeviceResetError) and "AllocCache" not in str(e):
                    raise
            else:
                self.errors.append("an array of a freed cache was still usable")

    def run(self, ops: int, progress: list) -> None:
        rng = self.rng
        try:
            for self.ops in range(ops):
                choice = rng.random()
                if not self.items or choice < 0.25:
                    self.allocate()
                elif choice < 0.40:
                    self.derive()
                elif choice < 0.60:
                    self.verify()
                elif choice < 0.70:
                    self.write()
                elif choice < 0.93:
                    self.free()
                elif choice < 0.96:
                    self.free_local_cache()
                else:
                    gc.collect()
                progress[self.tid] = self.ops
                if len(self.items) > 40:
                    for it in self.items[:20]:
                        it.arr.free()
                    del self.items[:20]
        except BaseException as e:  # reported by the main thread
            self.errors.append(f"thread {self.tid}: {type(e).__name__}: {e}")
        finally:
            for it in self.items:
                it.arr.free()
            self.items.clear()
            try:
                self.local.free()
            except BaseException as e:
                self.errors.append(f"thread {self.tid}: freeing its cache: {e!r}")
            progress[self.tid] = ops


def _run_round(reset_dev, round_no: int) -> dict:
    devices = ga.devices()
    fbs = {}
    double_frees: list[str] = []
    gc.collect()
    for dev in devices:
        ga.trim(dev)
    with contextlib.ExitStack() as stack:
        for dev in devices:
            fb = fbs[dev] = stack.enter_context(inject(dev))
            known = set(dev.memory.live)  # blocks from before (legitimately freed later)

            def hook(index, kind, ptr, nbytes, fb=fb, known=known):
                if ptr not in fb.live and ptr not in known:
                    double_frees.append(f"free of 0x{ptr:x} not allocated ({fb.name})")
                known.discard(ptr)

            fb.on_call("free", hook)
        base = {dev: ga.memory_stats(dev) for dev in devices}
        before_live = {dev: set(fbs[dev].live) for dev in devices}
        shared = ga.AllocCache()
        reset_done = threading.Event()
        progress = [0] * _profiles.THREADS
        workers = [Worker(t, devices, reset_dev, shared, reset_done, 1000 * round_no + t)
                   for t in range(_profiles.THREADS)]
        threads = [threading.Thread(target=w.run, args=(_profiles.THREAD_OPS, progress),
                                    daemon=True, name=f"ga-worker-{w.tid}") for w in workers]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        # the reset, once every thread is under way
        deadline = time.monotonic() + JOIN_TIMEOUT
        while min(progress) < _profiles.THREAD_OPS // 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        resetter = threading.Thread(target=ga.device_reset, args=(reset_dev,), daemon=True)
        resetter.start()
        resetter.join(JOIN_TIMEOUT)
        if resetter.is_alive():
            pytest.fail(f"deadlock: device_reset({reset_dev}) did not return")
        reset_done.set()
        for t in threads:
            t.join(max(deadline - time.monotonic(), 1.0))
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            pytest.fail(f"deadlock: {stuck} did not finish within {JOIN_TIMEOUT} s")
        seconds = time.perf_counter() - t0
        errors = [e for w in workers for e in w.errors]
        assert not errors, errors[:5]
        assert not double_frees, double_frees[:5]
        reset_errors = sum(w.reset_errors for w in workers)
        in_use_errors = sum(w.in_use_errors for w in workers)
        shared.free()
        del shared, workers
        gc.collect()
        for dev in devices:
            ga.trim(dev)
            s = ga.memory_stats(dev)
            want = 0 if dev == reset_dev else base[dev]["used_bytes"]
            assert s["used_bytes"] == want, (str(dev), s["used_bytes"], want)
            assert s["reserved_bytes"] == want, (str(dev), s)
            assert s["cache_held_bytes"] == 0 or dev != reset_dev
            leaked = set(fbs[dev].live) - before_live[dev]
            assert not leaked, f"{dev}: {len(leaked)} back-end allocations never freed"
        assert not double_frees, double_frees[:5]
    return {"threads": len(threads), "ops": _profiles.THREAD_OPS * len(threads),
            "seconds": round(seconds, 2), "reset_errors": reset_errors,
            "cache_in_use_errors": in_use_errors}


@pytest.mark.parametrize("round_no", range(_profiles.THREAD_ROUNDS))
def test_threads_with_reset(device, round_no):
    """Runs in a child process: a crash there (a back-end reset racing with other threads'
    calls) fails this test instead of killing the whole test run."""
    code = ("import sys, json, test_threads as t; "
            f"print('FIGURES', json.dumps(t._run_round(t.ga.get_device({str(device)!r}), "
            f"{round_no})))")
    # The caller's PYTHONPATH before ../src: the sanitizer step's build is the one imported.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (
        os.path.dirname(__file__), os.environ.get("PYTHONPATH", ""),
        os.path.join(os.path.dirname(__file__), "..", "src")) if p))
    try:
        proc = subprocess.run([sys.executable, "-W", "error", "-c", code], env=env,
                              capture_output=True, text=True, timeout=JOIN_TIMEOUT + 60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"deadlock: the threaded run on {device} did not finish")
    assert proc.returncode == 0, (
        f"threaded run with a reset of {device} failed (exit status {proc.returncode}):\n"
        f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    line = [x for x in proc.stdout.splitlines() if x.startswith("FIGURES ")][-1]
    _profiles.record("threads", device=str(device), round=round_no,
                     **json.loads(line[len("FIGURES "):]))


def test_reset_during_allocation_keeps_the_limit_books(device):
    """A reset running while an allocation waited for the platform left the pool's reserved
    bytes negative (the limit then let more through) and stamped the block with the new epoch
    although it may predate the reset (pool.MemoryManager._try_backend / new_storage)."""
    gc.collect()
    ga.trim(device)
    with inject(device) as fb:
        def reset_now(index, kind, nbytes):
            fb.on_call("allocate", None)
            ga.device_reset(device)

        fb.on_call("allocate", reset_now)
        a = ga.empty(100, np.uint8, device=device)
        with pytest.raises(ga.DeviceResetError):
            a.get()  # born in the epoch the reset ended
        a.free()
        s = ga.memory_stats(device)
        assert (s["used_bytes"], s["reserved_bytes"]) == (0, 0)
        ga.set_memory_limit(4096, device)
        try:
            b = ga.empty(4096, np.uint8, device=device)
            with pytest.raises(ga.OutOfMemoryError):
                ga.empty(512, np.uint8, device=device)
            b.free()
        finally:
            ga.set_memory_limit(None, device)
    ga.device_reset(device)  # gives back the block allocated across the reset
