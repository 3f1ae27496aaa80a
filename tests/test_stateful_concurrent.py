"""Stateful fuzzing of compute calls racing frees, resets and forks (issue 30, item 7).

A hypothesis ``RuleBasedStateMachine`` keeps live arrays with known values (a
NumPy shadow each, never written after allocation) and starts *workers*:
threads that loop one compute operation (operators, reductions, scans, sort,
where, boolean masks, concat, fft) on chosen live arrays and record each
outcome.  Meanwhile the main thread frees those arrays (``free()``, a forced
free, ``unsafe_free(force=True)``, the ``AllocCache`` that served them),
immediately allocates new arrays of the same size with other values (so a
released block is handed out again and overwritten), trims, collects, and
rarely resets the device or forks (the child resets the device and computes).
Other rules wrap NumPy memory, queue kernels reading it and drop it, and ask
for sizes near the int64 limits.

Invariants:

- every outcome a worker recorded is NumPy's answer on the operands' values
  (they are fixed, so the shadows are the oracle), or ``FreedArrayError``
  (``DeviceResetError`` after a reset) raised after one of its operands was
  freed or the device reset -- never another array's data, never another
  error, never a crash; workers finish (no deadlock);
- live arrays still hold their values; freed ones raise ``FreedArrayError``;
- a forked child's ``device_reset`` and compute calls finish (a child still
  running after ``FORK_LIMIT_S`` is killed and fails the test);
- a wrap released while kernels reading it are queued: the kernels' results
  are NumPy's;
- sizes past int64 (``repeat`` counts, ``concat``, ``tile``, ``arange``,
  ``linspace``, ``reshape``, creation, and ``nonzero``/``unique``/masks of
  zero-size arrays with huge axes) raise ``ValueError`` or a ``MemoryError``
  (``OutOfMemoryError``), or give NumPy's answer -- never ``SystemError``,
  another error or a crash.  Requested sizes are at least 2**50 bytes, past
  any address space, so nothing is ever really allocated or filled.

A crash kills the process: under pytest-xdist the worker's death fails the
test.  Shrinking is off (a race does not replay); the failing steps are
printed.  ``GPUARRAYS_TEST_PROFILE=long`` runs randomised and longer.

With a fix reverted it fails on every device within a run: compute calls without
holds on their storages (another array's values, or a segfault on OpenCL), a
wrap released under queued kernels (OpenCL; docs/reliability.md row 16), repeat
counts whose sum wraps (a short result or a segfault; row 14), a fork during a
compute call (the child hangs in ``device_reset``; row 13).
"""

from __future__ import annotations

import gc
import math
import os
import signal
import sys
import threading
import time
import warnings

import _profiles
import numpy as np
from hypothesis import Phase, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import gpuarrays as ga

MAX_LIVE = 10
MAX_WORKERS = 2
MAX_FREED = 12
JOIN_LIMIT_S = 60.0
FORK_LIMIT_S = 20.0
I64 = 2**63 - 1
# Element counts: the largest makes sort and fft take milliseconds on a CPU device, long
# enough for a free to land inside the call.
BIG = 1 << 20  # 8 MiB of float64
SIZES = st.sampled_from([1 << 10, 1 << 16, BIG])
DELAYS = st.sampled_from([0.0, 0.0005, 0.002, 0.005])
PAUSES = st.sampled_from([(0.0, 0.0), (1e-4, 0.0), (3e-4, 0.0), (1e-3, 0.0), (0.0, 0.05),
                          (0.0, 0.3), (0.0, 0.7)])
T = 500.0  # threshold of where and the masks; values are 0..999

FIGURES: dict[str, dict[str, int]] = {}


