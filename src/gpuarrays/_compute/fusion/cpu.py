"""The cpu engine of fused functions: the whole body per cache-sized block, on every core.

A fused function on ``cpu:0`` must not run op by op over whole arrays (each step
a pass over memory and a temporary of the full size).  Here the broadcast
iteration space is cut into blocks of about :data:`BLOCK` elements -- a range of
one axis, whole along the axes after it (``_chunks``), sliced out of every
operand broadcast to the outputs' shape (a view, no copy); on each block every
step runs, in order, as the same NumPy ufunc call the unfused namespace makes
(``cpu_engine.apply_to``) into a scratch array of the block's shape, so the
values are the unfused ones exactly.  Temporaries are one block per step and
thread and stay in the cache; memory sees one pass over the operands and the
outputs.  The blocks are dealt to :data:`THREADS` threads (NumPy releases the GIL
inside its loops); calls of up to ``4 * BLOCK`` elements run whole.  A final
reduction reduces the body's values, computed the same way into one host buffer,
with NumPy's reduction (docs/decisions.md, "Fused functions on the cpu back-end").
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import cpu_engine

__all__ = ["run", "BLOCK", "THREADS"]

BLOCK = 65536
"""Elements per block (measured on the 9-step chain over 4096 x 4096 float32, idle: 8,192: 182 ms, 16,384: 135 ms, 65,536: 49 ms, 262,144: 49 ms -- fewer, longer ufunc calls; the scratch of a step is 256 KiB of float32)."""

THREADS = max(1, min(8, os.cpu_count() or 1))
"""Threads a large fused call is split over (the cores)."""

_PARALLEL_MIN = 1 << 17
"""Elements from which a call is split among threads (below, a thread costs more)."""

_pool: list = []


def _executor() -> ThreadPoolExecutor:
    if not _pool:
        _pool.append(ThreadPoolExecutor(THREADS, thread_name_prefix="gpuarrays-fuse"))
    return _pool[0]


def _step(op, z: np.ndarray, xs: list) -> None:
    """One step into ``z``: the unfused call's ufunc, or NumPy's cast for ``astype``."""
    if op == "astype":
        np.copyto(z, xs[0], casting="unsafe")
    else:
        cpu_engine.apply_to(op, z, xs)


def _chunks(shape: tuple) -> tuple[int, int]:
    """``(d, k)``: the blocks are ``k`` indices of axis ``d`` (whole along the axes after
    it, one index along those before it), about :data:`BLOCK` elements each."""
    inner = 1
    for d in range(len(shape) - 1, -1, -1):
        if inner * shape[d] >= BLOCK:
            return d, max(1, BLOCK // inner)
        inner *= shape[d]
    return 0, shape[0]


def _blocks(shape: tuple) -> list[tuple]:
    """The blocks of ``shape``: tuples of slices (length 1 along the axes before ``d``,
    ``k`` along ``d``; see :func:`_chunks`), every axis kept."""
    d, k = _chunks(shape)
    return [(*(slice(i, i + 1) for i in lead), slice(s, min(s + k, shape[d])))
            for lead in np.ndindex(*shape[:d]) for s in range(0, shape[d], k)]


def _run_blocks(graph, operands: list, outs: list, scalars: dict, blocks: list,
                fold=None) -> None:
    """The body over ``blocks`` (index tuples into the outputs' shape): every operand is
    a broadcast view of that shape, so a block of each is a plain slice.  ``fold(block,
    values)`` takes the result's values of each block instead of ``outs`` (a reduction)."""
    k = len(graph.operands)
    values = [None] * (k + len(graph.steps))
    for i, v in scalars.items():
        values[i] = v
    arrays = [i for i in range(k) if i not in scalars]
    scratch: dict = {}
    shape = graph.shape
    for block in blocks:
        for i in arrays:
            values[i] = operands[i][block]
        bshape = tuple(len(range(*b.indices(n))) for b, n in zip(block, shape, strict=False)) \
            + shape[len(block):]
        for j, (op, args, _, dt) in enumerate(graph.steps):
            z = scratch.get((j, bshape))
            if z is None:
                z = scratch[(j, bshape)] = np.empty(bshape, dt)
            _step(op, z, [values[a] for a in args])
            values[k + j] = z
        if fold is not None:
            fold(block, values[graph.results[0]])
            continue
        for out, r in zip(outs, graph.results, strict=True):
            out[block] = values[r]


def _run_whole(graph, operands: list, outs: list, scalars: dict) -> None:
    """A small call: every step over whole (broadcast) operands, a step that is a result
    written straight into its output."""
    k = len(graph.operands)
    values = operands + [None] * len(graph.steps)
    for i, v in scalars.items():
        values[i] = v
    direct = graph.bodies.get("cpu direct")
    if direct is None:  # step -> the output it may write into
        direct = {}
        for j, r in enumerate(graph.results):
            if r >= k and r - k not in direct and graph.step_shapes[r - k] == graph.shape:
                direct[r - k] = j
        graph.bodies["cpu direct"] = direct
    for j, (op, args, _, dt) in enumerate(graph.steps):
        o = direct.get(j)
        z = outs[o] if o is not None else np.empty(graph.step_shapes[j], dt)
        _step(op, z, [values[a] for a in args])
        values[k + j] = z
    for out, r in zip(outs, graph.results, strict=True):
        if values[r] is not out:
            np.copyto(out, values[r], casting="unsafe")


def run(graph, operands: list, outs: list, scalars: dict) -> None:
    """Compute ``graph`` into ``outs`` (NumPy views of the outputs' memory, the body's
    shape); ``operands[i]`` is a NumPy view of array operand ``i`` (broadcastable to that
    shape), ``scalars[i]`` the value of scalar operand ``i`` (a Python or NumPy scalar,
    passed to the ufuncs as the unfused call passes it)."""
    shape = outs[0].shape
    size = outs[0].size
    if size == 0:
        return
    token = cpu_engine.quiet()
    try:
        if size <= _WHOLE_MAX:
            _run_whole(graph, operands, outs, scalars)
            return
    finally:
        cpu_engine.loud(token)
    full = [o if i in scalars else np.broadcast_to(o, shape) for i, o in enumerate(operands)]
    d, k = _chunks(shape)
    blocks = _blocks(shape)
    parts = 1 if size < _PARALLEL_MIN else min(THREADS, len(blocks))

    def one(t: int) -> None:
        token = cpu_engine.quiet()
        try:
            _run_blocks(graph, full, outs, scalars, blocks[t::parts])
        finally:
            cpu_engine.loud(token)
    if parts == 1:
        one(0)
        return
    for f in [_executor().submit(one, t) for t in range(parts)]:
        f.result()


_WHOLE_MAX = 4 * BLOCK
"""Elements up to which a call runs each step over whole operands (no blocks)."""


_COMBINE = {"sum": np.add, "mean": np.add, "prod": np.multiply, "min": np.minimum,
            "max": np.maximum, "any": np.logical_or, "all": np.logical_and}


def reduce(graph, operands: list, scalars: dict, name: str, axes: tuple, acc_dtype,
           out: np.ndarray) -> None:
    """The body's values reduced over ``axes`` by the row ``name`` into ``out`` (the
    reduction's result, keepdims or not), block by block: each block's values are reduced
    (NumPy's reduction of the row's ufunc) and combined into a keepdims accumulator of
    ``acc_dtype``; ``mean`` divides the sum by the count at the end."""
    shape = graph.shape
    ufunc = _COMBINE[name]
    kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
    full = [o if i in scalars else np.broadcast_to(o, shape) for i, o in enumerate(operands)]
    blocks = _blocks(shape) if shape else [()]
    size = int(np.prod(shape))
    parts = 1 if size < _PARALLEL_MIN else min(THREADS, len(blocks))
    accs = [None] * parts
    kw = {"dtype": acc_dtype} if name in ("sum", "mean", "prod") else {}

    def one(t: int) -> None:
        acc = [None]

        def fold(block: tuple, values: np.ndarray) -> None:
            part = ufunc.reduce(values, axis=axes, keepdims=True, **kw) if axes else values
            at = tuple(slice(0, 1) if i in axes else b for i, b in enumerate(block))
            if acc[0] is None:
                acc[0] = np.empty(kept, part.dtype if name in ("min", "max") else acc_dtype)
                acc[0][...] = _IDENTITY[name](acc[0].dtype)
            np.copyto(acc[0][at], ufunc(acc[0][at], part), casting="unsafe")
        token = cpu_engine.quiet()
        try:
            _run_blocks(graph, full, [], scalars, blocks[t::parts], fold)
        finally:
            cpu_engine.loud(token)
        accs[t] = acc[0]
    if parts == 1:
        one(0)
    else:
        for f in [_executor().submit(one, t) for t in range(parts)]:
            f.result()
    token = cpu_engine.quiet()
    try:
        total = accs[0]
        for a in accs[1:]:
            total = ufunc(total, a)
        if name == "mean":
            total = total / np.prod([shape[i] for i in axes], dtype=np.int64)
        np.copyto(out, total.reshape(out.shape), casting="unsafe")
    finally:
        cpu_engine.loud(token)


def _lowest(dt):
    return -np.inf if dt.kind == "f" else (False if dt.kind == "b" else np.iinfo(dt).min)


def _highest(dt):
    return np.inf if dt.kind == "f" else (True if dt.kind == "b" else np.iinfo(dt).max)


_IDENTITY = {"sum": lambda dt: 0, "mean": lambda dt: 0, "prod": lambda dt: 1,
             "min": _highest, "max": _lowest, "any": lambda dt: False, "all": lambda dt: True}
