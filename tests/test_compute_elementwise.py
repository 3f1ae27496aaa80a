"""Every elementwise function on every device, NumPy as the oracle (docs/compute.md).

Each function runs over every dtype its category accepts; hypothesis adds
layouts (offsets, negative and zero strides, transposes, broadcasting) and
Python scalar operands; the standard's special cases (NaN, infinities, signed
zeros, integer wrapping and division by zero) are checked explicitly.  Float
tolerances per back-end are in ``compute_cases.ULP``.
"""

from __future__ import annotations

import numpy as np
import pytest
from compute_cases import assert_close, assert_close_for, inputs, reference
from hypothesis import given
from hypothesis import strategies as st
from strategies import SETTINGS

import gpuarrays as ga
from gpuarrays._compute.table import OPS

_F64_LESS = {np.dtype("f8"): np.dtype("f4"), np.dtype("c16"): np.dtype("c8")}


def _dtypes_for(op, device):
    return [dt for dt in sorted(op.accepts, key=lambda d: d.num) if device.supports(dt)
            and not (op.name == "ldexp" and dt == np.uint64)]  # np.ldexp refuses uint64


def _operand_dtypes(op, dt):
    if op.name == "ldexp":  # NumPy's ldexp takes an integer exponent
        return (dt, np.dtype("int32"))
    return (np.dtype(bool), dt, dt) if op.name == "where" else (dt,) * op.nin


def _expected(name, device, *hosts):
    want = reference(name, *hosts)
    if not device.info.float64:
        want = want.astype(_F64_LESS.get(want.dtype, want.dtype))
    return want


def _call(name, *args):
    return getattr(ga, name)(*args)


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_function_on_every_dtype_it_accepts(device, name):
    op = OPS[name]
    dts = _dtypes_for(op, device)
    assert dts, name
    for dt in dts:
        hosts = inputs(name, _operand_dtypes(op, dt), (3, 5), seed=dt.num)
        arrays = [ga.asarray(h, device=device) for h in hosts]
        got = _call(name, *arrays)
        assert got.device == device and got.shape == (3, 5)
        assert_close_for(got.get(), _expected(name, device, *hosts), device.backend, f"{name} {dt}",
               name, *hosts)


@pytest.mark.parametrize("name", sorted(n for n, op in OPS.items() if op.category != "any"))
def test_a_dtype_outside_the_category_is_a_type_error(device, name):
    op = OPS[name]
    outside = [dt for dt in (np.dtype(t) for t in ("bool", "int32", "float32", "complex64"))
               if dt not in op.accepts and device.supports(dt)]
    try:  # bool operands run where NumPy has a loop for them (issue 31: np.add(b, b) ...;
        # tests/test_numpy_arguments.py compares them with NumPy)
        op.ufunc.resolve_dtypes((np.dtype(bool),) * op.nin + (None,) * op.ufunc.nout)
        outside = [dt for dt in outside if dt != np.bool_]
    except (TypeError, AttributeError):
        pass
    if op.category in ("floating-point", "real floating-point") and op.typing == "ufunc":
        # integers run NumPy's float loop (sqrt(int32) is float64, sin(int8) float16)
        i = ga.asarray(np.arange(1, 4, dtype=np.int16), device=device)
        with np.errstate(all="ignore"):
            want = op.ufunc(*[i.get()] * op.nin)
        loop = op.ufunc.resolve_dtypes((np.dtype(np.int16),) * op.nin + (None,) * op.ufunc.nout)
        if loop[0].kind == "f":  # (reciprocal(int16) is NumPy's int16 loop: refused)
            outside = [dt for dt in outside if dt.kind not in "iu"]
            assert _call(name, *[i] * op.nin).dtype == want.dtype, name
    for dt in outside:
        arrays = [ga.zeros(3, dtype=dt, device=device) for _ in range(op.nin)]
        with pytest.raises(TypeError, match=name):
            _call(name, *arrays)


_LAYOUTS = {
    "contiguous": lambda x: x,
    "offset": lambda x: x[1:, 2:],
    "strided": lambda x: x[::2, 1::2],
    "negative": lambda x: x[::-1, ::-2],
    "transposed": lambda x: x.T,
    "row-broadcast": lambda x: x[1],
    "column-broadcast": lambda x: x[:, :1],
    "0-d": lambda x: x[1, 1, ...],
    "empty": lambda x: x[:, 2:2],
}
_LAYOUT_OPS = ["add", "subtract", "multiply", "divide", "exp", "less", "equal", "maximum",
               "bitwise_xor", "where", "abs", "floor_divide", "clip", "logical_and", "sqrt"]


@st.composite
def _layout_case(draw, device):
    name = draw(st.sampled_from(_LAYOUT_OPS))
    op = OPS[name]
    dt = draw(st.sampled_from(_dtypes_for(op, device)))
    layouts = [draw(st.sampled_from(sorted(_LAYOUTS))) for _ in range(op.nin)]
    scalar = draw(st.sampled_from([None] + list(range(1, op.nin)))) if op.nin > 1 else None
    return name, dt, layouts, scalar


