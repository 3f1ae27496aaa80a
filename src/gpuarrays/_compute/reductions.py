"""One row per reduction and scan, the typing rules, and the entry point both engines share.

A :class:`Reduction` row describes an operation once (docs/reductions.md,
"The table"): the dtypes it accepts, the rule that types its result and its
accumulator, the NumPy function that is the cpu engine (and the oracle), and
the four C pieces the device generator (``_compute/device/reduce.py``,
``device/scan.py``) assembles into a kernel: ``identity``, ``map`` (one
element, converted to the accumulator type, to a partial), ``combine`` (two
partials to one) and ``finalize`` (the partial and the element count to the
result).  :func:`reduce` and :func:`scan` check the arguments, type the result,
allocate it from the pool or the active ``ga.cached`` scope and run one engine;
everything that can be refused is refused before anything is allocated.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from .._array.make import ArrayBase, new_array
from . import cpu_engine
from .fusion.trace import Symbol
from .ownership import filling, working

__all__ = ["REDUCTIONS", "SCANS", "Reduction", "normalize_axes", "reduce", "scan",
           "accumulator_dtype"]

_BOOL = np.dtype(bool)
_I8, _U8, _F4, _F8 = (np.dtype(n) for n in ("int64", "uint64", "float32", "float64"))
_INDEX = _I8
"""The default integer type (argmax/argmin/count_nonzero results, integer sums)."""

_ALL = frozenset("biufc")
_CATEGORIES = {
    "any": _ALL,
    "real": frozenset("biuf"),
}


@dataclass(frozen=True, eq=False)
class Reduction:
    """One reduction (or scan).

    ``typing`` types the result: ``"sum"`` (signed ints and bool give the default
    integer type, unsigned ints its unsigned twin, floats and complex themselves),
    ``"same"``, ``"bool"``, ``"index"`` (the default integer type) or ``"mean"``
    (floats themselves, integers and bool the default floating type).

    The device generator reads the rest: ``identity`` (``"0"``, ``"1"``,
    ``"lowest"``, ``"highest"``: the accumulator's neutral element), ``combine``
    (the elementwise operation of ``_compute/table.py`` that joins two partials,
    ``bool_combine`` for bool input, or ``"argmax"``/``"argmin"``: value-index
    pairs, the first index on ties, the first NaN winning), ``map`` (``"x"``,
    ``"nonzero"`` or ``"deviation"``: ``(x - mean)**2`` with the mean of a first
    pass) and ``finalize`` (``""``, ``"mean"``: divide by the count, ``"var"``:
    by ``max(count - correction, 0)``, ``"std"``: the square root of that).
    ``empty`` is the value of a reduction over nothing, or ``None`` when one raises
    ``ValueError``.
    """

    name: str
    category: str
    typing: str
    identity: str
    combine: str
    map: str = "x"
    finalize: str = ""
    empty: object = None
    bool_combine: str = ""


_NAN = float("nan")
REDUCTIONS: dict[str, Reduction] = {r.name: r for r in (
    Reduction("sum", "any", "sum", "0", "add", empty=0),
    Reduction("prod", "any", "sum", "1", "multiply", empty=1),
    Reduction("max", "real", "same", "lowest", "maximum", bool_combine="logical_or"),
    Reduction("min", "real", "same", "highest", "minimum", bool_combine="logical_and"),
    Reduction("all", "any", "bool", "1", "logical_and", map="nonzero", empty=True),
    Reduction("any", "any", "bool", "0", "logical_or", map="nonzero", empty=False),
    Reduction("count_nonzero", "any", "index", "0", "add", map="nonzero", empty=0),
    Reduction("mean", "any", "mean", "0", "add", finalize="mean", empty=_NAN),
    Reduction("var", "real", "mean", "0", "add", map="deviation", finalize="var", empty=_NAN),
    Reduction("std", "real", "mean", "0", "add", map="deviation", finalize="std", empty=_NAN),
    Reduction("argmax", "real", "index", "lowest", "argmax"),
    Reduction("argmin", "real", "index", "highest", "argmin"),
)}
"""The reductions, by the name of the public function."""

SCANS: dict[str, Reduction] = {r.name: r for r in (
    Reduction("cumulative_sum", "any", "sum", "0", "add", empty=0),
    Reduction("cumulative_prod", "any", "sum", "1", "multiply", empty=1),
)}
"""The inclusive scans, by the name of the public function."""


# Typing ---------------------------------------------------------------------------------
def _result_dtype(row: Reduction, dt: np.dtype, dtype, dev) -> np.dtype:
    if dtype is not None:
        if row.typing not in ("sum", "mean"):
            raise TypeError(f"{row.name}() takes no dtype argument")
        rd = dev.dtype_of(dtype)
        if rd.kind not in "iufc" or (row.typing == "mean" and rd.kind not in "fc"):
            wanted = "a floating" if row.typing == "mean" else "a numeric"
            raise TypeError(f"{row.name}(): dtype={rd} is not {wanted} data type; "
                            f"pass e.g. dtype=ga.float64")
        if dt.kind == "c" and rd.kind != "c":
            raise TypeError(f"{row.name}(): cannot accumulate complex {dt} values in {rd}; "
                            f"pass a complex dtype or take the real part first")
        return rd
    typing = row.typing
    if typing == "sum":
        if dt.kind in "bi":
            return _I8
        return _U8 if dt.kind == "u" else dt
    if typing == "same":
        return dt
    if typing == "bool":
        return _BOOL
    if typing == "index":
        return _INDEX
    # mean: floats keep their type; integers and bool give the default floating type
    if dt.kind in "fc":
        return dt
    return _F8 if dev.info.float64 else _F4


def accumulator_dtype(result: np.dtype) -> np.dtype:
    """The type partials are held in: float16 accumulates in float32, the rest in themselves."""
    return _F4 if result.kind == "f" and result.itemsize == 2 else result


def normalize_axes(name: str, axis, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, an int or a tuple of ints, negative allowed) as sorted axes.

    ``np.exceptions.AxisError`` (a ``ValueError``) for an axis out of range,
    ``ValueError`` for a repeated axis, ``TypeError`` for anything else.
    """
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for ax in items:
        try:
            k = operator.index(ax)
        except TypeError:
            raise TypeError(f"{name}(): axis must be None, an int or a tuple of ints, "
                            f"got {axis!r}") from None
        if not -ndim <= k < ndim:
            raise np.exceptions.AxisError(
                f"{name}(): axis {k} is out of bounds for an array of dimension {ndim} "
                f"(use -{ndim} to {ndim - 1})" if ndim else
                f"{name}(): axis {k} is out of bounds for a 0-d array (use axis=None)")
        out.append(k % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}(): axis {axis!r} repeats an axis; name each axis once")
    return tuple(sorted(out))


def _check_array(name: str, x) -> None:
    if not isinstance(x, ArrayBase):
        raise TypeError(f"{name}() takes a gpuarrays array, got {type(x).__name__}; "
                        f"copy host data to the device first with ga.asarray(x, device=...)")
    x._live()


def _check_category(row: Reduction, dt: np.dtype) -> None:
    if dt.kind not in _CATEGORIES[row.category]:
        raise TypeError(f"{row.name}() does not accept {dt}: it takes {row.category} data "
                        f"types only; convert first (e.g. ga.astype(x, ga.float32))")


def _out_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if k in axes else n for k, n in enumerate(shape))
    return tuple(n for k, n in enumerate(shape) if k not in axes)


