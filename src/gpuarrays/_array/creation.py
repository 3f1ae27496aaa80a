"""Creation in the array layer: the compiled ``empty``, ``array``/``asarray`` and ``to_numpy``.

The standard's other creation functions (zeros, ones, full, the ``*_like`` functions,
arange, eye, linspace, ...) live in ``_compute/creation.py`` (docs/manipulation.md).
"""

from __future__ import annotations

import numpy as np

from .. import _core
from .._common.dtypes import normalize_dtype
from .._common.errors import UnsupportedDTypeError
from .._memory.devices import Device, _current, _default, get_device
from . import transfer
from .array import GPUArray, new_array
from .layout import normalize_shape

__all__ = ["array", "empty", "asarray", "to_numpy"]

empty = _core.empty  # compiled: see its docstring (the allocation hot path)
_core.configure(device_var=_current, default_devices=_default, get_device=get_device,
                device_type=Device, normalize_shape=normalize_shape,
                float64=None)  # dtype omitted: the device's default (Device._accepts[None])


def _from_host(host: np.ndarray, dtype, device, kind: str) -> GPUArray:
    dev = get_device(device)
    dt = dev.dtype_of(host.dtype if dtype is None else dtype)
    a = new_array(normalize_shape(host.shape), dt, dev, kind)
    try:
        transfer.assign(a, host)
    except BaseException:
        a.free()
        raise
    return a


def array(obj, dtype=None, *, device=None, kind: str | None = None,
          copy: bool | None = True) -> GPUArray:
    """A new GPUArray holding a copy of ``obj`` (NumPy's ``array``; keywords as ``asarray``).

    ``copy=True`` (the default) always copies, also from a GPUArray; ``copy=None`` copies
    only when needed and ``copy=False`` never copies (``ValueError`` when it must).
    """
    return asarray(obj, dtype, device=device, kind=kind, copy=copy)


def asarray(obj, dtype=None, *, device=None, kind: str | None = None,
            copy: bool | None = None) -> GPUArray:
    """A GPUArray from a GPUArray, NumPy array, sequence, scalar, DLPack producer or
    ``__cuda_array_interface__`` object.

    ``kind=None`` keeps a GPUArray's kind and means ``"device"`` otherwise.
    ``copy=False`` raises ``ValueError`` when a copy cannot be avoided;
    ``copy=True`` always copies.
    """
    if isinstance(obj, GPUArray):
        return _from_gpuarray(obj, dtype, device, kind, copy)
    if not isinstance(obj, np.ndarray):
        if hasattr(obj, "__cuda_array_interface__"):
            from . import cai

            return _from_gpuarray(cai.import_interface(obj), dtype, device,
                                  "device" if kind is None else kind, copy)
        if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
            from . import dlpack

            # Zero-copy import first; the result moves to the asked kind ("device" by
            # default), which copies unless the producer's memory already is it.
            found = dlpack.from_dlpack(obj, device=device, copy=copy)
            return _from_gpuarray(found, dtype, device, "device" if kind is None else kind,
                                  None if copy else copy)
    if copy is False:
        raise ValueError(f"cannot make a GPUArray from {type(obj).__name__} without a copy; "
                         f"use ga.unsafe_wrap for zero-copy wrapping of host memory")
    try:
        host = np.asarray(obj) if dtype is None else np.asarray(obj, dtype=normalize_dtype(dtype))
    except UnsupportedDTypeError:
        raise  # its message starts as docs/design.md ("The storage model") says
    except (TypeError, ValueError) as e:
        raise type(e)(f"cannot make a GPUArray from {type(obj).__name__}: {e}") from None
    return _from_host(host, dtype, device, "device" if kind is None else kind)


def _from_gpuarray(a: GPUArray, dtype, device, kind, copy) -> GPUArray:
    a._live()  # a freed array is never handed back (FreedArrayError)
    dev = a.device if device is None else get_device(device)
    kind = a.kind if kind is None else kind
    dt = a.dtype if dtype is None else dev.dtype_of(dtype)
    same_place = dev == a.device and kind == a.kind
    if copy is False and (not same_place or dt != a.dtype):
        raise ValueError(f"asarray(copy=False) would need a copy: the array is {a.dtype} "
                         f"{a.kind} memory on {a.device}, {dt} {kind} memory on {dev} was asked")
    if same_place and dt == a.dtype:
        return a.copy() if copy else a
    moved = a.to_device(dev, kind)
    if dt == moved.dtype:
        return moved.copy() if (copy and moved is a) else moved
    converted = moved.astype(dt)
    if moved is not a:
        moved.free()
    return converted


def to_numpy(a: GPUArray) -> np.ndarray:
    """Copy to a new NumPy array (``a.get()``)."""
    if not isinstance(a, GPUArray):
        raise TypeError(f"to_numpy expects a GPUArray, got {type(a).__name__}")
    return a.get()
