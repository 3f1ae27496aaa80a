"""The platform allocations of one (device, kind) and the pieces they are split into.

A *segment* is one platform allocation.  It is tiled by *pieces*: the blocks of
live storages (``MemoryManager.live``), recently freed blocks waiting in the
exact-size lists (``MemoryManager.free_lists``, the compiled hit's tier), and
merged free pieces, which this module indexes for best fit.  Small requests
(up to ``SMALL_MAX``) share segments of ``SMALL_SEGMENT`` bytes; a larger request
gets a segment of its own size, which later serves smaller requests by splitting.

The policy (docs/design.md, "Pools, limits and the out-of-memory ladder"; the
measurements behind it are in docs/decisions.md, "Memory accounting"):

* a request takes the smallest merged free piece that fits in a segment that
  also holds other pieces (best fit; the rest of the piece stays free);
* failing that, the smallest wholly free ("idle") segment of its arena, but a
  large request never carves a segment more than ``MAX_SPLIT_RATIO`` times its
  size: the pool goes to the platform instead and gives the idle segments back,
  so that a small array cannot strand most of a big allocation;
* freed blocks are merged with their free neighbours of the same segment when
  the pool next misses (``flush``), never across segments: two platform
  allocations may touch in the address space.

Every method runs under the manager's lock; platform calls are the manager's.
"""

from __future__ import annotations

from bisect import bisect_left, insort

__all__ = ["Segments", "SMALL_MAX", "SMALL_SEGMENT", "MAX_SPLIT_RATIO", "KEEP_IDLE_SMALL"]

SMALL_MAX = 1 << 20  # requests up to 1 MiB share segments ...
SMALL_SEGMENT = 2 << 20  # ... of 2 MiB
MAX_SPLIT_RATIO = 2  # an idle large segment serves requests of at least half its size
KEEP_IDLE_SMALL = 1  # idle small segments kept when the pool goes to the platform
SMALL, LARGE = 0, 1


def _bin(size: int) -> int:
    """Bin of a free piece: exact below 32 KiB, then 32 bins per power of two (monotone)."""
    units = size >> 9
    if units < 64:
        return units
    top = units.bit_length() - 1
    return 64 + ((top - 6) << 5) + (units >> (top - 5)) - 32


class FreeTree:
    """Free pieces by size for best fit: bins (a bitmap finds the next non-empty one in
    O(1)) each holding a sorted list of ``(size, ptr)`` (bisected)."""

    __slots__ = ("bins", "mask")

    def __init__(self) -> None:
        self.bins: dict[int, list[tuple[int, int]]] = {}
        self.mask = 0

    def add(self, size: int, ptr: int) -> None:
        b = _bin(size)
        entries = self.bins.get(b)
        if entries is None:
            self.bins[b] = [(size, ptr)]
            self.mask |= 1 << b
        else:
            insort(entries, (size, ptr))

    def remove(self, size: int, ptr: int) -> None:
        b = _bin(size)
        entries = self.bins[b]
        del entries[bisect_left(entries, (size, ptr))]
        if not entries:
            del self.bins[b]
            self.mask &= ~(1 << b)

    def best(self, size: int) -> tuple[int, int] | None:
        """The smallest ``(size, ptr)`` with at least ``size`` bytes (lowest address on ties)."""
        b = _bin(size)
        entries = self.bins.get(b)
        if entries is not None:
            i = bisect_left(entries, (size, 0))
            if i < len(entries):
                return entries[i]
        higher = self.mask >> (b + 1)
        if not higher:
            return None
        return self.bins[b + (higher & -higher).bit_length()][0]


