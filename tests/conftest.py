"""Shared fixtures: every test that takes ``device`` runs on every available back-end.

By default on the first device of each back-end (cpu:0, opencl:0, cuda:0): the
other devices of a back-end run the same code.  ``GPUARRAYS_TEST_ALL_DEVICES=1``
runs the suite on every device (several GPUs, or two OpenCL platforms such as
pip's PoCL beside the system's).  ``GPUARRAYS_TEST_BACKENDS=cpu`` (a comma-separated
list of back-ends) runs it on those back-ends only.
"""

from __future__ import annotations

import gc
import os

import pytest

import gpuarrays as ga

# clients (tests/test_clients.py): SciPy reads SCIPY_ARRAY_API when it is imported, and
# scikit-learn's array_api_dispatch needs it; set here, before any test module imports SciPy.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

# The disk cache of compiled kernels (docs/kernels.md, "Kernel caches") is off for the session,
# whatever the environment says, and child processes inherit that: no entry of an earlier run
# can hide a compiler problem or make a test depend on what ran before.  Off rather than a
# fresh folder: saving a PoCL binary compiles its generic work-group functions, which cost
# tests/test_kernels.py 65 s more (454 programs) with CI's fresh POCL_CACHE_DIR.
# tests/test_kernel_cache_opencl.py tests the cache in folders of its own.
os.environ["GPUARRAYS_KERNEL_CACHE"] = "off"

# GPUARRAYS_TEST_BACKENDS=cpu (a comma-separated list) keeps the device suite to those
# back-ends: the sanitizer step (.ci/sanitize) runs on cpu:0 only.
_BACKENDS = [b for b in os.environ.get("GPUARRAYS_TEST_BACKENDS", "").split(",") if b]

DEVICES = [str(d) for d in ga.devices()
           if (d.index == 0 or os.environ.get("GPUARRAYS_TEST_ALL_DEVICES") == "1")
           and (not _BACKENDS or d.backend in _BACKENDS)]


@pytest.fixture(params=DEVICES)
def device(request) -> ga.Device:
    """Each available device in turn (cpu:0 always; opencl:0 with PoCL; cuda:N with a GPU).

    Leaves the device as it found it: no limit, queued frees applied.
    """
    dev = ga.get_device(request.param)
    yield dev
    ga.set_memory_limit(None, dev)
    gc.collect()
    dev.memory.apply_pending()


@pytest.fixture
def used(device):
    """``used()`` returns the device's ``used_bytes`` now (queued frees applied)."""
    def current() -> int:
        gc.collect()
        return ga.memory_stats(device)["used_bytes"]
    return current


@pytest.fixture(scope="module")
def nvrtc():
    """NVRTC's bindings, for the tests that compile every generated CUDA kernel (no GPU needed);
    skipped at setup when the ``cuda`` extra is not installed."""
    try:
        from cuda.bindings import nvrtc as lib
        lib.nvrtcVersion()
    except (ImportError, RuntimeError) as e:
        pytest.skip(f"NVRTC is not available here: {e}")
    return lib