@SETTINGS
@given(data=st.data())
def test_layouts_broadcasting_and_scalars_match_numpy(device, data):
    name, dt, layouts, scalar = data.draw(_layout_case(device))
    op = OPS[name]
    hosts = inputs(name, _operand_dtypes(op, dt), (6, 8), seed=3)
    ops_np, ops_ga = [], []
    shape_of = {}
    for k, (h, lay) in enumerate(zip(hosts, layouts, strict=True)):
        if k == scalar:
            value = h.flat[0].item()
            ops_np.append(value)
            ops_ga.append(value)
            continue
        g = ga.asarray(h, device=device)
        ops_np.append(_LAYOUTS[lay](h))
        ops_ga.append(_LAYOUTS[lay](g))
        shape_of[k] = ops_np[-1].shape
    try:
        np.broadcast_shapes(*shape_of.values())
    except ValueError:
        with pytest.raises(ValueError, match="broadcast"):
            _call(name, *ops_ga)
        return
    if all(not isinstance(x, ga.GPUArray) for x in ops_ga):
        return
    got = _call(name, *ops_ga)
    want = _expected(name, device, *ops_np)
    assert_close(got.get(), want, device.backend, f"{name} {dt} {layouts} scalar={scalar}")


_SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-30, 3e38]


@pytest.mark.parametrize("name", sorted(n for n, op in OPS.items()
                                        if np.dtype("f4") in op.accepts and op.nin <= 2))
def test_special_floating_values_as_numpy(device, name):
    op = OPS[name]
    for dt in (np.dtype("f4"), np.dtype("f8")):
        if not device.supports(dt):
            continue
        v = np.array(_SPECIAL, dtype=dt)
        hosts = [v] if op.nin == 1 else [np.repeat(v, len(v)), np.tile(v, len(v))]
        if name == "ldexp":  # an integer exponent
            hosts[1] = np.tile(np.arange(-5, 6, dtype=np.int32), len(v))
        got = _call(name, *(ga.asarray(h, device=device) for h in hosts)).get()
        want = _expected(name, device, *hosts)
        assert_close(got, want, device.backend, f"{name} {dt}")
        if want.dtype.kind == "f":
            zeros = want == 0
            np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]),
                                          err_msg=f"{name} {dt}: the sign of zero")


def test_integer_arithmetic_wraps_and_divides_by_zero_as_numpy(device):
    i8 = np.array([127, -128, 7, -7, 0, 5, -128], np.int8)
    d8 = np.array([1, -1, 0, 2, 0, -3, -1], np.int8)
    a = ga.asarray(i8, device=device)
    for name in ("add", "subtract", "multiply", "floor_divide", "remainder", "pow"):
        exps = np.abs(d8) if name == "pow" else d8
        got = _call(name, a, ga.asarray(exps, device=device)).get()
        assert_close(got, reference(name, i8, exps), device.backend, name)
    assert_close(ga.abs(a).get(), np.abs(i8), device.backend, "abs(MIN) wraps")
    assert_close(ga.negative(a).get(), np.negative(i8), device.backend, "negative wraps")
    u = np.array([0, 1, 255, 128], np.uint8)
    assert_close(ga.negative(ga.asarray(u, device=device)).get(), np.negative(u), device.backend)


def test_shifts_by_the_width_or_more_as_numpy(device):
    for dt in ("int8", "uint8", "int32", "uint32", "int64", "uint64"):
        x = np.array([1, -1, 5, 100] if dt[0] == "i" else [1, 255, 5, 100], dt)
        width = np.dtype(dt).itemsize * 8
        s = np.array([0, width - 1, width, width + 3], dt)
        for name in ("bitwise_left_shift", "bitwise_right_shift"):
            got = _call(name, ga.asarray(x, device=device), ga.asarray(s, device=device)).get()
            assert_close(got, reference(name, x, s), device.backend, f"{name} {dt}")


def test_python_sign_rules_for_floor_divide_and_remainder(device):
    x = np.array([7, -7, 7, -7, 0], np.int32)
    y = np.array([2, 2, -2, -2, 3], np.int32)
    for name in ("floor_divide", "remainder"):
        got = _call(name, ga.asarray(x, device=device), ga.asarray(y, device=device)).get()
        assert got.tolist() == reference(name, x, y).tolist()
        xf, yf = x.astype(np.float32), y.astype(np.float32)
        got = _call(name, ga.asarray(xf, device=device), ga.asarray(yf, device=device)).get()
        assert_close(got, reference(name, xf, yf), device.backend, name)


