"""NumPy's ufunc protocol on gpuarrays arrays: ``__call__`` with NumPy's keywords and the
methods ``reduce``, ``accumulate``, ``outer``, ``at`` and ``reduceat``.

Everything runs on the array's device as compositions of the namespace's own
operations (docs/numpy.md, "Ufunc methods"):

- ``reduce``: ``add``/``multiply``/``maximum``/``minimum``/``logical_and``/``logical_or``
  run as ``sum``/``prod``/``max``/``min``/``all``/``any``.  Any other binary ufunc the
  table has folds with its own elementwise kernel: a tree of ``log2(n)`` launches where
  the result cannot depend on the order (NumPy calls the ufunc reorderable and it is exact
  in the computing dtype: integers, bools, ``maximum``/``minimum``), else NumPy's left
  fold, one launch per element of the reduced axis (``subtract``, ``divide``, ``hypot``
  on floats...), so the values are NumPy's, rounding included.
- ``accumulate``: ``cumulative_sum``/``cumulative_prod`` for add/multiply; else a
  Hillis-Steele scan (exact ufuncs) or NumPy's sequential order.
- ``outer``: ``a[..., None, ...] op b`` on broadcast views.
- ``at``: on the cpu engine NumPy's own ``ufunc.at`` on views of the raw memory.  On
  devices, the positions ``a[indices]`` selects, as an int64 array computed on the device
  (an index array into a 1-d ``a`` directly, any other index applied to an iota of
  ``a``'s shape), sorted stably; each round applies the
  ufunc to the k-th occurrence of every position (gather, op, scatter), so repeated
  indices accumulate in NumPy's order.  With many repeats, ufuncs with a combining
  operation (add/subtract: add, multiply/divide: multiply, the idempotent and bitwise
  ones: themselves) first combine each position's values by a segmented scan.
- ``reduceat``: one ``reduce`` per index (the indices are read to the host: they are
  the shape of the work, not data).

Only a few scalars ever reach the host (a count, a maximum multiplicity).  NumPy 2.4
keeps the operand of a refused ``reduce`` alive for good, so every call NumPy can make
on a gpuarrays array is answered here or refused by the caller with a ``TypeError``.
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from .._array.hooks import HOOKS
from .._array.make import ArrayBase
from .dispatch import apply, power
from .promotion import SCALAR_TYPES, integer_limits
from .reductions import normalize_axes
from .statistical import (cumulative_prod, cumulative_sum, max, min, prod, sum,
                          write_into)
from .table import BY_UFUNC, DTYPES, OPS
from .utility import all as all_
from .utility import any as any_

__all__ = ["by_value", "call", "method", "reduce_ufunc"]

_POW = OPS["pow"]
_DTYPES = frozenset(DTYPES)
_NO_VALUE = getattr(np, "_NoValue", None)
_REDUCE = {np.add: sum, np.multiply: prod, np.maximum: max, np.minimum: min,
           np.logical_and: all_, np.logical_or: any_}
_ACCUMULATE = {np.add: cumulative_sum, np.multiply: cumulative_prod}
_IDEMPOTENT = frozenset(u for u in (np.maximum, np.minimum, np.fmax, np.fmin, np.bitwise_and,
                                    np.bitwise_or, np.logical_and, np.logical_or, np.gcd,
                                    np.lcm) if u is not None)
# ``at`` with many repeats: the operation that combines a position's values first
_COMBINE = {np.add: np.add, np.subtract: np.add, np.multiply: np.multiply,
            np.divide: np.multiply, np.maximum: np.maximum, np.minimum: np.minimum,
            np.bitwise_and: np.bitwise_and, np.bitwise_or: np.bitwise_or,
            np.bitwise_xor: np.bitwise_xor, np.logical_and: np.logical_and,
            np.logical_or: np.logical_or, np.logical_xor: np.logical_xor}
_AT_ROUNDS = 8  # up to this many occurrences of one position: rounds (NumPy's exact order)
_COMPARISONS = {np.equal: operator.eq, np.not_equal: operator.ne, np.less: operator.lt,
                np.less_equal: operator.le, np.greater: operator.gt,
                np.greater_equal: operator.ge}
_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")
_ORDERS = ("K", "A", "C", "F", None)


# ----------------------------------------------------------------------------- helpers
def _takes(x: object) -> bool:
    return (isinstance(x, ArrayBase) or type(x) in SCALAR_TYPES
            or (isinstance(x, np.generic) and x.dtype in _DTYPES))


def _key(x):
    """What NumPy's type resolution sees of an operand: a dtype, or a weak Python type."""
    if isinstance(x, (ArrayBase, np.generic)):
        return x.dtype
    return type(x)


