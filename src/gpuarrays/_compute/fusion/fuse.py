"""``ga.fuse``: a Python function of arrays and scalars, traced once per signature and
run as one kernel (docs/fusion.md).

The first call with a signature -- each argument's dtype and shape (arrays), type
(Python scalars) or dtype (NumPy scalars), and the device -- traces the function
(``trace.py``) under the function's lock, then runs it; later calls with that
signature find the graph and run it.  Running allocates the outputs and nothing
else, checks every array argument (live, one device) and every Python int
argument (it must fit the dtype it meets, ``OverflowError``), and hands the graph
to an engine: generated kernels on devices (``device/launcher.fused``; a final
reduction in ``device/reduce.run_fused``), blocked NumPy on ``cpu`` (``cpu.py``).
Kernels are compiled per layout of the operands (contiguous, strided,
broadcast), as the namespace's are, and kept on disk by the back-end's cache.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from ..._common.raw import c_strides
from ..._array.make import ArrayBase, new_array
from ...backends.base import RawView
from .. import cpu_engine
from ..dispatch import _raw_operands
from ..ownership import working
from ..promotion import SCALAR_TYPES, check_scalar
from ..table import DTYPES
from . import cpu
from .trace import ScalarSymbol, Symbol, Trace

__all__ = ["fuse", "FusedFunction"]

_STRONG = frozenset(DTYPES)


def fuse(fn=None, /, *, name: str | None = None):
    """Fuse ``fn`` (a function of gpuarrays arrays and scalars) into one kernel per
    signature; use as ``@ga.fuse``, ``@ga.fuse()`` or ``ga.fuse(fn)``.

    Inside ``fn``: elementwise functions and operators, ``ga.where``, ``astype``, Python
    and NumPy scalars, broadcasting, and at most one reduction (``sum``, ``prod``,
    ``min``, ``max``, ``mean``, ``any``, ``all``) as the last operation.  It returns one
    array or a tuple of arrays of one shape.  Anything else raises ``TypeError`` when
    the function is traced (docs/fusion.md, "What fuses").  Results and dtypes are the
    unfused namespace's.
    """
    if fn is None:
        return lambda f: FusedFunction(f, name)
    if not callable(fn):
        raise TypeError(f"ga.fuse() takes a function, got {type(fn).__name__}")
    return FusedFunction(fn, name)


def _signature(args: tuple) -> tuple:
    """The signature of a call: per argument its dtype, shape and device (arrays), its
    type (Python scalars) or its dtype (NumPy scalars).  ``TypeError`` for anything else."""
    key = []
    for x in args:
        if isinstance(x, ArrayBase):
            key += (x._dtype, x._shape, id(x._storage.device))  # devices live as long as we do
            continue
        t = type(x)
        if t in SCALAR_TYPES:
            key.append(t)
        elif isinstance(x, np.generic) and x.dtype in _STRONG:
            key.append(x.dtype)
        else:
            raise TypeError(f"a fused function takes gpuarrays arrays and Python or NumPy "
                            f"scalars, got {t.__name__}; copy host data to the device first "
                            f"with ga.asarray(x, device=...)")
    return tuple(key)


class FusedFunction:
    """A fused function: call it as the function itself; ``source(*args)`` shows what runs."""

    def __init__(self, fn, name: str | None = None) -> None:
        functools.update_wrapper(self, fn)
        self._fn = fn
        self.name = name or getattr(fn, "__name__", "fused")
        self._graphs: dict = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<ga.fuse of {self.name}, {len(self._graphs)} signature(s) traced>"

    # the signature and its graph ---------------------------------------------------------------
    def _device(self, args: tuple):
        """The one device of the array arguments (``ValueError`` for two, ``TypeError`` for
        none, ``FreedArrayError`` for a freed one)."""
        dev = None
        for x in args:
            if isinstance(x, ArrayBase):
                x._live()
                d = x._storage.device
                if dev is None:
                    dev = d
                elif d is not dev and d != dev:
                    raise ValueError(f"{self.name}(): arguments are on different devices, {dev} "
                                     f"and {d}; move one with x.to_device({str(dev)!r})")
        if dev is None:
            raise TypeError(f"{self.name}(): a fused function needs at least one gpuarrays array "
                            f"argument (its device runs it)")
        return dev

    def _trace(self, args: tuple, dev):
        trace = Trace(dev)
        traced = []
        for pos, x in enumerate(args):
            if isinstance(x, ArrayBase):
                traced.append(trace.array(pos, x._dtype, x._shape))
            elif isinstance(x, np.generic):
                traced.append(ScalarSymbol(trace, pos, x.dtype))
            else:
                traced.append(ScalarSymbol(trace, pos, type(x)))
        return trace.finish(self._fn(*traced))

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise TypeError(f"{self.name}(): a fused function takes positional arguments only, "
                            f"got {', '.join(kwargs)}")
        try:
            graph = self._graphs.get(_signature(args))
        except TypeError:
            if any(isinstance(x, (Symbol, ScalarSymbol)) for x in args):
                return self._fn(*args)  # called inside another fused function: inlined
            raise
        if graph is not None:
            return _run(graph, args)
        key = _signature(args)
        dev = self._device(args)
        with self._lock:  # the first call of a signature traces and compiles once
            graph = self._graphs.get(key)
            if graph is None:
                graph = self._trace(args, dev)
                result = _run(graph, args)
                self._graphs[key] = graph
                return result
        return _run(graph, args)

    def source(self, *args) -> str:
        """What a call with ``args`` runs: the generated kernel's source on a device, the
        steps of the blocked evaluation on ``cpu``."""
        graph = self._graphs.get(_signature(args))
        dev = self._device(args)
        if graph is None:
            graph = self._trace(args, dev)
        if dev.backend == "cpu":
            return _listing(graph)
        from ..device import launcher

        outs = [RawView(0, graph.shape, c_strides(graph.shape, dt.itemsize), dt)
                for dt in graph.dtypes]
        inputs = _device_inputs(graph, args)
        if graph.reduction is not None:
            from ..device import reduce as device_reduce

            return device_reduce.fused_source(dev, _reduce_body(graph, dev, inputs), inputs,
                                              graph.reduction[1])
        return launcher.fused_source(dev, _device_body(graph), outs, inputs, graph.arg_dtypes)


# running a graph ------------------------------------------------------------------------------
def _check_ints(graph, args: tuple) -> None:
    for i, lo, hi in graph.int_checks:
        value = args[graph.operands[i][1]]
        if not lo <= value <= hi:
            check_scalar(value, graph.arg_dtypes[i])  # raises the OverflowError


def _run(graph, args: tuple):
    """Allocate the outputs and run the graph on its device; the outputs go back if it fails."""
    if graph.int_checks:
        _check_ints(graph, args)
    dev = graph.device
    arrays = [args[p] for p in graph.array_positions]
    kind = arrays[0]._storage.kind
    for a in arrays:
        if a._storage.kind != kind:
            kind = "device"
            break
    if graph.reduction is None:
        outs = [new_array(graph.shape, dt, dev, kind) for dt in graph.dtypes]
    else:
        outs = [new_array(graph.out_shape, graph.reduction[3], dev, kind)]
    try:
        if graph.reduction is not None and _empty_reduction(graph, outs[0]):
            return outs[0]
        with working(dev, *outs, *arrays):
            if dev.backend == "cpu":
                _run_cpu(graph, args, outs)
            else:
                _run_device(graph, dev, args, outs)
    except BaseException:
        for o in outs:
            o.free()
        raise
    return tuple(outs) if graph.tuple_out else outs[0]


def _empty_reduction(graph, result) -> bool:
    """A reduction with nothing to compute: an empty result, or nothing reduced (the
    result is the row's value for nothing, as ``reductions.reduce`` gives)."""
    from ..reductions import REDUCTIONS

    name, axes = graph.reduction[:2]
    if 0 in result.shape:
        return True
    if any(graph.shape[k] == 0 for k in axes):
        result.fill(REDUCTIONS[name].empty)
        return True
    return False


def _scalar_value(graph, i: int, args: tuple):
    src = graph.operands[i]
    return src[1] if src[0] == "const" else args[src[1]]


def _run_cpu(graph, args: tuple, outs: list) -> None:
    view = cpu_engine.view
    operands = [view(args[src[1]]) if src[0] == "array" else None for src in graph.operands]
    scalars = {i: _scalar_value(graph, i, args) for i in graph.scalar_operands}
    if graph.reduction is None:
        cpu.run(graph, operands, [view(o) for o in outs], scalars)
        return
    from ..reductions import accumulator_dtype

    name, axes, _, rd, _ = graph.reduction
    cpu.reduce(graph, operands, scalars, name, axes, accumulator_dtype(rd), view(outs[0]))


def _device_body(graph):
    body = graph.bodies.get("device")
    if body is None:
        from ..device.generator import Step, key_of
        from ..device.launcher import Body

        steps = tuple(Step(op if op == "astype" else op.name, args,
                           tuple(key_of(a) for a in adts), key_of(dt))
                      for op, args, adts, dt in graph.steps)
        body = graph.bodies["device"] = Body(steps, tuple(graph.results))
    return body


def _device_inputs(graph, args: tuple) -> list:
    """What the launcher takes for each operand (``dispatch``'s, as for an unfused call)."""
    values = [args[src[1]] if src[0] != "const" else src[1] for src in graph.operands]
    return _raw_operands(values, graph.arg_dtypes, graph.shape)


def _run_device(graph, dev, args: tuple, outs: list) -> None:
    inputs = _device_inputs(graph, args)
    if graph.reduction is None:
        from ..device import launcher

        launcher.fused(dev, _device_body(graph), [o._raw() for o in outs], inputs,
                       graph.arg_dtypes)
        return
    from ..device import reduce as device_reduce
    from ..reductions import REDUCTIONS

    name, axes, _, _, _ = graph.reduction
    count = int(np.prod([graph.shape[k] for k in axes]))
    device_reduce.run_fused(REDUCTIONS[name], _reduce_body(graph, dev, inputs), inputs, axes,
                            outs[0], count)


def _reduce_body(graph, dev, inputs: list):
    """The :class:`~..device.generator.Fused` body a fused reduction evaluates per element."""
    from ..device.generator import Fused, Operand, key_of
    from ..device.launcher import aligned

    operands = []
    for x, adt in zip(inputs, graph.arg_dtypes, strict=True):
        key = key_of(adt)
        if isinstance(x, RawView):
            operands.append(Operand(key, key, True, aligned(x.ptr, x.strides, x.dtype)))
        else:
            operands.append(Operand(None, key, wide=dev.info.float64 and key == "f2"))
    body = _device_body(graph)
    return Fused(tuple(operands), body.steps, body.results, ())


def _listing(graph) -> str:
    """The blocked evaluation's steps, one per line (what ``source`` shows on ``cpu``)."""
    lines = [f"# ga.fuse on cpu: blocks of the shape {graph.shape}, each step a NumPy ufunc "
             f"call into a block-sized scratch (fusion/cpu.py)"]
    for i, (src, dt) in enumerate(zip(graph.operands, graph.arg_dtypes, strict=True)):
        what = {"array": f"argument {src[1]}", "scalar": f"scalar argument {src[1]}",
                "const": f"constant {src[1]!r}"}[src[0]]
        lines.append(f"v{i} = {what}  # {dt}")
    n = len(graph.operands)
    for j, (op, args, _, dt) in enumerate(graph.steps):
        name = op if op == "astype" else op.name
        lines.append(f"v{n + j} = {name}({', '.join(f'v{a}' for a in args)})  # {dt}")
    if graph.reduction is not None:
        name, axes, keepdims, rd, _ = graph.reduction
        lines.append(f"result = {name}(v{graph.results[0]}, axis={axes}, keepdims={keepdims})"
                     f"  # {rd}")
    else:
        lines.append("return " + ", ".join(f"v{r}" for r in graph.results))
    return "\n".join(lines) + "\n"
