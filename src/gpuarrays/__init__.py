"""gpuarrays: device arrays whose memory is managed correctly and fast on every back-end.

``import gpuarrays as ga``.  See docs/guide.md for the storage model.
"""

from __future__ import annotations

from .array import GPUArray
from .backends.base import PointerInfo
from .cache import AllocCache, cached, uncached
from .creation import (
    arange,
    asarray,
    empty,
    empty_like,
    full,
    full_like,
    ones,
    ones_like,
    to_numpy,
    zeros,
    zeros_like,
)
from .devices import Device, backends, devices, get_device, use_device
from .dtypes import check_dtype
from .errors import (
    BackendError,
    CacheInUseError,
    DeviceResetError,
    FreedArrayError,
    GPUArraysError,
    GPUArraysWarning,
    OutOfMemoryError,
    UnsupportedDTypeError,
)
from .functions import (
    broadcast_to,
    copyto,
    expand_dims,
    may_share_memory,
    moveaxis,
    reshape,
    shares_memory,
    unsafe_free,
)
from .history import memory_history
from .interop.dlpack import from_dlpack
from .lifecycle import device_reset, register_reset_hook
from .sizes import parse_size
from .stats import (
    memory_stats,
    memory_status,
    record_allocations,
    reset_peak_memory_stats,
    set_memory_limit,
    synchronize,
    trim,
)
from .storage import Storage
from .wrap import pointer_info, unsafe_wrap

__version__ = "0.1.0"




__all__ = [
    "GPUArray", "Storage", "Device", "PointerInfo", "AllocCache",
    "backends", "devices", "get_device", "use_device",
    "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
    "arange", "asarray", "to_numpy", "from_dlpack",
    "reshape", "broadcast_to", "moveaxis", "expand_dims", "copyto",
    "shares_memory", "may_share_memory", "unsafe_free", "unsafe_wrap", "pointer_info",
    "check_dtype", "cached", "uncached",
    "memory_stats", "memory_status", "reset_peak_memory_stats", "record_allocations",
    "trim", "set_memory_limit", "parse_size", "synchronize", "memory_history",
    "device_reset", "register_reset_hook",
    "GPUArraysError", "FreedArrayError", "DeviceResetError", "OutOfMemoryError",
    "UnsupportedDTypeError", "CacheInUseError", "BackendError", "GPUArraysWarning",
]
