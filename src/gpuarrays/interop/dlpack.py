"""DLPack producer and consumer (SPEC 8.2), following the Python array API standard.

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
  host (``copy=False`` then raises ``BufferError``).  Streams: ``None`` is the
  only value for devices without streams; on CUDA/ROCm the device is
  synchronised unless ``stream == -1`` (a full synchronisation satisfies every
  stream ordering the standard allows).
* Lifetime: the capsule owns one handle on the storage (it counts in
  ``storage.refcount``) until the consumer's deleter runs -- or, when nobody
  consumed it, until the capsule is destroyed -- exactly once, from any thread.

  The capsule, its destructor and the ``DLManagedTensor`` deleter are NumPy's
  C implementation, built over a NumPy array that describes our memory
  without touching it (for non-host devices the device fields are then set
  in the struct).  The handle hangs off that NumPy array.  This is deliberate:
  a capsule destructor or deleter written as a ``ctypes`` callback cannot work
  when a consumer drops the capsule while an exception is being raised (NumPy
  refusing an OpenCL tensor does exactly that, as does any frame unwinding
  over a consumed tensor): a ctypes callback invoked with an exception set
  fails on its first call (``SystemError: ... returned a result with an
  exception set``), prints "Exception ignored", and cannot restore the
  exception it found.  NumPy's destructor and deleter are C; the only Python
  they reach is ``GPUArray.__del__`` of our handle, and Python runs finalizers
  with the pending exception saved and restored.

Known PyTorch (2.13) bugs, with any producer (NumPy's own capsules too):
``torch.from_dlpack`` of a capsule it refuses -- every OpenCL array -- calls the
capsule's deleter but leaves it unconsumed, so the capsule's destructor calls
the deleter again on freed memory and the process may crash; and it aborts
the process on negative strides.  An exactly-once deleter in front of NumPy's
would need a ctypes callback, which breaks NumPy's refusal path (see above),
so this is left to PyTorch: do not hand it OpenCL arrays or reversed views.

Consumer (``ga.from_dlpack``)
-----------------------------
``x.__dlpack__(max_version=(1, 0))`` (without arguments for producers that
predate them), the capsule parsed with ``ctypes`` and renamed
``"used_dltensor[_versioned]"``.  Memory on one of our devices is wrapped
without a copy (``kDLCPU`` as ``"host"`` memory on ``cpu:0``; ``kDLOpenCL`` /
CUDA memory when that device's back-end knows the address), with an owner
object that calls the producer's deleter when the last handle on the wrapped
storage goes.  Read-only producers give read-only arrays.  A copy is made when
asked (``copy=True``), when ``device=`` names another device, or when the
memory is on a device we do not have (the producer is then asked for a host
copy); ``copy=False`` raises ``ValueError`` when a copy is needed.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .._raw import c_strides, ndarray_at
from .._state import state
from ..array import GPUArray
from ..devices import devices, get_device

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


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_NAME = b"dltensor"
_NAME_V = b"dltensor_versioned"
# The names a consumer gives a capsule it took.  ``PyCapsule_SetName`` keeps the
# pointer, so these live as long as the process: a bytes object that is never freed.
_USED = b"used_dltensor"
_USED_V = b"used_dltensor_versioned"


def _capi(name: str, restype, *argtypes):
    """A private prototype of a C-API function (``pythonapi``'s shared ones may be altered)."""
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_is_valid = _capi("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_capsule_get_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object,
                             ctypes.c_char_p)
_capsule_set_name = _capi("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_void_p)
_py_incref = _capi("Py_IncRef", None, ctypes.py_object)
_used_names = (ctypes.c_char_p(_USED), ctypes.c_char_p(_USED_V))
_py_incref(_used_names)  # immortal: renamed capsules point into these bytes forever
_USED_PTR = ctypes.cast(_used_names[0], ctypes.c_void_p).value
_USED_V_PTR = ctypes.cast(_used_names[1], ctypes.c_void_p).value



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
        dev.impl.synchronize(dev.index)
        return
    if stream is not None:
        raise ValueError(f"stream must be None for arrays on {dev} (device type "
                         f"{_device_name(own)} has no streams), got {stream!r}")
    if own[0] != kDLCPU:
        dev.impl.synchronize(dev.index)


def _capsule_over(host: np.ndarray, versioned: bool, device: tuple[int, int] | None,
                  copied: bool):
    """NumPy's capsule over ``host``; device fields and IS_COPIED set afterwards."""
    capsule = host.__dlpack__(max_version=VERSION if versioned else None)
    if device is None and not copied:
        return capsule
    if versioned:
        managed = DLManagedTensorVersioned.from_address(_capsule_get_pointer(capsule, _NAME_V))
        if copied:
            managed.flags |= FLAG_IS_COPIED
    else:
        managed = DLManagedTensor.from_address(_capsule_get_pointer(capsule, _NAME))
    if device is not None:
        managed.dl_tensor.device.device_type = device[0]
        managed.dl_tensor.device.device_id = device[1]
    return capsule


def _describe(a: GPUArray) -> np.ndarray:
    """A NumPy array describing ``a``'s memory (never read by NumPy), owning a new handle.

    The handle (a derived GPUArray) is released when the NumPy array -- and so
    the capsule built over it -- is gone.
    """
    handle = a.view()  # raises FreedArrayError on a freed array
    st = handle._storage
    return ndarray_at(st.ptr + handle._offset, handle._shape, handle._strides, handle._dtype,
                      readonly=not handle._writeable, owner=handle)


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
            and st.device.backend == "cpu" and (a._writeable or max_version[0] >= 1)):
        # Hot path: what numpy.from_dlpack / torch.from_dlpack ask of a cpu array.
        if a._freed or st._reason is not None or not st._epoch.live:
            raise a._freed_error()
        handle = a._derive(a._shape, a._strides, a._offset, a._dtype, a._writeable, a._contig)
        return ndarray_at(st.ptr + a._offset, a._shape, a._strides, a._dtype,
                          readonly=not a._writeable, owner=handle).__dlpack__(
            max_version=VERSION if max_version[0] >= 1 else None)
    a._live()
    if copy not in (None, True, False):
        raise ValueError(f"copy must be None, True or False, got {copy!r}")
    versioned = _check_max_version(max_version)
    own = device_of(a)
    want = _check_dl_device(dl_device)
    to_host = False
    if want is not None and want != own:
        if want != (kDLCPU, 0):
            raise BufferError(f"cannot export an array on {a.device} ({_device_name(own)}) to "
                              f"DLPack device {_device_name(want)}; only {_device_name(own)} "
                              f"or a host copy ({_device_name((kDLCPU, 0))}) is possible")
        if copy is False:
            raise BufferError(f"exporting an array on {a.device} to {_device_name(want)} needs "
                              f"a copy, and copy=False was passed")
        to_host = True
    _sync(a, own, stream)
    if to_host:
        return _capsule_over(a.get(), versioned, None, True)
    if copy:
        if own == (kDLCPU, 0):
            fresh = a.copy()
            try:
                return _capsule_over(_describe(fresh), versioned, None, True)
            finally:
                fresh.free()
        fresh = a.copy()
        try:
            fresh._storage.device.impl.synchronize(fresh._storage.device.index)
            return _capsule_over(_describe(fresh), versioned, own, True)
        finally:
            fresh.free()
    if not a._writeable and not versioned:
        raise BufferError("cannot export a read-only array as a legacy DLPack capsule (it "
                          "cannot say read-only); the consumer must ask for a versioned one "
                          "(max_version >= (1, 0)), or pass copy=True")
    return _capsule_over(_describe(a), versioned, None if own == (kDLCPU, 0) else own, False)


# ------------------------------------------------------------------------- consumer
_DTYPES = {
    (kDLBool, 8): np.dtype(np.bool_),
    (kDLInt, 8): np.dtype(np.int8), (kDLInt, 16): np.dtype(np.int16),
    (kDLInt, 32): np.dtype(np.int32), (kDLInt, 64): np.dtype(np.int64),
    (kDLUInt, 8): np.dtype(np.uint8), (kDLUInt, 16): np.dtype(np.uint16),
    (kDLUInt, 32): np.dtype(np.uint32), (kDLUInt, 64): np.dtype(np.uint64),
    (kDLFloat, 16): np.dtype(np.float16), (kDLFloat, 32): np.dtype(np.float32),
    (kDLFloat, 64): np.dtype(np.float64),
    (kDLComplex, 64): np.dtype(np.complex64), (kDLComplex, 128): np.dtype(np.complex128),
}


class _Imported:
    """Owner of a consumed capsule: calls the producer's deleter when it dies.

    Kept alive by the wrapped storage (``owner``); dies when the last handle
    on that storage goes.  Never raises; after interpreter shutdown starts it
    leaks instead of calling into the producer.
    """

    __slots__ = ("ptr", "_call")

    def __init__(self, ptr: int, deleter: int | None) -> None:
        self.ptr = ptr
        self._call = _DELETER(deleter) if deleter else None

    def release(self) -> None:
        call, self._call = self._call, None
        if call is not None and not state.shutting_down:
            call(self.ptr)

    def __del__(self) -> None:
        try:
            self.release()
        except BaseException:  # a finalizer never raises (and may run at exit)
            pass


class _Parsed:
    __slots__ = ("owner", "device", "ptr", "shape", "strides", "dtype", "readonly", "versioned")


def _is_capsule(x) -> bool:
    return type(x).__name__ == "PyCapsule"


def _take(capsule) -> _Parsed:
    """Parse and consume a DLPack capsule (renamed ``used_...``; we own the deleter now)."""
    if _capsule_is_valid(capsule, _NAME_V):
        versioned = True
        ptr = _capsule_get_pointer(capsule, _NAME_V)
        managed = DLManagedTensorVersioned.from_address(ptr)
    elif _capsule_is_valid(capsule, _NAME):
        versioned = False
        ptr = _capsule_get_pointer(capsule, _NAME)
        managed = DLManagedTensor.from_address(ptr)
    elif _capsule_is_valid(capsule, _USED_V) or _capsule_is_valid(capsule, _USED):
        raise BufferError("this DLPack capsule was already consumed; a capsule can be "
                          "imported only once (call __dlpack__ again for a new one)")
    else:
        raise TypeError("expected a DLPack capsule named 'dltensor' or 'dltensor_versioned'")
    _capsule_set_name(capsule, _USED_V_PTR if versioned else _USED_PTR)
    owner = _Imported(ptr, managed.deleter)  # from here on the deleter runs exactly once
    if versioned and managed.version.major != VERSION[0]:
        raise BufferError(f"the producer returned a DLPack {managed.version.major}."
                          f"{managed.version.minor} capsule; gpuarrays reads DLPack "
                          f"{VERSION[0]}.x")
    t = managed.dl_tensor
    p = _Parsed()
    p.owner = owner
    p.versioned = versioned
    p.readonly = bool(versioned and managed.flags & FLAG_READ_ONLY)
    p.device = (int(t.device.device_type), int(t.device.device_id))
    code, bits, lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
    dt = _DTYPES.get((code, bits))
    if dt is None or lanes != 1:
        raise BufferError(f"DLPack data type (code={code}, bits={bits}, lanes={lanes}) has no "
                          f"GPUArray equivalent; supported: bool, int/uint 8-64, float 16-64, "
                          f"complex 64/128 with one lane")
    p.dtype = dt
    ndim = int(t.ndim)
    if ndim < 0:
        raise BufferError(f"DLPack tensor with a negative ndim ({ndim})")
    shape = tuple(int(t.shape[i]) for i in range(ndim)) if ndim else ()
    if any(n < 0 for n in shape):
        raise BufferError(f"DLPack tensor with a negative extent: shape {shape}")
    itemsize = dt.itemsize
    if ndim and t.strides:
        strides = tuple(int(t.strides[i]) * itemsize for i in range(ndim))
    else:
        strides = c_strides(shape, itemsize)
    p.shape = shape
    p.strides = strides
    p.ptr = (t.data or 0) + int(t.byte_offset)
    return p


def _wrap(p: _Parsed, dev) -> GPUArray:
    """Zero-copy GPUArray over the parsed tensor on ``dev``, owning the capsule."""
    from ..wrap import unsafe_wrap

    kind = "host" if p.device[0] == kDLCPU else None
    try:
        a = unsafe_wrap(p.ptr, p.shape, p.dtype, strides=p.strides, device=dev, kind=kind,
                        owner=p.owner)
    except ValueError as e:
        raise BufferError(f"cannot import DLPack memory at 0x{p.ptr:x} on "
                          f"{_device_name(p.device)} without a copy: {e}") from e
    if p.readonly:
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
    return x.to_device(target, "device")


def _place(a: GPUArray, target, copy) -> GPUArray:
    """``a`` (just imported) copied when asked or moved to ``target``."""
    if target is not None and target != a.device:
        try:
            return a.to_device(target, "device")
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
    if copy not in (None, True, False):
        raise ValueError(f"copy must be None, True or False, got {copy!r}")
    target = None if device is None else get_device(device)
    if isinstance(x, GPUArray):
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
            capsule = x.__dlpack__(max_version=VERSION, dl_device=(kDLCPU, 0), copy=copy)
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
    p = _take(capsule)
    got = _our_device(p.device)
    if got is None:
        raise BufferError(f"{type(x).__name__}.__dlpack_device__() said {_device_name(src)} "
                          f"but its capsule is on {_device_name(p.device)}")
    return _place(_wrap(p, got), target, copy)
