"""Streams and events: in-order queues of a device beside its default one (docs/streams.md).

A :class:`Stream` owns one back-end stream (an OpenCL command queue, a CUDA non-blocking
stream; on ``cpu:0`` a synchronous stream whose events are complete when recorded).
``with stream:`` makes it the calling thread's current stream of its device: every
kernel, fill, copy and transfer of that thread on that device is enqueued there
(``backends.base.StreamBackend``).  The thread's current stream lives in the compiled
core (``_core.set_thread_stream``), which also records on each storage the streams it was
allocated or used on; the device's memory manager orders every free after those
streams' work (``pool.py``, "stream-ordered frees").  Nothing here is asked of the user.

Ownership: a Stream frees its back-end stream when it is garbage (after the stream's
work is done); an Event frees its back-end event likewise.  Both belong to one epoch of
their device: after a reset (or in a forked child) using them raises
``DeviceResetError``.
"""

from __future__ import annotations

import contextlib
import threading

from .. import _core
from .._common.errors import DeviceResetError
from .devices import Device, get_device

__all__ = ["Stream", "Event", "current_stream", "users_of", "wait_for_other_users",
           "order_after_other_users"]


class _Entered(threading.local):
    """The streams this thread entered, each with the one current before it."""

    def __init__(self) -> None:
        self.stack: list[tuple[Stream, Stream | None]] = []


_entered = _Entered()
_defaults: dict[Device, Stream] = {}
# Guards _defaults and the pool's stream count; re-entrant: a Stream's __del__ may run
# (garbage collection) inside a Stream's __init__ on the same thread.
_defaults_lock = threading.RLock()


def _check_live(obj, what: str) -> None:
    if not obj._epoch.live:
        raise DeviceResetError(f"{what} of {obj.device} was made before a reset of the device "
                               f"(or before os.fork() in a parent process); make a new one")


class Event:
    """A point in a stream's work: done once everything enqueued before it ran.

    Made by :meth:`Stream.record`.  ``query()`` says whether it is done yet,
    ``synchronize()`` waits for it on the host, ``Stream.wait(event)`` makes another
    stream wait for it on the device (no host wait)."""

    __slots__ = ("device", "_handle", "_epoch", "__weakref__")

    def __init__(self, device: Device, handle: int, epoch) -> None:
        self.device = device
        self._handle = handle
        self._epoch = epoch

    def query(self) -> bool:
        """Whether the work before the event is done (never waits)."""
        _check_live(self, "this event")
        return self.device.impl.event_done(self.device.index, self._handle)

    def synchronize(self) -> None:
        """Wait on the host until the work before the event is done."""
        _check_live(self, "this event")
        self.device.impl.event_wait(self.device.index, self._handle)

    @property
    def done(self) -> bool:
        return self.query()

    def __del__(self) -> None:
        handle, self._handle = self._handle, 0
        if handle and self._epoch.live:
            try:
                self.device.impl.event_free(self.device.index, handle)
            except Exception:  # noqa: BLE001 -- at exit or after a failure: nothing to do
                pass

    def __repr__(self) -> str:
        return f"<gpuarrays.Event on {self.device}>"


