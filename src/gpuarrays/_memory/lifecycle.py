"""Device reset and interpreter exit.

Reset safety rests on the device epoch: every storage, pooled block, cached
buffer and queued free carries the epoch it was made in; a reset ends the
epoch, so nothing made before it can ever reach the platform again -- not a
late finalizer, not a queued free -- even when the platform hands out the
same addresses after the reset.

Exit: from the moment interpreter shutdown starts (our ``atexit`` handler,
re-registered to run before those of back-end libraries), frees become no-ops
and nothing is printed.
"""

from __future__ import annotations

import atexit
import warnings
from collections.abc import Callable

from .._common.errors import GPUArraysError, GPUArraysWarning
from . import fork as _fork  # noqa: F401 -- registers the fork handler (fork.py)
from .devices import get_device
from .pins import forget_pins
from .state import state
from .storage import Storage

__all__ = ["device_reset", "register_reset_hook"]

_reset_hooks: list[Callable] = []


def register_reset_hook(fn: Callable) -> Callable[[], None]:
    """Call ``fn(device)`` at every ``device_reset`` (newest hook first).

    Returns a callable that unregisters the hook.
    """
    if not callable(fn):
        raise TypeError(f"a reset hook must be callable, got {type(fn).__name__}")
    entry = [fn]  # a unique object, so registering one function twice works
    _reset_hooks.append(entry)

    def unregister() -> None:
        try:
            _reset_hooks.remove(entry)
        except ValueError:
            pass

    return unregister


def device_reset(device=None) -> None:
    """Reset ``device``: every array allocated before raises ``DeviceResetError``.

    Synchronizes (failures become warnings), runs reset hooks newest first,
    ends the device epoch (pools and cached buffers are dropped without
    freeing them through the platform), resets the back-end and leaves the
    device ready for new allocations.
    """

    dev = get_device(device)
    try:
        dev.impl.synchronize(dev.index)
    except GPUArraysError as e:
        warnings.warn(f"synchronize before resetting {dev} failed: {e}", GPUArraysWarning,
                      stacklevel=2)
    for entry in reversed(list(_reset_hooks)):
        try:
            entry[0](dev)
        except Exception as e:  # a failing hook never stops the reset
            warnings.warn(f"reset hook {entry[0]!r} failed: {e!r}", GPUArraysWarning,
                          stacklevel=2)
    # No transfer runs under the reset (gate), and no trim or platform allocation
    # interleaves with it (platform lock): nothing touches or frees what it frees.
    with dev.gate.exclusive(), dev.memory.platform_lock:
        _keep_held(dev)
        dev.memory.new_epoch()
        forget_pins(dev)
        if state.history is not None:
            state.history.record("reset", dev, 0, 0, "")
        dev.impl.reset(dev.index)


class _KeptSegment:
    """Home of memory a reset left to the outside handles that still use it: the platform
    allocation (a pool segment, which may hold several such blocks) is freed when the last
    of its blocks is given back (docs/design.md, "Reset, fork and exit")."""

    __slots__ = ("impl", "index", "kind", "base", "size", "blocks")

    def __init__(self, impl, index: int, kind: str, base: int, size: int, blocks: int) -> None:
        self.impl = impl
        self.index = index
        self.kind = kind
        self.base = base
        self.size = size
        self.blocks = blocks

    def release_storage(self, storage) -> None:
        self.blocks -= 1
        if self.blocks == 0 and not state.shutting_down:
            self.impl.free(self.index, self.kind, self.base, self.size)


def _keep_held(dev) -> None:
    """Before a reset: warn about the handles gpuarrays cannot revoke, and keep the
    memory they use where the back-end can (``detach``: it stays addressable)."""
    held = [st for st in Storage._held() if st.device is dev and st._epoch.live]
    if not held:
        return
    detach = getattr(dev.impl, "detach", None)
    kept = lost = 0
    by_segment: dict[tuple[str, int, int], list] = {}
    for st in held:  # pooled or cached blocks; wrapped memory stays its owner's
        if not st.block:
            continue
        base, size = dev.memory.segment_of(st.kind, st.ptr)
        by_segment.setdefault((st.kind, base, size or st.block), []).append(st)
    for (kind, base, size), storages in by_segment.items():
        # The back-end knows platform allocations, not the pool's pieces: keep the segment.
        if detach is not None and detach(dev.index, base):
            home = _KeptSegment(dev.impl, dev.index, kind, base, size, len(storages))
            for st in storages:
                st._rehome(home)
            kept += len(storages)
        else:
            lost += len(storages)
    handles = sum(st._holds for st in held)
    if not lost:
        fate = "their memory is kept until they are dropped"
    elif not kept:
        fate = "the reset frees the memory they point at, so do not use them"
    else:
        fate = (f"{kept} of these allocations are kept until they are dropped, the reset "
                f"frees the other {lost}, so do not use those")
    warnings.warn(f"device_reset({dev}): {handles} NumPy host view(s) or DLPack capsule(s) "
                  f"still use {len(held)} allocation(s) of this device; gpuarrays cannot "
                  f"revoke them, {fate}; drop them before resetting", GPUArraysWarning,
                  stacklevel=3)


def _at_exit() -> None:
    state.shutting_down = True


def backends_loaded() -> None:
    """Re-register the exit handler so it runs before back-end libraries' handlers."""
    atexit.unregister(_at_exit)
    atexit.register(_at_exit)


atexit.register(_at_exit)
