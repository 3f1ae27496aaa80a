"""cumulative_sum and cumulative_prod on every device, NumPy as the oracle (docs/reductions.md,
"Scans"): every dtype, every axis, include_initial, strided and negative-stride inputs, large
rows through the three-pass scan, and that scan again in its GPU shape (Blelloch tiles) at every
work-group size it may use -- a scan right at 64 work-items can be wrong at 128."""

from __future__ import annotations

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._compute import reductions
from gpuarrays._compute.device import scan as device_scan
from gpuarrays._compute.reductions import accumulator_dtype

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
_NUMPY = {"cumulative_sum": np.cumsum, "cumulative_prod": np.cumprod}


def values(dtype, shape, seed=0, name="cumulative_sum") -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0 if dt.kind == "u" else -3, 4, shape).astype(dt)
    v = rng.uniform(0.9, 1.1, shape) if name == "cumulative_prod" else rng.standard_normal(shape)
    if dt.kind == "c":
        v = v + 1j * (rng.uniform(-0.1, 0.1, shape) if name == "cumulative_prod"
                      else rng.standard_normal(shape))
    return np.asarray(v).astype(dt)


def reference(name: str, x: np.ndarray, axis: int, include_initial=False, dtype=None):
    rd = reductions._result_dtype(reductions.SCANS[name], x.dtype, dtype, ga.get_device("cpu:0"))
    acc = accumulator_dtype(rd)
    r = _NUMPY[name](x, axis=axis, dtype=acc).astype(rd)
    if include_initial:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (1, 0)
        r = np.pad(r, pad, constant_values=0 if name == "cumulative_sum" else 1)
    return r


def assert_matches(got: np.ndarray, want: np.ndarray, n: int) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                 got.shape, want.shape)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
        return
    tol = 4e-3 if want.dtype.itemsize == 2 else np.finfo(want.dtype).eps * (8 + 4 * np.sqrt(n))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(n) * 4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(_NUMPY))
def test_every_dtype_axis_and_include_initial_matches_numpy(device, name, dtype):
    if not device.supports(dtype):
        pytest.skip(f"{device} has no {dtype}")
    h = values(dtype, (4, 5, 6), name=name)
    a = ga.asarray(h, device=device)
    for axis in (0, 1, 2, -1):
        for initial in (False, True):
            got = getattr(ga, name)(a, axis=axis, include_initial=initial)
            assert got.device == device
            assert_matches(got.get(), reference(name, h, axis % 3, initial), 6)


@pytest.mark.parametrize("layout", ["transposed", "negative", "strided"])
def test_strided_transposed_and_negative_stride_inputs(device, layout):
    h = values("float32", (40, 30, 7), seed=2)
    view = {"transposed": lambda v: v.transpose(2, 0, 1), "negative": lambda v: v[::-1, :, ::-2],
            "strided": lambda v: v[3::2, ::3]}[layout]
    x, a = view(h), view(ga.asarray(h, device=device))
    for axis in range(3):
        for initial in (False, True):
            assert_matches(ga.cumulative_sum(a, axis=axis, include_initial=initial).get(),
                           reference("cumulative_sum", x, axis, initial), x.shape[axis])


@pytest.mark.parametrize("n", [1, 2, 63, 64, 65, 4095, 4097, 65537, 2**20 + 1])
def test_sizes_including_long_rows(device, n):
    h = values("int32", (n,), seed=n)
    a = ga.asarray(h, device=device)
    assert_matches(ga.cumulative_sum(a).get(), reference("cumulative_sum", h, 0), n)
    f = values("float32", (2, n), seed=n)
    b = ga.asarray(f, device=device)
    assert_matches(ga.cumulative_sum(b, axis=1, include_initial=True).get(),
                   reference("cumulative_sum", f, 1, True), n)


def test_a_scan_of_more_than_2_24_elements(device):
    n = 2**24 + 5
    h = values("int32", (n,), seed=11)
    a = ga.asarray(h, device=device)
    got = ga.cumulative_sum(a)
    assert got.dtype == ga.int64
    np.testing.assert_array_equal(got.get(), np.cumsum(h, dtype=np.int64))
    f = np.where(np.arange(n) % 2 == 0, 0.5, -0.5).astype(np.float32)  # every sum exact
    np.testing.assert_array_equal(ga.cumulative_sum(ga.asarray(f, device=device)).get(),
                                  np.cumsum(f))


