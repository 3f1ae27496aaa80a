"""The data types of the namespace and the standard's data type functions.

The 13 dtype names are ``numpy.dtype`` instances (``ga.float32 ==
np.dtype("float32")``), so ``x.dtype == ga.float32`` holds and dicts keyed by
``x.dtype`` find them (docs/compute.md, "The namespace").
"""

from __future__ import annotations

import builtins

import numpy as np

from .._array.make import ArrayBase
from .._common.dtypes import normalize_dtype
from .._memory.devices import get_device
from .fusion.trace import Symbol
from .promotion import SCALAR_TYPES, key_of
from .promotion import result_type as _promote

__all__ = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128",
    "astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type",
]

bool = np.dtype("bool")  # noqa: A001 -- the standard's name
int8 = np.dtype("int8")
int16 = np.dtype("int16")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
uint8 = np.dtype("uint8")
uint16 = np.dtype("uint16")
uint32 = np.dtype("uint32")
uint64 = np.dtype("uint64")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
complex64 = np.dtype("complex64")
complex128 = np.dtype("complex128")

_KINDS = ("bool", "signed integer", "unsigned integer", "integral", "real floating",
          "complex floating", "numeric")


def _dtype_of(x: object, func: str) -> np.dtype:
    """A dtype argument or an array's dtype; ``TypeError`` for anything else."""
    if isinstance(x, ArrayBase):
        return x.dtype
    if isinstance(x, np.dtype):
        return normalize_dtype(x)
    raise TypeError(f"{func}() takes a dtype (e.g. ga.float32) or an array, "
                    f"got {type(x).__name__} {x!r:.60}")


def astype(x, dtype, /, *, copy: builtins.bool = True, device=None):
    """``x`` converted to ``dtype`` (NumPy's casting), on ``device`` if given.

    A new array in new storage, unless ``copy=False`` and nothing changes
    (then ``x`` itself).  ``UnsupportedDTypeError`` when the device cannot hold
    ``dtype``.
    """
    if not isinstance(x, ArrayBase):
        if isinstance(x, Symbol):  # inside ga.fuse (fusion/trace.py)
            return x._trace.astype(x, dtype)
        raise TypeError(f"astype() takes a gpuarrays array, got {type(x).__name__}")
    if device is not None:
        dev = get_device(device)
        if dev != x.device:
            moved = x.to_device(dev)
            if not copy or moved.dtype == normalize_dtype(dtype):
                return moved.astype(dtype, copy=False)
            try:
                return moved.astype(dtype)
            finally:
                moved.free()
    return x.astype(dtype, copy=copy)


def can_cast(from_, to, /) -> builtins.bool:
    """Whether ``from_`` (a dtype or an array) casts to ``to`` under the promotion rules."""
    return builtins.bool(np.can_cast(_dtype_of(from_, "can_cast"), _dtype_of(to, "can_cast"),
                                     "safe"))


def finfo(type, /):  # noqa: A002 -- the standard's parameter name
    """Machine limits of a floating dtype (or array): ``bits``, ``eps``, ``max``, ``min``,
    ``smallest_normal``, ``dtype`` (the real dtype for complex)."""
    dt = _dtype_of(type, "finfo")
    if dt.kind not in "fc":
        raise ValueError(f"finfo() needs a floating-point dtype, got {dt}; use iinfo() for "
                         "integers")
    return FInfo(dt)


class FInfo:
    """What :func:`finfo` returns: the standard's fields as Python ``int``/``float``
    (not NumPy scalars) and ``dtype`` the real floating dtype."""

    __slots__ = ("bits", "eps", "max", "min", "smallest_normal", "dtype")

    def __init__(self, dt: np.dtype) -> None:
        f = np.finfo(dt)
        self.bits = int(f.bits)
        self.eps = float(f.eps)
        self.max = float(f.max)
        self.min = float(f.min)
        self.smallest_normal = float(f.smallest_normal)
        self.dtype = normalize_dtype(f.dtype)

    def __repr__(self) -> str:
        return (f"finfo(bits={self.bits}, eps={self.eps!r}, max={self.max!r}, min={self.min!r}, "
                f"smallest_normal={self.smallest_normal!r}, dtype={self.dtype})")


def iinfo(type, /):  # noqa: A002 -- the standard's parameter name
    """Limits of an integer dtype (or array): ``bits``, ``max``, ``min``, ``dtype``."""
    dt = _dtype_of(type, "iinfo")
    if dt.kind not in "iu":
        raise ValueError(f"iinfo() needs an integer dtype, got {dt}; use finfo() for "
                         "floating-point types")
    return np.iinfo(dt)


def isdtype(dtype, kind) -> builtins.bool:
    """Whether ``dtype`` is of ``kind``: a dtype, one of the standard's kind names, or a
    tuple of them."""
    if not isinstance(dtype, np.dtype):
        raise TypeError(f"isdtype() takes a dtype, got {type(dtype).__name__} {dtype!r:.60}")
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str) and k not in _KINDS:
            raise ValueError(f"isdtype(): unknown kind {k!r}; the kinds are {', '.join(_KINDS)}")
        if not isinstance(k, (str, np.dtype)):
            raise TypeError(f"isdtype(): a kind is a dtype or one of {', '.join(_KINDS)}, got "
                            f"{type(k).__name__}")
    return builtins.bool(np.isdtype(dtype, kinds))


def result_type(*arrays_and_dtypes):
    """The dtype the promotion rules give for arrays, dtypes and Python scalars (weak).

    NumPy scalars (``np.float64(nan)``, which xarray passes) count with their dtype, as
    they do in the operators; another subclass of a Python scalar type counts as that
    type.  At least one array or dtype is needed; ``TypeError`` otherwise.
    """
    keys = []
    for x in arrays_and_dtypes:
        if type(x) in SCALAR_TYPES:
            keys.append(key_of(x))
        elif isinstance(x, np.generic):
            keys.append(normalize_dtype(x.dtype))
        elif isinstance(x, SCALAR_TYPES):
            keys.append(next(t for t in SCALAR_TYPES if isinstance(x, t)))
        else:
            keys.append(_dtype_of(x, "result_type"))
    if not any(type(k) is not type for k in keys):
        raise TypeError("result_type() needs at least one array or dtype")
    return _promote(*keys)
