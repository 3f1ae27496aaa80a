"""The standard's statistical functions: thin wrappers over the reductions' table.

Each function types its result as the standard says and runs on the array's
device (docs/reductions.md).  A full reduction gives a 0-d array on the device:
nothing reaches the host until ``float(r)``/``r.item()``.  Errors are those of
:func:`gpuarrays._compute.reductions.reduce`/``scan``: ``TypeError`` for a dtype
the function does not take, ``ValueError``/``AxisError`` for axes (and for
``max``/``min`` of nothing), ``FreedArrayError`` for a freed array.
"""

from __future__ import annotations

import numpy as np

from .reductions import reduce, scan
from .utility import all as all_
from .utility import any as any_

__all__ = ["cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum",
           "var", "reduce_ufunc"]


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    """The sum over ``axis``; signed ints and bool sum in int64, unsigned in uint64,
    float16 accumulates in float32; the sum of nothing is 0."""
    return reduce("sum", x, axis, keepdims, dtype)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    """The product over ``axis`` (typed as :func:`sum`); the product of nothing is 1."""
    return reduce("prod", x, axis, keepdims, dtype)


def max(x, /, *, axis=None, keepdims=False):
    """The largest element over ``axis`` (NaN if any is NaN); ``ValueError`` for nothing."""
    return reduce("max", x, axis, keepdims)


def min(x, /, *, axis=None, keepdims=False):
    """The smallest element over ``axis`` (NaN if any is NaN); ``ValueError`` for nothing."""
    return reduce("min", x, axis, keepdims)


def mean(x, /, *, axis=None, keepdims=False, dtype=None):
    """The arithmetic mean over ``axis`` (integers give the default floating type, float16
    accumulates in float32); the mean of nothing is NaN."""
    return reduce("mean", x, axis, keepdims, dtype)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """The variance over ``axis``, dividing by ``N - correction`` (two passes: accurate
    for large means); NaN when ``N - correction <= 0`` and the sum of squares is 0."""
    return reduce("var", x, axis, keepdims, None, correction)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    """The standard deviation over ``axis``: the square root of :func:`var`."""
    return reduce("std", x, axis, keepdims, None, correction)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """The running sum along ``axis`` (optional for 1-d ``x``); ``include_initial``
    prepends a 0, so the axis grows by one.  Typed as :func:`sum`."""
    return scan("cumulative_sum", x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """The running product along ``axis`` (optional for 1-d ``x``); ``include_initial``
    prepends a 1.  Typed as :func:`sum`."""
    return scan("cumulative_prod", x, axis, dtype, include_initial)


_REDUCE = {np.add: sum, np.multiply: prod, np.maximum: max, np.minimum: min,
           np.logical_and: all_, np.logical_or: any_}
_ACCUMULATE = {np.add: cumulative_sum, np.multiply: cumulative_prod}
_NO_VALUE = getattr(np, "_NoValue", None)


def reduce_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict):
    """NumPy's ``ufunc.reduce``/``ufunc.accumulate`` on a gpuarrays array, else ``NotImplemented``.

    ``np.add.reduce(a, axis=0)`` is ``sum(a, axis=0)`` (NumPy's default axis is 0;
    ``axis=None`` reduces everything), ``np.maximum.reduce`` is ``max`` and so on;
    ``np.add.accumulate(a)`` is ``cumulative_sum`` (typed alike in both).  An
    ``out``, ``initial`` or ``where`` argument, or another ufunc, gives ``NotImplemented``.
    """
    table = _REDUCE if method == "reduce" else _ACCUMULATE if method == "accumulate" else None
    if table is None or ufunc not in table or len(inputs) != 1:
        return NotImplemented
    kw = dict(kwargs)
    out = kw.pop("out", None)
    if not (out is None or (type(out) is tuple and len(out) == 1 and out[0] is None)):
        return NotImplemented
    if kw.pop("initial", _NO_VALUE) is not _NO_VALUE or kw.pop("where", True) is not True:
        return NotImplemented
    axis = kw.pop("axis", 0)
    dtype = kw.pop("dtype", None)
    if method == "reduce":
        keepdims = kw.pop("keepdims", False)
        if kw:
            return NotImplemented
        fn = table[ufunc]
        if fn in (max, min, all_, any_):
            if dtype is not None:
                return NotImplemented
            return fn(inputs[0], axis=axis, keepdims=keepdims)
        return fn(inputs[0], axis=axis, dtype=dtype, keepdims=keepdims)
    if kw:
        return NotImplemented
    x = inputs[0]
    return table[ufunc](x, axis=axis, dtype=dtype)
