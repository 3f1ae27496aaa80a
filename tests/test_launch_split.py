"""Split launches on CPU devices (``SPLIT_MIN`` in backends/_kernels.py): a count that whole
work-groups do not cover runs the whole groups without a bounds check and then one group
with it from the index they left (OpenCL's global offset).  NumPy as the oracle, on every
device, for counts below, at and past ``SPLIT_MIN`` and a million: elementwise results out
of place and in place (an in-place operation applied twice to the first groups would show),
scalar operands, a strided flat layout, fused kernels and dense conversions."""

from __future__ import annotations

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._compute.device import launcher
from gpuarrays.backends._kernels import SPLIT_MIN

COUNTS = (SPLIT_MIN - 1, SPLIT_MIN + 1, SPLIT_MIN + 255, 1_000_003)


def cpu_opencl(device) -> bool:
    return device.backend == "opencl" and device.impl.launch_hint(device.index) == "cpu"


@pytest.mark.parametrize("n", COUNTS)
def test_elementwise_results_across_the_split(device, n):
    rng = np.random.default_rng(n)
    h = rng.random(n, dtype=np.float32)
    g = rng.random(n, dtype=np.float32)
    x, y = ga.asarray(h, device=device), ga.asarray(g, device=device)
    np.testing.assert_array_equal((x + y).get(), h + g)
    np.testing.assert_array_equal(ga.sqrt(x).get(), np.sqrt(h))
    np.testing.assert_array_equal((x * 2.5).get(), h * np.float32(2.5))
    z = ga.asarray(h, device=device)
    z += y
    z *= z
    np.testing.assert_array_equal(z.get(), (h + g) * (h + g))
    wide = rng.random((n // 3, 3), dtype=np.float32)
    w = ga.asarray(wide, device=device)
    np.testing.assert_array_equal((w[:, ::2] - 1.0).get(), wide[:, ::2] - np.float32(1.0))


@pytest.mark.parametrize("n", COUNTS)
def test_fused_and_converted_results_across_the_split(device, n):
    rng = np.random.default_rng(n + 1)
    h = (rng.random(n) * 200 - 100).astype(np.float32)
    x = ga.asarray(h, device=device)

    @ga.fuse
    def affine(a, b):
        return a * b + 1.0

    np.testing.assert_allclose(affine(x, x).get(), h * h + np.float32(1.0), rtol=1e-6)
    for dst in (np.float64, np.int32, np.uint8, np.float16):
        np.testing.assert_array_equal(x.astype(dst).get(), h.astype(dst))
    u = ga.asarray(h.astype(np.uint8), device=device)
    np.testing.assert_array_equal(u.astype(np.float32).get(), h.astype(np.uint8).astype(np.float32))


def test_cpu_opencl_devices_split_and_others_do_not(device):
    """The plan of ``x + x`` for a million elements: on a CPU OpenCL device the unchecked
    kernel over whole groups and the checked one for the rest; elsewhere one launch."""
    x = ga.asarray(np.ones(1_000_003, np.float32), device=device)
    raw = x._raw()
    plan = launcher._plan_of(device, "add", raw, (raw, raw), (x.dtype, x.dtype)) \
        if device.backend != "cpu" else None
    if plan is None:
        pytest.skip("the cpu engine runs NumPy's loops, no kernels")
    if cpu_opencl(device):
        assert plan.rest is not None and plan.gsize == 1_000_003 // plan.lsize * plan.lsize
    else:
        assert plan.rest is None
    np.testing.assert_array_equal((x + x).get(), np.full(1_000_003, 2, np.float32))
