"""The standard's main-namespace linear algebra: ``matmul``, ``tensordot``, ``vecdot``,
``matrix_transpose`` (docs/linalg.md), on every device.

Each function checks its arguments (types, liveness, devices, dtypes, shapes)
before anything is allocated, allocates its result from the pool or the active
``ga.cached`` scope, and runs one engine: on ``cpu`` NumPy's ``matmul`` /
``vecdot`` on views of the raw memory writing into the result (``out=``); on
device back-ends the tiled kernel of ``device/matmul.py``.  Batches broadcast
as in NumPy; a 1-d operand is promoted to a matrix and the added axis removed
from the result.
"""

from __future__ import annotations

import operator

import numpy as np

from .._array.make import ArrayBase, new_array
from .._array.transfer import copy_raw
from . import cpu_engine
from .elementwise import conj, multiply
from .manipulation import expand_dims, moveaxis
from .ownership import filling, working

__all__ = ["matmul", "tensordot", "vecdot", "matrix_transpose", "check_arrays",
           "numeric_result", "imatmul"]


def check_arrays(name: str, *xs):
    """(device, kind) of live gpuarrays arrays on one device; the standard's errors otherwise."""
    for x in xs:
        if not isinstance(x, ArrayBase):
            raise TypeError(f"{name}() takes gpuarrays arrays, got {type(x).__name__}; copy "
                            f"host data to the device first with ga.asarray(x, device=...)")
        x._live()
    dev = xs[0]._storage.device
    kind = xs[0]._storage.kind
    for x in xs[1:]:
        if x._storage.device != dev:
            raise ValueError(f"{name}(): operands are on different devices, {dev} and "
                             f"{x._storage.device}; move one with x.to_device({str(dev)!r})")
        if x._storage.kind != kind:
            kind = "device"
    return dev, kind


def numeric_result(name: str, dev, *dtypes: np.dtype) -> np.dtype:
    """The promoted dtype of numeric operands (bool refused, as the standard says)."""
    for dt in dtypes:
        if dt.kind not in "iufc":
            raise TypeError(f"{name}() takes numeric data types, got {dt}; convert first "
                            f"(e.g. ga.astype(x, ga.int64))")
    rd = np.result_type(*dtypes)
    for dt in (*dtypes, rd):
        dev.require(dt)
    return rd


def _matmul_shape(name: str, s1: tuple, s2: tuple) -> tuple[tuple, tuple, tuple]:
    """(shape of A as a stack of matrices, of B, of the result before 1-d axes are dropped)."""
    if not s1 or not s2:
        raise ValueError(f"{name}(): operands must have at least one dimension, got shapes "
                         f"{s1} and {s2}; use multiply for scalars")
    a = (1, *s1) if len(s1) == 1 else s1
    b = (*s2, 1) if len(s2) == 1 else s2
    if a[-1] != b[-2]:
        raise ValueError(f"{name}(): the last axis of x1 (shape {s1}, size {a[-1]}) does not "
                         f"match the {'only' if len(s2) == 1 else 'second-to-last'} axis of x2 "
                         f"(shape {s2}, size {b[-2]}); transpose one (x.mT) or fix the shapes")
    try:
        batch = np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        raise ValueError(f"{name}(): the batch dimensions of shapes {s1} and {s2} do not "
                         f"broadcast; make them equal or 1") from None
    return a, b, (*batch, a[-2], b[-1])


def _final_shape(s1: tuple, s2: tuple, full: tuple) -> tuple:
    out = list(full)
    if len(s2) == 1:
        out.pop(-1)
    if len(s1) == 1:
        out.pop(-1 if len(s2) == 1 else -2)
    return tuple(out)


def _matmul_into(x1, x2, result, full: tuple) -> None:
    """``result[...] = x1 @ x2`` (checked); ``full`` is the shape with 1-d axes kept."""
    dev = result._storage.device
    with working(dev, x1, x2, result):
        if dev.backend == "cpu":
            z = cpu_engine.view(result)
            with np.errstate(all="ignore"):
                np.matmul(cpu_engine.view(x1), cpu_engine.view(x2), out=z, casting="unsafe")
            return
        from .device import matmul as device_matmul  # same layer: the device engine

        a = expand_dims(x1, 0) if x1.ndim == 1 else x1
        b = expand_dims(x2, -1) if x2.ndim == 1 else x2
        r = result.reshape(full) if result._shape != full else result
        device_matmul.run(a, b, r)


