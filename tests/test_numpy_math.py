"""NumPy's elementwise math beyond the standard (issue 31), NumPy as the oracle.

The ufunc rows (``table.NUMPY_ONLY``: cbrt, fmax, gcd, ldexp ...) on every dtype NumPy's
loops take, through ``ga.<name>`` and ``np.<name>(garray)``, on non-contiguous and
zero-size operands, with the special values (NaN, infinities, signed zeros, integer
extremes) checked exactly where NumPy defines them; the two-output ufuncs (divmod, modf,
frexp) and the compositions of mathfuncs.py (sinc, i0, unwrap, the windows ...).
Float tolerances per back-end are ``compute_cases.ULP``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from compute_cases import ULP, assert_close, assert_close_for, inputs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuarrays as ga
from gpuarrays._compute.table import NUMPY_ONLY, OPS

_LAYOUT = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture])
_FLOATS = ("float16", "float32", "float64")
_REPRESENTATIVE = tuple(np.dtype(t) for t in (
    "bool", "int8", "uint16", "int64", "float16", "float32", "float64", "complex64"))
"""One dtype per class and width NumPy's loops treat apart; each is a kernel to compile, so
rows that compute in floating point take bool and integers through int8 (-> float16) only
(the conversion is the kernel's load, the same code for every integer width)."""
_FLOAT_ROW_SKIP = frozenset(np.dtype(t) for t in ("bool", "uint16", "int64"))


def _arr(values, dt) -> np.ndarray:
    """``values`` as ``dt``, overflowing to inf where they must (warnings silenced)."""
    with np.errstate(all="ignore"):
        return np.asarray(values, dtype=np.float64).astype(dt)


def _host(device, dt) -> bool:
    return device.supports(np.dtype(dt))


def _operands(name: str, dt: np.dtype) -> tuple[np.dtype, ...] | None:
    """The operand dtypes of row ``name`` for data type ``dt``, or None where NumPy's loops
    refuse it (ldexp's exponent is an integer; uint64 has no float loop)."""
    op = OPS[name]
    if name == "ldexp":
        return None if dt == np.uint64 else (dt, np.dtype("int32"))
    dts = (dt,) * op.nin
    try:
        op.ufunc.resolve_dtypes(dts + (None,))
    except TypeError:
        return None
    return dts


def _numpy(name: str, *xs):
    # the oracle: NumPy 2.5 deprecates some of these (np.fix: "use np.trunc"), ours stay
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return np.asarray(getattr(np, name)(*xs))


def _both(name: str, device, *hosts, close: bool = True):
    """``ga.<name>`` and ``np.<name>`` on device copies of ``hosts``, each compared with
    NumPy on ``hosts``."""
    want = _numpy(name, *hosts)
    arrays = [ga.asarray(h, device=device) for h in hosts]
    for got in (getattr(ga, name)(*arrays), getattr(np, name)(*arrays)):
        assert isinstance(got, ga.GPUArray) and got.device == device, name
        if close:
            assert_close_for(got.get(), want, device.backend, name, name, *hosts)
        else:
            assert got.dtype == want.dtype, name
            assert np.array_equal(got.get(), want, equal_nan=want.dtype.kind in "fc"), name
    return want


# ----------------------------------------------------------------------------- the rows
@pytest.mark.parametrize("name", sorted(NUMPY_ONLY))
def test_rows_on_every_dtype_numpy_takes_both_routes(device, name):
    op = OPS[name]
    seen = 0
    floating = OPS[name].ufunc.resolve_dtypes((np.dtype("int8"),) * op.nin + (None,))[-1].kind
    for dt in _REPRESENTATIVE:
        if dt not in op.accepts or (floating in "fc" and dt in _FLOAT_ROW_SKIP
                                    and name != "ldexp"):
            continue
        dts = _operands(name, dt)
        if dts is None or not all(map(device.supports, dts)):
            continue
        hosts = inputs(name, dts, (3, 5), seed=dt.num)
        if _numpy(name, *(h[:0] for h in hosts)).dtype == np.float16 and not _host(
                device, "float16"):
            continue
        _both(name, device, *hosts)
        seen += 1
    assert seen >= 2, name
    # the result dtypes NumPy's loops give, for a few cases the issue names
    assert ga.float_power(ga.asarray(np.ones(2, np.float32), device=device), 2).dtype == \
        np.float64
    assert ga.bitwise_count(ga.asarray(np.ones(2, np.int64), device=device)).dtype == np.uint8


@pytest.mark.parametrize("name", sorted(NUMPY_ONLY))
def test_rows_on_strided_transposed_broadcast_and_empty_operands(device, name):
    op = OPS[name]
    dt = np.dtype("float32") if np.dtype("float32") in op.accepts else np.dtype("int16")
    dts = _operands(name, dt)
    hosts = inputs(name, dts, (6, 8), seed=5)
    gs = [ga.asarray(h, device=device) for h in hosts]
    layouts = [lambda x: x[::2, 1::3], lambda x: x.T, lambda x: x[:, 2:2], lambda x: x[1, ...]]
    for lay in layouts:
        hs = [lay(h) for h in hosts]
        if op.nin == 2:
            hs[1] = hosts[1][::-1][:1] if lay is layouts[3] else lay(hosts[1][::-1])
        want = _numpy(name, *hs)
        args = [lay(g) for g in gs]
        if op.nin == 2:
            args[1] = gs[1][::-1][:1] if lay is layouts[3] else lay(gs[1][::-1])
        for got in (getattr(ga, name)(*args), getattr(np, name)(*args)):
            assert got.shape == want.shape
            assert_close_for(got.get(), want, device.backend, f"{name} {want.shape}", name, *hs)
    if op.nin == 2 and name != "ldexp":  # a Python scalar operand (weak, as NumPy)
        s = 3 if dt.kind in "iu" else 1.5
        assert_close_for(getattr(ga, name)(gs[0], s).get(), _numpy(name, hosts[0], s),
               device.backend, f"{name} scalar", name, hosts[0], s)


_SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-30, 3e38, 7.0]


