"""DLPack producer and consumer, following the Python array API standard.

Producer (``a.__dlpack__`` / ``a.__dlpack_device__``)
-----------------------------------------------------
* The capsule is a versioned one (``"dltensor_versioned"``, DLPack 1.0) when
  the consumer's ``max_version`` is at least ``(1, 0)``, the legacy
  ``"dltensor"`` otherwise.  Strides are always filled in (in elements); the
  data pointer is the address of element ``[0, ..., 0]`` with
  ``byte_offset == 0`` -- what NumPy, PyTorch and CuPy produce, so every
  consumer reads it right (the DLPack header's 256-byte alignment of ``data``
  is, as its own note says, followed by nobody).
* Read-only views carry ``DLPACK_FLAG_BITMASK_READ_ONLY``; asked for as a
  legacy capsule (which cannot say read-only) they raise ``BufferError``.
* Device: arrays of the ``cpu`` back-end are ``kDLCPU`` whatever their kind
  (an export is an explicit request); OpenCL arrays are ``kDLOpenCL`` with the
  SVM address as data pointer (NumPy and PyTorch refuse them: ask for
  ``dl_device=(kDLCPU, 0)`` or ``copy=True`` to get a host copy); CUDA arrays
  ``kDLCUDA`` / ``kDLCUDAHost`` / ``kDLCUDAManaged`` by kind; ROCm likewise.
* ``copy=True`` exports a fresh copy (``DLPACK_FLAG_BITMASK_IS_COPIED``);
  ``dl_device=(kDLCPU, 0)`` on a device that is not the host copies to the
  host (``copy=False`` then raises ``BufferError``) -- unless the array's kind
  is one of the device's ``info.host_kinds`` (fine-grain SVM and every kind on
  an OpenCL CPU device such as PoCL, CUDA pinned and managed memory): that
  memory is exported in place as ``kDLCPU`` after synchronising.  Streams: ``None`` is the
  only value for devices without streams; on CUDA a consumer's ``stream`` is made to wait
  (on the device) for every stream that used the memory -- the DLPack stream rule, no
  host wait -- ``stream=None`` synchronises the device (a full synchronisation satisfies
  every stream the consumer may use) and ``stream == -1`` asks for nothing.
* Lifetime: the capsule owns one handle on the storage (it counts in
  ``storage.refcount``) until the consumer's deleter runs -- or, when nobody
  consumed it, until the capsule is destroyed -- exactly once, from any thread.

  Capsule, destructor and deleter are C (``gpuarrays._dlpack``): the
  ``DLManagedTensor[Versioned]`` is one ``malloc``'d block with its shape and
  strides; ``manager_ctx`` holds a strong reference to the handle (a derived
  GPUArray, or for a host copy the NumPy array).  The deleter takes the GIL
  (``PyGILState_Ensure``), clears ``manager_ctx`` and drops the handle with any
  pending exception saved and restored, and never raises -- so a consumer may
  drop the capsule while an exception is being raised (NumPy refusing an
  OpenCL tensor does) without "Exception ignored" or ``SystemError``, which a
  ``ctypes`` callback could not do.  After the interpreter is gone it leaks.
  The block is shared by the capsule and the consumer and freed when both let
  go; the capsule's destructor runs the deleter itself only when the capsule
  was not consumed (still named ``dltensor[_versioned]``).

Known PyTorch (2.13) bugs: ``torch.from_dlpack`` of a capsule it refuses --
every OpenCL array -- calls the capsule's deleter but leaves it unconsumed, so
the capsule's destructor calls the deleter again.  With NumPy's capsules that
reads freed memory; ours survive it: the first call clears ``manager_ctx``, the
second finds nothing to release, and the block is still valid because the
capsule holds its share.  PyTorch also aborts the process on negative strides
(any producer): do not hand it reversed views.

Consumer (``ga.from_dlpack``)
-----------------------------
``x.__dlpack__(max_version=(1, 0))`` (without arguments for producers that
predate them); ``gpuarrays._dlpack.take`` checks the capsule's name, reads the
struct (versioned or legacy), renames the capsule ``"used_dltensor[_versioned]"``
and returns an owner object (C) that calls the producer's deleter exactly once
when it dies (GIL held, pending exception saved and restored; skipped once
interpreter shutdown started).  Memory on one of our devices is wrapped
without a copy (``kDLCPU`` as ``"host"`` memory on ``cpu:0``; ``kDLOpenCL`` /
CUDA memory when that device's back-end knows the address); the owner hangs
off the wrapped storage and dies with its last handle.  ``kDLCPU`` memory is
wrapped directly (``Storage`` + ``wrap_storage``), without the cpu back-end's
tracking-only host registration that ``unsafe_wrap`` does; other memory goes
through ``unsafe_wrap``.  Read-only producers give read-only arrays.  A copy is
made when asked (``copy=True``), when ``device=`` names another device, or
when the memory is on a device we do not have (the producer is then asked for
a host copy); ``copy=False`` raises ``ValueError`` when a copy is needed.

The common call -- a host producer, ``device`` None or ``cpu:0``, ``copy`` None
or False -- takes a short path with the same checks.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

import numpy as np

from .._memory.devices import devices, get_device
from .._memory.state import state
from .._memory.storage import Storage
from .._memory.streams import users_of
from .make import ArrayBase, wrap_storage
from .transfer import outside_handle
from .wrap import WrapHome

try:
    from .. import _dlpack as _c
except ImportError as e:  # pragma: no cover - a source checkout that was never built
    raise ImportError(
        f"gpuarrays._array.dlpack needs the compiled extension gpuarrays._dlpack ({e}); "
        f"build it with `pip install -e .` (or `python setup.py build_ext --inplace`)") from e

if TYPE_CHECKING:
    from .array import GPUArray

__all__ = [
    "export", "device_of", "from_dlpack",
    "DLDevice", "DLDataType", "DLTensor", "DLManagedTensor", "DLManagedTensorVersioned",
    "DLPackVersion", "kDLCPU", "kDLCUDA", "kDLCUDAHost", "kDLOpenCL", "kDLROCM", "kDLROCMHost",
    "kDLCUDAManaged", "FLAG_READ_ONLY", "FLAG_IS_COPIED",
]

# DLDeviceType
kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLOpenCL = 4
kDLVulkan = 7
kDLMetal = 8
kDLROCM = 10
kDLROCMHost = 11
kDLCUDAManaged = 13
kDLOneAPI = 14

_DEVICE_NAMES = {kDLCPU: "kDLCPU", kDLCUDA: "kDLCUDA", kDLCUDAHost: "kDLCUDAHost",
                 kDLOpenCL: "kDLOpenCL", kDLVulkan: "kDLVulkan", kDLMetal: "kDLMetal",
                 kDLROCM: "kDLROCM", kDLROCMHost: "kDLROCMHost",
                 kDLCUDAManaged: "kDLCUDAManaged", kDLOneAPI: "kDLOneAPI"}

# DLDataTypeCode
kDLInt = 0
kDLUInt = 1
kDLFloat = 2
kDLBfloat = 4
kDLComplex = 5
kDLBool = 6

FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1

VERSION = (1, 0)  # the DLPack ABI version this module speaks
_CPU0 = (kDLCPU, 0)


# The DLPack structs as ctypes types, for inspecting capsules (tests, debugging); the
# capsules themselves are built and parsed by gpuarrays._dlpack.
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),  # void (*)(DLManagedTensor *)
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),  # void (*)(DLManagedTensorVersioned *)
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# dtype <-> DLDataType (one lane).  Export: {dtype: code | bits << 8}, every native-order
# spelling of the supported types (np.dtype("l") and np.dtype("q") are both int64 here);
# import: {(code, bits): dtype}.
# dtype <-> DLDataType (one lane).  Export: {dtype: code | bits << 8}, every native-order
# spelling of the supported types (np.dtype("l") and np.dtype("q") are both int64 here);
# import: {(code, bits): dtype}.
_IMPORT_DTYPES = {
    (kDLBool, 8): np.dtype(np.bool_),
    (kDLInt, 8): np.dtype(np.int8), (kDLInt, 16): np.dtype(np.int16),
    (kDLInt, 32): np.dtype(np.int32), (kDLInt, 64): np.dtype(np.int64),
    (kDLUInt, 8): np.dtype(np.uint8), (kDLUInt, 16): np.dtype(np.uint16),
    (kDLUInt, 32): np.dtype(np.uint32), (kDLUInt, 64): np.dtype(np.uint64),
    (kDLFloat, 16): np.dtype(np.float16), (kDLFloat, 32): np.dtype(np.float32),
    (kDLFloat, 64): np.dtype(np.float64),
    (kDLComplex, 64): np.dtype(np.complex64), (kDLComplex, 128): np.dtype(np.complex128),
}
_CODE_OF_KIND = {"b": kDLBool, "i": kDLInt, "u": kDLUInt, "f": kDLFloat, "c": kDLComplex}
_EXPORT_CODES = {}
for _ch in "?bhilqpBHILQPefdFD":
    _dt = np.dtype(_ch)
    if (_CODE_OF_KIND[_dt.kind], _dt.itemsize * 8) in _IMPORT_DTYPES:
        _EXPORT_CODES[_dt] = _CODE_OF_KIND[_dt.kind] | (_dt.itemsize * 8) << 8
del _ch, _dt
_c.setup(state, _EXPORT_CODES, _IMPORT_DTYPES)
_capsule = _c.capsule
_take_c = _c.take


# ------------------------------------------------------------------------- devices
def device_of(a: GPUArray) -> tuple[int, int]:
    """``a.__dlpack_device__()``: ``(DLDeviceType, device_id)`` of the array's memory."""
    st = a._storage
    dev = st.device
    backend = dev.backend
    kind = st.kind
    if backend == "cpu":
        return (kDLCPU, 0)
    if backend == "opencl":
        return (kDLOpenCL, dev.index)
    if backend == "cuda":
        if kind == "host":
            return (kDLCUDAHost, 0)
        if kind == "unified":
            return (kDLCUDAManaged, dev.index)
        return (kDLCUDA, dev.index)
    if backend == "rocm":
        return (kDLROCMHost, 0) if kind == "host" else (kDLROCM, dev.index)
    raise BufferError(f"arrays of the {backend!r} back-end cannot be exported with DLPack")