# The entry points -----------------------------------------------------------------------
def reduce(name: str, x, axis=None, keepdims: bool = False, dtype=None, correction=0.0):
    """Reduce ``x`` over ``axis`` with the row ``name``; a new array (0-d for a full reduction).

    Errors, all before anything is allocated: ``TypeError`` (not an array, a dtype
    the row does not take, a bad ``dtype``/``axis``), ``ValueError``/``AxisError``
    (axes; ``max``/``min``/``argmax``/``argmin`` of nothing), ``FreedArrayError``.
    """
    if isinstance(x, Symbol):  # inside ga.fuse: the final reduction (fusion/trace.py)
        return x._trace.reduce(name, x, axis, keepdims, dtype)
    row = REDUCTIONS[name]
    _check_array(name, x)
    dt = x._dtype
    _check_category(row, dt)
    shape = x._shape
    if row.typing == "index" and name != "count_nonzero":
        if axis is not None and not isinstance(axis, int | np.integer):
            raise TypeError(f"{name}(): axis must be None or an int, got {axis!r}")
    axes = normalize_axes(name, axis, len(shape))
    count = math.prod(shape[k] for k in axes)
    if count == 0 and row.empty is None:
        # dask: NumPy's wording ends the message -- Dask (and others) recognise it to
        # build a zero-size meta for min/max instead of giving up on the chunk type.
        raise ValueError(f"{name}() of an empty sequence (shape {shape}, axis {axis!r}) has "
                         f"no value; reduce over axes of non-zero length (zero-size array to "
                         f"reduction operation {name} which has no identity)")
    if name in ("var", "std"):
        correction = _check_correction(name, correction)
    dev = x._storage.device
    rd = _result_dtype(row, dt, dtype, dev)
    dev.require(rd)
    dev.require(accumulator_dtype(rd))
    out_shape = _out_shape(shape, axes, keepdims)
    result = new_array(out_shape, rd, dev, x._storage.kind)
    with filling(result):
        if 0 in out_shape:
            pass
        elif count == 0:
            result.fill(row.empty)
        elif dev.backend == "cpu":
            with working(dev, x, result):
                _cpu_reduce(row, x, axes, keepdims, result, count, correction)
        else:
            from .device import reduce as device_reduce  # docs/design.md, "Layers": same layer

            with working(dev, x, result):
                device_reduce.run(row, x, axes, result, count, correction)
    return result


