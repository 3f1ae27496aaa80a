"""The elementwise entry point: check, type, broadcast, allocate, then run one engine.

Every elementwise function, operator and routed NumPy ufunc ends here
(docs/compute.md, "How an operation runs").  Everything that can be refused is
refused before anything is allocated or launched: operands that are not
gpuarrays arrays or Python scalars, freed arrays, arrays on different devices,
dtypes the operation does not take or the device cannot hold, Python ints that
do not fit, shapes that do not broadcast, an output that is read-only, of the
wrong shape or that the result cannot be cast to.  The result comes from the
pool or the active ``ga.cached`` scope; its kind is the kind every array
operand shares, else ``"device"``.  If the engine fails, the result goes back.

``apply`` is compiled (``_core.apply``, src/native/core/compute.c): it runs the
common case -- live arrays of one shape on one device, Python scalars, an exact
``out`` -- with the typing each operation's :class:`_core.Plan` remembers, and
hands everything else to :func:`apply_slow` below, which checks and raises.  So
the rules live here once (docs/performance.md, "The elementwise host path").
"""

from __future__ import annotations

from functools import partial

import numpy as np

from .. import _core
from .._array.functions import shares_memory
from .._array.layout import broadcast_strides
from .._array.make import ArrayBase, new_array
from .._array.transfer import assign as transfer_assign
from .._array.transfer import copy_raw
from .._memory.devices import get_device
from ..backends.base import RawView
from . import cpu_engine
from .ownership import working
from .fusion.trace import ScalarSymbol, Symbol
from .promotion import SCALAR_TYPES, check_scalar, integer_limits, resolve
from .table import DTYPES, OPS, POWER_RULES, POWERS, Op

__all__ = ["apply", "apply_slow", "compare_out_of_range", "COMPARISONS", "operand_error", "power"]

_STRONG_SCALARS = frozenset(DTYPES)
_TRACED = (Symbol, ScalarSymbol)


def operand_error(op: Op, x: object) -> TypeError:
    return TypeError(
        f"{op.name}() takes gpuarrays arrays and Python scalars, got {type(x).__name__}; "
        f"copy host data to the device first with ga.asarray(x, device=...)")


def _shape_of(op: Op, arrays: list) -> tuple[int, ...]:
    shape = arrays[0]._shape
    for a in arrays:
        if a._shape != shape:
            break
    else:
        return shape
    try:
        return np.broadcast_shapes(*(a._shape for a in arrays))
    except ValueError:
        shapes = " ".join(str(a._shape) for a in arrays)
        raise ValueError(f"{op.name}(): operands could not be broadcast together with shapes "
                         f"{shapes}; make the trailing dimensions equal or 1") from None


def _check_out(op: Op, out, dev, shape: tuple, dt: np.dtype) -> None:
    if not isinstance(out, ArrayBase):
        raise TypeError(f"{op.name}(): out must be a gpuarrays array, got {type(out).__name__}")
    out._live()
    if not out._writeable:
        raise ValueError(f"{op.name}(): the output array (shape {out._shape}, {out._dtype}) is "
                         f"read-only (a broadcast_to or diagonal view); write into a copy")
    if out._storage.device != dev:
        raise ValueError(f"{op.name}(): the output is on {out._storage.device}, the operands "
                         f"on {dev}; move one with to_device()")
    if out._shape != shape:
        raise ValueError(f"{op.name}(): the output has shape {out._shape}, but the operands "
                         f"broadcast to {shape}")
    if out._dtype != dt and not np.can_cast(dt, out._dtype, "same_kind"):
        raise TypeError(f"{op.name}(): cannot cast the result from {dt} to the output's "
                        f"{out._dtype} with casting rule 'same_kind'; use a {dt} output")
    dev.require(out._dtype)


_typed: dict[tuple, tuple] = {}


def _type_on(op: Op, keys: tuple, dev) -> tuple:
    """``(argument dtypes, result dtype, int checks)`` of ``op`` on ``dev``, checked against
    what the device holds; an int check ``(k, lo, hi)`` bounds the Python int operand ``k``."""
    arg_dtypes, dt = resolve(op, keys, dev.info.float64)
    for adt in arg_dtypes:
        dev.require(adt)
    dev.require(dt)
    limits = tuple((k, *integer_limits(adt))
                   for k, (key, adt) in enumerate(zip(keys, arg_dtypes, strict=True))
                   if key is int and adt.kind in "iu")
    typed = _typed[op, keys, id(dev)] = arg_dtypes, dt, limits
    return typed


