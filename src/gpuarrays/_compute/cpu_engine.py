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

__all__ = ["run", "view", "kernel"]

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


_SPECIAL = {"where": lambda op: _where, "part": _part, "round": lambda op: _round,
            "first": _clip}
_kernels: dict[str, object] = {}


def kernel(op: Op):
    """The rows NumPy has no ufunc for (or types differently), as ``fn(z, *xs)``."""
    fn = _kernels.get(op.name)
    if fn is None:
        fn = _kernels[op.name] = _SPECIAL[op.typing](op)
    return fn


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
    if op.typing == "ufunc":
        op.ufunc(*xs, out=z)
    else:
        kernel(op)(z, *xs)