def _check_correction(name: str, correction) -> float:
    if isinstance(correction, bool) or not isinstance(correction, int | float | np.integer
                                                       | np.floating):
        raise TypeError(f"{name}(): correction must be a real number, got {correction!r}")
    c = float(correction)
    if not c >= 0:
        raise ValueError(f"{name}(): correction must be >= 0, got {correction!r}")
    return c


def scan(name: str, x, axis=None, dtype=None, include_initial: bool = False):
    """The inclusive scan ``name`` of ``x`` along ``axis`` (``include_initial`` prepends
    the identity).  ``axis`` may be omitted for a 1-d array only.

    Errors before anything is allocated: ``TypeError`` (not an array, dtype),
    ``ValueError`` (a 0-d array, a missing axis, an axis out of range).
    """
    row = SCANS[name]
    _check_array(name, x)
    dt = x._dtype
    _check_category(row, dt)
    shape = x._shape
    if not shape:
        raise ValueError(f"{name}() needs an array with at least one dimension, got a 0-d "
                         f"array; reshape it first (x.reshape(1))")
    if axis is None:
        if len(shape) != 1:
            raise ValueError(f"{name}(): axis is required for a {len(shape)}-d array "
                             f"(shape {shape}); pass e.g. axis=0")
        axis = 0
    elif not isinstance(axis, int | np.integer):
        raise TypeError(f"{name}(): axis must be an int, got {axis!r}")
    (ax,) = normalize_axes(name, axis, len(shape))
    dev = x._storage.device
    rd = _result_dtype(row, dt, dtype, dev)
    dev.require(rd)
    dev.require(accumulator_dtype(rd))
    out_shape = list(shape)
    if include_initial:
        out_shape[ax] += 1
    result = new_array(tuple(out_shape), rd, dev, x._storage.kind)
    with filling(result):
        if 0 in out_shape:
            pass
        elif dev.backend == "cpu":
            with working(dev, x, result):
                _cpu_scan(row, x, ax, include_initial, result)
        else:
            from .device import scan as device_scan  # docs/design.md, "Layers": same layer

            with working(dev, x, result):
                device_scan.run(row, x, ax, include_initial, result)
    return result


# The cpu engine -------------------------------------------------------------------------
_UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
           "all": np.logical_and, "any": np.logical_or, "mean": np.add,
           "cumulative_sum": np.add, "cumulative_prod": np.multiply}


def _temp(shape: tuple, dt: np.dtype, like):
    return new_array(tuple(shape), dt, like._storage.device, "device")


def _flat_view(x) -> tuple[np.ndarray, object]:
    """A 1-d NumPy view of ``x`` in C order, through a pooled copy when ``x`` is strided."""
    v = cpu_engine.view(x)
    if v.flags.c_contiguous:
        return v.reshape(-1), None
    tmp = _temp(x._shape, x._dtype, x)
    t = cpu_engine.view(tmp)
    np.copyto(t, v)
    return t.reshape(-1), tmp


