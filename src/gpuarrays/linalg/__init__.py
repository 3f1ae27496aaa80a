"""``gpuarrays.linalg``: the array API standard's linear algebra extension (docs/linalg.md).

All 25 functions, with the standard's signatures and namedtuple results, on every
device (:data:`ON_DEVICES`).  On ``cpu``: NumPy on views of the raw memory,
writing into the result where NumPy takes ``out=`` and otherwise copying NumPy's
result into memory from the pool once.  On device back-ends: this library's own
kernels -- matmul and its relatives, the reductions, and the factorisations of
``_compute/factor.py`` (LU, Cholesky, Householder QR, Jacobi eigenvalues,
one-sided Jacobi SVD, Hessenberg + shifted QR for ``eig``; docs/linalg.md,
"Factorisations on device back-ends").  Device memory never goes to the host
behind the caller's back.
"""

from __future__ import annotations

import math
import operator
from collections import namedtuple

import numpy as np

from .._array.make import ArrayBase, new_array
from .._compute import cpu_engine
from .._compute import factor as _factor
from .._compute.dispatch import apply
from .._compute.dtypes import astype
from .._compute.elementwise import abs as _abs
from .._compute.elementwise import multiply, pow, sqrt
from .._compute.linalg import (
    check_arrays,
    matmul,
    matrix_transpose,
    numeric_result,
    tensordot,
    vecdot,
)
from .._compute.manipulation import expand_dims
from .._compute.ownership import working
from .._compute.reductions import normalize_axes
from .._compute.searching import count_nonzero
from .._compute.statistical import min as _min
from .._compute.statistical import sum as _sum
from .._compute.table import OPS

__all__ = [
    "cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
    "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer",
    "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
    "vector_norm",
    "EigResult", "EighResult", "QRResult", "SlogdetResult", "SVDResult",
]

EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])

ON_DEVICES = frozenset(n for n in __all__ if n[0].islower())
"""The functions that run on every device back-end (docs/linalg.md, the table): all of them,
from this library's own kernels off ``cpu``."""


# Helpers ---------------------------------------------------------------------------------
def _square(name: str, x) -> None:
    if x.ndim < 2 or x._shape[-1] != x._shape[-2]:
        raise ValueError(f"linalg.{name}() needs a stack of square matrices (shape (..., M, "
                         f"M)), got shape {x._shape}")


def _matrices(name: str, x) -> None:
    if x.ndim < 2:
        raise ValueError(f"linalg.{name}() needs a stack of matrices (shape (..., M, N)), "
                         f"got shape {x._shape}")


def _floating(name: str, x) -> None:
    if x._dtype.kind not in "fc":
        raise TypeError(f"linalg.{name}() takes floating-point data types, got {x._dtype}; "
                        f"convert first (e.g. ga.astype(x, ga.float64))")


def _adopt(value, dev, kind, dtype=None):
    """NumPy's result ``value`` copied once into a new array from the pool."""
    value = np.asarray(value)
    dt = value.dtype if dtype is None else np.dtype(dtype)
    out = new_array(value.shape, dt, dev, kind)
    np.copyto(cpu_engine.view(out), value, casting="unsafe")
    return out


def _run_numpy(dev, fn, *args, **kwargs):
    """NumPy's ``fn`` on views of the array arguments, which are held while it runs."""
    arrays = [a for a in args if isinstance(a, ArrayBase)]
    with working(dev, *arrays), np.errstate(all="ignore"):
        return fn(*(cpu_engine.view(a) if isinstance(a, ArrayBase) else a for a in args),
                  **kwargs)


def _complex_of(dt: np.dtype) -> np.dtype:
    return np.result_type(dt, np.complex64)


def _real_of(dt: np.dtype) -> np.dtype:
    return np.finfo(dt).dtype if dt.kind in "fc" else np.dtype(np.float64)


def _rtol(rtol, dev):
    if rtol is None or isinstance(rtol, int | float | np.number):
        return rtol
    check_arrays("rtol", rtol)
    if rtol._storage.device != dev:
        raise ValueError(f"rtol is on {rtol._storage.device}, x on {dev}; move one")
    return cpu_engine.view(rtol)


