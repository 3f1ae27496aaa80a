"""The disk cache of compiled OpenCL programs (docs/kernels.md, "Kernel caches").

Real PoCL, real files, real processes: a first process compiles into a cache folder,
later ones start from it.  The children inherit the environment (``OCL_ICD_VENDORS``,
``POCL_CACHE_DIR``), so they run on the runtime under test; every test's id names
opencl (CI runs ``-k opencl`` on the second runtime).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._compute.device import diskcache

# One elementwise kernel, one reduction and one data-movement program (a strided copy:
# copy_bytes/fill_bytes), each checked against NumPy; the counters the test reads.
CHILD = textwrap.dedent("""
    import json, warnings
    import numpy as np
    import gpuarrays as ga
    from gpuarrays._compute.device import diskcache
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dev = ga.get_device("opencl:0")
        h = np.arange(1, 1001, dtype=np.float32)
        x = ga.asarray(h, device=dev)
        y = ga.asarray(h / 7, device=dev)
        ok = [np.array_equal((x + y).get(), h + h / 7), float(ga.sum(x)) == float(h.sum()),
              np.array_equal(x[::3].copy().get(), h[::3])]
        ga.synchronize(dev)
    impl, cache = dev.impl, diskcache.default()
    print(json.dumps({
        "ok": ok, "builds": impl.builds, "loads": impl.binary_loads,
        "refusals": impl.binary_refusals, "saves": impl.binary_saves,
        "hits": cache and cache.hits,
        "warnings": [str(w.message) for w in caught
                     if issubclass(w.category, ga.GPUArraysWarning)]}))
