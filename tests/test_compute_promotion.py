"""Type promotion (docs/compute.md, "Type promotion"): the standard's table within a kind,
NumPy 2 across kinds, weak Python scalars, per-device float64."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gpuarrays as ga

_I = ["int8", "int16", "int32", "int64"]
_U = ["uint8", "uint16", "uint32", "uint64"]
_F = ["float32", "float64"]
_C = ["complex64", "complex128"]


def _standard_table() -> dict[tuple[str, str], str]:
    """The promotion table of the array API standard, written out as it states it."""
    table = {("bool", "bool"): "bool"}
    for group in (_I, _U, _F, _C):
        for a, b in itertools.product(group, repeat=2):
            table[a, b] = group[max(group.index(a), group.index(b))]
    wider = {"uint8": "int16", "uint16": "int32", "uint32": "int64"}
    for i, u in itertools.product(_I, _U[:3]):
        table[i, u] = table[u, i] = _I[max(_I.index(i), _I.index(wider[u]))]
    for f, c in itertools.product(_F, _C):
        wide = "complex128" if "64" in f or c == "complex128" else "complex64"
        table[f, c] = table[c, f] = wide
    return table


_TABLE = _standard_table()


@pytest.mark.parametrize(("a", "b"), sorted(_TABLE))
def test_the_standard_promotion_table(a, b):
    assert ga.result_type(ga.__dict__[a], ga.__dict__[b]) == np.dtype(_TABLE[a, b])
    x = ga.zeros(2, dtype=a, device="cpu")
    y = ga.zeros(2, dtype=b, device="cpu")
    assert ga.where(x == x, x, y).dtype == np.dtype(_TABLE[a, b])
    if a != "bool":
        assert (x + y).dtype == np.dtype(_TABLE[a, b])


_ALL = ["bool", *_I, *_U, *_F, *_C]
_MIXED = [(a, b) for a, b in itertools.product(_ALL, repeat=2) if (a, b) not in _TABLE]


@pytest.mark.parametrize(("a", "b"), _MIXED)
def test_mixed_kinds_as_numpy(a, b):
    assert ga.result_type(np.dtype(a), np.dtype(b)) == np.result_type(a, b)
    x = ga.zeros(2, dtype=a, device="cpu")
    y = ga.zeros(2, dtype=b, device="cpu")
    assert ga.where(x == x, x, y).dtype == np.result_type(a, b)
    if a != "bool" and b != "bool":
        assert (x * y).dtype == np.result_type(a, b)
    assert (x == y).dtype == np.bool_


@pytest.mark.parametrize("dtype", _ALL)
@pytest.mark.parametrize("scalar", [True, 1, 1.5, 1j])
def test_python_scalars_are_weak(dtype, scalar):
    want = np.result_type(np.dtype(dtype), scalar)
    assert ga.result_type(np.dtype(dtype), scalar) == want
    x = ga.ones(2, dtype=dtype, device="cpu")
    assert ga.multiply(x, scalar).dtype == want
    assert ga.multiply(scalar, x).dtype == want


def test_a_python_int_that_does_not_fit_is_an_overflow_error(device, used):
    x = ga.zeros(3, dtype="int8", device=device)
    before = used()
    for bad in (1000, -129):
        with pytest.raises(OverflowError, match=f"{bad} out of bounds for int8"):
            x + bad
    with pytest.raises(OverflowError):
        ga.zeros(2, dtype="uint8", device=device) - (-1)
    assert used() == before
    assert (x + 127).dtype == np.int8


def test_numpy_scalars_keep_their_dtype(device):
    x = ga.zeros(2, dtype="float32", device=device)
    assert (x + np.float32(1)).dtype == np.float32
    if device.info.float64:
        assert (x + np.float64(1)).dtype == np.float64


def test_integer_division_and_float_scalars_use_the_devices_default_float(device):
    i = ga.asarray(np.array([1, 2, 3], np.int32), device=device)
    want = ga.__array_namespace_info__().default_dtypes(device=device)["real floating"]
    assert (i / i).dtype == want
    assert (i + 0.5).dtype == want
    np.testing.assert_allclose((i / 2).get(), np.array([0.5, 1.0, 1.5]))


def test_result_type_needs_an_array_or_dtype():
    with pytest.raises(TypeError, match="at least one"):
        ga.result_type(1, 2.0)
    x = ga.zeros(2, dtype="int16", device="cpu")
    assert ga.result_type(x, 1) == np.int16
    assert ga.result_type(x, ga.float32) == np.float32
    with pytest.raises(TypeError):
        ga.result_type("float32")


def test_typing_for_a_device_without_float64():
    """What only a Python scalar or an integer division brings in is float32 there."""
    from gpuarrays._compute.promotion import resolve
    from gpuarrays._compute.table import OPS

    i4, f4, c8 = np.dtype("i4"), np.dtype("f4"), np.dtype("c8")
    assert resolve(OPS["divide"], (i4, i4), float64=False) == ((f4, f4), f4)
    assert resolve(OPS["add"], (i4, float), float64=False) == ((f4, f4), f4)
    assert resolve(OPS["multiply"], (i4, complex), float64=False) == ((c8, c8), c8)
    assert resolve(OPS["add"], (f4, float), float64=False) == ((f4, f4), f4)
    assert resolve(OPS["divide"], (i4, i4), float64=True)[1] == np.float64
