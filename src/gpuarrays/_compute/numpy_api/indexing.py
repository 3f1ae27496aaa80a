"""NumPy's index helpers, searching, sets, logic comparisons, partition and bit packing.

Every function has NumPy 2.4's signature and runs on the array's device as a composition
of the namespace's functions (``nonzero``, ``take``, ``take_along_axis``, ``where``,
``sort``/``argsort``, ``isin``, ``cumulative_sum``, ``concat``, indexing and indexed
assignment ...); nothing is computed on the host.  Some read one or two scalars back
(a count, a bound to report) to decide a result's shape or an error, as ``nonzero`` does.
Temporaries go back to the pool before the call returns (``_Temps``).

Inputs: the array argument NumPy calls ``a``/``ar``/``arr`` must be a gpuarrays array;
secondary arguments may also be Python scalars or (nested) lists and tuples of them, which
are uploaded to that array's device, as ``a[[0, 2]]`` uploads its key.  NumPy arrays are
refused with ``TypeError`` (nothing moves between host and device silently), as the
protocol does.  The in-place functions (``place``, ``put``, ``put_along_axis``,
``putmask``) write into the gpuarrays array through indexed assignment and return
``None``.  See docs/numpy.md.
"""

from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from ..._array.hooks import HOOKS
from ..._array.make import ArrayBase

__all__ = [
    "argwhere", "flatnonzero", "choose", "compress", "extract", "place", "put",
    "put_along_axis", "putmask", "select", "unravel_index", "ravel_multi_index", "lexsort",
    "partition", "argpartition", "sort_complex", "isclose", "allclose", "array_equal",
    "array_equiv", "unique", "intersect1d", "union1d", "setdiff1d", "setxor1d", "packbits",
    "unpackbits",
]

_INTP = np.dtype(np.int64)
_BOOL = np.dtype(bool)
_U8 = np.dtype(np.uint8)
_SCALARS = (bool, int, float, complex, np.generic)


def _ga():
    """The full namespace (``gpuarrays``), resolved when called: it imports this module."""
    return HOOKS.namespace(None)


class _Temps(list):
    """Arrays to free when the block ends, however it ends; never one of ``keep``."""

    def __init__(self, *keep) -> None:
        super().__init__()
        self._keep = [k for k in keep if isinstance(k, ArrayBase)]

    def __call__(self, a):
        if isinstance(a, ArrayBase) and not any(a is k for k in self._keep):
            self.append(a)
        return a

    def release(self, a):
        """Take ``a`` off the list (by identity: ``==`` is elementwise) and return it."""
        for i, t in enumerate(self):
            if t is a:
                del self[i]
                break
        return a

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        for t in self:
            t.free()
        self.clear()


def _array(fn: str, name: str, x):
    """``x`` when it is a live gpuarrays array, else ``TypeError`` saying how to get one."""
    if not isinstance(x, ArrayBase):
        raise TypeError(f"{fn}() takes a gpuarrays array for {name}, got "
                        f"{type(x).__name__}; copy host data to the device first with "
                        f"ga.asarray({name}, device=...)")
    x._live()
    return x


def _operand(fn: str, name: str, x, dev, temps: _Temps, dtype=None):
    """``x`` as an array on ``dev``: a gpuarrays array as it is (same device), a Python
    scalar or a list/tuple of them uploaded (a new array, freed with ``temps``)."""
    if isinstance(x, ArrayBase):
        x._live()
        if x.device != dev:
            raise ValueError(f"{fn}(): {name} is on {x.device} and the array on {dev}; "
                             f"move it with {name}.to_device(...)")
        return x
    if isinstance(x, np.ndarray):
        raise TypeError(f"{fn}(): {name} is a NumPy array; gpuarrays copies nothing between "
                        f"host and device silently: pass ga.asarray({name}, device=...)")
    if isinstance(x, _SCALARS) or isinstance(x, list | tuple):
        try:
            host = np.asarray(x, dtype=dtype)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{fn}(): {name}={x!r} is not an array of numbers: {e}") from e
        if host.dtype.kind not in "biufc":
            raise TypeError(f"{fn}(): {name} must hold numbers or bools, got {host.dtype} "
                            f"from {x!r}")
        return temps(_ga().asarray(host, device=dev))
    raise TypeError(f"{fn}() takes a gpuarrays array, a Python scalar or a list for {name}, "
                    f"got {type(x).__name__}")


def _flat(x, temps: _Temps):
    """``x`` flattened in C order: a view when ``x`` is C-contiguous, else a copy."""
    if x.ndim == 1:
        return x
    return temps(_ga().reshape(x, (-1,)))


