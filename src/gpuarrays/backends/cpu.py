"""The cpu reference back-end: C-allocator memory, NumPy kernels.

Memory comes from ``malloc``/``free`` (through ctypes), so addresses are real
and get reused the way a device's are.  Kernels run NumPy on views of the raw
memory.  ``reset`` frees every allocation this back-end made, as a driver
does.  The back-end keeps no policy: the core decides what may be exposed to
NumPy (only ``host``/``unified`` memory, docs/design.md ("Foreign memory")).
"""

from __future__ import annotations

import bisect
import ctypes
import os
import threading

import numpy as np

from .._common.errors import BackendError
from .._common.raw import extent, ndarray_at
from ._hostmem import advise_huge_pages
from .base import (
    KINDS,
    BackendOutOfMemory,
    DeviceInfo,
    PointerInfo,
    RawView,
    SynchronousStreams,
)

# The process's malloc and free, both resolved the same way (the global symbol scope):
# with a preloaded allocator (ASan, jemalloc, tcmalloc) both are its own, so memory
# from it -- an own=True wrap of the process allocator's memory -- is freed by it.
_process = ctypes.CDLL(None)
_malloc = _process.malloc
_malloc.restype = ctypes.c_void_p
_malloc.argtypes = [ctypes.c_size_t]
_free = _process.free
_free.restype = None
_free.argtypes = [ctypes.c_void_p]
_memmove = ctypes.memmove
_MAX_SIZE = (1 << (8 * ctypes.sizeof(ctypes.c_size_t) - 1)) - 1  # PTRDIFF_MAX
_memset = ctypes.memset


def _physical_memory() -> tuple[int, int]:
    page = os.sysconf("SC_PAGE_SIZE")
    return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page


class CpuBackend(SynchronousStreams):
    """Host memory from the C allocator, all three kinds (docs/design.md, "The back-end interface")."""

    name = "cpu"
    needs_host_registration = True  # tracked only, so the shared pin logic is exercised
    survives_fork = True  # the C allocator works in a forked child (docs/design.md, "Reset, fork and exit")

    def __init__(self) -> None:
        # Re-entrant: free() may run in a finalizer that interrupts this thread inside
        # another locked section (finalizers never block on the caller's lock).
        self._lock = threading.RLock()
        self._starts: list[int] = []  # sorted allocation addresses
        self._allocs: dict[int, tuple[int, str]] = {}  # ptr -> (nbytes, kind)
        self._registered: dict[int, int] = {}  # host ranges registered for the device

    # devices ------------------------------------------------------------------
    def device_count(self) -> int:
        return 1

    def device_info(self, index: int) -> DeviceInfo:
        return DeviceInfo(
            name="CPU (C allocator)",
            total_memory=_physical_memory()[1],
            kinds=KINDS,
            accelerator=False,
            host_kinds=KINDS,
        )

    # raw memory ---------------------------------------------------------------
    def allocate(self, index: int, kind: str, nbytes: int) -> int:
        if nbytes > _MAX_SIZE:  # ctypes would truncate it to size_t: a tiny block
            raise BackendOutOfMemory(f"malloc({nbytes}): larger than the address space")
        ptr = _malloc(max(nbytes, 1))
        if not ptr:
            raise BackendOutOfMemory(f"malloc({nbytes}) returned NULL")
        advise_huge_pages(ptr, nbytes)  # as NumPy does for its arrays (_hostmem.py)
        entry = (nbytes, kind)  # made before locking: nothing allocates under the lock
        with self._lock:
            bisect.insort(self._starts, ptr)
            self._allocs[ptr] = entry
        return ptr

    def free(self, index: int, kind: str, ptr: int, nbytes: int) -> None:
        # Memory the back-end did not make (an owned wrap of malloc'ed memory) is
        # freed with the same call, as the C library would.
        with self._lock:
            if self._allocs.pop(ptr, None) is not None:
                del self._starts[bisect.bisect_left(self._starts, ptr)]
        _free(ptr)

    def detach(self, index: int, ptr: int) -> bool:
        """Stop tracking ``ptr`` so that ``reset`` leaves it; ``free`` still frees it.

        True: host memory stays addressable, so the core can keep a range that outside
        handles still use past a reset (docs/design.md, "Reset, fork and exit").
        """
        with self._lock:
            if self._allocs.pop(ptr, None) is not None:
                del self._starts[bisect.bisect_left(self._starts, ptr)]
        return True

    def mem_info(self, index: int) -> tuple[int, int]:
        return _physical_memory()

    # byte movement ------------------------------------------------------------
    def memcpy(self, index: int, dst: int, src: int, nbytes: int) -> None:
        _memmove(dst, src, nbytes)

    def upload(self, index: int, dst: int, src: np.ndarray) -> None:
        _memmove(dst, src.ctypes.data, src.nbytes)

    def download(self, index: int, dst: np.ndarray, src: int) -> None:
        _memmove(dst.ctypes.data, src, dst.nbytes)

    # kernels ------------------------------------------------------------------
    def fill(self, index: int, dst: RawView, value: np.ndarray) -> None:
        if 0 in dst.shape:
            return
        np.copyto(ndarray_at(*dst), value)

    def writer_handles(self, index: int) -> dict:
        """What the compiled creation functions need to write new memory without Python
        (``_core.Writer``'s arguments, src/native/core/fill.c): every kind is the process's
        own memory, written in place."""
        return {"mode": "host"}

    def copy_strided(self, index: int, dst: RawView, src: RawView) -> None:
        if 0 in dst.shape:
            return
        s = ndarray_at(*src)
        if s.dtype.kind == "c" and dst.dtype.kind not in "cb":
            s = s.real  # the core warns (ComplexWarning) once, for every back-end
        np.copyto(ndarray_at(*dst), s, casting="unsafe")

    # lifecycle ----------------------------------------------------------------
    def synchronize(self, index: int) -> None:
        return None

    def reset(self, index: int) -> None:
        with self._lock:
            ptrs = list(self._allocs)
            self._allocs.clear()
            self._starts.clear()
            self._registered.clear()
        for ptr in ptrs:
            _free(ptr)

    def pointer_info(self, ptr: int) -> PointerInfo | None:
        with self._lock:
            i = bisect.bisect_right(self._starts, ptr) - 1
            base = self._starts[i] if i >= 0 else 0
            nbytes, kind = self._allocs[base] if i >= 0 else (0, "")
        if i >= 0 and ptr < base + max(nbytes, 1):
            return PointerInfo(kind, 0, base, nbytes)
        # Any other address is plain (unregistered) host memory: size 0 says "not ours".
        return PointerInfo("host", 0, ptr, 0)

    def register_host(self, index: int, ptr: int, nbytes: int) -> None:
        with self._lock:
            self._registered[ptr] = nbytes

    def unregister_host(self, index: int, ptr: int) -> None:
        with self._lock:
            if self._registered.pop(ptr, None) is None:
                raise BackendError("unregister_host", "EINVAL", f"0x{ptr:x} is not registered")


def load() -> CpuBackend:
    """The cpu back-end is always available."""
    return CpuBackend()


__all__ = ["CpuBackend", "load", "extent"]
