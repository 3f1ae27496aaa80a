"""Element types: which NumPy dtypes a GPUArray can hold.

Supported: bool, signed/unsigned ints 8-64, float16/32/64, complex64/128 and
structured types made, recursively, of those.  Everything else raises
:class:`~gpuarrays._common.errors.UnsupportedDTypeError` with an explanation, one
indented line per level of nesting.
"""

from __future__ import annotations

import numpy as np

from .errors import UnsupportedDTypeError

__all__ = ["normalize_dtype", "device_lacks"]

_HEADER = (
    "GPUArray only supports element types stored inline "
    "(numbers, bool, or structured types made of them)."
)
_NUMERIC_KINDS = frozenset("biufc")
_LEAF_REASONS = {
    "O": "object holds references to Python objects",
    "U": "a unicode string type is not a number (store codes as integers instead)",
    "S": "a byte string type is not a number (store bytes as uint8 instead)",
    "M": "datetime64 is not supported (store integer ticks, e.g. int64, instead)",
    "m": "timedelta64 is not supported (store integer ticks, e.g. int64, instead)",
    "V": "void without fields is raw bytes with no element type (use a structured dtype or uint8)",
    "T": "a variable-width string type is stored out of line",
}

# Normalised dtypes keyed by what callers pass (dtype objects, type objects, strings).
_checked: dict[object, np.dtype] = {}


def _leaf_reason(dt: np.dtype) -> str | None:
    if dt.kind in _NUMERIC_KINDS:
        if dt.kind in "fc" and dt.itemsize not in ((2, 4, 8) if dt.kind == "f" else (8, 16)):
            return f"{dt.name} is not a fixed-size type every device has (use float64 or complex128)"
        return None
    return _LEAF_REASONS.get(dt.kind, f"{dt} is not a supported element type")


def _explain(dt: np.dtype, depth: int) -> list[str] | None:
    """Lines explaining why ``dt`` is unsupported, or ``None`` when it is supported."""
    if dt.subdtype is not None:
        return _explain(dt.subdtype[0], depth)
    if dt.fields is None:
        reason = _leaf_reason(dt)
        return None if reason is None else [reason]
    for name in dt.names:
        field_dt = dt.fields[name][0]
        inner = _explain(field_dt, depth + 1)
        if inner is not None:
            pad = "  " * (depth + 1)
            if field_dt.fields is None and field_dt.subdtype is None:
                return [f"{dt!r} is a structured type with an unsupported field:",
                        f"{pad}  field {name!r}: {inner[0]}"]
            return [f"{dt!r} is a structured type with an unsupported field:",
                    f"{pad}  field {name!r}: {inner[0]}", *inner[1:]]
    return None


def normalize_dtype(dtype: object) -> np.dtype:
    """``np.dtype(dtype)`` checked for inline storage; cached for hashable inputs.

    Raises ``UnsupportedDTypeError`` (a ``TypeError``) with the explanation of
    docs/design.md ("The storage model"), or ``TypeError`` when ``dtype`` is not a dtype at all.
    """
    try:
        return _checked[dtype]
    except (KeyError, TypeError):
        pass
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{dtype!r} is not a data type NumPy understands: {e}") from e
    lines = _explain(dt, 0)
    if lines is not None:
        first = lines[0]
        if dt.fields is None and dt.subdtype is None:
            first = f"{dt!r}: {first}"
        body = "\n".join(["  " + first, *lines[1:]])
        raise UnsupportedDTypeError(f"{_HEADER}\n{body}")
    if dt.subdtype is not None:
        raise UnsupportedDTypeError(
            f"{_HEADER}\n  {dt!r} is a sub-array type: put its shape {dt.shape} into the "
            f"array's shape and use dtype {dt.base}"
        )
    try:
        _checked[dtype] = dt
    except TypeError:
        pass
    return dt


def _uses(dt: np.dtype, kind: str, itemsize: int) -> bool:
    if dt.subdtype is not None:
        return _uses(dt.subdtype[0], kind, itemsize)
    if dt.fields is not None:
        return any(_uses(dt.fields[n][0], kind, itemsize) for n in dt.names)
    return dt.kind == kind and dt.itemsize == itemsize or (
        kind == "f" and dt.kind == "c" and dt.itemsize == 2 * itemsize)


def device_lacks(dt: np.dtype, float64: bool, float16: bool) -> str | None:
    """The name of the floating type in ``dt`` a device without it cannot hold, if any."""
    if not float64 and _uses(dt, "f", 8):
        return "float64"
    if not float16 and _uses(dt, "f", 2):
        return "float16"
    return None
