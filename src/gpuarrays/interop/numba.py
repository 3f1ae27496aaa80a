"""Numba CUDA interop: an External Memory Management (EMM) plug-in.

With the plug-in, every device allocation Numba makes (``cuda.device_array``,
``cuda.to_device``, temporaries of reductions ...) is a ``uint8`` GPUArray on
the gpuarrays device of the Numba context (``cuda:<device id>``): it comes
from the device's pool, or from the active ``ga.cached(...)`` cache, and shows
in ``ga.memory_stats`` / ``ga.record_allocations`` / ``ga.memory_history``.
When Numba finalizes the memory, the array's handle is released and the
buffer returns to its pool or cache.  Host allocations and pinning stay with
Numba (``HostOnlyCUDAMemoryManager``).

Enable it before Numba creates its first context, either::

    from gpuarrays.interop.numba import set_memory_manager
    set_memory_manager()

or with the environment variable ``NUMBA_CUDA_MEMORY_MANAGER=gpuarrays.interop.numba``
(Numba imports this module and uses its ``_numba_memory_manager``).

``defer_cleanup`` defers only Numba's host-side cleanup: gpuarrays returns
device memory to its pool at once, which costs no driver call.  Streams: as for
the CuPy allocator, memory is reused in the order of gpuarrays' stream, a
blocking stream; Numba work on its own non-blocking streams must be
synchronized before its arrays are dropped.  Numba is imported lazily; without
it, using this module raises ``ImportError`` naming it.
"""

from __future__ import annotations

import ctypes
import inspect

import numpy as np

from .._array.array import new_array
from .._memory.devices import get_device

__all__ = ["set_memory_manager"]  # and GpuArraysMemoryManager, made lazily (__getattr__)

_UINT8 = np.dtype(np.uint8)


def _numba_cuda():
    try:
        from numba import cuda
        from numba.cuda.cudadrv import driver
    except ImportError as e:
        raise ImportError(
            f"gpuarrays.interop.numba needs Numba with CUDA support, which cannot be imported "
            f"({e}); install it, e.g. pip install numba-cuda"
        ) from e
    return cuda, driver


def _device_pointer(driver, address: int):
    """The pointer object Numba's driver layer expects (NVIDIA binding or ctypes)."""
    use_nv = getattr(driver, "USE_NV_BINDING", None)
    if use_nv is None:
        use_nv = hasattr(driver, "binding")
    if use_nv:
        return driver.binding.CUdeviceptr(address)
    return ctypes.c_uint64(address)


def _release(array) -> None:
    """Numba finalized the memory: release our handle (the buffer goes back to its home)."""
    array.free()


def _make_manager_class():
    cuda, driver = _numba_cuda()
    takes_context = "context" in inspect.signature(cuda.MemoryPointer).parameters

    class GpuArraysMemoryManager(cuda.HostOnlyCUDAMemoryManager):
        """Numba EMM plug-in: device memory from gpuarrays' pools and caches."""

        def initialize(self) -> None:
            # Nothing to prepare: the gpuarrays device is made on first allocation.
            pass

        def _device(self):
            return get_device(f"cuda:{self.context.device.id}")

        def memalloc(self, size: int):
            dev = self._device()
            array = new_array((int(size),), _UINT8, dev, "device")  # pool, or the active cache
            address = array._storage.ptr if size else 0
            ptr = _device_pointer(driver, address)

            def finalizer(array=array):
                _release(array)

            if takes_context:
                return cuda.MemoryPointer(self.context, ptr, size, finalizer=finalizer)
            return cuda.MemoryPointer(ptr, size, finalizer=finalizer)

        def get_memory_info(self):
            dev = self._device()
            free, total = dev.impl.mem_info(dev.index)
            return cuda.MemoryInfo(free=free, total=total)

        def get_ipc_handle(self, memory):
            raise NotImplementedError(
                "IPC handles of memory allocated through gpuarrays are not supported"
            )

        def reset(self) -> None:
            super().reset()  # host allocations; device memory belongs to gpuarrays

        @property
        def interface_version(self) -> int:
            return 1

    return GpuArraysMemoryManager


_manager_class = None


def __getattr__(name: str):
    # ``GpuArraysMemoryManager`` and ``_numba_memory_manager`` (read by Numba for
    # NUMBA_CUDA_MEMORY_MANAGER) are made on first access, so importing this
    # module does not import Numba.
    global _manager_class
    if name in ("GpuArraysMemoryManager", "_numba_memory_manager"):
        if _manager_class is None:
            _manager_class = _make_manager_class()
        return _manager_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def set_memory_manager() -> None:
    """Make gpuarrays Numba's device memory manager (call before Numba makes a context)."""
    cuda, _ = _numba_cuda()
    cuda.set_memory_manager(__getattr__("GpuArraysMemoryManager"))
