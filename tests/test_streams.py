"""Streams and events, and memory that is stream-ordered with no user call (docs/streams.md).

Every test runs on every device.  On ``cpu:0`` streams are synchronous, so the ordering
they check holds trivially there while the bookkeeping (recorded streams, ordered frees,
events) still runs; on OpenCL PoCL runs each queue's commands on its own, and the
reuse tests below fail when the pool hands a block to another stream at once
(``test_the_race_is_real_without_ordering`` shows it).  A "slow" kernel is a large
``sin``: PoCL's builtin takes ~0.3 s for 16 M elements, so work on the stream that runs
it is really in flight while the test frees and reallocates.
"""

from __future__ import annotations

import gc
import threading

import faults
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuarrays as ga

faulty = faults.faulty

N = 1 << 20  # elements read late by a stream


def busy(device):
    """A large array whose sin keeps a stream busy (~0.3 s on PoCL)."""
    return ga.asarray(np.linspace(0, 10, 4 * N, dtype=np.float32), device=device)


def asynchronous(device) -> bool:
    return device.backend != "cpu"


# the API ------------------------------------------------------------------------------
def test_current_stream_is_the_default_outside_every_with(device):
    default = ga.current_stream(device)
    assert default.is_default and default.ptr == 0
    assert default is ga.Stream.default(device)
    s, t = ga.Stream(device), ga.Stream(device)
    assert not s.is_default and s.ptr != t.ptr
    with s:
        assert ga.current_stream(device) is s
        with t:
            assert ga.current_stream(device) is t
            with default:
                assert ga.current_stream(device) is default
            assert ga.current_stream(device) is t
        assert ga.current_stream(device) is s
    assert ga.current_stream(device) is default
    assert "stream" in repr(s) and str(device) in repr(s)


def test_work_follows_the_current_stream_and_is_recorded(device):
    s = ga.Stream(device)
    with s:
        x = ga.arange(1000, dtype="float32", device=device)
        y = x * 2 + 1
        z = ga.zeros(1000, dtype="float32", device=device)
        z[...] = y
        event = s.record()
    assert x._storage._streams == [s] and y._storage._streams == [s]
    event.synchronize()
    assert event.query() and event.done
    np.testing.assert_array_equal(z.get(), np.arange(1000, dtype=np.float32) * 2 + 1)
    outside = ga.ones(3, device=device)
    assert outside._storage._streams == [None]  # the default stream, while streams live
    del s, event, x, y, z
    gc.collect()
    if ga.memory_stats(device)["streams"] == 0:
        assert ga.ones(3, device=device)._storage._streams is None  # none: nothing recorded


def test_a_stream_waits_for_an_event_of_another(device):
    s1, s2 = ga.Stream(device), ga.Stream(device)
    w = busy(device)
    x = ga.asarray(np.arange(N, dtype=np.float32), device=device)
    ga.get_device(device).impl.synchronize(device.index)
    with s1:
        ga.sin(w)
        x += 1  # late on s1
        written = s1.record()
    s2.wait(written)
    with s2:
        y = x * 2  # after x += 1, because s2 waits
    np.testing.assert_array_equal(y.get(), (np.arange(N, dtype=np.float32) + 1) * 2)
    s2.synchronize()
    last = s2.record()
    last.synchronize()
    assert last.query()


def test_bad_arguments_are_named_errors(device):
    s = ga.Stream(device)
    with pytest.raises(TypeError, match="Event"):
        s.wait(s)
    other = next((d for d in ga.devices() if d != device), None)
    if other is not None:
        with pytest.raises(ValueError, match="event.synchronize"):
            ga.Stream(other).wait(s.record())
    with pytest.raises(ValueError):
        ga.Stream("nonexistent:7")


def test_threads_have_their_own_current_stream(device):
    s, t = ga.Stream(device), ga.Stream(device)
    seen, errors = {}, []

    def run(stream, name):
        try:
            with stream:
                seen[name] = ga.current_stream(device)
                a = ga.full(5000, float(len(name)), dtype="float32", device=device)
                b = a * 3
                seen[name + "-recorded"] = b._storage._streams
                np.testing.assert_array_equal(b.get(), np.full(5000, 3.0 * len(name), "f4"))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(st_, nm)) for st_, nm in ((s, "a"), (t, "bb"))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert seen["a"] is s and seen["bb"] is t
    assert seen["a-recorded"] == [s] and seen["bb-recorded"] == [t]
    assert ga.current_stream(device).is_default


