"""Work in flight holds its memory: a free racing a transfer never hands the block out.

A transfer, copy or fill holds a handle on every storage it touches until it is done,
so a free from another thread -- local, forced, or a cache's -- takes effect only
after it (docs/design.md, "Release").  The race is made deterministic: a back-end
wrapper (tests/faults.py) pauses the worker thread inside the platform call while the
main thread frees the array and allocates a new one of the same size.  Each test is
named after what broke.
"""

from __future__ import annotations

import threading

import faults
import numpy as np
import pytest

import gpuarrays as ga

faulty = faults.faulty

N = 1000


class Paused:
    """Runs ``op`` on a worker thread that stops inside back-end call ``method``."""

    def __init__(self, fb: faults.FaultyBackend, method: str, op) -> None:
        self.inside = threading.Event()
        self.go = threading.Event()
        self.result = self.error = None
        self.worker = threading.Thread(target=self._run, args=(op,), daemon=True)
        fb.on_call(method, self._pause)

    def _pause(self, *args) -> None:
        if threading.current_thread() is self.worker and not self.inside.is_set():
            self.inside.set()
            if not self.go.wait(30):
                raise TimeoutError("the main thread never released the paused call")

    def _run(self, op) -> None:
        try:
            self.result = op()
        except BaseException as e:  # handed to the main thread
            self.error = e

    def __enter__(self) -> Paused:
        self.worker.start()
        assert self.inside.wait(30), "the worker never reached the back-end call"
        return self

    def __exit__(self, *exc) -> None:
        self.go.set()
        self.worker.join(30)
        assert not self.worker.is_alive()


def old_data() -> np.ndarray:
    return np.arange(N, dtype=np.float64)


def test_forced_free_racing_a_download_never_hands_the_block_to_a_new_array(device, faulty):
    a = ga.asarray(old_data(), device=device)
    ptr = a.storage.ptr
    with Paused(faulty, "download", a.get) as run:
        a.free(force=True)
        b = ga.full((N,), -1.0, device=device)
        assert b.storage.ptr != ptr
        assert ga.memory_stats(device)["quarantined_bytes"] > 0
    assert run.error is None
    np.testing.assert_array_equal(run.result, old_data())
    assert ga.memory_stats(device)["quarantined_bytes"] == 0
    np.testing.assert_array_equal(b.get(), np.full(N, -1.0))


def test_cache_free_racing_a_download_never_hands_the_block_to_a_new_array(device, faulty):
    cache = ga.AllocCache()
    with ga.cached(cache):
        a = ga.asarray(old_data(), device=device)
    ptr = a.storage.ptr
    with Paused(faulty, "download", a.get) as run:
        cache.free()
        b = ga.full((N,), -1.0, device=device)
        c = ga.full((N,), -2.0, device=device)
        assert ptr not in (b.storage.ptr, c.storage.ptr)
    assert run.error is None
    np.testing.assert_array_equal(run.result, old_data())
    d = ga.zeros((N,), device=device)  # the held block went back to the pool afterwards
    assert d.storage.ptr == ptr


def test_local_free_racing_a_download_keeps_the_block_until_it_ends(device, faulty):
    a = ga.asarray(old_data(), device=device)
    ptr = a.storage.ptr
    view = a[::2]
    with Paused(faulty, "download", view.get) as run:
        view.free()
        a.free()  # the last array handle goes while the download runs
        b = ga.full((N,), -1.0, device=device)
        assert b.storage.ptr != ptr
    assert run.error is None
    np.testing.assert_array_equal(run.result, old_data()[::2])


def test_forced_free_racing_an_upload_never_writes_into_a_new_array(device, faulty):
    a = ga.zeros((N,), device=device)
    ptr = a.storage.ptr

    def write():
        a[...] = old_data()

    with Paused(faulty, "upload", write):
        a.free(force=True)
        b = ga.zeros((N,), device=device)
        assert b.storage.ptr != ptr
    np.testing.assert_array_equal(b.get(), np.zeros(N))


def test_forced_free_racing_a_fill_never_writes_into_a_new_array(device, faulty):
    a = ga.zeros((N,), device=device)

    def fill():
        a.fill(5.0)

    with Paused(faulty, "fill", fill):
        a.free(force=True)
        b = ga.asarray(np.zeros(N), device=device)  # an upload, so the paused call is a's
    np.testing.assert_array_equal(b.get(), np.zeros(N))


