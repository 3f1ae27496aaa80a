"""NumPy's polynomial functions (poly, polyval, polyfit, roots ...), exported as ``ga.<name>``.

NumPy's signatures and algorithms, composed of the namespace's device functions:
``poly`` multiplies out ``(x - z)`` factors (``polymul``'s step as two shifted
multiply-subtracts per root), ``polyval`` is Horner's scheme (one multiply-add per
coefficient), ``polymul`` is ``convolve``, ``polyfit`` a scaled Vandermonde matrix
solved by :func:`gpuarrays.linalg.lstsq`, ``roots`` the eigenvalues of the companion
matrix (:func:`gpuarrays.linalg.eigvals`).  Values read back to the host: the count
and positions of non-zero leading/trailing coefficients (``roots``), whether every
eigenvalue is real (``roots``, ``poly``: NumPy's result dtype depends on it), the rank
(``polyfit``'s warning).
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

from .._array.creation import asarray
from .._array.make import ArrayBase
from .._compute.creation import zeros
from .._compute.dtypes import astype
from .._compute.elementwise import abs as _abs
from .._compute.elementwise import (
    add,
    conj,
    divide,
    equal,
    imag,
    less_equal,
    multiply,
    negative,
    pow,
    real,
    sqrt,
    subtract,
)
from .._compute.linalg import check_arrays, matmul
from .._compute.manipulation import concat
from .._compute.numpy_api.products import convolve
from .._compute.searching import count_nonzero
from .._compute.sorting import sort
from .._compute.statistical import max as _max
from .._compute.statistical import sum as _sum
from .._compute.utility import all as _all

__all__ = ["poly", "polyadd", "polysub", "polymul", "polyval", "polyfit", "roots"]


class _Temps(list):
    def add(self, x):
        self.append(x)
        return x

    def free(self, *keep) -> None:
        ids = {id(k) for k in keep}
        for t in self:
            if id(t) not in ids:
                t.free()
        self.clear()


def _device_of(*xs):
    for x in xs:
        if isinstance(x, ArrayBase):
            return x.device
    return None


def _on(x, dev, temps: _Temps, name: str):
    """``x`` as a gpuarrays array on ``dev``: host values (scalars, lists -- the caller's
    own data, small) are made there with NumPy's dtype."""
    if isinstance(x, ArrayBase):
        check_arrays(name, x)
        if x.device != dev:
            raise ValueError(f"{name}(): operands are on different devices, {dev} and "
                             f"{x.device}; move one with x.to_device({str(dev)!r})")
        return x
    h = np.asarray(x)
    if h.dtype.kind not in "biufc":
        raise TypeError(f"{name}() takes numeric arrays, got {h.dtype}")
    return temps.add(asarray(h, device=dev))


def _1d(x, temps: _Temps):
    return temps.add(x.reshape((1,))) if x.ndim == 0 else x


def _float_of(dt: np.dtype, dev) -> np.dtype:
    """NumPy's ``mintypecode``: float32/complex64/complex128 kept, others float64 (float32
    on a device without float64)."""
    t = np.dtype(np.mintypecode(dt.char))
    if not dev.supports(t):
        t = np.dtype(np.complex64 if t.kind == "c" else np.float32)
    return t


def _all_true(x) -> bool:
    r = _all(x)
    try:
        return bool(r.get())
    finally:
        r.free()


