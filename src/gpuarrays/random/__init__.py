"""``gpuarrays.random``: counter-based random numbers, the same on every back-end.

``rng = ga.random.default_rng(seed)`` gives a :class:`Generator` modelled on
NumPy's.  Its numbers come from Philox4x32-10 (key + counter, no other
state), computed by the same algorithm on the cpu engine and in the device
kernels, so **the same seed and the same calls give bit-identical arrays on
cpu, opencl and cuda**, whatever the launch shape (docs/random.md).

Results are new arrays from the pool or the active ``ga.cached`` scope, on
the generator's device (``device=`` on a call overrides it); a call with
``size=None`` gives a 0-d array, not a host scalar.  Every argument is
checked before anything is allocated or the counter moves: a bad bound, size
or scale is a ``ValueError``, a dtype the method cannot make a
``ga.UnsupportedDTypeError`` (a ``TypeError``), float64 on a device without it
the same error naming the device.
"""

from __future__ import annotations

import math
import operator
import threading

import numpy as np

from .._array.array import GPUArray
from .._array.functions import copyto
from .._array.layout import normalize_shape
from .._array.make import new_array
from .._common.errors import UnsupportedDTypeError
from .._compute import rng as _rng
from .._memory.devices import Device, devices, get_device

__all__ = ["Generator", "default_rng"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_MAX_COUNTER = 1 << 64


def _seed_sequence(seed) -> np.random.SeedSequence:
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, (bool, np.bool_)) or isinstance(seed, (float, complex, str, bytes)):
        raise TypeError(f"seed must be None, a non-negative int, a sequence of them or a "
                        f"numpy.random.SeedSequence, got {seed!r}")
    return np.random.SeedSequence(seed)  # None: fresh entropy; ValueError for negatives


def _key(ss: np.random.SeedSequence) -> tuple[int, int]:
    k0, k1 = (int(w) for w in ss.generate_state(2, np.uint32))
    return k0, k1


