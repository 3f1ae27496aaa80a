"""NumPy's manipulation and creation functions (stacks, splits, pad, diag, tri ...).

NumPy's signatures and semantics, computed on the array's device (docs/numpy.md):

- **Views where NumPy gives views**: ``atleast_1d/2d/3d``, ``array_split``, ``split``,
  ``hsplit``, ``vsplit``, ``dsplit``, ``rollaxis``, ``rot90``, ``fliplr``, ``flipud``,
  ``diag`` of a 2-d array and ``trim_zeros``.  Their layouts come from NumPy's own function
  applied to a layout-only array (``x._engine()``, never read), so shapes, strides, offsets
  and errors are NumPy's; each result is a new handle on the input's storage.
- **Copies** are compositions of the namespace's device functions: ``concat`` (stacks,
  ``append``), slice assignment into one new array (``pad``, ``resize``, ``diag``,
  ``vander``, ``indices``), ``nonzero`` (``tril_indices`` ...), boolean masks (``delete``,
  ``piecewise``), ``cumulative_prod`` (``vander``), ``sort`` (``pad``'s median).  Nothing
  is copied to the host; a few scalars are read where NumPy's result shape depends on the
  data (``trim_zeros``, ``delete`` with indices, ``asarray_chkfinite``).
"""

from __future__ import annotations

import builtins
import inspect
import operator
import warnings

import numpy as np

from ..._array.creation import asarray as _asarray
from ..._array.make import ArrayBase, new_array
from ..._memory.devices import get_device
from ..creation import arange, empty, ones, zeros
from ..manipulation import (
    _along,
    _array,
    _copy,
    _flat,
    _handle,
    concat,
    moveaxis,
    normalize_axis,
    reshape,
)

__all__ = [
    "append", "apply_along_axis", "apply_over_axes", "array_split", "asanyarray",
    "asarray_chkfinite", "asfortranarray", "atleast_1d", "atleast_2d", "atleast_3d",
    "column_stack", "delete", "diag", "diag_indices", "diag_indices_from", "diagflat",
    "dsplit", "dstack", "fill_diagonal", "fliplr", "flipud", "fromfunction", "hsplit",
    "hstack", "indices", "ix_", "logspace", "mask_indices", "pad", "piecewise", "require",
    "resize", "rollaxis", "rot90", "row_stack", "split", "tri", "tril_indices",
    "tril_indices_from", "trim_zeros", "triu_indices", "triu_indices_from", "vander",
    "vsplit", "vstack",
]

_WITHOUT_F64 = {np.dtype(np.float64): np.dtype(np.float32),
                np.dtype(np.complex128): np.dtype(np.complex64)}
_I8 = np.dtype(np.int64)
_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


# Helpers ----------------------------------------------------------------------------------------
def _ns():
    """The full ``gpuarrays`` namespace (names from modules that import this one)."""
    from ..._array.hooks import HOOKS

    return HOOKS.namespace(None)


def _device_of(device):
    return get_device(device) if device is not None else get_device()


def _on_device(dt: np.dtype, dev) -> np.dtype:
    """``dt``, or float32/complex64 in place of float64/complex128 on a device without
    float64 (docs/compute.md, "Type promotion")."""
    dt = np.dtype(dt)
    if not dev.info.float64 and dt in _WITHOUT_F64:
        return _WITHOUT_F64[dt]
    return dt


def _dtype_arg(dtype, dev) -> np.dtype:
    """NumPy's ``dtype=float``/``int`` defaults as the device's types (``float``: float64,
    or float32 on a device without float64)."""
    if dtype is float:
        return _on_device(np.float64, dev)
    return dev.dtype_of(dtype)


def _operand(name: str, x, dev, temps: list):
    """``x`` as an array on ``dev``: a gpuarrays array as it is (same device), a Python or
    NumPy scalar or sequence uploaded with NumPy's dtype (added to ``temps``)."""
    if isinstance(x, ArrayBase):
        x._live()
        if x._storage.device != dev:
            raise ValueError(f"{name}(): an array is on {x._storage.device}, another on {dev}; "
                             f"move one with to_device() first")
        return x
    try:
        host = np.asarray(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}(): cannot use {type(x).__name__} as an array; pass a "
                        f"gpuarrays array (ga.asarray(x, device=...))") from e
    if host.dtype.kind not in "biufc":
        raise TypeError(f"{name}(): {x!r} is not numeric (dtype {host.dtype}); pass numbers "
                        f"or a gpuarrays array")
    a = _asarray(host, dtype=_on_device(host.dtype, dev), device=dev)
    temps.append(a)
    return a


def _free(temps) -> None:
    for t in temps:
        if t is not None:
            t.free()


def _seq(name: str, tup) -> list:
    if isinstance(tup, ArrayBase) or not isinstance(tup, (list, tuple)):
        raise TypeError(f'{name}(): arrays to stack must be passed as a "sequence" type such '
                        f"as list or tuple, got {type(tup).__name__}")
    if not tup:
        raise ValueError(f"{name}(): need at least one array to concatenate")
    return list(tup)


def _first_device(name: str, items):
    for x in items:
        if isinstance(x, ArrayBase):
            return x._storage.device
    raise TypeError(f"{name}() takes gpuarrays arrays; copy host data to the device first with "
                    f"ga.asarray(x, device=...)")


def _view(x, arr: np.ndarray):
    """A new handle on ``x``'s storage with the layout of ``arr``, a result of NumPy on
    ``x``'s layout-only array that must be a view of it (checked by bounds: nothing is
    read)."""
    if arr.size and arr.base is None:
        raise RuntimeError(f"internal error: NumPy copied the layout of an array of shape "
                           f"{x._shape} instead of viewing it")
    return x._from_engine(arr)


_HINTS = {
    "array_split": "give a positive number of sections or a list of split indices",
    "split": "use array_split for sections of unequal length, or give split indices",
    "hsplit": "hsplit needs at least 1 dimension; use split(ary, n, axis=...)",
    "vsplit": "vsplit needs at least 2 dimensions; use split(ary, n, axis=0)",
    "dsplit": "dsplit needs at least 3 dimensions; use split(ary, n, axis=...)",
    "rollaxis": "axis must be in [-ndim, ndim) and start in [-ndim, ndim]",
    "rot90": "give two different axes in [-ndim, ndim)",
    "fliplr": "fliplr needs at least 2 dimensions; use flip(m, axis=-1)",
    "flipud": "flipud needs at least 1 dimension",
}


def _layout(name: str, x, fn, *args):
    """A view of ``x`` with the layout NumPy's ``fn`` gives the layout-only array (never
    read); NumPy's error class, with the shape and a remedy added to its message."""
    try:
        result = fn(x._engine(), *args)
    except (ValueError, IndexError, TypeError) as e:
        hint = _HINTS.get(name, "")
        raise type(e)(f"{name}(): {e} (array of shape {x._shape}"
                      f"{', arguments ' + repr(args) if args else ''})"
                      f"{'; ' + hint if hint else ''}") from None
    if isinstance(result, list):
        out = []
        try:
            for p in result:
                out.append(_view(x, p))
        except BaseException:
            _free(out)
            raise
        return out
    return _view(x, result)


# Dimensions (views) -----------------------------------------------------------------------------
def _atleast(name: str, fn, arys):
    """Python and NumPy scalars (``atleast_1d(rank)``) become arrays on the device of the
    other arguments, or the default device; arrays must be gpuarrays arrays."""
    out = []
    device = next((a.device for a in arys if isinstance(a, ArrayBase)), None)
    try:
        for a in arys:
            made = None
            if isinstance(a, (bool, int, float, complex, np.generic)):
                a = made = _asarray(a, device=device)
            x = _array(name, a)
            try:
                out.append(_view(x, fn(x._engine())))
            finally:
                if made is not None:
                    made.free()  # the view holds its own handle on the storage
    except BaseException:
        _free(out)
        raise
    if len(out) == 1:
        return out[0]
    return tuple(out)


def atleast_1d(*arys):
    """Views of the arrays with at least one dimension (NumPy's ``atleast_1d``): a new handle
    on each input's storage; one array for one input, else a tuple."""
    return _atleast("atleast_1d", np.atleast_1d, arys)


def atleast_2d(*arys):
    """Views with at least two dimensions (``(n,)`` becomes ``(1, n)``)."""
    return _atleast("atleast_2d", np.atleast_2d, arys)


