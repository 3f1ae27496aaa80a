"""Indexing: ``take``, ``take_along_axis``, ``nonzero`` and the array's advanced indexing.

``a[key]`` and ``a[key] = value`` with integer arrays (gpuarrays arrays, NumPy
arrays, lists) and boolean masks, mixed with slices, integers, ``None`` and
``Ellipsis``, follow NumPy (docs/indexing.md).  The key is parsed on the host
into a *plan*: a view ``V`` of the array (the basic part of the key), the
index arrays (masks become the coordinates of their true elements,
``compaction.nonzero_rows``), their broadcast shape ``B`` and where ``B``'s
axes go in the result (NumPy's placement rule: where the first advanced index
is when all of them are next to each other, else first).  Everything that can
be refused is refused while parsing, before anything is allocated: ``IndexError``
for a bad index (a float array, a mask of the wrong shape, too many indices,
index arrays that do not broadcast, an out-of-range integer or host index array),
``ValueError`` for a value that does not broadcast or an array on another device.

On a device back-end the plan runs as one generated gather or scatter kernel
(``device/indexing.py``) reading the index arrays on the device; host index
arrays are uploaded first (checked on the host).  Indices in gpuarrays arrays
are checked on the device into a small flag buffer that is read **once per
call**: a gather checks while it moves (and frees its result before raising),
an assignment runs a check kernel first, reads the flag, and only then writes,
so a target is never changed by a call that raises.  On ``cpu`` NumPy indexes
views of the raw memory (a gather's result is NumPy's, copied into ours: NumPy's
advanced indexing has no ``out=``).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

import numpy as np

from .._array.hooks import HOOKS
from .._array.layout import broadcast_strides, from_engine
from .._array.make import ArrayBase, new_array
from .._array.transfer import copy_raw, upload
from .._common.raw import c_strides
from ..backends._kernels import collapse, word
from . import compaction, cpu_engine
from .device.launcher import aligned
from .dispatch import apply
from .manipulation import normalize_axis
from .ownership import filling, working
from .promotion import SCALAR_TYPES
from .table import OPS

__all__ = ["take", "take_along_axis", "nonzero", "getitem", "setitem", "install"]

_I8 = np.dtype(np.int64)
_VALID = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer "
          "or boolean arrays are valid indices")


# Parsing a key -----------------------------------------------------------------------------
@dataclass
class _Index:
    """One index array of a plan: a gpuarrays array on the device or a NumPy array (checked
    on the host, uploaded when the plan runs), the bound and byte stride of the axis of
    ``V`` it indexes, and its strides broadcast to ``B`` (element strides for host arrays,
    byte strides for device arrays)."""

    array: object
    axis: int  # the array's axis it indexes (for messages)
    bound: int
    stride: int
    check: bool  # checked on the device


@dataclass
class _Plan:
    """A gather/scatter over ``shape`` (the result of ``a[key]``): ``offset`` and ``side``
    (a byte stride per result axis, 0 along ``B``'s axes) address ``V`` in the array's
    storage; ``b_at`` is where ``B``'s axes start in ``shape``."""

    shape: tuple
    offset: int
    side: list
    indices: list
    bshape: tuple
    b_at: int
    temps: list = field(default_factory=list)

    def free(self) -> None:
        for t in self.temps:
            t.free()
        self.temps.clear()


def _same_device(x, a, what: str) -> None:
    if a._storage.device != x._storage.device:
        raise ValueError(f"{what} is on {a._storage.device} but the array is on "
                         f"{x._storage.device}; move it with to_device")


def _classify(x, k):
    """(kind, value): ``"none"``, ``"ellipsis"``, ``"slice"``, ``"int"``, ``"arr"`` (an
    integer array), ``"mask"`` (a bool array, 0-d included)."""
    if k is None:
        return "none", k
    if k is Ellipsis:
        return "ellipsis", k
    if type(k) is slice:
        return "slice", k
    if isinstance(k, (bool, np.bool_)):
        return "mask", np.asarray(k, dtype=bool)
    if isinstance(k, (int, np.integer)):
        return "int", operator.index(k)
    if isinstance(k, ArrayBase):
        k._live()
        _same_device(x, k, "an index array")
        kind = k._dtype.kind
    else:
        if isinstance(k, (list, tuple, np.ndarray)):
            try:
                a = np.asarray(k)
            except (TypeError, ValueError) as e:
                raise IndexError(f"{_VALID}; got {type(k).__name__} ({e})") from None
            if a.size == 0 and not isinstance(k, np.ndarray):
                a = a.astype(np.intp)  # NumPy: an empty list indexes as integers
        else:
            raise IndexError(f"{_VALID}; got {type(k).__name__} {k!r:.60}")
        kind = a.dtype.kind
        if kind in "biu" and not a.dtype.isnative:
            a = a.astype(a.dtype.newbyteorder("="))
        k = a
    if kind == "b":
        return "mask", k
    if kind in "iu":
        return "arr", k
    raise IndexError(f"arrays used as indices must be of integer (or boolean) type, got "
                     f"{k.dtype}; convert with astype(ga.int64) or compare to a bool mask")


def _host_check(a: np.ndarray, axis: int, n: int) -> None:
    if a.size == 0:
        return
    bad = (a >= n) if a.dtype.kind == "u" else (a < -n) | (a >= n)
    if bad.any():
        v = a.reshape(-1)[int(np.flatnonzero(bad.reshape(-1))[0])]
        raise IndexError(f"index {v} is out of bounds for axis {axis} with size {n}")


def plan(x, key) -> _Plan:
    """The plan of ``x[key]`` for a key with at least one array (see the module docstring).

    May read a device mask's count (the one read of a data-dependent shape); the
    coordinates it makes are temporaries of the plan (``plan.free()``).
    """
    items = key if type(key) is tuple else (key,)
    parsed = [_classify(x, k) for k in items]
    shape = x._shape
    ndim = len(shape)
    consumed = 0
    n_ell = 0
    for kind, v in parsed:
        if kind == "ellipsis":
            n_ell += 1
        elif kind in ("slice", "int", "arr"):
            consumed += 1
        elif kind == "mask":
            consumed += v.ndim
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but "
                         f"{consumed} were indexed")
    # expand: one slot per axis of V or per integer; masks checked against their axes
    slots: list[tuple] = []
    dim = 0
    for kind, v in parsed:
        if kind == "ellipsis":
            for _ in range(ndim - consumed):
                slots.append(("slice", slice(None), dim))
                dim += 1
        elif kind == "none":
            slots.append(("none", None, dim))
        elif kind == "slice":
            slots.append(("slice", v, dim))
            dim += 1
        elif kind == "int":
            n = shape[dim]
            if not -n <= v < n:
                raise IndexError(f"index {v} is out of bounds for axis {dim} with size {n}")
            slots.append(("int", v, dim))
            dim += 1
        elif kind == "arr":
            if isinstance(v, np.ndarray):
                _host_check(v, dim, shape[dim])
            slots.append(("arr", v, dim))
            dim += 1
        else:  # mask
            for k in range(v.ndim):
                if v.shape[k] != shape[dim + k]:
                    raise IndexError(
                        f"boolean index did not match indexed array along axis {dim + k}; "
                        f"size of axis is {shape[dim + k]} but size of corresponding boolean "
                        f"axis is {v.shape[k]}")
            slots.append(("mask", v, dim))
            dim += v.ndim
    while dim < ndim:
        slots.append(("slice", slice(None), dim))
        dim += 1
    out = _Plan((), 0, [], [], (), 0)
    with filling(out):
        _build(x, slots, out)
    return out


