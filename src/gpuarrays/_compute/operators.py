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
from . import indexing, numpy_protocol, ufunc_methods
from .dispatch import apply, power
from .linalg import imatmul, matmul
from .promotion import SCALAR_TYPES
from .table import BY_UFUNC, DTYPES, OPS

__all__ = ["install", "API_VERSIONS"]

API_VERSIONS = ("2023.12", "2024.12", "2025.12")
_POW = OPS["pow"]
_DTYPES = frozenset(DTYPES)
_namespace: list = []


def _takes(x: object) -> bool:
    return (isinstance(x, ArrayBase) or type(x) in SCALAR_TYPES
            or (isinstance(x, np.generic) and x.dtype in _DTYPES))


_OPERATOR_SYMBOLS = {
    "add": "+", "subtract": "-", "multiply": "*", "divide": "/", "floor_divide": "//",
    "remainder": "%", "pow": "**", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
    "bitwise_left_shift": "<<", "bitwise_right_shift": ">>", "matmul": "@", "equal": "==",
    "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">="}


def _host_data(x: object) -> str | None:
    """What a host operand is, for the refusal, or ``None`` for anything else."""
    if isinstance(x, np.ndarray):
        return "a NumPy array"
    if isinstance(x, (list, tuple)):
        return f"a Python {type(x).__name__}"
    return None


def _numbers(x) -> bool:
    """Whether host data ``x`` holds numbers (what ``==`` could compare elementwise)."""
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "biufc"
    try:
        return np.asarray(x).dtype.kind in "biufc"
    except ValueError:  # ragged
        return False


def host_operand_error(what: str, a, b: object) -> TypeError:
    """``a <op> np_array`` or ``a <op> [1, 2]``: refused, never copied silently
    (docs/compute.md, "Operators"); says which two types met and both ways out."""
    other = type(b).__name__
    return TypeError(
        f"{what} mixes a gpuarrays GPUArray (on {a._storage.device}) with {_host_data(b)} "
        f"({other}): gpuarrays does not copy host data to the device, or device data to the "
        f"host, implicitly; copy the {other} to the device with ga.asarray(x, "
        f"device={str(a._storage.device)!r}), or the GPUArray to the host with .get()")


def _refuse(name: str, a, b, reflected: bool = False):
    """``NotImplemented`` (Python then tries the other side or identity), or the error
    for host data: returning ``NotImplemented`` for a list lets ``list * array`` reach
    ``list.__mul__`` and a misleading "only integer arrays can be used as an index".
    ``==`` and ``!=`` with a sequence that holds no numbers (``x in (None, (None,))``
    compares ``x == (None,)``) give ``NotImplemented``: Python answers by identity."""
    if _host_data(b) is None or (name in ("equal", "not_equal") and not _numbers(b)):
        return NotImplemented
    sym = _OPERATOR_SYMBOLS.get(name, name)
    left, right = (type(b).__name__, "GPUArray") if reflected else ("GPUArray", type(b).__name__)
    raise host_operand_error(f"{left} {sym} {right}", a, b)


def binary(name: str, a, b):
    """``a <op> b``; ``NotImplemented`` for an operand the namespace does not take, a
    ``TypeError`` naming the remedies for a NumPy array or a list."""
    if name == "pow" and (type(b) is int or type(b) is float):  # x ** 2: the short way
        return power(a, b)
    if not _takes(b):
        return _refuse(name, a, b)
    if name == "pow":  # the exponent's value may pick the row (docs/compute.md)
        return power(a, b)
    if name == "matmul":  # arrays only (docs/linalg.md)
        return matmul(a, b) if isinstance(b, ArrayBase) else NotImplemented
    return apply(OPS[name], (a, b))


def reflected(name: str, a, b):
    """``b <op> a`` (``a.__radd__(b)`` and the like)."""
    if not _takes(b):
        return _refuse(name, a, b, reflected=True)
    if name == "matmul":
        return matmul(b, a) if isinstance(b, ArrayBase) else NotImplemented
    return apply(OPS[name], (b, a))


def inplace(name: str, a, b):
    """``a <op>= b`` into ``a``'s storage; the result must cast to ``a``'s dtype
    (``same_kind``), and ``b`` broadcast to ``a``'s shape."""
    if not _takes(b):
        if _host_data(b) is not None:
            raise host_operand_error(f"GPUArray {_OPERATOR_SYMBOLS.get(name, name)}= "
                                     f"{type(b).__name__}", a, b)
        return NotImplemented
    if name == "matmul":
        return imatmul(a, b) if isinstance(b, ArrayBase) else NotImplemented
    if not a._writeable:
        raise ValueError(f"cannot apply an in-place {name} to a read-only array (shape "
                         f"{a._shape}, a broadcast_to or diagonal view); use a copy")
    if name == "pow":
        power(a, b, a)
    else:
        apply(OPS[name], (a, b), a)
    return a


def unary(name: str, a):
    return apply(OPS[name], (a,))


_UFUNC_KWARGS = {"casting": "same_kind", "order": "K", "subok": True, "where": True,
                 "dtype": None, "signature": None}


def array_ufunc(a, ufunc, method: str, *inputs, **kwargs):
    """NumPy's ``__array_ufunc__``: every ufunc the table has (or the namespace has a
    function of the ufunc's name: ``np.divmod`` is ``ga.divmod``) runs on the device,
    called with NumPy's keywords (``out`` tuples, ``where``, ``dtype``, ``casting``,
    ``order``; ``subok``/``signature``) or through its methods ``reduce``, ``accumulate``,
    ``outer``, ``at`` and ``reduceat`` (_compute/ufunc_methods.py, docs/numpy.md).

    What is left (NumPy arrays among the operands, a ufunc gpuarrays does not compute,
    ``subok=False``) raises a ``TypeError`` that says which and what to do instead --
    NumPy's own message for a refusal ("operand type(s) all returned NotImplemented")
    explains neither.  Only when another library's array with its own
    ``__array_ufunc__`` takes part is the answer ``NotImplemented``, so that NumPy asks
    that library next.
    """
    result = _array_ufunc(ufunc, method, inputs, dict(kwargs))
    if result is NotImplemented and not _foreign_override(inputs, kwargs):
        raise _ufunc_refusal(a, ufunc, method, inputs, kwargs)
    return result


def _foreign_override(inputs: tuple, kwargs: dict) -> bool:
    """Whether an operand (or ``out``) of another library overrides NumPy's ufuncs."""
    out = kwargs.get("out")
    items = (*inputs, *(out if type(out) is tuple else (out,)))
    return any(getattr(type(x), "__array_ufunc__", None) is not None
               and not isinstance(x, (ArrayBase, np.ndarray, np.generic)) for x in items)


def _ufunc_refusal(a, ufunc, method: str, inputs: tuple, kwargs: dict) -> TypeError:
    name = getattr(ufunc, "__name__", repr(ufunc))
    call = f"numpy.{name}" + ("" if method == "__call__" else f".{method}")
    shown = ", ".join(type(x).__name__ for x in inputs)
    out = kwargs.get("out")
    operands = inputs[:1] + inputs[2:] if method in ("at", "reduceat") else inputs  # not indices
    for x in (*(out if type(out) is tuple else (out,)), kwargs.get("where"), *operands):
        if _host_data(x) is not None:
            return host_operand_error(f"{call}({shown})", a, x)
    options = sorted(k for k, v in kwargs.items()
                     if not (v is _UFUNC_KWARGS.get(k, None) or (k == "out" and v == (None,))))
    given = f" with {', '.join(o + '=' for o in options)}" if options else ""
    if BY_UFUNC.get(ufunc) is None and not hasattr(_namespace[0] if _namespace else None,
                                                   name):
        return TypeError(f"{call}({shown}): gpuarrays has no equivalent of numpy.{name}; "
                         "copy to the host with .get() and use NumPy")
    return TypeError(
        f"{call}({shown}){given} is not supported on gpuarrays arrays: the operands and "
        "out= must be gpuarrays arrays (or Python/NumPy scalars), where= a bool gpuarrays "
        "array, subok and signature left at their defaults; convert the operands with "
        "ga.asarray(x, device=...), or copy to the host with .get() and use NumPy (NumPy "
        "2.4 keeps a reference to the operand of a refused reduce or accumulate: free a "
        "large array with .free() when done)")


def _array_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict):
    if method != "__call__":
        return ufunc_methods.method(ufunc, method, inputs, kwargs)
    op = BY_UFUNC.get(ufunc)
    if op is not None and not kwargs:  # the common case: no keyword to look at
        if len(inputs) != op.nin or not all(_takes(x) for x in inputs):
            return NotImplemented
        if ufunc_methods.by_value(ufunc, inputs):
            return ufunc_methods.call(ufunc, inputs, kwargs)
        if op is _POW:
            return power(inputs[0], inputs[1])
        return apply(op, inputs)
    return ufunc_methods.call(ufunc, inputs, kwargs)


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
    # apply); any other operand comes back to the functions above, and so does every ``**``:
    # a Python-scalar exponent's value picks its row (dispatch.power), which the compiled
    # operators, keyed by operand types, cannot see.
    _core.configure(ops={name: op for name, op in OPS.items() if op is not _POW},
                    operators_slow=(binary, reflected, inplace, unary))
    HOOKS.binary = _core.binary
    HOOKS.reflected = _core.reflected
    HOOKS.inplace = _core.inplace
    HOOKS.unary = _core.unary
    HOOKS.ufunc = array_ufunc
    HOOKS.namespace = namespace
    indexing.install()  # indexing: a[int_array], a[mask] and their assignment
    numpy_protocol.install()  # __array_function__, the NumPy-style methods, np.matmul