@pytest.mark.parametrize("name", sorted(n for n in NUMPY_ONLY
                                        if np.dtype("f4") in OPS[n].accepts and n != "ldexp"))
def test_special_floating_values_and_signed_zeros_as_numpy(device, name):
    op = OPS[name]
    for dt in _FLOATS:
        if not _host(device, dt):
            continue
        v = _arr(_SPECIAL, dt)
        hosts = [v] if op.nin == 1 else [np.repeat(v, len(v)), np.tile(v, len(v))]
        want = _both(name, device, *hosts)
        got = getattr(ga, name)(*(ga.asarray(h, device=device) for h in hosts)).get()
        if want.dtype.kind == "f":
            zeros = want == 0
            np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]),
                                          err_msg=f"{name} {dt}: the sign of zero")


def test_fmax_fmin_take_the_number_over_nan_for_real_and_complex(device):
    x = np.array([np.nan, 1.0, np.nan, -np.inf, 2.0, 0.0], np.float32)
    y = np.array([3.0, np.nan, np.nan, 5.0, -np.inf, -0.0], np.float32)
    for name in ("fmax", "fmin"):
        _both(name, device, x, y)
    parts = [np.nan, 1.0, 2.0, -np.inf]
    z = np.array([complex(a, b) for a in parts for b in parts], np.complex64)
    for name in ("fmax", "fmin"):
        _both(name, device, np.repeat(z, len(z)), np.tile(z, len(z)), close=False)
    b = np.array([True, False, True, False])
    _both("fmax", device, b, b[::-1], close=False)


def test_integer_rows_exhaustively_on_int8_and_at_the_extremes(device):
    """gcd/lcm of negatives and of MIN, fmod's sign and division by 0 and -1, bitwise_count
    of the magnitude: every int8 pair, exactly."""
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    for name in ("gcd", "lcm", "fmod"):
        _both(name, device, a, b, close=False)
    _both("bitwise_count", device, a[::256], close=False)
    for dt in ("int64", "uint64", "int32", "uint16"):
        info = np.iinfo(dt)
        x = np.array([info.min, info.max, info.min, 0, 6, info.max - 1, min(2**20, info.max),
                      12], dt)
        y = np.array([0, 3, info.max, 0, 4, 2, 3, info.min], dt)
        if info.min < 0:
            y[3], y[4] = -1, -4
        for name in ("gcd", "lcm", "fmod"):
            _both(name, device, x, y, close=False)
        _both("bitwise_count", device, x, close=False)


