"""NumPy arrays over raw host-addressable memory, and layout helpers.

Shared by the cpu back-end (its kernels run NumPy on such views) and by the
core (host views of ``host``/``unified`` memory).  Nothing here allocates
device memory or knows about storages.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ndarray_at", "extent", "is_c_contiguous", "is_f_contiguous", "c_strides"]


class _Interface:
    """Carries an ``__array_interface__``; becomes the ``base`` of the NumPy array.

    ``owner`` is kept alive as long as the NumPy array lives.
    """

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, interface: dict, owner: object) -> None:
        self.__array_interface__ = interface
        self.owner = owner


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
    result (pass ``owner`` to tie a keep-alive object to the array).
    """
    if dtype.fields is None and not dtype.subdtype:
        typestr, descr = dtype.str, None
    else:
        typestr, descr = f"|V{dtype.itemsize}", dtype.descr
    interface = {
        "version": 3,
        "shape": shape,
        "typestr": typestr,
        "strides": strides,
        "data": (ptr, readonly),
    }
    if descr is not None:
        interface["descr"] = descr
    arr = np.asarray(_Interface(interface, owner))
    if arr.dtype != dtype or descr is not None:
        arr = arr.view(dtype)
    return arr


def extent(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """Byte range ``[lo, hi)`` touched by a layout, relative to element 0.

    A zero-size layout touches nothing: ``(0, 0)``.
    """
    lo = hi = 0
    for n, s in zip(shape, strides):
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
    for n, s in zip(reversed(shape), reversed(strides)):
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
    for n, s in zip(shape, strides):
        if n != 1:
            if s != expected:
                return False
            expected *= n
    return True
