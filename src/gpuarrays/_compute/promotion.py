"""Type promotion: the standard's lattice, mixed kinds as NumPy 2, weak Python scalars.

Within a kind the result is the standard's promotion table; across kinds (int
with float, bool with int, int64 with uint64) it is NumPy 2's; a Python scalar
takes the dtype of the array it meets when it fits ("weak"), and an ``int``
that does not fit raises ``OverflowError`` as NumPy 2 does.  NumPy implements
exactly these rules (NEP 50), so the dtypes come from its loop resolution; this
module adds the device's view: on a device without float64 the float64 that
only a Python scalar (or an integer division) brings in becomes float32
(docs/compute.md, "Type promotion").
"""

from __future__ import annotations

import numpy as np

from .table import Op

__all__ = ["SCALAR_TYPES", "key_of", "resolve", "result_type", "check_scalar", "integer_limits"]

SCALAR_TYPES = (bool, int, float, complex)
"""Python scalars: weak operands (kernel arguments, never allocations)."""

_BOOL = np.dtype(bool)
_F8, _F4, _C16, _C8 = (np.dtype(n) for n in ("f8", "f4", "c16", "c8"))
_U1 = np.dtype("u1")
_WITHOUT_F64 = {_F8: _F4, _C16: _C8}
_EXAMPLE = {bool: False, int: 0, float: 0.0, complex: 0j}
_KIND_OF = {bool: _BOOL, int: np.dtype("i8"), float: _F8, complex: _C16}

_resolved: dict[tuple, tuple[tuple[np.dtype, ...], np.dtype]] = {}
_limits: dict[np.dtype, tuple[int, int]] = {}


def key_of(x: object) -> np.dtype | type:
    """What typing sees of an operand: its dtype, or the Python scalar's type."""
    dt = getattr(x, "dtype", None)
    if dt is not None:
        return dt
    return bool if type(x) is bool else type(x)


def result_type(*keys: np.dtype | type) -> np.dtype:
    """The promoted dtype of dtypes and Python scalar types (weak), as NumPy 2."""
    return np.result_type(*(_EXAMPLE[k] if type(k) is type else k for k in keys))


def _category_error(op: Op, keys: tuple) -> TypeError:
    shown = ", ".join(k.__name__ if type(k) is type else str(k) for k in keys)
    return TypeError(
        f"{op.name}() does not accept ({shown}): it takes {op.category} data types only; "
        f"convert the operands first (e.g. ga.astype(x, ga.float32))")


def _resolve(op: Op, keys: tuple, float64: bool) -> tuple[tuple[np.dtype, ...], np.dtype]:
    # Mixed kinds as NumPy 2 (bool with int, int with float): an operand may lie outside the
    # category when another one is inside it and the promoted dtypes are.
    inside = [_KIND_OF.get(k, k) in op.accepts for k in keys]
    if op.typing in ("ufunc", "round") and _BOOL not in op.accepts and all(
            k is bool or k == _BOOL for k in keys) and any(k == _BOOL for k in keys):
        return _resolve_bool(op, keys)
    if (not inside[0] if op.typing == "first" else not any(inside)) and not _int_to_float(op, keys):
        raise _category_error(op, keys)
    if op.typing == "where":
        if keys[0] != _BOOL:
            raise TypeError(f"where() needs a bool condition, got {keys[0]}; "
                            f"compare first (e.g. cond != 0)")
        dt = result_type(*keys[1:])
        args, out = (_BOOL, dt, dt), dt
    elif op.typing == "first":
        dt = keys[0]
        args, out = (dt,) * len(keys), dt
    elif op.typing == "part":
        dt = keys[0]
        out = np.dtype(f"f{dt.itemsize // 2}") if dt.kind == "c" else dt
        args = (dt,)
    elif op.typing == "round" and keys[0].kind in "biu":
        args, out = (keys[0],), keys[0]
    else:
        try:
            found = op.ufunc.resolve_dtypes(
                tuple(_BOOL if k is bool else k for k in keys) + (None,) * op.ufunc.nout)
        except TypeError as e:
            raise _category_error(op, keys) from e
        args, out = found[:op.nin], found[op.nin]
    for dt in args:
        if dt not in op.accepts:
            raise _category_error(op, keys)
    if not float64:
        arrays = {k for k in keys if type(k) is not type}
        args = tuple(_WITHOUT_F64.get(d, d) if d not in arrays else d for d in args)
        out = _WITHOUT_F64.get(out, out) if out not in arrays else out
    return args, out


