"""Philox4x32-10, the counter-based bijection behind every random number (docs/random.md).

Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC 2011): a
128-bit counter and a 64-bit key give four 32-bit words after ten rounds of
two 32x32->64-bit multiplications; nothing but the key and the counter is
state.  This module is the cpu engine of the raw bits: NumPy arithmetic on
uint64 arrays that hold 32-bit values (a product of two of them fits), in
chunks small enough to stay in cache.  ``kernels.py`` writes the same rounds
in C; the known-answer vectors of Random123 test both.
"""

from __future__ import annotations

import numpy as np

__all__ = ["M0", "M1", "W0", "W1", "ROUNDS", "block", "blocks", "words", "CHUNK"]

M0, M1 = 0xD2511F53, 0xCD9E8D57  # the round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # the Weyl key increments (golden ratio, sqrt(3) - 1)
ROUNDS = 10
CHUNK = 1 << 12  # blocks per NumPy pass: 4 words x 8 bytes x 4 Ki = 128 KiB, cache-resident (best of 4, 16, 64 Ki measured here)

_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def block(key: tuple[int, int], c0, c1, c2, c3) -> tuple[np.ndarray, ...]:
    """The four output words of Philox4x32-10 for counters ``(c0, c1, c2, c3)``.

    Each counter word is a uint64 array (values below 2**32) or an int; the
    results are uint64 arrays of 32-bit values, broadcast together.
    """
    c0, c1, c2, c3 = (np.asarray(c, np.uint64) for c in (c0, c1, c2, c3))
    c0, c1, c2, c3 = np.broadcast_arrays(c0, c1, c2, c3)
    x0, x1, x2, x3 = (c.copy() for c in (c0, c1, c2, c3))
    p0, p1 = np.empty_like(x0), np.empty_like(x0)
    k0, k1 = key
    for r in range(ROUNDS):
        if r:
            k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
        np.multiply(x0, np.uint64(M0), out=p0)
        np.multiply(x2, np.uint64(M1), out=p1)
        # new x0 = hi(p1) ^ x1 ^ k0, x1 = lo(p1), x2 = hi(p0) ^ x3 ^ k1, x3 = lo(p0)
        np.right_shift(p1, _S32, out=x0)
        np.bitwise_xor(x0, x1, out=x0)
        np.bitwise_xor(x0, np.uint64(k0), out=x0)
        np.bitwise_and(p1, _M32, out=x1)
        np.right_shift(p0, _S32, out=x2)
        np.bitwise_xor(x2, x3, out=x2)
        np.bitwise_xor(x2, np.uint64(k1), out=x2)
        np.bitwise_and(p0, _M32, out=x3)
    return x0, x1, x2, x3


def blocks(key: tuple[int, int], start: int, count: int) -> tuple[np.ndarray, ...]:
    """Words 0..3 of blocks ``start .. start + count - 1`` of the main stream, one array each.

    Block ``b`` is the counter ``(b mod 2**32, b >> 32, 0, 0)``.
    """
    b = np.arange(start, start + count, dtype=np.uint64)
    return block(key, b & _M32, b >> _S32, 0, 0)


def words(key: tuple[int, int], start: int, count: int) -> np.ndarray:
    """The words of blocks ``start .. start + count - 1`` of the main stream, in order.

    Block ``b`` is the counter ``(b mod 2**32, b >> 32, 0, 0)``: a uint64 array
    of ``4 * count`` 32-bit values, word ``j`` of block ``b`` at ``4 * (b - start) + j``.
    """
    out = np.empty((count, 4), np.uint64)
    for j, w in enumerate(blocks(key, start, count)):
        out[:, j] = w
    return out.reshape(-1)
