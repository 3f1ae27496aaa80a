"""Host registrations ("pins") and the home of wrapped storages.

Host memory wrapped for a device that needs it is registered with the
platform in whole pages, each page once; registrations are counted here, so
overlapping wraps (or wraps sharing a page) register once and the last one
holding a registration unregisters it (also with ``own=False``).
:class:`WrapHome` is the home of a wrapped storage: when its last handle
goes it waits for the device's queued work, then removes the pin, frees the
memory if owned and only then drops the owner (memory is never unmapped while
registered).
"""

from __future__ import annotations

import mmap
import threading
import warnings

from .._common.errors import BackendError, GPUArraysWarning
from .devices import get_device
from .state import state
from .storage import Storage

__all__ = ["PAGE", "WrapHome", "pin_count", "pin_registry", "forget_pins"]


PAGE = mmap.PAGESIZE
"""The granularity of a host registration: CUDA registers whole pages and refuses a
range that overlaps pages already registered (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED).
A registration therefore also covers the bytes around a wrap on its first and last page
(another NumPy array may start there): the cuda back-end cuts its copies at the ends of
registrations (``CudaBackend._pieces``), since CUDA refuses a copy that starts inside one
and runs past its end."""


class _Pins:
    """Reference-counted host registrations of one device: ``{(start, end): count}``,
    page-aligned and disjoint.  A wrap holds every registration its pages fall in:
    :meth:`pin` registers only the pages no registration covers yet (one range per gap),
    so two wraps that share a page never register it twice, and a registration stays
    until the last wrap holding it goes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ranges: dict[tuple[int, int], int] = {}
        # unpins queued by finalizers, each with the owner of the memory, kept alive (mapped)
        # until its registrations are gone
        self.pending: list[tuple[tuple[tuple[int, int], ...], object]] = []

    def holds(self, start: int, end: int) -> bool:
        """Whether a registration made here overlaps the bytes ``[start, end)``."""
        with self.lock:
            return any(s < end and start < e for s, e in self.ranges)

    def pin(self, device, start: int, end: int) -> tuple[tuple[int, int], ...]:
        """Hold registrations covering the pages of ``[start, end)``; returns them for
        :meth:`unpin`.  A failed registration undoes this call's and raises."""
        lo, hi = start - start % PAGE, -(-end // PAGE) * PAGE
        with self.lock:
            self._apply_locked(device)
            overlapping = sorted(r for r in self.ranges if r[0] < hi and lo < r[1])
            gaps, pos = [], lo
            for s, e in overlapping:
                if pos < s:
                    gaps.append((pos, s))
                pos = max(pos, e)
            if pos < hi:
                gaps.append((pos, hi))
            made: list[tuple[int, int]] = []
            try:
                for s, e in gaps:
                    device.impl.register_host(device.index, s, e - s)
                    made.append((s, e))
            except BaseException:
                for s, _ in made:
                    try:
                        device.impl.unregister_host(device.index, s)
                    except BackendError:
                        pass
                raise
            held = tuple(sorted(overlapping + made))
            for r in held:
                self.ranges[r] = self.ranges.get(r, 0) + 1
            return held

    def unpin(self, device, held: tuple[tuple[int, int], ...], owner: object = None) -> None:
        """Let go of ``held``; the last holder of a registration unregisters it.  ``owner``
        (what keeps the memory mapped) stays alive until then: memory must never be
        unmapped while registered, or the next mapping at that address starts inside a
        stale registration (CUDA then refuses copies from it: CUDA_ERROR_INVALID_VALUE)."""
        if self.lock.acquire(False):
            try:
                self._apply_locked(device)
                self._unpin_locked(device, held)
            finally:
                self.lock.release()
        else:
            self.pending.append((held, owner))

    def _apply_locked(self, device) -> None:
        while self.pending:
            held, owner = self.pending.pop()
            self._unpin_locked(device, held)
            del owner  # unmapped (if this was the last reference) only now

    def _unpin_locked(self, device, held: tuple[tuple[int, int], ...]) -> None:
        for rng in held:
            count = self.ranges.get(rng, 0) - 1
            if count > 0:
                self.ranges[rng] = count
            elif self.ranges.pop(rng, None) is not None:
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
    """Home of a wrapped storage: wait for queued work, drop the owner, unpin, free if owned.

    The memory is not gpuarrays': it belongs to the ``owner`` object (which the
    storage keeps alive) or, with ``own=True``, to gpuarrays only for its one
    free call.  Kernels and copies are queued on OpenCL and CUDA and may still
    read or write it when the last handle goes, so :meth:`release_storage`
    first waits for the device's queued work (:func:`_finish_queued_work`).
    """

    __slots__ = ("free_ptr", "pinned")

    def __init__(self, free_ptr: int | None,
                 pinned: tuple[tuple[int, int], ...] | None) -> None:
        self.free_ptr = free_ptr  # the address to free (own=True), else None
        self.pinned = pinned

    def release_storage(self, storage: Storage) -> None:
        device = storage.device
        if state.shutting_down or storage._epoch is not device.memory.epoch:
            storage.owner = None  # exit: no platform calls; a reset synchronized first
            return  # and the platform forgot this memory
        _finish_queued_work(device)  # before the owner, the pin or the memory goes
        owner, storage.owner = storage.owner, None
        try:
            if self.pinned is not None:  # unregistered before the memory can be unmapped
                pin_registry(device).unpin(device, self.pinned, owner)
            if self.free_ptr is not None:
                device.impl.free(device.index, storage.kind, self.free_ptr, storage.nbytes)
        except BackendError as e:
            warnings.warn(f"releasing wrapped memory at 0x{storage.ptr:x} failed: {e}",
                          GPUArraysWarning, stacklevel=2)
        finally:
            del owner  # the last reference, once the registration is gone


def _finish_queued_work(device) -> None:
    """Wait until the work queued on ``device`` is done; never raises, never blocks on the gate.

    The back-end's ``synchronize`` (the whole in-order queue or stream, not just
    the work that uses the memory): simple and correct, and only wrap releases
    pay it.  ``cpu`` computes synchronously: nothing to wait for.  A release may
    run in a finalizer, on any thread: it takes the usage gate shared only if
    it is free at once, so it never waits for a reset, which holds the gate
    exclusively after draining the queue itself.  A failure becomes a warning
    and the release goes on.
    """
    if device.backend == "cpu":
        return
    gate = device.gate
    if not gate._try_shared():
        return  # a reset holds the gate: it synchronized before taking it
    try:
        device.impl.synchronize(device.index)
    except BackendError as e:
        warnings.warn(f"synchronize before releasing wrapped memory on {device} failed: {e}",
                      GPUArraysWarning, stacklevel=3)
    finally:
        gate.__exit__(None, None, None)
