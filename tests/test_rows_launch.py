"""Strided layouts launched by rows (launcher._shaped_plan, generator._rows_index).

A layout of two or more axes in which some array is strided runs one row of the last
axis per run of work-groups.  These tests pin its values against NumPy's for every kind
of layout: rows shorter and longer than a work-group and not a multiple of it, negative,
zero (broadcast) and non-unit last strides, transposes, strided outputs, more axes than
a kernel takes (host loop), complex, float16 and bool, 64-bit indices and fused
functions.  ``ROWS_MIN`` is lowered so that short rows take the path too; the plans made
before are forgotten, so every layout here is planned afresh.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._compute.device import launcher

_SHAPES = [(3, 1), (2, 3), (5, 64), (4, 65), (3, 257), (2, 3, 300), (7, 2, 3, 5, 2, 3, 2, 2, 70)]


@pytest.fixture
def by_rows(monkeypatch):
    """Every strided layout of two or more axes launched by rows while the test runs."""
    monkeypatch.setattr(launcher, "ROWS_MIN", 1)
    launcher.clear()
    yield
    monkeypatch.undo()
    launcher.clear()


def _views(h: np.ndarray, g):
    """Pairs (NumPy view, the same view of ``g``): transposed, reversed, stepped, offset."""
    yield h, g
    yield h.T, g.T
    yield h[..., ::-1], g[..., ::-1]
    if h.shape[-1] > 2:
        yield h[..., 1::2], g[..., 1::2]
        yield h[..., 1:], g[..., 1:]
    if h.shape[0] > 1:
        yield h[::-1], g[::-1]


@pytest.mark.parametrize("shape", _SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_strided_layouts_by_rows_are_numpys(device, by_rows, shape):
    rng = np.random.default_rng(len(shape) * 100 + shape[-1])
    h = rng.standard_normal(shape).astype(np.float32)
    h2 = rng.standard_normal(shape).astype(np.float32)
    g, g2 = ga.asarray(h, device=device), ga.asarray(h2, device=device)
    for (hv, gv), (hw, gw) in zip(_views(h, g), _views(h2, g2), strict=True):
        np.testing.assert_array_equal((gv + gw).get(), hv + hw)
        np.testing.assert_array_equal((gv * 0.5).get(), hv * np.float32(0.5))
        np.testing.assert_array_equal(ga.where(gv > 0, gv, gw).get(), np.where(hv > 0, hv, hw))
        np.testing.assert_array_equal(ga.astype(gv, np.float16).get(), hv.astype(np.float16))
    row_h = np.ascontiguousarray(h.T[(0,) * (len(shape) - 1)])
    row = ga.asarray(row_h, device=device)  # broadcast along the rows
    col = ga.asarray(h[..., :1], device=device)  # broadcast along the last axis: stride 0
    np.testing.assert_array_equal((g.T[..., ::-1] - row).get(), h.T[..., ::-1] - row_h)
    np.testing.assert_array_equal((g[..., ::-1] - col).get(), h[..., ::-1] - h[..., :1])


def test_strided_outputs_and_other_dtypes_by_rows(device, by_rows):
    rng = np.random.default_rng(5)
    h = rng.standard_normal((6, 130)).astype(np.float32)
    out_h = np.zeros((6, 261), np.float32)
    g, out = ga.asarray(h, device=device), ga.asarray(out_h, device=device)
    np.multiply(g[:, ::-1], 3.0, out=out[:, 1::2])
    out_h[:, 1::2] = h[:, ::-1] * np.float32(3)
    np.testing.assert_array_equal(out.get(), out_h)
    for dt in ([np.complex64, np.float16, np.int8, np.bool_]
               + ([np.complex128, np.float64] if device.info.float64 else [])):
        x = (rng.standard_normal((5, 97)) * 50).astype(dt)
        y = (rng.standard_normal((97, 5)) * 50).astype(dt)
        gx, gy = ga.asarray(x, device=device), ga.asarray(y, device=device)
        with np.errstate(all="ignore"):
            want = x[:, ::-1] * y.T if dt is not np.bool_ else x[:, ::-1] & y.T
        got = (gx[:, ::-1] * gy.T if dt is not np.bool_ else gx[:, ::-1] & gy.T).get()
        np.testing.assert_array_equal(got, want, err_msg=str(np.dtype(dt)))


def test_sixty_four_bit_indices_by_rows(device, by_rows, monkeypatch):
    monkeypatch.setattr(launcher, "INDEX32_LIMIT", 0)
    launcher.clear()
    h = np.arange(4 * 100, dtype=np.int64).reshape(4, 100)
    g = ga.asarray(h, device=device)
    np.testing.assert_array_equal((g[::-1, 3:] * g[:, :-3]).get(), h[::-1, 3:] * h[:, :-3])


def test_fused_functions_by_rows(device, by_rows):
    @ga.fuse
    def f(a, b):
        return ga.sqrt(a * a + b * b) - 1.0, a > b

    rng = np.random.default_rng(9)
    h, h2 = (rng.standard_normal((9, 150)).astype(np.float32) for _ in range(2))
    g, g2 = ga.asarray(h, device=device), ga.asarray(h2, device=device)
    r, m = f(g[1:, ::-1], g2[1:])
    hv = h[1:, ::-1]
    want = np.sqrt(hv * hv + h2[1:] * h2[1:]) - np.float32(1)
    np.testing.assert_allclose(r.get(), want, rtol=2e-7)
    np.testing.assert_array_equal(m.get(), hv > h2[1:])


@pytest.mark.parametrize("spec", [str(d) for d in ga.devices()
                                  if d.backend != "cpu" and d.index == 0])
def test_long_strided_rows_take_the_rows_launch(spec):
    """Without lowering ROWS_MIN, on each device back-end (the cpu one runs NumPy's loops):
    a slice of a 2-d array with rows of 256 runs by rows, addressing the unit-stride
    operand along a row by a constant."""
    device = ga.get_device(spec)
    h = np.arange(300 * 300, dtype=np.float32).reshape(300, 300)
    g = ga.asarray(h, device=device)
    np.testing.assert_array_equal((g[1:-1, 2:258] + g[2:, :256]).get(),
                                  h[1:-1, 2:258] + h[2:, :256])
    planned = [sig for (dev, sig) in list(launcher._kernels) if dev == device
               and getattr(sig, "op", None) == "add" and sig.rows and sig.ndim == 2]
    assert planned and any(sig.unit_rows for sig in planned)
    source = ga.fuse(lambda a, b: a + b).source(g[1:-1, 2:258], g[2:, :256])
    assert "GROUP_ID" in source and "ix * 4;" in source


@pytest.mark.parametrize("rows_min", [1, 64])
def test_slice_assignments_by_rows_are_numpys(device, monkeypatch, rows_min):
    """Same-dtype copies between views whose last strides are the item size run the
    back-ends' copy_rows (backends/_kernels.py): rows of every length from 1, reversed and
    offset outer axes, every item size."""
    from gpuarrays.backends import _kernels

    monkeypatch.setattr(_kernels, "ROWS_MIN", rows_min)
    rng = np.random.default_rng(rows_min)
    for dt in (np.int8, np.float16, np.float32, np.int64, np.complex64, np.bool_):
        for shape in ((3, 1), (4, 3, 2), (2, 5, 65), (6, 300)):
            h = (rng.standard_normal(shape) * 20).astype(dt)
            g = ga.asarray(h, device=device)
            target = np.zeros((shape[0] + 1, *shape[1:-1], shape[-1] + 3), dt)
            t = ga.asarray(target, device=device)
            t[:0:-1, ..., 2:-1] = g
            target[:0:-1, ..., 2:-1] = h
            np.testing.assert_array_equal(t.get(), target, err_msg=f"{np.dtype(dt)} {shape}")
            np.testing.assert_array_equal(g[::-1, ..., 1:].copy().get(), h[::-1, ..., 1:])