def apply_slow(op: Op, args: tuple, out=None):
    """Run ``op`` on ``args`` (arrays and Python scalars); write into ``out`` if given.

    Returns the result array (``out`` itself when given).  Errors, all raised
    before anything is allocated: ``TypeError`` (operand types, dtypes, casting),
    ``ValueError`` (devices, shapes, read-only output), ``OverflowError``
    (a Python int that does not fit), ``FreedArrayError``/``DeviceResetError``.
    ``apply`` (compiled) gives the same results and errors; it calls this for
    everything but the common case.
    """
    arrays = []
    keys = []
    for x in args:
        if isinstance(x, ArrayBase):
            arrays.append(x)
            keys.append(x._dtype)
        elif type(x) in SCALAR_TYPES:
            keys.append(type(x))
        elif isinstance(x, np.generic) and x.dtype in _STRONG_SCALARS:
            keys.append(x.dtype)  # a NumPy scalar keeps its dtype, as in NumPy
        elif isinstance(x, _TRACED):  # inside ga.fuse: record the step (fusion/trace.py)
            return x._trace.apply(op, args, out)
        else:
            raise operand_error(op, x)
    if not arrays:
        return _scalars_only(op, args, out)
    first = arrays[0]
    dev = first._storage.device
    kind = first._storage.kind
    for a in arrays:
        st = a._storage
        if a._freed or st._reason is not None or not st._epoch.live:  # a._live(), inlined
            raise a._freed_error()
        if st.device is not dev and st.device != dev:
            raise ValueError(f"{op.name}(): operands are on different devices, {dev} and "
                             f"{st.device}; move one with x.to_device({str(dev)!r})")
        if st.kind != kind:
            kind = "device"
    keys = tuple(keys)
    typed = _typed.get((op, keys, id(dev)))  # devices live for the whole process
    if typed is None:
        typed = _type_on(op, keys, dev)
    arg_dtypes, dt, limits = typed
    for k, lo, hi in limits:
        if not lo <= args[k] <= hi:
            if op.name in COMPARISONS:  # NumPy 2: int8_array < 1000 is all True
                return compare_out_of_range(op, args, k, out)
            check_scalar(args[k], arg_dtypes[k])  # raises the OverflowError
    shape = first._shape
    if len(arrays) > 1:
        shape = _shape_of(op, arrays)
    if out is not None:
        _check_out(op, out, dev, shape, dt)
        result = out
    else:
        result = new_array(shape, dt, dev, kind)
    try:
        with working(dev, result, *arrays):
            if dev.backend == "cpu":
                cpu_engine.run(op, result, args)
            else:
                _run_on_device(op, dev, arg_dtypes, result, args, out is not None)
    except BaseException:
        if out is None:
            result.free()
        raise
    return result


COMPARISONS = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=",
               "greater": ">", "greater_equal": ">="}
"""The comparisons, whose Python int operand may lie outside the array's integer dtype."""


def compare_out_of_range(op: Op, args: tuple, k: int, out=None):
    """``op(*args)`` where the Python int ``args[k]`` lies outside the range of the integer
    array it meets (NumPy 2.4: ``int8_array < 1000`` is all ``True``, ``uint8_array == -1``
    all ``False``): every element compares alike, so the result is a bool array of the
    broadcast shape filled with that answer (no kernel; ``out`` is filled if given).
    ``__array_ufunc__`` reaches this through ``apply``; other callers may call it with the
    comparison's row (``OPS["less"]``) when ``args[k]`` does not fit."""
    value = args[k]
    arrays = [x for x in args if isinstance(x, ArrayBase)]
    big = value > 0  # beyond the maximum (else below the minimum) of the array's dtype
    # the answer of ``array <op> value``; with the value first the order reverses
    name = op.name
    if k == 0:
        name = {"less": "greater", "greater": "less", "less_equal": "greater_equal",
                "greater_equal": "less_equal"}.get(name, name)
    answer = {"equal": False, "not_equal": True, "less": big, "less_equal": big,
              "greater": not big, "greater_equal": not big}[name]
    first = arrays[0]
    for a in arrays:
        a._live()
    dev = first._storage.device
    shape = _shape_of(op, arrays) if len(arrays) > 1 else first._shape
    if out is not None:
        _check_out(op, out, dev, shape, np.dtype(bool))
        transfer_assign(out, np.bool_(answer))
        return out
    kinds = {a._storage.kind for a in arrays}
    result = new_array(shape, np.dtype(bool), dev, kinds.pop() if len(kinds) == 1 else "device")
    try:
        transfer_assign(result, np.bool_(answer))
    except BaseException:
        result.free()
        raise
    return result


