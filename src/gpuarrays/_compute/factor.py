"""The linalg factorisations and solvers on device back-ends (docs/linalg.md,
"Factorisations on device back-ends").

Each function takes operands already checked by ``gpuarrays.linalg`` (live, one
device, the right number of dimensions and square where needed) and checks what
is left (dtypes, core sizes of ``solve``) before anything is allocated.  The
operand is copied once, on the device, into a contiguous pool temporary of the
compute type (the strided copy handles transposed, sliced and broadcast inputs
and converts integers to float64, as NumPy does); the kernels of
``device/factor.py`` run on it, one work-item per matrix, and write the results
(from the pool).  Failures (a singular matrix in ``solve``/``inv``, one that is not
positive definite in ``cholesky``, NaN or infinity in ``eigh``/``svd``/``eig``, a QR
iteration of ``eig`` that does not converge) set a status word on the device, read
once at the end of the call -- the only device-to-host read -- and raise NumPy's
``LinAlgError`` after every temporary and result is freed.

``matrix_rank``, ``pinv`` and the singular-value matrix norms are built from
``svd``/``svdvals`` and the existing elementwise kernels, reductions and matmul.
"""

from __future__ import annotations

import math

import numpy as np

from .._array.make import ArrayBase, new_array
from .._array.transfer import copy_raw
from .device import factor as kernels
from .elementwise import conj, divide, greater, multiply, where
from .linalg import matmul
from .manipulation import expand_dims
from .ownership import filling, working
from .searching import count_nonzero
from .statistical import max as _max
from .statistical import min as _min
from .statistical import sum as _sum

__all__ = ["compute_dtype", "det", "slogdet", "solve", "inv", "cholesky", "eigh", "svd",
           "matrix_rank", "pinv", "svd_norm", "qr", "eig"]

LinAlgError = np.linalg.LinAlgError
_I4 = np.dtype(np.int32)


def compute_dtype(name: str, dev, *dtypes: np.dtype) -> np.dtype:
    """The dtype the factorisation computes and returns in: floats and complex keep theirs,
    integers and bool become float64 (NumPy's rule); float16 is refused as NumPy does."""
    if any(d == np.float16 for d in dtypes):
        raise TypeError(f"linalg.{name}(): array type float16 is unsupported in linalg (as "
                        f"in NumPy); convert first, e.g. ga.astype(x, ga.float32)")
    dt = np.result_type(*(d if d.kind in "fc" else np.dtype(np.float64) for d in dtypes))
    dev.require(dt)
    return dt


def _key(dt: np.dtype) -> str:
    return f"{dt.kind}{dt.itemsize}"


def _real(dt: np.dtype) -> np.dtype:
    return np.finfo(dt).dtype


def _batch(shape: tuple) -> int:
    return math.prod(shape[:-2])


def _copy(x, dt, shape=None):
    """A contiguous device copy of ``x`` (broadcast to ``shape``) in ``dt``, from the pool."""
    dev = x._storage.device
    tmp = new_array(x._shape if shape is None else shape, dt, dev, "device")
    with filling(tmp):
        copy_raw(tmp, x)
    return tmp


def _ptr(a) -> int:
    return a._raw().ptr


def _flag(dev):
    f = new_array((1,), _I4, dev, "device")
    with filling(f):
        f.fill(0)
    return f


_FLAG = object()
"""Where a checked launch's argument list takes the address of its status word."""


def _launch_checked(dev, name: str, dt: np.dtype, args: list, nb: int, refusal) -> None:
    """Launch kernel ``name`` over ``nb`` matrices with a fresh status word in place of
    :data:`_FLAG`, then read the word (the one read of the call): non-zero raises
    ``refusal(status)``.  The word is freed either way.  An array in ``args`` is passed as
    its address and held while the launch is enqueued (``ownership.working``)."""
    flag = _flag(dev)
    try:
        arrays = [flag, *(a for a in args if isinstance(a, ArrayBase))]
        with working(dev, *arrays):  # no reset under the launch, no free of what it reads
            kernels.launch(dev, name, _key(dt), [
                _ptr(flag) if a is _FLAG else _ptr(a) if isinstance(a, ArrayBase) else a
                for a in args], nb)
        status = int(flag.get()[0])
        if status:
            raise refusal(status)
    finally:
        flag.free()


def _free(*arrays) -> None:
    for a in arrays:
        if a is not None:
            a.free()


