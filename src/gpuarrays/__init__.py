"""gpuarrays: device arrays whose memory is managed correctly and fast on every back-end.

``import gpuarrays as ga``.  The public API is exactly ``__all__`` (plus the public
subpackages ``gpuarrays.interop``, ``gpuarrays.random``, ``gpuarrays.linalg`` and
``gpuarrays.fft``); everything under an underscore name is internal.
docs/guide.md explains the storage model, docs/design.md the contract and the layers.
"""

import sys

from . import fft as fft  # the public subpackage gpuarrays.fft (docs/linalg.md)
from . import interop as interop  # listed by dir(): importable as ga.interop (an empty package)
from . import linalg as linalg  # the public subpackage gpuarrays.linalg (docs/linalg.md)
from . import random as random  # the public subpackage gpuarrays.random (docs/random.md)
from ._array.array import GPUArray
from ._array.creation import array, asarray, empty, to_numpy
from ._array.functions import (
    copyto,
    may_share_memory,
    shares_memory,
    unsafe_free,
)
from ._array.wrap import pointer_info, unsafe_wrap
from ._common.errors import (
    BackendError,
    CacheInUseError,
    DeviceResetError,
    FreedArrayError,
    GPUArraysError,
    GPUArraysWarning,
    OutOfMemoryError,
    UnsupportedDTypeError,
)
from ._common.sizes import parse_size
from ._compute import *  # noqa: F403 -- the array API namespace (docs/compute.md)
from ._compute import __all__ as _compute_names
from ._compute import __array_api_version__ as __array_api_version__
from ._compute import __array_namespace_info__ as __array_namespace_info__
from ._compute import install as _install_compute

# --- creation and manipulation (docs/manipulation.md): these replace the array layer's
# creation functions and reshape/broadcast_to/moveaxis/expand_dims with the standard's
# signatures and per-device default dtypes ---
from ._compute.creation import (
    arange,
    empty_like,
    eye,
    from_dlpack,
    full,
    full_like,
    linspace,
    meshgrid,
    ones,
    ones_like,
    tril,
    triu,
    zeros,
    zeros_like,
)
from ._compute.device.diskcache import clear_kernel_cache  # docs/kernels.md, "Kernel caches"
from ._compute.fusion.fuse import fuse  # whole expressions in one kernel (docs/fusion.md)
from ._compute.indexing import nonzero, take, take_along_axis  # indexing (docs/indexing.md)
from ._compute.linalg import matmul, matrix_transpose, tensordot, vecdot  # docs/linalg.md
from ._compute.manipulation import (
    broadcast_arrays,
    broadcast_shapes,
    broadcast_to,
    concat,
    concatenate,
    expand_dims,
    flip,
    moveaxis,
    permute_dims,
    repeat,
    reshape,
    roll,
    squeeze,
    stack,
    tile,
    transpose,
    unstack,
)
from ._compute.searching import argmax, argmin, count_nonzero

# sorting, searching and sets (docs/sorting.md) -- sorting engineer's block
from ._compute.sets import isin, unique_all, unique_counts, unique_inverse, unique_values
from ._compute.sorting import argsort, searchsorted, sort
from ._compute.statistical import (
    cumulative_prod,
    cumulative_sum,
    max,
    mean,
    min,
    prod,
    std,
    sum,
    var,
)
from ._compute.utility import all, any, diff

# NumPy's functions beyond the standard (docs/numpy.md): one module per family
from ._compute.numpy_api import *  # noqa: F403
from ._compute.numpy_api import __all__ as _numpy_names
from ._memory.cache import AllocCache, cached, uncached
from ._memory.devices import Device, backends, check_dtype, devices, get_device, use_device
from ._memory.history import memory_history
from ._memory.lifecycle import device_reset, register_reset_hook
from ._memory.streams import Event, Stream, current_stream
from ._memory.stats import (
    memory_stats,
    memory_status,
    record_allocations,
    reset_peak_memory_stats,
    set_memory_limit,
    synchronize,
    trim,
)
from ._memory.storage import Storage
from .backends.base import PointerInfo
from .linalg._polynomial import *  # noqa: F403 -- poly, polyval, roots ... (docs/numpy.md)
from .linalg._polynomial import __all__ as _polynomial_names

# --- end creation and manipulation ---

__version__ = "0.1.0"

__all__ = [
    "GPUArray", "Storage", "Device", "PointerInfo", "AllocCache",
    "backends", "devices", "get_device", "use_device",
    "array", "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
    "full_like", "arange", "asarray", "to_numpy", "from_dlpack",
    "reshape", "broadcast_to", "moveaxis", "expand_dims", "copyto",
    "shares_memory", "may_share_memory", "unsafe_free", "unsafe_wrap", "pointer_info",
    "check_dtype", "cached", "uncached",
    "memory_stats", "memory_status", "reset_peak_memory_stats", "record_allocations",
    "trim", "set_memory_limit", "parse_size", "synchronize", "memory_history",
    "device_reset", "register_reset_hook", "Stream", "Event", "current_stream",
    "GPUArraysError", "FreedArrayError", "DeviceResetError", "OutOfMemoryError",
    "UnsupportedDTypeError", "CacheInUseError", "BackendError", "GPUArraysWarning",
]

__all__ += [n for n in _compute_names if not n.startswith("_") and n != "install"]
# reductions, statistics, scans and searching (docs/reductions.md)
__all__ += ["sum", "prod", "min", "max", "mean", "var", "std", "cumulative_sum",
            "cumulative_prod", "all", "any", "diff", "argmax", "argmin", "count_nonzero"]
# creation and manipulation (docs/manipulation.md)
__all__ += [
    "eye", "linspace", "meshgrid", "tril", "triu", "broadcast_arrays", "broadcast_shapes",
    "concat", "concatenate", "flip", "permute_dims", "repeat", "roll", "squeeze", "stack",
    "tile", "transpose", "unstack"]

# linear algebra (docs/linalg.md)
__all__ += ["matmul", "matrix_transpose", "tensordot", "vecdot"]
# indexing and data-dependent shapes (docs/indexing.md)
__all__ += ["take", "take_along_axis", "nonzero"]
# sorting, searching and sets (docs/sorting.md) -- sorting engineer's block
__all__ += ["sort", "argsort", "searchsorted", "unique_all", "unique_counts", "unique_inverse",
            "unique_values", "isin"]
# NumPy's functions beyond the standard (docs/numpy.md)
__all__ += [*_numpy_names, *_polynomial_names]
__all__ += ["clear_kernel_cache"]  # the disk cache of compiled kernels (docs/kernels.md)
__all__ += ["fuse"]  # fused functions (docs/fusion.md)

_install_compute(sys.modules[__name__])  # operators and __array_namespace__ (docs/compute.md)

_PUBLIC_SUBPACKAGES = ("interop", "random", "linalg", "fft")  # linalg, fft: docs/linalg.md


def __dir__() -> list[str]:
    """Public names only: ``__all__`` and the public subpackages (not internal modules)."""
    return sorted(set(__all__) | set(_PUBLIC_SUBPACKAGES))


# distributed (de)serialises GPUArray in every process that imports gpuarrays (docs/dask.md)
from .interop._dask_entry import register_distributed_lazily as _dask_lazily  # noqa: E402

_dask_lazily()
