"""The cpu engine: NumPy on views of the raw memory, writing into the result's memory.

The cpu back-end's memory is host memory, so each operand becomes a NumPy
array over the same bytes (no copy) and NumPy's ufunc writes through ``out=``
into the result gpuarrays allocated -- NumPy never allocates the result.  Python
scalars go to NumPy as they are (NumPy 2 types them weakly, as the dispatch
did).  NumPy handles an output that overlaps an input itself, so ``a[1:] +=
a[:-1]`` gives NumPy's values.  Floating-point warnings are silenced: device
kernels cannot warn, and every back-end behaves alike (docs/compute.md,
"Engines").
"""

from __future__ import annotations

import threading

import numpy as np

from .. import _core
from .._array.make import ArrayBase
from .._common.raw import ndarray_at
from .table import Op

__all__ = ["run", "apply_to", "quiet", "loud", "view", "kernel", "own_kernel", "standard_fix",
           "direct_loop"]

try:
    # The error state lives in a context variable; setting it directly costs 0.2 us where
    # ``with np.errstate(all="ignore")`` costs 0.9 us (measured here, NumPy 2.4).
    from numpy._core.umath import _extobj_contextvar, _make_extobj
    _QUIET = _make_extobj(all="ignore")
except ImportError:  # another NumPy layout: the public, slower way
    _extobj_contextvar = None
    _QUIET = None


def make_view(address: int, shape: tuple, strides: tuple, dtype: np.dtype) -> np.ndarray:
    """A writeable NumPy array over host memory at ``address`` (element 0)."""
    return ndarray_at(address, shape, strides, dtype)


_core.configure(make_view=make_view,
                errstate=None if _extobj_contextvar is None else (_extobj_contextvar, _QUIET))

view = _core.host_view
"""``view(a)``: a writeable NumPy array over ``a``'s memory (``a`` live, on the cpu back-end).

Compiled: views are remembered by (address of element 0, shape, strides, dtype),
so finding one costs tens of nanoseconds where making one costs 1.9 us.  A view
only describes an address range; it is used only while a live array covers that
range, so an entry left behind by freed memory is harmless."""


_BLOCK = 1 << 16
"""Elements per block of ``where``'s select: its mask and its passes over one block stay
in cache, so memory sees one pass over the operands."""

_SELECT_MIN = 1 << 14
"""Below this many elements putmask's branches cost less than the select's extra passes."""

_BITS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
         8: np.dtype(np.uint64)}
_scratch = threading.local()  # per thread: the mask of one block (engine-internal, 512 KiB)


def _bits_of(v, dt: np.dtype, bits: np.dtype, n: int):
    """``v`` (an array of ``dt`` and ``n`` contiguous elements, or a Python scalar) as
    flat unsigned integers of the same bits (a scalar as one such integer, converted to
    ``dt`` first).  None when ``v`` does not fit."""
    if isinstance(v, np.ndarray):
        if v.dtype != dt or v.size != n or not v.flags.c_contiguous:
            return None
        return v.reshape(-1).view(bits)
    return dt.type(v).view(bits)  # (a Python int within dt's range: the dispatch checked)


def _select(z, cond, x, y) -> bool:
    """``z = cond ? x : y`` as bit operations, branch-free: ``y ^ ((x ^ y) & mask)``.

    ``putmask`` and NumPy's own ``where`` branch on every element, and a random condition
    makes them mispredict about half the time (16 M float32: 150-200 ms, where memory
    allows 15).  False when the operands do not fit (small, a complex128 output, broadcast or
    non-contiguous operands, other dtypes, memory shared with the output): the caller
    then copies and masks."""
    bits = _BITS.get(z.dtype.itemsize)
    n = z.size
    if (n < _SELECT_MIN or bits is None or not z.flags.c_contiguous or cond.shape != z.shape
            or not cond.flags.c_contiguous or cond.dtype != np.bool_):
        return False
    xb, yb = _bits_of(x, z.dtype, bits, n), _bits_of(y, z.dtype, bits, n)
    if xb is None or yb is None or any(isinstance(v, np.ndarray) and np.may_share_memory(z, v)
                                       for v in (cond, x, y)):
        return False
    zb, cb = z.reshape(-1).view(bits), cond.reshape(-1)
    buf = getattr(_scratch, "mask", None)
    if buf is None:
        buf = _scratch.mask = np.empty(_BLOCK * 8, np.uint8)
    mask_all = buf.view(bits)
    x_array, y_array = isinstance(xb, np.ndarray), isinstance(yb, np.ndarray)
    y_zero = not y_array and yb == 0
    for i in range(0, n, _BLOCK):
        j = min(i + _BLOCK, n)
        m, zi = mask_all[:j - i], zb[i:j]
        xi, yi = xb[i:j] if x_array else xb, yb[i:j] if y_array else yb
        np.subtract(0, cb[i:j], out=m, dtype=bits)  # all ones where cond, else zero
        if y_zero:
            np.bitwise_and(xi, m, out=zi)
        else:
            np.bitwise_xor(xi, yi, out=zi)
            np.bitwise_and(zi, m, out=zi)
            np.bitwise_xor(zi, yi, out=zi)
    return True


