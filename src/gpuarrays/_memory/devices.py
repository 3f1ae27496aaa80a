"""Devices and back-end discovery.

A :class:`Device` is a singleton per ``(backend, index)``; it carries its
back-end object and its memory manager (``pool.MemoryManager``).  The current
device is per thread and per asyncio task (a ``ContextVar``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Iterator
from contextvars import ContextVar

import numpy as np

from .._common.dtypes import device_lacks, normalize_dtype
from .._common.errors import UnsupportedDTypeError
from ..backends.base import Backend, BackendUnavailable
from .gate import UsageGate
from .pool import MemoryManager

__all__ = ["Device", "backends", "check_dtype", "devices", "get_device", "use_device", "default_device"]

# Preference order; a back-end is one module with a load() function
# (docs/design.md, "The back-end interface").
_BACKEND_MODULES = (
    ("cuda", "gpuarrays.backends.cuda"),
    ("opencl", "gpuarrays.backends.opencl"),
    ("cpu", "gpuarrays.backends.cpu"),
)

_lock = threading.Lock()
_loaded: dict[str, Backend] | None = None
_unavailable: dict[str, str] = {}
_devices: dict[tuple[str, int], Device] = {}
_current: ContextVar[Device | None] = ContextVar("gpuarrays_device", default=None)
_default: list[Device] = []  # resolved lazily, once


class Device:
    """One device of one back-end.  Equality and hash by ``(backend, index)``."""

    __slots__ = ("backend", "index", "name", "total_memory", "kinds", "impl", "info",
                 "memory", "gate", "_accepts", "_str")

    def __init__(self, backend: str, index: int, impl: Backend) -> None:
        info = impl.device_info(index)
        self.backend = backend
        self.index = index
        self.impl = impl
        self.info = info
        self.name = info.name
        self.total_memory = info.total_memory
        self.kinds = tuple(info.kinds)
        # dtype arguments (np.float32, "f4", dtype objects) already checked for this device,
        # and the checked dtypes themselves
        self._accepts: dict[object, np.dtype] = {}
        # dtype=None is the device's default floating type: float32 without float64
        # (creation functions, docs/manipulation.md); ga.empty's compiled path looks it up here
        self._accepts[None] = np.dtype(np.float64 if info.float64 else np.float32)
        self._str = f"{backend}:{index}"
        self.memory = MemoryManager(self)
        self.gate = UsageGate()  # transfers hold it shared, a reset exclusively

    def __str__(self) -> str:
        return self._str

    def __repr__(self) -> str:
        return f"<Device {self._str} {self.name!r}>"

    def __hash__(self) -> int:
        return hash((self.backend, self.index))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Device):
            return self.backend == other.backend and self.index == other.index
        return NotImplemented

    def __reduce__(self):
        return get_device, (self._str,)

    def synchronize(self) -> None:
        """Wait for all work queued on this device; applies queued frees too."""
        self.memory.synchronize()

    def supports(self, dtype: object) -> bool:
        """Whether this device can hold elements of ``dtype``."""

        try:
            self.require(normalize_dtype(dtype))
        except UnsupportedDTypeError:
            return False
        return True

    def dtype_of(self, dtype: object) -> np.dtype:
        """The normalised dtype for a dtype argument, checked for this device (cached)."""
        try:
            return self._accepts[dtype]
        except (KeyError, TypeError):
            pass

        dt = normalize_dtype(dtype)
        self.require(dt)
        try:
            self._accepts[dtype] = dt
        except TypeError:  # unhashable (a list describing a structured dtype)
            pass
        return dt

    def require(self, dt: np.dtype) -> None:
        """Raise ``UnsupportedDTypeError`` when the device lacks a type ``dt`` uses."""
        if dt in self._accepts:
            return
        missing = device_lacks(dt, self.info.float64, self.info.float16)
        if missing is not None:
            raise UnsupportedDTypeError(
                f"device {self._str} ({self.name}) does not support {missing} "
                f"(needed by dtype {dt}); use float32 instead"
            )
        self._accepts[dt] = dt


def _load() -> dict[str, Backend]:
    global _loaded
    if _loaded is not None:
        return _loaded
    with _lock:
        if _loaded is None:
            found: dict[str, Backend] = {}
            for name, module in _BACKEND_MODULES:
                try:
                    impl = importlib.import_module(module).load()
                    if impl.device_count() < 1:
                        raise BackendUnavailable("no devices found")
                except ModuleNotFoundError as e:
                    if e.name == module:
                        _unavailable[name] = "not part of this installation"
                    else:
                        _unavailable[name] = f"missing library {e.name!r}"
                    continue
                except BackendUnavailable as e:
                    _unavailable[name] = str(e)
                    continue
                found[name] = impl
            _loaded = found
            from . import lifecycle

            lifecycle.backends_loaded()
    return _loaded


def backends() -> list[str]:
    """Names of the back-ends usable here, in preference order (``"cpu"`` always)."""
    return list(_load())


def unavailable_backends() -> dict[str, str]:
    """Back-ends that could not load, with the reason."""
    _load()
    return dict(_unavailable)


def _device(backend: str, index: int) -> Device:
    key = (backend, index)
    dev = _devices.get(key)
    if dev is None:
        impl = _load()[backend]
        with _lock:
            dev = _devices.get(key)
            if dev is None:
                dev = _devices[key] = Device(backend, index, impl)
    return dev


def devices(backend: str | None = None) -> list[Device]:
    """All devices, or those of one back-end (``ValueError`` if it is unavailable)."""
    loaded = _load()
    if backend is None:
        names = list(loaded)
    elif backend in loaded:
        names = [backend]
    else:
        raise ValueError(
            f"back-end {backend!r} is not available ({_why(backend)}); "
            f"available: {', '.join(loaded)}"
        )
    return [_device(n, i) for n in names for i in range(loaded[n].device_count())]


def _why(backend: str) -> str:
    return _unavailable.get(backend, "unknown back-end")


def _available_text() -> str:
    return ", ".join(str(d) for d in devices())


def _parse(spec: str) -> Device:
    loaded = _load()
    name, sep, idx = spec.strip().partition(":")
    if name not in loaded:
        raise ValueError(
            f"unknown or unavailable device {spec!r} ({_why(name)}); "
            f"available: {_available_text()}"
        )
    if not sep:
        index = 0
    else:
        try:
            index = int(idx)
        except ValueError:
            raise ValueError(
                f"bad device spec {spec!r}: expected 'backend' or 'backend:index'; "
                f"available: {_available_text()}"
            ) from None
    if not 0 <= index < loaded[name].device_count():
        raise ValueError(f"no device {spec!r}; available: {_available_text()}")
    return _device(name, index)


def default_device() -> Device:
    """``GPUARRAYS_DEVICE``, else the first accelerator, else ``cpu:0``."""
    if _default:
        return _default[0]
    env = os.environ.get("GPUARRAYS_DEVICE")
    if env:
        try:
            dev = _parse(env)
        except ValueError as e:
            raise ValueError(f"GPUARRAYS_DEVICE={env!r} is not usable: {e}") from None
    else:
        dev = None
        for name, impl in _load().items():
            for i in range(impl.device_count()):
                if impl.device_info(i).accelerator:
                    dev = _device(name, i)
                    break
            if dev is not None:
                break
        if dev is None:
            dev = _device("cpu", 0)
    _default[:] = [dev]
    return dev


def get_device(spec: Device | str | None = None) -> Device:
    """The device named by ``spec`` (a Device, ``"cpu"``, ``"opencl:0"`` ...).

    ``None`` gives the current device.  Unknown or unavailable specs raise
    ``ValueError`` naming what is available; other types raise ``TypeError``.
    """
    if spec is None:
        dev = _current.get()
        if dev is not None:
            return dev
        return _default[0] if _default else default_device()
    if type(spec) is Device:
        return spec
    if isinstance(spec, str):
        return _parse(spec)
    raise TypeError(
        f"device must be a gpuarrays Device, a spec string like 'cpu:0', or None; "
        f"got {type(spec).__name__} {spec!r}"
    )


@contextlib.contextmanager
def use_device(spec: Device | str) -> Iterator[Device]:
    """Make ``spec`` the current device of this thread/task inside the block."""
    dev = get_device(spec)
    token = _current.set(dev)
    try:
        yield dev
    finally:
        _current.reset(token)


def loaded_devices() -> list[Device]:
    """Devices that have been used (created) so far."""
    return list(_devices.values())


def check_dtype(dtype: object, device: object = None) -> np.dtype:
    """Normalise ``dtype`` and check that ``device`` (default: current) can hold it.

    Returns the ``numpy.dtype``.  Raises ``UnsupportedDTypeError``.
    """
    dt = normalize_dtype(dtype)
    get_device(device).require(dt)
    return dt