def _build(x, slots: list, out: _Plan) -> None:
    # masks become index arrays: the coordinates of their true elements
    expanded: list[tuple] = []
    for kind, v, dim in slots:
        if kind != "mask":
            expanded.append((kind, v, dim))
        elif v.ndim == 0:  # a 0-d bool: a new axis of length 1, taken once or not at all
            keep = bool(v.item()) if isinstance(v, ArrayBase) else bool(v)
            expanded.append(("new", np.zeros(1 if keep else 0, np.intp), dim))
        elif isinstance(v, np.ndarray):
            for d, rows in enumerate(np.nonzero(v)):
                expanded.append(("in_range", rows, dim + d))
        else:
            rows = compaction.nonzero_rows(v)
            out.temps.append(rows)
            for d in range(v.ndim):
                row = rows[d]
                out.temps.append(row)
                expanded.append(("in_range", row, dim + d))
    has_array = any(k in ("arr", "new", "in_range") for k, _, _ in expanded)
    adv = [i for i, (k, _, _) in enumerate(expanded)
           if k in ("arr", "new", "in_range") or (k == "int" and has_array)]
    adjacent = adv == list(range(adv[0], adv[-1] + 1))
    # the view V: integers applied, arrays replaced by full slices (a new axis for "new")
    basic = []
    v_axis_of: dict[int, int] = {}
    n_v = 0
    first_at = None
    for i, (kind, v, _) in enumerate(expanded):
        if i == adv[0]:
            first_at = n_v
        if kind == "int":
            basic.append(v)
            continue
        if kind in ("arr", "in_range"):
            basic.append(slice(None))
            v_axis_of[i] = n_v
        elif kind == "new":
            basic.append(None)
            v_axis_of[i] = n_v
        else:
            basic.append(v)
        n_v += 1
    eng = x._engine()[tuple(basic) + (Ellipsis,)]
    v_shape, v_strides, v_offset, _, _ = from_engine(eng)
    arrays = [(i, v, dim) for i, (kind, v, dim) in enumerate(expanded) if i in v_axis_of]
    shapes = [a.shape for _, a, _ in arrays]
    try:
        bshape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together "
                         "with shapes " + " ".join(str(s) for s in shapes)) from None
    rest = [ax for ax in range(len(v_shape)) if ax not in v_axis_of.values()]
    b_at = sum(1 for ax in rest if ax < first_at) if adjacent else 0
    before, after = rest[:b_at], rest[b_at:]
    out.shape = (tuple(v_shape[ax] for ax in before) + tuple(bshape)
                 + tuple(v_shape[ax] for ax in after))
    out.side = ([v_strides[ax] for ax in before] + [0] * len(bshape)
                + [v_strides[ax] for ax in after])
    out.offset = v_offset
    out.bshape = tuple(bshape)
    out.b_at = b_at
    for i, a, dim in arrays:
        ax = v_axis_of[i]
        check = expanded[i][0] == "arr" and isinstance(a, ArrayBase)
        out.indices.append(_Index(a, dim, v_shape[ax], v_strides[ax], check))


