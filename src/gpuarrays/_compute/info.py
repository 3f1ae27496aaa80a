"""``__array_namespace_info__()``: what the namespace and each device offer.

Dtypes are per device: an OpenCL device without float64 lists no float64 or
complex128, and its default floating type is float32 (docs/compute.md, "The
namespace").
"""

from __future__ import annotations

import numpy as np

from .._memory.devices import Device, default_device, devices, get_device

__all__ = ["Info", "__array_namespace_info__"]

_GROUPS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
}
_GROUPS["integral"] = _GROUPS["signed integer"] + _GROUPS["unsigned integer"]
_GROUPS["numeric"] = (_GROUPS["integral"] + _GROUPS["real floating"]
                      + _GROUPS["complex floating"])
_ALL = _GROUPS["bool"] + _GROUPS["numeric"]


class Info:
    """The inspection object of the array API standard (one per call, stateless)."""

    __slots__ = ()

    def capabilities(self) -> dict:
        """Boolean indexing and data-dependent shapes are supported; dimensions are unbounded."""
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": None}

    def default_device(self) -> Device:
        """The device arrays go to without ``device=`` (see ``ga.get_device``)."""
        return default_device()

    def devices(self) -> tuple[Device, ...]:
        """Every device of every available back-end."""
        return tuple(devices())

    def default_dtypes(self, *, device=None) -> dict[str, np.dtype]:
        """The default dtypes on ``device`` (float32/complex64 where float64 is missing)."""
        dev = get_device(device)
        wide = dev.info.float64
        return {"real floating": np.dtype("float64" if wide else "float32"),
                "complex floating": np.dtype("complex128" if wide else "complex64"),
                "integral": np.dtype("int64"), "indexing": np.dtype("int64")}

    def dtypes(self, *, device=None, kind=None) -> dict[str, np.dtype]:
        """The dtypes ``device`` holds, by name, of ``kind`` (a kind name, a tuple of them, or
        ``None`` for all).  ``ValueError`` for an unknown kind."""
        dev = get_device(device)
        kinds = (None,) if kind is None else kind if isinstance(kind, tuple) else (kind,)
        names: list[str] = []
        for k in kinds:
            if k is None:
                names.extend(_ALL)
            elif k in _GROUPS:
                names.extend(_GROUPS[k])
            else:
                raise ValueError(f"unknown dtype kind {k!r}; the kinds are "
                                 f"{', '.join(_GROUPS)}")
        return {n: np.dtype(n) for n in dict.fromkeys(names) if dev.supports(n)}


def __array_namespace_info__() -> Info:
    """The array API inspection object: capabilities, devices and dtypes per device."""
    return Info()