def _finite(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    return v


class Generator:
    """Random numbers from Philox4x32-10 with a key from ``seed`` (see the module docstring).

    The state is the key (from a ``numpy.random.SeedSequence``) and a 64-bit
    block counter that each call advances by the blocks it used; it pickles
    (the device travels as its spec; unpickled where no such device exists,
    the generator uses the current device).  ``spawn(n)`` gives independent
    children.  One generator may be used from several threads: a call holds
    its lock while it takes its blocks, so no two calls share numbers.
    """

    __slots__ = ("_seq", "_key", "_counter", "_device", "_lock")

    def __init__(self, seed=None, *, device=None) -> None:
        self._seq = _seed_sequence(seed)
        self._key = _key(self._seq)
        self._counter = 0
        self._device = None if device is None else get_device(device)
        self._lock = threading.Lock()

    # state ------------------------------------------------------------------------
    @property
    def device(self) -> Device:
        """The device results go to when a call names none (the current device if unset)."""
        return get_device(self._device)

    @property
    def state(self) -> dict:
        """``{"algorithm", "key", "counter"}``: the key words and the next block."""
        return {"algorithm": "philox4x32-10", "key": self._key, "counter": self._counter}

    def spawn(self, n_children: int) -> list[Generator]:
        """``n_children`` independent generators (keys of ``SeedSequence.spawn``), same device."""
        n = operator.index(n_children)
        if n < 0:
            raise ValueError(f"spawn() needs a non-negative number of children, got {n}")
        with self._lock:
            seqs = self._seq.spawn(n)
        children = []
        for seq in seqs:
            child = Generator(seq)
            child._device = self._device
            children.append(child)
        return children

    def __getstate__(self) -> dict:
        s = self._seq
        return {"entropy": s.entropy, "spawn_key": s.spawn_key, "pool_size": s.pool_size,
                "n_children_spawned": s.n_children_spawned, "counter": self._counter,
                "device": None if self._device is None else str(self._device)}

    def __setstate__(self, state: dict) -> None:
        self._seq = np.random.SeedSequence(
            state["entropy"], spawn_key=state["spawn_key"], pool_size=state["pool_size"],
            n_children_spawned=state["n_children_spawned"])
        self._key = _key(self._seq)
        self._counter = state["counter"]
        self._lock = threading.Lock()
        spec = state["device"]
        self._device = (get_device(spec) if spec is not None
                        and spec in {str(d) for d in devices()} else None)

    def __repr__(self) -> str:
        dev = "current" if self._device is None else str(self._device)
        return (f"Generator(philox4x32-10, key=0x{self._key[1]:08x}{self._key[0]:08x}, "
                f"counter={self._counter}, device={dev})")

    # helpers ----------------------------------------------------------------------
    def _dev(self, device) -> Device:
        return get_device(self._device if device is None else device)

    def _advance(self, nblocks: int) -> int:
        start = self._counter
        if start + nblocks > _MAX_COUNTER:
            raise OverflowError(f"this generator's 2**64 counter blocks are used up "
                                f"({start} used, {nblocks} more asked); spawn() a new one")
        return start

    def _fill(self, family: str, shape: tuple, dt: np.dtype, dev: Device, params: tuple):
        n = math.prod(shape)
        nblocks = _rng.blocks(family, dt, n, params)
        with self._lock:
            start = self._advance(nblocks)
            out = new_array(shape, dt, dev, "device")
            try:
                _rng.generate(family, out, self._key, start, params)
            except BaseException:
                out.free()
                raise
            self._counter = start + nblocks
        return out

    @staticmethod
    def _float_dtype(method: str, dtype, dev: Device) -> np.dtype:
        if dtype is None:
            return _FLOATS[1] if dev.supports(np.float64) else _FLOATS[0]
        dt = np.dtype(dtype)
        if dt not in _FLOATS:
            raise UnsupportedDTypeError(
                f"{method}() makes float32 or float64 numbers, got dtype {dt}; pass "
                f"dtype=ga.float32 or ga.float64")
        dev.require(dt)
        return dt

    # distributions -----------------------------------------------------------------
    def random(self, size=None, dtype=None, out=None, *, device=None) -> GPUArray:
        """Uniform floats in [0, 1): ``k * 2**-24`` (float32) or ``k * 2**-53`` (float64).

        ``dtype`` float32 or float64 (default float64 where the device has it).
        ``out`` exists for NumPy's signature (Dask passes ``out=None``); only ``None``.
        """
        # dask: NumPy's out= parameter, which dask.array.random passes as None
        if out is not None:
            raise TypeError(f"Generator.random(out=...) is not supported (got "
                            f"{type(out).__name__}); use the returned array or ga.copyto")
        dev = self._dev(device)
        dt = self._float_dtype("random", dtype, dev)
        return self._fill("uniform", _shape(size), dt, dev, (0.0, 1.0))

    def uniform(self, low=0.0, high=1.0, size=None, dtype=None, *, device=None) -> GPUArray:
        """Uniform floats in [low, high): ``low + (high - low) * random()`` in ``dtype``.

        ``low`` and ``high`` are finite with ``low < high`` (``ValueError``
        otherwise, unlike NumPy, which mirrors the interval); ``OverflowError`` if
        ``high - low`` overflows ``dtype``.  Rounding can give ``high``, as in NumPy.
        """
        lo, hi = _finite("low", low), _finite("high", high)
        if not hi > lo:
            raise ValueError(f"uniform() needs low < high, got low={lo}, high={hi}")
        dev = self._dev(device)
        dt = self._float_dtype("uniform", dtype, dev)
        t = dt.type
        with np.errstate(over="ignore"):
            span = t(hi) - t(lo)
        if not np.isfinite(span):
            raise OverflowError(f"uniform(): high - low = {hi - lo} overflows {dt}")
        return self._fill("uniform", _shape(size), dt, dev, (float(t(lo)), float(span)))

    def standard_normal(self, size=None, dtype=None, *, device=None) -> GPUArray:
        """Normal numbers of mean 0 and deviation 1 (Box--Muller, docs/random.md)."""
        return self.normal(0.0, 1.0, size, dtype, device=device)

    def normal(self, loc=0.0, scale=1.0, size=None, dtype=None, *, device=None) -> GPUArray:
        """Normal numbers: ``loc + scale * z``, ``z`` standard normal; ``scale >= 0``."""
        m, s = _finite("loc", loc), _finite("scale", scale)
        if s < 0:
            raise ValueError(f"normal() needs scale >= 0, got {s}")
        dev = self._dev(device)
        dt = self._float_dtype("normal", dtype, dev)
        return self._fill("normal", _shape(size), dt, dev, (m, s))

    def exponential(self, scale=1.0, size=None, dtype=None, *, device=None) -> GPUArray:
        """Exponential numbers of mean ``scale`` (``>= 0``): ``-scale * log(u)``, u in (0, 1)."""
        s = _finite("scale", scale)
        if s < 0:
            raise ValueError(f"exponential() needs scale >= 0, got {s}")
        dev = self._dev(device)
        dt = self._float_dtype("exponential", dtype, dev)
        return self._fill("exponential", _shape(size), dt, dev, (s,))

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False, *,
                 device=None) -> GPUArray:
        """Integers uniform in [low, high) (``endpoint=True``: [low, high]), unbiased.

        ``high=None`` means [0, low).  Lemire's multiply-shift with rejection:
        a rejected draw is retried from further counter blocks of its own
        element (docs/random.md, "From bits to numbers").  ``ValueError`` for an empty range
        or bounds outside ``dtype``; ``dtype`` a signed or unsigned integer type.
        """
        lo, hi = _int_arg("low", low), None if high is None else _int_arg("high", high)
        if hi is None:
            lo, hi = 0, lo
        last = hi if endpoint else hi - 1
        if last < lo:
            raise ValueError(f"integers() needs low {'<=' if endpoint else '<'} high, got "
                             f"low={lo}, high={hi}")
        dt = np.dtype(dtype)
        if dt.kind not in "iu":
            raise UnsupportedDTypeError(
                f"integers() makes signed or unsigned integers, got dtype {dt}; pass e.g. "
                f"dtype=ga.int64")
        info = np.iinfo(dt)
        if lo < info.min or last > info.max:
            raise ValueError(f"integers(): [{lo}, {last}] is outside {dt}'s range "
                             f"[{info.min}, {info.max}]; use a wider dtype")
        dev = self._dev(device)
        dev.require(dt)
        return self._fill("integers", _shape(size), dt, dev, _integer_params(lo, last))

    # permutations ------------------------------------------------------------------
    def _permutation_into(self, out) -> None:
        """``out`` (int64, 1-d) = a random permutation of its indices; advances the counter."""
        n = out.shape[0]
        nblocks = _rng.blocks("keys", out.dtype, n)
        with self._lock:
            start = self._advance(nblocks)
            if n == 0:
                return
            if out.device.backend == "cpu":
                _rng.permutation_index(out, self._key, start)
            else:
                p = _rng.scratch_size(n)
                keys = new_array((p,), np.dtype(np.uint64), out.device, "device")
                try:
                    idx = new_array((p,), np.dtype(np.uint32), out.device, "device")
                    try:
                        _rng.permutation_index(out, self._key, start, keys, idx)
                    finally:
                        idx.free()
                finally:
                    keys.free()
            self._counter = start + nblocks

    def _index(self, n: int, dev: Device):
        if n >= 1 << 32:
            raise ValueError(f"permutations of {n} elements are not supported (at most 2**32 - 1)")
        out = new_array((n,), np.dtype(np.int64), dev, "device")
        try:
            self._permutation_into(out)
        except BaseException:
            out.free()
            raise
        return out

    def permutation(self, x, *, device=None) -> GPUArray:
        """A permuted ``arange(x)`` (int64) for an int, a permuted copy (axis 0) for an array.

        Sorts random 64-bit keys, ties broken by index: a bitonic sort on
        device back-ends, NumPy's stable argsort on cpu (the same order).
        """
        if isinstance(x, GPUArray):
            _check_device_arg(x, device)
            src = _rows_source(x, "permutation")
            try:
                index = self._index(x.shape[0], x.device)
                try:
                    out = new_array(x.shape, x.dtype, x.device, "device")
                    _rng.take_rows(out, src, index)
                finally:
                    index.free()
            finally:
                if src is not x:
                    src.free()
            return out
        n = _count_arg(x)
        return self._index(n, self._dev(device))

    def shuffle(self, x) -> None:
        """Shuffle the gpuarrays array ``x`` in place along axis 0.

        Uses a permutation and a copy of ``x`` (pool temporaries), never the host.
        """
        if not isinstance(x, GPUArray):
            raise TypeError(f"shuffle() works in place on a gpuarrays array, got "
                            f"{type(x).__name__}; copy host data to the device first with "
                            f"ga.asarray(x, device=...)")
        if not x.flags.writeable:
            raise ValueError(f"shuffle(): the array (shape {x.shape}, {x.dtype}) is read-only")
        src = _rows_source(x, "shuffle", copy=True)
        index = self._index(x.shape[0], x.device)
        try:
            if x.flags.c_contiguous:
                _rng.take_rows(x, src, index)
            else:
                tmp = new_array(x.shape, x.dtype, x.device, "device")
                try:
                    _rng.take_rows(tmp, src, index)
                    copyto(x, tmp)
                finally:
                    tmp.free()
        finally:
            index.free()
            src.free()

    def choice(self, a, size=None, replace=True, p=None, *, device=None) -> GPUArray:
        """Samples of ``arange(a)`` (an int) or of the rows of a gpuarrays array.

        ``replace=True``: indices by ``integers(0, n)``; ``replace=False``: the first
        ``prod(size)`` entries of ``permutation(n)``.  Weights (``p``) are not
        supported yet (``NotImplementedError``).
        """
        if p is not None:
            raise NotImplementedError("choice(p=...): weighted sampling is not implemented; "
                                      "draw ga.random uniforms and search the cumulative weights")
        shape = _shape(size)
        k = math.prod(shape)
        if isinstance(a, GPUArray):
            _check_device_arg(a, device)
            if a.ndim == 0:
                raise ValueError("choice(): a must be an int or an array of at least 1 dimension")
            n, dev = a.shape[0], a.device
        else:
            n, dev = _count_arg(a), self._dev(device)
        if n == 0 and k:
            raise ValueError("choice(): a is empty but samples were asked for")
        if not replace and k > n:
            raise ValueError(f"choice(): cannot take {k} samples from {n} without replacement")
        if replace:
            index = self.integers(0, max(n, 1), shape, device=dev)
        else:
            perm = self._index(n, dev)
            try:
                index = perm[:k].reshape(shape).copy()
            finally:
                perm.free()
        if not isinstance(a, GPUArray):
            return index
        try:
            src = _rows_source(a, "choice")
            try:
                out = new_array(shape + a.shape[1:], a.dtype, dev, "device")
                _rng.take_rows(out.reshape((k,) + a.shape[1:]), src, index.reshape(k))
            finally:
                if src is not a:
                    src.free()
        finally:
            index.free()
        return out


