"""Making array objects: the compiled constructors every module of the array layer uses.

The array class itself (``array.py``) is configured into the compiled core at import,
so modules that make or recognise arrays (transfers, DLPack, wraps) depend on this
module instead of on ``array.py``, which imports them for its methods.
"""

from __future__ import annotations

from .. import _core
from .._memory.storage import Storage

__all__ = ["ArrayBase", "make", "new_array", "wrap_storage"]

ArrayBase = _core.Array
"""The compiled base of ``GPUArray``: ``isinstance(x, ArrayBase)`` tells a gpuarrays array."""

make = _core.make
"""``make(storage, shape, strides, offset, dtype, writeable=True, contiguous=None)``: a new
array object taking one handle on ``storage`` (compiled)."""

new_array = _core.new_array
"""``new_array(shape, dtype, device, kind)``: a C-contiguous, uninitialised array (shape and
dtype already normalised).  Compiled: a warm-pool or cache hit never leaves C."""


def wrap_storage(storage: Storage, shape: tuple, strides: tuple, dtype, offset: int = 0,
                 writeable: bool = True):
    """The first array over a storage made by ``wrap``/interop (takes one handle)."""
    return make(storage, shape, strides, offset, dtype, writeable)
