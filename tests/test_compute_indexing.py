"""Indexing on every device, NumPy as the oracle, bit for bit (docs/indexing.md): the
compaction helper, nonzero, boolean masks, integer arrays, take, take_along_axis, and
assignment through all of them; bad input refused with nothing allocated or changed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gpuarrays as ga
from gpuarrays._compute.compaction import select

from strategies import SETTINGS, STRUCT_DTYPE

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def supported(device) -> list[str]:
    """Every numeric dtype the device holds (opencl may lack float16/float64)."""
    return [d for d in DTYPES if device.supports(d)]


def data(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    v = rng.integers(-100, 100, shape)
    if dt.kind == "c":
        v = v + 1j * rng.integers(-100, 100, shape)
    return v.astype(dt)


def same(got, want: np.ndarray) -> None:
    """Bit-exact: dtype, shape and every byte."""
    g = got.get() if isinstance(got, ga.GPUArray) else np.asarray(got)
    assert g.dtype == want.dtype and g.shape == want.shape, (g.dtype, want.dtype, g.shape,
                                                             want.shape)
    assert g.tobytes() == np.ascontiguousarray(want).tobytes(), (g, want)


# compaction.select (the building block of masks, nonzero and unique) -------------------------
def test_select_every_dtype_matches_numpy(device):
    m = np.random.default_rng(2).random(1000) < 0.4
    gm = ga.asarray(m, device=device)
    for dtype in supported(device):
        h = data((1000,), dtype, seed=1)
        same(select(ga.asarray(h, device=device), gm), h[m])


@pytest.mark.parametrize("n", [0, 1, 2, 255, 256, 257, 4097, 70_000])
def test_select_sizes_and_masks(device, n):
    h = data((n,), "float32", seed=n)
    x = ga.asarray(h, device=device)
    for m in (np.zeros(n, bool), np.ones(n, bool), np.random.default_rng(n).random(n) < 0.5):
        same(select(x, ga.asarray(m, device=device)), h[m])


def test_select_strided_and_reversed_inputs(device):
    h = data((3000,), "int32", seed=3)
    m = np.random.default_rng(4).random(3000) < 0.5
    x, gm = ga.asarray(h, device=device), ga.asarray(m, device=device)
    same(select(x[::-2], gm[::2]), h[::-2][m[::2]])
    same(select(x[1::3], gm[:1000]), h[1::3][m[:1000]])


def test_select_refuses_bad_arguments_before_allocating(device, used):
    x = ga.ones(5, device=device)
    m = ga.ones(5, dtype=ga.bool, device=device)
    before = used()
    with ga.record_allocations() as rec:
        with pytest.raises(TypeError, match="bool"):
            select(x, x)
        with pytest.raises(ValueError, match="1-d"):
            select(x, m[:4])
        with pytest.raises(ValueError, match="1-d"):
            select(x.reshape(5, 1), m)
        with pytest.raises(TypeError, match="gpuarrays array"):
            select(np.ones(5), m)
    assert rec.count == 0 and used() == before
    m.free()
    with pytest.raises(ga.FreedArrayError):
        select(x, m)


def test_select_results_and_temporaries_come_from_the_pool(device, used):
    x = ga.asarray(data((5000,), "float32"), device=device)
    m = x > 0
    base = used()
    r = select(x, m)
    assert r.nbytes <= used() - base < 2 * r.nbytes  # the running counts (8 B each) went back
    r.free()
    assert used() == base


@given(st.integers(0, 300), st.floats(0, 1), st.integers(0, 2**16))
@SETTINGS
def test_select_random_masks(device, n, p, seed):
    h = data((n,), "int16", seed=seed)
    m = np.random.default_rng(seed).random(n) < p
    same(select(ga.asarray(h, device=device), ga.asarray(m, device=device)), h[m])


def test_select_moves_structured_elements(device):
    h = np.zeros(37, STRUCT_DTYPE)
    h["x"], h["y"], h["z"] = np.arange(37), np.arange(37) * 0.5, np.arange(37) % 7
    m = np.arange(37) % 3 == 1
    same(select(ga.asarray(h, device=device), ga.asarray(m, device=device)), h[m])


# CUDA: the generated kernels compile with NVRTC ---------------------------------------------
@pytest.fixture(scope="module")
def nvrtc():
    try:
        from cuda.bindings import nvrtc as lib
        lib.nvrtcVersion()
    except (ImportError, RuntimeError) as e:
        pytest.skip(f"NVRTC is not available here: {e}")
    return lib


def test_index_kernels_compile_with_nvrtc(nvrtc):
    from gpuarrays._compute.device import indexing as kernels
    from gpuarrays.backends import cuda

    programs = [kernels.compact_program(cuda.DIALECT, kernels.CompactSpec("cuda", kind, size,
                                                                          w, nd))
                for kind, size, w, nd in [("select", 4, 4, 4), ("select", 16, 8, 5),
                                          ("select", 13, 1, 4), ("coords", 8, 8, 3)]]
    programs += [kernels.index_program(cuda.DIALECT, kernels.IndexSpec("cuda", mode, size, w,
                                                                       nd, idx, checked))
                 for mode, size, w, nd, idx, checked in [
                     ("gather", 4, 4, 4, ("i8",), True), ("gather", 2, 1, 4, ("u1", "i2"), True),
                     ("scatter", 16, 8, 6, ("u8", "i4", "i8"), False),
                     ("check", 8, 8, 4, ("i1", "u4"), True), ("gather", 8, 8, 4, ("i8",), False)]]
    for text, name, _ in programs:
        image, kind = cuda.compile_image(text, 90)
        assert image and kind == "cubin", name
