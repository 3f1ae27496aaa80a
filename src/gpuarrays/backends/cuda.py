"""The cuda back-end: NVIDIA's ``cuda-bindings`` (driver API) and NVRTC.

Decisions (docs/design.md, "The back-end interface"):

* **Contexts**: every device uses its *primary* context (the one the CUDA
  runtime, CuPy, PyTorch and Numba use too), retained on first use.  Each call
  makes it current for the duration of the call only: when another context is
  current on the calling thread it is pushed and popped again, so callers that
  juggle devices (``cupy.cuda.Device(1)``) are left as they were.
* **A default stream per device, and user streams** (docs/streams.md).  The
  default stream is created with ``CU_STREAM_DEFAULT`` flags, i.e. a *blocking*
  stream: it synchronizes with the legacy default stream that CuPy, PyTorch and
  Numba use unless told otherwise, so memory handed between them and gpuarrays
  is ordered without events.  User streams (``stream_new``, ``ga.Stream``) are
  ``CU_STREAM_NON_BLOCKING``: they overlap with the default stream and with
  each other, ordered only by events (``event_record``, ``stream_wait_event``).
  Every enqueue goes to the calling thread's *current* stream of the device
  (``set_thread_stream``; the default one unless a user stream was made
  current), and the interchange protocols (CAI, DLPack) are given that stream.
  Kernels, copies between our own allocations and fills are enqueued without
  waiting.  ``upload`` and ``download`` (NumPy arrays: pageable, and possibly
  temporary) and any copy that touches memory this back-end did not allocate
  wait for the current stream before returning; ``free``, ``synchronize`` and
  ``reset`` wait for every stream of the device.  A stream or event made before
  a reset of its device raises :class:`~gpuarrays._common.errors.DeviceResetError`
  when used.
* **"device" memory comes from ``cuMemAlloc``, pooled by gpuarrays' own pools**
  (``pool.py``) rather than from the driver's stream-ordered pool
  (``cuMemAllocAsync``).  The reasons: one pool implementation on every
  back-end gives identical semantics (exact-size reuse, limits, the
  out-of-memory ladder, statistics, reset safety through the device epoch);
  a pool hit costs no driver call at all, while ``cuMemAllocAsync`` +
  ``cuMemFreeAsync`` cost two; and the driver's pool would hide reserved memory
  from ``memory_stats``.  The stream-ordered pool remains a candidate: it avoids
  the implicit synchronization of ``cuMemFree`` and shares memory with other
  libraries using it, so it should be **measured on a GPU** (allocate + free,
  trim, fragmentation) before the choice is final.  ``benchmarks/gpu_check.sh``
  compares our pool with CuPy's and PyTorch's.
* **"host"** memory is ``cuMemHostAlloc(PORTABLE | DEVICEMAP)``: page-locked,
  usable by every context, and addressed by the same pointer on the device
  (unified virtual addressing, required for the kind).  **"unified"** is
  ``cuMemAllocManaged(ATTACH_GLOBAL)``; a request larger than the device's
  free memory is refused as out of memory rather than oversubscribed, so the
  pool's ladder and limits keep meaning something.
* **Host registration** (``needs_host_registration``): wrapped pageable host
  memory is pinned with ``cuMemHostRegister(PORTABLE | DEVICEMAP)``, so copies
  from it are DMA transfers and kernels can address it through the host pointer
  (Linux with unified addressing, where the device can use the host pointer
  for registered memory).  Memory that some other library already registered
  is left to it.  Registrations are whole pages, so they also cover the bytes
  next to a wrap on its first and last page, where the C allocator may have put
  another NumPy array; CUDA takes a copy whose first host byte lies in a
  registration for a copy of that registration and refuses one running past its
  end (``CUDA_ERROR_INVALID_VALUE``, seen on an H200).  So every copy is cut
  where one of our registrations begins or ends inside its host ranges
  (``_pieces``): one ``cuMemcpyAsync`` per piece, a single one while nothing
  is registered.
* **Kernels are CUDA C**, compiled with NVRTC straight to CUBIN for the
  device's exact architecture (``--gpu-architecture=sm_XY``); when this NVRTC
  is older than the device, to PTX for the newest architecture it knows, which
  the driver then compiles.  Images are cached per (architecture, source) for
  the process, modules and functions per device until it is reset.  No CUDA
  header is needed: float16 is converted with explicit bit manipulation
  (round to nearest even, NaN payloads kept, as NumPy), and float-to-integer
  conversions reproduce what NumPy's casts give on x86-64 (out-of-range values
  and NaN become the "integer indefinite" value) instead of the GPU's
  saturating conversions.  Shapes and strides travel by value in a kernel
  parameter, so any number of dimensions (up to NumPy's 64) works without a
  device buffer.
* **Fills** use ``cuMemsetD8/16/32Async`` when the destination is dense and
  the value's bytes repeat with period 1, 2 or 4; every other fill is a kernel.
* **Errors**: ``CUDA_ERROR_OUT_OF_MEMORY`` becomes
  :class:`~gpuarrays.backends.base.BackendOutOfMemory` (the pool runs its
  ladder), every other failure a :class:`~gpuarrays._common.errors.BackendError` with
  the call, the ``CUresult`` name and the driver's error string
  (:func:`cuda_error`).
* **Reset** is ``cuDevicePrimaryCtxReset`` (every allocation, registration,
  stream and module of the primary context goes, including other libraries'
  in this process), then our retain is released; the next call retains a fresh
  primary context and makes a new default stream.  Every user stream is
  synchronized and destroyed first.
"""

from __future__ import annotations

import bisect
import ctypes
import threading
from dataclasses import dataclass, field

import numpy as np

from .._common.errors import BackendError, DeviceResetError
from . import _kernels
from ._kernels import (
    SCALARS,
    CopyPlan,
    DeviceOps,
    Dialect,
    FillPlan,
    convert_targets,
    scalar_key,
)
from .base import (
    BackendOutOfMemory,
    BackendUnavailable,
    DeviceInfo,
    PointerInfo,
    RawView,
    ThreadStreams,
)

__all__ = [
    "CudaBackend",
    "load",
    "cuda_error",
    "bytes_source",
    "convert_source",
    "convert_kernel_names",
    "compile_image",
    "scalar_key",
    "SCALAR_KEYS",
    "MAX_DIMS",
    "memset_plan",
    "bytes_kernel_names",
]

_INSTALL_HINT = 'pip install "gpuarrays[cuda]"'

CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_NOT_READY = 600
CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712

# CU_MEMORYTYPE_* (cuda.h)
_MEMORYTYPE_HOST = 1
_MEMORYTYPE_DEVICE = 2
_MEMORYTYPE_UNIFIED = 4

MAX_DIMS = 64  # NumPy's limit; the layout parameter of the kernels has room for it
_VALUE_PARAM_MAX = 2048  # fill values up to this size travel as a kernel parameter


# Errors --------------------------------------------------------------------------------
def _driver_module():
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    return driver


def _result_name(code: int) -> str:
    driver = _driver_module()
    if driver is not None:
        try:
            return driver.CUresult(code).name
        except (ValueError, AttributeError):  # unknown code, or bindings without the enum
            pass
    return f"CUresult {code}"