def _ns():
    return HOOKS.namespace(None)


def _binary(ufunc):
    """``f(x1, x2, out=None)`` computing ``ufunc`` on the device, or ``None``."""
    op = BY_UFUNC.get(ufunc)
    if op is not None:
        if op.nin != 2:
            return None
        if op is _POW:
            return power
        return lambda x1, x2, out=None: apply(op, (x1, x2), out)
    fn = getattr(_ns(), getattr(ufunc, "__name__", ""), None)
    if fn is None or ufunc.nin != 2 or ufunc.nout != 1:
        return None

    def named(x1, x2, out=None):
        r = fn(x1, x2)
        return r if out is None else write_into(ufunc.__name__, r, out)
    return named


def _unary(ufunc):
    op = BY_UFUNC.get(ufunc)
    if op is not None and op.nin == 1:
        return lambda x, out=None: apply(op, (x,), out)
    fn = getattr(_ns(), getattr(ufunc, "__name__", ""), None)
    if fn is None or ufunc.nin != 1 or ufunc.nout != 1:
        return None

    def named(x, out=None):
        r = fn(x)
        return r if out is None else write_into(ufunc.__name__, r, out)
    return named


def _out_array(out):
    """``out=`` as NumPy passes it to ``__array_ufunc__``: None, or one gpuarrays array;
    ``NotImplemented`` for anything else."""
    if type(out) is tuple and len(out) == 1:
        out = out[0]
    return out if out is None or isinstance(out, ArrayBase) else NotImplemented


@functools.cache
def _reorderable(ufunc) -> bool:
    """Whether NumPy reduces ``ufunc`` over several axes at once (asks NumPy, on a 1x1
    host array of the ufunc's first loop type: metadata, no data)."""
    for t in ufunc.types:
        try:
            ufunc.reduce(np.zeros((1, 1), dtype=t[0]), axis=(0, 1))
            return True
        except ValueError as e:
            if "reorderable" in str(e):
                return False
        except TypeError:
            continue
    return True


def _exact(ufunc, dt: np.dtype) -> bool:
    """Whether the order of combination cannot change the result (tree and scan allowed)."""
    return _reorderable(ufunc) and (dt.kind in "biu" or ufunc in _IDEMPOTENT)


def _sl(ndim: int, ax: int, start, stop) -> tuple:
    return (slice(None),) * ax + (slice(start, stop),) + (Ellipsis,) * (ndim > ax + 1)


def _fill(value, dt: np.dtype):
    """``value`` as a NumPy scalar of ``dt`` (NumPy's unsafe cast, as its reduce does)."""
    with np.errstate(all="ignore"):
        return np.asarray(value).astype(dt)[()]


def _full(shape, value, dt, like):
    from .creation import full

    return full(shape, _fill(value, dt), dtype=dt, device=like.device)


def _free(*arrays) -> None:
    for a in arrays:
        if isinstance(a, ArrayBase):
            a.free()


def _cast(x, dt: np.dtype):
    """``x`` in ``dt``: itself when it already is (not a new handle), else a copy."""
    return x if x.dtype == dt else x.astype(dt)


# ----------------------------------------------------------------------------- dispatch
def method(ufunc, name: str, inputs: tuple, kwargs: dict):
    """``ufunc.<name>(*inputs, **kwargs)`` on gpuarrays arrays, or ``NotImplemented``."""
    if name == "reduce":
        return reduce_ufunc(ufunc, name, inputs, kwargs)
    if name == "accumulate":
        return reduce_ufunc(ufunc, name, inputs, kwargs)
    if name == "outer":
        return _outer(ufunc, inputs, kwargs)
    if name == "at":
        return _at(ufunc, *inputs, **kwargs)
    if name == "reduceat":
        return _reduceat(ufunc, *inputs, **kwargs)
    return NotImplemented


def reduce_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict):
    """NumPy's ``ufunc.reduce``/``ufunc.accumulate`` on a gpuarrays array, else
    ``NotImplemented`` (an operand or ``out`` that is not a gpuarrays array, a ufunc the
    device cannot compute).  NumPy's arguments, defaults and result dtypes."""
    if method not in ("reduce", "accumulate") or len(inputs) != 1:
        return NotImplemented
    x = inputs[0]
    if not isinstance(x, ArrayBase):
        return NotImplemented
    kw = dict(kwargs)
    out = _out_array(kw.pop("out", None))
    if out is NotImplemented:
        return NotImplemented
    f = _binary(ufunc)
    if f is None:
        if ufunc.nin != 2 or ufunc.nout != 1:
            raise ValueError(f"numpy.{ufunc.__name__}.{method}: {method} is only supported "
                             f"for binary functions with one output; {ufunc.__name__} takes "
                             f"{ufunc.nin} operand(s) and gives {ufunc.nout} result(s)")
        return NotImplemented
    if method == "accumulate":
        return _accumulate(ufunc, f, x, out=out, **kw)
    return _reduce(ufunc, f, x, out=out, **kw)