def atleast_3d(*arys):
    """Views with at least three dimensions (``(n,)`` -> ``(1, n, 1)``, ``(m, n)`` ->
    ``(m, n, 1)``)."""
    return _atleast("atleast_3d", np.atleast_3d, arys)


# Stacks ---------------------------------------------------------------------------------------
def _join(name: str, parts, axis: int, dtype=None, casting="same_kind"):
    """``concatenate(parts, axis, dtype=, casting=)`` with NumPy's casting check; the parts
    (views made here) are freed."""
    try:
        if casting not in _CASTINGS:
            raise ValueError(f"{name}(): casting must be one of {', '.join(_CASTINGS)}, got "
                             f"{casting!r}")
        if dtype is None:
            return _concat(name, parts, axis)
        dev = parts[0]._storage.device
        dt = dev.dtype_of(dtype)
        for p in parts:
            if not np.can_cast(p._dtype, dt, casting=casting):
                raise TypeError(f"{name}(): cannot cast array data from {p._dtype} to {dt} "
                                f"according to the rule {casting!r}; pass casting='unsafe' "
                                f"or another dtype")
        result = _concat(name, parts, axis)
        if result._dtype == dt:
            return result
        try:
            return result.astype(dt)
        finally:
            result.free()
    finally:
        _free(parts)


def _concat(name: str, parts, axis):
    """``concat`` whose shape errors name the NumPy function called (``ValueError``)."""
    try:
        return concat(parts, axis=axis)
    except ValueError as e:
        if type(e) is not ValueError:
            raise
        shapes = ", ".join(str(p._shape) for p in parts)
        raise ValueError(f"{name}(): cannot join arrays of shapes {shapes} along axis {axis} "
                         f"({e}); make the other axes match") from None


def _views(name: str, fn, tup) -> list:
    items = _seq(name, tup)
    out = []
    try:
        for a in items:
            x = _array(name, a)
            out.append(_view(x, fn(x._engine())))
    except BaseException:
        _free(out)
        raise
    return out


def hstack(tup, *, dtype=None, casting="same_kind"):
    """Join arrays along their second axis (the first for 1-d arrays) into a new array."""
    parts = _views("hstack", np.atleast_1d, tup)
    return _join("hstack", parts, 0 if parts[0].ndim == 1 else 1, dtype, casting)


def vstack(tup, *, dtype=None, casting="same_kind"):
    """Join arrays (at least 2-d: ``(n,)`` as ``(1, n)``) along the first axis."""
    return _join("vstack", _views("vstack", np.atleast_2d, tup), 0, dtype, casting)


def row_stack(tup, *, dtype=None, casting="same_kind"):
    """NumPy's deprecated alias of :func:`vstack` (warns as NumPy does)."""
    warnings.warn("`row_stack` alias is deprecated. Use `np.vstack` directly.",
                  DeprecationWarning, stacklevel=2)
    return vstack(tup, dtype=dtype, casting=casting)


def dstack(tup):
    """Join arrays (at least 3-d, NumPy's ``atleast_3d``) along the third axis."""
    return _join("dstack", _views("dstack", np.atleast_3d, tup), 2)


def _column(e: np.ndarray) -> np.ndarray:
    """NumPy's ``array(e, ndmin=2).T`` for 0-d and 1-d ``e``, as views only (the layout
    array must never be copied: its memory is not there)."""
    if e.ndim == 0:
        return e.reshape(1, 1)
    return e[:, None] if e.ndim == 1 else e


def column_stack(tup):
    """Join 1-d arrays as columns (``(n,)`` as ``(n, 1)``) and 2-d arrays along axis 1."""
    return _join("column_stack", _views("column_stack", _column, tup), 1)


def append(arr, values, axis=None):
    """``arr`` with ``values`` appended, in a new array (``axis=None``: both flattened).

    ``values`` may be a gpuarrays array or a Python/NumPy scalar or sequence (uploaded,
    with NumPy's dtype); the result dtype is NumPy's promotion of the two."""
    x = _array("append", arr)
    temps: list = []
    try:
        v = _operand("append", values, x._storage.device, temps)
        return _concat("append", [x, v], axis)
    finally:
        _free(temps)


# Splits (views) -------------------------------------------------------------------------------
def _sections(ios):
    """A gpuarrays array of split indices is read (a few integers decide the shapes)."""
    if isinstance(ios, ArrayBase):
        if ios._dtype.kind not in "iu" or ios.ndim > 1:
            raise TypeError(f"indices_or_sections must be an int or a 1-d integer array, "
                            f"got a {ios._dtype} array of shape {ios._shape}")
        return ios.tolist()
    return ios


def _split(name: str, fn, ary, ios, *axis):
    return _layout(name, _array(name, ary), fn, _sections(ios), *axis)


def array_split(ary, indices_or_sections, axis=0):
    """Views of ``ary`` split along ``axis`` into sections of (nearly) equal length or at
    the given indices, as a list (NumPy's ``array_split``)."""
    return _split("array_split", np.array_split, ary, indices_or_sections, axis)


def split(ary, indices_or_sections, axis=0):
    """As :func:`array_split`, but ``ValueError`` when ``N`` sections do not divide the
    axis equally."""
    return _split("split", np.split, ary, indices_or_sections, axis)


def hsplit(ary, indices_or_sections):
    """:func:`split` along axis 1 (axis 0 for 1-d arrays): views."""
    return _split("hsplit", np.hsplit, ary, indices_or_sections)


def vsplit(ary, indices_or_sections):
    """:func:`split` along axis 0 of an array of at least 2 dimensions: views."""
    return _split("vsplit", np.vsplit, ary, indices_or_sections)


def dsplit(ary, indices_or_sections):
    """:func:`split` along axis 2 of an array of at least 3 dimensions: views."""
    return _split("dsplit", np.dsplit, ary, indices_or_sections)


# Rearranging (views) --------------------------------------------------------------------------
def rollaxis(a, axis, start=0):
    """A view with ``axis`` rolled to position ``start`` (NumPy's ``rollaxis``)."""
    x = _array("rollaxis", a)
    return _layout("rollaxis", x, np.rollaxis, axis, start)


def rot90(m, k=1, axes=(0, 1)):
    """A view of ``m`` rotated by 90 degrees ``k`` times in the plane of ``axes``."""
    x = _array("rot90", m)
    return _layout("rot90", x, np.rot90, k, axes)


def fliplr(m):
    """A view with the columns (axis 1) reversed; ``ValueError`` below 2 dimensions."""
    x = _array("fliplr", m)
    return _layout("fliplr", x, np.fliplr)


def flipud(m):
    """A view with the rows (axis 0) reversed; ``ValueError`` for a 0-d array."""
    x = _array("flipud", m)
    return _layout("flipud", x, np.flipud)


# delete / resize ------------------------------------------------------------------------------
def delete(arr, obj, axis=None):
    """A new array without the entries ``obj`` (an int, a slice, integer indices or a bool
    mask of the axis' length) along ``axis`` (``None``: of the flattened array).

    An int or a slice of step 1 joins two views (``concat``); other indices clear a bool
    mask on the device (uploading host indices) and gather through it (one count read)."""
    x = _array("delete", arr)
    temps: list = []
    try:
        if axis is None:
            if x.ndim != 1:
                x = _flat(x)
                temps.append(x)
            axis = 0
        ax = normalize_axis("delete", axis, x.ndim)
        n = x._shape[ax]
        nd = x.ndim
        dev = x._storage.device
        if isinstance(obj, slice):
            start, stop, step = obj.indices(n)
            xr = range(start, stop, step)
            if len(xr) == 0:
                return x.copy()
            if step < 0:
                step, start, stop = -step, xr[-1], xr[0] + 1
            if step == 1:
                a = x[_along(nd, ax, slice(0, start))]
                b = x[_along(nd, ax, slice(stop, None))]
                temps += [a, b]
                return concat([a, b], axis=ax)
            keep = ones((n,), dtype=bool, device=dev)
            temps.append(keep)
            keep[start:stop:step] = False
        elif (isinstance(obj, (int, np.integer)) and not isinstance(obj, (bool, np.bool_))):
            i = int(obj)
            if i < -n or i >= n:
                raise IndexError(f"delete(): index {i} is out of bounds for axis {ax} with "
                                 f"size {n}")
            i %= n
            a = x[_along(nd, ax, slice(0, i))]
            b = x[_along(nd, ax, slice(i + 1, None))]
            temps += [a, b]
            return concat([a, b], axis=ax)
        else:
            if not isinstance(obj, ArrayBase):
                host = np.asarray(obj)
                if host.size == 0 and host.dtype.kind not in "biu":
                    host = host.astype(np.intp)
                if host.dtype.kind not in "biu":
                    raise IndexError(f"delete(): arrays used as indices must be of integer "
                                     f"(or boolean) type, got {host.dtype}")
                if host.dtype.kind != "b" and host.size == 1:
                    return delete(x, int(host.reshape(())), axis=ax)
                obj = _asarray(host, device=dev)
                temps.append(obj)
            elif obj._storage.device != dev:
                raise ValueError(f"delete(): obj is on {obj._storage.device}, arr on {dev}; "
                                 f"move one with to_device()")
            if obj._dtype.kind == "b":
                if obj._shape != (n,):
                    raise ValueError(f"delete(): boolean array argument obj to delete must "
                                     f"be one dimensional and match the axis length of {n}")
                keep = _ns().logical_not(obj)
                temps.append(keep)
            elif obj._dtype.kind in "iu":
                keep = ones((n,), dtype=bool, device=dev)
                temps.append(keep)
                if obj.size:
                    keep[obj] = False
            else:
                raise IndexError(f"delete(): arrays used as indices must be of integer (or "
                                 f"boolean) type, got {obj._dtype}")
        return x[_along(nd, ax, keep)]
    finally:
        _free(temps)


