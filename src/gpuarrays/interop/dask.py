"""Dask integration: gpuarrays arrays as ``dask.array`` chunks, on every scheduler.

Importing this module registers gpuarrays with Dask (``register()``, idempotent):

* ``dask.array.register_chunk_type(GPUArray)`` and the dispatches Dask calls on chunks:
  ``concatenate_lookup`` (``concat``), ``tensordot_lookup`` (``tensordot``),
  ``einsum_lookup`` and ``take_lookup`` (when the namespace has ``einsum``/``take``),
  ``empty_lookup``, ``divide_lookup``, ``numel_lookup``/``nannumel_lookup`` (the counts of
  ``mean``/``var``/``std``, as gpuarrays arrays on the chunk's device),
  ``to_numpy_dispatch`` (``a.get()``); the functions behind them are looked up on the chunk's
  namespace (``a.__array_namespace__()``) when a task runs, so this module sits in the
  interop layer and never imports the package above it.
* ``dask.sizeof`` (``nbytes``), ``dask.tokenize`` (an array is named by its identity and
  layout: reading device memory to hash it would copy it to the host), and -- when
  ``distributed`` is installed -- ``dask_serialize``/``dask_deserialize``: one host frame
  per array (device -> host staging), rebuilt on the *receiving* process's current device.
* :class:`GPUArraysBackend`, the ``dask.array.backends`` entry point named ``gpuarrays``:
  with ``dask.config.set({"array.backend": "gpuarrays"})``, ``da.ones/zeros/empty/full/
  arange`` and ``da.random.default_rng()`` make gpuarrays chunks on the device current where
  each task runs (a worker's default device).
* :class:`GPUArraysWorker`, a ``distributed`` worker plugin: registers the integration in
  the worker process, sets its default device, its memory limit and (optionally) an
  allocation cache around every task.

Without Dask this module raises ``ImportError`` naming the ``dask`` extra; ``import
gpuarrays`` never imports it.  docs/dask.md is the user's guide.
"""

from __future__ import annotations

import math
import pickle
import threading
from functools import partial

import numpy as np

try:
    import dask.array as da
except ImportError as e:  # pragma: no cover - the extra is installed in the test venv
    raise ImportError("gpuarrays.interop.dask needs Dask: pip install 'gpuarrays[dask]' "
                      f"(dask[array] and distributed); importing it failed: {e}") from e

from dask.array import dispatch as _dispatch
from dask.array.backends import ArrayBackendEntrypoint
from dask.array.core import Array, normalize_chunks
from dask.base import tokenize
from dask.blockwise import blockwise as _blockwise
from dask.layers import ArrayChunkShapeDep
from dask.sizeof import sizeof
from dask.tokenize import normalize_token
from dask.utils import Dispatch

from .._array.array import GPUArray
from .._array.creation import asarray, empty
from .._common.errors import CacheInUseError
from .._common.sizes import parse_size
from .._compute.creation import arange as _ga_arange
from .._compute.creation import full
from .._compute.elementwise import isnan, logical_not
from .._compute.statistical import sum as _ga_sum
from .._memory.cache import AllocCache, cached
from .._memory.devices import _default as _default_device
from .._memory.devices import get_device
from .._memory.stats import memory_stats, set_memory_limit
from ._dask_entry import register_sizeof

__all__ = ["register", "GPUArraysBackend", "GPUArraysWorker", "PhiloxSeed",
           "serialize", "deserialize", "to_gpuarrays_dispatch"]

_float64 = np.dtype(np.float64)


# chunk functions Dask dispatches to ------------------------------------------------------
def _namespace_function(arrays, name: str, what: str):
    """``name`` of the gpuarrays namespace, or ``NotImplementedError`` naming what is missing."""
    first = next((a for a in arrays if isinstance(a, GPUArray)), None)
    if first is None:
        raise TypeError(f"{what}: expected gpuarrays chunks, got "
                        f"{sorted({type(a).__name__ for a in arrays})}")
    fn = getattr(first.__array_namespace__(), name, None)
    if fn is None:
        raise NotImplementedError(
            f"{what} on gpuarrays chunks needs gpuarrays.{name}, which this version of "
            f"gpuarrays does not have (docs/dask.md, 'Limits')")
    return fn


def _concatenate(arrays, axis=0):
    arrays = list(arrays)
    return _namespace_function(arrays, "concat", "dask.array concatenation")(arrays, axis=axis)


