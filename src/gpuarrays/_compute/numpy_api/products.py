"""NumPy's einsum, inner, outer, kron, vdot, trace, cross, convolve and correlate.

Compositions of the namespace's device functions: products are ``matmul``/``tensordot``
of permuted views (pooled copies where a reshape needs one), elementwise ``multiply`` /
``subtract``, reductions (``sum``) and strided views (diagonals, sliding windows).
Nothing is read back to the host.  Bool operands, which the standard's ``matmul``
refuses, are computed in int64 and compared with 0 (NumPy's logical sum of products).
"""

from __future__ import annotations

import functools
import inspect
import operator
import warnings

import numpy as np

from ..._array.creation import asarray
from ..._array.make import ArrayBase
from ..creation import zeros
from ..dtypes import astype
from ..elementwise import conj, multiply, not_equal, subtract
from ..linalg import check_arrays, matmul, tensordot
from ..manipulation import broadcast_to, concat, moveaxis, normalize_axis, stack
from ..statistical import sum as _sum

__all__ = ["einsum", "inner", "outer", "kron", "vdot", "trace", "cross", "convolve",
           "correlate"]


# helpers ------------------------------------------------------------------------------------
class _Temps:
    """Arrays made along the way, freed at the end unless they are the result or an input."""

    def __init__(self, *keep) -> None:
        self.keep = {id(k) for k in keep}
        self.items: list = []

    def add(self, x):
        if id(x) not in self.keep and all(x is not t for t in self.items):
            self.items.append(x)
        return x

    def free(self, result=None) -> None:
        for t in self.items:
            if t is not result:
                t.free()
        self.items.clear()


def _arrays(name: str, *xs):
    for x in xs:
        if not isinstance(x, ArrayBase):
            raise TypeError(f"{name}() takes gpuarrays arrays, got {type(x).__name__}; copy "
                            f"host data to the device first with ga.asarray(x, device=...)")
    return check_arrays(name, *xs)


_HOST = (list, tuple, int, float, complex, bool, np.generic)
_EMPTY = inspect.Parameter.empty


def _lift(x, dev, made: list):
    """A Python scalar or list (a NumPy program's literal, ``np.convolve(a, [1, 2, 1])``)
    as an array on ``dev`` with NumPy's dtype for it (float64 for a Python float, as
    these NumPy functions convert: not a weak scalar); arrays pass unchanged."""
    if not isinstance(x, _HOST):
        return x
    h = np.asarray(x)
    if h.dtype.kind not in "biufc":
        raise TypeError(f"expected numbers or gpuarrays arrays, got {x!r}")
    if not dev.supports(h.dtype) and h.dtype.kind in "fc":  # no float64 on this device
        h = h.astype(np.complex64 if h.dtype.kind == "c" else np.float32)
    g = asarray(h, device=dev)
    made.append(g)
    return g


def _lifting(fn):
    """``fn`` with Python scalars and lists among its array arguments made on the device
    of its gpuarrays argument (freed afterwards)."""
    names = [n for n, p in inspect.signature(fn).parameters.items() if p.default is _EMPTY]

    @functools.wraps(fn)
    def run(*args, **kwargs):
        values = [*args, *(kwargs[n] for n in names if n in kwargs)]
        dev = next((x._storage.device for x in values if isinstance(x, ArrayBase)), None)
        if dev is None or not any(isinstance(x, _HOST) for x in values):
            return fn(*args, **kwargs)
        made: list = []
        try:
            kw = {k: _lift(v, dev, made) if k in names else v for k, v in kwargs.items()}
            return fn(*(_lift(x, dev, made) for x in args), **kw)
        finally:
            for g in made:
                g.free()
    return run


def _numeric(name: str, *dts) -> None:
    for dt in dts:
        if dt.kind not in "biufc":
            raise TypeError(f"{name}() takes numeric or bool arrays, got {dt}")


def _work_dtype(rd: np.dtype) -> np.dtype:
    """The dtype products run in: bool as int64 (compared with 0 at the end)."""
    return np.dtype(np.int64) if rd.kind == "b" else rd


def _as(x, dt, temps: _Temps):
    if x._dtype == dt:
        return x
    return temps.add(astype(x, dt))


