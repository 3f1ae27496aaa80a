"""The back-end interface: the small, dumb layer every platform implements.

A back-end allocates and frees raw memory of a kind, moves bytes, runs the few
kernels the core needs, describes pointers, synchronizes and resets.  It holds
no policy: pooling, caching, reset safety, statistics and interop live once,
above this interface (``pool.py``, ``cache.py``, ``lifecycle.py`` ...).

A new back-end is one module under ``gpuarrays/backends/`` with a ``load()``
function returning an object that satisfies :class:`Backend` (or raising
:class:`BackendUnavailable` with the reason), plus its row in ``devices.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

KINDS = ("device", "host", "unified")


class BackendUnavailable(Exception):
    """The back-end cannot be used on this machine (no library, driver or device)."""


class BackendOutOfMemory(Exception):
    """The platform has no memory for this request; the pool runs its ladder."""


@dataclass(frozen=True)
class DeviceInfo:
    """What a back-end reports about one of its devices."""

    name: str
    total_memory: int
    kinds: tuple[str, ...]
    accelerator: bool  # a real accelerator (GPU), eligible as the default device
    float64: bool = True
    float16: bool = True


class RawView(NamedTuple):
    """A strided view of raw memory handed to kernels.

    ``ptr`` is the address of element ``[0, ..., 0]`` (not of the allocation),
    ``strides`` are in bytes and may be negative or zero.
    """

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype


class PointerInfo(NamedTuple):
    """What a back-end knows about an address: its kind, device and enclosing range."""

    kind: str
    device: object  # a Device above the interface; an int device index from a back-end
    base: int
    size: int


@runtime_checkable
class Backend(Protocol):
    """The contract of one platform.  ``index`` is always the device ordinal.

    Errors: platform failures raise ``gpuarrays.BackendError`` (call name, code,
    text); an allocation the platform cannot satisfy raises
    :class:`BackendOutOfMemory`; a kind the device lacks raises ``ValueError``.

    Re-entrancy: ``free`` and ``unregister_host`` may be called from a finalizer
    that the garbage collector runs inside any other call of the same thread.
    A back-end's own locks must therefore be re-entrant, and its locked
    sections must stay consistent at every point where Python may allocate.
    ``free`` may be asynchronous (ordered after queued work), as long as the
    memory is not reused before that work is done.
    """

    name: str
    # Whether host memory wrapped for this back-end must be registered (pinned).
    needs_host_registration: bool

    def device_count(self) -> int: ...
    def device_info(self, index: int) -> DeviceInfo: ...

    # raw memory -------------------------------------------------------------
    def allocate(self, index: int, kind: str, nbytes: int) -> int: ...
    def free(self, index: int, kind: str, ptr: int, nbytes: int) -> None: ...
    def mem_info(self, index: int) -> tuple[int, int]: ...  # (free, total) bytes

    # byte movement (contiguous) ---------------------------------------------
    def memcpy(self, index: int, dst: int, src: int, nbytes: int) -> None: ...
    def upload(self, index: int, dst: int, src: np.ndarray) -> None: ...
    def download(self, index: int, dst: np.ndarray, src: int) -> None: ...

    # kernels ----------------------------------------------------------------
    def fill(self, index: int, dst: RawView, value: np.ndarray) -> None:
        """Set every element of ``dst`` to the 0-d ``value`` (already of dst's dtype)."""

    def copy_strided(self, index: int, dst: RawView, src: RawView) -> None:
        """Copy ``src`` into ``dst`` (same shape), converting dtype like NumPy's
        unsafe casting.  Source and destination never overlap (the core copies
        through a temporary when they would)."""

    def gather(self, index: int, dst: RawView, src_base: int, offsets: np.ndarray) -> None:
        """``dst.flat[i] = element at src_base + offsets[i]`` (dst contiguous)."""

    def scatter(self, index: int, dst_base: int, offsets: np.ndarray, src: RawView) -> None:
        """``element at dst_base + offsets[i] = src.flat[i]`` (src contiguous)."""

    # lifecycle --------------------------------------------------------------
    def synchronize(self, index: int) -> None: ...
    def reset(self, index: int) -> None:
        """Free everything the back-end made on the device, leave it usable."""

    def pointer_info(self, ptr: int) -> PointerInfo | None:
        """Describe an address (``device`` is the device index), or ``None`` if unknown.

        For an allocation the back-end made: its kind, base and size.  For plain
        host memory it did not make (pageable, unregistered): kind ``"host"``
        with ``base=ptr`` and ``size=0``.
        """

    def register_host(self, index: int, ptr: int, nbytes: int) -> None: ...
    def unregister_host(self, index: int, ptr: int) -> None: ...
