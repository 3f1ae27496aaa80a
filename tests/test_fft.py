"""The fft extension (docs/linalg.md, "fft"): every transform against numpy.fft on every
device (lengths powers of two and not, batches along every axis, crop and pad, norms,
dtypes, strided input), bad input refused before anything is allocated, temporaries back
in the pool, the CUDA C of the device kernels through NVRTC, and fftfreq / rfftfreq /
fftshift / ifftshift on every device, bit-exact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuarrays as ga
import gpuarrays.fft as gf
from gpuarrays._compute.device import fft as device_fft


def values(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return v.astype(dtype)


def check(got, want: np.ndarray, device=None) -> None:
    """``got`` against NumPy's ``want``: same shape and dtype; on cpu within 64 ulps (the
    same pocketfft), on devices within 1e-5 (single) / 1e-12 (double) of max|want|."""
    g = got.get()
    assert g.shape == want.shape and g.dtype == want.dtype, (g.shape, want.shape, g.dtype,
                                                            want.dtype)
    eps = np.finfo(want.dtype).eps
    tol = 64 * eps if device is None or device.backend == "cpu" else (
        1e-5 if eps > 1e-10 else 1e-12)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(g, want, rtol=tol, atol=tol * scale)


def precisions(device) -> list[str]:
    return ["32", "64"] if device.supports(np.dtype("float64")) else ["32"]


ONE_AXIS = [("fft", "c"), ("ifft", "c"), ("rfft", "r"), ("irfft", "c"), ("hfft", "c"),
            ("ihfft", "r")]
MANY_AXES = [("fftn", "c"), ("ifftn", "c"), ("rfftn", "r"), ("irfftn", "c")]


def test_transforms_match_numpy(device):
    for precision in precisions(device):
        real = np.dtype(f"float{precision}")
        cplx = np.dtype(f"complex{int(precision) * 2}")
        x = {"r": values((4, 6, 5), real, 1), "c": values((4, 6, 5), cplx, 2)}
        X = {k: ga.asarray(v, device=device) for k, v in x.items()}
        for name, kind in ONE_AXIS:
            for kw in ({}, {"n": 7}, {"n": 1, "axis": 0}, {"axis": 1, "norm": "ortho"},
                       {"norm": "forward", "n": 8}, {"axis": -3, "n": 3},
                       {"axis": -2, "n": 16, "norm": "forward"}):
                check(getattr(gf, name)(X[kind], **kw), getattr(np.fft, name)(x[kind], **kw),
                      device)
            # a strided, transposed view, read in place
            a = x[kind][::-1, :, 1:].swapaxes(0, 2)
            check(getattr(gf, name)(X[kind][::-1, :, 1:].swapaxes(0, 2)),
                  getattr(np.fft, name)(a), device)
        for name, kind in MANY_AXES:
            for kw in ({}, {"axes": (0, 2)}, {"s": (3, 8), "axes": (2, 0)},
                       {"axes": (1,), "norm": "ortho"}, {"s": (-1, 4), "axes": (0, 1)},
                       {"axes": (-1, 0), "norm": "forward"}, {"s": (2, 9)}):
                a = x[kind]
                want_kw = dict(kw)
                if "s" in want_kw:
                    axes = want_kw.get("axes", range(a.ndim - len(want_kw["s"]), a.ndim))
                    want_kw["axes"] = list(axes)
                    want_kw["s"] = [a.shape[ax] if v == -1 else v
                                    for v, ax in zip(want_kw["s"], axes, strict=True)]
                check(getattr(gf, name)(X[kind], **kw), getattr(np.fft, name)(a, **want_kw),
                      device)


SIZES = (1, 2, 3, 5, 8, 16, 17, 64, 100, 127, 1024)


def test_every_length(device):
    """Each function at every length: powers of two (Stockham), short others (the direct
    DFT), long others (Bluestein); a batch of 3 rows, complex64 and complex128."""
    for precision in precisions(device):
        real = np.dtype(f"float{precision}")
        cplx = np.dtype(f"complex{int(precision) * 2}")
        for n in SIZES:
            c, r = values((3, n), cplx, n), values((3, n), real, n + 1)
            half = values((3, n // 2 + 1), cplx, n + 2)
            C, R, H = (ga.asarray(v, device=device) for v in (c, r, half))
            cases = [("fft", C, c, {}), ("ifft", C, c, {}), ("rfft", R, r, {}),
                     ("ihfft", R, r, {}), ("irfft", H, half, {"n": n}),
                     ("hfft", H, half, {"n": n}), ("fftn", C, c, {}),
                     ("ifftn", C, c, {"norm": "ortho"}), ("rfftn", R, r, {}),
                     ("irfftn", H, half, {"s": (3, n), "axes": (0, 1)})]
            if precision == "64" and n not in (3, 17, 100, 1024):
                cases = cases[:2]  # the double kernels are the single ones' text
            for name, arr, host, kw in cases:
                check(getattr(gf, name)(arr, **kw), getattr(np.fft, name)(host, **kw), device)


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_random_shapes_axes_and_lengths_hypothesis(device, data):
    """Random 1-3-d shapes, a reversed or transposed view, any function, axis, length
    (crop or pad) and norm, complex64 / float32 input."""
    shape = tuple(data.draw(st.lists(st.integers(1, 12), min_size=1, max_size=3)))
    name, kind = data.draw(st.sampled_from(ONE_AXIS + MANY_AXES))
    x = values(shape, np.float32 if kind == "r" else np.complex64, len(shape))
    X = ga.asarray(x, device=device)
    if len(shape) > 1 and data.draw(st.booleans()):
        x, X = x.swapaxes(0, -1), X.swapaxes(0, -1)
    if data.draw(st.booleans()):
        x, X = x[::-1], X[::-1]
    norm = data.draw(st.sampled_from(["backward", "ortho", "forward"]))
    kw: dict = {"norm": norm}
    if (name, kind) in ONE_AXIS:
        kw["axis"] = data.draw(st.integers(-x.ndim, x.ndim - 1))
        if data.draw(st.booleans()):
            kw["n"] = data.draw(st.integers(1, 40))
        elif name in ("irfft", "hfft") and x.shape[kw["axis"]] == 1:
            kw["n"] = 1
    else:
        axes = data.draw(st.permutations(range(x.ndim)))[:data.draw(st.integers(1, x.ndim))]
        kw["axes"] = axes
        if data.draw(st.booleans()):
            kw["s"] = [data.draw(st.integers(1, 20)) for _ in axes]
        elif name == "irfftn" and x.shape[axes[-1]] == 1:
            kw["s"] = [x.shape[a] for a in axes[:-1]] + [1]
    check(getattr(gf, name)(X, **kw), getattr(np.fft, name)(x, **kw), device)


def test_both_short_algorithms_and_radix_two(device):
    """The direct DFT and Bluestein each at lengths the threshold gives the other, real
    transforms without the packing of point pairs, and every pass in radix 2, then in
    radix 4 (the radix-8 kernel's fallbacks)."""
    x = values((2, 40), np.complex64, 5)
    X = ga.asarray(x, device=device)
    for limit in (0, 64):
        device_fft.direct_max.append(limit)
        try:
            for n in (3, 7, 20, 40):
                check(gf.fft(X[:, :n]), np.fft.fft(x[:, :n]), device)
                check(gf.irfft(X[:, :n // 2 + 1], n=n), np.fft.irfft(x[:, :n // 2 + 1], n=n),
                      device)
        finally:
            device_fft.direct_max.pop()
    device_fft.packing.append(False)  # real transforms of even length as full complex ones
    try:
        r = values((2, 40), np.float32, 6)
        R = ga.asarray(r, device=device)
        for n in (2, 8, 20, 40):
            for name, arr, host in (("rfft", R, r), ("ihfft", R, r), ("irfft", X, x),
                                    ("hfft", X, x)):
                check(getattr(gf, name)(arr, n=n), getattr(np.fft, name)(host, n=n), device)
    finally:
        device_fft.packing.pop()
    for radix in (2, 4):
        device_fft.override_radix.append(radix)
        try:
            for n in (2, 8, 32):
                check(gf.ifft(X, n=n, norm="ortho"), np.fft.ifft(x, n=n, norm="ortho"), device)
        finally:
            device_fft.override_radix.pop()


def test_large_lengths(device):
    """2^16 points (16 Stockham passes deep in radix 2, 8 in radix 4) and a long
    Bluestein length; accuracy as NumPy's within the tolerance."""
    x = values((1 << 16,), np.complex64, 7)
    check(gf.fft(ga.asarray(x, device=device)), np.fft.fft(x), device)
    r = values((5003,), np.float64 if "64" in precisions(device) else np.float32, 8)
    check(gf.rfft(ga.asarray(r, device=device)), np.fft.rfft(r), device)


def test_dtypes_layouts_and_empty(device):
    i = np.arange(6, dtype=np.int32)
    if device.supports(np.dtype("float64")):
        check(gf.fft(ga.asarray(i, device=device)), np.fft.fft(i), device)  # complex128
    one = values((1,), np.complex64)
    check(gf.fft(ga.asarray(one, device=device)), np.fft.fft(one), device)
    check(gf.irfft(ga.asarray(one, device=device), n=1), np.fft.irfft(one, n=1), device)
    # four axes that do not collapse to two around the transformed one: a device copy first
    x = values((4, 6, 5, 3), np.complex64, 3)
    v = x[::2, :, ::-1, ::2].transpose(3, 1, 0, 2)
    V = ga.asarray(x, device=device)[::2, :, ::-1, ::2].transpose(3, 1, 0, 2)
    check(gf.fft(V, axis=1), np.fft.fft(v, axis=1), device)
    check(gf.fftn(V, axes=(0, 3, 1)), np.fft.fftn(v, axes=(0, 3, 1)), device)
    # a misaligned complex64 view (4-byte aligned): read through the general path
    raw = ga.asarray(np.zeros(2 * 16 + 1, np.float32), device=device)
    z = values((16,), np.complex64, 4)
    mis = raw[1:].view(ga.complex64)
    mis[...] = ga.asarray(z, device=device)
    check(gf.fft(mis), np.fft.fft(z), device)
    check(gf.fft(mis, n=12), np.fft.fft(z, n=12), device)
    e = ga.asarray(np.zeros((0, 4), np.complex64), device=device)
    assert gf.fft(e).shape == (0, 4)
    check(gf.fft(e, axis=0, n=3), np.fft.fft(np.zeros((0, 4), np.complex64), axis=0, n=3),
          device)
    check(gf.irfftn(e, s=(2, 4), axes=(0, 1)),
          np.fft.irfftn(np.zeros((0, 4), np.complex64), s=(2, 4), axes=(0, 1)),
          device)


def test_transforms_refuse_bad_arguments_before_allocating(device):
    x = ga.asarray(values((4, 5), np.complex64), device=device)
    r = ga.asarray(values((4, 5), np.float32), device=device)
    single = ga.asarray(values((1,), np.complex64), device=device)
    cases = [(ValueError, lambda: gf.fft(x, n=0)), (ValueError, lambda: gf.fft(x, norm="x")),
             (TypeError, lambda: gf.rfft(x)), (TypeError, lambda: gf.ihfft(x)),
             (np.exceptions.AxisError, lambda: gf.fft(x, axis=2)),
             (ValueError, lambda: gf.fftn(x, s=(3,), axes=(0, 1))),
             (ValueError, lambda: gf.irfft(single)),
             (ValueError, lambda: gf.irfftn(x, s=(4, 0))),
             (TypeError, lambda: gf.fft(np.ones(4))),
             (TypeError, lambda: gf.fft(r, n=2.5))]
    for error, call in cases:
        with ga.record_allocations() as rec, pytest.raises(error):
            call()
        assert rec.count == 0
    dead = ga.asarray(values((4,), np.complex64), device=device)
    dead.free()
    with pytest.raises(ga.FreedArrayError):
        gf.fft(dead)


def test_temporaries_go_back_to_the_pool(device):
    """Only the result stays allocated: Bluestein's four buffers, the n-d intermediates
    and the copy of a non-collapsible input are freed before the call returns."""
    x = values((3, 4, 5, 6), np.complex64, 9)
    X = ga.asarray(x, device=device)[:, ::2, :, ::-1]
    ga.synchronize(device)
    before = ga.memory_stats(device)["used_bytes"]
    for call in (lambda: gf.fft(X, n=100, axis=1), lambda: gf.rfftn(ga.real(X)),
                 lambda: gf.ifftn(X, axes=(0, 2)), lambda: gf.hfft(X, axis=2)):
        out = call()
        out.free()
        assert ga.memory_stats(device)["used_bytes"] == before


def test_every_transform_runs_on_every_device(device):
    x = values((4, 4), np.complex64)
    r = values((4, 4), np.float32)
    X, R = ga.asarray(x, device=device), ga.asarray(r, device=device)
    assert gf.ON_DEVICES == frozenset(gf.__all__)
    for name, kind in ONE_AXIS + MANY_AXES:
        got = getattr(gf, name)(R if kind == "r" else X)
        assert got.device == device
        check(got, getattr(np.fft, name)(r if kind == "r" else x), device)


def test_device_kernels_compile_with_nvrtc(nvrtc):
    """The CUDA C of every FFT kernel the transforms use: the passes and, for both complex
    types, gathers from every numeric key and stores to complex and real results."""
    from gpuarrays.backends import cuda

    keys = ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]
    specs = []
    for ckey in ("c8", "c16"):
        real = "f4" if ckey == "c8" else "f8"
        specs.append(device_fft.Spec("cuda", "pass", ckey, ckey))
        specs += [device_fft.Spec("cuda", "gather", ckey, k) for k in keys if k != "b1"]
        specs += [device_fft.Spec("cuda", "store", ckey, k) for k in (ckey, real)]
    for spec in specs:
        text, name, types = device_fft.program(cuda.DIALECT, spec)
        image, kind = cuda.compile_image(text, 90)
        assert image and kind == "cubin", spec
        assert f"void {name}(" in text and len(types) == text.split(f"void {name}(")[1].split(
            ")")[0].count(",") + 1


def test_frequencies_on_every_device(device):
    for n in (1, 2, 7, 8):
        for d in (1.0, 0.25):
            got = gf.fftfreq(n, d=d, device=device)
            assert got.device == device
            np.testing.assert_array_equal(got.get(), np.fft.fftfreq(n, d).astype(got.dtype))
            got = gf.rfftfreq(n, d=d, device=device, dtype=ga.float32)
            np.testing.assert_array_equal(got.get(), np.fft.rfftfreq(n, d).astype(np.float32))
    default = gf.fftfreq(4, device=device).dtype
    assert default == (ga.float64 if device.supports(np.dtype("float64")) else ga.float32)
    with pytest.raises(ValueError):
        gf.fftfreq(0, device=device)
    with pytest.raises(TypeError):
        gf.rfftfreq(4, dtype=ga.int32, device=device)


def test_shifts_on_every_device(device):
    x = np.arange(4 * 5 * 3, dtype=np.int16).reshape(4, 5, 3)
    X = ga.asarray(x, device=device)
    for axes in (None, 0, 1, (1, 2), (-1,), (0, 0)):
        for name in ("fftshift", "ifftshift"):
            got = getattr(gf, name)(X, axes=axes)
            assert not ga.shares_memory(got, X)
            np.testing.assert_array_equal(got.get(), getattr(np.fft, name)(x, axes=axes))
    v = X[::-1, 1:, 0]  # a strided view
    np.testing.assert_array_equal(gf.fftshift(v).get(), np.fft.fftshift(x[::-1, 1:, 0]))
    z = ga.asarray(np.zeros((0, 3)), device=device)
    assert gf.ifftshift(z).shape == (0, 3)
    with pytest.raises(np.exceptions.AxisError):
        gf.fftshift(X, axes=3)
