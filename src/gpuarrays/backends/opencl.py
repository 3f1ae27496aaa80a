"""The opencl back-end: PyOpenCL for devices, contexts and queues; SVM through ctypes.

Decisions (SPEC 2.1):

* **Memory is shared virtual memory**, so every allocation has an integer
  address: ``"device"`` is coarse-grained SVM, ``"unified"`` and ``"host"`` are
  fine-grained SVM buffers (the CPU reads and writes them directly through the
  address once the queue is synchronized).  A device without fine-grained
  buffer SVM offers only ``"device"``; one without SVM offers no kind at all.
* **The SVM calls go through ctypes** (``clSVMAlloc``, ``clEnqueueSVMFree``,
  ``clEnqueueSVMMemcpy``, ``clEnqueueSVMMemFill``, ``clSetKernelArgSVMPointer``
  ...), resolved in the very OpenCL library PyOpenCL is linked against, because
  PyOpenCL's SVM objects do not accept arbitrary integer addresses.  Programs and
  kernels are also made through ctypes (no PyOpenCL disk cache, no compiler
  warnings); PyOpenCL provides platforms, devices, contexts and queues, whose
  raw handles are ``.int_ptr``.
* **One in-order queue per device**, made lazily on first use.  Copies between
  our own allocations and kernels are enqueued without waiting; ``upload``,
  ``download`` and any copy touching memory we did not allocate block until the
  bytes have moved.  ``free`` enqueues ``clEnqueueSVMFree``, so memory is
  released only after the work queued before it.
* **Kernels are OpenCL C**, generated per (device, dtype combination) on first
  use and kept until the device is reset.  Shapes and strides travel in a small
  read-only buffer of int64, so any number of dimensions works; addresses are
  byte addresses, and views whose addresses or strides are not multiples of the
  element size use byte-wise loads and stores.  float16 goes through
  ``vload_half``/``vstore_half``, so ``cl_khr_fp16`` is not needed to store it.
* **float16 support is reported honestly**: ``DeviceInfo.float16`` (hence
  ``dev.supports(np.float16)``) is true only for devices that can *compute*
  with ``half`` -- ``cl_khr_fp16`` or a non-zero ``CL_DEVICE_HALF_FP_CONFIG``.
  Storing and copying float16 would work everywhere thanks to
  ``vload_half``/``vstore_half``, but a float16 array that no kernel on the
  device (PyOpenCL's, a user's) can do arithmetic on is not what a user who
  asks ``supports(float16)`` means.  PoCL's CPU device has neither the
  extension nor a half config (checked with pocl-binary-distribution 3.0), so it refuses float16.
* :meth:`OpenCLBackend.context_and_queue` hands out the PyOpenCL context and
  queue of a device (public through ``gpuarrays.interop.pyopencl``), so other
  libraries enqueue on the same in-order queue as we do.
* **No host registration**: ``clEnqueueSVMMemcpy`` reads and writes any host
  address directly, and OpenCL has no call that pins arbitrary host memory
  (only ``CL_MEM_USE_HOST_PTR`` buffers, which have no SVM address), so
  ``register_host``/``unregister_host`` do nothing.
* ``mem_info`` reports free memory as the device's global memory minus what
  this back-end has allocated on it (OpenCL has no free-memory query).
"""

from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import threading
from dataclasses import dataclass, field

import numpy as np

from ..errors import BackendError
from .base import BackendOutOfMemory, BackendUnavailable, DeviceInfo, PointerInfo, RawView

__all__ = ["OpenCLBackend", "load"]

_INSTALL_HINT = 'pip install "gpuarrays[opencl]"'

# OpenCL constants (cl.h) ----------------------------------------------------
CL_SUCCESS = 0
CL_FALSE = 0
CL_TRUE = 1
CL_MEM_READ_WRITE = 1 << 0
CL_MEM_READ_ONLY = 1 << 2
CL_MEM_COPY_HOST_PTR = 1 << 5
CL_MEM_SVM_FINE_GRAIN_BUFFER = 1 << 10
CL_DEVICE_SVM_COARSE_GRAIN_BUFFER = 1 << 0
CL_DEVICE_SVM_FINE_GRAIN_BUFFER = 1 << 1
CL_PROGRAM_BUILD_LOG = 0x1183
CL_KERNEL_WORK_GROUP_SIZE = 0x11B0

_MAX_GLOBAL_SIZE = 1 << 20  # work-items per launch; kernels loop over the rest
# A fixed work-group size: with a runtime-chosen one, PoCL recompiles a kernel for
# every new global size.
_LOCAL_SIZE = 64
_FILL_PATTERN_MAX = 128  # clEnqueueSVMMemFill's largest pattern


