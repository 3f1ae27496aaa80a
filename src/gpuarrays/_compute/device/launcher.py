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
from ...backends._kernels import collapse, launch_shape
from ...backends.base import RawView
from . import diskcache
from .expressions import NIN
from .generator import Operand, Signature, kernel_name, key_of, params, source

__all__ = ["elementwise", "compiled", "describe", "launch_shape", "clear", "KERNEL_DIMS",
           "INDEX32_LIMIT"]

KERNEL_DIMS = 8
"""Most collapsed dimensions a kernel takes (its layout travels by value; OpenCL
guarantees only 1024 bytes of arguments).  Beyond, the leading ones loop on the host."""

INDEX32_LIMIT = 2**31 - 1
"""Largest element count and byte extent a 32-bit-index kernel handles (a test lowers it)."""


# The plan of one layout ----------------------------------------------------------------------
class _Plan:
    """What a call with one key needs: the kernel, the constant arguments, the launch shape."""

    __slots__ = ("kernel", "tail", "gsize", "lsize", "scalars", "outer", "empty")

    def __init__(self, kernel, tail: list, gsize: int, lsize: int, scalars: tuple,
                 outer: list | None, empty: bool) -> None:  # fmt: skip
        self.kernel, self.tail, self.gsize, self.lsize = kernel, tail, gsize, lsize
        self.scalars = scalars  # per operand: None (array), "r" (real scalar) or "c" (complex)
        self.outer = outer  # per host-loop step: the byte offsets of (out, array operands...)
        self.empty = empty

    def __call__(self, out: RawView, inputs: Sequence) -> None:
        if self.empty:
            return
        values = [out.ptr]
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
            self.kernel.launch(values, self.gsize, self.lsize)
            return
        ptr_slots = [0] + [1 + i + sum(1 for k in self.scalars[:i] if k == "c")
                           for i, k in enumerate(self.scalars) if k is None]
        base = [values[s] for s in ptr_slots]
        for offsets in self.outer:
            for s, b, o in zip(ptr_slots, base, offsets, strict=True):
                values[s] = b + o
            self.kernel.launch(values, self.gsize, self.lsize)


_MAX_PLANS = 4096
_plans: dict[tuple, _Plan] = {}
_kernels: dict[tuple, object] = {}  # (device, signature) -> the back-end's compiled kernel
_lock = threading.Lock()


def clear() -> None:
    """Forget every plan and kernel handle (the back-ends keep their compiled programs)."""
    with _lock:
        _plans.clear()
        _kernels.clear()
        _cl_kernels.clear()


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


def _signature(op: str, out: RawView, inputs: Sequence, arg_dtypes):
    """(signature, constant arguments, host-loop offsets, scalar kinds), or None if empty."""
    nin = NIN.get(op)
    if nin is None:
        raise ValueError(f"no elementwise kernel for {op!r}; known: {', '.join(sorted(NIN))}")
    if len(inputs) != nin or len(arg_dtypes) != nin:
        raise ValueError(f"{op} takes {nin} operand(s) and as many dtypes, got "
                         f"{len(inputs)} and {len(arg_dtypes)}")
    for x in inputs:
        if isinstance(x, RawView) and tuple(x.shape) != tuple(out.shape):
            raise ValueError(f"{op}: an operand of shape {tuple(x.shape)} does not have the "
                             f"output's shape {tuple(out.shape)} (broadcast it first)")
    arrays = [out] + [x for x in inputs if isinstance(x, RawView)]
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
    operands, scalars, j = [], [], 1
    for x, dt in zip(inputs, arg_dtypes, strict=True):
        compute = key_of(dt)
        if isinstance(x, RawView):
            operands.append(Operand(key_of(x.dtype), compute, contiguous[j], is_aligned[j]))
            scalars.append(None)
            j += 1
        else:
            operands.append(Operand(None, compute))
            scalars.append("c" if np.dtype(dt).kind == "c" else "r")
    sig = Signature(op, key_of(out.dtype), tuple(operands), len(shape), index64,
                    contiguous[0], is_aligned[0])
    tail: list[int] = [n if outer is None else int(np.prod(shape))]
    tail += shape[1:]
    for st, c in zip(strides, contiguous, strict=True):
        if not c:
            tail += st
    return sig, tail, outer, tuple(scalars)


def _make_plan(device, op: str, out: RawView, inputs: Sequence, arg_dtypes) -> _Plan:
    layout = _signature(op, out, inputs, arg_dtypes)
    if layout is None:
        return _Plan(None, [], 0, 0, (), None, True)
    sig, tail, outer, scalars = layout
    hint, n = device.impl.launch_hint(device.index), tail[0]
    if launch_shape(hint, n)[0] == n:  # whole work-groups cover the elements: no bounds check
        kernel = _kernel(device, dataclasses.replace(sig, exact=True))
        gsize, lsize = launch_shape(hint, n, kernel.max_local)
        if gsize == n:
            return _Plan(kernel, tail, gsize, lsize, scalars, outer, False)
    kernel = _kernel(device, sig)
    gsize, lsize = launch_shape(hint, n, kernel.max_local)
    return _Plan(kernel, tail, gsize, lsize, scalars, outer, False)


def describe(op: str, out: RawView, inputs: Sequence[RawView | np.ndarray],
             arg_dtypes: Sequence[np.dtype]) -> Signature | None:
    """The signature :func:`elementwise` would launch for these arguments (None: empty)."""
    layout = _signature(op, out, inputs, [np.dtype(d) for d in arg_dtypes])
    return None if layout is None else layout[0]


def _kernel(device, sig: Signature):
    """The compiled kernel of a signature on a device, generated and compiled on first use."""
    key = (device, sig)
    kernel = _kernels.get(key)
    if kernel is None:
        impl = device.impl
        text = source(impl.dialect, [sig])
        kernel = impl.compile_kernel(device.index, text, kernel_name(sig),
                                     [p.type for p in params(sig)], cache=diskcache.default())
        with _lock:
            _kernels[key] = kernel
    return kernel


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
    desc = [device.impl, device.index, op, out.dtype, out.shape, out.strides, out.ptr & 15]
    for x in inputs:
        if x.__class__ is RawView:
            desc += (x.dtype, x.shape, x.strides, x.ptr & 15)  # shape: a wrong one must raise
        else:
            desc.append(None)
    desc += arg_dtypes
    key = tuple(desc)
    plan = _plans.get(key)
    if plan is None:
        plan = _make_plan(device, op, out, inputs, arg_dtypes)
        with _lock:
            if len(_plans) >= _MAX_PLANS:  # many one-off layouts: start over
                _plans.clear()
            _plans[key] = plan
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
        cl_kernel = _cl_kernels.get(plan.kernel)
        if cl_kernel is None or cl_kernel.stale():
            cl_kernel = _cl_kernels[plan.kernel] = _core.ClKernel(*handles())
    return _core.Launch(cl_kernel, plan.gsize, plan.lsize, tuple(sources))
