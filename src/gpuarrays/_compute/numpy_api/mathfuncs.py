"""NumPy's elementwise functions composed of the table's rows (sinc, i0, angle, nan_to_num ...).

Each function has NumPy 2.4's signature and result dtype and runs on its operand's device
as a short chain of elementwise rows (``dispatch.apply``) and namespace functions
(``where``, ``cumulative_sum``, ``diff``, ``arange``); nothing is copied to the host but a
scalar (``real_if_close``'s verdict).  Temporaries go back to the pool as soon as the next
step has used them.  NumPy's two-output ufuncs ``divmod``, ``modf`` and ``frexp`` are here
too (``np.divmod(garray, ...)`` is routed to them by name).  The window functions
(``bartlett`` ...) take ``device=`` and give float64, or float32 on a device without
float64.  Differences from NumPy are in docs/numpy.md ("Elementwise math").
"""

from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from ..._array.make import ArrayBase
from ..._memory.devices import get_device
from ..creation import arange, full, ones, zeros
from ..dispatch import apply
from ..dtypes import astype
from ..elementwise import where
from ..statistical import cumulative_sum
from ..table import OPS
from ..utility import all as _all
from ..utility import diff

__all__ = [
    "angle",
    "bartlett",
    "blackman",
    "divmod",
    "fix",
    "frexp",
    "hamming",
    "hanning",
    "i0",
    "iscomplex",
    "isneginf",
    "isposinf",
    "isreal",
    "kaiser",
    "modf",
    "nan_to_num",
    "real_if_close",
    "sinc",
    "unwrap",
]

_F64_LESS = {np.dtype("f8"): np.dtype("f4"), np.dtype("c16"): np.dtype("c8")}


# ------------------------------------------------------------------------------ helpers
def _array(name: str, x):
    """``x`` itself if it is a live gpuarrays array, else NumPy's ``TypeError`` with a remedy."""
    if not isinstance(x, ArrayBase):
        raise TypeError(f"{name}() takes a gpuarrays array, got {type(x).__name__} "
                        f"{x!r:.60}; copy host data to the device first with "
                        f"ga.asarray(x, device=...)")
    return x


def _op(name: str, *args, out=None):
    """One row of the table on ``args``, into ``out`` if given.  An ``out`` of ``where`` is
    never its second operand: the cpu engine's select writes the third one there first."""
    return apply(OPS[name], args, out)


def _free(*arrays) -> None:
    for a in arrays:
        if a is not None:
            a.free()


def _keep(temps: list, a) -> None:
    """Take ``a`` off a list of temporaries (by identity: ``==`` on arrays is elementwise)."""
    temps[:] = [t for t in temps if t is not a]


def _on(dev, dt: np.dtype) -> np.dtype:
    """``dt`` as the device holds it: float64/complex128 become float32/complex64 on a
    device without float64 (as the namespace's promotion does)."""
    dt = np.dtype(dt)
    return dt if dev.info.float64 else _F64_LESS.get(dt, dt)


def _numpy_dtype(fn, dt: np.dtype, dev) -> np.dtype:
    """The dtype NumPy's ``fn`` gives for an array of ``dt`` (run on an empty host array:
    no data), as ``dev`` holds it."""
    with np.errstate(all="ignore"):
        found = fn(np.zeros(1, dt))
    return _on(dev, np.asarray(found).dtype)


def _as(x, dt: np.dtype):
    """``x`` converted to ``dt``, and whether that made a new array (to free)."""
    if x.dtype == dt:
        return x, False
    return astype(x, dt), True


def _real_scalar(name: str, what: str, v) -> float:
    if isinstance(v, (bool, int, float, np.integer, np.floating, np.bool_)):
        return float(v)
    raise TypeError(f"{name}(): {what} must be a real number, got {type(v).__name__} "
                    f"{v!r:.60}; pass a Python int or float")


# ------------------------------------------------------------------ NumPy's two-output ufuncs
def _out_pair(name: str, out):
    if out is None:
        return None, None
    if type(out) is not tuple or len(out) != 2:
        raise TypeError(f"{name}(): out must be a tuple of two gpuarrays arrays (or None), "
                        f"got {type(out).__name__}; pass out=(q, r)")
    return out


