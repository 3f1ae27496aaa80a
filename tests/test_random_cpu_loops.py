"""The cpu engine's lane-group loops give the scalar kernels' bits.

The subject of docs/random.md, "The cpu engine".  cpu:0 computes the whole lane groups of the
floating kernels with loops that gcc vectorizes, compiled for x86-64-v4, x86-64-v3 and the
baseline and picked at run time; the scalar kernel (the same statements the OpenCL and CUDA
kernels run) does the blocks around them.  ``gpuarrays._rng.use_isa`` chooses the code, so every
choice this CPU runs is compared here with the scalar kernel alone, bit for bit, at sizes, starts
and counters around the loops' edges (a lane group, a chunk of ``kernels.C_CHUNK`` blocks, the
counter's 32- and 64-bit wrap).  tests/test_random.py holds the default choice to the NumPy
reference and to the other back-ends.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays import _rng
from gpuarrays._compute.rng import kernels

_ISAS = ("scalar", "baseline", "x86-64-v3", "x86-64-v4")
# (kernel, dtype, outputs per block, parameters)
_KERNELS = [("rng_uniform_f32", np.float32, 4, (-1.5, 4.25)),
            ("rng_normal_f32", np.float32, 4, (0.5, 2.0)),
            ("rng_exponential_f32", np.float32, 4, (1.75,)),
            ("rng_uniform_f64", np.float64, 2, (-1.5, 4.25)),
            ("rng_normal_f64", np.float64, 2, (0.5, 2.0)),
            ("rng_exponential_f64", np.float64, 2, (1.75,))]
_CHUNK_GROUPS = kernels.C_CHUNK // 8


def _runnable() -> list[str]:
    """The choices this CPU runs, "scalar" first (use_isa refuses the others)."""
    names = []
    previous = _rng.use_isa("best")
    try:
        for name in _ISAS:
            try:
                _rng.use_isa(name)
            except ValueError:
                break
            names.append(name)
    finally:
        _rng.use_isa(previous)
    return names


@pytest.fixture
def isa():
    """Restores the default choice after the test, whatever it set."""
    yield _rng.use_isa
    _rng.use_isa("best")


def _launch(name, dt, e, params, n, start, off, shift):
    buf = np.full(n + 2, np.nan, dt)  # shift 1: an output not aligned to its vector width
    out = buf[shift:shift + n]
    items = -(-n // (8 * e)) * 8 - start
    if items > 0:
        _rng.launch(name, (out.ctypes.data, n, 0x243F6A88, 0x85A308D3, off, start, *params),
                    items)
    return buf


def test_isa_reports_and_switches_the_code(isa):
    names = _runnable()
    assert names[:2] == ["scalar", "baseline"]
    best = names[-1]
    assert _rng.isa() == best
    assert isa("scalar") == "best" and _rng.isa() == "scalar"
    assert isa(best) == "scalar" and _rng.isa() == best
    with pytest.raises(ValueError, match="not one this CPU runs"):
        isa("avx9000")
    assert _rng.isa() == best  # a refused name changes nothing
    assert isa("best") == best and _rng.isa() == best


@pytest.mark.parametrize("name,dt,e,params", _KERNELS, ids=[k[0] for k in _KERNELS])
def test_every_isa_gives_the_scalar_kernels_bits(isa, name, dt, e, params):
    group = 8 * e  # elements of a lane group
    chunk = _CHUNK_GROUPS * group
    sizes = [1, group - 1, group, group + 1, 5 * group + 3, chunk - 1, chunk + group,
             3 * chunk + 2 * group + 5]
    cases = [(n, start, off, shift) for n in sizes for start in (0, 8, 5, 8 * _CHUNK_GROUPS + 3)
             for off in (0, 2**32 - 8 * _CHUNK_GROUPS - 4, 2**64 - 24) for shift in (0, 1)]
    isa("scalar")
    want = [_launch(name, dt, e, params, *c) for c in cases]
    for choice in _runnable()[1:]:
        isa(choice)
        for c, w in zip(cases, want, strict=True):
            got = _launch(name, dt, e, params, *c)
            assert got.tobytes() == w.tobytes(), (choice, c)


@pytest.mark.parametrize("dtype", [ga.float32, ga.float64])
def test_every_isa_gives_the_same_public_streams(isa, dtype):
    """Through gpuarrays.random: a sequence of calls of every floating method, 1 M elements
    and odd sizes, the same bits with every choice."""
    def draw():
        rng = ga.random.default_rng(20261204, device="cpu:0")
        return [rng.standard_normal(1 << 20, dtype=dtype).get(),
                rng.random(3001, dtype=dtype).get(),
                rng.normal(-2.0, 3.0, 70001, dtype=dtype).get(),
                rng.uniform(1.0, 9.0, 1 << 16, dtype=dtype).get(),
                rng.exponential(0.5, 12345, dtype=dtype).get()]
    isa("scalar")
    want = draw()
    for choice in _runnable()[1:]:
        isa(choice)
        for got, w in zip(draw(), want, strict=True):
            assert got.tobytes() == w.tobytes(), choice
