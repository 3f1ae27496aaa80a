"""The standard's manipulation functions (docs/manipulation.md).

Views wherever NumPy gives views: ``broadcast_to``, ``broadcast_arrays``,
``expand_dims``, ``flip``, ``moveaxis``, ``permute_dims``, ``transpose``,
``squeeze``, ``unstack`` and ``reshape`` when the layout allows it -- each a new
array object over the same storage, holding one more handle (``r.storage is
x.storage``).  The layouts come from NumPy applied to a layout-only array
(``_array/layout.py``), so strides and offsets are NumPy's.

Copies otherwise: ``concat``, ``stack``, ``roll``, ``tile``, ``repeat`` and
``reshape`` of a layout that allows no view write a new array from the pool (or
the active ``ga.cached`` scope) through the device's strided copy
(``transfer.copy_raw``, the back-end's ``copy_strided``), never through the
host.  ``repeat`` with an array of repeats reads one count from the device
(``device/indexed.py`` fills the result).  Everything that can be refused is
refused before anything is allocated.
"""

from __future__ import annotations

import itertools
import operator

import numpy as np

from .._array.make import ArrayBase, new_array
from .._array.transfer import copy_raw
from .._common.sizes import check_size
from .cpu_engine import view
from .ownership import working
from .promotion import result_type

__all__ = ["broadcast_arrays", "broadcast_shapes", "broadcast_to", "concat", "concatenate",
           "expand_dims", "flip", "moveaxis", "permute_dims", "repeat", "reshape", "roll",
           "squeeze", "stack", "tile", "unstack", "transpose"]

_AxisError = np.exceptions.AxisError


# Checks ---------------------------------------------------------------------------------------
def _array(name: str, x):
    """``x`` after checking it is a live gpuarrays array (``TypeError``/``FreedArrayError``)."""
    if not isinstance(x, ArrayBase):
        raise TypeError(f"{name}() takes a gpuarrays array, got {type(x).__name__}; copy host "
                        f"data to the device first with ga.asarray(x, device=...)")
    x._live()
    return x


def _arrays(name: str, arrays) -> list:
    """A non-empty sequence of live arrays on one device."""
    if isinstance(arrays, ArrayBase) or not isinstance(arrays, (list, tuple)):
        raise TypeError(f"{name}() takes a list or tuple of arrays, got "
                        f"{type(arrays).__name__}")
    if not arrays:
        raise ValueError(f"{name}() needs at least one array to join")
    out = [_array(name, a) for a in arrays]
    dev = out[0]._storage.device
    for a in out[1:]:
        if a._storage.device != dev:
            raise ValueError(f"{name}(): arrays on different devices ({dev} and "
                             f"{a._storage.device}); move them with to_device() first")
    return out


def normalize_axis(name: str, axis, ndim: int) -> int:
    """One axis in ``[-ndim, ndim)`` as a non-negative int (``AxisError``, ``TypeError``);
    ``name`` starts the messages.  The one check of a single axis argument."""
    if isinstance(axis, (bool, np.bool_)):
        raise TypeError(f"{name}(): axis must be an int, got {axis!r}")
    try:
        k = operator.index(axis)
    except TypeError:
        raise TypeError(f"{name}(): axis must be an int, got {axis!r}") from None
    if not -ndim <= k < ndim:
        raise _AxisError(f"{name}(): axis {k} is out of bounds for an array of dimension "
                         f"{ndim} (use {-ndim} to {ndim - 1})" if ndim else
                         f"{name}(): axis {k} is out of bounds for a 0-d array")
    return k % ndim


def _axes(name: str, axis, ndim: int) -> tuple[int, ...]:
    """An int or a tuple of ints as distinct non-negative axes, in the order given."""
    items = axis if isinstance(axis, tuple) else (axis,)
    out = tuple(normalize_axis(name, a, ndim) for a in items)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}(): axis {axis!r} repeats an axis; name each axis once")
    return out