class Segments:
    """Segments and merged free pieces of one (device, kind); see the module docstring.

    ``segments``: base -> (size, arena); ``base``: every piece's ptr -> its segment's
    base; ``free``: merged free piece -> size; ``ends``: end address -> merged free piece.
    """

    __slots__ = ("segments", "base", "free", "ends", "partial", "idle")

    def __init__(self) -> None:
        self.segments: dict[int, tuple[int, int]] = {}
        self.base: dict[int, int] = {}
        self.free: dict[int, int] = {}
        self.ends: dict[int, int] = {}
        self.partial = (FreeTree(), FreeTree())  # free pieces of segments also holding others
        self.idle = (FreeTree(), FreeTree())  # wholly free segments

    @staticmethod
    def arena(size: int) -> int:
        return SMALL if size <= SMALL_MAX else LARGE

    @staticmethod
    def segment_size(size: int) -> int:
        """Bytes of the platform allocation a request of ``size`` (a block size) opens."""
        return SMALL_SEGMENT if size <= SMALL_MAX else size

    # the free index ------------------------------------------------------------------
    def _link(self, ptr: int, size: int) -> None:
        base = self.base[ptr]
        seg_size, arena = self.segments[base]
        self.free[ptr] = size
        self.ends[ptr + size] = ptr
        if ptr == base and size == seg_size:
            self.idle[arena].add(size, ptr)
        else:
            self.partial[arena].add(size, ptr)

    def _unlink(self, ptr: int, size: int) -> None:
        base = self.base[ptr]
        seg_size, arena = self.segments[base]
        del self.free[ptr]
        del self.ends[ptr + size]
        if ptr == base and size == seg_size:
            self.idle[arena].remove(size, ptr)
        else:
            self.partial[arena].remove(size, ptr)

    def insert(self, ptr: int, size: int) -> None:
        """A freed piece joins the index, merged with its free neighbours in its segment."""
        base = self.base[ptr]
        right = ptr + size
        rsize = self.free.get(right)
        if rsize is not None and self.base[right] == base:
            self._unlink(right, rsize)
            del self.base[right]
            size += rsize
        left = self.ends.get(ptr)
        if left is not None and self.base[left] == base:
            lsize = self.free[left]
            self._unlink(left, lsize)
            del self.base[ptr]
            ptr, size = left, lsize + size
        self._link(ptr, size)

    def flush(self, exact: dict[int, list[int]]) -> None:
        """Merge every block waiting in the exact-size lists ``exact`` into the index."""
        for size, ptrs in exact.items():
            for ptr in ptrs:
                self.insert(ptr, size)
        exact.clear()

    # allocation ----------------------------------------------------------------------
    def take(self, size: int) -> int | None:
        """Best fit for a block of ``size`` bytes (split off a free piece), or None."""
        arena = SMALL if size <= SMALL_MAX else LARGE
        found = self.partial[arena].best(size)
        if found is None:
            found = self.idle[arena].best(size)
            if found is None or (arena == LARGE and found[0] > size * MAX_SPLIT_RATIO):
                return None
        self._carve(found[1], found[0], size)
        return found[1]

    def _carve(self, ptr: int, piece: int, size: int) -> None:
        self._unlink(ptr, piece)
        if piece > size:
            rest = ptr + size
            self.base[rest] = self.base[ptr]
            self._link(rest, piece - size)

    def add_segment(self, base: int, seg_size: int, size: int) -> None:
        """A new platform allocation of ``seg_size`` bytes; its first ``size`` bytes are taken."""
        self.segments[base] = (seg_size, SMALL if size <= SMALL_MAX else LARGE)
        self.base[base] = base
        if seg_size > size:
            self.base[base + size] = base
            self._link(base + size, seg_size - size)

    def release_idle(self, keep_small: int = 0) -> list[tuple[int, int]]:
        """Take the wholly free segments out of the books (keeping ``keep_small`` small
        ones, the smallest addresses); returns their ``(base, size)`` for the platform."""
        released = []
        for arena, tree in enumerate(self.idle):
            keep = keep_small if arena == SMALL else 0
            pieces = [entry for entries in tree.bins.values() for entry in entries]
            pieces.sort(key=lambda e: e[1])
            for size, ptr in pieces[keep:]:
                self._unlink(ptr, size)
                del self.base[ptr]
                del self.segments[ptr]
                released.append((ptr, size))
        return released

    def clear(self) -> None:
        """Forget everything (a device reset freed the platform allocations)."""
        self.__init__()
