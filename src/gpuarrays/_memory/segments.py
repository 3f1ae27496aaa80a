"""The platform allocations of one (device, kind) and the pieces they are split into.

A *segment* is one platform allocation.  It is tiled by *pieces*: the blocks of
live storages (``MemoryManager.live``), recently freed blocks waiting in the
exact-size lists (``MemoryManager.free_lists``, the compiled hit's tier), and
merged free pieces, which this module indexes for best fit.  Small requests
(up to ``SMALL_MAX``) share segments of ``SMALL_SEGMENT`` bytes; a larger request
gets a segment of its own size, which later serves smaller requests by splitting.
There are three arenas, which never share a segment: small, large (up to
``HUGE_MIN``) and huge, so that the largest requests are not blocked by
medium-sized blocks left in their segments.

The policy (docs/design.md, "Pools, limits and the out-of-memory ladder"; the
measurements behind it are in docs/decisions.md, "Memory accounting"):

* a small request takes the smallest merged free piece that fits in a small
  segment that also holds other blocks (best fit; the rest stays free);
* a large or huge request takes the best fit, in its arena, among the segments
  holding the most blocks (counted up to ``BUSY_CAP``): a segment with few blocks is left to
  drain, so that it becomes wholly free and can go back to the platform;
* failing that, the smallest wholly free ("idle") segment of its arena, but a
  large or huge request does not carve a segment more than ``MAX_SPLIT_RATIO`` times its
  size: the pool goes to the platform instead, so that a small array cannot
  strand most of a big allocation (the manager lifts that bound while it churns:
  ``take(size, bound=False)``);
* freed blocks wait in the exact-size lists and are merged with their free
  neighbours of the same segment by ``flush`` (the manager calls it for the
  large ones before every large search, for the small ones when no merged piece
  fits, for all in trim and the ladder), never across segments: two platform
  allocations may touch in the address space.

Every method runs under the manager's lock; platform calls are the manager's.
"""

from __future__ import annotations

from bisect import bisect_left, insort

__all__ = ["Segments", "SMALL_MAX", "SMALL_SEGMENT", "HUGE_MIN", "MAX_SPLIT_RATIO",
           "BUSY_CAP", "arena_of"]

SMALL_MAX = 1 << 20  # requests up to 1 MiB share segments ...
SMALL_SEGMENT = 2 << 20  # ... of 2 MiB
HUGE_MIN = 32 << 20  # requests above 32 MiB are huge
MAX_SPLIT_RATIO = 1.5  # an idle large segment serves requests of at least 2/3 its size
BUSY_CAP = 8  # large segments holding this many blocks or more count as equally busy
SMALL, LARGE, HUGE = 0, 1, 2


