"""NumPy's names for what the namespace already computes: ``ga.absolute``, ``ga.arccos``,
``ga.amax``, ``ga.cumsum``, ``ga.power`` ... (CuPy's convention: NumPy's top-level names).

Two kinds, neither with logic of its own:

* NumPy's other names of an elementwise row (``np.absolute`` is the row ``abs``): the
  same namespace function under NumPy's name;
* NumPy's functions whose arguments differ from the namespace function's (``cumsum``
  flattens when ``axis=None``, ``amax`` takes ``initial=``, ``shape(a)``): the NumPy
  protocol's own row for that function (``numpy_protocol.FUNCTIONS``), called with
  NumPy's arguments -- the same adaptation ``np.cumsum(garray)`` goes through, so the two
  routes cannot differ.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np

__all__ = [
    # other names of elementwise rows
    "absolute", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh",
    "bitwise_not", "invert", "left_shift", "right_shift", "conjugate", "mod", "power", "rint",
    "true_divide",
    # NumPy's functions through their protocol rows
    "amax", "amin", "around", "ascontiguousarray", "copy", "cumsum", "cumprod", "diagonal",
    "dot", "identity", "iscomplexobj", "isrealobj", "ndim", "ravel", "shape", "size",
    "swapaxes",
]

_ROWS = {"absolute": "abs", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin",
         "arcsinh": "asinh", "arctan": "atan", "arctan2": "atan2", "arctanh": "atanh",
         "bitwise_not": "bitwise_invert", "invert": "bitwise_invert",
         "left_shift": "bitwise_left_shift", "right_shift": "bitwise_right_shift",
         "conjugate": "conj", "mod": "remainder", "power": "pow", "rint": "round",
         "true_divide": "divide"}


def _row_alias(numpy_name: str, row: str):
    from .. import elementwise

    fn = getattr(elementwise, row)

    @functools.wraps(fn)
    def alias(*args, **kwargs):
        return fn(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = numpy_name
    alias.__doc__ = f"NumPy's name for :func:`gpuarrays.{row}` (``numpy.{numpy_name}``)."
    return alias


def _protocol_route(name: str):
    """``ga.<name>``: NumPy's ``<name>`` run by the protocol's row, with NumPy's signature."""
    numpy_fn = getattr(np, name)

    @functools.wraps(numpy_fn)
    def route(*args, **kwargs):
        from ..._array.hooks import HOOKS
        from .. import numpy_protocol

        ns = HOOKS.namespace(None)
        numpy_protocol._table()
        entry = numpy_protocol._BY_NAME[name]
        device = kwargs.pop("device", None) if entry.like else None
        like = None if device is None else SimpleNamespace(device=device)  # as NEP 35's like=
        return entry(ns, args, kwargs, like)

    route.__doc__ = (f"NumPy's ``numpy.{name}`` on gpuarrays arrays (the same row of the NumPy "
                     f"protocol as ``np.{name}(garray, ...)``; docs/numpy.md).")
    return route


for _name, _row in _ROWS.items():
    globals()[_name] = _row_alias(_name, _row)
for _name in __all__:
    if _name not in _ROWS:
        globals()[_name] = _protocol_route(_name)
del _name, _row