def _axis(fn: str, axis, ndim: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise TypeError(f"{fn}(): axis must be an int or None, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(int(axis), ndim, f"{fn}()")
    return int(axis) % ndim


def _int_array(fn: str, name: str, x) -> None:
    if x.dtype.kind not in "iub":
        raise TypeError(f"{fn}(): {name} must hold integers, got {x.dtype}; convert with "
                        f"ga.astype({name}, ga.int64) if truncation is meant")


def _mode(fn: str, mode) -> str:
    modes = {"raise": "raise", "r": "raise", "wrap": "wrap", "w": "wrap", "clip": "clip",
             "c": "clip"}
    if not isinstance(mode, str) or mode not in modes:
        raise ValueError(f"{fn}(): mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    return modes[mode]


def _bounds(x):
    """(min, max) of an integer array: two scalars read back, for an error message."""
    ga = _ga()
    lo, hi = ga.min(x), ga.max(x)
    try:
        return int(lo), int(hi)
    finally:
        lo.free()
        hi.free()


def _any(x) -> bool:
    """``bool(ga.any(x))``: one scalar read back."""
    return _read_bool(_ga().any(x))


def _read_bool(r) -> bool:
    """``bool(r)`` of a 0-d result, which is freed here."""
    try:
        return bool(r)
    finally:
        r.free()


def _fit_indices(fn: str, ind, n: int, mode: str, temps: _Temps, what: str = "index"):
    """int64 indices in ``[0, n)`` under NumPy's index ``mode`` (raise: negatives count from
    the end, any other out of range is an ``IndexError``)."""
    ga = _ga()
    ind = temps(ga.astype(ind, _INTP)) if ind.dtype != _INTP else ind
    if ind.size == 0:
        return ind
    if mode == "wrap":
        return temps(ga.remainder(ind, n))
    if mode == "clip":
        return temps(ga.clip(ind, 0, n - 1))
    lo, hi = _bounds(ind)
    if lo < -n or hi >= n:
        bad = hi if hi >= n else lo
        raise IndexError(f"{fn}(): {what} {bad} is out of bounds for size {n}; use indices "
                         f"in [-{n}, {n}) or mode='wrap'/'clip'")
    if lo < 0:
        return temps(ga.where(ind < 0, ind + n, ind))
    return ind


def _cycled(v, n: int, temps: _Temps):
    """The 1-d ``v`` repeated to exactly ``n`` elements (NumPy's value recycling)."""
    ga = _ga()
    if v.size == n:
        return v
    if v.size > n:
        return temps(v[:n])
    reps = -(-n // v.size)
    tiled = temps(ga.tile(v, (reps,)))
    return temps(tiled[:n])


def _write_flat(fn: str, a, ind, vals, temps: _Temps) -> None:
    """``a.flat[ind] = vals`` on device (``ind`` in ``[0, a.size)``), through any layout."""
    if a.flags.c_contiguous:
        flat = temps(_ga().reshape(a, (-1,)))
        flat[ind] = vals
        return
    coords = unravel_index(ind, a.shape)
    for c in coords:
        temps(c)
    a[coords] = vals


def _writeable(fn: str, a) -> None:
    if not a.flags.writeable:
        raise ValueError(f"{fn}(): the array is read-only (a broadcast_to or diagonal view); "
                         f"write into a copy (a.copy())")


# --------------------------------------------------------------------------- nonzero family
def argwhere(a):
    """Indices of the non-zero elements of ``a``, one row each: int64 of shape
    ``(N, a.ndim)`` (``nonzero`` stacked; reads one count back)."""
    ga = _ga()
    a = _array("argwhere", "a", a)
    if a.ndim == 0:
        with _Temps() as temps:
            flag = temps(ga.reshape(a, (1,)))
            return ga.zeros((1 if _any(flag) else 0, 0), dtype=_INTP, device=a.device)
    idx = ga.nonzero(a)
    try:
        return ga.stack(idx, axis=1)
    finally:
        for i in idx:
            i.free()


def flatnonzero(a):
    """Indices of the non-zero elements of ``a`` flattened (C order): int64, 1-d."""
    ga = _ga()
    a = _array("flatnonzero", "a", a)
    with _Temps(a) as temps:
        flat = _flat(a, temps) if a.ndim else temps(ga.reshape(a, (1,)))
        return ga.nonzero(flat)[0]


# --------------------------------------------------------------------------- gather
def choose(a, choices, out=None, mode="raise"):
    """``choices[a[i]][i]`` for every ``i`` (``a`` and the choices broadcast together).

    ``mode``: ``'raise'`` (an index outside ``[0, n)`` is a ``ValueError``, as NumPy's),
    ``'wrap'`` or ``'clip'``.  One ``where`` per choice.
    """
    ga = _ga()
    fn = "choose"
    a = _array(fn, "a", a)
    mode = _mode(fn, mode)
    dev = a.device
    if a.dtype.kind not in "iub" or a.dtype == np.uint64:
        raise TypeError(f"choose(): a must hold integers that fit int64, got {a.dtype}; "
                        f"convert with ga.astype(a, ga.int64)")
    with _Temps(a, out) as temps:
        if isinstance(choices, ArrayBase):
            choices._live()
            if choices.ndim == 0:
                raise ValueError("choose(): choices must be a sequence of arrays or an array "
                                 "of at least 1 dimension (its first axis), got a 0-d array")
            cs = [temps(choices[k]) for k in range(choices.shape[0])]
        else:
            if not isinstance(choices, list | tuple):
                raise TypeError(f"choose(): choices must be a sequence of arrays, got "
                                f"{type(choices).__name__}")
            cs = [_operand(fn, f"choices[{k}]", c, dev, temps) for k, c in enumerate(choices)]
        n = len(cs)
        if n == 0:
            raise ValueError("choose(): choices is empty; give at least one array")
        dt = ga.result_type(*cs)
        shape = ga.broadcast_shapes(a.shape, *(c.shape for c in cs))
        idx = temps(ga.astype(a, _INTP))
        if mode == "raise":
            lo, hi = _bounds(idx) if idx.size else (0, 0)
            if lo < 0 or hi >= n:
                raise ValueError(f"choose(): invalid entry in choice array: {lo if lo < 0 else hi} "
                                 f"is not in [0, {n}); use mode='wrap' or 'clip'")
        elif mode == "wrap":
            idx = temps(ga.remainder(idx, n))
        else:
            idx = temps(ga.clip(idx, 0, n - 1))
        result = ga.zeros(shape, dtype=dt, device=dev)
        try:
            for k, c in enumerate(cs):
                pick = temps(idx == k)
                new = ga.where(pick, c, result)
                result.free()
                result = new
            if result.dtype != dt:
                new = ga.astype(result, dt)
                result.free()
                result = new
        except BaseException:
            result.free()
            raise
    return _into(fn, result, out)


def _into(fn: str, result, out):
    if out is None:
        return result
    if not isinstance(out, ArrayBase):
        raise TypeError(f"{fn}(): out must be a gpuarrays array, got {type(out).__name__}")
    try:
        out[...] = result
    finally:
        result.free()
    return out


def compress(condition, a, axis=None, out=None):
    """The slices of ``a`` along ``axis`` (flattened ``a`` for ``None``) where the 1-d
    ``condition`` is true; a ``condition`` shorter than the axis counts as false beyond its
    end, a true entry beyond the axis is an ``IndexError``."""
    ga = _ga()
    fn = "compress"
    a = _array(fn, "a", a)
    with _Temps(a, out) as temps:
        cond = _operand(fn, "condition", condition, a.device, temps)
        if cond.ndim != 1:
            raise ValueError(f"compress(): condition must be 1-d, got shape {cond.shape}; "
                             f"flatten it or use extract()")
        idx = ga.nonzero(cond)[0]
        temps(idx)
        if axis is None:
            src, ax = _flat(a, temps) if a.ndim else temps(ga.reshape(a, (1,))), 0
        else:
            src, ax = a, _axis(fn, axis, a.ndim)
        n = src.shape[ax]
        if idx.size and _bounds(idx)[1] >= n:
            raise IndexError(f"compress(): condition has a true entry at {_bounds(idx)[1]}, "
                             f"beyond the axis' size {n}; shorten condition to {n}")
        result = ga.take(src, idx, axis=ax)
    return _into(fn, result, out)


def extract(condition, arr):
    """The elements of ``arr`` (flattened) where ``condition`` (flattened) is non-zero."""
    ga = _ga()
    fn = "extract"
    arr = _array(fn, "arr", arr)
    with _Temps(arr) as temps:
        cond = _operand(fn, "condition", condition, arr.device, temps)
        c = _flat(cond, temps) if cond.ndim else temps(ga.reshape(cond, (1,)))
        src = _flat(arr, temps) if arr.ndim else temps(ga.reshape(arr, (1,)))
        idx = temps(ga.nonzero(c)[0])
        if idx.size and _bounds(idx)[1] >= src.size:
            raise IndexError(f"extract(): condition is true at flat index {_bounds(idx)[1]}, "
                             f"beyond arr's size {src.size}; give them the same size")
        return ga.take(src, idx, axis=0)


# --------------------------------------------------------------------------- scatter (in place)
def _mask_like(fn: str, a, mask, temps: _Temps):
    """``mask`` as a bool array of ``a``'s shape (it must have ``a``'s size)."""
    ga = _ga()
    m = _operand(fn, "mask", mask, a.device, temps)
    if m.size != a.size:
        raise ValueError(f"{fn}(): mask and data must be the same size, got {m.size} and "
                         f"{a.size}; reshape or broadcast the mask first")
    if m.dtype != _BOOL:
        m = temps(m != 0)
    if m.shape != a.shape:
        m = temps(ga.reshape(m, a.shape))
    return m


def place(arr, mask, vals):
    """``arr[mask] = vals``, the first ``N`` values of ``vals`` (repeated when shorter), where
    ``N`` is the number of true entries in ``mask``.  In place; returns ``None``."""
    ga = _ga()
    fn = "place"
    arr = _array(fn, "arr", arr)
    _writeable(fn, arr)
    with _Temps(arr) as temps:
        m = _mask_like(fn, arr, mask, temps)
        v = _operand(fn, "vals", vals, arr.device, temps)
        v = _flat(v, temps) if v.ndim else temps(ga.reshape(v, (1,)))
        cnt = ga.count_nonzero(m)
        n = int(cnt)
        cnt.free()
        if n == 0:
            return None
        if v.size == 0:
            raise ValueError(f"place(): cannot insert from an empty vals into {n} places; "
                             f"give at least one value")
        arr[m] = _cycled(v, n, temps)
    return None


def put(a, ind, v, mode="raise"):
    """``a.flat[ind] = v`` (``v`` repeated to ``ind``'s length).  ``mode``: ``'raise'``
    (negative indices count from the end; others out of range are an ``IndexError``),
    ``'wrap'``, ``'clip'``.  In place; returns ``None``.  With repeated indices the value that
    lands is one of them on device back-ends (NumPy: the last)."""
    ga = _ga()
    fn = "put"
    a = _array(fn, "a", a)
    mode = _mode(fn, mode)
    _writeable(fn, a)
    with _Temps(a) as temps:
        i = _operand(fn, "ind", ind, a.device, temps)
        _int_array(fn, "ind", i)
        vals = _operand(fn, "v", v, a.device, temps)
        i = _flat(i, temps) if i.ndim else temps(ga.reshape(i, (1,)))
        vals = _flat(vals, temps) if vals.ndim else temps(ga.reshape(vals, (1,)))
        if i.size == 0 or vals.size == 0:
            return None
        if a.size == 0:
            raise IndexError("put(): cannot replace elements of an empty array")
        i = _fit_indices(fn, i, a.size, mode, temps)
        _write_flat(fn, a, i, _cycled(vals, i.size, temps), temps)
    return None


def put_along_axis(arr, indices, values, axis):
    """``arr[..., indices, ...] = values`` matching 1-d slices along ``axis`` (as NumPy's:
    ``indices`` has ``arr``'s number of dimensions and broadcasts against it off the axis;
    ``axis=None`` works on the flattened ``arr`` with 1-d indices).  In place; returns
    ``None``."""
    ga = _ga()
    fn = "put_along_axis"
    arr = _array(fn, "arr", arr)
    _writeable(fn, arr)
    with _Temps(arr) as temps:
        idx = _operand(fn, "indices", indices, arr.device, temps)
        if idx.dtype.kind not in "iu":
            raise IndexError(f"put_along_axis(): indices must be an integer array, got "
                             f"{idx.dtype}")
        vals = _operand(fn, "values", values, arr.device, temps)
        if axis is None:
            if idx.ndim != 1:
                raise ValueError(f"put_along_axis(): with axis=None, indices must be 1-d, got "
                                 f"shape {idx.shape}")
            i = _fit_indices(fn, idx, arr.size, "raise", temps)
            vals = temps(ga.broadcast_to(vals, i.shape))
            _write_flat(fn, arr, i, vals, temps)
            return None
        if idx.ndim != arr.ndim:
            raise ValueError(f"put_along_axis(): indices and arr must have the same number of "
                             f"dimensions, got {idx.ndim} and {arr.ndim}")
        ax = _axis(fn, axis, arr.ndim)
        key = []
        for d in range(arr.ndim):
            if d == ax:
                key.append(idx)
                continue
            shape = [1] * arr.ndim
            shape[d] = arr.shape[d]
            r = temps(ga.arange(arr.shape[d], dtype=_INTP, device=arr.device))
            key.append(temps(ga.reshape(r, tuple(shape))))
        arr[tuple(key)] = vals
    return None


def putmask(a, /, mask, values):
    """``a.flat[n] = values.flat[n % values.size]`` wherever ``mask.flat[n]`` is true (values
    are picked by position in ``a``, not by count as in :func:`place`).  In place; returns
    ``None``."""
    ga = _ga()
    fn = "putmask"
    a = _array(fn, "a", a)
    _writeable(fn, a)
    with _Temps(a) as temps:
        m = _mask_like(fn, a, mask, temps)
        v = _operand(fn, "values", values, a.device, temps)
        if v.size == 0 or a.size == 0:
            return None
        if v.shape != a.shape:
            v = _flat(v, temps) if v.ndim else temps(ga.reshape(v, (1,)))
            v = temps(ga.reshape(_cycled(v, a.size, temps), a.shape))
        if v.dtype != a.dtype:
            v = temps(ga.astype(v, a.dtype))
        a[...] = temps(ga.where(m, v, a))
    return None


# --------------------------------------------------------------------------- select
def select(condlist, choicelist, default=0):
    """``choicelist[k]`` where ``condlist[k]`` is the first true condition, else ``default``
    (everything broadcasts; bool conditions only)."""
    ga = _ga()
    fn = "select"
    if not isinstance(condlist, list | tuple) or not isinstance(choicelist, list | tuple):
        raise TypeError("select(): condlist and choicelist must be lists of arrays")
    if len(condlist) != len(choicelist):
        raise ValueError(f"select(): list of cases must be same length as list of conditions "
                         f"({len(choicelist)} choices, {len(condlist)} conditions)")
    if len(condlist) == 0:
        raise ValueError("select(): select with an empty condition list is not possible")
    arrays = [c for c in (*condlist, *choicelist, default) if isinstance(c, ArrayBase)]
    if not arrays:
        raise TypeError("select() needs at least one gpuarrays array among its arguments; "
                        "copy host data with ga.asarray(...)")
    dev = arrays[0].device
    with _Temps() as temps:
        conds = [_operand(fn, f"condlist[{k}]", c, dev, temps) for k, c in enumerate(condlist)]
        for k, c in enumerate(conds):
            if c.dtype != _BOOL:
                raise TypeError(f"select(): invalid entry {k} in condlist: should be a bool "
                                f"array, got {c.dtype}; compare first (x != 0)")
        choices = [c if type(c) in (int, float, complex) else
                   _operand(fn, f"choicelist[{k}]", c, dev, temps)
                   for k, c in enumerate(choicelist)]
        dflt = default if type(default) in (int, float, complex) else \
            _operand(fn, "default", default, dev, temps)
        every = [*choices, dflt]
        try:
            if any(isinstance(c, ArrayBase) for c in every):
                dt = ga.result_type(*every)
            else:
                dt = np.result_type(*every)
        except TypeError as e:
            raise TypeError(f"select(): choicelist and default have no common dtype: {e}") \
                from e
        shape = ga.broadcast_shapes(*(c.shape for c in conds),
                                    *(c.shape for c in every if isinstance(c, ArrayBase)))
        if isinstance(dflt, ArrayBase):
            result = ga.astype(temps(ga.broadcast_to(dflt, shape)), dt, copy=True)
        else:
            result = ga.full(shape, dflt, dtype=dt, device=dev)
        try:
            for cond, choice in zip(conds[::-1], choices[::-1], strict=True):
                if isinstance(choice, ArrayBase) and choice.dtype != dt:
                    choice = temps(ga.astype(choice, dt))
                new = ga.where(cond, choice, result)
                result.free()
                result = new
            if result.dtype != dt:
                new = ga.astype(result, dt)
                result.free()
                result = new
        except BaseException:
            result.free()
            raise
        return result


# --------------------------------------------------------------------------- flat <-> multi
def _shape_arg(fn: str, name: str, shape) -> tuple:
    if isinstance(shape, int | np.integer) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(operator.index(s) for s in shape)
    except TypeError as e:
        raise TypeError(f"{fn}(): {name} must be a tuple of ints, got {shape!r}") from e
    if any(d < 0 for d in dims):
        raise ValueError(f"{fn}(): {name} must not be negative, got {dims}")
    return dims


def unravel_index(indices, shape, order="C"):
    """The coordinates, in an array of ``shape``, of flat indices: a tuple of int64 arrays of
    ``indices``' shape (``order`` ``'C'`` or ``'F'``).  An index outside ``[0, prod(shape))``
    is a ``ValueError``."""
    ga = _ga()
    fn = "unravel_index"
    dims = _shape_arg(fn, "shape", shape)
    if order not in ("C", "F"):
        raise ValueError(f"unravel_index(): order must be 'C' or 'F', got {order!r}")
    if isinstance(indices, ArrayBase):
        dev = indices.device
    else:
        dev = None
    with _Temps() as temps:
        if dev is None:
            if isinstance(indices, np.ndarray):
                raise TypeError("unravel_index(): indices is a NumPy array; pass "
                                "ga.asarray(indices, device=...)")
            dev = _ga().get_device()
        idx = _operand(fn, "indices", indices, dev, temps)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"unravel_index(): only int indices permitted, got {idx.dtype}")
        size = math.prod(dims)
        if idx.size:
            lo, hi = _bounds(idx)
            if lo < 0 or hi >= size:
                bad = lo if lo < 0 else hi
                raise ValueError(f"unravel_index(): index {bad} is out of bounds for array "
                                 f"with size {size}")
        rest = temps(ga.astype(idx, _INTP))
        out = [None] * len(dims)
        order_dims = range(len(dims) - 1, -1, -1) if order == "C" else range(len(dims))
        try:
            for k in order_dims:
                d = dims[k]
                if d == 1:
                    out[k] = ga.zeros(rest.shape, dtype=_INTP, device=dev)
                    continue
                out[k] = ga.remainder(rest, d)
                rest = temps(ga.floor_divide(rest, d))
        except BaseException:
            for o in out:
                if o is not None:
                    o.free()
            raise
        return tuple(out)


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """Flat indices (int64) of coordinate arrays ``multi_index`` in an array of shape
    ``dims``.  ``mode``: ``'raise'`` (a coordinate outside ``[0, dim)`` is a ``ValueError``),
    ``'wrap'``, ``'clip'``, or a tuple of them, one per dimension."""
    ga = _ga()
    fn = "ravel_multi_index"
    shape = _shape_arg(fn, "dims", dims)
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index(): order must be 'C' or 'F', got {order!r}")
    if not isinstance(multi_index, list | tuple):
        if isinstance(multi_index, ArrayBase):
            multi_index = [multi_index[k] for k in range(multi_index.shape[0])] \
                if multi_index.ndim else [multi_index]
        else:
            raise TypeError("ravel_multi_index(): multi_index must be a tuple of integer "
                            "arrays")
    if len(multi_index) != len(shape):
        raise ValueError(f"ravel_multi_index(): parameter multi_index must be a sequence of "
                         f"length {len(shape)}, got {len(multi_index)}")
    modes = [mode] * len(shape) if isinstance(mode, str) else list(mode)
    if len(modes) != len(shape):
        raise ValueError(f"ravel_multi_index(): mode needs one entry per dimension "
                         f"({len(shape)}), got {mode!r}")
    modes = [_mode(fn, m) for m in modes]
    if math.prod(shape) > np.iinfo(np.int64).max:
        raise ValueError(f"ravel_multi_index(): invalid dims {shape}: the array size is larger "
                         f"than the maximum possible size")
    arrays = [m for m in multi_index if isinstance(m, ArrayBase)]
    dev = arrays[0].device if arrays else _ga().get_device()
    with _Temps(*arrays) as temps:
        coords = [_operand(fn, f"multi_index[{k}]", c, dev, temps)
                  for k, c in enumerate(multi_index)]
        for c in coords:
            if c.dtype.kind not in "iu":
                raise TypeError(f"ravel_multi_index(): only int indices permitted, got "
                                f"{c.dtype}")
        bshape = ga.broadcast_shapes(*(c.shape for c in coords))
        strides = [0] * len(shape)
        step = 1
        for k in (range(len(shape) - 1, -1, -1) if order == "C" else range(len(shape))):
            strides[k] = step
            step *= shape[k]
        result = ga.zeros(bshape, dtype=_INTP, device=dev)
        try:
            for k, (c, d, m) in enumerate(zip(coords, shape, modes, strict=True)):
                c = temps(ga.astype(c, _INTP)) if c.dtype != _INTP else c
                if m == "raise":
                    if c.size:
                        lo, hi = _bounds(c)
                        if lo < 0 or hi >= d:
                            raise ValueError(f"ravel_multi_index(): invalid entry in "
                                             f"coordinates array: {lo if lo < 0 else hi} is "
                                             f"not in [0, {d}) for dimension {k}; use "
                                             f"mode='wrap' or 'clip'")
                elif m == "wrap":
                    c = temps(ga.remainder(c, d)) if d else c
                else:
                    c = temps(ga.clip(c, 0, max(d - 1, 0)))
                new = ga.add(result, temps(ga.multiply(c, strides[k])))
                result.free()
                result = new
        except BaseException:
            result.free()
            raise
        return result


# --------------------------------------------------------------------------- sorting
def lexsort(keys, axis=-1):
    """Indices that sort by several keys, the last key primary (stable: one stable argsort
    per key, each on the previous order)."""
    ga = _ga()
    fn = "lexsort"
    if isinstance(keys, ArrayBase):
        keys._live()
        if keys.ndim == 0:
            raise TypeError("lexsort(): keys must be a sequence of arrays or an array of at "
                            "least 1 dimension, got a 0-d array")
        ks = [keys[k] for k in range(keys.shape[0])]
        owned = list(ks)
    elif isinstance(keys, list | tuple):
        ks = list(keys)
        owned = []
    else:
        raise TypeError(f"lexsort(): keys must be a sequence of arrays, got "
                        f"{type(keys).__name__}")
    with _Temps() as temps:
        for o in owned:
            temps(o)
        if not ks:
            raise TypeError("lexsort(): need sequence of keys with len > 0")
        for k in ks:
            _array(fn, "keys", k)
        shape = ks[0].shape
        if any(k.shape != shape for k in ks):
            raise ValueError(f"lexsort(): all keys need to be the same shape, got "
                             f"{[k.shape for k in ks]}")
        if any(k.device != ks[0].device for k in ks):
            raise ValueError("lexsort(): keys are on different devices; move them with "
                             ".to_device(...)")
        if axis is None:
            raise TypeError("lexsort(): axis must be an int, got None; flatten the keys "
                            "first")
        if len(shape) == 0:
            raise np.exceptions.AxisError(f"lexsort(): axis {axis} is out of bounds for 0-d "
                                          f"keys")
        ax = _axis(fn, axis, len(shape))
        perm = ga.argsort(ks[0], axis=ax, stable=True)
        try:
            for k in ks[1:]:
                kp = temps(ga.take_along_axis(k, perm, axis=ax))
                p2 = temps(ga.argsort(kp, axis=ax, stable=True))
                new = ga.take_along_axis(perm, p2, axis=ax)
                perm.free()
                perm = new
        except BaseException:
            perm.free()
            raise
        return perm


def _partition_args(fn: str, a, kth, axis, kind, order):
    if order is not None:
        raise TypeError(f"{fn}(order=...) orders structured fields, which gpuarrays does not "
                        f"sort; partition a field's array instead")
    if kind != "introselect":
        raise ValueError(f"{fn}(): kind must be 'introselect', got {kind!r}")
    if isinstance(kth, ArrayBase):
        raise TypeError(f"{fn}(): kth must be an int or a sequence of ints on the host, got a "
                        f"gpuarrays array; pass kth.tolist()")
    ks = kth if isinstance(kth, list | tuple) else [kth]
    for k in ks:
        if isinstance(k, bool | np.bool_):
            raise ValueError(f"{fn}(): booleans unacceptable as partition index, got {kth!r}")
        if not isinstance(k, int | np.integer):
            raise TypeError(f"{fn}(): kth must be an int or a sequence of ints, got {kth!r}")
    if axis is None:
        n = a.size
    else:
        if a.ndim == 0:
            raise np.exceptions.AxisError(f"{fn}(): axis {axis} is out of bounds for a 0-d "
                                          f"array; pass axis=None")
        n = a.shape[_axis(fn, axis, a.ndim)]
    for k in ks:
        if not -n <= k < n:
            raise ValueError(f"{fn}(): kth(={k}) out of bounds ({n}); use kth in "
                             f"[-{n}, {n})")


def partition(a, kth, axis=-1, kind="introselect", order=None):
    """A copy of ``a`` with the ``kth`` element(s) where a sort puts them, smaller ones
    before and larger ones after (here: ``a`` sorted along ``axis``, a valid partition for
    every ``kth``; ``axis=None`` flattens)."""
    ga = _ga()
    a = _array("partition", "a", a)
    _partition_args("partition", a, kth, axis, kind, order)
    with _Temps(a) as temps:
        src = _flat(a, temps) if axis is None and a.ndim != 1 else a
        if src.ndim == 0:
            src = temps(ga.reshape(src, (1,)))
        return ga.sort(src, axis=-1 if axis is None else axis, stable=False)


def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """Indices that partition ``a`` (here: indices that sort it along ``axis``)."""
    ga = _ga()
    a = _array("argpartition", "a", a)
    _partition_args("argpartition", a, kth, axis, kind, order)
    with _Temps(a) as temps:
        src = _flat(a, temps) if axis is None and a.ndim != 1 else a
        if src.ndim == 0:
            src = temps(ga.reshape(src, (1,)))
        return ga.argsort(src, axis=-1 if axis is None else axis, stable=False)


def sort_complex(a):
    """``a`` sorted along its last axis (real part first, then imaginary), as a complex
    array: complex64 for int8/int16/uint8/uint16, complex128 for other real types."""
    ga = _ga()
    a = _array("sort_complex", "a", a)
    s = ga.sort(a, axis=-1)
    if a.dtype.kind == "c":
        return s
    dt = np.dtype(np.complex64) if a.dtype.char in "bhBH" else np.dtype(np.complex128)
    try:
        return ga.astype(s, dt)
    finally:
        s.free()


# --------------------------------------------------------------------------- comparisons
def _pair(fn: str, x, y, temps: _Temps):
    arrays = [v for v in (x, y) if isinstance(v, ArrayBase)]
    if not arrays:
        raise TypeError(f"{fn}() needs a gpuarrays array among its operands, got "
                        f"{type(x).__name__} and {type(y).__name__}; use NumPy for host data")
    dev = arrays[0].device
    out = []
    for name, v in (("a", x), ("b", y)):
        if isinstance(v, int | float | complex) and not isinstance(v, np.generic):
            out.append(v)
        else:
            out.append(_operand(fn, name, v, dev, temps))
    return out


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``|a - b| <= atol + rtol * |b|`` (``b`` finite) or ``a == b``, elementwise, in NumPy's
    dtype rules (``b`` goes to ``result_type(b, 1.0)``); ``equal_nan`` counts NaN against NaN
    as close.  A bool array (0-d for 0-d operands, where NumPy gives a ``np.bool_``)."""
    ga = _ga()
    fn = "isclose"
    with _Temps() as temps:
        x, y = _pair(fn, a, b, temps)
        if isinstance(y, ArrayBase):
            dt = ga.result_type(y, 1.0)
            if y.dtype != dt:
                y = temps(ga.astype(y, dt))
        elif isinstance(y, int):
            y = float(y)
        dev = (x if isinstance(x, ArrayBase) else y).device
        tols = []
        for name, t in (("rtol", rtol), ("atol", atol)):
            tols.append(t if isinstance(t, int | float) and not isinstance(t, bool)
                        else _operand(fn, name, t, dev, temps))
        rt, at = tols

        def arr(v):
            return v if isinstance(v, ArrayBase) else temps(ga.asarray(v, device=dev))

        diff = temps(ga.abs(temps(ga.subtract(x, y))))
        ay = temps(ga.abs(y)) if isinstance(y, ArrayBase) else abs(y)
        tol = temps(ga.add(at, temps(ga.multiply(rt, ay)))) if isinstance(ay, ArrayBase) \
            or isinstance(rt, ArrayBase) or isinstance(at, ArrayBase) else at + rt * ay
        close = temps(ga.less_equal(diff, tol))
        fin = temps(ga.isfinite(arr(y)))
        result = temps(ga.logical_or(temps(ga.logical_and(close, fin)),
                                     temps(ga.equal(x, y))))
        if equal_nan and all(np.dtype(ga.result_type(v)).kind in "fc" for v in (x, y)):
            both = temps(ga.logical_and(temps(ga.isnan(arr(x))), temps(ga.isnan(arr(y)))))
            result = temps(ga.logical_or(result, both))
        return temps.release(result)


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of :func:`isclose` is true: a Python ``bool`` (one scalar read
    back)."""
    r = isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    try:
        return bool(_all(r))
    finally:
        r.free()


def _all(x) -> bool:
    """``bool(ga.all(x))``: one scalar read back."""
    return _read_bool(_ga().all(x))


def array_equal(a1, a2, equal_nan=False):
    """Whether ``a1`` and ``a2`` have the same shape and elements (``equal_nan``: NaN equals
    NaN): a Python ``bool`` (one scalar read back)."""
    ga = _ga()
    with _Temps() as temps:
        x, y = _pair("array_equal", a1, a2, temps)
        if np.shape(x) != np.shape(y):
            return False
        eq = temps(ga.equal(x, y))
        if equal_nan and any(np.asarray(v).dtype.kind in "fc" if not isinstance(v, ArrayBase)
                             else v.dtype.kind in "fc" for v in (x, y)):
            nx = temps(ga.isnan(x)) if isinstance(x, ArrayBase) else bool(np.isnan(x))
            ny = temps(ga.isnan(y)) if isinstance(y, ArrayBase) else bool(np.isnan(y))
            eq = temps(ga.logical_or(eq, temps(ga.logical_and(nx, ny))))
        return _all(eq)


def array_equiv(a1, a2):
    """Whether ``a1`` and ``a2`` broadcast together and are equal elementwise: a Python
    ``bool``."""
    ga = _ga()
    with _Temps() as temps:
        x, y = _pair("array_equiv", a1, a2, temps)
        try:
            ga.broadcast_shapes(np.shape(x), np.shape(y))
        except ValueError:
            return False
        return _all(temps(ga.equal(x, y)))


# --------------------------------------------------------------------------- sets
def _flag(name: str, value) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"unique(): {name} must be True or False, got {value!r}")
    return bool(value)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, sorted=True):
    """NumPy's ``unique``: the sorted unique elements of ``ar`` (flattened), or with ``axis``
    its unique slices along that axis (in lexicographic order), and optionally the first
    occurrences' indices, the inverse (``ar``'s shape for ``axis=None``, 1-d otherwise) and
    the counts.  ``equal_nan=True`` collapses every NaN into one (the first in sorted order),
    ``False`` keeps each.  ``sorted`` is accepted; results are always sorted."""
    from ..sets import _unique as unique_parts

    fn = "unique"
    ar = _array(fn, "ar", ar)
    want = [_flag("return_index", return_index), _flag("return_inverse", return_inverse),
            _flag("return_counts", return_counts)]
    equal_nan = _flag("equal_nan", equal_nan)
    _flag("sorted", sorted)
    if axis is not None:
        out = _unique_axis(ar, _axis(fn, axis, ar.ndim), *want)
    else:
        got = unique_parts(fn, ar, *want)
        out = [got["values"]]
        out += [got["indices"]] if want[0] else []
        out += [got["inverse_indices"]] if want[1] else []
        out += [got["counts"]] if want[2] else []
        if equal_nan and ar.dtype.kind in "fc" and out[0].size > 1:
            try:
                out = _collapse_nans(out, want)
            except BaseException:
                for o in out:
                    o.free()
                raise
    return out[0] if len(out) == 1 else tuple(out)


def _collapse_nans(out: list, want: list) -> list:
    """NaNs sort last, each distinct: keep the first, give it their count, point the inverse
    of every NaN at it."""
    ga = _ga()
    values = out[0]
    with _Temps() as temps:
        nan = temps(ga.isnan(values))
        cnt = ga.count_nonzero(nan)
        k = int(cnt)
        cnt.free()
    if k < 2:
        return out
    keep = values.size - k + 1
    names = ["values", *(n for n, w in zip(("index", "inverse", "counts"), want, strict=True)
                         if w)]
    new = []
    try:
        for o, name in zip(out, names, strict=True):
            if name == "inverse":
                new.append(ga.minimum(o, keep - 1))
                continue
            with o[:keep] as head:
                c = head.copy()
            new.append(c)
            if name == "counts":
                c[keep - 1] = k
    except BaseException:
        for c in new:
            c.free()
        raise
    for o in out:
        o.free()
    return new


def _unique_axis(ar, ax: int, want_index: bool, want_inverse: bool, want_counts: bool):
    """Unique slices along ``ax``: rows of the ``(n, m)`` reshape, ordered by a lexsort of
    the columns (one stable argsort per column), runs of equal rows found by comparing
    neighbours."""
    ga = _ga()
    dev = ar.device
    if ar.dtype.names is not None:
        raise TypeError(f"unique(axis=...) of a structured dtype {ar.dtype}: use a field's "
                        f"array")
    outs = []
    with _Temps(ar) as temps:
        x = temps(ga.moveaxis(ar, ax, 0)) if ax else ar
        n, rest = x.shape[0], x.shape[1:]
        m = math.prod(rest)
        if n == 0 or m == 0:
            u = 0 if n == 0 else 1
            vals = temps(ga.zeros((u, *rest), dtype=ar.dtype, device=dev))
            outs.append(ga.moveaxis(vals, 0, ax) if ax else temps.release(vals))
            if want_index:
                outs.append(ga.zeros((u,), dtype=_INTP, device=dev))
            if want_inverse:
                outs.append(ga.zeros((n,), dtype=_INTP, device=dev))
            if want_counts:
                outs.append(ga.full((u,), n, dtype=_INTP, device=dev))
            return outs
        rows = temps(ga.reshape(x, (n, m)))
        cols = [temps(rows[:, c]) for c in range(m - 1, -1, -1)]
        perm = temps(lexsort(cols, axis=0))
        s = temps(ga.take(rows, perm, axis=0))
        if n > 1:
            neq = temps(ga.not_equal(temps(s[1:]), temps(s[:-1])))
            step = temps(ga.any(neq, axis=1))
            first = temps(ga.ones((1,), dtype=_BOOL, device=dev))
            flag = temps(ga.concat([first, step]))
        else:
            flag = temps(ga.ones((1,), dtype=_BOOL, device=dev))
        starts = temps(ga.nonzero(flag)[0])
        count = starts.size
        vals = temps(ga.reshape(temps(ga.take(s, starts, axis=0)), (count, *rest)))
        try:
            outs.append(ga.moveaxis(vals, 0, ax) if ax else temps.release(vals))
            if want_index:
                outs.append(ga.take(perm, starts))
            if want_inverse:
                run = temps(ga.cumulative_sum(flag, dtype=_INTP))
                inv = ga.empty((n,), dtype=_INTP, device=dev)
                outs.append(inv)
                inv[perm] = temps(ga.subtract(run, 1))
            if want_counts:
                end = temps(ga.full((1,), n, dtype=_INTP, device=dev))
                outs.append(ga.diff(temps(ga.concat([starts, end]))))
        except BaseException:
            for o in outs:
                o.free()
            raise
    return outs


def _set_operands(fn: str, ar1, ar2, temps: _Temps, unique_first: bool = False):
    """``(a, b, device)``: the two set arguments on the device of the gpuarrays one (host
    lists uploaded), flattened, and made unique first when ``unique_first``."""
    ga = _ga()
    dev = next((v.device for v in (ar1, ar2) if isinstance(v, ArrayBase)), None)
    if dev is None:
        raise TypeError(f"{fn}() needs a gpuarrays array among its operands, got "
                        f"{type(ar1).__name__} and {type(ar2).__name__}")
    out = []
    for name, x in (("ar1", ar1), ("ar2", ar2)):
        v = _operand(fn, name, x, dev, temps)
        v = _flat(v, temps) if v.ndim else temps(ga.reshape(v, (1,)))
        out.append(temps(unique(v)) if unique_first else v)
    return out[0], out[1], dev


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False):
    """The sorted values in both ``ar1`` and ``ar2`` (flattened); with ``return_indices``
    also the indices of their first occurrences in each."""
    ga = _ga()
    with _Temps() as temps:
        a, b, _ = _set_operands("intersect1d", ar1, ar2, temps)
        if not assume_unique:
            if return_indices:
                a, ind1 = (temps(r) for r in unique(a, return_index=True))
                b, ind2 = (temps(r) for r in unique(b, return_index=True))
            else:
                a = temps(unique(a))
                b = temps(unique(b))
        aux = temps(ga.concat([a, b], axis=None))
        if return_indices:
            order = temps(ga.argsort(aux, stable=True))
            aux = temps(ga.take(aux, order))
        else:
            aux = temps(ga.sort(aux, stable=False))
        head, tail = temps(aux[:-1]), temps(aux[1:])
        mask = temps(ga.equal(tail, head))
        common = head[mask]
        if not return_indices:
            return common
        try:
            i1 = temps(temps(order[:-1])[mask])
            i2 = temps(ga.subtract(temps(temps(order[1:])[mask]), a.size))
            if not assume_unique:
                i1 = temps(ga.take(ind1, i1))
                i2 = temps(ga.take(ind2, i2))
            temps.release(i1)
            temps.release(i2)
        except BaseException:
            common.free()
            raise
        return common, i1, i2


