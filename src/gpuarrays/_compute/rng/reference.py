"""The NumPy reference of the random numbers: the tests' oracle for every engine's bits.

cpu:0 runs the kernels' C dialect (``kernels.c_source``, in ``gpuarrays._rng``)
and the device back-ends their OpenCL or CUDA; this module computes the same
numbers with NumPy from ``philox.py`` and ``mapping.py`` alone, independently of
the kernel generator, so that a mistake there cannot hide in every engine at
once.  Each family turns the words of a range of Philox blocks
(``philox.words``) into elements, a chunk of blocks at a time, writing through
the given NumPy array.  The element-to-counter rule is the kernels'
(docs/random.md, "Counters"; ``layout.py``): the floating families compute
each block's outputs in block order and then store them row by row of each
lane group.
"""

from __future__ import annotations

import numpy as np

from . import mapping
from .layout import LANES, per_block
from .philox import CHUNK, block, blocks, words

__all__ = ["generate", "permutation_index"]

_M32 = np.uint64(0xFFFFFFFF)


def _float_rows(family: str, x: tuple, spec: mapping.FloatSpec, params: tuple) -> np.ndarray:
    """The ``per_block`` outputs of each block as rows of a ``(per_block, count)`` array.

    ``x``: the blocks' four words (``philox.blocks``).  A float32 output takes word ``r``,
    a float64 one the 64-bit value of words ``2r | 2r + 1`` (``mapping.uniform_bits``);
    a normal pair takes outputs ``2q`` (radius) and ``2q + 1`` (angle).  All rows go
    through each NumPy call together (fewer, longer calls).
    """
    t = spec.dtype.type
    e = 4 // spec.words
    k = np.empty((e, x[0].size), np.uint64)
    for r in range(e):
        if spec.words == 1:
            np.right_shift(x[r], np.uint64(8), out=k[r])
        else:
            np.bitwise_or(x[2 * r], x[2 * r + 1] << np.uint64(32), out=k[r])
            k[r] >>= np.uint64(11)
    if family == "normal":
        loc, scale = params
        z = np.empty((e, x[0].size), spec.dtype)
        z[0::2], z[1::2] = mapping.normal_pair(k[0::2], k[1::2], spec)
        return t(loc) + t(scale) * z
    if family == "uniform":
        low, span = params
        return t(low) + t(span) * mapping.to_unit(k, spec)
    (scale,) = params
    return t(scale) * mapping.exponential(k, spec)


def _retry(key, offset: int, i: np.ndarray, lanes: int, accept, attempt: int):
    """Candidates of retry round ``attempt`` for elements ``i``: block (b, b >> 32, attempt, lane)."""
    b = np.uint64(offset) + i // np.uint64(lanes)
    w = block(key, b & _M32, b >> np.uint64(32), np.uint64(attempt), i % np.uint64(lanes))
    if lanes == 4:
        return [accept(x) for x in w]
    return [accept(w[0] | (w[1] << np.uint64(32))), accept(w[2] | (w[3] << np.uint64(32)))]


def _integers(w: np.ndarray, key, offset: int, first: int, params: tuple) -> np.ndarray:
    """Lemire's multiply-shift with rejection; rejected elements draw again from retry blocks."""
    low, rng, thresh, wide = params
    if wide:
        x = w[0::2] | (w[1::2] << np.uint64(32))
        if rng == 0:  # the full 2**64 range
            return np.uint64(low) + x

        def accept(v):
            hi, lo = mapping.mulhilo64(v, rng)
            return hi, lo >= np.uint64(thresh)
    else:
        x = w

        def accept(v):
            m = v * np.uint64(rng)
            return m >> np.uint64(32), (m & _M32) >= np.uint64(thresh)
    res, ok = accept(x)
    lanes = 2 if wide else 4
    todo = np.flatnonzero(~ok).astype(np.uint64)
    attempt = 1
    while todo.size:
        pending = np.ones(todo.size, bool)
        got = np.zeros(todo.size, np.uint64)
        for r, good in _retry(key, offset, todo + np.uint64(first), lanes, accept, attempt):
            take = pending & good
            got[take] = r[take]
            pending &= ~take
        res[todo[~pending]] = got[~pending]
        todo = todo[pending]
        attempt += 1
    return np.uint64(low) + res


def generate(family: str, out: np.ndarray, key: tuple[int, int], offset: int,
             params: tuple) -> None:
    """Fill the flat, contiguous ``out`` with ``family``'s numbers from block ``offset`` on."""
    n = out.size
    if n == 0:
        return
    e = per_block(family, out.dtype, params)
    spec = mapping.SPECS.get(out.dtype)
    # floats: whole lane groups (CHUNK is a multiple of LANES); integers and keys: plain blocks
    nblocks = -(-n // (e * LANES)) * LANES if spec is not None else -(-n // e)
    unsigned = None if spec is not None else out.view(np.dtype(f"u{out.dtype.itemsize}"))
    for start in range(0, nblocks, CHUNK):
        count = min(CHUNK, nblocks - start)
        lo, hi = start * e, min(n, (start + count) * e)
        if spec is not None:  # count is a whole number of lane groups (nblocks rounds up)
            rows = _float_rows(family, blocks(key, offset + start, count), spec, params)
            whole = hi - lo == count * e
            dst = (out[lo:hi] if whole else np.empty(count * e, out.dtype)).reshape(
                count // LANES, e, LANES)  # group, row, lane
            dst[...] = rows.reshape(e, count // LANES, LANES).transpose(1, 0, 2)
            if not whole:  # the call's last, partial lane group
                out[lo:hi] = dst.reshape(-1)[: hi - lo]
            continue
        w = words(key, offset + start, count)
        if family == "integers":
            v = _integers(w, key, offset, lo, params)[: hi - lo]
            unsigned[lo:hi] = v.astype(unsigned.dtype)  # the low bits: NumPy's wrapping cast
        else:  # "keys"
            out[lo:hi] = (w[0::2] | (w[1::2] << np.uint64(32)))[: hi - lo]


def permutation_index(out: np.ndarray, key: tuple[int, int], offset: int) -> None:
    """``out`` (int64, flat) = the order of the random 64-bit keys, ties by index."""
    keys = np.empty(out.size, np.uint64)
    generate("keys", keys, key, offset, ())
    out[...] = np.argsort(keys, kind="stable")
