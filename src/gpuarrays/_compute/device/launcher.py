"""Elementwise kernels on device back-ends: signature, kernel cache, launch.

:func:`elementwise` is the one function the compute layer's dispatch calls for
every non-cpu device (docs/kernels.md).  Per call it builds a small key from
the views' dtypes, shapes, strides and address alignment; the first call with
a key makes a :class:`_Plan` -- dimensions collapsed, 32- or 64-bit indices
chosen, the :class:`~.generator.Signature`, the compiled kernel (kept per
(device, signature), so a new layout of a known signature compiles nothing),
the constant kernel arguments and the launch shape -- and every call then only
passes addresses and scalar values to the back-end's kernel and enqueues it.
Nothing here waits for the device.

The launch shape comes from ``backends._kernels.launch_shape``, the one place
that chooses it (for the data-movement kernels too) and records the
measurements behind it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from itertools import product

import numpy as np

from ... import _core
from ...backends._kernels import ROWS_MIN, collapse, launch_shape, rows_items, split_at
from ...backends.base import RawView
from . import diskcache
from .expressions import NIN
from .generator import (Fused, Operand, Signature, Step, fused_name, fused_params, item_size,
                        kernel_name, key_of, params, source)

__all__ = ["elementwise", "compiled", "describe", "launch_shape", "clear", "KERNEL_DIMS",
           "INDEX32_LIMIT", "Body", "fused", "fused_source"]

KERNEL_DIMS = 8
"""Most collapsed dimensions a kernel takes (its layout travels by value; OpenCL
guarantees only 1024 bytes of arguments).  Beyond, the leading ones loop on the host."""

INDEX32_LIMIT = 2**31 - 1
"""Largest element count and byte extent a 32-bit-index kernel handles (a test lowers it)."""


# The plan of one layout ----------------------------------------------------------------------
class _Plan:
    """What a call with one key needs: the kernel, the constant arguments, the launch shape.

    ``rest``: the bounds-checked kernel that runs one more group of ``lsize`` items from
    index ``gsize``, after ``kernel`` (without a bounds check) ran whole groups up to it
    (:func:`_shaped_plan`); None: ``kernel`` alone."""

    __slots__ = ("kernel", "tail", "gsize", "lsize", "scalars", "outer", "empty", "rest")

    def __init__(self, kernel, tail: list, gsize: int, lsize: int, scalars: tuple,
                 outer: list | None, empty: bool, rest=None) -> None:  # fmt: skip
        self.kernel, self.tail, self.gsize, self.lsize = kernel, tail, gsize, lsize
        self.scalars = scalars  # per operand: None (array), "r" (real scalar) or "c" (complex)
        self.outer = outer  # per host-loop step: the byte offsets of (out, array operands...)
        self.empty = empty
        self.rest = rest

    def __call__(self, out: RawView, inputs: Sequence) -> None:
        self.run((out,), inputs)

    def run(self, outs: Sequence[RawView], inputs: Sequence) -> None:
        """Launch with the outputs' and array operands' addresses and the scalars' values."""
        if self.empty:
            return
        values = [o.ptr for o in outs]
        for x, kind in zip(inputs, self.scalars, strict=True):
            if kind is None:
                values.append(x.ptr)
            elif kind == "r":
                values.append(x.item())
            else:
                z = complex(x.item())
                values.append(z.real)
                values.append(z.imag)
        values += self.tail
        if self.outer is None:
            self._launch(values)
            return
        m = len(outs)
        ptr_slots = list(range(m)) + [m + i + sum(1 for k in self.scalars[:i] if k == "c")
                                      for i, k in enumerate(self.scalars) if k is None]
        base = [values[s] for s in ptr_slots]
        for offsets in self.outer:
            for s, b, o in zip(ptr_slots, base, offsets, strict=True):
                values[s] = b + o
            self._launch(values)

    def _launch(self, values: list) -> None:
        self.kernel.launch(values, self.gsize, self.lsize)
        if self.rest is not None:
            self.rest.launch(values, self.lsize, self.lsize, self.gsize)


_MAX_PLANS = 4096
_plans: dict[tuple, _Plan] = {}
_kernels: dict[tuple, object] = {}  # (device, signature) -> the back-end's compiled kernel
_lock = threading.Lock()


