"""CUDA copies of host memory that shares pages with a wrap's registration.

A wrap of pageable host memory registers whole pages (``cuMemHostRegister``,
``_memory/pins.py``), so the registration also covers the bytes around the
wrapped array on its first and last page.  CUDA looks up a copy's host pointer
by its first byte: a copy that starts inside a registered range is taken for a
copy of that registration, and one running past its end is refused with
``CUDA_ERROR_INVALID_VALUE``.  That is how ``test_stateful_concurrent`` failed
on an H200: glibc put the fresh 8 MiB NumPy array of an upload right after a
wrapped one (its first bytes on the wrap's last registered page), and
``ga.asarray`` failed in ``cuMemcpyAsync``.  A wrap spanning two registrations
(two wraps sharing a page) failed its own ``get()`` the same way.

The back-end cuts such copies where a registration of its own begins or ends.
Without a GPU these tests drive ``CudaBackend`` with a fake driver that refuses
any copy crossing a registration's end (stricter than CUDA, which looks at the
first byte only); with a GPU the last test does the same on ``cuda:0`` through
the public API.
"""

from __future__ import annotations

import ctypes
import gc
import threading
import types

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._memory.pins import PAGE, pin_count
from gpuarrays.backends import cuda

HAS_CUDA = "cuda" in ga.backends()


class _Enum:
    def __getattr__(self, name: str) -> str:
        return name


class FakeDriver:
    """The driver calls ``CudaBackend`` makes for host registration and copies; every address
    is host memory.  ``cuMemcpyAsync`` refuses (INVALID_VALUE) a source or destination range
    that crosses the start or end of a registration, and copies otherwise."""

    CUdevice_attribute = _Enum()
    CUstream_flags = types.SimpleNamespace(CU_STREAM_DEFAULT=0)
    CU_MEMHOSTREGISTER_PORTABLE = 1
    CU_MEMHOSTREGISTER_DEVICEMAP = 2

    def __init__(self) -> None:
        self.registered: dict[int, int] = {}
        self.copies: list[tuple[int, int, int]] = []
        self.before_copy = None  # called once before the next copy (a racing registration)
        self.buffers: dict[int, np.ndarray] = {}

    # devices and contexts
    def cuDeviceGet(self, i):
        return 0, i

    def cuDeviceGetName(self, n, dev):
        return 0, b"Fake GPU\0"

    def cuDeviceTotalMem(self, dev):
        return 0, 1 << 30

    def cuDeviceGetAttribute(self, attr, dev):
        return 0, {"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": 9}.get(attr, 1)

    def cuDevicePrimaryCtxRetain(self, dev):
        return 0, 7

    def cuCtxGetCurrent(self):
        return 0, 7

    def cuCtxPushCurrent(self, ctx):
        return (0,)

    def cuCtxPopCurrent(self):
        return 0, 7

    def cuStreamCreate(self, flags):
        return 0, 11

    def cuStreamSynchronize(self, stream):
        return (0,)

    def cuDevicePrimaryCtxReset(self, dev):
        self.registered.clear()
        return (0,)

    def cuDevicePrimaryCtxRelease(self, dev):
        return (0,)

    # memory
    def cuMemAlloc(self, n):
        buf = np.zeros(n, np.uint8)
        self.buffers[buf.ctypes.data] = buf
        return 0, buf.ctypes.data

    def cuMemFree(self, ptr):
        self.buffers.pop(int(ptr))
        return (0,)

    def cuMemHostRegister(self, ptr, n, flags):
        if any(s < ptr + n and ptr < s + m for s, m in self.registered.items()):
            return (cuda.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,)
        self.registered[ptr] = n
        return (0,)

    def cuMemHostUnregister(self, ptr):
        return (0,) if self.registered.pop(ptr, None) is not None else (1,)

    def _crosses(self, ptr: int, n: int) -> bool:
        return any(s < ptr + n and ptr < s + m and not (s <= ptr and ptr + n <= s + m)
                   for s, m in self.registered.items())

    def cuMemcpyAsync(self, dst, src, n, stream):
        if self.before_copy is not None:
            hook, self.before_copy = self.before_copy, None
            hook()
        if self._crosses(dst, n) or self._crosses(src, n):
            return (cuda.CUDA_ERROR_INVALID_VALUE,)
        ctypes.memmove(dst, src, n)
        self.copies.append((dst, src, n))
        return (0,)


@pytest.fixture
def fake():
    driver = FakeDriver()
    return driver, cuda.CudaBackend(driver, 1)


@pytest.fixture
def pages():
    """16 page-aligned pages of host memory, filled with 0..255 repeating."""
    raw = np.zeros(18 * PAGE, np.uint8)
    start = (-raw.ctypes.data) % PAGE
    mem = raw[start:start + 16 * PAGE]
    mem[:] = np.arange(mem.size) % 251
    return mem


def _addr(a: np.ndarray) -> int:
    return a.ctypes.data


def test_upload_starting_on_a_registered_page_and_running_past_it(fake, pages):
    driver, backend = fake
    backend.register_host(0, _addr(pages), 3 * PAGE)  # a wrap of bytes 16 .. 2 pages + 64
    host = pages[2 * PAGE + 128:4 * PAGE + 128]  # the array the allocator put after it
    _, dst = driver.cuMemAlloc(host.nbytes)
    backend.upload(0, dst, host)
    got = np.ctypeslib.as_array((ctypes.c_uint8 * host.nbytes).from_address(dst))
    assert np.array_equal(got, host)
    # cut at the registration's end: one piece inside it, one outside
    assert [n for _, _, n in driver.copies] == [PAGE - 128, PAGE + 128]


