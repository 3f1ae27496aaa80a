"""The CUDA Array Interface, version 3: the part shared by every CUDA back-end.

* :func:`interface` -- the ``__cuda_array_interface__`` dict of a CUDA array
  (``shape``, ``typestr``, ``descr``, ``strides`` (``None`` when C-contiguous),
  ``data`` ``(ptr, readonly)``, ``version`` 3, ``stream``).  Stream: when the
  back-end offers ``impl.cai_stream(index) -> int`` (the stream its work is
  queued on), that handle is given and the consumer orders its work after it;
  otherwise the device is synchronised and ``stream`` is ``None``.
* :func:`import_interface` -- a zero-copy ``GPUArray`` over an object's
  ``__cuda_array_interface__``, keeping the object alive as the owner of the
  memory.  A ``stream`` in the interface is waited for (``impl.wait_stream``
  when the back-end has it, else a device synchronisation).

Both need a device of the ``cuda`` back-end; the dict logic itself
(:func:`build`, :func:`parse`) is plain Python and works anywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._common.dtypes import normalize_dtype
from .._common.raw import c_strides, extent, is_c_contiguous
from .._memory.devices import devices, get_device
from .._memory.streams import order_after_other_users

if TYPE_CHECKING:
    from .array import GPUArray

__all__ = ["interface", "import_interface", "build", "parse", "Described"]

VERSION = 3


def build(ptr: int, shape: tuple, strides: tuple, dtype, readonly: bool = False,
          stream: int | None = None) -> dict:
    """A version-3 interface dict for a layout (``ptr`` is the address of element 0)."""
    dt = np.dtype(dtype)
    shape = tuple(int(n) for n in shape)
    strides = tuple(int(s) for s in strides)
    if stream == 0:
        raise ValueError("stream 0 is not allowed by the CUDA Array Interface (it is "
                         "ambiguous); use 1 for the legacy default stream or 2 for per-thread")
    if dt.fields is None and not dt.subdtype:
        typestr, descr = dt.str, [("", dt.str)]
    else:
        typestr, descr = f"|V{dt.itemsize}", dt.descr
    size = 1
    for n in shape:
        size *= n
    return {
        "shape": shape,
        "typestr": typestr,
        "descr": descr,
        "strides": None if is_c_contiguous(shape, strides, dt.itemsize) else strides,
        "data": (int(ptr) if size else 0, bool(readonly)),
        "version": VERSION,
        "stream": stream,
    }


class Described:
    """What an interface dict describes: ``ptr`` (element 0), ``shape``, byte
    ``strides``, ``dtype``, ``readonly``, ``stream`` and the byte range
    ``[lo, hi)`` relative to ``ptr``."""

    __slots__ = ("ptr", "shape", "strides", "dtype", "readonly", "stream", "lo", "hi")

    def __repr__(self) -> str:
        return (f"Described(ptr=0x{self.ptr:x}, shape={self.shape}, strides={self.strides}, "
                f"dtype={self.dtype}, readonly={self.readonly}, stream={self.stream})")


def parse(iface) -> Described:
    """Validate an interface dict (versions 0-3) and describe its layout.

    ``ValueError``/``TypeError`` name the offending key; masked arrays are refused.
    """
    if not isinstance(iface, dict):
        raise TypeError(f"__cuda_array_interface__ must be a dict, got {type(iface).__name__}")
    for key in ("shape", "typestr", "data"):
        if key not in iface:
            raise ValueError(f"__cuda_array_interface__ lacks the required key {key!r}")
    version = iface.get("version", 0)
    if not isinstance(version, int) or not 0 <= version <= VERSION:
        raise ValueError(f"__cuda_array_interface__ version {version!r} is not supported "
                         f"(0 to {VERSION})")
    if iface.get("mask") is not None:
        raise ValueError("masked arrays (__cuda_array_interface__ 'mask') are not supported")
    try:
        shape = tuple(int(n) for n in iface["shape"])
    except (TypeError, ValueError):
        raise TypeError(f"__cuda_array_interface__ 'shape' must be a tuple of ints, "
                        f"got {iface['shape']!r}") from None
    if any(n < 0 for n in shape):
        raise ValueError(f"__cuda_array_interface__ 'shape' {shape} has a negative extent")
    typestr = iface["typestr"]
    descr = iface.get("descr")
    try:
        dt = np.dtype(typestr)
        if dt.kind == "V" and descr is not None and not (len(descr) == 1 and descr[0][0] == ""):
            dt = np.dtype(descr)
    except TypeError:
        raise TypeError(f"__cuda_array_interface__ 'typestr' {typestr!r} (descr {descr!r}) "
                        f"is not a NumPy type string") from None
    if dt.itemsize == 0:
        raise ValueError(f"__cuda_array_interface__ 'typestr' {typestr!r} has no size")
    data = iface["data"]
    if not (isinstance(data, tuple) and len(data) == 2):
        raise TypeError(f"__cuda_array_interface__ 'data' must be a (ptr, readonly) tuple, "
                        f"got {data!r}")
    ptr, readonly = data
    if isinstance(ptr, bool) or not isinstance(ptr, (int, np.integer)) or ptr < 0:
        raise TypeError(f"__cuda_array_interface__ data pointer must be a non-negative int, "
                        f"got {ptr!r}")
    strides = iface.get("strides")
    if strides is None:
        strides = c_strides(shape, dt.itemsize)
    else:
        try:
            strides = tuple(int(s) for s in strides)
        except (TypeError, ValueError):
            raise TypeError(f"__cuda_array_interface__ 'strides' must be None or a tuple of "
                            f"ints, got {strides!r}") from None
        if len(strides) != len(shape):
            raise ValueError(f"__cuda_array_interface__ 'strides' {strides} do not match "
                             f"'shape' {shape}")
    stream = iface.get("stream") if version >= 3 else None
    if stream is not None:
        if isinstance(stream, bool) or not isinstance(stream, (int, np.integer)):
            raise TypeError(f"__cuda_array_interface__ 'stream' must be None or an int, "
                            f"got {stream!r}")
        if stream == 0:
            raise ValueError("__cuda_array_interface__ 'stream' is 0, which the interface "
                             "forbids (ambiguous between the legacy and per-thread default)")
    lo, hi = extent(shape, strides, dt.itemsize)
    if int(ptr) == 0 and hi > lo:
        raise ValueError(f"__cuda_array_interface__ has a NULL data pointer but {hi - lo} "
                         f"bytes of data (shape {shape})")
    d = Described()
    d.ptr = int(ptr)
    d.shape = shape
    d.strides = strides
    d.dtype = dt
    d.readonly = bool(readonly)
    d.stream = None if stream is None else int(stream)
    d.lo, d.hi = lo, hi
    return d


def _cuda_devices() -> list:
    try:
        return devices("cuda")
    except ValueError:
        return []


def interface(a: GPUArray) -> dict:
    """``a.__cuda_array_interface__`` for an array on a CUDA device.

    Arrays of other back-ends have no CUDA Array Interface: ``AttributeError``
    (so that ``hasattr(a, "__cuda_array_interface__")`` is false for them when
    ``GPUArray`` exposes this as a property).
    """
    st = a._storage
    dev = st.device
    if dev.backend != "cuda":
        raise AttributeError(f"__cuda_array_interface__ exists only for arrays on CUDA devices; "
                             f"this one is on {dev} (use __dlpack__ or .get())")
    st = a._live()
    order_after_other_users(st)  # the stream named below is the one the memory is ready on
    hook = getattr(dev.impl, "cai_stream", None)
    stream = hook(dev.index) if hook is not None else None
    if stream is None:
        dev.impl.synchronize(dev.index)
    return build(st.ptr + a._offset, a._shape, a._strides, a._dtype, not a._writeable, stream)


def import_interface(obj, device=None) -> GPUArray:
    """A GPUArray over ``obj.__cuda_array_interface__``: no copy, ``obj`` kept alive.

    ``device``: the CUDA device to wrap on (``None``: the device the pointer
    belongs to).  ``ValueError`` when no CUDA device exists or ``device`` is not
    one.  Read-only interfaces give read-only arrays.
    """
    from .wrap import pointer_info, unsafe_wrap

    d = parse(obj.__cuda_array_interface__)
    cuda = _cuda_devices()
    if not cuda:
        raise ValueError(f"{type(obj).__name__} describes CUDA memory "
                         f"(__cuda_array_interface__), but no CUDA device is available; "
                         f"available back-ends: {', '.join(sorted({x.backend for x in devices()}))}")
    if device is not None:
        dev = get_device(device)
        if dev.backend != "cuda":
            raise ValueError(f"{type(obj).__name__} describes CUDA memory "
                             f"(__cuda_array_interface__); it can be imported on a CUDA device "
                             f"only, not on {dev}: import it, then move it with .to_device()")
    else:
        dev = cuda[0]
        if d.hi > d.lo:
            info = pointer_info(d.ptr + d.lo, dev)
            if info is not None:
                dev = info.device
    if d.stream is not None:
        wait = getattr(dev.impl, "wait_stream", None)
        if wait is not None:
            wait(dev.index, d.stream)
        else:
            dev.impl.synchronize(dev.index)
    dt = normalize_dtype(d.dtype)
    a = unsafe_wrap(d.ptr, d.shape, dt, strides=d.strides, device=dev, owner=obj)
    if d.readonly:
        ro = a._derive(a._shape, a._strides, a._offset, a._dtype, False, a._contig)
        a.free()
        return ro
    return a