def _device_name(dl_device: tuple[int, int]) -> str:
    t, i = dl_device
    return f"({_DEVICE_NAMES.get(t, t)}, {i})"


def _our_device(dl_device: tuple[int, int]):
    """The device of ours that holds memory of a DLPack device, or None."""
    t, i = int(dl_device[0]), int(dl_device[1])
    if t == kDLCPU:
        return get_device("cpu:0")
    backend = {kDLOpenCL: "opencl", kDLCUDA: "cuda", kDLCUDAHost: "cuda",
               kDLCUDAManaged: "cuda", kDLROCM: "rocm", kDLROCMHost: "rocm"}.get(t)
    if backend is None:
        return None
    try:
        found = devices(backend)
    except ValueError:
        return None
    if t in (kDLCUDAHost, kDLROCMHost):  # pinned host memory: any device of the back-end
        i = 0
    for d in found:
        if d.index == i:
            return d
    return None


# ------------------------------------------------------------------------- producer
def _check_max_version(max_version) -> bool:
    """True for a versioned capsule."""
    if max_version is None:
        return False
    try:
        major, minor = (int(v) for v in max_version)
    except (TypeError, ValueError):
        raise ValueError(f"max_version must be None or a (major, minor) tuple of ints, "
                         f"got {max_version!r}") from None
    return major >= 1