def _scalars_only(op: Op, args: tuple, out=None):
    """``ga.add(1, 2)``, ``ga.sin(0.5)``: operands that are all Python or NumPy scalars give
    a 0-d array on the default device (``out``'s device when given), typed as NumPy types
    them: a NumPy scalar keeps its dtype, Python scalars take NumPy's default types
    (``int64``, ``float64``, ``complex128``; ``float32``/``complex64`` on a device without
    float64) and stay weak next to a NumPy scalar.  One operand becomes a 0-d array (a
    temporary, freed here), the rest stay scalars."""
    dev = out._storage.device if isinstance(out, ArrayBase) else get_device(None)
    k = next((i for i, x in enumerate(args) if isinstance(x, np.generic)), 0)
    x = args[k]
    if isinstance(x, np.generic):
        dt = x.dtype
    else:
        dt = _KIND_DTYPES[type(x)]
        if not dev.info.float64:
            dt = {np.dtype("f8"): np.dtype("f4"), np.dtype("c16"): np.dtype("c8")}.get(dt, dt)
        if dt.kind in "iu":
            lo, hi = integer_limits(dt)
            if not lo <= x <= hi:  # 2**63 ... as NumPy: uint64, then object (refused)
                dt = np.dtype("u8")
                check_scalar(x, dt)
    dev.require(dt)
    tmp = new_array((), dt, dev, "device")
    try:
        transfer_assign(tmp, np.asarray(x, dtype=dt))
        return apply_slow(op, args[:k] + (tmp,) + args[k + 1:], out)
    finally:
        tmp.free()


_KIND_DTYPES = {bool: np.dtype(bool), int: np.dtype("i8"), float: np.dtype("f8"),
                complex: np.dtype("c16")}

_device = []


def _device_engine():
    """The device engine (``_compute/device/launcher.py``), imported on first use."""
    if not _device:
        try:
            from .device import launcher
        except ImportError as e:
            raise NotImplementedError(
                f"elementwise kernels for device back-ends are not available: {e}") from e
        _device.append(launcher)
    return _device[0]


def _run_on_device(op: Op, dev, arg_dtypes: tuple, result, args: tuple, given: bool) -> None:
    """Generated kernels; an output overlapping an input (other than exactly) goes through a
    temporary, so the values are NumPy's."""
    launch = (_device[0] if _device else _device_engine()).elementwise
    shape = result._shape
    out = RawView(result._storage.ptr + result._offset, shape, result._strides, result._dtype)
    inputs = _raw_operands(args, arg_dtypes, shape)
    staged = given and any(isinstance(x, ArrayBase) and r != out and shares_memory(x, result)
                           for x, r in zip(args, inputs, strict=True))
    if not staged:
        launch(dev, op.name, out, inputs, arg_dtypes)
        return
    tmp = new_array(shape, result._dtype, dev, "device")
    try:
        launch(dev, op.name, tmp._raw(), inputs, arg_dtypes)
        copy_raw(result, tmp)
    finally:
        tmp.free()


def _compiled_launch(op: Op, dev, arg_dtypes: tuple, result, args: tuple):
    """The ``_core.Launch`` of this layout (or None): what the device engine runs from C
    (src/native/core/launch.c); array operands broadcast to the result's shape."""
    inputs = _raw_operands(args, arg_dtypes, result._shape)
    return _device_engine().compiled(dev, op.name, result._raw(), inputs, arg_dtypes)