def clear() -> None:
    """Forget every plan and kernel handle (the back-ends keep their compiled programs).

    The compiled core's ``ClKernel`` s stay: each remembers the argument values it set on
    its ``cl_kernel``, and the engines' launches still hold them, so a second one for the
    same ``cl_kernel`` would skip values the other had changed (a launch would then read
    and write another call's arrays)."""
    with _lock:
        _plans.clear()
        _kernels.clear()


def aligned(ptr: int, strides, dtype: np.dtype) -> bool:
    """Whether every element address of the view is a multiple of its scalar size."""
    unit = dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize
    bits = ptr
    for s in strides:
        bits |= s
    return bits % unit == 0


def _contiguous(shape: list[int], strides: list[int], itemsize: int) -> bool:
    step = itemsize
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        if s != step:
            return False
        step *= n
    return True


def _fits32(shape: list[int], strides: list[list[int]], itemsizes: list[int]) -> bool:
    n = 1
    for e in shape:
        n *= e
    if n > INDEX32_LIMIT:
        return False
    for st, size in zip(strides, itemsizes, strict=True):
        if sum((e - 1) * abs(s) for e, s in zip(shape, st, strict=True)) + size > INDEX32_LIMIT:
            return False
    return True


def _layout(outs: Sequence[RawView], inputs: Sequence, arg_dtypes, doubles: bool):
    """The launch layout shared by every output and array operand (of the outputs' shape),
    or None if empty: ``(operands, outs, ndim, index64, tail, outer, scalar kinds)`` --
    the :class:`Operand` s, ``(storage key, contiguous, aligned)`` per output, the
    collapsed dimensions, the index width, the constant arguments, the host-loop offsets
    (beyond :data:`KERNEL_DIMS`) and per operand None (array), ``"r"`` or ``"c"``.

    ``doubles``: the device has float64, so a float16 scalar travels as a double
    (``Operand.wide``) and is rounded to float16 once, in the kernel."""
    out = outs[0]
    arrays = list(outs) + [x for x in inputs if isinstance(x, RawView)]
    shape, strides = collapse(tuple(out.shape), *(tuple(a.strides) for a in arrays))
    n = 1
    for e in out.shape:
        n *= e
    if n == 0:
        return None
    if not shape:  # one element
        shape, strides = [1], [[a.dtype.itemsize] for a in arrays]
    outer = None
    if len(shape) > KERNEL_DIMS:  # the leading axes loop on the host
        lead = len(shape) - KERNEL_DIMS
        steps = product(*(range(e) for e in shape[:lead]))
        outer = [[sum(i * s for i, s in zip(idx, st[:lead], strict=True)) for st in strides]
                 for idx in steps]
        shape, strides = shape[lead:], [st[lead:] for st in strides]
    sizes = [a.dtype.itemsize for a in arrays]
    index64 = not _fits32(shape, strides, sizes)
    contiguous = [_contiguous(shape, st, size) for st, size in zip(strides, sizes, strict=True)]
    is_aligned = [aligned(a.ptr, a.strides, a.dtype) for a in arrays]
    m = len(outs)
    operands, scalars, j = [], [], m
    for x, dt in zip(inputs, arg_dtypes, strict=True):
        compute = key_of(dt)
        if isinstance(x, RawView):
            operands.append(Operand(key_of(x.dtype), compute, contiguous[j], is_aligned[j]))
            scalars.append(None)
            j += 1
        else:
            operands.append(Operand(None, compute, wide=doubles and compute == "f2"))
            scalars.append("c" if np.dtype(dt).kind == "c" else "r")
    out_keys = tuple((key_of(o.dtype), contiguous[k], is_aligned[k]) for k, o in enumerate(outs))
    tail: list[int] = [n if outer is None else int(np.prod(shape))]
    tail += shape[1:]
    for st, c in zip(strides, contiguous, strict=True):
        if not c:
            tail += st
    return tuple(operands), out_keys, len(shape), index64, tail, outer, tuple(scalars)


