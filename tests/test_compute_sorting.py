"""sort, argsort and searchsorted on every device, NumPy as the oracle (docs/sorting.md).

Bit-exact against NumPy's stable sort (integers, bool, and floats including the sign of
zero and NaN payload order): every dtype, every axis, strided and negative-stride inputs,
keys with many duplicates (stability), NaN, +-0, +-inf, sizes around the merge/radix
switch and powers of two +- 1, one size >= 2**20 per path; descending (stable, NaN last);
the GPU-shaped radix launch on a CPU device; CUDA sources compile with NVRTC; bad input is
refused before anything is allocated.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import NUMERIC_DTYPES, SETTINGS, supported

import gpuarrays as ga
from gpuarrays._compute.device import sort as device_sort


def keys(dtype, shape, seed=0, spread=5) -> np.ndarray:
    """Values with many duplicates; floats with NaN, +-0 and +-inf sprinkled in."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "b":
        return (rng.integers(0, 2, n) > 0).reshape(shape)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(-spread if dt.kind == "i" else 0, spread, n)
        ends = rng.random(n) < 0.05
        v = v.astype(dt)
        v[ends] = np.array([info.min, info.max], dtype=dt)[rng.integers(0, 2, ends.sum())]
        return v.reshape(shape)
    special = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, -np.nan])
    v = rng.integers(-spread, spread, n).astype(np.float64) / 2
    pick = rng.random(n) < 0.3
    v[pick] = rng.choice(special, pick.sum())
    if dt.kind == "c":
        w = rng.integers(-2, 2, n).astype(np.float64)
        pick = rng.random(n) < 0.2
        w[pick] = rng.choice(special, pick.sum())
        c = np.empty(n, np.complex128)
        c.real, c.imag = v, w
        return c.astype(dt).reshape(shape)
    return v.astype(dt).reshape(shape)


def negated(h: np.ndarray) -> np.ndarray:
    """An order-reversing, NaN-keeping map: NumPy's stable sort of it is a stable
    descending sort with NaN last."""
    if h.dtype.kind == "b":
        return ~h
    if h.dtype.kind in "iu":
        return np.invert(h)
    return -h


def want_argsort(h, axis, descending):
    return np.argsort(negated(h) if descending else h, axis=axis, kind="stable")


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    """Bit-exact: values, the sign of zeros and NaN positions."""
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes() or np.array_equal(got, want, equal_nan=True) and \
        np.array_equal(np.signbit(got.real), np.signbit(want.real)), (got, want)


def check(device, h, axis=-1, descending=False):
    a = ga.asarray(h, device=device)
    idx = want_argsort(h, axis, descending)
    got_i = ga.argsort(a, axis=axis, descending=descending)
    assert got_i.dtype == ga.int64
    np.testing.assert_array_equal(got_i.get(), idx)
    want = np.take_along_axis(h, idx, axis=axis)
    assert_same(ga.sort(a, axis=axis, descending=descending).get(), want)
    # stable=False: equal elements (0.0 and -0.0 among them) in any order
    np.testing.assert_array_equal(
        ga.sort(a, axis=axis, descending=descending, stable=False).get(), want)


@pytest.mark.parametrize("dtype", [str(d) for d in NUMERIC_DTYPES])
def test_every_dtype_both_directions_and_both_kernels(device, dtype):
    dt = np.dtype(dtype)
    if dt not in supported(device, NUMERIC_DTYPES):
        dt = np.dtype("float32")  # the device lacks it; its refusal is tested below
    for n, seed in ((1, 0), (17, 1), (257, 2), (5000, 3)):  # merge: <=128; radix: longer
        h = keys(dt, (n,), seed)
        check(device, h)
        check(device, h, descending=True)
    h = keys(dt, (40, 6), 4)  # many short rows: one merge launch
    check(device, h, axis=0, descending=True)


def test_unsupported_dtypes_are_refused(device):
    for dt in NUMERIC_DTYPES:
        if not device.supports(dt):
            with pytest.raises(ga.UnsupportedDTypeError):
                ga.zeros(3, dtype=dt, device=device)


@pytest.mark.parametrize("n", [0, 1, 2, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025,
                               8191, 8192, 8193, 65535, 65537])
def test_sizes_around_the_switch_and_powers_of_two(device, n):
    check(device, keys("float32", (n,), n))
    check(device, keys("int16", (n,), n), descending=True)


@pytest.mark.parametrize("layout", ["transposed", "negative", "strided", "offset",
                                    "broadcast"])
