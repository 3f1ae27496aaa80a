"""Stream compaction: the data-dependent shapes of masks and ``nonzero`` (docs/indexing.md).

On a device, a scan (``cumulative_sum`` of the mask, ``device/scan.py``) gives
every element the number of selected elements up to it; the last of those
counts is read to the host -- **the one synchronisation of the call** -- to
size the result, then a compaction kernel (``device/indexing.py``) writes each
selected element to its slot.  The running counts are a pooled temporary,
freed before the call returns.  On ``cpu`` NumPy counts and compresses into
the result's memory.

:func:`select` is the internal building block (``unique_*`` use it too);
:func:`nonzero_rows` gives the coordinates behind ``ga.nonzero`` and boolean
indexing.
"""

from __future__ import annotations

import numpy as np

from .._array.make import ArrayBase, new_array
from ..backends._kernels import collapse, word
from . import cpu_engine
from .ownership import filling, working

__all__ = ["select", "nonzero_rows", "positions"]

_I8 = np.dtype(np.int64)
_BOOL = np.dtype(bool)


def _check_array(fn: str, name: str, a) -> None:
    if not isinstance(a, ArrayBase):
        raise TypeError(f"{fn}(): {name} must be a gpuarrays array, got {type(a).__name__}; "
                        f"convert it with ga.asarray")
    a._live()


def positions(mask):
    """The inclusive running count of the non-zero elements of ``mask`` in C order (an int64
    array of ``mask.size`` elements, new) and their number, read from the device once.

    ``mask`` is live, on a device back-end, and not empty.
    """
    from .statistical import cumulative_sum  # same layer

    flat = mask
    temps = []
    try:
        if mask._dtype != _BOOL:
            flat = mask.astype(_BOOL)  # nonzero test by the conversion kernel, C order
            temps.append(flat)
        if flat.ndim != 1:
            flat = flat.reshape(-1)  # a view when C-contiguous, else a C-ordered copy
            temps.append(flat)
        pos = cumulative_sum(flat, dtype=_I8)
    finally:
        for t in temps:
            t.free()
    with filling(pos):
        with pos[pos.shape[0] - 1:] as last:
            count = int(last.get()[0])  # the one device -> host read of the call
    return pos, count


def select(x, mask):
    """The elements of 1-d ``x`` where the 1-d bool ``mask`` (same length) is True, in order:
    a new 1-d array on ``x``'s device, from the pool or the active ``ga.cached`` scope.

    One device -> host read (the count) per call.  Refused before anything is
    allocated: ``TypeError`` (not arrays, a mask that is not bool), ``ValueError``
    (not 1-d, different lengths, different devices); ``FreedArrayError`` for a freed
    array.
    """
    _check_array("select", "x", x)
    _check_array("select", "mask", mask)
    if mask._dtype != _BOOL:
        raise TypeError(f"select(): mask must be a bool array, got {mask._dtype}; "
                        f"compare it first (mask != 0)")
    if x.ndim != 1 or mask.ndim != 1 or x._shape != mask._shape:
        raise ValueError(f"select(): x and mask must be 1-d of one length, got shapes "
                         f"{x._shape} and {mask._shape}")
    dev = x._storage.device
    if mask._storage.device != dev:
        raise ValueError(f"select(): x is on {dev} and mask on {mask._storage.device}; "
                         f"move one with to_device")
    return select_nd(x, mask)


def select_nd(x, mask):
    """``x[mask]`` for a bool ``mask`` of ``x``'s shape (checked by the caller): 1-d, new."""
    dev = x._storage.device
    n = x.size
    if n == 0:
        return new_array((0,), x._dtype, dev, x._storage.kind)
    if dev.backend == "cpu":
        with working(dev, x, mask):
            m = cpu_engine.view(mask)
            count = int(np.count_nonzero(m))
            out = new_array((count,), x._dtype, dev, x._storage.kind)
            with filling(out):
                v = cpu_engine.view(x)
                if x.ndim != 1:
                    v, m = v.reshape(-1), m.reshape(-1)  # NumPy copies a strided one itself
                np.compress(m, v, out=cpu_engine.view(out))
        return out
    from .device import indexing as kernels  # docs/design.md, "Layers": same layer

    pos, count = positions(mask)
    try:
        out = new_array((count,), x._dtype, dev, x._storage.kind)
        if count:
            with filling(out):
                with working(dev, x, pos, out):
                    raw = x._raw()
                    shape, (strides,) = collapse(raw.shape, raw.strides)
                    w = word(raw.dtype.itemsize, raw.ptr, *strides)
                    kernels.launch_compact(dev, "select", raw.ptr, pos._raw().ptr,
                                           out._raw().ptr, n, count,
                                           list(zip(shape, strides, strict=True)),
                                           raw.dtype.itemsize, w)
    finally:
        pos.free()
    return out


def nonzero_rows(x):
    """The C coordinates of the non-zero elements of ``x`` (``ndim >= 1``, live): one
    ``(ndim, count)`` int64 array, new; row ``d`` holds the indices along axis ``d``."""
    dev = x._storage.device
    kind = x._storage.kind
    if x.size == 0:
        return new_array((x.ndim, 0), _I8, dev, kind)
    if dev.backend == "cpu":
        with working(dev, x):
            v = cpu_engine.view(x)
            count = int(np.count_nonzero(v))
            out = new_array((x.ndim, count), _I8, dev, kind)
            with filling(out):
                # NumPy's nonzero has no out=: its index arrays are copied into ours
                z = cpu_engine.view(out)
                for d, rows in enumerate(np.nonzero(v)):
                    z[d] = rows
        return out
    from .device import indexing as kernels

    pos, count = positions(x)
    try:
        out = new_array((x.ndim, count), _I8, dev, kind)
        if count:
            with filling(out):
                with working(dev, pos, out):
                    dims = [(e, 0) for e in x._shape]
                    kernels.launch_compact(dev, "coords", pos._raw().ptr, pos._raw().ptr,
                                           out._raw().ptr, x.size, count, dims, 8, 8)
    finally:
        pos.free()
    return out