def union1d(ar1, ar2):
    """The sorted unique values of ``ar1`` and ``ar2`` together (flattened)."""
    ga = _ga()
    with _Temps() as temps:
        a, b, _ = _set_operands("union1d", ar1, ar2, temps)
        return unique(temps(ga.concat([a, b], axis=None)))


def setdiff1d(ar1, ar2, assume_unique=False):
    """The unique values of ``ar1`` not in ``ar2`` (sorted unless ``assume_unique``)."""
    ga = _ga()
    with _Temps() as temps:
        a, b, _ = _set_operands("setdiff1d", ar1, ar2, temps, not assume_unique)
        return a[temps(ga.isin(a, b, invert=True))]


def setxor1d(ar1, ar2, assume_unique=False):
    """The sorted values in exactly one of ``ar1`` and ``ar2``."""
    ga = _ga()
    with _Temps() as temps:
        a, b, dev = _set_operands("setxor1d", ar1, ar2, temps, not assume_unique)
        aux = temps(ga.concat([a, b], axis=None))
        if aux.size == 0:
            return temps.release(aux)
        aux = temps(ga.sort(aux, stable=False))
        edge = temps(ga.ones((1,), dtype=_BOOL, device=dev))
        if aux.size > 1:
            step = temps(ga.not_equal(temps(aux[1:]), temps(aux[:-1])))
            flag = temps(ga.concat([edge, step, edge]))
        else:
            flag = temps(ga.concat([edge, edge]))
        keep = temps(ga.logical_and(temps(flag[1:]), temps(flag[:-1])))
        return aux[keep]


