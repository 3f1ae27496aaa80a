"""Moving data: writes, copies, conversions, host transfers.

Written once above the back-end interface.  The back-end only offers
contiguous upload/download, ``fill`` and ``copy_strided`` (non-overlapping,
with dtype conversion); everything else -- NumPy broadcasting, overlapping
copies inside one storage, copies between devices (through the host), staging
of strided transfers -- is composed here.  Advanced indexing (integer arrays,
masks) is the compute layer's (``_compute/indexing.py``), reached through the
array layer's hooks.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings

import numpy as np

from .. import _core
from .._common.raw import extent, ndarray_at
from .._memory.streams import order_after_other_users, wait_for_other_users
from ..backends.base import RawView
from .layout import broadcast_strides
from .make import ArrayBase, new_array

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # gpuarrays/

HOST_KINDS = ("host", "unified")


def _gated(fn):
    """Run a transfer holding its first array's device gate shared (see ``_gate``), and a
    hold on the storage of every array argument: work in flight holds its memory, so a
    free racing it (forced, by a cache, from another thread) takes effect only after it
    (docs/design.md, "Release")."""

    @functools.wraps(fn)
    def gated(a, *args):
        # the compute layer's block (src/native/core/working.c): holds taken inside the
        # gate, so a reset never counts them, and liveness checked after them
        with _core.Working(a._storage.device.gate,
                           *(x for x in (a, *args) if isinstance(x, ArrayBase))):
            return fn(a, *args)

    return gated


def _impl(a):
    dev = a._storage.device
    return dev.impl, dev.index


def _temp_like(shape: tuple, dtype: np.dtype, device, kind: str = "device"):
    return new_array(shape, dtype, device, kind)


def _byte_range(view: RawView) -> tuple[int, int]:
    lo, hi = extent(view.shape, view.strides, view.dtype.itemsize)
    return view.ptr + lo, view.ptr + hi


def _user_stacklevel() -> int:
    """``stacklevel`` for a warning raised by our caller that points at user code."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level


def _overlap(a: RawView, b: RawView) -> bool:
    a_lo, a_hi = _byte_range(a)
    b_lo, b_hi = _byte_range(b)
    return a_lo < b_hi and b_lo < a_hi


@_gated
def copy_raw(dst, src) -> None:
    """``dst[...] = src`` for two arrays on one device (src broadcast to dst's shape)."""
    impl, index = _impl(dst)
    d = dst._raw()
    s = src._raw()
    if s.shape != d.shape:
        s = RawView(s.ptr, d.shape, broadcast_strides(s.shape, s.strides, d.shape), s.dtype)
    if s.dtype.kind == "c" and d.dtype.kind not in "cb":  # as NumPy, on every back-end
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=_user_stacklevel())
    if d == s or 0 in d.shape:
        return
    if _overlap(d, s):  # stage through a temporary so no element is read after it is written
        tmp = _temp_like(src.shape, src.dtype, src.device)
        try:
            impl.copy_strided(index, tmp._raw(), src._raw())
            t = tmp._raw()
            if t.shape != d.shape:
                t = RawView(t.ptr, d.shape, broadcast_strides(t.shape, t.strides, d.shape),
                            t.dtype)
            impl.copy_strided(index, d, t)
        finally:
            tmp.free()
        return
    impl.copy_strided(index, d, s)


def assign(dst, value) -> None:
    """``dst[...] = value``: a GPUArray on ``dst``'s device, NumPy array, sequence or scalar,
    broadcast.  A GPUArray on another device is a ``ValueError``: transfers are explicit
    (``value.to_device(dst.device)``), as for every operation mixing devices."""
    if isinstance(value, ArrayBase):
        if value.device != dst.device:
            raise ValueError(f"cannot assign an array on {value.device} into an array on "
                             f"{dst.device}: transfers between devices are explicit; move it "
                             f"first with value.to_device({str(dst.device)!r})")
        copy_raw(dst, value)
        return
    dst._live()
    try:
        host = np.asarray(value, dtype=dst.dtype)
    except (TypeError, ValueError) as e:
        raise type(e)(f"cannot assign {type(value).__name__} {value!r:.80} to a {dst.dtype} "
                      f"array: {e}") from None
    upload(dst, host)


@_gated
def upload(dst, host: np.ndarray) -> None:
    """Write a host array (already of dst's dtype) into ``dst``, broadcasting."""
    impl, index = _impl(dst)
    d = dst._raw()
    if host.shape != d.shape:
        broadcast_strides(host.shape, host.strides, d.shape)  # raises on mismatch
    if 0 in d.shape:
        return
    if host.size == 1:
        impl.fill(index, d, host.reshape(()))
        return
    if host.shape == d.shape and dst._is_c() and host.flags.c_contiguous:
        impl.upload(index, d.ptr, host)
        return
    staged = np.ascontiguousarray(host)
    tmp = _temp_like(staged.shape, dst.dtype, dst.device)
    try:
        impl.upload(index, tmp._raw().ptr, staged)
        copy_raw(dst, tmp)
    finally:
        tmp.free()


