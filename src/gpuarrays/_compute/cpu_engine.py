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


def _where(z, cond, x, y) -> None:
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