# memory is stream-ordered -------------------------------------------------------------
def _free_then_reuse(device, free_under=None):
    """s1 reads x late; x is freed (under `free_under`); s2 allocates x's size and fills
    it.  Returns (whether the block was reused, the number of wrong elements s1 read)."""
    s1, s2 = ga.Stream(device), ga.Stream(device)
    w = busy(device)
    x = ga.asarray(np.arange(N, dtype=np.float32), device=device)
    where = x._storage.ptr
    device.impl.synchronize(device.index)
    with s1:
        ga.sin(w)
        y = x + 1
    if free_under is None:
        del x
    else:
        with free_under:
            del x
    with s2:
        z = ga.full(N, 7.0, dtype="float32", device=device)
    wrong = int((y.get() != np.arange(N, dtype=np.float32) + 1).sum())
    np.testing.assert_array_equal(z.get(), 7.0)
    return z._storage.ptr == where, wrong


def test_a_block_freed_while_another_stream_reads_it_waits_for_that_stream(device):
    reused, wrong = _free_then_reuse(device)
    assert wrong == 0
    assert reused  # handed over with one event wait, not a new allocation


def test_a_block_freed_on_the_reading_stream_itself_is_ordered_too(device):
    s3 = ga.Stream(device)
    _, wrong = _free_then_reuse(device, free_under=s3)
    assert wrong == 0


@pytest.mark.skipif(not any(d.backend == "opencl" for d in ga.devices()),
                    reason="needs an asynchronous device")
def test_the_race_is_real_without_ordering():
    """The check above can fail: with the ordering switched off (the pool told the device
    has no streams while the free happens) s2's fill overwrites what s1 reads."""
    device = ga.get_device("opencl:0")
    mgr = device.memory
    original = type(mgr).give_ordered

    def unordered(self, kind, ptr, size, epoch, recorded):
        with self.lock:  # straight to the free lists, as before streams
            self._put_locked(kind, ptr, size)

    type(mgr).give_ordered = unordered
    try:
        results = [_free_then_reuse(device) for _ in range(3)]
    finally:
        type(mgr).give_ordered = original
    assert any(reused and wrong for reused, wrong in results), results


def test_reuse_on_the_freeing_stream_needs_no_wait(device, faulty):
    s = ga.Stream(device)
    w = busy(device)
    device.impl.synchronize(device.index)
    with s:
        x = ga.empty(N, dtype="float32", device=device)
        where = x._storage.ptr
        ga.sin(w)  # s is busy: its own event is pending when x's block is reused
        del x  # used on s alone: kept for s, with no event
        assert where in device.memory.by_stream[s.ptr][("device", N * 4)]
        waited = []
        faulty.on_call("stream_wait_event", lambda index, stream, event: waited.append(event))
        recorded = faulty.calls["event_record"]
        y = ga.empty(N, dtype="float32", device=device)
    assert y._storage.ptr == where
    assert waited == [] and faulty.calls["event_record"] == recorded  # s orders its reuse


def test_pending_frees_are_counted_and_waited_for_before_failing(device):
    s = ga.Stream(device)
    w = busy(device)
    x = ga.asarray(np.arange(N, dtype=np.float32), device=device)
    device.impl.synchronize(device.index)
    with s:
        ga.sin(w)
        y = x + 1
    del x
    stats = ga.memory_stats(device)
    assert stats["streams"] >= 1
    assert stats["pending_free_bytes"] % 512 == 0  # (blocks kept for s count too)
    # a limit that only the pending block's bytes satisfy: the ladder waits for it
    used = ga.memory_stats(device)["used_bytes"]
    ga.set_memory_limit(used, device)
    try:
        with ga.Stream(device):
            z = ga.zeros(N, dtype="float32", device=device)
    finally:
        ga.set_memory_limit(None, device)
    np.testing.assert_array_equal(y.get(), np.arange(N, dtype=np.float32) + 1)
    np.testing.assert_array_equal(z.get(), 0)
    ga.synchronize(device)
    assert ga.memory_stats(device)["pending_free_bytes"] == 0