def _int_to_float(op: Op, keys: tuple) -> bool:
    """Integer operands of a floating-point function (``sqrt(int64)``, ``sin(int8)``): NumPy
    computes them in its float loop (float64 for int32/int64, float16 for int8 ...), found
    by its loop resolution below; the standard leaves such input to the library."""
    return op.typing == "ufunc" and op.category in _FLOAT_CATEGORIES and all(
        k is int or (isinstance(k, np.dtype) and k.kind in "iu") for k in keys) and any(
        isinstance(k, np.dtype) for k in keys)


_FLOAT_CATEGORIES = ("floating-point", "real floating-point")


def _resolve_bool(op: Op, keys: tuple) -> tuple[tuple[np.dtype, ...], np.dtype]:
    """Bool operands of a numeric operation, as NumPy: its bool loop where it has one
    (``add`` is ``or``, ``multiply`` ``and``, comparisons, ``maximum``...), computed on
    0/1 as ``uint8`` and stored as bool (a kernel's bool store is ``!= 0``, so ``1 + 1``
    is ``True``); else NumPy's loop for bool (``sin``: ``float16``, ``divide``:
    ``float64``, ``floor_divide``: ``int8``); ``TypeError`` where NumPy refuses
    (``subtract``, ``negative``, ``sign``...)."""
    try:  # (round: np.round of bool is rint's float16, as NumPy)
        found = op.ufunc.resolve_dtypes((_BOOL,) * op.nin + (None,) * op.ufunc.nout)
    except TypeError as e:
        shown = ", ".join("bool" for _ in keys)
        raise TypeError(
            f"{op.name}() does not accept ({shown}) (nor does NumPy: {e}); convert the "
            f"operands first (e.g. ga.astype(x, ga.int8), or use ga.logical_xor / "
            f"ga.logical_not for booleans)") from None
    args, out = found[:op.nin], found[op.nin]
    if all(d == _BOOL for d in args):
        return (_U1,) * op.nin, out
    for dt in args:
        if dt not in op.accepts:
            raise _category_error(op, keys)
    return args, out


def resolve(op: Op, keys: tuple, float64: bool = True) -> tuple[tuple[np.dtype, ...], np.dtype]:
    """``(argument dtypes, result dtype)`` of ``op`` on operands typed ``keys``.

    The argument dtypes are what each operand is converted to before the
    operation.  ``TypeError`` names the operation, the dtypes and what it
    accepts.  Cached per signature.
    """
    cache_key = (op.name, keys, float64)
    try:
        return _resolved[cache_key]
    except KeyError:
        pass
    found = _resolved[cache_key] = _resolve(op, keys, float64)
    return found


def integer_limits(dtype: np.dtype) -> tuple[int, int]:
    """``(min, max)`` of an integer dtype, as Python ints (cached)."""
    limits = _limits.get(dtype)
    if limits is None:
        info = np.iinfo(dtype)
        limits = _limits[dtype] = (int(info.min), int(info.max))
    return limits


def check_scalar(value: object, dtype: np.dtype) -> None:
    """``OverflowError`` when a Python ``int`` does not fit the integer ``dtype`` it meets."""
    if type(value) is not int or dtype.kind not in "iu":
        return
    limits = integer_limits(dtype)
    if not limits[0] <= value <= limits[1]:
        raise OverflowError(
            f"Python integer {value} out of bounds for {dtype} (it takes {limits[0]} to "
            f"{limits[1]}); convert the array first (e.g. ga.astype(x, ga.int64))")