def _determinant(x, kind, mode: int):
    dev = x._storage.device
    dt = compute_dtype("slogdet" if mode else "det", dev, x._dtype)
    batch, n = x._shape[:-2], x._shape[-1]
    out1 = new_array(batch, dt, dev, kind)
    out2 = None
    made, temps = [out1], []
    with filling(made, temps):
        if mode:
            out2 = new_array(batch, _real(dt), dev, kind)
            made.append(out2)
        nb = _batch(x._shape)
        if nb and n == 0:  # the empty product
            out1.fill(1)
            if mode:
                out2.fill(0)
        elif nb:
            work = _copy(x, dt)
            temps.append(work)
            p2 = _ptr(out2) if mode else _ptr(out1)
            with working(dev, work, out1, out2):  # no reset, no free under the launch
                kernels.launch(dev, "lu", _key(dt), [_ptr(work), _ptr(work), _ptr(out1), p2,
                                                     _ptr(work), nb, n, 0, mode, 0], nb)
    return (out1, out2) if mode else out1


def det(x, kind):
    """The determinant of each matrix (LU with partial pivoting)."""
    return _determinant(x, kind, 0)


def slogdet(x, kind):
    """(sign, log|det|) of each matrix; a singular one gives (0, -inf)."""
    return _determinant(x, kind, 1)


def _singular(name: str) -> LinAlgError:
    return LinAlgError(f"Singular matrix: linalg.{name}() found an exactly zero pivot in LU "
                       f"with partial pivoting; check the input, or use linalg.pinv / lstsq "
                       f"for a least-squares answer")


def solve(x1, x2, kind):
    """``X`` with ``x1 @ X = x2``: ``x2`` 1-d is one vector for every matrix of ``x1``;
    otherwise the batch shapes broadcast and ``x2`` is a stack of ``(M, K)`` matrices."""
    dev = x1._storage.device
    dt = compute_dtype("solve", dev, x1._dtype, x2._dtype)
    n = x1._shape[-1]
    if x2.ndim == 1:
        if x2._shape[0] != n:
            raise ValueError(f"linalg.solve(): x2 of shape {x2._shape} does not match the "
                             f"{n} x {n} matrices of x1 (shape {x1._shape})")
        batch, k = x1._shape[:-2], 1
        shape = (*batch, n)
    else:
        if x2._shape[-2] != n:
            raise ValueError(f"linalg.solve(): x2 of shape {x2._shape} has {x2._shape[-2]} "
                             f"rows; the matrices of x1 (shape {x1._shape}) need {n}")
        batch = tuple(np.broadcast_shapes(x1._shape[:-2], x2._shape[:-2]))
        k = x2._shape[-1]
        shape = (*batch, n, k)
    out = new_array(shape, dt, dev, kind)
    with filling(out, []) as temps:
        nb = math.prod(batch)
        if nb and n and k:
            b3 = out.reshape((*batch, n, k))
            copy_raw(b3, x2.reshape((n, 1)) if x2.ndim == 1 else x2)
            work = _copy(x1, dt, (*batch, n, n))
            temps.append(work)
            _launch_checked(dev, "lu", dt, [work, out, work, work,
                                            _FLAG, nb, n, k, 2, 0], nb,
                            lambda _: _singular("solve"))
    return out


def inv(x, kind):
    """The inverse of each matrix (``LinAlgError`` when one is singular)."""
    dev = x._storage.device
    dt = compute_dtype("inv", dev, x._dtype)
    n = x._shape[-1]
    out = new_array(x._shape, dt, dev, kind)
    with filling(out, []) as temps:
        nb = _batch(x._shape)
        if nb and n:
            work = _copy(x, dt)
            temps.append(work)
            _launch_checked(dev, "lu", dt, [work, out, work, work,
                                            _FLAG, nb, n, n, 2, 1], nb,
                            lambda _: _singular("inv"))
    return out


def cholesky(x, kind, upper: bool):
    """The Cholesky factor of each matrix, computed in place in the result."""
    dev = x._storage.device
    dt = compute_dtype("cholesky", dev, x._dtype)
    n = x._shape[-1]
    out = new_array(x._shape, dt, dev, kind)
    with filling(out):
        nb = _batch(x._shape)
        if nb and n:
            copy_raw(out, x)
            _launch_checked(dev, "chol", dt, [out, _FLAG, nb, n, int(upper)], nb,
                            lambda _: LinAlgError(
                                f"Matrix is not positive definite: linalg.cholesky() met a "
                                f"non-positive pivot in a {n} x {n} matrix; cholesky needs a "
                                f"Hermitian positive-definite input"))
    return out