def test_strided_and_negative_stride_inputs(device, layout):
    h = keys("float32", (300, 40), 5)
    a = ga.asarray(h, device=device)
    view, hv = {"transposed": (a.T, h.T), "negative": (a[::-1, ::-2], h[::-1, ::-2]),
                "strided": (a[::3], h[::3]), "offset": (a[1:, 3:], h[1:, 3:]),
                "broadcast": (ga.broadcast_to(a[:, :1], (300, 40)),
                              np.broadcast_to(h[:, :1], (300, 40)))}[layout]
    for axis in (0, 1, -1):
        np.testing.assert_array_equal(ga.argsort(view, axis=axis).get(),
                                      np.argsort(hv, axis=axis, kind="stable"))
        assert_same(ga.sort(view, axis=axis).get(), np.sort(hv, axis=axis, kind="stable"))


def test_many_kept_axes_that_do_not_collapse(device):
    h = keys("int16", (4, 3, 4, 3, 4, 3, 5), 22)
    hv = h[::2, :, ::2, :, ::2, :, ::-1]  # six kept axes, none collapsible
    a = ga.asarray(h, device=device)[::2, :, ::2, :, ::2, :, ::-1]
    for axis in (-1, 3):
        np.testing.assert_array_equal(ga.argsort(a, axis=axis).get(),
                                      np.argsort(hv, axis=axis, kind="stable"))


@given(st.data())
@SETTINGS
def test_hypothesis_shapes_axes_dtypes(device, data):
    dt = data.draw(st.sampled_from(supported(device, NUMERIC_DTYPES)))
    shape = tuple(data.draw(st.lists(st.integers(0, 9), min_size=1, max_size=4)))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    descending = data.draw(st.booleans())
    check(device, keys(dt, shape, data.draw(st.integers(0, 99))), axis, descending)


def test_stability_with_many_duplicates(device):
    for n in (100, 3000, 300_000):  # merge, radix with one chunk, radix with many
        h = keys("int32", (n,), 7, spread=3)
        check(device, h)
        check(device, h, descending=True)
    b = keys("bool", (4099,), 8)
    check(device, b, descending=True)


def test_one_large_sort_per_path(device):
    h = keys("float32", (1 << 20,), 9, spread=1000)
    check(device, h)  # radix, many chunks
    h2 = keys("int64", (1 << 13, 128), 10)  # 2**20 elements in 8192 merge rows
    check(device, h2, axis=1, descending=True)


def test_gpu_shaped_radix_launch(device):
    if device.backend == "cpu":
        check(device, keys("float64", (9000,), 11))  # nothing GPU-shaped to run on cpu
        return
    device_sort.override_hint.append("gpu")
    try:
        for dt in ("float32", "uint8", "complex64"):
            h = keys(dt, (3, 20000), 12)
            check(device, h, axis=1)
            check(device, h, axis=1, descending=True)
    finally:
        device_sort.override_hint.remove("gpu")


def test_float16_keys_on_every_device_kernel(device):
    """float16 keys on a device kernel even where the device holds no float16 (PoCL here):
    the bits travel in a uint16 array and the kernel is told they are floats."""
    if device.backend == "cpu":
        check(device, keys("float16", (3000,), 23))
        return
    for shape in ((100,), (5000,), (30, 50)):
        h = keys("float16", shape, 24)
        a = ga.asarray(h.view(np.uint16), device=device)
        for descending in (False, True):
            got = ga.empty(shape, dtype=ga.int64, device=device)
            device_sort.sort(a, len(shape) - 1, descending, got, True, kind="f")
            np.testing.assert_array_equal(got.get(), want_argsort(h, -1, descending))


def test_complex_order_is_numpys(device):
    v = [np.nan + 1j, 1 + np.nan * 1j, np.nan + np.nan * 1j, 2 + 0j, 1 + 1j, 1 - 1j,
         np.nan - 1j, 3 + np.nan * 1j, -np.inf + 0j, complex(0.0, -0.0)]
    check(device, np.array(v * 20, dtype=np.complex64))


def test_temporaries_go_back_and_results_come_from_the_cache(device, used):
    h = keys("float32", (100_000,), 13)
    a = ga.asarray(h, device=device)
    before = used()
    r = ga.argsort(a)
    ga.synchronize(device)
    assert before + r.nbytes <= used() < before + r.nbytes + 4096  # the result only
    del r
    assert used() == before
    cache = ga.AllocCache()
    counts = []
    for _ in range(3):
        with ga.record_allocations() as rec, ga.cached(cache):
            r = ga.sort(a)
            del r
        counts.append(rec.count)
    assert counts[1:] == [0, 0]
    cache.free()


