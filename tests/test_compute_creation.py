"""Creation functions on every device, NumPy as the oracle (docs/manipulation.md, "Creation").

The standard's signatures (positional-only and keyword-only markers), default dtypes per
device, eye/tril/triu through the index-aware kernels (every dtype; the CUDA C of every kernel
compiles with NVRTC), linspace/arange/meshgrid, and bad input refused before allocating.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import NUMERIC_DTYPES, SETTINGS, same_values, supported, values

import gpuarrays as ga
from gpuarrays._memory.devices import Device
from gpuarrays.backends.cpu import CpuBackend

FEW = settings(SETTINGS, max_examples=10)
P, K, V = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.KEYWORD_ONLY,
           inspect.Parameter.VAR_POSITIONAL)
PK = inspect.Parameter.POSITIONAL_OR_KEYWORD

# name -> the standard's parameters (name, kind); keyword-only ones may also be
# positional-or-keyword (NumPy's ``zeros(shape, dtype)``), as the conformance suite allows
SIGNATURES = {
    "arange": [("start", P), ("stop", PK), ("step", PK), ("dtype", K), ("device", K)],
    "empty_like": [("x", P), ("dtype", K), ("device", K)],
    "eye": [("n_rows", P), ("n_cols", P), ("k", K), ("dtype", K), ("device", K)],
    "from_dlpack": [("x", P), ("device", K), ("copy", K)],
    "full": [("shape", PK), ("fill_value", PK), ("dtype", K), ("device", K)],
    "full_like": [("x", P), ("fill_value", PK), ("dtype", K), ("device", K)],
    "linspace": [("start", P), ("stop", P), ("num", PK), ("dtype", K), ("device", K),
                 ("endpoint", K)],
    "meshgrid": [("arrays", V), ("indexing", K)],
    "ones": [("shape", PK), ("dtype", K), ("device", K)],
    "ones_like": [("x", P), ("dtype", K), ("device", K)],
    "tril": [("x", P), ("k", K)],
    "triu": [("x", P), ("k", K)],
    "zeros": [("shape", PK), ("dtype", K), ("device", K)],
    "zeros_like": [("x", P), ("dtype", K), ("device", K)],
    "broadcast_arrays": [("arrays", V)],
    "broadcast_to": [("x", P), ("shape", PK)],
    "concat": [("arrays", P), ("axis", K)],
    "expand_dims": [("x", P), ("axis", PK)],
    "flip": [("x", P), ("axis", K)],
    "moveaxis": [("x", P), ("source", P), ("destination", P)],
    "permute_dims": [("x", P), ("axes", PK)],
    "repeat": [("x", P), ("repeats", P), ("axis", K)],
    "reshape": [("x", P), ("shape", PK), ("copy", K)],
    "roll": [("x", P), ("shift", PK), ("axis", K)],
    "squeeze": [("x", P), ("axis", PK)],
    "stack": [("arrays", P), ("axis", K)],
    "tile": [("x", P), ("repetitions", P)],
    "unstack": [("x", P), ("axis", K)],
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signatures_follow_the_standard(name):
    params = list(inspect.signature(getattr(ga, name)).parameters.values())
    for i, (pname, kind) in enumerate(SIGNATURES[name]):
        if kind == K:
            p = next((q for q in params if q.name == pname), None)
            assert p is not None and p.kind in (K, PK), (name, pname)
        else:
            assert params[i].kind == kind, (name, pname, params[i].kind)
            if kind != P:
                assert params[i].name == pname, (name, pname)


def test_empty_signature_and_default_dtype(device):
    defaults = ga.__array_namespace_info__().default_dtypes(device=device)
    f = defaults["real floating"]
    for a in (ga.empty(3, device=device), ga.empty((2, 3), dtype=None, device=device),
              ga.zeros(2, device=device), ga.ones((), device=device),
              ga.full(2, 1.5, device=device), ga.eye(2, device=device),
              ga.linspace(0, 1, 3, device=device), ga.arange(0.5, 3, device=device),
              ga.arange(1, 4, 0.5, device=device)):
        assert a.dtype == f
        assert a.device == device
    assert ga.full(2, 1, device=device).dtype == defaults["integral"]
    assert ga.arange(5, device=device).dtype == defaults["integral"]
    assert ga.full(2, True, device=device).dtype == ga.bool
    assert ga.full(2, 1j, device=device).dtype == defaults["complex floating"]
    assert ga.linspace(0, 1j, 3, device=device).dtype == defaults["complex floating"]


class _NoFloat64(CpuBackend):
    """The cpu back-end reporting a device without float64 (as some OpenCL devices are)."""

    def device_info(self, index):
        return dataclasses.replace(super().device_info(index), float64=False)


def test_defaults_on_a_device_without_float64():
    dev = Device("cpu", 7, _NoFloat64())
    assert ga.__array_namespace_info__().default_dtypes(device=dev)["real floating"] == ga.float32
    for a in (ga.empty(3, device=dev), ga.zeros(2, device=dev), ga.ones((2, 2), device=dev),
              ga.full(2, 1.5, device=dev), ga.eye(2, device=dev), ga.arange(0.5, 2, device=dev),
              ga.linspace(0, 1, 3, device=dev), ga.full(2, np.float64(2.5), device=dev)):
        assert a.dtype == ga.float32 and a.device == dev
    assert ga.full(2, 1j, device=dev).dtype == ga.complex64
    assert ga.linspace(0, 1j, 3, device=dev).dtype == ga.complex64
    assert ga.arange(3, device=dev).dtype == ga.int64
    same_values(ga.linspace(0, 1, 5, device=dev).get(), np.linspace(0, 1, 5).astype(np.float32))
    mixed = ga.concat([ga.arange(2, device=dev), ga.zeros(2, device=dev)])
    assert mixed.dtype == ga.float32  # int64 with float32, as the elementwise functions
    with pytest.raises(ga.UnsupportedDTypeError, match="float64"):
        ga.zeros(2, dtype=ga.float64, device=dev)


def test_fill_functions_match_numpy(device):
    for dt in supported(device, NUMERIC_DTYPES):
        same_values(ga.zeros((2, 3), dtype=dt, device=device).get(), np.zeros((2, 3), dt))
        same_values(ga.ones(4, dt, device=device).get(), np.ones(4, dt))
        same_values(ga.full((3,), 1, dtype=dt, device=device).get(), np.full(3, 1, dt))
        x = ga.asarray(values((2, 5), dt), device=device)[:, ::2]
        for fn, want in ((ga.zeros_like, np.zeros((2, 3), dt)),
                         (ga.ones_like, np.ones((2, 3), dt))):
            r = fn(x)
            same_values(r.get(), want)
            assert r.storage is not x.storage
        same_values(ga.full_like(x, 1).get(), np.full((2, 3), 1, dt))
        e = ga.empty_like(x, dtype=ga.int8)
        assert (e.shape, e.dtype, e.device) == ((2, 3), np.dtype("int8"), device)
    x = ga.zeros((2, 2), device=device)
    assert ga.zeros_like(x, device="cpu:0").device == ga.get_device("cpu:0")


def test_arange_and_linspace_match_numpy(device):
    f = ga.__array_namespace_info__().default_dtypes(device=device)["real floating"]
    for args in [(5,), (2, 9), (9, 2, -2), (0, 1, 0.25), (-3.5, 2.0), (3, 3)]:
        same_values(ga.arange(*args, device=device).get(),
                    np.arange(*args, dtype=np.int64 if all(type(a) is int for a in args)
                              else f))
    same_values(ga.arange(1, 10, 3, dtype=ga.int16, device=device).get(),
                np.arange(1, 10, 3, dtype=np.int16))
    for start, stop, num, endpoint in [(0, 1, 5, True), (2.5, -1, 7, False), (0, 1, 0, True),
                                       (3, 3, 1, True), (-1e3, 1e3, 11, True)]:
        same_values(ga.linspace(start, stop, num, device=device, endpoint=endpoint).get(),
                    np.linspace(start, stop, num, endpoint=endpoint).astype(f))
    same_values(ga.linspace(0, 10, 6, dtype=ga.float32, device=device).get(),
                np.linspace(0, 10, 6).astype(np.float32))


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid_matches_numpy(device, indexing):
    xs = [values((n,), np.dtype(dt), n) for n, dt in ((3, "int32"), (4, "float32"), (2, "uint8"))]
    gs = [ga.asarray(x, device=device)[::-1] for x in xs]
    xs = [x[::-1] for x in xs]
    for k in (1, 2, 3):
        got = ga.meshgrid(*gs[:k], indexing=indexing)
        want = np.meshgrid(*xs[:k], indexing=indexing)
        assert isinstance(got, tuple) and len(got) == k
        for g, w in zip(got, want, strict=True):
            same_values(g.get(), w)
            assert g.flags.writeable
    assert ga.meshgrid() == ()


def test_eye_matches_numpy(device):
    for dt in supported(device, NUMERIC_DTYPES):
        for shape, k in [((3,), 0), ((3, 5), 1), ((5, 3), -2), ((4, 4), 9), ((2, 3), -9),
                         ((0, 3), 0)]:
            same_values(ga.eye(*shape, k=k, dtype=dt, device=device).get(),
                        np.eye(*shape, k=k, dtype=dt))


def test_tril_triu_every_dtype(device):
    for dt in supported(device, NUMERIC_DTYPES):
        h = values((3, 4, 5), dt)
        x = ga.asarray(h, device=device)
        for k in (0, 2, -1):
            same_values(ga.tril(x, k=k).get(), np.tril(h, k))
            same_values(ga.triu(x, k=k).get(), np.triu(h, k))


@pytest.mark.parametrize("layout", ["offset", "negative", "transposed", "batch-strided"])
def test_tril_triu_strided_inputs(device, layout):
    h = values((4, 5, 6, 7), np.dtype("float32"))
    view = {"offset": lambda v: v[1:, 2:, 1:],
            "negative": lambda v: v[::-1, :, ::-2, ::-1],
            "transposed": lambda v: v.transpose(3, 0, 2, 1),
            "batch-strided": lambda v: v[::2, ::-2]}[layout]
    x, g = view(h), view(ga.asarray(h, device=device))
    for k in (-2, 0, 3, 100, -100):
        r = ga.tril(g, k=k)
        same_values(r.get(), np.tril(x, k))
        assert r.storage is not g.storage and r.flags.c_contiguous
        same_values(ga.triu(g, k=k).get(), np.triu(x, k))
    same_values(ga.tril(g[:, :, :0]).get(), np.tril(x[:, :, :0]))


@FEW
@given(shape=st.lists(st.integers(0, 5), min_size=2, max_size=4).map(tuple),
       k=st.integers(-6, 6))
def test_hypothesis_tril_triu(device, shape, k):
    h = values(shape, np.dtype("int32"), 3)
    g = ga.asarray(h, device=device)
    same_values(ga.tril(g, k=k).get(), np.tril(h, k))
    same_values(ga.triu(g, k=k).get(), np.triu(h, k))


def test_bad_input_raises_before_allocating(device, used):
    x = ga.zeros((3, 4), device=device)
    cases = [
        (lambda: ga.tril(x[0]), ValueError, "2 dimensions"),
        (lambda: ga.triu(x, k=1.5), TypeError, "k must be an int"),
        (lambda: ga.tril(np.zeros((2, 2))), TypeError, "gpuarrays array"),
        (lambda: ga.eye(-1, device=device), ValueError, ">= 0"),
        (lambda: ga.eye(2.0, device=device), TypeError, "n_rows"),
        (lambda: ga.linspace(0, 1, -1, device=device), ValueError, "num"),
        (lambda: ga.linspace(0, 1, 2.5, device=device), TypeError, "num"),
        (lambda: ga.arange(0, 5, 0, device=device), ValueError, "step"),
        (lambda: ga.arange(x, device=device), TypeError, "start"),
        (lambda: ga.full(2, 300, dtype=ga.int8, device=device), OverflowError, "300"),
        (lambda: ga.full_like(x, 2**64, dtype=ga.int64), OverflowError, "out of bounds"),
        (lambda: ga.full(2, "a", device=device), TypeError, "fill_value"),
        (lambda: ga.meshgrid(x, indexing="xy"), ValueError, "1-d"),
        (lambda: ga.meshgrid(x[0], indexing="yx"), ValueError, "indexing"),
        (lambda: ga.zeros_like(np.zeros(2)), TypeError, "gpuarrays array"),
    ]
    for call, err, _ in cases:
        with pytest.raises(err):
            call()
    before = used()
    for call, err, part in cases:
        with pytest.raises(err, match=part):
            call()
        assert used() == before


def test_freed_arrays_raise(device):
    x = ga.zeros((3, 4), device=device)
    x.free()
    for call in (lambda: ga.tril(x), lambda: ga.triu(x), lambda: ga.meshgrid(x[0]),
                 lambda: ga.from_dlpack(x)):
        with pytest.raises(ga.FreedArrayError):
            call()


def test_from_dlpack_keywords(device):
    h = np.arange(6.0)
    a = ga.from_dlpack(h)
    same_values(a.get(), h)
    b = ga.from_dlpack(h, device=device, copy=True)
    assert b.device == device
    same_values(b.get(), h)


# CUDA: the index-aware kernels compile with NVRTC ----------------------------------------------
def test_index_aware_kernels_compile_with_nvrtc(nvrtc):
    from gpuarrays._compute.device import indexed
    from gpuarrays.backends import cuda

    keys = ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]
    # every dtype through tril (unaligned, batched) and repeat (unaligned); the other
    # shapes of the description on a few dtypes (each compile costs ~0.2 s)
    cases = [("tril", k, 2, False) for k in keys] + [
        ("triu", k, b, a) for k in ("f2", "c16", "b1") for b, a in ((0, True), (1, True))] + [
        ("eye", k, 0, True) for k in ("f2", "c8", "b1", "u8")]
    for op, key, nbatch, aligned in cases:
        inp = "" if indexed.MATRIX[op].value == "1" else key
        spec = indexed.MatrixSpec("cuda", op, inp, key, nbatch, aligned)
        text, _, _ = indexed.matrix_program(cuda.DIALECT, spec)
        image, kind = cuda.compile_image(text, 90)
        assert image and kind == "cubin", (op, key)
    for key in keys:
        text, _, _ = indexed.repeat_program(cuda.DIALECT, indexed.RepeatSpec("cuda", key, False))
        image, kind = cuda.compile_image(text, 90)
        assert image and kind == "cubin", ("repeat", key)