def eigh(x, kind, vectors: bool):
    """(eigenvalues ascending, eigenvectors or None) of each Hermitian matrix (its lower
    triangle), by cyclic Jacobi rotations."""
    dev = x._storage.device
    dt = compute_dtype("eigh" if vectors else "eigvalsh", dev, x._dtype)
    n = x._shape[-1]
    w = new_array(x._shape[:-1], _real(dt), dev, kind)
    v = None
    made, temps = [w], []
    with filling(made, temps):
        if vectors:
            v = new_array(x._shape, dt, dev, kind)
            made.append(v)
        nb = _batch(x._shape)
        if nb and n:
            work = _copy(x, dt)
            temps.append(work)
            _launch_checked(dev, "jeig", dt, [work, w, (v if vectors else work),
                                              _FLAG, nb, n, int(vectors)], nb,
                            lambda _: _not_finite("eigh" if vectors else "eigvalsh",
                                                  "Eigenvalues"))
    return w, v


def _not_finite(name: str, what: str) -> LinAlgError:
    return LinAlgError(f"{what} did not converge: linalg.{name}() got an input with NaN or "
                       f"infinity (as NumPy, whose LAPACK does not converge on them); check "
                       f"the input, e.g. with ga.isfinite")


def svd(x, kind, vectors: bool, full: bool = True):
    """(U, S, Vh) of each matrix (``U``/``Vh`` None without ``vectors``), by one-sided
    Jacobi; singular values descending."""
    dev = x._storage.device
    dt = compute_dtype("svd" if vectors else "svdvals", dev, x._dtype)
    batch = x._shape[:-2]
    m, n = x._shape[-2:]
    kmin = min(m, n)
    s = new_array((*batch, kmin), _real(dt), dev, kind)
    u = vh = w = None
    made, temps = [s], []
    with filling(made, temps):
        if vectors:
            u = new_array((*batch, m, m if full else kmin), dt, dev, kind)
            made.append(u)
            vh = new_array((*batch, n if full else kmin, n), dt, dev, kind)
            made.append(vh)
        nb = math.prod(batch)
        if nb and not kmin and vectors:  # no singular values: identities (when full)
            _eye(u)
            _eye(vh)
        elif nb and kmin:
            work = _copy(x, dt)
            temps.append(work)
            if vectors:
                w = new_array((nb, kmin, kmin), dt, dev, "device")
                temps.append(w)
            # the normalised side is U (columns, m >= n) or Vh (rows); the other is conj(W)
            o, q = (vh, u) if m < n else (u, vh)
            _launch_checked(dev, "jsvd", dt, [
                work, (w if vectors else work), s, (o if vectors else work),
                (q if vectors else work), _FLAG, nb, m, n, int(full), int(vectors)], nb,
                lambda _: _not_finite("svd" if vectors else "svdvals", "SVD"))
    return u, s, vh


def qr(x, kind, complete: bool):
    """(Q, R) of each matrix by Householder reflections (LAPACK's conventions)."""
    dev = x._storage.device
    dt = compute_dtype("qr", dev, x._dtype)
    batch = x._shape[:-2]
    m, n = x._shape[-2:]
    k = min(m, n)
    mq = m if complete else k
    q = new_array((*batch, m, mq), dt, dev, kind)
    made, temps = [q], []
    with filling(made, temps):
        r = new_array((*batch, mq, n), dt, dev, kind)
        made.append(r)
        nb = math.prod(batch)
        if nb and not k:
            _eye(q)
            r.fill(0)
        elif nb:
            work = _copy(x, dt)
            temps.append(work)
            tau = new_array((nb, k), dt, dev, "device")
            temps.append(tau)
            with working(dev, work, tau, q, r):  # no reset, no free under the launch
                kernels.launch(dev, "qr", _key(dt), [_ptr(work), _ptr(tau), _ptr(q), _ptr(r), nb,
                                                     m, n, int(complete)], nb)
    return q, r


def eig(x, kind, vectors: bool):
    """(eigenvalues, eigenvectors or None) of each square matrix, complex of ``x``'s
    precision, by Hessenberg reduction and shifted QR in complex arithmetic."""
    dev = x._storage.device
    dt = compute_dtype("eig" if vectors else "eigvals", dev, x._dtype)
    ct = np.result_type(dt, np.complex64)
    dev.require(ct)
    n = x._shape[-1]
    w = new_array(x._shape[:-1], ct, dev, kind)
    name = "eig" if vectors else "eigvals"

    def refusal(status: int) -> LinAlgError:
        if status == 2:
            return LinAlgError(f"Array must not contain infs or NaNs: linalg.{name}() refuses "
                               f"them, as NumPy; check the input, e.g. with ga.isfinite")
        return LinAlgError(f"Eigenvalues did not converge: linalg.{name}() ran out of QR "
                           f"iterations ({30 * n} for a {n} x {n} matrix)")

    v = None
    made, temps = [w], []
    with filling(made, temps):
        if vectors:
            v = new_array(x._shape, ct, dev, kind)
            made.append(v)
        nb = _batch(x._shape)
        if nb and n:
            work = _copy(x, ct)
            temps.append(work)
            _launch_checked(dev, "eig", ct, [work, w, (v if vectors else work),
                                             _FLAG, nb, n, int(vectors)], nb, refusal)
    return w, v