class Violation(AssertionError):
    """An invariant of the model failed (each one is kept in ``VIOLATIONS``)."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        VIOLATIONS.append(self)


# A race may not fail again when hypothesis replays the sequence: it then reports a flaky
# test or inconsistent data generation.  The test raises the first violation instead.
VIOLATIONS: list[Violation] = []


def _values(n: int, seed: int) -> np.ndarray:
    """Integers 0..999 as float64 (sums and scans stay exact), a different pattern per seed."""
    return ((np.arange(n, dtype=np.int64) * (2 * seed + 3) + 17 * seed) % 1000).astype(np.float64)


# name -> (gpuarrays call, NumPy call, number of operands)
OPS = {
    "add": (lambda x, y: x + y, lambda x, y: x + y, 2),
    "sum": (lambda x: ga.sum(x), lambda x: np.sum(x), 1),
    "max": (lambda x: ga.max(x), lambda x: np.max(x), 1),
    "cumulative_sum": (lambda x: ga.cumulative_sum(x), lambda x: np.cumulative_sum(x), 1),
    "sort": (lambda x: ga.sort(x), lambda x: np.sort(x), 1),
    "where": (lambda x, y: ga.where(x > T, x, y), lambda x, y: np.where(x > T, x, y), 2),
    "mask": (lambda x, y: x[y > T], lambda x, y: x[y > T], 2),
    "concat": (lambda x, y: ga.concat([x, y]), lambda x, y: np.concat([x, y]), 2),
    "fft": (lambda x: ga.fft.fft(x), lambda x: np.fft.fft(x), 1),
}


def _agree(op: str, got: np.ndarray, want: np.ndarray) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if op == "fft":
        scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
        return bool(np.allclose(got, want, rtol=1e-9, atol=1e-9 * scale))
    return bool(np.array_equal(got, want))


class Rec:
    """A live array and its values (fixed: nothing writes into it after allocation)."""

    __slots__ = ("arr", "shadow", "cache", "how")

    def __init__(self, arr, shadow: np.ndarray, cache=None, how: str = "pool") -> None:
        self.arr, self.shadow, self.cache, self.how = arr, shadow, cache, how


class Worker(threading.Thread):
    """Loops one compute operation on fixed operands; records every outcome."""

    def __init__(self, op: str, recs: list[Rec], iterations: int) -> None:
        super().__init__(daemon=True, name=f"worker-{op}")
        self.op = op
        self.recs = list(recs)
        self.arrays = [r.arr for r in recs]  # the worker's own references
        self.shadows = [r.shadow for r in recs]
        self.iterations = iterations
        self.results: list[tuple[str, object]] = []  # ("ok", values) / ("freed"|"error", exc)
        self.started = threading.Event()
        self.stop = threading.Event()
        self.released = False  # set by the main thread *before* freeing an operand or a reset
        self.checked = 0
        self._want = None

    def run(self) -> None:
        call = OPS[self.op][0]
        self.started.set()
        for _ in range(self.iterations):
            if self.stop.is_set():
                return
            try:
                r = call(*self.arrays)
                got = r.get()
                del r
                self.results.append(("ok", got))
            except ga.FreedArrayError as e:  # DeviceResetError is one
                self.results.append(("freed", e))
                return
            except BaseException as e:  # noqa: BLE001 -- every other outcome is a failure
                self.results.append(("error", e))
                return

    def want(self) -> np.ndarray:
        if self._want is None:
            self._want = OPS[self.op][1](*self.shadows)
        return self._want

    def check(self) -> None:
        """The outcomes recorded since the last check (the list only grows)."""
        results = self.results[self.checked:len(self.results)]
        self.checked += len(results)
        for what, payload in results:
            if what == "ok":
                if not _agree(self.op, payload, self.want()):
                    note(f"{self.op} gave {payload!r}\nNumPy {self.want()!r}")
                    raise Violation(f"{self.op} on {[a.shape for a in self.shadows]} returned "
                                    f"values that are not NumPy's answer (another array's data?)"
                                    f"; an operand was released meanwhile: {self.released}")
            elif what == "freed":
                if not self.released:
                    raise Violation(f"{self.op} raised {payload!r} but no operand was freed "
                                    f"and the device was not reset")
            else:
                raise Violation(f"{self.op} raised {payload!r} while its operands were "
                                f"released (expected NumPy's answer or FreedArrayError)"
                                ) from payload


_CHILD_FAILED = 1
_CHILD_RAISED = 2


def _in_forked_child(spec: str) -> None:
    """Runs in the child of a fork taken while a worker was inside a compute call: reset the
    device and compute.  Never returns."""
    code = _CHILD_RAISED
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dev = ga.get_device(spec)
            try:
                ga.device_reset(dev)
            except ga.BackendError as e:  # a platform the parent initialised: named remedy
                if dev.backend == "cpu" or "os.fork()" not in str(e):
                    raise
            ok = True
            for d in (["cpu:0"] if dev.backend == "cpu" else ["cpu:0", spec]):
                try:
                    x = ga.asarray(np.arange(5.0), device=d)
                    ok &= float(ga.sum(x * 2).get()) == 20.0 and d == "cpu:0"
                except ga.BackendError as e:
                    ok &= d != "cpu:0" and "os.fork()" in str(e)
            code = 0 if ok else _CHILD_FAILED
    except BaseException:  # noqa: BLE001, S110 -- reported by the exit code
        pass
    finally:
        os._exit(code)


class ConcurrentMachine(RuleBasedStateMachine):
    """See the module docstring.  ``device`` is set by :func:`machine_for`."""

    device: ga.Device = None

    def __init__(self) -> None:
        super().__init__()
        dev = self.device
        self.live: list[Rec] = []
        self.freed: list = []
        self.workers: list[Worker] = []
        self.caches: list[ga.AllocCache] = []
        self.junk: list[np.ndarray] = []  # host memory that takes the place of released wraps
        self.seed = 0
        self.figures = FIGURES.setdefault(str(dev), {"sequences": 0, "steps": 0})
        self.figures["sequences"] += 1
        gc.collect()
        ga.trim(dev)
        self._baseline()

    # bookkeeping ---------------------------------------------------------------------------
    def _baseline(self) -> None:
        s = ga.memory_stats(self.device)
        self.used0 = s["used_bytes"] - s["cache_held_bytes"]

    def _count(self, name: str) -> None:
        self.figures[name] = self.figures.get(name, 0) + 1

    def _next_seed(self) -> int:
        self.seed += 1
        return self.seed

    def _new(self, n: int, how: str, cache=None, fill: float | None = None) -> Rec:
        dev = self.device
        host = _values(n, self._next_seed()) if fill is None else np.full(n, fill)
        if how == "wrap":
            memory = host.copy()
            a = ga.unsafe_wrap(memory, device=dev)
            del memory  # the wrap holds the last reference to its memory
        elif how == "cache":
            with ga.cached(cache):
                a = ga.asarray(host, device=dev)
        elif fill is not None:
            a = ga.full((n,), fill, dtype=np.float64, device=dev)
        else:
            a = ga.asarray(host, device=dev)
        host.flags.writeable = False
        rec = Rec(a, host, cache, how)
        self.live.append(rec)
        return rec

    def _released(self, arr) -> None:
        for w in self.workers:
            if any(a is arr for a in w.arrays):
                w.released = True

    def _forget(self, rec: Rec) -> None:
        self.live.remove(rec)
        self.freed.append(rec.arr)
        del self.freed[:-MAX_FREED]

    def _release(self, rec: Rec, how: str, reuse: bool = True) -> list[Rec]:
        """Free ``rec`` (how), then allocate arrays of the same size with other values at
        once, so a released block is handed out again while work may still read it."""
        if how == "cache" and rec.cache is None:
            how = "force"
        gone = [r for r in self.live if r.cache is rec.cache] if how == "cache" else [rec]
        for r in gone:
            self._released(r.arr)
        if how == "free":
            rec.arr.free()
        elif how == "force":
            rec.arr.free(force=True)
        elif how == "unsafe_force":
            ga.unsafe_free(rec.arr, force=True)
        else:
            rec.cache.free()
            self.caches.remove(rec.cache)
        for r in gone:
            self._forget(r)
        n = rec.shadow.size
        if reuse and rec.how == "wrap":  # its NumPy memory went back to the allocator
            self.junk = (self.junk + [np.full(n, -1.0) for _ in range(2)])[-4:]
        for _ in range(min(2, MAX_LIVE + 2 - len(self.live)) if reuse else 0):
            self._new(n, "pool", fill=-float(self._next_seed()))
        self._count(f"release_{how}")
        if reuse:
            self._check_live()
        return gone

    # rules: arrays ---------------------------------------------------------------------------
    @precondition(lambda self: len(self.live) < MAX_LIVE)
    @rule(n=SIZES, how=st.sampled_from(["pool", "pool", "cache", "wrap"]), new_cache=st.booleans())
    def allocate(self, n, how, new_cache) -> None:
        cache = None
        if how == "cache":
            if new_cache or not self.caches:
                self.caches.append(ga.AllocCache())
            cache = self.caches[-1]
        self._new(n, how, cache)
        self._count(f"allocate_{how}")

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, 100),
          how=st.sampled_from(["free", "force", "unsafe_force", "cache"]), delay=DELAYS)
    def release(self, i, how, delay) -> None:
        time.sleep(delay)
        self._release(self.live[i % len(self.live)], how)

    # rules: workers --------------------------------------------------------------------------
    def _start(self, op: str, i: int, j: int, iterations: int) -> Worker:
        x = self.live[i % len(self.live)]
        same = [r for r in self.live if r.shadow.size == x.shadow.size]
        y = self.live[j % len(self.live)]
        if y.shadow.size != x.shadow.size:
            y = same[j % len(same)]
        recs = [x, y][:OPS[op][2]]
        # the number of workers never depends on timing (hypothesis' draws must not)
        self._join(self.workers[:len(self.workers) + 1 - MAX_WORKERS])
        w = Worker(op, recs, iterations)
        self.workers.append(w)
        w.start()
        if not w.started.wait(JOIN_LIMIT_S):
            raise Violation("a worker thread did not start")
        self._count(f"worker_{op}")
        return w

    @precondition(lambda self: self.live)
    @rule(op=st.sampled_from(sorted(OPS)), i=st.integers(0, 100), j=st.integers(0, 100),
          iterations=st.integers(1, 4))
    def start_worker(self, op, i, j, iterations) -> None:
        self._start(op, i, j, iterations)

    @rule(op=st.sampled_from(sorted(OPS)), j=st.integers(0, 100),
          home=st.sampled_from(["pool", "pool", "cache", "wrap"]),
          how=st.sampled_from(["free", "force", "force", "unsafe_force", "cache"]),
          pause=PAUSES, iterations=st.integers(1, 2), rounds=st.integers(1, 2))
    def race(self, op, j, home, how, pause, iterations, rounds) -> None:
        """A worker on a large new x (and y), then a free of x during its first call and a
        reuse of the block, ``rounds`` times: the interleaving the rules above reach only by
        chance.  ``pause``: seconds plus a fraction of the call's measured duration (most
        calls read their operands early: small pauses find most)."""
        if how == "cache":
            home = "cache"
        seconds, fraction = pause
        for _ in range(rounds):
            if home == "cache" and not self.caches:
                self.caches.append(ga.AllocCache())
            while len(self.live) > MAX_LIVE - 2:
                self._release(self.live[0], "free", reuse=False)
            x = self._new(BIG, home, self.caches[-1] if home == "cache" else None)
            others = [r for r in self.live if r.shadow.size == BIG and r is not x]
            y = others[j % len(others)] if others else x
            wait = seconds + fraction * _duration(self.device, op)
            self._start(op, self.live.index(x), self.live.index(y), iterations)
            time.sleep(wait)
            self._release(x, how)
            self._count("race")

    @precondition(lambda self: self.workers)
    @rule()
    def join_workers(self) -> None:
        self._join(list(self.workers))

    def _join(self, workers: list[Worker]) -> None:
        for w in workers:
            w.join(JOIN_LIMIT_S)
            if w.is_alive():
                raise Violation(f"a worker running {w.op} did not finish in {JOIN_LIMIT_S} s "
                                f"(deadlock?)")
            w.check()
            self.workers.remove(w)

    # rules: maintenance, reset, fork ----------------------------------------------------------
    @rule()
    def trim(self) -> None:
        ga.trim(self.device)

    @rule()
    def collect(self) -> None:
        gc.collect()

    @rule(roll=st.integers(0, 9))
    def reset(self, roll) -> None:
        if roll != 7:  # rarely (hypothesis favours small and boundary values)
            return
        for w in self.workers:
            w.released = True
        with warnings.catch_warnings():  # work in flight holds storages: "kept until dropped"
            warnings.simplefilter("ignore", ga.GPUArraysWarning)
            ga.device_reset(self.device)
        for r in list(self.live):
            self._forget(r)
        self._baseline()
        self._count("reset")

    @precondition(lambda self: self.live)
    @rule(roll=st.integers(0, 9))
    def fork(self, roll) -> None:
        """Fork while a worker is inside a compute call (it holds the device's gate)."""
        if roll not in (3, 5, 8) or not hasattr(os, "fork"):
            return
        big = max(self.live, key=lambda r: r.shadow.size)
        if big.shadow.size < BIG:  # a call long enough to fork inside it
            big = self._new(BIG, "pool")
        self._start("sort", self.live.index(big), 0, 4)
        gate = self.device.gate
        deadline = time.monotonic() + 0.05
        while getattr(gate, "_readers", 1) == 0 and time.monotonic() < deadline:
            time.sleep(0)
        inside = getattr(gate, "_readers", 0) > 0
        with warnings.catch_warnings():  # Python 3.12+: fork of a process with threads
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            _in_forked_child(str(self.device))
        deadline = time.monotonic() + FORK_LIMIT_S
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise Violation(f"a child forked while a compute call held the gate "
                                f"({inside}) hung for {FORK_LIMIT_S} s in device_reset or a "
                                f"compute call")
            time.sleep(0.005)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise Violation(f"the forked child exited with {code} (1: a wrong value or no "
                            f"BackendError, 2: an exception, negative: a signal)")
        self._count("fork_during_compute" if inside else "fork")

    # rules: foreign memory with queued work ---------------------------------------------------
    @rule(n=st.sampled_from([1 << 18, 1 << 20, 1 << 21]),
          how=st.sampled_from(["free", "force", "del", "collect"]))
    def wrap_queue_release(self, n, how) -> None:
        """Queue kernels reading a wrap of NumPy memory, release the wrap at once (the NumPy
        memory goes back to the allocator), take memory again, then read the results."""
        scales = (1.0, 2.0, 3.0, 4.0)
        source = _values(n, self._next_seed())
        memory = source.copy()
        w = ga.unsafe_wrap(memory, device=self.device)
        ys = [w * s for s in scales]
        if how == "free":
            w.free()
        elif how == "force":
            w.free(force=True)
        elif how == "collect":  # released by the garbage collector (a cycle holds it)
            cycle = [w]
            cycle.append(cycle)
            del cycle
        del w, memory
        gc.collect()
        junk = [np.full(n, -1.0) for _ in scales]
        for y, s in zip(ys, scales, strict=True):
            if not np.array_equal(y.get(), source * s):
                raise Violation(f"kernels queued on a wrap released by {how} read other memory")
        del junk, ys
        self._count("wrap_queue_release")

    # rules: sizes near the int64 limits -------------------------------------------------------
    @initialize(data=st.data())
    def huge_first(self, data) -> None:
        """Every sequence starts with repeat counts near the limits (how hypothesis weighs
        the rules below differs per device)."""
        self.huge("repeat_counts", data)

    @rule(case=st.sampled_from(["repeat_counts"] * 3 + [
        "repeat_scalar", "concat", "tile", "arange", "linspace", "reshape", "create",
        "zero_size"]), data=st.data())
    def huge(self, case, data) -> None:
        dev = self.device
        # at least 2**50: no request ever fits an address space (nothing is filled)
        near = st.sampled_from([I64, I64 - 1, 2**62, 2**62 + 1, 2**61 + 7, 2**50])
        expect = None  # NumPy's verdict where it is safe to compute (nothing allocated)
        overflow = False  # a size past int64: a ValueError, nothing else
        if case == "repeat_counts":
            dt = data.draw(st.sampled_from([np.int64, np.uint64]), label="dtype")
            small = st.sampled_from([0, 1, 2, 3])
            big = near if dt is np.int64 else st.sampled_from([2**63, 2**64 - 1, I64, 2**62])
            # running sums that wrap around 2**64 to a negative, zero or small total
            wraps = [[I64, I64, 3], [2**62] * 4, [2**62] * 3, [I64, 1], [2**61] * 8]
            if dt is np.uint64:
                wraps += [[2**63, 1, 1], [2**64 - 1, 2], [2**64 - 1, 1], [2**63, 2**63]]
            counts = data.draw(st.one_of(st.sampled_from(wraps), st.sampled_from(wraps), st.lists(
                st.one_of(big, small), min_size=1, max_size=4)), label="counts")
            x = ga.asarray(np.arange(float(len(counts))), device=dev)
            c = ga.asarray(np.array(counts, dtype=dt), device=dev)
            total = sum(counts)
            overflow = total > I64
            if total <= 64:
                expect = np.repeat(np.arange(float(len(counts))), counts)
            elif total * 8 < 2**50:
                return  # a real allocation (not drawn: 'near' starts at 2**50)

            def call():
                return ga.repeat(x, c)
        elif case == "repeat_scalar":
            m = data.draw(st.integers(1, 4), label="m")
            r = data.draw(st.one_of(near, st.just(2**63), st.just(2**64 + 3)), label="repeats")
            x = ga.asarray(np.arange(float(m)), device=dev)
            overflow = m * r > I64

            def call():
                return ga.repeat(x, r)
        elif case == "concat":
            lengths = data.draw(st.lists(near, min_size=2, max_size=3), label="lengths")
            one = ga.asarray(np.ones(1, np.int8), device=dev)

            def call():
                return ga.concat([ga.broadcast_to(one, (k,)) for k in lengths])
        elif case == "tile":
            reps = data.draw(st.lists(st.one_of(near, st.sampled_from([1, 2, 3])), min_size=1,
                                      max_size=3).filter(lambda t: math.prod(t) >= 2**50),
                             label="reps")
            x = ga.asarray(np.arange(3, dtype=np.int8), device=dev)

            def call():
                return ga.tile(x, tuple(reps))
        elif case in ("arange", "linspace"):
            ends = st.sampled_from([0, -1, 1, -(2**63), I64, 2**62, -(2**62), 2**63, 2**64])
            if case == "arange":
                args = (data.draw(ends, label="start"), data.draw(ends, label="stop"),
                        data.draw(st.sampled_from([1, -1, 3, 2**61, -(2**62)]), label="step"))
                span = -((args[0] - args[1]) // args[2])  # ceil((stop - start) / step)
                dt = np.int8
            else:
                args = (0.0, 1.0, data.draw(st.sampled_from(
                    [2**50, 2**62, I64 - 1, I64, 2**63, 2**64]), label="num"))
                span, dt = args[2], np.float64
            if 0 < span < 2**50:
                return  # a real allocation: not this rule's business
            try:
                expect = np.arange(*args, dtype=dt) if case == "arange" else np.linspace(*args)
            except (ValueError, MemoryError, OverflowError, IndexError, TypeError) as e:
                expect = e

            def call():
                if case == "arange":
                    return ga.arange(*args, dtype=dt, device=dev)
                return ga.linspace(*args, device=dev)
        elif case == "reshape":
            size = data.draw(st.sampled_from([0, 3]), label="size")
            shape = data.draw(st.sampled_from([
                (3, 7, 0x6DB6DB6DB6DB6DB7),  # product == 3 modulo 2**64
                (2**62, 4), (2**32, 2**32, 3), (-1, I64), (I64, -1), (2**62, 0, 4),
                (0, I64), (2**64 + 3,)]), label="shape")
            x = ga.asarray(np.arange(float(size)), device=dev)
            try:
                expect = np.arange(float(size)).reshape(shape)
            except (ValueError, OverflowError, TypeError) as e:
                expect = e

            def call():
                return x.reshape(shape)
        elif case == "create":
            shape = tuple(data.draw(st.lists(st.one_of(near, st.sampled_from([1, 2, 3])),
                                             min_size=1, max_size=3).filter(
                lambda t: math.prod(t) >= 2**50), label="shape"))
            how = data.draw(st.sampled_from(["empty", "zeros", "full"]), label="how")

            def call():
                if how == "full":
                    return ga.full(shape, 1, dtype=np.int8, device=dev)
                return getattr(ga, how)(shape, dtype=np.int8, device=dev)
        else:  # zero-size arrays with huge axes: nonzero, unique, masks, reductions
            shape = data.draw(st.sampled_from([(0, 2**62), (2**62, 0), (0, I64)]), label="shape")
            op = data.draw(st.sampled_from(["nonzero", "unique", "mask", "sum", "sort",
                                            "concat", "cumulative_sum"]), label="op")
            try:
                z = ga.empty(shape, dtype=np.int8, device=dev)
                zn = np.empty(shape, dtype=np.int8)
            except (ValueError, MemoryError):
                return  # refused up front, as NumPy may
            calls = {"nonzero": (lambda a, m: m.nonzero(a)),
                     "unique": (lambda a, m: m.unique_values(a)),
                     "mask": (lambda a, m: a[a > 0]), "sum": (lambda a, m: m.sum(a, axis=-1)),
                     "sort": (lambda a, m: m.sort(a, axis=-1)),
                     "concat": (lambda a, m: m.concat([a, a], axis=0)),
                     "cumulative_sum": (lambda a, m: m.cumulative_sum(a, axis=-1))}
            try:
                expect = calls[op](zn, np)
            except (ValueError, MemoryError) as e:
                expect = e

            def call():
                return calls[op](z, ga)
        try:
            got = call()
        except (ValueError, MemoryError) as e:
            if overflow and not isinstance(e, ValueError):
                raise Violation(f"{case}: {type(e).__name__}: {e} (expected a ValueError: "
                                f"the size overflows int64)") from e
            self._count(f"huge_{type(e).__name__}")
            return
        except BaseException as e:
            if isinstance(expect, BaseException) and type(e) is type(expect):
                self._count("huge_as_numpy")
                return  # NumPy raises the same (linspace's IndexError past 2**63 - 1)
            raise Violation(f"{case}: {type(e).__name__}: {e} (expected ValueError or a "
                            f"MemoryError)") from e
        if any(d > I64 for g in _arrays(got) for d in g.shape):
            raise Violation(f"{case}: a result of shape {_shapes(got)}: an axis past int64")
        if isinstance(expect, BaseException) and all(g.size == 0 for g in _arrays(got)):
            self._count("huge_zero_size")  # NumPy refuses some zero-size shapes gpuarrays allows
            return
        if expect is None or isinstance(expect, BaseException):
            raise Violation(f"{case} succeeded ({_shapes(got)}) where it must raise "
                            f"ValueError or a MemoryError (NumPy: {expect!r})")
        if _shapes(got) != _shapes(expect):
            raise Violation(f"{case}: shape {_shapes(got)}, NumPy's {_shapes(expect)}")
        for g, n in zip(_arrays(got), _arrays(expect), strict=True):
            if g.size <= 64 and not np.array_equal(g.get(), n):
                raise Violation(f"{case}: values {g.get()!r}, NumPy's {n!r}")
        self._count("huge_ok")

    # invariants ------------------------------------------------------------------------------
    @invariant()
    def check(self) -> None:
        self.figures["steps"] += 1
        for w in self.workers:
            w.check()  # the outcomes recorded so far (finished workers are joined by rules)
        for a in self.freed:
            try:
                a.get()
            except ga.FreedArrayError:
                continue
            raise Violation(f"a freed array still reads: {a!r}")

    def _check_live(self) -> None:
        """Live arrays keep their values: checked after each release's new allocations, the
        only writes (an aliased block would show here)."""
        for r in self.live:
            if not np.array_equal(r.arr.get(), r.shadow):
                raise Violation(f"a live {r.how} array of {r.shadow.size} elements lost its "
                                f"values (a block handed out twice?)")

    def teardown(self) -> None:
        failed = sys.exc_info()[1] is not None  # a step failed: report that failure
        try:
            for w in self.workers:
                w.stop.set()
            self._join(list(self.workers))
            if not failed:
                self._check_live()
        finally:
            for r in self.live:
                r.arr.free()
            self.live.clear()
            self.freed.clear()
            for c in self.caches:
                c.free()
            self.caches.clear()
            gc.collect()
            ga.trim(self.device)
        if failed:
            return
        s = ga.memory_stats(self.device)
        if s["used_bytes"] - s["cache_held_bytes"] != self.used0:
            raise Violation(f"leak: used_bytes {s['used_bytes']} (cache_held "
                            f"{s['cache_held_bytes']}) after freeing everything, baseline "
                            f"{self.used0}")


_DURATIONS: dict[tuple[str, str], float] = {}


def _duration(device: ga.Device, op: str) -> float:
    """Seconds one call of ``op`` on BIG elements takes on ``device`` (measured once)."""
    key = (str(device), op)
    if key not in _DURATIONS:
        call, _, arity = OPS[op]
        x = ga.asarray(_values(BIG, 0), device=device)
        call(*[x] * arity).get()  # compiled and warm
        t0 = time.perf_counter()
        call(*[x] * arity).get()
        _DURATIONS[key] = time.perf_counter() - t0
        x.free()
    return _DURATIONS[key]


def _arrays(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def _shapes(x) -> object:
    return tuple(a.shape for a in x) if isinstance(x, tuple) else x.shape


def machine_for(device: ga.Device) -> type[ConcurrentMachine]:
    return type(f"ConcurrentMachine_{device.backend}", (ConcurrentMachine,), {"device": device})


# ~20-40 s per device on two cores (ci profile).  No shrinking: a race does not replay.
SETTINGS = settings(_profiles.PROFILE, max_examples=60 if _profiles.LONG else 10,
                    stateful_step_count=50 if _profiles.LONG else 30,
                    phases=(Phase.explicit, Phase.reuse, Phase.generate))


def test_stateful_concurrent(device):
    VIOLATIONS.clear()
    try:
        run_state_machine_as_test(machine_for(device), settings=SETTINGS)
    except Exception as e:
        if VIOLATIONS and not isinstance(e, Violation):
            raise VIOLATIONS[0] from e
        raise
    _profiles.record("stateful_concurrent", device=str(device), **FIGURES.get(str(device), {}))