def _tensordot(a, b, axes=2):
    return _namespace_function([a, b], "tensordot", "dask.array tensordot/matmul")(
        a, b, axes=axes)


def _einsum(*operands, **kwargs):
    kwargs.pop("casting", None)  # Dask passes NumPy's defaults; gpuarrays has no such options
    kwargs.pop("order", None)
    return _namespace_function(operands, "einsum", "dask.array einsum")(*operands, **kwargs)


def _take(a, indices, axis=None):
    return _namespace_function([a], "take", "dask.array take")(a, indices, axis=axis)


def _empty(shape, dtype=_float64, **kwargs):
    """``empty_lookup``: an uninitialised chunk on the current device (``order``/``like`` ignored)."""
    return empty(shape, dtype)


def _divide(x1, x2, out=None, dtype=None):
    """``divide_lookup`` (``mean``, ``var``): ``x1 / x2``, converted to ``dtype`` when given."""
    if out is not None:
        raise NotImplementedError("dask's divide with out= on gpuarrays chunks")
    result = x1 / x2
    if dtype is not None and np.dtype(dtype) != result.dtype:
        converted = result.astype(dtype)
        result.free()
        result = converted
    return result


def _counted_shape(shape, axis, keepdims):
    if axis is None:
        axis = tuple(range(len(shape)))
    elif not isinstance(axis, (tuple, list)):
        axis = (axis,)
    axis = tuple(ax % len(shape) for ax in axis) if shape else ()
    count = math.prod(shape[ax] for ax in axis)
    if keepdims:
        out = tuple(1 if i in axis else n for i, n in enumerate(shape))
    else:
        out = tuple(n for i, n in enumerate(shape) if i not in axis)
    return count, out


def _numel(x, axis=None, keepdims=False, dtype=None, **kwargs):
    """``numel_lookup``: the element counts a reduction divides by, as an array on ``x``'s device."""
    count, shape = _counted_shape(x.shape, axis, keepdims)
    return full(shape, count, _float64 if dtype is None else dtype, device=x.device)


def _nannumel(x, axis=None, keepdims=False, dtype=None, **kwargs):
    """``nannumel_lookup``: the counts of non-NaN elements (``nanmean``, ``nanvar``)."""
    mask = logical_not(isnan(x))
    try:
        return _ga_sum(mask, axis=tuple(axis) if isinstance(axis, list) else axis,
                       keepdims=keepdims, dtype=dtype)
    finally:
        mask.free()


def _to_numpy(a, **kwargs):
    """``to_numpy_dispatch`` (``x.to_backend("numpy")``): an explicit device -> host copy."""
    return a.get()


to_gpuarrays_dispatch = Dispatch("to_gpuarrays")
"""``x.to_backend("gpuarrays")`` applies it to every chunk: NumPy (or any array ``ga.asarray``
takes) to a gpuarrays array on the current device; a gpuarrays chunk stays as it is."""
to_gpuarrays_dispatch.register(GPUArray, lambda a, **kwargs: a)
to_gpuarrays_dispatch.register(object, lambda a, **kwargs: asarray(a, **kwargs))


def _token(a: GPUArray):
    # An array is named by its identity and layout, not by its values: hashing the values
    # would copy device memory to the host.  A graph that embeds the array keeps it (and its
    # storage, so its id) alive; an array written in place between two graphs keeps its name,
    # so pass name= to da.from_array after writing into it (docs/dask.md).
    return ("gpuarrays.GPUArray", id(a._storage), a._offset, a._shape, a._strides,
            a._dtype.str, str(a._storage.device), a._storage.kind)


# serialisation ---------------------------------------------------------------------------
def serialize(a: GPUArray) -> tuple[dict, list]:
    """``dask_serialize`` for ``distributed``: ``(header, [one host frame])``.

    The frame is a C-ordered host copy of the array's own elements (a view travels as its
    data, not its storage); a freed array raises ``FreedArrayError``.
    """
    host = a.get()  # the staging copy; FreedArrayError before anything else
    dt = host.dtype
    simple = dt.fields is None and dt.subdtype is None
    header = {"shape": list(host.shape), "dtype": dt.str if simple else pickle.dumps(dt),
              "kind": a.kind, "device": str(a.device)}
    return header, [memoryview(host.reshape(-1).view(np.uint8))]


