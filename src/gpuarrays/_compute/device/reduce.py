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

The element reduced is the value of a body (a ``generator.Fused``: ``ga.fuse``
reduces an elementwise body without storing it, :func:`run_fused`): each array
operand has its own base and strides over the same full shape (zero strides on
broadcast axes) and takes its byte offset from one decomposition of the index;
dims collapse only where they do for every operand, a reduced axis flips only
where no operand has a positive stride along it, and the reduced axes sort by the
strides of the operand that reads the most elements.  An unfused reduction is the
body of one operand read as is (:func:`plain`): one code path.

Float sums are compensated (Kahan) inside each work-item and pairwise across
work-items, so they are more accurate than NumPy's pairwise summation; an
infinity or NaN turns the compensation off, so they propagate as in NumPy.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from dataclasses import dataclass

import numpy as np

from ..._array.make import new_array
from ...backends.base import RawView
from . import diskcache
from .generator import (_CTYPE, _DTYPE_OF, Fused, Operand, Signature, _convert, _load, _store,
                        body_function, fused_name, fused_of, kernel_name, prelude, step_functions)
from .launcher import aligned as _aligned

__all__ = ["run", "run_fused", "Spec", "program", "LOCAL_SIZES", "plan", "plan_joint", "plain"]

LOCAL_SIZES = {"cpu": 1, "gpu": 256}
"""Work-group size of the ``group`` strategy by launch hint.  PoCL runs a work-group as
one loop on one core, so on a CPU device a group is one work-item reading a contiguous
chunk with ``UNROLL`` independent accumulators (the compiler vectorises them); GPUs take
256 threads reading coalesced (CuPy uses 512 on recent GPUs, 256 on HIP)."""

UNROLL = {"cpu": 8, "gpu": 4}
"""Independent accumulators per work-item in the ``group`` strategy."""

BLOCK = (64, 4096)
"""Outputs per work-item in the ``block`` strategy (CPU devices, kept axis contiguous): a
power of two in this range covering the outputs.  Work-items split the rows instead and
stream them whole (NumPy's order for ``sum(axis=0)``), writing partials: measured on
``max(axis=0)`` of 4096x4096 float32 here, blocks of 64/256/1024 columns per work-item
took 47/37/39 ms (each row a new page for every work-item), one work-item for all 4096
columns 12 ms."""

BLOCK_ROWS = 8
"""Rows the ``block`` strategy takes per step, in row order: each output's accumulator stays
in a register over them, and an operand broadcast along the rows (``m`` in
``sum((x - m) ** 2, axis=0)``) is read once.  Measured on ``sum(axis=0)`` of 4096x4096
float32 here (process CPU time, medians of 25 interleaved calls): one row per step 5.6 ms
plain / 8.5 ms fused with ``m`` (the accumulators and ``m``, 16 KiB each, no longer fit the
L1 cache beside the rows), 4 rows 4.1 / 5.0 ms, 8 rows 3.0 / 3.4 ms."""

BLOCK_STEPS = 16
"""Steps of the ``UNROLL`` accumulators per leaf of a float sum (NumPy's leaves: 8 x 16)."""

_GROUPS = {"cpu": 4 * (os.cpu_count() or 2), "gpu": 1024}
"""Work-groups that keep the device busy in a full reduction (cores x 4 on a CPU device, so
load imbalance evens out; about 8 per multiprocessor on a large GPU).  Measured on the sum of
16 M float32 on PoCL here, interleaved with NumPy on the loaded 2-core machine: 1, 2, 8, 32,
128 or 512 work-groups ran alike within the noise (medians 10-15 ms, fastest runs 3.1-3.5 ms
against NumPy's 2.6 ms); the second pass over the partials costs about 45 us."""

_ITEM_MIN_OUTPUTS = {"cpu": 64, "gpu": 2048}
"""Outputs from which one work-item per output (or per block) fills the device."""

ITEM_LOCAL = {"cpu": 64, "gpu": 256}
"""Work-group size of the ``item`` strategy (one work-item per output)."""

PARTIALS = {"cpu": "item", "gpu": "group"}
"""Strategy of the pass over a split reduction's partials (``G`` per output, contiguous): one
work-item per output on a CPU device (``G`` is a few dozen at most), a group on a GPU."""


