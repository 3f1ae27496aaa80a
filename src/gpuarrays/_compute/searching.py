"""The standard's searching functions built on reductions: argmax, argmin, count_nonzero.

Results are int64 arrays on the array's device (docs/reductions.md).  ``argmax``
and ``argmin`` give the first index on ties and the index of the first NaN when
there is one, as NumPy; over ``axis=None`` the index is into the C-order
flattening.  ``ValueError`` for an empty sequence.
"""

from __future__ import annotations

from .reductions import reduce

__all__ = ["argmax", "argmin", "count_nonzero"]


def argmax(x, /, *, axis=None, keepdims=False):
    """The index of the largest element over ``axis`` (None or an int)."""
    return reduce("argmax", x, axis, keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    """The index of the smallest element over ``axis`` (None or an int)."""
    return reduce("argmin", x, axis, keepdims)


def count_nonzero(x, /, *, axis=None, keepdims=False):
    """The number of non-zero elements over ``axis`` (None, an int or a tuple)."""
    return reduce("count_nonzero", x, axis, keepdims)