def _closed_under_conj(z, temps: _Temps) -> bool:
    """NumPy's ``all(sort(z) == sort(z.conj()))`` (one value read back)."""
    a = temps.add(sort(z))
    b = temps.add(sort(temps.add(conj(z))))
    return _all_true(temps.add(equal(a, b)))


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots (a 1-d array), or of
    a square matrix's characteristic polynomial (from :func:`gpuarrays.linalg.eigvals`;
    real for a real matrix); real when the roots come in conjugate pairs (NumPy's test,
    exact).  ``1.0`` for no roots, as NumPy."""
    dev = _device_of(seq_of_zeros)
    if dev is None:
        raise TypeError("poly() takes a gpuarrays array; copy host data to the device first")
    temps = _Temps()
    result = None
    try:
        z = _1d(_on(seq_of_zeros, dev, temps, "poly"), temps)
        real_matrix = z.ndim == 2 and z.dtype.kind != "c"
        sh = z.shape
        if len(sh) == 2 and sh[0] == sh[1] and sh[0] != 0:
            from . import eigvals

            z = temps.add(eigvals(z))
        elif len(sh) == 1:
            dt = _float_of(z.dtype, dev)
            if z.dtype != dt:
                z = temps.add(astype(z, dt))
        else:
            raise ValueError(f"poly(): input must be 1d or non-empty square 2d array, got "
                             f"shape {sh}")
        if z.shape[0] == 0:
            return 1.0
        dt = z.dtype
        one = temps.add(zeros((1,), dtype=dt, device=dev))
        one.fill(1)
        nought = temps.add(zeros((1,), dtype=dt, device=dev))
        a = one
        for i in range(z.shape[0]):  # a * (x - z_i): a shifted left minus z_i * a
            za = temps.add(multiply(a, z[i]))
            left = temps.add(concat([a, nought]))
            right = temps.add(concat([nought, za]))
            a = temps.add(subtract(left, right))
        # a real matrix's characteristic polynomial is real: NumPy's LAPACK gives exact
        # conjugate pairs, this library's complex QR rounding-level differences
        if dt.kind == "c" and (real_matrix or _closed_under_conj(z, temps)):
            result = astype(temps.add(real(a)), np.finfo(dt).dtype, copy=True)
        else:
            result = a
        return result
    finally:
        temps.free(result)


def _pad_pair(name: str, a1, a2, op):
    dev = _device_of(a1, a2)
    if dev is None:
        raise TypeError(f"{name}() takes gpuarrays arrays")
    temps = _Temps()
    result = None
    try:
        x = _1d(_on(a1, dev, temps, name), temps)
        y = _1d(_on(a2, dev, temps, name), temps)
        diff = y.shape[0] - x.shape[0]
        if diff > 0:
            x = temps.add(concat([temps.add(zeros((diff,), dtype=x.dtype, device=dev)), x]))
        elif diff < 0:
            y = temps.add(concat([temps.add(zeros((-diff,), dtype=y.dtype, device=dev)), y]))
        result = op(x, y)
        return result
    finally:
        temps.free(result)


def polyadd(a1, a2):
    """The sum of two polynomials (coefficients highest power first; the shorter padded
    with leading zeros)."""
    return _pad_pair("polyadd", a1, a2, add)


def polysub(a1, a2):
    """The difference of two polynomials (``a1 - a2``, the shorter padded with leading
    zeros)."""
    return _pad_pair("polysub", a1, a2, subtract)


def polymul(a1, a2):
    """The product of two polynomials: :func:`convolve` of the coefficients, leading
    zeros trimmed first (NumPy makes ``poly1d`` objects of both; their positions are read
    back)."""
    dev = _device_of(a1, a2)
    if dev is None:
        raise TypeError("polymul() takes gpuarrays arrays")
    temps = _Temps()
    try:
        x = _trim_leading(_1d(_on(a1, dev, temps, "polymul"), temps), temps)
        y = _trim_leading(_1d(_on(a2, dev, temps, "polymul"), temps), temps)
        return convolve(x, y)
    finally:
        temps.free()


def _trim_leading(x, temps: _Temps):
    """``x`` without its leading zeros (``[0]`` when all are zero), as ``poly1d``."""
    from .._compute.indexing import nonzero

    if x.ndim != 1:
        raise ValueError(f"polymul(): polynomials must be 1d, got shape {x.shape}")
    (idx,) = nonzero(x)
    temps.add(idx)
    if idx.shape[0] == 0:
        return temps.add(x[:1] if x.shape[0] else zeros((1,), dtype=x.dtype, device=x.device))
    first = int(temps.add(idx[:1]).get()[0])
    return temps.add(x[first:]) if first else x


def polyval(p, x):
    """The polynomial ``p`` (highest power first) at ``x``, by Horner's scheme:
    ``y = y * x + p[i]``, one multiply and one add per coefficient, on ``x``'s shape."""
    dev = _device_of(p, x)
    if dev is None:
        raise TypeError("polyval() takes gpuarrays arrays")
    temps = _Temps()
    result = None
    try:
        pp = _on(p, dev, temps, "polyval")
        if pp.ndim != 1:
            pp = temps.add(pp.reshape((-1,)))  # NumPy iterates over p's first axis
        xx = _on(x, dev, temps, "polyval")
        y = temps.add(zeros(xx.shape, dtype=xx.dtype, device=dev))
        for i in range(pp.shape[0]):
            y = temps.add(add(temps.add(multiply(y, xx)), pp[i]))
        result = y
        return result
    finally:
        temps.free(result)


