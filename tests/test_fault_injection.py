"""Fault injection at every back-end call of representative operations.

For each operation, a clean run records the ordered back-end calls it makes.
Then, for every position N in that sequence, the operation is run again with
the N-th call failing -- once (the platform hiccups) and from then on (the
platform stays broken until healed) -- through the counting wrapper of
``faults.py`` around the real back-end.  Each run must either succeed or raise
a documented error (``OutOfMemoryError`` when allocation keeps failing,
``BackendError`` naming the failed call); failed frees and synchronizes inside
finalizer-like paths become a ``GPUArraysWarning``.  Afterwards:

- ``used_bytes`` is back to its value before the operation once its results
  are freed, and ``ga.trim`` empties the pool;
- every block the back-end allocated during the run was freed through it,
  except blocks whose ``free`` was the injected failure;
- no address was freed twice; the device still allocates, writes and reads.
"""

from __future__ import annotations

import gc
import warnings

import _profiles
import numpy as np
import pytest
from faults import INJECTED_CODE, PRIMITIVES, inject

import gpuarrays as ga

F4 = np.dtype(np.float32)


def _x(dev):
    return ga.asarray(np.arange(150, dtype=F4).reshape(3, 50), device=dev)


def _trim_after_release(dev, env):
    y = ga.ones(4096, F4, device=dev)
    y.free()
    return ga.trim(dev)


def _cache_alloc(dev, env):
    cache = env["cache"] = ga.AllocCache()
    with ga.cached(cache):
        y = ga.ones(64, F4, device=dev)
        z = y[::2].copy()
    return [y, z]


def _to_host_kind(dev, env):
    kind = "host" if "host" in dev.kinds else dev.kinds[-1]
    return env["x"].to_device(dev, kind=kind)


# name -> (needs input x, operation(dev, env) -> results to free)
OPERATIONS = {
    "empty": (False, lambda dev, env: ga.empty(64, F4, device=dev)),
    "zeros": (False, lambda dev, env: ga.zeros((3, 50), F4, device=dev)),
    "asarray": (False, lambda dev, env: ga.asarray(np.arange(100, dtype=F4), device=dev)),
    "copy": (True, lambda dev, env: env["x"].copy()),
    "astype": (True, lambda dev, env: env["x"].astype(np.int32)),
    "setitem-strided": (True, lambda dev, env: env["x"].__setitem__(
        (slice(1, None), slice(None, None, 2)), np.arange(25, dtype=F4))),
    "setitem-overlap": (True, lambda dev, env: env["x"].__setitem__(
        (slice(None), slice(1, None)), env["x"][:, :-1])),
    "get": (True, lambda dev, env: env["x"].get()),
    "get-strided": (True, lambda dev, env: env["x"][:, ::3].get()),
    "strided-copy": (True, lambda dev, env: env["x"][::-1, 1::2].copy()),
    "reshape-needs-copy": (True, lambda dev, env: env["x"].T.reshape(150)),
    "to-device-kind": (True, _to_host_kind),
    "cache-scope-allocation": (False, _cache_alloc),
    "trim": (False, _trim_after_release),
    "synchronize": (False, lambda dev, env: ga.synchronize(dev)),
    "device-reset": (False, lambda dev, env: ga.device_reset(dev)),
}

FIGURES: dict[str, int] = {}


class Recorder:
    """Back-end calls in order (a hook on every primitive), and free calls' addresses."""

    def __init__(self, fb) -> None:
        self.fb = fb
        self.sequence: list[str] = []
        self.free_args: list[int] = []
        for method in PRIMITIVES:
            fb.on_call(method, self._hook(method))

    def _hook(self, method):
        def hook(*args):
            self.sequence.append(method)
            if method == "free":
                self.free_args.append(args[2])
        return hook


def _release(results) -> None:
    if isinstance(results, ga.GPUArray):
        results.free()
    elif isinstance(results, list):
        for r in results:
            r.free()


