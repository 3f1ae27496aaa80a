"""``import gpuarrays`` alone makes a ``distributed`` client, scheduler and workers exchange
gpuarrays chunks, whatever the import order (docs/dask.md, "What registration does").

Each client is a script run in a fresh process that imports only ``gpuarrays``,
``dask.array``, ``numpy`` and ``distributed`` -- nothing of ``gpuarrays.interop``, no worker
plugin -- and computes a graph on its own two-process ``LocalCluster`` with chunks on cpu:0.
One fixture starts every script at once, so the module costs about one cluster's start-up.
The serialisation checks without a cluster hide the ``dask.sizeof`` entry point (a source
checkout has none), which otherwise imports gpuarrays inside ``import dask`` and so before
``distributed.protocol``: there ``distributed`` imported first is the other branch of the
registration (gpuarrays registers with it directly).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("dask.array", reason="dask[array] is not installed (the dask extra)")
pytest.importorskip("distributed", reason="distributed is not installed (the dask extra)")

ROOT = Path(__file__).resolve().parents[1]

# Every script starts from one fixture: its tests share a pytest-xdist worker.
pytestmark = pytest.mark.xdist_group("dask-client")

IMPORTS = {
    "gpuarrays first": "import gpuarrays as ga\nimport dask.array as da\n"
                       "from distributed import Client, LocalCluster\n",
    "distributed first": "from distributed import Client, LocalCluster\n"
                         "import dask.array as da\nimport gpuarrays as ga\n",
}

CLIENT = """
import sys
import numpy as np

assert "gpuarrays.interop.dask" not in sys.modules, "imported eagerly"

if __name__ == "__main__":
    h = np.random.default_rng(7).random((60, 40))
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        x = da.from_array(h, chunks=(15, 20)).map_blocks(
            ga.asarray, meta=ga.empty((0, 0), h.dtype))
        r = (x - x.mean(0)).sum(1).compute()
        assert type(r) is ga.GPUArray, type(r)
        assert str(r.device) == "cpu:0", r.device
        np.testing.assert_allclose(r.get(), (h - h.mean(0)).sum(1), rtol=1e-12, atol=1e-12)
        workers = client.run(lambda: "gpuarrays.interop.dask" in sys.modules)
        assert len(workers) == 2 and all(workers.values()), workers
    print("ok")
"""


# Before Dask is imported: Dask reads entry points with importlib.metadata, or on Python < 3.12
# with the importlib_metadata backport.
HIDE_OUR_SIZEOF_ENTRY_POINT = """
import importlib.metadata

def without_ours(plain):
    return lambda **kw: type(plain(**kw))(
        e for e in plain(**kw) if not e.value.startswith("gpuarrays."))

importlib.metadata.entry_points = without_ours(importlib.metadata.entry_points)
try:
    import importlib_metadata
except ImportError:
    pass
else:
    importlib_metadata.entry_points = without_ours(importlib_metadata.entry_points)
"""

ROUND_TRIP = """
import sys
from distributed.protocol import dask_serialize, deserialize, serialize

assert "gpuarrays.interop.dask" not in sys.modules, "imported eagerly"
assert "gpuarrays" in dask_serialize._lazy, "no lazy registration"
header, frames = serialize(ga.arange(12.0).reshape(3, 4)[:, 1:3], serializers=("dask",))
assert header["serializer"] == "dask", header
back = deserialize(header, frames)
assert type(back) is ga.GPUArray and back.get().tolist() == [[1, 2], [5, 6], [9, 10]]
assert "gpuarrays.interop.dask" in sys.modules  # loaded by the first dispatch
module = sys.modules["distributed.protocol.serialize"]
assert module.__loader__ is module.__spec__.loader and "RunAfter" not in repr(module.__loader__)
assert not [f for f in sys.meta_path if "AfterImport" in repr(f)], sys.meta_path
print("ok")
"""

# name: the script; every script prints "ok" when its checks pass
SCRIPTS = {f"cluster, {order}": imports + CLIENT for order, imports in IMPORTS.items()}
SCRIPTS.update({
    # Without the entry point nothing imports gpuarrays inside `import distributed`: with
    # distributed imported first, gpuarrays registers with it directly; the other way, the
    # one-shot finder does when distributed.protocol.serialize is imported.
    "no entry point, distributed first": (HIDE_OUR_SIZEOF_ENTRY_POINT + "import distributed\n"
                                          "import gpuarrays as ga\n" + ROUND_TRIP),
    "no entry point, gpuarrays first": (HIDE_OUR_SIZEOF_ENTRY_POINT + "import gpuarrays as ga\n"
                                        "import distributed\n" + ROUND_TRIP),
})


def _env() -> dict:
    # cpu:0 is every process's default device (the workers inherit the environment); the
    # checkout's sources come first, as in the other subprocess tests.
    return {**os.environ, "GPUARRAYS_DEVICE": "cpu:0", "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """Every script, all started at once; ``{name: (returncode, stdout, stderr)}``."""
    folder = tmp_path_factory.mktemp("dask_client")
    running = {}
    try:
        for i, (name, code) in enumerate(SCRIPTS.items()):
            script = folder / f"script_{i}.py"  # a file: spawned workers re-import __main__
            script.write_text(textwrap.dedent(code))
            running[name] = subprocess.Popen([sys.executable, str(script)], cwd=folder,
                                             env=_env(), stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True)
        done = {}
        for name, proc in running.items():
            out, err = proc.communicate(timeout=120)
            done[name] = (proc.returncode, out, err)
        return done
    finally:
        for proc in running.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def _passed(runs: dict, name: str) -> None:
    returncode, out, err = runs[name]
    assert returncode == 0 and out.strip() == "ok", f"{name}: {err[-4000:]}"


@pytest.mark.parametrize("order", list(IMPORTS))
def test_a_client_that_imports_only_gpuarrays_computes_on_a_cluster(runs, order):
    """The regression: the client failed with ``TypeError: No dispatch for <class
    'gpuarrays._array.array.GPUArray'>`` receiving the result from a worker."""
    _passed(runs, f"cluster, {order}")


@pytest.mark.parametrize("first", ["distributed", "gpuarrays"])
def test_serialisation_is_registered_without_the_entry_point(runs, first):
    _passed(runs, f"no entry point, {first} first")
