"""The cuda back-end, as far as it can be checked without a GPU.

* loading: without cuda-bindings, without a driver, with a failing ``cuInit``
  or no device, gpuarrays still imports and ``cuda`` is absent with a reason;
* error mapping (``CUresult`` -> ``BackendError`` / ``BackendOutOfMemory``);
* kernel sources for every dtype pair, and NVRTC compiling each to CUBIN for
  real architectures (NVRTC needs no GPU);
* the kernels' *semantics*: the very CUDA C sources are compiled for the host
  with a small prelude and run on NumPy arrays, so conversions (float16 bit
  manipulation, float-to-int, complex, bool), strided copies and fills
  are compared with NumPy here;
* layout, memset and parameter helpers.

On a machine with a GPU the shared suite runs on ``cuda:N`` through the
``device`` fixture, and ``TestOnDevice`` below adds raw back-end checks.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._common.errors import BackendError
from gpuarrays._memory.devices import unavailable_backends
from gpuarrays.backends import _kernels, cuda
from gpuarrays.backends.base import BackendOutOfMemory, BackendUnavailable, RawView

ALL_KEYS = cuda.SCALAR_KEYS
DTYPES = {k: np.dtype("?" if k == "b1" else k) for k in ALL_KEYS}
HAS_CUDA = "cuda" in ga.backends()


def _bindings_available() -> bool:
    try:
        import cuda.bindings.driver  # noqa: F401
    except ImportError:
        return False
    return True


# Loading --------------------------------------------------------------------------------
def test_gpuarrays_imports_and_lists_backends_without_cuda_unless_present():
    names = ga.backends()
    assert names[-1] == "cpu"
    unavailable = unavailable_backends()
    if HAS_CUDA:
        assert names[0] == "cuda"
        assert ga.get_device("cuda:0").info.accelerator
    else:
        assert "cuda" not in names
        assert unavailable["cuda"]  # a reason, e.g. no driver / not installed


def test_load_without_a_driver_is_unavailable_with_a_reason():
    if HAS_CUDA:
        backend = cuda.load()
        assert backend.device_count() >= 1
        return
    with pytest.raises(BackendUnavailable) as info:
        cuda.load()
    assert str(info.value)


def test_load_without_cuda_bindings_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", None)
    with pytest.raises(BackendUnavailable, match=re.escape('pip install "gpuarrays[cuda]"')):
        cuda.load()


def _fake_bindings(monkeypatch, **driver_functions):
    """Install a fake ``cuda.bindings`` whose driver functions are the given callables."""
    try:
        from cuda.bindings import driver as real
        result = real.CUresult
    except ImportError:
        result = int
    package = types.ModuleType("cuda.bindings")
    driver = types.SimpleNamespace(CUresult=result, **driver_functions)
    if "cuGetErrorString" not in driver_functions:
        def no_driver(code):
            raise RuntimeError("no driver library")
        driver.cuGetErrorString = no_driver
    nvrtc = types.SimpleNamespace()
    package.driver, package.nvrtc = driver, nvrtc
    monkeypatch.setitem(sys.modules, "cuda.bindings", package)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", driver)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", nvrtc)
    return driver


def test_load_when_cuinit_fails_reports_the_cuda_error(monkeypatch):
    _fake_bindings(monkeypatch, cuInit=lambda flags: (100,))  # CUDA_ERROR_NO_DEVICE
    with pytest.raises(BackendUnavailable, match="cuInit") as info:
        cuda.load()
    if _bindings_available():
        assert "CUDA_ERROR_NO_DEVICE" in str(info.value)


def test_load_with_no_device_is_unavailable(monkeypatch):
    _fake_bindings(monkeypatch, cuInit=lambda flags: (0,), cuDeviceGetCount=lambda: (0, 0))
    with pytest.raises(BackendUnavailable, match="no CUDA device"):
        cuda.load()


def test_load_when_the_driver_library_is_missing(monkeypatch):
    def missing(flags):
        raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found ...')

    _fake_bindings(monkeypatch, cuInit=missing)
    with pytest.raises(BackendUnavailable, match="NVIDIA driver cannot be loaded"):
        cuda.load()


# Errors ------------------------------------------------------------------------------------
def test_out_of_memory_maps_to_backend_out_of_memory():
    err = cuda.cuda_error("cuMemAlloc", 2)
    assert isinstance(err, BackendOutOfMemory)
    assert "cuMemAlloc" in str(err)


@pytest.mark.parametrize("without_bindings", [False, True])
def test_other_errors_map_to_backend_error_with_call_code_and_text(monkeypatch, without_bindings):
    if without_bindings:
        monkeypatch.setattr(cuda, "_driver_module", lambda: None)
    elif not _bindings_available():
        pytest.skip("cuda-bindings is not installed")
    err = cuda.cuda_error("cuMemcpyAsync", 1)
    assert isinstance(err, BackendError) and isinstance(err, RuntimeError)
    assert err.call == "cuMemcpyAsync"
    if without_bindings:
        assert err.code == "CUresult 1"
    else:
        assert err.code == "CUDA_ERROR_INVALID_VALUE"
        assert "invalid" in err.text.lower()
    assert str(err).startswith("cuMemcpyAsync failed (error ")


def test_error_of_an_unknown_code_still_makes_a_message():
    err = cuda.cuda_error("cuSomething", 123456)
    assert isinstance(err, BackendError)
    assert "123456" in str(err)


def test_check_unpacks_results_and_raises():
    assert cuda._check("cuMemGetInfo", (0, 10, 20)) == (10, 20)
    with pytest.raises(BackendError, match="cuStreamSynchronize"):
        cuda._check("cuStreamSynchronize", (700,))
    with pytest.raises(BackendOutOfMemory):
        cuda._check("cuMemAllocManaged", (2, 0))


# Helpers ---------------------------------------------------------------------------------------
def test_collapse_merges_contiguous_axes_and_drops_unit_axes():
    assert _kernels.collapse((2, 3, 4), (96, 32, 8)) == ([24], [[8]])
    assert _kernels.collapse((2, 1, 3), (24, 8, 8), (3, 100, 1)) == ([6], [[8], [1]])
    assert _kernels.collapse((2, 1, 3), (32, 8, 8), (3, 100, 1)) == ([2, 3], [[32, 8], [3, 1]])
    assert _kernels.collapse((1, 1), (0, 0)) == ([], [[]])


def test_word_is_the_largest_common_power_of_two():
    assert _kernels.word(8, 0x1000, 16) == 8
    assert _kernels.word(8, 0x1004) == 4
    assert _kernels.word(4, 2) == 2
    assert _kernels.word(3) == 1


def test_layout_parameter_holds_up_to_numpys_dimensions():
    m = cuda._layout(list(range(1, 65)), [8] * 64, [4] * 64)
    assert ctypes.sizeof(m) == 3 * 64 * 8 and m.shape[63] == 64 and m.b[0] == 4
    with pytest.raises(ValueError, match="at most 64"):
        cuda._layout([1] * 65, [8] * 65)


@pytest.mark.parametrize(
    ("start", "pattern", "nbytes", "plan"),
    [
        (0x1000, b"\0" * 8, 64, (4, 0, 16)),  # zeros of float64: 32-bit stores
        (0x1001, b"\0" * 8, 64, (1, 0, 64)),  # misaligned: bytes
        (0x1000, b"\x01", 6, (2, 0x0101, 3)),
        (0x1000, b"\x01\x02", 8, (4, 0x02010201, 2)),
        (0x1002, b"\x01\x02", 8, (2, 0x0201, 4)),
        (0x1000, np.float32(1.5).tobytes() * 2, 16, (4, 0x3FC00000, 4)),
        (0x1000, np.float64(1.5).tobytes(), 16, None),  # period 8: a kernel
        (0x1001, b"\x01\x02", 4, None),
        (0x1000, b"\x01\x02\x03", 9, None),
    ],
)
def test_memset_plan(start, pattern, nbytes, plan):
    assert cuda.memset_plan(start, pattern, nbytes) == plan


# Kernel sources -------------------------------------------------------------------------------
@pytest.mark.parametrize("src", ALL_KEYS)
@pytest.mark.parametrize("aligned", [(True, True), (False, True), (True, False), (False, False)])
def test_conversion_source_has_a_kernel_for_every_destination(src, aligned):
    text = cuda.convert_source(src, *aligned)
    names = re.findall(r'extern "C" __global__ void (\w+)\(', text)
    assert names == [n for k in ALL_KEYS if k != src for n in (f"convert_{k}", f"convert_{k}_c")]
    assert tuple(names) == cuda.convert_kernel_names(src)
    assert "#include" not in text  # NVRTC without headers
    byte_wise = "x.b[k] = p[k]" in text
    narrow_only = _kernels.SCALARS[src].size == 1
    assert byte_wise == (not aligned[0] and not narrow_only)


@pytest.mark.parametrize("itemsize", [1, 2, 3, 4, 8, 12, 16, 24, 2048, 4096])
def test_bytes_source_per_item_size(itemsize):
    word = _kernels.word(itemsize)
    text = cuda.bytes_source(itemsize, word)
    names = re.findall(r'extern "C" __global__ void (\w+)\(', text)
    assert sorted(names) == sorted(cuda.bytes_kernel_names(itemsize))
    assert ("fill_bytes" in names) == (itemsize <= 2048)


def test_bytes_source_rejects_a_word_that_does_not_divide():
    with pytest.raises(ValueError):
        cuda.bytes_source(6, 4)


# NVRTC to CUBIN ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def nvrtc():
    try:
        from cuda.bindings import nvrtc as module

        err, *_ = module.nvrtcVersion()
    except (ImportError, RuntimeError) as e:
        pytest.skip(f"NVRTC is not available here: {e}")
    return module


@pytest.mark.parametrize("src", ALL_KEYS)
def test_conversion_kernels_compile_to_cubin_for_sm90(nvrtc, src):
    image, kind = cuda.compile_image(cuda.convert_source(src, True, True), 90)
    assert kind == "cubin" and image[:4] == b"\x7fELF"


@pytest.mark.parametrize(("src", "aligned"), [("c16", (False, False)), ("f2", (True, False)),
                                               ("u8", (False, True))])
def test_unaligned_conversion_kernels_compile_for_sm80(nvrtc, src, aligned):
    image, kind = cuda.compile_image(cuda.convert_source(src, *aligned), 80)
    assert kind == "cubin" and image[:4] == b"\x7fELF"


@pytest.mark.parametrize(("itemsize", "word"), [(1, 1), (2, 2), (4, 4), (8, 8), (16, 8), (12, 4),
                                                (3, 1), (8, 1), (4096, 8)])
@pytest.mark.parametrize("arch", [80, 90])
def test_bytes_kernels_compile_to_cubin(nvrtc, itemsize, word, arch):
    image, kind = cuda.compile_image(cuda.bytes_source(itemsize, word), arch)
    assert kind == "cubin" and image[:4] == b"\x7fELF"


def test_a_device_newer_than_nvrtc_gets_ptx(nvrtc):
    image, kind = cuda.compile_image(cuda.bytes_source(4, 4), 990)
    assert kind == "ptx"
    assert image.endswith(b"\0") and b".entry copy_bytes" in image


def test_compile_errors_carry_the_log(nvrtc):
    with pytest.raises(BackendError, match="nvrtcCompileProgram") as info:
        cuda.compile_image('extern "C" __global__ void k() { undeclared(); }', 80)
    assert "undeclared" in str(info.value)


# Kernel semantics on the host ---------------------------------------------------------------------
_PRELUDE = r"""
#define __device__
#define __forceinline__ inline
#define __global__
struct GaDim { unsigned x; };
static GaDim blockIdx = {0};  /* the shim runs one block of one thread per element */
static const GaDim blockDim = {1}, threadIdx = {0}, gridDim = {1};
"""
_KERNEL = re.compile(r'extern "C" __global__ void (\w+)\(([^)]*)\)')


class HostKernels:
    """The CUDA C of the back-end built as a host library, called like ``cuLaunchKernel``."""

    def __init__(self, tmp_path_factory, compiler: str) -> None:
        self.dir = tmp_path_factory.mktemp("cuda_host_kernels")
        self.compiler = compiler
        self.libs: dict[str, ctypes.CDLL] = {}

    def library(self, source: str) -> ctypes.CDLL:
        lib = self.libs.get(source)
        if lib is None:
            name = hashlib.sha1(source.encode()).hexdigest()[:16]
            cpp, so = self.dir / f"{name}.cpp", self.dir / f"{name}.so"
            # launch_<kernel>(void **params): unpack a cuLaunchKernel parameter array
            shims = []
            for kname, params in _KERNEL.findall(source):
                args = []
                for i, p in enumerate(params.split(",")):
                    ctype = p.strip().rsplit(" ", 1)[0].strip()
                    if p.strip().split()[-1].startswith("*"):
                        ctype += " *"
                    args.append(f"*({ctype} *)params[{i}]")
                shims.append(f'extern "C" void launch_{kname}(void **params, long long count) '
                             f'{{ for (long long b = 0; b < count; ++b) '
                             f'{{ blockIdx.x = (unsigned)b; {kname}({", ".join(args)}); }} }}\n')
            cpp.write_text(_PRELUDE + source + "".join(shims))
            subprocess.run(
                [self.compiler, "-O1", "-fno-strict-aliasing", "-ffp-contract=off", "-shared",
                 "-fPIC", "-o", str(so), str(cpp)],
                check=True, capture_output=True,
            )
            lib = self.libs[source] = ctypes.CDLL(str(so))
        return lib

    def launch(self, source: str, name: str, args: list) -> None:
        """Run the kernel once per element, as a grid of one-thread blocks (the last
        argument of every kernel is the element count)."""
        fn = getattr(self.library(source), f"launch_{name}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_longlong]
        params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        fn(ctypes.addressof(params), args[-1].value)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no host C++ compiler available to run the kernels on the CPU")
    return HostKernels(tmp_path_factory, compiler)


def _convert(host, src: np.ndarray, dst: np.ndarray, src_aligned=True, dst_aligned=True,
             dense=False):
    """Run ``convert_<dst>`` (``dense``: ``convert_<dst>_c``) over two 1-d views, as
    ``copy_strided`` launches it."""
    skey, dkey = cuda.scalar_key(src.dtype), cuda.scalar_key(dst.dtype)
    text = cuda.convert_source(skey, src_aligned, dst_aligned)
    layout = cuda._layout([src.size], [dst.strides[0]], [src.strides[0]])
    args = [ctypes.c_uint64(dst.ctypes.data), ctypes.c_uint64(src.ctypes.data), layout,
            ctypes.c_int32(1), ctypes.c_int64(src.size)]
    host.launch(text, f"convert_{dkey}{'_c' if dense else ''}", args)


_EDGES = np.array(
    [0, -0.0, 1, -1, 0.5, 1.5, 2.5, -2.5, 3.5, 127, 128, 255, 256, -128, -129, 32767, 32768,
     65504, 65519, 65520, 65536, 1e5, 2**31 - 1, -(2**31), 2**32 - 1, 2**53, 2**62, -(2**63),
     1e30, -1e30, np.inf, -np.inf, np.nan, -np.nan, 6e-8, 3e-8, 2.98e-8, 2.9802322387695312e-08,
     1e-5, 5.960464477539063e-08, 6.1e-5, 6.097555160522461e-05, 1.0009765625, 1.00048828125,
     1.00146484375, 0.1, 1 / 3, 1e-40, 5e-324],
    np.float64,
)


def _source_values(key: str) -> np.ndarray:
    dt = DTYPES[key]
    rng = np.random.default_rng(7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if dt.kind == "c":
            return (_EDGES + 1j * _EDGES[::-1]).astype(dt)
        if dt.kind in "iu":
            info = np.iinfo(dt)
            extra = [info.min, info.max, info.min + 1, info.max - 1]
            rnd = rng.integers(info.min, info.max, 64, dtype=dt, endpoint=True)
            return np.concatenate([_EDGES[np.isfinite(_EDGES)].astype(dt), np.array(extra, dt), rnd])
        if dt.kind == "b":
            return np.array([0, 1, 1, 0, 1], dt)
        return np.concatenate([_EDGES.astype(dt), rng.standard_normal(64).astype(dt) * 1000])


def _comparable(src: np.ndarray, dst_dtype: np.dtype) -> np.ndarray:
    """Elements whose conversion NumPy defines (float to int out of range is platform-defined)."""
    if dst_dtype.kind not in "iu" or src.dtype.kind not in "fc":
        return np.ones(src.shape, bool)
    v = (src.real if src.dtype.kind == "c" else src).astype(np.float64)
    info = np.iinfo(dst_dtype)
    ok = np.isfinite(v) & (v > float(info.min) - 1) & (v < float(info.max) + 1)
    if dst_dtype.kind == "u":  # small negatives wrap, as on every NumPy platform
        ok |= np.isfinite(v) & (v > -(2.0**31)) & (v < 0)
    return ok


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise identical, bit for bit, NaNs equal to NaNs."""
    if a.dtype.kind in "fc":
        comp = np.dtype(f"f{a.dtype.itemsize // 2}") if a.dtype.kind == "c" else a.dtype
        x, y = a.view(comp), b.view(comp)
        bits = np.dtype(f"u{comp.itemsize}")
        eq = (x.view(bits) == y.view(bits)) | (np.isnan(x) & np.isnan(y))
        return eq.reshape(-1, 2).all(1) if a.dtype.kind == "c" else eq
    return a == b