def test_ldexp_takes_integer_exponents_of_any_width_and_refuses_float_ones(device):
    for dt in _FLOATS:
        if not _host(device, dt):
            continue
        info = np.finfo(dt)
        x = np.array([1.0, -1.5, 0.0, -0.0, np.inf, np.nan, float(info.tiny), 3.0, 0.75,
                      float(info.max)], dt)
        for edt in ("int32", "int64") + (("int8", "uint16") if dt == "float32" else ()):
            lo = -(2**40) if edt == "int64" else np.iinfo(edt).min
            hi = 2**40 if edt == "int64" else np.iinfo(edt).max
            e = np.clip([3, -2, 5, 1000, -7, 2, -int(info.nmant) - 1, hi, lo, -1], lo, hi)
            e = e.astype(edt)
            _both("ldexp", device, x, e, close=False)
        g = ga.asarray(x, device=device)
        with np.errstate(all="ignore"):
            want = np.ldexp(x, 4)
        assert np.array_equal(ga.ldexp(g, 4).get(), want, equal_nan=True)
        with pytest.raises(TypeError, match="ldexp"):
            ga.ldexp(g, g)
        with pytest.raises(TypeError):
            np.ldexp(g, 2.0)


def test_float_power_is_float64_and_complex128(device):
    x = np.array([-8.0, 2.0, 0.5, 0.0, 3.0], np.float32)
    y = np.array([1 / 3, -1.0, 2.5, 0.0, 2.0], np.float32)
    want = _both("float_power", device, x, y)
    assert want.dtype == np.float64
    z = np.array([1 + 1j, -2j, 0.5 + 0j], np.complex64)
    assert _both("float_power", device, z, z).dtype == np.complex128
    i = np.array([2, -3, 0, 7], np.int8)
    assert _both("float_power", device, i, np.abs(i)).dtype == np.float64


@given(data=st.data())
@_LAYOUT
def test_binary_rows_on_random_layouts_and_broadcasting(device, data):
    name = data.draw(st.sampled_from(["fmax", "fmin", "fmod", "heaviside", "logaddexp2",
                                      "ldexp", "gcd", "float_power"]))
    dt = np.dtype("int32") if name == "gcd" else np.dtype(
        data.draw(st.sampled_from(["float32", "float64"])))
    if not device.supports(dt):
        return
    hosts = inputs(name, _operands(name, dt), (5, 6), seed=data.draw(st.integers(0, 3)))
    step = data.draw(st.sampled_from([1, 2, -1]))
    cut = data.draw(st.sampled_from([slice(None), slice(1, None), slice(0, 0)]))
    row = data.draw(st.booleans())  # x2 one row, broadcast over x1's rows

    def lay(a):
        return a[:1, ::step] if row and a is not hosts[0] and a is not gs[0] else a[cut, ::step]
    gs = [ga.asarray(h, device=device) for h in hosts]
    hx, hy, gx, gy = lay(hosts[0]), lay(hosts[1]), lay(gs[0]), lay(gs[1])
    want = _numpy(name, hx, hy)
    got = getattr(ga, name)(gx, gy)
    assert_close_for(got.get(), want, device.backend, name, name, hx, hy)


# ---------------------------------------------------------------- two-output ufuncs
def test_divmod_both_routes_and_out(device):
    a = np.array([7, -7, 7, -7, 5, -128, 0], np.int8)
    b = np.array([2, 2, -2, -2, 0, -1, 3], np.int8)
    ga_, gb = ga.asarray(a, device=device), ga.asarray(b, device=device)
    with np.errstate(all="ignore"):
        wq, wr = np.divmod(a, b)
    for q, r in (ga.divmod(ga_, gb), np.divmod(ga_, gb)):
        assert q.dtype == wq.dtype and q.get().tolist() == wq.tolist()
        assert r.dtype == wr.dtype and r.get().tolist() == wr.tolist()
    for dt in ("float32", "float64"):
        x, y = a.astype(dt) + 0.5, b.astype(dt)
        with np.errstate(all="ignore"):
            wq, wr = np.divmod(x, y)
        q, r = ga.divmod(ga.asarray(x, device=device), ga.asarray(y, device=device))
        assert_close(q.get(), wq, device.backend, "divmod q")
        assert_close(r.get(), wr, device.backend, "divmod r")
    oq = ga.empty(a.shape, dtype=np.int8, device=device)
    orr = ga.empty(a.shape, dtype=np.int8, device=device)
    q, r = ga.divmod(ga_, gb, out=(oq, orr))
    with np.errstate(all="ignore"):
        assert q is oq and r is orr and orr.get().tolist() == np.remainder(a, b).tolist()
    with pytest.raises(TypeError, match="tuple of two"):
        ga.divmod(ga_, gb, out=oq)