def arena_of(size: int) -> int:
    """The arena of a block size (the arena of the segment it comes from)."""
    return SMALL if size <= SMALL_MAX else LARGE if size <= HUGE_MIN else HUGE


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
    base; ``free``: merged free piece -> size; ``ends``: end address -> merged free piece;
    ``busy``: base -> the segment's pieces that are not merged free pieces (live blocks
    and blocks waiting in the exact-size lists); ``pieces``: base -> its merged free pieces.
    Free pieces of segments that also hold blocks are indexed in ``small`` (best fit) or,
    for large and huge segments, in ``busiest[arena][min(busy, BUSY_CAP)]``; wholly free
    segments in ``idle[arena]``.
    """

    __slots__ = ("segments", "base", "free", "ends", "busy", "pieces", "small", "busiest",
                 "idle")

    def __init__(self) -> None:
        self.segments: dict[int, tuple[int, int]] = {}
        self.base: dict[int, int] = {}
        self.free: dict[int, int] = {}
        self.ends: dict[int, int] = {}
        self.busy: dict[int, int] = {}
        self.pieces: dict[int, set[int]] = {}
        self.small = FreeTree()
        self.busiest = {arena: tuple(FreeTree() for _ in range(BUSY_CAP + 1))  # [0] unused
                        for arena in (LARGE, HUGE)}
        self.idle = (FreeTree(), FreeTree(), FreeTree())  # wholly free segments, per arena

    @staticmethod
    def segment_size(size: int) -> int:
        """Bytes of the platform allocation a request of ``size`` (a block size) opens."""
        return SMALL_SEGMENT if size <= SMALL_MAX else size

    # the free index ------------------------------------------------------------------
    def _tree(self, base: int, ptr: int, size: int) -> FreeTree:
        seg_size, arena = self.segments[base]
        if ptr == base and size == seg_size:
            return self.idle[arena]
        if arena == SMALL:
            return self.small
        return self.busiest[arena][min(self.busy[base], BUSY_CAP)]

    def _link(self, ptr: int, size: int) -> None:
        base = self.base[ptr]
        self.free[ptr] = size
        self.ends[ptr + size] = ptr
        self.pieces[base].add(ptr)
        self._tree(base, ptr, size).add(size, ptr)

    def _unlink(self, ptr: int, size: int) -> None:
        base = self.base[ptr]
        del self.free[ptr]
        del self.ends[ptr + size]
        self.pieces[base].discard(ptr)
        self._tree(base, ptr, size).remove(size, ptr)

    def _set_busy(self, base: int, busy: int) -> None:
        """Change a segment's count of blocks, moving its free pieces to their new bin."""
        old = self.busy[base]
        arena = self.segments[base][1]
        if arena != SMALL and old and busy and min(old, BUSY_CAP) != min(busy, BUSY_CAP):
            trees = self.busiest[arena]
            for ptr in self.pieces[base]:
                size = self.free[ptr]
                trees[min(old, BUSY_CAP)].remove(size, ptr)
                trees[min(busy, BUSY_CAP)].add(size, ptr)
        self.busy[base] = busy

    def insert(self, ptr: int, size: int) -> None:
        """A freed block joins the index, merged with its free neighbours in its segment."""
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
        self._set_busy(base, self.busy[base] - 1)
        self._link(ptr, size)

    def flush(self, exact: dict[int, list[int]], arenas: tuple[int, ...] | None = None) -> None:
        """Merge the blocks waiting in the exact-size lists ``exact`` into the index: all of
        them, or those of some arenas (a block's size tells its arena)."""
        if arenas is None:
            sizes = list(exact)
        else:
            sizes = [size for size in exact if arena_of(size) in arenas]
        for size in sizes:
            for ptr in exact.pop(size):
                self.insert(ptr, size)

    # allocation ----------------------------------------------------------------------
    def take(self, size: int, bound: bool = True) -> int | None:
        """A block of ``size`` bytes split off a free piece (see the policy), or None;
        ``bound``: whether the split bound of idle large and huge segments applies."""
        arena = arena_of(size)
        if arena == SMALL:
            found = self.small.best(size)
        else:
            found = None
            for tree in reversed(self.busiest[arena]):  # the busiest segments first
                if tree.mask and (found := tree.best(size)) is not None:
                    break
        if found is None:
            found = self.idle[arena].best(size)
            if found is None or (bound and arena != SMALL and found[0] > size * MAX_SPLIT_RATIO):
                return None
        piece, ptr = found
        base = self.base[ptr]
        self._unlink(ptr, piece)
        self._set_busy(base, self.busy[base] + 1)
        if piece > size:
            self.base[ptr + size] = base
            self._link(ptr + size, piece - size)
        return ptr

    def add_segment(self, base: int, seg_size: int, size: int) -> None:
        """A new platform allocation of ``seg_size`` bytes; its first ``size`` are taken."""
        self.segments[base] = (seg_size, arena_of(size))
        self.base[base] = base
        self.busy[base] = 1
        self.pieces[base] = set()
        if seg_size > size:
            self.base[base + size] = base
            self._link(base + size, seg_size - size)

    def idle_segments(self) -> list[tuple[int, int, int]]:
        """The wholly free segments as ``(size, base, arena)``."""
        return [(size, ptr, arena) for arena, tree in enumerate(self.idle)
                for entries in tree.bins.values() for size, ptr in entries]

    def release(self, base: int) -> int:
        """Take the wholly free segment at ``base`` out of the books; returns its size."""
        size = self.segments[base][0]
        self._unlink(base, size)
        for table in (self.base, self.busy, self.pieces, self.segments):
            del table[base]
        return size

    def clear(self) -> None:
        """Forget everything (a device reset freed the platform allocations)."""
        self.__init__()