def resize(a, new_shape):
    """A new array of ``new_shape`` filled with ``a``'s elements (C order) repeated as often
    as needed; zeros when ``a`` is empty.  One broadcast copy writes the whole repeats, a
    second the remainder."""
    x = _array("resize", a)
    if isinstance(new_shape, (int, np.integer)):
        new_shape = (new_shape,)
    shape = tuple(operator.index(n) for n in new_shape)
    new_size = 1
    for n in shape:
        new_size *= n
        if n < 0:
            raise ValueError(f"resize(): all elements of `new_shape` must be non-negative, "
                             f"got {shape}")
    dev = x._storage.device
    if x.size == 0 or new_size == 0:
        return zeros(shape, dtype=x._dtype, device=dev)
    out = new_array(shape, x._dtype, dev, x._storage.kind)
    temps: list = []
    try:
        flat = _flat(x)
        temps.append(flat)
        dst = _flat(out)
        temps.append(dst)
        size = flat.size
        full, rem = divmod(new_size, size)
        if full:
            block = dst[:full * size]
            temps.append(block)
            rows = reshape(block, (full, size))
            temps.append(rows)
            rows[...] = flat
        if rem:
            with dst[full * size:] as tail, flat[:rem] as head:
                _copy(tail, head)
    except BaseException:
        out.free()
        raise
    finally:
        _free(temps)
    return out


# pad ------------------------------------------------------------------------------------------
def _at(sl, axis: int) -> tuple:
    return (slice(None),) * axis + (sl,) + (Ellipsis,)


def _as_pairs(x, ndim: int, as_index: bool = False):
    """NumPy's ``_as_pairs``: ``x`` broadcast to ``ndim`` (before, after) pairs."""
    if x is None:
        return ((None, None),) * ndim
    if isinstance(x, ArrayBase):
        x = x.get() if x.size <= 2 * max(ndim, 1) else x  # a few values: parameters
        if isinstance(x, ArrayBase):
            raise ValueError(f"pad(): {x.size} values cannot be broadcast to ({ndim}, 2)")
    x = np.array(x)
    if as_index:
        x = np.round(x).astype(np.intp, copy=False)
    if x.ndim < 3:
        if x.size == 1:
            x = x.ravel()
            if as_index and x < 0:
                raise ValueError(f"pad(): index can't contain negative values, got {x[0]}")
            return ((x[0].item(), x[0].item()),) * ndim
        if x.size == 2 and x.shape != (2, 1):
            x = x.ravel()
            if as_index and (x[0] < 0 or x[1] < 0):
                raise ValueError(f"pad(): index can't contain negative values, got "
                                 f"{x.tolist()}")
            return ((x[0].item(), x[1].item()),) * ndim
    if as_index and x.min() < 0:
        raise ValueError(f"pad(): index can't contain negative values, got {x.tolist()}")
    try:
        return np.broadcast_to(x, (ndim, 2)).tolist()
    except ValueError:
        raise ValueError(f"pad(): values of shape {x.shape} cannot be broadcast to "
                         f"({ndim}, 2): give one value, a (before, after) pair or one pair "
                         f"per axis") from None


_PAD_KWARGS = {
    "empty": (), "edge": (), "wrap": (), "constant": ("constant_values",),
    "linear_ramp": ("end_values",), "maximum": ("stat_length",), "mean": ("stat_length",),
    "median": ("stat_length",), "minimum": ("stat_length",),
    "reflect": ("reflect_type",), "symmetric": ("reflect_type",),
}


def _set_area(padded, axis: int, width, values, temps: list) -> None:
    """NumPy's ``_set_pad_area``: the ``width`` pads of ``padded`` along ``axis`` get
    ``values`` (scalars or arrays that broadcast), by slice assignment."""
    n = padded._shape[axis]
    if width[0]:
        left = padded[_at(slice(None, width[0]), axis)]
        temps.append(left)
        left[...] = values[0]
    if width[1]:
        right = padded[_at(slice(n - width[1], None), axis)]
        temps.append(right)
        right[...] = values[1]


def _edges(padded, axis: int, width, temps: list):
    left = padded[_at(slice(width[0], width[0] + 1), axis)]
    r = padded._shape[axis] - width[1]
    right = padded[_at(slice(r - 1, r), axis)]
    temps += [left, right]
    return left, right


def _median(x, axis: int):
    """NumPy's median along ``axis`` (keepdims): the middle of the sorted values, NaN where
    the slice holds a NaN."""
    ns = _ns()
    temps: list = []
    try:
        s = ns.sort(x, axis=axis)
        temps.append(s)
        n = x._shape[axis]
        lo, hi = (n - 1) // 2, n // 2
        a = s[_at(slice(lo, lo + 1), axis)]
        b = s[_at(slice(hi, hi + 1), axis)]
        temps += [a, b]
        if lo == hi and x._dtype.kind in "fc":
            m = a.copy()
        else:  # NumPy's mean of the middle pair (float64 for integers)
            pair = ns.concat([a, b], axis=axis)
            temps.append(pair)
            if x._dtype.kind not in "fc":
                pair = pair.astype(_on_device(np.float64, x._storage.device))
                temps.append(pair)
            m = ns.mean(pair, axis=axis, keepdims=True)
        if x._dtype.kind in "fc":
            isnan = ns.isnan(x)
            temps.append(isnan)
            nan = ns.any(isnan, axis=axis, keepdims=True)
            temps.append(nan)
            r = ns.where(nan, np.nan, m)
            m.free()
            m = r
        return m
    finally:
        _free(temps)


def _stat(mode: str, chunk, axis: int):
    ns = _ns()
    if mode == "maximum":
        return ns.max(chunk, axis=axis, keepdims=True)
    if mode == "minimum":
        return ns.min(chunk, axis=axis, keepdims=True)
    if mode == "median":
        return _median(chunk, axis)
    if chunk._dtype.kind in "fc":
        return ns.mean(chunk, axis=axis, keepdims=True)
    with chunk.astype(_on_device(np.float64, chunk._storage.device)) as f:
        return ns.mean(f, axis=axis, keepdims=True)


def _stats(mode: str, padded, axis: int, width, length, temps: list):
    left_index = width[0]
    right_index = padded._shape[axis] - width[1]
    max_length = right_index - left_index
    ll, rl = length
    if ll is None or max_length < ll:
        ll = max_length
    if rl is None or max_length < rl:
        rl = max_length
    if (ll == 0 or rl == 0) and mode in ("maximum", "minimum"):
        raise ValueError("pad(): stat_length of 0 yields no value for padding; give a "
                         "stat_length of at least 1")
    out = []
    for sl in (slice(left_index, left_index + ll), slice(right_index - rl, right_index)):
        chunk = padded[_at(sl, axis)]
        temps.append(chunk)
        stat = _stat(mode, chunk, axis)
        temps.append(stat)
        if padded._dtype.kind in "iu" and stat._dtype.kind in "fc":
            stat = _ns().round(stat)
            temps.append(stat)
        out.append(stat)
        if ll == rl == max_length:
            out.append(stat)
            break
    return out


