"""NumPy's NaN-skipping reductions, order statistics, histograms, averages, cov, gradient.

Every function takes NumPy 2.4's signature and computes on the array's device as a
composition of the namespace's functions (``where``, ``isnan``, ``sum``, ``sort``,
``take``, ``searchsorted``, ``cumulative_sum``, ``matmul`` ...): no bulk data reaches
the host.  A few scalars are read back where NumPy's answer depends on them (a warning
for an all-NaN slice, the range of a histogram, the length of ``bincount``).
Temporaries are freed as soon as they are used (``_Temps``).  Integer inputs to the
floating results (``nanmean``, ``median`` ...) give float64, float32 on a device
without float64 (docs/numpy.md, "Statistics").
"""

from __future__ import annotations

import builtins
import math
import operator
import warnings

import numpy as np

from ..._array.hooks import HOOKS
from ..._array.make import ArrayBase
from ..reductions import normalize_axes
from ..statistical import write_into

__all__ = ["nansum", "nanprod", "nanmean", "nanmax", "nanmin", "nanargmax", "nanargmin",
           "nanstd", "nanvar", "nancumsum", "nancumprod", "ptp"]

_NoValue = np._NoValue


# --------------------------------------------------------------------------- helpers

def _ga():
    """The full ``gpuarrays`` namespace (resolved when called: it imports this module)."""
    return HOOKS.namespace(None)


class _Temps(list):
    """Temporaries of one call, freed when the ``with`` block ends however it ends."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for t in self:
            if isinstance(t, ArrayBase):
                t.free()
        self.clear()
        return False

    def __call__(self, a):
        self.append(a)
        return a

    def keep(self, a) -> None:
        """Take ``a`` off the list (it is the result)."""
        self[:] = [x for x in self if x is not a]


def _check(name: str, a, what: str = "a"):
    if not isinstance(a, ArrayBase):
        raise TypeError(f"{name}(): {what} must be a gpuarrays array, got "
                        f"{type(a).__name__}; copy host data to the device with "
                        f"ga.asarray({what}) first")
    return a


def _same_device(name: str, a, b, what: str):
    if b.device != a.device:
        raise ValueError(f"{name}(): the array is on {a.device} and {what} on {b.device}; "
                         f"move one with .to_device(...)")


def _param(name: str, value, like, what: str, dtype=None):
    """A small parameter array (weights, bins, spacing) on ``like``'s device: a gpuarrays
    array as it is (same device), host data uploaded (it is a parameter, not bulk data)."""
    if isinstance(value, ArrayBase):
        _same_device(name, like, value, what)
        return value, False
    if dtype is None:
        return _ga().asarray(np.asarray(value), device=like.device), True
    return _ga().asarray(np.asarray(value, dtype=dtype), device=like.device), True


def _keepdims(keepdims) -> bool:
    return False if keepdims is _NoValue else bool(keepdims)


def _float_dtype(dev, complex_: bool = False) -> np.dtype:
    """The device's widest floating type (float64, float32 without float64)."""
    wide = dev.supports(np.float64)
    if complex_:
        return np.dtype(np.complex128 if wide else np.complex64)
    return np.dtype(np.float64 if wide else np.float32)


def _inexact_result(a, dtype=None) -> np.dtype:
    """NumPy's result type of a mean-like reduction: ``dtype``, else a float input's own
    type, else the device's float64 (float32 without it)."""
    if dtype is not None:
        return np.dtype(dtype)
    if a.dtype.kind in "fc":
        return a.dtype
    return _float_dtype(a.device)


def _finish(name: str, result, out):
    if out is None:
        return result
    if not isinstance(out, ArrayBase):
        raise TypeError(f"{name}(): out must be a gpuarrays array, got {type(out).__name__}")
    return write_into(name, result, out)


def _where_mask(name: str, a, where):
    """``where=`` as a bool array on ``a``'s device (None when not given)."""
    if where is _NoValue or where is True:
        return None
    if isinstance(where, ArrayBase):
        _same_device(name, a, where, "where")
        if where.dtype != np.bool_:
            raise TypeError(f"{name}(): where must be a bool array, got {where.dtype}; "
                            f"compare first (a > 0)")
        return where
    if where is False or isinstance(where, (np.ndarray, list, tuple, np.bool_)):
        return _ga().asarray(np.asarray(where, dtype=bool), device=a.device)
    raise TypeError(f"{name}(): where must be a bool array or True/False, got "
                    f"{type(where).__name__}")


def _valid(name: str, a, where, t: _Temps):
    """The elements a NaN-skipping reduction uses: not NaN (floats) and in ``where``;
    None when that is every element."""
    ga = _ga()
    mask = _where_mask(name, a, where)
    if mask is not None and not isinstance(where, ArrayBase):
        t(mask)
    if a.dtype.kind in "fc":
        ok = t(ga.logical_not(t(ga.isnan(a))))
        if mask is not None:
            ok = t(ga.logical_and(ok, mask))
        return ok
    if mask is not None:
        return t(ga.broadcast_to(mask, a.shape)) if mask.shape != a.shape else mask
    return None


def _count(a, axes: tuple, valid, keepdims: bool, t: _Temps):
    """How many elements each output of a reduction over ``axes`` uses: an int64 array,
    or a Python int when every element counts."""
    if valid is None:
        return math.prod(a.shape[i] for i in axes)
    return t(_ga().sum(valid, axis=axes, keepdims=keepdims))


def _any_true(x) -> bool:
    """One bool read back from the device (a warning or an error depends on it)."""
    if isinstance(x, (bool, int, np.bool_)):
        return bool(x)
    if x.size == 0:
        return False
    r = _ga().any(x)
    try:
        return bool(r)
    finally:
        r.free()


# --------------------------------------------------------------------------- nan reductions

def _replaced(name: str, a, where, fill, t: _Temps):
    """``a`` with the elements a NaN-skipping reduction leaves out set to ``fill``."""
    valid = _valid(name, a, where, t)
    if valid is None:
        return a, None
    return t(_ga().where(valid, a, fill)), valid


def nansum(a, axis=None, dtype=None, out=None, keepdims=_NoValue, initial=_NoValue,
           where=_NoValue):
    """The sum over ``axis`` treating NaN as zero (NumPy's ``nansum``): ``where(isnan(a),
    0, a)`` then :func:`gpuarrays.sum`; an all-NaN slice sums to 0."""
    return _nan_fold("nansum", "sum", "add", 0, a, axis, dtype, out, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=_NoValue, initial=_NoValue,
            where=_NoValue):
    """The product over ``axis`` treating NaN as one (NumPy's ``nanprod``)."""
    return _nan_fold("nanprod", "prod", "multiply", 1, a, axis, dtype, out, keepdims, initial,
                     where)


def _nan_fold(name, reduction, combine, identity, a, axis, dtype, out, keepdims, initial, where):
    """NaN replaced by ``identity``, then the namespace's ``reduction``; ``initial`` is
    combined with the result by ``combine`` in the result's dtype."""
    _check(name, a)
    ga = _ga()
    with _Temps() as t:
        y, _ = _replaced(name, a, where, identity, t)
        r = getattr(ga, reduction)(y, axis=axis, dtype=dtype, keepdims=_keepdims(keepdims))
        if initial is not _NoValue:
            with r:
                r = getattr(ga, combine)(r, initial).astype(r.dtype, copy=False)
    return _finish(name, r, out)


def _mean_parts(name: str, a, axis, dtype, keepdims: bool, where, t: _Temps):
    """(sum in the accumulation type, count, result dtype) of a NaN-skipping mean."""
    ga = _ga()
    axes = normalize_axes(name, axis, a.ndim)
    rt = _inexact_result(a, dtype)
    acc = _float_dtype(a.device, rt.kind == "c" or a.dtype.kind == "c")
    y, valid = _replaced(name, a, where, 0, t)
    tot = t(ga.sum(y, axis=axes, dtype=acc, keepdims=keepdims))
    return tot, _count(a, axes, valid, keepdims, t), rt


def _divide_count(tot, cnt, t: _Temps):
    ga = _ga()
    real = _float_dtype(tot.device)
    if isinstance(cnt, int):
        return t(ga.divide(tot, float(cnt))) if cnt else t(ga.multiply(tot, math.nan))
    return t(ga.divide(tot, t(cnt.astype(real))))


def nanmean(a, axis=None, dtype=None, out=None, keepdims=_NoValue, *, where=_NoValue):
    """The mean over ``axis`` of the non-NaN elements: the sum of ``where(isnan(a), 0, a)``
    over the count of non-NaN elements.  An all-NaN (or empty) slice gives NaN and NumPy's
    ``RuntimeWarning`` ("Mean of empty slice").  Integers give float64 (float32 on a device
    without float64)."""
    name = "nanmean"
    _check(name, a)
    with _Temps() as t:
        tot, cnt, rt = _mean_parts(name, a, axis, dtype, _keepdims(keepdims), where, t)
        if (cnt == 0) if isinstance(cnt, int) else _any_true(t(cnt == 0)):
            warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=2)
        r = _divide_count(tot, cnt, t).astype(rt)
    return _finish(name, r, out)


