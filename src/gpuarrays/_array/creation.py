"""Creation in the array layer: the compiled ``empty``, ``array``/``asarray`` and ``to_numpy``.

The standard's other creation functions (zeros, ones, full, the ``*_like`` functions,
arange, eye, linspace, ...) live in ``_compute/creation.py`` (docs/manipulation.md).  They
and ``asarray`` allocate and write a new array in one compiled call (``_core.Filler``,
``_core.Uploader``: src/native/core/fill.c) through the device's ``writer``; what that
call does not handle it hands to ``write_new``, the general path.
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


def writer(dev: Device) -> _core.Writer | None:
    """How the compiled creation functions write ``dev``'s new memory: a ``_core.Writer``
    from its back-end's ``writer_handles``, or None (they call ``write_new``).  Called by
    the compiled core on a device's first creation and after a reset."""
    handles = getattr(dev.impl, "writer_handles", None)
    return None if handles is None else _core.Writer(dev.gate, **handles(dev.index))


def write_new(a: GPUArray, value) -> GPUArray:
    """The general path of the compiled creation functions: ``a[...] = value`` for a new
    array ``a``, which is freed if that raises; returns ``a``.  ``value`` is a scalar, a
    NumPy array, or bytes: the values the compiled core generated (C order)."""
    try:
        if type(value) is bytes:
            value = np.frombuffer(value, a.dtype).reshape(a.shape)
        transfer.assign(a, value)
    except BaseException:
        a.free()
        raise
    return a


generated = _core.Uploader(slow=write_new, writer_of=writer)
"""New arrays written from C in one call: ``generated.array`` (``from_host``) and NumPy's
values of ``arange`` and ``linspace`` generated in C (``generated.arange``, ``.linspace``;
their signatures and when they answer NotImplemented: src/native/core/fill.c)."""

from_host = generated.array
"""``from_host(host, dtype, device, kind)``: a new C-contiguous array of ``host``'s shape
and ``device``'s dtype for ``dtype`` (None: ``host``'s), holding the values of the NumPy
array ``host``; one compiled call (a memcpy on cpu, one asynchronous enqueue of a private
copy of small data on OpenCL: src/native/core/fill.c)."""


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
    if type(obj) is np.ndarray and dtype is None and copy is not False:  # (the common case)
        return from_host(obj, None, device, "device" if kind is None else kind)
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
    if type(obj) in _SEQUENCES and _holds_arrays(obj):
        return _from_nested(obj, dtype, device, "device" if kind is None else kind)
    try:
        host = np.asarray(obj) if dtype is None else np.asarray(obj, dtype=normalize_dtype(dtype))
    except UnsupportedDTypeError:
        raise  # its message starts as docs/design.md ("The storage model") says
    except (TypeError, ValueError) as e:
        raise type(e)(f"cannot make a GPUArray from {type(obj).__name__}: {e}") from None
    return from_host(host, dtype, device, "device" if kind is None else kind)


# Nested sequences holding GPUArrays ([x[0], x[1]], [[a, 1.0], [b, c]]) -------------------
_SEQUENCES = (list, tuple)
_SCALARS = frozenset((bool, int, float, complex))


def _holds_arrays(seq) -> bool:
    """Whether a list/tuple holds a GPUArray at any depth (one C-speed pass per level)."""
    if _core.scalars_only(seq):  # the common flat list of numbers, one C loop
        return False
    types = set(map(type, seq))
    if types <= _SCALARS:
        return False
    if any(issubclass(t, GPUArray) for t in types):
        return True
    return any(_holds_arrays(e) for e in seq if type(e) in _SEQUENCES)


def _nested_layout(obj, arrays: list, host: list, index: tuple) -> tuple:
    """The shape of ``obj``; GPUArray leaves go to ``arrays`` and the others (Python
    scalars, NumPy arrays) to ``host``, each as ``(index, value)``."""
    if isinstance(obj, GPUArray):
        obj._live()
        arrays.append((index, obj))
        return obj.shape
    if type(obj) in _SEQUENCES:
        shapes = [_nested_layout(e, arrays, host, index + (i,)) for i, e in enumerate(obj)]
        if any(sh != shapes[0] for sh in shapes):
            raise ValueError(f"asarray(): the nested sequence is ragged: elements at "
                             f"{index or 'the top'} have shapes {sorted(set(shapes))}; every "
                             f"element of a level must have the same shape")
        return (len(obj), *(shapes[0] if shapes else ()))
    if type(obj) not in _SCALARS:
        obj = np.asarray(obj)
        if obj.dtype == object:
            raise TypeError(f"asarray(): cannot hold {type(obj).__name__} in an array")
    host.append((index, obj))
    return np.shape(obj)


def _from_nested(obj, dtype, device, kind: str) -> GPUArray:
    """A new array from a nested sequence of GPUArrays and Python scalars (the standard's
    nested sequence): on the arrays' device (``ValueError`` when they are on several) or
    ``device``, of the promoted dtype (arrays, Python scalars weak) unless ``dtype`` is
    given.  Scalars reach the device in one upload, each array by a copy into its slice on
    the device (no host round trip of device data)."""
    arrays: list = []
    host: list = []
    shape = _nested_layout(obj, arrays, host, ())
    devices = {a.device for _, a in arrays}
    if len(devices) > 1:
        names = ", ".join(sorted(str(d) for d in devices))
        raise ValueError(f"asarray(): the sequence holds arrays on different devices ({names}); "
                         f"move them to one device with x.to_device() first")
    dev = devices.pop() if device is None else get_device(device)
    if dtype is not None:
        dt = dev.dtype_of(dtype)
    else:
        dt = np.result_type(*(a.dtype for _, a in arrays),
                            *(v if type(v) in _SCALARS else v.dtype for _, v in host))
        if (not dev.info.float64 and dt in (np.float64, np.complex128)
                and all(a.dtype != dt for _, a in arrays)):
            dt = np.dtype(np.float32 if dt == np.float64 else np.complex64)  # a scalar's
        dt = dev.dtype_of(dt)
    staged = None
    if host:  # converted before anything is allocated: a value that does not fit raises
        staged = np.zeros(shape, dt)
        try:
            for index, v in host:
                staged[index] = v
        except (TypeError, ValueError, OverflowError) as e:
            raise type(e)(f"asarray(): cannot hold {v!r:.60} in a {dt} array: {e}") from None
    out = new_array(normalize_shape(shape), dt, dev, kind)
    try:
        if staged is not None:
            transfer.upload(out, staged)
        for index, a in arrays:
            if a.size == 0:
                continue
            moved = a if a.device == dev else a.to_device(dev)  # device= asked for a move
            try:
                with out[index] as dst:
                    transfer.copy_raw(dst, moved)
            finally:
                if moved is not a:
                    moved.free()
    except BaseException:
        out.free()
        raise
    return out


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
    moved = a.to_device(dev, kind=kind)
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
