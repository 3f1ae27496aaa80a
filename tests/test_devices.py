"""Devices and back-ends: discovery, specs, the current device, Device objects."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import gpuarrays as ga

SRC = str(Path(__file__).resolve().parents[1] / "src")
PREFERENCE = ["cuda", "opencl", "cpu"]


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter with gpuarrays importable and ``env`` set."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("GPUARRAYS_")}
    full["PYTHONPATH"] = SRC + os.pathsep + full.get("PYTHONPATH", "")
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=120)


# discovery ------------------------------------------------------------------------------
def test_backends_order_and_cpu_always():
    names = ga.backends()
    assert isinstance(names, list) and all(isinstance(n, str) for n in names)
    assert "cpu" in names
    assert names == [n for n in PREFERENCE if n in names]  # preference order
    assert len(set(names)) == len(names)
    names.append("mutated")  # a fresh list each call
    assert "mutated" not in ga.backends()


def test_devices_lists_every_backend():
    devs = ga.devices()
    assert all(isinstance(d, ga.Device) for d in devs)
    assert [d.backend for d in devs] == sorted(
        (d.backend for d in devs), key=ga.backends().index)
    assert {d.backend for d in devs} == set(ga.backends())
    assert ga.get_device("cpu:0") in devs
    for name in ga.backends():
        sub = ga.devices(name)
        assert sub and all(d.backend == name for d in sub)
        assert [d.index for d in sub] == list(range(len(sub)))
    with pytest.raises(ValueError, match="cpu"):
        ga.devices("nosuchbackend")


# get_device -----------------------------------------------------------------------------
def test_get_device_specs(device):
    assert ga.get_device(device) is device
    assert ga.get_device(str(device)) is device
    assert ga.get_device(device.backend) == ga.devices(device.backend)[0]
    with ga.use_device(device):
        assert ga.get_device() is device
        assert ga.get_device(None) is device


def test_get_device_cpu_spellings():
    cpu = ga.get_device("cpu")
    assert cpu is ga.get_device("cpu:0")
    assert cpu.backend == "cpu" and cpu.index == 0
    assert ga.get_device(None) in ga.devices()


@pytest.mark.parametrize("spec", ["nope", "nope:0", "cpu:1", "cpu:99", "cpu:-1", "cpu:x", "",
                                  "cuda:7" if "cuda" not in ga.backends() else "cuda:999",
                                  "rocm:0"])
def test_unknown_or_unavailable_spec_names_available(spec):
    with pytest.raises(ValueError) as info:
        ga.get_device(spec)
    msg = str(info.value)
    assert "cpu:0" in msg  # names what is available
    for d in ga.devices():
        assert str(d) in msg


@pytest.mark.parametrize("spec", [0, 1.5, b"cpu", ["cpu"], ("cpu", 0), object()])
def test_get_device_wrong_type(spec):
    with pytest.raises(TypeError) as info:
        ga.get_device(spec)
    assert "Device" in str(info.value) or "device" in str(info.value)


def test_factories_take_device_specs(device):
    for spec in (device, str(device)):
        a = ga.zeros(3, device=spec)
        assert a.device is device
    with pytest.raises(ValueError):
        ga.zeros(3, device="nope:0")
    with pytest.raises(TypeError):
        ga.zeros(3, device=3.5)


# use_device ------------------------------------------------------------------------------
def test_use_device_sets_and_restores(device):
    outer = ga.get_device()
    with ga.use_device(str(device)) as dev:
        assert dev is device
        assert ga.get_device() is device
        a = ga.empty(4)
        assert a.device is device
        with ga.use_device("cpu"):
            assert ga.get_device() == ga.get_device("cpu:0")
            assert ga.zeros(2).device == ga.get_device("cpu")
        assert ga.get_device() is device
    assert ga.get_device() is outer


def test_use_device_restores_after_exception(device):
    outer = ga.get_device()
    with pytest.raises(KeyError), ga.use_device(device):
        raise KeyError("boom")
    assert ga.get_device() is outer


def test_use_device_bad_spec_raises():
    with pytest.raises(ValueError):
        with ga.use_device("nope:3"):
            pass


def test_use_device_is_per_thread(device):
    outer = ga.get_device()
    seen: dict[str, ga.Device] = {}
    ready = threading.Barrier(2)

    def worker():
        ready.wait()
        seen["worker"] = ga.get_device()
        seen["worker_array"] = ga.empty(1).device

    with ga.use_device(device):
        t = threading.Thread(target=worker)
        t.start()
        ready.wait()
        t.join()
        assert ga.get_device() is device
    # a new thread starts from the default, not from the spawning thread's device
    assert seen["worker"] is outer
    assert seen["worker_array"] is outer


def test_use_device_per_thread_each_its_own():
    devs = ga.devices()
    results: list = [None] * 8
    barrier = threading.Barrier(len(results))

    def worker(i: int) -> None:
        dev = devs[i % len(devs)]
        with ga.use_device(dev):
            barrier.wait()  # every thread is inside its block at once
            results[i] = (ga.get_device(), ga.empty(2).device, dev)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, arr_dev, want in results:
        assert got is want and arr_dev is want


def test_use_device_is_per_asyncio_task():
    devs = ga.devices()

    async def task(dev: ga.Device, gate: asyncio.Event, n_ready: list) -> tuple:
        with ga.use_device(dev):
            n_ready.append(1)
            if len(n_ready) == len(devs) * 2:
                gate.set()
            await gate.wait()  # all tasks are inside their blocks, interleaved
            await asyncio.sleep(0)
            return ga.get_device(), ga.empty(3).device

    async def main():
        gate = asyncio.Event()
        n_ready: list = []
        wanted = devs * 2
        outer = ga.get_device()
        got = await asyncio.gather(*(task(d, gate, n_ready) for d in wanted))
        assert ga.get_device() is outer
        return wanted, got

    wanted, got = asyncio.run(main())
    for want, (cur, arr_dev) in zip(wanted, got, strict=True):
        assert cur is want and arr_dev is want


# GPUARRAYS_DEVICE -----------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [str(d) for d in ga.devices()] + ["cpu"])
def test_gpuarrays_device_env(spec):
    proc = run_python("import gpuarrays as ga; a = ga.zeros(2); "
                      "print(ga.get_device(), a.device)", GPUARRAYS_DEVICE=spec)
    assert proc.returncode == 0, proc.stderr
    want = str(ga.get_device(spec))
    assert proc.stdout.split() == [want, want]


def test_gpuarrays_device_env_bad():
    proc = run_python(
        "import gpuarrays as ga\n"
        "try:\n    ga.get_device()\nexcept ValueError as e:\n    print('VE', e)\n",
        GPUARRAYS_DEVICE="nope:9")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("VE")
    assert "nope:9" in proc.stdout and "cpu:0" in proc.stdout


def test_default_device_without_env():
    proc = run_python("import gpuarrays as ga; print(ga.get_device())")
    assert proc.returncode == 0, proc.stderr
    got = proc.stdout.strip()
    # PoCL's CPU device is never the default; a real GPU is, else cpu:0
    if "cuda" not in ga.backends():
        gpus = [d for d in ga.devices() if d.backend == "opencl" and d.info.accelerator]
        assert got == (str(gpus[0]) if gpus else "cpu:0")


# Device objects ----------------------------------------------------------------------------
def test_device_attributes(device):
    assert isinstance(device.backend, str) and device.backend in ga.backends()
    assert isinstance(device.index, int) and device.index >= 0
    assert isinstance(device.name, str) and device.name
    assert isinstance(device.total_memory, int) and device.total_memory > 0
    assert set(device.kinds) <= {"device", "host", "unified"}
    assert "device" in device.kinds
    assert str(device) == f"{device.backend}:{device.index}"
    assert str(device) in repr(device)
    device.synchronize()


def test_device_hash_and_equality():
    devs = ga.devices()
    for d in devs:
        assert d == ga.get_device(str(d))
        assert hash(d) == hash(ga.get_device(str(d)))
        assert d != str(d)
        assert (d == 0) is False
    assert len({*devs, *devs}) == len(devs)
    table = {d: str(d) for d in devs}
    assert table[ga.get_device("cpu:0")] == "cpu:0"
    for a in devs:
        for b in devs:
            assert (a == b) == ((a.backend, a.index) == (b.backend, b.index))


def test_device_pickles_to_itself(device):
    import pickle

    assert pickle.loads(pickle.dumps(device)) is device


NUMERIC = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float32", "complex64"]


def test_device_supports(device):
    for dt in NUMERIC:
        assert device.supports(dt) is True
        assert device.supports(np.dtype(dt)) is True
    assert device.supports([("x", "i4"), ("y", "f4")]) is True
    for bad in [object, "U4", "S3", "M8[s]", "m8[s]", "V8", np.dtype([("o", "O")])]:
        assert device.supports(bad) is False
    assert device.supports("float64") == device.info.float64
    assert device.supports("complex128") == device.info.float64
    assert device.supports("float16") == device.info.float16


def test_device_without_a_float_type_refuses_it(device):
    for dt, has in [("float64", device.info.float64), ("float16", device.info.float16)]:
        if has:
            a = ga.zeros(2, dt, device=device)
            assert a.dtype == np.dtype(dt)
            assert ga.check_dtype(dt, device) == np.dtype(dt)
            continue
        before = ga.memory_stats(device)["used_bytes"]
        with pytest.raises(ga.UnsupportedDTypeError) as info:
            ga.zeros(2, dt, device=device)
        assert str(device) in str(info.value) and "float32" in str(info.value)
        with pytest.raises(ga.UnsupportedDTypeError):
            ga.check_dtype(dt, device)
        assert ga.memory_stats(device)["used_bytes"] == before


def test_cpu_supports_everything_numeric():
    cpu = ga.get_device("cpu")
    for dt in NUMERIC + ["float16", "float64", "complex128"]:
        assert cpu.supports(dt)
    assert cpu.kinds == ("device", "host", "unified")