def default_rng(seed=None, *, device=None) -> Generator:
    """A :class:`Generator` seeded with ``seed`` (None: fresh entropy); a Generator is returned as is."""
    if isinstance(seed, Generator):
        return seed
    return Generator(seed, device=device)


# argument helpers ------------------------------------------------------------------------
def _shape(size) -> tuple[int, ...]:
    return () if size is None else normalize_shape(size)


def _int_arg(name: str, value) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {value!r}") from None


def _count_arg(x) -> int:
    try:
        n = _int_arg("x", x)
    except TypeError:
        raise TypeError(f"expected an int or a gpuarrays array, got {type(x).__name__}; copy "
                        f"host data to the device first with ga.asarray(x, device=...)") from None
    if n < 0:
        raise ValueError(f"a permutation or sample of a negative count ({n}) is not defined")
    return n


def _check_device_arg(x: GPUArray, device) -> None:
    if device is not None and get_device(device) != x.device:
        raise ValueError(f"the array is on {x.device} but device={get_device(device)} was "
                         f"given; move it with x.to_device(...)")


def _rows_source(x: GPUArray, method: str, copy: bool = False):
    """``x`` itself when its rows are contiguous (and ``copy`` is false), else a C copy."""
    if x.ndim == 0:
        raise ValueError(f"{method}(): the array must have at least 1 dimension")
    x._live()
    rows_contiguous = x.flags.c_contiguous or (
        x.ndim >= 1 and x[:1].flags.c_contiguous and x.shape[0] > 0)
    if copy or not rows_contiguous:
        return x.copy()
    return x


def _integer_params(lo: int, last: int) -> tuple[int, int, int, bool]:
    """(low mod 2**64, range, rejection threshold, 64-bit draws) for [lo, last]."""
    r = last - lo + 1  # 1 .. 2**64
    if r <= 1 << 32:
        return lo % (1 << 64), r, ((1 << 32) - r) % r, False
    r64 = r % (1 << 64)  # 0 stands for 2**64
    return lo % (1 << 64), r64, ((1 << 64) - r) % r if r64 else 0, True
