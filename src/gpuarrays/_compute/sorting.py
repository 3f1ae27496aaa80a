"""The standard's sorting functions (sort, argsort) and searchsorted (docs/sorting.md).

Both engines sort stably (``stable=False`` gives the same stable order) and put NaN
last in both directions; ``-0`` and ``+0`` compare equal (so they keep their
input order).  Complex arrays sort as NumPy sorts them: lexicographically by
(real, imaginary), with values holding a NaN after all others (a NaN imaginary
part, then a NaN real part, then both).  ``descending=True`` reverses the order
of everything but the NaNs and keeps equal elements in their input order.

On ``cpu`` the engine is NumPy on views of the raw memory: ``sort`` copies ``x``
into the result and sorts it in place (``ndarray.sort(kind="stable")``; a
descending sort negates the copy before and after, which is exact); ``argsort``
and ``searchsorted`` let NumPy make the index array and copy it into the
result (NumPy has no ``out=`` for them).  On device back-ends the kernels of
``device/sort.py`` run.  Everything that can be refused is refused before
anything is allocated.
"""

from __future__ import annotations

import numpy as np

from .._array.make import ArrayBase, new_array
from . import cpu_engine, promotion
from .ownership import filling, working
from .reductions import normalize_axes

__all__ = ["sort", "argsort", "searchsorted"]

_INDEX = np.dtype(np.int64)


def _check_array(name: str, x):
    """A live gpuarrays array of an ordered dtype, else ``TypeError`` (or
    ``FreedArrayError``).  Structured dtypes are refused on every device alike (the sort,
    search and set kernels order numbers and bool; NumPy's field-by-field order would hold
    on the cpu engine only)."""
    if not isinstance(x, ArrayBase):
        raise TypeError(f"{name}() takes a gpuarrays array, got {type(x).__name__}; "
                        f"copy host data to the device first with ga.asarray(x, device=...)")
    if x._dtype.names is not None:
        raise TypeError(f"{name}() of a structured dtype {x._dtype}: gpuarrays sorts, "
                        f"searches and compares sets of numbers and bool on every device; "
                        f"use NumPy on a host copy (x.get())")
    x._live()


def _check_flag(name: str, what: str, value) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name}(): {what} must be True or False, got {value!r}")
    return bool(value)


def _sort_axis(name: str, x, axis) -> int:
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise TypeError(f"{name}(): axis must be an int, got {axis!r}")
    ndim = len(x._shape)
    if ndim == 0:
        raise np.exceptions.AxisError(
            f"{name}(): axis {axis} is out of bounds for a 0-d array; a 0-d array has no "
            f"axis to sort (reshape it first: x.reshape(1))")
    (ax,) = normalize_axes(name, int(axis), ndim)
    return ax


def _negate(z: np.ndarray) -> None:
    """An exact, order-reversing involution that keeps NaN NaN (for a descending sort)."""
    if z.dtype.kind == "b":
        np.logical_not(z, out=z)
    elif z.dtype.kind in "iu":
        np.invert(z, out=z)
    else:
        np.negative(z, out=z)


def _run(name: str, x, axis, descending, stable, indices: bool):
    _check_array(name, x)
    ax = _sort_axis(name, x, axis)
    descending = _check_flag(name, "descending", descending)
    stable = _check_flag(name, "stable", stable)
    dev = x._storage.device
    dev.require(x._dtype)
    result = new_array(x._shape, _INDEX if indices else x._dtype, dev, x._storage.kind)
    with filling(result):
        if 0 in x._shape:
            pass
        elif dev.backend == "cpu":
            with working(dev, x, result):
                _cpu_sort(x, ax, descending, result, indices, stable)
        else:
            from .device import sort as device_sort  # docs/design.md, "Layers": same layer

            with working(dev, x, result):
                device_sort.sort(x, ax, descending, result, indices)
    return result


def _cpu_sort(x, ax: int, descending: bool, result, indices: bool, stable: bool) -> None:
    """NumPy's sorts on views: ``kind="stable"`` (radix/timsort), or NumPy's default
    (introsort with its SIMD kernels) when equal elements may come in any order."""
    v = cpu_engine.view(x)
    z = cpu_engine.view(result)
    kind = "stable" if stable else None
    if not indices:
        np.copyto(z, v)
        if descending:
            _negate(z)
        z.sort(axis=ax, kind=kind)
        if descending:
            _negate(z)
        return
    if not descending:
        np.copyto(z, np.argsort(v, axis=ax, kind=kind))
        return
    tmp = new_array(x._shape, x._dtype, x._storage.device, "device")
    try:
        t = cpu_engine.view(tmp)
        np.copyto(t, v)
        _negate(t)
        np.copyto(z, np.argsort(t, axis=ax, kind=kind))
    finally:
        tmp.free()


def sort(x, /, *, axis=-1, descending=False, stable=True):
    """A sorted copy of ``x`` along ``axis`` (NaN last in both directions).  ``stable=False``
    allows any order of equal elements: on ``cpu`` NumPy's default sort (faster than its
    stable one); device kernels are stable either way.

    Errors before anything is allocated: ``TypeError`` (not an array, a non-int
    axis, a non-bool flag), ``AxisError`` (axis out of range, a 0-d array),
    ``FreedArrayError``.
    """
    return _run("sort", x, axis, descending, stable, indices=False)


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    """The int64 indices that sort ``x`` along ``axis`` (``stable``: equal elements keep
    their order, also when ``descending``; else, on ``cpu``, NumPy's default order of
    ties); errors as :func:`sort`."""
    return _run("argsort", x, axis, descending, stable, indices=True)