def _linspace(start, stop, num: int, endpoint: bool, dtype, axis: int, dev):
    """NumPy's ``linspace`` with array ``start``/``stop`` on the device, NumPy's formula:
    ``arange * step + start`` (``arange / div * delta`` when a step is 0), the last value
    set to ``stop``, ``floor`` for an integer ``dtype``.  A new array the caller owns."""
    ns = _ns()
    div = (num - 1) if endpoint else num
    ops = [s for s in (start, stop) if isinstance(s, ArrayBase)]
    dt = np.result_type(*(s._dtype if isinstance(s, ArrayBase) else s for s in (start, stop)))
    if dt.kind not in "fc":
        dt = np.result_type(dt, np.float64)
    dt = _on_device(dt, dev)
    nd = builtins.max((s.ndim for s in ops), default=0)
    temps: list = []

    def keep(arr):
        temps.append(arr)
        return arr

    try:
        # Python scalars stay weak, as in NumPy's np.subtract(stop, start, dtype=dt)
        a, b = start, stop if ops else _operand("linspace", stop, dev, temps)
        bd = keep(b.astype(dt)) if isinstance(b, ArrayBase) and b._dtype != dt else b
        delta = keep(ns.subtract(bd, a))
        if delta._dtype != dt:
            delta = keep(delta.astype(dt))
        y = keep(reshape(keep(arange(0, num, dtype=dt, device=dev)), (-1,) + (1,) * nd))
        if div > 0:
            step = keep(ns.divide(delta, div))
            with ns.equal(step, 0) as z, ns.any(z) as anyz:
                any_zero = bool(anyz)  # one scalar read: NumPy's choice of formula
            if any_zero:
                y = keep(ns.multiply(keep(ns.divide(y, div)), delta))
            else:
                y = keep(ns.multiply(y, step))
        else:
            y = keep(ns.multiply(y, delta))
        y = keep(ns.add(y, a))
        if y._dtype != dt:
            y = keep(y.astype(dt))
        if endpoint and num > 1:
            y[-1, ...] = b
        if axis != 0:
            y = keep(moveaxis(y, 0, axis))
        out_dt = dt if dtype is None else dev.dtype_of(dtype)
        if out_dt.kind in "iu":
            y = keep(ns.floor(y))
        if out_dt != y._dtype:
            y = keep(y.astype(out_dt))
        return _handle(y)
    finally:
        _free(temps)


def _ramps(padded, axis: int, width, ends, temps: list):
    edges = _edges(padded, axis, width, temps)
    dev = padded._storage.device
    out = []
    for end, edge, w in zip(ends, edges, width, strict=True):
        sq = reshape(edge, edge._shape[:axis] + edge._shape[axis + 1:])
        temps.append(sq)
        out.append(_linspace(end, sq, w, False, padded._dtype, axis, dev))
        temps.append(out[-1])
    right = out[1][_at(slice(None, None, -1), axis)]
    temps.append(right)
    return out[0], right


def _reflect_both(padded, axis, width, method, period, include_edge, temps):
    ns = _ns()
    left_pad, right_pad = width
    old_length = padded._shape[axis] - right_pad - left_pad
    if include_edge:
        old_length = old_length // period * period
        edge_offset = 1
    else:
        old_length = (old_length - 1) // (period - 1) * (period - 1) + 1
        edge_offset = 0
        old_length -= 1
    n = padded._shape[axis]
    if left_pad > 0:
        chunk_length = builtins.min(old_length, left_pad)
        stop = left_pad - edge_offset
        start = stop + chunk_length
        chunk = padded[_at(slice(start, stop if stop >= 0 else None, -1), axis)]
        temps.append(chunk)
        if method == "odd":
            edge = padded[_at(slice(left_pad, left_pad + 1), axis)]
            temps.append(edge)
            twice = ns.multiply(edge, 2)
            temps.append(twice)
            chunk = ns.subtract(twice, chunk)
            temps.append(chunk)
        area = padded[_at(slice(left_pad - chunk_length, left_pad), axis)]
        temps.append(area)
        area[...] = chunk
        left_pad -= chunk_length
    if right_pad > 0:
        chunk_length = builtins.min(old_length, right_pad)
        start = -right_pad + edge_offset - 2
        stop = start - chunk_length
        chunk = padded[_at(slice(n + start, n + stop if n + stop >= 0 else None, -1), axis)]
        temps.append(chunk)
        if method == "odd":
            edge = padded[_at(slice(n - right_pad - 1, n - right_pad), axis)]
            temps.append(edge)
            twice = ns.multiply(edge, 2)
            temps.append(twice)
            chunk = ns.subtract(twice, chunk)
            temps.append(chunk)
        area = padded[_at(slice(n - right_pad, n - right_pad + chunk_length), axis)]
        temps.append(area)
        area[...] = chunk
        right_pad -= chunk_length
    return left_pad, right_pad


def _wrap_both(padded, axis, width, original_period, temps):
    left_pad, right_pad = width
    n = padded._shape[axis]
    period = n - right_pad - left_pad
    period = period // original_period * original_period
    new_left = new_right = 0
    if left_pad > 0:
        end = left_pad + period
        begin = end - builtins.min(period, left_pad)
        chunk = padded[_at(slice(begin, end), axis)]
        temps.append(chunk)
        if left_pad > period:
            area = padded[_at(slice(left_pad - period, left_pad), axis)]
            new_left = left_pad - period
        else:
            area = padded[_at(slice(None, left_pad), axis)]
        temps.append(area)
        area[...] = chunk
    if right_pad > 0:
        begin = n - right_pad - period
        end = begin + builtins.min(period, right_pad)
        chunk = padded[_at(slice(begin, end), axis)]
        temps.append(chunk)
        if right_pad > period:
            area = padded[_at(slice(n - right_pad, n - right_pad + period), axis)]
            new_right = right_pad - period
        else:
            area = padded[_at(slice(n - right_pad, None), axis)]
        temps.append(area)
        area[...] = chunk
    return new_left, new_right


def _scalar_value(v):
    return v.item() if isinstance(v, np.generic) else v


