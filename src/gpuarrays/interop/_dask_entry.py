"""The ``dask.sizeof`` entry point of gpuarrays (pyproject.toml): it must not import Dask.

Dask loads its ``dask.sizeof`` entry points while ``import dask`` is still running, so this
module imports nothing from Dask: it registers how big a ``GPUArray`` is (its ``nbytes``, which
worker memory accounting and spilling read), and the first time Dask measures one it loads the
whole integration, ``gpuarrays.interop.dask`` (the chunk type, the dispatches, serialisation).
That first measurement happens on every ``distributed`` worker that holds a gpuarrays chunk,
so a worker registers the integration without any code of the user's (docs/dask.md).
"""

from __future__ import annotations

import sys

from .._array.array import GPUArray

__all__ = ["register_sizeof"]


def _sizeof(a: GPUArray) -> int:
    if "gpuarrays.interop.dask" not in sys.modules:
        from . import dask as _integration  # noqa: F401 -- same layer: registers on import
    return a.nbytes


def register_sizeof(sizeof) -> None:
    """``sizeof(GPUArray)`` is ``nbytes`` (called by Dask with its ``sizeof`` dispatch)."""
    sizeof.register(GPUArray)(_sizeof)