def _check_dl_device(dl_device) -> tuple[int, int] | None:
    if dl_device is None:
        return None
    try:
        t, i = (int(v) for v in dl_device)
    except (TypeError, ValueError):
        raise ValueError(f"dl_device must be None or a (device_type, device_id) tuple of ints, "
                         f"got {dl_device!r}") from None
    return (t, i)


def _sync(a: GPUArray, own: tuple[int, int], stream) -> None:
    """Make the array's pending work visible to the consumer (stream semantics)."""
    st = a._storage
    dev = st.device
    if own[0] in (kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM, kDLROCMHost):
        if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int)):
            raise ValueError(f"stream must be None or an int, got {type(stream).__name__}")
        if stream == 0 and own[0] != kDLROCM:
            raise ValueError("stream=0 is ambiguous for CUDA and not allowed by the array API "
                             "standard; pass 1 (legacy default stream), 2 (per-thread default) "
                             "or a stream handle")
        if stream == -1:
            return  # the consumer asked for no synchronisation
        wait = getattr(dev.impl, "foreign_wait_event", None)
        if stream is None or wait is None:
            dev.impl.synchronize(dev.index)  # satisfies every stream the consumer may use
            return
        # the stream rule: the consumer's stream waits (on the device) for every stream
        # that used the memory -- no host wait (docs/streams.md)
        for user in users_of(st):
            event = user.record()  # kept until the wait is enqueued (freed when it goes)
            wait(dev.index, stream, event._handle)
        return
    if stream is not None:
        raise ValueError(f"stream must be None for arrays on {dev} (device type "
                         f"{_device_name(own)} has no streams), got {stream!r}")
    if own[0] != kDLCPU:
        dev.impl.synchronize(dev.index)