def test_bad_input_is_refused_before_anything_is_allocated(device, used):
    a = ga.ones((3, 4), device=device)
    s = ga.asarray(1.0, device=device)
    before = used()
    with ga.record_allocations() as rec:
        for fn in (ga.sort, ga.argsort):
            with pytest.raises(np.exceptions.AxisError):
                fn(a, axis=2)
            with pytest.raises(np.exceptions.AxisError):
                fn(a, axis=-3)
            with pytest.raises(np.exceptions.AxisError, match="0-d"):
                fn(s)
            with pytest.raises(TypeError, match="axis must be an int"):
                fn(a, axis=None)
            with pytest.raises(TypeError, match="descending"):
                fn(a, descending="yes")
            with pytest.raises(TypeError, match="gpuarrays array"):
                fn(np.ones(3))
    assert rec.count == 0 and used() == before


def test_freed_arrays_raise(device):
    a = ga.ones(5, device=device)
    b = ga.arange(5, device=device)
    a.free()
    for call in (lambda: ga.sort(a), lambda: ga.argsort(a), lambda: ga.searchsorted(a, b),
                 lambda: ga.searchsorted(b, a), lambda: ga.searchsorted(b, b, sorter=a)):
        with pytest.raises(ga.FreedArrayError):
            call()


# searchsorted -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint64", "bool", "float64"])
def test_searchsorted_both_sides_matches_numpy(device, dtype):
    if not device.supports(dtype):
        dtype = "float32"
    for n1, n2 in ((0, 5), (1, 7), (300, 1000), (5000, 3)):
        x1 = np.sort(keys(dtype, (n1,), n1), kind="stable")
        x2 = keys(dtype, (n2,), n2 + 1)
        a1, a2 = ga.asarray(x1, device=device), ga.asarray(x2, device=device)
        for side in ("left", "right"):
            got = ga.searchsorted(a1, a2, side=side)
            assert got.dtype == ga.int64 and got.shape == x2.shape
            np.testing.assert_array_equal(got.get(), np.searchsorted(x1, x2, side=side))


def test_searchsorted_sorter_scalars_nd_and_promotion(device):
    rng = np.random.default_rng(14)
    x1 = keys("float32", (500,), 14)
    srt = np.argsort(x1, kind="stable")
    x2 = keys("float32", (4, 5, 6), 15)
    a1 = ga.asarray(x1, device=device)
    s = ga.asarray(srt, device=device)
    for side in ("left", "right"):
        np.testing.assert_array_equal(
            ga.searchsorted(a1, ga.asarray(x2, device=device), side=side, sorter=s).get(),
            np.searchsorted(x1, x2, side=side, sorter=srt))
        np.testing.assert_array_equal(  # a strided, int32 sorter and a strided x2
            ga.searchsorted(a1, ga.asarray(x2, device=device)[:, ::2], side=side,
                            sorter=ga.asarray(srt.astype(np.int32), device=device)).get(),
            np.searchsorted(x1, x2[:, ::2], side=side, sorter=srt))
    x1s = np.sort(x1, kind="stable")
    got = ga.searchsorted(ga.asarray(x1s, device=device)[::3], ga.asarray(x2, device=device))
    np.testing.assert_array_equal(got.get(), np.searchsorted(x1s[::3], x2))  # strided x1
    i1 = np.sort(rng.integers(-50, 50, 200)).astype(np.int16)
    g1 = ga.asarray(i1, device=device)
    got = ga.searchsorted(g1, 3)
    assert got.shape == () and int(got.get()) == np.searchsorted(i1, 3)
    assert int(ga.searchsorted(g1, 2.5, side="right").get()) == np.searchsorted(i1, 2.5, "right")
    f = ga.asarray(np.array([-60.5, 0.25, 49.5], dtype=np.float32), device=device)
    np.testing.assert_array_equal(ga.searchsorted(g1, f).get(),
                                  np.searchsorted(i1, np.array([-60.5, 0.25, 49.5])))


def test_searchsorted_bad_input(device, used):
    a = ga.asarray(np.arange(6.0, dtype=np.float32), device=device)
    v = ga.asarray(np.array([1.5], dtype=np.float32), device=device)
    m = ga.ones((2, 3), device=device)
    before = used()
    with ga.record_allocations() as rec:
        with pytest.raises(ValueError, match="side"):
            ga.searchsorted(a, v, side="middle")
        with pytest.raises(ValueError, match="1-d"):
            ga.searchsorted(m, v)
        with pytest.raises(ValueError, match="sorter must have"):
            ga.searchsorted(a, v, sorter=ga.arange(5, device=device))
        with pytest.raises(TypeError, match="integer dtype"):
            ga.searchsorted(a, v, sorter=a)
        with pytest.raises(TypeError, match="x2"):
            ga.searchsorted(a, [1.0])
        with pytest.raises(OverflowError):
            ga.searchsorted(ga.arange(3, dtype=ga.int8, device=device), 1000)
    assert rec.count <= 2 and used() == before  # the arange sorter above is the only one
    other = [d for d in ga.devices() if d != device][:1]
    for d in other:
        with pytest.raises(ValueError, match="move one"):
            ga.searchsorted(a, ga.asarray(np.ones(2, np.float32), device=d))


