"""The shared, reference-counted allocation behind every array.

Two layers of ownership, as in GPUArrays.jl: one :class:`Storage` per
allocation counts handles; every array holds exactly one handle with its own
``freed`` flag (set *before* the handle is released).  When the last handle
goes, or on a forced free, the storage's *home* gets the memory back exactly
once: a pool (``pool.MemoryManager``), an allocation cache (``cache.AllocCache``)
or the owner of wrapped memory (``wrap.WrapHome``).

Thread safety without a lock: the handle count and the right to release (a
token only one caller can claim) live in the compiled core (``src/native/core/storage.c``), where
reading and updating them is one step under the GIL.  ``Epoch`` is compiled too:
the hot paths read ``epoch.live`` on every use of an array.
"""

from __future__ import annotations

from .. import _core
from .._common.errors import DeviceResetError, FreedArrayError
from .._core import Epoch

__all__ = ["Storage", "Epoch", "FREED_LOCAL", "FREED_FORCED", "FREED_CACHE", "quarantined"]

FREED_LOCAL = _core.FREED_LOCAL  # "local": the reasons the core itself sets
FREED_FORCED = _core.FREED_FORCED  # "forced"
FREED_CACHE = "cache"
FREED_RESET = "reset"

# Epochs that os.fork() ended in this (child) process (fork.py).
FORKED_EPOCHS: list[Epoch] = []

_WHY = {
    FREED_LOCAL: "it was released by free() on this array (or by garbage collection)",
    FREED_FORCED: "the memory was released by a forced free (free(force=True)) of an array sharing it",
    FREED_CACHE: "its AllocCache was freed (cache.free())",
}


class Storage(_core.Storage):
    """One allocation shared by every array derived from it.

    ``Storage(ptr, nbytes, device, kind, home, epoch, block=0, owned=True, owner=None)``.
    Public, read-only: ``ptr``, ``nbytes``, ``device``, ``kind``, ``owned``,
    ``refcount`` (live handles: arrays, unreleased DLPack capsules, host views)
    and ``is_freed``.  ``decref()``, ``release(reason)`` and ``invalidate(reason)``
    (compiled, see the module docstring) move the handles and the token.
    """

    __slots__ = ()

    def freed_error(self, local: bool) -> FreedArrayError:
        """The error for using an array over this storage (``local``: that array was freed)."""
        if not self._epoch.live:
            if any(self._epoch is e for e in FORKED_EPOCHS):
                return DeviceResetError(
                    f"Attempt to use a freed array: it was inherited from the parent process "
                    f"through os.fork(), and device {self.device} cannot be used in a forked "
                    f"child; start worker processes with multiprocessing's 'spawn' or "
                    f"'forkserver' start method")
            return DeviceResetError(
                f"Attempt to use a freed array: device {self.device} was reset "
                f"(ga.device_reset) after this array was allocated; allocate a new array"
            )
        why = _WHY[FREED_LOCAL if local else self._reason]
        return FreedArrayError(f"Attempt to use a freed array: {why}")

    def __repr__(self) -> str:
        state = "freed" if self.is_freed else f"refcount={self._handle_count}"
        return (f"<Storage 0x{self.ptr:x} {self.nbytes} bytes {self.kind} on {self.device}, "
                f"{state}{'' if self.owned else ', not owned'}>")


_core.configure(storage_type=Storage)


def quarantined(device) -> list[Storage]:
    """The storages of ``device`` freed while host views or capsules still hold them.

    Their memory goes back to its home when the last such handle goes
    (docs/design.md, "Release"); until then it counts in ``used_bytes``.
    """
    return [st for st in Storage._held()
            if st._quarantined and st.device is device and st._epoch.live]


class NullHome:
    """Home of zero-size storages: nothing to give back."""

    __slots__ = ()

    @staticmethod
    def release_storage(storage: Storage) -> None:
        return None


NULL_HOME = NullHome()