def _nanvar(name, a, axis, dtype, ddof, keepdims, where, mean, correction, t: _Temps):
    ga = _ga()
    if correction is not _NoValue:
        if ddof != 0:
            raise ValueError(f"{name}(): ddof and correction can't be provided simultaneously;"
                             f" give one of them")
        ddof = correction
    kd = _keepdims(keepdims)
    axes = normalize_axes(name, axis, a.ndim)
    rt = _inexact_result(a, dtype)
    if rt.kind == "c":
        rt = np.dtype(rt.char.lower()) if rt.char in "FD" else rt
        rt = np.finfo(rt).dtype
    acc = _float_dtype(a.device, a.dtype.kind == "c")
    valid = _valid(name, a, where, t)
    x = a if a.dtype == acc else t(a.astype(acc))
    if mean is not _NoValue:
        avg = mean
        if not isinstance(avg, ArrayBase):
            avg = t(ga.asarray(np.asarray(avg), device=a.device))
    else:
        y = x if valid is None else t(ga.where(valid, x, 0))
        tot = t(ga.sum(y, axis=axes, keepdims=True))
        avg = _divide_count(tot, _count(a, axes, valid, True, t), t)
    d = t(ga.subtract(x, avg))
    if valid is not None:
        d = t(ga.where(valid, d, 0))
    sq = t(ga.real(t(ga.multiply(d, t(ga.conj(d)))))) if d.dtype.kind == "c" \
        else t(ga.multiply(d, d))
    ss = t(ga.sum(sq, axis=axes, keepdims=kd))
    cnt = _count(a, axes, valid, kd, t)
    if isinstance(cnt, int):
        dof = cnt - ddof
        if dof <= 0:
            warnings.warn("Degrees of freedom <= 0 for slice.", RuntimeWarning, stacklevel=3)
            return t(ga.multiply(ss, math.nan)), rt
        return t(ga.divide(ss, float(dof))), rt
    dof = t(ga.subtract(t(cnt.astype(ss.dtype)), ddof))
    bad = t(ga.less_equal(dof, 0))
    if _any_true(bad):
        warnings.warn("Degrees of freedom <= 0 for slice.", RuntimeWarning, stacklevel=3)
    v = t(ga.where(bad, math.nan, t(ga.divide(ss, dof))))
    return v, rt


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=_NoValue, *, where=_NoValue,
           mean=_NoValue, correction=_NoValue):
    """The variance over ``axis`` of the non-NaN elements (two passes: the mean of the
    non-NaN elements, then the sum of squared deviations over ``count - ddof``).  A slice
    with ``count - ddof <= 0`` gives NaN and NumPy's ``RuntimeWarning``."""
    name = "nanvar"
    _check(name, a)
    with _Temps() as t:
        v, rt = _nanvar(name, a, axis, dtype, ddof, keepdims, where, mean, correction, t)
        r = v.astype(rt)
    return _finish(name, r, out)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=_NoValue, *, where=_NoValue,
           mean=_NoValue, correction=_NoValue):
    """The square root of :func:`nanvar`."""
    name = "nanstd"
    _check(name, a)
    with _Temps() as t:
        v, rt = _nanvar(name, a, axis, dtype, ddof, keepdims, where, mean, correction, t)
        r = t(_ga().sqrt(v)).astype(rt)
    return _finish(name, r, out)


def _extreme(name: str, a, axis, out, keepdims, initial, where, largest: bool):
    ga = _ga()
    _check(name, a)
    kd = _keepdims(keepdims)
    reduce_ = ga.max if largest else ga.min
    pick = ga.maximum if largest else ga.minimum
    mask = _where_mask(name, a, where)
    if mask is not None and initial is _NoValue:
        raise ValueError(f"{name}(): reduction operation {'fmax' if largest else 'fmin'} does "
                         f"not have an identity, so to use a where mask one has to specify "
                         f"'initial'")
    with _Temps() as t:
        if mask is not None and not isinstance(where, ArrayBase):
            t(mask)
        if a.dtype.kind not in "fc":
            y = a if mask is None else t(ga.where(mask, a, initial))
            r = reduce_(y, axis=axis, keepdims=kd)
            if initial is not _NoValue:
                with r:
                    r = pick(r, initial).astype(r.dtype, copy=False)
            return _finish(name, r, out)
        nan = t(ga.isnan(a))
        ok = t(ga.logical_not(nan)) if mask is None else \
            t(ga.logical_and(t(ga.logical_not(nan)), mask))
        fill = (-math.inf if largest else math.inf) if initial is _NoValue else initial
        y = t(ga.where(ok, a, fill))
        r = t(reduce_(y, axis=axis, keepdims=kd))
        if initial is not _NoValue:
            r = t(pick(r, initial))
        else:
            none = t(ga.logical_not(t(ga.any(ok, axis=axis, keepdims=kd))))
            if _any_true(none):
                warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=3)
            r = t(ga.where(none, math.nan, r))
        result = r.astype(a.dtype)
    return _finish(name, result, out)


def nanmax(a, axis=None, out=None, keepdims=_NoValue, initial=_NoValue, where=_NoValue):
    """The largest non-NaN element over ``axis``: :func:`gpuarrays.max` of
    ``where(isnan(a), -inf, a)``; an all-NaN slice gives NaN and NumPy's
    ``RuntimeWarning``; ``ValueError`` for a zero-size reduction, as NumPy."""
    return _extreme("nanmax", a, axis, out, keepdims, initial, where, True)


def nanmin(a, axis=None, out=None, keepdims=_NoValue, initial=_NoValue, where=_NoValue):
    """The smallest non-NaN element over ``axis`` (see :func:`nanmax`)."""
    return _extreme("nanmin", a, axis, out, keepdims, initial, where, False)


def _arg_extreme(name: str, a, axis, out, keepdims, largest: bool):
    ga = _ga()
    _check(name, a)
    kd = _keepdims(keepdims)
    fn = ga.argmax if largest else ga.argmin
    if a.dtype.kind not in "fc":
        return _finish(name, fn(a, axis=axis, keepdims=kd), out)
    if a.size == 0:
        return _finish(name, fn(a, axis=axis, keepdims=kd), out)  # NumPy's ValueError
    with _Temps() as t:
        nan = t(ga.isnan(a))
        if _any_true(t(ga.all(nan, axis=axis))):
            raise ValueError(f"{name}(): All-NaN slice encountered; an index of the "
                             f"non-NaN element needs one in every slice (nan_to_num or a "
                             f"mask first)")
        y = t(ga.where(nan, -math.inf if largest else math.inf, a))
        r = fn(y, axis=axis, keepdims=kd)
    return _finish(name, r, out)


def nanargmax(a, axis=None, out=None, *, keepdims=_NoValue):
    """The index of the largest non-NaN element over ``axis`` (the first on ties):
    :func:`gpuarrays.argmax` of ``where(isnan(a), -inf, a)``; ``ValueError`` for an
    all-NaN slice, as NumPy."""
    return _arg_extreme("nanargmax", a, axis, out, keepdims, True)


def nanargmin(a, axis=None, out=None, *, keepdims=_NoValue):
    """The index of the smallest non-NaN element over ``axis`` (see :func:`nanargmax`)."""
    return _arg_extreme("nanargmin", a, axis, out, keepdims, False)


def _nanscan(name: str, a, axis, dtype, out, fill, product: bool):
    ga = _ga()
    _check(name, a)
    with _Temps() as t:
        y, _ = _replaced(name, a, _NoValue, fill, t)
        if axis is None:
            if y.ndim != 1:
                y = t(ga.reshape(y, (-1,)))
            axis = 0
        fn = ga.cumulative_prod if product else ga.cumulative_sum
        r = fn(y, axis=axis, dtype=dtype)
    return _finish(name, r, out)


def nancumsum(a, axis=None, dtype=None, out=None):
    """The running sum along ``axis`` (``None``: of the flattened array) treating NaN as
    zero: :func:`gpuarrays.cumulative_sum` of ``where(isnan(a), 0, a)``."""
    return _nanscan("nancumsum", a, axis, dtype, out, 0, False)


def nancumprod(a, axis=None, dtype=None, out=None):
    """The running product along ``axis`` treating NaN as one."""
    return _nanscan("nancumprod", a, axis, dtype, out, 1, True)


def ptp(a, axis=None, out=None, keepdims=_NoValue):
    """``max - min`` over ``axis`` in ``a``'s dtype (integers wrap, as in NumPy)."""
    name = "ptp"
    _check(name, a)
    ga = _ga()
    kd = _keepdims(keepdims)
    with _Temps() as t:
        r = ga.subtract(t(ga.max(a, axis=axis, keepdims=kd)),
                        t(ga.min(a, axis=axis, keepdims=kd)))
    return _finish(name, r, out)


# --------------------------------------------------------------------------- order statistics

__all__ += ["median", "nanmedian", "percentile", "quantile"]

_DISCRETE = ("inverted_cdf", "closest_observation", "lower", "higher", "nearest")
_CONTINUOUS = {  # method -> (alpha, beta) of Hyndman & Fan, or None for a rule of its own
    "linear": None, "averaged_inverted_cdf": None, "midpoint": None,
    "interpolated_inverted_cdf": (0.0, 1.0), "hazen": (0.5, 0.5), "weibull": (0.0, 0.0),
    "median_unbiased": (1 / 3.0, 1 / 3.0), "normal_unbiased": (3 / 8.0, 3 / 8.0)}
_METHODS = (*_DISCRETE, *_CONTINUOUS)