# ----------------------------------------------------------------------------- reduce
def _loop_dtype(ufunc, name: str, x, dtype, out) -> np.dtype:
    """The dtype NumPy's ``ufunc.<reduce|accumulate|reduceat>`` computes in: ``dtype=``
    fixes the loop (the input cast unsafely, as NumPy's), else ``out``'s dtype and the
    input's pick it."""
    first = np.dtype(dtype) if dtype is not None else (out.dtype if out is not None else None)
    try:
        loop = ufunc.resolve_dtypes((first, x.dtype if dtype is None else first, None),
                                    reduction=True)
        if dtype is not None and loop[2] != first:
            raise TypeError(f"no loop computes {ufunc.__name__} in {first}")
    except TypeError as e:
        raise TypeError(f"numpy.{name}: no {ufunc.__name__} loop for a {x.dtype} array"
                        + (f" in {first}" if first is not None else "") + f" ({e}); pass "
                        "dtype= naming a type the ufunc takes") from e
    x.device.require(loop[2])
    return loop[2]


def _reduce(ufunc, f, x, axis=0, dtype=None, out=None, keepdims=False, initial=_NO_VALUE,
            where=True):
    name = f"{ufunc.__name__}.reduce"
    if not (where is True or where is False
            or (isinstance(where, ArrayBase) and where.dtype == bool)):
        return NotImplemented
    axes = normalize_axes(f"numpy.{name}", axis, x.ndim)
    if len(axes) > 1 and not _reorderable(ufunc):
        raise ValueError(f"numpy.{name}: reduction operation '{ufunc.__name__}' is not "
                         f"reorderable, so at most one axis may be specified (got axis="
                         f"{axis!r}); reduce one axis at a time")
    ct = _loop_dtype(ufunc, name, x, dtype, out)
    given = initial is not _NO_VALUE and initial is not None
    start = initial if given else ufunc.identity
    keep = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    shape = keep if keepdims else tuple(n for i, n in enumerate(x.shape) if i not in axes)
    if where is not True and start is None:
        raise ValueError(f"numpy.{name}: reduction operation '{ufunc.__name__}' does not "
                         "have an identity, so to use a where mask one has to specify "
                         "'initial' (the value of the elements the mask leaves out)")
    if any(x.shape[a] == 0 for a in axes) or where is False:
        if start is None:
            raise ValueError(f"numpy.{name}: zero-size array to reduction operation "
                             f"{ufunc.__name__} which has no identity; pass initial=")
        r = _full(shape, start, ct, x)
        return r if out is None else write_into(name, r, out)
    fast = _REDUCE.get(ufunc)
    if fast is not None and not (fast in (max, min, all_, any_) and dtype is not None):
        r = _fast_reduce(ufunc, fast, x, axes, axis, keepdims, dtype, initial, given, where)
        if r.dtype != ct:
            with r:
                r = r.astype(ct)
        return r if out is None else write_into(name, r, out)
    # NumPy starts from the identity where the ufunc has one (gcd.reduce([-2]) is 2)
    r = _general_reduce(ufunc, f, x, axes, ct, start, where)
    if not keepdims and r.shape != shape:  # reshape to the same shape is ``r`` itself
        with r:
            r = r.reshape(shape)
    return r if out is None else write_into(name, r, out)


def _fast_reduce(ufunc, fn, x, axes, axis, keepdims, dtype, initial, given, where):
    """The namespace's reduction (``sum``, ``max``...), with ``initial`` and ``where``."""
    from .elementwise import where as _where

    left_out = initial if ufunc.identity is None else ufunc.identity
    masked = None if where is True else _where(where, x, _fill(left_out, x.dtype))
    v = x if masked is None else masked
    try:
        kw = {} if fn in (max, min, all_, any_) else {"dtype": dtype}
        r = fn(v, axis=axes, keepdims=keepdims, **kw)
    finally:
        _free(masked)
    if not given:
        return r
    with r:
        return _binary(ufunc)(r, _fill(initial, r.dtype))