def choose(hint: str, kept: list, red: list, itemsize: int) -> tuple[str, int, int, int]:
    """(strategy, groups per output, local size, unroll) for collapsed kept/reduced dims.

    The one place that picks a reduction's shape by device type (with the constants above;
    the scans reuse them).  On a CPU device (PoCL: a work-group is a loop on one core, and
    work-groups spread over the cores) every strategy has each work-item read contiguous
    memory: ``sum(axis=1)`` of a C array one work-group of one work-item per row, eight
    accumulators over the row; ``sum(axis=0)`` blocks of whole rows (``BLOCK``); a full
    reduction ``_GROUPS`` contiguous chunks.  Several work-items per group reading strided
    (consecutive work-items on consecutive addresses) measured 39-50 ms for the sum of 16 M
    float32 here against 4.5 ms for one work-item per chunk (medians): PoCL runs each
    work-item's whole loop before the next one's.  With these shapes the kernels use 1.1-1.4x
    NumPy's CPU time, most of the excess from 4 KiB pages against NumPy's huge pages
    (benchmarks/reduce.py --per-call; docs/reductions.md, "Speed").
    """
    n_out = math.prod(n for n, _ in kept)
    n_red = math.prod(n for n, _ in red)
    L, U = LOCAL_SIZES[hint], UNROLL[hint]
    inner_red = abs(red[-1][1]) if red else 0
    inner_kept = abs(kept[-1][1]) if kept else 0
    many = n_out >= _ITEM_MIN_OUTPUTS[hint]
    if n_red <= 16 or (many and inner_kept < inner_red):
        if hint == "cpu" and len(kept) == 1 and n_red > 16:
            B = max(BLOCK[0], min(BLOCK[1], 1 << (n_out - 1).bit_length()))
            blocks = -(-n_out // B)
            G = max(1, min(-(-_GROUPS[hint] // blocks), n_red // 64, 1024))
            return "block", G, 1, B
        return "item", 1, ITEM_LOCAL[hint], 1
    if many:
        return "group", 1, L, U
    per = 4096 if hint == "cpu" else L * U * 16  # elements a group should get at least
    G = max(1, min(-(-_GROUPS[hint] // n_out), -(-n_red // per), 1024))
    return "group", G, L, U


PAD = 4
"""Kept (and, looping per work-item, reduced) axes a kernel is compiled for at least."""

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

    ``body`` is the fused body whose value is the element (``None``: :func:`plain`
    of ``inp``, the element read as is), ``inp`` its value's key.  ``walk`` says, per
    array operand of the body, how it is addressed along the dimension the strategy walks
    with a compile-time step (the ``block`` strategy's kept dim, the ``group`` strategy's
    only reduced dim): ``c`` contiguous, ``0`` broadcast (stride 0), ``s`` through its
    stride; ``""`` means ``c`` if ``contiguous`` else ``s`` for the one operand.  ``fixed``
    marks (``1``), per array operand, one broadcast along every reduced dim: its address
    does not move over a segment (``""``: none).
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
    unroll: int = 1
    contiguous: bool = False
    body: Fused | None = None
    walk: str = ""
    fixed: str = ""


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


@functools.lru_cache(maxsize=64)
def plain(key: str, aligned: bool = True) -> Fused:
    """The body of an unfused reduction: one array operand of storage ``key``, read as is."""
    return Fused((Operand(key, key, aligned=aligned),), (), (0,), ())


def _walk_of(spec: Spec, n_arrays: int) -> str:
    return spec.walk or ("c" if spec.contiguous else "s") * n_arrays


def program(impl_dialect, spec: Spec) -> tuple[str, str, list[str]]:
    """(source, kernel name, parameter types) of the kernel of ``spec``.

    The element a kernel reduces is the value of the body (:func:`generator.body_function`)
    at the element's address in every array operand: array operand ``k`` has its own base
    ``px{k}`` and strides ``sk{k}_d`` / ``sr{k}_d`` over the kept and reduced dimensions
    they share (extents ``ek{d}`` / ``er{d}``), so one decomposition of the index gives
    every operand's byte offset.  Parameters: the body's operands (array addresses and
    scalar values, in operand order), ``pout``, ``pidx``, ``pm``, ``pin_idx``, ``n_out``,
    ``n_red``, ``G``, the kept extents, the kept strides (per array operand), the reduced
    extents, the reduced strides (per array operand), ``div``.
    """
    d = impl_dialect
    sig = _combine_sig(spec)
    fn = kernel_name(sig) + "_f"
    body = spec.body if spec.body is not None else plain(spec.inp)
    arrays = [k for k, o in enumerate(body.operands) if o.storage is not None]
    sizes = {k: _size(body.operands[k].storage) for k in arrays}
    walk = dict(zip(arrays, _walk_of(spec, len(arrays)), strict=True))
    fixed = {k for k, f in zip(arrays, spec.fixed, strict=False) if f == "1"}
    parts = [spec.row, spec.inp, spec.acc, spec.out, spec.strategy, int(spec.final),
             int(spec.pairs_in), spec.nk, spec.nr, spec.local, spec.unroll,
             "".join(walk.values()) + ("_" + spec.fixed if fixed else "")]
    if spec.body is not None:
        parts.append(fused_name(spec.body)[3:15])
    name = "red_" + "_".join(str(v) for v in parts)
    arg = spec.combine in ("argmax", "argmin")
    g = d.glob
    A, ct = spec.acc, _CTYPE[spec.acc]
    real = {"c8": "float", "c16": "double", "f4": "float", "f8": "double"}.get(A, "float")
    lid, gid, glo = _IDS[spec.dialect]
    L, U = spec.local, spec.unroll

    vfn = name + "_v"
    body_src, vkey, body_params = body_function(d, body, vfn)
    if vkey != spec.inp:
        raise ValueError(f"the body's value is {vkey}, the spec reduces {spec.inp}")
    params: list[tuple[str, str]] = []
    call_args: list[str] = []  # the body's parameters; array k's address is "@k"
    for t, decl in body_params:
        if t == "ptr":
            k = int(decl.rsplit("*a", 1)[1])
            params.append((t, f"{g}const u8 *px{k}"))
            call_args.append(f"@{k}")
        else:
            params.append((t, decl))
            call_args.append(decl.rsplit(" ", 1)[1])
    params += [("ptr", f"{g}u8 *pout"), ("ptr", f"{g}u8 *pidx"), ("ptr", f"{g}const u8 *pm"),
               ("ptr", f"{g}const u8 *pin_idx"),
               ("i8", "i64 n_out"), ("i8", "i64 n_red"), ("i8", "i64 G")]
    params += [("i8", f"i64 ek{j}") for j in range(spec.nk)]
    params += [("i8", f"i64 sk{k}_{j}") for k in arrays for j in range(spec.nk)]
    params += [("i8", f"i64 er{j}") for j in range(spec.nr)]
    params += [("i8", f"i64 sr{k}_{j}") for k in arrays for j in range(spec.nr)]
    params.append(("f8" if real == "double" else "f4", f"{real} div"))

    def offsets(var: str, idx: str, ext: str, st: str, nd: int) -> str:
        """``i64 {var}{k}`` = array ``k``'s byte offset of C-order index ``idx`` over ``nd``
        dims (one decomposition for every array operand)."""
        still = fixed if st == "sr" else set()  # a fixed operand's reduced offset is 0
        moving = [k for k in arrays if k not in still]
        zero = "".join(f"i64 {var}{k} = 0; " for k in arrays if k in still)
        if not moving or nd == 0:
            return zero + " ".join(f"i64 {var}{k} = 0;" for k in moving)
        if nd == 1:
            return zero + " ".join(f"i64 {var}{k} = ({idx}) * {st}{k}_0;" for k in moving)
        out = [zero, " ".join(f"i64 {var}{k} = 0;" for k in moving), f" {{ i64 q_ = {idx}, c_;"]
        for j in range(nd - 1, 0, -1):
            out.append(f" c_ = q_ % {ext}{j}; q_ /= {ext}{j};")
            out += [f" {var}{k} += c_ * {st}{k}_{j};" for k in moving]
        out += [f" {var}{k} += q_ * {st}{k}_0;" for k in moving]
        out.append(" }")
        return "".join(out)

    def walked(k: int, idx: str, st: str) -> str:
        """Array ``k``'s byte offset along the walked dimension (``walk``: ``c`` its element
        size, ``0`` a broadcast, ``s`` its stride parameter)."""
        w = walk[k]
        if w == "0":
            return "0"
        return f"({idx}) * {sizes[k] if w == 'c' else f'{st}{k}_0'}"

    def value(offs: dict) -> str:
        """The element at byte offsets ``offs`` (per array operand), as the accumulator takes it."""
        args = (f"px{a[1:]} + {offs[int(a[1:])]}" if a[0] == "@" else a for a in call_args)
        v = f"{vfn}({', '.join(args)})"
        if spec.pairs_in:
            return v
        v = _convert(d, spec.inp, "b1" if spec.map == "nonzero" else A, v)
        if spec.map == "nonzero" and A != "b1":
            v = _convert(d, "b1", A, v)
        elif spec.map == "deviation":
            v = f"sq_dev({v}, m)"
        return v

    def both(kvar: str, rvar: str) -> dict:
        return {k: f"{kvar}{k} + {rvar}{k}" for k in arrays}

    kahan = spec.combine == "add" and A[0] == "f"
    fast_nan = spec.combine in ("maximum", "minimum") and A[0] == "f"
    helper = ""
    if arg:
        better = ">" if spec.combine == "argmax" else "<"
        stype = "S_t"
        helper = (f"typedef struct {{ {ct} v; i64 i; }} S_t;\n"
                  f"DEV S_t take_{name}(S_t a, S_t b) {{\n"
                  f"    int an = a.v != a.v, bn = b.v != b.v;\n"
                  f"    int tb = an ? (bn && b.i < a.i) : (bn || b.v {better} a.v || "
                  f"(b.v == a.v && b.i < a.i));\n"
                  f"    return tb ? b : a;\n}}\n")
        join = f"take_{name}"

        def init(acc: str) -> str:
            return f"{acc}.v = {_literal(spec.identity, A)}; {acc}.i = {_INT64_MAX};"

        def step(acc: str, offs: dict, r: str) -> str:
            index = (f"(*({g}const i64 *)(pin_idx + ({offs[0]}) / {_size(A)} * 8))"
                     if spec.pairs_in else r)
            return (f"{{ S_t e_; e_.v = {value(offs)}; e_.i = {index}; "
                    f"{acc} = take_{name}({acc}, e_); }}")
    else:
        stype = ct
        join = fn

        def init(acc: str) -> str:
            return f"{acc} = {_literal(spec.identity, A)};"

        def step(acc: str, offs: dict, r: str) -> str:
            if fast_nan and spec.strategy == "block":
                # one NaN flag for the work-item, not one per output (a block has up to
                # 4096); a NaN seen marks its outputs in a second sweep (block_nan below)
                cmp = ">" if spec.combine == "maximum" else "<"
                return (f"{{ {ct} v_ = {value(offs)}; {acc} = v_ {cmp} {acc} ? v_ : {acc}; "
                        f"nany |= v_ != v_; }}")
            if fast_nan:  # a compare-and-select the compiler vectorises, NaN noted aside
                # (a NaN kept in the accumulator instead, ``(v > acc) | (v != v) ? v : acc``,
                # took 5.3 ms against these flags' 2.7 ms on 16 M contiguous float32 here)
                flag = acc.replace("acc", "nf")
                return (f"{{ {ct} v_ = {value(offs)}; {acc} = v_ {'>' if spec.combine == 'maximum' else '<'} "
                        f"{acc} ? v_ : {acc}; {flag} |= v_ != v_; }}")
            return f"{acc} = {fn}({acc}, {value(offs)});"
    if spec.map == "deviation":
        helper += f"DEV {ct} sq_dev({ct} x, {ct} m) {{ {ct} e = x - m; return e * e; }}\n"

    def finish(res: str) -> str:
        """Statement storing ``res`` (a partial) for output ``slot``."""
        if not spec.final:
            at = f"pout + slot * {_size(A)}"
            if arg:
                return (f"{_store(d, A, at, True, res + '.v', A)} "
                        f"*({g}i64 *)(pidx + slot * 8) = {res}.i;")
            return _store(d, A, at, True, res, A)
        if arg:
            fin, fkey = f"{res}.i", "i8"
        elif spec.finalize == "":
            fin, fkey = res, A
        elif A[0] == "c":
            fin, fkey = f"c_make_{A}({res}.x / div, {res}.y / div)", A
        elif spec.finalize == "std":
            fin, fkey = f"sqrt({res} / div)", A
        else:  # mean, var
            fin, fkey = f"({res} / div)", A
        return _store(d, spec.out, f"pout + slot * {_size(spec.out)}", True, fin, fkey)

    def mean(o: str) -> str:
        if spec.map != "deviation" or spec.pairs_in:
            return ""
        return f"{ct} m = {_load(d, A, f'pm + ({o}) * {_size(A)}', True)};"

    def red_loops(body: str, ind: str) -> str:
        """Nested loops over the reduced dims (``ro{k}`` the byte offsets, ``r`` the C index)."""
        lines, close = [], []
        for j in range(spec.nr):
            lines.append(f"{ind}for (i64 r{j} = 0; r{j} < er{j}; ++r{j}) {{\n")
            close.append(f"{ind}}}\n")
            ind += "  "
        ro = "".join(f"{ind}i64 ro{k} = "
                     + ((" + ".join(f"r{j} * sr{k}_{j}" for j in range(spec.nr)) or "0")
                        if k not in fixed else "0") + ";\n"
                     for k in arrays)
        return ("".join(lines) + f"{ro}{ind}{body}\n{ind}++r;\n" + "".join(reversed(close)))

    def kahan_add(v: str) -> str:
        """Add ``v`` to the compensated total (``plain`` keeps the plain one: inf and NaN
        propagate through it, where the compensation would turn inf into NaN)."""
        return (f"{{ {ct} y_ = ({v}) - comp; {ct} t_ = tot + y_; comp = (t_ - tot) - y_; "
                f"tot = t_; plain += ({v}); }}")

    flagged = fast_nan and spec.strategy != "block"

    def flags(n: int) -> str:
        return f" int nf[{n}]; for (int u = 0; u < {n}; ++u) nf[u] = 0;" if flagged else ""

    def nan_in(u: str) -> str:
        return f"if (nf[{u}]) acc[{u}] = NAN;" if flagged else ""

    decl = ", ".join(p for _, p in params)
    kept_at = {k: f"{walked(k, 'o', 'sk')} + ro{k}" for k in arrays}  # block: kept dim walked
    if spec.strategy == "item":
        kbody = (f"{d.kernel} void {name}({decl}) {{\n"
                 f"    i64 o = {glo};\n    if (o >= n_out) return;\n"
                 f"    {offsets('ko', 'o', 'ek', 'sk', spec.nk)}\n    {mean('o')}\n"
                 f"    {stype} acc[1];{flags(1)}\n"
                 f"    {init('acc[0]')}\n    i64 r = 0;\n"
                 + red_loops(step("acc[0]", both("ko", "ro"), "r"), "    ")
                 + f"    {{ i64 slot = o; {nan_in('0')} {finish('acc[0]')} }}\n}}\n")
    elif spec.strategy == "block":  # U consecutive outputs x a chunk of rows (nk == 1)
        block_nan = ""
        if fast_nan:  # rare: a NaN was seen, mark the outputs it belongs to
            block_nan = (f"    if (nany) for (i64 r = start; r < end; ++r) {{\n"
                         f"        {offsets('ro', 'r', 'er', 'sr', spec.nr)}\n"
                         f"        for (int u = 0; u < nb; ++u) {{ i64 o = o0 + u; "
                         f"{ct} v_ = {value(kept_at)}; if (v_ != v_) acc[u] = v_; }}\n    }}\n")
        slot = "o0 + u" if spec.final else "(o0 + u) * G + g"
        # BLOCK_ROWS rows at a time: each output's accumulator (and an operand broadcast
        # along the rows) is read and written once per BLOCK_ROWS elements, in row order
        R_ = BLOCK_ROWS
        rows = ""
        if R_ > 1:
            seq = " ".join(step("a_", {k: f"{walked(k, 'o', 'sk')} + rq{j}_{k}" for k in arrays},
                                f"(r + {j})") for j in range(R_))
            rows = (f"    for (; r + {R_} <= end; r += {R_}) {{\n"
                    + "".join(f"        {offsets(f'rq{j}_', f'r + {j}', 'er', 'sr', spec.nr)}\n"
                              for j in range(R_))
                    + f"        for (int u = 0; u < nb; ++u) {{ i64 o = o0 + u; {mean('o')} "
                    f"{stype} a_ = acc[u]; {seq} acc[u] = a_; }}\n    }}\n")
        kbody = (f"{d.kernel} void {name}({decl}) {{\n"
                 f"    i64 w = {glo}, b = w / G, g = w - b * G, o0 = b * {U};\n"
                 f"    if (o0 >= n_out) return;\n"
                 f"    int nb = n_out - o0 < {U} ? (int)(n_out - o0) : {U};\n"
                 f"    i64 chunk = (n_red + G - 1) / G, start = g * chunk;\n"
                 f"    i64 end = start + chunk < n_red ? start + chunk : n_red;\n"
                 f"    {stype} acc[{U}];{' int nany = 0;' if fast_nan else ''}\n"
                 f"    for (int u = 0; u < {U}; ++u) {{ {init('acc[u]')} }}\n"
                 f"    i64 r = start;\n"
                 + rows +
                 f"    for (; r < end; ++r) {{\n"
                 f"        {offsets('ro', 'r', 'er', 'sr', spec.nr)}\n"
                 f"        for (int u = 0; u < nb; ++u) {{ i64 o = o0 + u; {mean('o')} "
                 f"{step('acc[u]', kept_at, 'r')} }}\n    }}\n"
                 + block_nan +
                 f"    for (int u = 0; u < nb; ++u) {{ i64 slot = {slot}; {nan_in('u')} "
                 f"{finish('acc[u]')} }}\n"
                 f"}}\n")
    else:  # group: G groups share each output, each a contiguous chunk of its segment
        bar = _BARRIER[spec.dialect]
        loc = _LOCAL[spec.dialect]
        tree = ""
        if L > 1:
            tree = (f"    buf[lid] = acc[0];\n    {bar};\n"
                    f"    for (int s = {L // 2}; s > 0; s >>= 1) {{\n"
                    f"        if (lid < s) buf[lid] = {join}(buf[lid], buf[lid + s]);\n"
                    f"        {bar};\n    }}\n"
                    f"    if (lid != 0) return;\n    acc[0] = buf[0];\n")

        def ro(r: str) -> str:
            if spec.nr == 1:  # the walked dimension
                return " ".join(f"i64 ro{k} = {walked(k, r, 'sr')};" for k in arrays)
            return offsets("ro", r, "er", "sr", spec.nr)
        at = both("ko", "ro")
        if kahan:
            # NumPy's leaves (U accumulators, BLOCK_STEPS steps, joined pairwise), then a
            # compensated total over the leaves: at least as accurate as pairwise summation
            S = BLOCK_STEPS
            loop = (f"    {ct} tot = 0, comp = 0, plain = 0;\n"
                    f"    i64 r = start + lid;\n"
                    f"    for (; r + {(U * S - 1) * L} < end; r += {U * S * L}) {{\n"
                    f"        for (int u = 0; u < {U}; ++u) acc[u] = 0;\n"
                    f"        for (int k = 0; k < {S}; ++k)\n"
                    f"            for (int u = 0; u < {U}; ++u) {{ i64 rr = r + (k * {U} + u) * {L}; "
                    f"{ro('rr')} acc[u] += {value(at)}; }}\n"
                    f"        for (int w = {U // 2}; w > 0; w >>= 1)\n"
                    f"            for (int u = 0; u < w; ++u) acc[u] += acc[u + w];\n"
                    f"        {kahan_add('acc[0]')}\n    }}\n"
                    f"    for (; r < end; r += {L}) {{ {ro('r')} {ct} v_ = {value(at)}; "
                    f"{kahan_add('v_')} }}\n"
                    f"    acc[0] = isfinite(plain) ? tot - comp : plain;\n")
        else:
            S = BLOCK_STEPS
            loop = (f"    for (int u = 0; u < {U}; ++u) {{ {init('acc[u]')} }}\n"
                    f"    i64 r = start + lid;\n"
                    f"    for (; r + {(U * S - 1) * L} < end; r += {U * S * L}) {{\n"
                    f"        for (int k = 0; k < {S}; ++k)\n"
                    f"            for (int u = 0; u < {U}; ++u) {{ i64 rr = r + (k * {U} + u) * {L}; "
                    f"{ro('rr')} {step('acc[u]', at, 'rr')} }}\n    }}\n"
                    f"    for (; r < end; r += {L}) {{ {ro('r')} "
                    f"{step('acc[0]', at, 'r')} }}\n"
                    f"    for (int u = 0; u < {U}; ++u) {{ {nan_in('u')} }}\n"
                    f"    for (int u = 1; u < {U}; ++u) acc[0] = {join}(acc[0], acc[u]);\n")
        kbody = (f"{d.kernel} void {name}({decl}) {{\n"
                 + (f"    {loc} {stype} buf[{L}];\n" if L > 1 else "")
                 + f"    i64 lid = {lid}, grp = {gid};\n"
                 f"    i64 o = grp / G, g = grp - o * G;\n"
                 f"    i64 chunk = (n_red + G - 1) / G, start = g * chunk;\n"
                 f"    i64 end = start + chunk < n_red ? start + chunk : n_red;\n"
                 f"    {offsets('ko', 'o', 'ek', 'sk', spec.nk)}\n    {mean('o')}\n"
                 f"    {stype} acc[{U}];{flags(U)}\n{loop}{tree}"
                 f"    {{ i64 slot = {'o' if spec.final else 'grp'}; {finish('acc[0]')} }}\n}}\n")
    combine = fused_of(sig)
    text = (prelude(d, [combine, body]) + step_functions(d, combine, kernel_name(sig))[0]
            + body_src + helper + kbody)
    return text, name, [t for t, _ in params]


# Layouts ---------------------------------------------------------------------------------
def _collapse(dims: list[tuple[int, tuple]]) -> list[tuple[int, tuple]]:
    """Merge neighbouring (extent, strides per array) pairs that address like one axis in
    every array (C order); drop axes of extent 1."""
    out: list[tuple[int, tuple]] = []
    for n, ss in dims:
        if n == 1:
            continue
        if out and all(a == n * b for a, b in zip(out[-1][1], ss, strict=True)):
            out[-1] = (out[-1][0] * n, ss)
        else:
            out.append((n, ss))
    return out


def plan_joint(shape, strides: list, axes, ordered: bool, primary: int | None):
    """(byte shift of each base, kept dims, reduced dims) of arrays of one shape, each
    with its own ``strides``; a dim is ``(extent, (stride of each array...))``.

    Dims collapse where they do for every array.  ``ordered`` keeps the reduced axes in C
    order (argmax/argmin count through them); otherwise a reduced axis flips where no
    array has a positive stride along it and one has a negative one, and the reduced axes
    sort by the strides of array ``primary`` (largest first).
    """
    m = len(strides)
    shifts = [0] * m
    dims = [(n, tuple(st[k] for st in strides)) for k, n in enumerate(shape)]
    kept = [dims[k] for k in range(len(shape)) if k not in axes]
    red = [dims[k] for k in sorted(axes)]
    if not ordered:
        flipped = []
        for n, ss in red:
            if m and max(ss) <= 0 and min(ss) < 0:
                for j, s in enumerate(ss):
                    shifts[j] += (n - 1) * s
                ss = tuple(-s for s in ss)
            flipped.append((n, ss))
        red = flipped
        if primary is not None:
            red = sorted(red, key=lambda t: -abs(t[1][primary]))
    return shifts, _collapse(kept), _collapse(red)


def plan(shape, strides, axes, ordered: bool):
    """(byte shift of the base, kept dims, reduced dims) of one strided input: its
    :func:`plan_joint`, with a dim as ``(extent, stride)``."""
    (shift,), kept, red = plan_joint(shape, [strides], axes, ordered, 0)
    return shift, [(n, s) for n, (s,) in kept], [(n, s) for n, (s,) in red]


def _primary(shape, strides: list) -> int | None:
    """The array that reads the most distinct elements (fewest broadcast axes), the first
    on ties: its strides choose the strategy and the order of the reduced axes."""
    best, most = None, -1
    for j, st in enumerate(strides):
        reads = math.prod(n for n, s in zip(shape, st, strict=True) if s != 0)
        if reads > most:
            best, most = j, reads
    return best


# Running ---------------------------------------------------------------------------------
_kernels: dict[tuple, object] = {}
_lock = threading.Lock()


def compiled(device, spec, build, kernels: dict, lock) -> object:
    """The kernel ``build(dialect, spec)`` describes, compiled once per (device, spec) and
    kept in ``kernels`` (the reduction's and the scan's caches share this path)."""
    key = (device, spec)
    k = kernels.get(key)
    if k is None:
        impl = device.impl
        text, name, types = build(impl.dialect, spec)
        k = impl.compile_kernel(device.index, text, name, types, cache=diskcache.default())
        with lock:
            kernels[key] = k
    return k


def _kernel(device, spec: Spec):
    return compiled(device, spec, program, _kernels, _lock)


def _launch(device, spec: Spec, ptrs, n_out, n_red, G, kept, red, div) -> None:
    """Launch ``spec``'s kernel: ``ptrs`` are the body's operand values (array addresses,
    scalar values) then ``pout``, ``pidx``, ``pm``, ``pin_idx``; a dim of ``kept``/``red``
    is ``(extent, stride)`` for one array operand or ``(extent, (stride per array...))``."""
    kernel = _kernel(device, spec)
    values = [*ptrs, n_out, n_red, G, *(n for n, _ in kept)]
    if not isinstance((kept or red)[0][1], tuple):  # one array operand
        kept, red = [(n, (s,)) for n, s in kept], [(n, (s,)) for n, s in red]
    m = len((kept or red)[0][1])
    for j in range(m):
        values += [ss[j] for _, ss in kept]
    values += [n for n, _ in red]
    for j in range(m):
        values += [ss[j] for _, ss in red]
    values.append(div)
    L = spec.local
    if spec.strategy == "item":
        kernel.launch(values, -(-n_out // L) * L, L)
    elif spec.strategy == "block":
        kernel.launch(values, -(-n_out // spec.unroll) * G, 1)
    else:
        kernel.launch(values, n_out * G * L, L)


def run(row, x, axes: tuple, result, count: int, correction: float) -> None:
    """``result[...] = row(x over axes)`` on ``x``'s device (x live, count > 0).

    The one-operand case of :func:`run_fused` (:func:`plain`: the element read as is; an
    unaligned view is read byte by byte).  Partial buffers come from the pool or the
    active ``ga.cached`` scope and go back before this returns (the queue is in order, so
    later work cannot overtake).
    """
    raw = x._raw()
    body = plain(_key(raw.dtype), _aligned(raw.ptr, raw.strides, raw.dtype))
    _reduce(row, body, raw.shape, [[raw.ptr, raw.strides]], axes, result, count, correction)


def run_fused(row, body: Fused, inputs, axes: tuple, result, count: int) -> None:
    """``result[...] = row(body's value over axes)`` in one reduction kernel (per pass).

    ``body`` is a :class:`generator.Fused` with ``results == (r,)`` and no outputs: the
    reduced element is value ``r`` in the dtype of its key (operand ``r``'s compute key,
    or step ``r - len(operands)``'s), exactly as if that value were stored into an array
    of that dtype and reduced by :func:`run` -- same accumulator, finalize and strategies;
    nothing is allocated but partials (the split strategy's, pooled and freed before this
    returns).  ``inputs[k]`` is, per operand, a :class:`~gpuarrays.backends.base.RawView`
    of the array broadcast to the full (unreduced) shape by zero strides (its
    ``Operand.aligned`` set from its address and strides), or a 0-d NumPy array of the
    scalar's compute dtype.  ``axes`` are the reduced axes (normalized, of the full shape),
    ``count`` the elements reduced per output, ``result`` the C-contiguous output (its
    dtype typed by the row's rules for the value's dtype; keepdims or not).

    Edge cases are handled here as ``reductions.reduce`` does: an empty ``result`` does
    nothing; ``count == 0`` fills ``row.empty`` (``ValueError`` for a row without one,
    ``max``/``min``: callers refuse that before allocating).  The caller holds the
    operands' and the result's storage while this runs (``ownership.working``).  Rows:
    sum, prod, max, min, mean, any, all (tested); count_nonzero, var, std (a mean pass of
    the same body first), argmax and argmin take the same path.
    Enqueued; raises ``ValueError`` for inconsistent arguments, ``BackendError`` if the
    platform fails.
    """
    if len(body.results) != 1 or body.outs:
        raise ValueError(f"a fused reduction reduces one value and stores no output; got "
                         f"results {body.results} and {len(body.outs)} output(s)")
    if len(inputs) != len(body.operands):
        raise ValueError(f"the body has {len(body.operands)} operand(s), got {len(inputs)} "
                         f"input(s)")
    shape = None
    ops: list = []
    for k, (o, x) in enumerate(zip(body.operands, inputs, strict=True)):
        if o.storage is not None:
            if not isinstance(x, RawView) or _key(x.dtype) != o.storage:
                raise ValueError(f"operand {k} is a {o.storage} array in the body, got "
                                 f"{getattr(x, 'dtype', type(x).__name__)}")
            if shape is None:
                shape = tuple(x.shape)
            elif tuple(x.shape) != shape:
                raise ValueError(f"operand {k} has shape {tuple(x.shape)}, the first array "
                                 f"operand {shape}: broadcast every array to the full shape")
            ops.append([x.ptr, tuple(x.strides)])
        elif o.compute in ("c8", "c16"):  # complex: its parts
            z = complex(x.item())
            ops.append((z.real, z.imag))
        else:
            ops.append((x.item(),))
    if shape is not None:
        if any(not 0 <= a < len(shape) for a in axes):
            raise ValueError(f"axes {axes} are not axes of the full shape {shape}")
        if math.prod(shape[a] for a in axes) != count:
            raise ValueError(f"count {count} is not the product of the reduced extents of "
                             f"{shape} over {axes}")
        out_n = math.prod(n for a, n in enumerate(shape) if a not in axes)
        if out_n != result.size:
            raise ValueError(f"the result has {result.size} element(s), reducing {shape} "
                             f"over {axes} gives {out_n}")
    if result.size == 0:
        return
    if count == 0:
        if row.empty is None:
            raise ValueError(f"{row.name}() of an empty sequence has no value; reduce over "
                             f"axes of non-zero length")
        result.fill(row.empty)
        return
    if not result.flags.c_contiguous:
        raise ValueError(f"the result must be C-contiguous, got strides {result.strides}")
    _reduce(row, body, shape, ops, axes, result, count, 0.0)


def _reduce(row, body: Fused, shape, ops: list, axes: tuple, result, count: int,
            correction: float) -> None:
    """The reduction of ``body``'s value: ``ops[k]`` is ``[address, strides]`` for an
    array operand (``shape`` the full shape), the launch values of a scalar otherwise."""
    dev = result._storage.device
    impl = dev.impl
    temps = []
    try:
        hint = impl.launch_hint(dev.index)
        rd = result._dtype
        from ..reductions import accumulator_dtype  # same layer; reductions imports us

        acc_dt = accumulator_dtype(rd)
        n_ops = len(body.operands)
        r = body.results[0]
        inp = body.operands[r].compute if r < n_ops else body.steps[r - n_ops].key
        arg = row.combine in ("argmax", "argmin")
        if arg:
            acc_dt = np.dtype(np.uint8) if inp == "b1" else (
                np.dtype(np.float32) if inp == "f2" else np.dtype(_DTYPE_OF[inp]))
        elif row.map == "nonzero" and rd.kind == "b":
            acc_dt = np.dtype(bool)
        A = _key(acc_dt)
        combine = row.bool_combine if (inp == "b1" and row.bool_combine) else row.combine
        arrays = [k for k, o in enumerate(body.operands) if o.storage is not None]
        strides = [ops[k][1] for k in arrays]
        if arrays:
            primary = _primary(shape, strides)
            shifts, kept, red = plan_joint(shape, strides, set(axes), arg, primary)
        else:  # only scalars: any layout of the outputs and the reduced elements will do
            primary, shifts, kept, red = None, [], [(result.size, ())], [(count, ())]
        # at least one dim each: fewer distinct kernels (an extent of 1 costs nothing)
        zero = (0,) * len(arrays)
        kept, red = kept or [(1, zero)], red or [(1, zero)]
        n_out = math.prod(n for n, _ in kept)
        n_red = math.prod(n for n, _ in red)
        m_ptr = 0
        if row.map == "deviation":
            from ..reductions import REDUCTIONS

            mean = new_array((n_out,), np.dtype(A), dev, "device")
            temps.append(mean)
            _reduce(REDUCTIONS["mean"], body, shape, ops, axes, mean, count, 0.0)
            m_ptr = mean._raw().ptr
        div = float(count) if row.finalize == "mean" else float(max(count - correction, 0))

        def first(dims):  # the primary array's strides choose the strategy
            return [(n, 0 if primary is None else ss[primary]) for n, ss in dims]
        strategy, G, L, U = choose(hint, first(kept), first(red), _size(inp))
        walked = kept[0] if strategy == "block" else (
            red[0] if strategy == "group" and len(red) == 1 else None)
        if walked is None:  # only the block and the group strategy walk a dim
            walk = "s" * len(arrays)
        else:  # contiguous, broadcast or strided along the walked dim, per array operand
            walk = "".join("c" if s == _size(body.operands[k].storage) else "0" if s == 0
                           else "s" for k, s in zip(arrays, walked[1], strict=True))
        # Leading axes of extent 1 change no offset: padding to PAD axes lets one kernel
        # serve most layouts (a PoCL build costs about 0.6 s; the group strategy's per-element
        # offset keeps its exact reduced axes)
        if strategy != "block":
            kept = [(1, zero)] * (PAD - len(kept)) + kept
        if strategy != "group":
            red = [(1, zero)] * (PAD - len(red)) + red
        out_key = _key(rd)
        common = dict(dialect=dev.backend, row=row.name, combine=combine, map=row.map,
                      finalize=row.finalize, identity=row.identity, acc=A, local=L, unroll=U)
        fixed = "".join("1" if all(ss[j] == 0 for _, ss in red) else "0"
                        for j in range(len(arrays)))
        fixed = fixed if "1" in fixed else ""
        if body == plain(inp):  # the unfused kernel (as the scans name it)
            shape_of = dict(contiguous=walk == "c", walk="" if walk in ("c", "s") else walk,
                            fixed=fixed)
        else:
            shape_of = dict(body=body, walk=walk, fixed=fixed)
        out_ptr = result._raw().ptr
        vals: list = []
        j = 0
        for k, o in enumerate(body.operands):
            if o.storage is None:
                vals += ops[k]
            else:
                vals.append(ops[k][0] + shifts[j])
                j += 1
        if G == 1:
            spec = Spec(**common, **shape_of, inp=inp, out=out_key, strategy=strategy,
                        final=True, pairs_in=False, nk=len(kept), nr=len(red))
            _launch(dev, spec, (*vals, out_ptr, out_ptr, m_ptr or out_ptr, out_ptr),
                    n_out, n_red, 1, kept, red, div)
            return
        part = new_array((n_out * G,), np.dtype(A), dev, "device")
        temps.append(part)
        pidx = out_ptr
        if arg:
            idx = new_array((n_out * G,), np.dtype(np.int64), dev, "device")
            temps.append(idx)
            pidx = idx._raw().ptr
        spec = Spec(**common, **shape_of, inp=inp, out=A, strategy=strategy, final=False,
                    pairs_in=False, nk=len(kept), nr=len(red))
        _launch(dev, spec, (*vals, part._raw().ptr, pidx, m_ptr or out_ptr, out_ptr),
                n_out, n_red, G, kept, red, div)
        size = _size(A)
        # the partials of output o are [o * G, (o + 1) * G)
        s2 = PARTIALS[hint]
        kept2, red2 = [(n_out, G * size)], [(G, size)]
        if s2 == "item":
            kept2, red2 = [(1, 0)] * (PAD - 1) + kept2, [(1, 0)] * (PAD - 1) + red2
        L2, U2 = (ITEM_LOCAL[hint], 1) if s2 == "item" else (L, U)
        spec2 = Spec(**{**common, "map": "x", "local": L2, "unroll": U2}, inp=A, out=out_key,
                     strategy=s2, final=True, pairs_in=True, nk=len(kept2), nr=len(red2),
                     contiguous=s2 == "group")
        _launch(dev, spec2, (part._raw().ptr, out_ptr, out_ptr, out_ptr, pidx), n_out, G, 1,
                kept2, red2, div)
    finally:
        for t in temps:
            t.free()