# searchsorted ---------------------------------------------------------------------------------
def _as_operand(name: str, x1, x2):
    """``x2`` as an array on ``x1``'s device: an array as it is, a Python scalar as a 0-d
    array of the dtype the standard's scalar rules give (weak: ``x1``'s kind if it fits)."""
    if isinstance(x2, ArrayBase):
        x2._live()
        if x2._storage.device != x1._storage.device:
            raise ValueError(f"{name}(): x1 is on {x1._storage.device} and x2 on "
                             f"{x2._storage.device}; move one with .to_device(...)")
        return x2, False
    if isinstance(x2, bool | int | float | complex) and not isinstance(x2, np.generic):
        dt = promotion.result_type(x1._dtype, promotion.key_of(x2))
        promotion.check_scalar(x2, dt)
        return dt, True
    raise TypeError(f"{name}() takes a gpuarrays array or a Python scalar for x2, got "
                    f"{type(x2).__name__}; copy host data with ga.asarray(x2, device=...)")


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Indices where the elements of ``x2`` would be inserted into the sorted 1-d ``x1``.

    ``side="left"``: ``x1[i-1] < v <= x1[i]``; ``"right"``: ``x1[i-1] <= v < x1[i]``,
    in the order :func:`sort` uses (NaN last).  ``sorter``: int indices that sort
    ``x1`` (an entry out of range is clamped on device back-ends, refused with
    ``ValueError`` on cpu as NumPy does).  An int64 array of ``x2``'s shape.

    Errors before anything is allocated: ``TypeError`` (not an array, a sorter not of
    an integer dtype), ``ValueError`` (``x1`` not 1-d, a bad ``side``, a sorter of
    another shape, mixed devices), ``FreedArrayError``.
    """
    name = "searchsorted"
    _check_array(name, x1)
    if len(x1._shape) != 1:
        raise ValueError(f"searchsorted(): x1 must be 1-d, got shape {x1._shape}; "
                         f"flatten it first (ga.reshape(x1, (-1,)))")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted(): side must be 'left' or 'right', got {side!r}")
    operand, scalar = _as_operand(name, x1, x2)
    if sorter is not None:
        _check_array(name, sorter)
        if sorter._storage.device != x1._storage.device:
            raise ValueError(f"searchsorted(): x1 is on {x1._storage.device} and sorter on "
                             f"{sorter._storage.device}; move one with .to_device(...)")
        if sorter._dtype.kind not in "iu":
            raise TypeError(f"searchsorted(): sorter must have an integer dtype, got "
                            f"{sorter._dtype}")
        if sorter._shape != x1._shape:
            raise ValueError(f"searchsorted(): sorter must have x1's shape {x1._shape}, got "
                             f"{sorter._shape}")
    dev = x1._storage.device
    common = operand if scalar else promotion.result_type(x1._dtype, operand._dtype)
    dev.require(common)
    shape = () if scalar else operand._shape
    result = new_array(shape, _INDEX, dev, x1._storage.kind if scalar
                       else _kind(x1, operand))
    with filling(result, []) as temps:
        if scalar:
            from .._array.creation import asarray

            operand = asarray(x2, dtype=common, device=dev)
            temps.append(operand)
        if 0 in shape:
            pass
        elif dev.backend == "cpu":
            with working(dev, result, x1, operand, sorter):
                z = cpu_engine.view(result)
                v1 = cpu_engine.view(x1).astype(common, copy=False)
                v2 = cpu_engine.view(operand).astype(common, copy=False)
                srt = cpu_engine.view(sorter) if sorter is not None else None
                z[...] = np.searchsorted(v1, v2, side=side, sorter=srt)
        else:
            from .device import sort as device_sort  # same layer

            with working(dev, result, x1, operand, sorter):
                a1 = _prepared(x1, common, temps, contiguous=False)
                a2 = _prepared(operand, common, temps, contiguous=True)
                s = _prepared(sorter, _INDEX, temps, contiguous=False) if sorter is not None \
                    else None
                device_sort.search(0 if side == "left" else 1, a1, s, a2, result)
    return result


def _kind(*arrays) -> str:
    kinds = {a._storage.kind for a in arrays}
    return kinds.pop() if len(kinds) == 1 else "device"


def _prepared(a, dt: np.dtype, temps: list, contiguous: bool):
    """``a`` itself when it has dtype ``dt`` and a usable layout, else a pooled copy."""
    raw = a._raw()
    unit = min(dt.itemsize, 8)
    bits = raw.ptr
    for s in raw.strides:
        bits |= s
    dense = a._is_c() if contiguous else True
    if a._dtype == dt and dense and bits % unit == 0:
        return a
    tmp = new_array(a._shape, dt, a._storage.device, "device")
    temps.append(tmp)
    from .._array.transfer import copy_raw

    copy_raw(tmp, a)
    return tmp
