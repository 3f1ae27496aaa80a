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


def var(x, /, *, axis=None, correction=0.0, keepdims=False, ddof=None):
    """The variance over ``axis``, dividing by ``N - correction`` (two passes: accurate
    for large means); NaN when ``N - correction <= 0`` and the sum of squares is 0.
    ``ddof`` is NumPy's name for ``correction`` (give one of the two)."""
    return reduce("var", x, axis, keepdims, None, _correction("var", correction, ddof))


def std(x, /, *, axis=None, correction=0.0, keepdims=False, ddof=None):
    """The standard deviation over ``axis``: the square root of :func:`var`."""
    return reduce("std", x, axis, keepdims, None, _correction("std", correction, ddof))


def _correction(name: str, correction, ddof):
    if ddof is None:
        return correction
    if correction != 0:
        raise TypeError(f"{name}() got correction={correction!r} and ddof={ddof!r}: ddof is "
                        "NumPy's name for correction; give only one")
    return ddof


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """The running sum along ``axis`` (optional for 1-d ``x``); ``include_initial``
    prepends a 0, so the axis grows by one.  Typed as :func:`sum`."""
    return scan("cumulative_sum", x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """The running product along ``axis`` (optional for 1-d ``x``); ``include_initial``
    prepends a 1.  Typed as :func:`sum`."""
    return scan("cumulative_prod", x, axis, dtype, include_initial)


def write_into(name: str, result, out):
    """``out[...] = result`` under NumPy's rules for a ufunc method's ``out=`` (the same
    shape, a ``same_kind`` cast), then ``out``; ``result``'s memory goes back either way."""
    with result:
        if out.shape != result.shape:
            raise ValueError(f"numpy.{name}: out= has shape {out.shape}, the result "
                             f"{result.shape}; give an out of the result's shape")
        if not np.can_cast(result.dtype, out.dtype, "same_kind"):
            raise TypeError(f"numpy.{name}: cannot cast the result from {result.dtype} to "
                            f"out's {out.dtype} under the 'same_kind' rule")
        out[...] = result
    return out


def reduce_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict):
    """NumPy's ``ufunc.reduce``/``ufunc.accumulate`` on a gpuarrays array: moved to
    :mod:`gpuarrays._compute.ufunc_methods` (imported there lazily: it builds on the
    functions above)."""
    from .ufunc_methods import reduce_ufunc as moved

    return moved(ufunc, method, inputs, kwargs)
