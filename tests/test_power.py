"""Scalar exponents (docs/compute.md, "Scalar exponents"): ``x ** s``, ``ga.pow(x, s)`` and
``np.power(x, s)`` with a Python int or float ``s`` on every device.

The exponent's value picks a cheaper row than ``pow`` (``table.scalar_power``): ``x ** 2``
squares, ``x ** -1`` takes the reciprocal, ``x ** 0.5`` the square root, ``x ** 1`` copies,
``x ** 0`` is 1 -- bit for bit NumPy's ``x ** s``, which runs the same elementary
operations -- and device kernels multiply for small integer exponents and take ``1 / sqrt``
for ``-0.5``, within the 4 ulp the pow tests allow, where NumPy calls ``pow`` (the cpu
engine still does: its values are NumPy's).  At ``-0`` and ``-inf``, ``x ** 0.5`` gives
``pow``'s (the standard's) ``+0`` and ``+inf`` where NumPy's square root gives ``-0`` and
NaN (docs/conformance.md).  Integer arrays: ``x ** 2`` squares with NumPy's wraparound.
"""

from __future__ import annotations

import numpy as np
import pytest
from compute_cases import assert_close, assert_close_for
from hypothesis import given
from hypothesis import strategies as st
from strategies import SETTINGS

import gpuarrays as ga
from gpuarrays import _core
from gpuarrays._compute import dispatch
from gpuarrays._compute.table import OPS, POWERS, SMALL_POWERS, scalar_power

_EXACT = (2, -1, 0.5, 1, 0, 2.0, -1.0, 1.0, 0.0, -0.0)
"""Exponents whose results are NumPy's bit for bit on every device (real floats)."""
_MULTIPLIED = (3, 4, -2, -3, 6, -0.5, 3.0, -2.0)
"""Exponents NumPy computes with pow and device kernels otherwise (within 4 ulp)."""

_ENTRIES = {
    "operator": lambda x, s: x ** s,
    "pow": lambda x, s: ga.pow(x, s),
    "numpy": lambda x, s: np.power(x, s),
}


def _float_dtypes(device):
    return [dt for dt in map(np.dtype, ("f2", "f4", "f8")) if device.supports(dt)]


def _complex_dtypes(device):
    return [dt for dt in map(np.dtype, ("c8", "c16")) if device.supports(dt)]


def _values(dt: np.dtype) -> np.ndarray:
    """Zeros of both signs, +-1, infinities, NaN, subnormals, the extremes and random values
    of every magnitude (both signs)."""
    fi = np.finfo(dt)
    sub = fi.smallest_subnormal
    special = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, np.inf, -np.inf,
               np.nan, -np.nan, sub, -sub, 3 * sub, fi.tiny, -fi.tiny, fi.tiny / 3, fi.max,
               -fi.max, np.sqrt(fi.max), -np.sqrt(fi.max), 1 / np.sqrt(fi.max), fi.eps,
               1 + fi.eps, 1 - fi.epsneg, 4.0, 0.25, 7.0]
    rng = np.random.default_rng(dt.num)
    top = np.log(float(fi.max))
    mags = np.exp(rng.uniform(-top, top, 200))
    with np.errstate(all="ignore"):
        return np.concatenate([np.array(special, np.float64).astype(dt),
                               (mags * rng.choice([-1.0, 1.0], mags.size)).astype(dt),
                               (rng.standard_normal(100) * 4).astype(dt)])


def _numpy_power(h: np.ndarray, s):
    """NumPy's ``h ** s``, with ``pow``'s (the standard's) values where NumPy's ``x ** 0.5``
    takes a square root: ``+0`` at ``-0`` and ``+inf`` at ``-inf``."""
    with np.errstate(all="ignore"):
        r = np.asarray(h ** s)
    if s == 0.5 and h.dtype.kind == "f":
        r = r.copy()
        r[h == 0] = 0.0
        r[np.isneginf(h)] = np.inf
    return r


def _bits(a: np.ndarray) -> np.ndarray:
    """Bit patterns of a float or complex array's parts, every NaN as one pattern."""
    part = np.dtype(f"f{a.dtype.itemsize // 2}") if a.dtype.kind == "c" else a.dtype
    v = np.array(a).reshape(-1).view(part).copy()
    v[np.isnan(v)] = np.nan
    return v.view(f"u{part.itemsize}")