# Running a plan on a device -----------------------------------------------------------------
def _index_arrays(plan: _Plan) -> list:
    """The plan's index arrays that are gpuarrays arrays (held while its kernels run)."""
    return [ix.array for ix in plan.indices if isinstance(ix.array, ArrayBase)]


def _key_arrays(key) -> list:
    """The gpuarrays arrays in an indexing key (held while NumPy indexes with them)."""
    items = key if type(key) is tuple else (key,)
    return [k for k in items if isinstance(k, ArrayBase)]


def _device_indices(plan: _Plan, dev, target=None) -> list[tuple]:
    """(key, address, bound, stride, strides over B) of every index array, on the device
    (host arrays uploaded, unaligned views and views of ``target``'s storage -- which a
    scatter writes -- copied: temporaries of the plan)."""
    out = []
    for ix in plan.indices:
        a = ix.array
        if isinstance(a, ArrayBase) and target is not None and a._storage is target._storage:
            a = a.copy()
            plan.temps.append(a)
        if isinstance(a, np.ndarray):
            h = a if a.flags.c_contiguous else a.copy()  # (ascontiguousarray makes 0-d 1-d)
            d = new_array(h.shape, h.dtype, dev, "device")
            plan.temps.append(d)
            if h.size:
                upload(d, h)
            a = d
        raw = a._raw()
        if not aligned(raw.ptr, raw.strides, raw.dtype):
            c = new_array(a._shape, a._dtype, dev, "device")
            plan.temps.append(c)
            copy_raw(c, a)
            raw = c._raw()
        bs = broadcast_strides(raw.shape, raw.strides, plan.bshape)
        key = f"{raw.dtype.kind}{raw.dtype.itemsize}"
        if key == "u8":  # NumPy casts uint64 indices to intp: 2**64 - 1 is -1
            key = "i8"
        out.append((key, raw.ptr, ix.bound, ix.stride, bs))
    return out


def _flag(dev, n: int):
    f = new_array((2 * n,), _I8, dev, "device")
    f.fill(0)
    return f


def _raise_flagged(plan: _Plan, flag) -> None:
    """Read the flag buffer (the one device -> host read of the call); raise IndexError."""
    got = flag.get()
    for j, ix in enumerate(plan.indices):
        if got[2 * j]:
            v = int(got[2 * j + 1])
            if ix.array._dtype.kind == "u" and ix.array._dtype.itemsize < 8:
                v = int(np.int64(v).view(np.uint64))
            raise IndexError(f"index {v} is out of bounds for axis {ix.axis} with size "
                             f"{ix.bound}")


