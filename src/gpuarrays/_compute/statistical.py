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

from .._array.make import ArrayBase
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
_IDENTITY = {np.add: 0, np.multiply: 1, np.logical_and: True, np.logical_or: False}
_NO_VALUE = getattr(np, "_NoValue", None)


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


def _out_array(out):
    """``out=`` as NumPy passes it to ``__array_ufunc__``: None, or one gpuarrays array;
    ``NotImplemented`` for anything else."""
    if type(out) is tuple and len(out) == 1:
        out = out[0]
    return out if out is None or isinstance(out, ArrayBase) else NotImplemented


def reduce_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict):
    """NumPy's ``ufunc.reduce``/``ufunc.accumulate`` on a gpuarrays array, else ``NotImplemented``.

    ``np.add.reduce(a, axis=0)`` is ``sum(a, axis=0)`` (NumPy's default axis is 0;
    ``axis=None`` reduces everything), ``np.maximum.reduce`` is ``max`` and so on, with
    NumPy's ``dtype``, ``keepdims``, ``out``, ``initial`` (combined with the reduction;
    the answer over nothing) and ``where`` (a bool gpuarrays mask: the elements it leaves
    out count as the ufunc's identity, or as ``initial`` for ``maximum``/``minimum``); ``np.add.accumulate(a)`` is
    ``cumulative_sum`` (typed alike in both), with ``out``.  Every call NumPy makes is
    answered here or refused by the caller: NumPy 2.4 keeps the operand of a refused
    ``reduce`` alive for good.
    """
    table = _REDUCE if method == "reduce" else _ACCUMULATE if method == "accumulate" else None
    if table is None or ufunc not in table or len(inputs) != 1:
        return NotImplemented
    kw = dict(kwargs)
    out = _out_array(kw.pop("out", None))
    if out is NotImplemented:
        return NotImplemented
    x = inputs[0]
    axis = kw.pop("axis", 0)
    dtype = kw.pop("dtype", None)
    if method == "accumulate":
        if kw:
            return NotImplemented
        r = table[ufunc](x, axis=axis, dtype=dtype)
        return r if out is None else write_into(f"{ufunc.__name__}.accumulate", r, out)
    initial = kw.pop("initial", _NO_VALUE)
    where = kw.pop("where", True)
    keepdims = kw.pop("keepdims", False)
    if kw or not (where is True or (isinstance(where, ArrayBase) and where.dtype == bool)):
        return NotImplemented
    fn = table[ufunc]
    if fn in (max, min, all_, any_) and dtype is not None:
        return NotImplemented
    name = f"{ufunc.__name__}.reduce"
    given = initial is not _NO_VALUE and initial is not None
    if where is not True and not given and ufunc not in _IDENTITY:
        raise ValueError(f"numpy.{name}: {ufunc.__name__} has no identity, so a where= "
                         f"mask needs initial= (the value of the elements it leaves out)")
    from .elementwise import where as _where

    left_out = _IDENTITY[ufunc] if ufunc in _IDENTITY else initial
    masked = None if where is True else _where(where, x, left_out)
    try:
        r = _reduced(ufunc, fn, x if masked is None else masked, axis, keepdims, dtype,
                     initial if given else _NO_VALUE)
    finally:
        if masked is not None:
            masked.free()
    return r if out is None else write_into(name, r, out)


def _reduced(ufunc, fn, x, axis, keepdims, dtype, initial):
    """``fn`` over ``axis``, combined with ``initial`` by ``ufunc``'s namespace function
    (``initial`` alone where nothing is reduced)."""
    from . import elementwise

    kw = {} if fn in (max, min, all_, any_) else {"dtype": dtype}
    if initial is not _NO_VALUE:
        axes = range(x.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
        if any(x.shape[a] == 0 for a in axes) and fn in (max, min):
            from .creation import full

            shape = tuple(1 if i in axes or i - x.ndim in axes else n
                          for i, n in enumerate(x.shape)
                          if keepdims or not (i in axes or i - x.ndim in axes))
            return full(shape, initial, dtype=x.dtype, device=x.device)
    r = fn(x, axis=axis, keepdims=keepdims, **kw)
    if initial is _NO_VALUE:
        return r
    with r:
        return getattr(elementwise, ufunc.__name__)(r, initial)
