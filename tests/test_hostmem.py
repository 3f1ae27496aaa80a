"""Large host-memory allocations ask for transparent huge pages, as NumPy's do.

Checked in the kernel's own account (``/proc/self/smaps``): the mapping that
holds a 16 MiB array carries the ``hg`` flag (``MADV_HUGEPAGE``) only because
the back-end advised it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import gpuarrays as ga

_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _vm_flags(ptr: int) -> list[str]:
    """The kernel's VmFlags of the mapping holding ``ptr`` (``hg``: huge pages advised)."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(v, 16) for v in head.split("-"))
            inside = lo <= ptr < hi
        elif inside and head == "VmFlags:":
            return line.split()[1:]
    return []


@pytest.fixture
def host_device(device):
    if device.backend == "opencl" and device.impl.launch_hint(device.index) != "cpu":
        pytest.skip("GPU memory is not host memory: no page advice")  # a setup condition
    if device.backend not in ("cpu", "opencl"):
        pytest.skip(f"{device.backend} memory is not host memory")
    return device


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _SETTING.exists()
                    or "[never]" in _SETTING.read_text(),
                    reason="transparent huge pages are off or not Linux")
def test_large_allocations_get_huge_pages(host_device):
    x = ga.ones((1 << 22,), dtype=np.float32, device=host_device)  # 16 MiB, written
    ga.synchronize(host_device)
    # The advice splits the mapping: the aligned inside is a mapping of its own.  Whether
    # the kernel finds free huge pages right now depends on the machine's load; the advice
    # itself (the mapping's "hg" flag) does not.
    assert "hg" in _vm_flags(x.data_ptr + (4 << 20))
    x.free()


def test_advice_covers_only_the_aligned_inside():
    from gpuarrays.backends import _hostmem

    calls = []
    real = _hostmem._madvise
    _hostmem._madvise = lambda start, n, advice: calls.append((start, n, advice))
    try:
        _hostmem.advise_huge_pages(0x200000 + 16, 6 << 20)  # starts 16 B past a boundary
        _hostmem.advise_huge_pages(0x400000, (4 << 20) - 1)  # below the threshold
    finally:
        _hostmem._madvise = real
    assert calls == [(0x400000, 4 << 20, 14)]