def test_a_cached_scope_on_a_stream_stays_ordered(device):
    s1, s2 = ga.Stream(device), ga.Stream(device)
    cache = ga.AllocCache()
    w = busy(device)
    results = []
    with ga.cached(cache):
        for i in range(3):
            with s1:
                x = ga.full(N, float(i), dtype="float32", device=device)
                ga.sin(w)
                results.append(x + 1)
            del x  # on the default stream, while s1 may still read it
            with s2:
                ga.full(N, -1.0, dtype="float32", device=device)
    for i, r in enumerate(results):
        np.testing.assert_array_equal(r.get(), float(i) + 1)
    cache.free()


def test_dead_streams_end_the_ordering(device):
    before = ga.memory_stats(device)["streams"]
    s = ga.Stream(device)
    assert ga.memory_stats(device)["streams"] == before + 1
    del s
    gc.collect()
    assert ga.memory_stats(device)["streams"] == before


# reset and stale handles ---------------------------------------------------------------
def test_reset_with_work_pending_on_several_streams(device):
    streams = [ga.Stream(device) for _ in range(3)]
    w = busy(device)
    for s in streams:
        with s:
            ga.sin(w)
    event = streams[0].record()
    ga.device_reset(device)
    for s in streams:
        with pytest.raises(ga.DeviceResetError, match="reset"):
            s.synchronize()
        with pytest.raises(ga.DeviceResetError):
            with s:
                pass
    with pytest.raises(ga.DeviceResetError):
        event.query()
    assert ga.memory_stats(device)["streams"] == 0
    fresh = ga.Stream(device)
    with fresh:
        a = ga.arange(10, device=device, dtype="float32") + 1
    np.testing.assert_array_equal(a.get(), np.arange(10, dtype=np.float32) + 1)


def test_a_reset_inside_a_with_block_makes_the_stale_stream_fail_loudly(device):
    s = ga.Stream(device)
    with s:
        ga.device_reset(device)
        if asynchronous(device):
            with pytest.raises(ga.DeviceResetError):
                ga.arange(10, device=device) + 1
    assert ga.current_stream(device).is_default
    np.testing.assert_array_equal((ga.arange(3, device=device, dtype="float32") + 1).get(),
                                  [1, 2, 3])


# a random program over several streams and two threads ---------------------------------
OPS = st.lists(st.tuples(st.sampled_from(["new", "cached", "compute", "copy", "free", "force",
                                          "wait", "read"]),
                         st.integers(0, 3), st.integers(0, 7)), min_size=4, max_size=24)