def _where(z, cond, x, y) -> None:
    if _select(z, cond, x, y):
        return
    if isinstance(x, np.ndarray) and np.may_share_memory(z, x):
        # out= is (or overlaps) x: writing y first would overwrite what x still has to give
        np.copyto(z, np.where(cond, x, y), casting="unsafe")
        return
    np.copyto(z, y, casting="unsafe")
    if z.flags.c_contiguous and cond.shape == z.shape and cond.flags.c_contiguous and (
            not isinstance(x, np.ndarray)
            or (x.shape == z.shape and x.dtype == z.dtype and x.flags.c_contiguous)):
        # putmask is 1.5x faster than a masked copyto here (1 000 and 16 M float32); it
        # needs operands it would not copy: contiguous, of the output's shape and dtype.
        np.putmask(z, cond, x)
    else:
        np.copyto(z, x, casting="unsafe", where=cond)


def _part(op: Op):
    def part(z, x) -> None:
        if isinstance(x, np.ndarray) and x.dtype.kind == "c":
            x = x.real if op.name == "real" else x.imag
        np.copyto(z, x, casting="unsafe")
    return part


def _round(z, x) -> None:
    if x.dtype.kind in "biu":
        np.copyto(z, x)
    else:
        np.rint(x, out=z)


def _clip(op: Op):
    def clip(z, x, lo, hi) -> None:
        op.ufunc(x, lo, hi, out=z, dtype=z.dtype, casting="unsafe")
    return clip


def _pow_sqrt(z, x) -> None:
    """``x ** 0.5`` (``table.POWERS``): NumPy's ``sqrt``, which NumPy's ``x ** 0.5`` runs
    too, except at ``-0`` and ``-inf``, where ``pow`` and the standard give ``+0`` and
    ``+inf`` and ``sqrt`` ``-0`` and NaN.  One ``minimum`` reduction tells whether there can
    be any (a positive minimum: none); the ``-inf`` are found before ``z`` is written
    (``x **= 0.5`` overwrites ``x``)."""
    if x.dtype.kind == "c":
        np.sqrt(x, z)
        return
    low = np.minimum.reduce(x, axis=None) if x.size else 1.0
    if low > 0:
        np.sqrt(x, z)
        return
    neg_inf = None if low > -np.inf else np.isneginf(x)  # low -inf, or NaN hiding one
    np.sqrt(x, z)
    np.add(z, 0.0, z)  # -0 + 0 is +0; every other value stays as it is
    if neg_inf is not None:
        z[neg_inf] = np.inf


_SPECIAL = {"where": lambda op: _where, "part": _part, "round": lambda op: _round,
            "first": _clip}
_OWN = {"pow_sqrt": _pow_sqrt}
"""Rows typed as a ufunc whose values are not the bare ufunc's: the engine's own ``fn(z, x)``."""
_kernels: dict[str, object] = {}


def kernel(op: Op):
    """The rows NumPy has no ufunc for (or types differently, or computes otherwise), as
    ``fn(z, *xs)``."""
    fn = _kernels.get(op.name)
    if fn is None:
        own = _OWN.get(op.name)
        fn = _kernels[op.name] = own if own is not None else _SPECIAL[op.typing](op)
    return fn


# What a Python scalar operand is packed as for a direct loop, by the loop dtype's kind
_PACKABLE = {"b": "b", "i": "i", "u": "u", "f": "f", "c": "c"}


