"""The fft extension (docs/linalg.md, "fft"): every transform against numpy.fft on cpu
(lengths, axes, norms, strided input, dtypes), NotImplementedError naming the device
elsewhere (nothing allocated), and fftfreq / rfftfreq / fftshift / ifftshift on every
device, bit-exact."""

from __future__ import annotations

import numpy as np
import pytest

import gpuarrays as ga
import gpuarrays.fft as gf


def values(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return v.astype(dtype)


def check(got, want: np.ndarray) -> None:
    g = got.get()
    assert g.shape == want.shape and g.dtype == want.dtype, (g.shape, want.shape, g.dtype,
                                                            want.dtype)
    eps = np.finfo(want.dtype).eps
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(g, want, rtol=64 * eps, atol=64 * eps * scale)


ONE_AXIS = [("fft", "c"), ("ifft", "c"), ("rfft", "r"), ("irfft", "c"), ("hfft", "c"),
            ("ihfft", "r")]
MANY_AXES = [("fftn", "c"), ("ifftn", "c"), ("rfftn", "r"), ("irfftn", "c")]


@pytest.mark.parametrize("precision", ["32", "64"])
def test_transforms_match_numpy_on_cpu(precision):
    real = np.dtype(f"float{precision}")
    cplx = np.dtype(f"complex{int(precision) * 2}")
    x = {"r": values((4, 6, 5), real, 1), "c": values((4, 6, 5), cplx, 2)}
    for name, kind in ONE_AXIS:
        for kw in ({}, {"n": 7}, {"n": 1, "axis": 0}, {"axis": 1, "norm": "ortho"},
                   {"norm": "forward", "n": 8}):
            a = x[kind]
            check(getattr(gf, name)(ga.asarray(a), **kw), getattr(np.fft, name)(a, **kw))
        # a strided, transposed view, read in place
        a = x[kind][::-1, :, 1:].swapaxes(0, 2)
        check(getattr(gf, name)(ga.asarray(x[kind])[::-1, :, 1:].swapaxes(0, 2)),
              getattr(np.fft, name)(a))
    for name, kind in MANY_AXES:
        for kw in ({}, {"axes": (0, 2)}, {"s": (3, 8), "axes": (2, 0)},
                   {"axes": (1,), "norm": "ortho"}, {"s": (-1, 4), "axes": (0, 1)}):
            a = x[kind]
            want_kw = dict(kw)
            if "s" in want_kw:
                want_kw["s"] = [a.shape[ax] if v == -1 else v
                                for v, ax in zip(want_kw["s"], want_kw["axes"], strict=True)]
            check(getattr(gf, name)(ga.asarray(a), **kw), getattr(np.fft, name)(a, **want_kw))


def test_transform_dtypes_and_size_one():
    i = np.arange(6, dtype=np.int32)
    check(gf.fft(ga.asarray(i)), np.fft.fft(i))
    one = values((1,), np.complex64)
    check(gf.fft(ga.asarray(one)), np.fft.fft(one))
    check(gf.irfft(ga.asarray(one), n=1), np.fft.irfft(one, n=1))


def test_transforms_refuse_bad_arguments_before_allocating():
    x = ga.asarray(values((4, 5), np.complex64))
    r = ga.asarray(values((4, 5), np.float32))
    single = ga.asarray(values((1,), np.complex64))
    cases = [(ValueError, lambda: gf.fft(x, n=0)), (ValueError, lambda: gf.fft(x, norm="x")),
             (TypeError, lambda: gf.rfft(x)), (TypeError, lambda: gf.ihfft(x)),
             (np.exceptions.AxisError, lambda: gf.fft(x, axis=2)),
             (ValueError, lambda: gf.fftn(x, s=(3,), axes=(0, 1))),
             (ValueError, lambda: gf.irfft(single)),
             (TypeError, lambda: gf.fft(np.ones(4))),
             (TypeError, lambda: gf.fft(r, n=2.5))]
    for error, call in cases:
        with ga.record_allocations() as rec, pytest.raises(error):
            call()
        assert rec.count == 0


def test_transforms_run_on_cpu_and_raise_naming_any_other_device(device):
    x = values((4, 4), np.complex64)
    r = values((4, 4), np.float32)
    X, R = ga.asarray(x, device=device), ga.asarray(r, device=device)
    for name, kind in ONE_AXIS + MANY_AXES:
        if device.backend == "cpu":
            check(getattr(gf, name)(R if kind == "r" else X),
                  getattr(np.fft, name)(r if kind == "r" else x))
            continue
        with ga.record_allocations() as rec, pytest.raises(
                NotImplementedError, match=f"fft.{name} is not implemented on {device}"):
            getattr(gf, name)(R if kind == "r" else X)
        assert rec.count == 0


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
