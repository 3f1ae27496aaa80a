"""Host registrations ("pins") and the home of wrapped storages.

Host memory wrapped for a device that needs it is registered with the
platform once per range; pins are counted per range here, so overlapping
wraps register once and the last one unregisters (also with ``own=False``).
:class:`WrapHome` is the home of a wrapped storage: when its last handle
goes it frees the memory if owned, removes the pin and drops the owner.
"""

from __future__ import annotations

import threading
import warnings

from .._common.errors import BackendError, GPUArraysWarning
from .devices import get_device
from .state import state
from .storage import Storage

__all__ = ["WrapHome", "pin_count", "pin_registry", "forget_pins"]


class _Pins:
    """Reference-counted host registrations of one device: [(start, end, count)]."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ranges: dict[tuple[int, int], int] = {}
        self.pending: list[tuple[int, int]] = []  # unpins queued by finalizers

    def pin(self, device, start: int, end: int) -> tuple[int, int]:
        with self.lock:
            self._apply_locked(device)
            for (s, e), count in self.ranges.items():
                if s <= start and end <= e:
                    self.ranges[(s, e)] = count + 1
                    return s, e
            device.impl.register_host(device.index, start, end - start)
            self.ranges[(start, end)] = 1
            return start, end

    def unpin(self, device, rng: tuple[int, int]) -> None:
        if self.lock.acquire(False):
            try:
                self._apply_locked(device)
                self._unpin_locked(device, rng)
            finally:
                self.lock.release()
        else:
            self.pending.append(rng)

    def _apply_locked(self, device) -> None:
        while self.pending:
            self._unpin_locked(device, self.pending.pop())

    def _unpin_locked(self, device, rng: tuple[int, int]) -> None:
        count = self.ranges.get(rng, 0) - 1
        if count > 0:
            self.ranges[rng] = count
            return
        if self.ranges.pop(rng, None) is not None:
            device.impl.unregister_host(device.index, rng[0])

    def forget(self) -> None:
        """Device reset: the platform dropped every registration; forget ours."""
        with self.lock:
            self.ranges.clear()
            self.pending.clear()


_pins: dict[object, _Pins] = {}
_pins_lock = threading.Lock()


def pin_registry(device) -> _Pins:
    pins = _pins.get(device)
    if pins is None:
        with _pins_lock:
            pins = _pins.setdefault(device, _Pins())
    return pins


def pin_count(device=None) -> dict[tuple[int, int], int]:
    """Host ranges currently registered for ``device`` by wraps, with their counts."""
    pins = pin_registry(get_device(device))
    with pins.lock:
        pins._apply_locked(get_device(device))
        return dict(pins.ranges)


def forget_pins(device) -> None:
    pin_registry(device).forget()


class WrapHome:
    """Home of a wrapped storage: free if owned, unpin, drop the owner."""

    __slots__ = ("free_ptr", "pinned")

    def __init__(self, free_ptr: int | None, pinned: tuple[int, int] | None) -> None:
        self.free_ptr = free_ptr  # the address to free (own=True), else None
        self.pinned = pinned

    def release_storage(self, storage: Storage) -> None:
        device = storage.device
        storage.owner = None
        if state.shutting_down or storage._epoch is not device.memory.epoch:
            return  # after a reset the platform already forgot this memory
        try:
            if self.pinned is not None:
                pin_registry(device).unpin(device, self.pinned)
            if self.free_ptr is not None:
                device.impl.free(device.index, storage.kind, self.free_ptr, storage.nbytes)
        except BackendError as e:
            warnings.warn(f"releasing wrapped memory at 0x{storage.ptr:x} failed: {e}",
                          GPUArraysWarning, stacklevel=2)
