"""Tracing a fused function: symbolic operands that record what the namespace does to them.

``ga.fuse`` calls the user's function once per signature with a :class:`Symbol`
for each array argument and a :class:`ScalarSymbol` for each scalar argument.
The namespace's elementwise functions and operators end in ``dispatch.apply``,
which hands a symbol to :meth:`Trace.apply`; ``reductions.reduce`` hands it to
:meth:`Trace.reduce`.  Each records one step, typed by the same promotion rules
as the unfused call (``promotion.resolve``), so a fused result has the unfused
result's dtype.  What cannot be fused -- indexing, data-dependent shapes,
Python control flow on array values, operations after the reduction -- raises
``TypeError`` at trace time naming the operation (docs/fusion.md, "What fuses").

The finished trace is a :class:`Graph`: operands (array arguments, scalar
arguments, constants), steps, results, and an optional final reduction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..promotion import SCALAR_TYPES, check_scalar, integer_limits, resolve
from ..table import DTYPES, OPS, Op, scalar_power

__all__ = ["Symbol", "ScalarSymbol", "Trace", "Graph", "FuseError", "refuse"]

_STRONG = frozenset(DTYPES)
_POW = OPS["pow"]


class FuseError(TypeError):
    """Something in a fused function that cannot be fused (a ``TypeError``)."""


def refuse(what: str) -> FuseError:
    return FuseError(
        f"ga.fuse: {what} cannot be fused; a fused function may use elementwise functions "
        f"and operators, ga.where, astype, Python and NumPy scalars, broadcasting, and one "
        f"reduction (sum, prod, min, max, mean, any, all) as its last operation -- move the "
        f"rest outside the fused function (docs/fusion.md, 'What fuses')")


@dataclass
class Graph:
    """A finished trace (what one signature of a fused function computes).

    ``operands``: per body operand, ``("array", position)``, ``("scalar", position)``
    or ``("const", value)``; ``arg_dtypes``: its dtype as the body reads it (an array's
    own, a scalar's argument dtype); ``steps``: ``(op, args, arg_dtypes, dtype)`` with
    ``op`` a table row or ``"astype"`` and ``args`` value numbers (operand ``k`` is value
    ``k``, step ``j`` value ``len(operands) + j``); ``results`` the value numbers
    returned, of ``shape`` and ``dtypes`` (``step_shapes``: each step's own);
    ``reduction``: None or ``(row name, axes, keepdims, result dtype, reduced dtype)`` over
    the single result; ``int_checks``:
    ``(operand, lo, hi)`` for Python int scalar arguments; ``tuple_out``: the function
    returned a tuple.
    """

    operands: list
    arg_dtypes: list
    steps: list
    results: list
    shape: tuple
    dtypes: list
    reduction: tuple | None
    int_checks: list
    tuple_out: bool
    device: object
    step_shapes: list  # per step, its value's (broadcast) shape
    bodies: dict = field(default_factory=dict)  # engine -> its compiled form

    def __post_init__(self) -> None:
        self.array_positions = [src[1] for src in self.operands if src[0] == "array"]
        self.scalar_operands = [i for i, src in enumerate(self.operands) if src[0] != "array"]
        if self.reduction is not None:
            from ..reductions import _out_shape

            self.out_shape = _out_shape(self.shape, self.reduction[1], self.reduction[2])


class Symbol:
    """An array argument (or a value computed from them) during a trace.

    ``dtype``, ``shape``, ``ndim``, ``size`` and ``device`` are the unfused value's;
    operators, ``astype`` and NumPy's ufuncs record steps.  Anything that would need
    the values (``bool(x)``, ``float(x)``, indexing, ``len``) raises :class:`FuseError`.
    """

    __slots__ = ("_trace", "_ref", "dtype", "shape", "_reduced")
    __array_priority__ = 1000

    def __init__(self, trace: Trace, ref: tuple, dtype: np.dtype, shape: tuple,
                 reduced: bool = False) -> None:
        self._trace, self._ref, self.dtype, self.shape = trace, ref, dtype, shape
        self._reduced = reduced

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def device(self):
        return self._trace.device

    def __repr__(self) -> str:
        return f"<ga.fuse traced value, shape={self.shape}, dtype={self.dtype}>"

    def astype(self, dtype, /, *, copy: bool = True, device=None):
        return self._trace.astype(self, dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from ..table import BY_UFUNC

        op = BY_UFUNC.get(ufunc)
        if method != "__call__" or op is None or kwargs:
            return NotImplemented
        return self._trace.apply(op, inputs)

    def __array_namespace__(self, *, api_version=None):
        from ..._array.hooks import HOOKS  # the full namespace, as the arrays' own method

        return HOOKS.namespace(api_version)

    # what needs values or a shape that depends on them: _NEEDS_VALUES below, and
    def __getitem__(self, key):
        raise refuse(f"indexing ({key!r})")

    def __setitem__(self, key, value):
        raise refuse(f"assignment into a traced array ({key!r})")

    __hash__ = None  # == is elementwise

    def __pow__(self, other):
        return self._trace.apply(_POW, (self, other))

    def __rpow__(self, other):
        return self._trace.apply(OPS["pow"], (other, self))

    def __matmul__(self, other):
        raise refuse("matmul (@)")

    __rmatmul__ = __matmul__


def _operator(name: str, reflected: bool = False):
    op = OPS[name]
    if reflected:
        def method(self, other):
            return self._trace.apply(op, (other, self))
    else:
        def method(self, other):
            return self._trace.apply(op, (self, other))
    return method


def _unary(name: str):
    op = OPS[name]

    def method(self):
        return self._trace.apply(op, (self,))
    return method


_ARITHMETIC = (("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "divide"),
               ("floordiv", "floor_divide"), ("mod", "remainder"), ("and", "bitwise_and"),
               ("or", "bitwise_or"), ("xor", "bitwise_xor"), ("lshift", "bitwise_left_shift"),
               ("rshift", "bitwise_right_shift"))
"""The binary operators (``__add__`` and ``__radd__`` ...) and their rows."""
_COMPARISONS = (("eq", "equal"), ("ne", "not_equal"), ("lt", "less"), ("le", "less_equal"),
                ("gt", "greater"), ("ge", "greater_equal"))

_NEEDS_VALUES = {
    "__bool__": "bool() of a traced array (Python control flow on array values)",
    "__len__": "len() of a traced array", "__iter__": "iterating over a traced array",
    "__index__": "using a traced array as an index", "__int__": "int() of a traced array",
    "__float__": "float() of a traced array", "__complex__": "complex() of a traced array",
    "__array__": "converting a traced array to NumPy"}
"""What a traced array refuses, with the words of the refusal."""


def _refusing(what: str):
    def method(self, *args, **kwargs):
        raise refuse(what)
    return method


for _name, _what in _NEEDS_VALUES.items():
    setattr(Symbol, _name, _refusing(_what))
for _name, _row in _ARITHMETIC:
    setattr(Symbol, f"__{_name}__", _operator(_row))
    setattr(Symbol, f"__r{_name}__", _operator(_row, reflected=True))
for _name, _row in _COMPARISONS:
    setattr(Symbol, f"__{_name}__", _operator(_row))
for _name, _row in (("neg", "negative"), ("pos", "positive"), ("abs", "abs"),
                    ("invert", "bitwise_invert")):
    setattr(Symbol, f"__{_name}__", _unary(_row))


class ScalarSymbol:
    """A scalar argument of a fused function during a trace: weak like a Python scalar
    (``key`` its type), or strong like a NumPy scalar (``key`` its dtype).  Its value is
    passed to the kernel at each call, so a new value compiles nothing."""

    __slots__ = ("_trace", "position", "key")

    def __init__(self, trace: Trace, position: int, key) -> None:
        self._trace, self.position, self.key = trace, position, key

    def __repr__(self) -> str:
        kind = self.key.__name__ if isinstance(self.key, type) else str(self.key)
        return f"<ga.fuse traced scalar argument {self.position} ({kind})>"

    def __bool__(self):
        raise refuse("bool() of a traced scalar argument (Python control flow on its value)")

    def _alone(self, *args):
        raise refuse("an operation among scalar arguments alone (compute it before the call "
                     "and pass the result)")

    __hash__ = None
    __int__ = __float__ = __index__ = __complex__ = _alone


def _scalar_operator(name: str, reflected: bool = False):
    op = OPS[name]

    def method(self, other):
        if not isinstance(other, Symbol):
            self._alone()
        return self._trace.apply(op, (other, self) if reflected else (self, other))
    return method


for _name, _row in (*_ARITHMETIC, ("pow", "pow")):
    setattr(ScalarSymbol, f"__{_name}__", _scalar_operator(_row))
    setattr(ScalarSymbol, f"__r{_name}__", _scalar_operator(_row, reflected=True))
for _name, _row in _COMPARISONS:
    setattr(ScalarSymbol, f"__{_name}__", _scalar_operator(_row))
ScalarSymbol.__neg__ = ScalarSymbol.__pos__ = ScalarSymbol.__abs__ = ScalarSymbol._alone


class Trace:
    """The steps recorded so far for one signature on one device."""

    def __init__(self, device) -> None:
        self.device = device
        self.float64 = device.info.float64
        self.operands: list = []  # ("array", pos) | ("scalar", pos) | ("const", value)
        self.arg_dtypes: list = []
        self._operand_of: dict = {}
        self.steps: list = []  # (op, refs, arg_dtypes, dtype)
        self.step_shapes: list = []
        self.int_checks: list = []
        self.reduced = False

    # operands -----------------------------------------------------------------------------
    def array(self, position: int, dtype: np.dtype, shape: tuple) -> Symbol:
        ref = self._operand(("array", position), dtype)
        return Symbol(self, ref, dtype, shape)

    def _operand(self, source: tuple, dtype: np.dtype) -> tuple:
        key = (source, dtype) if source[0] != "const" else (source[0], type(source[1]),
                                                             source[1], dtype)
        ref = self._operand_of.get(key)
        if ref is None:
            ref = self._operand_of[key] = ("in", len(self.operands))
            self.operands.append(source)
            self.arg_dtypes.append(dtype)
        return ref

    # steps --------------------------------------------------------------------------------
    def apply(self, op: Op, args: tuple, out=None) -> Symbol:
        """Record ``op(*args)``, typed as the unfused call would be."""
        if out is not None:
            raise refuse(f"{op.name}(out=...)")
        if op is _POW and isinstance(args[0], Symbol) and type(args[1]) in (int, float):
            found = scalar_power(args[0].dtype, args[1])  # x ** 2 is square, as unfused
            if found is not None:
                op, args = found[0], (args if found[1] else args[:1])
        keys, arrays = [], []
        for x in args:
            if isinstance(x, Symbol):
                if x._trace is not self:
                    raise refuse("a value traced by another fused function")
                if x._reduced:
                    raise refuse(f"{op.name}() after the reduction (a reduction must be the "
                                 f"last operation)")
                keys.append(x.dtype)
                arrays.append(x)
            elif isinstance(x, ScalarSymbol):
                keys.append(x.key)
            elif type(x) in SCALAR_TYPES:
                keys.append(type(x))
            elif isinstance(x, np.generic) and x.dtype in _STRONG:
                keys.append(x.dtype)
            else:
                from ..._array.make import ArrayBase

                if isinstance(x, ArrayBase):
                    raise refuse(f"{op.name}() of an array that is not an argument of the "
                                 f"fused function (pass it as an argument)")
                raise TypeError(f"{op.name}() takes gpuarrays arrays and Python scalars, got "
                                f"{type(x).__name__}")
        if not arrays:
            raise refuse(f"{op.name}() of scalars alone (compute it before the call)")
        arg_dtypes, dt = resolve(op, tuple(keys), self.float64)
        for adt in (*arg_dtypes, dt):
            self.device.require(adt)
        shape = arrays[0].shape
        if any(a.shape != shape for a in arrays):
            try:
                shape = np.broadcast_shapes(*(a.shape for a in arrays))
            except ValueError:
                shapes = " ".join(str(a.shape) for a in arrays)
                raise ValueError(f"{op.name}(): operands could not be broadcast together with "
                                 f"shapes {shapes}; make the trailing dimensions equal or "
                                 f"1") from None
        refs = []
        for x, adt in zip(args, arg_dtypes, strict=True):
            if isinstance(x, Symbol):
                refs.append(x._ref)
            elif isinstance(x, ScalarSymbol):
                ref = self._operand(("scalar", x.position), adt)
                if x.key is int and adt.kind in "iu":
                    self.int_checks.append((ref[1], *integer_limits(adt)))
                refs.append(ref)
            else:
                if type(x) is int and adt.kind in "iu":
                    lo, hi = integer_limits(adt)
                    if not lo <= x <= hi and op.name in _ANSWER:
                        return self._constant_comparison(op, args, x, shape)
                    check_scalar(x, adt)  # OverflowError, as the unfused call
                refs.append(self._operand(("const", x), adt))
        return self._step(op, tuple(refs), tuple(arg_dtypes), dt, shape)

    def _constant_comparison(self, op: Op, args: tuple, value: int, shape: tuple) -> Symbol:
        """An integer array compared with a Python int beyond its range: every element
        answers alike, as unfused (``int8_array < 1000`` is all True): ``x == x`` or
        ``x != x`` of the integer array, which integers answer True and False."""
        k = next(i for i, a in enumerate(args) if a is value)
        name = _SWAPPED.get(op.name, op.name) if k == 0 else op.name
        answer = _ANSWER[name](value > 0)
        x = next(a for a in args if isinstance(a, Symbol))
        row = OPS["equal" if answer else "not_equal"]
        return self._step(row, (x._ref, x._ref), (x.dtype, x.dtype), np.dtype(bool), shape)

    def _step(self, op, refs: tuple, arg_dtypes: tuple, dt: np.dtype, shape: tuple) -> Symbol:
        self.steps.append((op, refs, arg_dtypes, dt))
        self.step_shapes.append(shape)
        return Symbol(self, ("step", len(self.steps) - 1), dt, shape)

    def astype(self, x, dtype) -> Symbol:
        if not isinstance(x, Symbol):
            raise TypeError(f"astype() takes a gpuarrays array, got {type(x).__name__}")
        if x._reduced:
            raise refuse("astype() after the reduction")
        dt = np.dtype(dtype)
        if dt not in _STRONG:
            raise TypeError(f"astype(): gpuarrays has no dtype {dt}; use one of "
                            f"{', '.join(map(str, DTYPES))}")
        self.device.require(dt)
        return self._step("astype", (x._ref,), (x.dtype,), dt, x.shape)

    def reduce(self, name: str, x: Symbol, axis, keepdims: bool, dtype) -> Symbol:
        """Record the final reduction ``name`` of ``x``; typed as ``reductions.reduce``."""
        from ..reductions import (REDUCTIONS, _check_category, _out_shape, _result_dtype,
                                  normalize_axes)

        if name not in _FUSABLE_REDUCTIONS:
            raise refuse(f"{name}()")
        if x._trace is not self:
            raise refuse("a value traced by another fused function")
        if x._reduced or self.reduced:
            raise refuse(f"a second reduction ({name}); only one, at the end, fuses")
        row = REDUCTIONS[name]
        _check_category(row, x.dtype)
        axes = normalize_axes(name, axis, len(x.shape))
        count = int(np.prod([x.shape[k] for k in axes]))
        if count == 0 and row.empty is None:
            raise ValueError(f"{name}() of an empty sequence (shape {x.shape}, axis {axis!r}) "
                             f"has no value; reduce over axes of non-zero length")
        rd = _result_dtype(row, x.dtype, dtype, self.device)
        self.device.require(rd)
        self.reduced = True
        return Symbol(self, ("reduce", name, x._ref, axes, keepdims, rd, x.shape), rd,
                      _out_shape(x.shape, axes, keepdims), reduced=True)

    # the graph ----------------------------------------------------------------------------
    def finish(self, returned) -> Graph:
        """The graph of what the function returned (a traced array or a tuple of them)."""
        tuple_out = isinstance(returned, tuple)
        outs = list(returned) if tuple_out else [returned]
        if not outs:
            raise refuse("returning an empty tuple")
        for o in outs:
            if not isinstance(o, Symbol) or o._trace is not self:
                raise TypeError(f"ga.fuse: the function must return arrays computed from its "
                                f"arguments (or a tuple of them), got {type(o).__name__}; "
                                f"return scalars and host values outside it")
        reduction = None
        if any(o._reduced for o in outs):
            if len(outs) > 1:
                raise refuse("returning a reduction together with other results")
            _, name, ref, axes, keepdims, rd, shape = outs[0]._ref
            value = Symbol(self, ref, self._dtype_of(ref), shape)
            reduction = (name, axes, keepdims, rd, value.dtype)
            outs = [value]
        else:
            shape = outs[0].shape
            if any(o.shape != shape for o in outs):
                raise refuse("results of different shapes ("
                             + ", ".join(str(o.shape) for o in outs) + ")")
        results = []
        for o in outs:
            if o._ref[0] == "in":  # an argument returned as it is: a copy
                o = self._step("astype", (o._ref,), (o.dtype,), o.dtype, o.shape)
            results.append(o._ref)
        # only what the results need: an operand or step they do not use would widen the
        # iteration space (an unused (1, 1) operand beside a (3,) result) or cost work
        live, stack = set(), list(results)
        while stack:
            ref = stack.pop()
            if ref not in live:
                live.add(ref)
                if ref[0] == "step":
                    stack.extend(self.steps[ref[1]][1])
        kept_in = [k for k in range(len(self.operands)) if ("in", k) in live]
        kept_steps = [j for j in range(len(self.steps)) if ("step", j) in live]
        number = {("in", k): i for i, k in enumerate(kept_in)}
        number.update({("step", j): len(kept_in) + i for i, j in enumerate(kept_steps)})
        steps = []
        for j in kept_steps:
            op, refs, adts, dt = self.steps[j]
            steps.append((op, tuple(number[r] for r in refs), adts, dt))
        int_checks = [(kept_in.index(k), lo, hi) for k, lo, hi in self.int_checks
                      if k in kept_in]
        return Graph([self.operands[k] for k in kept_in], [self.arg_dtypes[k] for k in kept_in],
                     steps, [number[r] for r in results], shape, [o.dtype for o in outs],
                     reduction, int_checks, tuple_out, self.device,
                     [self.step_shapes[j] for j in kept_steps])

    def _dtype_of(self, ref: tuple) -> np.dtype:
        return self.arg_dtypes[ref[1]] if ref[0] == "in" else self.steps[ref[1]][3]


_ANSWER = {"equal": lambda big: False, "not_equal": lambda big: True,
           "less": lambda big: big, "less_equal": lambda big: big,
           "greater": lambda big: not big, "greater_equal": lambda big: not big}
"""A comparison's answer for ``array <op> value`` with ``value`` beyond the array's integer
range (``big``: above its maximum)."""
_SWAPPED = {"less": "greater", "greater": "less", "less_equal": "greater_equal",
            "greater_equal": "less_equal"}

_FUSABLE_REDUCTIONS = frozenset(("sum", "prod", "min", "max", "mean", "any", "all"))