# The C API through ctypes -----------------------------------------------------
_vp = ctypes.c_void_p
_size = ctypes.c_size_t
_uint = ctypes.c_uint32
_int = ctypes.c_int32
_SIGNATURES = {
    # name: (restype, argtypes)
    "clSVMAlloc": (_vp, [_vp, ctypes.c_uint64, _size, _uint]),
    "clSVMFree": (None, [_vp, _vp]),
    "clEnqueueSVMFree": (_int, [_vp, _uint, ctypes.POINTER(_vp), _vp, _vp, _uint, _vp, _vp]),
    "clEnqueueSVMMemcpy": (_int, [_vp, _uint, _vp, _vp, _size, _uint, _vp, _vp]),
    "clEnqueueSVMMemFill": (_int, [_vp, _vp, _vp, _size, _size, _uint, _vp, _vp]),
    "clSetKernelArgSVMPointer": (_int, [_vp, _uint, _vp]),
    "clSetKernelArg": (_int, [_vp, _uint, _size, _vp]),
    "clEnqueueNDRangeKernel": (
        _int,
        [_vp, _vp, _uint, _vp, ctypes.POINTER(_size), ctypes.POINTER(_size), _uint, _vp, _vp],
    ),
    "clCreateBuffer": (_vp, [_vp, ctypes.c_uint64, _size, _vp, ctypes.POINTER(_int)]),
    "clReleaseMemObject": (_int, [_vp]),
    "clCreateProgramWithSource": (
        _vp,
        [_vp, _uint, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(_size), ctypes.POINTER(_int)],
    ),
    "clBuildProgram": (_int, [_vp, _uint, ctypes.POINTER(_vp), ctypes.c_char_p, _vp, _vp]),
    "clGetProgramBuildInfo": (_int, [_vp, _vp, _uint, _size, _vp, ctypes.POINTER(_size)]),
    "clCreateKernel": (_vp, [_vp, ctypes.c_char_p, ctypes.POINTER(_int)]),
    "clReleaseKernel": (_int, [_vp]),
    "clReleaseProgram": (_int, [_vp]),
    "clGetKernelWorkGroupInfo": (_int, [_vp, _vp, _uint, _size, _vp, _vp]),
    "clFinish": (_int, [_vp]),
    "clFlush": (_int, [_vp]),
}


def _opencl_library(cl_module) -> ctypes.CDLL:
    """The OpenCL library PyOpenCL uses (its extension module resolves the symbols)."""
    candidates = [cl_module._cl.__file__, ctypes.util.find_library("OpenCL"), "libOpenCL.so.1"]
    for path in candidates:
        if not path:
            continue
        try:
            lib = ctypes.CDLL(path)
            lib.clSVMAlloc  # noqa: B018  (raises AttributeError when absent)
        except (OSError, AttributeError):
            continue
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        return lib
    raise BackendUnavailable(
        "the OpenCL library has no SVM entry points (OpenCL 2.0 or later is needed)"
    )


# Error handling -----------------------------------------------------------------
_CODE_NAMES: dict[int, str] = {}


def _code_name(code: int) -> str:
    return _CODE_NAMES.get(code, f"CL_ERROR_{code}")


def _check(call: str, code: int, what: str = "") -> None:
    """Raise :class:`BackendError` for a failed OpenCL call."""
    if code != CL_SUCCESS:
        raise BackendError(
            call, _code_name(code), what or f"{call} returned {_code_name(code)} ({code})"
        )


def _wrap_pyopencl_error(call: str, exc: Exception) -> BackendError:
    code = getattr(exc, "code", None)
    name = _code_name(code) if isinstance(code, int) else str(code)
    return BackendError(call, name, str(exc))


# Layouts ------------------------------------------------------------------------
def _collapse(
    shape: tuple[int, ...], *strides: tuple[int, ...]
) -> tuple[list[int], list[list[int]]]:
    """Drop length-1 axes and merge axes that are contiguous in every view (C order)."""
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for d, n in enumerate(shape):
        if n == 1:
            continue
        if out_shape and all(o[-1] == s[d] * n for o, s in zip(out_strides, strides, strict=True)):
            out_shape[-1] *= n
            for o, s in zip(out_strides, strides, strict=True):
                o[-1] = s[d]
            continue
        out_shape.append(n)
        for o, s in zip(out_strides, strides, strict=True):
            o.append(s[d])
    return out_shape, out_strides


def _word(itemsize: int, *values: int) -> int:
    """Largest of 8, 4, 2, 1 that divides the item size and every address/stride given."""
    bits = itemsize
    for v in values:
        bits |= v
    for w in (8, 4, 2):
        if bits % w == 0:
            return w
    return 1


def _offsets_word(itemsize: int, base: int, offsets: np.ndarray) -> int:
    """:func:`_word` over a base address and an array of byte offsets."""
    return _word(itemsize, base, int(np.bitwise_or.reduce(offsets)) if offsets.size else 0)