# CUDA: the generated kernels compile with NVRTC -------------------------------------------
@pytest.mark.parametrize("width", [1, 2, 4, 8, 16])
def test_sort_kernels_compile_with_nvrtc(nvrtc, width):
    from gpuarrays.backends import cuda

    for family, index in (("sort", 4), ("sort", 8), ("search", 8)):
        if family == "sort" and index == 8 and width != 4:
            continue  # 64-bit row indices change only the index type: one width covers them
        spec = device_sort.SortSpec("cuda", width, index, family)
        text, name, _ = device_sort.program(cuda.DIALECT, spec)
        image, kind = cuda.compile_image(text, 90)
        assert image and kind == "cubin", (family, width, index)


# sets -------------------------------------------------------------------------------------
def unique_oracle(h):
    return np.unique(h.reshape(-1), return_index=True, return_inverse=True, return_counts=True,
                     equal_nan=False)


def check_unique(device, h):
    a = ga.asarray(h, device=device)
    wv, wi, winv, wc = unique_oracle(h)
    r = ga.unique_all(a)
    assert type(r).__name__ == "UniqueAllResult"
    assert r._fields == ("values", "indices", "inverse_indices", "counts")
    assert r.values.dtype == h.dtype and r.values.shape == wv.shape
    assert r.indices.dtype == r.inverse_indices.dtype == r.counts.dtype == ga.int64
    np.testing.assert_array_equal(r.values.get(), wv)  # NaN == NaN here, -0 == +0
    np.testing.assert_array_equal(r.indices.get(), wi)
    np.testing.assert_array_equal(r.inverse_indices.get(), winv.reshape(h.shape))
    np.testing.assert_array_equal(r.counts.get(), wc)
    np.testing.assert_array_equal(ga.unique_values(a).get(), wv)
    c = ga.unique_counts(a)
    assert c._fields == ("values", "counts")
    np.testing.assert_array_equal(c.counts.get(), wc)
    inv = ga.unique_inverse(a)
    assert inv._fields == ("values", "inverse_indices")
    np.testing.assert_array_equal(inv.inverse_indices.get(), winv.reshape(h.shape))


@given(st.data())
@SETTINGS
def test_unique_hypothesis_against_numpy(device, data):
    dt = data.draw(st.sampled_from(supported(device, NUMERIC_DTYPES)))
    shape = tuple(data.draw(st.lists(st.integers(0, 7), min_size=0, max_size=3)))
    check_unique(device, keys(dt, shape, data.draw(st.integers(0, 99))))


def test_unique_nan_each_distinct_and_signed_zeros_one(device):
    h = np.array([np.nan, 0.0, -0.0, np.nan, 1.0, -0.0, np.nan], dtype=np.float32)
    r = ga.unique_counts(ga.asarray(h, device=device))
    v = r.values.get()
    assert v.shape == (5,) and np.isnan(v[2:]).all() and v[0] == 0 and v[1] == 1
    assert r.counts.get().tolist() == [3, 1, 1, 1, 1]
    check_unique(device, h)


def test_unique_large_strided_and_empty(device):
    h = keys("int32", (3000, 400), 16, spread=200)  # 1.2 M elements through the radix sort
    check_unique(device, h[::2, ::3])
    check_unique(device, keys("float32", (1 << 20,), 17, spread=1000))
    e = ga.asarray(np.zeros((2, 0), np.float32), device=device)
    r = ga.unique_all(e)
    assert r.values.shape == (0,) and r.inverse_indices.shape == (2, 0)


def test_unique_reads_one_count_and_frees_its_temporaries(device, used):
    a = ga.asarray(keys("float32", (20000,), 18), device=device)
    before = used()
    r = ga.unique_all(a)
    ga.synchronize(device)
    total = sum(x.nbytes for x in r)
    assert before + total <= used() < before + total + 4 * 4096
    del r
    assert used() == before
    cache = ga.AllocCache()
    counts = []
    for _ in range(3):
        with ga.record_allocations() as rec, ga.cached(cache):
            r = ga.unique_all(a)
            del r
            s = ga.isin(a, a)
            del s
        counts.append(rec.count)
    assert counts[1:] == [0, 0]
    cache.free()


