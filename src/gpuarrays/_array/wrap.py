"""Foreign memory: ``unsafe_wrap`` and ``pointer_info``.

A wrapped array is an ordinary ``GPUArray`` over a storage whose home is a
:class:`WrapHome`: when the last handle goes it waits for the work queued on
the device (not on ``cpu``), then drops the ``owner`` object, removes the host
registration ("pin") it took and frees the memory through the back-end
(``own=True``).  Pins are counted per range in shared code, so
overlapping wraps register once and the last one unregisters -- also with
``own=False``.  Wraps are not allocations: they bypass pools, caches and
statistics.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

import numpy as np

from .._common.dtypes import normalize_dtype
from .._common.raw import extent
from .._memory.devices import get_device
from .._memory.pins import WrapHome, pin_registry
from .._memory.storage import Storage
from ..backends.base import KINDS, PointerInfo
from .layout import normalize_shape
from .make import wrap_storage

if TYPE_CHECKING:
    from .array import GPUArray

__all__ = ["unsafe_wrap", "pointer_info"]


def pointer_info(ptr: int, device=None) -> PointerInfo | None:
    """What ``device``'s back-end knows about address ``ptr``: kind, device, base, size."""
    if isinstance(ptr, bool) or not isinstance(ptr, (int, np.integer)):
        raise TypeError(f"ptr must be an int address, got {type(ptr).__name__}")
    ptr = _check_address(int(ptr))
    dev = get_device(device)
    info = dev.impl.pointer_info(ptr)
    if info is None:
        return None
    return PointerInfo(info.kind, _device_of(dev, info.device), info.base, info.size)


_MAX_ADDRESS = (1 << (8 * ctypes.sizeof(ctypes.c_void_p))) - 1


def _check_address(ptr: int) -> int:
    """``ptr``, or ``ValueError`` when no address can have that value."""
    if ptr < 0 or ptr > _MAX_ADDRESS:
        raise ValueError(f"{ptr} ({ptr:#x}) cannot be an address: addresses run from 0 to "
                         f"0x{_MAX_ADDRESS:x} on this platform; pass the int address of the "
                         f"memory (e.g. from a DLPack export or data_ptr)")
    return ptr


def _device_of(dev, index):
    from .._memory.devices import devices

    for d in devices(dev.backend):
        if d.index == index:
            return d
    return dev


