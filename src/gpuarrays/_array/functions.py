"""Free functions over arrays: copies and memory-overlap questions."""

from __future__ import annotations

import numpy as np

from .._common.raw import extent
from . import transfer
from .array import GPUArray
from .layout import FAKE_BASE, engine

__all__ = ["copyto", "shares_memory", "may_share_memory", "unsafe_free"]

# reshape, broadcast_to, moveaxis and expand_dims moved to _compute/manipulation.py with the
# rest of the standard's manipulation functions (docs/manipulation.md).


def _check(a: object, name: str) -> GPUArray:
    if not isinstance(a, GPUArray):
        raise TypeError(f"{name} expects a GPUArray, got {type(a).__name__}")
    return a


def copyto(dst: GPUArray, src) -> None:
    """``dst[...] = src`` with NumPy broadcasting; overlapping memory is handled."""
    dst = _check(dst, "copyto")
    if not dst.flags.writeable:
        raise ValueError("copyto destination is read-only")
    if isinstance(src, GPUArray) and src.shape != dst.shape:
        try:
            np.broadcast_shapes(src.shape, dst.shape)
        except ValueError:
            raise ValueError(f"could not broadcast input array from shape {src.shape} "
                             f"into shape {dst.shape}") from None
    transfer.assign(dst, src)


def _range(a: GPUArray) -> tuple[int, int] | None:
    if a.size == 0:
        return None
    base = a._live().ptr + a.offset
    lo, hi = extent(a.shape, a.strides, a.itemsize)
    return base + lo, base + hi


def may_share_memory(a: GPUArray, b: GPUArray) -> bool:
    """Whether the bounds of the two arrays' address ranges overlap."""
    _check(a, "may_share_memory"), _check(b, "may_share_memory")
    if a.device != b.device:
        return False
    ra, rb = _range(a), _range(b)
    return ra is not None and rb is not None and ra[0] < rb[1] and rb[0] < ra[1]


def shares_memory(a: GPUArray, b: GPUArray) -> bool:
    """Whether the two arrays address at least one common byte (exact, as NumPy)."""
    if not may_share_memory(a, b):
        return False
    # NumPy solves the exact problem on layouts at the real addresses; it reads nothing.
    x = engine(a.shape, a.strides, a.data_ptr - FAKE_BASE, a.dtype)
    y = engine(b.shape, b.strides, b.data_ptr - FAKE_BASE, b.dtype)
    return bool(np.shares_memory(x, y))


def unsafe_free(a: GPUArray, force: bool = False) -> None:
    """``a.free()``: release ``a``'s handle now (``force=True``: for every sharer)."""
    _check(a, "unsafe_free").free(force=force)
