"""``astype`` between every pair of the real dtypes and bool (and float16 to complex), NumPy
as the oracle, on every device (docs/performance.md, "Conversions"; issue 32, item 4).

Each pair is converted in the three layouts the back-ends launch differently: a dense array
whose length is a multiple of 256 (on OpenCL whole work-groups cover it), a dense array of
another length, and a strided view.  float16 sources are every one of the 65536 bit
patterns: NaNs with their payloads (signalling ones too), infinities, -0.0 and subnormals.
Float results are compared bit for bit (a NaN's payload included); integer results are
compared where NumPy's result is defined on x86-64: every finite float16 (all are within
int32, whose truncation NumPy's narrow casts go through), and float32/float64 values inside
the destination's range.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from strategies import supported

import gpuarrays as ga

REAL = [np.dtype(t) for t in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                              "int64", "uint64", "float16", "float32", "float64")]
F16_BITS = np.arange(65536, dtype=np.uint16).view(np.float16)


def _f16_to_double_exact(device) -> bool:
    """Whether the device's conversion kernels take float16 straight to double
    (``half_to_double``).  Until they do, OpenCL and CUDA go through float32 and quiet a
    signalling NaN (0x7c01 becomes 0x7ff8040000000000 where NumPy keeps
    0x7ff0040000000000): those pairs are expected to fail (docs/performance.md,
    "Conversions")."""
    if device.backend == "cpu":
        return True
    from gpuarrays.backends import _kernels

    return "half_to_double" in _kernels._convert_kernel(device.impl.dialect, "f2", "f8")


def _values(src: np.dtype) -> np.ndarray:
    """The source values of a pair (before the destination's range is applied)."""
    rng = np.random.default_rng(5)
    if src == np.float16:
        return F16_BITS
    if src.kind == "b":
        return rng.random(3000) > 0.5
    if src.kind in "iu":
        info = np.iinfo(src)
        edges = [int(info.min), int(info.max), int(info.min) + 1, int(info.max) - 1, 0, 1, 99,
                 127, 128, 255, 256, 32767, 32768, 65535, 65536, -1, -128, -129]
        edges = np.array([v for v in edges if info.min <= v <= info.max], src)
        return np.concatenate([edges, rng.integers(info.min, info.max, 4000, dtype=src,
                                                   endpoint=True)])
    uint = np.dtype(f"u{src.itemsize}")
    specials = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 99.99, 127.5, 128.0,
                         -128.5, -129.0, 255.9, 256.0, 32767.9, -32768.9, 65535.5, 65536.0,
                         2.0**31 - 128, -(2.0**31), 2.0**32 - 256, 2.0**62, -(2.0**63),
                         np.inf, -np.inf, np.finfo(src).max, np.finfo(src).tiny,
                         np.finfo(src).smallest_subnormal, -np.finfo(src).smallest_subnormal,
                         6e-8, 65504.0, 65520.0], src)
    nan_bits = {4: [0x7FC00000, 0x7F800001, 0x7FA00000, 0xFFC00001, 0x7FFFFFFF],
                8: [0x7FF8000000000000, 0x7FF0000000000001, 0x7FF4000000000000,
                    0xFFF8000000000001, 0x7FFFFFFFFFFFFFFF]}[src.itemsize]
    nans = np.array(nan_bits, uint).view(src)
    spread = (rng.standard_normal(4000) * np.array([1, 1e2, 1e5, 1e9])[rng.integers(0, 4, 4000)])
    return np.concatenate([specials, nans, spread.astype(src)])


def _defined(h: np.ndarray, dst: np.dtype) -> np.ndarray:
    """The source values whose conversion to ``dst`` NumPy defines on x86-64 (see above)."""
    if h.dtype.kind != "f" or dst.kind not in "iu":
        return h
    if h.dtype == np.float16:
        return h[np.isfinite(h)]
    lo, hi = (np.iinfo(dst).min, np.iinfo(dst).max) if dst.itemsize < 8 else (
        (-(2.0**63), 2.0**63 - 2.0**11) if dst.kind == "i" else (0.0, 2.0**64 - 2.0**12))
    with np.errstate(invalid="ignore"):
        return h[(h >= lo) & (h <= hi)]


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype, what
    if want.dtype.kind in "fc":  # bit for bit, NaN payloads included
        width = want.dtype.itemsize // (2 if want.dtype.kind == "c" else 1)
        g, w = got.view(f"u{width}"), want.view(f"u{width}")
        bad = np.nonzero(g != w)[0]
        assert not bad.size, (what, [hex(int(x)) for x in g[bad[:4]]],
                              [hex(int(x)) for x in w[bad[:4]]])
    else:
        bad = np.nonzero(got != want)[0]
        assert not bad.size, (what, bad[:4], got[bad[:4]], want[bad[:4]])