def _cpu_reduce(row: Reduction, x, axes, keepdims, result, count, correction) -> None:
    v = cpu_engine.view(x)
    z = cpu_engine.view(result)
    if len(axes) == v.ndim > 1:
        axes = None  # NumPy's pairwise path over all axes (a tuple of all axes is slower)
    rd = result._dtype
    acc = accumulator_dtype(rd)
    name = row.name
    temps = []
    try:
        with np.errstate(all="ignore"):  # device kernels cannot warn; engines alike
            if name in ("sum", "prod", "max", "min", "all", "any"):
                kw = {"dtype": acc} if row.typing == "sum" else {}
                if kw and acc != rd:  # float16: into float32, rounded once (NumPy's buffered
                    # reduce into a float16 out rounds at every 8192-element chunk)
                    tmp = _temp(result._shape, acc, x)
                    temps.append(tmp)
                    t = cpu_engine.view(tmp)
                    _UFUNCS[name].reduce(v, axis=axes, out=t, keepdims=keepdims, **kw)
                    np.copyto(z, t, casting="unsafe")
                else:
                    _UFUNCS[name].reduce(v, axis=axes, out=z, keepdims=keepdims, **kw)
            elif name == "count_nonzero":
                if axes == ():
                    np.not_equal(v, 0, out=z, casting="unsafe")
                elif axes is None or len(axes) == v.ndim:
                    z[...] = np.count_nonzero(v)
                else:
                    nz = v
                    if v.dtype != _BOOL:
                        tmp = _temp(x._shape, _BOOL, x)
                        temps.append(tmp)
                        nz = np.not_equal(v, 0, out=cpu_engine.view(tmp))
                    np.add.reduce(nz, axis=axes, dtype=_INDEX, out=z, keepdims=keepdims)
            elif name in ("argmax", "argmin"):
                fn = np.argmax if name == "argmax" else np.argmin
                if axes is not None and len(axes) == 1:
                    fn(v, axis=axes[0], out=z, keepdims=keepdims)
                elif axes == ():  # a 0-d array
                    z[...] = 0
                else:
                    flat, tmp = _flat_view(x)
                    if tmp is not None:
                        temps.append(tmp)
                    z[...] = fn(flat)
            else:
                _cpu_moments(name, x, v, z, axes, keepdims, count, correction, acc, temps)
    finally:
        for t in temps:
            t.free()


def _cpu_moments(name, x, v, z, axes, keepdims, count, correction, acc, temps) -> None:
    """mean, var, std as NumPy computes them (two passes), temporaries from the pool."""
    rd = z.dtype
    if name == "mean":
        if acc == rd:
            np.add.reduce(v, axis=axes, dtype=acc, out=z, keepdims=keepdims)
            np.true_divide(z, count, out=z, casting="unsafe")
        else:
            s = _temp(z.shape, acc, x)
            temps.append(s)
            sv = cpu_engine.view(s)
            np.add.reduce(v, axis=axes, dtype=acc, out=sv, keepdims=keepdims)
            np.true_divide(sv, count, out=z, casting="unsafe")
        return
    kept = tuple(1 if axes is None or k in axes else n for k, n in enumerate(v.shape))
    m = _temp(kept, acc, x)
    temps.append(m)
    mv = cpu_engine.view(m)
    np.add.reduce(v, axis=axes, dtype=acc, out=mv, keepdims=True)
    np.true_divide(mv, count, out=mv, casting="unsafe")
    d = _temp(v.shape, acc, x)
    temps.append(d)
    dv = cpu_engine.view(d)
    np.subtract(v, mv, out=dv, casting="unsafe")
    np.square(dv, out=dv)
    out = z
    if acc != rd:
        s = _temp(z.shape, acc, x)
        temps.append(s)
        out = cpu_engine.view(s)
    np.add.reduce(dv, axis=axes, out=out, keepdims=keepdims)
    np.true_divide(out, max(count - correction, 0), out=out)
    if name == "std":
        np.sqrt(out, out=out)
    if out is not z:
        np.copyto(z, out, casting="unsafe")


def _cpu_scan(row: Reduction, x, ax: int, include_initial: bool, result) -> None:
    v = cpu_engine.view(x)
    z = cpu_engine.view(result)
    if include_initial:
        head = [slice(None)] * z.ndim
        head[ax] = slice(0, 1)
        z[tuple(head)] = row.empty
        head[ax] = slice(1, None)
        z = z[tuple(head)]
    rd = result._dtype
    acc = accumulator_dtype(rd)
    ufunc = _UFUNCS[row.name]
    with np.errstate(all="ignore"):  # device kernels cannot warn; engines alike
        if acc == rd:
            ufunc.accumulate(v, axis=ax, dtype=acc, out=z)
            return
        tmp = _temp(v.shape, acc, x)
        try:
            t = cpu_engine.view(tmp)
            ufunc.accumulate(v, axis=ax, dtype=acc, out=t)
            np.copyto(z, t, casting="unsafe")
        finally:
            tmp.free()