def test_divmod_of_infinities_nan_and_signed_zeros_is_numpys(device):
    """NumPy's quotient where one operand is infinite (NaN, -1, a signed zero), not
    floor_divide's (the standard's), every sign of zero exactly."""
    v = _arr([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e30], "float32")
    a, b = np.repeat(v, len(v)), np.tile(v, len(v))
    with np.errstate(all="ignore"):
        want = np.divmod(a, b), np.divmod(v, np.inf)
    got = (ga.divmod(ga.asarray(a, device=device), ga.asarray(b, device=device)),
           np.divmod(ga.asarray(v, device=device), np.inf))
    for pair, wpair in zip(got, want, strict=True):
        for g, w in zip(pair, wpair, strict=True):
            g = g.get()
            assert g.dtype == w.dtype and np.array_equal(g, w, equal_nan=True)
            np.testing.assert_array_equal(np.signbit(g[w == 0]), np.signbit(w[w == 0]))


def test_modf_signs_of_zeros_infinities_and_integer_input(device):
    for dt in _FLOATS:
        if not _host(device, dt):
            continue
        x = np.array([-2.0, -0.5, 0.5, 2.25, -0.0, 0.0, np.inf, -np.inf, np.nan, -7.75, 1e-5],
                     dt)
        g = ga.asarray(x, device=device)[::-1]
        wf, wi = np.modf(x[::-1])
        for f, i in (ga.modf(g), np.modf(g)):
            assert f.dtype == wf.dtype and i.dtype == wi.dtype
            np.testing.assert_array_equal(f.get(), wf)
            np.testing.assert_array_equal(np.signbit(f.get()), np.signbit(wf))
            np.testing.assert_array_equal(i.get(), wi)
            np.testing.assert_array_equal(np.signbit(i.get()), np.signbit(wi))
    i8 = np.array([3, -4, 0], np.int8)
    f, i = ga.modf(ga.asarray(i8, device=device))
    assert f.dtype == np.modf(i8)[0].dtype == np.float16 and i.get().tolist() == [3, -4, 0]
    with pytest.raises(TypeError, match="modf"):
        ga.modf(ga.zeros(2, dtype=np.complex64, device=device))


def test_frexp_is_exact_for_subnormals_powers_of_two_and_special_values(device):
    for dt in _FLOATS:
        if not _host(device, dt):
            continue
        info = np.finfo(dt)
        sub = float(info.smallest_subnormal)
        x = np.array([0.0, -0.0, 1.0, 0.5, -2.0, 3.0, np.inf, -np.inf, np.nan, sub, -sub * 3,
                      float(info.tiny), float(info.max), 1.0 - float(info.epsneg), 1e-3], dt)
        g = ga.asarray(x, device=device)
        wm, we = np.frexp(x)
        for m, e in (ga.frexp(g), np.frexp(g)):
            assert m.dtype == wm.dtype and e.dtype == np.int32
            np.testing.assert_array_equal(m.get(), wm)
            np.testing.assert_array_equal(np.signbit(m.get()), np.signbit(wm))
            np.testing.assert_array_equal(e.get(), we)
    m, e = ga.frexp(ga.asarray(np.array([12, -1], np.int16), device=device))
    assert m.dtype == np.float32 and m.get().tolist() == [0.75, -0.5] and e.get().tolist() == [4, 1]
    m, e = ga.frexp(ga.zeros((0, 3), dtype=np.float32, device=device))
    assert m.shape == e.shape == (0, 3)