def _check(device, src: np.dtype, dst: np.dtype) -> None:
    h = _defined(_values(src), dst)
    dense = np.resize(h, max(256, -(-h.size // 256) * 256))  # whole groups of 256
    odd = dense[: dense.size - 37]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy's invalid-cast and ComplexWarning warnings
        with np.errstate(all="ignore"):
            for name, host in (("dense", dense), ("odd length", odd)):
                _same(ga.asarray(host, device=device).astype(dst).get(), host.astype(dst),
                      f"{src} -> {dst}, {name}")
            a = ga.asarray(dense, device=device)
            _same(a[1::3].astype(dst).get(), dense[1::3].astype(dst), f"{src} -> {dst}, strided")


@pytest.mark.parametrize("src", REAL, ids=str)
def test_astype_every_pair(device, src):
    """Every destination of one source dtype, in three layouts."""
    if not device.supports(src):
        pytest.skip(f"{device} has no {src}")
    for dst in supported(device, REAL):
        if dst != src and not (src == np.float16 and dst == np.float64
                               and not _f16_to_double_exact(device)):
            _check(device, src, dst)  # float16 -> float64 without it: the test below


def test_astype_float16_to_complex(device):
    """float16 to complex64 and complex128: every bit pattern, the real part bit for bit
    (a signalling NaN stays one in complex128 as in NumPy)."""
    for dst in supported(device, [np.dtype("complex64"), np.dtype("complex128")]):
        if dst == np.complex128 and not _f16_to_double_exact(device):
            pytest.xfail("float16 -> complex128 goes through float32 (signalling NaNs quieted)")
        _check(device, np.dtype(np.float16), dst)


def test_astype_float16_signalling_nan_to_float64(device):
    """NumPy converts float16 to float64 bit by bit (``npy_halfbits_to_doublebits``): a
    signalling NaN stays signalling with its payload; through float32 it would be quieted."""
    if not device.supports(np.float64):
        pytest.skip(f"{device} has no float64")
    if not _f16_to_double_exact(device):
        pytest.xfail("float16 -> float64 goes through float32 (signalling NaNs quieted)")
    h = np.array([0x7C01, 0x7D00, 0xFC01, 0x7DFF, 0x7E00, 0x7C00, 0x0001, 0x8000],
                 np.uint16).view(np.float16)
    got = ga.asarray(np.resize(h, 256), device=device).astype(np.float64).get()
    want = np.resize(h, 256).astype(np.float64)
    assert [hex(int(x)) for x in got.view(np.uint64)[:8]] == \
           [hex(int(x)) for x in want.view(np.uint64)[:8]]


def test_bench_pairs_narrowed_by_the_environment(monkeypatch):
    """``GPUARRAYS_BENCH_ASTYPE_PAIRS`` keeps the benchmark's pairs it names (``*``: any)."""
    from gpuarrays.cli import bench_astype

    class NoFloat64:
        def supports(self, key):
            return key != "f8"

    dev = NoFloat64()
    monkeypatch.delenv("GPUARRAYS_BENCH_ASTYPE_PAIRS", raising=False)
    assert len(bench_astype._pairs(dev, True)) == 11 * 10
    monkeypatch.setenv("GPUARRAYS_BENCH_ASTYPE_PAIRS", "f2:*, b1:i1,u1:f8")
    pairs = bench_astype._pairs(dev, True)
    assert pairs[0] == ("b1", "i1") and len(pairs) == 1 + 10
    assert all(s == "f2" for s, _ in pairs[1:]) and ("u1", "f8") not in pairs
    assert bench_astype._pairs(dev, False) == [("f2", "f4")]
    monkeypatch.setenv("GPUARRAYS_BENCH_ASTYPE_PAIRS", "f2")
    with pytest.raises(ValueError, match="src:dst"):
        bench_astype._pairs(dev, True)


def test_float16_operand_computed_in_float64_keeps_signalling_nans(device):
    """A float16 operand of a float64 computation (``where`` mixing the two) reaches double
    bit by bit as NumPy's cast does, where the dialect converts straight to double."""
    if not device.supports(np.float64):
        pytest.skip(f"{device} has no float64")
    if device.backend != "cpu":
        from gpuarrays._compute.device import generator

        if not generator._has_half_to_double(device.impl.dialect):
            pytest.xfail("no half_to_double in the dialect: float16 goes through float32")
    h = np.resize(np.array([0x7C01, 0xFD00, 0x7E00, 0x3C00, 0x0001], np.uint16).view(np.float16),
                  300)
    m = np.arange(300) % 3 != 0
    d = np.linspace(-1, 1, 300)
    got = ga.where(ga.asarray(m, device=device), ga.asarray(h, device=device),
                   ga.asarray(d, device=device)).get()
    want = np.where(m, h, d)
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