def divmod(x1, x2, /, out=None):
    """``(x1 // x2, x1 % x2)``: ``floor_divide`` and ``remainder`` (two kernels), NumPy's
    values and dtypes (Python's sign rules; integer division by 0 gives ``(0, 0)``).

    ``out`` is None or a tuple of two arrays the results are written into.  Where exactly
    one real operand is infinite, NumPy's quotient (NaN, -1 or a signed zero) replaces
    ``floor_divide``'s (the standard's signed infinity or zero): one ``isfinite`` and
    ``all`` per floating operand tell, reading back a bool, whether that can happen.
    """
    o1, o2 = _out_pair("divmod", out)
    q = _op("floor_divide", x1, x2, out=o1)
    try:
        r = _op("remainder", x1, x2, out=o2)
        if q.dtype.kind == "f" and not (_all_finite(x1) and _all_finite(x2)):
            _numpy_quotient(q, x1, x2)
    except BaseException:
        if o1 is None:
            q.free()
        raise
    return q, r


def _all_finite(v) -> bool:
    if isinstance(v, ArrayBase):
        if v.dtype.kind not in "fc" or v.size == 0:
            return True
        with _op("isfinite", v) as fin, _all(fin) as verdict:
            return builtins.bool(verdict)
    return not isinstance(v, float) or math.isfinite(v)


def _numpy_quotient(q, x1, x2) -> None:
    """NumPy's ``npy_divmod`` quotient where one operand is infinite, written into ``q``:
    ``x1`` infinite (``x2`` finite, nonzero): NaN; ``x2`` infinite (``x1`` finite): -1
    where the signs differ and ``x1 != 0``, else ``x1 / x2`` (a signed zero)."""
    dev = q.device
    a = x1 if isinstance(x1, ArrayBase) else full((), x1, dtype=q.dtype, device=dev)
    b = x2 if isinstance(x2, ArrayBase) else full((), x2, dtype=q.dtype, device=dev)
    temps = [t for t, x in ((a, x1), (b, x2)) if t is not x]

    def t(v):
        temps.append(v)
        return v
    try:
        # (operands may be 0-d: the masks broadcast to q's shape as they combine)
        m = t(_op("logical_and", t(_op("isfinite", a)), t(_op("isinf", b))))
        differ = t(_op("not_equal", t(_op("less", a, 0)), t(_op("less", b, 0))))
        differ = t(_op("logical_and", differ, t(_op("not_equal", a, 0))))
        alt = t(_op("divide", a, b))
        alt = t(_op("where", differ, -1.0, alt))
        _op("where", m, alt, q, out=q)
        m = t(_op("logical_and", t(_op("isinf", a)), t(_op("isfinite", b))))
        m = t(_op("logical_and", m, t(_op("not_equal", b, 0))))
        _op("where", m, math.nan, q, out=q)
    finally:
        _free(*temps)


def _float_operand(name: str, x, ufunc):
    """``x`` as the floating dtype NumPy's ``ufunc`` computes it in (int8 -> float16 ...),
    and whether it is a new array.  Complex (and what the ufunc refuses) is a TypeError."""
    _array(name, x)
    dt = x.dtype
    try:
        found = ufunc.resolve_dtypes((dt, None, None))[0]
    except TypeError as e:
        raise TypeError(f"{name}() does not accept {dt} arrays (NumPy's {name} takes bool, "
                        f"integer and real floating arrays); convert first, e.g. "
                        f"x.real or ga.astype(x, ga.float32)") from e
    return _as(x, _on(x.device, found))


def modf(x, /):
    """``(fractional part, integral part)`` of ``x``, both with the sign of ``x`` (NumPy's
    ``modf``: ``modf(-2.0)`` is ``(-0.0, -2.0)``, ``modf(inf)`` ``(0.0, inf)``).

    Composed on the device: ``trunc``, then ``copysign(where(isinf(x), 0, x - trunc(x)),
    x)``.  Integers and bool are converted as NumPy does (int8 -> float16 ...).
    """
    xf, made = _float_operand("modf", x, np.modf)
    integral = diff_ = inf = None
    try:
        integral = _op("trunc", xf)
        diff_ = _op("subtract", xf, integral)
        inf = _op("isinf", xf)
        _op("where", inf, 0.0, diff_, out=diff_)
        _op("copysign", diff_, xf, out=diff_)
        frac, diff_ = diff_, None
        return frac, integral
    except BaseException:
        _free(integral)
        raise
    finally:
        _free(diff_, inf, xf if made else None)


