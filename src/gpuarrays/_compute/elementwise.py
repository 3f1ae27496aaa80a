"""The elementwise functions of the array API standard, as thin wrappers over one table.

Each function describes nothing itself: its row in ``table.py`` says what it
accepts and how its result is typed, ``dispatch.apply`` checks, allocates and
runs it (docs/compute.md).  Operands are gpuarrays arrays and Python scalars
(weak: ``x + 1`` keeps ``x``'s dtype); at least one must be an array.  Results
are new arrays on the operands' device, from the pool or the active
``ga.cached`` scope.  Errors, raised before anything is allocated: ``TypeError``
for a dtype the function does not take, ``ValueError`` for shapes that do not
broadcast or arrays on different devices, ``OverflowError`` for a Python int
that does not fit, ``FreedArrayError`` for a freed array.
"""

from __future__ import annotations

import builtins
import functools
import math

import numpy as np

from .. import _core
from .._array.make import ArrayBase
from .dispatch import apply, power
from .promotion import SCALAR_TYPES
from .table import OPS


def _row(fn):
    """``fn``, a function whose whole body is ``apply(OPS[name], operands)``, as a compiled
    ``_core.Function``: a call with exactly its operands runs that with no Python frame in
    between (about 0.1 us of a 0.6 us call on 1 000 elements, docs/performance.md); any
    other call, with its errors, is ``fn``'s own.  Name, docstring and signature are
    ``fn``'s (``functools.update_wrapper``); it pickles by name as a function does."""
    nin = fn.__code__.co_posonlyargcount
    return functools.update_wrapper(_core.Function(OPS[fn.__name__], fn, nin), fn)

__all__ = [
    "abs",
    "acos",
    "acosh",
    "add",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bitwise_and",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "ceil",
    "clip",
    "conj",
    "copysign",
    "cos",
    "cosh",
    "divide",
    "equal",
    "exp",
    "expm1",
    "floor",
    "floor_divide",
    "greater",
    "greater_equal",
    "hypot",
    "imag",
    "isfinite",
    "isinf",
    "isnan",
    "less",
    "less_equal",
    "log",
    "log10",
    "log1p",
    "log2",
    "logaddexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "nextafter",
    "not_equal",
    "positive",
    "pow",
    "real",
    "reciprocal",
    "remainder",
    "round",
    "sign",
    "signbit",
    "sin",
    "sinh",
    "sqrt",
    "square",
    "subtract",
    "tan",
    "tanh",
    "trunc",
    "where",
    # NumPy's ufuncs beyond the standard (table.NUMPY_ONLY)
    "bitwise_count",
    "cbrt",
    "deg2rad",
    "degrees",
    "exp2",
    "fabs",
    "float_power",
    "fmax",
    "fmin",
    "fmod",
    "gcd",
    "heaviside",
    "lcm",
    "ldexp",
    "logaddexp2",
    "rad2deg",
    "radians",
]


@_row
def abs(x, /):
    """Absolute value (``|x|``; the magnitude, a real dtype, for complex)."""
    return apply(OPS["abs"], (x,))


@_row
def acos(x, /):
    """Inverse cosine, in radians."""
    return apply(OPS["acos"], (x,))


@_row
def acosh(x, /):
    """Inverse hyperbolic cosine."""
    return apply(OPS["acosh"], (x,))


@_row
def add(x1, x2, /):
    """``x1 + x2``."""
    return apply(OPS["add"], (x1, x2))


@_row
def asin(x, /):
    """Inverse sine, in radians."""
    return apply(OPS["asin"], (x,))


@_row
def asinh(x, /):
    """Inverse hyperbolic sine."""
    return apply(OPS["asinh"], (x,))


@_row
def atan(x, /):
    """Inverse tangent, in radians."""
    return apply(OPS["atan"], (x,))