def test_forced_free_racing_a_strided_copy_copies_the_old_data(device, faulty):
    base = ga.asarray(np.arange(2 * N, dtype=np.float64), device=device)
    src = base[::2]
    ptr = base.storage.ptr
    with Paused(faulty, "copy_strided", src.copy) as run:
        base.free(force=True)
        b = ga.full((2 * N,), -1.0, device=device)
        assert b.storage.ptr != ptr
    assert run.error is None
    np.testing.assert_array_equal(run.result.get(), np.arange(0, 2 * N, 2, dtype=np.float64))


def test_a_transfer_that_starts_after_a_forced_free_raises_freed_array_error(device, faulty):
    a = ga.zeros((N,), device=device)
    a.free(force=True)
    with pytest.raises(ga.FreedArrayError, match="forced free"):
        a.get()
    assert faulty.calls["download"] == 0


# Compute operations hold what they read (docs/design.md, "Release"): the worker stops at
# its first allocation inside the operation; the main thread force-frees the operand and
# allocates a block of its size filled with a sentinel.  The operation answers NumPy's
# result or FreedArrayError (a free that came before its hold) -- never the sentinel's
# values -- and never writes into the new array.  The operand is large, so the operation's
# first allocation misses the pool (small and large blocks live in different segments).
SENTINEL = -7.0
M = 1 << 18


def _mask(x):
    return x[x > 10.0]


COMPUTE = {
    "add": (lambda x: ga.add(x, x), lambda v: v + v),
    "operator": (lambda x: x * 2.0 + 1.0, lambda v: v * 2.0 + 1.0),
    "sum": (lambda x: ga.sum(x), lambda v: np.sum(v)),
    "max": (lambda x: ga.max(x), lambda v: np.max(v)),
    "cumulative_sum": (lambda x: ga.cumulative_sum(x), lambda v: np.cumsum(v)),
    "sort": (lambda x: ga.sort(-x), lambda v: np.sort(-v)),
    "argsort": (lambda x: ga.argsort(x[::-1]), lambda v: np.argsort(v[::-1], stable=True)),
    "where": (lambda x: ga.where(x > 3.0, x, 0.0), lambda v: np.where(v > 3.0, v, 0.0)),
    "mask": (_mask, lambda v: v[v > 10.0]),
    "nonzero": (lambda x: ga.nonzero(x)[0], lambda v: np.nonzero(v)[0]),
    "unique": (lambda x: ga.unique_values(x), lambda v: np.unique(v)),
    "concat": (lambda x: ga.concat([x, x]), lambda v: np.concatenate([v, v])),
    "take": (lambda x: ga.take(x, ga.asarray(np.arange(0, M, 3), device=x.device)),
             lambda v: v[::3]),
    "matmul": (lambda x: ga.reshape(x, (16, M // 16)) @ ga.reshape(x, (M // 16, 16)),
               lambda v: v.reshape(16, -1) @ v.reshape(-1, 16)),
    "fft": (lambda x: ga.fft.fft(x), lambda v: np.fft.fft(v)),
}


@pytest.mark.parametrize("name", sorted(COMPUTE))
def test_forced_free_racing_a_compute_operation_never_reads_a_new_array(device, faulty, name):
    op, oracle = COMPUTE[name]
    data = np.arange(M, dtype=np.float64) % 97
    x = ga.asarray(data, device=device)
    made = []
    # the new array is made on a third thread: a pool miss waits for the platform lock,
    # which the paused allocation holds; a hit (the freed operand's block, were it not
    # held) is made at once
    newcomer = threading.Thread(target=lambda: made.append(ga.full((M,), SENTINEL,
                                                                   device=device)))
    with Paused(faulty, "allocate", lambda: op(x)) as run:
        x.free(force=True)
        newcomer.start()
        newcomer.join(0.5)
    newcomer.join(30)
    (y,) = made
    if run.error is not None:
        assert isinstance(run.error, ga.FreedArrayError), run.error
    else:
        got = run.result.get()
        np.testing.assert_allclose(got, oracle(data), rtol=1e-12, atol=1e-9)
    np.testing.assert_array_equal(y.get(), np.full(M, SENTINEL))