def _result_text(code: int, name: str) -> str:
    """The driver's description of ``code``, or one made from its name without a driver."""
    driver = _driver_module()
    if driver is not None:
        try:
            err, text = driver.cuGetErrorString(code)
        except (RuntimeError, ValueError, TypeError):  # no driver library, unknown code
            err, text = None, None
        if err == CUDA_SUCCESS and text:
            return text.decode(errors="replace") if isinstance(text, bytes) else str(text)
    if name.startswith("CUDA_ERROR_"):
        return name[len("CUDA_ERROR_"):].replace("_", " ").lower()
    return "unknown CUDA error"


def cuda_error(call: str, code: int) -> Exception:
    """The exception for a failed driver call: out of memory or :class:`BackendError`.

    ``code`` is a ``CUresult`` (or its int value).  Usable without a driver, so
    the mapping can be tested anywhere.
    """
    code = int(code)
    name = _result_name(code)
    text = _result_text(code, name)
    if code == CUDA_ERROR_OUT_OF_MEMORY:
        return BackendOutOfMemory(f"{call} failed ({name}): {text}")
    return BackendError(call, name, text)


def _check(call: str, result) -> tuple:
    """Unpack a ``cuda-bindings`` result tuple ``(CUresult, *values)``; raise on failure."""
    err = result[0]
    if err != CUDA_SUCCESS:
        raise cuda_error(call, err)
    return result[1:]


# Kernel sources: CUDA C (the kernels themselves are generated by _kernels) --------------
# The sources use only what NVRTC provides without headers; they are also valid
# C++ for a host compiler given a small prelude (the tests run them on the CPU
# to check the conversions against NumPy without a GPU).
_PRELUDE = f"""
#define MAX_DIMS {MAX_DIMS}
#define DEV static __device__ __forceinline__
#define GRID_START ((long long)blockIdx.x * blockDim.x + threadIdx.x)
#define GROUP_ID ((long long)blockIdx.x)
#define LOCAL_ID ((long long)threadIdx.x)
#define LOCAL_SIZE ((long long)blockDim.x)

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed char i8;
typedef short i16;
typedef int i32;
typedef long long i64;

/* Shapes and strides (bytes) by value: one view or two views of one shape. */
struct Layout1 {{ i64 shape[MAX_DIMS]; i64 a[MAX_DIMS]; }};
struct Layout2 {{ i64 shape[MAX_DIMS]; i64 a[MAX_DIMS]; i64 b[MAX_DIMS]; }};
"""

# float16 <-> float32/float64 by bit manipulation, rounding to nearest even like NumPy.
_HALF_SRC = """
union F32Bits { float f; u32 u; };
union F64Bits { double f; u64 u; };

DEV float half_to_float(u16 h) {
    u32 sign = (u32)(h & 0x8000u) << 16;
    u32 exp = (h >> 10) & 0x1fu;
    u32 man = h & 0x3ffu;
    F32Bits r;
    if (exp == 0x1fu) {
        r.u = sign | 0x7f800000u | (man << 13);          /* inf, NaN (payload kept) */
    } else if (exp != 0) {
        r.u = sign | ((exp + 112u) << 23) | (man << 13);  /* normal: rebias 15 -> 127 */
    } else if (man == 0) {
        r.u = sign;                                        /* +-0 */
    } else {                                               /* subnormal: normalise */
        u32 e = 113u;
        while (!(man & 0x400u)) { man <<= 1; --e; }
        r.u = sign | (e << 23) | ((man & 0x3ffu) << 13);
    }
    return r.f;
}

/* What a conversion to an integer sees of a float16 (the OpenCL dialect's is cheaper
   for subnormals, which truncate to 0 either way). */
DEV float half_for_int(u16 h) { return half_to_float(h); }

/* float16 to double directly (NumPy's npy_halfbits_to_doublebits): through float, the
   conversion to double would quiet a signalling NaN. */
DEV double half_to_double(u16 h) {
    F64Bits r;
    u64 sign = (u64)(h & 0x8000u) << 48;
    u32 exp = (h >> 10) & 0x1fu;
    u64 man = h & 0x3ffu;
    if (exp == 0x1fu) {
        r.u = sign | 0x7ff0000000000000ULL | (man << 42);  /* inf, NaN (payload kept) */
        return r.f;
    }
    return (double)half_to_float(h);                       /* exact for every other value */
}

DEV u16 float_to_half(float value) {
    F32Bits b;
    b.f = value;
    u32 f = b.u;
    u16 sign = (u16)((f >> 16) & 0x8000u);
    u32 exp = (f >> 23) & 0xffu;
    u32 man = f & 0x7fffffu;
    if (exp == 0xffu) {
        if (man == 0) return (u16)(sign | 0x7c00u);
        u32 payload = man >> 13;
        return (u16)(sign | 0x7c00u | (payload ? payload : 1u));
    }
    if (exp >= 143u) return (u16)(sign | 0x7c00u);         /* >= 2**16: overflow */
    if (exp >= 113u) {                                      /* normal half */
        u32 h = ((exp - 112u) << 10) | (man >> 13);
        u32 rest = man & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  /* may carry into inf */
        return (u16)(sign | h);
    }
    if (exp < 102u) return sign;                            /* below half the smallest subnormal */
    u32 sig = man | 0x800000u;
    u32 shift = 126u - exp;                                 /* 14 .. 24 */
    u32 h = sig >> shift;
    u32 rest = sig & ((1u << shift) - 1u);
    u32 halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
    return (u16)(sign | h);
}

DEV u16 double_to_half(double value) {
    F64Bits b;
    b.f = value;
    u64 d = b.u;
    u16 sign = (u16)((d >> 48) & 0x8000u);
    int exp = (int)((d >> 52) & 0x7ffu);
    u64 man = d & 0xfffffffffffffULL;
    if (exp == 0x7ff) {
        if (man == 0) return (u16)(sign | 0x7c00u);
        u32 payload = (u32)(man >> 42);
        return (u16)(sign | 0x7c00u | (payload ? payload : 1u));
    }
    int e = exp - 1023;
    if (e >= 16) return (u16)(sign | 0x7c00u);
    if (e >= -14) {
        u64 h = ((u64)(e + 15) << 10) | (man >> 42);
        u64 rest = man & ((1ULL << 42) - 1ULL);
        u64 halfway = 1ULL << 41;
        if (rest > halfway || (rest == halfway && (h & 1ULL))) ++h;
        return (u16)(sign | (u16)h);
    }
    if (e < -25) return sign;
    u64 sig = man | (1ULL << 52);
    int shift = 28 - e;                                     /* 43 .. 53 */
    u64 h = sig >> shift;
    u64 rest = sig & ((1ULL << shift) - 1ULL);
    u64 halfway = 1ULL << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1ULL))) ++h;
    return (u16)(sign | (u16)h);
}

/* x86-64 truncating conversions (cvttsd2si): out of range or NaN gives the
   "integer indefinite" value, as NumPy's casts do on x86-64. */
DEV int to_i32(double v) {
    return (v > -2147483649.0 && v < 2147483648.0) ? (int)v : (int)0x80000000u;
}
DEV long long to_i64(double v) {
    return (v >= -9223372036854775808.0 && v < 9223372036854775808.0)
        ? (long long)v : (long long)0x8000000000000000ULL;
}
DEV u64 to_u64(double v) {
    return v < 9223372036854775808.0
        ? (u64)to_i64(v)
        : ((u64)to_i64(v - 9223372036854775808.0) ^ 0x8000000000000000ULL);
}
"""