def test_download_into_host_memory_starting_on_a_registered_page(fake, pages):
    driver, backend = fake
    backend.register_host(0, _addr(pages), 3 * PAGE)
    out = pages[2 * PAGE + 128:4 * PAGE + 128]
    values = np.full(out.nbytes, 9, np.uint8)
    _, src = driver.cuMemAlloc(out.nbytes)
    ctypes.memmove(src, _addr(values), values.nbytes)
    backend.download(0, out, src)
    assert np.array_equal(out, values)


def test_copy_of_a_range_spanning_two_registrations(fake, pages):
    """Two wraps that share a page: the second one's registration starts where the first's
    ends, and its get() reads across both."""
    driver, backend = fake
    backend.register_host(0, _addr(pages), 3 * PAGE)
    backend.register_host(0, _addr(pages) + 3 * PAGE, 2 * PAGE)
    src = pages[2 * PAGE + 128:5 * PAGE]
    _, dst = driver.cuMemAlloc(src.nbytes)
    backend.memcpy(0, dst, _addr(src), src.nbytes)
    got = np.ctypeslib.as_array((ctypes.c_uint8 * src.nbytes).from_address(dst))
    assert np.array_equal(got, src)
    assert [n for _, _, n in driver.copies] == [PAGE - 128, 2 * PAGE]


def test_temporary_upload_of_host_memory_starting_on_a_registered_page(fake, pages):
    driver, backend = fake
    backend.register_host(0, _addr(pages), 3 * PAGE)
    host = pages[2 * PAGE + 128:4 * PAGE + 128]
    with backend._temporary(0, host) as tmp:
        got = np.ctypeslib.as_array((ctypes.c_uint8 * host.nbytes).from_address(tmp)).copy()
    assert np.array_equal(got, host)


def test_copies_are_one_call_without_registrations_and_after_unregistering(fake, pages):
    driver, backend = fake
    backend.register_host(0, _addr(pages), 3 * PAGE)
    backend.unregister_host(0, _addr(pages))
    host = pages[2 * PAGE + 128:4 * PAGE + 128]
    _, dst = driver.cuMemAlloc(host.nbytes)
    backend.upload(0, dst, host)
    assert [n for _, _, n in driver.copies] == [host.nbytes]


def test_a_registration_made_during_the_copy_is_retried_with_new_cuts(fake, pages):
    """Another thread's wrap registers the page the copy starts on after the copy was cut:
    the driver refuses it, and the copy is cut again and retried once."""
    driver, backend = fake
    host = pages[2 * PAGE + 128:4 * PAGE + 128]
    _, dst = driver.cuMemAlloc(host.nbytes)

    def register():
        t = threading.Thread(target=backend.register_host, args=(0, _addr(pages), 3 * PAGE))
        t.start()
        t.join()

    driver.before_copy = register
    backend.upload(0, dst, host)
    got = np.ctypeslib.as_array((ctypes.c_uint8 * host.nbytes).from_address(dst))
    assert np.array_equal(got, host)


def test_a_copy_the_driver_refuses_for_another_reason_still_raises(fake, pages):
    driver, backend = fake
    driver.cuMemcpyAsync = lambda dst, src, n, stream: (cuda.CUDA_ERROR_INVALID_VALUE,)
    host = pages[:PAGE]
    _, dst = driver.cuMemAlloc(PAGE)
    with pytest.raises(ga.BackendError, match="cuMemcpyAsync"):
        backend.upload(0, dst, host)


def test_reset_forgets_the_registrations_cuts(fake, pages):
    driver, backend = fake
    backend.register_host(0, _addr(pages), 3 * PAGE)
    backend._state(0)
    backend.reset(0)  # the platform dropped the registration: no cuts at its ends any more
    host = pages[2 * PAGE + 128:4 * PAGE + 128]
    _, dst = driver.cuMemAlloc(host.nbytes)
    backend.upload(0, dst, host)
    assert [n for _, _, n in driver.copies] == [host.nbytes]


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_on_cuda_host_memory_sharing_pages_with_wraps():
    """The H200 failure, made deterministic: uploads from and downloads into NumPy memory
    that starts on a wrap's last registered page, and get() of a wrap spanning two
    registrations (refused with CUDA_ERROR_INVALID_VALUE before the cuts)."""
    dev = ga.get_device("cuda:0")
    raw = np.zeros(20 * PAGE, np.uint8)
    start = (-raw.ctypes.data) % PAGE
    mem = raw[start:start + 16 * PAGE]
    mem.view(np.float64)[:] = np.arange(mem.size // 8)
    w1 = ga.unsafe_wrap(mem[16:2 * PAGE + 64].view(np.float64), device=dev)
    assert any(s <= _addr(mem) + 2 * PAGE + 128 < e for s, e in pin_count(dev))
    after = mem[2 * PAGE + 128:4 * PAGE + 128].view(np.float64)
    x = ga.asarray(after, device=dev)
    assert np.array_equal(x.get(), after)
    want = after.copy()
    ga.asarray(np.full(after.size, 7.0), device=dev).get(out=after)
    assert np.array_equal(after, np.full(after.size, 7.0))
    after[:] = want
    w2 = ga.unsafe_wrap(mem[2 * PAGE + 128:5 * PAGE].view(np.float64), device=dev)
    assert np.array_equal(w2.get(), mem[2 * PAGE + 128:5 * PAGE].view(np.float64))
    assert np.array_equal((w2 * 2).get(), 2 * mem[2 * PAGE + 128:5 * PAGE].view(np.float64))
    assert np.array_equal(w1.get(), mem[16:2 * PAGE + 64].view(np.float64))
    del w1, w2, x
    gc.collect()
    assert not any(s < _addr(mem) + mem.nbytes and _addr(mem) < e for s, e in pin_count(dev))
