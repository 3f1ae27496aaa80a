"""The array's operators and NumPy's ufunc protocol, filled into the array layer's hooks.

``a + b``, ``a == b``, ``a += 1``, ``-a`` and ``np.add(a, b)`` reach
``dispatch.apply`` through ``_array/hooks.py``.  An operand the namespace does
not take (a NumPy array, a list) gives ``NotImplemented``, so Python or NumPy
raises ``TypeError``: nothing is ever copied to or from the host silently.
In-place operators write into the existing storage (every view sees it);
read-only arrays refuse them with ``ValueError`` (docs/compute.md, "Operators").
"""

from __future__ import annotations

import numpy as np

from .. import _core
from .._array.hooks import HOOKS
from .._array.make import ArrayBase
from . import indexing, numpy_protocol
from .dispatch import apply
from .linalg import imatmul, matmul
from .promotion import SCALAR_TYPES, key_of, resolve
from .statistical import reduce_ufunc
from .table import BY_UFUNC, DTYPES, OPS

__all__ = ["install", "API_VERSIONS"]

API_VERSIONS = ("2023.12", "2024.12", "2025.12")
_DTYPES = frozenset(DTYPES)
_namespace: list = []


def _takes(x: object) -> bool:
    return (isinstance(x, ArrayBase) or type(x) in SCALAR_TYPES
            or (isinstance(x, np.generic) and x.dtype in _DTYPES))


def binary(name: str, a, b):
    """``a <op> b``; ``NotImplemented`` for an operand the namespace does not take."""
    if not _takes(b):
        return NotImplemented
    if name == "matmul":  # arrays only (docs/linalg.md)
        return matmul(a, b) if isinstance(b, ArrayBase) else NotImplemented
    return apply(OPS[name], (a, b))


def reflected(name: str, a, b):
    """``b <op> a`` (``a.__radd__(b)`` and the like)."""
    if not _takes(b):
        return NotImplemented
    if name == "matmul":
        return matmul(b, a) if isinstance(b, ArrayBase) else NotImplemented
    return apply(OPS[name], (b, a))


def inplace(name: str, a, b):
    """``a <op>= b`` into ``a``'s storage; the result must cast to ``a``'s dtype
    (``same_kind``), and ``b`` broadcast to ``a``'s shape."""
    if not _takes(b):
        return NotImplemented
    if name == "matmul":
        return imatmul(a, b) if isinstance(b, ArrayBase) else NotImplemented
    if not a._writeable:
        raise ValueError(f"cannot apply an in-place {name} to a read-only array (shape "
                         f"{a._shape}, a broadcast_to or diagonal view); use a copy")
    apply(OPS[name], (a, b), a)
    return a


def unary(name: str, a):
    return apply(OPS[name], (a,))


_UFUNC_KWARGS = {"casting": "same_kind", "order": "K", "subok": True, "where": True,
                 "dtype": None, "signature": None}


def array_ufunc(a, ufunc, method: str, *inputs, **kwargs):
    """NumPy's ``__array_ufunc__``: a ufunc the table has, called plainly, runs here;
    ``reduce``/``accumulate`` of the ufuncs the reductions know run as ``sum``, ``max``,
    ``cumulative_sum``... (docs/reductions.md).

    Other methods (``outer``, ``at``, ``reduceat``), ufuncs without a row, NumPy
    arrays among the operands and non-default options (``where=``, ``dtype=``
    ...) give ``NotImplemented`` (NumPy then raises ``TypeError``).
    """
    if method in ("reduce", "accumulate"):
        return reduce_ufunc(ufunc, method, inputs, kwargs)
    op = BY_UFUNC.get(ufunc)
    if op is None or method != "__call__":
        return NotImplemented
    out = kwargs.pop("out", None)
    # dask: dtype= naming the dtype the call gives anyway is the plain call (dask's tensordot
    # sums partial products with np.add(a, b, dtype=dt)); any other dtype stays refused.
    dtype = kwargs.pop("dtype", None)
    if dtype is not None and not _gives(op, inputs, dtype):
        return NotImplemented
    for k, v in kwargs.items():
        default = _UFUNC_KWARGS.get(k, out)  # ``out`` stands for "no such option"
        if not (v is default or (type(v) is type(default) and v == default)):
            return NotImplemented
    if out is not None:
        if type(out) is tuple:
            if len(out) != 1:
                return NotImplemented
            out = out[0]
        if not isinstance(out, ArrayBase):
            return NotImplemented
    if len(inputs) != op.nin or not all(_takes(x) for x in inputs):
        return NotImplemented
    return apply(op, inputs, out)


def _gives(op, inputs: tuple, dtype) -> bool:
    """Whether ``op`` on ``inputs`` computes in and returns ``dtype`` (dask: see above)."""
    arrays = [x for x in inputs if isinstance(x, ArrayBase)]
    if not arrays or not all(_takes(x) for x in inputs):
        return False
    try:
        want = np.dtype(dtype)
        arg_dtypes, dt = resolve(op, tuple(key_of(x) for x in inputs),
                                 arrays[0]._storage.device.info.float64)
    except TypeError:
        return False
    return dt == want and all(a == want for a in arg_dtypes)


def namespace(api_version: str | None):
    if api_version is not None and api_version not in API_VERSIONS:
        raise ValueError(f"unsupported array API version {api_version!r}; gpuarrays "
                         f"implements {', '.join(API_VERSIONS)} (None means the newest)")
    if not _namespace:
        raise NotImplementedError("the gpuarrays namespace has not finished importing")
    return _namespace[0]


def install(module) -> None:
    """Fill the array layer's hooks; ``module`` is what ``__array_namespace__`` returns."""
    _namespace[:] = [module]
    # Compiled for arrays and Python scalars (_core.binary...: straight to the compiled
    # apply); any other operand comes back to the functions above.
    _core.configure(ops=OPS, operators_slow=(binary, reflected, inplace, unary))
    HOOKS.binary = _core.binary
    HOOKS.reflected = _core.reflected
    HOOKS.inplace = _core.inplace
    HOOKS.unary = _core.unary
    HOOKS.ufunc = array_ufunc
    HOOKS.namespace = namespace
    indexing.install()  # indexing: a[int_array], a[mask] and their assignment
    numpy_protocol.install()  # __array_function__, the NumPy-style methods, np.matmul