def _device_rtol(rtol, dev):
    """``rtol`` for the device path: None, a Python float or a live array on ``dev``."""
    if rtol is None:
        return None
    if isinstance(rtol, int | float | np.number) and not isinstance(rtol, bool):
        return float(rtol)
    check_arrays("rtol", rtol)
    if rtol._storage.device != dev:
        raise ValueError(f"rtol is on {rtol._storage.device}, x on {dev}; move one")
    if rtol._dtype.kind not in "iuf":
        raise TypeError(f"rtol must be a real number or a real-valued array, got {rtol._dtype}")
    return rtol


# Factorisations: NumPy on cpu, this library's kernels elsewhere (_compute/factor.py) ----
def _on(name: str, *xs, square: bool = True):
    """(device, kind, on cpu?) of checked operands: a stack of (square) matrices."""
    dev, kind = check_arrays(name, *xs)
    (_square if square else _matrices)(name, xs[0])
    return dev, kind, dev.backend == "cpu"


def cholesky(x, /, *, upper=False):
    """The Cholesky factor of each symmetric/Hermitian positive-definite matrix (lower, or
    upper with ``upper=True``); ``LinAlgError`` when one is not positive definite."""
    dev, kind, cpu = _on("cholesky", x)
    if not cpu:
        return _factor.cholesky(x, kind, bool(upper))
    return _adopt(_run_numpy(dev, np.linalg.cholesky, x, upper=bool(upper)),
                  dev, kind)


def det(x, /):
    """The determinant of each square matrix."""
    dev, kind, cpu = _on("det", x)
    if not cpu:
        return _factor.det(x, kind)
    return _adopt(_run_numpy(dev, np.linalg.det, x), dev, kind)


def eig(x, /):
    """``EigResult(eigenvalues, eigenvectors)`` of each square matrix, both complex of
    ``x``'s precision (NumPy returns real values when they all are; the standard does
    not).  Eigenvectors have norm 1, as NumPy's."""
    dev, kind, cpu = _on("eig", x)
    if not cpu:
        return EigResult(*_factor.eig(x, kind, True))
    w, v = _run_numpy(dev, np.linalg.eig, x)
    ct = _complex_of(x._dtype)
    return EigResult(_adopt(w, dev, kind, ct), _adopt(v, dev, kind, ct))


def eigvals(x, /):
    """The eigenvalues of each square matrix, complex of ``x``'s precision."""
    dev, kind, cpu = _on("eigvals", x)
    if not cpu:
        return _factor.eig(x, kind, False)[0]
    w = _run_numpy(dev, np.linalg.eigvals, x)
    return _adopt(w, dev, kind, _complex_of(x._dtype))


def eigh(x, /):
    """``EighResult(eigenvalues, eigenvectors)`` of each symmetric/Hermitian matrix (its
    lower triangle; ascending eigenvalues, real)."""
    dev, kind, cpu = _on("eigh", x)
    if not cpu:
        return EighResult(*_factor.eigh(x, kind, True))
    w, v = _run_numpy(dev, np.linalg.eigh, x)
    return EighResult(_adopt(w, dev, kind), _adopt(v, dev, kind))


def eigvalsh(x, /):
    """The eigenvalues of each symmetric/Hermitian matrix, ascending."""
    dev, kind, cpu = _on("eigvalsh", x)
    if not cpu:
        return _factor.eigh(x, kind, False)[0]
    return _adopt(_run_numpy(dev, np.linalg.eigvalsh, x), dev, kind)


def inv(x, /):
    """The inverse of each square matrix (``LinAlgError``, a ``ValueError``, when singular)."""
    dev, kind, cpu = _on("inv", x)
    if not cpu:
        return _factor.inv(x, kind)
    return _adopt(_run_numpy(dev, np.linalg.inv, x), dev, kind)


def matrix_rank(x, /, *, rtol=None):
    """The rank of each matrix: singular values above ``rtol`` times the largest (default
    ``max(M, N) * eps``)."""
    dev, kind, cpu = _on("matrix_rank", x, square=False)
    if not cpu:
        return _factor.matrix_rank(x, kind, _device_rtol(rtol, dev))
    r = _run_numpy(dev, np.linalg.matrix_rank, x, rtol=_rtol(rtol, dev))
    return _adopt(r, dev, kind, np.int64)