class _Neighbour:
    """A second thread on its own stream, allocating, computing, checking and freeing
    blocks of the program's size until stopped: blocks move between the two threads."""

    def __init__(self, device, n: int) -> None:
        self.stop, self.errors = threading.Event(), []
        self.thread = threading.Thread(target=self._run, args=(device, n), daemon=True)
        self.thread.start()

    def _run(self, device, n: int) -> None:
        try:
            s, i = ga.Stream(device), 0
            while not self.stop.is_set():
                with s:
                    a = ga.full(n, float(i), dtype="float32", device=device)
                    b = a * 3
                    del a
                    np.testing.assert_array_equal(b.get(), np.float32(3 * i))
                i += 1
        except BaseException as e:  # reported by close()
            self.errors.append(e)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive() and not self.errors, self.errors


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_random_programs_over_four_streams_and_two_threads_match_numpy(device, ops):
    """Arrays live on the stream that made them (data dependencies between streams are the
    user's, as in CUDA); frees (local, forced, a cache's) happen under any stream and
    allocations of equal sizes on every stream and in a second thread, so blocks move
    between streams while work is in flight.  Live arrays match their NumPy models."""
    streams = [ga.Stream.default(device)] + [ga.Stream(device) for _ in range(3)]
    n = 1 << 16
    live: dict[int, tuple] = {}  # slot -> (array, its stream index, model)
    cache = ga.AllocCache()
    w = busy(device)
    neighbour = _Neighbour(device, n)
    try:
        for what, si, slot in ops:
            s = streams[si]
            if what in ("new", "cached"):
                with s:
                    if what == "cached":
                        with ga.cached(cache):
                            a = ga.full(n, float(slot), dtype="float32", device=device)
                    else:
                        a = ga.full(n, float(slot), dtype="float32", device=device)
                live[slot] = (a, si, np.full(n, float(slot), np.float32))
                del a
            elif what in ("compute", "copy") and slot in live:
                a, home, model = live[slot]
                with streams[home]:
                    if home == 1:
                        ga.sin(w)  # keep stream 1 busy: its late reads race the others
                    if what == "compute":
                        live[slot] = (a * 2 - 1, home, model * 2 - 1)
                    else:
                        b = ga.empty_like(a)
                        b[...] = a
                        live[(slot + 1) % 8] = (b, home, model)
                del a
            elif what in ("free", "force") and slot in live:
                with s:
                    a = live.pop(slot)[0]
                    if what == "force":
                        a.free(force=True)
                    elif si % 2:
                        a.free()
                    del a
            elif what == "wait" and slot in live:
                streams[si].wait(streams[live[slot][1]].record())
            elif what == "read" and slot in live:
                a, _, model = live[slot]
                np.testing.assert_array_equal(a.get(), model)
        for a, _, model in live.values():
            np.testing.assert_array_equal(a.get(), model)
    finally:
        neighbour.close()
        live.clear()
        cache.free()


def test_two_threads_each_on_their_own_stream_reuse_each_others_blocks(device):
    errors = []
    barrier = threading.Barrier(2)

    def run(k):
        try:
            s = ga.Stream(device)
            w = busy(device) if k == 0 else None
            barrier.wait()
            for i in range(6):
                with s:
                    a = ga.full(N // 4, float(i + k), dtype="float32", device=device)
                    if w is not None:
                        ga.sin(w[: N])
                    b = a + 1
                    del a
                    np.testing.assert_array_equal(b.get(), float(i + k) + 1)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_dlpack_export_orders_the_consumer_stream_without_a_host_wait(device, faulty):
    """The DLPack stream rule on CUDA: the consumer's stream waits for the streams that used
    the memory, on the device."""
    if device.backend != "cuda":
        pytest.skip("DLPack streams exist on CUDA only")
    torch = pytest.importorskip("torch")
    s = ga.Stream(device)
    with s:
        x = ga.arange(N, dtype="float32", device=device) * 2
    consumer = torch.cuda.Stream(device=device.index)
    synchronized = faulty.calls["synchronize"]
    with torch.cuda.stream(consumer):
        t = torch.from_dlpack(x)  # asks with stream=consumer.cuda_stream
        assert faulty.calls["synchronize"] == synchronized
        total = float(t.double().sum())
    assert total == float(np.arange(N, dtype=np.float64).sum() * 2)


def test_an_asynchronous_get_is_done_once_its_stream_is(device):
    s = ga.Stream(device)
    w = busy(device)
    out = np.zeros(N, np.float32)
    with s:
        x = ga.arange(N, dtype="float32", device=device)
        ga.sin(w)  # s is busy: the copy after it is still queued on return
        assert x.get(out=out, blocking=False) is out
        done = s.record()
    done.synchronize()
    np.testing.assert_array_equal(out, np.arange(N, dtype=np.float32))
    strided = np.zeros(N // 2, np.float32)
    x[::2].get(out=strided, blocking=False)  # needs a copy first: blocks instead
    np.testing.assert_array_equal(strided, np.arange(0, N, 2, dtype=np.float32))


@pytest.mark.skipif(not any(d.backend == "opencl" for d in ga.devices()),
                    reason="needs an OpenCL device")
def test_pyopencl_gets_the_current_queue():
    from gpuarrays.interop.pyopencl import context_and_queue

    device = ga.get_device("opencl:0")
    s = ga.Stream(device)
    default = context_and_queue(device)[1]
    with s:
        context, queue = context_and_queue(device)
        assert queue.int_ptr == s.ptr and queue.int_ptr != default.int_ptr
    assert context_and_queue(device)[1].int_ptr == default.int_ptr
