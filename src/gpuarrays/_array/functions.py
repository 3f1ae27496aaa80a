"""Free functions over arrays: derived views, copies and memory-overlap questions."""

from __future__ import annotations

import numpy as np

from .._common.raw import extent
from . import transfer
from .array import GPUArray
from .layout import FAKE_BASE, engine

__all__ = ["reshape", "broadcast_to", "moveaxis", "expand_dims", "copyto", "shares_memory",
           "may_share_memory", "unsafe_free"]


def _check(a: object, name: str) -> GPUArray:
    if not isinstance(a, GPUArray):
        raise TypeError(f"{name} expects a GPUArray, got {type(a).__name__}")
    return a


def reshape(a: GPUArray, shape, *, order: str = "C", copy: bool | None = None) -> GPUArray:
    """``a.reshape(shape)``: a view when NumPy would give one, else a copy."""
    return _check(a, "reshape").reshape(shape, order=order, copy=copy)


def broadcast_to(a: GPUArray, shape) -> GPUArray:
    """A read-only view with zero strides where ``a`` is repeated (as NumPy)."""
    a = _check(a, "broadcast_to")
    return a._from_engine(np.broadcast_to(a._engine(), shape))


def moveaxis(a: GPUArray, source, destination) -> GPUArray:
    """A view with axes moved from ``source`` to ``destination`` (as NumPy)."""
    a = _check(a, "moveaxis")
    return a._from_engine(np.moveaxis(a._engine(), source, destination))


def expand_dims(a: GPUArray, axis) -> GPUArray:
    """A view with a new axis of length 1 at ``axis`` (as NumPy)."""
    a = _check(a, "expand_dims")
    return a._from_engine(np.expand_dims(a._engine(), axis))


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