@_row
def atan2(x1, x2, /):
    """Inverse tangent of ``x1 / x2`` in the quadrant of the point ``(x2, x1)``."""
    return apply(OPS["atan2"], (x1, x2))


@_row
def atanh(x, /):
    """Inverse hyperbolic tangent."""
    return apply(OPS["atanh"], (x,))


@_row
def bitwise_and(x1, x2, /):
    """``x1 & x2``."""
    return apply(OPS["bitwise_and"], (x1, x2))


@_row
def bitwise_left_shift(x1, x2, /):
    """``x1 << x2`` (shifts by the width or more give 0, as NumPy)."""
    return apply(OPS["bitwise_left_shift"], (x1, x2))


@_row
def bitwise_invert(x, /):
    """``~x``."""
    return apply(OPS["bitwise_invert"], (x,))


@_row
def bitwise_or(x1, x2, /):
    """``x1 | x2``."""
    return apply(OPS["bitwise_or"], (x1, x2))


@_row
def bitwise_right_shift(x1, x2, /):
    """``x1 >> x2`` (arithmetic for signed types, as NumPy)."""
    return apply(OPS["bitwise_right_shift"], (x1, x2))


@_row
def bitwise_xor(x1, x2, /):
    """``x1 ^ x2``."""
    return apply(OPS["bitwise_xor"], (x1, x2))


@_row
def ceil(x, /):
    """Smallest integer not below ``x`` (integers unchanged)."""
    return apply(OPS["ceil"], (x,))


@_row
def conj(x, /):
    """Complex conjugate (real values unchanged)."""
    return apply(OPS["conj"], (x,))


@_row
def copysign(x1, x2, /):
    """``|x1|`` with the sign of ``x2``."""
    return apply(OPS["copysign"], (x1, x2))


@_row
def cos(x, /):
    """Cosine."""
    return apply(OPS["cos"], (x,))


@_row
def cosh(x, /):
    """Hyperbolic cosine."""
    return apply(OPS["cosh"], (x,))


@_row
def divide(x1, x2, /):
    """``x1 / x2`` (true division; integers give the default floating type)."""
    return apply(OPS["divide"], (x1, x2))


@_row
def equal(x1, x2, /):
    """``x1 == x2`` (bool)."""
    return apply(OPS["equal"], (x1, x2))


@_row
def exp(x, /):
    """``e ** x``."""
    return apply(OPS["exp"], (x,))


@_row
def expm1(x, /):
    """``exp(x) - 1``, accurate for small ``x``."""
    return apply(OPS["expm1"], (x,))


@_row
def floor(x, /):
    """Largest integer not above ``x`` (integers unchanged)."""
    return apply(OPS["floor"], (x,))


@_row
def floor_divide(x1, x2, /):
    """``x1 // x2`` (Python's sign rules; integer division by 0 gives 0, as NumPy)."""
    return apply(OPS["floor_divide"], (x1, x2))


@_row
def greater(x1, x2, /):
    """``x1 > x2`` (bool)."""
    return apply(OPS["greater"], (x1, x2))


@_row
def greater_equal(x1, x2, /):
    """``x1 >= x2`` (bool)."""
    return apply(OPS["greater_equal"], (x1, x2))


@_row
def hypot(x1, x2, /):
    """``sqrt(x1**2 + x2**2)`` without undue overflow."""
    return apply(OPS["hypot"], (x1, x2))


@_row
def imag(x, /):
    """Imaginary part of a complex array (the float of the same precision)."""
    return apply(OPS["imag"], (x,))


@_row
def isfinite(x, /):
    """Whether each element is finite (bool)."""
    return apply(OPS["isfinite"], (x,))


@_row
def isinf(x, /):
    """Whether each element is infinite (bool)."""
    return apply(OPS["isinf"], (x,))


@_row
def isnan(x, /):
    """Whether each element is NaN (bool)."""
    return apply(OPS["isnan"], (x,))


@_row
def less(x1, x2, /):
    """``x1 < x2`` (bool)."""
    return apply(OPS["less"], (x1, x2))