def matmul(x1, x2, /):
    """The matrix product ``x1 @ x2`` with NumPy's rules for stacks and 1-d operands.

    Errors before anything is allocated: ``TypeError`` (not an array, a bool or
    other non-numeric dtype), ``ValueError`` (0-d operands, mismatched inner
    sizes, batch shapes that do not broadcast, different devices).
    """
    dev, kind = check_arrays("matmul", x1, x2)
    if x1._dtype == np.bool_ or x2._dtype == np.bool_:
        return _matmul_bools(x1, x2)
    rd = numeric_result("matmul", dev, x1._dtype, x2._dtype)
    _, _, full = _matmul_shape("matmul", x1._shape, x2._shape)
    result = new_array(_final_shape(x1._shape, x2._shape, full), rd, dev, kind)
    with filling(result):
        _matmul_into(x1, x2, result, full)
    return result


def _matmul_bools(x1, x2):
    """NumPy's matmul with bool operands: bool @ bool is "any of the ands" (a count of
    products in int64, then ``!= 0``); a bool beside a number takes the number's dtype."""
    from .dtypes import astype
    from .elementwise import not_equal

    both = x1._dtype == x2._dtype == np.bool_
    wide = np.dtype(np.int64) if both else (x2._dtype if x1._dtype == np.bool_ else x1._dtype)
    a = astype(x1, wide) if x1._dtype != wide else x1
    b = astype(x2, wide) if x2._dtype != wide else x2
    try:
        product = matmul(a, b)
    finally:
        for t, x in ((a, x1), (b, x2)):
            if t is not x:
                t.free()
    if not both:
        return product
    with product:
        return not_equal(product, 0)


def imatmul(x1, x2):
    """``x1 @= x2``: the product written into ``x1`` (its shape and, under ``same_kind``
    casting, its dtype), as NumPy; through a pooled temporary, since ``x1`` is an operand."""
    dev, _ = check_arrays("matmul", x1, x2)
    rd = numeric_result("matmul", dev, x1._dtype, x2._dtype)
    if not x1._writeable:
        raise ValueError(f"cannot apply an in-place matmul to a read-only array (shape "
                         f"{x1._shape}); use a copy")
    _, _, full = _matmul_shape("matmul", x1._shape, x2._shape)
    shape = _final_shape(x1._shape, x2._shape, full)
    if shape != x1._shape:
        raise ValueError(f"matmul: x1 @= x2 would change x1's shape from {x1._shape} to "
                         f"{shape}; use x1 = x1 @ x2")
    if rd != x1._dtype and not np.can_cast(rd, x1._dtype, "same_kind"):
        raise TypeError(f"matmul: cannot cast the result from {rd} to x1's {x1._dtype} with "
                        f"casting rule 'same_kind'; use x1 = x1 @ x2")
    tmp = matmul(x1, x2)
    try:
        copy_raw(x1, tmp)
    finally:
        tmp.free()
    return x1


def matrix_transpose(x, /):
    """A view of ``x`` with its last two axes swapped (``x.mT``); ``ValueError`` below 2-d."""
    check_arrays("matrix_transpose", x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose() needs at least 2 dimensions, got shape "
                         f"{x._shape}; use expand_dims first")
    return x.mT


def _tensordot_axes(x1, x2, axes) -> tuple[list[int], list[int]]:
    n1, n2 = x1.ndim, x2.ndim
    if isinstance(axes, int | np.integer) and not isinstance(axes, bool):
        n = int(axes)
        if n < 0:
            raise ValueError(f"tensordot(): axes must be >= 0, got {n}")
        if n > n1 or n > n2:
            raise ValueError(f"tensordot(): axes={n} exceeds the dimensions of the operands "
                             f"(shapes {x1._shape} and {x2._shape})")
        return list(range(n1 - n, n1)), list(range(n))
    try:
        a1, a2 = axes
        a1 = [operator.index(a) for a in (a1 if isinstance(a1, list | tuple) else (a1,))]
        a2 = [operator.index(a) for a in (a2 if isinstance(a2, list | tuple) else (a2,))]
    except (TypeError, ValueError):
        raise TypeError(f"tensordot(): axes must be an int or a pair of sequences of ints, "
                        f"got {axes!r}") from None
    if len(a1) != len(a2):
        raise ValueError(f"tensordot(): axes {axes!r} name {len(a1)} axes of x1 but "
                         f"{len(a2)} of x2; name as many of each")
    out = []
    for ax, n, which in ((a1, n1, "x1"), (a2, n2, "x2")):
        norm = []
        for k in ax:
            if not -n <= k < n:
                raise np.exceptions.AxisError(
                    f"tensordot(): axis {k} is out of bounds for {which} of dimension {n}")
            norm.append(k % n)
        if len(set(norm)) != len(norm):
            raise ValueError(f"tensordot(): axes {axes!r} repeat an axis of {which}")
        out.append(norm)
    return out[0], out[1]