def _eye(out) -> None:
    """Identity matrices into ``out`` (a fresh contiguous stack)."""
    out.fill(0)
    m, n = out._shape[-2:]
    k = min(m, n)
    if k and out.size:
        sm, sn = out._strides[-2:]
        out._derive((*out._shape[:-2], k), (*out._strides[:-2], sm + sn), out._offset,
                    out._dtype, True).fill(1)


# Built from the singular values ----------------------------------------------------------
def _cutoff(s, rtol, dt, m: int, n: int):
    """``rtol * max(s)`` per matrix, shape ``(..., 1)`` (``rtol`` None: ``max(M, N) * eps``;
    an array broadcasts against the batch shape)."""
    smax = _max(s, axis=-1, keepdims=True)
    try:
        if rtol is None:
            rtol = max(m, n) * float(np.finfo(dt).eps)
        if isinstance(rtol, float):
            return multiply(smax, rtol)
        r = expand_dims(rtol, -1)
        return multiply(smax, r)
    finally:
        smax.free()


def matrix_rank(x, kind, rtol):
    """The count of singular values above the cut-off, per matrix (int64)."""
    dev = x._storage.device
    dt = compute_dtype("matrix_rank", dev, x._dtype)
    m, n = x._shape[-2:]
    if min(m, n) == 0:
        out = new_array(x._shape[:-2], np.dtype(np.int64), dev, kind)
        out.fill(0)
        return out
    s = svd(x, kind, False)[1]
    temps = [s]
    try:
        tol = _cutoff(s, rtol, dt, m, n)
        temps.append(tol)
        big = greater(s, tol)
        temps.append(big)
        return count_nonzero(big, axis=-1)
    finally:
        _free(*temps)


def pinv(x, kind, rtol):
    """``Vh^H diag(1/s) U^H`` over the singular values above the cut-off (others 0)."""
    dev = x._storage.device
    dt = compute_dtype("pinv", dev, x._dtype)
    m, n = x._shape[-2:]
    if min(m, n) == 0:
        out = new_array((*x._shape[:-2], n, m), dt, dev, kind)
        out.fill(0)
        return out
    u, s, vh = svd(x, kind, True, False)
    temps = [u, s, vh]
    try:
        tol = _cutoff(s, rtol, dt, m, n)
        temps.append(tol)
        big = greater(s, tol)
        temps.append(big)
        one = divide(1.0, s)
        temps.append(one)
        sinv = where(big, one, 0.0)
        temps.append(sinv)
        if dt.kind == "c":
            vh = conj(vh)
            temps.append(vh)
            u = conj(u)
            temps.append(u)
        left = multiply(vh.mT, expand_dims(sinv, -2))  # (..., n, k), column j scaled
        temps.append(left)
        return matmul(left, u.mT)
    finally:
        _free(*temps)


def norm_max(a, axis, keepdims: bool = False):
    """``max`` for a norm: over nothing it is 0, as NumPy's norms answer (they are >= 0),
    where ``max`` of an empty sequence raises."""
    axes = tuple(ax % a.ndim for ax in ((axis,) if isinstance(axis, int) else axis))
    if a.ndim and any(a._shape[ax] == 0 for ax in axes):
        shape = tuple(1 if i in axes else n for i, n in enumerate(a._shape) if keepdims
                      or i not in axes)
        out = new_array(shape, a._dtype, a._storage.device, a._storage.kind)
        with filling(out):
            out.fill(0)
        return out
    return _max(a, axis=axis, keepdims=keepdims)


def svd_norm(x, kind, ord, keepdims: bool):
    """``matrix_norm`` with ord 2 (the largest singular value), -2 (the smallest) or
    ``"nuc"`` (their sum)."""
    s = svd(x, kind, False)[1]
    try:
        red = {2: norm_max, -2: _min}.get(ord, _sum)
        r = red(s, axis=-1)
    finally:
        s.free()
    if keepdims:
        out = r.reshape((*r._shape, 1, 1))
        return out
    return r