@_row
def less_equal(x1, x2, /):
    """``x1 <= x2`` (bool)."""
    return apply(OPS["less_equal"], (x1, x2))


@_row
def log(x, /):
    """Natural logarithm."""
    return apply(OPS["log"], (x,))


@_row
def log1p(x, /):
    """``log(1 + x)``, accurate for small ``x``."""
    return apply(OPS["log1p"], (x,))


@_row
def log2(x, /):
    """Base-2 logarithm."""
    return apply(OPS["log2"], (x,))


@_row
def log10(x, /):
    """Base-10 logarithm."""
    return apply(OPS["log10"], (x,))


@_row
def logaddexp(x1, x2, /):
    """``log(exp(x1) + exp(x2))`` without undue overflow."""
    return apply(OPS["logaddexp"], (x1, x2))


@_row
def logical_and(x1, x2, /):
    """Logical AND of bool arrays."""
    return apply(OPS["logical_and"], (x1, x2))


@_row
def logical_not(x, /):
    """Logical NOT of a bool array."""
    return apply(OPS["logical_not"], (x,))


@_row
def logical_or(x1, x2, /):
    """Logical OR of bool arrays."""
    return apply(OPS["logical_or"], (x1, x2))


@_row
def logical_xor(x1, x2, /):
    """Logical XOR of bool arrays."""
    return apply(OPS["logical_xor"], (x1, x2))


@_row
def maximum(x1, x2, /):
    """Elementwise maximum (NaN propagates)."""
    return apply(OPS["maximum"], (x1, x2))


@_row
def minimum(x1, x2, /):
    """Elementwise minimum (NaN propagates)."""
    return apply(OPS["minimum"], (x1, x2))


@_row
def multiply(x1, x2, /):
    """``x1 * x2``."""
    return apply(OPS["multiply"], (x1, x2))


@_row
def negative(x, /):
    """``-x`` (integers wrap, as NumPy)."""
    return apply(OPS["negative"], (x,))


@_row
def nextafter(x1, x2, /):
    """The next representable value after ``x1`` towards ``x2``."""
    return apply(OPS["nextafter"], (x1, x2))


@_row
def not_equal(x1, x2, /):
    """``x1 != x2`` (bool)."""
    return apply(OPS["not_equal"], (x1, x2))


@_row
def positive(x, /):
    """``+x`` (a copy)."""
    return apply(OPS["positive"], (x,))


def pow(x1, x2, /):
    """``x1 ** x2``.

    A Python-scalar exponent of a few values runs a cheaper row with ``pow``'s values
    (``pow(x, 2)`` squares; docs/compute.md, "Scalar exponents")."""
    return power(x1, x2)


@_row
def real(x, /):
    """Real part (real values unchanged; complex gives the float of the same precision)."""
    return apply(OPS["real"], (x,))


@_row
def reciprocal(x, /):
    """``1 / x``."""
    return apply(OPS["reciprocal"], (x,))


@_row
def remainder(x1, x2, /):
    """``x1 % x2`` (the sign of ``x2``, as Python; integer remainder by 0 gives 0)."""
    return apply(OPS["remainder"], (x1, x2))


def round(x, /, decimals=0):
    """Round to the nearest integer, halves to even (integers unchanged).

    ``decimals`` rounds to that many decimal places as ``np.round`` does (negative: to
    tens, hundreds ...): ``x * 10**decimals`` rounded half to even, divided back (for
    negative ``decimals``, ``x / 10**-decimals`` rounded, multiplied back), so the values
    are NumPy's, inexact decimal fractions included.  Integer arrays are unchanged for
    ``decimals >= 0``; for negative ``decimals`` they go through the default floating
    type and back (float32 on a device without float64, exact only below 2**24).
    """
    if decimals.__class__ is int and decimals == 0:  # the common call, checked first
        return apply(OPS["round"], (x,))
    if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)):
        raise TypeError(f"round(): decimals must be an int, got {type(decimals).__name__} "
                        f"{decimals!r:.40}")
    decimals = int(decimals)
    if decimals == 0:
        return apply(OPS["round"], (x,))
    return _round_decimals(x, decimals)


