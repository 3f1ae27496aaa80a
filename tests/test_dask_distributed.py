"""gpuarrays chunks on a real ``distributed`` cluster: two worker processes on cpu:0.

One module-scoped ``LocalCluster`` (two processes, one thread each) runs the graphs; results
equal NumPy's, chunks travel between the workers through ``dask_serialize`` and are rebuilt
on the receiving worker, each worker's ``used_bytes`` returns to its baseline, and a worker
with a small memory limit and an allocation cache runs the out-of-memory ladder and completes.
"""

from __future__ import annotations

import gc
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask[array] is not installed (the dask extra)")
distributed = pytest.importorskip("distributed",
                                  reason="distributed is not installed (the dask extra)")
import dask  # noqa: E402

import gpuarrays as ga  # noqa: E402
import gpuarrays.interop.dask as gd  # noqa: E402

CPU = "cpu:0"

# One cluster for the module: its tests run in one pytest-xdist worker (pyproject.toml).
pytestmark = pytest.mark.xdist_group("dask-cluster")


@pytest.fixture(scope="module")
def client():
    # ":0": a free port for the dashboard (another process may run a cluster meanwhile)
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=":0", worker_dashboard_address=None)
    with cluster, distributed.Client(cluster) as c:
        c.register_plugin(gd.GPUArraysWorker(device=lambda worker: CPU))  # a spec or a function
        yield c


@pytest.fixture
def workers(client):
    return sorted(client.scheduler_info()["workers"])


def _used_bytes() -> int:
    gc.collect()  # arrays held only by reference cycles (a task's traceback) are garbage
    return ga.memory_stats()["used_bytes"]


def used(client) -> dict:
    return client.run(_used_bytes)


def idle(client, timeout: float = 15) -> dict:
    """``used`` once the scheduler forgot every task (the previous graph's chunks are gone)."""
    end = time.monotonic() + timeout
    while client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)):
        if time.monotonic() > end:
            break
        time.sleep(0.05)
    return used(client)


def back_to(client, baseline: dict, timeout: float = 15) -> dict:
    """Wait until the workers released the graph's chunks; the last figures."""
    end = time.monotonic() + timeout
    while True:
        now = used(client)
        if now == baseline or time.monotonic() > end:
            return now
        time.sleep(0.1)


def on_workers(h: np.ndarray, chunks) -> da.Array:
    return da.from_array(h, chunks=chunks).map_blocks(
        ga.asarray, meta=ga.empty((0,) * h.ndim, h.dtype, device=CPU))


def test_the_workers_have_the_integration(client):
    found = client.run(lambda: distributed.protocol.dask_serialize.dispatch(ga.GPUArray))
    assert set(map(type, found.values())) and all(f is gd.serialize for f in found.values())
    assert all(d == CPU for d in client.run(lambda: str(ga.get_device())).values())


def test_arrays_travel_through_dask_serialize():
    a = ga.arange(12.0, device=CPU).reshape(3, 4)
    header, frames = distributed.protocol.serialize(a[:, 1:3], serializers=("dask", "pickle"))
    assert header["serializer"] == "dask"
    assert sum(memoryview(f).nbytes for f in frames) == 6 * 8
    back = distributed.protocol.deserialize(header, frames)
    assert type(back) is ga.GPUArray
    np.testing.assert_array_equal(back.get(), a.get()[:, 1:3])


def test_an_array_lands_on_the_receiving_workers_device(client, workers):
    """Worker b owns another device: an array made on a (cpu:0) is rebuilt there."""
    other = next((str(d) for d in ga.devices() if str(d) != CPU), None)
    if other is None:
        pytest.skip("a second device (PoCL's opencl:0: the opencl extra) is not installed")
    a, b = workers
    baseline = idle(client)
    client.register_plugin(gd.GPUArraysWorker(device=lambda w: other if w.address == b else CPU))
    try:
        x = client.submit(ga.arange, 10, workers=[a])
        seen = client.submit(lambda arr: (str(arr.device), arr.get().tolist()), x,
                             workers=[b]).result()
        assert seen == (other, list(range(10)))
        assert client.run(lambda: str(ga.get_device())) == {a: CPU, b: other}
        del x
    finally:
        client.register_plugin(gd.GPUArraysWorker(device=CPU))
    assert back_to(client, baseline) == baseline