def _sorted_last(name: str, a, axis, t: _Temps):
    """``a`` with the axes of ``axis`` moved last and merged into one, sorted along it
    (NaN last): (sorted array, reduced axes, their element count)."""
    ga = _ga()
    axes = normalize_axes(name, axis, a.ndim)
    kept = [i for i in range(a.ndim) if i not in axes]
    x = a
    if kept + list(axes) != list(range(a.ndim)):
        x = t(ga.permute_dims(a, tuple(kept) + axes))
    n = math.prod(a.shape[i] for i in axes)
    shape = tuple(a.shape[i] for i in kept) + (n,)
    if x.shape != shape:
        x = t(ga.reshape(x, shape))
    return t(ga.sort(x, axis=-1)), axes, n


def _placed(r, a, axes, lead: tuple, keepdims: bool, t: _Temps):
    """A result computed as ``kept + (m,)`` (``m`` values of ``q``, 1 for a scalar ``q``)
    as NumPy's ``q.shape + kept`` (the reduced axes kept as 1 under ``keepdims``); a new
    array that outlives ``t``."""
    ga = _ga()
    if lead != ():
        r = t(ga.moveaxis(r, -1, 0))
    kept = tuple(1 if i in axes else a.shape[i] for i in range(a.ndim)) if keepdims \
        else tuple(a.shape[i] for i in range(a.ndim) if i not in axes)
    result = ga.reshape(r, lead + kept)
    t.keep(result)
    return result


def _virtual_index(method: str, n: int, q: np.ndarray) -> tuple:
    """NumPy's indices for ``method`` over ``n`` sorted values, on the host (``q`` is a
    parameter of a few values): (previous index, next index, gamma or None)."""
    if method == "lower":
        return np.floor((n - 1) * q).astype(np.intp), None, None
    if method == "higher":
        return np.ceil((n - 1) * q).astype(np.intp), None, None
    if method == "nearest":
        return np.around((n - 1) * q).astype(np.intp), None, None
    if method in ("inverted_cdf", "closest_observation"):
        if method == "inverted_cdf":
            index = n * q - 1
            cond = lambda g, i: g == 0  # noqa: E731
        else:
            index = n * q - 1 - 0.5
            cond = lambda g, i: (g == 0) & (np.floor(i) % 2 == 1)  # noqa: E731
        prev = np.floor(index)
        res = np.where(cond(index - prev, index), prev, prev + 1).astype(np.intp)
        return np.clip(res, 0, max(n - 1, 0)), None, None
    if method == "linear":
        vi = (n - 1) * q
    elif method == "averaged_inverted_cdf":
        vi = n * q - 1
    elif method == "midpoint":
        vi = 0.5 * (np.floor((n - 1) * q) + np.ceil((n - 1) * q))
    else:
        alpha, beta = _CONTINUOUS[method]
        vi = n * q + (alpha + q * (1 - alpha - beta)) - 1
    vi = np.asarray(vi, dtype=q.dtype)
    prev = np.floor(vi)
    nxt = prev + 1
    above = vi >= n - 1
    prev[above] = -1
    nxt[above] = -1
    below = vi < 0
    prev[below] = 0
    nxt[below] = 0
    gamma = np.asarray(vi - prev)
    if method == "averaged_inverted_cdf":
        gamma = np.where(gamma == 0, 0.5, 1.0)
    elif method == "midpoint":
        gamma = np.where(vi % 1 == 0, 0.0, 0.5)
    gamma = np.asarray(gamma, dtype=vi.dtype)
    prev = prev.astype(np.intp) % max(n, 1)
    nxt = nxt.astype(np.intp) % max(n, 1)
    return prev, nxt, gamma


def _host_q(name: str, q, percent: bool):
    """``q`` as a host float array (a parameter: a gpuarrays ``q`` is read back), whether
    it was a Python scalar (NumPy's weak ``q``), checked against NumPy's range."""
    weak = isinstance(q, (int, float)) and not isinstance(q, bool)
    if isinstance(q, ArrayBase):
        q = q.get()
    qh = np.asanyarray(q)
    if qh.dtype.kind not in "biuf":
        raise TypeError(f"{name}(): q must be real numbers, got dtype {qh.dtype}")
    if qh.dtype.kind != "f":
        qh = qh.astype(np.float64)
    if percent:
        qh = np.true_divide(qh, 100)
        qh = np.asanyarray(qh)
    if qh.ndim > 2:
        raise ValueError(f"{name}(): q must be a scalar or 1d, got shape {qh.shape}")
    if qh.size and not (np.all(qh >= 0) and np.all(qh <= 1)):
        what = "Percentiles must be in the range [0, 100]" if percent \
            else "Quantiles must be in the range [0, 1]"
        raise ValueError(f"{name}(): {what}, got {q!r}")
    return qh, weak


def _quantile(name: str, a, q, axis, out, method, keepdims, weights, percent: bool):
    ga = _ga()
    _check(name, a)
    if method not in _METHODS:
        raise ValueError(f"{name}(): {method!r} is not a valid method. Use one of: "
                         f"{', '.join(_METHODS)}")
    if a.dtype.kind == "c":
        raise TypeError(f"{name}(): a must be an array of real numbers, got {a.dtype}")
    qh, weak = _host_q(name, q, percent)
    if weights is not None and method != "inverted_cdf":
        raise ValueError(f"{name}(): Only method 'inverted_cdf' supports weights, got "
                         f"method={method!r}")
    discrete = method in _DISCRETE
    if discrete:
        rt = a.dtype
    else:
        rt = np.result_type(a.dtype, float(0) if weak else qh.dtype)
        if rt.kind not in "fc":
            rt = np.dtype(np.float64)
        if not a.device.supports(rt):
            rt = _float_dtype(a.device)
    with _Temps() as t:
        if weights is not None:
            r, axes = _weighted_inverted_cdf(name, a, qh, axis, weights, t)
        else:
            s, axes, n = _sorted_last(name, a, axis, t)
            if n == 0:
                raise IndexError(f"{name}(): index -1 is out of bounds for axis 0 with size 0:"
                                 f" no quantile of an empty slice")
            prev, nxt, gamma = _virtual_index(method, n, qh.reshape(-1))
            pi = t(ga.asarray(prev, device=a.device))
            lo = t(ga.take(s, pi, axis=-1))
            if gamma is None:
                r = lo
            else:
                lo = t(lo.astype(rt))
                hi = t(t(ga.take(s, t(ga.asarray(nxt, device=a.device)), axis=-1)).astype(rt))
                g = float(gamma[0]) if weak else t(ga.asarray(gamma.astype(rt), device=a.device))
                diff = t(ga.subtract(hi, lo))
                up = t(ga.add(lo, t(ga.multiply(diff, g))))
                down = t(ga.subtract(hi, t(ga.multiply(diff, 1 - g if weak
                                                        else t(ga.subtract(1, g))))))
                big = (g >= 0.5) if weak else t(ga.greater_equal(g, 0.5))
                r = t(ga.where(big, down, up)) if not isinstance(big, bool) else \
                    (down if big else up)
            if a.dtype.kind == "f":
                last = s[..., -1:]
                nan = t(ga.isnan(last))
                t(last)
                r = t(ga.where(nan, math.nan, r))
        r = t(r.astype(rt)) if r.dtype != rt else r
        result = _placed(r, a, axes, qh.shape, bool(keepdims), t)
    return _finish(name, result, out)


def _weighted_inverted_cdf(name: str, a, qh, axis, weights, t: _Temps):
    """method="inverted_cdf" with weights: argsort along the (merged) axes, the weights'
    running sum normalised to 1, the first index whose cumulated weight reaches each q
    (a count of the smaller ones, the broadcast comparison ``cdf < q``)."""
    ga = _ga()
    weights, up = _param(name, weights, a, "weights")
    if up:
        t(weights)
    axes = normalize_axes(name, axis, a.ndim)
    if weights.shape != a.shape:
        if weights.ndim != 1 or len(axes) != 1 or weights.shape[0] != a.shape[axes[0]]:
            raise ValueError(f"{name}(): weights of shape {weights.shape} do not match a of "
                             f"shape {a.shape}; give weights of a's shape, or 1-d along a "
                             f"single axis")
        shape = [1] * a.ndim
        shape[axes[0]] = a.shape[axes[0]]
        weights = t(ga.broadcast_to(t(ga.reshape(weights, tuple(shape))), a.shape))
    if _any_true(t(ga.less(weights, 0))):
        raise ValueError(f"{name}(): Weights must be non-negative.")
    kept = [i for i in range(a.ndim) if i not in axes]
    n = math.prod(a.shape[i] for i in axes)
    lead = tuple(a.shape[i] for i in kept)

    def last(x):
        if kept + list(axes) != list(range(a.ndim)):
            x = t(ga.permute_dims(x, tuple(kept) + axes))
        return t(ga.reshape(x, lead + (n,), copy=True))

    x, w = last(a), last(weights)
    if n == 0:
        raise IndexError(f"{name}(): index -1 is out of bounds for axis 0 with size 0: no "
                         f"quantile of an empty slice")
    order = t(ga.argsort(x, axis=-1))
    sv = t(ga.take_along_axis(x, order, axis=-1))
    sw = t(t(ga.take_along_axis(w, order, axis=-1)).astype(_float_dtype(a.device)))
    cdf = t(ga.cumulative_sum(sw, axis=-1))
    cdf = t(ga.divide(cdf, cdf[..., -1:]))
    if _any_true(t(ga.isnan(cdf[..., -1:]))):
        raise ValueError(f"{name}(): Weights included NaN, inf or were all zero.")
    if qh.dtype.kind == "f" and cdf.dtype != qh.dtype and a.device.supports(qh.dtype):
        cdf = t(cdf.astype(qh.dtype))
    cdf = t(ga.where(t(ga.equal(cdf, 0)), -1, cdf))
    qd = t(ga.asarray(qh.reshape(-1).astype(cdf.dtype), device=a.device))
    below = t(ga.less(t(ga.expand_dims(cdf, axis=-1)), qd))  # (..., n, nq)
    idx = t(ga.minimum(t(ga.sum(below, axis=-2)), n - 1))
    r = t(ga.take_along_axis(sv, idx, axis=-1))
    if a.dtype.kind == "f":
        r = t(ga.where(t(ga.isnan(sv[..., -1:])), math.nan, r))
    return r, axes


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    """The ``q``-th quantiles over ``axis`` by every method NumPy has: ``ga.sort`` along the
    (merged) axes, then ``take`` at the indices NumPy's method gives (computed on the host
    from ``q``, a parameter) and its interpolation; a slice holding NaN gives NaN.
    ``weights`` with ``method="inverted_cdf"`` only, as NumPy.  ``overwrite_input`` is
    accepted and changes nothing (the input is never modified)."""
    return _quantile("quantile", a, q, axis, out, method, keepdims, weights, False)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    """:func:`quantile` with ``q`` in percent."""
    return _quantile("percentile", a, q, axis, out, method, keepdims, weights, True)


