"""The hooks the array layer offers the compute layer (docs/design.md, "Layers").

``GPUArray``'s operators (``a + b``, ``a == b``, ``a += 1``, ``np.add(a, b)``,
``a.__array_namespace__()``) need the compute layer, which lies above the array
layer.  Instead of importing upward, the array's methods call the slots of
:data:`HOOKS`, and ``gpuarrays._compute`` fills them when it is imported (which
``import gpuarrays`` always does).  Until then every slot raises
``NotImplementedError`` naming what is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
    - ``function(a, func, types, args, kwargs)``: NumPy's ``__array_function__``;
    - ``method(name, a, args, kwargs)``: ``a.sum(...)`` and the other NumPy-style methods.
    """

    __slots__ = ("binary", "reflected", "inplace", "unary", "ufunc", "namespace",
                 "function", "method")

    def __init__(self) -> None:
        for slot in self.__slots__:
            setattr(self, slot, _unfilled(slot))


HOOKS = Hooks()
"""The one hook table; ``gpuarrays._compute`` fills it."""
