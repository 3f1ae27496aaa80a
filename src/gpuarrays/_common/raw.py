"""NumPy arrays over raw host-addressable memory, and layout helpers.

Shared by the cpu back-end (its kernels run NumPy on such views) and by the
core (host views of ``host``/``unified`` memory).  Nothing here allocates
device memory or knows about storages.
"""

from __future__ import annotations

import ctypes

import numpy as np

__all__ = ["ndarray_at", "extent", "is_c_contiguous", "is_f_contiguous", "c_strides"]


_char_array = ctypes.c_char.__mul__  # (c_char * n): ctypes caches these types per length


def ndarray_at(
    ptr: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dtype: np.dtype,
    *,
    readonly: bool = False,
    owner: object = None,
) -> np.ndarray:
    """A NumPy array over memory at ``ptr`` (address of element 0), no copy.

    The caller guarantees the memory is host-accessible and outlives the
    result (pass ``owner`` to tie a keep-alive object to the array: it hangs
    off the ctypes buffer that becomes the array's ``base``).
    """
    lo, hi = extent(shape, strides, dtype.itemsize)
    buf = _char_array(hi - lo).from_address(ptr + lo)
    buf.owner = owner
    arr = np.ndarray(shape, dtype, buffer=buf, offset=-lo, strides=strides)
    if readonly:
        arr.flags.writeable = False
    return arr


def extent(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """Byte range ``[lo, hi)`` touched by a layout, relative to element 0.

    A zero-size layout touches nothing: ``(0, 0)``.
    """
    lo = hi = 0
    for n, s in zip(shape, strides, strict=True):
        if n == 0:
            return 0, 0
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + itemsize


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """C-order strides in bytes."""
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n if n > 0 else 1
    return tuple(reversed(strides))


def is_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """NumPy's C-contiguity rule (axes of length 1 and empty arrays are lenient)."""
    if 0 in shape:  # an empty array is contiguous whatever its strides (as NumPy)
        return True
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        if n != 1:
            if s != expected:
                return False
            expected *= n
    return True


def is_f_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """NumPy's Fortran-contiguity rule."""
    if 0 in shape:
        return True
    expected = itemsize
    for n, s in zip(shape, strides, strict=True):
        if n != 1:
            if s != expected:
                return False
            expected *= n
    return True