def _median(name: str, a, axis, out, keepdims, skip_nan: bool):
    ga = _ga()
    _check(name, a)
    if a.dtype.kind == "c":
        raise TypeError(f"{name}(): a must be an array of real numbers, got {a.dtype}")
    kd = _keepdims(keepdims)
    rt = _inexact_result(a)
    acc = np.dtype(np.float32) if rt == np.float16 else rt
    with _Temps() as t:
        s, axes, n = _sorted_last(name, a, axis, t)
        if skip_nan and a.dtype.kind == "f":
            k = t(ga.sum(t(ga.logical_not(t(ga.isnan(s)))), axis=-1, keepdims=True))
            empty = t(ga.equal(k, 0))
            if _any_true(empty):
                warnings.warn("All-NaN slice encountered" if n else "Mean of empty slice",
                              RuntimeWarning, stacklevel=3)
            lo_i = t(ga.floor_divide(t(ga.maximum(t(ga.subtract(k, 1)), 0)), 2))
            hi_i = t(ga.minimum(t(ga.floor_divide(k, 2)), max(n - 1, 0)))
            if n == 0:
                r = t(ga.full(s.shape[:-1] + (1,), math.nan, dtype=acc, device=a.device))
            else:
                lo = t(t(ga.take_along_axis(s, lo_i, axis=-1)).astype(acc))
                hi = t(t(ga.take_along_axis(s, hi_i, axis=-1)).astype(acc))
                r = t(ga.divide(t(ga.add(lo, hi)), 2))
                r = t(ga.where(empty, math.nan, r))
        elif n == 0:
            warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=3)
            r = t(ga.full(s.shape[:-1] + (1,), math.nan, dtype=acc, device=a.device))
        else:
            lo = t(t(s[..., (n - 1) // 2:(n - 1) // 2 + 1]).astype(acc))
            hi = t(t(s[..., n // 2:n // 2 + 1]).astype(acc))
            r = t(ga.divide(t(ga.add(lo, hi)), 2))
            if a.dtype.kind == "f":
                r = t(ga.where(t(ga.isnan(t(s[..., -1:]))), math.nan, r))
        r = t(r.astype(rt)) if r.dtype != rt else r
        result = _placed(r, a, axes, (), kd, t)
    return _finish(name, result, out)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median over ``axis``: ``ga.sort`` along the (merged) axes, then the mean of the
    middle element(s); a slice holding NaN gives NaN; integers give float64 (float32 on a
    device without float64).  ``overwrite_input`` changes nothing."""
    return _median("median", a, axis, out, keepdims, False)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=_NoValue):
    """The median of the non-NaN elements over ``axis``: sorted (NaN last), the count of
    non-NaN elements per slice picks the middle ones on the device (``take_along_axis``);
    an all-NaN slice gives NaN and NumPy's ``RuntimeWarning``."""
    return _median("nanmedian", a, axis, out, keepdims, True)


# --------------------------------------------------------------------------- histograms

__all__ += ["bincount", "digitize", "histogram", "histogram2d", "histogramdd"]


def _scalar(x):
    """A 0-d device result read back as a NumPy scalar of its dtype (a few bytes)."""
    try:
        return x.get()[()]
    finally:
        x.free()


def _counts_at(bounds, t: _Temps):
    """``bounds[1:] - bounds[:-1]``: how many sorted elements lie between boundaries."""
    return _ga().subtract(t(bounds[1:]), t(bounds[:-1]))


def _weighted_at(name: str, keys, weights, bounds_of, acc, t: _Temps):
    """The sums of ``weights`` over runs of sorted ``keys``: ``argsort``, the weights'
    running sum from 0 (``cumulative_sum(include_initial=True)``), differences at the
    boundaries ``bounds_of(sorted_keys)`` gives."""
    ga = _ga()
    order = t(ga.argsort(keys, stable=True))
    sk = t(ga.take(keys, order))
    sw = t(ga.take(weights, order))
    if sw.dtype != acc:
        sw = t(sw.astype(acc))
    cw = t(ga.cumulative_sum(sw, include_initial=True))
    b = bounds_of(sk)
    t(b)
    at = t(ga.take(cw, b))
    return ga.subtract(t(at[1:]), t(at[:-1]))


def _bincount(name: str, x, weights, length: int, t: _Temps):
    """``bincount`` of int64 ``x`` (all in ``[0, length)``) with ``length`` known."""
    ga = _ga()
    edges = t(ga.arange(length + 1, dtype=np.int64, device=x.device))
    if weights is None:
        s = t(ga.sort(x))
        b = t(ga.searchsorted(s, edges, side="left"))
        return _counts_at(b, t)
    acc = _float_dtype(x.device)
    return _weighted_at(name, x, weights, lambda sk: ga.searchsorted(sk, edges, side="left"),
                        acc, t)


def bincount(x, /, weights=None, minlength=0):
    """How many times each value ``0 .. max(x)`` occurs in the 1-d non-negative integer
    ``x`` (at least ``minlength`` bins): ``ga.sort`` then ``searchsorted`` of every bin's
    value and the differences; with ``weights`` (float64, float32 without float64) the
    weights' running sum in sorted order, differenced at the same boundaries.  Reads back
    ``min(x)`` and ``max(x)`` (the result's length depends on them)."""
    name = "bincount"
    ga = _ga()
    _check(name, x, "x")
    if x.ndim != 1:
        raise ValueError(f"{name}(): object too deep for desired array: x must be 1-d, got "
                         f"shape {x.shape}; flatten it (ga.reshape(x, (-1,)))")
    if x.dtype.kind not in "biu" or x.dtype == np.uint64:
        raise TypeError(f"{name}(): Cannot cast array data from dtype('{x.dtype}') to "
                        f"dtype('int64') according to the rule 'safe'; give non-negative "
                        f"integers (x.astype(ga.int64) after checking them)")
    minlength = operator.index(minlength)
    if minlength < 0:
        raise ValueError(f"{name}(): 'minlength' must not be negative, got {minlength}")
    with _Temps() as t:
        if weights is not None:
            weights, up = _param(name, weights, x, "weights")
            if up:
                t(weights)
            if weights.shape != x.shape:
                raise ValueError(f"{name}(): The weights and list don't have the same length:"
                                 f" {weights.shape} and {x.shape}")
            if weights.dtype.kind == "c":
                raise TypeError(f"{name}(): Cannot cast array data from dtype("
                                f"'{weights.dtype}') to dtype('float64') according to the "
                                f"rule 'safe'; give real weights")
        length = minlength
        if x.size:
            lo = int(_scalar(ga.min(x)))
            if lo < 0:
                raise ValueError(f"{name}(): 'list' argument must have no negative elements, "
                                 f"got {lo}")
            length = max(length, int(_scalar(ga.max(x))) + 1)
        xi = x if x.dtype == np.int64 else t(x.astype(np.int64))
        if x.size == 0:
            dt = np.int64 if weights is None else _float_dtype(x.device)
            return ga.zeros(length, dtype=dt, device=x.device)
        return _bincount(name, xi, weights, length, t)


def _monotonic(name: str, bins, t: _Temps) -> int:
    """1 for increasing (non-decreasing) bins, -1 for decreasing, 0 for neither."""
    ga = _ga()
    if bins.shape[0] < 2:
        return 1
    a, b = t(bins[:-1]), t(bins[1:])
    if not _any_true(t(ga.less(b, a))):
        return 1
    if not _any_true(t(ga.greater(b, a))):
        return -1
    return 0


def digitize(x, bins, right=False):
    """The indices of the bins each element of ``x`` falls in: ``searchsorted`` of ``x``
    in ``bins`` (``side="right"``, or ``"left"`` with ``right=True``); decreasing bins
    search the flipped bins.  Reads back whether ``bins`` increase (one bool)."""
    name = "digitize"
    ga = _ga()
    _check(name, x, "x")
    if x.dtype.kind == "c":
        raise TypeError(f"{name}(): x may not be complex, got {x.dtype}")
    with _Temps() as t:
        bins, up = _param(name, bins, x, "bins")
        if up:
            t(bins)
        if bins.ndim != 1:
            raise ValueError(f"{name}(): object too deep for desired array: bins must be 1-d, "
                             f"got shape {bins.shape}")
        if bins.dtype.kind == "c":
            raise TypeError(f"{name}(): bins may not be complex, got {bins.dtype}")
        mono = _monotonic(name, bins, t)
        if mono == 0:
            raise ValueError(f"{name}(): bins must be monotonically increasing or decreasing; "
                             f"sort them (ga.sort(bins))")
        side = "left" if right else "right"
        if mono == -1:
            idx = t(ga.searchsorted(t(ga.flip(bins)), x, side=side))
            return ga.subtract(bins.shape[0], idx)
        return ga.searchsorted(bins, x, side=side)


def _outer_edges(name: str, a, range_):
    """NumPy's ``_get_outer_edges``: the range given or ``a``'s min and max (read back)."""
    ga = _ga()
    if range_ is not None:
        first, last = range_
        if first > last:
            raise ValueError(f"{name}(): max must be larger than min in range parameter, got "
                             f"range={range_!r}")
        if not (np.isfinite(first) and np.isfinite(last)):
            raise ValueError(f"{name}(): supplied range of [{first}, {last}] is not finite")
    elif a.size == 0:
        first, last = 0, 1
    else:
        first, last = _scalar(ga.min(a)), _scalar(ga.max(a))
        if not (np.isfinite(first) and np.isfinite(last)):
            raise ValueError(f"{name}(): autodetected range of [{first}, {last}] is not "
                             f"finite; give range= or drop the NaN/inf values first")
    if first == last:
        first = first - 0.5
        last = last + 0.5
    return first, last


def _unsigned_subtract(a, b):
    """NumPy's ``_unsigned_subtract``: ``a - b`` without integer overflow."""
    signed_to_unsigned = {np.byte: np.ubyte, np.short: np.ushort, np.intc: np.uintc,
                          np.int_: np.uint, np.longlong: np.ulonglong}
    dt = np.result_type(a, b)
    try:
        unsigned_dt = signed_to_unsigned[dt.type]
    except KeyError:
        return np.subtract(a, b, dtype=dt)
    return np.subtract(np.asarray(a, dtype=dt), np.asarray(b, dtype=dt), casting="unsafe",
                       dtype=unsigned_dt)


def _ptp_host(x):
    ga = _ga()
    return _unsigned_subtract(_scalar(ga.max(x)), _scalar(ga.min(x)))


def _width(name: str, estimator: str, x, range_, t: _Temps):
    """NumPy's bin-width estimators, from scalars computed on the device."""
    ga = _ga()
    n = x.size
    if estimator == "sqrt":
        return _ptp_host(x) / np.sqrt(n)
    if estimator == "sturges":
        return _ptp_host(x) / (np.log2(n) + 1.0)
    if estimator == "rice":
        return _ptp_host(x) / (2.0 * n ** (1.0 / 3))
    if estimator == "scott":
        return (24.0 * np.pi ** 0.5 / n) ** (1.0 / 3.0) * _scalar(ga.std(x))
    if estimator == "fd":
        iqr = t(percentile(x, [75, 25])).get()
        return 2.0 * np.subtract(*iqr) * n ** (-1.0 / 3.0)
    if estimator == "auto":
        fd_bw = _width(name, "fd", x, range_, t)
        sturges_bw = _width(name, "sturges", x, range_, t)
        return min(fd_bw, sturges_bw) if fd_bw else sturges_bw
    if estimator == "doane":
        if n > 2:
            sg1 = np.sqrt(6.0 * (n - 2) / ((n + 1.0) * (n + 3)))
            sigma = _scalar(ga.std(x))
            if sigma > 0.0:
                temp = t(ga.divide(t(ga.subtract(x, t(ga.mean(x)))), sigma))
                g1 = _scalar(ga.mean(t(ga.multiply(temp, t(ga.multiply(temp, temp))))))
                return _ptp_host(x) / (1.0 + np.log2(n) + np.log2(1.0 + np.absolute(g1) / sg1))
        return 0.0
    # stone: the cross-validated integrated squared error, one device histogram per count
    ptp_x = _ptp_host(x)
    if n <= 1 or ptp_x == 0:
        return 0
    s = t(ga.sort(ga.reshape(x, (-1,))))

    def jhat(nbins):
        hh = ptp_x / nbins
        edges = np.linspace(range_[0], range_[1], nbins + 1)
        counts = _sorted_counts(s, t(ga.asarray(edges, device=x.device)), t)
        t(counts)
        p = t(ga.divide(counts, float(n)))
        return (2 - (n + 1) * float(_scalar(ga.sum(t(ga.multiply(p, p)))))) / hh

    upper = max(100, int(np.sqrt(n)))
    nbins = min(range(1, upper + 1), key=jhat)
    if nbins == upper:
        warnings.warn("The number of bins estimated may be suboptimal.", RuntimeWarning,
                      stacklevel=4)
    return ptp_x / nbins


_ESTIMATORS = ("stone", "auto", "doane", "fd", "rice", "scott", "sqrt", "sturges")


def _bin_edges(name: str, a, bins, range_, weights, t: _Temps):
    """NumPy's ``_get_bin_edges``: the edges as a device array (computed on the host from
    a few scalars when ``bins`` is a count or an estimator's name)."""
    ga = _ga()
    n_equal = None
    if isinstance(bins, str):
        if bins not in _ESTIMATORS:
            raise ValueError(f"{name}(): {bins!r} is not a valid estimator for `bins`; use one "
                             f"of {', '.join(_ESTIMATORS)}")
        if weights is not None:
            raise TypeError(f"{name}(): Automated estimation of the number of bins is not "
                            f"supported for weighted data; give bins as a count or edges")
        first, last = _outer_edges(name, a, range_)
        x = a
        if range_ is not None and a.size:
            keep = t(ga.logical_and(t(ga.greater_equal(a, first)), t(ga.less_equal(a, last))))
            x = t(a[keep])
        if x.size == 0:
            n_equal = 1
        else:
            width = _width(name, bins, x, (first, last), t)
            if a.dtype.kind in "iu" and width < 1:
                width = 1
            n_equal = int(np.ceil(_unsigned_subtract(last, first) / width)) if width else 1
    elif isinstance(bins, ArrayBase) or np.ndim(bins) == 1:
        edges, up = _param(name, bins, a, "bins")
        if edges.ndim != 1:
            raise ValueError(f"{name}(): `bins` must be 1d, when an array")
        if up:
            t(edges)
        if edges.shape[0] > 1 and _any_true(t(ga.greater(t(edges[:-1]), t(edges[1:])))):
            raise ValueError(f"{name}(): `bins` must increase monotonically, when an array; "
                             f"sort them (ga.sort(bins))")
        return edges, not up
    elif np.ndim(bins) == 0:
        try:
            n_equal = operator.index(bins)
        except TypeError as e:
            raise TypeError(f"{name}(): `bins` must be an integer, a string, or an array, got "
                            f"{bins!r}") from e
        if n_equal < 1:
            raise ValueError(f"{name}(): `bins` must be positive, when an integer, got {bins}")
        first, last = _outer_edges(name, a, range_)
    else:
        raise ValueError(f"{name}(): `bins` must be 1d, when an array")
    bin_type = np.result_type(first, last, a.dtype)
    if np.issubdtype(bin_type, np.integer):
        bin_type = np.result_type(bin_type, float)
    if not a.device.supports(bin_type):
        bin_type = _float_dtype(a.device)
    edges = np.linspace(first, last, n_equal + 1, endpoint=True, dtype=bin_type)
    return t(ga.asarray(edges, device=a.device)), False


def _sorted_counts(s, edges, t: _Temps):
    """Counts of sorted ``s`` per bin of ``edges`` (the last bin closed): ``searchsorted``
    of the left edges, the last edge from the right, and the differences."""
    return _counts_at(t(_edge_bounds(s, edges, t)), t)


def _edge_bounds(s, edges, t: _Temps):
    ga = _ga()
    left = t(ga.searchsorted(s, t(edges[:-1]), side="left"))
    right = t(ga.searchsorted(s, t(edges[-1:]), side="right"))
    return ga.concat([left, right])


def histogram(a, bins=10, range=None, density=None, weights=None):  # noqa: A002
    """NumPy's ``histogram``: the edges from ``bins`` (a count over ``range`` or ``a``'s
    min and max, a sequence of edges, or an estimator's name), then the counts as
    ``searchsorted`` of the edges in the sorted (flattened) ``a`` and their differences;
    with ``weights``, the weights' running sum in sorted order differenced at the same
    boundaries.  Returns ``(hist, bin_edges)`` on ``a``'s device."""
    name = "histogram"
    ga = _ga()
    _check(name, a)
    if a.dtype.kind == "c":
        raise TypeError(f"{name}(): a must be real, got {a.dtype}")
    with _Temps() as t:
        flat = a if a.ndim == 1 else t(ga.reshape(a, (-1,)))
        if weights is not None:
            weights, up = _param(name, weights, a, "weights")
            if up:
                t(weights)
            if weights.shape != a.shape:
                raise ValueError(f"{name}(): weights should have the same shape as a: "
                                 f"{weights.shape} and {a.shape}")
            weights = weights if weights.ndim == 1 else t(ga.reshape(weights, (-1,)))
        edges, given = _bin_edges(name, flat, bins, range, weights, t)
        if weights is None:
            s = t(ga.sort(flat))
            n = t(_sorted_counts(s, edges, t))
        else:
            wt = weights.dtype
            acc = _float_dtype(a.device) if wt.kind == "f" else \
                np.dtype(np.int64) if wt.kind in "bi" else np.dtype(np.uint64) \
                if wt.kind == "u" else _float_dtype(a.device, True)
            n = t(_weighted_at(name, flat, weights, lambda sk: _edge_bounds(sk, edges, t), acc,
                               t))
            n = t(n.astype(wt)) if n.dtype != wt else n
        if density:
            fd = _float_dtype(a.device)
            db = t(t(ga.subtract(t(edges[1:]), t(edges[:-1]))).astype(fd))
            hist = ga.divide(t(ga.divide(t(n.astype(fd)), db)), t(ga.sum(n).astype(fd)))
        else:
            hist = n
            t.keep(n)
        if not given:
            t.keep(edges)
        return hist, edges


def histogramdd(sample, bins=10, range=None, density=None, weights=None):  # noqa: A002
    """NumPy's ``histogramdd``: per dimension the bin of each sample by ``searchsorted``
    in that dimension's edges, one flat bin number per sample, counted by
    :func:`bincount` (with ``weights``) into ``prod(len(edges) + 1)`` bins; outliers
    land in the outer bins, which are dropped.  ``(hist, edges)``; hist is float64."""
    name = "histogramdd"
    ga = _ga()
    with _Temps() as t:
        if isinstance(sample, ArrayBase):
            if sample.ndim == 1:
                sample = t(ga.reshape(sample, (-1, 1)))
            elif sample.ndim != 2:
                sample = sample  # NumPy reads (N, D); more dimensions are its ValueError below
        else:
            parts = list(sample)
            for p in parts:
                _check(name, p, "sample")
            sample = t(ga.stack(parts, axis=1))
        _check(name, sample, "sample")
        if sample.ndim != 2:
            raise ValueError(f"{name}(): sample must be (N, D), got shape {sample.shape}")
        N, D = sample.shape
        try:
            M = len(bins)
            if M != D:
                raise ValueError(f"{name}(): The dimension of bins must be equal to the "
                                 f"dimension of the sample x, got {M} and {D}")
        except TypeError:
            bins = D * [bins]
        if range is None:
            range = (None,) * D
        elif len(range) != D:
            raise ValueError(f"{name}(): range argument must have one entry per dimension, "
                             f"got {len(range)} for {D}")
        if weights is not None:
            weights, up = _param(name, weights, sample, "weights")
            if up:
                t(weights)
        edges, nbin, dedges = [], [], []
        for i in builtins.range(D):
            col = t(sample[:, i])
            b = bins[i]
            if not isinstance(b, ArrayBase) and np.ndim(b) == 0:
                try:
                    n = operator.index(b)
                except TypeError as e:
                    raise TypeError(f"{name}(): `bins[{i}]` must be an integer, when a scalar, "
                                    f"got {b!r}") from e
                if n < 1:
                    raise ValueError(f"{name}(): `bins[{i}]` must be positive, when an "
                                     f"integer, got {n}")
                smin, smax = _outer_edges(name, col, range[i])
                e = np.linspace(smin, smax, n + 1)
                if not sample.device.supports(e.dtype):
                    e = e.astype(_float_dtype(sample.device))
                ed = ga.asarray(e, device=sample.device)
            elif isinstance(b, ArrayBase) or np.ndim(b) == 1:
                ed, up = _param(name, b, sample, f"bins[{i}]")
                if not up:
                    ed = ed.copy()
                if ed.ndim != 1:
                    raise ValueError(f"{name}(): `bins[{i}]` must be a scalar or 1d array")
                if ed.shape[0] > 1 and _any_true(t(ga.greater(t(ed[:-1]), t(ed[1:])))):
                    ed.free()
                    raise ValueError(f"{name}(): `bins[{i}]` must be monotonically "
                                     f"increasing, when an array")
            else:
                raise ValueError(f"{name}(): `bins[{i}]` must be a scalar or 1d array")
            edges.append(ed)
            nbin.append(ed.shape[0] + 1)
            dedges.append(t(ga.subtract(t(ed[1:]), t(ed[:-1]))))
        strides = [math.prod(nbin[i + 1:]) for i in builtins.range(D)]
        xy = None
        for i in builtins.range(D):
            col = t(sample[:, i])
            c = t(ga.searchsorted(edges[i], col, side="right"))
            on_edge = t(t(ga.equal(col, t(edges[i][-1:]))).astype(np.int64))
            c = t(ga.multiply(t(ga.subtract(c, on_edge)), strides[i]))
            xy = c if xy is None else t(ga.add(xy, c))
        total = math.prod(nbin)
        if N == 0:
            hist = t(ga.zeros(total, dtype=_float_dtype(sample.device), device=sample.device))
        else:
            hist = t(_bincount(name, xy, weights, total, t))
        fd = _float_dtype(sample.device)
        hist = t(ga.reshape(hist, tuple(nbin)))
        core = hist[(slice(1, -1),) * D]
        t(core)
        hist = t(core.astype(fd))
        if density:
            s = t(ga.sum(hist))
            for i in builtins.range(D):
                shape = [1] * D
                shape[i] = nbin[i] - 2
                hist = t(ga.divide(hist, t(ga.reshape(t(dedges[i].astype(fd)), tuple(shape)))))
            hist = t(ga.divide(hist, s))
        t.keep(hist)
        return hist, tuple(edges)


def histogram2d(x, y, bins=10, range=None, density=None, weights=None):  # noqa: A002
    """NumPy's ``histogram2d``: :func:`histogramdd` of ``(x, y)``; ``(H, xedges, yedges)``."""
    try:
        N = len(bins)
    except TypeError:
        N = 1
    if N not in (1, 2):
        bins = [bins, bins]
    hist, edges = histogramdd((x, y), bins, range, density, weights)
    return hist, edges[0], edges[1]



# --------------------------------------------------------------------------- the rest

__all__ += ["average", "corrcoef", "cov", "ediff1d", "gradient", "interp", "trapezoid"]


def interp(x, xp, fp, left=None, right=None, period=None):
    """NumPy's 1-d piecewise-linear interpolation: ``searchsorted(xp, x, side="right")``
    finds each interval, ``take`` its ends, and the line through them is evaluated with
    NumPy's guards (an exact sample point gives its ``fp``; NaN slopes fall back to the
    other end).  float64 (complex128 for complex ``fp``; float32/complex64 on a device
    without float64).  ``period`` wraps ``x`` and ``xp`` and sorts ``xp`` on the device."""
    name = "interp"
    ga = _ga()
    _check(name, x, "x")
    if x.dtype.kind == "c":
        raise TypeError(f"{name}(): x must be real, got {x.dtype}")
    with _Temps() as t:
        xp, up = _param(name, xp, x, "xp")
        if up:
            t(xp)
        fp, up = _param(name, fp, x, "fp")
        if up:
            t(fp)
        if xp.ndim != 1 or fp.ndim != 1:
            raise ValueError(f"{name}(): Data points must be 1D sequences, got xp of shape "
                             f"{xp.shape} and fp of shape {fp.shape}")
        if xp.shape[0] != fp.shape[0]:
            raise ValueError(f"{name}(): fp and xp are not of the same length: "
                             f"{fp.shape[0]} and {xp.shape[0]}")
        if xp.shape[0] == 0:
            raise ValueError(f"{name}(): array of sample points is empty; give xp and fp at "
                             f"least one point")
        if xp.dtype.kind == "c":
            raise TypeError(f"{name}(): xp must be real, got {xp.dtype}")
        real = _float_dtype(x.device)
        fdt = _float_dtype(x.device, fp.dtype.kind == "c")
        xd = x if x.dtype == real else t(x.astype(real))
        xpd = xp if xp.dtype == real else t(xp.astype(real))
        fpd = fp if fp.dtype == fdt else t(fp.astype(fdt))
        if period is not None:
            if period == 0:
                raise ValueError(f"{name}(): period must be a non-zero value, got {period!r}")
            period = abs(period)
            left = right = None
            xd = t(ga.remainder(xd, period))
            xpd = t(ga.remainder(xpd, period))
            order = t(ga.argsort(xpd, stable=True))
            xpd = t(ga.take(xpd, order))
            fpd = t(ga.take(fpd, order))
            xpd = t(ga.concat([t(ga.subtract(t(xpd[-1:]), period)), xpd,
                               t(ga.add(t(xpd[0:1]), period))]))
            fpd = t(ga.concat([t(fpd[-1:]), fpd, t(fpd[0:1])]))
        n = xpd.shape[0]
        first_f, last_f = t(fpd[0]), t(fpd[n - 1])
        lval = first_f if left is None else left
        rval = last_f if right is None else right
        x0, xl = t(xpd[0]), t(xpd[n - 1])
        if n == 1:
            res = t(ga.broadcast_to(first_f, xd.shape))
        else:
            j = t(ga.subtract(t(ga.searchsorted(xpd, xd, side="right")), 1))
            jc = t(ga.clip(j, 0, n - 2))
            jn = t(ga.add(jc, 1))
            xa, xb = t(ga.take(xpd, jc)), t(ga.take(xpd, jn))
            ya, yb = t(ga.take(fpd, jc)), t(ga.take(fpd, jn))
            slope = t(ga.divide(t(ga.subtract(yb, ya)), t(ga.subtract(xb, xa))))
            res = t(ga.add(t(ga.multiply(slope, t(ga.subtract(xd, xa)))), ya))
            alt = t(ga.add(t(ga.multiply(slope, t(ga.subtract(xd, xb)))), yb))
            bad = t(ga.isnan(res))
            res = t(ga.where(bad, alt, res))
            bad = t(ga.logical_and(t(ga.isnan(res)), t(ga.equal(ya, yb))))
            res = t(ga.where(bad, ya, res))
            res = t(ga.where(t(ga.equal(xa, xd)), ya, res))
            res = t(ga.where(t(ga.equal(xd, xl)), last_f, res))
        res = t(ga.where(t(ga.less(xd, x0)), lval, res))
        res = ga.where(t(ga.greater(xd, xl)), rval, res)
        if n > 1:  # NumPy gives NaN for a NaN x (its one-point case gives fp[0])
            with res:
                nan = t(ga.isnan(xd))
                res = ga.where(nan, t(xd.astype(fdt)) if fdt.kind == "c" else xd, res)
        return res if res.dtype == fdt else _cast_free(res, fdt)


def _cast_free(r, dt):
    try:
        return r.astype(dt)
    finally:
        r.free()


def ediff1d(ary, to_end=None, to_begin=None):
    """The differences of consecutive elements of the flattened ``ary``
    (``flat[1:] - flat[:-1]``) with ``to_begin``/``to_end`` joined on, in ``ary``'s dtype;
    ``TypeError`` for a ``to_begin``/``to_end`` that does not cast under ``same_kind``."""
    name = "ediff1d"
    ga = _ga()
    _check(name, ary, "ary")
    with _Temps() as t:
        flat = ary if ary.ndim == 1 else t(ga.reshape(ary, (-1,)))
        parts = []
        for what, extra in (("to_begin", to_begin), ("to_end", to_end)):
            if extra is None:
                parts.append(None)
                continue
            e, up = _param(name, extra, ary, what)
            if up:
                t(e)
            if not np.can_cast(e.dtype, ary.dtype, casting="same_kind"):
                raise TypeError(f"{name}(): dtype of `{what}` must be compatible with input "
                                f"`ary` under the `same_kind` rule; got {e.dtype} for "
                                f"{ary.dtype}")
            e = e if e.ndim == 1 else t(ga.reshape(e, (-1,)))
            parts.append(e if e.dtype == ary.dtype else t(e.astype(ary.dtype)))
        if flat.shape[0] > 1:
            d = t(ga.subtract(t(flat[1:]), t(flat[:-1])))
            if d.dtype != ary.dtype:
                d = t(d.astype(ary.dtype))
        else:
            d = t(ga.empty((0,), dtype=ary.dtype, device=ary.device))
        pieces = [p for p in (parts[0], d, parts[1]) if p is not None]
        if len(pieces) == 1:
            t.keep(d)
            return d
        return ga.concat(pieces)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of ``y`` along ``axis`` by the trapezoidal rule:
    ``sum(d * (y[1:] + y[:-1]) / 2)`` with ``d = diff(x)`` (or ``dx``)."""
    name = "trapezoid"
    ga = _ga()
    _check(name, y, "y")
    ax = normalize_axes(name, axis, y.ndim)[0]
    with _Temps() as t:
        if x is None:
            d = dx
        else:
            x, up = _param(name, x, y, "x")
            if up:
                t(x)
            if x.ndim == 1:
                d = t(ga.diff(x))
                shape = [1] * y.ndim
                shape[ax] = d.shape[0]
                d = t(ga.reshape(d, tuple(shape)))
            else:
                d = t(ga.diff(x, axis=ax))
        hi = tuple(slice(1, None) if i == ax else slice(None) for i in range(y.ndim))
        lo = tuple(slice(None, -1) if i == ax else slice(None) for i in range(y.ndim))
        s = t(ga.add(t(y[hi]), t(y[lo])))
        if isinstance(d, (int, float)) and not isinstance(d, bool):
            prod = t(ga.multiply(s, d))
        else:
            if not isinstance(d, ArrayBase):
                d = t(ga.asarray(np.asarray(d), device=y.device))
            prod = t(ga.multiply(d, s))
        return ga.sum(t(ga.divide(prod, 2.0)), axis=ax)


def average(a, axis=None, weights=None, returned=False, *, keepdims=_NoValue):
    """The (weighted) mean over ``axis``: :func:`gpuarrays.mean`, or
    ``sum(a * w) / sum(w)`` in NumPy's result type (integers with float64, float32 on a
    device without float64); ``ZeroDivisionError`` when the weights sum to zero (one bool
    read back).  ``returned=True`` also gives the sum of the weights (the count without
    them) broadcast to the average's shape."""
    name = "average"
    ga = _ga()
    _check(name, a)
    kd = _keepdims(keepdims)
    axes = None if axis is None else normalize_axes(name, axis, a.ndim)
    with _Temps() as t:
        if weights is None:
            x = a if a.dtype != np.bool_ else t(a.astype(_float_dtype(a.device)))
            avg = ga.mean(x, axis=axes, keepdims=kd)
            if not returned:
                return avg
            scl = ga.full(avg.shape, a.size / builtins.max(avg.size, 1) if avg.size else 0,
                          dtype=avg.dtype, device=a.device)
            return avg, scl
        w, up = _param(name, weights, a, "weights")
        if up:
            t(w)
        if a.dtype.kind in "biu":
            rt = np.result_type(a.dtype, w.dtype, "f8")
        else:
            rt = np.result_type(a.dtype, w.dtype)
        if not a.device.supports(rt):
            rt = _float_dtype(a.device, rt.kind == "c")
        if a.shape != w.shape:
            if axes is None:
                raise TypeError(f"{name}(): Axis must be specified when shapes of a and weights "
                                f"differ ({a.shape} and {w.shape})")
            if w.shape != tuple(a.shape[i] for i in (axis if isinstance(axis, tuple)
                                                      else (axis,))):
                raise ValueError(f"{name}(): Shape of weights must be consistent with shape of "
                                 f"a along specified axis; got {w.shape} for a of shape "
                                 f"{a.shape} and axis={axis!r}")
            given = [operator.index(i) % a.ndim for i in
                     (axis if isinstance(axis, tuple) else (axis,))]
            w = t(ga.permute_dims(w, tuple(np.argsort(given)))) if w.ndim > 1 else w
            w = t(ga.reshape(w, tuple(s if i in axes else 1 for i, s in enumerate(a.shape))))
        wr = w if w.dtype == rt else t(w.astype(rt))
        ar = a if a.dtype == rt else t(a.astype(rt))
        scl = ga.sum(t(ga.broadcast_to(wr, a.shape)) if wr.shape != a.shape else wr,
                     axis=axes, keepdims=kd)
        try:
            if _any_true(t(ga.equal(scl, 0))):
                raise ZeroDivisionError(f"{name}(): Weights sum to zero, can't be normalized; "
                                        f"give weights with a non-zero sum along axis")
            avg = ga.divide(t(ga.sum(t(ga.multiply(ar, wr)), axis=axes, keepdims=kd)), scl)
        except BaseException:
            scl.free()
            raise
        if not returned:
            scl.free()
            return avg
        if scl.shape != avg.shape:
            with scl:
                scl = ga.broadcast_to(scl, avg.shape).copy()
        return avg, scl


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """NumPy's covariance matrix: the (weighted) mean of each variable subtracted, then
    ``matmul(X, (X * w).T.conj())`` over the normalisation NumPy uses (read back: one
    scalar).  float64 (float32 on a device without float64) unless ``dtype``."""
    name = "cov"
    ga = _ga()
    _check(name, m, "m")
    if ddof is not None and ddof != int(ddof):
        raise ValueError(f"{name}(): ddof must be integer, got {ddof!r}")
    if m.ndim > 2:
        raise ValueError(f"{name}(): m has more than 2 dimensions (shape {m.shape})")
    if y is not None:
        _check(name, y, "y")
        if y.ndim > 2:
            raise ValueError(f"{name}(): y has more than 2 dimensions (shape {y.shape})")
    if dtype is None:
        dtype = np.result_type(m.dtype, np.float64) if y is None \
            else np.result_type(m.dtype, y.dtype, np.float64)
        if not m.device.supports(dtype):
            dtype = _float_dtype(m.device, dtype.kind == "c")
    dtype = np.dtype(dtype)
    with _Temps() as t:
        def rows(v):
            v = t(v.astype(dtype))
            return t(ga.reshape(v, (1, -1))) if v.ndim < 2 else v

        X = rows(m)
        if not rowvar and m.ndim != 1:
            X = t(ga.matrix_transpose(X))
        if X.shape[0] == 0:
            return ga.empty((0, 0), dtype=dtype, device=m.device)
        if y is not None:
            Y = rows(y)
            if not rowvar and Y.shape[0] != 1:
                Y = t(ga.matrix_transpose(Y))
            X = t(ga.concat([X, Y], axis=0))
        if ddof is None:
            ddof = 1 if bias == 0 else 0
        w = None
        fw = aw = None
        for what, v in (("fweights", fweights), ("aweights", aweights)):
            if v is None:
                continue
            v, up = _param(name, v, m, what)
            if up:
                t(v)
            v = t(v.astype(_float_dtype(m.device)))
            if what == "fweights" and _any_true(t(ga.not_equal(v, t(ga.round(v))))):
                raise TypeError(f"{name}(): fweights must be integer")
            if v.ndim > 1:
                raise RuntimeError(f"{name}(): cannot handle multidimensional {what}")
            if v.shape[0] != X.shape[1]:
                raise RuntimeError(f"{name}(): incompatible numbers of samples and {what} "
                                   f"({X.shape[1]} and {v.shape[0]})")
            if _any_true(t(ga.less(v, 0))):
                raise ValueError(f"{name}(): {what} cannot be negative")
            if what == "fweights":
                fw = v
            else:
                aw = v
            w = v if w is None else t(ga.multiply(w, v))
        avg, w_sum = average(X, axis=1, weights=w, returned=True)
        t(avg)
        t(w_sum)
        if w is None:
            fact = X.shape[1] - ddof
        else:
            ws = float(_scalar(w_sum[0]))
            if ddof == 0:
                fact = ws
            elif aw is None:
                fact = ws - ddof
            else:
                fact = ws - ddof * float(_scalar(ga.sum(t(ga.multiply(w, aw))))) / ws
        if fact <= 0:
            warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=2)
            fact = 0.0
        X = t(ga.subtract(X, t(ga.expand_dims(avg, axis=1))))
        XT = t(ga.matrix_transpose(X if w is None else t(ga.multiply(X, w))))
        if XT.dtype.kind == "c":
            XT = t(ga.conj(XT))
        c = t(ga.matmul(X, XT))
        c = t(ga.multiply(c, 1 / fact if fact else math.inf))
        shape = tuple(s for s in c.shape if s != 1)
        r = ga.reshape(c, shape)
        t.keep(r)
        return r if r.dtype == dtype else _cast_free(r, dtype)


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """NumPy's correlation coefficients: :func:`cov` divided by the outer product of the
    standard deviations (its diagonal's square roots), clipped to [-1, 1]."""
    name = "corrcoef"
    ga = _ga()
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        with c:
            return ga.divide(c, c)
    with _Temps() as t:
        t(c)
        d = t(ga.real(t(c.diagonal()))) if c.dtype.kind == "c" else t(c.diagonal())
        sd = t(ga.sqrt(d))
        c = t(ga.divide(c, t(ga.expand_dims(sd, axis=1))))
        c = t(ga.divide(c, t(ga.expand_dims(sd, axis=0))))
        if c.dtype.kind == "c":
            re = t(ga.clip(t(ga.real(c)), -1, 1))
            im = t(ga.clip(t(ga.imag(c)), -1, 1))
            return ga.add(re, t(ga.multiply(im, 1j)))
        return ga.clip(c, -1, 1)


def gradient(f, *varargs, axis=None, edge_order=1):
    """NumPy's gradient: second-order central differences inside, first- or second-order
    one-sided differences at the edges (``edge_order``), with uniform spacing (scalars) or
    coordinates (1-d arrays; uniform ones are detected, as NumPy does, from one bool and
    one scalar read back).  Float inputs keep their type; integers give float64 (float32
    on a device without float64).  One array, or a tuple of one per axis."""
    name = "gradient"
    ga = _ga()
    _check(name, f, "f")
    N = f.ndim
    axes = tuple(range(N)) if axis is None else _ordered_axes(name, axis, N)
    with _Temps() as t:
        n = len(varargs)
        if n == 0:
            dx = [1.0] * len(axes)
        elif n == 1 and not isinstance(varargs[0], ArrayBase) and np.ndim(varargs[0]) == 0:
            dx = list(varargs) * len(axes)
        elif n == len(axes):
            dx = list(varargs)
            for i, dist in enumerate(dx):
                if not isinstance(dist, ArrayBase) and np.ndim(dist) == 0:
                    continue
                dist, up = _param(name, dist, f, "spacing")
                if up:
                    t(dist)
                if dist.ndim == 0:
                    dx[i] = _scalar(dist.copy())
                    continue
                if dist.ndim != 1:
                    raise ValueError(f"{name}(): distances must be either scalars or 1d, got "
                                     f"shape {dist.shape}")
                if dist.shape[0] != f.shape[axes[i]]:
                    raise ValueError(f"{name}(): when 1d, distances must match the length of "
                                     f"the corresponding dimension ({dist.shape[0]} for "
                                     f"{f.shape[axes[i]]})")
                if dist.dtype.kind in "biu":
                    dist = t(dist.astype(_float_dtype(f.device)))
                d = t(ga.diff(dist))
                if d.shape[0] and not _any_true(t(ga.not_equal(d, t(d[0])))):
                    dx[i] = _scalar(d[0])
                else:
                    dx[i] = d
        else:
            raise TypeError(f"{name}(): invalid number of arguments: {n} spacings for "
                            f"{len(axes)} axes (give none, one scalar, or one per axis)")
        if edge_order not in (1, 2):
            raise ValueError(f"{name}(): 'edge_order' greater than 2 not supported, got "
                             f"{edge_order}" if edge_order > 2 else
                             f"{name}(): edge_order must be 1 or 2, got {edge_order}")
        otype = f.dtype if f.dtype.kind in "fc" else _float_dtype(f.device)
        src = f if f.dtype.kind in "fc" else t(f.astype(otype))
        outs = []
        try:
            for ax, adx in zip(axes, dx, strict=True):
                if f.shape[ax] < edge_order + 1:
                    raise ValueError(f"{name}(): Shape of array too small to calculate a "
                                     f"numerical gradient, at least (edge_order + 1) elements "
                                     f"are required (axis {ax} has {f.shape[ax]})")
                out = ga.empty(f.shape, dtype=otype, device=f.device)
                outs.append(out)
                _gradient_axis(src, out, ax, adx, edge_order, t)
        except BaseException:
            for o in outs:
                o.free()
            raise
        return outs[0] if len(axes) == 1 else tuple(outs)


def _ordered_axes(name: str, axis, ndim: int) -> tuple:
    """``axis`` normalised in the order given (NumPy's ``normalize_axis_tuple``)."""
    items = axis if isinstance(axis, tuple) else (axis,)
    got = []
    for a in items:
        got.append(normalize_axes(name, a, ndim)[0])
    if len(set(got)) != len(got):
        raise ValueError(f"{name}(): repeated axis in {axis!r}")
    return tuple(got)


def _gradient_axis(f, out, ax: int, adx, edge_order: int, t: _Temps) -> None:
    ga = _ga()
    N = f.ndim

    def at(s):
        return t(f[tuple(s if i == ax else slice(None) for i in range(N))])

    def put(s, value):
        out[tuple(s if i == ax else slice(None) for i in range(N))] = value

    def along(v):  # a 1-d coefficient array shaped to broadcast along ax
        shape = [1] * N
        shape[ax] = -1
        return t(ga.reshape(v, tuple(shape)))

    def comb(a, b, c, s2, s3, s4):
        return t(ga.add(t(ga.add(t(ga.multiply(a, at(s2))), t(ga.multiply(b, at(s3))))),
                        t(ga.multiply(c, at(s4)))))

    uniform = not isinstance(adx, ArrayBase)
    if uniform:
        put(slice(1, -1), t(ga.divide(t(ga.subtract(at(slice(2, None)), at(slice(None, -2)))),
                                      _py(2.0 * adx))))
    else:
        dx1, dx2 = t(adx[0:-1]), t(adx[1:])
        s12 = t(ga.add(dx1, dx2))
        a = along(t(ga.divide(t(ga.negative(dx2)), t(ga.multiply(dx1, s12)))))
        b = along(t(ga.divide(t(ga.subtract(dx2, dx1)), t(ga.multiply(dx1, dx2)))))
        c = along(t(ga.divide(dx1, t(ga.multiply(dx2, s12)))))
        put(slice(1, -1), comb(a, b, c, slice(None, -2), slice(1, -1), slice(2, None)))
    if edge_order == 1:
        d0 = _py(adx) if uniform else t(adx[0])
        dn = _py(adx) if uniform else t(adx[-1])
        put(0, t(ga.divide(t(ga.subtract(at(1), at(0))), d0)))
        put(-1, t(ga.divide(t(ga.subtract(at(-1), at(-2))), dn)))
        return
    if uniform:
        a, b, c = _py(-1.5 / adx), _py(2.0 / adx), _py(-0.5 / adx)
    else:
        dx1, dx2 = t(adx[0]), t(adx[1])
        s12 = t(ga.add(dx1, dx2))
        a = t(ga.negative(t(ga.divide(t(ga.add(t(ga.multiply(dx1, 2.0)), dx2)),
                                      t(ga.multiply(dx1, s12))))))
        b = t(ga.divide(s12, t(ga.multiply(dx1, dx2))))
        c = t(ga.negative(t(ga.divide(dx1, t(ga.multiply(dx2, s12))))))
    put(0, comb(a, b, c, 0, 1, 2))
    if uniform:
        a, b, c = _py(0.5 / adx), _py(-2.0 / adx), _py(1.5 / adx)
    else:
        dx1, dx2 = t(adx[-2]), t(adx[-1])
        s12 = t(ga.add(dx1, dx2))
        a = t(ga.divide(dx2, t(ga.multiply(dx1, s12))))
        b = t(ga.negative(t(ga.divide(s12, t(ga.multiply(dx1, dx2))))))
        c = t(ga.divide(t(ga.add(t(ga.multiply(dx2, 2.0)), dx1)), t(ga.multiply(dx2, s12))))
    put(-1, comb(a, b, c, -3, -2, -1))


def _py(v):
    """A host spacing as a Python number (weak, as NumPy's arithmetic treats it here)."""
    return complex(v) if np.iscomplexobj(v) else float(v)