@pytest.mark.parametrize("dtypes", [("int64", "int64"), ("float32", "float32"),
                                    ("int8", "int16"), ("bool", "bool"),
                                    ("complex64", "complex64"), ("uint8", "float32")])
def test_isin_matches_numpy(device, dtypes):
    for (n1, n2), seed in zip(((0, 4), (7, 0), (1, 1), (300, 20), (5000, 9000)), range(5),
                              strict=True):
        h1 = keys(dtypes[0], (n1,), seed)
        h2 = keys(dtypes[1], (n2,), seed + 50)
        a1, a2 = ga.asarray(h1, device=device), ga.asarray(h2, device=device)
        for invert in (False, True):
            got = ga.isin(a1, a2, invert=invert)
            assert got.dtype == ga.bool and got.shape == h1.shape
            np.testing.assert_array_equal(got.get(), np.isin(h1, h2, invert=invert))


def test_isin_nd_strided_and_scalars(device):
    h1 = keys("int32", (6, 7), 20)
    h2 = keys("int32", (4, 5), 21)
    a1, a2 = ga.asarray(h1, device=device), ga.asarray(h2, device=device)
    np.testing.assert_array_equal(ga.isin(a1.T, a2[::2]).get(), np.isin(h1.T, h2[::2]))
    got = ga.isin(3, a2)
    assert got.shape == () and bool(got.get()) == (3 in h2)
    np.testing.assert_array_equal(ga.isin(a1, 2).get(), h1 == 2)
    f = ga.asarray(np.array([np.nan, 0.0, -0.0, 1.5], np.float32), device=device)
    assert ga.isin(f, f).get().tolist() == [False, True, True, True]


def test_set_functions_bad_input(device, used):
    a = ga.ones(4, device=device)
    before = used()
    with ga.record_allocations() as rec:
        for fn in (ga.unique_all, ga.unique_counts, ga.unique_inverse, ga.unique_values):
            with pytest.raises(TypeError, match="gpuarrays array"):
                fn(np.ones(3))
        with pytest.raises(TypeError, match="at least one"):
            ga.isin(1, 2)
        with pytest.raises(TypeError, match="invert"):
            ga.isin(a, a, invert=None)
        with pytest.raises(TypeError, match="Python scalars"):
            ga.isin(a, [1, 2])
        with pytest.raises(OverflowError):
            ga.isin(ga.ones(2, dtype=ga.int8, device=device), 1000)
    assert rec.count <= 1 and used() == before  # the int8 operand above
    a.free()
    for call in (lambda: ga.unique_all(a), lambda: ga.unique_values(a), lambda: ga.isin(a, 1),
                 lambda: ga.isin(ga.ones(2, device=device), a)):
        with pytest.raises(ga.FreedArrayError):
            call()


# stable=False and NumPy's default kind -------------------------------------------------------
@pytest.mark.parametrize("descending", [False, True])
def test_unstable_sort_gives_the_sorted_values_and_a_sorting_permutation(device, descending):
    rng = np.random.default_rng(7)
    h = rng.integers(0, 20, 5000).astype(np.float32)  # many ties
    h[::97] = np.nan
    x = ga.asarray(h, device=device)
    want = np.sort(h)
    if descending:
        want = np.concatenate([-np.sort(-h[~np.isnan(h)]), h[np.isnan(h)]])
    np.testing.assert_array_equal(
        ga.sort(x, descending=descending, stable=False).get(), want)
    perm = ga.argsort(x, descending=descending, stable=False).get()
    np.testing.assert_array_equal(np.sort(perm), np.arange(h.size))
    np.testing.assert_array_equal(h[perm], want)


def test_numpy_sort_kinds_through_the_protocol(device):
    h = np.array([3, 1, 2, 1, 3, 1], np.int32)
    x = ga.asarray(h, device=device)
    np.testing.assert_array_equal(np.sort(x).get(), np.sort(h))
    for kw in ({"kind": "stable"}, {"kind": "mergesort"}, {"stable": True}):
        np.testing.assert_array_equal(np.argsort(x, **kw).get(), np.argsort(h, kind="stable"))
    perm = np.argsort(x).get()  # NumPy's default kind: ties in any order
    np.testing.assert_array_equal(h[perm], np.sort(h))
    y = ga.asarray(h, device=device)
    y.sort()
    np.testing.assert_array_equal(y.get(), np.sort(h))
    with pytest.raises(TypeError, match="order"):
        np.sort(x, order="f")
