"""What the array API conformance suite found, kept as regression tests (docs/conformance.md).

``finfo`` fields are Python floats; ``to_device`` has the standard's signature;
``asarray`` takes nested sequences holding arrays; and the special values the standard
lists where NumPy gives others (``floor_divide`` of an infinity against a finite number,
complex ``expm1``, ``tanh``, ``sign``) and the complex special values device kernels got
wrong (``exp``, ``sinh``, ``cosh``, ``asinh``, ``acosh``, ``atanh`` with infinite or NaN
parts) -- on every device, the standard's text as the oracle.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import gpuarrays as ga

INF, NAN = math.inf, math.nan
PI = math.pi


# finfo / to_device ---------------------------------------------------------------------
@pytest.mark.parametrize("name", ["float32", "float64", "complex64", "complex128"])
def test_finfo_fields_are_python_numbers(name):
    dt = getattr(ga, name)
    for arg in (dt, ga.asarray(1, dtype=dt, device="cpu")):
        f = ga.finfo(arg)
        assert type(f.bits) is int
        for field in ("eps", "max", "min", "smallest_normal"):
            assert type(getattr(f, field)) is float, field
        ref = np.finfo(dt)
        assert (f.bits, f.eps, f.max, f.min, f.smallest_normal) == (
            ref.bits, float(ref.eps), float(ref.max), float(ref.min), float(ref.smallest_normal))
        assert f.dtype == ref.dtype and isinstance(f.dtype, np.dtype)
    assert "eps=" in repr(ga.finfo(ga.float32))


def test_to_device_has_the_standards_signature(device):
    params = inspect.signature(ga.GPUArray.to_device).parameters
    assert params["device"].kind is inspect.Parameter.POSITIONAL_ONLY
    assert params["stream"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["stream"].default is None
    assert params["kind"].kind is inspect.Parameter.KEYWORD_ONLY
    a = ga.asarray([1.0, 2.0], device=device)
    assert a.to_device(device, stream=None) is a
    assert a.to_device(device, kind="host").kind == "host"
    with pytest.raises(TypeError):
        a.to_device(device, "host")  # kind is keyword-only now
    if device.backend != "cuda":
        with pytest.raises(ValueError, match="no streams"):
            a.to_device(device, stream=1)


# asarray of nested sequences holding arrays --------------------------------------------
def test_asarray_of_a_nested_list_of_0d_arrays(device):
    h = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = ga.asarray(h, device=device)  # "device" memory: NumPy cannot read it
    t = ga.asarray([[x[i, j] for i in range(2)] for j in range(3)], dtype=x.dtype)
    assert t.device == device and t.dtype == np.float32 and t.kind == "device"
    np.testing.assert_array_equal(t.get(), h.T)
    rows = ga.asarray([x[1], x[0]])
    np.testing.assert_array_equal(rows.get(), h[::-1])
    assert ga.asarray((x[0, 0],)).get().tolist() == [0.0]
    assert ga.asarray([x[:, :0], x[:, :0]]).shape == (2, 2, 0)


def test_asarray_of_arrays_and_scalars_promotes_as_the_standard(device):
    i8 = ga.asarray(np.int8(-3), device=device)
    f4 = ga.asarray(np.float32(1.5), device=device)
    a = ga.asarray([i8, 1, True])
    assert a.dtype == np.int8 and a.get().tolist() == [-3, 1, 1]  # Python scalars weak
    b = ga.asarray([f4, 2.5])
    assert b.dtype == np.float32 and b.get().tolist() == [1.5, 2.5]
    c = ga.asarray([i8, f4])
    assert c.dtype == np.float32
    d = ga.asarray([[f4, 2], [3, i8]], dtype=ga.int16)
    assert d.dtype == np.int16 and d.get().tolist() == [[1, 2], [3, -3]]
    with pytest.raises(OverflowError, match="int8"):
        ga.asarray([i8, 1000])
    # the array last, after a number of each Python type (the compiled scan of a flat list)
    e = ga.asarray([1, 2.5, True, f4])
    assert e.device == device and e.dtype == np.float32
    assert e.get().tolist() == [1.0, 2.5, 1.0, 1.5]


def test_asarray_of_a_nested_sequence_refuses_bad_input(device):
    x = ga.asarray(np.zeros((2, 2), np.float32), device=device)
    with pytest.raises(ValueError, match="ragged"):
        ga.asarray([x, x[0]])
    with pytest.raises(ValueError, match="without a copy"):
        ga.asarray([x[0], x[1]], copy=False)
    y = x[0, 0]
    y.free()
    with pytest.raises(ga.FreedArrayError):
        ga.asarray([x[1, 1], y])


def test_asarray_of_arrays_on_two_devices_is_a_value_error():
    pytest.importorskip("pyopencl")
    a = ga.asarray(1.0, device="cpu:0")
    b = ga.asarray(2.0, device="opencl:0")
    with pytest.raises(ValueError, match="different devices"):
        ga.asarray([a, b])
    moved = ga.asarray([a, 3.0], device="opencl:0")  # device= asks for the move
    assert moved.device == ga.get_device("opencl:0") and moved.get().tolist() == [1.0, 3.0]


# special values: the standard's text as the oracle --------------------------------------
def _same(got, want, signed=True):
    """NaN matches NaN, infinities and zeros exact (their sign too when ``signed``), other
    values to a few ulp."""
    if math.isnan(want):
        return math.isnan(got)
    if not signed:
        got, want = abs(got), abs(want)
    if want == 0 and got == 0:
        return math.copysign(1, got) == math.copysign(1, want)
    return got == want or math.isclose(got, want, rel_tol=1e-6)


def _check(device, name, cases, dtypes):
    for dt in dtypes:
        if not device.supports(np.dtype(dt)):
            continue
        xs = [c[0] for c in cases]
        got = getattr(ga, name)(ga.asarray(np.array(xs, dt), device=device)).get()
        for (z, want, *flags), g in zip(cases, got, strict=True):
            signed = flags[0] if flags else (True, True)
            ok = (_same(g.real, want.real, signed[0]) and _same(g.imag, want.imag, signed[1]))
            assert ok, f"{name}({z}) {dt} on {device}: got {g}, the standard says {want}"


_U = (False, False)  # the standard leaves the sign of a zero or infinity unspecified
_UR, _UI = (False, True), (True, False)


def test_floor_divide_of_an_infinity_against_a_finite_number(device):
    x1 = [INF, INF, -INF, -INF, 5.0, -5.0, 5.0, -5.0, 7.0, 0.0, INF, NAN]
    x2 = [2.0, -2.0, 2.0, -2.0, -INF, INF, INF, -INF, 2.0, 0.0, INF, 2.0]
    want = [INF, -INF, -INF, INF, -0.0, -0.0, 0.0, 0.0, 3.0, NAN, NAN, NAN]
    for dt in ("float32", "float64", "float16"):
        if not device.supports(np.dtype(dt)):
            continue
        a = ga.asarray(np.array(x1, dt), device=device)
        b = ga.asarray(np.array(x2, dt), device=device)
        for got in (ga.floor_divide(a, b), a // b):
            g = got.get().astype(float).tolist()
            assert all(_same(u, w) for u, w in zip(g, want, strict=True)), (dt, g)
        assert (ga.asarray(np.array([INF, -INF], dt), device=device) // 2.0).get().tolist() \
            == [INF, -INF]
        r = (1.0 // ga.asarray(np.array([-INF, INF], dt), device=device)).get()
        assert r.tolist() == [0.0, 0.0] and np.signbit(r).tolist() == [True, False]
        c = a.copy()
        c //= b  # in place: the output is the first operand
        g = c.get().astype(float).tolist()
        assert all(_same(u, w) for u, w in zip(g, want, strict=True)), (dt, "//=", g)
        z = ga.asarray(np.array(-INF, dt), device=device)
        assert (z // ga.asarray(np.array(-3.0, dt), device=device)).get() == INF  # 0-d
    ints = ga.asarray(np.array([7, -7], np.int32), device=device)
    assert (ints // 2).get().tolist() == [3, -4]  # integers keep Python's rules


_C = ("complex64", "complex128")


def test_complex_expm1_special_values(device):
    s1 = math.sin(1.0)
    _check(device, "expm1", [
        (complex(0.0, 0.0), complex(0.0, 0.0)),
        (complex(-0.0, 0.0), complex(0.0, 0.0)),
        (complex(INF, 0.0), complex(INF, 0.0)),
        (complex(-INF, 1.0), complex(-1.0, 0.0 * s1)),
        (complex(-INF, INF), complex(-1.0, 0.0), _UI),
        (complex(INF, INF), complex(INF, NAN), _U),
        (complex(-INF, NAN), complex(-1.0, 0.0), _UI),
        (complex(INF, NAN), complex(INF, NAN), _U),
        (complex(NAN, 0.0), complex(NAN, 0.0)),
        (complex(NAN, 1.0), complex(NAN, NAN)),
        (complex(1.0, INF), complex(NAN, NAN)),
        (complex(1.0, NAN), complex(NAN, NAN)),
        (complex(0.5, 0.25), complex(math.expm1(0.5) * math.cos(0.25)
                                     - 2 * math.sin(0.125) ** 2, math.exp(0.5) * math.sin(0.25))),
    ], _C)


def test_complex_tanh_special_values(device):
    _check(device, "tanh", [
        (complex(INF, 1.0), complex(1.0, 0.0)),
        (complex(INF, 2.0), complex(1.0, 0.0)),  # sin(4) < 0: NumPy signs the zero -
        (complex(INF, -2.0), complex(1.0, -0.0)),
        (complex(-INF, 2.0), complex(-1.0, 0.0)),
        (complex(INF, INF), complex(1.0, 0.0), _UR),
        (complex(INF, NAN), complex(1.0, 0.0), _UR),
        (complex(0.0, INF), complex(0.0, NAN)),
        (complex(0.0, NAN), complex(0.0, NAN)),
        (complex(1.0, INF), complex(NAN, NAN)),
        (complex(1.0, NAN), complex(NAN, NAN)),
        (complex(NAN, 0.0), complex(NAN, 0.0)),
        (complex(NAN, 1.0), complex(NAN, NAN)),
    ], _C)


def test_complex_sign_with_a_nan_part_is_nan(device):
    _check(device, "sign", [
        (complex(INF, NAN), complex(NAN, NAN)),
        (complex(NAN, INF), complex(NAN, NAN)),
        (complex(NAN, 0.0), complex(NAN, NAN)),
        (complex(0.0, 0.0), complex(0.0, 0.0), _U),
        (complex(3.0, -4.0), complex(0.6, -0.8)),
    ], _C)


def test_complex_exp_sinh_cosh_special_values(device):
    c1, s1 = math.cos(1.0), math.sin(1.0)
    _check(device, "exp", [
        (complex(INF, 0.0), complex(INF, 0.0)),
        (complex(-INF, 1.0), complex(0.0 * c1, 0.0 * s1)),
        (complex(-INF, INF), complex(0.0, 0.0), _U),
        (complex(INF, INF), complex(INF, NAN), _U),
        (complex(-INF, NAN), complex(0.0, 0.0), _U),
        (complex(INF, NAN), complex(INF, NAN), _U),
        (complex(NAN, 0.0), complex(NAN, 0.0)),
        (complex(1.0, INF), complex(NAN, NAN)),
        (complex(800.0, 0.0), complex(INF, 0.0)),
    ], _C)
    _check(device, "sinh", [
        (complex(0.0, 0.0), complex(0.0, 0.0)),
        (complex(0.0, INF), complex(0.0, NAN), _U),
        (complex(0.0, NAN), complex(0.0, NAN), _U),
        (complex(INF, 0.0), complex(INF, 0.0)),
        (complex(INF, 1.0), complex(INF * c1, INF * s1)),
        (complex(INF, INF), complex(INF, NAN), _U),
        (complex(INF, NAN), complex(INF, NAN), _U),
        (complex(NAN, 0.0), complex(NAN, 0.0)),
        (complex(NAN, 1.0), complex(NAN, NAN)),
        (complex(1.0, INF), complex(NAN, NAN)),
        (complex(800.0, 0.0), complex(INF, 0.0)),
    ], _C)
    _check(device, "cosh", [
        (complex(0.0, 0.0), complex(1.0, 0.0)),
        (complex(0.0, INF), complex(NAN, 0.0), _U),
        (complex(0.0, NAN), complex(NAN, 0.0), _U),
        (complex(INF, 0.0), complex(INF, 0.0)),
        (complex(INF, 1.0), complex(INF * c1, INF * s1)),
        (complex(INF, INF), complex(INF, NAN), _U),
        (complex(INF, NAN), complex(INF, NAN)),
        (complex(NAN, 0.0), complex(NAN, 0.0), _U),
        (complex(NAN, 1.0), complex(NAN, NAN)),
        (complex(800.0, 0.0), complex(INF, 0.0)),
    ], _C)


def test_complex_inverse_hyperbolic_special_values(device):
    _check(device, "asinh", [
        (complex(0.0, 0.0), complex(0.0, 0.0)),
        (complex(1.0, INF), complex(INF, PI / 2)),
        (complex(1.0, NAN), complex(NAN, NAN)),
        (complex(INF, 1.0), complex(INF, 0.0)),
        (complex(-INF, 1.0), complex(-INF, 0.0)),
        (complex(INF, INF), complex(INF, PI / 4)),
        (complex(INF, NAN), complex(INF, NAN)),
        (complex(NAN, 0.0), complex(NAN, 0.0)),
        (complex(NAN, 1.0), complex(NAN, NAN)),
        (complex(NAN, INF), complex(INF, NAN), _U),
        (complex(1e19, 3e19), complex(np.arcsinh(complex(1e19, 3e19)))),  # z*z overflows
    ], _C)
    _check(device, "acosh", [
        (complex(0.0, 0.0), complex(0.0, PI / 2)),
        (complex(-0.0, 0.0), complex(0.0, PI / 2)),
        (complex(1.0, INF), complex(INF, PI / 2)),
        (complex(1.0, NAN), complex(NAN, NAN)),
        (complex(0.0, NAN), complex(NAN, PI / 2), _UI),
        (complex(-INF, 1.0), complex(INF, PI)),
        (complex(INF, 1.0), complex(INF, 0.0)),
        (complex(-INF, INF), complex(INF, 3 * PI / 4)),
        (complex(INF, INF), complex(INF, PI / 4)),
        (complex(INF, NAN), complex(INF, NAN)),
        (complex(-INF, NAN), complex(INF, NAN)),
        (complex(NAN, 1.0), complex(NAN, NAN)),
        (complex(NAN, INF), complex(INF, NAN)),
    ], _C)
    _check(device, "atanh", [
        (complex(0.0, 0.0), complex(0.0, 0.0)),
        (complex(0.0, NAN), complex(0.0, NAN)),
        (complex(1.0, 0.0), complex(INF, 0.0)),
        (complex(1.0, INF), complex(0.0, PI / 2)),
        (complex(1.0, NAN), complex(NAN, NAN)),
        (complex(INF, 1.0), complex(0.0, PI / 2)),
        (complex(INF, INF), complex(0.0, PI / 2)),
        (complex(INF, NAN), complex(0.0, NAN)),
        (complex(NAN, 1.0), complex(NAN, NAN)),
        (complex(NAN, INF), complex(0.0, PI / 2), _UR),
    ], _C)
    _check(device, "acos", [
        (complex(0.0, NAN), complex(PI / 2, NAN)),
        (complex(1.0, INF), complex(PI / 2, -INF)),
        (complex(-INF, 1.0), complex(PI, -INF)),
        (complex(INF, 1.0), complex(0.0, -INF)),
        (complex(INF, NAN), complex(NAN, INF), _U),
        (complex(NAN, INF), complex(NAN, -INF)),
    ], _C)
