"""Fork: a child process never calls a device platform its parent initialised.

OpenCL and CUDA do not survive ``os.fork()``: the child's first platform call
can hang forever (PoCL) or fail.  A handler registered with
``os.register_at_fork`` runs in the child (docs/design.md, "Reset, fork and
exit"):

- every back-end the parent loaded that does not say ``survives_fork`` is
  replaced by a :class:`ForkedBackend`, whose platform calls raise
  ``BackendError`` naming the remedy (the ``spawn`` or ``forkserver`` start
  method);
- the epoch of each of its devices ends, so arrays inherited from the parent
  are dropped without a platform call, and using one raises
  ``DeviceResetError`` saying why;
- the ``cpu`` back-end (``survives_fork``) keeps working;
- every device's usage gate and platform lock start clean: holds taken by threads that did
  not survive the fork (a compute call, an allocation running in another thread) are
  forgotten, so ``device_reset`` in the child never waits for them.

The child is single-threaded when the handler runs.
"""

from __future__ import annotations

import os

from .._common.errors import BackendError
from . import devices as _devices
from .pins import forget_pins
from .storage import FORKED_EPOCHS

__all__ = ["ForkedBackend", "remedy"]


def remedy(name: str) -> str:
    """What the child should do instead (the text of the errors)."""
    return (f"the {name} back-end was initialised before os.fork(), and its platform cannot "
            f"be used in the forked child; start worker processes with multiprocessing's "
            f"'spawn' or 'forkserver' start method (multiprocessing.get_context('spawn')), "
            f"or use the cpu device in the child")


class ForkedBackend:
    """Stands in a forked child for a back-end the parent initialised.

    Answers what is known without the platform (``name``, the device count and
    ``device_info`` of the devices made before the fork); every other call raises
    ``BackendError`` with the remedy.
    """

    def __init__(self, real, name: str, known: dict) -> None:
        self.name = name
        self.needs_host_registration = getattr(real, "needs_host_registration", False)
        self._known = known  # index -> DeviceInfo

    def device_count(self) -> int:
        return max(self._known, default=-1) + 1

    def device_info(self, index: int):
        if index in self._known:
            return self._known[index]
        raise self._error("device_info")

    def _error(self, call: str) -> BackendError:
        return BackendError(f"{self.name}.{call}", "fork", remedy(self.name))

    def __getattr__(self, call: str):
        if call.startswith("__") or call == "_known":
            raise AttributeError(call)

        def refused(*args, **kwargs):
            raise self._error(call)

        return refused

    def __repr__(self) -> str:
        return f"<ForkedBackend {self.name}: initialised before os.fork()>"


def _after_fork_in_child() -> None:
    loaded = _devices._loaded
    if not loaded:
        return
    made = _devices.loaded_devices()
    for dev in made:  # a thread inside a transfer, a kernel or a platform call is gone
        dev.gate.after_fork()
        dev.memory.after_fork()
    for name, impl in list(loaded.items()):
        if getattr(impl, "survives_fork", False) or isinstance(impl, ForkedBackend):
            continue
        mine = [d for d in made if d.backend == name]
        stub = ForkedBackend(impl, name, {d.index: d.info for d in mine})
        loaded[name] = stub
        for dev in mine:
            FORKED_EPOCHS.append(dev.memory.new_epoch())  # books dropped, nothing freed
            forget_pins(dev)
            dev.impl = dev.memory.impl = stub


os.register_at_fork(after_in_child=_after_fork_in_child)