""")
PROGRAMS = 3  # what CHILD builds


@pytest.fixture(scope="module")
def opencl_device():
    """opencl:0 (the runtime under test); skipped at setup where there is no OpenCL."""
    if "opencl" not in ga.backends():
        pytest.skip("no OpenCL back-end here (pip install 'gpuarrays[opencl]')")
    return ga.get_device("opencl:0")


def run_child(folder, code: str = CHILD, **env) -> dict:
    """Run ``code`` in a new process whose kernel cache is ``folder``; its JSON line."""
    full = {k: v for k, v in os.environ.items() if k != "GPUARRAYS_KERNEL_CACHE_CLEAR"}
    full.update(GPUARRAYS_KERNEL_CACHE=str(folder), **env)
    proc = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def entries(folder) -> list:
    return sorted(p for p in folder.iterdir() if p.suffix == ".bin")


@pytest.fixture(scope="module")
def compiled(opencl_device, tmp_path_factory):
    """A cache folder a first process filled (compiled everything from source)."""
    folder = tmp_path_factory.mktemp("kernels")
    first = run_child(folder)
    assert first["ok"] == [True] * 3 and first["warnings"] == []
    assert first["builds"] >= PROGRAMS and first["loads"] == 0
    assert first["saves"] == PROGRAMS and len(entries(folder)) == PROGRAMS
    return folder


@pytest.fixture
def cache_copy(compiled, tmp_path):
    """A private copy of the filled folder, for a test to change."""
    return shutil.copytree(compiled, tmp_path / "kernels")


def rewrite(path, image: bytes) -> None:
    """An entry whose hash is valid (the cache's own format) holding ``image``."""
    path.write_bytes(diskcache._MAGIC + hashlib.sha256(image).digest() + image)


def image_of(path) -> bytes:
    return path.read_bytes()[len(diskcache._MAGIC) + 32:]


def test_opencl_a_second_process_compiles_nothing(cache_copy):
    before = {p.name: p.read_bytes() for p in entries(cache_copy)}
    second = run_child(cache_copy)
    assert second["ok"] == [True] * 3
    assert second["builds"] == 0 and second["loads"] == PROGRAMS and second["hits"] == PROGRAMS
    assert second["saves"] == 0
    assert {p.name: p.read_bytes() for p in entries(cache_copy)} == before


def test_opencl_a_damaged_entry_is_a_miss_and_is_replaced(cache_copy):
    for p in entries(cache_copy):
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 0xFF
        p.write_bytes(bytes(data))
    again = run_child(cache_copy)
    assert again["ok"] == [True] * 3
    assert again["hits"] == 0 and again["loads"] == 0 and again["builds"] >= PROGRAMS
    assert again["saves"] == PROGRAMS
    for p in entries(cache_copy):  # whole, valid entries again
        header = p.read_bytes()[len(diskcache._MAGIC):][:32]
        assert hashlib.sha256(image_of(p)).digest() == header
    assert run_child(cache_copy)["builds"] == 0


def test_opencl_a_binary_the_runtime_refuses_is_compiled_again(cache_copy):
    for p in entries(cache_copy):
        rewrite(p, os.urandom(4096))  # intact entries holding no binary at all
    again = run_child(cache_copy)
    assert again["ok"] == [True] * 3
    assert again["hits"] == PROGRAMS and again["refusals"] == PROGRAMS
    assert again["builds"] >= PROGRAMS and again["saves"] == PROGRAMS
    third = run_child(cache_copy)  # the rebuilt binaries replaced the garbage
    assert third["ok"] == [True] * 3 and third["builds"] == 0 and third["refusals"] == 0


def test_opencl_a_binary_of_another_program_is_compiled_again(cache_copy):
    """A real binary of the runtime that lacks the kernels asked for: the data-movement
    program's in the compute entries and a compute program's in its entry."""
    images = {p: image_of(p) for p in entries(cache_copy)}
    (moves,) = [p for p, image in images.items() if b"copy_bytes" in image]
    computes = [p for p in images if p != moves]
    for p in computes:
        rewrite(p, images[moves])
    rewrite(moves, images[computes[0]])
    again = run_child(cache_copy)
    assert again["ok"] == [True] * 3
    assert again["refusals"] == PROGRAMS and again["builds"] >= PROGRAMS
    assert again["saves"] == PROGRAMS


def test_opencl_an_unwritable_folder_warns_once_and_works(opencl_device, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")  # a folder below a file cannot be made
    got = run_child(blocker / "kernels")
    assert got["ok"] == [True] * 3 and got["builds"] >= PROGRAMS
    assert len(got["warnings"]) == 1 and "cannot be written" in got["warnings"][0]
    assert blocker.read_bytes() == b""


def test_opencl_clear_kernel_cache_deletes_the_entries_only(cache_copy, monkeypatch):
    (cache_copy / "notes.txt").write_text("not ours")
    (cache_copy / ".tmp-left-by-a-crash.bin").write_bytes(b"x")
    sizes = sum(p.stat().st_size for p in entries(cache_copy))  # includes the stray file
    monkeypatch.setenv("GPUARRAYS_KERNEL_CACHE", str(cache_copy))
    assert diskcache.usage() == {"folder": str(cache_copy), "entries": PROGRAMS + 1,
                                 "bytes": sizes}
    removed = ga.clear_kernel_cache()
    assert removed == {"folder": str(cache_copy), "entries": PROGRAMS + 1, "bytes": sizes}
    assert sorted(p.name for p in cache_copy.iterdir()) == ["notes.txt"]
    assert ga.clear_kernel_cache()["entries"] == 0


def test_opencl_the_environment_clears_the_cache_at_the_first_compile(cache_copy):
    again = run_child(cache_copy, GPUARRAYS_KERNEL_CACHE_CLEAR="1")
    assert again["ok"] == [True] * 3
    assert again["hits"] == 0 and again["loads"] == 0 and again["builds"] >= PROGRAMS
    assert again["saves"] == PROGRAMS and len(entries(cache_copy)) == PROGRAMS


def test_opencl_off_turns_the_disk_cache_off(opencl_device, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUARRAYS_KERNEL_CACHE", "off")
    assert diskcache.location() is None and diskcache.default() is None
    assert ga.clear_kernel_cache() == {"folder": None, "entries": 0, "bytes": 0}
    # a kernel compiled now, with the cache the launcher would pass, stays in memory only
    impl = opencl_device.impl
    source = ("__kernel void cache_off_probe(__global float *p) "
              "{ p[get_global_id(0)] = 2.5f; }")
    saves = impl.binary_saves
    k = impl.compile_kernel(opencl_device.index, source, "cache_off_probe", ("ptr",),
                            cache=diskcache.default())
    out = ga.empty(4, np.float32, device=opencl_device)
    k.launch([out._raw().ptr], 4, 1)
    assert out.get().tolist() == [2.5] * 4 and impl.binary_saves == saves


def test_opencl_gpuarrays_info_shows_the_cache_folder_and_size(compiled):
    proc = subprocess.run([sys.executable, "-m", "gpuarrays", "info"], capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ, GPUARRAYS_KERNEL_CACHE=str(compiled)))
    assert proc.returncode == 0, proc.stderr
    size = sum(p.stat().st_size for p in entries(compiled))
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("kernel cache:"))
    assert str(compiled) in line and f"{PROGRAMS} entries" in line
    from gpuarrays._common.sizes import format_bytes
    assert format_bytes(size) in line