def _signature(op: str, out: RawView, inputs: Sequence, arg_dtypes, doubles: bool = True):
    """(signature, constant arguments, host-loop offsets, scalar kinds), or None if empty."""
    nin = NIN.get(op)
    if nin is None:
        raise ValueError(f"no elementwise kernel for {op!r}; known: {', '.join(sorted(NIN))}")
    if len(inputs) != nin or len(arg_dtypes) != nin:
        raise ValueError(f"{op} takes {nin} operand(s) and as many dtypes, got "
                         f"{len(inputs)} and {len(arg_dtypes)}")
    _check_shapes(op, (out,), inputs)
    layout = _layout((out,), inputs, arg_dtypes, doubles)
    if layout is None:
        return None
    operands, ((okey, ocontig, oaligned),), ndim, index64, tail, outer, scalars = layout
    sig = Signature(op, okey, operands, ndim, index64, ocontig, oaligned)
    return sig, tail, outer, scalars


def _check_shapes(what: str, outs: Sequence[RawView], inputs: Sequence) -> None:
    shape = tuple(outs[0].shape)
    for x in (*outs, *inputs):
        if isinstance(x, RawView) and tuple(x.shape) != shape:
            raise ValueError(f"{what}: an operand of shape {tuple(x.shape)} does not have the "
                             f"output's shape {shape} (broadcast it first)")


def _make_plan(device, op: str, out: RawView, inputs: Sequence, arg_dtypes) -> _Plan:
    layout = _signature(op, out, inputs, arg_dtypes, device.info.float64)
    if layout is None:
        return _Plan(None, [], 0, 0, (), None, True)
    sig, tail, outer, scalars = layout
    extent, unit = _by_rows(sig, tail)
    return _shaped_plan(
        device, lambda exact, rows=False: _kernel(device, dataclasses.replace(
            sig, exact=exact, rows=rows, unit_rows=unit if rows else ())),
        tail, outer, scalars, extent)


def _by_rows(k: Signature | Fused, tail: list) -> tuple[int | None, tuple[int, ...]]:
    """Whether the layout of ``k`` runs by rows: ``(the last axis's extent, the arrays whose
    last stride is their item size)``, or ``(None, ())``.  By rows: two or more axes, an
    array read or written through strides, rows of at least :data:`ROWS_MIN`.  ``tail`` is
    the plan's constant arguments: the count, the extents of axes 1.., then each strided
    array's strides in ``k.arrays()`` order."""
    ndim, arrays = k.ndim, k.arrays()
    if ndim < 2 or all(contiguous for _, _, contiguous, _ in arrays) \
            or tail[ndim - 1] < ROWS_MIN:
        return None, ()
    pos, unit = ndim, []
    for a, key, contiguous, _ in arrays:
        if not contiguous:
            if tail[pos + ndim - 1] == item_size(key):
                unit.append(a)
            pos += ndim
    return tail[ndim - 1], tuple(unit)


def _shaped_plan(device, kernel_of, tail: list, outer, scalars: tuple,
                 rows: int | None = None) -> _Plan:
    """The plan launching ``kernel_of(exact, rows)``: without a bounds check (``exact``)
    when whole work-groups cover the elements; by rows of ``rows`` elements when given.

    On CPU devices (launch hint ``"cpu"``) a count of at least ``SPLIT_MIN`` that whole
    groups do not cover runs as two launches: the whole groups without a bounds check, then
    one group with it from the first index they left (backends/_kernels.py, ``split_at``).

    By rows, each row of the last axis takes whole work-groups (the generator's
    ``_rows_index``): a group's items read and write consecutive elements of one row, which
    a device vectorises, where one flat index decomposed per item made every access a
    gather (measured, PoCL 3.1: a 4-operand stencil over a 1022 x 1022 slice of a
    1024 x 1024 float32 array, 6.9 ms flat, 0.55 ms by rows).  The group size is the
    launch's, down to the power of two that a row needs."""
    hint, n = device.impl.launch_hint(device.index), tail[0]
    if rows is not None:
        kernel = kernel_of(False, True)
        local = launch_shape(hint, rows, kernel.max_local)[1]
        while local // 2 >= rows:
            local //= 2
        return _Plan(kernel, tail, rows_items(n, rows, local), local, scalars, outer, False)
    if launch_shape(hint, n)[0] == n:  # whole work-groups cover the elements: no bounds check
        kernel = kernel_of(True)
        gsize, lsize = launch_shape(hint, n, kernel.max_local)
        if gsize == n:
            return _Plan(kernel, tail, gsize, lsize, scalars, outer, False)
    kernel = kernel_of(False)
    gsize, lsize = launch_shape(hint, n, kernel.max_local)
    whole = split_at(hint, n, lsize)
    if whole is not None:  # whole groups unchecked, the last group checked
        exact = kernel_of(True)
        if exact.max_local >= lsize:
            return _Plan(exact, tail, whole, lsize, scalars, outer, False, kernel)
    return _Plan(kernel, tail, gsize, lsize, scalars, outer, False)


