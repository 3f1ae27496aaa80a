"""gpuarrays chunks in dask.array on the threaded scheduler (docs/dask.md).

Every graph runs on each device of the shared suite, NumPy's result on the same values is the
oracle, and the chunk type is checked: the meta and every computed result are ``GPUArray`` on
the device.  The cluster tests are in ``test_dask_distributed.py``.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask[array] is not installed (the dask extra)")
import dask  # noqa: E402
from strategies import STRUCT_DTYPE, pair, same_values, supported  # noqa: E402

import gpuarrays as ga  # noqa: E402
import gpuarrays.interop.dask as gd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
F8 = np.dtype(np.float64)


def on(device, h: np.ndarray, chunks) -> da.Array:
    """``h`` as a dask array of gpuarrays chunks on ``device`` (the map_blocks way)."""
    return da.from_array(h, chunks=chunks).map_blocks(
        partial(ga.asarray, device=device), meta=ga.empty((0,) * h.ndim, h.dtype, device=device))


def computed(x: da.Array, device, scheduler: str = "threads") -> np.ndarray:
    """Check the meta and the computed chunk type, return the result's values."""
    assert type(x._meta) is ga.GPUArray and (x._meta.size == 0 or x._meta.ndim == 0)
    r = x.compute(scheduler=scheduler)
    assert type(r) is ga.GPUArray, type(r)
    assert r.device == device
    return r.get()


def close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.fixture
def values(device):
    dt = supported(device, [F8])[0] if supported(device, [F8]) else np.dtype(np.float32)
    n, _ = pair((12, 10), dt, device)
    return n