def test_float32_fmod_family_is_exact_bit_for_bit(device):
    """fmod, remainder and floor_divide of float32 are NumPy's bit for bit, also where a
    device computes the remainder through doubles (expressions._fmod_helper): quotients
    on both sides of 2**28, remainders that are zero (their sign), every pair of special
    values, and random bit patterns (subnormals, huge and tiny quotients)."""
    rng = np.random.default_rng(28)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38,
                        3.4e38, -3.4e38, 1.0, -1.0, 0.1, -0.1, 3.0, -7.0, 2.0**24, 2.0**28,
                        2.0**28 + 32, 2.0**29, -2.0**30, 1e10, 0.3], np.float32)
    big = rng.integers(2**27, 2**29, 2000).astype(np.float32)
    a = np.concatenate([np.repeat(special, special.size), big, -big,
                        rng.integers(0, 2**32, 6000, dtype=np.uint64).astype(np.uint32)
                        .view(np.float32)])
    b = np.concatenate([np.tile(special, special.size),
                        rng.choice(np.float32([1.0, 0.5, -3.0, 0.99999994, 1.0000001]), 4000),
                        rng.integers(0, 2**32, 6000, dtype=np.uint64).astype(np.uint32)
                        .view(np.float32)])
    a[-2000:], b[-2000:] = (rng.standard_normal(2000) * 100).astype(np.float32), \
        (rng.standard_normal(2000) * 3).astype(np.float32)
    ga_a, ga_b = ga.asarray(a, device=device), ga.asarray(b, device=device)
    for name in ("fmod", "remainder", "floor_divide"):
        got = _call(name, ga_a, ga_b).get()
        with np.errstate(all="ignore"):
            want = getattr(np, name)(a, b)
        if name == "floor_divide":  # the standard, not NumPy, for an infinite operand
            finite = np.isinf(a) == np.isinf(b)
            got, want = got[finite], want[finite]
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), (name, a[~same][:5], b[~same][:5], got[~same][:5])


def test_round_halves_to_even_and_sign_of_nan(device):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, np.nan, -0.0], np.float32)
    g = ga.asarray(x, device=device)
    assert_close(ga.round(g).get(), np.rint(x), device.backend)
    assert np.isnan(ga.sign(g).get()[5])
    m = ga.maximum(g, 0.0).get()
    assert np.isnan(m[5]), "maximum propagates NaN"


def test_where_with_scalars_and_broadcast_condition(device):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    g = ga.asarray(x, device=device)
    got = ga.where(g > 0, g, 0)
    assert got.dtype == np.float32
    assert_close(got.get(), np.where(x > 0, x, np.float32(0)), device.backend)
    cond = ga.asarray(np.array([True, False, True, False]), device=device)
    got = ga.where(cond, 1.5, g)
    assert_close(got.get(), np.where(np.array([True, False, True, False]), np.float32(1.5), x),
                 device.backend)
    with pytest.raises(TypeError, match="bool condition"):
        ga.where(g, g, 0)


def test_clip_bounds_missing_arrays_and_out_of_range(device):
    x = np.arange(-5, 6, dtype=np.int8)
    g = ga.asarray(x, device=device)
    assert ga.clip(g, -2, 3).get().tolist() == np.clip(x, -2, 3).tolist()
    assert ga.clip(g, max=1).get().tolist() == np.clip(x, None, 1).tolist()
    assert ga.clip(g, -1000, 1000).get().tolist() == x.tolist()
    assert ga.clip(g).dtype == np.int8
    f = ga.asarray(np.array([np.nan, -3.0, 0.5, 9.0], np.float32), device=device)
    lo = ga.asarray(np.array([0.0, 0.0, 1.0, 0.0], np.float32), device=device)
    got = ga.clip(f, lo, 2.0).get()
    assert np.isnan(got[0]) and got[1:].tolist() == [0.0, 1.0, 2.0]


def test_complex_functions(device):
    z = np.array([1 + 2j, -3 - 0.5j, 0j, 2j], np.complex64)
    g = ga.asarray(z, device=device)
    assert ga.real(g).dtype == np.float32 and ga.real(g).get().tolist() == z.real.tolist()
    assert ga.imag(g).get().tolist() == z.imag.tolist()
    assert ga.conj(g).get().tolist() == np.conj(z).tolist()
    assert_close(ga.abs(g).get(), np.abs(z), device.backend, "abs")
    assert_close(ga.exp(g).get(), np.exp(z), device.backend, "exp")
    assert_close((g * g + 1).get(), z * z + 1, device.backend, "arithmetic")
    assert ga.real(ga.asarray(np.arange(3), device=device)).dtype == np.int64
    with pytest.raises(TypeError, match="imag"):
        ga.imag(ga.zeros(3, dtype="float32", device=device))


def test_where_into_its_own_second_operand(device):
    """``where(cond, x, y)`` written into ``x`` itself (copyto(where=), in-place masking)
    keeps x's values where cond holds: the cpu engine must not write y over x first."""
    from gpuarrays._compute.dispatch import apply
    from gpuarrays._compute.table import OPS

    h = np.arange(6.0, dtype=np.float32)
    x = ga.asarray(h, device=device)
    apply(OPS["where"], (x > 2, x, ga.zeros(6, dtype=np.float32, device=device)), x)
    np.testing.assert_array_equal(x.get(), np.where(h > 2, h, 0))
    y = ga.asarray(h, device=device)
    apply(OPS["where"], (y > 2, y[::-1], y), y)  # x overlaps out, reversed
    np.testing.assert_array_equal(y.get(), np.where(h > 2, h[::-1], h))