def deserialize(header: dict, frames: list) -> GPUArray:
    """``dask_deserialize``: the array rebuilt on this process's current device.

    That is the device of a ``ga.use_device`` block, else the process's default
    (``GPUARRAYS_DEVICE``, or what :class:`GPUArraysWorker` set), not the sender's: a worker
    owns one device.  The memory kind travels when this device has it, else ``"device"``.
    """
    spec = header["dtype"]
    dt = np.dtype(spec) if isinstance(spec, str) else pickle.loads(spec)
    shape = tuple(header["shape"])
    data = frames[0] if len(frames) == 1 else b"".join(bytes(f) for f in frames)
    host = np.frombuffer(data, dtype=np.uint8).view(dt).reshape(shape)
    dev = get_device(None)
    kind = header["kind"] if header["kind"] in dev.kinds else "device"
    return asarray(host, device=dev, kind=kind)


# registration ----------------------------------------------------------------------------
_lock = threading.RLock()  # the backend's constructor calls register() inside register()
_registered: list[bool] = []


def register() -> None:
    """Register gpuarrays with Dask (and ``distributed`` when installed); idempotent.

    Importing this module calls it; :class:`GPUArraysWorker` and the ``dask.sizeof`` entry
    point make sure worker processes do too, and ``distributed`` calls it (by importing this
    module) in any process that imports gpuarrays, the first time it (de)serialises a
    ``GPUArray`` (``gpuarrays.interop._dask_entry.register_distributed_lazily``).  It also
    registers :class:`GPUArraysBackend` as the ``gpuarrays`` array backend (the entry point
    does the same where installed).
    """
    with _lock:
        if _registered:
            return
        da.register_chunk_type(GPUArray)
        _dispatch.concatenate_lookup.register(GPUArray, _concatenate)
        _dispatch.tensordot_lookup.register(GPUArray, _tensordot)
        _dispatch.einsum_lookup.register(GPUArray, _einsum)
        _dispatch.take_lookup.register(GPUArray, _take)
        _dispatch.empty_lookup.register(GPUArray, _empty)
        _dispatch.divide_lookup.register(GPUArray, _divide)
        _dispatch.numel_lookup.register(GPUArray, _numel)
        _dispatch.nannumel_lookup.register(GPUArray, _nannumel)
        _dispatch.to_numpy_dispatch.register(GPUArray, _to_numpy)
        register_sizeof(sizeof)
        normalize_token.register(GPUArray)(_token)
        try:
            from distributed.protocol import dask_deserialize, dask_serialize
        except ImportError:
            pass  # dask without distributed: nothing travels between processes
        else:
            dask_serialize.register(GPUArray)(serialize)
            dask_deserialize.register(GPUArray)(deserialize)
        _registered.append(True)
        # The backend is also the "dask.array.backends" entry point; registering it here
        # makes array.backend = "gpuarrays" work where the entry points are not installed
        # (a source checkout on PYTHONPATH).
        from dask.array.backends import array_creation_dispatch

        array_creation_dispatch.register_backend("gpuarrays", GPUArraysBackend())


# the "gpuarrays" array backend -------------------------------------------------------------
class PhiloxSeed(np.random.SeedSequence):
    """The "bit generator" Dask's ``da.random.default_rng()`` spawns per chunk under the
    gpuarrays backend: a ``numpy.random.SeedSequence`` whose chunks are generated by
    ``gpuarrays.random.default_rng(seed)`` (Philox4x32-10 on the device)."""

    def __init__(self, seed=None, **kwargs) -> None:
        if isinstance(seed, np.random.SeedSequence):
            super().__init__(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size,
                             n_children_spawned=seed.n_children_spawned)
        else:
            super().__init__(seed, **kwargs)

    @property
    def _seed_seq(self) -> np.random.SeedSequence:
        return self  # the attribute Dask spawns from


def _creation_args(shape, chunks, dtype, name, order, kwargs, what: str):
    kwargs.pop("meta", None)  # chunks are made on each task's device; the meta is ours
    if kwargs:
        raise TypeError(f"da.{what} with the gpuarrays backend got unexpected arguments "
                        f"{sorted(kwargs)}")
    if order not in ("C", None):
        raise ValueError(f"da.{what} with the gpuarrays backend makes C-ordered chunks only, "
                         f"got order={order!r}")
    if isinstance(shape, np.ndarray):
        shape = shape.tolist()
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    dev = get_device(None)
    dt = dev.dtype_of(dtype)  # None: the device's default floating type, as ga.ones
    return shape, normalize_chunks(chunks, shape, dtype=dt), dt