def _assert_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    g, w = _bits(got), _bits(want)
    bad = g != w
    assert not bad.any(), (what, np.flatnonzero(bad)[:5], got.reshape(-1).view(g.dtype)[bad][:5],
                           w[bad][:5])


def _assert_pow_close(got: np.ndarray, want: np.ndarray, backend: str, what: str) -> None:
    """Within the pow tests' ulps (cpu: exact), NaN, infinities and zero signs NumPy's."""
    assert_close(got, want, backend, what)
    zeros = want == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]),
                                  err_msg=f"{what}: the sign of zero")


# The rule -----------------------------------------------------------------------------------
def test_the_exponent_value_picks_the_row():
    f4, c8, i4, u1, b = (np.dtype(t) for t in ("f4", "c8", "i4", "u1", "bool"))
    assert scalar_power(f4, 2) == (OPS["square"], False)
    assert scalar_power(f4, 2.0) == (OPS["square"], False)
    assert scalar_power(f4, -1) == (OPS["reciprocal"], False)
    assert scalar_power(f4, 1.0) == (OPS["positive"], False)
    assert scalar_power(f4, 0.5) == (POWERS["pow_sqrt"], False)
    assert scalar_power(f4, -0.5) == (POWERS["pow_rsqrt"], True)
    for n in (0, -0.0, 3, 4, 6, -2, -3):
        assert scalar_power(f4, n) == (POWERS["pow_int"], True), n
    for s in (7, -4, 2.5, float("nan"), float("inf"), 10**30, True):
        assert scalar_power(f4, s) is None, s
    # complex: NumPy's operator's rows only (c ** 2.0 multiplies in NumPy's power loop)
    assert scalar_power(c8, 2) == (OPS["square"], False)
    assert scalar_power(c8, -1) == (OPS["reciprocal"], False)
    assert scalar_power(c8, 0.5) == (POWERS["pow_sqrt"], False)
    assert scalar_power(c8, 2.0) is None and scalar_power(c8, 3) is None
    # integers square for a Python int 2 only: int ** 2.0 is a float64 power
    assert scalar_power(i4, 2) == (OPS["square"], False)
    assert scalar_power(u1, 2) == (OPS["square"], False)
    assert scalar_power(i4, 2.0) is None and scalar_power(i4, 3) is None
    assert scalar_power(i4, -1) is None and scalar_power(b, 2) is None
    assert list(SMALL_POWERS) == list(range(-3, 7))


# Real floating point ------------------------------------------------------------------------
@pytest.mark.parametrize("entry", sorted(_ENTRIES))
def test_exact_exponents_are_numpys_bit_for_bit(device, entry):
    call = _ENTRIES[entry]
    for dt in _float_dtypes(device):
        h = _values(dt)
        x = ga.asarray(h, device=device)
        for s in _EXACT:
            got = call(x, s)
            assert isinstance(got, ga.GPUArray) and got.device == device
            _assert_bits(got.get(), _numpy_power(h, s), f"{entry} {dt} ** {s!r}")


@pytest.mark.parametrize("entry", sorted(_ENTRIES))
def test_pow_exponents_are_within_the_pow_tolerance(device, entry):
    call = _ENTRIES[entry]
    for dt in _float_dtypes(device):
        h = _values(dt)
        x = ga.asarray(h, device=device)
        for s in _MULTIPLIED:
            got = call(x, s).get()
            _assert_pow_close(got, _numpy_power(h, s), device.backend, f"{entry} {dt} ** {s!r}")


def test_square_root_takes_pows_values_at_minus_zero_and_minus_infinity(device):
    for dt in _float_dtypes(device):
        h = np.array([-0.0, -np.inf, 0.0, np.inf, -1.0, np.nan, 4.0], dt)
        for entry, call in _ENTRIES.items():
            got = call(ga.asarray(h, device=device), 0.5).get()
            want = np.array([0.0, np.inf, 0.0, np.inf, np.nan, np.nan, 2.0], dt)
            _assert_bits(got, want, f"{entry} {dt}")
        got = ga.pow(ga.asarray(h, device=device), -0.5).get()
        _assert_pow_close(got, np.array([np.inf, 0.0, np.inf, 0.0, np.nan, np.nan, 0.5], dt),
                          device.backend, f"{dt} ** -0.5")