def direct_loop(op: Op, keys: tuple, arg_dtypes: tuple, dt: np.dtype):
    """NumPy's own strided loop for ``op`` over ``arg_dtypes -> dt``, for the compiled
    engine to call with no ufunc call around it (docs/performance.md, "The elementwise host
    path"), or None when the engine must run the row otherwise: rows typed as a ufunc (but
    the engine's own kernels), ``round`` of floats (``rint``, as :func:`_round`), and the
    standard fixes that agree with NumPy on finite operands (:data:`FINITE_AGREES`).

    Returns ``(call_info, itemsizes, packs, finite_only)``: the capsule of
    ``ufunc._resolve_dtypes_and_context`` with its loop filled in by
    ``ufunc._get_strided_loop`` (NumPy's own implementation for exactly these dtypes, the one
    a ufunc call would run), the item sizes of the operands and the result, per operand
    ``"-"`` and its dtype's kind (an array: ``"-f"``) or the kind and size a Python scalar is
    packed as (``"f4"``), and whether the loop may run only when every operand is finite
    (``finite_only``: a standard fix of :data:`_STANDARD` that differs from NumPy only at
    infinities and NaN, which runs instead otherwise).  Only when every array operand
    already has its argument dtype (no cast) and NumPy resolves the loop to exactly those
    dtypes; float16 scalars are left to the ufunc.
    """
    fixed = standard_fix(op, dt)
    finite_only = fixed and op.name in FINITE_AGREES
    if (fixed and not finite_only) or op.name in _OWN or not (
            op.typing == "ufunc" or (op.typing == "round" and dt.kind in "fc")):
        return None
    ufunc = op.ufunc
    if not isinstance(ufunc, np.ufunc) or ufunc.nout != 1 or ufunc.nin != len(keys):
        return None
    packs = []
    for key, adt in zip(keys, arg_dtypes, strict=True):
        if isinstance(key, np.dtype):
            if key != adt:
                return None  # NumPy would cast this operand: the ufunc call does it
            packs.append("-" + key.kind)
        elif adt.kind in _PACKABLE and adt != np.float16 and adt.isnative:
            packs.append(f"{_PACKABLE[adt.kind]}{adt.itemsize}")
        else:
            return None
    try:
        dtypes, info = ufunc._resolve_dtypes_and_context((*arg_dtypes, dt))
        if tuple(dtypes) != (*arg_dtypes, dt):
            return None
        ufunc._get_strided_loop(info)
    except Exception:  # noqa: BLE001 -- no loop for these dtypes, or another NumPy: call it
        return None
    return info, tuple(d.itemsize for d in (*arg_dtypes, dt)), tuple(packs), finite_only


def own_kernel(op: Op) -> bool:
    """Whether the engine runs ``op`` (a ufunc-typed row) with :func:`kernel`, not the ufunc."""
    return op.name in _OWN


def run(op: Op, out, args: tuple) -> None:
    """``out[...] = op(*args)`` (arrays broadcast by NumPy, scalars as they are)."""
    z = view(out)
    xs = [view(x) if isinstance(x, ArrayBase) else x for x in args]
    if _extobj_contextvar is None:
        with np.errstate(all="ignore"):
            _apply(op, z, xs)
        return
    token = _extobj_contextvar.set(_QUIET)
    try:
        _apply(op, z, xs)
    finally:
        _extobj_contextvar.reset(token)


def _apply(op: Op, z: np.ndarray, xs: list) -> None:
    """``z[...] = op(*xs)`` on NumPy arrays and scalars (what :func:`run` runs; fused
    functions run it per block, fusion/cpu.py)."""
    if op.typing == "ufunc" and op.name not in _OWN:
        fix = _STANDARD.get(op.name)
        if fix is not None and z.dtype.kind in fix[0]:
            fix[1](z, *xs)
        else:
            op.ufunc(*xs, out=z)
    else:
        kernel(op)(z, *xs)


apply_to = _apply


def quiet():
    """Silence floating-point warnings in this thread until :func:`loud` (a token)."""
    if _extobj_contextvar is None:
        state = np.errstate(all="ignore")
        state.__enter__()
        return state
    return _extobj_contextvar.set(_QUIET)


def loud(token) -> None:
    """Undo :func:`quiet`."""
    if _extobj_contextvar is None:
        token.__exit__(None, None, None)
    else:
        _extobj_contextvar.reset(token)


# Where the standard's special cases and NumPy's differ ----------------------------------
# NumPy's floor_divide follows Python (inf // 2 is NaN, 1 // -inf is -1), its complex
# expm1 gives NaN for infinite parts and -0 for expm1(-0+0j), its complex tanh gives the
# zero imaginary part at an infinite real part the sign of sin(2b), its complex sign gives
# 1 for inf+nanj; the standard says otherwise and wins (docs/conformance.md).  Each fix
# runs NumPy's ufunc for every element and then overwrites the few special inputs.  One
# sum per operand finds whether there can be any (a finite sum: no infinity, no NaN), so
# ordinary data costs one fast pass; the special inputs are gathered before the ufunc runs,
# so an output that is also an input (``a //= b``) still sees them.

def _finite(x) -> bool:
    """No infinity or NaN in ``x`` (an array or a Python scalar); False may be a false alarm
    (a sum that overflows), which only costs the careful path."""
    if isinstance(x, np.ndarray):
        return bool(np.isfinite(np.add.reduce(x, axis=None)))
    return type(x) is not float or x - x == 0


def _gathered(x, shape: tuple, mask: np.ndarray):
    """The elements of ``x`` (an array broadcast to ``shape``, or a scalar) under ``mask``."""
    if isinstance(x, np.ndarray):
        return np.broadcast_to(x, shape)[mask]
    return x


