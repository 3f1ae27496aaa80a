"""Byte sizes: parsing limits (``"8GiB"``, ``"512MB"``, ``"75%"``), printing them, and the
largest size an array may have (``check_size``)."""

from __future__ import annotations

import re

__all__ = ["BYTES_MAX", "check_size", "format_bytes", "parse_size"]

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*|%)\s*$")
_FORMS = ("plain bytes (1048576), SI units (kB, MB, GB, TB: powers of 1000), "
          "IEC units (KiB, MiB, GiB, TiB: powers of 1024) or a percentage of the "
          "device's total memory (75%)")


def parse_size(text: str | int, total: int | None = None) -> int:
    """Bytes named by ``text``.  ``"50%"`` is relative to ``total`` (a device's memory).

    Raises ``ValueError`` quoting the bad text and the accepted forms, or
    ``TypeError`` when ``text`` is neither a string nor an int.
    """
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise TypeError(f"a size must be an int or a string like '8GiB', got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"a size cannot be negative, got {text}; accepted forms: {_FORMS}")
        return text
    m = _PATTERN.match(text)
    unit = m.group(2).lower() if m else None
    if m is None or (unit != "%" and unit not in _UNITS):
        raise ValueError(f"cannot parse size {text!r}; accepted forms: {_FORMS}")
    value = float(m.group(1))
    if unit == "%":
        if total is None:
            raise ValueError(f"size {text!r} is a percentage but no device total is known; "
                             f"accepted forms: {_FORMS}")
        if value > 100:
            raise ValueError(f"size {text!r} is more than 100% of the device's memory; "
                             f"accepted forms: {_FORMS}")
        return int(total * value / 100)
    return int(value * _UNITS[unit])


def format_bytes(n: int | None) -> str:
    """``1536 -> '1.5 KiB'``; ``None -> 'none'``."""
    if n is None:
        return "none"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


BYTES_MAX = 2**63 - 1
"""The most bytes an array may span: NumPy's ``intp`` limit, which strides and offsets use."""


def check_size(name: str | None, shape, itemsize: int) -> None:
    """``ValueError`` naming ``name`` (the operation; None: array construction) when an array of ``shape`` with
    ``itemsize``-byte elements would span more than :data:`BYTES_MAX` bytes -- a size
    computed from arguments or data that no array can have, refused before anything is
    allocated or launched (NumPy's "array is too big").  Zero-length axes do not hide
    the others: a shape whose other axes overflow is refused too, as NumPy does."""
    product = 1
    for n in shape:
        if n:
            product *= n
    if product * max(itemsize, 1) > BYTES_MAX:
        raise ValueError(
            f"{'' if name is None else name + '(): '}an array of shape {tuple(shape)} with {itemsize}-byte elements would "
            f"span {product * max(itemsize, 1)} bytes, more than the {BYTES_MAX} any array "
            f"can address; ask for fewer elements")