def pinv(x, /, *, rtol=None):
    """The Moore-Penrose pseudo-inverse of each matrix (shape ``(..., N, M)``)."""
    dev, kind, cpu = _on("pinv", x, square=False)
    if not cpu:
        return _factor.pinv(x, kind, _device_rtol(rtol, dev))
    return _adopt(_run_numpy(dev, np.linalg.pinv, x, rtol=_rtol(rtol, dev)),
                  dev, kind)


def qr(x, /, *, mode="reduced"):
    """``QRResult(Q, R)`` of each matrix (``mode`` ``"reduced"`` or ``"complete"``)."""
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr(): mode must be 'reduced' or 'complete', got {mode!r}")
    dev, kind, cpu = _on("qr", x, square=False)
    if not cpu:
        return QRResult(*_factor.qr(x, kind, mode == "complete"))
    q, r = _run_numpy(dev, np.linalg.qr, x, mode=mode)
    return QRResult(_adopt(q, dev, kind), _adopt(r, dev, kind))


def slogdet(x, /):
    """``SlogdetResult(sign, logabsdet)`` of each square matrix."""
    dev, kind, cpu = _on("slogdet", x)
    if not cpu:
        return SlogdetResult(*_factor.slogdet(x, kind))
    s, ld = _run_numpy(dev, np.linalg.slogdet, x)
    return SlogdetResult(_adopt(s, dev, kind), _adopt(ld, dev, kind))


def solve(x1, x2, /):
    """The solution ``X`` of ``x1 @ X = x2`` for each square ``x1`` (``x2`` of shape
    ``(M,)`` is one vector; otherwise a stack of ``(M, K)`` matrices)."""
    dev, kind, cpu = _on("solve", x1, x2)
    if x2.ndim == 0:
        raise ValueError("linalg.solve(): x2 must have at least one dimension, got a 0-d "
                         "array")
    if x2.ndim != 1:
        try:
            np.broadcast_shapes(x1._shape[:-2], x2._shape[:-2])
        except ValueError:
            raise ValueError(f"linalg.solve(): the batch shapes of {x1._shape} and "
                             f"{x2._shape} do not broadcast") from None
    if not cpu:
        return _factor.solve(x1, x2, kind)
    return _adopt(_run_numpy(dev, np.linalg.solve, x1, x2), dev, kind)


def svd(x, /, *, full_matrices=True):
    """``SVDResult(U, S, Vh)`` of each matrix, singular values descending."""
    dev, kind, cpu = _on("svd", x, square=False)
    if not cpu:
        return SVDResult(*_factor.svd(x, kind, True, bool(full_matrices)))
    u, s, vh = _run_numpy(dev, np.linalg.svd, x,
                          full_matrices=bool(full_matrices))
    return SVDResult(_adopt(u, dev, kind), _adopt(s, dev, kind), _adopt(vh, dev, kind))


def svdvals(x, /):
    """The singular values of each matrix, descending."""
    dev, kind, cpu = _on("svdvals", x, square=False)
    if not cpu:
        return _factor.svd(x, kind, False)[1]
    return _adopt(_run_numpy(dev, np.linalg.svdvals, x), dev, kind)


# Every device ------------------------------------------------------------------------------
def diagonal(x, /, *, offset=0):
    """A read-only view of the diagonal ``offset`` of each matrix (shape ``(..., K)``)."""
    check_arrays("diagonal", x)
    _matrices("diagonal", x)
    try:
        k = operator.index(offset)
    except TypeError:
        raise TypeError(f"linalg.diagonal(): offset must be an int, got {offset!r}") from None
    m, n = x._shape[-2:]
    sm, sn = x._strides[-2:]
    if k >= 0:
        size, start = max(0, min(m, n - k)), k * sn
    else:
        size, start = max(0, min(m + k, n)), -k * sm
    off = x._offset + (start if size else 0)
    return x._derive((*x._shape[:-2], size), (*x._strides[:-2], sm + sn), off, x._dtype, False)