def _float_to_int(dst_key: str, v: str) -> str:
    """x86-64's truncating conversion (see :data:`_HALF_SRC`), not the GPU's saturating one."""
    if dst_key in ("i1", "i2", "u1", "u2", "i4"):
        return f"({SCALARS[dst_key].real})to_i32((double)({v}))"
    if dst_key in ("u4", "i8"):
        return f"({SCALARS[dst_key].real})to_i64((double)({v}))"
    return f"to_u64((double)({v}))"


_CUDA_C = Dialect(
    kernel='extern "C" __global__',
    fn="DEV",
    glob="",
    prelude=_PRELUDE,
    layout=("Layout1 m", "Layout2 m"),
    layout_ref=("const Layout1 &m", "const Layout2 &m"),
    shape="m.shape[d]",
    strides=("m.a[d]", "m.b[d]"),
    fp64="",
    half_src=lambda doubles: _HALF_SRC,
    # NumPy rounds float64 straight to float16, and float32 straight too: a float32
    # goes to float_to_half, not through (double), whose cvt.f64.f32 quiets a
    # signalling NaN on the GPU (NumPy keeps its bits).  Integers go through double.
    to_half=lambda real, v: (f"float_to_half({v})" if real == "float"
                             else f"double_to_half((double)({v}))"),
    float_to_int=_float_to_int,
    compute_prelude=(
        "#define INFINITY __int_as_float(0x7f800000)\n"
        "#define NAN __int_as_float(0x7fffffff)\n"
    ),
    suffix_math=True,
)
DIALECT = _CUDA_C
# Options of every compile: C++14, and no contraction into FMAs (NVRTC's default
# --fmad=true changes a * b + c); --use_fast_math and -ftz stay off (docs/kernels.md).
COMPILE_OPTIONS = ("--std=c++14", "--fmad=false")
SCALAR_KEYS = tuple(SCALARS)


def convert_kernel_names(src_key: str) -> tuple[str, ...]:
    """Kernels of the conversion program of one source type: ``convert_<dst>``."""
    return _kernels.convert_kernel_names(convert_targets(src_key))


def convert_source(src_key: str, src_aligned: bool, dst_aligned: bool) -> str:
    """CUDA C converting from one source type to every other: ``convert_<dst>`` kernels.

    One program per source type keeps NVRTC runs few.  ``*_aligned``: whether
    every address of the view is a multiple of the component size (else
    byte-wise loads/stores are used).
    """
    return _kernels.convert_source(
        _CUDA_C, src_key, convert_targets(src_key), src_aligned, dst_aligned
    )


def bytes_source(itemsize: int, word: int) -> str:
    """CUDA C of the byte-moving kernels for one item size, moving ``word`` bytes at a time.

    ``fill_bytes_ptr`` reads the value from device memory (any item size);
    ``fill_bytes`` takes it in the kernel parameter (up to ``_VALUE_PARAM_MAX`` bytes).
    """
    fills = [("fill_bytes_ptr", "const u8 *value", "value")]
    extra = ""
    if itemsize <= _VALUE_PARAM_MAX:
        extra = f"struct Value {{ u64 w[{-(-itemsize // 8)}]; }};\n"
        fills.append(("fill_bytes", "Value value", "value.w"))
    return _kernels.bytes_source(_CUDA_C, itemsize, word, fills, extra)


def bytes_kernel_names(itemsize: int) -> tuple[str, ...]:
    names = ("copy_bytes", "copy_rows", "fill_bytes_ptr")
    return names + (("fill_bytes",) if itemsize <= _VALUE_PARAM_MAX else ())