def _raw_operands(args: tuple, arg_dtypes: tuple, shape: tuple) -> list:
    """What the launcher takes for each operand: a raw view of an array (live: apply checked
    every operand) broadcast to ``shape`` by zero strides, or a Python scalar as a 0-d NumPy
    array of its argument dtype (a kernel argument, not an allocation)."""
    return [RawView(x._storage.ptr + x._offset, shape, x._strides if x._shape == shape
                    else broadcast_strides(x._shape, x._strides, shape), x._dtype)
            if isinstance(x, ArrayBase) else np.asarray(x, dtype=adt)
            for x, adt in zip(args, arg_dtypes, strict=True)]


def _typer(op: Op):
    """What ``op``'s plan asks on a miss: ``(result dtype, int limits, device engine or None
    for the cpu engine, the device's gate, direct loop or None)`` for operand dtypes / scalar
    types ``keys``."""
    def typer(keys: tuple, dev) -> tuple:
        typed = _typed.get((op, keys, id(dev)))
        if typed is None:
            typed = _type_on(op, keys, dev)
        arg_dtypes, dt, limits = typed
        # the device engine, called engine(result, args, given) (a _core.DeviceEngine also
        # launches known layouts from C); None: the compiled cpu engine
        # (the bare ufunc), or the cpu engine in Python where the standard's special values
        # are not the ufunc's (cpu_engine.standard_fix)
        # direct: NumPy's own strided loop, called by the compiled cpu engine without the
        # ufunc around it where the layout allows (cpu_engine.direct_loop), or None
        direct = None
        if dev.backend != "cpu":
            engine = _core.DeviceEngine(partial(_run_on_device, op, dev, arg_dtypes),
                                        partial(_compiled_launch, op, dev, arg_dtypes))
        else:
            engine = partial(_run_cpu, op) if cpu_engine.standard_fix(op, dt) else None
            direct = cpu_engine.direct_loop(op, keys, arg_dtypes, dt)
        return dt, limits, engine, dev.gate, direct
    return typer


def _run_cpu(op: Op, result, args: tuple, given: bool) -> None:
    cpu_engine.run(op, result, args)


# NumPy 2.4 deprecates a positional output for these two (a third input, once)
_OUT_KEYWORD = frozenset((np.maximum, np.minimum))


def _plan(op: Op) -> _core.Plan:
    if op.typing != "ufunc" or cpu_engine.own_kernel(op):
        return _core.Plan(cpu_engine.kernel(op), op.nin, _typer(op), call="out_first")
    call = "keyword" if op.ufunc in _OUT_KEYWORD else "positional"
    return _core.Plan(op.ufunc, op.nin, _typer(op), call=call)


PLANS = {op: _plan(op) for op in (*OPS.values(), *POWERS.values())}
"""One compiled plan per operation (and per row standing in for ``pow``): how ``apply``
runs it, and the typings it remembers."""

_core.configure(plans=PLANS, apply_slow=apply_slow)

apply = _core.apply
"""``apply(op, args, out=None)``: see :func:`apply_slow`; compiled, same results and errors."""

_POW = OPS["pow"]
_RULES = POWER_RULES


def power(x1, x2, out=None):
    """``x1 ** x2`` (the operator, ``pow`` and ``np.power``): with an array ``x1`` and a
    Python ``int`` or ``float`` ``x2`` of a few values, the row ``table.scalar_power``
    names (``x ** 2`` is ``square``, ``x ** 0.5`` a square root ...; docs/compute.md,
    "Scalar exponents"), else ``pow``.  The exponent's value picks the row here because
    the compiled path keys its typings by operand types only.  An ``out`` the row's
    result would not fill as it is (another dtype or shape, read-only) keeps ``pow``, whose
    checks and messages name it."""
    t = type(x2)
    if (t is int or t is float) and isinstance(x1, ArrayBase):
        rules = _RULES.get((x1._dtype.kind, t))  # table.scalar_power, inlined: the hot path
        found = None if rules is None else rules.get(x2)
        if found is not None and (out is None or (isinstance(out, ArrayBase)
                                                  and out._dtype == x1._dtype
                                                  and out._shape == x1._shape
                                                  and out._writeable)):
            row, keep = found
            return apply(row, (x1, x2) if keep else (x1,), out)
    return apply(_POW, (x1, x2), out)