# registration ----------------------------------------------------------------------------
def test_import_gpuarrays_never_imports_dask():
    code = ("import sys, gpuarrays; import gpuarrays.interop, gpuarrays.interop._dask_entry; "
            "print([m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')])")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_entry_points_name_what_the_module_offers():
    """The entry points of pyproject.toml load and work as Dask calls them (read from the
    file: a checkout on PYTHONPATH has no installed metadata)."""
    from importlib.metadata import EntryPoint

    from dask.utils import Dispatch

    tomllib = pytest.importorskip("tomllib", reason="Python 3.10 has no tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    points = project["entry-points"]
    assert set(points["dask.array.backends"]) == set(points["dask.sizeof"]) == {"gpuarrays"}
    backend = EntryPoint("gpuarrays", points["dask.array.backends"]["gpuarrays"],
                         "dask.array.backends").load()()  # as CreationDispatch.dispatch does
    assert isinstance(backend, da.backends.ArrayBackendEntrypoint)
    assert type(backend.ones((3,), chunks=2)._meta) is ga.GPUArray
    registrar = EntryPoint("gpuarrays", points["dask.sizeof"]["gpuarrays"], "dask.sizeof").load()
    sizeof = Dispatch("sizeof")
    registrar(sizeof)  # as dask.sizeof does at import
    assert sizeof(ga.empty((4, 5), "f4")) == 80
    assert {"dask[array]>=2024.12", "distributed>=2024.12"} <= set(
        project["optional-dependencies"]["dask"])
    assert set(project["optional-dependencies"]["dask"]) <= set(
        project["optional-dependencies"]["test"])


def test_register_is_idempotent_and_sizeof_is_nbytes(device):
    from dask.sizeof import sizeof

    gd.register()
    gd.register()
    a = ga.zeros((5, 7), "i2", device=device)
    assert sizeof(a) == a.nbytes == 70
    assert sizeof(a[1:3, ::2]) == 2 * 4 * 2  # a view counts its own elements
    assert da.core.is_valid_chunk_type(ga.GPUArray)
    assert da.dispatch.concatenate_lookup.dispatch(ga.GPUArray) is gd._concatenate


def test_the_dispatched_chunk_functions(device):
    """What Dask's lookups return for gpuarrays chunks, against NumPy's registrations."""
    from dask.array import dispatch as d

    n, g = pair((4, 3, 2), "f4", device)
    n[1, 2, 0] = g[1, 2, 0] = np.nan
    for kwargs in [{}, {"axis": (0, 2), "keepdims": True}, {"axis": 1}, {"axis": (2,)}]:
        for lookup in (d.numel_lookup, d.nannumel_lookup):
            got = lookup(g, **kwargs)
            assert type(got) is ga.GPUArray and got.device == device
            want = lookup(n, **kwargs)
            np.testing.assert_array_equal(got.get(), want, err_msg=f"{lookup} {kwargs}")
    q = d.divide_lookup(g, ga.full((1, 1, 1), 2.0, "f4", device=device), dtype="f4")
    np.testing.assert_array_equal(q.get(), n / 2)
    assert d.divide_lookup(g, 2.0).dtype == np.float32
    e = d.empty_lookup.dispatch(ga.GPUArray)((2, 5), dtype="i2")
    assert type(e) is ga.GPUArray and e.shape == (2, 5) and e.dtype == np.int16
    same_values(d.to_numpy_dispatch(g), n)
    if not hasattr(ga, "einsum"):  # registered for the day the namespace has it
        with pytest.raises(NotImplementedError, match="needs gpuarrays.einsum"):
            d.einsum_lookup.dispatch(ga.GPUArray)("ij->j", g[0])


def test_tokens_name_arrays_without_reading_them(device):
    from dask.base import tokenize

    a = ga.arange(10, device=device)
    b = ga.arange(10, device=device)
    assert tokenize(a) == tokenize(a)
    assert tokenize(a) != tokenize(b)  # equal values, different arrays
    assert tokenize(a[2:]) != tokenize(a[3:])
    t = tokenize(b)
    b.free()
    assert tokenize(b) == t  # naming never reads the elements (they are gone here)


def test_numpy_calls_dask_makes_on_chunks(device):
    """Two NumPy behaviours dask relies on: ``np.add(a, b, dtype=dt)`` (tensordot's partial
    sums) when ``dt`` is the dtype the call gives anyway, and NumPy's words in the error of a
    reduction without identity over zero elements (min/max metas)."""
    n, g = pair((3, 4), "f4", device)
    r = np.add(g, g, dtype=np.float32)
    assert r.device == device
    same_values(r.get(), np.add(n, n, dtype=np.float32))
    ni, gi = pair((5,), "i2", device)
    same_values(np.multiply(gi, 3, dtype="i2").get(), np.multiply(ni, 3, dtype="i2"))
    got = np.add(g, g, dtype=np.float64)  # a dtype that changes the computation: NumPy's loop
    assert got.dtype == np.float64
    same_values(got.get(), np.add(n, n, dtype=np.float64))
    with pytest.raises(TypeError):  # float32 -> int32 is no same_kind cast: NumPy refuses too
        np.add(g, g, dtype=np.int32)
    with pytest.raises(TypeError):  # NumPy has no float32 loop for less: refused alike
        np.less(g, g, dtype=np.float32)
    with pytest.raises(ValueError, match="zero-size array to reduction operation max"):
        ga.max(ga.empty((0, 3), device=device), axis=0)


# serialisation ------------------------------------------------------------------------------
def test_serialize_round_trip_views_and_dtypes(device):
    for dt in supported(device, [np.dtype("f4"), np.dtype("c8"), np.dtype("u1"),
                                 np.dtype("bool"), STRUCT_DTYPE]):
        n, g = pair((6, 4), dt, device)
        for src_n, src_g in [(n, g), (n.T, g.T), (n[::-2, 1], g[::-2, 1]), (n[:0], g[:0]),
                             (n[2, 3], g[2, 3])]:
            header, frames = gd.serialize(src_g)
            assert len(frames) == 1 and frames[0].nbytes == src_n.nbytes  # its own data only
            with ga.use_device(device):
                back = gd.deserialize(header, frames)
            assert type(back) is ga.GPUArray and back.device == device
            assert back.storage is not g.storage and back.flags.c_contiguous
            same_values(back.get(), src_n.copy(order="C"))


def test_deserialize_lands_on_the_receiving_device(device):
    header, frames = gd.serialize(ga.arange(6, device=device))
    for dev in ga.devices():
        with ga.use_device(dev):
            assert gd.deserialize(header, frames).device == dev


def test_pickle_5_sends_the_data_out_of_band(device):
    n, g = pair((64, 32), "i4", device)
    buffers = []
    data = pickle.dumps(g[::2], protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1 and memoryview(buffers[0]).nbytes == n[::2].nbytes
    assert len(data) < 400  # the pickle itself carries no elements
    back = pickle.loads(data, buffers=buffers)
    assert back.device == device
    same_values(back.get(), n[::2])


def test_a_freed_array_refuses_to_travel(device):
    a = ga.ones(4, device=device)
    b = a[1:]
    a.free()
    with pytest.raises(ga.FreedArrayError):
        gd.serialize(a)
    with pytest.raises(ga.FreedArrayError):
        pickle.dumps(a, protocol=5, buffer_callback=lambda b: None)
    same_values(b.get(), np.ones(3))  # a view holds its own handle


# graphs on the threaded scheduler -----------------------------------------------------------
def test_elementwise_pipeline(device, values):
    x = on(device, values, (5, 4))
    y = da.sin(x) * 2 + x ** 2 - 1.5 / (abs(x) + 1)
    want = np.sin(values) * 2 + values ** 2 - 1.5 / (abs(values) + 1)
    np.testing.assert_allclose(computed(y, device), want, rtol=1e-6 if values.dtype == "f4"
                               else 1e-12)
    n, _ = pair((9, 7), "i4", device)
    xi = on(device, n, 4)
    same_values(computed((xi * 3 + 7) // 2 % 5 - (xi > 0), device),
                (n * 3 + 7) // 2 % 5 - (n > 0))


def test_slicing_rechunk_and_transpose(device, values):
    x = on(device, values, (5, 4))
    same_values(computed(x[2:11:3, ::-1], device), values[2:11:3, ::-1])
    same_values(computed(x.rechunk((12, 3)), device), values)
    same_values(computed(x.T.rechunk(7), device), values.T)


def test_reductions_over_axes(device, values):
    x = on(device, values, (5, 4))
    rtol = 1e-5 if values.dtype == "f4" else 1e-12
    for axis in [None, 0, 1, (0, 1)]:
        for keepdims in [False, True]:
            for name in ["sum", "mean", "std"]:
                got = computed(getattr(x, name)(axis=axis, keepdims=keepdims), device)
                want = getattr(values, name)(axis=axis, keepdims=keepdims)
                np.testing.assert_allclose(got, want, rtol=rtol, err_msg=f"{name} {axis}")
    np.testing.assert_allclose(computed(x.var(axis=0, ddof=1), device),
                               values.var(axis=0, ddof=1), rtol=rtol)


def test_min_and_max_over_axes(device, values):
    x = on(device, values, (5, 4))
    for axis in [None, 0, 1]:
        for name in ["min", "max"]:
            # dask builds these metas with np.array([], like=meta, ndmin=...) (NEP 35)
            got = computed(getattr(x, name)(axis=axis, keepdims=axis == 1), device)
            same_values(got, getattr(values, name)(axis=axis, keepdims=axis == 1))


def test_map_blocks(device, values):
    x = on(device, values, (5, 4))
    y = x.map_blocks(lambda b: b * 2 + 1, meta=x._meta)
    close(computed(y, device), values * 2 + 1)
    z = x.map_blocks(ga.exp)  # dtype and meta inferred by dask on a small gpuarrays array
    np.testing.assert_allclose(computed(z, device), np.exp(values), rtol=1e-6)


def test_a_cache_around_compute_serves_the_tasks(device, values):
    x = on(device, values, (3, 10))  # four equal chunks: the cache hands buffers out again
    cache = ga.AllocCache()
    with ga.cached(cache):
        r = (x * 2 + 1).compute(scheduler="threads", num_workers=1)  # one task at a time
    assert cache.misses > 0 and cache.hits > 0
    close(r.get(), values * 2 + 1)
    del r
    cache.free()


def test_concatenate_and_stack(device, values):
    x = on(device, values, (5, 4))
    same_values(computed(da.concatenate([x, x[:3]], axis=0), device),
                np.concatenate([values, values[:3]], axis=0))
    same_values(computed(da.concatenate([x, x[:, :1]], axis=1), device),
                np.concatenate([values, values[:, :1]], axis=1))
    same_values(computed(da.stack([x, x + 1]), device), np.stack([values, values + 1]))


def test_tensordot_and_matmul(device, values):
    x = on(device, values, (5, 4))
    rtol = 1e-5 if values.dtype == "f4" else 1e-12
    np.testing.assert_allclose(computed(x @ x.T, device), values @ values.T, rtol=rtol)
    np.testing.assert_allclose(computed(da.tensordot(x, x, axes=([0], [0])), device),
                               np.tensordot(values, values, axes=([0], [0])), rtol=rtol)


def test_from_array_of_a_gpuarray(device, values):
    g = ga.asarray(values, device=device)
    x = da.from_array(g, chunks=(5, 4), asarray=False)
    assert x.dtype == values.dtype
    same_values(computed(x * 1, device), values)


def test_to_backend_numpy_and_back(device, values):
    x = on(device, values, (5, 4))
    h = x.to_backend("numpy")
    assert type(h._meta) is np.ndarray
    same_values(h.compute(scheduler="threads"), values)
    g = da.from_array(values, chunks=(5, 4)).to_backend("gpuarrays")
    assert type(g._meta) is ga.GPUArray
    same_values(computed(g, ga.get_device()), values)  # chunks go to the current device


def test_the_sizeof_entry_point_loads_the_integration_on_first_use():
    """In a process where Dask only ran the ``dask.sizeof`` entry point (a worker before it
    imported anything of ours), the first chunk Dask measures registers everything."""
    code = (
        "import sys, gpuarrays as ga\n"
        "from dask.sizeof import sizeof\n"
        "from gpuarrays.interop._dask_entry import register_sizeof\n"
        "register_sizeof(sizeof)\n"
        "assert 'gpuarrays.interop.dask' not in sys.modules\n"
        "assert sizeof(ga.zeros((3, 4))) == 96\n"
        "from dask.array.dispatch import concatenate_lookup\n"
        "import gpuarrays.interop.dask as gd\n"
        "assert concatenate_lookup.dispatch(ga.GPUArray) is gd._concatenate\n"
        "print('registered')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "registered"


# the gpuarrays backend ----------------------------------------------------------------------
@pytest.fixture
def backend():
    """``array.backend = "gpuarrays"`` (importing gpuarrays.interop.dask registered it)."""
    with dask.config.set({"array.backend": "gpuarrays"}):
        yield


def test_backend_creation_functions(backend, device):
    """Chunks are made on the device current where the tasks run: the threaded scheduler
    runs them in copies of the caller's contextvars, so ``ga.use_device`` reaches them."""
    with ga.use_device(device):
        _creation_cases(device)


def _creation_cases(dev):
    cases = [(da.ones((5, 4), chunks=2), np.ones((5, 4))),
             (da.zeros(7, chunks=3, dtype="i4"), np.zeros(7, "i4")),
             (da.full((3, 3), 2.5, chunks=2), np.full((3, 3), 2.5)),
             (da.full((4,), 7, chunks=3), np.full((4,), 7)),
             (da.arange(10, chunks=4), np.arange(10)),
             (da.arange(0, 1, 0.1, chunks=3), np.arange(0, 1, 0.1)),
             (da.arange(3, 20, 4, chunks=2, dtype="i2"), np.arange(3, 20, 4, dtype="i2"))]
    if not dev.supports(F8):
        cases = [(x, want) for x, want in cases if want.dtype != F8]
    for x, want in cases:
        same_values(computed(x, dev), want)
    e = da.empty((3, 5), chunks=2, dtype="f4")
    assert computed(e, dev).shape == (3, 5)


def test_backend_random_is_reproducible(backend):
    dev = ga.get_device()
    rng = da.random.default_rng(42)
    x = rng.random((50, 40), chunks=(20, 15))
    u = computed(x, dev)
    assert u.shape == (50, 40) and u.dtype == F8 and 0 <= u.min() and u.max() < 1
    same_values(computed(da.random.default_rng(42).random((50, 40), chunks=(20, 15)), dev), u)
    assert not np.array_equal(computed(da.random.default_rng(43).random((50, 40),
                                                                        chunks=(20, 15)), dev), u)
    z = computed(da.random.default_rng(1).standard_normal(4000, chunks=1000), dev)
    assert abs(z.mean()) < 0.1 and abs(z.std() - 1) < 0.1


def test_backend_refuses_what_it_cannot_make(backend):
    with pytest.raises(ValueError, match="C-ordered"):
        da.ones((3, 3), order="F")
    with pytest.raises(NotImplementedError, match="default_rng"):
        da.random.RandomState(1)
    with pytest.raises(ValueError, match="scalar"):
        da.full((2,), [1, 2])