def describe(op: str, out: RawView, inputs: Sequence[RawView | np.ndarray],
             arg_dtypes: Sequence[np.dtype], device=None) -> Signature | None:
    """The signature :func:`elementwise` would launch for these arguments (None: empty)
    on ``device`` (None: a device with float64)."""
    doubles = True if device is None else device.info.float64
    layout = _signature(op, out, inputs, [np.dtype(d) for d in arg_dtypes], doubles)
    return None if layout is None else layout[0]


def _kernel(device, sig):
    """The compiled kernel of a :class:`Signature` or :class:`Fused` kernel on a device,
    generated and compiled on first use."""
    key = (device, sig)
    kernel = _kernels.get(key)
    if kernel is None:
        impl = device.impl
        if isinstance(sig, Signature):
            name, types = kernel_name(sig), [p.type for p in params(sig)]
        else:
            name, types = fused_name(sig), [p.type for p in fused_params(sig)]
        kernel = impl.compile_kernel(device.index, source(impl.dialect, [sig]), name, types,
                                     cache=diskcache.default())
        with _lock:
            _kernels[key] = kernel
    return kernel


# Fused kernels (ga.fuse) --------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Body:
    """What a fused kernel computes, apart from its layout: the :class:`Step` s over the
    operands (value ``k`` is operand ``k``, loaded in its argument dtype) and the value
    stored into each output.  Compared by identity: its maker keeps one per trace."""

    steps: tuple[Step, ...]
    results: tuple[int, ...]


def fused(device, body: Body, outs: Sequence[RawView], inputs: Sequence[RawView | np.ndarray],
          arg_dtypes: Sequence[np.dtype]) -> None:
    """Run ``body`` in one kernel: every output and array operand has the outputs' shape
    (broadcast axes have zero strides); a scalar operand is a 0-d NumPy array of its
    argument dtype; an array's argument dtype is its own.  No output overlaps an operand
    except by being exactly the same view.  Enqueued; returns without waiting.  Raises
    ``ValueError`` for a dtype no kernel handles, ``BackendError`` if the platform fails."""
    key = _layout_key([device.impl, device.index, body], (*outs, *inputs), arg_dtypes)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep(key, _make_fused_plan(device, body, outs, inputs, arg_dtypes))
    plan.run(outs, inputs)


def _layout_key(desc: list, views: Sequence, arg_dtypes) -> tuple:
    """What a plan is kept by: ``desc`` (device and what runs), then each view's dtype,
    shape, strides and address alignment (None for a scalar), then the argument dtypes."""
    for x in views:
        if x.__class__ is RawView:
            desc += (x.dtype, x.shape, x.strides, x.ptr & 15)  # shape: a wrong one must raise
        else:
            desc.append(None)
    desc += arg_dtypes
    return tuple(desc)


def _keep(key: tuple, plan: _Plan) -> _Plan:
    """Remember a new layout's plan (a process that makes many one-off layouts starts the
    plans over at :data:`_MAX_PLANS`)."""
    with _lock:
        if len(_plans) >= _MAX_PLANS:
            _plans.clear()
        _plans[key] = plan
    return plan


def _make_fused_plan(device, body: Body, outs, inputs, arg_dtypes) -> _Plan:
    _check_shapes("fused kernel", outs, inputs)
    layout = _layout(outs, inputs, arg_dtypes, device.info.float64)
    if layout is None:
        return _Plan(None, [], 0, 0, (), None, True)
    operands, out_keys, ndim, index64, tail, outer, scalars = layout
    f = Fused(operands, body.steps, body.results, out_keys, ndim, index64)
    extent, unit = _by_rows(f, tail)
    return _shaped_plan(
        device, lambda exact, rows=False: _kernel(device, dataclasses.replace(
            f, exact=exact, rows=rows, unit_rows=unit if rows else ())),
        tail, outer, scalars, extent)