def _full_block(shape, *, dtype, fill_value):
    return full(shape, fill_value, dtype)


def _empty_block(shape, *, dtype):
    return empty(shape, dtype)


def _blocks(func, what: str, shape, chunks, dtype, name, **kwargs) -> Array:
    name = name or f"{what}-gpuarrays-" + tokenize(what, shape, chunks, dtype, kwargs)
    index = tuple(range(len(shape)))
    graph = _blockwise(partial(func, dtype=dtype, **kwargs), name, index,
                       ArrayChunkShapeDep(chunks), index, numblocks={})
    return Array(graph, name, chunks, dtype=dtype, meta=empty((0,) * len(shape), dtype))


def _arange_block(start, stop, step, length, dtype):
    a = _ga_arange(start, stop, step, dtype=dtype)  # as ga.arange: on the host, then uploaded
    if len(a) <= length:
        return a
    b = a[:length].copy()  # float steps can give one element too many, as in NumPy
    a.free()
    return b


class GPUArraysBackend(ArrayBackendEntrypoint):
    """The ``dask.array.backends`` entry point named ``gpuarrays`` (pyproject.toml).

    Chunks are made when a task runs, on the device current there (a worker's default
    device); the meta is a zero-size gpuarrays array made where the collection is built.
    ``da.random.default_rng(seed)`` spawns one :class:`PhiloxSeed` per chunk and generates
    each chunk with ``gpuarrays.random`` (the legacy ``RandomState`` is not offered).
    """

    def __init__(self) -> None:
        register()

    @classmethod
    def to_backend_dispatch(cls):
        return to_gpuarrays_dispatch

    @classmethod
    def to_backend(cls, data: Array, **kwargs) -> Array:
        if isinstance(data._meta, GPUArray):
            return data
        return data.map_blocks(to_gpuarrays_dispatch, **kwargs)

    @property
    def RandomState(self):
        raise NotImplementedError(
            "the gpuarrays Dask backend has no legacy RandomState; use "
            "dask.array.random.default_rng(seed), whose chunks come from gpuarrays.random")

    @property
    def default_bit_generator(self):
        return PhiloxSeed

    @staticmethod
    def ones(shape, *, dtype=None, chunks="auto", name=None, order="C", **kwargs) -> Array:
        shape, chunks, dt = _creation_args(shape, chunks, dtype, name, order, kwargs, "ones")
        return _blocks(_full_block, "ones", shape, chunks, dt, name, fill_value=1)

    @staticmethod
    def zeros(shape, *, dtype=None, chunks="auto", name=None, order="C", **kwargs) -> Array:
        shape, chunks, dt = _creation_args(shape, chunks, dtype, name, order, kwargs, "zeros")
        return _blocks(_full_block, "zeros", shape, chunks, dt, name, fill_value=0)

    @staticmethod
    def empty(shape, *, dtype=None, chunks="auto", name=None, order="C", **kwargs) -> Array:
        shape, chunks, dt = _creation_args(shape, chunks, dtype, name, order, kwargs, "empty")
        return _blocks(_empty_block, "empty", shape, chunks, dt, name)

    @staticmethod
    def full(shape, fill_value, *, dtype=None, chunks="auto", name=None, order="C",
             **kwargs) -> Array:
        if np.ndim(fill_value) != 0:
            raise ValueError(f"fill_value must be a scalar, got {type(fill_value).__name__}")
        if dtype is None:
            dtype = np.asarray(fill_value).dtype
        shape, chunks, dt = _creation_args(shape, chunks, dtype, name, order, kwargs, "full")
        return _blocks(_full_block, "full", shape, chunks, dt, name, fill_value=fill_value)

    @staticmethod
    def arange(start=None, /, stop=None, step=1, *, chunks="auto", like=None, dtype=None,
               **kwargs) -> Array:
        if kwargs:
            raise TypeError(f"da.arange with the gpuarrays backend got unexpected arguments "
                            f"{sorted(kwargs)}")
        if start is None and stop is None:
            raise TypeError("arange() requires stop to be specified.")
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ValueError(f"arange step must not be zero, got step={step!r}")
        num = int(max(math.ceil((stop - start) / step), 0))
        dt = (np.arange(type(start)(0), type(stop)(0), step).dtype if dtype is None
              else np.dtype(dtype))
        get_device(None).require(dt)
        chunks = normalize_chunks(chunks, (num,), dtype=dt)
        name = "arange-gpuarrays-" + tokenize(start, stop, step, chunks, dt)
        graph = {}
        done = 0
        for i, n in enumerate(chunks[0]):
            graph[(name, i)] = (_arange_block, start + done * step, start + (done + n) * step,
                                step, n, dt)
            done += n
        return Array(graph, name, chunks, dtype=dt, meta=empty((0,), dt))


