"""Kernel-shape qualification of OpenCL devices (docs/kernels.md, "Qualification").

A probe in a child process decides which kernel shapes a device's compiler handles; a
shape it rejects is never generated in the user's process, and a compiler that kills the
child never kills the parent.  Every test runs on every OpenCL device present (pip's PoCL
3.0 and the system's PoCL 3.1 where both are installed: ``GPUARRAYS_TEST_ALL_DEVICES=1``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._compute.device import matmul, qualify
from gpuarrays._common.errors import BackendError

from conftest import DEVICES

OPENCL = [d for d in DEVICES if d.startswith("opencl")]
pytestmark = pytest.mark.skipif(not OPENCL, reason="no OpenCL device: nothing is qualified")


@pytest.fixture(params=OPENCL)
def cl_device(request):
    return ga.get_device(request.param)


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """device name -> the text of its verdict's entry, probed once for the module."""
    return {}


def _entry(device, probed, folder) -> str:
    """``device``'s entry, written into ``folder`` (probed once per module)."""
    if str(device) not in probed:
        probed[str(device)] = qualify.verdict(device).path.read_text()
    qualify.forget()
    return probed[str(device)]


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty verdict folder, and this process's verdicts forgotten (before and after)."""
    monkeypatch.setenv("GPUARRAYS_QUALIFY_CACHE", str(tmp_path / "qualify"))
    monkeypatch.delenv("GPUARRAYS_REQUALIFY", raising=False)
    qualify.forget()
    yield tmp_path / "qualify"
    qualify.forget()


def test_every_shape_has_a_verdict_kept_on_disk(cl_device, fresh_cache):
    v = qualify.verdict(cl_device)
    assert v.probed and set(v.shapes) == set(qualify.SHAPES) and len(v.shapes) >= 6
    assert v.path.parent == fresh_cache and v.path.is_file()
    entry = json.loads(v.path.read_text())
    assert entry["shapes"] == v.shapes
    info = cl_device.impl._devices[cl_device.index]
    assert entry["key"]["platform"] == info.platform.version.strip()
    assert entry["key"]["driver"] == info.driver_version.strip()
    qualify.forget()
    again = qualify.verdict(cl_device)  # from disk: no probe
    assert not again.probed and again.shapes == v.shapes


