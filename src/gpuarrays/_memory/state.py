"""Process-wide switches read on hot paths (kept in one tiny module to avoid import cycles).

``state`` is the compiled core's one ``State`` object, so C reads it without a lookup:
``shutting_down`` (set when interpreter shutdown starts: from then on nothing
reaches the platform), ``recorders`` (the active ``record_allocations()``
blocks) and ``history`` (the active ``history.History`` or None).
"""

from __future__ import annotations

from .._core import state

__all__ = ["state"]
