"""Allocation history: start/stop/snapshot/dump, events, stacks."""

from __future__ import annotations

import gc
import json
import sys
import threading

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._memory.pool import round_size

EVENT_KEYS = {"action", "time", "device", "size", "address", "kind"}


@pytest.fixture
def history():
    """``ga.memory_history``, stopped and cleared again after the test."""
    gc.collect()
    yield ga.memory_history
    ga.memory_history.stop()
    ga.memory_history.clear()


def events(history, action=None, device=None) -> list[dict]:
    return [e for e in history.snapshot()["events"]
            if (action is None or e["action"] == action)
            and (device is None or e["device"] == str(device))]


def allocate_here(device, n):
    return ga.empty(n, dtype=np.uint8, device=device)


def test_alloc_and_free_events(device, history):
    history.start()
    a = ga.empty(1000, dtype=np.uint8, device=device)
    ptr = a.storage.ptr
    a.free()
    history.stop()
    snap = history.snapshot()
    assert snap["version"] == 1 and snap["recording"] is False
    allocs = events(history, "alloc", device)
    frees = events(history, "free", device)
    assert len(allocs) == 1 and len(frees) == 1
    alloc, free = allocs[0], frees[0]
    assert EVENT_KEYS <= set(alloc) and EVENT_KEYS <= set(free)
    assert alloc["size"] == free["size"] == round_size(1000)
    assert alloc["address"] == free["address"] == ptr
    assert alloc["device"] == str(device) and alloc["kind"] == "device"
    assert 0 <= alloc["time"] <= free["time"]
    stack = alloc["stack"]
    assert stack and "test_history.py" in stack[0] and "test_alloc_and_free_events" in stack[0]
    assert all("gpuarrays" not in frame.split(":")[0] for frame in stack)


def test_stack_names_the_calling_function(device, history):
    history.start()
    a = allocate_here(device, 600)
    history.stop()
    (alloc,) = events(history, "alloc", device)
    assert alloc["stack"][0].startswith("test_history.py:")
    assert alloc["stack"][0].endswith("in allocate_here")
    assert any("test_stack_names_the_calling_function" in f for f in alloc["stack"][1:])
    a.free()


def test_every_kind_and_pool_reuse_is_recorded(device, history):
    history.start()
    for kind in device.kinds:
        ga.empty(3000, dtype=np.uint8, device=device, kind=kind).free()
        ga.empty(3000, dtype=np.uint8, device=device, kind=kind).free()  # from the pool
    history.stop()
    allocs = events(history, "alloc", device)
    assert [e["kind"] for e in allocs] == [k for k in device.kinds for _ in range(2)]
    assert len(events(history, "free", device)) == 2 * len(device.kinds)
    for e in allocs:
        assert "test_every_kind_and_pool_reuse_is_recorded" in e["stack"][0]


def test_cache_hits_are_reuse_events(device, history):
    cache = ga.AllocCache()
    history.start()
    with ga.cached(cache):
        for _ in range(3):
            ga.empty(100, dtype=np.float32, device=device).free()
    history.stop()
    actions = [e["action"] for e in events(history, device=device)]
    assert actions == ["alloc", "reuse", "reuse"]
    reuse = events(history, "reuse", device)
    assert all("test_cache_hits_are_reuse_events" in e["stack"][0] for e in reuse)
    assert len({e["address"] for e in events(history, device=device)}) == 1
    cache.free()


def test_nothing_is_recorded_while_stopped(device, history):
    history.start()
    history.stop()
    assert not history.active
    ga.empty(100, device=device).free()
    assert events(history) == []
    history.start()
    assert history.active and history.snapshot()["recording"] is True
    ga.empty(100, device=device).free()
    assert len(events(history, device=device)) == 2


def test_restart_starts_over_and_stop_keeps_events(device, history):
    history.start()
    ga.empty(100, device=device).free()
    history.stop()
    assert len(events(history)) == 2
    assert len(events(history)) == 2  # snapshot does not consume
    history.start()
    assert events(history) == []