class Stream:
    """An in-order queue of ``device`` (None: the current device).

    ``with stream:`` makes it the calling thread's current stream of its device; work
    on other devices is unaffected.  Memory used on several streams is freed and reused
    in stream order automatically (docs/streams.md).  Raises ``ValueError`` for an
    unknown device and ``BackendError`` when the platform cannot make a stream."""

    __slots__ = ("device", "handle", "_epoch", "__weakref__")

    def __init__(self, device: Device | str | None = None, *, _default: bool = False) -> None:
        dev = get_device(device)
        self.device = dev
        self.handle = 0
        mgr = dev.memory
        self._epoch = mgr.epoch
        if _default:
            return
        with _defaults_lock:
            # The device's first stream: the pool's free lists may hold blocks whose
            # default-stream work is still queued, and storages in use have recorded
            # nothing.  With no operation in flight (the gate held exclusively) the stream
            # is counted first -- every later hold records its stream -- then the work
            # queued so far finishes.
            first = mgr.streams == 0
            with dev.gate.exclusive() if first else contextlib.nullcontext():
                self.handle = dev.impl.stream_new(dev.index)
                mgr.add_stream(self)
                if first:
                    dev.impl.synchronize(dev.index)

    @classmethod
    def default(cls, device: Device | str | None = None) -> Stream:
        """The device's default stream: the one used outside every ``with stream:``."""
        dev = get_device(device)
        with _defaults_lock:
            stream = _defaults.get(dev)
            if stream is None or not stream._epoch.live:
                stream = _defaults[dev] = cls(dev, _default=True)
        return stream

    @property
    def is_default(self) -> bool:
        return self.handle == 0

    @property
    def ptr(self) -> int:
        """The back-end handle (a ``cl_command_queue`` or ``CUstream``; 0: the default)."""
        return self.handle

    # the current stream -----------------------------------------------------------
    def __enter__(self) -> Stream:
        _check_live(self, "this stream")
        dev = self.device
        before = _core.thread_stream(dev)
        _entered.stack.append((self, before))
        _make_current(dev, None if self.handle == 0 else self)
        return self

    def __exit__(self, *exc) -> None:
        stack = _entered.stack
        for i in range(len(stack) - 1, -1, -1):
            if stack[i][0] is self:
                _, before = stack.pop(i)
                break
        else:
            return
        if before is not None and not before._epoch.live:
            before = None  # a stream of an epoch a reset ended: back to the default
        _make_current(self.device, before)

    # work ---------------------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait on the host for everything enqueued on this stream so far."""
        _check_live(self, "this stream")
        self.device.impl.stream_synchronize(self.device.index, self.handle)

    def record(self) -> Event:
        """An :class:`Event` after everything enqueued on this stream so far."""
        _check_live(self, "this stream")
        dev = self.device
        return Event(dev, dev.impl.event_record(dev.index, self.handle), self._epoch)

    def wait(self, event: Event) -> None:
        """Make work enqueued on this stream from now on wait for ``event`` (on the
        device: the host does not wait).  ``event`` must be of the same device."""
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait takes a gpuarrays.Event, got {type(event).__name__}")
        if event.device is not self.device:
            raise ValueError(f"the event is of {event.device} and this stream of "
                             f"{self.device}; wait for it with event.synchronize() instead")
        _check_live(self, "this stream")
        _check_live(event, "the event")
        self.device.impl.stream_wait_event(self.device.index, self.handle, event._handle)

    def query(self) -> bool:
        """Whether everything enqueued on this stream so far is done (the runtime may
        still say False for a moment after the work ended: OpenCL notes it on its own)."""
        return self.record().query()

    def __del__(self) -> None:
        handle, self.handle = getattr(self, "handle", 0), 0  # 0: __init__ raised
        if not handle or not self._epoch.live:
            return
        dev = self.device
        try:
            dev.impl.stream_free(dev.index, handle)
        except Exception:  # noqa: BLE001 -- at exit or after a failure: nothing to do
            pass
        with _defaults_lock:
            if self._epoch is dev.memory.epoch:
                dev.memory.remove_stream(handle)

    def __repr__(self) -> str:
        what = "default stream" if self.handle == 0 else f"stream 0x{self.handle:x}"
        return f"<gpuarrays.Stream: {what} of {self.device}>"


def _make_current(dev: Device, stream: Stream | None) -> None:
    """``stream`` (None: the default) is the calling thread's current stream of ``dev``."""
    dev.impl.set_thread_stream(dev.index, 0 if stream is None else stream.handle)
    _core.set_thread_stream(dev, stream)


def current_stream(device: Device | str | None = None) -> Stream:
    """The calling thread's current stream of ``device`` (None: the current device): the
    innermost ``with stream:`` of that device, else its default stream."""
    dev = get_device(device)
    stream = _core.thread_stream(dev)
    if stream is not None and stream._epoch.live:
        return stream
    return Stream.default(dev)


def _other_users(st) -> list[Stream]:
    """The streams besides the calling thread's current one that may have work queued on
    ``st``'s memory: those it recorded (None: the default one; its uses from before the
    device's first stream are done, that stream's creation synchronized them), none while
    the device has no streams (then everything is on the default one)."""
    if not st.device.memory.streams:
        return []
    current = current_stream(st.device)
    return [s for s in users_of(st) if s is not current]


def users_of(st) -> list[Stream]:
    """Every stream that may have work queued on ``st``'s memory (the default one alone
    while its device has no streams)."""
    if not st.device.memory.streams:
        return [Stream.default(st.device)]
    users = [Stream.default(st.device) if s is None else s for s in st._streams or ()]
    return [s for s in users if s._epoch.live]


def wait_for_other_users(st) -> None:
    """Before the host reads ``st``'s memory through the current stream: wait on the host
    for the other streams that used it (``a.get()``: what it needs, not the device)."""
    for stream in _other_users(st):
        stream.synchronize()


def order_after_other_users(st) -> None:
    """The current stream waits (on the device) for the other streams that used ``st``:
    before its handle is given to another library as the stream the memory is ready on
    (the CUDA Array Interface)."""
    users = _other_users(st)
    if users:
        current = current_stream(st.device)
        for stream in users:
            current.wait(stream.record())