def _round_decimals(x, decimals: int):
    """``round(x, decimals)`` for ``decimals != 0``, composed of namespace operations on
    ``x``'s device (NumPy's algorithm: ``PyArray_Round``)."""
    if not isinstance(x, ArrayBase):
        return apply(OPS["round"], (x,))  # refuses the operand with the usual message
    dt = x.dtype
    if dt.kind in "iu" and decimals > 0:
        return apply(OPS["positive"], (x,))  # a copy, as NumPy's
    if dt.kind == "c":  # NumPy rounds the real and imaginary parts as real arrays
        result = apply(OPS["positive"], (x,))
        try:
            for part in (result.real, result.imag):
                with part:
                    rounded = _round_decimals(part, decimals)
                    try:
                        part[...] = rounded
                    finally:
                        rounded.free()
        except BaseException:
            result.free()
            raise
        return result
    places = builtins.abs(decimals)
    factor = 10.0 ** places if places <= 308 else math.inf  # NumPy's power_of_ten: inf
    first, second = (OPS["multiply"], OPS["divide"]) if decimals > 0 else (
        OPS["divide"], OPS["multiply"])
    scaled = apply(first, (x, factor))  # integers: the default floating type
    try:
        rounded = apply(OPS["round"], (scaled,))
    finally:
        scaled.free()
    try:
        apply(second, (rounded, factor), rounded)
        if dt.kind not in "iu":
            return rounded
        result = rounded.astype(dt)
    except BaseException:
        rounded.free()
        raise
    rounded.free()
    return result


@_row
def sign(x, /):
    """-1, 0 or 1 by sign (``x / |x|`` for complex; NaN stays NaN)."""
    return apply(OPS["sign"], (x,))


@_row
def signbit(x, /):
    """Whether the sign bit is set (bool; true for -0.0)."""
    return apply(OPS["signbit"], (x,))


@_row
def sin(x, /):
    """Sine."""
    return apply(OPS["sin"], (x,))


@_row
def sinh(x, /):
    """Hyperbolic sine."""
    return apply(OPS["sinh"], (x,))


@_row
def square(x, /):
    """``x * x``."""
    return apply(OPS["square"], (x,))


@_row
def sqrt(x, /):
    """Square root (correctly rounded)."""
    return apply(OPS["sqrt"], (x,))


@_row
def subtract(x1, x2, /):
    """``x1 - x2``."""
    return apply(OPS["subtract"], (x1, x2))


@_row
def tan(x, /):
    """Tangent."""
    return apply(OPS["tan"], (x,))


@_row
def tanh(x, /):
    """Hyperbolic tangent."""
    return apply(OPS["tanh"], (x,))


@_row
def trunc(x, /):
    """Round towards zero (integers unchanged)."""
    return apply(OPS["trunc"], (x,))


@_row
def where(condition, x1, x2, /):
    """``x1`` where ``condition`` (a bool array) is true, else ``x2``, broadcast together.

    ``x1``/``x2`` may be Python scalars (weak); the result has their promoted dtype.
    """
    return apply(OPS["where"], (condition, x1, x2))


def _bound(x, value, low: bool):
    """A missing bound, or a Python int beyond ``x``'s integer range, as the nearest limit."""
    dt = getattr(x, "dtype", None)
    if dt is None or (value is not None and type(value) not in SCALAR_TYPES):
        return value
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if value is None:
            return int(info.min if low else info.max)
        if type(value) is int:
            return max(int(info.min), min(int(info.max), value))
        return value
    if value is None:
        return float("-inf") if low else float("inf")
    return value