def test_max_entries_keeps_the_newest_events(device, history):
    history.start(max_entries=10)
    arrays = [ga.empty(n, dtype=np.uint8, device=device) for n in range(1, 30 * 512, 512)]
    history.stop()
    snap = events(history)
    assert len(snap) == 10
    assert [e["address"] for e in snap] == [a.storage.ptr for a in arrays[-10:]]
    del arrays


def test_stacks_off(device, history):
    history.start(stacks=False)
    a = ga.empty(100, device=device)
    history.stop()
    (alloc,) = events(history, "alloc", device)
    assert not alloc.get("stack")
    a.free()


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10", None])
def test_bad_max_entries(history, bad):
    with pytest.raises((ValueError, TypeError)):
        history.start(max_entries=bad)
    assert not history.active


def test_dump_round_trips_through_json(device, history, tmp_path):
    history.start()
    a = ga.zeros((20, 30), dtype=np.float32, device=device)
    b = a[1:].copy()
    a.free()
    history.stop()
    path = tmp_path / "snapshot.json"
    history.dump(path)
    loaded = json.loads(path.read_text(encoding="utf-8"))
    assert loaded == history.snapshot()
    assert [e["action"] for e in loaded["events"] if e["device"] == str(device)] == [
        "alloc", "alloc", "free"]
    assert all("test_history.py" in e["stack"][0] for e in loaded["events"]
               if e["action"] == "alloc")
    history.dump(str(tmp_path / "again.json"))  # str paths too
    assert json.loads((tmp_path / "again.json").read_text()) == loaded
    b.free()


def test_snapshot_while_recording_is_json(device, history):
    history.start()
    keep = [ga.empty(10, device=device) for _ in range(5)]
    snap = history.snapshot()
    assert snap["recording"] is True
    assert json.loads(json.dumps(snap)) == snap
    del keep


def test_events_from_several_devices_carry_their_device(history):
    history.start()
    for dev in ga.devices():
        ga.empty(700, dtype=np.uint8, device=dev).free()
    history.stop()
    seen = [e["device"] for e in events(history, "alloc")]
    assert seen == [str(d) for d in ga.devices()]


def test_reset_is_recorded(device, history):
    history.start()
    a = ga.empty(100, device=device)
    ga.device_reset(device)
    b = ga.empty(100, device=device)
    history.stop()
    actions = [e["action"] for e in events(history, device=device)]
    assert actions == ["alloc", "reset", "alloc"]
    del a, b


def test_threads_record_their_own_stacks(device, history):
    # Regression: the stack of an allocation was parked in one attribute shared by every
    # thread between site() and record(), so a thread switch gave events foreign stacks.
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    history.start()
    errors: list[BaseException] = []
    n = 2000

    def alloc_in_thread_a() -> None:
        for _ in range(n):
            ga.empty(1024, dtype=np.uint8, device=device).free()

    def alloc_in_thread_b() -> None:
        for _ in range(n):
            ga.empty(2048, dtype=np.uint8, device=device).free()

    def snapshots() -> None:
        try:
            for _ in range(50):
                json.dumps(history.snapshot())
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=f) for f in (alloc_in_thread_a, alloc_in_thread_b,
                                                    snapshots)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(old)
    assert not any(t.is_alive() for t in threads)
    history.stop()
    assert not errors, errors
    allocs = events(history, "alloc", device)
    assert len(allocs) == 2 * n
    for e in allocs:
        expected = "alloc_in_thread_a" if e["size"] == 1024 else "alloc_in_thread_b"
        assert e["stack"][0].endswith(expected), (e["size"], e["stack"])


def test_history_overhead_is_off_when_stopped(device, history):
    # Stopping really detaches the recorder from the allocator.
    history.start()
    history.stop()
    from gpuarrays._memory.state import state
    assert state.history is None