@pytest.mark.parametrize("local", [64, 128, 256])
@pytest.mark.parametrize("per_item", [1, 4])
def test_the_gpu_shaped_scan_at_every_work_group_size(local, per_item):
    """The Blelloch tiles run on OpenCL (PoCL) at each work-group size GPUs may use."""
    try:
        dev = ga.get_device("opencl:0")
    except ValueError as e:
        pytest.skip(f"no OpenCL device here: {e}")
    saved = device_scan.TILE["gpu"]
    device_scan.override_hint.append("gpu")
    device_scan.TILE["gpu"] = (local, per_item)
    try:
        for n, dtype in [(local * per_item * 37 + 1, "int64"), (2**20 + 3, "int32"),
                         (100003, "float32")]:
            h = values(dtype, (n,), seed=local)
            a = ga.asarray(h, device=dev)
            assert_matches(ga.cumulative_sum(a).get(), reference("cumulative_sum", h, 0), n)
        m = values("int16", (3, 50001), seed=1)
        got = ga.cumulative_sum(ga.asarray(m, device=dev), axis=1, include_initial=True)
        assert_matches(got.get(), reference("cumulative_sum", m, 1, True), 50001)
        p = values("float64", (70001,), seed=2, name="cumulative_prod")
        assert_matches(ga.cumulative_prod(ga.asarray(p, device=dev)).get(),
                       reference("cumulative_prod", p, 0), 70001)
    finally:
        device_scan.override_hint.remove("gpu")
        device_scan.TILE["gpu"] = saved


def test_bad_arguments_are_refused_before_anything_is_allocated(device, used):
    a = ga.ones((3, 4), device=device)
    scalar = ga.asarray(1.0, device=device)
    before = used()
    with ga.record_allocations() as rec:
        with pytest.raises(ValueError, match="axis is required"):
            ga.cumulative_sum(a)
        with pytest.raises(ValueError, match="0-d"):
            ga.cumulative_prod(scalar)
        with pytest.raises(np.exceptions.AxisError):
            ga.cumulative_sum(a, axis=2)
        with pytest.raises(TypeError, match="axis must be an int"):
            ga.cumulative_sum(a, axis=(0, 1))
        with pytest.raises(TypeError, match="gpuarrays array"):
            ga.cumulative_sum([1, 2])
    assert rec.count == 0 and used() == before


def test_empty_and_dtype_arguments(device):
    e = ga.zeros((0, 3), dtype="int8", device=device)
    assert ga.cumulative_sum(e, axis=0).shape == (0, 3)
    r = ga.cumulative_sum(e, axis=0, include_initial=True)
    assert r.shape == (1, 3) and r.dtype == ga.int64 and r.get().tolist() == [[0, 0, 0]]
    assert ga.cumulative_prod(e, axis=1, include_initial=True).get().tolist() == []
    x = ga.asarray(np.array([1, 2, 3], dtype=np.int8), device=device)
    assert ga.cumulative_sum(x, dtype=ga.int16).dtype == ga.int16
    if device.info.float64:
        got = ga.cumulative_sum(x, dtype=ga.float64)
        assert got.dtype == ga.float64 and got.get().tolist() == [1.0, 3.0, 6.0]


def test_partials_go_back_and_cached_scans_allocate_nothing(device, used):
    h = values("float32", (3 * 2**18,), seed=3)
    a = ga.asarray(h, device=device)
    before = used()
    r = ga.cumulative_sum(a)
    ga.synchronize(device)
    assert used() == before + r.nbytes
    del r
    assert used() == before
    cache = ga.AllocCache()
    counts = []
    for _ in range(3):
        with ga.record_allocations() as rec, ga.cached(cache):
            r = ga.cumulative_sum(a)
            assert abs(float(r[-1].get()) - h.sum(dtype=np.float64)) < 1e-1
            del r
        counts.append(rec.count)
    assert counts[1:] == [0, 0], counts
    cache.free()
