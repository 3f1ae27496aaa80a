"""Stateful fuzzing of the public API against a NumPy shadow model.

A hypothesis ``RuleBasedStateMachine`` allocates (every kind, every dtype the
device holds, zero-size shapes too), derives (basic indices, reshapes,
reinterpretations, transposes ...), writes through views, copies, frees
(locally, forced, by dropping the last reference), enters and leaves cache
scopes, frees caches, wraps NumPy memory (cpu), exports through DLPack (when
the module exists), trims, collects garbage and, rarely, resets the device.
It also keeps *outside handles* -- host views, capsules consumed late or never,
consumed capsules whose deleter has not run -- across forced frees, cache frees
and trims (docs/design.md, "Release": their blocks are quarantined).

The shadow model: every storage has a NumPy byte buffer (its *shadow base*);
every live array has a NumPy view of that base with the same layout, obtained
by applying the same operation to the parent's shadow -- so NumPy is the
oracle for layouts (shape, strides, byte offset) and, since views share a
base, writes through any view update the shadow the way NumPy would.

Invariants after every step (``check``):

- every live array's bytes equal its shadow's; its storage's refcount is the
  number of live arrays over it; new storages never overlap live ones;
- every freed array raises the expected error (``FreedArrayError`` with the
  reason, ``DeviceResetError`` after a reset) while its metadata still works;
- ``used_bytes - cache_held_bytes`` equals the baseline plus the rounded
  block size (``pool.round_size``) of every live pooled storage; each cache's
  busy buffers are exactly our live arrays from it, its free buffers are live
  blocks that overlap no live storage;
- ``reserved_bytes`` equals the bytes the back-end holds for the pool (counted
  by the ``faults.FaultyBackend`` wrapper); no block is freed through the
  back-end twice (a hook on ``free``);
- host ranges pinned for wraps are exactly those of live wraps;
- no two live users -- arrays, host views, capsules, consumers' arrays -- ever
  address one block unless they share a storage; every outside handle still
  reads its shadow; ``quarantined_bytes`` is the blocks of freed storages that
  outside handles hold.

Teardown: after freeing everything, freeing the caches and ``ga.trim``,
``used_bytes`` is back to its baseline and every back-end allocation made
during the run was freed (or dropped by a reset).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import itertools
import sys

import _profiles
import numpy as np
import pytest
from faults import inject
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.extra.numpy import basic_indices
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from strategies import ALL_DTYPES, values

import gpuarrays as ga
from gpuarrays._memory import pins as ga_wrap
from gpuarrays._memory.pool import round_size

HAVE_DLPACK = importlib.util.find_spec("gpuarrays._array.dlpack") is not None
VIEW_DTYPES = [np.dtype(t) for t in ("i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8")]
DERIVE_OPS = ["index", "reshape", "view", "transpose", "T", "swapaxes", "squeeze",
              "expand_dims", "ravel", "diagonal", "broadcast_to", "real", "imag"]
MAX_LIVE = 12
MAX_FREED = 16
MAX_OUT = 6
SHAPES = st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple)

# Figures of the run, per device: sequences, steps, rules applied.
FIGURES: dict[str, dict[str, int]] = {}


class Violation(AssertionError):
    """An invariant of the model failed."""


class SRec:
    """One storage of the model: its shadow base and where its memory lives."""

    __slots__ = ("storage", "base", "home", "cache", "host", "freed")

    def __init__(self, storage, home: str, cache=None, host=None) -> None:
        self.storage = storage
        self.base = np.zeros(storage.nbytes, np.uint8)
        self.home = home  # "pool", "cache", "wrap", "null", or "kept" (past a cpu reset)
        self.cache = cache
        self.host = host  # the wrapped NumPy array
        self.freed = False  # force- or cache-freed (quarantined while outside handles hold it)


class Rec:
    """One live array and its shadow (a NumPy view of its storage's shadow base)."""

    __slots__ = ("arr", "shadow", "srec")

    def __init__(self, arr, shadow: np.ndarray, srec: SRec) -> None:
        self.arr = arr
        self.shadow = shadow
        self.srec = srec


class Out:
    """An outside handle: a host view, a capsule (consumed late or never), or what a
    consumer made of a capsule (its deleter pending).  ``shadow``: the layout's shadow."""

    __slots__ = ("obj", "what", "shadow", "srec")

    def __init__(self, obj, what: str, shadow: np.ndarray, srec: SRec) -> None:
        self.obj = obj
        self.what = what  # "view", "capsule" or "consumed"
        self.shadow = shadow
        self.srec = srec


class Producer:
    """Hands a capsule taken earlier to ``np.from_dlpack`` (consumed late)."""

    def __init__(self, capsule) -> None:
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def _offset(view: np.ndarray, base: np.ndarray) -> int:
    return view.__array_interface__["data"][0] - base.__array_interface__["data"][0]


def _view_of(base: np.ndarray, arr) -> np.ndarray:
    """The shadow of a fresh array: its layout over ``base``."""
    return np.ndarray(arr.shape, arr.dtype, buffer=base, offset=arr.offset, strides=arr.strides)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0] or [1]


