"""The standard's set functions: unique_all, unique_counts, unique_inverse, unique_values,
isin (docs/sorting.md, "Sets").

Unique values come out sorted (ascending, NaN last, as :func:`~.sorting.sort`).
Uniqueness is the standard's value equality: every NaN (and every complex value
with a NaN part) is distinct, with a count of one; ``-0`` and ``+0`` are one
value (the first occurrence's sign is kept).  ``indices`` are first occurrences
in the C-order flattening; ``inverse_indices`` has ``x``'s shape.

On a device: a stable sort of the flattened ``x`` (values, and the permutation
when indices or the inverse are asked for), a kernel marking where runs of equal
values start, then the indexing engineer's compaction (``compaction.positions``:
a scan of the marks and **one device -> host read of the count per call**, then
its ``select``/``coords`` kernels for every output that needs it, with that one
count).  Counts are differences of run starts; the inverse scatters the scan of
the marks through the permutation.  Temporaries come from the pool or the active
``ga.cached`` scope and go back before the call returns.  On ``cpu``: NumPy's
``np.unique``/``np.isin`` on views of the raw memory, copied into our results.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .._array.make import ArrayBase, new_array
from . import cpu_engine, promotion
from .ownership import filling, working
from .sorting import _check_array, _kind, _prepared

__all__ = ["unique_all", "unique_counts", "unique_inverse", "unique_values", "isin",
           "UniqueAllResult", "UniqueCountsResult", "UniqueInverseResult"]

UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices",
                                                 "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])

_INDEX = np.dtype(np.int64)
_BOOL = np.dtype(bool)


def _unique(name: str, x, indices: bool, inverse: bool, counts: bool) -> dict:
    """``{"values", "indices", "inverse_indices", "counts"}`` (those asked for)."""
    _check_array(name, x)
    dev = x._storage.device
    dev.require(x._dtype)
    kind = x._storage.kind
    n = x.size
    out: dict = {}
    if n == 0:
        out["values"] = new_array((0,), x._dtype, dev, kind)
        if indices:
            out["indices"] = new_array((0,), _INDEX, dev, kind)
        if inverse:
            out["inverse_indices"] = new_array(x._shape, _INDEX, dev, kind)
        if counts:
            out["counts"] = new_array((0,), _INDEX, dev, kind)
        return out
    with filling(out.values()):
        if dev.backend == "cpu":
            _cpu_unique(x, indices, inverse, counts, out)
        else:
            _device_unique(x, indices, inverse, counts, out)
    return out


def _cpu_unique(x, indices: bool, inverse: bool, counts: bool, out: dict) -> None:
    dev, kind = x._storage.device, x._storage.kind
    with working(dev, x):
        v = cpu_engine.view(x).reshape(-1)  # NumPy copies a strided x itself
        # return_index makes NumPy sort stably, so NaNs and signed zeros come out in the
        # order the device kernels give, whatever is asked for
        got = np.unique(v, return_index=True, return_inverse=inverse, return_counts=counts,
                        equal_nan=False)
        names = ["values", "indices"] + [k for k, want in (("inverse_indices", inverse),
                                                           ("counts", counts)) if want]
        for k, g in zip(names, got, strict=True):
            if k == "indices" and not indices:
                continue
            shape = x._shape if k == "inverse_indices" else g.shape
            a = out[k] = new_array(shape, g.dtype if k == "values" else _INDEX, dev, kind)
            cpu_engine.view(a)[...] = g.reshape(shape)


def _device_unique(x, indices: bool, inverse: bool, counts: bool, out: dict) -> None:
    from .compaction import positions  # the indexing engineer's compaction (same layer)
    from .device import indexing as compact
    from .device import sort as device_sort

    dev, kind = x._storage.device, x._storage.kind
    n = x.size
    dt = x._dtype
    temps = []
    try:
        flat = x.reshape(-1) if x._is_c() else x.reshape(-1, copy=True)
        temps.append(flat)
        s = new_array((n,), dt, dev, "device")
        temps.append(s)
        perm = None
        with working(dev, flat, s):
            if indices or inverse:
                perm = new_array((n,), _INDEX, dev, "device")
                temps.append(perm)
                device_sort.sort(flat, 0, False, perm, True, values=s)
            else:
                device_sort.sort(flat, 0, False, s, False)
            starts_mask = new_array((n,), _BOOL, dev, "device")
            temps.append(starts_mask)
            device_sort.search(4, None, None, s, starts_mask)
        pos, count = positions(starts_mask)  # the one device -> host read of the call
        temps.append(pos)
        pptr = pos._raw().ptr

        def select(key: str, src, dtype) -> None:
            a = out[key] = new_array((count,), dtype, dev, kind)
            compact.launch_compact(dev, "select", src._raw().ptr, pptr, a._raw().ptr, n,
                                   count, [(n, dtype.itemsize)], dtype.itemsize,
                                   min(dtype.itemsize, 8))

        with working(dev, s, pos, perm):
            select("values", s, dt)
            if indices:
                select("indices", perm, _INDEX)
            if counts:
                starts = new_array((count,), _INDEX, dev, "device")
                temps.append(starts)
                compact.launch_compact(dev, "coords", pptr, pptr, starts._raw().ptr, n, count,
                                       [(n, 0)], 8, 8)
                c = out["counts"] = new_array((count,), _INDEX, dev, kind)
                device_sort.search(5, None, None, starts, c, n1=n)
            if inverse:
                inv = out["inverse_indices"] = new_array(x._shape, _INDEX, dev, kind)
                device_sort.search(6, pos, perm, perm, inv)
    finally:
        for t in temps:
            if t is not x:
                t.free()


def unique_values(x, /):
    """The unique elements of ``x`` (flattened), sorted; NaNs each distinct."""
    return _unique("unique_values", x, False, False, False)["values"]


def unique_counts(x, /):
    """``(values, counts)``: the unique elements of ``x`` and how often each occurs."""
    r = _unique("unique_counts", x, False, False, True)
    return UniqueCountsResult(r["values"], r["counts"])


def unique_inverse(x, /):
    """``(values, inverse_indices)``: ``values[inverse_indices]`` rebuilds ``x``
    (up to the sign of zeros)."""
    r = _unique("unique_inverse", x, False, True, False)
    return UniqueInverseResult(r["values"], r["inverse_indices"])


def unique_all(x, /):
    """``(values, indices, inverse_indices, counts)``; ``indices`` are first occurrences."""
    r = _unique("unique_all", x, True, True, True)
    return UniqueAllResult(r["values"], r["indices"], r["inverse_indices"], r["counts"])


# isin -----------------------------------------------------------------------------------------
def isin(x1, x2, /, *, invert=False):
    """Whether each element of ``x1`` equals some element of ``x2`` (NaN never does; ``-0``
    equals ``+0``): a bool array of ``x1``'s shape (0-d when ``x1`` is a scalar).

    Either operand may be a Python scalar, not both.  Errors before anything is
    allocated: ``TypeError`` (neither an array, a non-bool ``invert``, dtypes that
    do not promote), ``ValueError`` (mixed devices), ``FreedArrayError``.
    """
    arrays = [a for a in (x1, x2) if isinstance(a, ArrayBase)]
    if not arrays:
        raise TypeError(f"isin() needs at least one gpuarrays array, got "
                        f"{type(x1).__name__} and {type(x2).__name__}")
    for a in (x1, x2):
        if not isinstance(a, ArrayBase) and not (
                isinstance(a, promotion.SCALAR_TYPES) and not isinstance(a, np.generic)):
            raise TypeError(f"isin() takes gpuarrays arrays or Python scalars, got "
                            f"{type(a).__name__}; copy host data with ga.asarray(...)")
    if not isinstance(invert, bool | np.bool_):
        raise TypeError(f"isin(): invert must be True or False, got {invert!r}")
    for a in arrays:
        _check_array("isin", a)
    dev = arrays[0]._storage.device
    if len(arrays) == 2 and arrays[1]._storage.device != dev:
        raise ValueError(f"isin(): x1 is on {dev} and x2 on {arrays[1]._storage.device}; "
                         f"move one with .to_device(...)")
    keys = [promotion.key_of(a) for a in (x1, x2)]
    try:
        common = promotion.result_type(*keys)
    except TypeError as e:
        raise TypeError(f"isin(): the dtypes of x1 and x2 do not promote: {e}") from e
    for a in (x1, x2):
        promotion.check_scalar(a, common)
    dev.require(common)
    shape = x1._shape if isinstance(x1, ArrayBase) else ()
    result = new_array(shape, _BOOL, dev, _kind(*arrays))
    with filling(result, []) as temps:
        from .._array.creation import asarray

        ops = []
        for a in (x1, x2):
            if not isinstance(a, ArrayBase):
                a = asarray(a, dtype=common, device=dev)
                temps.append(a)
            ops.append(a)
        a1, a2 = ops
        if a1.size == 0:
            pass
        elif dev.backend == "cpu":
            with working(dev, result, a1, a2):
                v1 = cpu_engine.view(a1).astype(common, copy=False)
                v2 = cpu_engine.view(a2).astype(common, copy=False)
                cpu_engine.view(result)[...] = np.isin(v1, v2, invert=bool(invert))
        else:
            from .device import sort as device_sort  # same layer

            with working(dev, result, a1, a2):
                c2 = _prepared(a2, common, temps, contiguous=True)
                flat = c2.reshape(-1)  # a new handle, or c2 itself when already 1-d
                if flat is not c2:
                    temps.append(flat)
                c2 = flat
                s2 = new_array((a2.size,), common, dev, "device")
                temps.append(s2)
                if a2.size:
                    device_sort.sort(c2, 0, False, s2, False)
                c1 = _prepared(a1, common, temps, contiguous=True)
                device_sort.search(3 if invert else 2, s2, None, c1, result)
    return result
