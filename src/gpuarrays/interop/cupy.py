"""CuPy interop: CuPy allocates through gpuarrays' pools and caches.

* :func:`malloc` -- an allocator with the signature CuPy expects
  (``size -> cupy.cuda.MemoryPointer``), for ``cupy.cuda.set_allocator(malloc)``
  or ``with cupy.cuda.using_allocator(malloc):``.  Each call is a
  ``uint8`` array of ``size`` bytes on the gpuarrays device matching CuPy's
  current device (``cuda:<id>``), in ``"device"`` memory: it comes from the
  device's pool, or from the active ``ga.cached(...)`` cache, so CuPy's
  temporaries inside a cached scope are reused on every iteration, and it
  shows in ``ga.memory_stats``, ``ga.record_allocations`` and
  ``ga.memory_history``.  The memory is a ``cupy.cuda.UnownedMemory`` whose
  owner is the gpuarrays array: when CuPy drops its last reference, the
  array's handle is released and the buffer goes back to its pool or cache.
* :func:`allocator` -- the same for another memory kind (``"unified"``,
  ``"host"``) or a fixed device.
* :func:`set_allocator` / :func:`using_allocator` -- shorthands for the CuPy
  calls above.

Streams: gpuarrays' pools reuse a buffer as soon as its last handle goes,
ordered by gpuarrays' own stream, which is a blocking stream (it waits for,
and is waited for by, the legacy default stream CuPy uses unless told
otherwise).  CuPy work on a *non-blocking* stream of its own must be
synchronized before the CuPy arrays it uses are dropped, as with any
allocator that is not stream-aware.

After ``ga.device_reset`` CuPy's arrays over gpuarrays memory are invalid, as
are all arrays of the device (the reset destroys the primary context CuPy
shares).  CuPy is imported lazily; without it these functions raise
``ImportError`` naming it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np

from .._array.array import new_array
from .._memory.devices import Device, get_device

__all__ = ["malloc", "allocator", "set_allocator", "using_allocator"]

_UINT8 = np.dtype(np.uint8)
_KINDS = ("device", "host", "unified")


def _cupy():
    try:
        import cupy
    except ImportError as e:
        raise ImportError(
            f"gpuarrays.interop.cupy needs CuPy, which cannot be imported ({e}); install it, "
            f"e.g. pip install cupy-cuda12x"
        ) from e
    return cupy


def _device_for(cupy, device: Device | str | None) -> Device:
    if device is not None:
        dev = get_device(device)
    else:
        dev = get_device(f"cuda:{cupy.cuda.runtime.getDevice()}")
    if dev.backend != "cuda":
        raise ValueError(f"the CuPy allocator needs a cuda device, got {dev}")
    return dev


def allocator(kind: str = "device", device: Device | str | None = None) -> Callable:
    """A CuPy allocator (``size -> MemoryPointer``) over gpuarrays memory of ``kind``.

    ``device=None`` follows CuPy's current device at each call.  The returned
    memory keeps a gpuarrays array alive; it returns to its pool or cache when
    CuPy releases it.
    """
    if kind not in _KINDS:
        raise ValueError(f"unknown memory kind {kind!r}: expected one of {_KINDS}")
    cupy = _cupy()
    fixed = None if device is None else _device_for(cupy, device)
    unowned, pointer = cupy.cuda.UnownedMemory, cupy.cuda.MemoryPointer

    def malloc(size: int):
        dev = fixed if fixed is not None else _device_for(cupy, None)
        a = new_array((int(size),), _UINT8, dev, kind)  # pool, or the active cache
        ptr = a._storage.ptr if size else 0
        mem = unowned(ptr, int(size), a, device_id=dev.index)
        return pointer(mem, 0)

    malloc.__qualname__ = malloc.__name__ = f"gpuarrays_cupy_malloc_{kind}"
    return malloc


def malloc(size: int):
    """Allocate ``size`` bytes of device memory for CuPy from gpuarrays (see module doc)."""
    fn = _default.get("device")
    if fn is None:
        fn = _default["device"] = allocator("device")
    return fn(size)


_default: dict[str, Callable] = {}


def set_allocator(kind: str = "device", device: Device | str | None = None) -> None:
    """Make gpuarrays CuPy's allocator for the process (``cupy.cuda.set_allocator``)."""
    _cupy().cuda.set_allocator(malloc if (kind, device) == ("device", None)
                               else allocator(kind, device))  # fmt: skip


@contextlib.contextmanager
def using_allocator(kind: str = "device", device: Device | str | None = None) -> Iterator[None]:
    """Use gpuarrays as CuPy's allocator inside the block (this thread only)."""
    cupy = _cupy()
    fn = malloc if (kind, device) == ("device", None) else allocator(kind, device)
    with cupy.cuda.using_allocator(fn):
        yield
