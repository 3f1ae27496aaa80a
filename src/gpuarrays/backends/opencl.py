"""The opencl back-end: PyOpenCL for devices, contexts and queues; SVM through ctypes.

Decisions (docs/design.md, "The back-end interface"):

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
  our own allocations, fills and kernels are enqueued without waiting;
  ``download`` and any copy touching memory we did not allocate block until the
  bytes have moved.  ``upload`` of at most ``_STAGED_MAX`` bytes enqueues a copy
  from a private copy of the data (kept on the device state until the queue has
  passed it: ``_DeviceState.kept``), a larger one blocks.  ``free`` enqueues
  ``clEnqueueSVMFree``, so memory is released only after the work queued before it.
  The compiled creation functions fill and upload the same way from C
  (``writer_handles``, src/native/core/fill.c).
* **Kernels are OpenCL C**, generated per (device, dtype combination) on first
  use and kept until the device is reset.  Shapes and strides travel in a small
  read-only buffer of int64, so any number of dimensions works; addresses are
  byte addresses, and views whose addresses or strides are not multiples of the
  element size use byte-wise loads and stores.  float16 goes through
  ``vload_half``/``vstore_half``, so ``cl_khr_fp16`` is not needed to store it.
* **float16 on every device**: ``DeviceInfo.float16`` (hence
  ``dev.supports(np.float16)``) is true everywhere: float16 is stored as 16
  bits through ``vload_half``/``vstore_half`` (no ``cl_khr_fp16`` needed) and
  every kernel family of gpuarrays computes it in ``float``, rounding once at
  the store, as NumPy's float16 loops do.  Whether the device also has native
  ``half`` arithmetic (``cl_khr_fp16`` or a non-zero
  ``CL_DEVICE_HALF_FP_CONFIG``) is a separate fact,
  :meth:`OpenCLBackend.half_arithmetic`, for code that writes its own kernels
  in ``half`` (PyOpenCL's, a user's).  PoCL's CPU device lacks it (3.0 and 3.1).
* :meth:`OpenCLBackend.context_and_queue` hands out the PyOpenCL context and
  queue of a device (public through ``gpuarrays.interop.pyopencl``), so other
  libraries enqueue on the same in-order queue as we do.
* **No host registration**: ``clEnqueueSVMMemcpy`` reads and writes any host
  address directly, and OpenCL has no call that pins arbitrary host memory
  (only ``CL_MEM_USE_HOST_PTR`` buffers, which have no SVM address), so
  ``register_host``/``unregister_host`` do nothing.
* ``mem_info`` reports free memory as the device's global memory minus what
  this back-end has allocated on it (OpenCL has no free-memory query).
* **Compiled programs outlive the process** in a ``BinaryCache`` (base.py):
  the one ``compile_kernel`` is given, and for the data-movement kernels the
  one the compute layer installs with ``base.use_binary_cache`` (the disk cache,
  ``_compute/device/diskcache.py``).  A program is keyed by its source, its build
  options and the device and runtime that built it (:meth:`OpenCLBackend._binary_key`),
  loaded with ``clCreateProgramWithBinary``, and saved from ``CL_PROGRAM_BINARIES``
  only after its first launch has run, because PoCL compiles the work-group
  function of a local size at the first launch and puts it in the binary read
  afterwards (docs/kernels.md, "Kernel caches").  A binary the runtime refuses is
  compiled again from source and its entry replaced.
"""

from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import atexit
import os
import threading
import warnings
from dataclasses import dataclass, field

import numpy as np

from .._common.errors import BackendError, DeviceResetError
from . import _kernels
from ._hostmem import advise_huge_pages
from .base import (
    BackendOutOfMemory,
    BackendUnavailable,
    BinaryCache,
    binary_cache,
    DeviceInfo,
    PointerInfo,
    RawView,
    ThreadStreams,
)

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
CL_PROGRAM_BINARY_SIZES = 0x1165
CL_PROGRAM_BINARIES = 0x1166
CL_PROGRAM_NUM_KERNELS = 0x1167
CL_KERNEL_WORK_GROUP_SIZE = 0x11B0
CL_KERNEL_PROGRAM = 0x1194
CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT = 1 << 7
CL_INVALID_KERNEL_NAME = -46

# Appended to a source whose program came back without its kernels (a damaged entry in the
# runtime's kernel cache): a text the cache has never seen is compiled afresh.
_REBUILD_MARK = "\n/* gpuarrays: built again past the runtime's kernel cache */\n"


def _runtime_cache() -> str:
    """Where PoCL keeps its kernel cache (the folder to delete when it is damaged)."""
    explicit = os.environ.get("POCL_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return f"{os.path.join(base, 'pocl', 'kcache')} (PoCL's; another runtime's own cache folder)"


# A program with more kernels is not saved to the disk cache (base.binary_cache):
# reading a PoCL binary compiles a work-group function for every kernel of the program
# (measured ~0.1 s each), so the 26-kernel conversion programs would cost ~3 s to save.
_SAVE_MAX_KERNELS = 4


class _Unsaved:
    """A program built from source whose binary is not on disk yet: it is read and saved
    at the first point where a launch of it has surely run (``_save_unsaved``)."""

    __slots__ = ("program", "key", "cache", "launched")

    def __init__(self, program: int, key: bytes, cache: BinaryCache) -> None:
        self.program, self.key, self.cache, self.launched = program, key, cache, False


_FILL_PATTERN_MAX = 128  # clEnqueueSVMMemFill's largest pattern
# Uploads of at most this many bytes do not wait for the device: the data is copied to a
# private buffer the queue reads later.  At most _KEPT_MAX such buffers (and queued free
# lists) wait on a device; the next upload then blocks, which lets them all go.
_STAGED_MAX = 64 << 10
_KEPT_MAX = 256


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
    "clCreateProgramWithBinary": (
        _vp,
        [_vp, _uint, ctypes.POINTER(_vp), ctypes.POINTER(_size), ctypes.POINTER(ctypes.c_char_p),
         ctypes.POINTER(_int), ctypes.POINTER(_int)],
    ),
    "clGetProgramInfo": (_int, [_vp, _uint, _size, _vp, ctypes.POINTER(_size)]),
    "clCreateKernel": (_vp, [_vp, ctypes.c_char_p, ctypes.POINTER(_int)]),
    "clGetKernelInfo": (_int, [_vp, _uint, _size, _vp, _vp]),
    "clReleaseKernel": (_int, [_vp]),
    "clReleaseProgram": (_int, [_vp]),
    "clGetKernelWorkGroupInfo": (_int, [_vp, _vp, _uint, _size, _vp, _vp]),
    "clFinish": (_int, [_vp]),
    "clFlush": (_int, [_vp]),
    # streams and events (docs/streams.md)
    "clEnqueueMarkerWithWaitList": (_int, [_vp, _uint, _vp, ctypes.POINTER(_vp)]),
    "clEnqueueBarrierWithWaitList": (_int, [_vp, _uint, ctypes.POINTER(_vp), _vp]),
    "clGetEventInfo": (_int, [_vp, _uint, _size, _vp, _vp]),
    "clWaitForEvents": (_int, [_uint, ctypes.POINTER(_vp)]),
    "clReleaseEvent": (_int, [_vp]),
}
_CL_EVENT_COMMAND_EXECUTION_STATUS = 0x11D3


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


