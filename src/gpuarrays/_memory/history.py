"""Allocation history: a bounded ring of alloc/free/reuse/reset events.

``ga.memory_history.start()`` begins recording; ``snapshot()`` returns a
JSON-serialisable dict; ``dump(path)`` writes it; ``gpuarrays plot`` draws it.
Recording costs nothing while stopped (one ``None`` check per allocation).
"""

from __future__ import annotations

import collections
import json
import os
import sys
import threading
import time

from .state import state

__all__ = ["memory_history", "History"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # gpuarrays/


def _user_frames(limit: int = 16) -> list[str]:
    """Stack of the caller outside gpuarrays, innermost first, as 'file:line in func'."""
    frames = []
    f = sys._getframe(2)
    while f is not None and len(frames) < limit:
        path = f.f_code.co_filename
        if not os.path.abspath(path).startswith(_PACKAGE_DIR):
            frames.append(f"{os.path.basename(path)}:{f.f_lineno} in {f.f_code.co_name}")
        f = f.f_back
    return frames


class History:
    """The recorder behind ``ga.memory_history``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: collections.deque = collections.deque(maxlen=100_000)
        self._stacks = True
        self._t0 = time.perf_counter()
        self._local = threading.local()  # .stack: the site() stack of this thread's allocation

    def start(self, max_entries: int = 100_000, stacks: bool = True) -> None:
        """Start (or restart) recording, keeping at most ``max_entries`` events."""
        if not isinstance(max_entries, int) or max_entries <= 0:
            raise ValueError(f"max_entries must be a positive int, got {max_entries!r}")
        with self._lock:
            self._events = collections.deque(maxlen=max_entries)
            self._stacks = bool(stacks)
            self._t0 = time.perf_counter()
        state.history = self

    def stop(self) -> None:
        """Stop recording; the events stay available to ``snapshot``."""
        state.history = None

    @property
    def active(self) -> bool:
        return state.history is self

    def site(self) -> str | None:
        """The allocation site of the current call (used by the pool when recording)."""
        if not self._stacks:
            return None
        stack = self._local.stack = _user_frames()
        return stack[0] if stack else None

    def record(self, action: str, device, size: int, address: int, kind: str) -> None:
        event = {
            "action": action,
            "time": time.perf_counter() - self._t0,
            "device": str(device),
            "size": size,
            "address": address,
            "kind": kind,
        }
        if self._stacks and action in ("alloc", "reuse"):
            stack = getattr(self._local, "stack", None) if action == "alloc" else _user_frames()
            event["stack"] = stack or []
            self._local.stack = None
        self._events.append(event)

    def snapshot(self) -> dict:
        """``{"version": 1, "events": [...]}``, JSON-serialisable."""
        with self._lock:
            events = list(self._events)
        return {"version": 1, "recording": self.active, "events": events}

    def dump(self, path: str | os.PathLike) -> None:
        """Write ``snapshot()`` as JSON to ``path``."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.snapshot(), f)

    def clear(self) -> None:
        with self._lock:
            self._events.clear()


memory_history = History()