def _finish(r, rd: np.dtype, temps: _Temps):
    """``r`` (computed in the work dtype) as ``rd``: bool results are ``r != 0``."""
    if rd.kind == "b" and r._dtype.kind != "b":
        temps.add(r)
        return not_equal(r, 0)
    if r._dtype != rd:
        temps.add(r)
        return astype(r, rd)
    return r


def _write_out(name: str, result, out):
    if out is None:
        return result
    if not isinstance(out, ArrayBase):
        raise TypeError(f"{name}(out=...) needs a gpuarrays array, got {type(out).__name__}")
    if out.shape != result.shape:
        result.free()
        raise ValueError(f"{name}(): out has shape {out.shape}, the result {result.shape}; "
                         f"pass an out of the result's shape")
    try:
        out[...] = result
    finally:
        result.free()
    return out


def _owned(r, inputs):
    """``r`` as a new array: a copy when it is (a view of) an input."""
    if any(r is x or r._storage is x._storage for x in inputs):
        return astype(r, r._dtype, copy=True)
    return r


# einsum ---------------------------------------------------------------------------------------
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _sublist(sub) -> str:
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
            continue
        try:
            k = operator.index(s)
        except TypeError:
            raise TypeError(f"einsum(): a subscript list holds ints in [0, 52) or Ellipsis, "
                            f"got {s!r}") from None
        if not 0 <= k < 52:
            raise ValueError(f"einsum(): subscript {k} is out of range; use ints in [0, 52)")
        out.append(_LETTERS[k])
    return "".join(out)


def _parse_operands(operands):
    """(subscripts string, arrays) from NumPy's two call forms."""
    if not operands:
        raise ValueError("einsum(): no operands given; pass a subscripts string and arrays")
    if isinstance(operands[0], str):
        return operands[0].replace(" ", ""), list(operands[1:])
    ops = list(operands)
    arrays, subs = ops[0::2], ops[1::2]
    out = None
    if len(ops) % 2 == 1:  # the interleaved form ends with the output's sublist
        arrays, out = ops[0:-1:2], ops[-1]
    text = ",".join(_sublist(s) for s in subs[:len(arrays)])
    if out is not None:
        text += "->" + _sublist(out)
    return text, arrays


def _expand(term: str, ndim: int, ell: str, which: str) -> list[str]:
    """The labels of one operand's axes, ``...`` replaced by the broadcast labels."""
    if "..." in term:
        head, _, tail = term.partition("...")
        if "." in head or "." in tail:
            raise ValueError(f"einsum(): invalid ellipsis in {which} {term!r}; use '...' once")
        n = ndim - len(head) - len(tail)
        if n < 0:
            raise ValueError(f"einsum(): {which} {term!r} names more axes than the operand's "
                             f"{ndim}")
        labels = list(head) + list(ell[len(ell) - n:]) + list(tail)
    else:
        if "." in term:
            raise ValueError(f"einsum(): invalid '.' in {which} {term!r}; use '...'")
        labels = list(term)
        if len(labels) != ndim:
            raise ValueError(f"einsum(): {which} {term!r} names {len(labels)} axes, the "
                             f"operand has {ndim}; name one label per axis")
    for c in labels:
        if c not in _LETTERS and not ("\u0100" <= c):
            raise ValueError(f"einsum(): invalid subscript {c!r} in {which}; use letters")
    return labels


def _diagonals(x, labels: list[str], temps: _Temps):
    """Repeated labels within one operand: the strided view of their diagonal."""
    while len(set(labels)) != len(labels):
        for i, c in enumerate(labels):
            j = labels.index(c, i + 1) if labels.count(c) > 1 else -1
            if j >= 0:
                break
        if x._shape[i] != x._shape[j]:
            raise ValueError(f"einsum(): label {c!r} is repeated on axes of sizes "
                             f"{x._shape[i]} and {x._shape[j]}; they must be equal")
        shape = [s for k, s in enumerate(x._shape) if k != j]
        strides = list(x._strides)
        strides[i] += strides[j]
        del strides[j]
        x = temps.add(x._derive(tuple(shape), tuple(strides), x._offset, x._dtype, False))
        labels = labels[:j] + labels[j + 1:]
    return x, labels