def pad(array, pad_width, mode="constant", **kwargs):
    """``array`` padded by ``pad_width`` (an int, a (before, after) pair, one pair per axis,
    or a dict axis -> int/pair) in one of NumPy's modes (or a function, as NumPy's).

    The result is allocated once; the original is copied into its middle and each axis'
    pads are written by slice assignment on the device, axis after axis as NumPy does
    (so corners come from the later axes): scalars for ``constant``, broadcast edge rows
    for ``edge``, reversed or shifted slices of the result itself for ``reflect``,
    ``symmetric`` and ``wrap``, reductions (``max``, ``min``, ``mean``, a sort for
    ``median``) for the statistic modes, a device ``linspace`` for ``linear_ramp``.
    """
    x = _array("pad", array)
    nd = x.ndim
    if isinstance(pad_width, dict):
        seq = [(0, 0)] * nd
        for ax, width in pad_width.items():
            if isinstance(width, (int, np.integer)):
                seq[ax] = (int(width), int(width))
            elif (isinstance(width, tuple) and len(width) == 2
                  and all(isinstance(w, (int, np.integer)) for w in width)):
                seq[ax] = (int(width[0]), int(width[1]))
            else:
                raise TypeError(f"pad(): a dict pad_width maps an axis to an int or an "
                                f"(int, int) pair, got {width!r} for axis {ax}")
        pad_width = seq
    if isinstance(pad_width, ArrayBase):
        pad_width = pad_width.get() if pad_width.size <= 2 * max(nd, 1) else pad_width
    widths = np.asarray(pad_width) if not isinstance(pad_width, ArrayBase) else None
    if widths is None or widths.dtype.kind not in "iu":
        raise TypeError(f"pad(): `pad_width` must be of integral type, got {pad_width!r}")
    widths = _as_pairs(widths, nd, as_index=True)
    if not callable(mode):
        if mode not in _PAD_KWARGS:
            raise ValueError(f"pad(): mode {mode!r} is not supported; use one of "
                             f"{', '.join(_PAD_KWARGS)} or a function")
        extra = set(kwargs) - set(_PAD_KWARGS[mode])
        if extra:
            raise ValueError(f"pad(): unsupported keyword arguments for mode '{mode}': "
                             f"{extra}")
        if mode in ("reflect", "symmetric"):
            method = kwargs.get("reflect_type", "even")
            if method not in ("even", "odd"):
                raise ValueError(f"pad(): reflect_type must be 'even' or 'odd', got "
                                 f"{method!r}")
        if mode not in ("constant", "empty") and x.size == 0:
            for ax, w in enumerate(widths):
                if x._shape[ax] == 0 and any(w):
                    raise ValueError(f"pad(): can't extend empty axis {ax} using modes "
                                     f"other than 'constant' or 'empty'")
    shape = tuple(w[0] + n + w[1] for n, w in zip(x._shape, widths, strict=True))
    dev = x._storage.device
    out = new_array(shape, x._dtype, dev, x._storage.kind)
    original = tuple(slice(w[0], w[0] + n) for n, w in zip(x._shape, widths, strict=True))
    temps: list = []
    try:
        if callable(mode):
            out.fill(0)
        if x.size:
            with out[original] as middle:
                _copy(middle, x)
        if callable(mode):
            _pad_with(out, widths, mode, kwargs)
        elif mode == "constant":
            values = _as_pairs(kwargs.get("constant_values", 0), nd)
            for ax in range(nd):
                roi = out[(slice(None),) * (ax + 1) + original[ax + 1:]]
                temps.append(roi)
                _set_area(roi, ax, widths[ax], [_scalar_value(v) for v in values[ax]], temps)
        elif mode == "empty" or x.size == 0:
            pass
        elif mode == "edge":
            for ax in range(nd):
                roi = out[(slice(None),) * (ax + 1) + original[ax + 1:]]
                temps.append(roi)
                _set_area(roi, ax, widths[ax], _edges(roi, ax, widths[ax], temps), temps)
        elif mode == "linear_ramp":
            ends = _as_pairs(kwargs.get("end_values", 0), nd)
            for ax in range(nd):
                if not any(widths[ax]):
                    continue
                roi = out[(slice(None),) * (ax + 1) + original[ax + 1:]]
                temps.append(roi)
                ramps = _ramps(roi, ax, widths[ax], [_scalar_value(v) for v in ends[ax]],
                               temps)
                _set_area(roi, ax, widths[ax], ramps, temps)
        elif mode in ("maximum", "minimum", "mean", "median"):
            lengths = _as_pairs(kwargs.get("stat_length"), nd, as_index=True)
            for ax in range(nd):
                if not any(widths[ax]):
                    continue
                roi = out[(slice(None),) * (ax + 1) + original[ax + 1:]]
                temps.append(roi)
                stats = _stats(mode, roi, ax, widths[ax], lengths[ax], temps)
                _set_area(roi, ax, widths[ax], stats, temps)
        elif mode in ("reflect", "symmetric"):
            method = kwargs.get("reflect_type", "even")
            for ax in range(nd):
                left, right = widths[ax]
                if x._shape[ax] == 1 and (left > 0 or right > 0):
                    _set_area(out, ax, widths[ax], _edges(out, ax, widths[ax], temps), temps)
                    continue
                roi = out[(slice(None),) * (ax + 1) + original[ax + 1:]]
                temps.append(roi)
                while left > 0 or right > 0:
                    left, right = _reflect_both(roi, ax, (left, right), method,
                                                x._shape[ax], mode == "symmetric", temps)
        elif mode == "wrap":
            for ax in range(nd):
                left, right = widths[ax]
                roi = out[(slice(None),) * (ax + 1) + original[ax + 1:]]
                temps.append(roi)
                period = shape[ax] - right - left
                while left > 0 or right > 0:
                    left, right = _wrap_both(roi, ax, (left, right), period, temps)
    except BaseException:
        out.free()
        raise
    finally:
        _free(temps)
    return out


def _pad_with(padded, widths, function, kwargs) -> None:
    """NumPy's ``pad`` with a function: ``function(vector, pad_width, iaxis, kwargs)``
    called on each 1-d view of the zero-padded result along each axis (it writes in
    place); one call per vector, as NumPy."""
    for ax in range(padded.ndim):
        view = moveaxis(padded, ax, -1)
        try:
            for ind in np.ndindex(view._shape[:-1]):
                with view[ind + (Ellipsis,)] as vector:
                    function(vector, tuple(widths[ax]), ax, kwargs)
        finally:
            view.free()


# trim_zeros -----------------------------------------------------------------------------------
def trim_zeros(filt, trim="fb", axis=None):
    """A view of ``filt`` without its leading (``'f'``) and/or trailing (``'b'``) zeros along
    ``axis`` (None: every axis; the bounding box of the nonzero elements).

    The first and last nonzero position of each axis are found on the device (``any`` over
    the other axes, ``argmax``) and read back together: 2 * ndim + 1 integers."""
    x = _array("trim_zeros", filt)
    if not isinstance(trim, str):
        raise TypeError(f"trim_zeros(): trim must be a string of 'f' and 'b', got {trim!r}")
    trim = trim.lower()
    if trim not in {"fb", "bf", "f", "b"}:
        raise ValueError(f"trim_zeros(): unexpected character(s) in `trim`: {trim!r}; use "
                         f"'f', 'b' or 'fb'")
    nd = x.ndim
    if axis is None:
        axes = tuple(range(nd))
    else:
        items = axis if isinstance(axis, (tuple, list)) else (axis,)
        axes = tuple(normalize_axis("trim_zeros", a, nd) for a in items)
        if len(set(axes)) != len(axes):
            raise ValueError(f"trim_zeros(): repeated axis in {axis!r}")
    if not axes:
        return _handle(x)
    if x.size == 0:
        starts = stops = [0] * nd
        found = False
    else:
        starts, stops, found = _bounds(x)
    sl = []
    for ax in range(nd):
        if ax not in axes:
            sl.append(slice(None))
        elif not found:
            sl.append(slice(0, 0))
        else:
            sl.append(slice(starts[ax] if "f" in trim else None,
                            stops[ax] + 1 if "b" in trim else None))
    return x[tuple(sl)]


def _bounds(x):
    """First and last nonzero index along each axis, and whether any element is nonzero."""
    ns = _ns()
    nd = x.ndim
    temps: list = []
    try:
        nz = ns.not_equal(x, 0) if x._dtype.kind != "b" else _handle(x)
        temps.append(nz)
        vals = []
        for ax in range(nd):
            others = tuple(a for a in range(nd) if a != ax)
            line = ns.any(nz, axis=others) if others else _handle(nz)
            temps.append(line)
            first = ns.argmax(line)
            rev = ns.flip(line)
            temps += [first, rev]
            last = ns.argmax(rev)
            temps.append(last)
            vals += [first, last]
        anyv = ns.any(nz)
        temps.append(anyv)
        parts = [reshape(v.astype(_I8) if v._dtype != _I8 else v, (1,)) for v in vals]
        temps += parts
        flag = reshape(anyv.astype(_I8), (1,))
        temps.append(flag)
        packed = concat([*parts, flag])
        temps.append(packed)
        host = packed.tolist()  # the one read: 2 * ndim + 1 integers
    finally:
        _free(temps)
    starts = [host[2 * ax] for ax in range(nd)]
    stops = [x._shape[ax] - 1 - host[2 * ax + 1] for ax in range(nd)]
    return starts, stops, bool(host[-1])


# Diagonals ------------------------------------------------------------------------------------
def _diagonal_view(out, k: int, count: int):
    """A writeable 1-d view of the ``k``-th diagonal (``count`` elements) of the new 2-d
    array ``out`` (any strides)."""
    s0, s1 = out._strides
    offset = out._offset + (k * s1 if k >= 0 else -k * s0)
    return out._derive((count,), (s0 + s1,), offset, out._dtype, True)


def diag(v, k=0):
    """The ``k``-th diagonal of a 2-d array (a read-only view, as NumPy's), or a new square
    array with the 1-d ``v`` on its ``k``-th diagonal (zeros elsewhere)."""
    x = _array("diag", v)
    k = operator.index(k)
    if x.ndim == 2:
        return x.diagonal(k)
    if x.ndim != 1:
        raise ValueError(f"diag(): input must be 1- or 2-d, got shape {x._shape}")
    n = x._shape[0] + builtins.abs(k)
    out = zeros((n, n), dtype=x._dtype, device=x._storage.device)
    try:
        if x._shape[0]:
            with _diagonal_view(out, k, x._shape[0]) as d:
                _copy(d, x)
    except BaseException:
        out.free()
        raise
    return out