@pytest.mark.parametrize("dst", ALL_KEYS)
@pytest.mark.parametrize("src", ALL_KEYS)
def test_conversion_kernels_match_numpy_unsafe_casting(host, src, dst):
    if src == dst:
        return
    values = _source_values(src)
    out = np.zeros(values.shape, DTYPES[dst])
    _convert(host, values, out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = values.astype(DTYPES[dst], casting="unsafe")
    ok = _comparable(values, DTYPES[dst])
    bad = ~_same(expected, out) & ok
    assert not bad.any(), (values[bad][:5], expected[bad][:5], out[bad][:5])


@pytest.mark.parametrize(("src", "dst"), [("f8", "c16"), ("c8", "f2"), ("i8", "f4"),
                                          ("f2", "i2"), ("u4", "c8"), ("c16", "u8")])
def test_unaligned_conversions_match_aligned_ones(host, src, dst):
    values = _source_values(src)
    raw_src = np.zeros(values.nbytes + 1, np.uint8)
    src_view = raw_src[1:].view(values.dtype)  # address not a multiple of the element size
    src_view[...] = values
    dt = DTYPES[dst]
    raw_dst = np.zeros(values.size * dt.itemsize + 1, np.uint8)
    dst_view = raw_dst[1:].view(dt)
    _convert(host, src_view, dst_view, src_aligned=False, dst_aligned=False)
    expected = np.zeros(values.shape, dt)
    _convert(host, values, expected)
    assert _same(expected, dst_view).all()


def test_every_float16_converts_exactly_like_numpy(host):
    halves = np.arange(65536, dtype=np.uint16).view(np.float16)
    for dst in ("f4", "f8", "c8"):
        out = np.zeros(halves.shape, DTYPES[dst])
        _convert(host, halves, out)
        assert _same(halves.astype(DTYPES[dst]), out).all()
    # and back: float32/float64 -> float16 rounds to nearest even, keeps NaN payloads
    for key in ("f4", "f8"):
        wide = halves.astype(DTYPES[key])
        back = np.zeros(halves.shape, np.float16)
        _convert(host, wide, back)
        assert _same(halves, back).all()


@pytest.mark.parametrize("key", ["f4", "f8"])
def test_rounding_to_float16_matches_numpy_on_random_bits(host, key):
    rng = np.random.default_rng(11)
    bits = np.dtype(f"u{DTYPES[key].itemsize}")
    raw = rng.integers(0, np.iinfo(bits).max, 200_000, dtype=bits, endpoint=True)
    # bias towards the float16 range (exponents near zero) so rounding paths are exercised
    values = raw.view(DTYPES[key])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NaN and inf mantissas
        scaled = np.ldexp(np.frexp(values)[0], rng.integers(-28, 18, values.size))
    scaled = scaled.astype(DTYPES[key])
    for v in (values, scaled):
        out = np.zeros(v.shape, np.float16)
        _convert(host, v, out)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = v.astype(np.float16)
        assert _same(expected, out).all()


@pytest.mark.parametrize("key", ["f4", "f8"])
def test_nan_payloads_reach_float16_bit_for_bit(host, key):
    """Every float16 NaN payload, signalling and quiet, both signs, with low bits below the
    float16's: NumPy keeps the payload's top bits (a signalling NaN stays one; one whose
    kept bits are all zero becomes 0x7c01).  ``_same`` takes any NaN for any NaN, so this
    compares bits.  A float32 must not go through (double): the conversion quiets a
    signalling NaN on the GPU as on x86, which this host run sees too."""
    dt = DTYPES[key]
    bits = np.dtype(f"u{dt.itemsize}")
    shift, top = (13, 0x7F800000) if key == "f4" else (42, 0x7FF0000000000000)
    payload = np.arange(1024, dtype=bits) << bits.type(shift)
    low = np.array([0, 1, (1 << shift) - 1], bits)
    sign = np.array([0, 1 << (8 * dt.itemsize - 1)], bits)
    raw = (sign[:, None, None] | top | payload[None, :, None] | low[None, None, :]).ravel()
    values = raw[(raw & ~sign[1]) != top].view(dt)  # NaNs only (not the infinities)
    assert np.isnan(values).all()
    out = np.zeros(values.shape, np.float16)
    _convert(host, values, out)
    expected = values.astype(np.float16)
    bad = out.view(np.uint16) != expected.view(np.uint16)
    assert not bad.any(), (raw[bad][:5], expected.view(np.uint16)[bad][:5], out.view(np.uint16)[bad][:5])


def _raw(a: np.ndarray) -> RawView:
    return RawView(a.ctypes.data, a.shape, a.strides, a.dtype)


@pytest.mark.parametrize("dtype", ["u1", "i2", "f4", "c16", [("x", "f4"), ("y", "u1")]])
def test_strided_byte_copy_matches_numpy(host, dtype):
    dt = np.dtype(dtype)
    src_base = np.arange(6 * 7 * 5 * dt.itemsize, dtype=np.uint8).view(dt).reshape(6, 7, 5)
    src = src_base[::-2, 1:6, ::-1].transpose(2, 0, 1)
    dst_base = np.zeros((5, 3, 5, 2), dt)
    dst = dst_base[..., 1]
    shape, (dstrides, sstrides) = _kernels.collapse(dst.shape, dst.strides, src.strides)
    word = _kernels.word(dt.itemsize, dst.ctypes.data, src.ctypes.data, *dstrides, *sstrides)
    n = int(np.prod(shape))
    args = [ctypes.c_uint64(dst.ctypes.data), ctypes.c_uint64(src.ctypes.data),
            cuda._layout(shape, dstrides, sstrides), ctypes.c_int32(len(shape)), ctypes.c_int64(n)]
    host.launch(cuda.bytes_source(dt.itemsize, word), "copy_bytes", args)
    assert dst.tobytes() == np.ascontiguousarray(src).tobytes()
    assert dst_base[..., 0].tobytes() == bytes(dst.nbytes)


@pytest.mark.parametrize("dtype", ["u1", "f4", "c16"])
def test_rows_byte_copy_matches_numpy(host, dtype):
    """copy_rows (last strides the item size; one-thread blocks, so each row is its extent
    of blocks): a slice of a 3-d array into a reversed slice of another."""
    dt = np.dtype(dtype)
    src_base = np.arange(4 * 5 * 70 * dt.itemsize, dtype=np.uint8).view(dt).reshape(4, 5, 70)
    src = src_base[:, 1:, 3:]
    dst_base = np.zeros((4, 6, 68), dt)
    dst = dst_base[::-1, 2:, 1:]
    plan = _kernels.plan_copy(_raw(dst), _raw(src), "host")
    assert plan.how == "rows"
    args = [ctypes.c_uint64(dst.ctypes.data), ctypes.c_uint64(src.ctypes.data),
            cuda._layout(plan.shape, plan.dst_strides, plan.src_strides),
            ctypes.c_int32(len(plan.shape)), ctypes.c_int64(_kernels.rows_items(plan.n, plan.shape[-1], 1))]
    host.launch(cuda.bytes_source(dt.itemsize, plan.word), "copy_rows", args)
    assert dst.tobytes() == np.ascontiguousarray(src).tobytes()
    assert dst_base[:, :2].tobytes() == bytes(dst_base[:, :2].nbytes)


@pytest.mark.parametrize(("dtype", "value"), [("f8", 2.5), ("c8", 1 - 2j), ("u2", 7),
                                              ([("a", "i8"), ("b", "u1")], (3, 4)),
                                              ("V3000", None)])
def test_fill_kernels_write_the_value_through_strides(host, dtype, value):
    dt = np.dtype(dtype)
    if value is None:
        pattern = np.frombuffer(bytes(range(256)) * 12, np.uint8)[: dt.itemsize].copy()
        v = pattern.view(dt).reshape(())
    else:
        v = np.asarray(value, dt) if dt.fields is None else np.array(value, dt)
    base = np.zeros((4, 6), dt)
    dst = base[::-1, ::2]
    shape, (strides,) = _kernels.collapse(dst.shape, dst.strides)
    word = _kernels.word(dt.itemsize, dst.ctypes.data, *strides)
    n = int(np.prod(shape))
    source = cuda.bytes_source(dt.itemsize, word)
    pattern = v.reshape(1).view(np.uint8).tobytes()
    if dt.itemsize <= 2048:
        value_param = (ctypes.c_uint64 * -(-dt.itemsize // 8))()
        ctypes.memmove(value_param, pattern, dt.itemsize)
        args = [ctypes.c_uint64(dst.ctypes.data), cuda._layout(shape, strides), value_param,
                ctypes.c_int32(len(shape)), ctypes.c_int64(n)]
        host.launch(source, "fill_bytes", args)
    else:
        buf = np.frombuffer(pattern, np.uint8).copy()
        args = [ctypes.c_uint64(dst.ctypes.data), cuda._layout(shape, strides),
                ctypes.c_uint64(buf.ctypes.data), ctypes.c_int32(len(shape)), ctypes.c_int64(n)]
        host.launch(source, "fill_bytes_ptr", args)
    expected = np.zeros((4, 6), dt)
    expected[::-1, ::2] = v
    assert base.tobytes() == expected.tobytes()


# On a GPU ---------------------------------------------------------------------------------------------
@pytest.fixture
def gpu():
    if not HAS_CUDA:
        pytest.skip("no CUDA device available (the cuda back-end did not load)")
    return ga.get_device("cuda:0")


class TestOnDevice:
    """Raw back-end checks that need a CUDA device (the shared suite covers the rest)."""

    def test_device_description(self, gpu):
        assert gpu.info.accelerator and gpu.total_memory > 0
        assert "device" in gpu.kinds
        free, total = gpu.impl.mem_info(gpu.index)
        assert 0 < free <= total

    @pytest.mark.parametrize("kind", ["device", "host", "unified"])
    def test_pointer_info_of_each_kind(self, gpu, kind):
        if kind not in gpu.kinds:
            pytest.skip(f"{gpu} does not support {kind!r} memory")
        impl = gpu.impl
        ptr = impl.allocate(gpu.index, kind, 4096)
        try:
            info = impl.pointer_info(ptr + 100)
            assert info.kind == kind and info.device == gpu.index
            assert info.base == ptr and info.size >= 4096
        finally:
            impl.free(gpu.index, kind, ptr, 4096)

    def test_pageable_host_memory_is_plain_host(self, gpu):
        host = np.zeros(1000)
        info = gpu.impl.pointer_info(host.ctypes.data)
        assert info.kind == "host" and info.size == 0

    def test_register_and_unregister_pageable_memory(self, gpu):
        host = np.zeros(1 << 16, np.uint8)
        impl = gpu.impl
        impl.register_host(gpu.index, host.ctypes.data, host.nbytes)
        try:
            info = impl.pointer_info(host.ctypes.data + 10)
            assert info.kind == "host" and info.size > 0
        finally:
            impl.unregister_host(gpu.index, host.ctypes.data)

    def test_out_of_memory_is_backend_out_of_memory(self, gpu):
        with pytest.raises(BackendOutOfMemory):
            gpu.impl.allocate(gpu.index, "device", gpu.total_memory * 4)

    def test_every_conversion_on_the_device_matches_numpy(self, gpu):
        for src in ALL_KEYS:
            values = _source_values(src)
            a = ga.asarray(values, device=gpu)
            for dst in ALL_KEYS:
                # gpuarrays warns where NumPy does (complex to a real type: ComplexWarning),
                # and only there; the oracle's own warning is recorded, not raised.
                with warnings.catch_warnings(record=True) as numpy_warned:
                    warnings.simplefilter("always")
                    expected = values.astype(DTYPES[dst])
                with warnings.catch_warnings(record=True) as ours_warned:
                    warnings.simplefilter("always")
                    got = a.astype(DTYPES[dst]).get()
                assert ([w.category for w in ours_warned if w.category is not RuntimeWarning]
                        == [w.category for w in numpy_warned
                            if w.category is not RuntimeWarning]), (src, dst)
                ok = _comparable(values, DTYPES[dst])
                assert (_same(expected, got) | ~ok).all(), (src, dst)


# Allocator plug-ins (logic; the real libraries run in benchmarks/gpu_check.sh) ------------------
def test_interop_modules_import_without_their_libraries():
    from gpuarrays.interop import cupy as ga_cupy
    from gpuarrays.interop import numba as ga_numba

    assert callable(ga_cupy.malloc) and callable(ga_numba.set_memory_manager)


def test_cupy_allocator_without_cupy_names_it(monkeypatch):
    from gpuarrays.interop import cupy as ga_cupy

    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(ImportError, match="CuPy"):
        ga_cupy.allocator()


def test_numba_plugin_without_numba_names_it(monkeypatch):
    from gpuarrays.interop import numba as ga_numba

    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.setitem(sys.modules, "numba.cuda", None)
    with pytest.raises(ImportError, match="Numba"):
        ga_numba.set_memory_manager()
    with pytest.raises(ImportError, match="Numba"):
        ga_numba._numba_memory_manager  # noqa: B018


def _fake_cupy(monkeypatch):
    class UnownedMemory:
        def __init__(self, ptr, size, owner, device_id=-1):
            self.ptr, self.size, self.owner, self.device_id = ptr, size, owner, device_id

    class MemoryPointer:
        def __init__(self, mem, offset):
            self.mem, self.ptr = mem, mem.ptr + offset

    runtime = types.SimpleNamespace(getDevice=lambda: 0)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer, runtime=runtime))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


def test_cupy_allocator_serves_from_pools_and_caches(monkeypatch):
    """The allocator logic with a stand-in CuPy, on cpu:0 (no GPU here)."""
    from gpuarrays.interop import cupy as ga_cupy

    _fake_cupy(monkeypatch)
    dev = ga.get_device("cpu:0")
    monkeypatch.setattr(ga_cupy, "_device_for", lambda cupy, device: dev)
    malloc = ga_cupy.allocator()
    base = ga.memory_stats(dev)["used_bytes"]
    p = malloc(1000)
    assert isinstance(p.mem.owner, ga.GPUArray) and p.mem.owner.storage.ptr == p.ptr
    assert p.mem.size == 1000 and p.mem.device_id == 0
    assert ga.memory_stats(dev)["used_bytes"] > base
    del p
    import gc

    gc.collect()
    dev.memory.apply_pending()
    assert ga.memory_stats(dev)["used_bytes"] == base
    cache = ga.AllocCache()
    with ga.cached(cache):
        for i in range(3):
            with ga.record_allocations() as rec:
                q = malloc(4096)
                del q
            if i:
                assert rec.count == 0 and rec.cache_hits == 1
    cache.free()


def test_cupy_allocator_refuses_an_unknown_kind():
    from gpuarrays.interop import cupy as ga_cupy

    with pytest.raises(ValueError, match="kind"):
        ga_cupy.allocator("pinned")


def test_no_cuda_array_interface_off_cuda():
    a = ga.zeros(3, device="cpu:0")
    assert not hasattr(a, "__cuda_array_interface__")


@pytest.mark.parametrize(("src", "dst"), [("f4", "f8"), ("f8", "i4"), ("c8", "f2"), ("i2", "c16"),
                                          ("b1", "f4"), ("u8", "b1"), ("f2", "u1"), ("c16", "c8")])
def test_dense_conversion_kernels_match_the_general_ones(host, src, dst):
    values = _source_values(src)
    general = np.zeros(values.size, DTYPES[dst])
    dense = np.ones(values.size, DTYPES[dst])
    _convert(host, values, general)
    _convert(host, values, dense, dense=True)
    assert _same(dense, general).all()
    ok = _comparable(values, DTYPES[dst])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = values.astype(DTYPES[dst])
    assert _same(dense[ok], want[ok]).all()