def _general_reduce(ufunc, f, x, axes, ct, initial, where):
    """``ufunc`` folded over ``axes`` (kept as length 1), computing in ``ct``."""
    from .elementwise import where as _where

    xc = _cast(x, ct)
    mask = None
    try:
        if where is not True:
            substitute = ufunc.identity is not None or ufunc in _IDEMPOTENT
            fill = _fill(ufunc.identity if ufunc.identity is not None else initial, ct)
            if substitute:
                v = _where(where, xc, fill)
                if xc is not x:
                    xc.free()
                xc = v
            else:
                from .manipulation import broadcast_to
                mask = broadcast_to(where, x.shape)
        cur = xc
        once = initial if len(axes) == 1 else None  # several axes: initial once, at the end
        for ax in axes:
            nxt = _reduce_axis(ufunc, f, cur, ax, ct, once, mask)
            if cur is not x:
                cur.free()
            cur = nxt
        if cur is x:  # axis=(): a copy, as NumPy's
            cur = x.astype(ct)
        if initial is not None and len(axes) != 1:
            f(_fill(initial, ct), cur, cur)
        return cur
    finally:
        _free(mask)


def _reduce_axis(ufunc, f, v, ax: int, ct, initial, mask):
    """``v`` reduced along ``ax`` (kept as length 1), a new array of ``ct``."""
    from .elementwise import where as _where

    nd, n = v.ndim, v.shape[ax]
    if initial is not None:
        acc, begin = _full(v.shape[:ax] + (1,) + v.shape[ax + 1:], initial, ct, v), 0
    else:
        acc, begin = v[_sl(nd, ax, 0, 1)].astype(ct), 1
    if mask is None and _exact(ufunc, ct) and n - begin > 1:
        part = _tree(f, v[_sl(nd, ax, begin, None)], ax)
        try:
            f(acc, part, acc)
        finally:
            part.free()
        return acc
    for k in range(begin, n):
        item = v[_sl(nd, ax, k, k + 1)]
        if mask is None:
            f(acc, item, acc)
        else:
            step = f(acc, item)
            with step:
                nxt = _where(mask[_sl(nd, ax, k, k + 1)], step, acc)
            acc.free()
            acc = nxt
    return acc


def _tree(f, v, ax: int):
    """``f`` over ``v`` along ``ax`` by halving (associative, commutative ``f``)."""
    nd = v.ndim
    cur, owned = v, False
    while cur.shape[ax] > 1:
        m = cur.shape[ax]
        h = m // 2
        nxt = f(cur[_sl(nd, ax, 0, h)], cur[_sl(nd, ax, h, 2 * h)])
        if m % 2:
            first = nxt[_sl(nd, ax, 0, 1)]
            with first:
                f(first, cur[_sl(nd, ax, 2 * h, 2 * h + 1)], first)
        if owned:
            cur.free()
        cur, owned = nxt, True
    return cur if owned else cur.copy()


# ----------------------------------------------------------------------------- accumulate
def _accumulate(ufunc, f, x, axis=0, dtype=None, out=None):
    name = f"{ufunc.__name__}.accumulate"
    if x.ndim == 0:
        raise TypeError(f"numpy.{name}: cannot accumulate on a scalar (a 0-d array); "
                        "reshape it to 1-d first")
    if axis is None:
        axis = 0
    if isinstance(axis, tuple):
        if len(axis) != 1:
            raise ValueError(f"numpy.{name}: accumulate takes one axis, got {axis!r}")
        axis = axis[0]
    (ax,) = normalize_axes(f"numpy.{name}", axis, x.ndim)
    ct = _loop_dtype(ufunc, name, x, dtype, out)
    fast = _ACCUMULATE.get(ufunc)
    if fast is not None:
        r = fast(x, axis=ax, dtype=ct)
    else:
        r = _scan(ufunc, f, x, ax, ct)
    if r.dtype != ct:
        with r:
            r = r.astype(ct)
    return r if out is None else write_into(name, r, out)


def _scan(ufunc, f, x, ax: int, ct):
    """The inclusive scan of ``f`` along ``ax`` in ``ct``, a new array."""
    r = x.astype(ct)  # a copy: the scan runs in place
    n, nd = r.shape[ax], r.ndim
    if _exact(ufunc, ct):
        d = 1
        while d < n:
            t = f(r[_sl(nd, ax, 0, n - d)], r[_sl(nd, ax, d, n)])
            with t:
                r[_sl(nd, ax, d, n)] = t
            d *= 2
        return r
    for k in range(1, n):
        dst = r[_sl(nd, ax, k, k + 1)]
        with dst:
            f(r[_sl(nd, ax, k - 1, k)], dst, dst)
    return r