def _dims(shape, lists) -> list[tuple]:
    """Per collapsed axis: (extent, stride of each list)."""
    shp, strides = collapse(tuple(shape), *(tuple(s) for s in lists))
    return [(e, *(s[k] for s in strides)) for k, e in enumerate(shp)]


def _over_result(plan: _Plan, idx: list[tuple]) -> list[list[int]]:
    """Each index array's byte strides over the result's axes (0 off ``B``)."""
    nb = len(plan.bshape)
    pad_l, pad_r = plan.b_at, len(plan.shape) - plan.b_at - nb
    return [[0] * pad_l + list(bs) + [0] * pad_r for *_, bs in idx]


def _check(dev, plan: _Plan, idx: list[tuple], flag_ptr: int, itemsize: int) -> None:
    from .device import indexing as kernels

    dims = _dims(plan.bshape, [[0] * len(plan.bshape)] * 2 + [list(bs) for *_, bs in idx])
    kernels.launch_index(dev, "check", 0, 0, flag_ptr, dims,
                         [(k, p, b, s) for k, p, b, s, _ in idx], 1, 1, True)


def _gather_device(x, plan: _Plan):
    from .device import indexing as kernels

    dev = x._storage.device
    out = new_array(plan.shape, x._dtype, dev, x._storage.kind)
    flag = None
    try:
        with working(dev, x, out, *_index_arrays(plan)):
            idx = _device_indices(plan, dev)
            checked = any(ix.check for ix in plan.indices)
            if checked:
                flag = _flag(dev, len(idx))
            fptr = flag._raw().ptr if flag is not None else out._raw().ptr
            base = x._live().ptr + plan.offset
            optr = out._raw().ptr
            size = x._dtype.itemsize
            if out.size:
                ostr = list(c_strides(plan.shape, size))
                dims = _dims(plan.shape, [plan.side, ostr, *_over_result(plan, idx)])
                w = word(size, base, optr, *plan.side, *(s for *_, s, _ in idx))
                kernels.launch_index(dev, "gather", base, optr, fptr, dims,
                                     [(k, p, b, s) for k, p, b, s, _ in idx], size, w, checked)
            elif checked:
                _check(dev, plan, idx, fptr, size)
        if flag is not None:
            _raise_flagged(plan, flag)
    except BaseException:
        out.free()
        raise
    finally:
        if flag is not None:
            flag.free()
    return out


def _value_shape(value_shape: tuple, shape: tuple) -> tuple:
    """``value_shape`` with the leading 1s beyond ``shape``'s rank dropped (NumPy's rule)."""
    extra = len(value_shape) - len(shape)
    if extra > 0 and all(n == 1 for n in value_shape[:extra]):
        return value_shape[extra:]
    return value_shape


def _prepare_value(x, value, shape: tuple):
    """The value as a gpuarrays array or a NumPy array of ``x``'s dtype, checked to
    broadcast to ``shape`` (nothing allocated)."""
    if isinstance(value, ArrayBase):
        value._live()
        _same_device(x, value, "the value")
        v = value
    else:
        try:
            v = np.asarray(value, dtype=x._dtype)
        except (TypeError, ValueError) as e:
            raise type(e)(f"cannot assign {type(value).__name__} {value!r:.80} to a "
                          f"{x._dtype} array: {e}") from None
    vs = _value_shape(v.shape, shape)
    try:
        broadcast_strides(vs, (0,) * len(vs), shape)
    except ValueError:
        raise ValueError(f"shape mismatch: value array of shape {v.shape} could not be "
                         f"broadcast to indexing result of shape {shape}") from None
    return v


