"""Layout arithmetic: shapes, strides and byte offsets of derived arrays.

NumPy is both the oracle and, off the hot paths, the engine: :func:`engine`
makes a NumPy array describing a layout at a fake address, NumPy applies the
indexing/reshape/view/transpose, and :func:`from_engine` reads the resulting
layout back.  NumPy never reads or copies memory here (only view-producing
operations are applied, ``reshape(copy=False)``), so the fake address is never
dereferenced.  The fast paths (basic indexing, contiguous reshape) compute the
same numbers directly and defer to the engine for zero-size results, where
NumPy's conventions are subtle.
"""

from __future__ import annotations

import operator

import numpy as np

from .._common.raw import ndarray_at

__all__ = ["normalize_shape", "basic_index", "engine", "from_engine", "broadcast_strides"]

# Where engine arrays pretend to live: aligned, far from 0, never dereferenced.
FAKE_BASE = 1 << 44


def normalize_shape(shape: object) -> tuple[int, ...]:
    """NumPy's shape rules: an int or a sequence of non-negative ints.

    ``TypeError`` for non-integers, ``ValueError`` for negative sizes.
    """
    if type(shape) is tuple:
        for n in shape:
            if type(n) is not int or n < 0:
                break
        else:
            return shape
    try:
        dims = (operator.index(shape),)
    except TypeError:
        try:
            dims = tuple(operator.index(n) for n in shape)  # type: ignore[union-attr]
        except TypeError:
            raise TypeError(
                f"shape must be an int or a tuple of ints, got {shape!r}") from None
    for n in dims:
        if n < 0:
            raise ValueError(f"negative dimensions are not allowed: shape {dims}")
    return dims


def _is_int_index(k: object) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def basic_index(shape: tuple, strides: tuple, key: object):
    """``(shape, strides, byte_offset_delta)`` for a basic index, else ``None``.

    ``None`` means "not handled here": advanced indexing, or a zero-size result
    (left to the engine).  Raises ``IndexError`` like NumPy for bad indices.
    """
    if type(key) is not tuple:
        key = (key,)
    ndim = len(shape)
    consumed = 0
    ellipsis = False
    for k in key:
        if k is None:
            continue
        if k is Ellipsis:
            if ellipsis:
                raise IndexError("an index can only have a single ellipsis ('...')")
            ellipsis = True
        elif type(k) is slice or type(k) is int or _is_int_index(k):
            consumed += 1
        else:
            return None
    if consumed > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, "
                         f"but {consumed} were indexed")
    out_shape = []
    out_strides = []
    offset = 0
    dim = 0
    for k in key:
        if k is None:
            out_shape.append(1)
            out_strides.append(0)
        elif k is Ellipsis:
            for _ in range(ndim - consumed):
                out_shape.append(shape[dim])
                out_strides.append(strides[dim])
                dim += 1
        elif type(k) is slice:
            n = shape[dim]
            start, stop, step = k.indices(n)
            length = len(range(start, stop, step))
            if length == 0:
                return None
            offset += start * strides[dim]
            out_shape.append(length)
            out_strides.append(strides[dim] * step)
            dim += 1
        else:
            n = shape[dim]
            i = operator.index(k)
            j = i + n if i < 0 else i
            if not 0 <= j < n:
                raise IndexError(f"index {i} is out of bounds for axis {dim} with size {n}")
            offset += j * strides[dim]
            dim += 1
    out_shape.extend(shape[dim:])
    out_strides.extend(strides[dim:])
    return tuple(out_shape), tuple(out_strides), offset


def engine(shape: tuple, strides: tuple, offset: int, dtype: np.dtype,
           writeable: bool = True) -> np.ndarray:
    """A NumPy array with this layout at a fake address (never read it)."""
    return ndarray_at(FAKE_BASE + offset, shape, strides, dtype, readonly=not writeable)


def from_engine(arr: np.ndarray) -> tuple[tuple, tuple, int, np.dtype, bool]:
    """``(shape, strides, offset, dtype, writeable)`` of an engine result."""
    offset = arr.__array_interface__["data"][0] - FAKE_BASE
    return arr.shape, arr.strides, offset, arr.dtype, bool(arr.flags.writeable)


def broadcast_strides(src_shape: tuple, src_strides: tuple, dst_shape: tuple) -> tuple:
    """Strides that read ``src`` broadcast to ``dst_shape`` (zeros where it repeats).

    ``ValueError`` with NumPy's wording when the shapes do not broadcast.
    """
    extra = len(dst_shape) - len(src_shape)
    if extra < 0:
        raise ValueError(f"could not broadcast input array from shape {src_shape} "
                         f"into shape {dst_shape}")
    out = [0] * extra
    for n, s, d in zip(src_shape, src_strides, dst_shape[extra:], strict=True):
        if n == d:
            out.append(s if d != 1 else 0)
        elif n == 1:
            out.append(0)
        else:
            raise ValueError(f"could not broadcast input array from shape {src_shape} "
                             f"into shape {dst_shape}")
    return tuple(out)
