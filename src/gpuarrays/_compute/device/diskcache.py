"""Compiled kernels on disk, so a second process starts warm (CUDA images, OpenCL programs).

An entry is one file named by the SHA-256 of its key -- everything the image
depends on: source, compiler options, device and compiler or runtime version, as
the back-end spells them (``BinaryCache`` in ``backends/base.py``).  The file holds
a magic line, the SHA-256 of the image and the image; a file whose hash does
not match (a torn or damaged write) is a miss, and the recompiled image
replaces it.  Writes go to a temporary file in the same folder and are moved
into place with ``os.replace``, so readers see a whole entry or none, even
with several processes compiling at once.

The folder is ``$GPUARRAYS_KERNEL_CACHE`` if set, else
``$XDG_CACHE_HOME/gpuarrays/kernels`` (``~/.cache/gpuarrays/kernels``);
``GPUARRAYS_KERNEL_CACHE=off`` turns the disk cache off (:func:`default` is None).
:func:`clear_kernel_cache` (``ga.clear_kernel_cache()``) deletes the entries, and a
process started with ``GPUARRAYS_KERNEL_CACHE_CLEAR=1`` deletes them once, at its
first use of the cache (docs/kernels.md, "Kernel caches").  A folder that cannot be
written only costs compile time: a :class:`GPUArraysWarning` says so once per folder.

The OpenCL back-end's data-movement programs (fill, copy, convert) are built
below the compute layer, without a ``cache=`` argument: this module installs
:func:`default` for them at import (``backends.base.use_binary_cache``), so this
layer never imports a particular back-end.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
import warnings
from pathlib import Path

from ..._common.errors import GPUArraysWarning
from ...backends.base import use_binary_cache

__all__ = ["DiskCache", "clear_kernel_cache", "default", "location", "usage"]

_MAGIC = b"gpuarrays-kernel-1\n"
_SUFFIX = ".bin"
# what this cache writes: entries and temporary files (nothing else in a folder is touched)
_OURS = re.compile(r"([0-9a-f]{64}|\.tmp-.*)" + re.escape(_SUFFIX))
_OFF = "off"


def location() -> Path | None:
    """The cache folder this process uses (see the module docstring); None when off."""
    explicit = os.environ.get("GPUARRAYS_KERNEL_CACHE")
    if explicit:
        return None if explicit.strip().lower() == _OFF else Path(explicit)
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
                              f"GPUARRAYS_KERNEL_CACHE to a writable folder, or to 'off')",
                              GPUArraysWarning, stacklevel=2)
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:  # already gone
                    pass

    def entries(self) -> list[Path]:
        """The files this cache wrote in its folder (entries and stray temporary files)."""
        try:
            return [p for p in self.folder.iterdir() if _OURS.fullmatch(p.name)]
        except OSError:  # no folder (nothing compiled yet) or unreadable
            return []

    def clear(self) -> dict:
        """Delete every entry; ``{"folder", "entries", "bytes"}`` says what went (files
        another process deletes at the same time are not counted)."""
        entries = nbytes = 0
        for p in self.entries():
            try:
                size = p.stat().st_size
                p.unlink()
            except OSError:  # gone meanwhile, or not ours to delete
                continue
            entries += 1
            nbytes += size
        return {"folder": str(self.folder), "entries": entries, "bytes": nbytes}


_caches: dict[Path, DiskCache] = {}
_lock = threading.Lock()
_cleared_at_start = False  # GPUARRAYS_KERNEL_CACHE_CLEAR was obeyed in this process


def default() -> DiskCache | None:
    """The cache of the current :func:`location` (one object per folder), None when off.

    The first call of a process started with ``GPUARRAYS_KERNEL_CACHE_CLEAR=1`` clears
    the folder first.
    """
    global _cleared_at_start
    folder = location()
    if folder is None:
        return None
    cache = _caches.get(folder)
    if cache is None:
        with _lock:
            cache = _caches.setdefault(folder, DiskCache(folder))
    if not _cleared_at_start:
        with _lock:
            if not _cleared_at_start:
                _cleared_at_start = True
                if os.environ.get("GPUARRAYS_KERNEL_CACHE_CLEAR", "").strip() == "1":
                    cache.clear()
    return cache


def clear_kernel_cache() -> dict:
    """Delete the compiled kernels kept on disk (docs/kernels.md, "Kernel caches").

    Returns ``{"folder": path, "entries": n, "bytes": n}``: the folder and what was
    deleted (the folder is None and nothing is deleted when ``GPUARRAYS_KERNEL_CACHE=off``).
    Only the cache's own files go, never anything else in the folder.  Kernels this
    process has compiled stay in memory; the next process compiles them again.
    """
    folder = location()
    if folder is None:
        return {"folder": None, "entries": 0, "bytes": 0}
    return DiskCache(folder).clear()


def usage() -> dict:
    """``{"folder": path or None (off), "entries": n, "bytes": n}`` of the cache now."""
    folder = location()
    if folder is None:
        return {"folder": None, "entries": 0, "bytes": 0}
    sizes = []
    for p in DiskCache(folder).entries():
        try:
            sizes.append(p.stat().st_size)
        except OSError:  # deleted meanwhile
            continue
    return {"folder": str(folder), "entries": len(sizes), "bytes": sum(sizes)}


use_binary_cache(default)
