"""What an operation owns while it runs and frees when it ends (docs/compute.md, "How an
operation runs").

``with working(dev, *arrays):`` runs device work (launches, NumPy on host views) over
``arrays``: it enters ``dev``'s gate shared (no reset under the work) and holds each
array's storage, then checks they are all live.  A free racing the work -- forced, a
cache's, from another thread -- quarantines the memory until the block ends instead of
handing it to another array; a free that came first is the array's ``FreedArrayError``.
Work still queued when the block ends is ordered before any later user of the memory by
the device's one in-order queue, so holding until the enqueue is done is enough (the
compiled elementwise path, ``_core.apply``, holds the same way in C).

What an operation frees when it ends: the result it was filling, if it fails, and its
temporaries, however it ends.

``with filling(result, temps):`` runs the body that fills ``result``.  If the body
raises, ``result`` goes back to its pool before the error propagates, so a refused or
failed call leaves nothing allocated; every array in ``temps`` (a list the body may
append to) is freed when the body ends.  ``result`` is anything with a ``free()`` (an
array, an indexing plan holding arrays) or a collection of arrays (a dict's values, read
when the body fails).
"""

from __future__ import annotations

from .._core import Working as _Working

__all__ = ["filling", "working"]


def working(dev, *arrays):
    """The block ``dev``'s work over ``arrays`` runs in (``None`` entries skipped): the
    gate shared, a hold on each array's storage, liveness checked (``FreedArrayError``);
    the compiled core's ``Working`` (src/native/core/working.c)."""
    return _Working(dev.gate, *arrays)


class filling:  # noqa: N801 -- used as a statement, like contextlib's helpers
    __slots__ = ("_result", "_temps")

    def __init__(self, result, temps: list | None = None) -> None:
        self._result, self._temps = result, temps

    def __enter__(self) -> list | None:
        return self._temps

    def __exit__(self, kind, value, traceback) -> bool:
        try:
            if kind is not None:
                result = self._result
                for a in (result,) if hasattr(result, "free") else tuple(result):
                    a.free()
        finally:
            for t in self._temps or ():
                t.free()
        return False