def _sum_out(x, labels: list[str], drop: set, temps: _Temps):
    axes = tuple(k for k, c in enumerate(labels) if c in drop)
    if not axes:
        return x, labels
    r = temps.add(_sum(x, axis=axes, dtype=x._dtype))
    return r, [c for c in labels if c not in drop]


def _squeeze(x, labels: list[str], drop: set, temps: _Temps):
    keep = [k for k, c in enumerate(labels) if c not in drop]
    if len(keep) == len(labels):
        return x, labels
    shape = tuple(x._shape[k] for k in keep)
    strides = tuple(x._strides[k] for k in keep)
    return (temps.add(x._derive(shape, strides, x._offset, x._dtype, False)),
            [labels[k] for k in keep])


def _contract(a, la, b, lb, needed: set, temps: _Temps):
    """The pairwise product of two labelled operands, summing the labels not ``needed``."""
    # a label of size 1 in one operand and n in the other is broadcast; contracted ones are
    # summed in the larger operand first (the size-1 axis then drops out)
    for c in [c for c in la if c in lb and c not in needed]:
        sa, sb = a._shape[la.index(c)], b._shape[lb.index(c)]
        if sa != sb:
            if sa == 1:
                a, la = _squeeze(a, la, {c}, temps)
                b, lb = _sum_out(b, lb, {c}, temps)
            elif sb == 1:
                b, lb = _squeeze(b, lb, {c}, temps)
                a, la = _sum_out(a, la, {c}, temps)
    # labels of one operand only that nothing needs: summed first
    a, la = _sum_out(a, la, {c for c in la if c not in lb and c not in needed}, temps)
    b, lb = _sum_out(b, lb, {c for c in lb if c not in la and c not in needed}, temps)
    batch = [c for c in la if c in lb and c in needed]
    inner = [c for c in la if c in lb and c not in needed]
    fa = [c for c in la if c not in lb]
    fb = [c for c in lb if c not in la]
    sz = {}
    for x, lx in ((a, la), (b, lb)):
        for c, s in zip(lx, x._shape, strict=True):
            if c in sz and sz[c] != s and 1 not in (s, sz[c]):
                raise ValueError(f"einsum(): label {c!r} has sizes {sz[c]} and {s} in two "
                                 f"operands; they must be equal (or 1 to broadcast)")
            sz[c] = s if c not in sz or sz[c] == 1 else sz[c]
    bs_a = [a._shape[la.index(c)] for c in batch]
    bs_b = [b._shape[lb.index(c)] for c in batch]
    m = int(np.prod([sz[c] for c in fa], dtype=np.int64))
    n = int(np.prod([sz[c] for c in fb], dtype=np.int64))
    k = int(np.prod([sz[c] for c in inner], dtype=np.int64))
    at = a.transpose([la.index(c) for c in batch + fa + inner]) if la else a
    bt = b.transpose([lb.index(c) for c in batch + inner + fb]) if lb else b
    a2 = temps.add(temps.add(at).reshape((*bs_a, m, k)))
    b2 = temps.add(temps.add(bt).reshape((*bs_b, k, n)))
    r = temps.add(matmul(a2, b2))
    bshape = tuple(r._shape[:len(batch)])
    r = temps.add(r.reshape((*bshape, *[sz[c] for c in fa], *[sz[c] for c in fb])))
    return r, batch + fa + fb


def _path(subscripts: str, arrays, optimize):
    """The contraction order: NumPy's einsum_path on shape-only stand-ins (no data)."""
    if optimize is False or optimize is None or len(arrays) < 3:
        return [tuple(range(len(arrays)))] if len(arrays) > 1 else []
    if isinstance(optimize, list | tuple) and optimize and optimize[0] == "einsum_path":
        path = list(optimize[1:])
    else:
        if optimize is True:
            optimize = "greedy"
        if optimize not in ("greedy", "optimal"):
            raise ValueError(f"einsum(): optimize must be False, True, 'greedy', 'optimal' or "
                             f"an einsum_path list, got {optimize!r}")
        fakes = [np.broadcast_to(np.zeros((), x._dtype), x._shape) for x in arrays]
        path = list(np.einsum_path(subscripts, *fakes, optimize=optimize)[0][1:])
    return [tuple(p) for p in path]