def diagflat(v, k=0):
    """A new square array with the flattened ``v`` on its ``k``-th diagonal."""
    x = _array("diagflat", v)
    flat = _flat(x)
    try:
        return diag(flat, k)
    finally:
        flat.free()


def fill_diagonal(a, val, wrap=False):
    """Write ``val`` on the main diagonal of ``a`` in place (NumPy's ``fill_diagonal``):
    through a strided view of the diagonal (two views for a tall 2-d matrix with
    ``wrap=True``); an array ``val`` is repeated or cut to the diagonal's length as
    NumPy's ``a.flat[...] = val`` does.  Returns None."""
    x = _array("fill_diagonal", a)
    if x.ndim < 2:
        raise ValueError(f"fill_diagonal(): array must be at least 2-d, got shape {x._shape}")
    if not x._writeable:
        raise ValueError("fill_diagonal(): the array is read-only; copy it first")
    if x.ndim > 2 and len(set(x._shape)) != 1:
        raise ValueError(f"fill_diagonal(): all dimensions of input must be of equal length, "
                         f"got shape {x._shape}")
    dev = x._storage.device
    stride = builtins.sum(x._strides)
    views = []  # (view, count)
    if x.ndim > 2:
        views.append((x._shape[0], None))
    else:
        n, m = x._shape
        if not wrap or n <= m:
            views.append((builtins.min(n, m), None))
        else:
            blocks, rem = divmod(n, m + 1)
            views.append((blocks * m, (blocks, m)))
            if rem:
                views.append((builtins.min(rem, m), blocks * (m + 1)))
    total = builtins.sum(c for c, _ in views)
    temps: list = []
    try:
        value = None
        if not isinstance(val, (bool, int, float, complex, np.generic)):
            v = _operand("fill_diagonal", val, dev, temps)
            if v.size == 0:
                return None
            value = resize(v, (total,)) if v._shape != (total,) else v
            if value is not v:
                temps.append(value)
        pos = 0
        for count, extra in views:
            if count == 0:
                continue
            if extra is None:
                view = x._derive((count,), (stride,), x._offset, x._dtype, True)
            elif isinstance(extra, tuple):  # full blocks of a tall matrix
                b, m = extra
                view = x._derive((b, m), ((m + 1) * x._strides[0], stride), x._offset,
                                 x._dtype, True)
            else:  # the rows after the last full block
                view = x._derive((count,), (stride,), x._offset + extra * x._strides[0],
                                 x._dtype, True)
            temps.append(view)
            if value is None:
                view[...] = val
            else:
                part = value[pos:pos + count]
                temps.append(part)
                if view.ndim == 2:
                    part = reshape(part, view._shape)
                    temps.append(part)
                view[...] = part
            pos += count
    finally:
        _free(temps)
    return None


def tri(N, M=None, k=0, dtype=float, *, like=None, device=None):
    """A new ``(N, M)`` array with ones at and below the ``k``-th diagonal, zeros elsewhere
    (``dtype=float``: the device's default floating type); compared on the device from two
    ``arange`` index vectors."""
    if device is None and isinstance(like, ArrayBase):
        device = like._storage.device
    dev = _device_of(device)
    N = operator.index(N)
    M = N if M is None else operator.index(M)
    k = operator.index(k)
    if N < 0 or M < 0:
        raise ValueError(f"tri(): negative dimensions are not allowed, got N={N}, M={M}")
    dt = _dtype_arg(dtype, dev)
    ns = _ns()
    temps: list = []
    try:
        i = reshape(arange(N, dtype=_I8, device=dev), (N, 1))
        temps.append(i)
        j = arange(-k, M - k, dtype=_I8, device=dev)
        temps.append(j)
        m = ns.greater_equal(i, j)
        if dt == m._dtype:
            return m
        temps.append(m)
        return m.astype(dt)
    finally:
        _free(temps)


def tril_indices(n, k=0, m=None, *, device=None):
    """The row and column indices (int64 arrays) of the lower triangle of an ``(n, m)``
    array, from ``nonzero`` of :func:`tri` on the device."""
    with tri(n, m, k=k, dtype=bool, device=device) as t:
        return _ns().nonzero(t)


def triu_indices(n, k=0, m=None, *, device=None):
    """The row and column indices of the upper triangle (from the ``k``-th diagonal)."""
    ns = _ns()
    with tri(n, m, k=k - 1, dtype=bool, device=device) as t, ns.logical_not(t) as u:
        return ns.nonzero(u)


def _matrix_arg(name: str, arr):
    x = _array(name, arr)
    if x.ndim != 2:
        raise ValueError(f"{name}(): input array must be 2-d, got shape {x._shape}")
    return x


def tril_indices_from(arr, k=0):
    """:func:`tril_indices` for the shape of the 2-d ``arr``, on its device."""
    x = _matrix_arg("tril_indices_from", arr)
    return tril_indices(x._shape[-2], k=k, m=x._shape[-1], device=x._storage.device)


def triu_indices_from(arr, k=0):
    """:func:`triu_indices` for the shape of the 2-d ``arr``, on its device."""
    x = _matrix_arg("triu_indices_from", arr)
    return triu_indices(x._shape[-2], k=k, m=x._shape[-1], device=x._storage.device)


def diag_indices(n, ndim=2, *, device=None):
    """``ndim`` int64 index arrays ``arange(n)`` for the main diagonal (NumPy returns one
    array ``ndim`` times; here each is its own handle on one storage)."""
    idx = arange(operator.index(n), dtype=_I8, device=_device_of(device))
    out = [idx]
    try:
        for _ in range(operator.index(ndim) - 1):
            out.append(_handle(idx))
    except BaseException:
        _free(out)
        raise
    if ndim < 1:
        idx.free()
        return ()
    return tuple(out)


def diag_indices_from(arr):
    """:func:`diag_indices` for ``arr`` (at least 2-d, every axis of one length)."""
    x = _array("diag_indices_from", arr)
    if x.ndim < 2:
        raise ValueError(f"diag_indices_from(): input array must be at least 2-d, got shape "
                         f"{x._shape}")
    if len(set(x._shape)) != 1:
        raise ValueError(f"diag_indices_from(): all dimensions of input must be of equal "
                         f"length, got shape {x._shape}")
    return diag_indices(x._shape[0], x.ndim, device=x._storage.device)


def mask_indices(n, mask_func, k=0, *, device=None):
    """The indices where ``mask_func(ones((n, n), int64), k)`` is nonzero (``mask_func``
    such as ``ga.triu``/``np.triu`` receives a gpuarrays array)."""
    ns = _ns()
    dev = _device_of(device)
    try:
        second = list(inspect.signature(mask_func).parameters.values())[1]
        by_name = second.kind is inspect.Parameter.KEYWORD_ONLY  # ga.triu(x, /, *, k=0)
    except (TypeError, ValueError, IndexError):
        by_name = False
    with ones((operator.index(n), operator.index(n)), dtype=_I8, device=dev) as m:
        a = mask_func(m, k=k) if by_name else mask_func(m, k)
        if a is m:
            a = _handle(m)
    if not isinstance(a, ArrayBase):
        raise TypeError(f"mask_indices(): mask_func must return a gpuarrays array, got "
                        f"{type(a).__name__}")
    try:
        with ns.not_equal(a, 0) as nz:
            return ns.nonzero(nz)
    finally:
        a.free()


# Index grids ----------------------------------------------------------------------------------
def indices(dimensions, dtype=int, sparse=False, *, device=None):
    """An index grid: dense, a new ``(N, *dimensions)`` array whose ``[i]`` is the ``i``-th
    coordinate (a broadcast ``arange`` written in place); ``sparse=True``, a tuple of
    ``arange`` views shaped to broadcast.  ``dtype=int``: int64."""
    dev = _device_of(device)
    dims = tuple(operator.index(d) for d in dimensions)
    dt = _I8 if dtype is int else _dtype_arg(dtype, dev)
    n = len(dims)
    one = (1,) * n
    out = [] if sparse else new_array((n,) + dims, dt, dev, "device")
    try:
        for i, d in enumerate(dims):
            with arange(d, dtype=dt, device=dev) as r:
                idx = reshape(r, one[:i] + (d,) + one[i + 1:])
            if sparse:
                out.append(idx)
            else:
                with idx, out[i] as row:
                    if row.size:
                        row[...] = idx
    except BaseException:
        _free(out) if sparse else out.free()
        raise
    return tuple(out) if sparse else out