def copy(src, dtype: np.dtype, order: str = "C"):
    """A new array with ``src``'s values converted to ``dtype``, C- or F-ordered."""
    src._live()
    if order == "F" and src.ndim > 1:
        reversed_c = new_array(src.shape[::-1], dtype, src.device, src.kind)
        out = reversed_c.T  # Fortran order: the transpose of a C array of reversed shape
        reversed_c.free()
    else:
        out = new_array(src.shape, dtype, src.device, src.kind)
    try:
        copy_raw(out, src)
    except BaseException:
        out.free()
        raise
    return out


def to_host(src, out: np.ndarray | None = None, blocking: bool = True) -> np.ndarray:
    """Copy ``src`` to a new NumPy array, or into ``out`` (same shape).  ``blocking=False``
    with an ``out`` of ``src``'s dtype, both C-contiguous, on OpenCL or CUDA: the copy is
    enqueued on the current stream and may not be done on return (docs/streams.md)."""
    src._live()
    if out is not None:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a NumPy array, got {type(out).__name__}")
        if out.shape != src.shape:
            raise ValueError(f"out has shape {out.shape}, expected {src.shape}")
        if out.dtype == src.dtype and out.flags.c_contiguous and out.flags.writeable:
            if not blocking and src._is_c() and hasattr(src.device.impl, "download_async"):
                _download_async(src, out)
                return out
            _download_into(src, out)
        else:
            np.copyto(out, to_host(src))
        return out
    host = np.empty(src.shape, src.dtype)
    _download_into(src, host)
    return host


@_gated
def _download_async(src, host: np.ndarray) -> None:
    if host.size:
        order_after_other_users(src._storage)  # on the device: the host does not wait
        src.device.impl.download_async(src.device.index, host, src._raw().ptr)


@_gated
def _download_into(src, host: np.ndarray) -> None:
    if host.size == 0:
        return
    wait_for_other_users(src._storage)  # the read itself is ordered by the current stream
    impl, index = _impl(src)
    if src._is_c():
        impl.download(index, host, src._raw().ptr)
        return
    tmp = _temp_like(src.shape, src.dtype, src.device)
    try:
        impl.copy_strided(index, tmp._raw(), src._raw())
        impl.download(index, host, tmp._raw().ptr)
    finally:
        tmp.free()


def to_device(src, device, kind: str | None):
    """``src`` on ``device``/``kind``: itself when already there, else a copy."""
    src._live()
    kind = src.kind if kind is None else kind
    if device == src.device and kind == src.kind:
        return src
    device.require(src.dtype)  # the target may lack float64/float16
    out = new_array(src.shape, src.dtype, device, kind)
    try:
        if device == src.device:
            copy_raw(out, src)
        else:
            upload(out, to_host(src))
    except BaseException:
        out.free()
        raise
    return out


def check_stream(src, device, stream) -> None:
    """Refuse a ``to_device(stream=...)`` the devices cannot honour (``ValueError``).

    Only CUDA has streams: there ``stream`` is an int as ``__dlpack__`` takes (not 0,
    which is ambiguous), and the copy synchronises, so any stream sees it complete.
    """
    devices = (src._live().device, device)
    if any(d.backend != "cuda" for d in devices):
        names = " and ".join(sorted({str(d) for d in devices if d.backend != "cuda"}))
        verb = "have" if " and " in names else "has"
        raise ValueError(f"to_device(stream={stream!r}): {names} {verb} no streams; pass "
                         f"stream=None (the copy completes before to_device returns)")
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise ValueError(f"to_device(): stream must be None or an int, got "
                         f"{type(stream).__name__}")
    if stream == 0:
        raise ValueError("to_device(stream=0): stream 0 is ambiguous for CUDA; pass 1 (legacy "
                         "default stream), 2 (per-thread default) or a stream handle")


def outside_handle(a):
    """A new handle on ``a``'s storage for something gpuarrays cannot revoke: a hold.

    A host view or a DLPack capsule owns it (docs/design.md, "Release"): a forced free
    or ``cache.free()`` invalidates every array but quarantines the memory until this
    handle goes.  Raises ``FreedArrayError`` for a freed array.
    """
    handle = a._derive(a._shape, a._strides, a._offset, a._dtype, a._writeable, a._contig)
    if not handle._as_hold():  # freed by another thread since the derive
        handle.free()
        raise a._storage.freed_error(False)
    return handle


def pinned_view(a) -> np.ndarray:
    """NumPy view of ``a``'s memory, which the caller has checked the host addresses in
    place: the device's queued work is done first, and the NumPy array owns a hold
    (``outside_handle``) while it lives, so a forced free quarantines the memory instead
    of handing it to another array. ``FreedArrayError`` for a freed array."""
    st = a._live()
    with st.device.gate:
        st.device.impl.synchronize(st.device.index)
    handle = outside_handle(a)  # the NumPy array owns it; released when NumPy drops it
    return ndarray_at(st.ptr + a.offset, a.shape, a.strides, a.dtype,
                      readonly=not a._writeable, owner=handle)