def tensordot(x1, x2, /, *, axes=2):
    """Sum of products over ``axes`` (an int: the last ``axes`` of ``x1`` with the first
    of ``x2``; or two sequences of axes).  The result's axes are ``x1``'s free axes then
    ``x2``'s.  Computed as one matmul of the operands permuted (views) and reshaped (a
    pooled device copy when a reshape cannot be a view)."""
    dev, kind = check_arrays("tensordot", x1, x2)
    rd = numeric_result("tensordot", dev, x1._dtype, x2._dtype)
    c1, c2 = _tensordot_axes(x1, x2, axes)
    for a, b in zip(c1, c2, strict=True):
        if x1._shape[a] != x2._shape[b]:
            raise ValueError(f"tensordot(): axis {a} of x1 (size {x1._shape[a]}) and axis {b} "
                             f"of x2 (size {x2._shape[b]}) differ; contracted axes must match")
    f1 = [k for k in range(x1.ndim) if k not in c1]
    f2 = [k for k in range(x2.ndim) if k not in c2]
    s1 = [x1._shape[k] for k in f1]
    s2 = [x2._shape[k] for k in f2]
    M = int(np.prod(s1, dtype=np.int64))
    N = int(np.prod(s2, dtype=np.int64))
    K = int(np.prod([x1._shape[k] for k in c1], dtype=np.int64))
    result = new_array((*s1, *s2), rd, dev, kind)
    with filling(result, []) as temps:
        a = x1.transpose(f1 + c1) if x1.ndim else x1
        b = x2.transpose(c2 + f2) if x2.ndim else x2
        a2 = a.reshape((M, K))
        b2 = b.reshape((K, N))
        temps += [t for t, src in ((a2, x1), (b2, x2)) if t._storage is not src._storage]
        _matmul_into(a2, b2, result.reshape((M, N)), (M, N))
    return result


def vecdot(x1, x2, /, *, axis=-1):
    """``sum(conj(x1) * x2, axis=axis)`` with the operands broadcast against each other
    (the axis itself must have one size in both)."""
    dev, kind = check_arrays("vecdot", x1, x2)
    rd = numeric_result("vecdot", dev, x1._dtype, x2._dtype)
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise TypeError(f"vecdot(): axis must be an int, got {axis!r}")
    n = min(x1.ndim, x2.ndim)
    if n == 0 or not -n <= axis < 0 and not (0 <= axis < n and x1.ndim == x2.ndim):
        raise ValueError(f"vecdot(): axis {axis} is out of range for shapes {x1._shape} and "
                         f"{x2._shape}; use a negative axis in [-{n}, -1]" if n else
                         "vecdot(): operands must have at least one dimension")
    ax = int(axis) if axis < 0 else int(axis) - x1.ndim
    if x1._shape[ax] != x2._shape[ax]:
        raise ValueError(f"vecdot(): axis {axis} has size {x1._shape[ax]} in x1 (shape "
                         f"{x1._shape}) and {x2._shape[ax]} in x2 (shape {x2._shape}); they "
                         f"must be equal")
    r1 = tuple(s for k, s in enumerate(x1._shape) if k != x1.ndim + ax)
    r2 = tuple(s for k, s in enumerate(x2._shape) if k != x2.ndim + ax)
    try:
        shape = np.broadcast_shapes(r1, r2)
    except ValueError:
        raise ValueError(f"vecdot(): shapes {x1._shape} and {x2._shape} do not broadcast "
                         f"(apart from axis {axis})") from None
    if dev.backend == "cpu":
        result = new_array(shape, rd, dev, kind)
        with filling(result), working(dev, x1, x2, result), np.errstate(all="ignore"):
            np.vecdot(cpu_engine.view(x1), cpu_engine.view(x2), axis=ax,
                      out=cpu_engine.view(result), casting="unsafe")
        return result
    # device: an elementwise product (of the conjugate for complex x1) and a sum over the
    # axis, with the existing kernels; the temporaries go back to the pool
    temps = []
    try:
        a = x1
        if a._dtype.kind == "c":
            a = conj(a)
            temps.append(a)
        prod = multiply(a, x2)
        temps.append(prod)
        from .reductions import reduce as _reduce  # same layer

        return _reduce("sum", moveaxis(prod, ax, -1), axis=-1, dtype=rd)
    finally:
        for t in temps:
            t.free()