def ix_(*args, device=None):
    """Open-mesh index arrays from 1-d sequences (views shaped to broadcast; a bool array
    becomes its ``nonzero`` indices); host sequences go to ``device`` (None: the arrays'
    device, else the default one)."""
    dev = _first_device("ix_", args) if builtins.any(isinstance(a, ArrayBase) for a in args) \
        else _device_of(device)
    nd = len(args)
    out = []
    temps: list = []
    try:
        for k, new in enumerate(args):
            if not isinstance(new, ArrayBase):
                host = np.asarray(new)
                if host.size == 0:
                    host = host.astype(np.intp)
                new = _operand("ix_", host, dev, temps)
            else:
                new = _operand("ix_", new, dev, temps)
            if new.ndim != 1:
                raise ValueError(f"ix_(): cross index must be 1 dimensional, got shape "
                                 f"{new._shape}")
            if new._dtype.kind == "b":
                (new,) = _ns().nonzero(new)
                temps.append(new)
            out.append(reshape(new, (1,) * k + (new.size,) + (1,) * (nd - k - 1)))
    except BaseException:
        _free(out)
        raise
    finally:
        _free(temps)
    return tuple(out)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of the 1-d ``x`` (NumPy's dtype: ``x``'s promoted with int64):
    ones and ``x`` written by column, then a ``cumulative_prod`` along the rows."""
    v = _array("vander", x)
    if v.ndim != 1:
        raise ValueError(f"vander(): x must be a one-dimensional array or sequence, got "
                         f"shape {v._shape}")
    n = v._shape[0]
    cols = n if N is None else operator.index(N)
    if cols < 0:
        raise ValueError(f"vander(): N must be non-negative, got {cols}")
    dev = v._storage.device
    dt = _on_device(np.promote_types(v._dtype, np.int64), dev)
    dev.require(dt)
    out = new_array((n, cols), dt, dev, "device")
    temps: list = []
    try:
        tmp = out if increasing else out[:, ::-1]
        if tmp is not out:
            temps.append(tmp)
        if cols > 0 and n:
            with tmp[:, 0] as c0:
                c0.fill(1)
        if cols > 1 and n:
            rest = tmp[:, 1:]
            temps.append(rest)
            col = reshape(v, (n, 1))
            temps.append(col)
            rest[...] = col
            prod = _ns().cumulative_prod(rest, axis=1)
            temps.append(prod)
            rest[...] = prod
    except BaseException:
        out.free()
        raise
    finally:
        _free(temps)
    return out


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0, *,
             device=None):
    """``base ** linspace(start, stop, num)`` on the device (``start``, ``stop`` and
    ``base`` may be arrays, broadcast as NumPy does; ``axis`` places the samples)."""
    items = (start, stop, base)
    arrays = [a for a in items if isinstance(a, ArrayBase)]
    dev = arrays[0]._storage.device if arrays else _device_of(device)
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"logspace(): number of samples, {num}, must be non-negative")
    ns = _ns()
    temps: list = []
    try:
        scalar = all(np.ndim(a) == 0 and not isinstance(a, ArrayBase) for a in items)
        if scalar:
            dt = np.result_type(start, stop, 1.0)
            dt = _on_device(dt if dt.kind in "fc" else np.float64, dev)
            if dt.kind == "f":
                y = ns.linspace(float(start), float(stop), num, endpoint=endpoint, dtype=dt,
                                device=dev)
            else:
                y = _linspace(start, stop, num, endpoint, None, 0, dev)
            temps.append(y)
            b = base.item() if isinstance(base, np.generic) else base
            r = ns.pow(b, y)
        else:
            ops = [_operand("logspace", a, dev, temps) for a in items]
            if builtins.any(np.ndim(a) if not isinstance(a, ArrayBase) else a.ndim
                            for a in (base,)):
                ndmax = builtins.max(a.ndim for a in ops)
                ops = [reshape(a, (1,) * (ndmax - a.ndim) + a._shape) for a in ops]
                temps += ops
                b = ns.expand_dims(ops[2], axis=axis)
                temps.append(b)
            else:
                b = base.item() if isinstance(base, np.generic) else base
                if isinstance(b, ArrayBase):
                    b = ops[2]
            y = _linspace(ops[0], ops[1], num, endpoint, None, axis, dev)
            temps.append(y)
            r = ns.pow(b, y)
        if dtype is None:
            return r
        dt = dev.dtype_of(dtype)
        if dt == r._dtype:
            return r
        temps.append(r)
        return r.astype(dt)
    finally:
        _free(temps)


def fromfunction(function, shape, *, dtype=float, like=None, device=None, **kwargs):
    """``function(*indices(shape, dtype))``: ``function`` receives one gpuarrays array of
    coordinates per axis (``dtype=float``: the device's default floating type) and its
    result is returned as it is."""
    if device is None and isinstance(like, ArrayBase):
        device = like._storage.device
    dev = _device_of(device)
    dt = _dtype_arg(dtype, dev)
    grid = indices(shape, dtype=dt, device=dev)
    args = [grid[i] for i in range(grid._shape[0])]
    try:
        result = function(*args, **kwargs)
        if builtins.any(result is g for g in args):
            result = _handle(result)  # the args' handles go below
        return result
    finally:
        _free(args)
        grid.free()


# Applying functions ---------------------------------------------------------------------------
def _written(dst, res, line, dev) -> None:
    """``dst[...] = res`` for one result of ``func1d``; a result this call owns (not the
    slice it was given) is freed after."""
    if not isinstance(res, ArrayBase):
        dst[...] = res if isinstance(res, (bool, int, float, complex, np.generic)) else \
            _checked_host(res)
        return
    try:
        dst[...] = res
    finally:
        if res is not line:
            res.free()


def _checked_host(res):
    host = np.asarray(res)
    if host.dtype.kind not in "biufc":
        raise TypeError(f"apply_along_axis(): func1d returned {type(res).__name__}; return "
                        f"a gpuarrays array or numbers")
    return host


def _result_meta(res, dev):
    if isinstance(res, ArrayBase):
        return res._shape, res._dtype
    host = _checked_host(res)
    return host.shape, _on_device(host.dtype, dev)


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d`` applied to each 1-d slice of ``arr`` along ``axis`` (a view, called once
    per slice from Python as NumPy does); the results are written into one new array,
    returned as NumPy's transposed view of it."""
    x = _array("apply_along_axis", arr)
    nd = x.ndim
    ax = normalize_axis("apply_along_axis", axis, nd)
    dims = list(range(nd))
    inarr = x.transpose(dims[:ax] + dims[ax + 1:] + [ax])
    dev = x._storage.device
    buff = None
    try:
        inds = (ind + (Ellipsis,) for ind in np.ndindex(inarr._shape[:-1]))
        try:
            ind0 = next(inds)
        except StopIteration:
            raise ValueError("apply_along_axis(): cannot apply_along_axis when any iteration "
                             f"dimensions are 0 (shape {x._shape}, axis {ax})") from None
        with inarr[ind0] as line:
            res = func1d(line, *args, **kwargs)
            try:
                shape, dt = _result_meta(res, dev)
                buff = zeros(inarr._shape[:-1] + shape, dtype=dt, device=dev)
            except BaseException:
                if isinstance(res, ArrayBase) and res is not line:
                    res.free()
                raise
            with buff[ind0] as dst:
                _written(dst, res, line, dev)
        rnd = len(shape)
        for ind in inds:
            with inarr[ind] as line, buff[ind] as dst:
                _written(dst, func1d(line, *args, **kwargs), line, dev)
        bdims = list(range(buff.ndim))
        perm = bdims[:ax] + bdims[buff.ndim - rnd:] + bdims[ax:buff.ndim - rnd]
        return buff.transpose(perm)
    finally:
        inarr.free()
        if buff is not None:
            buff.free()


def apply_over_axes(func, a, axes):
    """``func(a, axis)`` applied over each axis in turn; a result with one axis fewer gets
    it back (``expand_dims``), as NumPy's ``apply_over_axes``."""
    val = _array("apply_over_axes", a)
    n = val.ndim
    if isinstance(axes, ArrayBase):
        axes = axes.tolist()  # a few axis numbers
    items = list(axes) if isinstance(axes, (tuple, list)) else [axes]
    owned = None  # the latest result made here, freed when replaced
    try:
        for axis in items:
            axis = operator.index(axis)
            if axis < 0:
                axis += n
            res = func(val, axis)
            if not isinstance(res, ArrayBase):
                raise TypeError(f"apply_over_axes(): func must return a gpuarrays array, got "
                                f"{type(res).__name__}")
            if res is val or res is a:
                res = _handle(res)
            if res.ndim != val.ndim:
                r2 = _ns().expand_dims(res, axis=axis)
                res.free()
                res = r2
                if res.ndim != val.ndim:
                    res.free()
                    raise ValueError("apply_over_axes(): function is not returning an array "
                                     f"of the correct shape (got {res._shape})")
            if owned is not None:
                owned.free()
            owned = val = res
        result, owned = (owned if owned is not None else _handle(val)), None
        return result
    finally:
        if owned is not None:
            owned.free()


def piecewise(x, condlist, funclist, *args, **kw):
    """NumPy's ``piecewise``: where each condition (a bool gpuarrays array of ``x``'s shape)
    holds, the value of its function (called with ``x[cond]``) or constant; an extra
    function is the "otherwise" case.  Masked gathers and assignments on the device."""
    v = _array("piecewise", x)
    dev = v._storage.device
    ns = _ns()
    temps: list = []
    try:
        funcs = list(funclist)
        conds = _conditions(v, condlist, dev, temps)
        n, n2 = len(conds), len(funcs)
        if n == n2 - 1:
            if n:
                acc = conds[0]
                for c in conds[1:]:
                    acc = ns.logical_or(acc, c)
                    temps.append(acc)
                other = ns.logical_not(acc)
            else:
                other = ones(v._shape, dtype=bool, device=dev)
            temps.append(other)
            conds.append(other)
        elif n != n2:
            raise ValueError(f"piecewise(): with {n} condition(s), either {n} or {n + 1} "
                             f"functions are expected, got {n2}")
        y = zeros(v._shape, dtype=v._dtype, device=dev)
        try:
            for cond, func in zip(conds, funcs, strict=True):
                if not callable(func):
                    y[cond] = func
                    continue
                vals = v[cond]
                try:
                    if vals.size > 0:
                        r = func(vals, *args, **kw)
                        try:
                            y[cond] = r
                        finally:
                            if isinstance(r, ArrayBase) and r is not vals:
                                r.free()
                finally:
                    vals.free()
        except BaseException:
            y.free()
            raise
        return y
    finally:
        _free(temps)


def _conditions(v, condlist, dev, temps: list) -> list:
    """``condlist`` as a list of bool arrays on ``dev`` (NumPy's rule: a single condition
    is a list of one)."""
    if isinstance(condlist, ArrayBase):
        condlist._live()
        # NumPy wraps a single condition only when its first item is a scalar: a 2-d
        # condition array (or any condition array for a 0-d x) is a list of rows
        if condlist.ndim >= 2 or (v.ndim == 0 and condlist.ndim >= 1):
            items = [condlist[i] for i in range(condlist._shape[0])]
            temps += items
        else:
            items = [condlist]
    elif isinstance(condlist, (list, tuple)):
        items = list(condlist)
        if items and not isinstance(items[0], (list, tuple, ArrayBase, np.ndarray)) \
                and v.ndim != 0:
            items = [condlist]
    else:
        items = [condlist]
    out = []
    for c in items:
        c = _operand("piecewise", c, dev, temps)
        if c._dtype.kind != "b":
            c = c.astype(bool)
            temps.append(c)
        if c._shape != v._shape:
            b = _ns().broadcast_to(c, v._shape)
            temps.append(b)
            c = b
        out.append(c)
    return out


# Conversions ----------------------------------------------------------------------------------
def _convert(name: str, a, dtype, device, copy=None):
    if isinstance(a, ArrayBase):
        a._live()
        if device is not None and get_device(device) != a._storage.device:
            return _asarray(a, dtype=dtype, device=device, copy=copy)
        if dtype is None or np.dtype(a._storage.device.dtype_of(dtype)) == a._dtype:
            if copy:
                return a.copy()
            return _handle(a)
        return _asarray(a, dtype=dtype, copy=copy)
    return _asarray(a, dtype=dtype, device=device, copy=copy)


def _fortran(x):
    """``x`` itself when F-contiguous (or at most 1-d), else an F-ordered copy (the new
    array replaces ``x``, which is freed)."""
    if x.ndim <= 1 or x.flags.f_contiguous:
        return x
    try:
        return x.copy(order="F")
    finally:
        x.free()


def asanyarray(a, dtype=None, order=None, *, device=None, copy=None, like=None):
    """NumPy's ``asanyarray``: ``ga.asarray`` (a gpuarrays array is returned as a new handle,
    not copied, unless ``copy=True`` or a conversion asks).  ``order='F'`` gives a
    Fortran-ordered copy when needed; other orders keep the layout."""
    if device is None and isinstance(like, ArrayBase):
        device = like._storage.device
    if order not in (None, "K", "A", "C", "F"):
        raise ValueError(f"asanyarray(): order must be one of 'K', 'A', 'C', 'F', got "
                         f"{order!r}")
    x = _convert("asanyarray", a, dtype, device, copy)
    if order == "F":
        return _fortran(x)
    if order == "C" and not x._is_c():
        try:
            return x.copy()
        finally:
            x.free()
    return x


def asarray_chkfinite(a, dtype=None, order=None, *, device=None):
    """``ga.asarray`` after checking on the device that a floating or complex array holds no
    inf or NaN (one bool read): ``ValueError`` otherwise."""
    x = asanyarray(a, dtype=dtype, order=order, device=device)
    if x._dtype.kind in "fc" and x.size:
        ns = _ns()
        with ns.isfinite(x) as fin, ns.all(fin) as ok:
            good = bool(ok)
        if not good:
            x.free()
            raise ValueError("asarray_chkfinite(): array must not contain infs or NaNs; "
                             "replace them first (ga.nan_to_num, ga.where)")
    return x


def asfortranarray(a, dtype=None, *, like=None, device=None):
    """A Fortran-ordered array (F-contiguous): ``a`` itself as a new handle when it is
    already, else an F-ordered copy on the device (``copy(order='F')``)."""
    if device is None and isinstance(like, ArrayBase):
        device = like._storage.device
    return _fortran(_convert("asfortranarray", a, dtype, device))


_FLAGS = {"C": "C", "C_CONTIGUOUS": "C", "CONTIGUOUS": "C", "F": "F", "F_CONTIGUOUS": "F",
          "FORTRAN": "F", "A": "A", "ALIGNED": "A", "W": "W", "WRITEABLE": "W", "O": "O",
          "OWNDATA": "O", "E": "E", "ENSUREARRAY": "E"}


def require(a, dtype=None, requirements=None, *, like=None, device=None):
    """NumPy's ``require``: ``a`` as a gpuarrays array of ``dtype`` meeting ``requirements``
    (``'C'``, ``'F'``, ``'W'``, ``'O'``, ``'A'``, ``'E'``), copied on the device when it
    does not.  ``'O'`` (owns its data) always copies: gpuarrays arrays are all handles on a
    shared storage and keep no owner flag."""
    if device is None and isinstance(like, ArrayBase):
        device = like._storage.device
    if not requirements:
        return _convert("require", a, dtype, device)
    try:  # a string is its characters, as NumPy reads it ("CW")
        reqs = {_FLAGS[r.upper()] for r in requirements}
    except (KeyError, AttributeError):
        raise KeyError(f"require(): unknown requirement in {requirements!r}; use C, F, A, W, "
                       f"O or E") from None
    reqs.discard("E")
    reqs.discard("A")  # gpuarrays memory is always aligned
    if {"C", "F"} <= reqs:
        raise ValueError('require(): cannot specify both "C" and "F" order')
    x = _convert("require", a, dtype, device)
    order = "F" if "F" in reqs else "C"
    need = ("F" in reqs and not (x.ndim <= 1 or x.flags.f_contiguous)) or \
        ("C" in reqs and not x._is_c()) or ("W" in reqs and not x._writeable) or "O" in reqs
    if not need:
        return x
    try:
        return x.copy(order=order)
    finally:
        x.free()