def einsum(*operands, out=None, optimize=False, **kwargs):
    """NumPy's Einstein summation: ``einsum('ij,jk->ik', a, b)`` or the interleaved form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``.  Implicit output (labels used once, in
    alphabetical order), ``...`` broadcasting, repeated labels (diagonals, traces).  Each
    pair of operands is contracted by one ``matmul`` of permuted, reshaped views; labels
    only one operand holds are summed first.  ``optimize`` (``True``, ``'greedy'``,
    ``'optimal'`` or an ``einsum_path`` list) picks the pair order as NumPy's
    ``einsum_path`` does; ``False`` contracts left to right.  ``dtype=`` and
    ``casting=`` (default ``'safe'``) as NumPy; ``order=`` is accepted and ignored (the
    result is C-contiguous)."""
    extra = set(kwargs) - {"dtype", "casting", "order"}
    if extra:
        raise TypeError(f"einsum() got unexpected keyword arguments {sorted(extra)}; it takes "
                        f"out, optimize, dtype, casting and order")
    subscripts, arrays = _parse_operands(operands)
    if not arrays:
        raise ValueError("einsum(): no arrays given after the subscripts")
    dev = next((x._storage.device for x in arrays if isinstance(x, ArrayBase)), None)
    lifted: list = []
    if dev is not None:
        arrays = [_lift(x, dev, lifted) for x in arrays]
    try:
        return _einsum(operands, subscripts, arrays, out, optimize, kwargs)
    finally:
        for g in lifted:
            g.free()