def test_in_place_and_out_take_the_same_rows(device):
    for dt in _float_dtypes(device):
        h = _values(dt)
        for s in (2, 0.5, -1, 3, -0.5, 0):
            y = ga.asarray(h, device=device)
            y **= s  # the -inf of x **= 0.5 are found before x is written
            _assert_pow_close(y.get(), _numpy_power(h, s), device.backend, f"{dt} **= {s}")
            v = ga.asarray(h.reshape(2, -1) if h.size % 2 == 0 else h[1:].reshape(2, -1),
                           device=device)[:, ::-2]  # a strided view, in place
            hv = (h.reshape(2, -1) if h.size % 2 == 0 else h[1:].reshape(2, -1))[:, ::-2]
            v **= s
            _assert_pow_close(v.get(), _numpy_power(hv, s), device.backend, f"view **= {s}")
            out = ga.empty(h.shape, dt, device=device)
            assert np.power(ga.asarray(h, device=device), s, out=out) is out
            _assert_pow_close(out.get(), _numpy_power(h, s), device.backend, f"out= {s}")


def test_an_out_of_another_dtype_keeps_pow(device):
    if not device.supports(np.dtype("f8")):
        pytest.skip(f"{device} holds no float64")
    h = np.array([0.5, -2.0, 3.0, np.inf], np.float32)
    out = ga.empty(4, ga.float64, device=device)
    np.power(ga.asarray(h, device=device), 2, out=out)  # computed in float32, then cast
    _assert_bits(out.get(), (h ** 2).astype(np.float64), "float32 ** 2 into float64")
    ro = ga.broadcast_to(ga.asarray(np.float32(1.0), device=device), (4,))
    with pytest.raises(ValueError, match="pow"):
        np.power(ga.asarray(h, device=device), 2, out=ro)


# Complex ------------------------------------------------------------------------------------


def _complex_values(dt: np.dtype) -> np.ndarray:
    rng = np.random.default_rng(dt.num)
    re = np.concatenate([[0.0, -0.0, 1.0, -1.0, 0.0, 2.0, np.inf, np.nan],
                         rng.standard_normal(120) * np.exp(rng.uniform(-8, 8, 120))])
    im = np.concatenate([[0.0, 0.0, 0.0, 1.0, -1.0, -0.0, 1.0, 0.0],
                         rng.standard_normal(120) * np.exp(rng.uniform(-8, 8, 120))])
    return (re + 1j * im).astype(dt)


def test_complex_exponents(device):
    for dt in _complex_dtypes(device):
        h = _complex_values(dt)
        x = ga.asarray(h, device=device)
        finite = np.isfinite(h)
        for s in (2, -1, 0.5, 1, 0, 3, 4, -2, 2.0, -0.5, 1.5):
            for entry, call in _ENTRIES.items():
                got = call(x, s).get()
                want = _numpy_power(h, s)
                what = f"{entry} {dt} ** {s!r}"
                if device.backend == "cpu" or s in (1, 0, -1, 3, 4, -2):
                    # the cpu engine is NumPy; devices multiply and divide as NumPy's
                    # npy_cpow and reciprocal loop do, so the same values bit for bit
                    _assert_bits(got, want, what)
                else:
                    assert_close_for(got[finite], want[finite], device.backend, what, "power",
                           h[finite], s)


