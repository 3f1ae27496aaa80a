"""Byte sizes: parsing limits (``"8GiB"``, ``"512MB"``, ``"75%"``) and printing them."""

from __future__ import annotations

import re

__all__ = ["parse_size", "format_bytes"]

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