def _global_size(n: int, local: int) -> int:
    return min(-(-n // local), _MAX_GLOBAL_SIZE // local) * local


# Kernel sources ---------------------------------------------------------------------
_WORD_TYPE = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}

_OFFSETS_SRC = """
/* Byte offsets of element i (C order) in two views; meta = shape, strides_a, strides_b. */
inline void offsets2(long i, int ndim, __global const long *meta, long *oa, long *ob) {
    long a = 0, b = 0;
    for (int d = ndim - 1; d >= 0; --d) {
        long n = meta[d];
        long k = i % n;
        i /= n;
        a += k * meta[ndim + d];
        b += k * meta[2 * ndim + d];
    }
    *oa = a;
    *ob = b;
}

/* Byte offset of element i (C order) in one view; meta = shape, strides. */
inline long offset1(long i, int ndim, __global const long *meta) {
    long a = 0;
    for (int d = ndim - 1; d >= 0; --d) {
        long n = meta[d];
        a += (i % n) * meta[ndim + d];
        i /= n;
    }
    return a;
}
"""

_BYTES_SRC = """
#define WORDS (ITEMSIZE / sizeof(W))

__kernel void copy_bytes(__global uchar *dst, __global const uchar *src,
                         __global const long *meta, int ndim, long n) {
    for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
        long od, os;
        offsets2(i, ndim, meta, &od, &os);
        __global W *d = (__global W *)(dst + od);
        __global const W *s = (__global const W *)(src + os);
        for (int k = 0; k < WORDS; ++k) d[k] = s[k];
    }
}

/* meta = shape, strides, then the value's bytes (8-byte aligned). */
__kernel void fill_bytes(__global uchar *dst, __global const long *meta, int ndim, long n) {
    __global const W *v = (__global const W *)(meta + 2 * ndim);
    for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
        __global W *d = (__global W *)(dst + offset1(i, ndim, meta));
        for (int k = 0; k < WORDS; ++k) d[k] = v[k];
    }
}

__kernel void gather_bytes(__global uchar *dst, __global const uchar *src,
                           __global const long *offsets, long n) {
    for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
        __global W *d = (__global W *)(dst + i * ITEMSIZE);
        __global const W *s = (__global const W *)(src + offsets[i]);
        for (int k = 0; k < WORDS; ++k) d[k] = s[k];
    }
}

__kernel void scatter_bytes(__global uchar *dst, __global const uchar *src,
                            __global const long *offsets, long n) {
    for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
        __global W *d = (__global W *)(dst + offsets[i]);
        __global const W *s = (__global const W *)(src + i * ITEMSIZE);
        for (int k = 0; k < WORDS; ++k) d[k] = s[k];
    }
}
"""


@dataclass(frozen=True)
class _Scalar:
    """How one NumPy numeric type is stored and computed with in OpenCL C."""

    storage: str  # OpenCL C type of one stored component
    compute: str  # type the value has between load and store
    kind: str  # "b" bool, "i" signed, "u" unsigned, "f" float, "c" complex

    @property
    def size(self) -> int:
        return {"uchar": 1, "char": 1, "ushort": 2, "short": 2, "uint": 4, "int": 4,
                "float": 4, "ulong": 8, "long": 8, "double": 8}[self.storage]  # fmt: skip


_SCALARS = {
    "b1": _Scalar("uchar", "uchar", "b"),
    "i1": _Scalar("char", "char", "i"),
    "i2": _Scalar("short", "short", "i"),
    "i4": _Scalar("int", "int", "i"),
    "i8": _Scalar("long", "long", "i"),
    "u1": _Scalar("uchar", "uchar", "u"),
    "u2": _Scalar("ushort", "ushort", "u"),
    "u4": _Scalar("uint", "uint", "u"),
    "u8": _Scalar("ulong", "ulong", "u"),
    "f2": _Scalar("ushort", "float", "f"),
    "f4": _Scalar("float", "float", "f"),
    "f8": _Scalar("double", "double", "f"),
    "c8": _Scalar("float", "float2", "c"),
    "c16": _Scalar("double", "double2", "c"),
}


def _scalar_key(dtype: np.dtype) -> str | None:
    """The key of a numeric dtype in :data:`_SCALARS` (native byte order only), else None."""
    if dtype.fields is not None or dtype.subdtype is not None or not dtype.isnative:
        return None
    key = f"{dtype.kind}{dtype.itemsize}"
    return key if key in _SCALARS else None


def _access_src(name: str, ctype: str, aligned: bool, store: bool) -> str:
    """A load or store helper for one storage type, direct or byte-wise."""
    if store:
        body = (
            f"*(__global {ctype} *)p = v;"
            if aligned or ctype in ("uchar", "char")
            else f"uchar *b = (uchar *)&v; for (int k = 0; k < sizeof({ctype}); ++k) p[k] = b[k];"
        )
        return f"inline void {name}(__global uchar *p, {ctype} v) {{ {body} }}\n"
    body = (
        f"return *(__global const {ctype} *)p;"
        if aligned or ctype in ("uchar", "char")
        else f"{ctype} v; uchar *b = (uchar *)&v; for (int k = 0; k < sizeof({ctype}); ++k) b[k] = p[k]; return v;"
    )
    return f"inline {ctype} {name}(__global const uchar *p) {{ {body} }}\n"


def _load_expr(s: _Scalar, key: str) -> str:
    """Expression of the source element at ``p`` in its compute type."""
    if s.kind == "b":
        return "(uchar)(ld(ps) != 0)"
    if key == "f2":
        return "load_half(ld(ps))"
    if s.kind == "c":
        return f"({s.compute})(ld(ps), ld(ps + {s.size}))"
    return "ld(ps)"


def _real_convert(src: _Scalar, src_key: str, dst: _Scalar, dst_key: str, v: str) -> str:
    """Convert a real value ``v`` of ``src`` to ``dst``'s compute type, like NumPy (C casts).

    Float to narrow integer goes through int/long as x86 does, so negative
    values wrap as NumPy's results do there.
    """
    if src.kind == "f" and dst.kind in "iu":
        if dst_key in ("i1", "i2", "u1", "u2"):
            return f"({dst.compute})(int)({v})"
        if dst_key == "u4":
            return f"(uint)(long)({v})"
        if dst_key == "u8":
            return f"(({v}) < 9223372036854775808.0 ? (ulong)(long)({v}) : (ulong)({v}))"
    return f"({dst.compute})({v})"


def _convert_expr(src_key: str, dst_key: str, v: str) -> str:
    """Expression converting ``v`` (source compute type) to the destination's (NumPy unsafe cast)."""
    src, dst = _SCALARS[src_key], _SCALARS[dst_key]
    if dst.kind == "b":
        return (
            f"(uchar)(({v}).x != 0 || ({v}).y != 0)" if src.kind == "c" else f"(uchar)(({v}) != 0)"
        )
    if src.kind == "c" and dst.kind == "c":
        return f"({dst.compute})(({dst.storage})({v}).x, ({dst.storage})({v}).y)"
    if src.kind == "c":
        src = _Scalar(src.storage, src.storage, "f")
        v = f"({v}).x"
    if dst.kind == "c":
        return f"({dst.compute})(({dst.storage})({v}), 0)"
    if dst_key == "f2":
        return f"({v})" if src.compute in ("float", "double") else f"(float)({v})"
    return _real_convert(src, src_key, dst, dst_key, v)


def _store_stmt(d: _Scalar, key: str, half_from: str) -> str:
    """Statement storing ``v`` (destination compute type) at ``pd``."""
    st = f"st_{d.storage}"
    if key == "f2":
        return f"{st}(pd, store_half_{half_from}(v));"
    if d.kind == "c":
        return f"{st}(pd, v.x); {st}(pd + {d.size}, v.y);"
    return f"{st}(pd, v);"


def _convert_source(src_key: str, dst_keys: list[str], src_aligned: bool, dst_aligned: bool) -> str:
    """OpenCL C converting from one source type: a kernel ``convert_<dst>`` per destination.

    One program per source type keeps the number of builds small (a build costs
    far more than a kernel in it on PoCL).
    """
    s = _SCALARS[src_key]
    storages = sorted({_SCALARS[k].storage for k in dst_keys})
    doubles = "double" in storages or s.storage == "double"
    parts = [
        "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if doubles else "",
        _OFFSETS_SRC,
        _access_src("ld", s.storage, src_aligned, store=False),
        *(_access_src(f"st_{t}", t, dst_aligned, store=True) for t in storages),
        "inline float load_half(ushort h) { return vload_half(0, (const half *)&h); }\n",
        "inline ushort store_half_float(float v) { ushort h; vstore_half_rte(v, 0, (half *)&h); return h; }\n",
    ]
    if doubles:
        parts.append(
            "inline ushort store_half_double(double v) "
            "{ ushort h; vstore_half_rte(v, 0, (half *)&h); return h; }\n"
        )
    for dst_key in dst_keys:
        d = _SCALARS[dst_key]
        half_from = "double" if s.storage == "double" else "float"
        dst_compute = half_from if dst_key == "f2" else d.compute
        parts.append(f"""
__kernel void convert_{dst_key}(__global uchar *dst, __global const uchar *src,
                         __global const long *meta, int ndim, long n) {{
    for (long i = get_global_id(0); i < n; i += get_global_size(0)) {{
        long od, os;
        offsets2(i, ndim, meta, &od, &os);
        __global const uchar *ps = src + os;
        __global uchar *pd = dst + od;
        {s.compute} x = {_load_expr(s, src_key)};
        {dst_compute} v = {_convert_expr(src_key, dst_key, "x")};
        {_store_stmt(d, dst_key, half_from)}
    }}
}}
""")
    return "".join(parts)


def _bytes_source(itemsize: int, word: int) -> str:
    """OpenCL C of the byte-moving kernels for one item size, moving ``word`` bytes at a time."""
    return f"#define ITEMSIZE {itemsize}\n#define W {_WORD_TYPE[word]}\n{_OFFSETS_SRC}{_BYTES_SRC}"


# Per-device state -----------------------------------------------------------------
@dataclass
class _DeviceState:
    """Context, queue and compiled kernels of one device (until reset)."""

    context: object  # pyopencl.Context
    queue: object  # pyopencl.CommandQueue
    ctx: int  # raw cl_context
    q: int  # raw cl_command_queue
    programs: list[int] = field(default_factory=list)
    # (program key, kernel name) -> (cl_kernel, work-group size)
    kernels: dict[tuple, tuple[int, int]] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    # Pointer arrays handed to clEnqueueSVMFree, kept until the queue has passed them:
    # PoCL before 3.1 reads the array when the command runs, not when it is enqueued.
    free_lists: list = field(default_factory=list)

    def drained(self, count: int) -> None:
        """The first ``count`` queued frees have run (a later blocking command completed)."""
        with self.lock:
            del self.free_lists[:count]


class OpenCLBackend:
    """OpenCL devices through SVM; see the module docstring (SPEC 2.1)."""

    name = "opencl"
    # clEnqueueSVMMemcpy uses any host address directly; OpenCL cannot pin foreign memory.
    needs_host_registration = False

    def __init__(self, cl_module, lib: ctypes.CDLL, devices: list) -> None:
        self._cl = cl_module
        self._lib = lib
        self._devices = devices
        self._infos = [self._describe(dev) for dev in devices]
        self._max_alloc = [int(dev.max_mem_alloc_size) for dev in devices]
        self._states: dict[int, _DeviceState] = {}
        # Re-entrant: free() may run in a finalizer interrupting a locked section.
        self._lock = threading.RLock()
        self._starts: list[int] = []  # sorted allocation addresses
        self._allocs: dict[int, tuple[int, str, int]] = {}  # ptr -> (nbytes, kind, device)
        self._allocated = [0] * len(devices)  # bytes allocated per device
        if not _CODE_NAMES:
            for attr in dir(cl_module.status_code):
                value = getattr(cl_module.status_code, attr)
                if attr.isupper() and isinstance(value, int):
                    _CODE_NAMES[value] = f"CL_{attr}"

    # devices ------------------------------------------------------------------
    def _describe(self, dev) -> DeviceInfo:
        cl = self._cl
        try:
            caps = dev.svm_capabilities
        except cl.Error:  # an OpenCL 1.x device: no SVM
            caps = 0
        kinds: tuple[str, ...] = ()
        if caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER:
            kinds += ("device",)
        if caps & CL_DEVICE_SVM_FINE_GRAIN_BUFFER:
            kinds += ("host", "unified")
        extensions = dev.extensions.split()
        return DeviceInfo(
            name=f"{dev.name.strip()} ({dev.platform.name.strip()})",
            total_memory=int(dev.global_mem_size),
            kinds=kinds,
            accelerator=bool(dev.type & cl.device_type.GPU) and "device" in kinds,
            float64="cl_khr_fp64" in extensions or bool(dev.double_fp_config),
            float16=_has_fp16(cl, dev, extensions),
        )

    def device_count(self) -> int:
        return len(self._devices)

    def context_and_queue(self, index: int) -> tuple[object, object]:
        """The ``pyopencl.Context`` and in-order ``pyopencl.CommandQueue`` of device ``index``.

        Every allocation and kernel of this back-end on the device uses them, so
        PyOpenCL work enqueued on this queue is ordered with ours.  A reset
        replaces both: ask again afterwards.
        """
        state = self._state(index)
        return state.context, state.queue

    def device_info(self, index: int) -> DeviceInfo:
        return self._infos[index]

    def _state(self, index: int) -> _DeviceState:
        """The device's context and queue, made on first use (and after a reset)."""
        state = self._states.get(index)
        if state is not None:
            return state
        with self._lock:
            state = self._states.get(index)
            if state is None:
                cl = self._cl
                dev = self._devices[index]
                try:
                    context = cl.Context([dev])
                    queue = cl.CommandQueue(context, dev)
                except cl.Error as exc:
                    raise _wrap_pyopencl_error("clCreateContext", exc) from exc
                state = _DeviceState(context, queue, context.int_ptr, queue.int_ptr)
                self._states[index] = state
        return state

    # raw memory ---------------------------------------------------------------
    def allocate(self, index: int, kind: str, nbytes: int) -> int:
        info = self._infos[index]
        if kind not in info.kinds:
            raise ValueError(
                f"memory kind {kind!r} is not supported by opencl:{index} ({info.name}); "
                f"it supports {', '.join(map(repr, info.kinds)) or 'no kind (no SVM)'}"
            )
        state = self._state(index)
        flags = CL_MEM_READ_WRITE | (CL_MEM_SVM_FINE_GRAIN_BUFFER if kind != "device" else 0)
        size = max(nbytes, 1)
        if size > self._max_alloc[index]:
            raise BackendOutOfMemory(
                f"{nbytes} bytes exceed the largest allocation of opencl:{index} "
                f"({self._max_alloc[index]} bytes)"
            )
        ptr = self._lib.clSVMAlloc(state.ctx, flags, size, 0)
        if not ptr:
            raise BackendOutOfMemory(
                f"clSVMAlloc({nbytes}) of kind {kind!r} on opencl:{index} returned NULL"
            )
        entry = (nbytes, kind, index)  # made before locking: nothing allocates under the lock
        with self._lock:
            bisect.insort(self._starts, ptr)
            self._allocs[ptr] = entry
            self._allocated[index] += size
        return ptr

    def free(self, index: int, kind: str, ptr: int, nbytes: int) -> None:
        with self._lock:
            entry = self._allocs.pop(ptr, None)
            if entry is None:
                raise BackendError(
                    "clSVMFree",
                    "CL_INVALID_VALUE",
                    f"0x{ptr:x} is not an allocation of the opencl back-end",
                )
            del self._starts[bisect.bisect_left(self._starts, ptr)]
            device = entry[2]
            self._allocated[device] -= max(entry[0], 1)
        state = self._state(device)
        # Freed after the work queued before it (clSVMFree would not wait for it).
        ptrs = (_vp * 1)(ptr)
        with state.lock:
            state.free_lists.append(ptrs)
            code = self._lib.clEnqueueSVMFree(state.q, 1, ptrs, None, None, 0, None, None)
        _check("clEnqueueSVMFree", code)

    def mem_info(self, index: int) -> tuple[int, int]:
        total = self._infos[index].total_memory
        return max(total - self._allocated[index], 0), total

    # byte movement ------------------------------------------------------------
    def _owner(self, ptr: int) -> int | None:
        """The device whose context allocated ``ptr``, or None for memory we did not allocate."""
        info = self.pointer_info(ptr)
        return None if info is None else info.device

    def _svm_memcpy(self, index: int, dst: int, src: int, nbytes: int, blocking: bool) -> None:
        if nbytes == 0:
            return
        state = self._state(index)
        with state.lock:
            queued = len(state.free_lists)
        code = self._lib.clEnqueueSVMMemcpy(
            state.q, CL_TRUE if blocking else CL_FALSE, dst, src, nbytes, 0, None, None
        )
        _check("clEnqueueSVMMemcpy", code)
        if blocking:  # an in-order queue has run everything before this copy
            state.drained(queued)

    def memcpy(self, index: int, dst: int, src: int, nbytes: int) -> None:
        dst_dev, src_dev = self._owner(dst), self._owner(src)
        if dst_dev not in (None, index) or src_dev not in (None, index):
            # SVM of another device's context: stage through the host.
            staging = np.empty(nbytes, np.uint8)
            self._svm_memcpy(
                index if src_dev is None else src_dev, staging.ctypes.data, src, nbytes, True
            )
            self._svm_memcpy(
                index if dst_dev is None else dst_dev, dst, staging.ctypes.data, nbytes, True
            )
            return
        # Memory we did not allocate may be reused by its owner as soon as we return.
        self._svm_memcpy(index, dst, src, nbytes, blocking=dst_dev is None or src_dev is None)

    def upload(self, index: int, dst: int, src: np.ndarray) -> None:
        src = np.ascontiguousarray(src)
        self._svm_memcpy(index, dst, src.ctypes.data, src.nbytes, blocking=True)

    def download(self, index: int, dst: np.ndarray, src: int) -> None:
        if not dst.flags.c_contiguous:
            raise ValueError("download needs a C-contiguous destination array")
        self._svm_memcpy(index, dst.ctypes.data, src, dst.nbytes, blocking=True)

    # kernels ------------------------------------------------------------------
    def _kernel(
        self, index: int, key: tuple, source_fn, name: str
    ) -> tuple[_DeviceState, tuple[int, int]]:
        """The compiled kernel ``name`` of program ``key`` and its work-group size.

        The program is built from ``source_fn()`` on first use.
        """
        state = self._state(index)
        handle = state.kernels.get((key, name))
        if handle is not None:
            return state, handle
        with state.lock:
            handle = state.kernels.get((key, name))
            if handle is None:
                program = self._build(index, state, source_fn())
                for kname in _kernel_names(key):
                    err = _int(0)
                    k = self._lib.clCreateKernel(program, kname.encode(), ctypes.byref(err))
                    _check(
                        "clCreateKernel",
                        err.value,
                        f"clCreateKernel({kname}) failed: {_code_name(err.value)}",
                    )
                    state.kernels[(key, kname)] = (k, self._local_size(index, k))
                handle = state.kernels[(key, name)]
        return state, handle

    def _build(self, index: int, state: _DeviceState, source: str) -> int:
        lib = self._lib
        err = _int(0)
        text = ctypes.c_char_p(source.encode())
        program = lib.clCreateProgramWithSource(
            state.ctx, 1, ctypes.byref(text), None, ctypes.byref(err)
        )
        _check("clCreateProgramWithSource", err.value)
        state.programs.append(program)
        dev = _vp(self._devices[index].int_ptr)
        code = lib.clBuildProgram(program, 1, ctypes.byref(dev), b"", None, None)
        if code != CL_SUCCESS:
            log_size = _size(0)
            lib.clGetProgramBuildInfo(
                program, dev, CL_PROGRAM_BUILD_LOG, 0, None, ctypes.byref(log_size)
            )
            log = ctypes.create_string_buffer(log_size.value + 1)
            lib.clGetProgramBuildInfo(program, dev, CL_PROGRAM_BUILD_LOG, log_size.value, log, None)
            raise BackendError(
                "clBuildProgram", _code_name(code), log.value.decode(errors="replace").strip()
            )
        return program

    def _local_size(self, index: int, kernel: int) -> int:
        """The work-group size to launch ``kernel`` with: 64, or less if the kernel needs it."""
        most = _size(0)
        dev = self._devices[index].int_ptr
        code = self._lib.clGetKernelWorkGroupInfo(
            kernel, dev, CL_KERNEL_WORK_GROUP_SIZE, ctypes.sizeof(most), ctypes.byref(most), None
        )
        _check("clGetKernelWorkGroupInfo", code)
        local = _LOCAL_SIZE
        while local > max(most.value, 1):
            local //= 2
        return local

    def _launch(self, state: _DeviceState, kernel: tuple[int, int], n: int, args: list) -> None:
        """Set ``args`` and enqueue ``kernel`` over ``n`` items.

        An argument is ``("svm", address)``, ``("buf", ndarray)`` (copied into a
        read-only buffer released after the launch), ``("int", v)`` or ``("long", v)``.
        """
        lib = self._lib
        kernel, local = kernel
        buffers = []
        with state.lock:
            try:
                for i, (what, value) in enumerate(args):
                    if what == "svm":
                        _check(
                            "clSetKernelArgSVMPointer",
                            lib.clSetKernelArgSVMPointer(kernel, i, value),
                        )
                        continue
                    if what == "buf":
                        data = (
                            np.ascontiguousarray(value) if value.nbytes else np.zeros(1, np.int64)
                        )
                        err = _int(0)
                        flags = CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR
                        mem = lib.clCreateBuffer(
                            state.ctx, flags, data.nbytes, data.ctypes.data, ctypes.byref(err)
                        )
                        _check("clCreateBuffer", err.value)
                        buffers.append(mem)
                        arg = _vp(mem)
                    else:
                        arg = _int(value) if what == "int" else ctypes.c_int64(value)
                    _check(
                        "clSetKernelArg",
                        lib.clSetKernelArg(kernel, i, ctypes.sizeof(arg), ctypes.byref(arg)),
                    )
                gsize, lsize = _size(_global_size(n, local)), _size(local)
                code = lib.clEnqueueNDRangeKernel(
                    state.q,
                    kernel,
                    1,
                    None,
                    ctypes.byref(gsize),
                    ctypes.byref(lsize),
                    0,
                    None,
                    None,
                )
                _check("clEnqueueNDRangeKernel", code)
            finally:
                for mem in buffers:  # the runtime keeps them until the kernel has run
                    lib.clReleaseMemObject(mem)
        _check("clFlush", lib.clFlush(state.q))

    def fill(self, index: int, dst: RawView, value: np.ndarray) -> None:
        if 0 in dst.shape:
            return
        itemsize = dst.dtype.itemsize
        pattern = np.asarray(value, dtype=dst.dtype).reshape(1).view(np.uint8).copy()
        shape, (strides,) = _collapse(dst.shape, dst.strides)
        n = int(np.prod(shape, dtype=np.int64))
        start = dst.ptr + (min(strides[0] * (n - 1), 0) if shape else 0)
        dense = not shape or (len(shape) == 1 and abs(strides[0]) == itemsize)
        if (
            dense
            and itemsize <= _FILL_PATTERN_MAX
            and itemsize & (itemsize - 1) == 0
            and start % itemsize == 0
        ):
            state = self._state(index)
            _check(
                "clEnqueueSVMMemFill",
                self._lib.clEnqueueSVMMemFill(
                    state.q, start, pattern.ctypes.data, itemsize, n * itemsize, 0, None, None
                ),
            )
            return
        word = _word(itemsize, dst.ptr, *strides)
        key = ("bytes", itemsize, word)
        state, kernel = self._kernel(
            index, key, lambda: _bytes_source(itemsize, word), "fill_bytes"
        )
        padded = np.zeros(-(-itemsize // 8) * 8, np.uint8)
        padded[:itemsize] = pattern
        meta = np.concatenate([np.array(shape + strides, np.int64), padded.view(np.int64)])
        self._launch(
            state, kernel, n, [("svm", dst.ptr), ("buf", meta), ("int", len(shape)), ("long", n)]
        )

    def copy_strided(self, index: int, dst: RawView, src: RawView) -> None:
        if 0 in dst.shape:
            return
        if tuple(dst.shape) != tuple(src.shape):
            raise ValueError(f"copy_strided needs equal shapes, got {dst.shape} and {src.shape}")
        shape, (dstrides, sstrides) = _collapse(dst.shape, dst.strides, src.strides)
        n = int(np.prod(shape, dtype=np.int64))
        meta = np.array(shape + dstrides + sstrides, np.int64)
        args = [("svm", dst.ptr), ("svm", src.ptr), ("buf", meta), ("int", len(shape)), ("long", n)]
        skey, dkey = _scalar_key(src.dtype), _scalar_key(dst.dtype)
        if dst.dtype == src.dtype:
            itemsize = dst.dtype.itemsize
            if not shape or (len(shape) == 1 and dstrides[0] == sstrides[0] == itemsize):
                self.memcpy(index, dst.ptr, src.ptr, n * itemsize)
                return
            word = _word(itemsize, dst.ptr, src.ptr, *dstrides, *sstrides)
            key = ("bytes", itemsize, word)
            state, kernel = self._kernel(
                index, key, lambda: _bytes_source(itemsize, word), "copy_bytes"
            )
        elif skey is None or dkey is None:
            raise ValueError(f"opencl:{index} cannot convert {src.dtype} to {dst.dtype}")
        else:
            s_align = _SCALARS[skey].size
            d_align = _SCALARS[dkey].size
            src_aligned = _word(s_align, src.ptr, *sstrides) >= s_align
            dst_aligned = _word(d_align, dst.ptr, *dstrides) >= d_align
            if dkey not in self._targets(index, skey):
                raise ValueError(
                    f"opencl:{index} cannot convert {src.dtype} to {dst.dtype} (no float64)"
                )
            key = ("convert", skey, self._targets(index, skey), src_aligned, dst_aligned)
            state, kernel = self._kernel(
                index,
                key,
                lambda: _convert_source(skey, key[2], src_aligned, dst_aligned),
                f"convert_{dkey}",
            )
        self._launch(state, kernel, n, args)

    def _targets(self, index: int, src_key: str) -> tuple[str, ...]:
        """The destination types a conversion program from ``src_key`` holds on the device."""
        doubles = self._infos[index].float64
        return tuple(
            k for k in _SCALARS if k != src_key and (doubles or _SCALARS[k].storage != "double")
        )

    def _indexed(self, index: int, name: str, ptr_a: int, ptr_b: int, offsets: np.ndarray, itemsize: int,
                 base: int, contiguous: int) -> None:  # fmt: skip
        offsets = np.ascontiguousarray(offsets, dtype=np.int64).reshape(-1)
        if offsets.size == 0:
            return
        word = _word(_offsets_word(itemsize, base, offsets), contiguous)
        key = ("bytes", itemsize, word)
        state, kernel = self._kernel(index, key, lambda: _bytes_source(itemsize, word), name)
        args = [("svm", ptr_a), ("svm", ptr_b), ("buf", offsets), ("long", offsets.size)]
        self._launch(state, kernel, offsets.size, args)

    def gather(self, index: int, dst: RawView, src_base: int, offsets: np.ndarray) -> None:
        self._indexed(
            index, "gather_bytes", dst.ptr, src_base, offsets, dst.dtype.itemsize, src_base, dst.ptr
        )

    def scatter(self, index: int, dst_base: int, offsets: np.ndarray, src: RawView) -> None:
        self._indexed(
            index,
            "scatter_bytes",
            dst_base,
            src.ptr,
            offsets,
            src.dtype.itemsize,
            dst_base,
            src.ptr,
        )

    # lifecycle ----------------------------------------------------------------
    def synchronize(self, index: int) -> None:
        state = self._states.get(index)
        if state is not None:
            with state.lock:
                queued = len(state.free_lists)
            _check("clFinish", self._lib.clFinish(state.q))
            state.drained(queued)

    def reset(self, index: int) -> None:
        with self._lock:
            state = self._states.pop(index, None)
            ptrs = [p for p, (_, _, dev) in self._allocs.items() if dev == index]
            for p in ptrs:
                del self._allocs[p]
            self._starts = sorted(self._allocs)
            self._allocated[index] = 0
        if state is None:
            return
        lib = self._lib
        lib.clFinish(state.q)  # best effort: a failed queue is being thrown away
        for p in ptrs:
            lib.clSVMFree(state.ctx, p)
        for k, _ in state.kernels.values():
            lib.clReleaseKernel(k)
        for prg in state.programs:
            lib.clReleaseProgram(prg)
        # Dropping the PyOpenCL objects releases the queue and context; the next
        # call makes fresh ones.

    def pointer_info(self, ptr: int) -> PointerInfo | None:
        with self._lock:
            i = bisect.bisect_right(self._starts, ptr) - 1
            if i >= 0:
                base = self._starts[i]
                nbytes, kind, device = self._allocs[base]
                if ptr < base + max(nbytes, 1):
                    return PointerInfo(kind, device, base, nbytes)
        return None

    def register_host(self, index: int, ptr: int, nbytes: int) -> None:
        """Nothing to do: SVM copies read any host address (see the module docstring)."""

    def unregister_host(self, index: int, ptr: int) -> None:
        """Nothing to do (see :meth:`register_host`)."""


def _has_fp16(cl, dev, extensions: list[str]) -> bool:
    """Whether the device computes in ``half``: ``cl_khr_fp16`` or a half-precision config.

    Our own kernels only *store* float16 (``vload_half``/``vstore_half`` work
    without the extension), but ``supports(float16)`` promises more: that code
    on the device -- PyOpenCL kernels over our arrays, for instance -- can
    compute with it.  So a device without half arithmetic (PoCL's CPU device)
    refuses float16 arrays, as SPEC 2 says.
    """
    if "cl_khr_fp16" in extensions:
        return True
    try:
        return bool(dev.half_fp_config)
    except cl.Error:  # CL_DEVICE_HALF_FP_CONFIG is optional before OpenCL 3.0
        return False


def _kernel_names(key: tuple) -> tuple[str, ...]:
    if key[0] == "convert":
        return tuple(f"convert_{k}" for k in key[2])
    return ("copy_bytes", "fill_bytes", "gather_bytes", "scatter_bytes")


def _all_devices(cl) -> list:
    devices = []
    for platform in cl.get_platforms():
        try:
            devices.extend(platform.get_devices())
        except cl.Error:  # a platform without devices
            continue
    return devices


def load() -> OpenCLBackend:
    """The opencl back-end, or :class:`BackendUnavailable` with the reason."""
    try:
        import pyopencl as cl
    except (ImportError, OSError) as exc:
        raise BackendUnavailable(f"pyopencl cannot be imported ({exc}); {_INSTALL_HINT}") from exc
    try:
        devices = _all_devices(cl)
    except cl.Error as exc:
        raise BackendUnavailable(
            f"no OpenCL platform found ({exc}); install a driver, e.g. {_INSTALL_HINT}"
        ) from exc
    if not devices:
        raise BackendUnavailable(f"no OpenCL device found; install a driver, e.g. {_INSTALL_HINT}")
    return OpenCLBackend(cl, _opencl_library(cl), devices)
