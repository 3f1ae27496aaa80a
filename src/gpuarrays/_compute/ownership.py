"""What an operation frees when it ends: the result it was filling, if it fails, and its
temporaries, however it ends (docs/compute.md, "How an operation runs").

``with filling(result, temps):`` runs the body that fills ``result``.  If the body
raises, ``result`` goes back to its pool before the error propagates, so a refused or
failed call leaves nothing allocated; every array in ``temps`` (a list the body may
append to) is freed when the body ends.  ``result`` is anything with a ``free()`` (an
array, an indexing plan holding arrays) or a collection of arrays (a dict's values, read
when the body fails).
"""

from __future__ import annotations

__all__ = ["filling"]


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
