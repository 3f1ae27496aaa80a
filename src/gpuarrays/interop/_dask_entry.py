"""The Dask-free side of the Dask integration: ``sizeof`` and ``distributed``'s serialisers.

Two things reach this module without importing Dask, and it imports nothing from Dask itself:

* The ``dask.sizeof`` entry point of gpuarrays (pyproject.toml), :func:`register_sizeof`:
  Dask loads its ``dask.sizeof`` entry points while ``import dask`` is still running.  It
  registers how big a ``GPUArray`` is (its ``nbytes``, which worker memory accounting and
  spilling read), and the first time Dask measures one it loads the whole integration,
  ``gpuarrays.interop.dask`` (the chunk type, the dispatches, serialisation).
* ``import gpuarrays`` calls :func:`register_distributed_lazily`: ``distributed``'s
  ``dask_serialize``/``dask_deserialize`` get a lazy registration for the ``gpuarrays``
  top-level module (``Dispatch.register_lazy``, the way ``distributed`` registers CuPy), which
  loads ``gpuarrays.interop.dask`` the first time the process serialises or deserialises a
  ``GPUArray``.  When ``distributed`` is not imported yet, a one-shot ``sys.meta_path`` finder
  does that right after ``distributed.protocol.serialize`` is executed, so the import order
  does not matter and ``import gpuarrays`` imports neither Dask nor ``distributed``.

So a client, a scheduler and every worker that import gpuarrays exchange gpuarrays chunks with
no other code of the user's (docs/dask.md, "What registration does").
"""

from __future__ import annotations

import sys

from .._array.array import GPUArray

__all__ = ["register_sizeof", "register_distributed_lazily"]

_SERIALIZE = "distributed.protocol.serialize"  # where dask_serialize/dask_deserialize live


def _load_integration() -> None:
    """The lazy registration: importing ``gpuarrays.interop.dask`` registers everything."""
    if "gpuarrays.interop.dask" not in sys.modules:
        from . import dask as _integration  # noqa: F401 -- same layer: registers on import


def _sizeof(a: GPUArray) -> int:
    _load_integration()
    return a.nbytes


def register_sizeof(sizeof) -> None:
    """``sizeof(GPUArray)`` is ``nbytes`` (called by Dask with its ``sizeof`` dispatch)."""
    sizeof.register(GPUArray)(_sizeof)


def _register_lazy(serialize_module) -> None:
    for name in ("dask_serialize", "dask_deserialize"):
        dispatch = getattr(serialize_module, name, None)
        if dispatch is not None:  # a distributed without them has nothing to register with
            dispatch.register_lazy("gpuarrays", _load_integration)


class _RunAfterLoader:
    """Executes a module with its own loader, puts that loader back, then runs ``then``."""

    def __init__(self, loader, then) -> None:
        self.loader = loader
        self.then = then

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        try:
            self.loader.exec_module(module)
        finally:
            module.__spec__.loader = module.__loader__ = self.loader  # nothing keeps this wrapper
        self.then(module)


class _AfterImport:
    """A one-shot ``sys.meta_path`` finder: ``then(module)`` runs once module ``name`` is
    executed (a post-import hook; Python has none built in).  It finds the module with the
    finders after it and only wraps the loader they return; it leaves ``sys.meta_path`` once
    the hook has run."""

    def __init__(self, name: str, then) -> None:
        self.name = name
        self.then = then

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if not hasattr(spec.loader, "exec_module"):
            return spec  # a legacy loader: leave the import alone
        spec.loader = _RunAfterLoader(spec.loader, self._run)
        return spec

    def _run(self, module) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        self.then(module)


def register_distributed_lazily() -> None:
    """Make ``distributed`` load the integration when it first (de)serialises a ``GPUArray``.

    Called by ``import gpuarrays``; imports neither Dask nor ``distributed``.  Idempotent.
    """
    module = sys.modules.get(_SERIALIZE)
    if module is not None:
        # Finished executing: distributed imports dask (whose dask.sizeof entry point may
        # import gpuarrays) before its protocol package, so no import of gpuarrays starts
        # while this module is half-executed.
        _register_lazy(module)
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(_SERIALIZE, _register_lazy))