@st.composite
def reshape_targets(draw, size: int):
    ndim = draw(st.integers(0 if size == 1 else 1, 4))
    if size == 0:
        dims = [draw(st.integers(0, 3)) for _ in range(ndim)]
        if 0 not in dims:
            dims[draw(st.integers(0, ndim - 1))] = 0
        return tuple(dims)
    dims, rest = [], size
    for _ in range(max(ndim - 1, 0)):
        d = draw(st.sampled_from(_divisors(rest)))
        dims.append(d)
        rest //= d
    if ndim:
        dims.append(rest)
    dims = draw(st.permutations(dims))
    if dims and draw(st.booleans()):
        dims = list(dims)
        dims[draw(st.integers(0, len(dims) - 1))] = -1
    return tuple(dims)


def _same_outcome(np_call, ga_call):
    """Run both; both must raise (ValueError/IndexError/TypeError alike) or both succeed."""
    try:
        n = np_call()
        n_err = None
    except (ValueError, IndexError, TypeError) as e:
        n, n_err = None, e
    try:
        g = ga_call()
        g_err = None
    except (ValueError, IndexError, TypeError) as e:
        g, g_err = None, e
    if (n_err is None) != (g_err is None):
        raise Violation(f"NumPy {'raised ' + repr(n_err) if n_err else 'succeeded'} but "
                        f"gpuarrays {'raised ' + repr(g_err) if g_err else 'succeeded'}")
    return n, g