def _scatter_device(x, plan: _Plan, value) -> None:
    from .device import indexing as kernels

    dev = x._storage.device
    temps = []
    flag = None
    try:
        with working(dev, x, *_index_arrays(plan)):
            idx = _device_indices(plan, dev, x)
            if any(ix.check for ix in plan.indices):  # check first, then write
                flag = _flag(dev, len(idx))
                _check(dev, plan, idx, flag._raw().ptr, 1)
        if flag is not None:
            _raise_flagged(plan, flag)
        if math.prod(plan.shape) == 0:
            return
        if isinstance(value, ArrayBase):
            if value._dtype != x._dtype or value._storage is x._storage:
                value = value.astype(x._dtype)  # converted, or apart from the target
                temps.append(value)
        else:
            h = value if value.flags.c_contiguous else value.copy()
            d = new_array(h.shape, h.dtype, dev, "device")
            temps.append(d)
            upload(d, h)
            value = d
        with working(dev, x, value, *_index_arrays(plan)):
            raw = value._raw()
            vs = _value_shape(raw.shape, plan.shape)
            vstr = raw.strides[len(raw.shape) - len(vs):]
            vstr = broadcast_strides(vs, vstr, plan.shape)
            base = x._live().ptr + plan.offset
            size = x._dtype.itemsize
            dims = _dims(plan.shape, [vstr, plan.side, *_over_result(plan, idx)])
            w = word(size, base, raw.ptr, *vstr, *plan.side, *(s for *_, s, _ in idx))
            kernels.launch_index(dev, "scatter", raw.ptr, base, base, dims,
                                 [(k, p, b, s) for k, p, b, s, _ in idx], size, w, False)
    finally:
        if flag is not None:
            flag.free()
        for t in temps:
            t.free()


# The cpu engine ------------------------------------------------------------------------------
def _numpy_key(x, key):
    """The key with gpuarrays arrays as NumPy views of their memory (same device checked)."""
    items = key if type(key) is tuple else (key,)
    out = []
    for k in items:
        if isinstance(k, ArrayBase):
            k._live()
            _same_device(x, k, "an index array")
            k = cpu_engine.view(k)
        out.append(k)
    return tuple(out) if type(key) is tuple else out[0]


# The hooks -----------------------------------------------------------------------------------
def getitem(x, key):
    """``x[key]`` for a key with an integer array or a boolean mask: a new array."""
    x._live()
    dev = x._storage.device
    if (isinstance(key, ArrayBase) and key._dtype.kind == "b" and key._shape == x._shape
            and x.ndim):  # x[mask]: scan, one count read, compaction (cpu: np.compress)
        key._live()
        _same_device(x, key, "the mask")
        return compaction.select_nd(x, key)
    if dev.backend == "cpu":
        with working(dev, x, *_key_arrays(key)):
            r = np.asarray(cpu_engine.view(x)[_numpy_key(x, key)])
            out = new_array(r.shape, x._dtype, dev, x._storage.kind)
            np.copyto(cpu_engine.view(out), r)
        return out
    p = plan(x, key)
    try:
        return _gather_device(x, p)
    finally:
        p.free()


def setitem(x, key, value) -> None:
    """``x[key] = value`` for a key with an integer array or a boolean mask (in place)."""
    x._live()
    dev = x._storage.device
    if dev.backend == "cpu":
        held = value if isinstance(value, ArrayBase) else None
        if held is not None:
            value._live()
            _same_device(x, value, "the value")
        with working(dev, x, held, *_key_arrays(key)):
            cpu_engine.view(x)[_numpy_key(x, key)] = (value if held is None
                                                      else cpu_engine.view(value))
        return
    if (isinstance(key, ArrayBase) and key._dtype.kind == "b" and key._shape == x._shape
            and x.ndim and (type(value) in SCALAR_TYPES or isinstance(value, np.generic))):
        # x[mask] = scalar: an elementwise where into x -- no count read, no compaction
        key._live()
        _same_device(x, key, "the mask")
        s = np.asarray(value, dtype=x._dtype)  # NumPy's conversion, before anything runs
        apply(OPS["where"], (key, s[()], x), x)
        return
    p = plan(x, key)
    try:
        v = _prepare_value(x, value, p.shape)
        _scatter_device(x, p, v)
    finally:
        p.free()


# The namespace's functions -------------------------------------------------------------------
def _index_array(x, indices, fn: str):
    if isinstance(indices, ArrayBase):
        indices._live()
        _same_device(x, indices, f"{fn}(): indices")
        kind = indices._dtype.kind
    else:
        try:
            indices = np.asarray(indices)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{fn}(): indices must be an integer array, got "
                            f"{type(indices).__name__} ({e})") from None
        if indices.size == 0 and indices.dtype.kind == "f":
            indices = indices.astype(np.intp)
        kind = indices.dtype.kind
    if kind not in "iu":
        raise IndexError(f"{fn}(): indices must have an integer dtype, got {indices.dtype}; "
                         f"convert with astype(ga.int64)")
    return indices