def _float_array(x, dev, temps: _Temps, name: str):
    """NumPy's ``asarray(x) + 0.0``: ints and bools to float64, floats kept."""
    a = _on(x, dev, temps, name)
    if a.dtype.kind in "fc":
        return a
    t = np.dtype(np.float64) if dev.supports(np.float64) else np.dtype(np.float32)
    return temps.add(astype(a, t))


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """NumPy's least-squares polynomial fit of degree ``deg``: the Vandermonde matrix of
    ``x`` (weighted by ``w``), its columns scaled to unit norm, solved by
    :func:`gpuarrays.linalg.lstsq`; ``full=True`` returns ``(p, residuals, rank, s,
    rcond)``, ``cov=True`` (or ``'unscaled'``) ``(p, V)`` with ``V`` from ``inv(A^T A)``.
    NumPy's ``RankWarning`` when the matrix is rank-deficient."""
    from . import inv, lstsq

    dev = _device_of(x, y, w)
    if dev is None:
        raise TypeError("polyfit() takes gpuarrays arrays")
    try:
        order = operator.index(deg) + 1
    except TypeError:
        raise TypeError(f"polyfit(): deg must be an int, got {deg!r}") from None
    if order < 1:
        raise ValueError(f"polyfit(): expected deg >= 0, got {deg}")
    temps = _Temps()
    made: list = []
    try:
        xf = _float_array(x, dev, temps, "polyfit")
        yf = _float_array(y, dev, temps, "polyfit")
        if xf.ndim != 1:
            raise TypeError(f"polyfit(): expected 1D vector for x, got shape {xf.shape}")
        if xf.size == 0:
            raise TypeError("polyfit(): expected non-empty vector for x")
        if yf.ndim < 1 or yf.ndim > 2:
            raise TypeError(f"polyfit(): expected 1D or 2D array for y, got shape {yf.shape}")
        if xf.shape[0] != yf.shape[0]:
            raise TypeError(f"polyfit(): expected x and y to have same length, got "
                            f"{xf.shape[0]} and {yf.shape[0]}")
        dt = np.result_type(xf.dtype, yf.dtype)
        if rcond is None:
            rcond = xf.shape[0] * np.finfo(xf.dtype).eps  # a NumPy scalar, as NumPy's
        powers = temps.add(asarray(np.arange(order - 1, -1, -1, dtype=xf.dtype), device=dev))
        lhs = temps.add(pow(temps.add(xf.reshape((-1, 1))), powers))  # vander(x, order)
        rhs = yf
        if w is not None:
            wf = _float_array(w, dev, temps, "polyfit")
            if wf.ndim != 1:
                raise TypeError(f"polyfit(): expected a 1-d array for weights, got shape "
                                f"{wf.shape}")
            if wf.shape[0] != yf.shape[0]:
                raise TypeError(f"polyfit(): expected w and y to have the same length, got "
                                f"{wf.shape[0]} and {yf.shape[0]}")
            wc = temps.add(wf.reshape((-1, 1)))
            lhs = temps.add(multiply(lhs, wc))
            rhs = temps.add(multiply(rhs, wc if rhs.ndim == 2 else wf))
        if lhs.dtype != dt:
            lhs = temps.add(astype(lhs, dt))
        scale = temps.add(sqrt(temps.add(_sum(temps.add(multiply(lhs, lhs)), axis=0))))
        lhs = temps.add(divide(lhs, scale))
        c, resids, rank, s = lstsq(lhs, rhs, rcond)
        temps.add(c)
        made += [resids, s]
        sc = temps.add(scale.reshape((order, 1)) if c.ndim == 2 else scale)
        cs = divide(c, sc)  # (c.T / scale).T
        made.append(cs)
        if rank != order and not full:
            warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning,
                          stacklevel=2)
        if full:
            return cs, resids, rank, s, rcond
        temps.extend([resids, s])
        made = [cs]
        if not cov:
            return cs
        lt = lhs.mT
        if dt.kind == "c":
            lt = temps.add(conj(lt))
        vbase = temps.add(inv(temps.add(matmul(lt, lhs))))
        outer_s = temps.add(multiply(temps.add(scale.reshape((-1, 1))),
                                     temps.add(scale.reshape((1, -1)))))
        vbase = temps.add(divide(vbase, outer_s))
        if cov == "unscaled":
            fac = 1.0
        else:
            if xf.shape[0] <= order:
                raise ValueError("polyfit(): the number of data points must exceed order to "
                                 "scale the covariance matrix; pass cov='unscaled'")
            fac = temps.add(divide(resids, xf.shape[0] - order))
        if yf.ndim == 1:
            v = multiply(vbase, fac)
        else:
            v = multiply(temps.add(vbase.reshape((order, order, 1))), fac)
        return cs, v
    except BaseException:
        for k in made:
            k.free()
        raise
    finally:
        temps.free()


