"""gpuarrays.random: the Philox streams, bit-identical on every back-end (docs/random.md).

The cpu engine is the reference: every method on every device gives exactly
its bits.  Statistics are checked with fixed seeds against SciPy's
distributions (deterministic, so a threshold never flakes).
"""

from __future__ import annotations

import gc
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

import gpuarrays as ga
from gpuarrays._compute import rng as _rng
from gpuarrays._compute.rng import kernels, philox, reference

CPU = ga.get_device("cpu:0")
SEEDS = [0, 1, 2**63 + 5]
SIZES = [0, 1, 7, 1001]
BIG = 2**20 + 3


def bits(a: ga.GPUArray) -> np.ndarray:
    h = a.get()
    return h.view(f"u{h.dtype.itemsize}") if h.dtype.kind == "f" else h


def reference_run(make, seed):
    """``make(generator)`` on cpu:0 with the NumPy reference (``rng/reference.py``) in place
    of the cpu engine's compiled kernels: the oracle, independent of the kernel generator."""
    generate, permutation_index = _rng.generate, _rng.permutation_index
    _rng.generate = lambda family, out, key, offset, params: reference.generate(
        family, _rng._view(out).reshape(-1), key, offset, params)
    _rng.permutation_index = lambda out, key, offset, keys=None, idx=None: (
        reference.permutation_index(_rng._view(out), key, offset))
    try:
        return make(ga.random.default_rng(seed, device=CPU))
    finally:
        _rng.generate, _rng.permutation_index = generate, permutation_index


def same(dev, make, seeds=SEEDS):
    """``make(generator)`` on ``dev`` (cpu:0 included: its compiled kernels) and in the NumPy
    reference from the same seeds: identical bits."""
    for seed in seeds:
        want = bits(reference_run(make, seed))
        got = bits(make(ga.random.default_rng(seed, device=dev)))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


