"""Compiled kernel images on disk, so a second process starts warm (CUDA).

An entry is one file named by the SHA-256 of its key -- everything the image
depends on: source, compiler options, architecture and NVRTC version, as the
back-end spells them (``BinaryCache`` in ``backends/base.py``).  The file holds
a magic line, the SHA-256 of the image and the image; a file whose hash does
not match (a torn or damaged write) is a miss, and the recompiled image
replaces it.  Writes go to a temporary file in the same folder and are moved
into place with ``os.replace``, so readers see a whole entry or none, even
with several processes compiling at once.

The folder is ``$GPUARRAYS_KERNEL_CACHE`` if set, else
``$XDG_CACHE_HOME/gpuarrays/kernels`` (``~/.cache/gpuarrays/kernels``);
deleting it clears the cache (docs/kernels.md, "Kernel caches").  A folder that
cannot be written only costs compile time: a :class:`GPUArraysWarning` says so
once per folder.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import warnings
from pathlib import Path

from ..._common.errors import GPUArraysWarning

__all__ = ["DiskCache", "default", "location"]

_MAGIC = b"gpuarrays-kernel-1\n"
_SUFFIX = ".bin"


def location() -> Path:
    """The cache folder this process uses (see the module docstring)."""
    explicit = os.environ.get("GPUARRAYS_KERNEL_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpuarrays" / "kernels"


class DiskCache:
    """One cache folder; ``hits``, ``misses`` and ``writes`` count what happened."""

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)
        self.hits = self.misses = self.writes = 0
        self._warned = False

    def path(self, key: bytes) -> Path:
        """The file of an entry."""
        return self.folder / (hashlib.sha256(key).hexdigest() + _SUFFIX)

    def load(self, key: bytes) -> bytes | None:
        """The image stored for ``key``, or None when absent or damaged."""
        try:
            data = self.path(key).read_bytes()
        except OSError:  # absent (or unreadable): compile
            self.misses += 1
            return None
        head = len(_MAGIC) + 32
        if data[: len(_MAGIC)] != _MAGIC or hashlib.sha256(data[head:]).digest() != data[len(_MAGIC):head]:
            self.misses += 1
            return None
        self.hits += 1
        return data[head:]

    def save(self, key: bytes, image: bytes) -> None:
        """Store ``image`` atomically (temporary file + ``os.replace``)."""
        target = self.path(key)
        tmp = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=_SUFFIX)
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + hashlib.sha256(image).digest() + image)
            os.replace(tmp, target)
            tmp = None
            self.writes += 1
        except OSError as exc:
            if not self._warned:
                self._warned = True
                warnings.warn(f"the kernel cache folder {self.folder} cannot be written ({exc}); "
                              f"kernels are compiled again in every process (set "
                              f"GPUARRAYS_KERNEL_CACHE to a writable folder)",
                              GPUArraysWarning, stacklevel=2)
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:  # already gone
                    pass


_caches: dict[Path, DiskCache] = {}
_lock = threading.Lock()


def default() -> DiskCache:
    """The cache of the current :func:`location` (one object per folder)."""
    folder = location()
    cache = _caches.get(folder)
    if cache is None:
        with _lock:
            cache = _caches.setdefault(folder, DiskCache(folder))
    return cache
