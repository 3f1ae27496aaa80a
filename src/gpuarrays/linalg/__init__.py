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
from .._compute.elementwise import conj, divide, greater, multiply, pow, sqrt, where
from .._compute.linalg import (
    check_arrays,
    matmul,
    matrix_transpose,
    numeric_result,
    tensordot,
    vecdot,
)
from .._compute.manipulation import expand_dims
from .._compute.manipulation import moveaxis as _moveaxis
from .._compute.ownership import working
from .._compute.reductions import normalize_axes
from .._compute.searching import count_nonzero
from .._compute.statistical import max as _max
from .._compute.statistical import min as _min
from .._compute.statistical import sum as _sum
from .._compute.table import OPS

__all__ = [
    "cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
    "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer",
    "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
    "vector_norm", "lstsq", "cond", "norm", "tensorinv", "tensorsolve",
    "EigResult", "EighResult", "QRResult", "SlogdetResult", "SVDResult",
]

EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])

LstsqResult = namedtuple("LstsqResult", ["x", "residuals", "rank", "s"])

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


def _default_float(dev) -> np.dtype:
    """NumPy's float64, or float32 on a device without float64 (the namespace's default)."""
    return np.dtype(np.float64 if dev.info.float64 else np.float32)


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
    if x.size == 0:
        return EigResult(*_empty_eig(x, dev, kind, True))
    if not cpu:
        return EigResult(*_factor.eig(x, kind, True))
    w, v = _run_numpy(dev, np.linalg.eig, x)
    ct = _complex_of(x._dtype)
    return EigResult(_adopt(w, dev, kind, ct), _adopt(v, dev, kind, ct))


def eigvals(x, /):
    """The eigenvalues of each square matrix, complex of ``x``'s precision."""
    dev, kind, cpu = _on("eigvals", x)
    if x.size == 0:
        return _empty_eig(x, dev, kind, False)[0]
    if not cpu:
        return _factor.eig(x, kind, False)[0]
    w = _run_numpy(dev, np.linalg.eigvals, x)
    return _adopt(w, dev, kind, _complex_of(x._dtype))


def _empty_eig(x, dev, kind, vectors: bool):
    """The eigen-decomposition of a stack of 0 x 0 (or of no) matrices, in NumPy's dtypes:
    real ones (NumPy answers real when no eigenvalue is complex, and none is here)."""
    if x._dtype == np.float16:
        _factor.compute_dtype("eig", dev, x._dtype)  # refused, as NumPy
    dt = np.linalg.eigvals(np.zeros((0, 0), x._dtype)).dtype
    dev.require(dt)
    w = new_array(x._shape[:-1], dt, dev, kind)
    v = new_array(x._shape, dt, dev, kind) if vectors else None
    return w, v


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
    """``QRResult(Q, R)`` of each matrix (``mode`` ``"reduced"`` or ``"complete"``); as
    NumPy, ``mode="r"`` returns ``R`` alone (shape ``(..., K, N)``) and ``mode="raw"`` the
    pair ``(h, tau)``: LAPACK's ``geqrf`` output, Householder vectors below the diagonal
    and ``R`` above, transposed to ``(..., N, M)``, and the reflectors' scale factors."""
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"linalg.qr(): mode must be 'reduced', 'complete', 'r' or 'raw', "
                         f"got {mode!r}")
    dev, kind, cpu = _on("qr", x, square=False)
    if mode == "raw":
        if cpu:
            h, tau = _run_numpy(dev, np.linalg.qr, x, mode="raw")
            return _adopt(h, dev, kind), _adopt(tau, dev, kind)
        return _device_qr_raw(x, dev, kind)
    if mode == "r":
        if cpu:
            return _adopt(_run_numpy(dev, np.linalg.qr, x, mode="r"), dev, kind)
        q, r = _factor.qr(x, kind, False)
        q.free()
        return r
    if not cpu:
        return QRResult(*_factor.qr(x, kind, mode == "complete"))
    q, r = _run_numpy(dev, np.linalg.qr, x, mode=mode)
    return QRResult(_adopt(q, dev, kind), _adopt(r, dev, kind))


