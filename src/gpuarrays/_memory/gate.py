"""A per-device gate that keeps a reset from running under a data movement.

Copies, fills and kernels hold the gate *shared* (many threads at once, and
re-entrantly: a copy may stage through a nested copy); ``device_reset`` holds
it *exclusively* while it ends the epoch and resets the platform.  So no
transfer ever touches memory the reset is freeing: a transfer that starts
after the reset finds its array's epoch dead and raises ``DeviceResetError``.
Readers are preferred (a waiting reset never blocks a nested shared entry).
Finalizers never take the gate.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class UsageGate:
    """Shared for data movement (``with gate:``), exclusive for a reset."""

    __slots__ = ("_cond", "_readers", "_writer")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False

    def __enter__(self) -> None:
        with self._cond:
            while self._writer:
                self._cond.wait()
            self._readers += 1

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._readers -= 1
            if not self._readers:
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Wait until no transfer is running, then keep new ones out."""
        with self._cond:
            while self._writer or self._readers:
                self._cond.wait()
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()