def _check_x(fn: str, x) -> None:
    if not isinstance(x, ArrayBase):
        raise TypeError(f"{fn}() takes a gpuarrays array, got {type(x).__name__}; convert it "
                        f"with ga.asarray")
    x._live()


def take(x, indices, /, *, axis=None):
    """The elements of ``x`` at ``indices`` along ``axis`` (``x[..., indices, ...]``).

    ``axis=None`` takes from the flattened ``x`` (NumPy's rule; the standard requires
    an axis for more than one dimension).  Negative indices count from the end;
    ``IndexError`` for an index out of range (checked on the device, read once).
    """
    _check_x("take", x)
    indices = _index_array(x, indices, "take")
    if axis is None:
        if x.ndim != 1:
            flat = x.reshape(-1)
            try:
                return take(flat, indices, axis=0)
            finally:
                if flat is not x:
                    flat.free()
        axis = 0
    if x.ndim == 0:
        raise ValueError("take() needs an array with at least one dimension, got a 0-d array")
    ax = normalize_axis("take", axis, x.ndim)
    return getitem(x, (slice(None),) * ax + (indices,))


def take_along_axis(x, indices, /, *, axis=-1):
    """``x``'s elements at ``indices`` along ``axis``, the other axes broadcast (NumPy's
    ``take_along_axis``): the result has the broadcast shape with ``indices``'s extent
    along ``axis``."""
    _check_x("take_along_axis", x)
    indices = _index_array(x, indices, "take_along_axis")
    if x.ndim == 0:
        raise ValueError("take_along_axis() needs an array with at least one dimension")
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_axis(): indices and x must have the same number of "
                         f"dimensions, got {indices.ndim} and {x.ndim}")
    ax = normalize_axis("take_along_axis", axis, x.ndim)
    xs, js = list(x._shape), list(indices.shape)
    xs[ax] = js[ax] = 1
    try:
        shape = list(np.broadcast_shapes(tuple(xs), tuple(js)))
    except ValueError:
        raise ValueError(f"take_along_axis(): x of shape {x._shape} and indices of shape "
                         f"{indices.shape} do not broadcast along the other axes") from None
    shape[ax] = indices.shape[ax]
    shape = tuple(shape)
    if isinstance(indices, np.ndarray):
        _host_check(indices, ax, x._shape[ax])
    dev = x._storage.device
    if dev.backend == "cpu":
        with working(dev, x, *_key_arrays(indices)):
            j = cpu_engine.view(indices) if isinstance(indices, ArrayBase) else indices
            v = cpu_engine.view(x)
            if j.size and x._shape[ax] == 0:
                raise IndexError(f"index {j.reshape(-1)[0]} is out of bounds for axis {ax} "
                                 f"with size 0")
            r = np.take_along_axis(np.broadcast_to(v, tuple(
                x._shape[k] if k == ax else shape[k] for k in range(x.ndim))), j, ax)
            out = new_array(shape, x._dtype, dev, x._storage.kind)
            np.copyto(cpu_engine.view(out), r)
        return out
    # the plan: every result axis moves along x (0 where x broadcasts) and the indices
    side = [0 if k == ax or x._shape[k] == 1 else x._strides[k] for k in range(x.ndim)]
    p = _Plan(shape, x._offset, side, [_Index(indices, ax, x._shape[ax], x._strides[ax],
                                              isinstance(indices, ArrayBase))], shape, 0)
    try:
        return _gather_device(x, p)
    finally:
        p.free()


def nonzero(x, /):
    """The indices of the non-zero elements of ``x``: one int64 array per axis (C order).

    ``ValueError`` for a 0-d array (as NumPy 2 and the standard).  On a device the count
    is read once (docs/indexing.md); the arrays are rows of one new ``(ndim, count)``
    allocation.
    """
    _check_x("nonzero", x)
    if x.ndim == 0:
        raise ValueError("nonzero() of a 0-d array is not allowed; use x.reshape(1) (or "
                         "ga.atleast_1d) first")
    rows = compaction.nonzero_rows(x)
    try:
        return tuple(rows[d] for d in range(x.ndim))
    finally:
        rows.free()


def install() -> None:
    """Fill the array layer's indexing hooks."""
    HOOKS.getitem = getitem
    HOOKS.setitem = setitem