def _einsum(operands, subscripts, arrays, out, optimize, kwargs):
    dev, _ = _arrays("einsum", *arrays)
    _numeric("einsum", *(x._dtype for x in arrays))
    casting = kwargs.get("casting", "safe")
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ValueError(f"einsum(): casting must be 'no', 'equiv', 'safe', 'same_kind' or "
                         f"'unsafe', got {casting!r}")
    dtype = kwargs.get("dtype")
    rd = np.result_type(*(x._dtype for x in arrays)) if dtype is None else np.dtype(dtype)
    if dtype is not None:
        for x in arrays:
            if not np.can_cast(x._dtype, rd, casting):
                raise TypeError(f"einsum(): cannot cast an operand from {x._dtype} to {rd} "
                                f"under casting={casting!r}; pass casting='unsafe' or another "
                                f"dtype")
    dev.require(rd)
    if "->" in subscripts:
        ins, _, outs = subscripts.partition("->")
        if "->" in outs or "-" in outs or ">" in outs:
            raise ValueError(f"einsum(): invalid subscripts {subscripts!r}; use one '->'")
    else:
        ins, outs = subscripts, None
        if "-" in ins or ">" in ins:
            raise ValueError(f"einsum(): invalid subscripts {subscripts!r}; write '->'")
    terms = ins.split(",")
    if len(terms) != len(arrays):
        raise ValueError(f"einsum(): subscripts {subscripts!r} name {len(terms)} operands, "
                         f"{len(arrays)} given; give one term per array")
    n_ell = max([x.ndim - len(t.replace("...", "")) for t, x in zip(terms, arrays, strict=True)
                 if "..." in t] or [0])
    used = set("".join(terms))
    ell = "".join(chr(0x100 + i) for i in range(max(n_ell, 0)))  # labels no user can write
    labels = [_expand(t, x.ndim, ell, f"operand {i}'s subscripts")
              for i, (t, x) in enumerate(zip(terms, arrays, strict=True))]
    if outs is None:
        counts: dict = {}
        for ls in labels:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        out_labels = [c for c in ell if c in counts] + sorted(
            c for c, k in counts.items() if k == 1 and c in used and c not in ell)
    else:
        if "..." in outs:
            head, _, tail = outs.partition("...")
            out_labels = list(head) + list(ell) + list(tail)
        else:
            out_labels = list(outs)
        if "." in "".join(c for c in out_labels if c not in ell):
            raise ValueError(f"einsum(): invalid output subscripts {outs!r}")
        for c in out_labels:
            if out_labels.count(c) > 1:
                raise ValueError(f"einsum(): output subscript {c!r} appears more than once")
            if not any(c in ls for ls in labels):
                raise ValueError(f"einsum(): output subscript {c!r} names no input axis; "
                                 f"use labels of the inputs")
    wd = _work_dtype(rd)
    path = _path(subscripts if isinstance(operands[0], str) else "->".join(
        [ins] + ([outs] if outs is not None else [])), arrays, optimize)
    temps = _Temps(*arrays)
    result = None
    try:
        cur = []
        for x, ls in zip(arrays, labels, strict=True):
            x = _as(x, wd, temps)
            x, ls = _diagonals(x, ls, temps)
            cur.append((x, ls))
        for step in path:
            picked = [cur[i] for i in step]
            cur = [c for i, c in enumerate(cur) if i not in step]
            a, la = picked[0]
            for j, (b, lb) in enumerate(picked[1:]):
                rest = picked[j + 2:] + cur
                needed = set(out_labels).union(*[set(lx) for _, lx in rest])
                a, la = _contract(a, la, b, lb, needed, temps)
            if len(picked) == 1:  # a single operand: sum what nothing else needs
                needed = set(out_labels).union(*[set(lx) for _, lx in cur])
                a, la = _sum_out(a, la, {c for c in la if c not in needed}, temps)
            cur.append((a, la))
        (a, la), = cur
        a, la = _sum_out(a, la, {c for c in la if c not in out_labels}, temps)
        if la != out_labels:
            a = temps.add(a.transpose([la.index(c) for c in out_labels]))
        sizes = {}
        for x, ls in zip(arrays, labels, strict=True):
            for c, s in zip(ls, x._shape, strict=True):
                if c in sizes and sizes[c] != s and 1 not in (s, sizes[c]):
                    raise ValueError(f"einsum(): label {c!r} has sizes {sizes[c]} and {s}; "
                                     f"they must be equal (or 1 to broadcast)")
                sizes[c] = s if sizes.get(c, 1) == 1 else sizes[c]
        want = tuple(sizes[c] for c in out_labels)
        if a._shape != want:  # a size-1 label broadcast against another operand's
            a = temps.add(broadcast_to(a, want))
        result = _finish(a, rd, temps)
        result = _owned(result, arrays)
        if not result._writeable:  # a strided view of a temporary (a diagonal)
            result = astype(result, result._dtype, copy=True)
    finally:
        temps.free(result)
    return _write_out("einsum", result, out)


# the other products ---------------------------------------------------------------------------
def _pair(name: str, a, b):
    dev, _ = _arrays(name, a, b)
    _numeric(name, a._dtype, b._dtype)
    rd = np.result_type(a._dtype, b._dtype)
    dev.require(rd)
    return rd


@_lifting
def inner(a, b, /):
    """The sum of products over the last axes of ``a`` and ``b`` (shape ``a.shape[:-1] +
    b.shape[:-1]``); a 0-d operand multiplies.  One ``tensordot``."""
    rd = _pair("inner", a, b)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    if a._shape[-1] != b._shape[-1]:
        raise ValueError(f"inner(): the last axes differ in size ({a._shape} and "
                         f"{b._shape}); they must be equal")
    temps = _Temps(a, b)
    result = None
    try:
        wd = _work_dtype(rd)
        x, y = _as(a, wd, temps), _as(b, wd, temps)
        r = temps.add(tensordot(x, y, axes=([x.ndim - 1], [y.ndim - 1])))
        result = _finish(r, rd, temps)
    finally:
        temps.free(result)
    return result


@_lifting
def outer(a, b, out=None):
    """``a.ravel()[:, None] * b.ravel()[None, :]`` (one elementwise multiply)."""
    _pair("outer", a, b)
    x = a.reshape((a.size, 1))
    y = b.reshape((1, b.size))
    try:
        r = multiply(x, y)
    finally:
        for t, src in ((x, a), (y, b)):
            if t is not src:
                t.free()
    return _write_out("outer", r, out)