def _device_qr_raw(x, dev, kind):
    """``qr(mode="raw")`` by the device's Householder kernel (``geqrf`` + ``orgqr`` with
    LAPACK's conventions), keeping its work matrix and scale factors."""
    dt = _factor.compute_dtype("qr", dev, x._dtype)
    batch = x._shape[:-2]
    m, n = x._shape[-2:]
    k = min(m, n)
    nb = math.prod(batch)
    work = _factor._copy(x, dt)
    tau = q = r = None
    try:
        tau = new_array((*batch, k), dt, dev, kind)
        if nb and k:
            q = new_array((*batch, m, k), dt, dev, "device")
            r = new_array((*batch, k, n), dt, dev, "device")
            with working(dev, work, tau, q, r):  # no reset, no free under the launch
                _factor.kernels.launch(dev, "qr", _factor._key(dt), [
                    _factor._ptr(work), _factor._ptr(tau), _factor._ptr(q), _factor._ptr(r),
                    nb, m, n, 0], nb)
        h = astype(work.mT, dt, copy=True)
    except BaseException:
        if tau is not None:
            tau.free()
        raise
    finally:
        for t in (work, q, r):
            if t is not None:
                t.free()
    return h, tau


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


def svd(x, /, *, full_matrices=True, compute_uv=True, hermitian=False):
    """``SVDResult(U, S, Vh)`` of each matrix, singular values descending.  NumPy's
    ``compute_uv=False`` returns the singular values alone (:func:`svdvals`);
    ``hermitian=True`` is accepted and changes nothing but speed in NumPy (its result is an
    SVD of the same matrix): this computes the general SVD, whose ``U``/``Vh`` may differ
    from NumPy's eigh-based ones by the signs of singular vectors."""
    if not compute_uv:
        return svdvals(x)
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
    if x._dtype.kind in "biu":  # NumPy converts to its default float first
        xf = astype(x, _default_float(dev))
        try:
            return vector_norm(xf, axis=axis, keepdims=keepdims, ord=ord)
        finally:
            xf.free()
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
    if x._dtype.kind in "biu":  # NumPy converts to its default float first
        _matrices("matrix_norm", x)
        xf = astype(x, _default_float(dev))
        try:
            return matrix_norm(xf, keepdims=keepdims, ord=ord)
        finally:
            xf.free()
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


# NumPy's linalg functions beyond the standard (docs/numpy.md) ---------------------------------
def lstsq(a, b, rcond=None):
    """NumPy's least-squares solution of ``a @ x = b``: ``(x, residuals, rank, s)``.

    ``a`` is ``(M, N)``, ``b`` ``(M,)`` or ``(M, K)``; singular values at most ``rcond``
    times the largest (default ``max(M, N) * eps``) count as zero.  ``residuals`` holds the
    squared 2-norms of ``b - a @ x`` per column when ``rank == N < M``, else it is empty;
    ``rank`` a NumPy int32, as NumPy's (the one value read back).  On device back-ends: the SVD
    (``x = Vh^H diag(1/s) U^H b``) by this library's kernels; on ``cpu`` NumPy's."""
    dev, kind = check_arrays("lstsq", a, b)
    if a.ndim != 2:
        raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be "
                                    f"two-dimensional: linalg.lstsq() takes one (M, N) matrix")
    if b.ndim not in (1, 2):
        raise np.linalg.LinAlgError(f"{b.ndim}-dimensional array given. b must be (M,) or "
                                    f"(M, K)")
    m, n = a._shape
    if b._shape[0] != m:
        raise np.linalg.LinAlgError(f"Incompatible dimensions: a is {a._shape}, b is "
                                    f"{b._shape}; b needs {m} rows")
    dt = _factor.compute_dtype("lstsq", dev, a._dtype, b._dtype)
    rt = _real_of(dt)
    if rcond is None:
        rc = float(np.finfo(dt).eps) * max(m, n)
    else:
        rc = float(rcond)
    if dev.backend == "cpu":
        with np.errstate(all="ignore"):
            x, res, rank, s = _run_numpy(dev, np.linalg.lstsq, a, b, rcond=rc)
        return LstsqResult(_adopt(x, dev, kind, dt), _adopt(res, dev, kind, rt), np.int32(rank),
                           _adopt(s, dev, kind, rt))
    temps = []

    def keep(t):
        temps.append(t)
        return t
    x = None
    try:
        af = a if a._dtype == dt else keep(astype(a, dt))
        bf = b if b._dtype == dt else keep(astype(b, dt))
        b2 = keep(bf.reshape((m, 1))) if b.ndim == 1 else bf
        k2 = b2._shape[1]
        if min(m, n) == 0:
            x = new_array((n, k2), dt, dev, kind)
            x.fill(0)
            s = new_array((0,), rt, dev, kind)
            rank = np.int32(0)
        else:
            u, s, vh = _factor.svd(af, kind, True, False)
            keep(u)
            keep(vh)
            try:
                tol = keep(multiply(keep(_max(s)), rc))
                big = keep(greater(s, tol))
                rank = np.int32(count_nonzero(keep(astype(big, np.int32))).get())
                sinv = keep(where(big, keep(divide(1.0, s)), 0.0))
                uh = keep(conj(u)) if dt.kind == "c" else u
                ub = keep(matmul(uh.mT, b2))  # (k, K)
                scaled = keep(multiply(ub, expand_dims(sinv, -1)))
                vhh = keep(conj(vh)) if dt.kind == "c" else vh
                x = matmul(vhh.mT, scaled)
            except BaseException:
                s.free()
                raise
        try:
            if rank == n and m > n:
                fit = keep(matmul(af, x))
                diff = keep(apply(OPS["subtract"], (b2, fit)))
                mag = keep(_abs(diff))
                res = _sum(keep(multiply(mag, mag)), axis=0)
            else:
                res = new_array((0,), rt, dev, kind)
        except BaseException:
            s.free()
            raise
        if b.ndim == 1:
            keep(x)
            x = x.reshape((n,))
        return LstsqResult(x, res, rank, s)
    except BaseException:
        if x is not None:
            x.free()
        raise
    finally:
        for t in temps:
            t.free()


