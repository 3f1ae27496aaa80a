"""Random numbers in the compute layer: Philox4x32-10 on every back-end (docs/random.md).

``philox.py`` is the bijection, ``layout.py`` says which block holds which
element, ``mapping.py`` turns bits into numbers and ``kernels.py`` writes the
kernels (one C template: OpenCL C and CUDA C for the device back-ends, plain C
compiled into ``gpuarrays._rng`` for cpu:0).  ``reference.py`` computes the same numbers
with NumPy, the tests' oracle.  The functions here take gpuarrays arrays the
caller allocated (``gpuarrays.random`` checks arguments and allocates); nothing
goes through the host on a device back-end.
"""

from __future__ import annotations

import numpy as np

from ..._common.raw import ndarray_at
from ...backends.base import RawView
from . import kernels
from .layout import blocks, per_block

__all__ = ["generate", "permutation_index", "take_rows", "blocks", "per_block", "scratch_size"]


def _view(a):
    raw = a._raw()
    return ndarray_at(raw.ptr, raw.shape, raw.strides, raw.dtype)


def _on_cpu(a) -> bool:
    return a.device.backend == "cpu"


def generate(family: str, out, key: tuple[int, int], offset: int, params: tuple) -> None:
    """Fill the C-contiguous array ``out`` with ``family``'s numbers from block ``offset`` on.

    ``family``: ``"uniform"`` (params ``low, span``), ``"normal"`` (``loc, scale``),
    ``"exponential"`` (``scale``), ``"integers"`` (``low bits, range, threshold,
    wide``) or ``"keys"``.
    """
    kernels.generate(family, out.device, out._raw(), key, offset, params)


def scratch_size(n: int) -> int:
    """Elements of the sort's scratch for a permutation of ``n``: the power of two at or above."""
    return 1 << max(n - 1, 0).bit_length()


def permutation_index(out, key: tuple[int, int], offset: int, keys=None, idx=None) -> None:
    """``out`` (int64, 1-d, contiguous) = a random permutation of ``range(out.size)``.

    On device back-ends ``keys`` (uint64) and ``idx`` (uint32) are scratch
    arrays of ``scratch_size(n)`` elements; the cpu engine needs none.
    """
    if _on_cpu(out):  # the keys from the C kernel, then NumPy's stable argsort
        keys = np.empty(out.size, np.uint64)
        kernels.generate("keys", out.device, RawView(keys.ctypes.data, keys.shape, keys.strides,
                                                      keys.dtype), key, offset, ())
        _view(out)[...] = np.argsort(keys, kind="stable")
    else:
        kernels.permutation_index(out.device, out._raw(), keys._raw(), idx._raw(), key, offset)


def _width(*numbers: int) -> int:
    w = 8
    while any(x % w for x in numbers):
        w //= 2
    return w


def take_rows(dst, src, index) -> None:
    """``dst[r] = src[index[r]]`` along axis 0; ``dst`` C-contiguous, ``src`` rows contiguous."""
    if _on_cpu(dst):
        # dst[r] = src[index[r]] (index valid, dst never buffered)
        np.take(_view(src), _view(index), axis=0, out=_view(dst), mode="wrap")
        return
    s = src._raw()
    rowbytes = src.nbytes // max(src.shape[0], 1)
    width = _width(s.ptr, s.strides[0], rowbytes, dst._raw().ptr)
    kernels.take_rows(dst.device, dst._raw(), s, index._raw(), width)