def test_a_new_process_reads_the_verdict_without_probing(cl_device, fresh_cache):
    first = qualify.verdict(cl_device)
    code = ("import gpuarrays as ga; from gpuarrays._compute.device import qualify; "
            f"v = qualify.verdict(ga.get_device('{cl_device}')); print(v.probed, v.path)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ)).stdout.split()
    assert out == ["False", str(first.path)]


@pytest.mark.parametrize("damage", ["torn", "foreign", "incomplete"])
def test_a_damaged_or_foreign_entry_is_a_miss(cl_device, fresh_cache, probed, damage):
    text = _entry(cl_device, probed, fresh_cache)
    path = qualify._path(qualify._facts(cl_device))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    assert not qualify.verdict(cl_device).probed  # the copy is a whole, matching entry
    qualify.forget()
    entry = json.loads(path.read_text())
    if damage == "torn":
        path.write_text(path.read_text()[: len(path.read_text()) // 2])
    elif damage == "foreign":
        entry["key"]["driver"] = "another driver"
        path.write_text(json.dumps(entry))
    else:
        entry["shapes"].popitem()
        path.write_text(json.dumps(entry))
    qualify.forget()
    v = qualify.verdict(cl_device)
    assert v.probed and set(v.shapes) == set(qualify.SHAPES)
    assert json.loads(path.read_text())["shapes"] == v.shapes  # rewritten whole


def test_an_unwritable_folder_only_costs_the_probe(cl_device, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("GPUARRAYS_QUALIFY_CACHE", str(blocker / "qualify"))
    qualify.forget()
    try:
        v = qualify.verdict(cl_device)
        assert v.probed and set(v.shapes) == set(qualify.SHAPES)
    finally:
        qualify.forget()


def test_a_child_that_dies_is_a_no_and_the_parent_goes_on(cl_device, monkeypatch):
    """The child aborts (as LLVM does) inside one representative: that shape is a "no", the
    shapes after it are probed by a new child, and this process is unharmed."""
    monkeypatch.setenv("GPUARRAYS_QUALIFY_FAULT", "matmul_local_tiles")
    found = qualify.probe(cl_device.index, ["matmul_local_tiles", "matmul_vector_f4x8"])
    assert found["matmul_local_tiles"].startswith("the probe process was killed by signal 6")
    assert "matmul_vector_f4x8" in found  # probed after the death
    x = ga.asarray(np.arange(6, dtype=np.float32), device=cl_device)
    assert float(ga.sum(x)) == 15.0


def test_a_rejected_shape_is_never_generated(cl_device, fresh_cache, monkeypatch):
    """With the 16-wide float32 vectors rejected (the probe's child aborts there, as PoCL
    3.0's LLVM does on ``fma()`` or ``vload16`` of them), a float32 product runs a narrower
    vector kernel and compiles no 16-wide one."""
    monkeypatch.setenv("GPUARRAYS_QUALIFY_FAULT", "matmul_vector_f4x16")
    v = qualify.verdict(cl_device)
    assert not v.allows("matmul_vector_f4x16")
    built = []
    compile_kernel = cl_device.impl.compile_kernel

    def watch(index, source, name, params, cache=None):
        built.append(name)
        return compile_kernel(index, source, name, params, cache)

    monkeypatch.setattr(cl_device.impl, "compile_kernel", watch)
    monkeypatch.setattr(matmul, "_kernels", {})  # this test's kernels are compiled anew
    rng = np.random.default_rng(0)
    a, b = rng.random((37, 21), dtype=np.float32), rng.random((21, 70), dtype=np.float32)
    got = (ga.asarray(a, device=cl_device) @ ga.asarray(b, device=cl_device)).get()
    np.testing.assert_allclose(got, a @ b, rtol=1e-5)
    products = [n for n in built if n.startswith("mm_")]
    assert products and not any(n.split("_")[11] == "16" for n in products), products
    if cl_device.impl.launch_hint(cl_device.index) == "cpu" and v.allows("matmul_vector_f4x8"):
        assert any(n.split("_")[11] == "8" for n in products), products


def test_matmul_and_random_work_on_every_opencl_device(cl_device):
    """What killed the process on pip's PoCL: the first product, in float32 and float64."""
    for dt in (np.float32, np.float64):
        a = np.arange(64 * 48, dtype=dt).reshape(64, 48) % 5
        got = (ga.asarray(a, device=cl_device) @ ga.asarray(a.T.copy(), device=cl_device)).get()
        np.testing.assert_array_equal(got, a @ a.T)
    x = ga.random.default_rng(3, device=cl_device).random(100_000, dtype=np.float32).get()
    y = ga.random.default_rng(3, device="cpu:0").random(100_000, dtype=np.float32).get()
    np.testing.assert_array_equal(x, y)


class _LacksKernelsOnce:
    """The back-end's OpenCL library, except that the first ``times`` programs "built" come
    back without their kernels (``CL_INVALID_KERNEL_NAME``), as from a damaged cache entry."""

    def __init__(self, lib, times: int) -> None:
        self._lib, self.times, self.failed = lib, times, 0

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def clCreateKernel(self, program, name, err):  # noqa: N802 -- the C name
        if self.times > 0:
            self.times -= 1
            self.failed += 1
            err._obj.value = -46
            return None
        return self._lib.clCreateKernel(program, name, err)


def _source(tag: str) -> str:
    return (f"__kernel void poisoned_{tag}(__global int *out) {{ out[get_global_id(0)] = 7; }}"
            f" /* {os.getpid()} */")


def test_a_program_without_its_kernel_is_built_again(cl_device, monkeypatch):
    fake = _LacksKernelsOnce(cl_device.impl._lib, 1)
    monkeypatch.setattr(cl_device.impl, "_lib", fake)
    out = ga.zeros(4, dtype=np.int32, device=cl_device)
    k = cl_device.impl.compile_kernel(cl_device.index, _source("once"), "poisoned_once",
                                      ("ptr",))
    k.launch([out._raw().ptr], 4, 1)
    assert fake.failed == 1 and out.get().tolist() == [7, 7, 7, 7]


def test_a_cache_that_stays_damaged_names_the_folder_to_delete(cl_device, monkeypatch):
    monkeypatch.setenv("POCL_CACHE_DIR", "/the/runtime/cache")
    fake = _LacksKernelsOnce(cl_device.impl._lib, 2)
    monkeypatch.setattr(cl_device.impl, "_lib", fake)
    with pytest.raises(BackendError, match="delete /the/runtime/cache") as info:
        cl_device.impl.compile_kernel(cl_device.index, _source("twice"), "poisoned_twice",
                                      ("ptr",))
    assert "CL_INVALID_KERNEL_NAME" in str(info.value)


def test_info_shows_each_devices_verdict_and_how_to_probe_again(fresh_cache):
    env = dict(os.environ)
    cli = [sys.executable, "-c", "import sys; from gpuarrays.cli import main; sys.exit(main())"]
    first = subprocess.run([*cli, "info", "--requalify"], capture_output=True, text=True,
                           env=env, check=True)
    again = subprocess.run([*cli, "info"], capture_output=True, text=True, env=env, check=True)
    for dev in ga.devices():
        if dev.backend != "opencl":
            continue
        block = first.stdout.split(f"{dev}:", 1)[1]
        assert "kernel shapes (probed now" in block and str(fresh_cache) in block
        assert "probe again: gpuarrays info --requalify" in block
        for name in qualify.SHAPES:
            assert f" {name}" in block
    assert "kernel shapes (probed now" not in again.stdout
    assert "kernel shapes (from an earlier probe" in again.stdout