# Integers -----------------------------------------------------------------------------------
_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@pytest.mark.parametrize("name", _INTS)
def test_integer_powers_are_exact_and_wrap_as_numpy(device, name):
    dt = np.dtype(name)
    info = np.iinfo(dt)
    rng = np.random.default_rng(dt.num)
    edge = np.array([info.min, info.max, 0, 1, 2, 3, 7, 16, info.max // 2 + 1], dtype=object)
    h = np.concatenate([np.array([int(v) for v in edge], dtype=dt),
                        rng.integers(info.min, info.max, 50, dtype=dt, endpoint=True)])
    if dt.kind == "i":
        h = np.concatenate([h, np.array([-1, -2, -7, info.min + 1], dt)])
    x = ga.asarray(h, device=device)
    for s in (2, 0, 1, 3, 5):
        for entry, call in _ENTRIES.items():
            got = call(x, s)
            assert got.dtype == dt, (entry, s)
            np.testing.assert_array_equal(got.get(), h ** s, err_msg=f"{entry} {name} ** {s}")
    y = ga.asarray(h, device=device)
    y **= 2
    np.testing.assert_array_equal(y.get(), h * h)
    # a float exponent gives the default float type, as NumPy's: never the integer square
    got = x ** 2.0
    want_dt = np.float64 if device.supports(np.dtype("f8")) else np.float32
    assert got.dtype == want_dt
    np.testing.assert_allclose(got.get(), (h.astype(np.float64) ** 2).astype(want_dt),
                               rtol=4 * np.finfo(want_dt).eps)


def test_negative_integer_powers_of_integers_as_before(device):
    """NumPy raises ValueError; the cpu engine is NumPy, device kernels cannot raise and give
    ``1 // x ** k`` (docs/kernels.md, "Semantics")."""
    h = np.array([1, -1, 2, -3, 0, 5], np.int32)
    x = ga.asarray(h, device=device)
    if device.backend == "cpu":
        with pytest.raises(ValueError, match="negative integer powers"):
            x ** -1
        with pytest.raises(ValueError, match="negative integer powers"):
            ga.pow(x, -2)
    else:
        np.testing.assert_array_equal((x ** -1).get(), [1, -1, 0, 0, 0, 0])
        np.testing.assert_array_equal(ga.pow(x, -2).get(), [1, 1, 0, 0, 0, 0])


def test_bool_arrays_keep_pows_typing(device):
    h = np.array([True, False, True])
    got = ga.asarray(h, device=device) ** 2
    assert got.dtype == np.power(h, 2).dtype  # int64 (NumPy's operator squares to int8)
    np.testing.assert_array_equal(got.get(), np.power(h, 2))


# The compiled path --------------------------------------------------------------------------
def test_scalar_exponents_run_their_rows_on_the_compiled_path(device):
    plans = dispatch.PLANS
    pow_plan = plans[OPS["pow"]]
    x = ga.asarray(np.linspace(0.5, 4, 1000, dtype=np.float32), device=device)
    rows = {2: OPS["square"], -1: OPS["reciprocal"], 0.5: POWERS["pow_sqrt"],
            3: POWERS["pow_int"], -0.5: POWERS["pow_rsqrt"]}
    for s, row in rows.items():
        x ** s  # the first call of a layout may make its launch
        ga.synchronize(device)
        pow_plan.forget()
        before = _core.launches()
        for _ in range(5):
            x ** s
        assert pow_plan.remembered() == 0, s  # pow itself never ran
        assert plans[row].remembered() >= 1, s
        if device.backend == "opencl":
            assert _core.launches() - before == 5, s  # enqueued from C every time
    np.testing.assert_array_equal((x ** 2).get(), np.square(x.get()))


# Layouts ------------------------------------------------------------------------------------
_LAYOUTS = {
    "contiguous": lambda a: a,
    "strided": lambda a: a[::2, 1::3],
    "negative": lambda a: a[::-1, ::-2],
    "transposed": lambda a: a.T,
    "0-d": lambda a: a[1, 2, ...],
    "empty": lambda a: a[:, 3:3],
}


@SETTINGS
@given(data=st.data())
def test_layouts_and_exponents_match_numpy(device, data):
    dt = data.draw(st.sampled_from([d for d in _float_dtypes(device) if d.itemsize >= 4]))
    s = data.draw(st.sampled_from(_EXACT + _MULTIPLIED + (2.5, 7, -4)))
    layout = data.draw(st.sampled_from(sorted(_LAYOUTS)))
    entry = data.draw(st.sampled_from(sorted(_ENTRIES)))
    h = _values(dt)[:48].reshape(6, 8)
    hv = _LAYOUTS[layout](h)
    got = _ENTRIES[entry](_LAYOUTS[layout](ga.asarray(h, device=device)), s).get()
    want = _numpy_power(hv, s)
    what = f"{entry} {dt} {layout} ** {s!r}"
    if s in _EXACT:
        _assert_bits(got, want, what)
    else:
        _assert_pow_close(got, want, device.backend, what)