def trace(x, /, *, offset=0, dtype=None):
    """The sum of the diagonal ``offset`` of each matrix; small integers sum in int64
    (unsigned in uint64), as ``sum`` does, unless ``dtype`` says otherwise."""
    d = diagonal(x, offset=offset)
    if x._dtype.kind not in "iufc":
        raise TypeError(f"linalg.trace() takes numeric data types, got {x._dtype}")
    return _sum(d, axis=-1, dtype=dtype)


def outer(x1, x2, /):
    """The outer product of two 1-d arrays: shape ``(N, M)``."""
    check_arrays("outer", x1, x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"linalg.outer() takes two 1-d arrays, got shapes {x1._shape} and "
                         f"{x2._shape}; flatten them first")
    numeric_result("outer", x1._storage.device, x1._dtype, x2._dtype)
    return multiply(expand_dims(x1, -1), expand_dims(x2, 0))


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-element vectors along ``axis`` (a negative int; the other
    axes broadcast, the axis itself does not)."""
    dev, kind = check_arrays("cross", x1, x2)
    numeric_result("cross", dev, x1._dtype, x2._dtype)
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise TypeError(f"linalg.cross(): axis must be an int, got {axis!r}")
    n = min(x1.ndim, x2.ndim)
    if n == 0 or not -n <= axis < 0:
        raise ValueError(f"linalg.cross(): axis must be a negative int in [-{n}, -1] for "
                         f"shapes {x1._shape} and {x2._shape}, got {axis}")
    if x1._shape[axis] != 3 or x2._shape[axis] != 3:
        raise ValueError(f"linalg.cross(): axis {axis} must have size 3 in both operands, got "
                         f"shapes {x1._shape} and {x2._shape}")
    try:
        np.broadcast_shapes(x1._shape, x2._shape)
    except ValueError:
        raise ValueError(f"linalg.cross(): shapes {x1._shape} and {x2._shape} do not "
                         f"broadcast") from None

    def part(x, i):
        idx = [slice(None)] * x.ndim
        idx[axis] = i
        return x[tuple(idx)]
    rd = numeric_result("cross", dev, x1._dtype, x2._dtype)
    shape = np.broadcast_shapes(x1._shape, x2._shape)
    out = new_array(shape, rd, dev, kind)
    try:
        a = [part(x1, i) for i in range(3)]
        b = [part(x2, i) for i in range(3)]
        for k, (i, j) in enumerate(((1, 2), (2, 0), (0, 1))):
            p = multiply(a[i], b[j])
            try:
                q = multiply(a[j], b[i])
                try:
                    apply(OPS["subtract"], (p, q), part(out, k))
                finally:
                    q.free()
            finally:
                p.free()
    except BaseException:
        out.free()
        raise
    return out


def matrix_power(x, n, /):
    """``x`` multiplied by itself ``n`` times (repeated squaring); ``n == 0`` gives identity
    matrices; ``n < 0`` the power of the inverse (``LinAlgError`` when singular)."""
    dev, kind = check_arrays("matrix_power", x)
    _square("matrix_power", x)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"linalg.matrix_power(): n must be an int, got {n!r}") from None
    numeric_result("matrix_power", dev, x._dtype)
    if n < 0:
        if dev.backend == "cpu":
            return _adopt(_run_numpy(dev, np.linalg.matrix_power, x, n), dev,
                          kind)
        xi = _factor.inv(x, kind)  # NumPy's order: the inverse, then its power
        if n == -1:
            return xi
        try:
            return matrix_power(xi, -n)
        finally:
            xi.free()
    if n == 0:
        out = new_array(x._shape, x._dtype, dev, kind)
        out.fill(0)
        d = diagonal(out)
        out._derive(d._shape, d._strides, d._offset, d._dtype, True).fill(1)
        return out
    result = None
    base = x
    try:
        while n:
            if n & 1:  # NumPy's order: result @ base, base squared each step
                nxt = base if result is None else matmul(result, base)
                if result is not None and result is not x and result is not base:
                    result.free()
                result = nxt
            n >>= 1
            if n:
                sq = matmul(base, base)
                if base is not x and base is not result:
                    base.free()
                base = sq
    except BaseException:
        for t in {id(result): result, id(base): base}.values():
            if t is not None and t is not x:
                t.free()
        raise
    if base is not x and base is not result:
        base.free()
    if result is x:
        result = astype(x, x._dtype, copy=True)
    return result


def _check_ord(name: str, ord, allowed: tuple) -> None:
    if isinstance(ord, bool) or not (isinstance(ord, int | float | np.number) or ord in allowed):
        raise ValueError(f"linalg.{name}(): invalid ord {ord!r}")


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The ``ord``-norm of the vectors along ``axis`` (all axes by default): 2, 1, inf,
    -inf, 0 (the count of non-zeros) or any other real ``p``.  A real floating result of
    ``x``'s precision."""
    dev, kind = check_arrays("vector_norm", x)
    _floating("vector_norm", x)
    _check_ord("vector_norm", ord, ())
    axes = normalize_axes("linalg.vector_norm", axis, x.ndim)  # as the reductions
    rd = _real_of(x._dtype)
    if dev.backend == "cpu":
        v = _run_numpy(dev, np.linalg.vector_norm, x,
                       axis=None if axis is None else axes, keepdims=bool(keepdims), ord=ord)
        return _adopt(v, dev, kind, rd)
    return _device_vector_norm(x, axes, bool(keepdims), ord, rd)