def cond(x, p=None):
    """NumPy's condition number of each matrix: ``p`` None, 2 or -2 from the singular
    values (largest over smallest, or its inverse); ``'fro'``, ``'nuc'``, 1, -1, inf, -inf
    as ``norm(x, p) * norm(inv(x), p)`` (square matrices).  A singular matrix gives inf
    for the SVD norms; for the others it raises ``LinAlgError`` on device back-ends (this
    library's ``inv`` refuses it) where NumPy returns inf."""
    dev, kind = check_arrays("cond", x)
    _matrices("cond", x)
    if p not in (None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf) or isinstance(p, bool):
        raise ValueError(f"linalg.cond(): invalid p {p!r}; use None, 'fro', 'nuc', 1, -1, 2, "
                         f"-2, inf or -inf")
    dt = _factor.compute_dtype("cond", dev, x._dtype)
    if dev.backend == "cpu":
        with np.errstate(all="ignore"):
            r = _run_numpy(dev, np.linalg.cond, x, p)
        return _adopt(r, dev, kind, _real_of(dt))
    xf = x if x._dtype == dt else astype(x, dt)
    temps = [xf] if xf is not x else []
    try:
        if p in (None, 2, -2):
            s = svdvals(xf)
            temps.append(s)
            hi, lo = s[..., 0], s[..., -1]
            return apply(OPS["divide"], (hi, lo) if p != -2 else (lo, hi))
        _square("cond", x)
        xi = inv(xf)
        temps.append(xi)
        n1 = matrix_norm(xf, ord=p)
        temps.append(n1)
        n2 = matrix_norm(xi, ord=p)
        temps.append(n2)
        return multiply(n1, n2)
    finally:
        for t in temps:
            t.free()


def tensorinv(a, ind=2):
    """NumPy's inverse of an N-d array under ``tensordot(.., ind)``: ``a`` reshaped to a
    square matrix (the first ``ind`` axes against the rest), inverted, reshaped to
    ``a.shape[ind:] + a.shape[:ind]``."""
    check_arrays("tensorinv", a)
    try:
        ind = operator.index(ind)
    except TypeError:
        raise TypeError(f"linalg.tensorinv(): ind must be an int, got {ind!r}") from None
    if ind <= 0:
        raise ValueError(f"linalg.tensorinv(): invalid ind {ind}; ind must be positive")
    old = a._shape
    rows = math.prod(old[ind:])
    inv_shape = old[ind:] + old[:ind]
    if math.prod(old[:ind]) != rows:
        raise np.linalg.LinAlgError(f"linalg.tensorinv(): the first {ind} axes of shape "
                                    f"{old} hold {math.prod(old[:ind])} elements, the rest "
                                    f"{rows}; they must match (a square matrix)")
    m = a.reshape((rows, -1))
    try:
        ia = inv(m)
    finally:
        if m is not a:
            m.free()
    out = ia.reshape(inv_shape)
    if out is not ia:
        ia.free()
    return out


