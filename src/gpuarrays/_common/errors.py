"""The error hierarchy of gpuarrays.

Every error derives from :class:`GPUArraysError` and from the built-in class a
careful user would catch (``MemoryError`` for out-of-memory, ``TypeError`` for
an unsupported element type, ...).
"""

from __future__ import annotations

__all__ = [
    "GPUArraysError",
    "FreedArrayError",
    "DeviceResetError",
    "OutOfMemoryError",
    "UnsupportedDTypeError",
    "CacheInUseError",
    "BackendError",
    "GPUArraysWarning",
]


class GPUArraysError(Exception):
    """Base class of every error gpuarrays raises on purpose."""


class FreedArrayError(GPUArraysError, RuntimeError):
    """An array whose memory was released was used (the message says why)."""


class DeviceResetError(FreedArrayError):
    """An array allocated before a device reset was used after it."""


class OutOfMemoryError(GPUArraysError, MemoryError):
    """An allocation failed after the out-of-memory ladder reclaimed what it could."""


class UnsupportedDTypeError(GPUArraysError, TypeError):
    """The element type is not stored inline, or the device cannot hold it."""


class CacheInUseError(GPUArraysError, RuntimeError):
    """``AllocCache.free()`` was called while a ``cached(cache)`` scope is active."""


class BackendError(GPUArraysError, RuntimeError):
    """A platform call failed; the message names the call, the error code and its text."""

    def __init__(self, call: str, code: object = None, text: str = "") -> None:
        self.call = call
        self.code = code
        self.text = text
        detail = f" (error {code})" if code is not None else ""
        super().__init__(f"{call} failed{detail}: {text}" if text else f"{call} failed{detail}")


class GPUArraysWarning(UserWarning):
    """Something went wrong where raising was not allowed (a finalizer, a reset)."""