def _capsule_of(a: GPUArray, versioned: bool, device: tuple[int, int], copied: bool):
    """A capsule over ``a`` owning a new handle on its storage (released by the deleter)."""
    handle = outside_handle(a)
    flags = (FLAG_IS_COPIED if copied else 0) | (0 if a._writeable else FLAG_READ_ONLY)
    return _capsule(handle, handle._storage.ptr + a._offset, a._shape, a._strides, a._dtype,
                    versioned, flags, device[0], device[1])


def _capsule_of_host(host: np.ndarray, versioned: bool):
    """A capsule over a fresh host copy (the NumPy array is the handle)."""
    ptr = host.__array_interface__["data"][0]
    return _capsule(host, ptr, host.shape, host.strides, host.dtype, versioned,
                    FLAG_IS_COPIED, kDLCPU, 0)


def export(a: GPUArray, *, stream=None, max_version=None, dl_device=None, copy=None):
    """``a.__dlpack__(...)``: a DLPack capsule over ``a`` (see the module docstring).

    Raises ``BufferError`` for requests that cannot be met (a read-only view as
    a legacy capsule, a device the data cannot be exported to, ``copy=False``
    when a copy is needed, a dtype or layout DLPack cannot describe),
    ``FreedArrayError`` for a freed array.
    """
    st = a._storage
    if (stream is None and dl_device is None and not copy and type(max_version) is tuple
            and len(max_version) == 2 and type(max_version[0]) is int
            and st.device.backend == "cpu"):
        # Hot path: what numpy.from_dlpack / torch.from_dlpack ask of a cpu array.
        versioned = max_version[0] >= 1
        if a._writeable:
            flags = 0
        elif versioned:
            flags = FLAG_READ_ONLY
        else:
            flags = -1  # a read-only legacy capsule: refused below
        if flags >= 0:
            handle = outside_handle(a)  # raises FreedArrayError on a freed array
            return _capsule(handle, st.ptr + a._offset, a._shape, a._strides, a._dtype,
                            versioned, flags, kDLCPU, 0)
    a._live()
    if copy not in (None, True, False):
        raise ValueError(f"copy must be None, True or False, got {copy!r}")
    versioned = _check_max_version(max_version)
    own = device_of(a)
    want = _check_dl_device(dl_device)
    to_host = False
    if want is not None and want != own:
        if want != _CPU0:
            raise BufferError(f"cannot export an array on {a.device} ({_device_name(own)}) to "
                              f"DLPack device {_device_name(want)}; only {_device_name(own)} "
                              f"or a host copy ({_device_name(_CPU0)}) is possible")
        if not copy and st.kind in st.device.info.host_kinds:
            own = _CPU0  # host-addressable memory: the host reads it in place
            _sync(a, device_of(a), stream)
        elif copy is False:
            raise BufferError(f"exporting an array of kind {st.kind!r} on {a.device} to "
                              f"{_device_name(want)} needs a copy, and copy=False was passed "
                              f"(memory of kind {', '.join(map(repr, st.device.info.host_kinds))}"
                              f" on that device would not)")
        else:
            to_host = True
    else:
        _sync(a, own, stream)
    if to_host:
        return _capsule_of_host(a.get(), versioned)
    if copy:
        fresh = a.copy()
        try:
            if own != _CPU0:
                fresh._storage.device.impl.synchronize(fresh._storage.device.index)
            return _capsule_of(fresh, versioned, own, True)
        finally:
            fresh.free()
    if not a._writeable and not versioned:
        raise BufferError("cannot export a read-only array as a legacy DLPack capsule (it "
                          "cannot say read-only); the consumer must ask for a versioned one "
                          "(max_version >= (1, 0)), or pass copy=True")
    return _capsule_of(a, versioned, own, False)


# ------------------------------------------------------------------------- consumer
class _Parsed:
    """A consumed capsule: ``owner`` (calls the producer's deleter when it dies), the
    layout (``ptr`` of element 0, byte ``strides``, ``[lo, lo + nbytes)`` touched), the
    DLPack ``device`` and ``writeable`` (False when the producer flagged it read-only)."""

    __slots__ = ("owner", "dtype", "ptr", "shape", "strides", "lo", "nbytes", "writeable",
                 "device")

    def __init__(self, t: tuple) -> None:
        (self.owner, self.dtype, self.ptr, self.shape, self.strides, self.lo, self.nbytes,
         self.writeable, dev_type, dev_id) = t
        self.device = (dev_type, dev_id)