def _kind(arrays) -> str:
    kinds = {a._storage.kind for a in arrays}
    return kinds.pop() if len(kinds) == 1 else "device"


_WITHOUT_F64 = {np.dtype(np.float64): np.dtype(np.float32),
                np.dtype(np.complex128): np.dtype(np.complex64)}


def _result_dtype(arrays):
    """``result_type`` of the arrays; on a device without float64, a float64 (complex128)
    that only mixing kinds brings in (int64 with float32) is float32 (complex64), as for
    the elementwise functions (docs/compute.md, "Type promotion")."""
    dtypes = [a._dtype for a in arrays]
    dt = result_type(*dtypes)
    dev = arrays[0]._storage.device
    if not dev.info.float64 and dt in _WITHOUT_F64 and dt not in dtypes:
        dt = _WITHOUT_F64[dt]
    dev.require(dt)
    return dt


def _view(x, arr: np.ndarray):
    """A new handle on ``x``'s storage with the layout of the NumPy layout array ``arr``."""
    return x._from_engine(arr)


def _flat(x):
    """A new 1-d array object over ``x``'s elements in C order: a view (new handle) when
    ``x`` is C-contiguous, else a copy."""
    if x._is_c():
        return x._derive((x.size,), (x._dtype.itemsize,), x._offset, x._dtype, x._writeable,
                         True)
    c = x.copy()
    try:
        return reshape(c, (-1,))
    finally:
        c.free()  # the view keeps the storage


def _handle(x):
    """A new handle on ``x``'s storage with ``x``'s own layout."""
    return x._derive(x._shape, x._strides, x._offset, x._dtype, x._writeable, x._contig)


def _copy(dst, src) -> None:
    """``dst[...] = src`` (same shape; ``dst`` new, so no overlap; dtype converted).

    On cpu, NumPy on the engine's remembered views of the raw memory (as the
    elementwise engine); elsewhere the back-end's strided copy kernel.
    """
    dev = dst._storage.device
    if dev.backend == "cpu":
        with working(dev, dst, src):
            np.copyto(view(dst), view(src), casting="unsafe")
        return
    copy_raw(dst, src)


def _along(ndim: int, ax: int, sl) -> tuple:
    idx = [slice(None)] * ndim
    idx[ax] = sl
    return tuple(idx)