def _is_inf(x):
    """``isinf`` of an operand: an array, or a Python scalar (ints are never infinite)."""
    if isinstance(x, np.ndarray):
        return np.isinf(x)
    return isinstance(x, float) and (x == np.inf or x == -np.inf)


def _floor_divide(z, x1, x2) -> None:
    """Real floating ``floor_divide``: an infinite operand against a finite one gives the
    quotient's signed infinity or signed zero (``x1 / x2``) where NumPy gives NaN or -1."""
    if _finite(x1) and _finite(x2):
        np.floor_divide(x1, x2, out=z)
        return
    mask = np.asarray(np.logical_or(_is_inf(x1), _is_inf(x2)))
    if not mask.any():
        np.floor_divide(x1, x2, out=z)
        return
    mask = np.broadcast_to(mask, z.shape)
    fixed = np.divide(_gathered(x1, z.shape, mask), _gathered(x2, z.shape, mask))
    np.floor_divide(x1, x2, out=z)
    z[mask] = fixed


def _complex_parts(re: np.ndarray, im: np.ndarray, dt: np.dtype) -> np.ndarray:
    out = np.empty(re.shape, dt)
    out.real = re
    out.imag = im
    return out


def _expm1_special(v: np.ndarray) -> np.ndarray:
    """The standard's complex ``expm1`` for non-finite ``v``."""
    a, b = v.real, v.imag
    finite_b = np.isfinite(b)
    nan = np.nan
    re = np.select([np.isposinf(a) & (b == 0), np.isposinf(a) & finite_b, np.isposinf(a),
                    np.isneginf(a)],
                   [np.inf, np.inf * np.cos(b), np.inf, -1.0], nan)
    im = np.select([np.isposinf(a) & (b == 0), np.isposinf(a) & finite_b, np.isposinf(a),
                    np.isneginf(a) & finite_b, np.isneginf(a), np.isnan(a) & (b == 0)],
                   [b, np.inf * np.sin(b), nan, np.copysign(0.0, np.sin(b)), 0.0, b], nan)
    return _complex_parts(re, im, v.dtype)


def _expm1_complex(z, x) -> None:
    """Complex ``expm1``: the standard's values at infinite and NaN parts, and ``+0`` real
    at ``+-0 + 0j`` (a result of exactly ``-0 +- 0j`` only comes from a ``-0 +- 0j`` input)."""
    if _finite(x):
        np.expm1(x, out=z)
    else:
        mask = np.asarray(~np.isfinite(x))
        fixed = _expm1_special(x[mask])
        np.expm1(x, out=z)
        z[mask] = fixed
    zero = np.asarray(z == 0)
    if zero.any():
        z.real[zero] = 0.0


def _tanh_complex(z, x) -> None:
    """Complex ``tanh`` at an infinite real part: ``+-1 + 0j`` with the zero's sign the
    imaginary part's (the standard), where NumPy signs it as ``sin(2b)``."""
    if _finite(x):
        np.tanh(x, out=z)
        return
    mask = np.asarray(np.isinf(x.real))
    v = x[mask]
    fixed = _complex_parts(np.copysign(1.0, v.real), np.copysign(0.0, v.imag), v.dtype)
    np.tanh(x, out=z)
    z[mask] = fixed


def _sign_complex(z, x) -> None:
    """Complex ``sign`` with a NaN part is ``NaN + NaN j`` (NumPy: ``sign(inf+nanj)`` is 1)."""
    if _finite(x):
        np.sign(x, out=z)
        return
    mask = np.asarray(np.isnan(x))
    np.sign(x, out=z)
    z[mask] = complex(np.nan, np.nan)


_STANDARD = {"floor_divide": ("f", _floor_divide), "expm1": ("c", _expm1_complex),
             "tanh": ("c", _tanh_complex), "sign": ("c", _sign_complex)}
"""Operation -> (result dtype kinds, ``fn(z, *xs)``) where the standard's values are not
NumPy's ufunc's."""

FINITE_AGREES = frozenset(("floor_divide", "tanh", "sign"))
"""The fixes above that change nothing when every operand is finite: the compiled engine
runs NumPy's loop directly for finite operands (``direct_loop(finite_only=True)``) and the
fix only when an infinity or NaN is there (``expm1`` also fixes zeros)."""


def standard_fix(op: Op, dt: np.dtype) -> bool:
    """Whether ``op`` with result dtype ``dt`` runs a fix above instead of the bare ufunc
    (then the compiled path calls :func:`run`, not the ufunc)."""
    fix = _STANDARD.get(op.name)
    return fix is not None and dt.kind in fix[0]