def fused_source(device, body: Body, outs, inputs, arg_dtypes) -> str:
    """The source of the kernel :func:`fused` would launch for these arguments ("" when
    the outputs are empty)."""
    layout = _layout(outs, inputs, arg_dtypes, device.info.float64)
    if layout is None:
        return ""
    operands, out_keys, ndim, index64, tail, *_ = layout
    f = Fused(operands, body.steps, body.results, out_keys, ndim, index64)
    extent, unit = _by_rows(f, tail)
    if extent is not None:
        f = dataclasses.replace(f, rows=True, unit_rows=unit)
    return source(device.impl.dialect, [f])


def elementwise(device, op: str, out: RawView, inputs: Sequence[RawView | np.ndarray],
                arg_dtypes: Sequence[np.dtype]) -> None:
    """``out[i] = convert<out.dtype>(EXPR_op(convert<arg_dtypes[k]>(inputs[k][i]) ...))``.

    ``inputs`` have ``out``'s shape (broadcast axes have zero strides) or are
    0-d NumPy arrays of their ``arg_dtypes`` (passed by value, never
    allocated); ``out`` overlaps no input except by being exactly the same
    view.  Enqueued on the device's queue; returns without waiting.  Raises
    ``ValueError`` for an operation or dtype no kernel handles,
    ``gpuarrays.BackendError`` if the platform fails.
    """
    _plan_of(device, op, out, inputs, arg_dtypes)(out, inputs)


def _plan_of(device, op: str, out: RawView, inputs: Sequence, arg_dtypes) -> _Plan:
    """The plan of this layout, made on first use."""
    # (the back-end object and index rather than the Device: its hash is a Python call)
    key = _layout_key([device.impl, device.index, op], (out, *inputs), arg_dtypes)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep(key, _make_plan(device, op, out, inputs, arg_dtypes))
    return plan


_cl_kernels: dict = {}  # back-end kernel -> its _core.ClKernel (made again after a reset)


def compiled(device, op: str, out: RawView, inputs: Sequence[RawView | np.ndarray],
             arg_dtypes: Sequence[np.dtype]):
    """A ``_core.Launch`` that runs :func:`elementwise` for this layout from C, or None.

    None where the back-end's kernels cannot be launched from C (only OpenCL's can:
    ``compiled_handles``), for an empty result, and for layouts of more than
    :data:`KERNEL_DIMS` dimensions (their leading axes loop on the host).  The launch
    takes the addresses of the result and of the array operands and the values of the
    scalar operands at each call (src/native/core/launch.c); everything else is this
    layout's plan.
    """
    plan = _plan_of(device, op, out, inputs, arg_dtypes)
    handles = getattr(plan.kernel, "compiled_handles", None)
    if plan.empty or plan.outer is not None or handles is None:
        return None
    sources: list[tuple] = [(0, None)]
    for k, kind in enumerate(plan.scalars):
        if kind is None:
            sources.append((1, k))
        else:
            sources.append((2, k))
            if kind == "c":
                sources.append((3, k))
    sources += [(4, v) for v in plan.tail]
    # one ClKernel per cl_kernel: it remembers the argument values it set, so a second one
    # for the same cl_kernel (two threads making it at once) would skip values it did not set
    with _lock:
        cl_kernel, rest = (None if k is None else _cl_kernel(k) for k in (plan.kernel, plan.rest))
    return _core.Launch(cl_kernel, plan.gsize, plan.lsize, tuple(sources), rest)


def _cl_kernel(kernel):
    """The ``_core.ClKernel`` of a back-end kernel, made again after a device reset (under
    ``_lock``)."""
    cl_kernel = _cl_kernels.get(kernel)
    if cl_kernel is None or cl_kernel.stale():
        cl_kernel = _cl_kernels[kernel] = _core.ClKernel(*kernel.compiled_handles())
    return cl_kernel
