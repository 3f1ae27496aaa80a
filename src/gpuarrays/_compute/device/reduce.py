"""Device reductions: one kernel generator for OpenCL C and CUDA C, driven by the table.

A reduction row (``_compute/reductions.py``) gives an identity, a combine (an
elementwise operation whose C expression comes from ``expressions.py``, so
integer sums wrap and NaN propagates exactly as in the elementwise kernels), a
map and a finalize.  The input keeps its strides: its axes split into the kept
ones (one output element each, in C order) and the reduced ones, each group
collapsed; negative strides are flipped and the reduced axes sorted by stride
for order-free reductions.  The strategy depends on the shape
(docs/reductions.md, "Strategies"):

* ``item``: one work-item per output, looping over its segment -- many short
  segments, or the kept axis is the contiguous one (``sum(axis=0)`` of a C array);
* ``group``: one work-group per output, each item striding over the segment,
  then a tree in local memory -- long contiguous segments;
* ``split``: a ``group`` pass where ``G`` work-groups share each output and
  write partials (a pooled buffer, freed at the end), then a ``group`` pass
  over the partials -- a full reduction, or few outputs.

Float sums are compensated (Kahan) inside each work-item and pairwise across
work-items, so they are more accurate than NumPy's pairwise summation; an
infinity or NaN turns the compensation off, so they propagate as in NumPy.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass

import numpy as np

from ..._array.make import new_array
from ..._array.transfer import copy_raw
from . import diskcache
from .generator import _CTYPE, Operand, Signature, _convert, _load, _store, kernel_name, source

__all__ = ["run", "Spec", "program", "LOCAL_SIZES", "plan"]

LOCAL_SIZES = {"cpu": 128, "gpu": 256}
"""Work-group size by launch hint.  PoCL runs a work-group as one loop on one core,
vectorised across work-items, so 128 keeps its tree short; GPUs take 256 (CuPy's 512 and
PyTorch's 512 are for sm_70+ with more registers per thread; 256 keeps occupancy)."""

_GROUPS = {"cpu": 4 * (os.cpu_count() or 2), "gpu": 1024}
"""Work-groups that keep the device busy in a full reduction (cores x 4 on a CPU device, so
load imbalance evens out; about 8 per multiprocessor on a large GPU)."""

_ITEM_MIN_OUTPUTS = {"cpu": 64, "gpu": 2048}
"""Outputs from which one work-item per output fills the device."""

_INT64_MAX = "((i64)0x7fffffffffffffffL)"
_BARRIER = {"opencl": "barrier(CLK_LOCAL_MEM_FENCE)", "cuda": "__syncthreads()"}
_LOCAL = {"opencl": "__local", "cuda": "__shared__"}
_IDS = {"opencl": ("((i64)get_local_id(0))", "((i64)get_group_id(0))", "((i64)get_global_id(0))"),
        "cuda": ("((i64)threadIdx.x)", "((i64)blockIdx.x)",
                 "((i64)blockIdx.x * blockDim.x + threadIdx.x)")}


@dataclass(frozen=True)
class Spec:
    """What one reduction kernel is specialised on.

    ``inp``/``acc``/``out`` are kernel keys (``"f2"``, ``"f4"``...): the input's
    storage, the partials', and what the kernel stores (``acc`` for partials);
    ``strategy`` is ``"item"`` or ``"group"``; ``final`` says whether the kernel
    finalizes and stores the result (else it stores partials); ``pairs_in`` that
    the input is a previous pass's partials (values and, for argmax/argmin,
    indices: nothing is mapped again); ``nk``/``nr`` the collapsed kept and
    reduced dimensions.
    """

    dialect: str
    row: str
    combine: str
    map: str
    finalize: str
    identity: str
    inp: str
    acc: str
    out: str
    strategy: str
    final: bool
    pairs_in: bool
    nk: int
    nr: int
    local: int


def _key(dt: np.dtype) -> str:
    return f"{dt.kind}{dt.itemsize}"


def _size(key: str) -> int:
    return int(key[1:])


def _literal(which: str, key: str) -> str:
    ct = _CTYPE[key]
    if key[0] == "c":
        return f"c_make_{key}({which}, 0)"
    if which in ("0", "1"):
        return f"(({ct}){which})"
    low = which == "lowest"
    if key == "b1":
        return "((u8)0)" if low else "((u8)1)"
    if key[0] == "f":
        return "(-INFINITY)" if low else "INFINITY"
    info = np.iinfo(np.dtype(key))
    v = int(info.min if low else info.max)
    if key[0] == "i" and v < 0:
        return f"(({ct})(-{-(v + 1)}L - 1))"
    return f"(({ct}){v}UL)"


def _combine_sig(spec: Spec) -> Signature:
    """The elementwise signature whose ``_f`` function is the combine (and whose program
    carries the prelude and the helpers the types need)."""
    op = spec.combine if spec.combine not in ("argmax", "argmin") else "maximum"
    return Signature(op, spec.acc, (Operand(spec.inp, spec.acc), Operand(spec.acc, spec.acc)))


def program(impl_dialect, spec: Spec) -> tuple[str, str, list[str]]:
    """(source, kernel name, parameter types) of the kernel of ``spec``."""
    d = impl_dialect
    sig = _combine_sig(spec)
    fn = kernel_name(sig) + "_f"
    name = "red_" + "_".join(str(v) for v in (
        spec.row, spec.inp, spec.acc, spec.out, spec.strategy, int(spec.final),
        int(spec.pairs_in), spec.nk, spec.nr, spec.local))
    arg = spec.combine in ("argmax", "argmin")
    g = d.glob
    A, ct = spec.acc, _CTYPE[spec.acc]
    real = {"c8": "float", "c16": "double", "f4": "float", "f8": "double"}.get(A, "float")
    lid, gid, glo = _IDS[spec.dialect]
    L = spec.local

    params: list[tuple[str, str]] = [("ptr", f"{g}const u8 *px"), ("ptr", f"{g}u8 *pout"),
                                     ("ptr", f"{g}u8 *pidx"), ("ptr", f"{g}const u8 *pm"),
                                     ("ptr", f"{g}const u8 *pin_idx"),
                                     ("i8", "i64 n_out"), ("i8", "i64 n_red"), ("i8", "i64 G")]
    params += [("i8", f"i64 ek{k}") for k in range(spec.nk)]
    params += [("i8", f"i64 sk{k}") for k in range(spec.nk)]
    params += [("i8", f"i64 er{k}") for k in range(spec.nr)]
    params += [("i8", f"i64 sr{k}") for k in range(spec.nr)]
    params.append(("f8" if real == "double" else "f4", f"{real} div"))

    def offset(var: str, idx: str, ext: str, st: str, nd: int) -> str:
        """``var`` = byte offset of C-order index ``idx`` over ``nd`` dims."""
        if nd == 0:
            return f"    i64 {var} = 0;\n"
        if nd == 1:
            return f"    i64 {var} = ({idx}) * {st}0;\n"
        lines = [f"    i64 {var} = 0;\n", f"    {{ i64 q_ = {idx}, c_;\n"]
        for k in range(nd - 1, 0, -1):
            lines.append(f"      c_ = q_ % {ext}{k}; q_ /= {ext}{k}; {var} += c_ * {st}{k};\n")
        lines.append(f"      {var} += q_ * {st}0; }}\n")
        return "".join(lines)

    if spec.pairs_in:
        value = _load(d, A, "px + ko + ro", True)
    else:
        value = _convert(d, spec.inp, "b1" if spec.map == "nonzero" else A,
                         _load(d, spec.inp, "px + ko + ro", True))
        if spec.map == "nonzero" and A != "b1":
            value = _convert(d, "b1", A, value)
        elif spec.map == "deviation":
            value = f"sq_dev({value}, m)"
    kahan = spec.combine == "add" and A[0] == "f"
    if arg:
        better = ">" if spec.combine == "argmax" else "<"
        state = f"typedef struct {{ {ct} v; i64 i; }} S_t;\n"
        helper = (f"DEV S_t take_{name}(S_t a, S_t b) {{\n"
                  f"    int an = a.v != a.v, bn = b.v != b.v;\n"
                  f"    int tb = an ? (bn && b.i < a.i) : (bn || b.v {better} a.v || "
                  f"(b.v == a.v && b.i < a.i));\n"
                  f"    return tb ? b : a;\n}}\n")
        ident = f"S_t acc; acc.v = {_literal(spec.identity, A)}; acc.i = {_INT64_MAX};"
        index = "(*(" + g + "const i64 *)(pin_idx + (ko + ro) / " + str(_size(A)) + " * 8))" \
            if spec.pairs_in else "r"
        step = f"{{ S_t e_; e_.v = {value}; e_.i = {index}; acc = take_{name}(acc, e_); }}"
        join = f"take_{name}"
        stype = "S_t"
    else:
        state = ""
        helper = ""
        ident = f"{ct} acc = {_literal(spec.identity, A)};"
        if kahan:
            ident += f" {ct} comp = 0;"
            step = (f"{{ {ct} y_ = ({value}) - comp; {ct} t_ = acc + y_; "
                    f"comp = isfinite(t_) ? (t_ - acc) - y_ : ({ct})0; acc = t_; }}")
        else:
            step = f"acc = {fn}(acc, {value});"
        join = fn
        stype = ct
    if spec.map == "deviation":
        helper += (f"DEV {ct} sq_dev({ct} x, {ct} m) {{ {ct} e = x - m; return e * e; }}\n")

    # the result
    if not spec.final:
        if arg:
            store = (f"    {_store(d, A, 'pout + (i64)slot * ' + str(_size(A)), True, 'res.v', A)}\n"
                     f"    *({g}i64 *)(pidx + (i64)slot * 8) = res.i;\n")
        else:
            store = f"    {_store(d, A, 'pout + (i64)slot * ' + str(_size(A)), True, 'res', A)}\n"
    else:
        if arg:
            fin = "res.i"
            fkey = "i8"
        elif spec.finalize == "":
            fin, fkey = "res", A
        elif A[0] == "c":
            fin, fkey = f"c_make_{A}(res.x / div, res.y / div)", A
        elif spec.finalize == "std":
            fin, fkey = "sqrt(res / div)", A
        else:  # mean, var
            fin, fkey = "(res / div)", A
        store = f"    {_store(d, spec.out, 'pout + (i64)slot * ' + str(_size(spec.out)), True, fin, fkey)}\n"

    mean = (f"    {ct} m = {_load(d, A, 'pm + o * ' + str(_size(A)), True)};\n"
            if spec.map == "deviation" and not spec.pairs_in else "")
    decl = ", ".join(p for _, p in params)
    if spec.strategy == "item":
        loops, close = [], []
        ind = "    "
        for k in range(spec.nr):
            loops.append(f"{ind}for (i64 r{k} = 0; r{k} < er{k}; ++r{k}) {{\n")
            close.append(f"{ind}}}\n")
            ind += "  "
        ro = " + ".join(f"r{k} * sr{k}" for k in range(spec.nr)) or "0"
        body = (f"{d.kernel} void {name}({decl}) {{\n"
                f"    i64 o = {glo};\n    if (o >= n_out) return;\n"
                f"{offset('ko', 'o', 'ek', 'sk', spec.nk)}{mean}"
                f"    {ident}\n    i64 r = 0;\n"
                + "".join(loops)
                + f"{ind}i64 ro = {ro};\n{ind}{step}\n{ind}++r;\n"
                + "".join(reversed(close))
                + f"    {stype} res = acc;\n    i64 slot = o;\n{store}}}\n")
    else:
        bar = _BARRIER[spec.dialect]
        loc = _LOCAL[spec.dialect]
        body = (f"{d.kernel} void {name}({decl}) {{\n"
                f"    {loc} {stype} buf[{L}];\n"
                f"    i64 lid = {lid}, grp = {gid};\n"
                f"    i64 o = grp / G, g = grp - o * G;\n"
                f"{offset('ko', 'o', 'ek', 'sk', spec.nk)}{mean}"
                f"    {ident}\n"
                f"    for (i64 r = g * {L} + lid; r < n_red; r += G * {L}) {{\n"
                f"{offset('ro', 'r', 'er', 'sr', spec.nr)}"
                f"        {step}\n    }}\n"
                f"    buf[lid] = acc;\n    {bar};\n"
                f"    for (int s = {L // 2}; s > 0; s >>= 1) {{\n"
                f"        if (lid < s) buf[lid] = {join}(buf[lid], buf[lid + s]);\n"
                f"        {bar};\n    }}\n"
                f"    if (lid != 0) return;\n"
                f"    {stype} res = buf[0];\n    i64 slot = {'o' if spec.final else 'grp'};\n"
                f"{store}}}\n")
    text = source(d, [sig]) + state + helper + body
    return text, name, [t for t, _ in params]


# Layouts ---------------------------------------------------------------------------------
def _collapse(dims: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge neighbouring (extent, stride) pairs that address like one axis (C order)."""
    out: list[tuple[int, int]] = []
    for n, s in dims:
        if n == 1:
            continue
        if out and out[-1][1] == n * s:
            out[-1] = (out[-1][0] * n, s)
        else:
            out.append((n, s))
    return out


def plan(shape, strides, axes, ordered: bool):
    """(byte shift of the base, kept dims, reduced dims) of a strided input.

    ``ordered`` keeps the reduced axes in C order (argmax/argmin count through
    them); otherwise negative strides flip and the reduced axes sort by stride.
    """
    shift = 0
    kept = [(shape[k], strides[k]) for k in range(len(shape)) if k not in axes]
    red = [(shape[k], strides[k]) for k in axes]
    if not ordered:
        flipped = []
        for n, s in red:
            if s < 0:
                shift += (n - 1) * s
                s = -s
            flipped.append((n, s))
        red = sorted(flipped, key=lambda t: -t[1])
    return shift, _collapse(kept), _collapse(red)


# Running ---------------------------------------------------------------------------------
_kernels: dict[tuple, object] = {}
_lock = threading.Lock()


def _kernel(device, spec: Spec):
    key = (device, spec)
    k = _kernels.get(key)
    if k is None:
        impl = device.impl
        text, name, types = program(impl.dialect, spec)
        k = impl.compile_kernel(device.index, text, name, types, cache=diskcache.default())
        with _lock:
            _kernels[key] = k
    return k


def _launch(device, spec: Spec, ptrs, n_out, n_red, G, kept, red, div) -> None:
    kernel = _kernel(device, spec)
    values = [*ptrs, n_out, n_red, G, *(n for n, _ in kept), *(s for _, s in kept),
              *(n for n, _ in red), *(s for _, s in red), div]
    L = spec.local
    if spec.strategy == "item":
        kernel.launch(values, -(-n_out // L) * L, L)
    else:
        kernel.launch(values, n_out * G * L, L)


def _aligned(ptr: int, strides, dtype: np.dtype) -> bool:
    unit = dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize
    bits = ptr
    for s in strides:
        bits |= s
    return bits % unit == 0


def run(row, x, axes: tuple, result, count: int, correction: float) -> None:
    """``result[...] = row(x over axes)`` on ``x``'s device (x live, count > 0).

    Partial buffers come from the pool or the active ``ga.cached`` scope and go back
    before this returns (the queue is in order, so later work cannot overtake).
    """
    dev = x._storage.device
    impl = dev.impl
    temps = []
    try:
        raw = x._raw()
        if not _aligned(raw.ptr, raw.strides, raw.dtype):  # an unaligned view: align a copy
            tmp = new_array(x._shape, x._dtype, dev, "device")
            temps.append(tmp)
            copy_raw(tmp, x)
            raw = tmp._raw()
        hint = impl.launch_hint(dev.index)
        dialect = dev.backend
        rd = result._dtype
        from ..reductions import accumulator_dtype  # same layer; reductions imports us

        acc_dt = accumulator_dtype(rd)
        inp = _key(raw.dtype)
        arg = row.combine in ("argmax", "argmin")
        if arg:
            acc_dt = np.dtype(np.uint8) if raw.dtype.kind == "b" else (
                np.dtype(np.float32) if raw.dtype == np.float16 else raw.dtype)
        elif row.map == "nonzero" and rd.kind == "b":
            acc_dt = np.dtype(bool)
        A = _key(acc_dt)
        combine = row.bool_combine if (raw.dtype.kind == "b" and row.bool_combine) else row.combine
        shift, kept, red = plan(raw.shape, raw.strides, set(axes), ordered=arg)
        n_out = math.prod(n for n, _ in kept)
        n_red = math.prod(n for n, _ in red)
        m_ptr = 0
        if row.map == "deviation":
            from ..reductions import REDUCTIONS

            mean = new_array((n_out,), np.dtype(A), dev, "device")
            temps.append(mean)
            run(REDUCTIONS["mean"], x, axes, mean, count, 0.0)
            m_ptr = mean._raw().ptr
        div = float(count) if row.finalize == "mean" else float(max(count - correction, 0))
        L = LOCAL_SIZES[hint]
        inner_red = red[-1][1] if red else 0
        inner_kept = abs(kept[-1][1]) if kept else 0
        if n_out == 1 or n_out < _ITEM_MIN_OUTPUTS[hint] and n_red > 64 * L:
            strategy = "group"
            G = max(1, min(-(-_GROUPS[hint] // n_out), L, -(-n_red // (L * 16))))
        elif n_red <= 16 or (inner_kept < abs(inner_red) and n_out >= _ITEM_MIN_OUTPUTS[hint]):
            strategy, G = "item", 1
        else:
            strategy, G = "group", 1
        out_key = _key(rd)
        common = dict(dialect=dialect, row=row.name, combine=combine, map=row.map,
                      finalize=row.finalize, identity=row.identity, inp=inp, acc=A, local=L)
        out_ptr = result._raw().ptr
        if G == 1:
            spec = Spec(**common, out=out_key, strategy=strategy, final=True, pairs_in=False,
                        nk=len(kept), nr=len(red))
            _launch(dev, spec, (raw.ptr + shift, out_ptr, out_ptr, m_ptr or out_ptr, out_ptr),
                    n_out, n_red, 1,
                    kept, red, div)
            return
        part = new_array((n_out * G,), np.dtype(A), dev, "device")
        temps.append(part)
        pidx = 0
        if arg:
            idx = new_array((n_out * G,), np.dtype(np.int64), dev, "device")
            temps.append(idx)
            pidx = idx._raw().ptr
        spec = Spec(**common, out=A, strategy="group", final=False, pairs_in=False,
                    nk=len(kept), nr=len(red))
        _launch(dev, spec, (raw.ptr + shift, part._raw().ptr, pidx or out_ptr, m_ptr or out_ptr,
                            out_ptr), n_out, n_red, G,
                kept, red, div)
        size = _size(A)
        spec2 = Spec(**{**common, "inp": A, "map": "x"}, out=out_key, strategy="group",
                     final=True, pairs_in=True, nk=1, nr=1)
        _launch(dev, spec2, (part._raw().ptr, out_ptr, out_ptr, out_ptr, pidx or out_ptr), n_out,
                G, 1, [(n_out, G * size)], [(G, size)], div)
    finally:
        for t in temps:
            t.free()

