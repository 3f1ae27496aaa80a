"""The opencl back-end object, driven directly (no core above it).

Every kernel result is compared byte for byte with NumPy doing the same on host
copies of the same memory, so bytes outside the views must stay untouched too.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from gpuarrays._common.errors import BackendError
from gpuarrays.backends.base import Backend, BackendOutOfMemory, BackendUnavailable, RawView

try:
    from gpuarrays.backends import opencl

    BACKEND = opencl.load()
except BackendUnavailable as exc:  # no pyopencl or no OpenCL device
    pytest.skip(f"opencl back-end unavailable: {exc}", allow_module_level=True)

DEV = 0
NUMERIC = ["?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]
STRUCT = np.dtype([("a", "u1"), ("b", "<f4"), ("c", "<i2")], align=False)  # itemsize 7


@pytest.fixture
def be():
    return BACKEND


class Buffer:
    """A device allocation and its host mirror (the oracle works on the mirror)."""

    def __init__(self, be, nbytes: int, kind: str = "device", seed: int = 0) -> None:
        self.be = be
        self.kind = kind
        self.host = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
        self.ptr = be.allocate(DEV, kind, nbytes)
        be.upload(DEV, self.ptr, self.host)

    def view(self, dtype, shape, strides, offset) -> tuple[RawView, np.ndarray]:
        """A RawView at byte ``offset`` and the NumPy view of the mirror with the same layout."""
        dtype = np.dtype(dtype)
        arr = np.ndarray(shape, dtype, buffer=self.host, offset=offset, strides=strides)
        return RawView(self.ptr + offset, tuple(shape), tuple(strides), dtype), arr

    def push(self) -> None:
        self.be.upload(DEV, self.ptr, self.host)

    def pull(self) -> np.ndarray:
        out = np.empty_like(self.host)
        self.be.download(DEV, out, self.ptr)
        return out

    def free(self) -> None:
        self.be.free(DEV, self.kind, self.ptr, self.host.nbytes)


def oracle_copy(dst: np.ndarray, src: np.ndarray) -> None:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        np.copyto(dst, src, casting="unsafe")


def sample_values(dtype: np.dtype, n: int, seed: int = 1) -> np.ndarray:
    """Values whose conversion to every type is defined (and equal) on NumPy and OpenCL."""
    rng = np.random.default_rng(seed)
    if dtype.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        vals = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        vals[: min(n, 4)] = np.array([0, 1, 5, 100], dtype)[: min(n, 4)]
        return vals
    # Floats stay within int16 range so float -> int is defined (x86 wraps narrower ones).
    real = np.linspace(-120.3, 250.7, n) + rng.uniform(-1, 1, n) / 3
    real[: min(n, 2)] = [0.0, -0.0][: min(n, 2)]
    if dtype.kind == "c":
        return (real + 1j * rng.uniform(-3, 3, n)).astype(dtype)
    return real.astype(dtype)


def layouts(itemsize: int):
    """(id, shape, src element strides, src offset, dst element strides, dst offset)."""
    s = itemsize
    return {
        "contiguous": ((37,), (s,), 0, (s,), 0),
        "transpose": ((5, 7), (s, 5 * s), 0, (7 * s, s), 0),
        "negative": ((4, 6), (-6 * s, -s), 23 * s, (s, -4 * s), 20 * s),
        "zero_stride": ((3, 5), (0, s), 0, (5 * s, s), 0),
        "step3d": ((2, 3, 4), (40 * s, 9 * s, 2 * s), s, (-12 * s, 4 * s, s), 12 * s),
        "scalar": ((), (), 3 * s, (), 5 * s),
        "unaligned": ((3, 4), (4 * s, s), 1, (s, 3 * s), 3),
        "empty": ((0, 3), (3 * s, s), 0, (3 * s, s), 0),
    }


def run_copy(be, src_dtype, dst_dtype, layout: str) -> None:
    src_dtype, dst_dtype = np.dtype(src_dtype), np.dtype(dst_dtype)
    big = max(src_dtype.itemsize, dst_dtype.itemsize)
    shape, sst, soff, dst_, doff = layouts(big)[layout]
    nbytes = 100 * big + 16
    src_buf, dst_buf = Buffer(be, nbytes, seed=1), Buffer(be, nbytes, seed=2)
    try:
        sview, sarr = src_buf.view(src_dtype, shape, sst, soff)
        dview, darr = dst_buf.view(dst_dtype, shape, dst_, doff)
        if src_dtype.fields is None:
            sarr[...] = sample_values(src_dtype, sarr.size).reshape(sarr.shape)
            src_buf.push()
        be.copy_strided(DEV, dview, sview)
        oracle_copy(darr, sarr)
        got = dst_buf.pull()
        bad = np.flatnonzero(got != dst_buf.host)
        assert bad.size == 0, (
            f"{src_dtype}->{dst_dtype} {layout}: bytes {bad[:10]} differ; "
            f"got {np.ndarray(shape, dst_dtype, buffer=got, offset=doff, strides=dst_)!r}, "
            f"expected {darr!r}"
        )
    finally:
        src_buf.free()
        dst_buf.free()


# ------------------------------------------------------------------------------
def test_load_and_devices(be):
    assert isinstance(be, Backend)
    assert be.name == "opencl"
    assert be.needs_host_registration is False
    assert be.device_count() >= 1
    for i in range(be.device_count()):
        info = be.device_info(i)
        assert info.name and info.total_memory > 0
        assert set(info.kinds) <= {"device", "host", "unified"}
    assert "device" in be.device_info(DEV).kinds
    free, total = be.mem_info(DEV)
    assert 0 <= free <= total == be.device_info(DEV).total_memory


@pytest.mark.parametrize("src", NUMERIC)
@pytest.mark.parametrize("dst", NUMERIC)
def test_copy_strided_all_dtype_pairs(be, src, dst):
    run_copy(be, src, dst, "negative")


@pytest.mark.parametrize("layout", list(layouts(1)))
@pytest.mark.parametrize(
    "src,dst",
    [("f8", "f8"), ("f8", "i4"), ("c8", "f2"), ("f2", "c16"), ("i8", "u1"), ("?", "f4"),
     ("u2", "?"), ("i2", "i2"), ("c16", "c16"), (STRUCT, STRUCT)],
)  # fmt: skip
def test_copy_strided_layouts(be, src, dst, layout):
    run_copy(be, src, dst, layout)


def test_copy_strided_many_dims_and_large(be):
    # 10 dimensions, none mergeable, then a large contiguous conversion.
    shape = (2,) * 10
    src_buf, dst_buf = Buffer(be, 8 * 3**10 + 64), Buffer(be, 4 * 2**10 + 64)
    sstrides = tuple(8 * 3 ** (9 - d) for d in range(10))
    sview, sarr = src_buf.view("f8", shape, sstrides, 0)
    sarr[...] = sample_values(np.dtype("f8"), sarr.size).reshape(shape)
    src_buf.push()
    dview, darr = dst_buf.view("f4", shape, tuple(np.empty(shape, "f4").strides), 8)
    be.copy_strided(DEV, dview, sview)
    oracle_copy(darr, sarr)
    assert np.array_equal(dst_buf.pull(), dst_buf.host)
    src_buf.free()
    dst_buf.free()

    n = 3_000_000  # more elements than one launch has work-items
    a, b = Buffer(be, 4 * n), Buffer(be, 8 * n)
    av, aarr = a.view("i4", (n,), (4,), 0)
    aarr[...] = np.arange(n, dtype="i4")
    a.push()
    bv, barr = b.view("f8", (n,), (8,), 0)
    be.copy_strided(DEV, bv, av)
    oracle_copy(barr, aarr)
    assert np.array_equal(b.pull(), b.host)
    a.free()
    b.free()


@pytest.mark.parametrize(
    "dtype,layout",
    [("f8", "contiguous"), ("f8", "negative"), ("f8", "unaligned"), ("u1", "step3d"),
     ("c16", "transpose"), ("f2", "scalar"), (STRUCT, "contiguous"), (STRUCT, "negative"),
     ("i4", "empty"), ("c8", "contiguous")],
)  # fmt: skip
def test_fill(be, dtype, layout):
    dtype = np.dtype(dtype)
    shape, _, _, strides, off = layouts(dtype.itemsize)[layout]
    buf = Buffer(be, 100 * dtype.itemsize + 16, seed=3)
    view, arr = buf.view(dtype, shape, strides, off)
    if dtype.fields is None:
        value = np.array(sample_values(dtype, 3)[2], dtype)
    else:
        value = np.array((7, 1.25, -3), dtype)
    be.fill(DEV, view, value)
    arr[...] = value
    assert np.array_equal(buf.pull(), buf.host)
    buf.free()


def test_memcpy_and_kinds(be):
    kinds = be.device_info(DEV).kinds
    data = np.arange(256, dtype=np.uint8)
    ptrs = {kind: be.allocate(DEV, kind, 256) for kind in kinds}
    first = ptrs["device"]
    be.upload(DEV, first, data)
    prev = first
    for ptr in ptrs.values():
        if ptr != first:
            be.memcpy(DEV, ptr, prev, 256)
            prev = ptr
    out = np.zeros(256, np.uint8)
    be.download(DEV, out, prev)
    assert np.array_equal(out, data)
    # host/unified memory is readable from the CPU through its address after synchronize
    for kind in ("host", "unified"):
        if kind in ptrs:
            from gpuarrays._common.raw import ndarray_at

            be.fill(
                DEV, RawView(ptrs[kind], (256,), (1,), np.dtype(np.uint8)), np.array(9, np.uint8)
            )
            be.synchronize(DEV)
            assert (ndarray_at(ptrs[kind], (256,), (1,), np.dtype(np.uint8)) == 9).all()
    # partial copy inside allocations, at offsets
    be.memcpy(DEV, first + 10, first + 100, 20)
    be.download(DEV, out, first)
    want = data.copy()
    want[10:30] = data[100:120]
    assert np.array_equal(out, want)
    for kind, ptr in ptrs.items():
        be.free(DEV, kind, ptr, 256)


def test_pointer_info_and_mem_info(be):
    free0, _ = be.mem_info(DEV)
    ptr = be.allocate(DEV, "device", 1000)
    info = be.pointer_info(ptr + 999)
    assert info is not None
    assert (info.kind, info.device, info.base, info.size) == ("device", DEV, ptr, 1000)
    after = be.pointer_info(ptr + 1000)
    assert after is None or after.base != ptr
    assert be.pointer_info(0) is None
    assert be.pointer_info(np.zeros(4).ctypes.data) is None
    assert be.mem_info(DEV)[0] <= free0 - 1000
    be.free(DEV, "device", ptr, 1000)
    assert be.pointer_info(ptr) is None
    assert be.mem_info(DEV)[0] == free0


def test_unsupported_kind_and_bad_calls(be):
    with pytest.raises(ValueError, match="'managed'.*opencl:0"):
        be.allocate(DEV, "managed", 16)
    # a device with coarse-grained SVM only refuses host and unified memory
    coarse_only = dataclasses.replace(be.device_info(DEV), kinds=("device",))
    original, be._infos[DEV] = be._infos[DEV], coarse_only
    try:
        for kind in ("host", "unified"):
            with pytest.raises(ValueError, match=f"'{kind}' is not supported by opencl:0"):
                be.allocate(DEV, kind, 16)
    finally:
        be._infos[DEV] = original
    with pytest.raises(BackendError) as err:
        be.memcpy(DEV, 0, 0, 16)  # NULL pointers
    assert err.value.call == "clEnqueueSVMMemcpy" and err.value.code == "CL_INVALID_VALUE"
    with pytest.raises(BackendError):
        be.free(DEV, "device", 12345, 16)
    with pytest.raises(BackendOutOfMemory):
        be.allocate(DEV, "device", 1 << 60)


def test_register_host_is_a_noop(be):
    host = np.zeros(16)
    be.register_host(DEV, host.ctypes.data, host.nbytes)
    be.unregister_host(DEV, host.ctypes.data)


def test_reset_frees_everything_and_device_stays_usable(be):
    ptrs = [be.allocate(DEV, "device", 4096) for _ in range(4)]
    buf = Buffer(be, 64)
    view, _ = buf.view("f4", (8,), (4,), 0)
    be.fill(DEV, view, np.array(2.5, np.float32))  # queues work
    be.copy_strided(DEV, view, buf.view("i4", (8,), (4,), 32)[0])  # leaves kernels compiled
    be.reset(DEV)
    for p in ptrs + [buf.ptr]:
        assert be.pointer_info(p) is None
    assert be.mem_info(DEV)[0] == be.mem_info(DEV)[1]
    # usable again: allocate, convert (recompiles), read back
    again = Buffer(be, 64)
    sview, sarr = again.view("i4", (8,), (4,), 0)
    sarr[...] = np.arange(8)
    again.push()
    dview, darr = again.view("f8", (4,), (8,), 32)
    be.copy_strided(DEV, dview, RawView(sview.ptr, (4,), (8,), sview.dtype))
    oracle_copy(darr, sarr[::2])
    assert np.array_equal(again.pull(), again.host)
    again.free()
    be.reset(DEV)
    be.reset(DEV)  # nothing left: still fine