# --------------------------------------------------------------------------- bits
def _bitorder(fn: str, bitorder) -> str:
    if bitorder not in ("big", "little"):
        raise ValueError(f"{fn}(): bitorder must be 'big' or 'little', got {bitorder!r}")
    return bitorder


def _weights(bitorder: str, dev, temps: _Temps):
    """uint8 ``[7, 6, ..., 0]`` (big) or ``[0, ..., 7]`` (little): the shift of each bit."""
    ga = _ga()
    r = temps(ga.arange(8, dtype=_U8, device=dev))
    return temps(ga.subtract(7, r)) if bitorder == "big" else r


def _bits_along_last(fn: str, a, axis, temps) -> tuple:
    """``(x, ax)``: ``a`` with the axis ``packbits``/``unpackbits`` work along moved last
    (``a`` flattened for ``axis=None``, then ``ax`` is 0), and that axis' place in the result."""
    ga = _ga()
    if axis is None:
        x = _flat(a, temps) if a.ndim else temps(ga.reshape(a, (1,)))
        ax = 0
    else:
        if a.ndim == 0:
            raise np.exceptions.AxisError(f"{fn}(): axis {axis} is out of bounds for a 0-d "
                                          f"array; pass axis=None")
        x, ax = a, _axis(fn, axis, a.ndim)
    return (temps(ga.moveaxis(x, ax, -1)) if ax != x.ndim - 1 else x), ax


