"""One row per elementwise operation: the single description both engines read.

A row names the operation as the array API standard does, its arity, the dtypes
it accepts (the standard's categories, plus float16, which gpuarrays stores),
the NumPy ufunc that is both the cpu engine and the oracle for result types,
and the rule that types its result (docs/compute.md, "Type promotion").  The C
expression each device kernel evaluates lives beside this table, in
``_compute/device/expressions.py``, keyed by the same names; a test checks that
the two describe the same operations for the same dtype categories.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy._core import umath  # the clip ufunc (np.clip is a Python wrapper around it)

__all__ = ["CATEGORIES", "DTYPES", "OPS", "NUMPY_ONLY", "BY_UFUNC", "POWERS", "POWER_RULES", "Op",
           "scalar_power"]

DTYPES = tuple(np.dtype(n) for n in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128"))
"""Every dtype an elementwise operation may accept (structured dtypes never)."""

_BOOL = frozenset(DTYPES[:1])
_INT = frozenset(DTYPES[1:9])
_REAL_FLOAT = frozenset(DTYPES[9:12])
_COMPLEX = frozenset(DTYPES[12:])

CATEGORIES: dict[str, frozenset[np.dtype]] = {
    "boolean": _BOOL,
    "integer": _INT,
    "integer or boolean": _INT | _BOOL,
    "real numeric": _INT | _REAL_FLOAT,
    "numeric": _INT | _REAL_FLOAT | _COMPLEX,
    "real floating-point": _REAL_FLOAT,
    "complex floating-point": _COMPLEX,
    "floating-point": _REAL_FLOAT | _COMPLEX,
    "any": frozenset(DTYPES),
    # NumPy's ufuncs beyond the standard take bool and integers where NumPy's loops do
    # (``np.cbrt(int8)`` is float16: its loop resolution types the result)
    "boolean or real numeric": _BOOL | _INT | _REAL_FLOAT,
}
"""The standard's dtype categories (float16 counts as real floating-point here)."""


@dataclass(frozen=True, eq=False)
class Op:
    """One elementwise operation.

    ``typing`` is the rule for the result dtype: ``"ufunc"`` (NumPy's loop
    resolution for ``ufunc``, Python scalars weak), ``"round"`` (as ``ufunc``
    but integers stay themselves), ``"part"`` (``real``/``imag``: complex gives
    the float of the same precision), ``"first"`` (``clip``: the first
    argument's dtype) or ``"where"`` (condition bool, the other two promoted).
    """

    name: str
    nin: int
    category: str
    ufunc: np.ufunc | None
    typing: str = "ufunc"

    @property
    def accepts(self) -> frozenset[np.dtype]:
        return CATEGORIES[self.category]


