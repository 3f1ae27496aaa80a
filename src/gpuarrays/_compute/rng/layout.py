"""How many elements one Philox block gives, per family (docs/random.md, "Counters").

A block has four 32-bit words.  A float32 uniform or exponential takes one
word, a float64 one two; a normal pair takes two uniforms; an integer of a
range up to 2**32 takes one word, a wider one two; a permutation key two.
Element ``i`` of a call lives in block ``offset + i // per_block`` and the call
consumes ``ceil(n / per_block)`` blocks.
"""

from __future__ import annotations

import numpy as np

__all__ = ["per_block", "blocks"]


def per_block(family: str, dtype: np.dtype, params: tuple = ()) -> int:
    if family == "integers":
        return 2 if params[3] else 4  # params[3]: the range needs 64-bit draws
    if family == "keys":
        return 2
    return 4 if dtype.itemsize == 4 else 2  # uniform, exponential, normal pairs alike


def blocks(family: str, dtype: np.dtype, n: int, params: tuple = ()) -> int:
    """Blocks a call of ``n`` elements consumes."""
    return -(-n // per_block(family, dtype, params))