_UINT = {2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


def frexp(x, /):
    """``(mantissa, exponent)`` with ``x == mantissa * 2 ** exponent``, ``0.5 <= |mantissa|
    < 1`` (NumPy's ``frexp``: the exponent is int32; 0, inf and NaN give exponent 0 and
    themselves as the mantissa).

    Composed on the device, exactly: subnormal values are scaled into the normal range,
    the exponent is read from the bits (``view`` as unsigned, shift, mask), and the mantissa
    is ``ldexp(x, -exponent)``.
    """
    xf, made = _float_operand("frexp", x, np.frexp)
    dt = xf.dtype
    info = np.finfo(dt)
    nmant, bias = int(info.nmant), int(info.maxexp) - 1
    temps: list = []

    def t(a):
        temps.append(a)
        return a
    try:
        ax = t(_op("abs", xf))
        sub = t(_op("less", ax, float(info.tiny)))  # zeros and subnormals
        scaled = t(_op("multiply", xf, float(2.0 ** (nmant + 1))))
        scaled = t(where(sub, scaled, xf))  # every finite nonzero value normal
        with scaled.view(_UINT[dt.itemsize]) as bits:
            field = t(_op("bitwise_right_shift", bits, nmant))
        _op("bitwise_and", field, 2 * bias + 1, out=field)
        e = t(astype(field, np.int32))
        _op("subtract", e, bias - 1, out=e)
        lowered = t(_op("subtract", e, nmant + 1))
        _op("where", sub, lowered, e, out=e)
        finite = t(_op("isfinite", xf))
        nonzero = t(_op("not_equal", xf, 0))
        _op("logical_and", finite, nonzero, out=finite)
        _op("logical_not", finite, out=finite)
        _op("where", finite, 0, e, out=e)  # 0 for 0, inf and NaN
        _op("negative", e, out=lowered)
        mantissa = _op("ldexp", xf, lowered)
        _keep(temps, e)
        return mantissa, e
    finally:
        _free(*temps, xf if made else None)


# ------------------------------------------------------------------------------ compositions
def sinc(x):
    """``sin(pi x) / (pi x)``, 1 at 0 (NumPy's formula: ``y = pi * x``, zeros replaced by
    the dtype's eps, ``sin(y) / y``; integers and bool give float64)."""
    _array("sinc", x)
    y = _op("multiply", x, math.pi)
    s = nz = None
    try:
        eps = float(np.finfo(y.dtype).eps) if y.dtype.kind == "f" else 1e-20
        nz = _op("equal", y, 0)
        _op("where", nz, eps, y, out=y)
        s = _op("sin", y)
        _op("divide", s, y, out=s)
        result, s = s, None
        return result
    finally:
        _free(y, nz, s)


# Cephes' Chebyshev coefficients for exp(-x) I0(x), as NumPy's i0 (numpy/lib/_function_base_impl)
_I0A = (
    -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
    1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
    9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
    1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
    -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
    1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
    -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
    1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
_I0B = (
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
    3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
    -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
    7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
    -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
    3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
    2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
    8.04490411014108831608E-1)


def _chbevl(t, coeffs, dt):
    """Clenshaw's recurrence of Cephes' ``chbevl`` over the array ``t``, in ``dt`` (three
    buffers, three kernels a coefficient): ``b0 = t * b1 - b2 + c``, then ``(b0 - b2) / 2``."""
    dev = t.device
    b0 = full(t.shape, coeffs[0], dtype=dt, device=dev)
    b1 = zeros(t.shape, dtype=dt, device=dev)
    b2 = zeros(t.shape, dtype=dt, device=dev)
    try:
        for c in coeffs[1:]:
            # (b2, b1) <- (b1, b0); the old b2's buffer receives the new b0
            b0, b1, b2 = b2, b0, b1
            _op("multiply", t, b1, out=b0)
            _op("subtract", b0, b2, out=b0)
            _op("add", b0, c, out=b0)
        _op("subtract", b0, b2, out=b0)
        _op("multiply", b0, 0.5, out=b0)
        result, b0 = b0, None
        return result
    finally:
        _free(b0, b1, b2)


def i0(x):
    """The modified Bessel function of the first kind, order 0 (NumPy's ``i0``: Cephes'
    Chebyshev expansions on ``|x| <= 8`` and beyond, NumPy's arithmetic in ``x``'s floating
    dtype, Clenshaw's recurrence as three kernels a coefficient; integers and bool give
    float64).  Complex input is NumPy's ``TypeError``."""
    _array("i0", x)
    if x.dtype.kind == "c":
        raise TypeError("i0 not supported for complex values (as NumPy); pass x.real or "
                        "ga.abs(x)")
    dev = x.device
    out_dt = _on(dev, x.dtype if x.dtype.kind == "f" else np.dtype(np.float64))
    temps: list = []

    def t(a):
        temps.append(a)
        return a
    try:
        if x.dtype == out_dt:
            xw = t(_op("abs", x))
        else:
            xw = t(astype(x, out_dt))
            _op("abs", xw, out=xw)
        ex = t(_op("exp", xw))
        t1 = t(_op("divide", xw, 2.0))
        _op("subtract", t1, 2.0, out=t1)
        r1 = t(_chbevl(t1, _I0A, out_dt))
        _op("multiply", ex, r1, out=r1)
        t2 = t(_op("divide", 32.0, xw))
        _op("subtract", t2, 2.0, out=t2)
        r2 = t(_chbevl(t2, _I0B, out_dt))
        _op("multiply", ex, r2, out=r2)
        root = t(_op("sqrt", xw))
        _op("divide", r2, root, out=r2)
        small = t(_op("less_equal", xw, 8.0))
        _op("where", small, r1, r2, out=r2)
        _keep(temps, r2)
        return r2
    finally:
        _free(*temps)


def angle(z, deg=False):
    """The counterclockwise angle from the positive real axis, ``atan2(z.imag, z.real)``,
    in radians (degrees with ``deg=True``); NumPy's dtypes (real input: ``atan2(0, z)``)."""
    _array("angle", z)
    if z.dtype.kind == "c":
        with z.real as re, z.imag as im:
            a = _op("atan2", im, re)
    else:
        zf, made = _as(z, _numpy_dtype(np.angle, z.dtype, z.device))
        try:
            a = _op("atan2", 0.0, zf)
        finally:
            if made:
                zf.free()
    if deg:
        _op("multiply", a, 180 / math.pi, out=a)
    return a


def fix(x, out=None):
    """Round towards zero (NumPy's ``fix``: ``trunc``; integers and bool keep their dtype).
    ``out``: an array the result is written into (returned)."""
    _array("fix", x)
    if x.dtype.kind == "c":
        raise TypeError(f"fix() does not accept {x.dtype} (as NumPy); round the parts, "
                        f"e.g. ga.fix(x.real)")
    if x.dtype.kind == "b":
        if out is None:
            return astype(x, x.dtype)
        out[...] = x
        return out
    return _op("trunc", x, out=out)


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN replaced by ``nan``, +inf by ``posinf`` (default: the dtype's largest value) and
    -inf by ``neginf`` (its most negative), in the real and imaginary parts of complex
    arrays; other dtypes unchanged.  ``copy=False`` writes into ``x`` and returns it.

    Three nested ``where`` kernels per part, each tested against the original values (as
    NumPy finds every mask before it writes)."""
    _array("nan_to_num", x)
    values = [_real_scalar("nan_to_num", name, v) if v is not None else None
              for name, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf))]
    if x.dtype.kind not in "fc":
        return astype(x, x.dtype) if copy else x
    result = astype(x, x.dtype) if copy else x
    try:
        info = np.finfo(x.dtype)
        big = values[1] if values[1] is not None else float(info.max)
        small = values[2] if values[2] is not None else float(info.min)
        parts = (result.real, result.imag) if x.dtype.kind == "c" else (result,)
        for d in parts:
            _replace(d, values[0], big, small)
            if d is not result:
                d.free()
    except BaseException:
        if copy:
            result.free()
        raise
    return result


def _replace(d, nan: float, big: float, small: float) -> None:
    temps = []
    try:
        mask = _op("equal", d, -math.inf)
        temps.append(mask)
        tmp = _op("where", mask, small, d)
        temps.append(tmp)
        _op("equal", d, math.inf, out=mask)
        _op("where", mask, big, tmp, out=tmp)
        _op("isnan", d, out=mask)
        _op("where", mask, nan, tmp, out=d)
    finally:
        _free(*temps)


def _signed_inf(name: str, x, value: float, out):
    _array(name, x)
    if x.dtype.kind == "c":
        raise TypeError(f"This operation is not supported for {x.dtype} values because it "
                        f"would be ambiguous ({name}, as NumPy); test the parts, e.g. "
                        f"ga.{name}(x.real)")
    return _op("equal", x, value, out=out)


def isposinf(x, out=None):
    """Whether each element is +inf (bool): ``x == inf``; complex is NumPy's TypeError."""
    return _signed_inf("isposinf", x, math.inf, out)


def isneginf(x, out=None):
    """Whether each element is -inf (bool): ``x == -inf``; complex is NumPy's TypeError."""
    return _signed_inf("isneginf", x, -math.inf, out)


def iscomplex(x):
    """Whether each element has a nonzero imaginary part (bool; all false for real arrays)."""
    _array("iscomplex", x)
    if x.dtype.kind != "c":
        return zeros(x.shape, dtype=bool, device=x.device)
    with x.imag as im:
        return _op("not_equal", im, 0)


def isreal(x):
    """Whether each element has a zero imaginary part (bool; all true for real arrays)."""
    _array("isreal", x)
    if x.dtype.kind != "c":
        return ones(x.shape, dtype=bool, device=x.device)
    with x.imag as im:
        return _op("equal", im, 0)


def real_if_close(a, tol=100):
    """``a.real`` (a view) if every imaginary part is below ``tol`` (in machine epsilons of
    ``a``'s dtype when ``tol > 1``), else ``a`` itself; real arrays are returned as they
    are.  One bool is read back from the device (the ``all`` over ``|a.imag| < tol``)."""
    _array("real_if_close", a)
    tol = _real_scalar("real_if_close", "tol", tol)
    if a.dtype.kind != "c":
        return a
    if tol > 1:
        tol = float(np.finfo(a.dtype).eps) * tol
    with a.imag as im:
        mag = _op("abs", im)
    try:
        close = _op("less", mag, tol)
    finally:
        mag.free()
    with close:
        verdict = _all(close)
    with verdict:
        if builtins.bool(verdict):
            return a.real
    return a


def unwrap(p, discont=None, axis=-1, *, period=2 * math.pi):
    """Unwrap by taking the complement of large deltas with respect to the period (NumPy's
    algorithm: ``diff``, ``remainder``, ``where``, then ``cumulative_sum`` along ``axis``)."""
    _array("unwrap", p)
    if p.ndim == 0:
        raise ValueError("unwrap(): p must be at least one dimensional (as NumPy's diff); "
                         "pass a 1-d array, e.g. p.reshape(1)")
    if p.dtype.kind == "c":
        raise TypeError(f"unwrap() does not accept {p.dtype} (as NumPy's remainder); "
                        f"unwrap the angle, e.g. ga.unwrap(ga.angle(p))")
    try:
        ax = operator.index(axis)
    except TypeError as e:
        raise TypeError(f"unwrap(): axis must be an int, got {type(axis).__name__}") from e
    if not -p.ndim <= ax < p.ndim:
        raise np.exceptions.AxisError(ax, p.ndim)
    ax %= p.ndim
    if isinstance(period, (bool, np.bool_)) or not isinstance(
            period, (int, float, np.integer, np.floating)):
        raise TypeError(f"unwrap(): period must be a real number, got "
                        f"{type(period).__name__}; pass e.g. period=2*np.pi")
    temps: list = []

    def t(a):
        temps.append(a)
        return a
    try:
        dd = t(diff(p, axis=ax))
        if discont is None:
            discont = period / 2
        dtype = _on(p.device, np.result_type(dd.dtype, period))
        if dtype.kind in "iu":
            high, rem = builtins.divmod(period, 2)
            ambiguous = rem == 0
        else:
            high = period / 2
            ambiguous = True
        low = -high
        ddmod = t(_op("subtract", dd, low))
        _op("remainder", ddmod, period, out=ddmod)
        _op("add", ddmod, low, out=ddmod)
        if ambiguous:
            at_low = t(_op("equal", ddmod, low))
            rising = t(_op("greater", dd, 0))
            _op("logical_and", at_low, rising, out=at_low)
            _op("where", at_low, high, ddmod, out=ddmod)
        correct = t(_op("subtract", ddmod, dd))
        small = t(_op("abs", dd))
        small2 = t(_op("less", small, discont))
        _op("where", small2, 0, correct, out=correct)
        up = astype(p, dtype)
        try:
            index = (slice(None),) * ax + (slice(1, None),)
            total = t(cumulative_sum(correct, axis=ax))
            with p[index] as tail:
                shifted = t(_op("add", tail, total))
            up[index] = shifted
        except BaseException:
            up.free()
            raise
        return up
    finally:
        _free(*temps)


# ---------------------------------------------------------------------------- windows
def _window_length(name: str, M) -> float:
    if isinstance(M, (bool, int, float, np.integer, np.floating, np.bool_)):
        return float(M)
    raise TypeError(f"{name}(): M must be a number (the window length), got "
                    f"{type(M).__name__} {M!r:.60}; pass an int")


def _window_start(name: str, M, device):
    """``(M as float, device, dtype, early result or None)``: NumPy's empty (M < 1) and
    one-point (M == 1) windows."""
    m = _window_length(name, M)
    dev = get_device(device)
    dt = np.dtype(np.float64 if dev.info.float64 else np.float32)
    if m < 1:
        return m, dev, dt, zeros(0, dtype=dt, device=dev)
    if m == 1:
        return m, dev, dt, ones(1, dtype=dt, device=dev)
    return m, dev, dt, None


def _cosine_window(name: str, M, device, terms: tuple):
    """``sum(a * cos(k * pi * n / (M - 1)))`` over ``terms`` ``(k, a)``, plus ``terms[0]``'s
    constant, for ``n = 1 - M, 3 - M, ..., M - 1`` (NumPy's blackman/hamming/hanning)."""
    m, dev, dt, early = _window_start(name, M, device)
    if early is not None:
        return early
    n = arange(1 - m, m, 2, dtype=dt, device=dev)
    constant, cosines = terms[0], terms[1:]
    result = full(n.shape, constant, dtype=dt, device=dev)
    arg = None
    try:
        for k, a in cosines:
            arg = _op("multiply", n, k * math.pi)
            _op("divide", arg, m - 1, out=arg)
            _op("cos", arg, out=arg)
            _op("multiply", arg, a, out=arg)
            _op("add", result, arg, out=result)
            arg.free()
            arg = None
    except BaseException:
        result.free()
        raise
    finally:
        _free(n, arg)
    return result


def bartlett(M, *, device=None):
    """The Bartlett (triangular) window of ``M`` points, as NumPy's, made on ``device``
    (float64; float32 on a device without float64)."""
    m, dev, dt, early = _window_start("bartlett", M, device)
    if early is not None:
        return early
    n = arange(1 - m, m, 2, dtype=dt, device=dev)
    temps = [n]
    try:
        r = _op("divide", n, m - 1)
        temps.append(r)
        up = _op("add", r, 1.0)
        temps.append(up)
        _op("subtract", 1.0, r, out=r)
        low = _op("less_equal", n, 0)
        temps.append(low)
        _op("where", low, up, r, out=r)
        _keep(temps, r)
        return r
    finally:
        _free(*temps)


def blackman(M, *, device=None):
    """The Blackman window of ``M`` points, as NumPy's, made on ``device``
    (``0.42 + 0.5 cos(pi n / (M-1)) + 0.08 cos(2 pi n / (M-1))``)."""
    return _cosine_window("blackman", M, device, (0.42, (1.0, 0.5), (2.0, 0.08)))


def hamming(M, *, device=None):
    """The Hamming window of ``M`` points, as NumPy's, made on ``device``
    (``0.54 + 0.46 cos(pi n / (M-1))``)."""
    return _cosine_window("hamming", M, device, (0.54, (1.0, 0.46)))


def hanning(M, *, device=None):
    """The Hann window of ``M`` points, as NumPy's, made on ``device``
    (``0.5 + 0.5 cos(pi n / (M-1))``)."""
    return _cosine_window("hanning", M, device, (0.5, (1.0, 0.5)))


def kaiser(M, beta, *, device=None):
    """The Kaiser window of ``M`` points and shape ``beta``, as NumPy's, made on ``device``:
    ``i0(beta * sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(beta)``, ``alpha = (M - 1) / 2``
    (``ga.i0`` on the device; ``i0(beta)``, one number, on the host)."""
    b = _real_scalar("kaiser", "beta", beta)
    m = _window_length("kaiser", M)
    dev = get_device(device)
    dt = np.dtype(np.float64 if dev.info.float64 else np.float32)
    if m == 1:
        return ones(1, dtype=dt, device=dev)
    n = arange(0.0, m, dtype=dt, device=dev)  # empty for M <= 0, as NumPy's
    alpha = (m - 1) / 2.0
    temps = [n]
    try:
        _op("subtract", n, alpha, out=n)
        _op("divide", n, alpha, out=n)
        _op("multiply", n, n, out=n)
        _op("subtract", 1.0, n, out=n)
        _op("sqrt", n, out=n)
        _op("multiply", n, b, out=n)
        r = i0(n)
        _op("divide", r, float(np.i0(b)), out=r)
        return r
    finally:
        _free(*temps)