def _real_roots(r, n: int, temps: _Temps) -> bool:
    """Whether the eigenvalues ``r`` of a real companion matrix are all real: NumPy's
    LAPACK answers exact zeros there, this library's complex-arithmetic QR rounding-level
    imaginary parts, so ``|imag| <= 16 n eps max|r|`` counts as real (one value read)."""
    mag = temps.add(_abs(r))
    big = temps.add(_max(mag))
    tol = temps.add(multiply(big, 16.0 * n * float(np.finfo(mag.dtype).eps)))
    return _all_true(temps.add(less_equal(temps.add(_abs(temps.add(imag(r)))), tol)))


def roots(p):
    """The roots of the polynomial ``p`` (highest power first): the eigenvalues of its
    companion matrix (:func:`gpuarrays.linalg.eigvals`), plus a zero per trailing zero
    coefficient; real when every eigenvalue's imaginary part is exactly zero (NumPy's
    dtype rule).  The order of the roots is the eigenvalue solver's, which may differ
    from LAPACK's on device back-ends."""
    from . import eigvals

    dev = _device_of(p)
    if dev is None:
        raise TypeError("roots() takes a gpuarrays array")
    temps = _Temps()
    result = None
    try:
        pp = _1d(_on(p, dev, temps, "roots"), temps)
        if pp.ndim != 1:
            raise ValueError(f"roots(): input must be a rank-1 array, got shape {pp.shape}")
        nz = temps.add(count_nonzero(pp))
        if int(nz.get()) == 0:
            result = zeros((0,), dtype=_float_of(np.dtype(np.float64), dev), device=dev)
            return result
        from .._compute.indexing import nonzero

        (idx,) = nonzero(pp)
        temps.add(idx)
        first, last = (int(v) for v in temps.add(concat([idx[:1], idx[-1:]])).get())
        trailing = pp.shape[0] - last - 1
        pp = temps.add(pp[first:last + 1])
        if pp.dtype.kind not in "fc":
            pp = temps.add(astype(pp, _float_of(np.dtype(np.float64), dev)))
        n = pp.shape[0]
        if n > 1:
            a = temps.add(zeros((n - 1, n - 1), dtype=pp.dtype, device=dev))
            if n > 2:  # ones on the subdiagonal: a writeable strided view, filled
                d = temps.add(a.diagonal(-1, 0, 1))
                temps.add(a._derive(d._shape, d._strides, d._offset, d._dtype, True)).fill(1)
            a[0, :] = temps.add(negative(temps.add(divide(pp[1:], pp[0]))))
            r = temps.add(eigvals(a))
            if pp.dtype.kind != "c" and _real_roots(r, n - 1, temps):
                r = temps.add(astype(temps.add(real(r)), pp.dtype))
        else:
            r = temps.add(zeros((0,), dtype=pp.dtype, device=dev))
        if trailing:
            result = concat([r, temps.add(zeros((trailing,), dtype=r.dtype, device=dev))])
        else:
            result = astype(r, r.dtype, copy=True)
        return result
    finally:
        temps.free(result)