def _global_size(n: int, local: int) -> int:
    """One work-item per element, in whole groups (``_kernels.launch_shape``)."""
    return -(-n // local) * local


# Kernel sources: OpenCL C (the kernels themselves are generated by _kernels) ----------
def _to_half(real: str, v: str) -> str:
    return f"double_to_half({v})" if real == "double" else f"float_to_half((float)({v}))"


def _float_to_int(dst_key: str, v: str) -> str:
    """C casts; float to narrow integer goes through int/long as x86 does, so negative
    values wrap as NumPy's results do there.  To uint32 and uint64 through the signed type
    of the same width, 2**31 (2**63) taken off the values above it and its bit put back:
    x86's own unsigned conversion, which NumPy's loops get, and one vector conversion
    where a 64-bit intermediate (uint32) or a second conversion (uint64) cost PoCL 3.0's
    generic x86-64 code 1.3-1.5x a bare cast (docs/performance.md, "Conversions").  The
    float literals (powers of two) keep a float value in float."""
    if dst_key in ("i1", "i2", "u1", "u2"):
        return f"({_kernels.SCALARS[dst_key].real})(int)({v})"
    if dst_key == "u4":
        return (f"(({v}) < 2147483648.0f ? (uint)(int)({v})"
                f" : (uint)(int)(({v}) - 2147483648.0f) ^ 0x80000000u)")
    if dst_key == "u8":
        return (f"(({v}) >= 9223372036854775808.0f"
                f" ? (ulong)(long)(({v}) - 9223372036854775808.0f) ^ 0x8000000000000000UL"
                f" : (ulong)(long)({v}))")
    return f"({_kernels.SCALARS[dst_key].real})({v})"


def _half_src(doubles: bool) -> str:
    """float16 to and from float by bit operations and selects (no ``cl_khr_fp16`` needed,
    no branch: a device vectorises them), with NumPy's results (``npy_halfbits_to_floatbits``
    and ``npy_floatbits_to_halfbits``): rounding to nearest even, subnormals, and NaNs
    whose payload's bits move with them (a signalling NaN stays one).  PoCL's
    ``vload_half`` quiets a signalling NaN and its ``vstore_half`` stores every NaN as
    ``0x7fff``, so a ``where`` or a masked assignment over float16 would otherwise change
    the bits of the NaNs it only passes through.  (Measured, 16 M elements on PoCL: the
    builtins behind branches for the NaNs ran at 1.6-1.8x a bare ``vload_half`` /
    ``vstore_half`` kernel; these at its speed.)

    From half: the half's exponent and mantissa bits moved into place (``<< 13``) and
    rebased (+112 in the exponent; +224 for infinities and NaNs, whose payload moves
    with them); a subnormal half rebased one step further is ``2**-14 + m * 2**-24``,
    from which the float subtraction of 2**-14 leaves the value exactly (no float
    subnormal is ever an operand: a device may flush those).  To double
    (``half_to_double``: NumPy's ``npy_halfbits_to_doublebits``, where going through
    float would quiet a signalling NaN): the bits moved into a double (``<< 42``) times
    2**1008, exact for subnormal halves too (cl_khr_fp64 devices have double
    subnormals), an infinity's or NaN's exponent completed after.  For a conversion to
    an integer (``half_for_int``) the subnormal step is left out: a subnormal half
    becomes a float below 2**-14 of its sign, which truncates to 0 as the half does;
    every other value is the half's.

    To half: a subnormal result is the float's sum with 2**-1 (``0x3f000000``), whose
    low bits are then the half's, rounded by the float addition; a normal one is the
    float's bits rebased (exponent - 112) with the rounding increment ``0xfff`` plus the
    kept mantissa's lowest bit (ties to even) before the shift.  From double the same,
    with 2**28 (``0x41b0000000000000``), exponent - 1008 and ``2**41 - 1``: one rounding,
    never through float.
    """
    src = (
        "inline float half_to_float(u16 h) {\n"
        "    uint t = (uint)(h & 0x7fffu) << 13, e = t & 0x0f800000u;\n"
        "    uint u = t + (e == 0x0f800000u ? 0x70000000u : 0x38000000u);\n"
        "    float v = e == 0 ? as_float(u + 0x00800000u) - 6.103515625e-05f : as_float(u);\n"
        "    return as_float(as_uint(v) | ((uint)(h & 0x8000u) << 16));\n}\n"
        "inline float half_for_int(u16 h) {\n"
        "    uint t = (uint)(h & 0x7fffu) << 13;\n"
        "    uint u = t + (t >= 0x0f800000u ? 0x70000000u : 0x38000000u);\n"
        "    return as_float(u | ((uint)(h & 0x8000u) << 16));\n}\n"
        "inline u16 float_to_half(float v) {\n"
        "    uint b = as_uint(v), a = b & 0x7fffffffu;\n"
        "    uint nan = 0x7c00u + ((a & 0x7fffffu) >> 13);\n"
        "    nan = nan == 0x7c00u ? 0x7c01u : nan;\n"
        "    uint sub = as_uint(as_float(a) + 0.5f) - 0x3f000000u;\n"
        "    uint norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;\n"
        "    uint h = a > 0x7f800000u ? nan : (a >= 0x47800000u ? 0x7c00u :\n"
        "             (a < 0x38800000u ? sub : norm));\n"
        "    return (u16)(h | ((b >> 16) & 0x8000u));\n}\n"
    )
    if doubles:
        src += (
            "inline double half_to_double(u16 h) {\n"
            "    double v = as_double((ulong)(h & 0x7fffu) << 42) * 0x1.0p1008;\n"
            "    ulong b = as_ulong(v) | (v >= 65536.0 ? 0x7ff0000000000000UL : 0UL);\n"
            "    return as_double(b | ((ulong)(h & 0x8000u) << 48));\n}\n"
            "inline u16 double_to_half(double v) {\n"
            "    ulong b = as_ulong(v), a = b & 0x7fffffffffffffffUL;\n"
            "    uint nan = 0x7c00u + (uint)((a & 0xfffffffffffffUL) >> 42);\n"
            "    nan = nan == 0x7c00u ? 0x7c01u : nan;\n"
            "    uint sub = (uint)(as_ulong(as_double(a) + 268435456.0) - 0x41b0000000000000UL);\n"
            "    uint norm = (uint)((a + 0xc10001ffffffffffUL + ((a >> 42) & 1UL)) >> 42);\n"
            "    uint h = a > 0x7ff0000000000000UL ? nan : (a >= 0x40f0000000000000UL ? 0x7c00u :\n"
            "             (a < 0x3f10000000000000UL ? sub : norm));\n"
            "    return (u16)(h | (uint)((b >> 48) & 0x8000u));\n}\n"
        )
    return src


# Shapes and strides travel in a read-only buffer of int64: shape, strides_a[, strides_b];
# a fill's value follows them (8-byte aligned).
_OPENCL_C = _kernels.Dialect(
    kernel="__kernel",
    fn="inline",
    glob="__global ",
    prelude="""
typedef uchar u8;
typedef ushort u16;
typedef uint u32;
typedef ulong u64;
typedef char i8;
typedef short i16;
typedef int i32;
typedef long i64;
#define GRID_START ((i64)get_global_id(0))
#define GROUP_ID ((i64)get_group_id(0))
#define LOCAL_ID ((i64)get_local_id(0))
#define LOCAL_SIZE ((i64)get_local_size(0))
""",
    layout=("__global const i64 *m", "__global const i64 *m"),
    layout_ref=("__global const i64 *m", "__global const i64 *m"),
    shape="m[d]",
    strides=("m[ndim + d]", "m[2 * ndim + d]"),
    fp64="#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n",
    half_src=_half_src,
    to_half=_to_half,
    float_to_int=_float_to_int,
    compute_prelude="#pragma OPENCL FP_CONTRACT OFF\n",
)
DIALECT = _OPENCL_C


def _bytes_source(itemsize: int, word: int) -> str:
    """OpenCL C of the byte-moving kernels for one item size, moving ``word`` bytes at a time."""
    return _kernels.bytes_source(_OPENCL_C, itemsize, word, [("fill_bytes", None, "m + 2 * ndim")])


def _convert_source(src_key: str, dst_keys: tuple[str, ...], src_aligned: bool,
                    dst_aligned: bool) -> str:  # fmt: skip
    """OpenCL C converting from one source type: kernels ``convert_<dst>``,
    ``convert_<dst>_c`` and ``convert_<dst>_x`` (dense, no bounds check) per destination.

    The back-end builds one program per (source, destination) pair: measured on PoCL 3.1,
    a pair's program builds in ~0.15 s and all 13 destinations' in ~0.85 s, so a process
    converting one type to up to five others builds less; and a program of two kernels
    goes to the disk cache, where reading the binary of the 26-kernel program would cost
    ~3 s (``_SAVE_MAX_KERNELS``).
    """
    return _kernels.convert_source(_OPENCL_C, src_key, dst_keys, src_aligned, dst_aligned,
                                   exact=True)


# Per-device state -----------------------------------------------------------------
@dataclass
class _DeviceState:
    """Context, queue and compiled kernels of one device (until reset)."""

    context: object  # pyopencl.Context
    queue: object  # pyopencl.CommandQueue
    ctx: int  # raw cl_context
    q: int  # raw cl_command_queue: the default stream's
    index: int = 0
    # the device's other streams: raw cl_command_queue -> pyopencl.CommandQueue
    streams: dict[int, object] = field(default_factory=dict)
    programs: list[int] = field(default_factory=list)
    # (program key, kernel name) -> (cl_kernel, work-group size)
    kernels: dict[tuple, tuple[int, int]] = field(default_factory=dict)
    # generated kernels: (source, name) -> cl_kernel (each _Kernel holds its own)
    compute: dict[tuple[str, str], int] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    # Host memory that queued commands read when they run, kept in enqueue order until
    # the queue has passed them: the pointer arrays handed to clEnqueueSVMFree (PoCL
    # before 3.1 reads the array when the command runs, not when it is enqueued) and the
    # private copies of asynchronous uploads (``upload``; the compiled core appends its
    # own, src/native/core/fill.c).
    # Entries are appended (never removed but from the front: a copy not enqueued after
    # all becomes None), so ``let_go`` counts them from the first ever kept.
    kept: list = field(default_factory=list)
    kept_before: int = 0  # entries let go so far
    # Programs built from source, not saved to the disk cache yet, and the same entries
    # by each of their cl_kernels, so that a launch can mark its program launched.
    unsaved: list[_Unsaved] = field(default_factory=list)
    unsaved_of: dict[int, _Unsaved] = field(default_factory=dict)

    def kept_mark(self) -> int:
        """How many entries were ever kept: read before a blocking command is enqueued."""
        with self.lock:
            return self.kept_before + len(self.kept)

    def let_go(self, mark: int) -> None:
        """The entries kept before ``mark`` (``kept_mark``) are read: a blocking command
        enqueued after them completed.  Another thread's may have let some go already."""
        with self.lock:
            count = mark - self.kept_before
            if count > 0:
                del self.kept[:count]
                self.kept_before = mark


_ARG_CTYPES = {
    "b1": ctypes.c_uint8, "i1": ctypes.c_int8, "u1": ctypes.c_uint8, "i2": ctypes.c_int16,
    "u2": ctypes.c_uint16, "i4": ctypes.c_int32, "u4": ctypes.c_uint32, "i8": ctypes.c_int64,
    "u8": ctypes.c_uint64, "f4": ctypes.c_float, "f8": ctypes.c_double,
}


# parameter types as the compiled core spells them (src/native/core/launch.c)
_TYPE_CODES = {
    "ptr": "p", "b1": "?", "i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I",
    "i8": "q", "u8": "Q", "f4": "f", "f8": "d",
}


def _address(fn) -> int:
    """The address of a ctypes function (an OpenCL entry point)."""
    return ctypes.cast(fn, ctypes.c_void_p).value


class _Kernel:
    """A generated kernel on one device (see ``KernelBackend`` in base.py).

    It owns its ``cl_kernel`` and one ctypes slot per parameter, and remembers
    the addresses and integers it last set: OpenCL keeps argument values
    between enqueues, so a launch sets only what changed and then enqueues
    (docs/kernels.md, "The host path").  After a device reset it rebuilds itself
    on the next launch.
    """

    __slots__ = ("_backend", "_index", "_source", "_name", "_slots", "_refs", "_sizes",
                 "_skip", "_last", "_state", "_handle", "_lock", "_gsize", "_lsize", "_gref",
                 "_lref", "_offset", "_oref", "_set_ptr", "_set_arg", "_enqueue", "_flush",
                 "_max_local", "_params", "_cache", "_unsaved")

    def __init__(self, backend: OpenCLBackend, index: int, source: str, name: str,
                 params: tuple[str, ...], cache: BinaryCache | None = None) -> None:  # fmt: skip
        self._backend, self._index, self._source, self._name = backend, index, source, name
        self._params, self._cache = params, cache
        try:
            self._slots = [None if t == "ptr" else _ARG_CTYPES[t]() for t in params]
        except KeyError as exc:
            raise ValueError(f"unknown kernel parameter type {exc.args[0]!r}; "
                             f"expected 'ptr' or one of {', '.join(_ARG_CTYPES)}") from None
        self._refs = [None if a is None else ctypes.byref(a) for a in self._slots]
        self._sizes = [0 if a is None else ctypes.sizeof(a) for a in self._slots]
        # integers and addresses are set again only when they change; floats always
        # (0.0 == -0.0, and NaN != NaN)
        self._skip = [t == "ptr" or t[0] in "biu" for t in params]
        self._lock = threading.Lock()
        self._gsize, self._lsize, self._offset = _size(0), _size(0), _size(0)
        self._gref, self._lref = ctypes.byref(self._gsize), ctypes.byref(self._lsize)
        self._oref = ctypes.byref(self._offset)
        lib = backend._lib
        self._set_ptr, self._set_arg = lib.clSetKernelArgSVMPointer, lib.clSetKernelArg
        # PoCL's CPU device starts a command when it is enqueued (measured: five
        # queued 16 M-element kernels were done 1 s later without clFlush), and its
        # clFlush costs ~8 us; other drivers may wait for a flush, so they get one.
        self._enqueue = lib.clEnqueueNDRangeKernel
        self._flush = None if backend.launch_hint(index) == "cpu" else lib.clFlush
        self._state = None
        self._bind()

    def _bind(self) -> None:
        self._state, self._handle = self._backend._compute_kernel(
            self._index, self._source, self._name, self._cache)
        # the program's entry while it waits to be saved: the first launch marks it
        self._unsaved = self._state.unsaved_of.get(self._handle)
        self._last = [None] * len(self._slots)
        self._max_local = self._backend._local_size(self._index, self._handle, 1 << 30)

    @property
    def max_local(self) -> int:
        return self._max_local

    def compiled_handles(self) -> tuple:
        """What the compiled core needs to enqueue this kernel without Python
        (``_core.ClKernel``'s arguments, src/native/core/launch.c): a second ``cl_kernel``
        of the same program, the queue, the addresses of ``clSetKernelArg``,
        ``clSetKernelArgSVMPointer``, ``clEnqueueNDRangeKernel`` and ``clFlush`` (0: none),
        the parameter types, and the device state with the back-end's state table and the
        device index, by which the core sees a reset.

        The second ``cl_kernel`` keeps its own argument values, so the core's launches and
        this object's never overwrite each other's; the back-end makes it once per device
        state and releases it at a reset.
        """
        if self._backend._states.get(self._index) is not self._state:
            self._bind()
        if self._unsaved is not None:  # the compiled core launches it next
            self._unsaved.launched, self._unsaved = True, None
        backend, state, lib = self._backend, self._state, self._backend._lib
        handle = backend._second_kernel(self._index, state, self._source, self._name,
                                        self._handle)
        return (handle, state.q, _address(lib.clSetKernelArg),
                _address(lib.clSetKernelArgSVMPointer), _address(self._enqueue),
                0 if self._flush is None else _address(self._flush),
                "".join(_TYPE_CODES[t] for t in self._params), state, backend._states,
                self._index)

    def launch(self, values, global_size: int, local_size: int, offset: int = 0) -> None:
        if self._backend._states.get(self._index) is not self._state:
            self._bind()  # the device was reset (or never used since)
        with self._lock:
            k, last, skip, slots = self._handle, self._last, self._skip, self._slots
            for i, v in enumerate(values):
                if skip[i] and last[i] == v:
                    continue
                slot = slots[i]
                if slot is None:
                    code = self._set_ptr(k, i, v)
                else:
                    slot.value = v
                    code = self._set_arg(k, i, self._sizes[i], self._refs[i])
                if code:
                    last[i] = None
                    _check("clSetKernelArg", code, f"argument {i} of {self._name}: "
                           f"{_code_name(code)} ({code})")
                last[i] = v
            if local_size > self._max_local:
                raise ValueError(f"{self._name} cannot run work-groups of {local_size} items on "
                                 f"opencl:{self._index}: at most {self._max_local} for this "
                                 f"kernel (launch with its max_local or less)")
            self._gsize.value = global_size
            self._lsize.value = local_size
            self._offset.value = offset
            q = self._backend._queue(self._state)
            code = self._enqueue(q, k, 1, self._oref if offset else None, self._gref,
                                 self._lref if local_size else None, 0, None, None)
            if self._unsaved is not None and not code:
                self._unsaved.launched, self._unsaved = True, None
        if code:
            _check("clEnqueueNDRangeKernel", code)
        if self._flush is not None:
            self._flush(q)


class OpenCLBackend(_kernels.DeviceOps):
    """OpenCL devices through SVM; see the module docstring."""

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
        self._thread = ThreadStreams()  # each thread's current stream of each device
        # Re-entrant: free() may run in a finalizer interrupting a locked section.
        self._lock = threading.RLock()
        self._starts: list[int] = []  # sorted allocation addresses
        self._allocs: dict[int, tuple[int, str, int]] = {}  # ptr -> (nbytes, kind, device)
        self._allocated = [0] * len(devices)  # bytes allocated per device
        # Devices found but left out by load(): "name (platform)" -> why (a compiler problem).
        self.left_out: dict[str, str] = {}
        self.builds = 0  # programs built from source (docs/kernels.md, "Kernel caches")
        self.binary_loads = 0  # programs made from a cached binary
        self.binary_refusals = 0  # cached binaries the runtime refused (built from source)
        self.binary_saves = 0  # binaries handed to a cache
        self._identities: dict[int, bytes] = {}  # device -> what a binary depends on
        self._exit_saves = False  # the exit handler that saves what is left is registered
        self._compiled: dict[tuple[int, str, str], _Kernel] = {}
        self._hints = ["cpu" if dev.type & cl_module.device_type.CPU else "gpu" for dev in devices]
        # Never fast-math (docs/kernels.md, "Accuracy"); float32 / and sqrt correctly
        # rounded where the device offers it (the default allows 2.5 and 3 ulp).
        self._compute_options = [
            b"-cl-fp32-correctly-rounded-divide-sqrt"
            if int(dev.single_fp_config) & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT else b""
            for dev in devices]
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
        # Fine-grain SVM is coherent with the host; on a CPU device (PoCL) every SVM
        # allocation is the host's own memory, which the kernels run on.
        on_host = kinds if dev.type & cl.device_type.CPU else tuple(
            k for k in kinds if k != "device")
        return DeviceInfo(
            name=f"{dev.name.strip()} ({dev.platform.name.strip()})",
            total_memory=int(dev.global_mem_size),
            kinds=kinds,
            accelerator=bool(dev.type & cl.device_type.GPU) and "device" in kinds,
            float64="cl_khr_fp64" in extensions or bool(dev.double_fp_config),
            float16=True,  # stored as 16 bits, computed in float (module docstring)
            host_kinds=on_host,
        )

    def device_count(self) -> int:
        return len(self._devices)

    def context_and_queue(self, index: int) -> tuple[object, object]:
        """The ``pyopencl.Context`` and in-order ``pyopencl.CommandQueue`` of device ``index``:
        the calling thread's current queue (a ``ga.Stream``'s inside ``with stream:``, else
        the default one).

        Every enqueue of this back-end from this thread uses that queue, so PyOpenCL work
        enqueued on it is ordered with ours.  A reset replaces both: ask again afterwards.
        """
        state = self._state(index)
        q = self._queue(state)
        return state.context, state.queue if q == state.q else state.streams[q]

    def device_info(self, index: int) -> DeviceInfo:
        return self._infos[index]

    def half_arithmetic(self, index: int) -> bool:
        """Whether device ``index`` computes in ``half`` natively (``cl_khr_fp16``).

        Not needed for float16 arrays (every device holds and computes them,
        see the module docstring); for kernels written in ``half`` by hand.
        """
        dev = self._devices[index]
        return _has_fp16(self._cl, dev, dev.extensions.split())

    def _new_state(self, index: int) -> _DeviceState:
        """A context and an in-order queue for the device (on first use, after a reset)."""
        cl = self._cl
        dev = self._devices[index]
        try:
            context = cl.Context([dev])
            queue = cl.CommandQueue(context, dev)
        except cl.Error as exc:
            raise _wrap_pyopencl_error("clCreateContext", exc) from exc
        return _DeviceState(context, queue, context.int_ptr, queue.int_ptr, index)

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
        if self._hints[index] == "cpu":  # host memory on a CPU device (_hostmem.py)
            advise_huge_pages(ptr, size)
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
            state.kept.append(ptrs)
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

    def _copy(self, index: int, dst: int, src: int, nbytes: int, wait: bool) -> None:
        if nbytes == 0:
            return
        state = self._state(index)
        mark = state.kept_mark()
        q = self._queue(state)
        code = self._lib.clEnqueueSVMMemcpy(
            q, CL_TRUE if wait else CL_FALSE, dst, src, nbytes, 0, None, None
        )
        _check("clEnqueueSVMMemcpy", code)
        if wait and q == state.q:  # the default queue has run everything before this copy
            state.let_go(mark)
            if state.unsaved:
                self._save_unsaved(state)

    def memcpy(self, index: int, dst: int, src: int, nbytes: int) -> None:
        dst_dev, src_dev = self._owner(dst), self._owner(src)
        if dst_dev not in (None, index) or src_dev not in (None, index):
            # SVM of another device's context: stage through the host.
            staging = np.empty(nbytes, np.uint8)
            self._copy(
                index if src_dev is None else src_dev, staging.ctypes.data, src, nbytes, True
            )
            self._copy(
                index if dst_dev is None else dst_dev, dst, staging.ctypes.data, nbytes, True
            )
            return
        # Memory we did not allocate may be reused by its owner as soon as we return.
        self._copy(index, dst, src, nbytes, wait=dst_dev is None or src_dev is None)

    def upload(self, index: int, dst: int, src: np.ndarray) -> None:
        """Host data into device memory: small data without waiting, through a private
        copy the queue reads later (``_STAGED_MAX``, ``_KEPT_MAX``), else blocking."""
        state = self._state(index)
        if (src.nbytes > _STAGED_MAX or len(state.kept) >= _KEPT_MAX or src.nbytes == 0
                or self._queue(state) != state.q):  # kept copies are the default queue's
            super().upload(index, dst, src)  # blocking: the kept buffers go too
            return
        staged = np.ascontiguousarray(src).tobytes()  # a private copy, whatever src is
        with state.lock:
            state.kept.append(staged)
            code = self._lib.clEnqueueSVMMemcpy(state.q, CL_FALSE, dst, staged, len(staged), 0,
                                                None, None)
            if code:  # not enqueued: nothing reads the copy (the entry stays, for the count)
                state.kept[next(i for i in range(len(state.kept) - 1, -1, -1)
                                if state.kept[i] is staged)] = None
        _check("clEnqueueSVMMemcpy", code)
        if self._hints[index] != "cpu":
            _check("clFlush", self._lib.clFlush(state.q))

    def writer_handles(self, index: int) -> dict:
        """What the compiled creation functions need to write new memory of the device
        without Python (``_core.Writer``'s arguments, src/native/core/fill.c): the queue,
        the addresses of ``clEnqueueSVMMemFill``, ``clEnqueueSVMMemcpy`` and ``clFlush`` (0:
        none, as for kernels), the device state with the back-end's state table and the
        device index, by which the core sees a reset, and where and how much small host
        data it stages as ``upload`` does."""
        state, lib = self._state(index), self._lib
        return {"mode": "opencl", "queue": state.q, "fill": _address(lib.clEnqueueSVMMemFill),
                "copy": _address(lib.clEnqueueSVMMemcpy),
                "flush": 0 if self._hints[index] == "cpu" else _address(lib.clFlush),
                "state": state, "states": self._states, "index": index, "kept": state.kept,
                "max_staged": _STAGED_MAX, "max_kept": _KEPT_MAX}

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
                cache = binary_cache()
                made = self._built_kernels(index, state, source_fn(), _kernel_names(key),
                                           cache=cache)
                for kname, k in made.items():
                    state.kernels[(key, kname)] = (k, self._local_size(index, k))
                handle = state.kernels[(key, name)]
        return state, handle

    def _built_kernels(self, index: int, state: _DeviceState, source: str,
                       names: tuple[str, ...], options: bytes = b"",
                       cache: BinaryCache | None = None) -> dict[str, int]:
        """The kernels ``names`` of ``source``, built (or loaded from ``cache``).

        With a ``cache``, a binary stored for this source, these options and this
        device and runtime is loaded instead of compiling; one the runtime refuses
        (not a binary of it, a failed build, kernels missing) counts in
        ``binary_refusals`` and the source is compiled as without a cache.  A program
        compiled from source waits in ``state.unsaved`` until its first launch has run,
        then its binary replaces the entry (``_save_unsaved``).

        A runtime whose kernel cache holds a damaged entry (PoCL's, after a compiler that
        died while writing it) "builds" the program and then lacks its kernels
        (``CL_INVALID_KERNEL_NAME``): the program is built once more from a source the
        cache has never seen (a comment added), and if that too lacks them, the
        :class:`BackendError` says which folder to delete.
        """
        key = None
        if cache is not None:
            key = self._binary_key(index, source, options)
            image = cache.load(key)
            if image is not None:
                made = self._loaded_kernels(index, state, image, names, options)
                if made is not None:
                    self.binary_loads += 1
                    return made
                self.binary_refusals += 1
        for attempt in range(2):
            text = source if attempt == 0 else source + _REBUILD_MARK
            program = self._build(index, state, text, options)
            made: dict[str, int] = {}
            for kname in names:
                err = _int(0)
                k = self._lib.clCreateKernel(program, kname.encode(), ctypes.byref(err))
                if err.value == CL_INVALID_KERNEL_NAME and kname in source:
                    for other in made.values():
                        self._lib.clReleaseKernel(other)
                    break
                _check("clCreateKernel", err.value,
                       f"clCreateKernel({kname}) failed: {_code_name(err.value)}")
                made[kname] = k
            else:
                if key is not None:
                    self._remember_unsaved(state, program, key, cache, made.values())
                return made
        raise BackendError(
            "clCreateKernel", _code_name(CL_INVALID_KERNEL_NAME),
            f"the OpenCL runtime built a program that lacks its kernel {kname}, twice (the "
            f"second time from a source its cache had never seen): its kernel cache may hold "
            f"damaged entries; delete {_runtime_cache()} and run again")

    # the disk cache of programs (module docstring; docs/kernels.md, "Kernel caches") -------
    def _binary_key(self, index: int, source: str, options: bytes) -> bytes:
        """Everything a binary of ``source`` depends on: the device and the runtime that
        built it (names and versions: another PoCL, another LLVM, another CPU give
        another key), the build options and the source."""
        identity = self._identities.get(index)
        if identity is None:
            dev = self._devices[index]
            plat = dev.platform
            identity = "\0".join([
                "opencl-program-1", plat.name.strip(), plat.vendor.strip(),
                plat.version.strip(), dev.name.strip(), dev.vendor.strip(),
                dev.version.strip(), dev.driver_version.strip(), str(int(dev.type)),
            ]).encode()
            self._identities[index] = identity
        return b"\0".join([identity, options, source.encode()])

    def _loaded_kernels(self, index: int, state: _DeviceState, image: bytes,
                        names: tuple[str, ...], options: bytes) -> dict[str, int] | None:
        """The kernels ``names`` of a program made from the binary ``image``, or None when
        the runtime refuses it (whatever it created is released)."""
        lib = self._lib
        dev = _vp(self._devices[index].int_ptr)
        size, data = _size(len(image)), ctypes.c_char_p(image)
        status, err = _int(0), _int(0)
        program = lib.clCreateProgramWithBinary(state.ctx, 1, ctypes.byref(dev),
                                                ctypes.byref(size), ctypes.byref(data),
                                                ctypes.byref(status), ctypes.byref(err))
        if not program:
            return None
        made: dict[str, int] = {}
        ok = (err.value == CL_SUCCESS and status.value == CL_SUCCESS
              and lib.clBuildProgram(program, 1, ctypes.byref(dev), options, None, None)
              == CL_SUCCESS)
        for kname in names if ok else ():
            k = lib.clCreateKernel(program, kname.encode(), ctypes.byref(err))
            if err.value != CL_SUCCESS or not k:
                ok = False
                break
            made[kname] = k
        if not ok:
            for k in made.values():
                lib.clReleaseKernel(k)
            lib.clReleaseProgram(program)
            return None
        state.programs.append(program)
        return made

    def _remember_unsaved(self, state: _DeviceState, program: int, key: bytes,
                          cache: BinaryCache, kernels) -> None:
        """Keep ``program`` (just built from source) to be saved after its first launch;
        a program of many kernels is not kept (``_SAVE_MAX_KERNELS``)."""
        count = _size(0)
        code = self._lib.clGetProgramInfo(program, CL_PROGRAM_NUM_KERNELS, ctypes.sizeof(count),
                                          ctypes.byref(count), None)
        if code != CL_SUCCESS or count.value > _SAVE_MAX_KERNELS:
            return
        entry = _Unsaved(program, key, cache)
        with state.lock:
            state.unsaved.append(entry)
            for k in kernels:
                state.unsaved_of[k] = entry
        if not self._exit_saves:
            self._exit_saves = True
            atexit.register(self._save_at_exit, os.getpid())

    def _save_unsaved(self, state: _DeviceState, everything: bool = False) -> None:
        """Save the binaries of the programs in ``state.unsaved`` that were launched (all
        of them with ``everything``).  Called where the queue has run all the work
        enqueued before: the launched programs' work-group functions are compiled."""
        with state.lock:
            ready = [u for u in state.unsaved if everything or u.launched]
            if not ready:
                return
            state.unsaved = [u for u in state.unsaved if not (everything or u.launched)]
            done = set(map(id, ready))
            for k in [k for k, u in state.unsaved_of.items() if id(u) in done]:
                del state.unsaved_of[k]
        for u in ready:
            image = self._program_binary(u.program)
            if image:
                u.cache.save(u.key, image)
                self.binary_saves += 1

    def _program_binary(self, program: int) -> bytes | None:
        """``CL_PROGRAM_BINARIES`` of a program built for one device (None: not given)."""
        lib = self._lib
        size = _size(0)
        code = lib.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, ctypes.sizeof(size),
                                    ctypes.byref(size), None)
        if code != CL_SUCCESS or not size.value:
            return None
        buf = ctypes.create_string_buffer(size.value)
        ptrs = (_vp * 1)(ctypes.addressof(buf))
        code = lib.clGetProgramInfo(program, CL_PROGRAM_BINARIES, ctypes.sizeof(ptrs), ptrs, None)
        return buf.raw if code == CL_SUCCESS else None

    def _save_at_exit(self, pid: int) -> None:
        """At interpreter exit, the programs still unsaved go to their caches (not in a
        forked child: its parent's queues are not its own); silently, never raising."""
        if os.getpid() != pid:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for state in list(self._states.values()):
                if state.unsaved and self._lib.clFinish(state.q) == CL_SUCCESS:
                    self._save_unsaved(state, everything=True)

    def _build(self, index: int, state: _DeviceState, source: str, options: bytes = b"") -> int:
        lib = self._lib
        self.builds += 1
        err = _int(0)
        text = ctypes.c_char_p(source.encode())
        program = lib.clCreateProgramWithSource(
            state.ctx, 1, ctypes.byref(text), None, ctypes.byref(err)
        )
        _check("clCreateProgramWithSource", err.value)
        state.programs.append(program)
        dev = _vp(self._devices[index].int_ptr)
        code = lib.clBuildProgram(program, 1, ctypes.byref(dev), options, None, None)
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

    def _local_size(self, index: int, kernel: int, local: int = 0) -> int:
        """The work-group size to launch ``kernel`` with: ``_kernels.launch_shape``'s, or less
        if the kernel needs it."""
        most = _size(0)
        dev = self._devices[index].int_ptr
        code = self._lib.clGetKernelWorkGroupInfo(
            kernel, dev, CL_KERNEL_WORK_GROUP_SIZE, ctypes.sizeof(most), ctypes.byref(most), None
        )
        _check("clGetKernelWorkGroupInfo", code)
        local = local or _kernels.launch_shape(self._hints[index], 1)[1]
        local = 1 << (local.bit_length() - 1)  # a power of two
        while local > max(most.value, 1):
            local //= 2
        return local

    def _launch(self, state: _DeviceState, kernel: tuple[int, int], n: int, args: list,
                offset: int = 0) -> None:
        """Set ``args`` and enqueue ``kernel`` over ``n`` items, the first of index ``offset``.

        An argument is ``("svm", address)``, ``("buf", ndarray)`` (copied into a
        read-only buffer released after the launch), ``("null", None)`` (a NULL buffer),
        ``("int", v)`` or ``("long", v)``.
        """
        lib = self._lib
        kernel, local = kernel
        buffers = []
        if state.unsaved_of:
            entry = state.unsaved_of.get(kernel)
            if entry is not None:
                entry.launched = True
        with state.lock:
            try:
                for i, (what, value) in enumerate(args):
                    if what == "svm":
                        _check(
                            "clSetKernelArgSVMPointer",
                            lib.clSetKernelArgSVMPointer(kernel, i, value),
                        )
                        continue
                    if what == "null":  # a __global pointer the kernel does not read
                        _check("clSetKernelArg",
                               lib.clSetKernelArg(kernel, i, ctypes.sizeof(ctypes.c_void_p), None))
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
                q = self._queue(state)
                code = lib.clEnqueueNDRangeKernel(
                    q,
                    kernel,
                    1,
                    ctypes.byref(_size(offset)) if offset else None,
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
        _check("clFlush", lib.clFlush(q))

    def _memset(self, index: int, start: int, pattern: bytes, nbytes: int) -> bool:
        """``clEnqueueSVMMemFill`` when the pattern size and the address allow it."""
        size = len(pattern)
        if size > _FILL_PATTERN_MAX or size & (size - 1) or start % size:
            return False
        state = self._state(index)
        data = np.frombuffer(pattern, np.uint8)
        _check(
            "clEnqueueSVMMemFill",
            self._lib.clEnqueueSVMMemFill(
                self._queue(state), start, data.ctypes.data, size, nbytes, 0, None, None
            ),
        )
        return True

    def _bytes_kernel(self, index: int, itemsize: int, word: int, name: str):
        key = ("bytes", itemsize, word)
        return self._kernel(index, key, lambda: _bytes_source(itemsize, word), name)

    def _launch_fill(self, index: int, dst: RawView, plan: _kernels.FillPlan) -> None:
        itemsize = dst.dtype.itemsize
        state, kernel = self._bytes_kernel(index, itemsize, plan.word, "fill_bytes")
        padded = np.zeros(-(-itemsize // 8) * 8, np.uint8)
        padded[:itemsize] = np.frombuffer(plan.pattern, np.uint8)
        meta = np.concatenate([np.array(plan.shape + plan.strides, np.int64), padded.view(np.int64)])
        args = [("svm", dst.ptr), ("buf", meta), ("int", len(plan.shape)), ("long", plan.n)]
        self._launch(state, kernel, plan.n, args)

    def _launch_copy(self, index: int, dst: RawView, src: RawView, plan: _kernels.CopyPlan) -> None:
        items = plan.n
        if plan.how in ("bytes", "rows"):
            name = "copy_rows" if plan.how == "rows" else "copy_bytes"
            state, kernel = self._bytes_kernel(index, dst.dtype.itemsize, plan.word, name)
            if plan.how == "rows":
                items = _kernels.rows_items(plan.n, plan.shape[-1], kernel[1])
        else:
            skey, dkey = plan.src_key, plan.dst_key
            targets = _kernels.convert_targets(skey, doubles=self._infos[index].float64)
            if dkey not in targets:
                raise ValueError(
                    f"opencl:{index} cannot convert {src.dtype} to {dst.dtype} (no float64)"
                )
            aligned = (plan.src_aligned, plan.dst_aligned)
            key = ("convert", skey, (dkey,), *aligned)  # one program per pair (_convert_source)
            make = lambda: _convert_source(skey, (dkey,), *aligned)  # noqa: E731
            if plan.contiguous:
                # whole work-groups without a bounds check (PoCL 3.0 vectorises no one-byte
                # or float16 conversion with one, docs/performance.md); on a CPU device the
                # rest, from SPLIT_MIN elements, as one more group with it
                # (the dense kernels read no layout: no buffer for it)
                args = [("svm", dst.ptr), ("svm", src.ptr), ("null", None), ("int", 1),
                        ("long", plan.n)]  # fmt: skip
                state, kernel = self._kernel(index, key, make, f"convert_{dkey}_x")
                whole = plan.n if plan.n % kernel[1] == 0 else _kernels.split_at(
                    self._hints[index], plan.n, kernel[1])
                if whole is not None:
                    self._launch(state, kernel, whole, args)
                    if whole == plan.n:
                        return
                state, kernel = self._kernel(index, key, make, f"convert_{dkey}_c")
                if whole is None:
                    self._launch(state, kernel, items, args)
                else:
                    self._launch(state, kernel, plan.n - whole, args, offset=whole)
                return
            state, kernel = self._kernel(index, key, make, f"convert_{dkey}")
        meta = np.array(plan.shape + plan.dst_strides + plan.src_strides, np.int64)
        args = [("svm", dst.ptr), ("svm", src.ptr), ("buf", meta), ("int", len(plan.shape)),
                ("long", plan.n)]  # fmt: skip
        self._launch(state, kernel, items, args)

    # generated kernels (KernelBackend in base.py) ---------------------------------
    dialect = _OPENCL_C

    def launch_hint(self, index: int) -> str:
        return self._hints[index]

    def compile_kernel(self, index: int, source: str, name: str, params,
                       cache: BinaryCache | None = None) -> _Kernel:
        """The kernel ``name`` of ``source`` on device ``index``, built on first request.

        With ``cache``, the program's binary is loaded from it when there, and saved to
        it after the first launch otherwise (module docstring); the kernel keeps the
        cache for the rebuild after a device reset.
        """
        key = (index, source, name)
        kernel = self._compiled.get(key)
        if kernel is None:  # compiled outside the back-end's lock (the program is built once)
            made = _Kernel(self, index, source, name, tuple(params), cache)
            with self._lock:
                kernel = self._compiled.setdefault(key, made)
        return kernel

    def _compute_kernel(self, index: int, source: str, name: str,
                        cache: BinaryCache | None = None) -> tuple[_DeviceState, int]:
        """A fresh ``cl_kernel`` for ``name`` of ``source`` in the device's current state."""
        state = self._state(index)
        with state.lock:
            handle = state.compute.get((source, name))
            if handle is None:
                handle = self._built_kernels(index, state, source, (name,),
                                             self._compute_options[index], cache)[name]
                state.compute[(source, name)] = handle
        return state, handle

    def _second_kernel(self, index: int, state: _DeviceState, source: str, name: str,
                       handle: int) -> int:
        """Another ``cl_kernel`` of ``handle``'s program (for the compiled launches), made
        once per device state and released with the state at a reset."""
        with state.lock:
            key = (source, name, "compiled")
            second = state.compute.get(key)
            if second is None:
                program = _vp(0)
                _check("clGetKernelInfo", self._lib.clGetKernelInfo(
                    handle, CL_KERNEL_PROGRAM, ctypes.sizeof(program), ctypes.byref(program),
                    None))
                err = _int(0)
                second = self._lib.clCreateKernel(program, name.encode(), ctypes.byref(err))
                _check("clCreateKernel", err.value,
                       f"clCreateKernel({name}) failed: {_code_name(err.value)}")
                state.compute[key] = second
        return second

    # streams (docs/streams.md) -----------------------------------------------------
    def _queue(self, state: _DeviceState) -> int:
        """The raw queue the calling thread enqueues on for ``state``'s device now."""
        return self._stream_queue(state, self._thread.by_index.get(state.index, 0))

    def _stream_queue(self, state: _DeviceState, stream: int) -> int:
        """The raw queue of stream handle ``stream`` (0: the default one)."""
        if not stream:
            return state.q
        if stream in state.streams:
            return stream
        raise DeviceResetError(f"stream 0x{stream:x} of opencl:{state.index} was made before "
                               f"a reset of the device; make a new ga.Stream after a reset")

    def stream_new(self, index: int) -> int:
        state = self._state(index)
        try:
            queue = self._cl.CommandQueue(state.context, self._devices[index])
        except self._cl.Error as exc:
            raise _wrap_pyopencl_error("clCreateCommandQueue", exc) from exc
        state.streams[queue.int_ptr] = queue
        return queue.int_ptr

    def stream_free(self, index: int, stream: int) -> None:
        state = self._states.get(index)
        queue = None if state is None else state.streams.pop(stream, None)
        if queue is not None:  # (one made before a reset went with its device's state)
            self._lib.clFinish(stream)  # best effort: its work drains; dropping it releases it

    def stream_synchronize(self, index: int, stream: int) -> None:
        state = self._state(index)
        q = self._stream_queue(state, stream)
        mark = state.kept_mark()
        _check("clFinish", self._lib.clFinish(q))
        if q == state.q:
            state.let_go(mark)

    def set_thread_stream(self, index: int, stream: int) -> None:
        self._thread.set(index, stream)

    def event_record(self, index: int, stream: int) -> int:
        state = self._state(index)
        q = self._stream_queue(state, stream)
        event = _vp(0)
        _check("clEnqueueMarkerWithWaitList",
               self._lib.clEnqueueMarkerWithWaitList(q, 0, None, ctypes.byref(event)))
        # submitted, so that a wait on another queue or the host cannot wait forever
        self._lib.clFlush(q)
        return event.value

    def event_done(self, index: int, event: int) -> bool:
        if not event:
            return True
        status = _int(0)
        _check("clGetEventInfo", self._lib.clGetEventInfo(
            event, _CL_EVENT_COMMAND_EXECUTION_STATUS, ctypes.sizeof(status),
            ctypes.byref(status), None))
        if status.value < 0:  # the command failed: waiting would never end well
            raise BackendError("clGetEventInfo", _code_name(status.value),
                               f"a command before event 0x{event:x} on opencl:{index} failed")
        return status.value == 0  # CL_COMPLETE

    def event_wait(self, index: int, event: int) -> None:
        if event:
            events = (_vp * 1)(event)
            _check("clWaitForEvents", self._lib.clWaitForEvents(1, events))

    def event_free(self, index: int, event: int) -> None:
        if event:
            self._lib.clReleaseEvent(event)

    def stream_wait_event(self, index: int, stream: int, event: int) -> None:
        if not event:
            return
        state = self._state(index)
        q = self._stream_queue(state, stream)
        events = (_vp * 1)(event)
        _check("clEnqueueBarrierWithWaitList",
               self._lib.clEnqueueBarrierWithWaitList(q, 1, events, None))
        self._lib.clFlush(q)

    # lifecycle ----------------------------------------------------------------
    def synchronize(self, index: int) -> None:
        state = self._states.get(index)
        if state is not None:
            mark = state.kept_mark()
            for q in list(state.streams):
                _check("clFinish", self._lib.clFinish(q))
            _check("clFinish", self._lib.clFinish(state.q))
            state.let_go(mark)
            if state.unsaved:
                self._save_unsaved(state)

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
        # best effort: a failed queue is being thrown away (every stream's work drains
        # first: the memory below is freed when this returns)
        for q in list(state.streams):
            lib.clFinish(q)
        state.streams.clear()
        if lib.clFinish(state.q) == CL_SUCCESS and state.unsaved:
            self._save_unsaved(state)  # the launched ones (the others would be built again)
        for p in ptrs:
            lib.clSVMFree(state.ctx, p)
        for k, _ in state.kernels.values():
            lib.clReleaseKernel(k)
        for k in state.compute.values():
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

    gpuarrays' own kernels never need it (they load and store float16 with
    ``vload_half``/``vstore_half`` and compute in ``float``), so this is not
    ``supports(float16)``; it tells code that writes its own kernels in
    ``half`` whether it may (:meth:`OpenCLBackend.half_arithmetic`).
    """
    if "cl_khr_fp16" in extensions:
        return True
    try:
        return bool(dev.half_fp_config)
    except cl.Error:  # CL_DEVICE_HALF_FP_CONFIG is optional before OpenCL 3.0
        return False


def _kernel_names(key: tuple) -> tuple[str, ...]:
    if key[0] == "convert":
        return _kernels.convert_kernel_names(key[2], exact=True)
    return ("copy_bytes", "copy_rows", "fill_bytes")


def _all_devices(cl) -> list:
    devices = []
    for platform in cl.get_platforms():
        try:
            devices.extend(platform.get_devices())
        except cl.Error:  # a platform without devices
            continue
    return devices


_PROBE = "__kernel void probe(__global int *out) { out[0] = (int)get_global_id(0); }"


def _compiler_problem(cl, dev) -> str | None:
    """None when the device's compiler builds a trivial kernel, else why not.

    PoCL's pip wheels (LLVM 14) name CPUs newer than their LLVM "generic" and
    then fail every build ("unknown target CPU 'generic'", e.g. AMD Zen 5):
    such a device can allocate but never run a kernel, so it is left out.
    """
    try:
        cl.Program(cl.Context([dev]), _PROBE).build()
    except cl.Error as exc:
        lines = [line.strip() for line in str(exc).splitlines() if "error" in line.lower()]
        return lines[-1] if lines else str(exc).strip()
    return None


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
    problems = {}
    for dev in devices:
        problem = _compiler_problem(cl, dev)
        if problem is not None:
            problems[f"{dev.name.strip()} ({dev.platform.version.strip()})"] = problem
    usable = [dev for dev in devices
              if f"{dev.name.strip()} ({dev.platform.version.strip()})" not in problems]
    if not usable:
        found = "; ".join(f"{name}: {why}" for name, why in problems.items())
        raise BackendUnavailable(
            f"no OpenCL device can compile kernels ({found}); PoCL's compiler may not know "
            f"this CPU: install the system's PoCL (Debian/Ubuntu: apt-get install "
            f"pocl-opencl-icd), which pyopencl finds beside its own")
    backend = OpenCLBackend(cl, _opencl_library(cl), usable)
    backend.left_out = problems
    return backend