@_lifting
def kron(a, b):
    """The Kronecker product: ``multiply`` of ``a`` and ``b`` reshaped to interleaved
    axes (``(a0, 1, a1, 1 ...)`` and ``(1, b0, 1, b1 ...)``), reshaped to
    ``(a0 * b0, a1 * b1, ...)``."""
    _pair("kron", a, b)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + a._shape
    sb = (1,) * (nd - b.ndim) + b._shape
    temps = _Temps(a, b)
    result = None
    try:
        x = temps.add(a.reshape(tuple(v for s in sa for v in (s, 1))))
        y = temps.add(b.reshape(tuple(v for s in sb for v in (1, s))))
        p = temps.add(multiply(x, y))
        result = p.reshape(tuple(i * j for i, j in zip(sa, sb, strict=True)))
    finally:
        temps.free(result)
    return result


@_lifting
def vdot(a, b, /):
    """The dot product of the flattened arrays, the first conjugated (a 0-d array)."""
    rd = _pair("vdot", a, b)
    if a.size != b.size:
        raise ValueError(f"vdot(): the arrays have {a.size} and {b.size} elements; they must "
                         f"have as many (vdot flattens both)")
    temps = _Temps(a, b)
    result = None
    try:
        wd = _work_dtype(rd)
        x = temps.add(_as(a, wd, temps).reshape(-1))
        y = temps.add(_as(b, wd, temps).reshape(-1))
        if wd.kind == "c":
            x = temps.add(conj(x))
        r = temps.add(matmul(x, y))
        result = _finish(r, rd, temps)
    finally:
        temps.free(result)
    return result


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """The sum of the diagonal ``offset`` of the matrices on ``axis1``/``axis2``: a
    strided view summed (``sum``'s dtypes: small ints in int64, bool in int64)."""
    _arrays("trace", a)
    if a.ndim < 2:
        raise ValueError(f"trace(): needs at least 2 dimensions, got shape {a._shape}; use "
                         f"sum for vectors")
    try:
        k = operator.index(offset)
    except TypeError:
        raise TypeError(f"trace(): offset must be an int, got {offset!r}") from None
    d = a.diagonal(k, axis1, axis2)
    try:
        r = _sum(d, axis=-1, dtype=dtype)
    finally:
        d.free()
    return _write_out("trace", r, out)


def _part(x, i):
    return x[..., i]