def unsafe_wrap(ptr_or_array, shape=None, dtype=None, *, strides=None, device=None,
                kind: str | None = None, own: bool = False, owner: object = None) -> GPUArray:
    """A GPUArray over memory gpuarrays did not allocate: no copy, no allocation.

    ``ptr_or_array``: an int address (of element 0), or a NumPy array / buffer
    (kept alive as the owner).  ``kind=None`` detects the kind from the pointer
    (``ValueError`` when it cannot be known).  ``own=True`` frees the memory
    with the back-end's call when the last handle goes; ``owner`` is kept
    alive instead (the two exclude each other).  Either happens only after the
    work queued on the device is done.  Unsafe: the caller vouches
    that the memory is valid for the whole layout.
    """
    if own and owner is not None:
        raise ValueError("own=True and owner= exclude each other: either gpuarrays frees "
                         "the memory (own) or it keeps the owner alive (owner)")
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown memory kind {kind!r}: expected one of "
                         f"{', '.join(repr(k) for k in KINDS)}")
    writeable = True
    source = None  # the array form's NumPy array
    if isinstance(ptr_or_array, bool):
        raise TypeError("ptr must be an int address or an array, got a bool")
    if isinstance(ptr_or_array, (int, np.integer)):
        ptr = int(ptr_or_array)
        if shape is None:
            raise ValueError("unsafe_wrap of an address needs shape= (and dtype=)")
        dt = normalize_dtype(np.float64 if dtype is None else dtype)
    else:
        if own:
            raise ValueError("own=True is only for int addresses: the memory of "
                             f"{type(ptr_or_array).__name__} belongs to that object")
        host = source = _as_ndarray(ptr_or_array)
        ptr = host.__array_interface__["data"][0]
        writeable = bool(host.flags.writeable)
        owner = host
        dt = normalize_dtype(host.dtype if dtype is None else dtype)
        if shape is None and strides is None:
            view = host if dtype is None else _reinterpret(host, dt)
            shape, strides = view.shape, view.strides
        elif shape is None:
            shape = host.shape
        if kind is None:
            kind = "host"
    shape = normalize_shape(shape)
    itemsize = dt.itemsize
    if strides is None:
        from .._common.raw import c_strides

        strides = c_strides(shape, itemsize)
    else:
        strides = tuple(int(s) for s in strides)
        if len(strides) != len(shape):
            raise ValueError(f"strides {strides} do not match shape {shape}")
    lo, hi = extent(shape, strides, itemsize)
    nbytes = hi - lo
    if ptr < 0:
        raise ValueError(f"ptr must be a non-negative address, got {ptr}")
    _check_address(ptr + lo if nbytes else ptr)
    _check_address(ptr + hi - 1 if nbytes else ptr)
    if source is not None:
        _check_inside(source, shape, strides, dt, lo, hi)
    if ptr == 0 and nbytes:
        raise ValueError(f"cannot wrap a NULL pointer with a non-zero size ({nbytes} bytes "
                         f"for shape {shape}); only zero-size arrays may use NULL")
    dev = get_device(device)
    dev.require(dt)
    info = dev.impl.pointer_info(ptr + lo) if ptr else None
    if kind is None:
        if info is None:
            if nbytes:
                raise ValueError(f"cannot tell the memory kind of address 0x{ptr:x} on {dev}; "
                                 f"pass kind='device', 'host' or 'unified'")
            kind = "device"
        else:
            kind = info.kind
    if kind not in dev.kinds:
        raise ValueError(f"device {dev} does not support memory kind {kind!r}; "
                         f"it supports {', '.join(dev.kinds)}")
    pinned = None
    if nbytes and kind == "host" and dev.impl.needs_host_registration and info is not None:
        # memory the platform does not know yet, or pages our own registrations cover
        # (the platform then reports their range); another library's registration is
        # left to it
        pins = pin_registry(dev)
        if info.size == 0 or pins.holds(ptr + lo, ptr + hi):
            pinned = pins.pin(dev, ptr + lo, ptr + hi)
    home = WrapHome(ptr + lo if own else None, pinned)  # the allocation, whatever the strides
    storage = Storage(ptr + lo, nbytes, dev, kind, home, dev.memory.epoch, 0, owned=bool(own),
                      owner=owner)
    return wrap_storage(storage, shape, strides, dt, -lo, writeable)


def _reinterpret(host: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``host.view(dt)``: what ``dtype=`` alone asks of the array form."""
    try:
        return host.view(dt)
    except ValueError as e:
        raise ValueError(f"cannot wrap a {host.dtype} array of shape {host.shape} and strides "
                         f"{host.strides} as {dt}: {e}; pass shape= and strides=") from None


def _check_inside(host: np.ndarray, shape, strides, dt, lo: int, hi: int) -> None:
    """``ValueError`` unless the layout's bytes ``[lo, hi)`` lie inside ``host``'s buffer."""
    if hi <= lo:
        return
    h_lo, h_hi = extent(host.shape, host.strides, host.itemsize)
    if lo < h_lo or hi > h_hi:
        raise ValueError(f"the layout asked for (shape {shape}, strides {strides}, {dt}) "
                         f"spans {hi - lo} bytes at offsets [{lo}, {hi}), outside the source "
                         f"array's buffer of {h_hi - h_lo} bytes at [{h_lo}, {h_hi}); pass a "
                         f"shape and strides that fit")


def _as_ndarray(obj) -> np.ndarray:
    if isinstance(obj, np.ndarray):
        return obj
    try:
        return np.asarray(memoryview(obj))
    except TypeError:
        raise TypeError(f"unsafe_wrap expects an int address, a NumPy array or an object "
                        f"with the buffer protocol, got {type(obj).__name__}") from None