def packbits(a, /, axis=None, bitorder="big"):
    """Pack the truth of each element of an integer or bool array into uint8 bits along
    ``axis`` (flattened for ``None``), padding with zeros to a multiple of 8."""
    ga = _ga()
    fn = "packbits"
    a = _array(fn, "a", a)
    bitorder = _bitorder(fn, bitorder)
    if a.dtype.kind not in "biu":
        raise TypeError(f"packbits(): expected an input array of integer or boolean data "
                        f"type, got {a.dtype}; compare first (a != 0)")
    dev = a.device
    with _Temps(a) as temps:
        x, ax = _bits_along_last(fn, a, axis, temps)
        n = x.shape[-1]
        m = -(-n // 8)
        bits = temps(ga.astype(temps(ga.not_equal(x, 0)), _U8))
        if m * 8 != n:
            pad = temps(ga.zeros((*x.shape[:-1], m * 8 - n), dtype=_U8, device=dev))
            bits = temps(ga.concat([bits, pad], axis=-1))
        grouped = temps(ga.reshape(bits, (*x.shape[:-1], m, 8)))
        shifted = temps(ga.bitwise_left_shift(grouped, _weights(bitorder, dev, temps)))
        packed = temps(ga.sum(shifted, axis=-1, dtype=_U8))
        result = ga.moveaxis(packed, -1, ax) if packed.ndim - 1 != ax else temps.release(packed)
        if result.flags.c_contiguous:
            return result
        try:
            return result.copy()
        finally:
            result.free()


def unpackbits(a, /, axis=None, count=None, bitorder="big"):
    """Unpack each uint8 element into 8 uint8 bits along ``axis`` (flattened for ``None``);
    ``count`` keeps that many bits (padding with zeros), a negative one drops bits from
    the end."""
    ga = _ga()
    fn = "unpackbits"
    a = _array(fn, "a", a)
    bitorder = _bitorder(fn, bitorder)
    if a.dtype != _U8:
        raise TypeError(f"unpackbits(): expected an input array of unsigned byte data type "
                        f"(uint8), got {a.dtype}; view or convert it first")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int | np.integer)):
        raise TypeError(f"unpackbits(): count must be an int or None, got {count!r}")
    dev = a.device
    with _Temps(a) as temps:
        x, ax = _bits_along_last(fn, a, axis, temps)
        n = x.shape[-1] * 8
        keep = n if count is None else (count if count >= 0 else builtins.max(n + count, 0))
        if count is not None and count < 0 and -count > n:
            raise ValueError(f"unpackbits(): -count ({-count}) is larger than the number of "
                             f"bits ({n}); use a count in [-{n}, ...)")
        wide = temps(ga.expand_dims(x, axis=-1))
        shifted = temps(ga.bitwise_right_shift(wide, _weights(bitorder, dev, temps)))
        bits = temps(ga.bitwise_and(shifted, 1))
        flat = temps(ga.reshape(bits, (*x.shape[:-1], n)))
        if keep < n:
            flat = temps(flat[..., :keep])
        elif keep > n:
            pad = temps(ga.zeros((*x.shape[:-1], keep - n), dtype=_U8, device=dev))
            flat = temps(ga.concat([flat, pad], axis=-1))
        result = temps(ga.moveaxis(flat, -1, ax)) if ax != flat.ndim - 1 else flat
        return result.copy()