def _rows() -> list[Op]:
    u = np
    return [
        Op("abs", 1, "numeric", u.absolute),
        Op("acos", 1, "floating-point", u.arccos),
        Op("acosh", 1, "floating-point", u.arccosh),
        Op("add", 2, "numeric", u.add),
        Op("asin", 1, "floating-point", u.arcsin),
        Op("asinh", 1, "floating-point", u.arcsinh),
        Op("atan", 1, "floating-point", u.arctan),
        Op("atan2", 2, "real floating-point", u.arctan2),
        Op("atanh", 1, "floating-point", u.arctanh),
        Op("bitwise_and", 2, "integer or boolean", u.bitwise_and),
        Op("bitwise_left_shift", 2, "integer", u.left_shift),
        Op("bitwise_invert", 1, "integer or boolean", u.invert),
        Op("bitwise_or", 2, "integer or boolean", u.bitwise_or),
        Op("bitwise_right_shift", 2, "integer", u.right_shift),
        Op("bitwise_xor", 2, "integer or boolean", u.bitwise_xor),
        Op("ceil", 1, "real numeric", u.ceil),
        Op("clip", 3, "real numeric", umath.clip, "first"),
        Op("conj", 1, "numeric", u.conjugate),
        Op("copysign", 2, "real floating-point", u.copysign),
        Op("cos", 1, "floating-point", u.cos),
        Op("cosh", 1, "floating-point", u.cosh),
        Op("divide", 2, "numeric", u.true_divide),
        Op("equal", 2, "any", u.equal),
        Op("exp", 1, "floating-point", u.exp),
        Op("expm1", 1, "floating-point", u.expm1),
        Op("floor", 1, "real numeric", u.floor),
        Op("floor_divide", 2, "real numeric", u.floor_divide),
        Op("greater", 2, "real numeric", u.greater),
        Op("greater_equal", 2, "real numeric", u.greater_equal),
        Op("hypot", 2, "real floating-point", u.hypot),
        Op("imag", 1, "complex floating-point", None, "part"),
        Op("isfinite", 1, "numeric", u.isfinite),
        Op("isinf", 1, "numeric", u.isinf),
        Op("isnan", 1, "numeric", u.isnan),
        Op("less", 2, "real numeric", u.less),
        Op("less_equal", 2, "real numeric", u.less_equal),
        Op("log", 1, "floating-point", u.log),
        Op("log1p", 1, "floating-point", u.log1p),
        Op("log2", 1, "floating-point", u.log2),
        Op("log10", 1, "floating-point", u.log10),
        Op("logaddexp", 2, "real floating-point", u.logaddexp),
        Op("logical_and", 2, "boolean", u.logical_and),
        Op("logical_not", 1, "boolean", u.logical_not),
        Op("logical_or", 2, "boolean", u.logical_or),
        Op("logical_xor", 2, "boolean", u.logical_xor),
        Op("maximum", 2, "real numeric", u.maximum),
        Op("minimum", 2, "real numeric", u.minimum),
        Op("multiply", 2, "numeric", u.multiply),
        Op("negative", 1, "numeric", u.negative),
        Op("nextafter", 2, "real floating-point", u.nextafter),
        Op("not_equal", 2, "any", u.not_equal),
        Op("positive", 1, "numeric", u.positive),
        Op("pow", 2, "numeric", u.power),
        Op("real", 1, "numeric", None, "part"),
        Op("reciprocal", 1, "floating-point", u.reciprocal),
        Op("remainder", 2, "real numeric", u.remainder),
        Op("round", 1, "numeric", u.rint, "round"),
        Op("sign", 1, "numeric", u.sign),
        Op("signbit", 1, "real floating-point", u.signbit),
        Op("sin", 1, "floating-point", u.sin),
        Op("sinh", 1, "floating-point", u.sinh),
        Op("square", 1, "numeric", u.square),
        Op("sqrt", 1, "floating-point", u.sqrt),
        Op("subtract", 2, "numeric", u.subtract),
        Op("tan", 1, "floating-point", u.tan),
        Op("tanh", 1, "floating-point", u.tanh),
        Op("trunc", 1, "real numeric", u.trunc),
        Op("where", 3, "any", None, "where"),
        # NumPy's ufuncs beyond the standard (issue 31): NumPy's names, loops and dtypes
        Op("bitwise_count", 1, "integer or boolean", u.bitwise_count),
        Op("cbrt", 1, "boolean or real numeric", u.cbrt),
        Op("deg2rad", 1, "boolean or real numeric", u.deg2rad),
        Op("degrees", 1, "boolean or real numeric", u.degrees),
        Op("exp2", 1, "any", u.exp2),
        Op("fabs", 1, "boolean or real numeric", u.fabs),
        Op("float_power", 2, "any", u.float_power),
        Op("fmax", 2, "any", u.fmax),
        Op("fmin", 2, "any", u.fmin),
        Op("fmod", 2, "boolean or real numeric", u.fmod),
        Op("gcd", 2, "integer", u.gcd),
        Op("heaviside", 2, "boolean or real numeric", u.heaviside),
        Op("lcm", 2, "integer", u.lcm),
        # x2 is an integer exponent (NumPy's loops: float with int32 or int64); a float x2 is
        # NumPy's TypeError
        Op("ldexp", 2, "boolean or real numeric", u.ldexp),
        Op("logaddexp2", 2, "boolean or real numeric", u.logaddexp2),
        Op("rad2deg", 1, "boolean or real numeric", u.rad2deg),
        Op("radians", 1, "boolean or real numeric", u.radians),
    ]


OPS: dict[str, Op] = {op.name: op for op in _rows()}
"""The 67 elementwise functions of the standard plus ``where``, by array API name, then
NumPy's ufuncs beyond the standard (:data:`NUMPY_ONLY`), by NumPy's name."""

NUMPY_ONLY = frozenset((
    "bitwise_count", "cbrt", "deg2rad", "degrees", "exp2", "fabs", "float_power", "fmax", "fmin",
    "fmod", "gcd", "heaviside", "lcm", "ldexp", "logaddexp2", "rad2deg", "radians"))
