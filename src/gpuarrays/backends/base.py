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

import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

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
    # Kinds whose memory the host reads and writes directly at the device address once
    # the device is synchronised (DLPack exports them as kDLCPU without a copy).
    host_kinds: tuple[str, ...] = ()


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

    # A back-end may also offer ``writer_handles(index) -> dict``: the arguments of the
    # compiled core's ``_core.Writer`` (src/native/core/fill.c), with which the creation
    # functions fill and upload new memory without Python ("host": the process's own
    # memory; "opencl": the queue and entry points).  Without it they call ``fill`` and
    # ``upload``; the array layer checks for it with ``getattr``.

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


# Streams (docs/streams.md) --------------------------------------------------------------
@runtime_checkable
class StreamBackend(Protocol):
    """Streams and events of a back-end: in-order queues of one device beside its default.

    Handles are ints.  Stream handle 0 is the device's default stream (the queue every
    call used before streams existed); ``stream_new`` never returns 0.  Event handle 0
    is an event that is complete (a back-end whose work is synchronous returns it).
    Every enqueue of a thread goes to the stream ``set_thread_stream`` named for its
    device in that thread (0: the default).  A handle made before a reset of its device
    raises ``gpuarrays.DeviceResetError`` when used.  ``stream_free`` waits for the
    stream's work first; ``event_free`` may be called while the event is pending.
    ``synchronize(index)`` waits for every stream of the device.
    """

    def stream_new(self, index: int) -> int: ...
    def stream_free(self, index: int, stream: int) -> None: ...
    def stream_synchronize(self, index: int, stream: int) -> None: ...
    def set_thread_stream(self, index: int, stream: int) -> None: ...
    def event_record(self, index: int, stream: int) -> int: ...
    def event_done(self, index: int, event: int) -> bool: ...
    def event_wait(self, index: int, event: int) -> None: ...
    def event_free(self, index: int, event: int) -> None: ...
    def stream_wait_event(self, index: int, stream: int, event: int) -> None: ...


class SynchronousStreams:
    """``StreamBackend`` for a back-end whose work runs in the calling thread in program
    order: every stream's work is done when its call returns, so each event is the
    complete event 0 and waits do nothing.  Stream handles count from 1."""

    _stream_numbers = itertools.count(1)

    def stream_new(self, index: int) -> int:
        return next(self._stream_numbers)

    def stream_free(self, index: int, stream: int) -> None:
        return None

    def stream_synchronize(self, index: int, stream: int) -> None:
        return None

    def set_thread_stream(self, index: int, stream: int) -> None:
        return None

    def event_record(self, index: int, stream: int) -> int:
        return 0

    def event_done(self, index: int, event: int) -> bool:
        return True

    def event_wait(self, index: int, event: int) -> None:
        return None

    def event_free(self, index: int, event: int) -> None:
        return None

    def stream_wait_event(self, index: int, stream: int, event: int) -> None:
        return None


class ThreadStreams(threading.local):
    """The calling thread's current stream handle of each device index (0 or absent: the
    default stream), one table per back-end object."""

    def __init__(self) -> None:
        self.by_index: dict[int, int] = {}

    def set(self, index: int, stream: int) -> None:
        if stream:
            self.by_index[index] = stream
        else:
            self.by_index.pop(index, None)


# Generated kernels ----------------------------------------------------------------------
LAUNCH_HINTS = ("cpu", "gpu")


class CompiledKernel(Protocol):
    """One kernel of a program a back-end compiled for one device.

    ``launch`` enqueues it on the device's in-order queue/stream and returns
    without waiting.  ``values`` follow the parameter types given to
    :meth:`KernelBackend.compile_kernel`: an address (``int``) for ``"ptr"``, a
    Python number for a NumPy dtype code (``"i4"``, ``"u8"``, ``"f4"``, ``"b1"``
    ...).  ``global_size`` work-items run in groups of ``local_size`` (a
    multiple of it), their indices starting at ``offset`` (OpenCL's global work offset;
    a back-end without one raises ``ValueError`` for a nonzero offset).  A kernel stays usable across a device reset (it is
    rebuilt on its next launch).  ``max_local`` is the largest ``local_size``
    the kernel runs with on its device (registers and local memory may make it
    smaller than the device's limit); a larger one raises ``ValueError`` rather
    than running groups of another size than the kernel was written for.

    A back-end whose launches the compiled core can make without Python (OpenCL)
    also offers ``compiled_handles()``: the arguments of ``_core.ClKernel``
    (src/native/core/launch.c); the compute layer checks for it with ``getattr``.
    """

    max_local: int

    def launch(self, values: Sequence[Any], global_size: int, local_size: int,
               offset: int = 0) -> None: ...


class BinaryCache(Protocol):
    """Where compiled images outlive the process (CUDA's disk cache, above the interface).

    ``key`` is everything the image depends on (source, options, architecture,
    compiler version), as bytes; the cache hashes it.  ``load`` returns None on a
    miss or a damaged entry.
    """

    def load(self, key: bytes) -> bytes | None: ...
    def save(self, key: bytes, image: bytes) -> None: ...


# The disk cache of compiled programs (docs/kernels.md, "Kernel caches").  The back-ends
# sit below the compute layer, which owns the cache: that layer installs a function
# returning the cache to use now (or None: off), which a back-end reads at every build of
# its own data-movement programs; generated kernels get theirs through compile_kernel(cache=).
_binary_cache_provider: Callable[[], BinaryCache | None] | None = None


def use_binary_cache(provider: Callable[[], BinaryCache | None] | None) -> None:
    """Where back-ends keep their own programs between processes: ``provider()`` gives the
    ``BinaryCache`` to use at each build (None: none); None uninstalls it."""
    global _binary_cache_provider
    _binary_cache_provider = provider


def binary_cache() -> BinaryCache | None:
    """The ``BinaryCache`` installed for back-ends' own programs now, or None."""
    provider = _binary_cache_provider
    return None if provider is None else provider()


@runtime_checkable
class KernelBackend(Protocol):
    """What a device back-end adds so that generated kernels run on it (docs/kernels.md).

    It knows nothing about operations: it compiles a source (once per device;
    a second request for the same source and name is served from memory),
    launches with arguments, and says which kind of processor the device is.
    ``dialect`` is the ``backends._kernels.Dialect`` its kernels are written in.
    Compile errors raise ``gpuarrays.BackendError`` with the compiler's log.
    """

    dialect: Any
    builds: int  # programs compiled so far (a cache miss compiles one)

    def compile_kernel(self, index: int, source: str, name: str, params: Sequence[str],
                       cache: BinaryCache | None = None) -> CompiledKernel: ...

    def launch_hint(self, index: int) -> str:
        """``"cpu"`` for a device that is the host's cores (PoCL), else ``"gpu"``."""
