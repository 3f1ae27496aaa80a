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

__all__ = ["CATEGORIES", "DTYPES", "OPS", "BY_UFUNC", "Op"]

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
    ]


OPS: dict[str, Op] = {op.name: op for op in _rows()}
"""The 67 elementwise functions of the standard plus ``where``, by array API name."""

BY_UFUNC: dict[np.ufunc, Op] = {op.ufunc: op for op in OPS.values()
                                if op.ufunc is not None and op.name != "clip"}
"""NumPy ufunc -> row, for ``__array_ufunc__`` (``np.add(a, b)`` on gpuarrays arrays)."""