@_lifting
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 3- (or 2-) element vectors on ``axisa``/``axisb``, the
    vectors of the result on ``axisc`` (``axis`` sets all three).  Two 2-element
    vectors give the z component only (deprecated by NumPy 2, which warns; so do we)."""
    dev, _ = _arrays("cross", a, b)
    for dt in (a._dtype, b._dtype):
        if dt.kind not in "iufc":
            raise TypeError(f"cross() takes numeric arrays, got {dt}; convert first "
                            f"(e.g. ga.astype(x, ga.int64))")
    rd = np.result_type(a._dtype, b._dtype)
    dev.require(rd)
    if axis is not None:
        axisa = axisb = axisc = axis
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("cross(): operands must have at least one dimension")
    x = moveaxis(a, normalize_axis("cross", axisa, a.ndim), -1)
    y = moveaxis(b, normalize_axis("cross", axisb, b.ndim), -1)
    na, nb = x._shape[-1], y._shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError(f"cross(): incompatible dimensions for cross product (dimension "
                         f"must be 2 or 3), got {na} and {nb}")
    if na == 2 or nb == 2:
        warnings.warn("Arrays of 2-dimensional vectors are deprecated. Use arrays of "
                      "3-dimensional vectors instead. (deprecated in NumPy 2.0)",
                      DeprecationWarning, stacklevel=2)
    try:
        shape = np.broadcast_shapes(x._shape[:-1], y._shape[:-1])
    except ValueError:
        raise ValueError(f"cross(): the shapes {a._shape} and {b._shape} do not broadcast "
                         f"outside the vector axes") from None
    temps = _Temps(a, b)
    temps.add(x)
    temps.add(y)
    result = None
    try:
        p = [_part(x, i) for i in range(na)]
        q = [_part(y, i) for i in range(nb)]
        temps.items.extend(p + q)

        def mul(u, v):
            return temps.add(multiply(u, v))

        def sub(u, v):
            return temps.add(subtract(u, v))

        z = sub(mul(p[0], q[1]), mul(p[1], q[0]))
        if na == 2 and nb == 2:
            result = astype(z, rd) if z._dtype != rd else z
            if result._shape != shape:
                result = temps.add(result).reshape(shape)
            return result
        if na == 2:  # a's third component is 0
            c0, c1 = mul(p[1], q[2]), temps.add(multiply(temps.add(multiply(p[0], q[2])), -1))
        elif nb == 2:
            c0, c1 = temps.add(multiply(mul(p[2], q[1]), -1)), mul(p[2], q[0])
        else:
            c0 = sub(mul(p[1], q[2]), mul(p[2], q[1]))
            c1 = sub(mul(p[2], q[0]), mul(p[0], q[2]))
        parts = [c if c._shape == shape else temps.add(broadcast_to(c, shape))
                 for c in (c0, c1, z)]
        r = stack(parts, axis=-1)
        if r._dtype != rd:
            r = temps.add(r)
            r = astype(r, rd)
        ac = normalize_axis("cross", axisc, r.ndim)
        if ac != r.ndim - 1:
            r2 = moveaxis(r, -1, ac)
            temps.add(r)
            result = r2
        else:
            result = r
        return result
    finally:
        temps.free(result)


def _windows(name: str, a, v, mode, conjugate: bool, reverse: bool):
    """``sum_j P[i + j] * w[j]`` for the lags NumPy's ``mode`` keeps: ``P`` is ``a``
    padded with ``len(v) - 1`` zeros each side, ``w`` is ``v`` (reversed for
    convolve, conjugated for correlate); one matmul of the sliding-window view of
    ``P`` (a strided view, no copy) with ``w``."""
    rd = _pair(name, a, v)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"{name}(): takes 1-d arrays, got shapes {a._shape} and {v._shape}; "
                         f"flatten them first")
    n, m = a._shape[0], v._shape[0]
    if n == 0:
        raise ValueError(f"{name}(): a cannot be empty; pass at least one element")
    if m == 0:
        raise ValueError(f"{name}(): v cannot be empty; pass at least one element")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"{name}(): mode must be 'full', 'same' or 'valid', got {mode!r}")
    swap = reverse and m > n  # convolve is symmetric: the longer one slides
    if swap:
        a, v, n, m = v, a, m, n
    total = n + m - 1
    if mode == "full":
        start, length = 0, total
    elif mode == "same":
        length = max(n, m)
        start = (total - length) // 2 if (reverse or n >= m) else (total - length + 1) // 2
    else:
        length = max(n, m) - min(n, m) + 1
        start = min(n, m) - 1
    temps = _Temps(a, v)
    result = None
    try:
        wd = _work_dtype(rd)
        x = _as(a, wd, temps)
        w = _as(v, wd, temps)
        if reverse:
            w = temps.add(w[::-1])
        if conjugate and wd.kind == "c":
            w = temps.add(conj(w))
        pad = temps.add(zeros((m - 1,), dtype=wd, device=x.device)) if m > 1 else None
        p = temps.add(concat([pad, x, pad]) if pad is not None else astype(x, wd, copy=True))
        s = p._strides[0]
        win = temps.add(p._derive((length, m), (s, s), p._offset + start * s, wd, False))
        r = temps.add(matmul(win, w))
        result = _finish(r, rd, temps)
    finally:
        temps.free(result)
    return result


@_lifting
def convolve(a, v, mode="full"):
    """The discrete linear convolution of two 1-d arrays (modes ``full``, ``same``,
    ``valid``), as a sliding-window matmul on the device."""
    return _windows("convolve", a, v, mode, conjugate=False, reverse=True)


@_lifting
def correlate(a, v, mode="valid"):
    """The cross-correlation ``c[k] = sum_n a[n + k] * conj(v[n])`` of two 1-d arrays
    (modes ``valid``, ``same``, ``full``), as a sliding-window matmul on the device."""
    return _windows("correlate", a, v, mode, conjugate=True, reverse=False)
