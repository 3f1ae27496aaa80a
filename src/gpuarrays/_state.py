"""Process-wide switches read on hot paths (kept in one tiny module to avoid import cycles)."""

from __future__ import annotations


class _State:
    __slots__ = ("shutting_down", "recorders", "history")

    def __init__(self) -> None:
        # Set when interpreter shutdown starts: from then on nothing reaches the platform.
        self.shutting_down = False
        # Active record_allocations() blocks (stats.Recorder objects).
        self.recorders: list = []
        # The active history recorder (history.History) or None.
        self.history = None


state = _State()