def tensorsolve(a, b, axes=None):
    """NumPy's solution ``x`` of ``tensordot(a, x, axes=x.ndim) = b``: ``a`` (its
    ``axes`` moved to the end) reshaped to a square matrix, :func:`solve` with ``b``
    flattened, the result shaped ``a.shape[b.ndim:]``."""
    check_arrays("tensorsolve", a, b)
    an = a.ndim
    temps = []
    try:
        if axes is not None:
            allaxes = list(range(an))
            for k in axes:
                allaxes.remove(operator.index(k) % an if an else k)
                allaxes.insert(an, operator.index(k) % an)
            a = a.transpose(allaxes)
            temps.append(a)
        old = a._shape[b.ndim:]
        prod = math.prod(old)
        if a.size != prod ** 2:
            raise np.linalg.LinAlgError(f"linalg.tensorsolve(): a of shape {a._shape} is not "
                                        f"square once b's {b.ndim} axes are split off: "
                                        f"prod(a.shape[b.ndim:])**2 must equal a.size")
        a2 = a.reshape((prod, prod))
        temps.append(a2)
        b1 = b.reshape((prod,)) if b.size == prod else None
        if b1 is None:
            raise ValueError(f"linalg.tensorsolve(): b of shape {b._shape} has {b.size} "
                             f"elements, a needs {prod}")
        if b1 is not b:
            temps.append(b1)
        res = solve(a2, b1)
        out = res.reshape(old)
        if out is not res:
            res.free()
        return out
    finally:
        for t in temps:
            t.free()


def norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's ``linalg.norm``: a vector norm (:func:`vector_norm`) over one axis or, for
    ``axis=None`` and ``ord=None``, over the flattened array; a matrix norm
    (:func:`matrix_norm`) over two axes (``axis`` a pair, or a 2-d ``x`` with ``ord``
    given).  Integer and bool input is converted to the default float, as NumPy's."""
    check_arrays("norm", x)
    nd = x.ndim
    if axis is None:
        if ord is None:
            return vector_norm(x, axis=None, keepdims=keepdims, ord=2)
        if nd == 1:
            return vector_norm(x, axis=None, keepdims=keepdims, ord=ord)
        if nd != 2:
            raise ValueError(f"linalg.norm(): improper number of dimensions to norm "
                             f"({nd}); pass axis= (one axis or two)")
        axes = (0, 1)
    elif isinstance(axis, int | np.integer) and not isinstance(axis, bool):
        axes = (int(axis),)
    else:
        try:
            axes = tuple(operator.index(a) for a in axis)
        except TypeError:
            raise TypeError(f"linalg.norm(): axis must be None, an int or a tuple of ints, "
                            f"got {axis!r}") from None
    if len(axes) == 1:
        if isinstance(ord, str):
            raise ValueError(f"linalg.norm(): invalid norm order {ord!r} for vectors; use a "
                             f"number")
        return vector_norm(x, axis=axes, keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axes) != 2:
        raise ValueError(f"linalg.norm(): improper number of dimensions to norm "
                         f"(axis={axis!r}); pass one axis or two")
    a1, a2 = (normalize_axes("linalg.norm", a, nd)[0] for a in axes)
    if a1 == a2:
        raise ValueError(f"linalg.norm(): duplicate axes given ({axis!r})")
    moved = x if (a1, a2) == (nd - 2, nd - 1) else _moveaxis(x, (a1, a2), (-2, -1))
    try:
        r = matrix_norm(moved, keepdims=False, ord="fro" if ord is None else ord)
    finally:
        if moved is not x:
            moved.free()
    if not keepdims:
        return r
    shape = tuple(1 if k in (a1, a2) else n for k, n in enumerate(x._shape))
    out = r.reshape(shape)
    if out is not r:
        r.free()
    return out
