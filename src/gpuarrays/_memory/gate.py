"""A per-device gate that keeps a reset from running under a data movement.

Copies, fills and kernels hold the gate *shared* (many threads at once, and
re-entrantly: a copy may stage through a nested copy); ``device_reset`` holds
it *exclusively* while it ends the epoch and resets the platform.  So no
transfer ever touches memory the reset is freeing: a transfer that starts
after the reset finds its array's epoch dead and raises ``DeviceResetError``.
Readers are preferred (a waiting reset never blocks a nested shared entry).
Finalizers never take the gate.

The counters and the shared entry and exit are compiled (``_core.Gate``; the
elementwise hot path takes the gate without a call); the condition the slow
paths wait on is here.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from .. import _core


class UsageGate(_core.Gate):
    """Shared for data movement (``with gate:``), exclusive for a reset."""

    __slots__ = ("_cond",)

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())

    def _enter_slow(self) -> None:
        """A shared entry while a reset holds the gate: wait until it ends."""
        with self._cond:
            self._waiting += 1
            try:
                while not self._try_shared():
                    self._cond.wait()
            finally:
                self._waiting -= 1

    def after_fork(self) -> None:
        """In a fork's child: start clean.  The threads that held the gate or waited on it
        did not survive the fork, and its condition's lock may have been held by one."""
        self._forget_holds()
        self._cond = threading.Condition(threading.Lock())

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Wait until no transfer is running, then keep new ones out."""
        with self._cond:
            self._waiting += 1
            try:
                while not self._try_exclusive():
                    self._cond.wait()
            finally:
                self._waiting -= 1
        try:
            yield
        finally:
            self._end_exclusive()
            self._wake()