def clip(x, /, min=None, max=None):
    """``x`` limited to ``[min, max]`` (either may be ``None``); the result has ``x``'s dtype.

    ``min``/``max`` may be arrays (broadcast) or Python scalars; an integer bound
    beyond ``x``'s range is clamped to it.  NaN in ``x`` or a bound propagates.
    """
    return apply(OPS["clip"], (x, _bound(x, min, True), _bound(x, max, False)))


# NumPy's ufuncs beyond the standard (table.NUMPY_ONLY): NumPy's names, loops and dtypes ----

@_row
def bitwise_count(x, /):
    """The number of 1-bits in ``|x|`` (uint8), as ``np.bitwise_count``."""
    return apply(OPS["bitwise_count"], (x,))


@_row
def cbrt(x, /):
    """Cube root (bool and integers as NumPy: ``int8`` gives float16 ...)."""
    return apply(OPS["cbrt"], (x,))


@_row
def deg2rad(x, /):
    """Degrees to radians: ``x * (pi / 180)``."""
    return apply(OPS["deg2rad"], (x,))


@_row
def degrees(x, /):
    """Radians to degrees: ``x * (180 / pi)`` (``np.degrees``, the same as ``rad2deg``)."""
    return apply(OPS["degrees"], (x,))


@_row
def exp2(x, /):
    """``2 ** x`` (complex: ``exp(x * ln 2)``, as NumPy)."""
    return apply(OPS["exp2"], (x,))


@_row
def fabs(x, /):
    """Absolute value of real values as a floating type (``np.fabs``: integers give floats)."""
    return apply(OPS["fabs"], (x,))


@_row
def float_power(x1, x2, /):
    """``x1 ** x2`` in float64 or complex128 (float32/complex64 on a device without float64)."""
    return apply(OPS["float_power"], (x1, x2))


@_row
def fmax(x1, x2, /):
    """Elementwise maximum ignoring NaN: a NaN meets a number, the number wins (``np.fmax``)."""
    return apply(OPS["fmax"], (x1, x2))


@_row
def fmin(x1, x2, /):
    """Elementwise minimum ignoring NaN: a NaN meets a number, the number wins (``np.fmin``)."""
    return apply(OPS["fmin"], (x1, x2))


@_row
def fmod(x1, x2, /):
    """C's remainder, with the sign of ``x1`` (integer ``fmod`` by 0 gives 0, as NumPy)."""
    return apply(OPS["fmod"], (x1, x2))


@_row
def gcd(x1, x2, /):
    """Greatest common divisor of ``|x1|`` and ``|x2|`` (``gcd(0, 0)`` is 0)."""
    return apply(OPS["gcd"], (x1, x2))


@_row
def heaviside(x1, x2, /):
    """Heaviside step: 0 for ``x1 < 0``, ``x2`` at ``x1 == 0``, 1 for ``x1 > 0``, NaN stays."""
    return apply(OPS["heaviside"], (x1, x2))


@_row
def lcm(x1, x2, /):
    """Least common multiple of ``|x1|`` and ``|x2|`` (wraps like NumPy's on overflow)."""
    return apply(OPS["lcm"], (x1, x2))


@_row
def ldexp(x1, x2, /):
    """``x1 * 2 ** x2`` exactly; ``x2`` is an integer array or a Python int (a float ``x2``
    is NumPy's TypeError)."""
    return apply(OPS["ldexp"], (x1, x2))


@_row
def logaddexp2(x1, x2, /):
    """``log2(2 ** x1 + 2 ** x2)`` without undue overflow."""
    return apply(OPS["logaddexp2"], (x1, x2))


@_row
def rad2deg(x, /):
    """Radians to degrees: ``x * (180 / pi)``."""
    return apply(OPS["rad2deg"], (x,))


@_row
def radians(x, /):
    """Degrees to radians: ``x * (pi / 180)`` (``np.radians``, the same as ``deg2rad``)."""
    return apply(OPS["radians"], (x,))