"""Rows that are NumPy ufuncs, not functions of the array API standard."""

BY_UFUNC: dict[np.ufunc, Op] = {op.ufunc: op for op in OPS.values()
                                if op.ufunc is not None and op.name != "clip"}
"""NumPy ufunc -> row, for ``__array_ufunc__`` (``np.add(a, b)`` on gpuarrays arrays)."""


# Scalar exponents -----------------------------------------------------------------------
# ``x ** s``, ``pow(x, s)`` and ``np.power(x, s)`` with a Python int or float ``s`` run a
# cheaper row than ``pow`` for a few values of ``s`` (docs/compute.md, "Scalar exponents"):
# the exponent's value, which the compiled path's typings do not see, picks the row before
# dispatch (``dispatch.power``), so every engine and the compiled path run the row as they
# run any other.  NumPy decides where the result is exact: ``x ** 2`` is ``square``,
# ``x ** -1`` ``reciprocal`` and ``x ** 0.5`` ``sqrt`` in NumPy too (its operator and its
# power loop), so those are bit for bit NumPy's; ``x ** 1`` is a copy and ``x ** 0`` is 1,
# exactly what ``pow`` gives.  Where NumPy calls ``pow`` (``-0.5``, ``3``, ``-2``, ...) the cpu
# engine still does, and device kernels multiply (within the pow tests' 4 ulp).
POWERS: dict[str, Op] = {op.name: op for op in (
    # x ** 0.5: sqrt, with pow's (the standard's) values at -0 (+0) and -inf (+inf)
    Op("pow_sqrt", 1, "floating-point", np.sqrt),
    # x ** -0.5 (real): 1 / pow_sqrt(x) on devices, pow on cpu; the exponent stays an operand
    Op("pow_rsqrt", 2, "real floating-point", np.power),
    # x ** n, n an integer in SMALL_POWERS: multiplies on devices, pow on cpu
    Op("pow_int", 2, "real floating-point", np.power),
)}
"""Rows that stand in for ``pow`` with some Python-scalar exponents; not namespace functions."""

SMALL_POWERS = range(-3, 7)
"""Integer exponents device kernels compute by multiplies (``pow_int``): the products'
rounding error (``|n| - 1`` roundings, about twice that for ``n < 0``, which starts from
``1 / x``) stays within 2.5 ulp, so with ``pow``'s own error within the pow tests' 4 ulp."""


def _power_rules() -> dict[tuple[str, type], dict[float, tuple[Op, bool]]]:
    """(array dtype kind, exponent type) -> exponent value -> (row, whether the exponent
    stays an operand)."""
    square, reciprocal, positive = OPS["square"], OPS["reciprocal"], OPS["positive"]
    real: dict[float, tuple[Op, bool]] = {
        n: (POWERS["pow_int"], True) for n in SMALL_POWERS}
    real.update({2: (square, False), -1: (reciprocal, False), 1: (positive, False),
                 0.5: (POWERS["pow_sqrt"], False), -0.5: (POWERS["pow_rsqrt"], True)})
    # complex: NumPy's operator's rows (its fast path takes the int 2 and -1 and the float
    # 0.5 only: ``c ** 2.0`` multiplies in its power loop, which rounds otherwise); every other
    # exponent keeps pow, whose kernel multiplies for integer exponents as NumPy's does
    cplx_int = {2: (square, False), -1: (reciprocal, False), 1: (positive, False)}
    cplx_float = {0.5: (POWERS["pow_sqrt"], False), 1: (positive, False)}
    ints = {2: (square, False)}  # NumPy squares any array type; other powers stay exact pow
    return {("f", int): real, ("f", float): real, ("c", int): cplx_int,
            ("c", float): cplx_float, ("i", int): ints, ("u", int): ints}


POWER_RULES = _power_rules()
"""``scalar_power``'s table: (dtype kind, exponent type) -> exponent value -> (row, keep)."""


def scalar_power(dtype: np.dtype, exponent: int | float) -> tuple[Op, bool] | None:
    """The row that computes ``x ** exponent`` for an array ``x`` of ``dtype`` and a Python
    ``int`` or ``float`` exponent, and whether the exponent stays its second operand (else the
    row is unary); None: ``pow`` itself.  The row types its result as ``pow`` would."""
    rules = POWER_RULES.get((dtype.kind, type(exponent)))
    return None if rules is None else rules.get(exponent)
