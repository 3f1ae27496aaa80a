"""Transparent huge pages for large allocations in host memory (Linux).

NumPy asks the kernel for huge pages (``madvise(MADV_HUGEPAGE)``) on arrays of
4 MiB and more; memory from the C allocator or from PoCL's ``clSVMAlloc`` gets
ordinary 4 KiB pages when the system's setting is ``madvise`` (as here:
``/sys/kernel/mm/transparent_hugepage/enabled``).  Measured on this project's
2-core machines (docs/reductions.md): a sum over 16 M float32 costs 4.0 ms of
CPU time on 4 KiB pages and 3.2 ms on huge pages, as NumPy's own.  So the cpu
back-end and OpenCL back-end's CPU devices give the same advice for the 2 MiB
aligned inside of each large allocation, before it is first written.  Advice
only: a refusal (another OS, an old kernel) changes nothing and is ignored.
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["HUGE_PAGE_MIN", "advise_huge_pages"]

HUGE_PAGE_MIN = 4 << 20
"""Allocations of at least this many bytes are advised (NumPy's threshold)."""

_HUGE = 2 << 20
_MADV_HUGEPAGE = 14

_madvise = None
if sys.platform.startswith("linux"):
    try:
        _madvise = ctypes.CDLL(None, use_errno=True).madvise
        _madvise.restype = ctypes.c_int
        _madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError):  # no C library symbol: give no advice
        _madvise = None


def advise_huge_pages(ptr: int, nbytes: int) -> None:
    """Ask for huge pages on the 2 MiB-aligned inside of ``[ptr, ptr + nbytes)``."""
    if nbytes < HUGE_PAGE_MIN or _madvise is None:
        return
    start = (ptr + _HUGE - 1) & ~(_HUGE - 1)
    end = (ptr + nbytes) & ~(_HUGE - 1)
    if end > start:
        _madvise(start, end - start, _MADV_HUGEPAGE)  # advice: the result is not needed