class ReliabilityMachine(RuleBasedStateMachine):
    """See the module docstring.  ``device`` is set by :func:`machine_for`."""

    device: ga.Device = None

    def __init__(self) -> None:
        super().__init__()
        dev = self.device
        self.kinds = list(dev.kinds)
        self.dtypes = [dt for dt in ALL_DTYPES if dev.supports(dt)]
        gc.collect()
        ga.trim(dev)
        self.known = dict(dev.memory.live)  # blocks live before the run (not ours)
        self._inject = inject(dev)
        self.fb = self._inject.__enter__()
        self.double_frees: list[str] = []
        self.fb.on_call("free", self._on_free)
        self.live: list[Rec] = []
        self.freed: list[tuple[object, type, tuple]] = []  # (array, error, message parts)
        self.srecs: dict[int, SRec] = {}  # id(storage) -> SRec
        self.outs: list[Out] = []
        self.kept: set[int] = set()  # blocks a cpu reset left to outside handles
        self.caches: list[ga.AllocCache] = []
        self.scopes = contextlib.ExitStack()
        self.scope_caches: list[ga.AllocCache | None] = []
        self.pins0 = set(ga_wrap.pin_count(dev)) if dev.impl.needs_host_registration else set()
        self.seed = itertools.count()
        self._baseline()
        self.figures = FIGURES.setdefault(str(dev), {"sequences": 0, "steps": 0, "resets": 0})
        self.figures["sequences"] += 1

    # bookkeeping -------------------------------------------------------------------
    def _baseline(self) -> None:
        s = ga.memory_stats(self.device)
        self.used0 = s["used_bytes"] - s["cache_held_bytes"]
        self.held_other = s["cache_held_bytes"]
        self.quarantined0 = s["quarantined_bytes"]

    def _on_free(self, index, kind, ptr, nbytes) -> None:
        if ptr in self.fb.live:
            return
        if ptr in self.kept:
            self.kept.discard(ptr)
            return
        if self.known.pop(ptr, None) is not None:
            return  # a block from before the run, legitimately freed now
        self.double_frees.append(f"free of 0x{ptr:x} ({nbytes} bytes) that is not allocated")

    def _held(self) -> dict[int, SRec]:
        """Storages with live users: arrays, or outside handles (maybe quarantined)."""
        held = dict(self.srecs)
        for o in self.outs:
            held.setdefault(id(o.srec.storage), o.srec)
        return held

    def _expected_home(self):
        cache = self.scope_caches[-1] if self.scope_caches else None
        return ("pool", None) if cache is None else ("cache", cache)

    def _adopt(self, arr, home=None, cache=None, host=None) -> Rec:
        """A new storage from an operation: check it, give it a shadow base."""
        st_ = arr.storage
        if id(st_) in self.srecs:
            raise Violation(f"a new array reused a live storage {st_!r}")
        if home is None:
            home, cache = self._expected_home() if st_.nbytes else ("null", None)
        actual = st_._home
        if home == "cache" and actual is not cache:
            raise Violation(f"allocation inside cached(cache) not served by the cache: {actual!r}")
        if home == "pool" and actual is not self.device.memory:
            raise Violation(f"allocation outside any cache not from the pool: {actual!r}")
        if st_.nbytes and home != "wrap":
            lo, hi = st_.ptr, st_.ptr + st_.nbytes
            for other in self._held().values():
                o = other.storage
                if o.nbytes and other.home != "wrap" and lo < o.ptr + o.nbytes and o.ptr < hi:
                    raise Violation(f"new storage {st_!r} overlaps live storage {o!r}")
        srec = SRec(st_, home, cache, host)
        self.srecs[id(st_)] = srec
        rec = Rec(arr, _view_of(srec.base, arr), srec)
        self.live.append(rec)
        return rec

    def _derived(self, parent: Rec, arr, shadow: np.ndarray) -> None:
        """A derived array: same storage, layout checked against NumPy's."""
        if arr is parent.arr:
            return
        if arr.storage is not parent.arr.storage:
            raise Violation(f"derived array has a new storage ({arr.shape} {arr.dtype})")
        got = (arr.shape, arr.strides, arr.offset, arr.dtype, arr.flags.writeable)
        want = (shadow.shape, shadow.strides, _offset(shadow, parent.srec.base), shadow.dtype,
                bool(shadow.flags.writeable))
        if got != want:
            raise Violation(f"layout {got} differs from NumPy's {want}")
        self.live.append(Rec(arr, shadow, parent.srec))

    def _storage_released(self, srec: SRec, why: str) -> None:
        """Arrays freed earlier over a storage now force-/cache-freed may give either reason."""
        self.freed = [(a, e, w + (why,) if a.storage is srec.storage else w)
                      for a, e, w in self.freed]

    def _release(self, rec: Rec, error: type, why: str, track: bool = True) -> None:
        self.live.remove(rec)
        if track:
            self.freed.append((rec.arr, error, (why,)))
            del self.freed[:-MAX_FREED]
        self._forget_if_unused(rec.srec)

    def _forget_if_unused(self, srec: SRec) -> None:
        if not any(r.srec is srec for r in self.live):
            self.srecs.pop(id(srec.storage), None)

    def _pick(self, i: int) -> Rec:
        return self.live[i % len(self.live)]

    def _count(self, name: str) -> None:
        self.figures[name] = self.figures.get(name, 0) + 1

    # rules: allocation ----------------------------------------------------------------
    @precondition(lambda self: len(self.live) < MAX_LIVE)
    @rule(data=st.data(), shape=SHAPES, how=st.sampled_from(["empty", "zeros", "full", "asarray"]))
    def allocate(self, data, shape, how) -> None:
        dev = self.device
        kind = data.draw(st.sampled_from(self.kinds), label="kind")
        dt = data.draw(st.sampled_from(self.dtypes), label="dtype")
        host = values(shape, dt, next(self.seed))
        if how == "empty":
            a = ga.empty(shape, dt, device=dev, kind=kind)
            a[...] = host
        elif how == "zeros":
            a = ga.zeros(shape, dt, device=dev, kind=kind)
            host = np.zeros(shape, dt)
        elif how == "full" and dt.fields is None:
            a = ga.full(shape, host.flat[0] if host.size else 1, dtype=dt, device=dev, kind=kind)
            host = np.full(shape, host.flat[0] if host.size else 1, dt)
        else:
            a = ga.asarray(host, device=dev, kind=kind)
        if (a.shape, a.dtype, a.kind) != (shape, dt, kind) or not a.flags.c_contiguous:
            raise Violation(f"{how}{shape} {dt} {kind} gave {a.shape} {a.dtype} {a.kind}")
        rec = self._adopt(a)
        rec.shadow[...] = host
        self._count("allocate")

    @precondition(lambda self: len(self.live) < MAX_LIVE and "host" in self.device.kinds
                  and self.device.impl.needs_host_registration)
    @rule(shape=SHAPES, dtype_index=st.integers(0, 100))
    def wrap_numpy(self, shape, dtype_index) -> None:
        """unsafe_wrap of NumPy memory (cpu: host memory is device-accessible there)."""
        dt = self.dtypes[dtype_index % len(self.dtypes)]
        host = values(shape, dt, next(self.seed)).copy()
        a = ga.unsafe_wrap(host, device=self.device)
        if a.kind != "host" or a.storage.owned or a.storage.ptr != host.ctypes.data:
            raise Violation(f"wrap of NumPy memory: kind {a.kind}, storage {a.storage!r}")
        rec = self._adopt(a, "wrap", None, host)
        rec.shadow[...] = host
        self._count("wrap")

    @precondition(lambda self: any(r.srec.home == "wrap" and r.srec.host.size for r in self.live))
    @rule(i=st.integers(0, 100))
    def write_wrapped_host_memory(self, i) -> None:
        """Writes to the wrapped NumPy array are the array's data (zero-copy)."""
        recs = [r for r in self.live if r.srec.home == "wrap" and r.srec.host.size]
        srec = recs[i % len(recs)].srec
        fresh = values(srec.host.shape, srec.host.dtype, next(self.seed)).reshape(-1)[::-1]
        srec.host[...] = fresh.reshape(srec.host.shape)
        srec.base[...] = srec.host.reshape(-1).view(np.uint8)
        self._count("write_wrapped")

    # rules: deriving ------------------------------------------------------------------
    @precondition(lambda self: self.live and len(self.live) < MAX_LIVE)
    @rule(i=st.integers(0, 100), data=st.data(),
          op=st.sampled_from(DERIVE_OPS))
    def derive(self, i, data, op) -> None:
        # Hypothesis picks this rule no more often than the others: chain a few derivations.
        for _ in range(data.draw(st.integers(1, 4), label="chain")):
            if len(self.live) >= MAX_LIVE:
                return
            self._derive_one(self._pick(i), data, op)
            i = -1  # continue from the newest array
            op = data.draw(st.sampled_from(DERIVE_OPS), label="op")

    def _derive_one(self, rec: Rec, data, op) -> None:
        a, s = rec.arr, rec.shadow
        nd = a.ndim
        if op == "index":
            key = data.draw(basic_indices(a.shape, min_dims=0, allow_newaxis=True), label="key")
            nkey = key if isinstance(key, tuple) else (key,)
            if not any(k is Ellipsis for k in nkey):
                nkey += (Ellipsis,)  # NumPy then gives a 0-d view, not a scalar
            n, g = _same_outcome(lambda: s[nkey], lambda: a[key])
            if n is not None and not isinstance(n, np.ndarray):
                raise Violation(f"NumPy gave a scalar for {key!r}; the index strategy is wrong")
        elif op == "reshape":
            shape = data.draw(reshape_targets(a.size), label="shape")
            n, g = _same_outcome(lambda: s.reshape(shape), lambda: a.reshape(shape))
            if g is not None and g.storage is not a.storage:
                if np.shares_memory(n, s):
                    raise Violation(f"reshape {a.shape}->{shape} copied where NumPy gave a view")
                self._adopt(g)
                self._live_rec(g).shadow[...] = n
                self._count("reshape_copy")
                return
        elif op == "view":
            dt = data.draw(st.sampled_from(VIEW_DTYPES), label="dtype")
            n, g = _same_outcome(lambda: s.view(dt), lambda: a.view(dt))
        elif op == "transpose":
            perm = tuple(data.draw(st.permutations(range(nd)), label="axes"))
            n, g = s.transpose(perm), a.transpose(perm)
        elif op == "T":
            n, g = s.T, a.T
        elif op == "swapaxes":
            if nd == 0:
                return
            ax = data.draw(st.tuples(st.integers(-nd, nd - 1), st.integers(-nd, nd - 1)))
            n, g = s.swapaxes(*ax), a.swapaxes(*ax)
        elif op == "squeeze":
            n, g = s.squeeze(), a.squeeze()
        elif op == "expand_dims":
            ax = data.draw(st.integers(-nd - 1, nd), label="axis")
            n, g = np.expand_dims(s, ax), ga.expand_dims(a, ax)
        elif op == "ravel":
            n, g = s.ravel(), a.ravel()
            if g.storage is not a.storage:
                if np.shares_memory(n, s) and n.size > 1:
                    raise Violation(f"ravel copied where NumPy gave a view ({a.strides})")
                self._adopt(g)
                self._live_rec(g).shadow[...] = n
                return
        elif op == "diagonal":
            if nd < 2:
                return
            n, g = s.diagonal(), a.diagonal()
        elif op == "broadcast_to":
            shape = data.draw(st.integers(1, 3), label="lead") if nd < 3 else None
            target = ((shape,) if shape else ()) + a.shape
            n, g = np.broadcast_to(s, target), ga.broadcast_to(a, target)
        elif op == "real":
            n, g = s.real, a.real
        else:  # imag
            if s.dtype.kind != "c":  # NumPy's read-only zeros, in one element of their own
                with a.imag as g:
                    if (g.shape != s.shape or g.dtype != s.dtype or g.flags.writeable
                            or g.storage is a.storage or (g.size and g.get().any())):
                        raise Violation(f"imag of a real array is not NumPy's zeros: {g!r}")
                return
            n, g = s.imag, a.imag
        if g is None:
            return
        self._derived(rec, g, n)
        self._count("derive")

    def _live_rec(self, arr) -> Rec:
        for r in self.live:
            if r.arr is arr:
                return r
        raise KeyError(arr)

    # rules: writes and copies --------------------------------------------------------
    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, 100), data=st.data(), source=st.sampled_from(["host", "scalar", "gpu"]))
    def write(self, i, data, source) -> None:
        rec = self._pick(i)
        a, s = rec.arr, rec.shadow
        key = data.draw(basic_indices(a.shape, min_dims=0, allow_newaxis=True), label="key")
        target_shape = s[key].shape if isinstance(s[key], np.ndarray) else ()
        if source == "gpu":
            same = [r for r in self.live if r.arr.dtype == a.dtype
                    and _broadcasts(r.arr.shape, target_shape)]
            if not same:
                return
            src = same[data.draw(st.integers(0, len(same) - 1), label="src")]
            value, shadow_value = src.arr, src.shadow.copy()
        elif source == "scalar" or not target_shape:
            host = values((1,), a.dtype, next(self.seed))
            value = shadow_value = host.reshape(())
        else:
            cut = data.draw(st.integers(0, len(target_shape)), label="broadcast")
            host = values(target_shape[cut:], a.dtype, next(self.seed))
            value = shadow_value = host
        if not a.flags.writeable:
            with pytest.raises(ValueError, match="read-only"):
                a[key] = value
            return
        a[key] = value
        s[key] = shadow_value
        self._count("write")

    @precondition(lambda self: self.live and len(self.live) < MAX_LIVE)
    @rule(i=st.integers(0, 100), data=st.data(),
          how=st.sampled_from(["copy", "copy_F", "astype", "to_kind", "reshape_copy"]))
    def copy(self, i, data, how) -> None:
        rec = self._pick(i)
        a, s = rec.arr, rec.shadow
        if how == "copy":
            g, n = a.copy(), s.copy()
        elif how == "copy_F":
            g, n = a.copy(order="F"), s.copy(order="F")
        elif how == "astype":
            if a.dtype.kind not in "iu":  # exact conversions only (no NaN payloads, no bool bytes)
                return
            targets = [dt for dt in (*VIEW_DTYPES, np.dtype("f4"), np.dtype("f8"))
                       if self.device.supports(dt)]
            dt = data.draw(st.sampled_from(targets), label="dtype")
            # NumPy's astype keeps an F layout (order='K'); gpuarrays' is C-contiguous
            g, n = a.astype(dt), s.astype(dt, order="C")
        elif how == "to_kind":
            kind = data.draw(st.sampled_from(self.kinds), label="kind")
            if kind == a.kind:
                return
            g, n = a.to_device(self.device, kind=kind), s.copy()
            if g.kind != kind:
                raise Violation(f"to_device(kind={kind!r}) gave {g.kind}")
        else:
            g, n = a.reshape(a.shape, copy=True), s.copy()
        if g.storage is a.storage or g.shape != n.shape or (g.size and g.strides != n.strides):
            raise Violation(f"{how}: layout {g.shape} {g.strides} vs NumPy {n.shape} {n.strides}")
        new = self._adopt(g)
        new.shadow[...] = n
        self._count("copy")

    # rules: releasing ------------------------------------------------------------------
    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, 100), how=st.sampled_from(["free", "unsafe_free", "with", "drop"]))
    def free(self, i, how) -> None:
        rec = self._pick(i)
        a = rec.arr
        if how == "free":
            a.free()
            a.free()  # idempotent
        elif how == "unsafe_free":
            ga.unsafe_free(a)
        elif how == "with":
            with a:
                pass
        if how == "drop":  # the last reference goes: the finalizer releases the handle
            rec.arr = None
            del a
            gc.collect()  # an array caught in a reference cycle is released by the collector
            self._release(rec, None, "", track=False)
        else:
            self._release(rec, ga.FreedArrayError, "free() on this array")
        self._count("free")

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, 100))
    def force_free(self, i) -> None:
        rec = self._pick(i)
        srec = rec.srec
        rec.arr.free(force=True)
        srec.freed = True
        self._storage_released(srec, "forced free")
        for r in [r for r in self.live if r.srec is srec]:
            self._release(r, ga.FreedArrayError, "forced free")
        self._count("force_free")

    # rules: caches ---------------------------------------------------------------------
    @precondition(lambda self: len(self.scope_caches) < 4)
    @rule(j=st.integers(0, 100), new=st.booleans(), off=st.booleans())
    def enter_scope(self, j, new, off) -> None:
        if off:
            self.scopes.enter_context(ga.uncached())
            self.scope_caches.append(None)
            return
        if new or not self.caches:
            self.caches.append(ga.AllocCache())
        cache = self.caches[j % len(self.caches)]
        self.scopes.enter_context(ga.cached(cache))
        self.scope_caches.append(cache)
        self._count("cache_scope")

    @precondition(lambda self: self.scope_caches)
    @rule()
    def leave_scope(self) -> None:
        # ExitStack has no pop of one context: rebuild it without the innermost one.
        inner = self.scope_caches.pop()
        old = self.scopes
        contexts = list(self.scope_caches)
        old.close()
        self.scopes = contextlib.ExitStack()
        for cache in contexts:
            self.scopes.enter_context(ga.uncached() if cache is None else ga.cached(cache))
        del inner

    @precondition(lambda self: self.caches)
    @rule(j=st.integers(0, 100))
    def free_cache(self, j) -> None:
        cache = self.caches[j % len(self.caches)]
        if cache in self.scope_caches:
            with pytest.raises(ga.CacheInUseError, match="in active use"):
                cache.free()
            self._count("cache_in_use")
            return
        cache.free()
        served = [sr for sr in self._held().values() if sr.cache is cache]
        for sr in served:
            self._storage_released(sr, "AllocCache was freed")
        for r in [r for r in self.live if r.srec.cache is cache]:
            self._release(r, ga.FreedArrayError, "AllocCache was freed")
        for sr in served:  # a buffer outside handles hold goes to the pool when they go
            sr.freed = True
            sr.home, sr.cache = "pool", None
        if cache.n_free or cache.n_busy or cache.nbytes:
            raise Violation(f"cache not empty after free(): {cache!r}")
        self._count("cache_free")

    # rules: interchange, maintenance, reset ----------------------------------------------
    @precondition(lambda self: self.live and any(r.arr.kind in ("host", "unified")
                                                 for r in self.live))
    @rule(i=st.integers(0, 100))
    def host_view(self, i) -> None:
        recs = [r for r in self.live if r.arr.kind in ("host", "unified")]
        rec = recs[i % len(recs)]
        gc.collect()  # garbage sharing this storage must not die between the two counts
        before = rec.arr.storage.refcount
        v = rec.arr.host_view()
        if rec.arr.storage.refcount != before + 1 and rec.arr.storage.nbytes:
            raise Violation("a host view does not hold a handle")
        if v.tobytes() != np.ascontiguousarray(rec.shadow).tobytes():
            raise Violation("host view differs from the shadow")
        if v.flags.writeable and v.size:
            fresh = values(v.shape, v.dtype, next(self.seed))
            v[...] = fresh
            rec.shadow[...] = fresh
        del v
        if rec.arr.storage.refcount != before:
            raise Violation("dropping a host view did not release its handle")
        self._count("host_view")

    @precondition(lambda self: HAVE_DLPACK and self.live)
    @rule(i=st.integers(0, 100))
    def dlpack_export(self, i) -> None:
        rec = self._pick(i)
        gc.collect()  # garbage sharing this storage must not die between the two counts
        before = rec.arr.storage.refcount
        try:
            capsule = rec.arr.__dlpack__()
        except BufferError:
            capsule = None
        if capsule is None:
            # Refused: a read-only view as a legacy capsule (docs/design.md, "Foreign memory"), or an element type
            # NumPy's DLPack cannot describe (structured) on the cpu back-end.
            if rec.arr.flags.writeable and rec.arr.dtype.kind != "V":
                raise Violation(f"DLPack export of a writeable {rec.arr.dtype} array refused")
            if rec.arr.storage.refcount != before:
                raise Violation("a refused DLPack export kept a handle")
            return
        if rec.arr.storage.refcount != before + 1 and rec.arr.storage.nbytes:
            raise Violation("a DLPack capsule does not hold a handle")
        del capsule
        if rec.arr.storage.refcount != before:
            raise Violation("dropping an unconsumed capsule did not release its handle")
        if self.device.backend == "cpu" and rec.arr.flags.writeable:
            n = np.from_dlpack(rec.arr)
            if n.tobytes() != np.ascontiguousarray(rec.shadow).tobytes():
                raise Violation("np.from_dlpack differs from the shadow")
            del n
        self._count("dlpack")

    # rules: outside handles (kept across frees, trims and resets; docs/design.md, "Release")
    @precondition(lambda self: len(self.outs) < MAX_OUT and any(
        r.arr.kind in ("host", "unified") for r in self.live))
    @rule(i=st.integers(0, 100), numpy=st.booleans())
    def keep_host_view(self, i, numpy) -> None:
        recs = [r for r in self.live if r.arr.kind in ("host", "unified")]
        rec = recs[i % len(recs)]
        v = np.asarray(rec.arr) if numpy else rec.arr.host_view()
        self.outs.append(Out(v, "view", rec.shadow, rec.srec))
        self._count("keep_host_view")

    @precondition(lambda self: HAVE_DLPACK and self.live and len(self.outs) < MAX_OUT)
    @rule(i=st.integers(0, 100))
    def keep_capsule(self, i) -> None:
        rec = self._pick(i)
        try:
            capsule = rec.arr.__dlpack__(max_version=(1, 0))
        except BufferError:  # a structured dtype on cpu: NumPy's DLPack cannot describe it
            return
        self.outs.append(Out(capsule, "capsule", rec.shadow, rec.srec))
        self._count("keep_capsule")

    @precondition(lambda self: self.live and len(self.outs) < MAX_OUT)
    @rule(i=st.integers(0, 100), how=st.sampled_from(["force", "cache", "trim"]))
    def outside_handle_then_free(self, i, how) -> None:
        """An outside handle, then a free and a trim it must survive (its block is
        quarantined): the interleaving the rules above reach only by chance."""
        rec = self._pick(i)
        if rec.arr.kind in ("host", "unified"):
            self.keep_host_view([r for r in self.live if r.arr.kind in ("host", "unified")]
                                .index(rec), numpy=False)
        else:
            self.keep_capsule(self.live.index(rec))
        cache = rec.srec.cache
        if how == "cache" and cache is not None and cache not in self.scope_caches:
            self.free_cache(self.caches.index(cache))
        elif how != "trim":
            how = "force"
            self.force_free(self.live.index(rec))
        self.trim()
        self._count(f"outside_then_{how}")

    @precondition(lambda self: any(o.what == "capsule" for o in self.outs))
    @rule(j=st.integers(0, 100))
    def consume_capsule_late(self, j) -> None:
        """Consume a capsule taken earlier -- maybe after its storage was freed."""
        outs = [o for o in self.outs if o.what == "capsule"]
        o = outs[j % len(outs)]
        if self.device.backend == "cpu":
            o.obj = np.from_dlpack(Producer(o.obj))
        else:  # ga.from_dlpack keeps the capsule's deleter pending, as a consumer does
            o.obj = ga.from_dlpack(o.obj)
        o.what = "consumed"
        self._count("consume_capsule")

    @precondition(lambda self: self.outs)
    @rule(j=st.integers(0, 100))
    def drop_outside(self, j) -> None:
        self.outs.pop(j % len(self.outs))
        gc.collect()
        self._count("drop_outside")

    @rule()
    def collect(self) -> None:
        gc.collect()

    @rule()
    def trim(self) -> None:
        ga.trim(self.device)
        # trim gives back every wholly free platform allocation; what stays cached is the
        # free rest of allocations that still hold a live block
        if any(t.bins for s in self.device.memory.segments.values() for t in s.idle):
            raise Violation("a wholly free pool segment survived trim")
        if ga.trim(self.device):
            raise Violation("a second trim released memory")

    @rule()
    def synchronize(self) -> None:
        ga.synchronize(self.device)

    @rule(roll=st.integers(0, 24))
    def reset(self, roll) -> None:
        if roll != 13:  # rarely (hypothesis favours small and boundary values)
            return
        dev = self.device
        keeps = getattr(self.fb.real, "detach", None) is not None  # cpu: memory stays
        if not keeps:
            self.outs.clear()  # the reset frees their memory: drop them first (the docs say so)
            gc.collect()
        held = [o.srec for o in self.outs if o.srec.storage.nbytes]
        if held:
            with pytest.warns(ga.GPUArraysWarning, match="kept until they are dropped"):
                ga.device_reset(dev)
        else:
            ga.device_reset(dev)
        for sr in held:  # past the reset only their outside handles hold them
            if sr.home in ("pool", "cache"):
                self.kept.add(sr.storage.ptr)
            sr.home, sr.cache = "kept", None
        for r in list(self.live):
            self._release(r, ga.DeviceResetError, "was reset")
        self.freed = [(a, ga.DeviceResetError, ("was reset",)) for a, _, _ in self.freed]
        self.srecs.clear()
        self.known.clear()
        self.pins0 = set()
        self._baseline()
        self.figures["resets"] += 1

    # invariants ---------------------------------------------------------------------------
    @invariant()
    def check(self) -> None:
        self.figures["steps"] += 1
        dev = self.device
        if self.double_frees:
            raise Violation("; ".join(self.double_frees))
        handles: dict[int, int] = {}
        for r in self.live:
            a = r.arr
            if a.is_freed:
                raise Violation(f"live array reports is_freed: {a!r}")
            got = a.get()
            if got.shape != r.shadow.shape or got.tobytes() != np.ascontiguousarray(
                    r.shadow).tobytes():
                note(f"gpu {got!r}\nshadow {r.shadow!r}")
                raise Violation(f"data of {a.shape} {a.dtype} {a.strides} differs from shadow")
            handles[id(a.storage)] = handles.get(id(a.storage), 0) + 1
        users = self._held()
        for o in self.outs:
            handles[id(o.srec.storage)] = handles.get(id(o.srec.storage), 0) + 1
            self._check_outside(o)
        for key, srec in users.items():
            if not srec.storage.nbytes and any(o.srec is srec for o in self.outs):
                continue  # whether a zero-size export takes a handle is not part of the contract
            want = 0 if srec.freed or srec.home == "kept" else handles.get(key, 0)
            if srec.storage.refcount != want:
                raise Violation(f"refcount {srec.storage.refcount} of {srec.storage!r}, "
                                f"{want} live arrays and outside handles use it")
        self._check_no_alias(users)
        for a, error, why in self.freed:
            if not a.is_freed:
                raise Violation(f"freed array not freed: {a!r}")
            with pytest.raises(error) as info:
                a.get()
            if not any(w in str(info.value) for w in why) or (error is ga.FreedArrayError
                                              and isinstance(info.value, ga.DeviceResetError)):
                raise Violation(f"wrong error for a freed array: {info.value!r}, expected "
                                f"{error.__name__} with {why!r}")
            with pytest.raises(ga.FreedArrayError):
                a[...]
            repr(a), a.shape, a.strides, a.dtype, a.storage  # metadata keeps working
        # accounting
        s = ga.memory_stats(dev)
        pooled = sum(round_size(sr.storage.nbytes) for sr in users.values()
                     if sr.home == "pool")
        quarantined = sum(round_size(sr.storage.nbytes) for sr in users.values()
                          if sr.freed and sr.home in ("pool", "cache") and sr.storage.nbytes)
        if quarantined:
            self._count("steps_with_quarantine")
        if s["quarantined_bytes"] != self.quarantined0 + quarantined:
            raise Violation(f"quarantined_bytes {s['quarantined_bytes']} != {quarantined}, the "
                            f"blocks of freed storages outside handles hold (+ "
                            f"{self.quarantined0} from before the run)")
        if s["used_bytes"] - s["cache_held_bytes"] != self.used0 + pooled:
            raise Violation(f"used_bytes {s['used_bytes']} - cache_held_bytes "
                            f"{s['cache_held_bytes']} != baseline {self.used0} + live pooled "
                            f"{pooled}")
        mine = 0
        live_blocks = dev.memory.live
        ranges = [(sr.storage.ptr, sr.storage.ptr + sr.storage.nbytes) for sr in
                  users.values() if sr.storage.nbytes and sr.home != "wrap"]
        for sr in users.values():
            if sr.home in ("pool", "cache") and live_blocks.get(sr.storage.ptr) != round_size(
                    sr.storage.nbytes):
                raise Violation(f"live storage {sr.storage!r} is not a live pool block")
        for cache in self.caches:
            held, n_free, n_busy = cache.usage(dev)
            busy = [sr for sr in users.values() if sr.cache is cache]
            if n_busy != len(busy):
                raise Violation(f"{cache!r}: {n_busy} busy buffers, {len(busy)} live storages")
            free = cache._snapshot()[0]
            if len(free) != n_free:
                raise Violation(f"{cache!r}: n_free {n_free} but {len(free)} free buffers")
            for (_mgr, _kind, nbytes), (ptr, block, _) in free:
                if block != round_size(nbytes) or live_blocks.get(ptr) != block:
                    raise Violation(f"free cache buffer 0x{ptr:x} is not a live block")
                if any(lo < ptr + nbytes and ptr < hi for lo, hi in ranges):
                    raise Violation(f"free cache buffer 0x{ptr:x} overlaps a live storage")
            if held != sum(round_size(sr.storage.nbytes) for sr in busy) + sum(
                    buf[1] for _, buf in free):
                raise Violation(f"{cache!r}: held bytes {held} do not add up")
            mine += held
        if s["cache_held_bytes"] != self.held_other + mine:
            raise Violation(f"cache_held_bytes {s['cache_held_bytes']} != other caches' "
                            f"{self.held_other} + ours {mine}")
        known = sum(self.known.values())
        if s["reserved_bytes"] != known + self.fb.live_bytes:
            raise Violation(f"reserved_bytes {s['reserved_bytes']} != back-end bytes "
                            f"{self.fb.live_bytes} + blocks from before the run {known}")
        if dev.impl.needs_host_registration:
            # registrations are whole pages (pins.py): each live wrap lies inside them,
            # and each registration made in the run is held by a live wrap
            pins = set(ga_wrap.pin_count(dev)) - self.pins0
            want = {(sr.storage.ptr, sr.storage.ptr + sr.storage.nbytes)
                    for sr in users.values() if sr.home == "wrap" and sr.storage.nbytes}
            for lo, hi in want:
                page = lo - lo % ga_wrap.PAGE
                while page < hi:
                    if not any(s <= page < e for s, e in pins | self.pins0):
                        raise Violation(f"live wrap [0x{lo:x}, 0x{hi:x}) has an "
                                        f"unregistered page 0x{page:x}: {pins}")
                    page += ga_wrap.PAGE
            for s_, e_ in pins:
                if not any(lo < e_ and s_ < hi for lo, hi in want):
                    raise Violation(f"registration [0x{s_:x}, 0x{e_:x}) held by no live wrap")

    def _check_outside(self, o: Out) -> None:
        """An outside handle reads its shadow: nobody else ever wrote into its block."""
        if o.what == "capsule":
            return  # not readable before it is consumed
        got = o.obj if isinstance(o.obj, np.ndarray) else o.obj.get()
        if got.tobytes() != np.ascontiguousarray(o.shadow).tobytes():
            raise Violation(f"an outside {o.what} of {o.srec.storage!r} (freed: {o.srec.freed}) "
                            f"no longer reads its data: the block was handed out again")

    @staticmethod
    def _check_no_alias(held: dict[int, SRec]) -> None:
        """No two storages with live users address one byte (wraps may, on purpose)."""
        spans = sorted(((sr.storage.ptr, sr.storage.ptr + sr.storage.nbytes, sr)
                        for sr in held.values() if sr.storage.nbytes and sr.home != "wrap"),
                       key=lambda span: span[:2])
        for (_, hi, a), (lo, _, b) in zip(spans, spans[1:], strict=False):
            if lo < hi:
                raise Violation(f"two live users address one block: {a.storage!r} "
                                f"(freed: {a.freed}) and {b.storage!r} (freed: {b.freed})")

    # teardown ------------------------------------------------------------------------------
    def teardown(self) -> None:
        dev = self.device
        try:
            self.scopes.close()
            self.scope_caches.clear()
            self.outs.clear()
            for r in list(self.live):
                r.arr.free()
            self.live.clear()
            self.srecs.clear()
            for cache in self.caches:
                cache.free()
            self.caches.clear()
            self.freed.clear()
            gc.collect()
            ga.trim(dev)
            if sys.exc_info()[1] is not None:
                return  # a step failed: its traceback holds arrays; report that failure
            s = ga.memory_stats(dev)
            if s["used_bytes"] - s["cache_held_bytes"] != self.used0:
                raise Violation(f"leak: used_bytes {s['used_bytes']} (cache_held "
                                f"{s['cache_held_bytes']}) after freeing everything, baseline "
                                f"{self.used0}")
            if self.kept:
                raise Violation(f"{len(self.kept)} blocks a reset left to outside handles were "
                                f"never freed")
            if self.fb.live:
                raise Violation(f"leak: {len(self.fb.live)} back-end allocations "
                                f"({self.fb.live_bytes} bytes) never freed")
            if self.double_frees:
                raise Violation("; ".join(self.double_frees))
        finally:
            self._inject.__exit__(None, None, None)


def _broadcasts(src: tuple, dst: tuple) -> bool:
    if len(src) > len(dst):
        return False
    return all(n in (1, d) for n, d in zip(src[::-1], dst[::-1], strict=False))


def machine_for(device: ga.Device) -> type[ReliabilityMachine]:
    return type(f"ReliabilityMachine_{device.backend}", (ReliabilityMachine,), {"device": device})


def test_stateful(device):
    run_state_machine_as_test(machine_for(device), settings=_profiles.PROFILE)
    figures = FIGURES.get(str(device), {})
    _profiles.record("stateful", device=str(device), **figures)
