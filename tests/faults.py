"""Fault injection for tests: a counting, failing wrapper around a REAL back-end.

:class:`FaultyBackend` wraps the back-end object of a device (``device.impl``)
and forwards every call of the back-end protocol (``backends/base.py``) to the
real back-end, so memory, copies and kernels are real.  On top it

- counts the calls of every method (``fb.calls["free"]``), thread-safely;
- records what it allocated and freed (``fb.allocated``, ``fb.freed`` lists of
  ``(ptr, nbytes)``) and which allocations made through it are still live
  (``fb.live``: ``ptr -> nbytes``);
- fails chosen calls with the exception the real platform would raise:
  ``BackendOutOfMemory`` for ``allocate`` (the pool then runs its
  out-of-memory ladder), ``gpuarrays.BackendError`` for anything else.  A
  failing call does not reach the real back-end.

Choosing failures::

    fb.fail("allocate")                 # the next allocate fails
    fb.fail("allocate", times=3)        # the next 3 allocates fail in a row
    fb.fail("free", nth=2)              # the 2nd free from now fails (once)
    fb.fail("synchronize", times=None)  # every synchronize fails until fb.heal()
    fb.fail_allocations(2)              # shorthand for fb.fail("allocate", times=2)
    fb.capacity = 1 << 20               # allocate fails while the bytes it allocated
                                        # (and that are still live) + nbytes > capacity
    fb.heal()                           # no more failures (capacity too)
    fb.on_call("allocate", fn)          # call fn(*args) before each allocate reaches the
                                        # back-end (e.g. gc.collect() inside an allocation)

Installing it on a device (restores the real back-end afterwards, also on error)::

    from faults import inject
    with inject(device) as fb:
        ...
        assert fb.calls["free"] == 3

or with the ``faulty`` pytest fixture (needs the ``device`` fixture of
conftest.py).  Make it visible in a test module with ``import faults`` and
``faulty = faults.faulty`` (an assignment keeps ruff's F811 quiet where an
import of the fixture would not).

``inject`` replaces ``device.impl`` and ``device.memory.impl`` (the pool keeps
its own reference); both are plain attributes.  The wrapper is shared by every
thread while installed.  Calls made by the real back-end to itself are not
seen.  ``capacity`` only counts allocations made through the wrapper.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import threading
from collections.abc import Iterator

import pytest

from gpuarrays._common.errors import BackendError
from gpuarrays.backends.base import BackendOutOfMemory

__all__ = ["FaultyBackend", "inject", "faulty", "PRIMITIVES", "INJECTED_CODE"]

# Every method of the back-end protocols (gpuarrays.backends.base.Backend, StreamBackend).
PRIMITIVES = (
    "device_count", "device_info", "allocate", "free", "mem_info", "memcpy", "upload",
    "download", "fill", "copy_strided", "synchronize", "reset",
    "pointer_info", "register_host", "unregister_host",
    # streams (backends.base.StreamBackend)
    "stream_new", "stream_free", "stream_synchronize", "set_thread_stream", "event_record",
    "event_done", "event_wait", "event_free", "stream_wait_event",
)

# The platform error code an injected BackendError carries.
INJECTED_CODE = -9999


class FaultyBackend:
    """A real back-end plus call counters and injected failures (see the module doc)."""

    def __init__(self, real) -> None:
        self.real = real
        self.name = real.name
        self.needs_host_registration = real.needs_host_registration
        self._lock = threading.Lock()
        self.calls: collections.Counter[str] = collections.Counter()
        self.failures: collections.Counter[str] = collections.Counter()  # injected, per method
        self.allocated: list[tuple[int, int]] = []
        self.freed: list[tuple[int, int]] = []
        self.live: dict[int, int] = {}
        self.capacity: int | None = None
        # method -> list of [calls to let through first, failures left (None: forever)]
        self._plans: dict[str, list[list]] = {}
        self._hooks: dict[str, object] = {}

    # choosing failures ------------------------------------------------------------
    def fail(self, method: str, *, nth: int = 1, times: int | None = 1) -> None:
        """Fail ``times`` consecutive calls of ``method``, starting with the ``nth`` from now.

        ``times=None`` fails every call from the ``nth`` on, until :meth:`heal`.
        """
        if method not in PRIMITIVES:
            raise ValueError(f"{method!r} is not a back-end primitive; expected one of {PRIMITIVES}")
        if nth < 1 or (times is not None and times < 1):
            raise ValueError(f"nth and times must be >= 1, got nth={nth}, times={times}")
        with self._lock:
            self._plans.setdefault(method, []).append([nth - 1, times])

    def fail_allocations(self, times: int | None = 1) -> None:
        """Fail the next ``times`` allocations in a row with ``BackendOutOfMemory``."""
        self.fail("allocate", times=times)

    def on_call(self, method: str, fn) -> None:
        """Call ``fn(*args)`` (the call's arguments) before each ``method`` call is forwarded.

        ``fn=None`` removes the hook.  The hook runs outside the wrapper's lock; an
        exception it raises propagates to the caller as the call's own.
        """
        if method not in PRIMITIVES:
            raise ValueError(f"{method!r} is not a back-end primitive; expected one of {PRIMITIVES}")
        with self._lock:
            if fn is None:
                self._hooks.pop(method, None)
            else:
                self._hooks[method] = fn

    def heal(self) -> None:
        """Cancel every planned failure, hook and the capacity."""
        with self._lock:
            self._plans.clear()
            self._hooks.clear()
            self.capacity = None

    def reset_counts(self) -> None:
        """Zero the call and failure counters (records of live allocations stay)."""
        with self._lock:
            self.calls.clear()
            self.failures.clear()
            self.allocated.clear()
            self.freed.clear()

    @property
    def live_bytes(self) -> int:
        """Bytes allocated through the wrapper and not freed through it yet."""
        with self._lock:
            return sum(self.live.values())

    # the protocol -----------------------------------------------------------------------
    def _enter(self, method: str, args: tuple, nbytes: int = 0) -> None:
        """Run the hook, count the call; raise the injected failure when one is due."""
        hook = self._hooks.get(method)
        if hook is not None:
            hook(*args)
        with self._lock:
            self.calls[method] += 1
            due = False
            plans = self._plans.get(method)
            if plans:
                plan = plans[0]
                if plan[0] > 0:
                    plan[0] -= 1
                else:
                    due = True
                    if plan[1] is not None:
                        plan[1] -= 1
                        if plan[1] == 0:
                            plans.pop(0)
            if (not due and method == "allocate" and self.capacity is not None
                    and sum(self.live.values()) + nbytes > self.capacity):
                due = True
            if due:
                self.failures[method] += 1
        if due:
            if method == "allocate":
                raise BackendOutOfMemory(f"injected: allocate({nbytes}) failed")
            raise BackendError(f"{self.name}.{method}", INJECTED_CODE, "injected fault")

    def allocate(self, index: int, kind: str, nbytes: int) -> int:
        self._enter("allocate", (index, kind, nbytes), nbytes)
        ptr = self.real.allocate(index, kind, nbytes)
        with self._lock:
            self.allocated.append((ptr, nbytes))
            self.live[ptr] = nbytes
        return ptr

    def free(self, index: int, kind: str, ptr: int, nbytes: int) -> None:
        self._enter("free", (index, kind, ptr, nbytes))
        self.real.free(index, kind, ptr, nbytes)
        with self._lock:
            self.freed.append((ptr, nbytes))
            self.live.pop(ptr, None)

    def reset(self, index: int) -> None:
        self._enter("reset", (index,))
        self.real.reset(index)
        with self._lock:
            self.live.clear()  # the platform freed everything

    def __getattr__(self, name: str):
        # Anything that is not part of the protocol (private helpers) goes straight through.
        if name == "real":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.real, name)

    def __repr__(self) -> str:
        return f"<FaultyBackend over {self.real!r}, calls={dict(self.calls)}>"


def _forwarder(method: str):
    def call(self, *args, **kwargs):
        self._enter(method, args)
        return getattr(self.real, method)(*args, **kwargs)

    call.__name__ = method
    call.__doc__ = f"Count, maybe fail, then forward ``{method}`` to the real back-end."
    return call


for _method in PRIMITIVES:
    if _method not in FaultyBackend.__dict__:
        setattr(FaultyBackend, _method, _forwarder(_method))
del _method


@contextlib.contextmanager
def inject(device) -> Iterator[FaultyBackend]:
    """Install a :class:`FaultyBackend` on ``device`` for the block; restore the real one."""
    real = device.impl
    if isinstance(real, FaultyBackend):
        raise RuntimeError(f"a FaultyBackend is already installed on {device}")
    fb = FaultyBackend(real)
    device.impl = fb
    device.memory.impl = fb
    try:
        yield fb
    finally:
        fb.heal()
        device.impl = real
        device.memory.impl = real


@pytest.fixture
def faulty(device) -> Iterator[FaultyBackend]:
    """A :class:`FaultyBackend` installed on the test's ``device`` (restored afterwards).

    The pool starts empty: a request the test expects to reach the platform (and so the
    wrapper) must not be served from a segment an earlier test left idle in this worker.
    """
    gc.collect()
    device.memory.trim()
    with inject(device) as fb:
        yield fb