def memset_plan(start: int, pattern: bytes, nbytes: int) -> tuple[int, int, int] | None:
    """How to fill ``nbytes`` at ``start`` with ``pattern`` repeated, by ``cuMemsetD<8*unit>``.

    Returns ``(unit, value, count)`` -- the element size in bytes (1, 2 or 4),
    the unsigned value and the number of elements -- or ``None`` when the
    pattern does not repeat with such a period or the address/size is not
    aligned to it.  A pattern of one repeated byte uses the widest unit the
    alignment allows (fewer, wider stores).
    """
    itemsize = len(pattern)
    if itemsize == 0 or nbytes % itemsize:
        return None
    unit = None
    for u in (1, 2, 4):
        if itemsize % u == 0 and pattern == pattern[:u] * (itemsize // u):
            unit = u
            break
    if unit is None:
        return None
    for wide in (4, 2):
        if wide > unit and wide % unit == 0 and start % wide == 0 and nbytes % wide == 0:
            pattern, unit = pattern[:unit] * (wide // unit), wide
            break
    if start % unit or nbytes % unit:
        return None
    return unit, int.from_bytes(pattern[:unit], "little"), nbytes // unit


# Kernel parameters (ctypes mirrors of the structs) -------------------------------------------
class _Layout1(ctypes.Structure):
    _fields_ = [("shape", ctypes.c_int64 * MAX_DIMS), ("a", ctypes.c_int64 * MAX_DIMS)]


class _Layout2(ctypes.Structure):
    _fields_ = [
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("a", ctypes.c_int64 * MAX_DIMS),
        ("b", ctypes.c_int64 * MAX_DIMS),
    ]


def _layout(shape: list[int], *strides: list[int]) -> ctypes.Structure:
    if len(shape) > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dimensions are supported, got {len(shape)}")
    m = (_Layout1 if len(strides) == 1 else _Layout2)()
    m.shape[: len(shape)] = shape
    for name, s in zip(("a", "b"), strides, strict=False):
        getattr(m, name)[: len(s)] = s
    return m


# NVRTC ----------------------------------------------------------------------------------------
_images: dict[tuple[int, str], tuple[bytes, str]] = {}  # (arch, source) -> (image, "cubin"|"ptx")
_images_lock = threading.Lock()


def _nvrtc_check(nvrtc, call: str, result, log: str = "") -> tuple:
    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        name = nvrtc.nvrtcResult(err).name
        try:
            _, text = nvrtc.nvrtcGetErrorString(err)
            text = text.decode(errors="replace")
        except (RuntimeError, ValueError, TypeError):
            text = name
        raise BackendError(call, name, f"{text}\n{log}".strip())
    return result[1:]


nvrtc_compiles = 0  # NVRTC runs in this process (a cache hit runs none)


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library."""
    from cuda.bindings import nvrtc

    major, minor = _nvrtc_check(nvrtc, "nvrtcVersion", nvrtc.nvrtcVersion())
    return int(major), int(minor)


def compile_image(source: str, arch: int, cache=None) -> tuple[bytes, str]:
    """Compile ``source`` with NVRTC for ``sm_<arch>``: ``(image, "cubin")``.

    When NVRTC does not know the architecture (a device newer than it), the
    image is PTX for the newest architecture it knows, which the driver
    compiles when loading (``(image, "ptx")``).  Needs only the NVRTC library,
    not a GPU.  Cached per (arch, source) for the process and, when ``cache``
    (a ``BinaryCache``) is given, on disk under a key of the source, the
    options, the target and the NVRTC version.
    """
    key = (arch, source)
    image = _images.get(key)
    if image is not None:
        return image
    from cuda.bindings import nvrtc

    (supported,) = _nvrtc_check(nvrtc, "nvrtcGetSupportedArchs", nvrtc.nvrtcGetSupportedArchs())
    supported = sorted(int(a) for a in supported)
    if arch in supported:
        target, kind = f"--gpu-architecture=sm_{arch}", "cubin"
    else:
        older = [a for a in supported if a <= arch]
        if not older:
            raise BackendError(
                "nvrtcCompileProgram",
                "NVRTC_ERROR_INVALID_OPTION",
                f"this NVRTC cannot compile for sm_{arch} (it supports sm_{supported[0]} to "
                f"sm_{supported[-1]})",
            )
        target, kind = f"--gpu-architecture=compute_{older[-1]}", "ptx"
    opts = [target.encode(), *(o.encode() for o in COMPILE_OPTIONS)]
    disk_key = None
    if cache is not None:
        version = "{}.{}".format(*nvrtc_version())
        disk_key = b"\0".join([b"nvrtc", version.encode(), kind.encode(), *opts,
                               source.encode()])
        data = cache.load(disk_key)
        if data is not None:
            image = (data, kind)
            with _images_lock:
                _images[key] = image
            return image
    global nvrtc_compiles
    nvrtc_compiles += 1
    (prog,) = _nvrtc_check(
        nvrtc,
        "nvrtcCreateProgram",
        nvrtc.nvrtcCreateProgram(source.encode(), b"gpuarrays.cu", 0, [], []),
    )
    try:
        result = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if result[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _nvrtc_check(nvrtc, "nvrtcCompileProgram", result, _program_log(nvrtc, prog))
        if kind == "cubin":
            (size,) = _nvrtc_check(nvrtc, "nvrtcGetCUBINSize", nvrtc.nvrtcGetCUBINSize(prog))
            buf = b" " * size
            _nvrtc_check(nvrtc, "nvrtcGetCUBIN", nvrtc.nvrtcGetCUBIN(prog, buf))
        else:
            (size,) = _nvrtc_check(nvrtc, "nvrtcGetPTXSize", nvrtc.nvrtcGetPTXSize(prog))
            buf = b" " * size
            _nvrtc_check(nvrtc, "nvrtcGetPTX", nvrtc.nvrtcGetPTX(prog, buf))
            buf = buf.rstrip(b"\0") + b"\0"
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    image = (bytes(buf), kind)
    if cache is not None:
        cache.save(disk_key, image[0])
    with _images_lock:
        _images[key] = image
    return image


def _program_log(nvrtc, prog) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
        return ""
    buf = b" " * size
    (err,) = nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\0").decode(errors="replace").strip()


# Per-device state -------------------------------------------------------------------------------
@dataclass
class _DeviceState:
    """Primary context, streams, events and loaded kernels of one device (until reset)."""

    ctx: object  # CUcontext
    ctx_id: int
    stream: object  # CUstream: the default stream (handle 0 of the stream interface)
    modules: dict = field(default_factory=dict)  # program key -> CUmodule
    functions: dict = field(default_factory=dict)  # (program key, name) -> CUfunction
    lock: threading.Lock = field(default_factory=threading.Lock)
    # user streams (non-blocking): int(CUstream) -> CUstream; events recorded: int(CUevent)
    streams: dict[int, object] = field(default_factory=dict)
    events: dict[int, object] = field(default_factory=dict)
    # held while a stream is destroyed or every stream is waited for, so that a drain
    # never synchronizes a stream being destroyed
    streams_lock: threading.RLock = field(default_factory=threading.RLock)


class _Current:
    """Make a device's primary context current for one call; restore the caller's after."""

    __slots__ = ("driver", "state", "pushed")

    def __init__(self, driver, state: _DeviceState) -> None:
        self.driver = driver
        self.state = state
        self.pushed = False

    def __enter__(self) -> _DeviceState:
        err, cur = self.driver.cuCtxGetCurrent()
        if err != CUDA_SUCCESS or int(cur) != self.state.ctx_id:
            _check("cuCtxPushCurrent", self.driver.cuCtxPushCurrent(self.state.ctx))
            self.pushed = True
        return self.state

    def __exit__(self, *exc) -> None:
        if self.pushed:
            self.pushed = False
            self.driver.cuCtxPopCurrent()


@dataclass(frozen=True)
class _Attrs:
    arch: int  # compute capability as major * 10 + minor
    sm_count: int
    pools: bool


_ARG_CTYPES = {
    "ptr": ctypes.c_uint64, "b1": ctypes.c_uint8, "i1": ctypes.c_int8, "u1": ctypes.c_uint8,
    "i2": ctypes.c_int16, "u2": ctypes.c_uint16, "i4": ctypes.c_int32, "u4": ctypes.c_uint32,
    "i8": ctypes.c_int64, "u8": ctypes.c_uint64, "f4": ctypes.c_float, "f8": ctypes.c_double,
}


class _Kernel:
    """A generated kernel on one device (see ``KernelBackend`` in base.py).

    Its parameters live in ctypes slots whose addresses form the
    ``cuLaunchKernel`` parameter array, made once; a launch stores the values
    and launches.  After a device reset it loads itself again on the next launch.
    """

    __slots__ = ("_backend", "_index", "_source", "_name", "_cache", "_slots", "_params",
                 "_params_addr", "_state", "_fn", "_lock", "_max_local")

    def __init__(self, backend: CudaBackend, index: int, source: str, name: str,
                 params: tuple[str, ...], cache) -> None:  # fmt: skip
        self._backend, self._index, self._source, self._name = backend, index, source, name
        self._cache = cache
        try:
            self._slots = [_ARG_CTYPES[t]() for t in params]
        except KeyError as exc:
            raise ValueError(f"unknown kernel parameter type {exc.args[0]!r}; "
                             f"expected one of {', '.join(_ARG_CTYPES)}") from None
        self._params = (ctypes.c_void_p * max(len(self._slots), 1))(
            *[ctypes.addressof(a) for a in self._slots])
        self._params_addr = ctypes.addressof(self._params)
        self._lock = threading.Lock()
        self._state = None
        self._bind()

    def _bind(self) -> None:
        self._state, self._fn = self._backend._function(
            self._index, ("compute", self._source), lambda: self._source, [self._name],
            self._name, self._cache)
        d = self._backend._d
        attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
        self._max_local = int(_check("cuFuncGetAttribute", d.cuFuncGetAttribute(attr, self._fn))[0])

    @property
    def max_local(self) -> int:
        return self._max_local

    def launch(self, values, global_size: int, local_size: int, offset: int = 0) -> None:
        if offset:
            raise ValueError(f"{self._name}: CUDA launches have no global offset (got {offset}); "
                             f"launch from 0 and pass the first index as an argument")
        backend = self._backend
        if backend._states.get(self._index) is not self._state:
            self._bind()  # the device was reset (or never used since)
        if local_size > self._max_local:
            raise ValueError(f"{self._name} cannot run blocks of {local_size} threads on "
                             f"cuda:{self._index}: at most {self._max_local} for this kernel "
                             f"(launch with its max_local or less)")
        with self._lock:
            for slot, v in zip(self._slots, values, strict=True):
                slot.value = v
            with backend._current(self._index) as state:
                _check("cuLaunchKernel", backend._d.cuLaunchKernel(
                    self._fn, global_size // local_size, 1, 1, local_size, 1, 1, 0,
                    backend._stream(state, self._index), self._params_addr, 0))


class CudaBackend(DeviceOps):
    """NVIDIA devices through the driver API; see the module docstring."""

    name = "cuda"
    needs_host_registration = True

    def __init__(self, driver, count: int) -> None:
        self._d = driver
        self._count = count
        self._devs = [_check("cuDeviceGet", driver.cuDeviceGet(i))[0] for i in range(count)]
        self._infos: list[DeviceInfo] = []
        self._attrs: list[_Attrs] = []
        for dev in self._devs:
            info, attrs = self._describe(dev)
            self._infos.append(info)
            self._attrs.append(attrs)
        self._states: dict[int, _DeviceState] = {}
        self._lock = threading.Lock()
        self._starts: list[int] = []  # sorted addresses of our allocations
        self._allocs: dict[int, tuple[int, str, int]] = {}  # ptr -> (nbytes, kind, device)
        # host ranges we registered: ptr -> (nbytes, device); foreign ones: ptr -> device
        self._registered: dict[int, tuple[int, int]] = {}
        self._reg_starts: list[int] = []  # sorted keys of _registered (copies split there)
        self._foreign_registered: dict[int, int] = {}
        # held across a registration and its bookkeeping, and by a copy retried because a
        # registration appeared between its split and the driver's look-up (_copy)
        self._reg_lock = threading.Lock()
        self.builds = 0  # modules built (docs/kernels.md, "Kernel caches")
        self._compiled: dict[tuple[int, str, str], _Kernel] = {}
        self._thread = ThreadStreams()  # each thread's current stream of each device

    # devices ------------------------------------------------------------------
    def _attr(self, dev, name: str) -> int:
        attr = getattr(self._d.CUdevice_attribute, name)
        return int(_check("cuDeviceGetAttribute", self._d.cuDeviceGetAttribute(attr, dev))[0])

    def _describe(self, dev) -> tuple[DeviceInfo, _Attrs]:
        d = self._d
        (raw,) = _check("cuDeviceGetName", d.cuDeviceGetName(256, dev))
        name = raw.split(b"\0", 1)[0].decode(errors="replace").strip()
        (total,) = _check("cuDeviceTotalMem", d.cuDeviceTotalMem(dev))
        major = self._attr(dev, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
        minor = self._attr(dev, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
        kinds: tuple[str, ...] = ("device",)
        uva = self._attr(dev, "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING")
        if uva and self._attr(dev, "CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY"):
            kinds += ("host",)
        if self._attr(dev, "CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY"):
            kinds += ("unified",)
        info = DeviceInfo(
            name=f"{name} (sm_{major}{minor})",
            total_memory=int(total),
            kinds=kinds,
            accelerator=True,
            host_kinds=tuple(k for k in kinds if k != "device"),  # pinned and managed memory
        )
        attrs = _Attrs(
            arch=major * 10 + minor,
            sm_count=self._attr(dev, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            pools=bool(self._attr(dev, "CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED")),
        )
        return info, attrs

    def device_count(self) -> int:
        return self._count

    def device_info(self, index: int) -> DeviceInfo:
        return self._infos[index]

    def arch(self, index: int) -> int:
        """The device's compute capability as ``major * 10 + minor`` (90 for sm_90)."""
        return self._attrs[index].arch

    def _new_state(self, index: int) -> _DeviceState:
        """Retain the device's primary context and make a stream (on first use, after a reset)."""
        d = self._d
        dev = self._devs[index]
        (ctx,) = _check("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(dev))
        _check("cuCtxPushCurrent", d.cuCtxPushCurrent(ctx))
        try:
            flags = int(d.CUstream_flags.CU_STREAM_DEFAULT)  # blocking
            (stream,) = _check("cuStreamCreate", d.cuStreamCreate(flags))
        finally:
            d.cuCtxPopCurrent()
        return _DeviceState(ctx, int(ctx), stream)

    def _current(self, index: int) -> _Current:
        return _Current(self._d, self._state(index))

    # raw memory ---------------------------------------------------------------
    def allocate(self, index: int, kind: str, nbytes: int) -> int:
        info = self._infos[index]
        if kind not in info.kinds:
            raise ValueError(
                f"memory kind {kind!r} is not supported by cuda:{index} ({info.name}); "
                f"it supports {', '.join(map(repr, info.kinds))}"
            )
        d = self._d
        size = max(nbytes, 1)
        with self._current(index):
            if kind == "device":
                err, ptr = d.cuMemAlloc(size)
                call = "cuMemAlloc"
            elif kind == "host":
                flags = int(d.CU_MEMHOSTALLOC_PORTABLE) | int(d.CU_MEMHOSTALLOC_DEVICEMAP)
                err, ptr = d.cuMemHostAlloc(size, flags)
                call = "cuMemHostAlloc"
            else:
                free, _ = _check("cuMemGetInfo", d.cuMemGetInfo())
                if size > free:
                    raise BackendOutOfMemory(
                        f"cuMemAllocManaged({nbytes}) on cuda:{index}: only {free} bytes free "
                        f"on the device (unified memory is not oversubscribed)"
                    )
                flags = int(d.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL)
                err, ptr = d.cuMemAllocManaged(size, flags)
                call = "cuMemAllocManaged"
        if err != CUDA_SUCCESS:
            raise cuda_error(call, err)
        ptr = int(ptr)
        with self._lock:
            bisect.insort(self._starts, ptr)
            self._allocs[ptr] = (nbytes, kind, index)
        return ptr

    def free(self, index: int, kind: str, ptr: int, nbytes: int) -> None:
        with self._lock:
            entry = self._allocs.pop(ptr, None)
            if entry is not None:
                del self._starts[bisect.bisect_left(self._starts, ptr)]
                index, kind = entry[2], entry[1]
        # Otherwise an owned wrap of someone else's allocation: freed by its kind.
        d = self._d
        with self._current(index) as state:
            # Work still queued on any of our streams may use the memory.
            self._drain(state)
            if kind == "host":
                _check("cuMemFreeHost", d.cuMemFreeHost(ptr))
            else:
                _check("cuMemFree", d.cuMemFree(ptr))

    def mem_info(self, index: int) -> tuple[int, int]:
        with self._current(index):
            free, total = _check("cuMemGetInfo", self._d.cuMemGetInfo())
        return int(free), int(total)

    # byte movement ------------------------------------------------------------
    def _ours(self, ptr: int) -> bool:
        with self._lock:
            i = bisect.bisect_right(self._starts, ptr) - 1
            if i < 0:
                return False
            base = self._starts[i]
            return ptr < base + max(self._allocs[base][0], 1)

    def _pieces(self, dst: int, src: int, nbytes: int) -> list[tuple[int, int]]:
        """``(offset, size)`` pieces of a copy of ``nbytes`` from ``src`` to ``dst``, cut
        wherever one of our host registrations begins or ends inside either range.

        CUDA looks up a copy's source and destination by their first byte only: one
        inside a registered range makes the whole copy a copy of that registration, and
        one running past its end is refused with CUDA_ERROR_INVALID_VALUE.  Registrations
        are whole pages (pins.py), so a wrap's registration also covers the bytes around
        it on its first and last page: the start of a NumPy array the C allocator put
        right after (or before) the wrapped one, and of a wrap that spans two
        registrations (two wraps sharing a page).  Each piece lies inside one
        registration or outside all of ours, so the driver accepts it (a DMA copy of
        the pinned piece, a staged copy of a pageable one)."""
        if not self._registered:
            return [(0, nbytes)]
        cuts = {0, nbytes}
        with self._lock:
            starts, registered = self._reg_starts, self._registered
            for ptr in (dst, src):
                end = ptr + nbytes
                i = max(bisect.bisect_right(starts, ptr) - 1, 0)
                while i < len(starts) and starts[i] < end:
                    lo = starts[i]
                    hi = lo + registered[lo][0]
                    if hi > ptr:
                        cuts.update(x - ptr for x in (lo, hi) if ptr < x < end)
                    i += 1
        bounds = sorted(cuts)
        return [(a, b - a) for a, b in zip(bounds, bounds[1:], strict=False)]

    def _copy(self, index: int, dst: int, src: int, nbytes: int, wait: bool) -> None:
        if nbytes == 0:
            return
        d = self._d
        with self._current(index) as state:
            stream = self._stream(state, index)
            pieces = self._pieces(dst, src, nbytes)
            err = self._enqueue_pieces(dst, src, pieces, stream)
            if err == CUDA_ERROR_INVALID_VALUE:
                # A registration made by another thread between the split and the driver's
                # look-up (pins register on wrap): split again while none can be made, and
                # copy everything once more (the same bytes: the pieces already done are
                # rewritten with what they hold)
                with self._reg_lock:
                    again = self._pieces(dst, src, nbytes)
                    if again != pieces:
                        err = self._enqueue_pieces(dst, src, again, stream)
            if err != CUDA_SUCCESS:
                raise cuda_error("cuMemcpyAsync", err)
            if wait:
                _check("cuStreamSynchronize", d.cuStreamSynchronize(stream))

    def _enqueue_pieces(self, dst: int, src: int, pieces, stream) -> int:
        """Enqueue a copy piece by piece; the first failure's ``CUresult`` (0: none)."""
        copy = self._d.cuMemcpyAsync
        for offset, size in pieces:
            (err,) = copy(dst + offset, src + offset, size, stream)
            if err != CUDA_SUCCESS:
                return int(err)
        return CUDA_SUCCESS

    def memcpy(self, index: int, dst: int, src: int, nbytes: int) -> None:
        # Memory we did not allocate (pageable host memory, another library's
        # buffer) may be reused by its owner as soon as we return: wait for it.
        self._copy(index, dst, src, nbytes, wait=not (self._ours(dst) and self._ours(src)))

    # kernels ------------------------------------------------------------------
    def _function(self, index: int, key: tuple, source_fn, names, name: str, cache=None):
        """The kernel ``name`` of program ``key``, compiled and loaded on first use."""
        state = self._state(index)
        fn = state.functions.get((key, name))
        if fn is not None:
            return state, fn
        image, _ = compile_image(source_fn(), self._attrs[index].arch, cache)
        self.builds += 1
        d = self._d
        with state.lock:
            fn = state.functions.get((key, name))
            if fn is None:
                with self._current(index):
                    (module,) = _check("cuModuleLoadData", d.cuModuleLoadData(image))
                    state.modules[key] = module
                    for kname in names:
                        (f,) = _check(
                            "cuModuleGetFunction", d.cuModuleGetFunction(module, kname.encode())
                        )
                        state.functions[(key, kname)] = f
                fn = state.functions[(key, name)]
        return state, fn

    def _launch(self, index: int, fn, n: int, args: list) -> None:
        """Launch ``fn`` over ``n`` items; ``args`` are ctypes objects (passed by address)."""
        params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        size, block = _kernels.launch_shape("gpu", max(n, 1))  # one element per thread
        d = self._d
        with self._current(index) as state:
            _check(
                "cuLaunchKernel",
                d.cuLaunchKernel(
                    fn, size // block, 1, 1, block, 1, 1, 0, self._stream(state, index),
                    ctypes.addressof(params), 0,
                ),  # fmt: skip
            )

    def _bytes_function(self, index: int, itemsize: int, word: int, name: str):
        key = ("bytes", itemsize, word)
        return self._function(
            index, key, lambda: bytes_source(itemsize, word), bytes_kernel_names(itemsize), name
        )

    def _memset(self, index: int, start: int, pattern: bytes, nbytes: int) -> bool:
        """Fill ``nbytes`` at ``start`` with a repeating ``pattern`` by cuMemsetD*; False if not possible."""
        plan = memset_plan(start, pattern, nbytes)
        if plan is None:
            return False
        unit, value, count = plan
        d = self._d
        call = {1: "cuMemsetD8Async", 2: "cuMemsetD16Async", 4: "cuMemsetD32Async"}[unit]
        with self._current(index) as state:
            _check(call, getattr(d, call)(start, value, count, self._stream(state, index)))
        return True

    def _launch_fill(self, index: int, dst: RawView, plan: FillPlan) -> None:
        itemsize = dst.dtype.itemsize
        layout = _layout(plan.shape, plan.strides)
        tail = [ctypes.c_int32(len(plan.shape)), ctypes.c_int64(plan.n)]
        if itemsize <= _VALUE_PARAM_MAX:
            _, fn = self._bytes_function(index, itemsize, plan.word, "fill_bytes")
            value_param = (ctypes.c_uint64 * -(-itemsize // 8))()
            ctypes.memmove(value_param, plan.pattern, itemsize)
            self._launch(index, fn, plan.n, [ctypes.c_uint64(dst.ptr), layout, value_param, *tail])
            return
        # A huge structured value: read it from a temporary device buffer.
        _, fn = self._bytes_function(index, itemsize, plan.word, "fill_bytes_ptr")
        with self._temporary(index, np.frombuffer(plan.pattern, np.uint8)) as tmp:
            args = [ctypes.c_uint64(dst.ptr), layout, ctypes.c_uint64(tmp), *tail]
            self._launch(index, fn, plan.n, args)

    def _launch_copy(self, index: int, dst: RawView, src: RawView, plan: CopyPlan) -> None:
        items = plan.n
        if plan.how in ("bytes", "rows"):
            name = "copy_rows" if plan.how == "rows" else "copy_bytes"
            _, fn = self._bytes_function(index, dst.dtype.itemsize, plan.word, name)
            if plan.how == "rows":  # _launch's blocks: launch_shape("gpu", ...)
                items = _kernels.rows_items(plan.n, plan.shape[-1],
                                            _kernels.launch_shape("gpu", 1)[1])
        else:
            skey, aligned = plan.src_key, (plan.src_aligned, plan.dst_aligned)
            _, fn = self._function(
                index,
                ("convert", skey, *aligned),
                lambda: convert_source(skey, *aligned),
                convert_kernel_names(skey),
                f"convert_{plan.dst_key}{'_c' if plan.contiguous else ''}",
            )
        layout = _layout(plan.shape, plan.dst_strides, plan.src_strides)
        args = [ctypes.c_uint64(dst.ptr), ctypes.c_uint64(src.ptr), layout,
                ctypes.c_int32(len(plan.shape)), ctypes.c_int64(plan.n)]  # fmt: skip
        self._launch(index, fn, items, args)

    class _Temporary:
        """A device buffer holding a host array for one launch; freed after the stream drains.

        The upload and the launch go to the thread's current stream, the one that is
        waited for before the buffer is freed.
        """

        def __init__(self, backend: CudaBackend, index: int, host: np.ndarray) -> None:
            self.backend, self.index, self.host = backend, index, np.ascontiguousarray(host)
            self.ptr = 0
            self.stream = None

        def __enter__(self) -> int:
            d = self.backend._d
            with self.backend._current(self.index) as state:
                self.stream = self.backend._stream(state, self.index)
                err, ptr = d.cuMemAlloc(max(self.host.nbytes, 1))
                if err != CUDA_SUCCESS:
                    raise cuda_error("cuMemAlloc", err)
                self.ptr = int(ptr)
                try:  # the host array may start on a page a wrap registered (_pieces)
                    backend = self.backend
                    src, nbytes = self.host.ctypes.data, self.host.nbytes
                    err = backend._enqueue_pieces(self.ptr, src,
                                                  backend._pieces(self.ptr, src, nbytes),
                                                  self.stream)
                    if err != CUDA_SUCCESS:
                        raise cuda_error("cuMemcpyAsync", err)
                except BaseException:
                    d.cuMemFree(self.ptr)
                    raise
            return self.ptr

        def __exit__(self, *exc) -> None:
            d = self.backend._d
            with self.backend._current(self.index):
                try:
                    _check("cuStreamSynchronize", d.cuStreamSynchronize(self.stream))
                finally:
                    _check("cuMemFree", d.cuMemFree(self.ptr))

    def _temporary(self, index: int, host: np.ndarray) -> CudaBackend._Temporary:
        return CudaBackend._Temporary(self, index, host)

    # generated kernels (KernelBackend in base.py) ---------------------------------
    dialect = _CUDA_C

    def launch_hint(self, index: int) -> str:
        return "gpu"

    def compile_kernel(self, index: int, source: str, name: str, params, cache=None) -> _Kernel:
        """The kernel ``name`` of ``source`` on device ``index``, compiled on first request
        (NVRTC, or the image from ``cache``, a ``BinaryCache``)."""
        key = (index, source, name)
        kernel = self._compiled.get(key)
        if kernel is None:  # compiled outside the back-end's lock (the program is built once)
            made = _Kernel(self, index, source, name, tuple(params), cache)
            with self._lock:
                kernel = self._compiled.setdefault(key, made)
        return kernel

    # lifecycle ----------------------------------------------------------------
    def synchronize(self, index: int) -> None:
        """Wait for every stream of the device: the default one and each user stream."""
        if self._states.get(index) is None:
            return  # nothing was ever queued
        with self._current(index) as state:
            self._drain(state)

    def _drain(self, state: _DeviceState) -> None:
        """Wait for the work queued on every stream of ``state`` (its context is current)."""
        d = self._d
        with state.streams_lock:  # no stream is destroyed while it is waited for
            for stream in list(state.streams.values()):
                _check("cuStreamSynchronize", d.cuStreamSynchronize(stream))
        _check("cuStreamSynchronize", d.cuStreamSynchronize(state.stream))

    # streams and events (StreamBackend in base.py, docs/streams.md) -------------------
    def _stream(self, state: _DeviceState, index: int):
        """The ``CUstream`` every enqueue of the calling thread on device ``index`` goes to
        now: its current stream (``set_thread_stream``), the default one when none is set."""
        return self._lookup_stream(state, index, self._thread.by_index.get(index, 0))

    def _lookup_stream(self, state: _DeviceState, index: int, stream: int):
        """The ``CUstream`` of handle ``stream`` (0: the default stream)."""
        if not stream:
            return state.stream
        found = state.streams.get(stream)
        if found is not None:
            return found
        raise DeviceResetError(f"stream 0x{stream:x} of cuda:{index} was made before a reset "
                               f"of the device; make a new ga.Stream after a reset")

    def _lookup_event(self, index: int, event: int) -> tuple[_DeviceState, object]:
        """The device state and ``CUevent`` of a (non-zero) event handle."""
        state = self._states.get(index)
        found = None if state is None else state.events.get(event)
        if found is None:
            raise DeviceResetError(f"event 0x{event:x} of cuda:{index} was recorded before a "
                                   f"reset of the device")
        return state, found

    def stream_new(self, index: int) -> int:
        """A new non-blocking stream of the device; its handle is ``int(CUstream)``, never 0."""
        d = self._d
        with self._current(index) as state:
            flags = int(d.CUstream_flags.CU_STREAM_NON_BLOCKING)
            (stream,) = _check("cuStreamCreate", d.cuStreamCreate(flags))
        handle = int(stream)
        with state.streams_lock:
            state.streams[handle] = stream
        return handle

    def stream_free(self, index: int, stream: int) -> None:
        """Wait for the stream's work, then destroy it.  A handle this device's state does not
        know (made before a reset, which destroyed it) is ignored."""
        state = self._states.get(index)
        if state is None or not stream:
            return
        d = self._d
        with state.streams_lock:
            found = state.streams.pop(stream, None)
            if found is None:
                return
            with _Current(d, state):
                try:
                    _check("cuStreamSynchronize", d.cuStreamSynchronize(found))
                except BaseException:
                    d.cuStreamDestroy(found)  # pending work completes; its resources follow
                    raise
                _check("cuStreamDestroy", d.cuStreamDestroy(found))

    def stream_synchronize(self, index: int, stream: int) -> None:
        with self._current(index) as state:
            found = self._lookup_stream(state, index, stream)
            _check("cuStreamSynchronize", self._d.cuStreamSynchronize(found))

    def set_thread_stream(self, index: int, stream: int) -> None:
        self._thread.set(index, stream)

    def event_record(self, index: int, stream: int) -> int:
        """An event recorded on ``stream`` (0: the default stream): ``int(CUevent)``."""
        d = self._d
        with self._current(index) as state:
            found = self._lookup_stream(state, index, stream)
            flags = int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)
            (event,) = _check("cuEventCreate", d.cuEventCreate(flags))
            try:
                _check("cuEventRecord", d.cuEventRecord(event, found))
            except BaseException:
                d.cuEventDestroy(event)
                raise
        handle = int(event)
        state.events[handle] = event
        return handle

    def event_done(self, index: int, event: int) -> bool:
        if not event:
            return True  # the complete event
        state, found = self._lookup_event(index, event)
        with _Current(self._d, state):
            (err,) = self._d.cuEventQuery(found)
        if err == CUDA_SUCCESS:
            return True
        if err == CUDA_ERROR_NOT_READY:
            return False
        _check("cuEventQuery", (err,))
        return False  # not reached: _check raised

    def event_wait(self, index: int, event: int) -> None:
        if not event:
            return
        state, found = self._lookup_event(index, event)
        with _Current(self._d, state):
            _check("cuEventSynchronize", self._d.cuEventSynchronize(found))

    def event_free(self, index: int, event: int) -> None:
        """Destroy the event (legal while it is pending: the driver releases it once it
        completes).  One recorded before a reset (destroyed with its context) is ignored."""
        if not event:
            return
        state = self._states.get(index)
        found = None if state is None else state.events.pop(event, None)
        if found is None:
            return
        with _Current(self._d, state):
            _check("cuEventDestroy", self._d.cuEventDestroy(found))

    def stream_wait_event(self, index: int, stream: int, event: int) -> None:
        """Order ``stream`` (0: the default stream) after ``event``, without the host waiting."""
        if not event:
            return  # complete already
        with self._current(index) as state:
            found = self._lookup_stream(state, index, stream)
            _, ev = self._lookup_event(index, event)
            _check("cuStreamWaitEvent", self._d.cuStreamWaitEvent(found, ev, 0))

    # streams, for interchange (interop/cai.py, interop/dlpack.py) ----------------
    def stream_handle(self, index: int) -> int:
        """The handle of the calling thread's current stream of the device, as the CUDA Array
        Interface and DLPack pass it (never 0: the default stream is a created one)."""
        state = self._state(index)
        return int(self._stream(state, index))

    # The stream CAI consumers order their work after; the stream DLPack producers
    # are asked to make their data ready on.
    cai_stream = stream_handle
    dlpack_stream = stream_handle

    def wait_stream(self, index: int, stream: int) -> None:
        """Order the thread's current stream of the device after the work queued so far on a
        foreign ``stream``.

        ``stream`` is a handle as the interchange protocols give it (1: legacy
        default stream, 2: per-thread default stream, else a ``CUstream``).
        """
        d = self._d
        with self._current(index) as state:
            ours = self._stream(state, index)
            flags = int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)
            (event,) = _check("cuEventCreate", d.cuEventCreate(flags))
            try:
                _check("cuEventRecord", d.cuEventRecord(event, d.CUstream(int(stream))))
                _check("cuStreamWaitEvent", d.cuStreamWaitEvent(ours, event, 0))
            finally:
                d.cuEventDestroy(event)  # released once the wait has been satisfied

    def foreign_wait_event(self, index: int, stream: int, event: int) -> None:
        """Order a foreign ``stream`` (a handle as the interchange protocols give it: 1 legacy
        default, 2 per-thread default, else a ``CUstream``) after our ``event``: the DLPack
        producer's side of the stream rule, with no host wait."""
        if not event:
            return
        with self._current(index):
            _, ev = self._lookup_event(index, event)
            _check("cuStreamWaitEvent",
                   self._d.cuStreamWaitEvent(self._d.CUstream(int(stream)), ev, 0))

    def reset(self, index: int) -> None:
        with self._lock:
            state = self._states.pop(index, None)
            for p in [p for p, e in self._allocs.items() if e[2] == index]:
                del self._allocs[p]
            self._starts = sorted(self._allocs)
            for p in [p for p, e in self._registered.items() if e[1] == index]:
                del self._registered[p]
            self._reg_starts = sorted(self._registered)
            for p in [p for p, dev in self._foreign_registered.items() if dev == index]:
                del self._foreign_registered[p]
        if state is None:
            return  # this back-end never used the device
        d = self._d
        dev = self._devs[index]
        # Every stream's work drains and the user streams are destroyed before the context
        # goes.  Best effort, errors unchecked: a context in a failed (sticky) state is what
        # a reset throws away.  Their handles are unknown from now on (DeviceResetError).
        try:
            with _Current(d, state), state.streams_lock:
                streams = list(state.streams.values())
                state.streams.clear()
                for stream in streams:
                    d.cuStreamSynchronize(stream)
                    d.cuStreamDestroy(stream)
                d.cuStreamSynchronize(state.stream)  # the default stream
        except BackendError:
            pass  # the context cannot even be made current: the reset below still runs
        state.events.clear()  # destroyed with the context
        _check("cuDevicePrimaryCtxReset", d.cuDevicePrimaryCtxReset(dev))
        # Resetting does not release our retain of the primary context.
        _check("cuDevicePrimaryCtxRelease", d.cuDevicePrimaryCtxRelease(dev))

    def pointer_info(self, ptr: int) -> PointerInfo | None:
        d = self._d
        a = d.CUpointer_attribute
        attrs = [
            a.CU_POINTER_ATTRIBUTE_IS_MANAGED,
            a.CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            a.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            a.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
            a.CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        ]
        index = next(iter(list(self._states)), 0)  # any device's context will do
        with self._current(index):
            err, values = d.cuPointerGetAttributes(len(attrs), attrs, ptr)
        if err in (CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_CONTEXT):
            return PointerInfo("host", index, ptr, 0)  # not known to CUDA: pageable host memory
        if err != CUDA_SUCCESS:
            raise cuda_error("cuPointerGetAttributes", err)
        managed, mtype, ordinal, start, size = values
        mtype = int(mtype)
        ordinal = int(ordinal) if int(ordinal) >= 0 else index
        if managed:
            kind = "unified"
        elif mtype == _MEMORYTYPE_DEVICE or mtype == _MEMORYTYPE_UNIFIED:
            kind = "device"
        elif mtype == _MEMORYTYPE_HOST:
            kind = "host"
        else:
            return PointerInfo("host", index, ptr, 0)
        start, size = int(start), int(size)
        if start and size and start <= ptr < start + size:
            return PointerInfo(kind, ordinal, start, size)
        known = self._known_range(ptr)
        if known is not None:
            return PointerInfo(kind, ordinal, *known)
        # A registered or mapped range whose extent the driver does not report.
        return PointerInfo(kind, ordinal, ptr, 0)

    def _known_range(self, ptr: int) -> tuple[int, int] | None:
        with self._lock:
            i = bisect.bisect_right(self._starts, ptr) - 1
            if i >= 0:
                base = self._starts[i]
                nbytes = self._allocs[base][0]
                if ptr < base + max(nbytes, 1):
                    return base, nbytes
            for base, (nbytes, _) in self._registered.items():
                if base <= ptr < base + nbytes:
                    return base, nbytes
        return None

    def register_host(self, index: int, ptr: int, nbytes: int) -> None:
        d = self._d
        flags = int(d.CU_MEMHOSTREGISTER_PORTABLE) | int(d.CU_MEMHOSTREGISTER_DEVICEMAP)
        with self._reg_lock:  # a copy that raced this registration waits for its record
            with self._current(index):
                (err,) = d.cuMemHostRegister(ptr, nbytes, flags)
            if err == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
                with self._lock:  # someone else's registration: leave it to them
                    self._foreign_registered[ptr] = index
                return
            if err != CUDA_SUCCESS:
                raise cuda_error("cuMemHostRegister", err)
            with self._lock:  # copies are split at its ends from now on (_pieces)
                self._registered[ptr] = (nbytes, index)
                bisect.insort(self._reg_starts, ptr)

    def unregister_host(self, index: int, ptr: int) -> None:
        with self._lock:
            if self._foreign_registered.pop(ptr, None) is not None:
                return
        try:
            with self._current(index):
                _check("cuMemHostUnregister", self._d.cuMemHostUnregister(ptr))
        finally:  # forgotten only once gone: until then copies are still split at its ends
            with self._lock:
                if self._registered.pop(ptr, None) is not None:
                    del self._reg_starts[bisect.bisect_left(self._reg_starts, ptr)]


def load() -> CudaBackend:
    """The cuda back-end, or :class:`BackendUnavailable` with the reason."""
    try:
        from cuda.bindings import driver, nvrtc
    except ImportError as exc:
        raise BackendUnavailable(
            f"cuda-bindings cannot be imported ({exc}); {_INSTALL_HINT}"
        ) from exc
    try:
        (err,) = driver.cuInit(0)
    except RuntimeError as exc:  # cuda.pathfinder: no driver library on this machine
        raise BackendUnavailable(f"the NVIDIA driver cannot be loaded ({exc})") from exc
    if err != CUDA_SUCCESS:
        e = cuda_error("cuInit", err)
        raise BackendUnavailable(f"cuInit failed: {e}")
    err, count = driver.cuDeviceGetCount()
    if err != CUDA_SUCCESS:
        raise BackendUnavailable(f"cuDeviceGetCount failed: {cuda_error('cuDeviceGetCount', err)}")
    if count < 1:
        raise BackendUnavailable("the NVIDIA driver reports no CUDA device")
    try:
        err, *_ = nvrtc.nvrtcVersion()
    except RuntimeError as exc:
        raise BackendUnavailable(
            f"the NVRTC library cannot be loaded ({exc}); kernels need it: {_INSTALL_HINT}"
        ) from exc
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise BackendUnavailable(f"nvrtcVersion failed ({err}); {_INSTALL_HINT}")
    return CudaBackend(driver, count)