def _device_vector_norm(x, axes: tuple, keepdims: bool, ord, rd):
    """Elementwise kernels and reductions: ``abs``, then sum / max / min / count."""
    a = _abs(x)
    temps = [a]
    try:
        ord = float(ord)
        if ord == math.inf:
            return _factor.norm_max(a, axes, keepdims)
        if ord == -math.inf:
            return _min(a, axis=axes, keepdims=keepdims)
        if ord == 0:
            c = count_nonzero(a, axis=axes, keepdims=keepdims)
            temps.append(c)
            return astype(c, rd)
        if ord == 1:
            return _sum(a, axis=axes, keepdims=keepdims)
        if ord == 2:
            sq = multiply(a, a)
            temps.append(sq)
            s = _sum(sq, axis=axes, keepdims=keepdims)
            temps.append(s)
            return sqrt(s)
        p = pow(a, ord)
        temps.append(p)
        s = _sum(p, axis=axes, keepdims=keepdims)
        temps.append(s)
        return pow(s, 1.0 / ord)
    finally:
        for t in temps:
            t.free()


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The ``ord``-norm of each matrix: ``"fro"``, ``"nuc"``, 1, -1, 2, -2, inf, -inf.
    ``"nuc"``, 2 and -2 from the singular values (``svdvals``)."""
    dev, kind = check_arrays("matrix_norm", x)
    _floating("matrix_norm", x)
    _matrices("matrix_norm", x)
    if ord not in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf) or isinstance(ord, bool):
        raise ValueError(f"linalg.matrix_norm(): invalid ord {ord!r}; use 'fro', 'nuc', 1, "
                         f"-1, 2, -2, inf or -inf")
    rd = _real_of(x._dtype)
    if dev.backend == "cpu":
        v = _run_numpy(dev, np.linalg.matrix_norm, x, keepdims=bool(keepdims),
                       ord=ord)
        return _adopt(v, dev, kind, rd)
    if ord in ("nuc", 2, -2):
        return _factor.svd_norm(x, kind, ord, bool(keepdims))
    nd = x.ndim
    if ord == "fro":
        return _device_vector_norm(x, (nd - 2, nd - 1), bool(keepdims), 2, rd)
    # 1 / -1: max / min over columns of the column sums; inf / -inf: of the row sums
    a = _abs(x)
    try:
        s = _sum(a, axis=nd - 2 if ord in (1, -1) else nd - 1, keepdims=True)
        try:
            red = _factor.norm_max if ord in (1, math.inf) else _min
            r = red(s, axis=nd - 1 if ord in (1, -1) else nd - 2, keepdims=True)
        finally:
            s.free()
        if keepdims:
            return r
        out = r.reshape(x._shape[:-2])
        return out
    finally:
        a.free()