# ----------------------------------------------------------------------- compositions
def test_sinc_i0_angle_fix(device):
    # each composition is a chain of kernels to compile per dtype: a few dtypes each
    cases = {"float16": ("sinc",), "float32": ("sinc", "i0", "angle"), "float64": ("i0",),
             "int16": ("sinc", "i0"), "bool": ("angle",)}
    for dt, names in cases.items():
        if not _host(device, dt):
            continue
        x = _arr([0.0, 0.5, -1.25, 3.0, -7.5, 8.0, 8.5, 20.0], dt) if dt in _FLOATS \
            else np.array([0, 1, -3, 9, 12] if dt == "int16" else [0, 1]).astype(dt)
        for name in names:
            _both(name, device, x)
    z = np.array([1 + 1j, -1 + 0j, -1 - 0j, 0j, complex(0, -2)], np.complex128)
    _both("sinc", device, z)
    _both("angle", device, z)
    gz = ga.asarray(z, device=device)
    assert_close(ga.angle(gz, deg=True).get(), np.angle(z, deg=True), device.backend)
    assert_close(np.angle(gz, deg=True).get(), np.angle(z, deg=True), device.backend)
    with pytest.raises(TypeError, match="complex"):
        ga.i0(gz)
    f = np.array([-2.5, -0.5, -0.0, 0.5, 2.5, np.nan], np.float32)
    _both("fix", device, f, close=False)
    assert np.signbit(ga.fix(ga.asarray(f, device=device)).get()[1])
    _both("fix", device, np.array([3, -4], np.int8), close=False)
    out = ga.empty(6, dtype=np.float32, device=device)
    assert ga.fix(ga.asarray(f, device=device), out=out) is out
    assert np.array_equal(out.get(), _numpy("fix", f), equal_nan=True)
    assert np.fix(ga.asarray(f, device=device)[::2]).get().tolist()[:2] == [-2.0, -0.0]


def test_nan_to_num_arguments_complex_and_in_place(device):
    x = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0], np.float32)
    g = ga.asarray(x, device=device)
    _both("nan_to_num", device, x, close=False)
    for kw in ({"nan": 7.0}, {"posinf": 1e3, "neginf": -5}, {"nan": np.inf}):
        want = np.nan_to_num(x, **kw)
        for got in (ga.nan_to_num(g, **kw), np.nan_to_num(g, **kw)):
            assert got.dtype == want.dtype and got.get().tolist() == want.tolist()
    assert g.get()[0] != g.get()[0]  # unchanged: copy=True
    same = ga.nan_to_num(g, copy=False)
    assert same is g and g.get().tolist() == np.nan_to_num(x).tolist()
    z = np.array([complex(np.nan, np.inf), complex(-np.inf, 1)], np.complex64)
    _both("nan_to_num", device, z, close=False)
    i = np.array([1, 2], np.int16)
    gi = ga.asarray(i, device=device)
    assert ga.nan_to_num(gi).get().tolist() == [1, 2] and ga.nan_to_num(gi, copy=False) is gi
    with pytest.raises(TypeError, match="nan_to_num"):
        ga.nan_to_num(g, nan="zero")


def test_isposinf_isneginf_iscomplex_isreal(device):
    x = np.array([np.inf, -np.inf, np.nan, 0.0, 1e38], np.float32)
    for name in ("isposinf", "isneginf", "iscomplex", "isreal"):
        _both(name, device, x, close=False)
        _both(name, device, np.array([1, -2], np.int8), close=False)
    z = np.array([1 + 0j, 1j, complex(np.inf, 0)], np.complex64)
    for name in ("iscomplex", "isreal"):
        _both(name, device, z, close=False)
        _both(name, device, np.zeros((2, 0), np.complex64), close=False)
    gz = ga.asarray(z, device=device)
    with pytest.raises(TypeError, match="ambiguous"):
        ga.isposinf(gz)
    with pytest.raises(TypeError, match="ambiguous"):
        np.isneginf(gz)
    out = ga.empty(5, dtype=bool, device=device)
    assert ga.isposinf(ga.asarray(x, device=device), out=out) is out
    assert out.get().tolist() == np.isposinf(x).tolist()