# ----------------------------------------------------------------------------- outer
def _outer(ufunc, inputs: tuple, kwargs: dict):
    if len(inputs) != 2 or ufunc.nin != 2:
        if ufunc.nin != 2:
            raise ValueError(f"numpy.{ufunc.__name__}.outer: outer product only supported "
                             "for binary functions")
        return NotImplemented
    a, b = inputs
    if not (_takes(a) and _takes(b)):
        return NotImplemented
    if isinstance(a, ArrayBase) and isinstance(b, ArrayBase) and b.ndim:
        a = a[(Ellipsis,) + (None,) * b.ndim]
        try:
            return call(ufunc, (a, b), kwargs)
        finally:
            a.free()
    return call(ufunc, (a, b), kwargs)


# ----------------------------------------------------------------------------- at
def _positions(a, indices):
    """The C-order linear positions of the elements ``a[indices]`` selects (int64, the
    index's result shape), computed on the device: ``indices`` applied to an iota of
    ``a``'s shape, so every kind of index NumPy's ``a[indices]`` takes works alike."""
    from .creation import arange

    dev = a.device
    if a.ndim == 1 and not isinstance(indices, (tuple, slice, int)) and indices is not Ellipsis:
        pos = _positions_1d(a, indices)
        if pos is not None:
            return pos
    grid = None
    for d, n in enumerate(a.shape):
        step = int(np.prod(a.shape[d + 1:], dtype=np.int64))
        axis_ids = arange(n, dtype=np.int64, device=dev)
        col = axis_ids[(slice(None),) + (None,) * (a.ndim - d - 1)]
        axis_ids.free()
        with col:
            term = col * step if step != 1 else col.copy()
        if grid is None:
            grid = term
        else:
            with term:
                nxt = grid + term
            grid.free()
            grid = nxt
    if grid is None:  # 0-d: one position
        grid = _full((), 0, np.dtype(np.int64), a)
    with grid:
        if isinstance(indices, list):
            indices = tuple(indices) if any(
                isinstance(i, (slice, list, type(None))) or i is Ellipsis
                for i in indices) else np.asarray(indices)
        pos = grid[indices]
    return pos if isinstance(pos, ArrayBase) else _full((), int(pos), np.dtype(np.int64), a)


def _positions_1d(a, indices):
    """An integer index array into a 1-d ``a``: the positions themselves (negative ones
    wrapped), checked against ``a``'s length with one read of their extremes; ``None`` for
    any other index (the general route)."""
    from .._array.creation import asarray
    from .elementwise import where as _where

    if isinstance(indices, ArrayBase):
        idx = indices
    else:
        host = np.asarray(indices)
        if host.dtype.kind not in "iu":
            return None
        idx = asarray(host, device=a.device)  # the caller's index data, to the device once
    if idx.dtype.kind not in "iu":
        return None
    n = a.shape[0]
    try:
        if idx.size:
            lo, hi = min(idx), max(idx)
            with lo, hi:
                lo, hi = int(lo), int(hi)
            bad = lo if lo < -n else hi if hi >= n else None
            if bad is not None:
                raise IndexError(f"index {bad} is out of bounds for axis 0 with size {n}; "
                                 f"give indices in [-{n}, {n})")
        wide = idx.astype(np.int64)
        with wide:
            return _where(wide < 0, wide + n, wide)
    finally:
        if idx is not indices:
            idx.free()


