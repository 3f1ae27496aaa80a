"""The shared, reference-counted allocation behind every array (SPEC 5).

Two layers of ownership, as in GPUArrays.jl: one :class:`Storage` per
allocation counts handles; every array holds exactly one handle with its own
``freed`` flag (set *before* the handle is released).  When the last handle
goes, or on a forced free, the storage's *home* gets the memory back exactly
once: a pool (``pool.MemoryManager``), an allocation cache (``cache.AllocCache``)
or the owner of wrapped memory (``wrap.WrapHome``).

Thread safety without a lock: handles are items of a list (``append``/``pop``
are atomic under the GIL) and the right to release is a one-item list whose
``pop`` only one thread can win.
"""

from __future__ import annotations

from .errors import DeviceResetError, FreedArrayError

__all__ = ["Storage", "Epoch", "FREED_LOCAL", "FREED_FORCED", "FREED_CACHE"]

FREED_LOCAL = "local"
FREED_FORCED = "forced"
FREED_CACHE = "cache"
FREED_RESET = "reset"

_WHY = {
    FREED_LOCAL: "it was released by free() on this array (or by garbage collection)",
    FREED_FORCED: "the memory was released by a forced free (free(force=True)) of an array sharing it",
    FREED_CACHE: "its AllocCache was freed (cache.free())",
}


class Epoch:
    """One generation of a device: storages of a dead epoch predate a reset."""

    __slots__ = ("live", "generation")

    def __init__(self, generation: int) -> None:
        self.live = True
        self.generation = generation


class Storage:
    """One allocation shared by every array derived from it.

    Public, read-only: ``ptr``, ``nbytes``, ``device``, ``kind``, ``owned``,
    ``refcount`` (live handles: arrays, unreleased DLPack capsules, host views)
    and ``is_freed``.
    """

    __slots__ = ("ptr", "nbytes", "device", "kind", "owned", "owner", "block", "_epoch", "_home",
                 "_handles", "_token", "_reason", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, device, kind: str, home, epoch: Epoch,
                 block: int = 0, owned: bool = True, owner: object = None) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.device = device
        self.kind = kind
        self.owned = owned
        self.owner = owner  # kept alive while the storage lives (wrapped memory)
        self.block = block  # bytes taken from the pool (0 when not pooled)
        self._epoch = epoch
        self._home = home
        self._handles: list = []
        self._token = [None]
        self._reason: str | None = None

    # handles ------------------------------------------------------------------
    @property
    def refcount(self) -> int:
        """Number of live handles on this storage (0 once it is freed)."""
        return 0 if self.is_freed else len(self._handles)

    @property
    def is_freed(self) -> bool:
        return self._reason is not None or not self._epoch.live

    def decref(self) -> None:
        """Release one handle; the last one gives the memory back to its home."""
        handles = self._handles
        handles.pop()
        if not handles:
            try:
                self._token.pop()
            except IndexError:
                return
            self._reason = FREED_LOCAL
            self._home.release_storage(self)

    def release(self, reason: str) -> bool:
        """Give the memory back now, whatever handles remain.  True if this call did it."""
        try:
            self._token.pop()
        except IndexError:
            return False
        self._reason = reason
        self._home.release_storage(self)
        return True

    def invalidate(self, reason: str) -> bool:
        """Mark freed without giving the memory back (the caller takes it).  True if won."""
        try:
            self._token.pop()
        except IndexError:
            return False
        self._reason = reason
        return True

    # errors -------------------------------------------------------------------
    def freed_error(self, local: bool) -> FreedArrayError:
        """The error for using an array over this storage (``local``: that array was freed)."""
        if not self._epoch.live:
            return DeviceResetError(
                f"Attempt to use a freed array: device {self.device} was reset "
                f"(ga.device_reset) after this array was allocated; allocate a new array"
            )
        why = _WHY[FREED_LOCAL if local else self._reason]
        return FreedArrayError(f"Attempt to use a freed array: {why}")

    def __repr__(self) -> str:
        state = "freed" if self.is_freed else f"refcount={len(self._handles)}"
        return (f"<Storage 0x{self.ptr:x} {self.nbytes} bytes {self.kind} on {self.device}, "
                f"{state}{'' if self.owned else ', not owned'}>")


_new = object.__new__


def pooled_storage(ptr: int, nbytes: int, device, kind: str, block: int, epoch: Epoch,
                   home) -> Storage:
    """A storage over a pool block or cached buffer (owned, no owner object).

    The allocation hot paths use this instead of ``Storage(...)``: setting the
    slots directly costs a third of the keyword-argument constructor.
    """
    st = _new(Storage)
    st.ptr = ptr
    st.nbytes = nbytes
    st.device = device
    st.kind = kind
    st.owned = True
    st.owner = None
    st.block = block
    st._epoch = epoch
    st._home = home
    st._handles = []
    st._token = [None]
    st._reason = None
    return st


class NullHome:
    """Home of zero-size storages: nothing to give back."""

    __slots__ = ()

    @staticmethod
    def release_storage(storage: Storage) -> None:
        return None


NULL_HOME = NullHome()