def _take(capsule) -> _Parsed:
    """Parse and consume a DLPack capsule (renamed ``used_...``; we own the deleter now)."""
    return _Parsed(_check_ours(_take_c(capsule)))


def _check_ours(t: tuple) -> tuple:
    """``t`` (what ``take`` returned), unless it is a capsule of ours whose device was reset.

    Raises ``DeviceResetError``: the memory it names went away with the reset.  The
    owner dies with the error, so the capsule's handle is released.
    """
    handle = t[0].handle
    if isinstance(handle, ArrayBase) and not handle._storage._epoch.live:
        raise handle._storage.freed_error(False)
    return t


# Home of imported host memory: no pin, nothing to free; drops the owner (so the
# producer's deleter runs) when the last handle goes.
_HOME = WrapHome(None, None)
_CPU_DEV = None  # cpu:0, looked up on first use


def _cpu0():
    global _CPU_DEV
    _CPU_DEV = get_device("cpu:0")
    return _CPU_DEV


def _is_cpu0(device) -> bool:
    return get_device(device) == (_CPU_DEV or _cpu0())


def _wrap_host(owner, dt, ptr, shape, strides, lo, nbytes, writeable, dev) -> GPUArray:
    """Zero-copy GPUArray over ``kDLCPU`` memory on ``dev`` (cpu:0), owning the capsule.

    What ``unsafe_wrap(..., kind="host", owner=owner)`` does, minus the cpu back-end's
    host registration, which only tracks ranges (kDLCPU memory is only ever wrapped
    for cpu:0) and costs more than the rest of the import.
    """
    if dt not in dev._accepts:
        dev.require(dt)
    if ptr == 0 and nbytes:
        raise BufferError(f"cannot import DLPack memory on {_device_name(_CPU0)} without a "
                          f"copy: a NULL data pointer with a non-zero size ({nbytes} bytes "
                          f"for shape {shape})")
    return wrap_storage(Storage(ptr + lo, nbytes, dev, "host", _HOME, dev.memory.epoch, 0,
                                False, owner), shape, strides, dt, -lo, writeable)


def _wrap(p: _Parsed, dev) -> GPUArray:
    """Zero-copy GPUArray over the parsed tensor on ``dev``, owning the capsule."""
    if p.device[0] == kDLCPU:
        return _wrap_host(p.owner, p.dtype, p.ptr, p.shape, p.strides, p.lo, p.nbytes,
                          p.writeable, dev)
    from .wrap import unsafe_wrap

    try:
        a = unsafe_wrap(p.ptr, p.shape, p.dtype, strides=p.strides, device=dev, owner=p.owner)
    except ValueError as e:
        raise BufferError(f"cannot import DLPack memory at 0x{p.ptr:x} on "
                          f"{_device_name(p.device)} without a copy: {e}") from e
    if not p.writeable:
        ro = a._derive(a._shape, a._strides, a._offset, a._dtype, False, a._contig)
        a.free()
        return ro
    return a


def _call_dlpack(x, **kwargs):
    try:
        return x.__dlpack__(max_version=VERSION, **kwargs)
    except TypeError:
        if kwargs:
            raise
        return x.__dlpack__()  # a producer from before max_version


def _from_gpuarray(x: GPUArray, target, copy) -> GPUArray:
    x._live()
    if target is None or target == x.device:
        return x.copy() if copy else x.view()
    if copy is False:
        raise ValueError(f"from_dlpack(copy=False): the array is on {x.device}, {target} was "
                         f"asked; that needs a copy")
    return x.to_device(target, kind="device")


def _place(a: GPUArray, target, copy) -> GPUArray:
    """``a`` (just imported) copied when asked or moved to ``target``."""
    if target is not None and target != a.device:
        try:
            return a.to_device(target, kind="device")
        finally:
            a.free()
    if copy:
        try:
            return a.copy()
        finally:
            a.free()
    return a


