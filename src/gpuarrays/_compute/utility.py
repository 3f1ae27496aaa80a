"""The standard's utility functions: all, any (reductions) and diff (elementwise on views).

``all``/``any`` give bool arrays (a 0-d array for a full reduction, still on the
device); ``diff`` subtracts neighbouring elements through the elementwise
dispatch (``not_equal`` for bool, as NumPy), so it runs wherever subtraction
does (docs/reductions.md, "diff").
"""

from __future__ import annotations

import operator

import numpy as np

from .._array.make import ArrayBase, new_array
from .._array.transfer import copy_raw
from .dispatch import apply
from .ownership import filling
from .promotion import SCALAR_TYPES, key_of, result_type
from .reductions import normalize_axes, reduce
from .table import OPS

__all__ = ["all", "any", "diff"]


def all(x, /, *, axis=None, keepdims=False):
    """Whether every element over ``axis`` is non-zero (True for nothing)."""
    return reduce("all", x, axis, keepdims)


def any(x, /, *, axis=None, keepdims=False):
    """Whether some element over ``axis`` is non-zero (False for nothing)."""
    return reduce("any", x, axis, keepdims)


def _along(ndim: int, ax: int, sl: slice) -> tuple:
    idx = [slice(None)] * ndim
    idx[ax] = sl
    return tuple(idx)


def _check_part(what: str, x, p) -> None:
    if type(p) in SCALAR_TYPES or isinstance(p, np.generic):  # NumPy scalars: their dtype
        return
    if not isinstance(p, ArrayBase):
        raise TypeError(f"diff(): {what} must be a gpuarrays array or a Python or NumPy scalar, "
                        f"got {type(p).__name__}")
    p._live()
    if p._storage.device != x._storage.device:
        raise ValueError(f"diff(): {what} is on {p._storage.device}, x on "
                         f"{x._storage.device}; move one with to_device()")


def _joined(x, ax: int, prepend, append):
    """``concat([prepend, x, append], axis=ax)`` in a new array (scalars fill one slot)."""
    parts = [p for p in (prepend, x, append) if p is not None]
    dt = result_type(*(key_of(p) for p in parts))
    shape = list(x._shape)
    lengths = []
    for p in parts:
        if isinstance(p, ArrayBase):
            others = [k for k in range(x.ndim) if k != ax]
            if p.ndim != x.ndim or [p._shape[k] for k in others] != [x._shape[k] for k in others]:
                raise ValueError(f"diff(): prepend/append of shape {p._shape} does not match "
                                 f"x of shape {x._shape} except along axis {ax}")
            lengths.append(p._shape[ax])
        else:
            lengths.append(1)
    shape[ax] = sum(lengths)
    out = new_array(tuple(shape), dt, x._storage.device, x._storage.kind)
    with filling(out):
        start = 0
        for p, n in zip(parts, lengths, strict=True):
            with out[_along(out.ndim, ax, slice(start, start + n))] as part:
                if isinstance(p, ArrayBase):
                    copy_raw(part, p)
                else:
                    part.fill(p)
            start += n
    return out


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """The ``n``-th forward difference along ``axis``: ``x[1:] - x[:-1]`` repeated ``n``
    times (``prepend``/``append`` are joined to ``x`` along ``axis`` first).

    ``TypeError`` for a non-array ``x`` or bad ``n``/``axis``; ``ValueError`` for a
    0-d ``x``, a negative ``n``, mismatched ``prepend``/``append``.
    """
    if not isinstance(x, ArrayBase):
        raise TypeError(f"diff() takes a gpuarrays array, got {type(x).__name__}")
    x._live()
    if x.ndim == 0:
        raise ValueError("diff() needs an array with at least one dimension, got a 0-d array")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"diff(): n must be an int, got {n!r}") from None
    if n < 0:
        raise ValueError(f"diff(): n must be >= 0, got {n}")
    if not isinstance(axis, int | np.integer):
        raise TypeError(f"diff(): axis must be an int, got {axis!r}")
    (ax,) = normalize_axes("diff", axis, x.ndim)
    for what, p in (("prepend", prepend), ("append", append)):
        if p is not None:
            _check_part(what, x, p)
    cur = x if prepend is None and append is None else _joined(x, ax, prepend, append)
    if n == 0:
        return cur.copy() if cur is x else cur
    def difference(cur):
        op = OPS["not_equal" if cur._dtype == np.dtype(bool) else "subtract"]
        hi = _along(cur.ndim, ax, slice(1, None))
        lo = _along(cur.ndim, ax, slice(0, max(cur._shape[ax] - 1, 0)))
        with cur[hi] as a1, cur[lo] as a0:
            return apply(op, (a1, a0))

    return run_chain(cur, [difference] * n, keep=x)


def run_chain(x, steps, keep=None):
    """Apply ``steps`` (callables from the current array to a new one) in turn, starting
    from ``x``.  Each intermediate is freed once the next step has read it, and the current
    one when a step raises; ``x`` itself, or ``keep`` when given, never is."""
    keep = x if keep is None else keep
    cur = x
    try:
        for step in steps:
            nxt = step(cur)
            if cur is not keep:
                cur.free()
            cur = nxt
    except BaseException:
        if cur is not keep:
            cur.free()
        raise
    return cur