def _shape_of(name: str, shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        shape = (shape,)
    try:
        return tuple(operator.index(n) for n in shape)
    except TypeError:
        raise TypeError(f"{name}(): shape must be an int or a tuple of ints, got "
                        f"{shape!r}") from None


# Broadcasting ---------------------------------------------------------------------------------
def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to (``ValueError`` when they do not); a ``None``
    entry (an unknown length) stays ``None`` unless another shape fixes the length."""
    shapes = [tuple(None if n is None else operator.index(n) for n in
                    ((s,) if isinstance(s, (int, np.integer)) else s)) for s in shapes]
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(ndim):
        found = 1
        for s in shapes:
            j = k - (ndim - len(s))
            if j < 0:
                continue
            n = s[j]
            if n == 1:
                continue
            if found == 1 or found is None:
                found = n if (found == 1 or n is not None) else found
            elif n is not None and n != found:
                raise ValueError(f"broadcast_shapes(): shapes {', '.join(map(str, shapes))} "
                                 f"do not broadcast (axis {k - ndim}: {found} and {n})")
        out.append(found)
    return tuple(out)


def broadcast_to(x, /, shape):
    """A read-only view of ``x`` repeated to ``shape`` (zero strides), as NumPy."""
    x = _array("broadcast_to", x)
    shape = _shape_of("broadcast_to", shape)
    check_size("broadcast_to", shape, x._dtype.itemsize)
    try:
        arr = np.broadcast_to(x._engine(), shape)
    except ValueError:
        raise ValueError(f"broadcast_to(): cannot broadcast an array of shape {x._shape} to "
                         f"{shape}; each axis must match or be 1 in x") from None
    return _view(x, arr)


def broadcast_arrays(*arrays):
    """Views of ``arrays`` broadcast to one shape, as a tuple (read-only where broadcast;
    new handles of the arrays themselves where the shape is already the common one)."""
    if len(arrays) == 1 and isinstance(arrays[0], (list, tuple)):
        raise TypeError("broadcast_arrays() takes arrays as separate arguments: "
                        "broadcast_arrays(*arrays)")
    xs = [_array("broadcast_arrays", a) for a in arrays]
    if xs:
        _arrays("broadcast_arrays", xs)  # one device
    shape = broadcast_shapes(*(a._shape for a in xs))
    out = []
    try:
        for a in xs:
            out.append(_handle(a) if a._shape == shape else broadcast_to(a, shape))
    except BaseException:
        for v in out:
            v.free()
        raise
    return tuple(out)


# Joining --------------------------------------------------------------------------------------
def _join_into(out, parts, ax: int) -> None:
    start = 0
    for p in parts:
        n = p._shape[ax]
        if n:
            with out[_along(out.ndim, ax, slice(start, start + n))] as dst:
                _copy(dst, p)
        start += n


def concat(arrays, /, *, axis=0):
    """Join ``arrays`` along an existing ``axis`` (``axis=None``: flattened, C order) into
    a new array of the promoted dtype (``result_type``).

    ``ValueError`` for no arrays, arrays on different devices, 0-d arrays (with an axis) or
    shapes that differ off the axis; ``AxisError`` for a bad axis -- before anything is
    allocated.
    """
    xs = _arrays("concat", arrays)
    dt = _result_dtype(xs)
    dev = xs[0]._storage.device
    if axis is None:
        sizes = [a.size for a in xs]
        check_size("concat", (sum(sizes),), dt.itemsize)
        out = new_array((sum(sizes),), dt, dev, _kind(xs))
        try:
            start = 0
            for a, n in zip(xs, sizes, strict=True):
                if n:
                    with out[start:start + n] as flat, reshape(flat, a._shape) as dst:
                        _copy(dst, a)
                start += n
        except BaseException:
            out.free()
            raise
        return out
    ndim = xs[0].ndim
    if ndim == 0:
        raise ValueError("concat(): 0-d arrays cannot be joined along an axis; pass "
                         "axis=None (flatten) or use stack()")
    ax = normalize_axis("concat", axis, ndim)
    first = xs[0]._shape
    for a in xs[1:]:
        if a.ndim != ndim or any(a._shape[k] != first[k] for k in range(ndim) if k != ax):
            raise ValueError(f"concat(): all arrays must have the same shape except along "
                             f"axis {ax}; got {first} and {a._shape}")
    shape = list(first)
    shape[ax] = sum(a._shape[ax] for a in xs)
    check_size("concat", shape, dt.itemsize)
    out = new_array(tuple(shape), dt, dev, _kind(xs))
    try:
        _join_into(out, xs, ax)
    except BaseException:
        out.free()
        raise
    return out


def concatenate(arrays, /, axis=0, *, dtype=None):
    """NumPy's name for :func:`concat` (``axis`` may be positional; ``dtype`` converts the
    result as NumPy's ``casting="unsafe"`` would)."""
    result = concat(arrays, axis=axis)
    if dtype is None:
        return result
    dt = result._storage.device.dtype_of(dtype)
    if dt == result._dtype:
        return result
    try:
        return result.astype(dt)
    finally:
        result.free()


def stack(arrays, /, *, axis=0):
    """Join same-shaped ``arrays`` along a new ``axis`` into a new array (promoted dtype).

    ``ValueError`` for no arrays, different shapes or devices; ``AxisError`` for an axis
    outside ``[-ndim - 1, ndim]``.
    """
    xs = _arrays("stack", arrays)
    shape = xs[0]._shape
    for a in xs[1:]:
        if a._shape != shape:
            raise ValueError(f"stack(): all arrays must have the same shape; got {shape} "
                             f"and {a._shape}")
    ax = normalize_axis("stack", axis, len(shape) + 1)
    dt = _result_dtype(xs)
    out_shape = shape[:ax] + (len(xs),) + shape[ax:]
    check_size("stack", out_shape, dt.itemsize)
    out = new_array(out_shape, dt, xs[0]._storage.device, _kind(xs))
    try:
        if 0 not in out_shape:
            for i, a in enumerate(xs):
                with out[_along(out.ndim, ax, i)] as dst:
                    _copy(dst, a)
    except BaseException:
        out.free()
        raise
    return out


def unstack(x, /, *, axis=0):
    """Views of ``x`` split along ``axis``, as a tuple (``ValueError`` for a 0-d array)."""
    x = _array("unstack", x)
    if x.ndim == 0:
        raise ValueError("unstack() needs an array with at least one dimension, got a 0-d "
                         "array")
    ax = normalize_axis("unstack", axis, x.ndim)
    shape = x._shape[:ax] + x._shape[ax + 1:]
    strides = x._strides[:ax] + x._strides[ax + 1:]
    step = x._strides[ax]
    return tuple(x._derive(shape, strides, x._offset + i * step, x._dtype, x._writeable)
                 for i in range(x._shape[ax]))


# Shapes and axes (views) ----------------------------------------------------------------------
def reshape(x, /, shape, *, copy=None, order="C"):
    """``x`` with a new shape: a view when the layout allows one, else a copy.

    ``copy=True`` always copies; ``copy=False`` raises ``ValueError`` when a view is
    impossible; ``copy=None`` copies only then.  The result is always a new array
    object (a new handle when it is a view).  ``order`` is NumPy's (an extension).
    """
    x = _array("reshape", x)
    if copy not in (None, True, False):
        raise TypeError(f"reshape(): copy must be True, False or None, got {copy!r}")
    r = x.reshape(shape, order=order, copy=copy)
    return _handle(r) if r is x else r


def expand_dims(x, /, axis=0):
    """A view with new axes of length 1 at ``axis`` (an int or a tuple; positions in the
    result).  ``AxisError`` (an ``IndexError``) for a position out of range, ``ValueError``
    for a repeated one."""
    x = _array("expand_dims", x)
    items = axis if isinstance(axis, tuple) else (axis,)
    axes = _axes("expand_dims", items, x.ndim + len(items))
    return _view(x, np.expand_dims(x._engine(), axes))


def squeeze(x, /, axis):
    """A view without the length-1 axes named by ``axis`` (an int or a tuple; required).

    ``ValueError`` when a named axis is not of length 1, ``AxisError`` when out of range.
    """
    x = _array("squeeze", x)
    axes = _axes("squeeze", axis, x.ndim)
    for a in axes:
        if x._shape[a] != 1:
            raise ValueError(f"squeeze(): axis {a} has length {x._shape[a]}, not 1 (shape "
                             f"{x._shape}); only length-1 axes can be removed")
    return _view(x, np.squeeze(x._engine(), axis=axes))


def flip(x, /, *, axis=None):
    """A view with the order of elements reversed along ``axis`` (None: every axis)."""
    x = _array("flip", x)
    axes = tuple(range(x.ndim)) if axis is None else _axes("flip", axis, x.ndim)
    return _view(x, np.flip(x._engine(), axes) if axes else x._engine())


def permute_dims(x, /, axes):
    """A view with the axes of ``x`` permuted (``axes``: a permutation of every axis)."""
    x = _array("permute_dims", x)
    if not isinstance(axes, (tuple, list)):
        raise TypeError(f"permute_dims(): axes must be a tuple of ints, got {axes!r}")
    if len(axes) != x.ndim:
        raise ValueError(f"permute_dims(): axes {tuple(axes)} must name each of the "
                         f"{x.ndim} axes of an array of shape {x._shape} once")
    perm = _axes("permute_dims", tuple(axes), x.ndim)
    return _view(x, x._engine().transpose(perm))


def transpose(a, axes=None):
    """NumPy's ``transpose``: axes reversed (``axes=None``) or permuted, as a view."""
    a = _array("transpose", a)
    if axes is None:
        return _view(a, a._engine().T)
    return permute_dims(a, tuple(axes))


def moveaxis(x, source, destination, /):
    """A view with the axes ``source`` moved to ``destination`` (ints or tuples alike)."""
    x = _array("moveaxis", x)
    src = tuple(source) if isinstance(source, (tuple, list)) else (source,)  # NumPy: sequences
    dst = tuple(destination) if isinstance(destination, (tuple, list)) else (destination,)
    if len(src) != len(dst):
        raise ValueError(f"moveaxis(): source {source!r} and destination {destination!r} "
                         f"must name as many axes")
    s, d = _axes("moveaxis", src, x.ndim), _axes("moveaxis", dst, x.ndim)
    return _view(x, np.moveaxis(x._engine(), s, d))


# Copies with repeats --------------------------------------------------------------------------
def _zero_stride_view(x, shape, strides):
    """A read-only view of ``x`` with an explicit layout (zero strides repeat)."""
    return x._derive(tuple(shape), tuple(strides), x._offset, x._dtype, False)


def _fill_repeated(x, out_shape, view_shape, view_strides):
    """A new array of ``out_shape`` holding the layout ``view_*`` of ``x`` in C order."""
    out = new_array(tuple(out_shape), x._dtype, x._storage.device, x._storage.kind)
    try:
        if 0 not in view_shape:
            with reshape(out, tuple(view_shape)) as dst, \
                    _zero_stride_view(x, view_shape, view_strides) as src:
                _copy(dst, src)
    except BaseException:
        out.free()
        raise
    return out


def tile(x, repetitions, /):
    """``x`` repeated ``repetitions[k]`` times along each axis, in a new array.

    Shorter of the two is padded with leading 1s, as NumPy.  ``ValueError`` for a
    negative repetition, ``TypeError`` for non-ints.
    """
    x = _array("tile", x)
    reps = _shape_of("tile", repetitions)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile(): repetitions must be >= 0, got {tuple(reps)}")
    d = max(x.ndim, len(reps))
    shape = (1,) * (d - x.ndim) + x._shape
    strides = (0,) * (d - x.ndim) + x._strides
    reps = (1,) * (d - len(reps)) + reps
    check_size("tile", [r * n for r, n in zip(reps, shape, strict=True)], x._dtype.itemsize)
    vshape, vstrides = [], []
    for r, n, s in zip(reps, shape, strides, strict=True):
        vshape += [r, n]
        vstrides += [0, s]
    return _fill_repeated(x, [r * n for r, n in zip(reps, shape, strict=True)], vshape,
                          vstrides)


def roll(x, /, shift, *, axis=None):
    """``x`` with elements shifted by ``shift`` along ``axis``, wrapping around, in a new
    array (``axis=None``: over the flattened array, shape kept).

    ``shift`` and ``axis`` are ints or tuples of one length (an int shift applies to every
    axis; shifts of a repeated axis add up, as NumPy).  ``ValueError`` for mismatched
    lengths, ``AxisError`` for a bad axis, ``TypeError`` for non-ints.
    """
    x = _array("roll", x)
    shifts = shift if isinstance(shift, tuple) else (shift,)
    try:
        shifts = tuple(operator.index(s) for s in shifts)
    except TypeError:
        raise TypeError(f"roll(): shift must be an int or a tuple of ints, got "
                        f"{shift!r}") from None
    if axis is None:
        if len(shifts) != 1:
            raise ValueError(f"roll(): a tuple shift {shift!r} needs a tuple axis of the "
                             f"same length")
        out = new_array(x._shape, x._dtype, x._storage.device, x._storage.kind)
        try:
            n = x.size
            if n:
                s = shifts[0] % n
                with _flat(out) as flat, _flat(x) as xf:
                    _roll_1d(flat, xf, s, n)
        except BaseException:
            out.free()
            raise
        return out
    axes_in = axis if isinstance(axis, tuple) else (axis,)
    axes = tuple(normalize_axis("roll", a, x.ndim) for a in axes_in)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(shifts) != len(axes):
        raise ValueError(f"roll(): shift {shift!r} and axis {axis!r} must have the same "
                         f"length")
    net = [0] * x.ndim
    for s, a in zip(shifts, axes, strict=True):
        net[a] += s
    out = new_array(x._shape, x._dtype, x._storage.device, x._storage.kind)
    try:
        if x.size:
            pieces = []
            for k, n in enumerate(x._shape):
                s = net[k] % n
                # (destination slice, source slice) pairs along axis k
                pieces.append([(slice(None), slice(None))] if s == 0 else
                              [(slice(s, None), slice(0, n - s)), (slice(0, s), slice(n - s, n))])
            for combo in itertools.product(*pieces):
                dst_idx = tuple(c[0] for c in combo)
                src_idx = tuple(c[1] for c in combo)
                with out[dst_idx] as dst, x[src_idx] as src:
                    _copy(dst, src)
    except BaseException:
        out.free()
        raise
    return out


def _roll_1d(out, x, s: int, n: int) -> None:
    if s == 0:
        _copy(out, x)
        return
    with out[s:] as d1, x[:n - s] as s1:
        _copy(d1, s1)
    with out[:s] as d2, x[n - s:] as s2:
        _copy(d2, s2)


def repeat(x, repeats, /, *, axis=None):
    """Each element of ``x`` repeated ``repeats`` times along ``axis`` (None: over the
    flattened array), in a new array.

    ``repeats`` is an int or a 1-d integer array of length 1 or ``x.shape[axis]`` (on
    ``x``'s device).  An array of repeats makes the result's length data-dependent: its
    running sum is computed on the device and the total read back once (one
    synchronisation, docs/manipulation.md).  ``ValueError`` for negative repeats (found on
    the device for an array: the temporaries go back before it is raised), a wrong
    length or ``TypeError`` for a non-integer dtype.
    """
    x = _array("repeat", x)
    if isinstance(repeats, ArrayBase):
        return _repeat_array(x, repeats, axis)
    if isinstance(repeats, (float, complex, np.floating, np.complexfloating)):
        raise TypeError(f"repeat(): repeats must be an int or an integer array, got "
                        f"{repeats!r}")
    try:
        r = operator.index(repeats)
    except TypeError:
        raise TypeError(f"repeat(): repeats must be an int or an integer array, got "
                        f"{type(repeats).__name__}") from None
    if r < 0:
        raise ValueError(f"repeat(): repeats must be >= 0, got {r}")
    if x.size * r > _INT64_MAX:
        raise ValueError(f"repeat(): {x.size} elements repeated {r} times make {x.size * r}, "
                         f"more than {_INT64_MAX}; give smaller repeats")
    if axis is None:
        vshape, vstrides = x._shape + (r,), x._strides + (0,)
        return _fill_repeated(x, (x.size * r,), vshape, vstrides)
    ax = normalize_axis("repeat", axis, x.ndim)
    vshape = x._shape[:ax + 1] + (r,) + x._shape[ax + 1:]
    vstrides = x._strides[:ax + 1] + (0,) + x._strides[ax + 1:]
    out_shape = x._shape[:ax] + (x._shape[ax] * r,) + x._shape[ax + 1:]
    return _fill_repeated(x, out_shape, vshape, vstrides)


def _repeat_array(x, repeats, axis):
    from .reductions import scan

    reps = _array("repeat", repeats)
    if reps._storage.device != x._storage.device:
        raise ValueError(f"repeat(): repeats is on {reps._storage.device}, x on "
                         f"{x._storage.device}; move one with to_device()")
    if reps._dtype.kind not in "iu":
        raise TypeError(f"repeat(): an array of repeats must have an integer dtype, got "
                        f"{reps._dtype}")
    if reps.ndim > 1:
        raise ValueError(f"repeat(): an array of repeats must be 1-d (or 0-d), got shape "
                         f"{reps._shape}")
    if axis is None:
        ax, src = 0, None
        n = x.size
    else:
        ax = normalize_axis("repeat", axis, x.ndim)
        n = x._shape[ax]
        src = x
    if reps._shape not in ((), (1,), (n,)):
        raise ValueError(f"repeat(): repeats of shape {reps._shape} does not match the "
                         f"{n} elements along the axis; give 1 or {n} repeats")
    dev = x._storage.device
    temps = []
    try:
        if src is None:  # flattened, C order
            src = _flat(x)
            temps.append(src)
        if n == 0:
            return new_array(src._shape[:ax] + (0,) + src._shape[ax + 1:], x._dtype, dev,
                             x._storage.kind)
        r = reps if reps._shape == (n,) else broadcast_to(reps, (n,))
        if r is not reps:
            temps.append(r)
        positions = scan("cumulative_sum", r, 0, np.dtype(np.int64), False)
        temps.append(positions)
        total, negative, wrapped = _count(positions, r)
        if negative:
            raise ValueError(f"repeat(): repeats must be >= 0; {negative} of them are "
                             f"negative")
        if wrapped:
            raise ValueError(f"repeat(): the repeats add up to more than {_INT64_MAX} "
                             f"elements (their running sum overflows int64); give smaller "
                             f"repeats")
        out_shape = src._shape[:ax] + (total,) + src._shape[ax + 1:]
        out = new_array(out_shape, x._dtype, dev, x._storage.kind)
        try:
            if total and 0 not in out_shape:
                _fill_by_positions(out, src, positions, ax)
        except BaseException:
            out.free()
            raise
        return out
    finally:
        for t in temps:
            t.free()


_INT64_MAX = 2**63 - 1


def _count(positions, r) -> tuple[int, int, int]:
    """The total (last running sum), the number of negative repeats and the number of places
    where the running sum wrapped (it went down, or below 0: repeats are >= 0, so only an
    overflow of int64 does that): one device read."""
    from .elementwise import less
    from .searching import count_nonzero

    dev = positions._storage.device
    n = positions._shape[0]
    counts = new_array((3,), np.dtype(np.int64), dev, "device")
    try:
        with counts[0:1] as first, positions[n - 1:n] as last:
            _copy(first, last)
        with counts[1:2] as second:
            if r._dtype.kind == "i":
                with less(r, 0) as neg, count_nonzero(neg) as cnt, reshape(cnt, (1,)) as c1:
                    _copy(second, c1)
            else:
                second.fill(0)
        with counts[2:3] as third, positions[1:] as later, positions[:-1] as earlier, \
                less(later, earlier) as down, less(positions, 0) as below, \
                count_nonzero(down) as n_down, count_nonzero(below) as n_below:
            with (n_down + n_below) as both, reshape(both, (1,)) as w1:
                _copy(third, w1)
        total, negative, wrapped = (int(v) for v in counts.get())  # the one synchronisation
    finally:
        counts.free()
    return total, negative, wrapped


def _fill_by_positions(out, src, positions, ax: int) -> None:
    dev = src._storage.device
    if dev.backend == "cpu":
        pos = view(positions)
        index = np.repeat(np.arange(pos.shape[0]), np.diff(pos, prepend=0))
        with working(dev, src, out):
            np.take(view(src), index, axis=ax, out=view(out))
        return
    from .device import indexed

    tmp = None if indexed.addressable(src, ax) else src.copy()
    try:
        with working(dev, out, src, tmp, positions):
            indexed.repeat(out, src if tmp is None else tmp, positions, ax)
    finally:
        if tmp is not None:
            tmp.free()