def _at(ufunc, a, indices, b=None):
    name = f"{ufunc.__name__}.at"
    if not isinstance(a, ArrayBase):
        return NotImplemented
    if ufunc.nout != 1 or ufunc.nin not in (1, 2):
        raise ValueError(f"numpy.{name}: only ufuncs with one or two operands and one "
                         "result support at()")
    if ufunc.nin == 2 and b is None:
        raise ValueError(f"numpy.{name}: second operand needed for ufunc {ufunc.__name__} "
                         "(np.<ufunc>.at(a, indices, b))")
    if ufunc.nin == 1 and b is not None:
        raise ValueError(f"numpy.{name}: second operand provided when ufunc is unary; "
                         "call it as np.<ufunc>.at(a, indices)")
    if b is not None and not _takes(b):
        return NotImplemented
    if isinstance(indices, np.ndarray) and indices.dtype == object:
        return NotImplemented
    if not a._writeable:
        raise ValueError(f"numpy.{name}: the array (shape {a.shape}) is read-only (a "
                         "broadcast_to or diagonal view); use a copy")
    if isinstance(b, ArrayBase) and b.device != a.device:
        raise ValueError(f"numpy.{name}: b is on {b.device}, a on {a.device}; move one "
                         "with to_device()")
    f = _binary(ufunc) if ufunc.nin == 2 else _unary(ufunc)
    if f is None:
        return NotImplemented
    keys = (a.dtype,) + (() if b is None else (_key(b),))
    try:
        ufunc.resolve_dtypes(keys + (a.dtype,), casting="same_kind")
    except TypeError as e:
        raise TypeError(f"numpy.{name}: {e}; give b a type whose result casts to the "
                        f"array's {a.dtype} (or convert a)") from e
    if a.device.backend == "cpu":
        _cpu_at(ufunc, a, indices, b)
        return None
    pos = _positions(a, indices)
    temps = [pos]
    try:
        if pos.size == 0:
            return None
        if a.ndim == 1 and a.flags.c_contiguous:
            flat_a = a
        else:  # a view when C-contiguous; else a copy, written back below
            whole = a if a.flags.c_contiguous else a.copy()
            flat_a = whole.reshape(-1)
            temps.append(flat_a)
            if whole is not a and whole is not flat_a:
                whole.free()
        vals = None
        if b is not None:
            if isinstance(b, ArrayBase):
                from .manipulation import broadcast_to
                try:
                    bb = broadcast_to(b, pos.shape)
                except ValueError:
                    raise ValueError(
                        f"numpy.{name}: b of shape {b.shape} does not broadcast to the "
                        f"shape {pos.shape} that the indices select; give a b of that "
                        "shape or one that broadcasts to it") from None
                vals = bb.reshape(-1)  # a copy (broadcast), or bb itself when 1-d
                temps += [bb, vals]
            else:
                vals = b
        flat_pos = pos.reshape(-1)  # pos itself when 1-d
        temps.append(flat_pos)
        _scatter_op(ufunc, f, flat_a, flat_pos, vals, temps)
        if not a.flags.c_contiguous:
            a[...] = flat_a.reshape(a.shape)
    finally:
        _free(*temps)
    return None


def _cpu_at(ufunc, a, indices, b) -> None:
    """The cpu engine: NumPy's own ``ufunc.at`` on views of the raw memory (as the cpu
    engine runs every operation), index arrays on the device viewed in place too."""
    from . import cpu_engine
    from .ownership import working

    parts = indices if isinstance(indices, tuple) else (indices,)
    held = [x for x in (*parts, b) if isinstance(x, ArrayBase)]
    for x in held:
        if x.device != a.device:
            raise ValueError(f"numpy.{ufunc.__name__}.at: an operand is on {x.device}, the "
                             f"array on {a.device}; move it with to_device()")
    with working(a.device, a, *held):
        key = tuple(cpu_engine.view(x) if isinstance(x, ArrayBase) else x for x in parts)
        va = cpu_engine.view(a)
        vb = cpu_engine.view(b) if isinstance(b, ArrayBase) else b
        if b is None:
            ufunc.at(va, key if isinstance(indices, tuple) else key[0])
        else:
            ufunc.at(va, key if isinstance(indices, tuple) else key[0], vb)


def _scatter_op(ufunc, f, flat_a, pos, vals, temps: list) -> None:
    """``flat_a[pos[i]] = f(flat_a[pos[i]], vals[i])`` for every i in order, repeats
    included (NumPy's unbuffered ``at``)."""
    from .creation import arange
    from .elementwise import where as _where
    from .sorting import argsort

    n = pos.shape[0]
    order = argsort(pos, stable=True)
    temps.append(order)
    s = pos[order]
    temps.append(s)
    array_vals = isinstance(vals, ArrayBase)
    w = vals[order] if array_vals else vals
    if array_vals:
        temps.append(w)
    ids = arange(n, dtype=np.int64, device=pos.device)
    temps.append(ids)
    # segment starts, and each element's rank among the equal positions before it
    starts = _full((n,), True, np.dtype(bool), pos)
    temps.append(starts)
    if n > 1:
        diff = s[1:] != s[:-1]
        with diff:
            starts[1:] = diff
    first = _where(starts, ids, 0)
    temps.append(first)
    seg = _scan(np.maximum, _binary(np.maximum), first, 0, np.dtype(np.int64))
    temps.append(seg)
    rank = ids - seg
    temps.append(rank)
    top = max(rank)
    with top:
        rounds = int(top) + 1
    combine = _COMBINE.get(ufunc) if ufunc.nin == 2 else None
    if rounds <= _AT_ROUNDS or combine is None:
        for r in range(rounds):
            sel = rank == r
            with sel:
                p = s[sel]
                try:
                    v = w[sel] if array_vals else w
                except BaseException:
                    p.free()
                    raise
            try:
                cur = flat_a[p]
                with cur:
                    new = f(cur) if vals is None else f(cur, v)
                with new:
                    flat_a[p] = new
            finally:
                _free(p, v if array_vals else None)
        return
    # many repeats: combine each position's values first (a segmented scan), then once
    c = _binary(combine)
    if not array_vals:
        from .creation import full_like
        w = full_like(s, w, dtype=np.result_type(vals, np.asarray(0, flat_a.dtype)))
        temps.append(w)
    acc = w.copy()
    temps.append(acc)
    d = 1
    while d < n:
        t = c(acc[: n - d], acc[d:])
        ok = rank[d:] >= d
        with t, ok:
            nxt = _where(ok, t, acc[d:])
        with nxt:
            acc[d:] = nxt
        d *= 2
    last = _full((n,), True, np.dtype(bool), pos)
    temps.append(last)
    if n > 1:
        last[:-1] = starts[1:]
    p = s[last]
    tot = acc[last]
    try:
        cur = flat_a[p]
        with cur:
            new = f(cur, tot)
        with new:
            flat_a[p] = new
    finally:
        _free(p, tot)