def _attempt(dev, fb, name, plan):
    """Run operation ``name`` with ``plan`` = (method, nth, times) or None; check afterwards.

    Returns (back-end call sequence, outcome, injected failures).
    """
    needs_x, op = OPERATIONS[name]
    env = {}
    gc.collect()
    before = ga.memory_stats(dev)
    if needs_x:
        env["x"] = _x(dev)
    ga.trim(dev)
    fb.reset_counts()
    rec = Recorder(fb)
    live_before = dict(fb.live)
    if plan is not None:
        method, nth, times = plan
        fb.fail(method, nth=nth, times=times)
    outcome = "ok"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _release(op(dev, env))
        except ga.OutOfMemoryError as e:
            outcome = "OutOfMemoryError"
            assert "cannot allocate" in str(e)
        except ga.BackendError as e:
            outcome = "BackendError"
            assert e.code == INJECTED_CODE and "injected" in str(e), str(e)
        finally:
            fb.heal()
            sequence = rec.sequence
            injected = sum(fb.failures.values())
        unexpected = [w for w in caught if not issubclass(w.category, ga.GPUArraysWarning)]
        assert not unexpected, [str(w.message) for w in unexpected]
        if caught:
            outcome += "+warning"
        # clean up, then check the books
        for key in ("x",):
            if key in env:
                env[key].free()
        if "cache" in env:
            env["cache"].free()
        env.clear()
        gc.collect()
        ga.trim(dev)
    after = ga.memory_stats(dev)
    failed_frees = set(rec.free_args) - {p for p, _ in fb.freed}
    if name == "device-reset":
        assert after["used_bytes"] == 0 and after["reserved_bytes"] == 0, after
        if fb.live:  # the injected failure kept the platform from freeing: do it now
            fb.real.reset(dev.index)
            fb.live.clear()
    else:
        assert after["used_bytes"] == before["used_bytes"], (name, plan, outcome, before, after)
        assert after["pool_cached_bytes"] == 0
        leaked = {p: n for p, n in fb.live.items() if p not in live_before}
        assert set(leaked) <= set(failed_frees), (name, plan, outcome, leaked)
        for p, n in leaked.items():  # the injected free failure: free for real now
            fb.real.free(dev.index, "device", p, n)
            fb.live.pop(p)
    freed = [p for p, _ in fb.freed]
    assert len(freed) == len(set(freed)), f"double free in {name} with {plan}"
    # the device is usable
    y = ga.arange(10, dtype=F4, device=dev)
    y[::2] = -1
    np.testing.assert_array_equal(y.get(), np.where(np.arange(10) % 2, np.arange(10), -1))
    y.free()
    return sequence, outcome, injected


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_fault_at_every_call(device, name):
    outcomes: dict[str, int] = {}
    injected = 0
    with inject(device) as fb:
        sequence, outcome, _ = _attempt(device, fb, name, None)
        assert outcome == "ok"
        assert sequence, f"{name} made no back-end call"
        for mode in (1, None):  # fail once; fail from then on
            for position, method in enumerate(sequence):
                nth = sequence[:position + 1].count(method)
                _, outcome, count = _attempt(device, fb, name, (method, nth, mode))
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                injected += count
    assert injected >= len(sequence)
    FIGURES["faults"] = FIGURES.get("faults", 0) + injected
    _profiles.record("fault_injection", device=str(device), operation=name,
                     calls=len(sequence), injected=injected, outcomes=outcomes)


def test_allocation_failure_runs_the_ladder_then_succeeds(device):
    """One failed platform allocation is absorbed by the ladder (no error, a retry counted)."""
    with inject(device) as fb:
        gc.collect()
        ga.trim(device)
        before = ga.memory_stats(device)["oom_retries"]
        fb.fail_allocations(2)
        a = ga.zeros(1000, F4, device=device)
        np.testing.assert_array_equal(a.get(), np.zeros(1000, F4))
        a.free()
        assert ga.memory_stats(device)["oom_retries"] > before
        assert fb.failures["allocate"] == 2