def test_elementwise_reduction_and_map_blocks(client):
    baseline = idle(client)
    h = np.arange(96 * 80, dtype=np.float64).reshape(96, 80) / 7
    x = on_workers(h, (24, 20))
    y = (da.sqrt(x) * 2 + 1).map_blocks(lambda b: b - 0.5, meta=x._meta)
    got = client.compute(y.sum(axis=0)).result()
    assert type(got) is ga.GPUArray
    np.testing.assert_allclose(got.get(), (np.sqrt(h) * 2 + 0.5).sum(axis=0), rtol=1e-12)
    m = client.compute(x.mean(axis=1)).result()
    np.testing.assert_allclose(m.get(), h.mean(axis=1), rtol=1e-12)
    del got, m
    assert back_to(client, baseline) == baseline


def test_chunks_move_between_workers(client, workers):
    """Chunks made on one worker, consumed on the other: every chunk is serialised there."""
    baseline = idle(client)
    a, b = workers
    h = np.arange(64 * 48, dtype=np.int64).reshape(64, 48)
    x = client.persist(on_workers(h, 16), workers=[a])
    distributed.wait(x)
    assert set(client.who_has(x).values()) == {(a,)}
    y = (x.T.rechunk((48, 8)) * 3)[::2]
    got = client.compute(y, workers=[b]).result()
    assert type(got) is ga.GPUArray
    np.testing.assert_array_equal(got.get(), (h.T * 3)[::2])
    del x, y, got  # y's graph holds x's futures
    assert back_to(client, baseline) == baseline


def test_the_gpuarrays_backend_on_the_workers(client):
    with dask.config.set({"array.backend": "gpuarrays"}):
        x = da.ones((40, 30), chunks=(10, 15)) + da.arange(30, chunks=15)
        r = da.random.default_rng(5).standard_normal((40, 30), chunks=(10, 15))
    got = client.compute(x.sum(axis=0)).result()
    np.testing.assert_array_equal(got.get(), 40 * (1 + np.arange(30.0)))
    a, b = client.compute([r, r], optimize_graph=False)
    np.testing.assert_array_equal(a.result().get(), b.result().get())


def test_a_small_memory_limit_runs_the_ladder_and_completes(client):
    """8 MiB per worker and an allocation cache: the cache keeps one buffer per chunk size
    (13 MiB for all of them), so the worker passes its limit and the ladder gives the cache's
    unused buffers back.  (At 6 MiB, a run under load once failed: the pool held 4 MiB free in
    four pieces none of which took a 1.25 MiB chunk, the limit leaving no room for a new
    segment -- fragmentation at a limit barely above the peak, not the ladder.)"""
    baseline = idle(client)
    client.register_plugin(gd.GPUArraysWorker(device=CPU, memory_limit="8MiB", cache=True))
    try:
        assert all(s["limit_bytes"] == 8 * 2**20
                   for s in client.run(ga.memory_stats).values())
        client.run(ga.reset_peak_memory_stats)
        before = {w: s["oom_retries"] for w, s in client.run(ga.memory_stats).items()}
        sizes = tuple(k * 8192 for k in range(1, 21))  # 64 KiB ... 1.25 MiB float64 chunks
        with dask.config.set({"array.backend": "gpuarrays"}):
            x = da.ones(sum(sizes), chunks=(sizes,))
        got = client.compute((x * 2 + 1).sum()).result()
        assert float(got.get()) == 3.0 * sum(sizes)
        after = client.run(ga.memory_stats)
        assert any(after[w]["oom_retries"] > before[w] for w in after)
        assert all(s["peak_used_bytes"] <= 8 * 2**20 for s in after.values())
    finally:
        client.register_plugin(gd.GPUArraysWorker(device=CPU))  # frees the caches, no limit
    assert all(s["limit_bytes"] is None for s in client.run(ga.memory_stats).values())
    assert back_to(client, baseline) == baseline


def test_worker_plugin_refuses_bad_limits():
    with pytest.raises(ValueError):
        gd.GPUArraysWorker(memory_limit="lots")
    with pytest.raises(TypeError):
        gd.GPUArraysWorker(memory_limit=1.5)