# Philox itself -------------------------------------------------------------------------
KAT = [  # Random123's kat_vectors: counter, key, result
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter,key,want", KAT)
def test_philox_known_answers(counter, key, want):
    assert tuple(int(w) for w in philox.block(key, *counter)) == want


def test_device_kernel_philox_known_answer(device):
    """Block 0 under key 0 as the 64-bit keys of a permutation: words 0|1 and 2|3."""
    out = ga.empty(2, np.uint64, device=device)
    _rng.generate("keys", out, (0, 0), 0, ())
    assert out.get().tolist() == [0xE169C58D6627E8D5, 0x9B00DBD8BC57AC4C]


def test_the_stream_is_pinned():
    """The first words under seed 0 (a change of key derivation or counter layout fails here)."""
    g = ga.random.default_rng(0, device=CPU)
    assert g.integers(0, 2**32, 5, dtype=np.uint32).get().tolist() == [
        0x1F47A3EC, 0x8FF17ABB, 0x8A4D809C, 0xDDB87C00, 0xEBA3CC89]
    assert g.state["counter"] == 2


def test_the_float_layout_is_pinned():
    """Floats lie in lane groups of 8 blocks, row by row (docs/random.md, "Counters"):
    element 1 is word 0 of block 1, element 8 word 1 of block 0; a call takes whole groups."""
    g = ga.random.default_rng(0, device=CPU)
    x = g.random(10, dtype=np.float32).get().view(np.uint32)
    w = philox.words(g.state["key"], 0, 2).reshape(2, 4)
    assert [int(v) for v in x[[0, 1, 8, 9]]] == [0x3DFA3D18, 0x3F6BA3CC, 0x3F0FF17A, 0x3F1E710A]
    assert np.array_equal(x[[0, 1, 8, 9]].view(np.float32),
                          np.array([w[0, 0], w[1, 0], w[0, 1], w[1, 1]], np.uint64).__rshift__(8)
                          .astype(np.float32) * np.float32(2**-24))
    assert g.state["counter"] == 8
    assert _rng.blocks("uniform", np.dtype(np.float32), 33) == 16
    assert _rng.blocks("normal", np.dtype(np.float64), 16) == 8
    assert _rng.blocks("integers", np.dtype(np.int64), 5, (0, 10, 6, False)) == 2


# bit identity across back-ends ----------------------------------------------------------
FLOAT_METHODS = {
    "random": lambda g, n, dt: g.random(n, dtype=dt),
    "uniform": lambda g, n, dt: g.uniform(-3.5, 1e3, n, dtype=dt),
    "standard_normal": lambda g, n, dt: g.standard_normal(n, dtype=dt),
    "normal": lambda g, n, dt: g.normal(2.0, 0.25, n, dtype=dt),
    "exponential": lambda g, n, dt: g.exponential(3.0, n, dtype=dt),
}


@pytest.mark.parametrize("method", sorted(FLOAT_METHODS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_floats_are_identical_on_every_backend(device, method, dtype):
    make = FLOAT_METHODS[method]
    for n in SIZES:
        same(device, lambda g, n=n: make(g, n, dtype))
    same(device, lambda g: make(g, (3, 5), dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_calls_are_identical_on_every_backend(device, dtype):
    for method in ("random", "standard_normal"):
        seed_results = []
        for dev in (CPU, device):
            g = ga.random.default_rng(123, device=dev)
            g.random(3)  # an offset counter
            seed_results.append(bits(FLOAT_METHODS[method](g, BIG, dtype)))
        np.testing.assert_array_equal(seed_results[1], seed_results[0])


INT_CASES = [  # (low, high, dtype, endpoint)
    (0, 10, np.int64, False), (-5, 3, np.int8, True), (0, 7, np.uint16, False),
    (-128, 128, np.int8, False), (0, 2**32, np.uint32, False), (1, 3 * 2**30, np.int64, False),
    (0, 2**64, np.uint64, False), (-(2**63), 2**63 - 1, np.int64, True),
    (10, 3 * 2**62 + 10, np.uint64, False), (0, 1, np.int32, False),
]


@pytest.mark.parametrize("low,high,dtype,endpoint", INT_CASES)
def test_integers_are_identical_on_every_backend(device, low, high, dtype, endpoint):
    for n in SIZES:
        same(device, lambda g, n=n: g.integers(low, high, n, dtype=dtype, endpoint=endpoint))


def test_permutations_are_identical_on_every_backend(device):
    for n in [0, 1, 2, 5, 64, 1001]:
        same(device, lambda g, n=n: g.permutation(n))
    same(device, lambda g: g.permutation(BIG), seeds=[SEEDS[-1]])  # 231 sort stages
    data = np.arange(24.0).reshape(6, 4)

    def permuted_rows(g):
        x = ga.asarray(data, device=g.device)
        return g.permutation(x)
    same(device, permuted_rows)

    def strided(g):
        return g.permutation(ga.asarray(data, device=g.device)[:, 1])
    same(device, strided)


def test_shuffle_is_identical_on_every_backend(device):
    for data in (np.arange(11, dtype=np.int16), np.arange(40.0).reshape(10, 4),
                 np.arange(30, dtype=np.complex128).reshape(5, 6)):
        def shuffled(g, data=data):
            x = ga.asarray(data, device=g.device)
            g.shuffle(x)
            return x
        same(device, shuffled)

        def shuffled_view(g, data=data):  # a non-contiguous view, shuffled in place
            x = ga.asarray(data, device=g.device)
            g.shuffle(x[::2])
            return x
        same(device, shuffled_view)


def test_choice_is_identical_on_every_backend(device):
    same(device, lambda g: g.choice(10, 25))
    same(device, lambda g: g.choice(1000, 999, replace=False))
    same(device, lambda g: g.choice(ga.asarray(np.arange(7.0) * 1.5, device=g.device), (4, 3)))
    same(device, lambda g: g.choice(ga.asarray(np.arange(12).reshape(6, 2), device=g.device),
                                    4, replace=False))


def test_calls_in_sequence_are_identical_on_every_backend(device):
    def mixed(g):
        parts = [g.random(5, dtype=np.float32), g.integers(0, 9, 3), g.standard_normal(4),
                 g.permutation(6), g.exponential(size=3), g.random(2)]
        return ga.asarray(np.concatenate([p.get().astype(np.float64) for p in parts]),
                          device=CPU)
    same(device, mixed)


def test_launch_shape_does_not_change_the_numbers(device, monkeypatch):
    if device.backend == "cpu":
        want = ga.random.default_rng(9, device=device).standard_normal(1001, dtype=np.float32)
        got = _chunked(9, 1001)
        np.testing.assert_array_equal(bits(want), got)
        return
    want = bits(ga.random.default_rng(9, device=device).standard_normal(1001))
    monkeypatch.setattr(kernels, "_LOCAL", {"cpu": 16, "gpu": 16})
    got = bits(ga.random.default_rng(9, device=device).standard_normal(1001))
    np.testing.assert_array_equal(got, want)


# Sizes around the vector kernels' work-items (float32: 256 elements for uniform, 128 for
# normal and exponential; float64: 128 and 64) and the scalar kernel's tail.
EDGES = [31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 3 * 256 + 70]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vector_and_scalar_kernels_give_the_same_numbers(device, dtype, monkeypatch):
    """Both float kernels (vector on CPU OpenCL devices, scalar on GPUs and for the tail),
    at sizes where the split moves, from a counter off the lane groups."""
    def calls(g):
        g.integers(0, 9, 3)  # counter 1: not a multiple of the lane group
        parts = [f(g, n, dtype) for n in EDGES for f in FLOAT_METHODS.values()]
        return ga.asarray(np.concatenate([p.get().astype(np.float64) for p in parts]),
                          device=CPU)
    same(device, calls, seeds=[3])
    if device.backend == "opencl":
        monkeypatch.setattr(kernels, "_vectors", lambda dev: False)  # the GPU path, here
        same(device, calls, seeds=[3])


def _vector_launches(monkeypatch) -> list[tuple[str, int]]:
    """(kernel name, ``stream`` argument) of every vector-kernel launch from now on."""
    seen = []
    launch = kernels._launch

    def watch(dev, name, values, items, local=None):
        if "_v" in name:
            seen.append((name, values[5]))
        return launch(dev, name, values, items, local)

    monkeypatch.setattr(kernels, "_launch", watch)
    return seen


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stores_past_the_cache_give_the_same_numbers(device, dtype, monkeypatch):
    """The vector kernels' non-temporal stores (outputs larger than the device's cache) write
    the same bits as their cached stores; the threshold is lowered so that small outputs take
    them, and the launches are watched to prove they did where vector kernels run."""
    seen = _vector_launches(monkeypatch)
    monkeypatch.setattr(kernels, "_stream_above", lambda dev: 0)

    def calls(g):
        parts = [f(g, n, dtype) for n in (256, 1001, 4096 + 70) for f in FLOAT_METHODS.values()]
        return ga.asarray(np.concatenate([p.get().astype(np.float64) for p in parts]),
                          device=CPU)
    same(device, calls, seeds=[5])
    assert all(stream for _, stream in seen) and bool(seen) == kernels._vectors(device)


def test_outputs_larger_than_the_cache_stream(device, monkeypatch):
    """Where vector kernels run, an output over the device's cache streams, a smaller one
    does not (a lowered threshold stands in for a 32 MiB cache)."""
    if not kernels._vectors(device):
        pytest.skip(f"{device} runs no vector kernels (only CPU OpenCL devices whose probe "
                    f"qualifies them: docs/kernels.md, 'Qualification')")
    seen = _vector_launches(monkeypatch)
    monkeypatch.setattr(kernels, "_stream_above", lambda dev: 4096 * 4)
    g = ga.random.default_rng(1, device=device)
    g.random(4096, dtype=np.float32)
    g.random(4096 + 128, dtype=np.float32)
    assert seen == [("rng_uniform_f32_v4", 0), ("rng_uniform_f32_v4", 1)]


def test_vector_kernels_run_only_where_their_shape_qualifies(device):
    """The vector kernels run on CPU OpenCL devices whose probe passed ``rng_vectors`` (PoCL
    3.1 does; PoCL 3.0 zeroes convert_uint8(ulong8) and crashes on the kernels), never on
    cpu:0, and the numbers are the same either way (the tests above)."""
    from gpuarrays._compute.device import qualify

    expected = (device.backend == "opencl" and device.impl.launch_hint(device.index) == "cpu"
                and qualify.verdict(device).allows("rng_vectors"))
    assert kernels._vectors(device) == expected
    assert not kernels._vectors(CPU)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_floats_are_identical_on_every_opencl_device(dtype):
    """Every OpenCL device here (vector kernels or not: PoCL 3.0 gets the scalar ones)."""
    others = [d for d in ga.devices() if d.backend == "opencl" and d.supports(dtype)]
    for dev in others:
        for method in ("random", "standard_normal", "exponential"):
            same(dev, lambda g, m=method: ga.asarray(np.concatenate([
                FLOAT_METHODS[m](g, n, dtype).get() for n in (1, 257, 1001)]), device=CPU),
                 seeds=[4])


def _chunked(seed: int, n: int) -> np.ndarray:
    """The NumPy reference run block range by block range (its chunking changes nothing)."""
    g = ga.random.default_rng(seed)
    out = np.empty(n, np.float32)
    step = 32  # elements: one lane group of 8 blocks
    for lo in range(0, n, step):
        part = out[lo:lo + step]
        reference.generate("normal", part, g.state["key"], lo // 4, (0.0, 1.0))
    return out.view(np.uint32)


# state: spawn and pickle -------------------------------------------------------------
def test_pickled_generators_continue_the_same_stream(device):
    g = ga.random.default_rng(77, device=device)
    g.random(10)
    h = pickle.loads(pickle.dumps(g))
    assert h.state == g.state and h.device == device
    np.testing.assert_array_equal(bits(h.standard_normal(101)), bits(g.standard_normal(101)))
    c = pickle.loads(pickle.dumps(ga.random.default_rng(77, device=CPU)))
    c.random(10)
    c.standard_normal(101)
    np.testing.assert_array_equal(bits(c.integers(0, 1000, 50)), bits(g.integers(0, 1000, 50)))


def test_spawned_children_are_independent_and_identical_everywhere(device):
    def kids(g):
        a, b = g.spawn(2)
        return ga.asarray(np.stack([a.random(64).get(), b.random(64).get()]), device=CPU)
    same(device, kids)
    g = ga.random.default_rng(5, device=device)
    a, b = g.spawn(2)
    c, = g.spawn(1)  # spawning again gives new children
    draws = [x.random(64).get() for x in (g, a, b, c)]
    for i in range(4):
        for j in range(i):
            assert not np.array_equal(draws[i], draws[j])
    assert a.device == device
    p = pickle.loads(pickle.dumps(g))
    d, = p.spawn(1)  # the spawn count travels with the pickle
    np.testing.assert_array_equal(d.random(64).get(), ga.random.default_rng(
        np.random.SeedSequence(5, spawn_key=(3,))).random(64).get())


def test_unpickling_without_the_device_uses_the_current_device():
    state = ga.random.default_rng(3, device=CPU).__getstate__()
    state["device"] = "opencl:99"
    g = ga.random.Generator.__new__(ga.random.Generator)
    g.__setstate__(state)
    assert g.device == ga.get_device()


def test_default_rng_passes_a_generator_through_and_seeds_freshly():
    g = ga.random.default_rng(1)
    assert ga.random.default_rng(g) is g
    a, b = ga.random.default_rng(), ga.random.default_rng()
    assert a.state["key"] != b.state["key"]
    assert "philox4x32-10" in repr(g)


# statistics (fixed seeds: deterministic) ------------------------------------------------
N = 100_000
P_MIN = 1e-3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_continuous_distributions_pass_kolmogorov_smirnov(dtype):
    g = ga.random.default_rng(2024, device=CPU)
    cases = [
        (g.random(N, dtype=dtype), stats.uniform()),
        (g.uniform(-2.0, 5.0, N, dtype=dtype), stats.uniform(-2.0, 7.0)),
        (g.standard_normal(N, dtype=dtype), stats.norm()),
        (g.normal(3.0, 2.0, N, dtype=dtype), stats.norm(3.0, 2.0)),
        (g.exponential(0.5, N, dtype=dtype), stats.expon(scale=0.5)),
    ]
    for sample, dist in cases:
        x = sample.get().astype(np.float64)
        assert stats.kstest(x, dist.cdf).pvalue > P_MIN, dist.dist.name


def test_uniforms_lie_in_the_half_open_unit_interval():
    g = ga.random.default_rng(8, device=CPU)
    for dt in (np.float32, np.float64):
        x = g.random(N, dtype=dt).get()
        assert x.min() >= 0 and x.max() < 1
        assert len(np.unique(x)) > 0.99 * N


def test_normal_pairs_are_uncorrelated():
    z = ga.random.default_rng(11, device=CPU).standard_normal(N).get()
    assert abs(np.corrcoef(z[0::2], z[1::2])[0, 1]) < 0.02


@pytest.mark.parametrize("low,high,bins", [
    (0, 3, 3), (0, 7, 7), (-5, 5, 10), (0, 1000, 10), (0, 3 * 2**30, 12),
    (0, 3 * 2**62, 12), (0, 2**64 - 2**63 // 3 * 3, 12)])
def test_integers_pass_chi_square(low, high, bins):
    x = ga.random.default_rng(31, device=CPU).integers(low, high, N, dtype=np.uint64
                                                       if low >= 0 else np.int64).get()
    assert x.min() >= low and x.max() < high
    span = high - low
    k = [(int(v) - low) * bins // span for v in x] if span > 2**62 else (
        (x.astype(np.int64) - low) * bins // span)
    counts = np.bincount(np.asarray(k), minlength=bins)
    assert stats.chisquare(counts).pvalue > P_MIN


def test_integers_with_endpoint_reach_it():
    x = ga.random.default_rng(4, device=CPU).integers(1, 6, 6000, endpoint=True).get()
    assert set(x.tolist()) == {1, 2, 3, 4, 5, 6}
    assert stats.chisquare(np.bincount(x)[1:]).pvalue > P_MIN


def test_permutations_are_permutations_and_uniform():
    g = ga.random.default_rng(17, device=CPU)
    for n in (1, 2, 3, 10, 1000):
        assert sorted(g.permutation(n).get().tolist()) == list(range(n))
    seen: dict[tuple, int] = {}
    for _ in range(3000):
        p = tuple(g.permutation(3).get().tolist())
        seen[p] = seen.get(p, 0) + 1
    assert len(seen) == 6 and stats.chisquare(list(seen.values())).pvalue > P_MIN


def test_choice_without_replacement_has_no_repeats(device):
    g = ga.random.default_rng(3, device=device)
    x = g.choice(50, 50, replace=False).get()
    assert sorted(x.tolist()) == list(range(50))
    a = ga.asarray(np.arange(10.0) * 2, device=device)
    s = g.choice(a, 6, replace=False).get()
    assert len(set(s.tolist())) == 6 and set(s.tolist()) <= set((np.arange(10.0) * 2).tolist())


def test_shuffle_keeps_rows_intact(device):
    data = np.arange(40).reshape(10, 4)
    x = ga.asarray(data, device=device)
    ga.random.default_rng(6, device=device).shuffle(x)
    got = x.get()
    assert sorted(map(tuple, got.tolist())) == sorted(map(tuple, data.tolist()))
    assert not np.array_equal(got, data)
    y = ga.asarray(data, device=device)
    ga.random.default_rng(6, device=device).shuffle(y[1::2])  # in place, through a view
    got = y.get()
    np.testing.assert_array_equal(got[0::2], data[0::2])
    assert sorted(got[1::2, 0].tolist()) == data[1::2, 0].tolist()


# results: shapes, pool, caches -------------------------------------------------------
def test_size_none_gives_a_0d_array_and_tuples_give_shapes(device):
    g = ga.random.default_rng(0, device=device)
    assert g.random().shape == () and g.integers(5).shape == ()
    assert g.normal(size=(2, 3)).shape == (2, 3)
    assert g.random(4).device == device and g.random(4).kind == "device"


def test_default_dtype_is_float64_where_the_device_has_it(device):
    g = ga.random.default_rng(0, device=device)
    want = np.float64 if device.supports(np.float64) else np.float32
    assert g.random(3).dtype == want and g.standard_normal(3).dtype == want
    assert g.integers(0, 5, 3).dtype == np.int64


def test_each_result_is_one_pool_allocation(device):
    g = ga.random.default_rng(0, device=device)
    for make in (lambda: g.random(1000), lambda: g.standard_normal(1000, dtype=np.float32),
                 lambda: g.integers(0, 3 * 2**30, 1000), lambda: g.exponential(size=1000)):
        with ga.record_allocations() as rec:
            a = make()
        assert rec.count == 1 and a.size == 1000
        del a


def test_results_come_from_the_active_cache(device):
    g = ga.random.default_rng(0, device=device)
    cache = ga.AllocCache()
    with ga.cached(cache):
        g.random(256).free()
        g.random(256)
    assert cache.hits >= 1
    cache.free()


def test_temporaries_of_permutations_go_back(device, used):
    g = ga.random.default_rng(0, device=device)
    base = used()
    p = g.permutation(1000)
    x = ga.asarray(np.arange(100.0), device=device)
    g.shuffle(x)
    c = g.choice(x, 10, replace=False)
    blocks = sum(-(-a.nbytes // 512) * 512 for a in (p, x, c))  # pool granularity
    assert used() - base == blocks
    del p, x, c
    gc.collect()
    assert used() == base


# bad input: the right error, nothing allocated, counter unchanged ------------------------
BAD = [
    (lambda g: g.integers(5, 5), ValueError),
    (lambda g: g.integers(5, 4, endpoint=True), ValueError),
    (lambda g: g.integers(0), ValueError),
    (lambda g: g.integers(-1, 10, dtype=np.uint8), ValueError),
    (lambda g: g.integers(0, 257, dtype=np.uint8), ValueError),
    (lambda g: g.integers(0, 10, dtype=np.float32), ga.UnsupportedDTypeError),
    (lambda g: g.integers(0, 10, dtype=bool), ga.UnsupportedDTypeError),
    (lambda g: g.integers(0.5, 10), TypeError),
    (lambda g: g.uniform(1.0, 1.0), ValueError),
    (lambda g: g.uniform(2.0, 1.0), ValueError),
    (lambda g: g.uniform(0.0, float("nan")), ValueError),
    (lambda g: g.uniform(-3e38, 3e38, 4, dtype=np.float32), OverflowError),
    (lambda g: g.random(-1), ValueError),
    (lambda g: g.random((2, -3)), ValueError),
    (lambda g: g.random(2.5), TypeError),
    (lambda g: g.random(3, dtype=np.int32), ga.UnsupportedDTypeError),
    (lambda g: g.random(3, dtype=np.float16), ga.UnsupportedDTypeError),
    (lambda g: g.standard_normal(3, dtype=np.complex64), ga.UnsupportedDTypeError),
    (lambda g: g.normal(0.0, -1.0, 3), ValueError),
    (lambda g: g.exponential(-2.0, 3), ValueError),
    (lambda g: g.permutation(-3), ValueError),
    (lambda g: g.permutation([1, 2, 3]), TypeError),
    (lambda g: g.shuffle(np.arange(3)), TypeError),
    (lambda g: g.choice(5, 6, replace=False), ValueError),
    (lambda g: g.choice(0, 2), ValueError),
    (lambda g: g.choice(5, 2, p=[0.2] * 5), NotImplementedError),
    (lambda g: g.choice(5, -2), ValueError),
]


@pytest.mark.parametrize("call,error", BAD)
def test_bad_input_raises_and_allocates_nothing(device, used, call, error):
    g = ga.random.default_rng(1, device=device)
    before, state = used(), g.state
    with ga.record_allocations() as rec:
        with pytest.raises(error):
            call(g)
    assert rec.count == 0 and used() == before and g.state == state


def test_shuffle_refuses_read_only_and_0d_arrays(device):
    g = ga.random.default_rng(1, device=device)
    with pytest.raises(ValueError, match="read-only"):
        g.shuffle(ga.broadcast_to(ga.asarray([1.0], device=device), (4,)))
    with pytest.raises(ValueError, match="at least 1 dimension"):
        g.shuffle(ga.asarray(1.0, device=device))


def test_bad_seeds_are_refused():
    with pytest.raises(ValueError):
        ga.random.default_rng(-1)
    with pytest.raises(TypeError):
        ga.random.default_rng(1.5)
    with pytest.raises(ValueError):
        ga.random.default_rng(1).spawn(-1)


def test_messages_name_the_values_and_a_remedy():
    g = ga.random.default_rng(1, device=CPU)
    with pytest.raises(ValueError, match=r"low < high, got low=5, high=5"):
        g.integers(5, 5)
    with pytest.raises(ga.UnsupportedDTypeError, match=r"int32.*dtype=ga.float32"):
        g.random(2, dtype=np.int32)


# CUDA: every kernel compiles with NVRTC (no GPU needed) ----------------------------------
def test_every_kernel_compiles_for_cuda():
    """For the oldest architecture the installed NVRTC compiles for (sm_50 with NVRTC 12.9,
    sm_75 with 13; a fixed sm_70 is refused by 13): real cubins, the oldest GPUs these
    kernels can meet."""
    try:
        from cuda.bindings import nvrtc

        from gpuarrays.backends.cuda import compile_image
        err, archs = nvrtc.nvrtcGetSupportedArchs()
    except ImportError as exc:
        pytest.skip(f"NVRTC is not installed: {exc}")
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS and archs, (err, archs)
    oldest = min(int(a) for a in archs)
    compile_image("extern \"C\" __global__ void probe() {}", oldest)
    for name in kernels.names("cuda"):
        src, _ = kernels.source("cuda", name)
        image, kind = compile_image(src, oldest)
        assert image and kind == "cubin", (name, kind)


def test_the_cpu_engines_c_is_the_generators():
    """``gpuarrays._rng`` compiles ``src/native/rng/rng_kernels.h``; it must be what the one
    kernel template writes today (else: ``kernels.write_c_header()`` and rebuild)."""
    import pathlib
    header = pathlib.Path(__file__).resolve().parents[1] / kernels.C_HEADER
    assert header.read_text() == kernels.c_source(), (
        f"{header} is stale: run kernels.write_c_header() from the checkout and rebuild")
    assert set(kernels.names("c")) == {
        n for n in kernels.names("cuda")
        if n.startswith(("rng_uniform", "rng_normal", "rng_exponential", "rng_integers"))
        or n == "rng_keys"}


def test_the_cpu_engine_refuses_bad_launches_before_running():
    from gpuarrays import _rng as engine
    out = np.zeros(8, np.float32)
    args = (out.ctypes.data, 8, 1, 2, 0, 0, 0.0, 1.0)
    with pytest.raises(ValueError, match="no kernel rng_nothing"):
        engine.launch("rng_nothing", args, 2)
    with pytest.raises(TypeError, match="takes 8 arguments, got 7"):
        engine.launch("rng_uniform_f32", args[:7], 2)
    with pytest.raises(OverflowError):
        engine.launch("rng_uniform_f32", (out.ctypes.data, -8, *args[2:]), 2)
    with pytest.raises(TypeError):
        engine.launch("rng_uniform_f32", (*args[:6], "low", 1.0), 2)
    assert not out.any()  # nothing ran
    engine.launch("rng_uniform_f32", args, 1)  # one block: 4 rows of its lane group
    assert np.count_nonzero(out) == 1 and out[0] > 0


def test_every_kernel_source_builds_for_opencl(device):
    if device.backend != "opencl":
        assert kernels.source("opencl", "rng_bitonic")[0].startswith("#pragma OPENCL FP_CONTRACT")
        return
    for name in kernels.names("opencl"):
        src, params = kernels.source("opencl", name)
        device.impl.compile_kernel(device.index, src, name, params)
    assert set(kernels.names("cuda")) < set(kernels.names("opencl")) == set(kernels.KERNEL_NAMES)
    with pytest.raises(ValueError, match="opencl only"):
        kernels.source("cuda", "rng_uniform_f32_v4")


# cases nobody thought of -----------------------------------------------------------------
_INT_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


@st.composite
def _int_ranges(draw):
    dt = np.dtype(draw(st.sampled_from(_INT_DTYPES)))
    info = np.iinfo(dt)
    lo = draw(st.integers(int(info.min), int(info.max)))
    last = draw(st.integers(lo, int(info.max)))
    return dt, lo, last


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_int_ranges(), n=st.integers(0, 70), seed=st.integers(0, 2**64 - 1))
def test_any_integer_range_is_identical_everywhere_and_in_range(device, case, n, seed):
    dt, lo, last = case
    got = ga.random.default_rng(seed, device=device).integers(lo, last, n, dtype=dt,
                                                              endpoint=True).get()
    want = ga.random.default_rng(seed, device=CPU).integers(lo, last, n, dtype=dt,
                                                            endpoint=True).get()
    np.testing.assert_array_equal(got, want)
    assert got.dtype == dt and (n == 0 or (got.min() >= lo and got.max() <= last))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(low=st.floats(-1e6, 1e6), width=st.floats(1e-3, 1e6), scale=st.floats(0, 1e3),
       dt=st.sampled_from([np.float32, np.float64]), n=st.integers(0, 40))
def test_any_parameters_give_identical_floats_everywhere(device, low, width, scale, dt, n):
    def draws(dev):
        g = ga.random.default_rng(5, device=dev)
        return [bits(g.uniform(low, low + width, n, dtype=dt)),
                bits(g.normal(low, scale, n, dtype=dt)), bits(g.exponential(scale, n, dtype=dt))]
    for got, want in zip(draws(device), draws(CPU), strict=True):
        np.testing.assert_array_equal(got, want)


# regressions --------------------------------------------------------------------------------
def test_float32_constants_are_valid_c_literals():
    """``1f`` is not C: every float32 constant of the kernels has a '.' or an exponent."""
    from gpuarrays._compute.rng.mapping import SPECS
    spec = SPECS[np.dtype(np.float32)]
    assert kernels._lit(spec, 1.0) == "1.0f" and kernels._lit(spec, -2) == "-2.0f"


def test_no_kernel_parameter_is_named_like_an_opencl_type():
    """A parameter called ``half`` broke the bitonic kernel's OpenCL build."""
    import re
    for name in kernels.KERNEL_NAMES:
        src, _ = kernels.source("opencl", name)
        sig = src[src.index(f"void {name}("):].split(")")[0]
        params = {p.split()[-1].lstrip("*") for p in sig.split("(")[1].split(",")}
        assert not params & {"half", "float", "double", "int", "char", "short", "long",
                             "uchar", "ushort", "uint", "ulong", "bool"}, name
        assert not re.search(r"\bhalf\b", sig)


def test_one_generator_from_several_threads_never_repeats_numbers():
    import threading
    g = ga.random.default_rng(12, device=CPU)
    out: list = []

    def work():
        for _ in range(20):
            out.append(g.integers(0, 2**64, 8, dtype=np.uint64).get())
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    values = np.concatenate(out)
    assert values.size == 4 * 20 * 8 and len(np.unique(values)) == values.size
    assert g.state["counter"] == 4 * 20 * 4


def test_generation_works_after_a_device_reset(device):
    want = bits(ga.random.default_rng(21, device=device).standard_normal(33))
    perm = ga.random.default_rng(21, device=device).permutation(17).get()
    ga.device_reset(device)
    np.testing.assert_array_equal(bits(ga.random.default_rng(21, device=device)
                                       .standard_normal(33)), want)
    np.testing.assert_array_equal(ga.random.default_rng(21, device=device).permutation(17).get(),
                                  perm)


def test_the_sort_in_local_memory_gives_the_same_permutations(device, monkeypatch):
    """The GPU path of the bitonic sort (short stages in local memory), run on this device."""
    monkeypatch.setattr(kernels, "_SORT_IN_LOCAL", {"cpu": True, "gpu": True})
    for n in (1, 127, 128, 129, 1000, 5000):
        same(device, lambda g, n=n: g.permutation(n), seeds=[4])
    assert {"rng_bitonic_local_128", "rng_bitonic_local_512"} <= set(kernels.KERNEL_NAMES)


def test_no_benchmark_script_shadows_a_standard_module():
    """benchmarks/random.py shadowed the standard library's random for every script there."""
    import sys
    from pathlib import Path
    folder = Path(__file__).resolve().parents[1] / "benchmarks"
    clashes = [p.name for p in folder.glob("*.py") if p.stem in sys.stdlib_module_names]
    assert not clashes, f"benchmark scripts named like standard modules: {clashes}"