def from_dlpack(x, *, device=None, copy=None) -> GPUArray:
    """A GPUArray from a DLPack producer (or a raw DLPack capsule).

    Zero-copy when the memory is on one of our devices and no other ``device``
    is asked for: the array shares the producer's memory and keeps its capsule
    alive; the producer's deleter runs when the last array over it is gone.
    ``copy=True`` always copies; ``copy=False`` raises ``ValueError`` when a
    copy is needed.  Read-only producers give read-only arrays.
    """
    if ((copy is None or copy is False) and not isinstance(x, ArrayBase)
            and (device is None or device is _CPU_DEV or _is_cpu0(device))):
        # Hot path: host memory (a NumPy array, a CPU tensor) imported as it is.
        try:
            src = x.__dlpack_device__()
        except AttributeError:
            src = None  # not a producer, or a raw capsule
        if type(src) is tuple and src == _CPU0:
            try:
                capsule = x.__dlpack__(max_version=VERSION)
            except TypeError:
                capsule = x.__dlpack__()  # a producer from before max_version
            except AttributeError:
                return _from_dlpack(x, device, copy)  # says what is missing
            t = _check_ours(_take_c(capsule))
            if t[8] == kDLCPU:
                owner, dt, ptr, shape, strides, lo, nbytes, writeable, _, _ = t
                dev = _CPU_DEV or _cpu0()
                if ptr and dt in dev._accepts:
                    return wrap_storage(Storage(ptr + lo, nbytes, dev, "host", _HOME,
                                                dev.memory.epoch, 0, False, owner),
                                        shape, strides, dt, -lo, writeable)
                return _wrap_host(owner, dt, ptr, shape, strides, lo, nbytes, writeable, dev)
            return _checked_import(x, src, _Parsed(t), None, None)
    return _from_dlpack(x, device, copy)


def _checked_import(x, src, p: _Parsed, target, copy) -> GPUArray:
    got = _our_device(p.device)
    if got is None:
        raise BufferError(f"{type(x).__name__}.__dlpack_device__() said {_device_name(src)} "
                          f"but its capsule is on {_device_name(p.device)}")
    return _place(_wrap(p, got), target, copy)


def _from_dlpack(x, device, copy) -> GPUArray:
    if copy not in (None, True, False):
        raise ValueError(f"copy must be None, True or False, got {copy!r}")
    target = None if device is None else get_device(device)
    if isinstance(x, ArrayBase):
        return _from_gpuarray(x, target, copy)
    if _is_capsule(x):
        p = _take(x)
        home = _our_device(p.device)
        if home is None:
            raise BufferError(f"the capsule's memory is on DLPack device "
                              f"{_device_name(p.device)}, for which gpuarrays has no device")
        if copy is False and target is not None and target != home:
            raise ValueError(f"from_dlpack(copy=False): the memory is on {home}, {target} was "
                             f"asked; that needs a copy")
        return _place(_wrap(p, home), target, copy)
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise TypeError(f"from_dlpack expects an object with __dlpack__ and __dlpack_device__ "
                        f"(or a DLPack capsule), got {type(x).__name__}")
    src = tuple(int(v) for v in x.__dlpack_device__())
    home = _our_device(src)
    if home is None:
        # Memory we cannot address: ask the producer for a host copy.
        if copy is False:
            raise ValueError(f"from_dlpack(copy=False): the memory is on DLPack device "
                             f"{_device_name(src)}, which gpuarrays has no device for; only a "
                             f"copy is possible")
        try:
            capsule = x.__dlpack__(max_version=VERSION, dl_device=_CPU0, copy=copy)
        except (TypeError, BufferError, NotImplementedError, ValueError) as e:
            raise BufferError(f"cannot import memory on DLPack device {_device_name(src)}: "
                              f"gpuarrays has no such device and the producer "
                              f"({type(x).__name__}) could not give a host copy ({e})") from e
        p = _take(capsule)
        if p.device[0] != kDLCPU:
            raise BufferError(f"asked {type(x).__name__} for a host copy, it returned memory on "
                              f"{_device_name(p.device)}")
        return _place(_wrap(p, get_device("cpu:0")), target or get_device(None), False)
    if copy is False and target is not None and target != home:
        raise ValueError(f"from_dlpack(copy=False): the memory is on {home}, {target} was "
                         f"asked; that needs a copy")
    stream = None
    if home.backend in ("cuda", "rocm"):
        hook = getattr(home.impl, "dlpack_stream", None)  # the stream we consume on
        stream = hook(home.index) if hook is not None else None
    capsule = _call_dlpack(x, stream=stream) if stream is not None else _call_dlpack(x)
    return _checked_import(x, src, _take(capsule), target, copy)


def _is_capsule(x) -> bool:
    return type(x).__name__ == "PyCapsule"
