"""Free functions over arrays: copies and memory-overlap questions."""

from __future__ import annotations

import numpy as np

from .._common.raw import extent
from . import transfer
from .array import GPUArray
from .hooks import HOOKS
from .layout import FAKE_BASE, engine

__all__ = ["copyto", "shares_memory", "may_share_memory", "unsafe_free"]

# reshape, broadcast_to, moveaxis and expand_dims moved to _compute/manipulation.py with the
# rest of the standard's manipulation functions (docs/manipulation.md).


def _check(a: object, name: str) -> GPUArray:
    if not isinstance(a, GPUArray):
        raise TypeError(f"{name} expects a GPUArray, got {type(a).__name__}")
    return a


_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def copyto(dst: GPUArray, src, casting: str = "same_kind", where=True) -> None:
    """``dst[...] = src`` with NumPy broadcasting, as ``np.copyto``; overlapping memory is
    handled.

    ``casting`` is NumPy's rule for ``src``'s dtype to ``dst``'s (a Python scalar is
    weak, as in NumPy 2: ``1`` into ``int8`` is fine, ``1.5`` is not under
    ``"same_kind"``); ``TypeError`` when it refuses.  ``where``: ``True``, ``False``
    (nothing is written) or a bool gpuarrays array broadcast to ``dst``'s shape: only the
    elements where it is true are written (``ga.where(where, src, dst)`` on the device,
    then one copy).
    """
    dst = _check(dst, "copyto")
    if not dst.flags.writeable:
        raise ValueError(f"copyto destination (shape {dst.shape}, {dst.dtype}) is read-only "
                         f"(a broadcast_to or diagonal view); write into a copy")
    if casting not in _CASTINGS:
        raise ValueError(f"copyto(): casting must be one of {', '.join(map(repr, _CASTINGS))}, "
                         f"got {casting!r}")
    if isinstance(src, GPUArray):
        if src.shape != dst.shape:
            try:
                np.broadcast_shapes(src.shape, dst.shape)
            except ValueError:
                raise ValueError(f"could not broadcast input array from shape {src.shape} "
                                 f"into shape {dst.shape}") from None
        src_dtype = src.dtype
    elif isinstance(src, (bool, int, float, complex)):
        src_dtype = None
        try:  # NumPy's own answer for a weak scalar (a 0-d host array: no device data)
            np.copyto(np.empty((), dst.dtype), src, casting=casting)
        except TypeError as e:
            raise TypeError(f"copyto(): {e}; pass casting='unsafe' or convert the value") \
                from None
    else:
        src_dtype = np.asarray(src).dtype  # host data given explicitly (copied to the device)
    if src_dtype is not None and not np.can_cast(src_dtype, dst.dtype, casting):
        raise TypeError(f"copyto(): cannot cast array data from {src_dtype} to {dst.dtype} "
                        f"according to the rule {casting!r}; pass casting='unsafe' or convert "
                        f"with astype() first")
    if where is True or type(where) is np.bool_ and where:
        transfer.assign(dst, src)
        return
    if where is False or type(where) is np.bool_:
        return
    _copy_where(dst, src, where)


def _copy_where(dst: GPUArray, src, where) -> None:
    """``copyto(dst, src, where=mask)``: ``dst = ga.where(mask, src, dst)`` on the device."""
    if not isinstance(where, GPUArray):
        raise TypeError(f"copyto(): where must be True, False or a bool gpuarrays array, got "
                        f"{type(where).__name__}; copy the mask to the device with "
                        f"ga.asarray(mask, device={str(dst.device)!r})")
    if where.dtype != np.bool_:
        raise TypeError(f"copyto(): where must be a bool array, got {where.dtype} (NumPy: "
                        f"cannot cast it to bool under 'safe'); compare first (mask != 0)")
    if where.device != dst.device:
        raise ValueError(f"copyto(): the mask is on {where.device}, the destination on "
                         f"{dst.device}; move it with where.to_device({str(dst.device)!r})")
    try:
        np.broadcast_shapes(where.shape, dst.shape)
    except ValueError:
        raise ValueError(f"copyto(): the mask of shape {where.shape} does not broadcast to the "
                         f"destination's shape {dst.shape}") from None
    ns = HOOKS.namespace(None)
    temps = []
    try:
        if not isinstance(src, GPUArray):
            host = np.asarray(src)
            if host.ndim == 0 and isinstance(src, (bool, int, float, complex)):
                value = src  # a weak scalar: ga.where takes it as it is
            else:
                value = ns.asarray(host.astype(dst.dtype, copy=False), device=dst.device)
                temps.append(value)
        else:
            value = src
        chosen = ns.where(where, value, dst)
        temps.append(chosen)
        transfer.assign(dst, chosen)  # converted to dst.dtype (casting checked above)
    finally:
        for t in temps:
            t.free()


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
