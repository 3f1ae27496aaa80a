"""The hooks the array layer offers the compute layer (docs/design.md, "Layers").

``GPUArray``'s operators (``a + b``, ``a == b``, ``a += 1``, ``np.add(a, b)``,
``a.__array_namespace__()``) need the compute layer, which lies above the array
layer.  Instead of importing upward, the array's methods call the slots of
:data:`HOOKS`, and ``gpuarrays._compute`` fills them when it is imported (which
``import gpuarrays`` always does).  Until then every slot raises
``NotImplementedError`` naming what is missing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["HOOKS", "Hooks"]


def _unfilled(name: str) -> Callable[..., Any]:
    def missing(*args: object, **kwargs: object) -> Any:
        raise NotImplementedError(f"the compute layer ({name}) is not loaded; "
                                  "import gpuarrays to load it")
    return missing


class Hooks:
    """Slots filled by the compute layer at import.

    - ``binary(name, a, b)``: ``a <op> b`` (``NotImplemented`` for operands it does not take);
    - ``reflected(name, a, b)``: ``b <op> a`` for ``a.__r<op>__(b)``;
    - ``inplace(name, a, b)``: ``a <op>= b`` into ``a``'s storage, returns ``a``;
    - ``unary(name, a)``: ``-a``, ``+a``, ``~a``, ``abs(a)``;
    - ``ufunc(a, ufunc, method, *inputs, **kwargs)``: NumPy's ``__array_ufunc__``;
    - ``namespace(api_version)``: the module ``__array_namespace__`` returns;
    - ``getitem(a, key)`` / ``setitem(a, key, value)``: indexing with integer arrays and
      boolean masks (``_compute/indexing.py``; basic indexing stays in the array layer);
    - ``function(a, func, types, args, kwargs)``: NumPy's ``__array_function__``;
    - ``method(name, a, args, kwargs)``: ``a.sum(...)`` and the other NumPy-style methods.
    """

    __slots__ = ("binary", "reflected", "inplace", "unary", "ufunc", "namespace",
                 "getitem", "setitem", "function", "method")

    def __init__(self) -> None:
        for slot in self.__slots__:
            setattr(self, slot, _unfilled(slot))

    def method_of(self, name: str, doc: str, first: str | None = None) -> Callable[..., Any]:
        """A NumPy-style array method (``a.sum(axis=0)``) that calls the ``method`` slot,
        with the signature of NumPy's function of that name (self first) for ``help()``;
        ``first`` names the function's array parameter when it is not the first one
        (``np.compress(condition, a, ...)``: ``a.compress(condition, ...)``)."""
        hooks = self

        def method(array, *args, **kwargs):
            return hooks.method(name, array, args, kwargs)

        method.__name__ = method.__qualname__ = name
        method.__doc__ = doc
        func = getattr(np, name, None)
        if func is not None and not isinstance(func, np.ufunc):
            sig = inspect.signature(func)
            params = list(sig.parameters.values())
            rest = [p for p in params if p.name != first] if first else params[1:]
            method.__signature__ = sig.replace(parameters=[
                inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY), *rest])
        return method


HOOKS = Hooks()
"""The one hook table; ``gpuarrays._compute`` fills it."""