# ----------------------------------------------------------------------------- reduceat
def _reduceat(ufunc, array, indices, axis=0, dtype=None, out=None):
    name = f"{ufunc.__name__}.reduceat"
    out = _out_array(out)
    if not isinstance(array, ArrayBase) or out is NotImplemented:
        return NotImplemented
    f = _binary(ufunc)
    if f is None:
        return NotImplemented
    x = array
    if x.ndim == 0:
        raise TypeError(f"numpy.{name}: cannot reduceat a scalar (a 0-d array); reshape "
                        "it to 1-d first")
    (ax,) = normalize_axes(f"numpy.{name}", axis, x.ndim)
    idx = indices.get() if isinstance(indices, ArrayBase) else np.asarray(indices)
    if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
        raise TypeError(f"numpy.{name}: indices must be a 1-d sequence of ints, got "
                        f"{idx.dtype} of shape {idx.shape}")
    n = x.shape[ax]
    for i in idx.tolist():
        if not 0 <= i < n:
            raise IndexError(f"numpy.{name}: index {i} out-of-bounds in {name} [0, {n}); "
                             "give indices into the reduced axis")
    ct = _loop_dtype(ufunc, name, x, dtype, out)
    from .creation import empty

    shape = x.shape[:ax] + (idx.size,) + x.shape[ax + 1:]
    r = empty(shape, dtype=ct, device=x.device)
    nd = x.ndim
    bounds = idx.tolist()
    try:
        for k, s in enumerate(bounds):
            e = bounds[k + 1] if k + 1 < len(bounds) else n
            piece = x[_sl(nd, ax, s, e if s < e else s + 1)]
            with piece:
                part = _reduce(ufunc, f, piece, axis=ax, dtype=ct, keepdims=True)
            dst = r[_sl(nd, ax, k, k + 1)]
            with part, dst:
                dst[...] = part
    except BaseException:
        r.free()
        raise
    return r if out is None else write_into(name, r, out)


# ----------------------------------------------------------------------------- __call__
def _comparison_by_value(ufunc, inputs: tuple):
    """NumPy 2.4 compares a Python int beyond an integer array's range by value (``int8 >
    1000`` is False everywhere): that constant, as ``(value, array)``, else None."""
    cmp = _COMPARISONS.get(ufunc)
    if cmp is None or len(inputs) != 2:
        return None
    for k, (x, y) in enumerate((inputs, inputs[::-1])):
        if type(y) is int and isinstance(x, ArrayBase) and x.dtype.kind in "iu":
            lo, hi = integer_limits(x.dtype)
            if lo <= y <= hi:
                return None
            edge = hi if y > hi else lo
            value = cmp(edge, y) if k == 0 else cmp(y, edge)
            return value, x
    return None


def by_value(ufunc, inputs: tuple) -> bool:
    """Whether ``ufunc`` compares a Python int beyond an integer array's range (which
    :func:`call` answers by value, as NumPy 2.4 does, instead of an ``OverflowError``)."""
    return (ufunc in _COMPARISONS and any(type(x) is int for x in inputs)
            and _comparison_by_value(ufunc, inputs) is not None)


