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
from .dispatch import apply, power
from .linalg import imatmul, matmul
from .promotion import SCALAR_TYPES, key_of, resolve
from .statistical import reduce_ufunc
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
    """NumPy's ``__array_ufunc__``: a ufunc the table has, called plainly, runs here;
    ``reduce``/``accumulate`` of the ufuncs the reductions know run as ``sum``, ``max``,
    ``cumulative_sum``... (docs/reductions.md).

    Other methods (``outer``, ``at``, ``reduceat``), ufuncs without a row, NumPy
    arrays among the operands and non-default options (``where=``, ``dtype=``
    ...) raise a ``TypeError`` that says which and what to do instead -- NumPy's own
    message for a refusal ("operand type(s) all returned NotImplemented") explains
    neither.  Only when another library's array with its own ``__array_ufunc__`` takes
    part is the answer ``NotImplemented``, so that NumPy asks that library next.
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
    for x in inputs:
        if _host_data(x) is not None:
            return host_operand_error(f"{call}({shown})", a, x)
    options = sorted(k for k, v in kwargs.items()
                     if not (v is _UFUNC_KWARGS.get(k, None) or (k == "out" and v == (None,))))
    given = f" with {', '.join(o + '=' for o in options)}" if options else ""
    if method != "__call__":
        return TypeError(
            f"{call}({shown}){given} is not supported on gpuarrays arrays: gpuarrays runs "
            "numpy.add/multiply/maximum/minimum/logical_and/logical_or.reduce (as ga.sum, "
            "prod, max, min, all, any, with axis=, dtype=, keepdims=, out=, initial= and a "
            "gpuarrays bool where=) and numpy.add/multiply.accumulate (ga.cumulative_sum, "
            "cumulative_prod, with axis=, dtype=, out=); call the "
            "namespace's functions, or copy to the host with .get() and use NumPy (NumPy "
            "2.4 keeps a reference to the operand of a refused reduce or accumulate: "
            "free a large array with .free() when done)")
    if BY_UFUNC.get(ufunc) is None:
        return TypeError(f"{call}({shown}): gpuarrays has no equivalent of numpy.{name}; "
                         "copy to the host with .get() and use NumPy")
    return TypeError(
        f"{call}({shown}){given}: gpuarrays runs ufunc calls on its arrays with out= (a "
        f"GPUArray) only, not these options; call ga.{BY_UFUNC[ufunc].name} and convert "
        "the result (astype, ga.where), or copy to the host with .get() and use NumPy")


def _array_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict):
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
    if op is _POW:
        return power(inputs[0], inputs[1], out)
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