def test_real_if_close_reads_one_verdict(device):
    close = np.array([1 + 1e-15j, 2 - 1e-16j])
    far = np.array([1 + 1e-3j, 2 + 0j])
    for h in (close, far):
        g = ga.asarray(h, device=device)
        for got in (ga.real_if_close(g), np.real_if_close(g)):
            want = np.real_if_close(h)
            assert got.dtype == want.dtype and got.get().tolist() == want.tolist()
    g = ga.asarray(far, device=device)
    assert ga.real_if_close(g) is g
    assert ga.real_if_close(g, tol=1e-2).dtype == np.float64
    r = ga.asarray(np.array([1.0]), device=device)
    assert ga.real_if_close(r) is r


def test_unwrap_axes_periods_and_errors(device):
    rng = np.random.default_rng(1)
    p = np.cumsum(rng.uniform(-5, 5, (4, 9)), axis=1)
    wrapped = np.angle(np.exp(1j * p))
    g = ga.asarray(wrapped, device=device)
    for kw in ({}, {"axis": 0}, {"axis": -1, "discont": 4.0}, {"period": 5.0}):
        want = np.unwrap(wrapped, **kw)
        for got in (ga.unwrap(g, **kw), np.unwrap(g, **kw)):
            assert_close(got.get(), want, device.backend, str(kw))
    i = np.array([0, 5, 10, 3, 9, 2], np.int8)
    gi = ga.asarray(i, device=device)
    for kw in ({"period": 6}, {"period": 7}, {}):
        want = np.unwrap(i, **kw)
        got = ga.unwrap(gi, **kw)
        assert got.dtype == want.dtype
        assert_close(got.get(), want, device.backend, str(kw))
    f = np.array([0.0, 3.0, 6.5, -1.0], np.float32)[::-1]
    assert_close(ga.unwrap(ga.asarray(f, device=device)[::-1][::-1]).get(), np.unwrap(f),
                 device.backend, "float32, reversed")
    assert ga.unwrap(ga.zeros((3, 0), device=device)).shape == (3, 0)
    with pytest.raises(ValueError, match="one dimensional"):
        ga.unwrap(ga.asarray(1.0, device=device))
    with pytest.raises(np.exceptions.AxisError):
        ga.unwrap(g, axis=2)


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning", "kaiser"])
def test_windows_on_the_device(device, name):
    extra = (8.6,) if name == "kaiser" else ()
    dt = np.float64 if device.info.float64 else np.float32
    for M in (-2, 0, 1, 2, 7, 16, 5.0):
        got = getattr(ga, name)(M, *extra, device=device)
        want = getattr(np, name)(M, *extra).astype(dt)
        assert got.device == device and got.dtype == dt and got.shape == want.shape, M
        if ULP[device.backend] == 0:
            np.testing.assert_array_equal(got.get(), want)
        else:
            np.testing.assert_allclose(got.get(), want, rtol=1e-12, atol=1e-15)
    with pytest.raises(TypeError, match="M must be a number"):
        getattr(ga, name)("7", *extra, device=device)


# ------------------------------------------------------------------ errors and memory
def test_bad_operands_are_numpys_error_classes_with_a_remedy(device):
    h = np.ones(3)
    for fn in (ga.sinc, ga.i0, ga.modf, ga.frexp, ga.fix, ga.isposinf, ga.angle):
        with pytest.raises(TypeError, match=r"ga\.asarray"):
            fn(h)
    g = ga.asarray(np.ones(3, np.float32), device=device)
    with pytest.raises(TypeError, match="gcd"):
        ga.gcd(g, g)
    with pytest.raises(TypeError, match="cbrt"):
        ga.cbrt(ga.zeros(2, dtype=np.complex64, device=device))
    with pytest.raises(TypeError, match="period"):
        ga.unwrap(g, period="2pi")


def test_compositions_give_their_temporaries_back(device, used):
    x = ga.asarray(np.linspace(-9, 9, 64), device=device)
    for fn in (ga.i0, ga.sinc, ga.nan_to_num, lambda a: ga.frexp(a)[0], lambda a: ga.modf(a)[0],
               ga.unwrap, lambda a: ga.hanning(64, device=device)):
        fn(x).free()  # warm: first allocations of a size may stay pooled
        before = used()
        r = fn(x)
        assert used() == before + r.storage.nbytes
        r.free()
        assert used() == before