# the distributed worker plugin -------------------------------------------------------------
try:
    from distributed import WorkerPlugin as _WorkerPlugin
except ImportError:  # dask without distributed: the plugin is not offered
    _WorkerPlugin = None


if _WorkerPlugin is not None:

    class GPUArraysWorker(_WorkerPlugin):
        """A ``distributed`` worker plugin: ``client.register_plugin(GPUArraysWorker(...))``.

        In every worker process (present and future) it:

        * registers the Dask integration (:func:`register`);
        * makes ``device`` the process's default device, so chunks made by tasks and arrays
          received from other workers land there (a spec such as ``"cuda:1"``, or a function
          of the worker returning one, for one worker per device; ``None`` keeps the default:
          ``GPUARRAYS_DEVICE``, else the first accelerator, else ``cpu:0``);
        * sets ``memory_limit`` on that device (``ga.set_memory_limit``: ``"8GiB"``, ``"75%"``,
          bytes; ``None`` leaves ``GPUARRAYS_MEMORY_LIMIT`` or no limit);
        * with ``cache=True``, runs every task of the worker inside ``ga.cached(cache)`` with
          one ``ga.AllocCache`` per worker, so equal-sized chunks reuse buffers (the
          out-of-memory ladder takes its unused buffers back when the limit is reached);
          teardown (worker close or ``client.unregister_worker_plugin``) gives the buffers
          back to the pool, and the memory limit it replaced comes back.

        Registering another ``GPUArraysWorker`` replaces this one (same plugin name).
        """

        name = "gpuarrays"
        idempotent = False

        def __init__(self, device=None, memory_limit=None, cache: bool = False) -> None:
            if memory_limit is not None and not isinstance(memory_limit, (int, str)):
                raise TypeError(f"memory_limit must be a size (int or str like '8GiB'), got "
                                f"{type(memory_limit).__name__} {memory_limit!r}")
            if isinstance(memory_limit, str):
                parse_size(memory_limit, 100)  # a bad size fails here, not on every worker
            self.device = device
            self.memory_limit = memory_limit
            self.cache = bool(cache)
            self._cache = None
            self._worker = None
            self._restore_limit = None

        def setup(self, worker) -> None:
            register()
            spec = self.device(worker) if callable(self.device) else self.device
            if spec is not None:
                _default_device[:] = [get_device(spec)]  # the process default (devices.py)
            dev = get_device(None)
            if self.memory_limit is not None:
                self._restore_limit = (dev, memory_stats(dev)["limit_bytes"])
                set_memory_limit(self.memory_limit, dev)
            if self.cache:
                # Tasks run in a thread, in a copy of the contextvars of the worker's
                # ``execute`` coroutine of that task: the scope opened here is the one the
                # task's allocations see (a wrapper around the executor would not be: the
                # copy is taken before the executor is called).
                self._cache = cache = AllocCache()
                plain = worker.execute

                async def execute(key, *, stimulus_id):
                    with cached(cache):
                        return await plain(key, stimulus_id=stimulus_id)

                worker.execute = execute
                self._worker = worker

        def teardown(self, worker) -> None:
            if self._worker is not None:
                del self._worker.execute  # back to the class's method
                self._worker = None
            if self._cache is not None:
                try:
                    self._cache.free()
                except CacheInUseError:
                    pass  # tasks still run in it: its buffers go back when it is collected
                self._cache = None
            if self._restore_limit is not None:
                dev, limit = self._restore_limit
                set_memory_limit(limit, dev)
                self._restore_limit = None

else:  # pragma: no cover - distributed is part of the dask extra

    class GPUArraysWorker:  # type: ignore[no-redef]
        """Needs ``distributed``: ``pip install 'gpuarrays[dask]'``."""

        def __init__(self, *args, **kwargs) -> None:
            raise ImportError("GPUArraysWorker needs distributed: pip install 'gpuarrays[dask]'")


register()