def call(ufunc, inputs: tuple, kwargs: dict):
    """``ufunc(*inputs, **kwargs)`` with NumPy's keywords, or ``NotImplemented``."""
    kw = dict(kwargs)
    op = BY_UFUNC.get(ufunc)
    if op is None:
        return _call_by_name(ufunc, inputs, kw)
    out = kw.pop("out", None)
    if type(out) is tuple:
        if len(out) != 1:
            return NotImplemented
        out = out[0]
    if out is not None and not isinstance(out, ArrayBase):
        return NotImplemented
    dtype = kw.pop("dtype", None)
    sig = kw.pop("signature", None)
    casting = kw.pop("casting", "same_kind")
    order = kw.pop("order", "K")
    where = kw.pop("where", True)
    subok = kw.pop("subok", True)
    if kw:
        raise TypeError(f"numpy.{ufunc.__name__}() got unexpected keyword argument(s) "
                        f"{', '.join(sorted(kw))}; NumPy's ufunc keywords are out, where, "
                        "casting, order, dtype, subok and signature")
    if subok is not True or len(inputs) != op.nin or not all(_takes(x) for x in inputs):
        return NotImplemented
    if not (where is True or where is False
            or (isinstance(where, ArrayBase) and where.dtype == bool)):
        return NotImplemented
    if casting not in _CASTINGS:
        raise ValueError(f"numpy.{ufunc.__name__}(): casting must be one of "
                         f"{', '.join(map(repr, _CASTINGS))}, got {casting!r}")
    if order not in _ORDERS:
        raise ValueError(f"numpy.{ufunc.__name__}(): order must be one of 'K', 'A', 'C', "
                         f"'F', got {order!r} (gpuarrays results are C-ordered whatever "
                         "the order)")
    by_value = _comparison_by_value(ufunc, inputs)
    if by_value is not None:
        value, x = by_value
        r = _full(x.shape, value, np.dtype(bool), x)
        return _write(ufunc, r, out, where, casting)
    plain = dtype is None and sig is None and casting == "same_kind" and where is True
    if plain:
        if op is _POW:
            return power(inputs[0], inputs[1], out)
        return apply(op, inputs, out)
    keys = tuple(_key(x) for x in inputs)
    if dtype is not None:
        if sig is not None:
            raise TypeError(f"numpy.{ufunc.__name__}(): cannot specify both 'signature' "
                            "and 'dtype'; give one")
        sig = (None,) * op.nin + (np.dtype(dtype),)
    extra = {} if sig is None else {"signature": sig}
    loop = ufunc.resolve_dtypes(keys + (None if out is None else out.dtype,),
                                casting=casting, **extra)
    casts = []
    try:
        args = []
        for x, dt in zip(inputs, loop[:op.nin], strict=True):
            if isinstance(x, ArrayBase) and x.dtype != dt:
                x = x.astype(dt)
                casts.append(x)
            elif isinstance(x, np.generic) and x.dtype != dt:
                x = dt.type(x)
            args.append(x)
        r = power(*args) if op is _POW else apply(op, tuple(args))
    finally:
        _free(*casts)
    if r.dtype != loop[-1]:
        with r:
            r = r.astype(loop[-1])
    return _write(ufunc, r, out, where, casting)


def _write(ufunc, r, out, where, casting: str):
    """``r`` into ``out`` (allocated when None) where ``where`` is true; ``r`` goes back."""
    from .._array.functions import copyto
    from .creation import empty

    if out is None and where is True:
        return r
    with r:
        if out is None:  # where= without out=: the unwritten elements are uninitialised
            out = empty(r.shape, dtype=r.dtype, device=r.device)
        if not np.can_cast(r.dtype, out.dtype, casting):
            raise TypeError(f"numpy.{ufunc.__name__}(): cannot cast the result from "
                            f"{r.dtype} to out's {out.dtype} with casting rule "
                            f"{casting!r}; give casting='unsafe' or an out of {r.dtype}")
        copyto(out, r, casting="unsafe", where=where)
    return out


def _call_by_name(ufunc, inputs: tuple, kw: dict):
    """A ufunc the table has no row for, run by the namespace function of its name
    (``np.divmod`` -> ``ga.divmod``), with ``out=`` (a tuple for several results)."""
    name = getattr(ufunc, "__name__", None)
    fn = getattr(_ns(), name, None) if name else None
    if fn is None or not callable(fn):
        return NotImplemented
    out = kw.pop("out", None)
    outs = out if type(out) is tuple else (out,) * (out is not None) or (None,) * ufunc.nout
    if len(outs) == 1 and ufunc.nout > 1 and outs[0] is not None:
        return NotImplemented
    for k, v in kw.items():
        default = {"casting": "same_kind", "order": "K", "subok": True, "where": True,
                   "dtype": None, "signature": None}.get(k, kw)
        if not (v is default or (type(v) is type(default) and v == default)):
            return NotImplemented
    if len(inputs) != ufunc.nin or not all(_takes(x) for x in inputs):
        return NotImplemented
    if not all(o is None or isinstance(o, ArrayBase) for o in outs):
        return NotImplemented
    res = fn(*inputs)
    results = res if isinstance(res, tuple) else (res,)
    written = tuple(r if o is None else write_into(name, r, o)
                    for r, o in zip(results, outs, strict=False))
    return written if isinstance(res, tuple) else written[0]
