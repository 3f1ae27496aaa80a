"""Which block holds which element, per family (docs/random.md, "Counters").

A block has four 32-bit words.  A float32 uniform or exponential takes one
word, a float64 one two; a normal pair takes two uniforms; an integer of a
range up to 2**32 takes one word, a wider one two; a permutation key two.

The floating families (``uniform``, ``normal``, ``exponential``) lay their
blocks out in *lane groups*: ``LANES`` consecutive blocks form a group of
``LANES * per_block`` elements, stored row by row -- row ``r`` of the group
holds output ``r`` of each of its ``LANES`` blocks.  Element ``i`` lies in
group ``g = i // (LANES * per_block)``, row ``(i % (LANES * per_block)) // LANES``,
block ``offset + g * LANES + i % LANES``; a call consumes whole groups.  So a
device computes ``LANES`` blocks side by side in vector registers and stores
each row with one contiguous vector store.  ``integers`` and ``keys`` keep
the plain layout: element ``i`` in block ``offset + i // per_block``, output
``i % per_block``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LANES", "FLOAT_FAMILIES", "per_block", "blocks", "lane_grouped"]

LANES = 8  # blocks per lane group: one 8-wide vector of 32-bit words (AVX2/AVX-512 halves)
FLOAT_FAMILIES = ("uniform", "normal", "exponential")


def per_block(family: str, dtype: np.dtype, params: tuple = ()) -> int:
    if family == "integers":
        return 2 if params[3] else 4  # params[3]: the range needs 64-bit draws
    if family == "keys":
        return 2
    return 4 if dtype.itemsize == 4 else 2  # uniform, exponential, normal pairs alike


def lane_grouped(family: str) -> bool:
    """Whether ``family`` uses the lane-group layout (the floating families)."""
    return family in FLOAT_FAMILIES


def blocks(family: str, dtype: np.dtype, n: int, params: tuple = ()) -> int:
    """Blocks a call of ``n`` elements consumes (whole lane groups for the floating families)."""
    e = per_block(family, dtype, params)
    if lane_grouped(family):
        return -(-n // (e * LANES)) * LANES
    return -(-n // e)
