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
from .launcher import aligned as _aligned

__all__ = ["run", "Spec", "program", "LOCAL_SIZES", "plan"]

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
        int(spec.pairs_in), spec.nk, spec.nr, spec.local, spec.unroll, int(spec.contiguous)))
    arg = spec.combine in ("argmax", "argmin")
    g = d.glob
    A, ct = spec.acc, _CTYPE[spec.acc]
    real = {"c8": "float", "c16": "double", "f4": "float", "f8": "double"}.get(A, "float")
    lid, gid, glo = _IDS[spec.dialect]
    L, U = spec.local, spec.unroll
    isize = _size(spec.inp)

    params: list[tuple[str, str]] = [("ptr", f"{g}const u8 *px"), ("ptr", f"{g}u8 *pout"),
                                     ("ptr", f"{g}u8 *pidx"), ("ptr", f"{g}const u8 *pm"),
                                     ("ptr", f"{g}const u8 *pin_idx"),
                                     ("i8", "i64 n_out"), ("i8", "i64 n_red"), ("i8", "i64 G")]
    params += [("i8", f"i64 ek{k}") for k in range(spec.nk)]
    params += [("i8", f"i64 sk{k}") for k in range(spec.nk)]
    params += [("i8", f"i64 er{k}") for k in range(spec.nr)]
    params += [("i8", f"i64 sr{k}") for k in range(spec.nr)]
    params.append(("f8" if real == "double" else "f4", f"{real} div"))

    def offset(var: str, idx: str, ext: str, st: str, nd: int, contiguous: bool = False) -> str:
        """``i64 var`` = byte offset of C-order index ``idx`` over ``nd`` dims."""
        if nd == 0:
            return f"i64 {var} = 0;"
        if nd == 1:
            return f"i64 {var} = ({idx}) * {isize if contiguous else st + '0'};"
        out = [f"i64 {var} = 0; {{ i64 q_ = {idx}, c_;"]
        for k in range(nd - 1, 0, -1):
            out.append(f" c_ = q_ % {ext}{k}; q_ /= {ext}{k}; {var} += c_ * {st}{k};")
        out.append(f" {var} += q_ * {st}0; }}")
        return "".join(out)

    def value(at: str) -> str:
        if spec.pairs_in:
            return _load(d, A, at, True)
        v = _convert(d, spec.inp, "b1" if spec.map == "nonzero" else A,
                     _load(d, spec.inp, at, True))
        if spec.map == "nonzero" and A != "b1":
            v = _convert(d, "b1", A, v)
        elif spec.map == "deviation":
            v = f"sq_dev({v}, m)"
        return v

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

        def step(acc: str, comp: str, at: str, r: str) -> str:
            index = (f"(*({g}const i64 *)(pin_idx + ({at} - px) / {_size(A)} * 8))"
                     if spec.pairs_in else r)
            return (f"{{ S_t e_; e_.v = {value(at)}; e_.i = {index}; "
                    f"{acc} = take_{name}({acc}, e_); }}")
    else:
        stype = ct
        join = fn

        def init(acc: str) -> str:
            return f"{acc} = {_literal(spec.identity, A)};"

        def step(acc: str, comp: str, at: str, r: str) -> str:
            if fast_nan and spec.strategy == "block":
                # one NaN flag for the work-item, not one per output (a block has up to
                # 4096); a NaN seen marks its outputs in a second sweep (block_nan below)
                cmp = ">" if spec.combine == "maximum" else "<"
                return (f"{{ {ct} v_ = {value(at)}; {acc} = v_ {cmp} {acc} ? v_ : {acc}; "
                        f"nany |= v_ != v_; }}")
            if fast_nan:  # a compare-and-select the compiler vectorises, NaN noted aside
                # (a NaN kept in the accumulator instead, ``(v > acc) | (v != v) ? v : acc``,
                # took 5.3 ms against these flags' 2.7 ms on 16 M contiguous float32 here)
                flag = acc.replace("acc", "nf")
                return (f"{{ {ct} v_ = {value(at)}; {acc} = v_ {'>' if spec.combine == 'maximum' else '<'} "
                        f"{acc} ? v_ : {acc}; {flag} |= v_ != v_; }}")
            return f"{acc} = {fn}({acc}, {value(at)});"
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
        """Nested loops over the reduced dims (``ro`` the byte offset, ``r`` the C index)."""
        lines, close = [], []
        for k in range(spec.nr):
            lines.append(f"{ind}for (i64 r{k} = 0; r{k} < er{k}; ++r{k}) {{\n")
            close.append(f"{ind}}}\n")
            ind += "  "
        ro = " + ".join(f"r{k} * sr{k}" for k in range(spec.nr)) or "0"
        return ("".join(lines) + f"{ind}i64 ro = {ro};\n{ind}{body}\n{ind}++r;\n"
                + "".join(reversed(close)))

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
    kept_at = f"px + o * {isize} + ro" if spec.contiguous else "px + o * sk0 + ro"
    if spec.strategy == "item":
        body = (f"{d.kernel} void {name}({decl}) {{\n"
                f"    i64 o = {glo};\n    if (o >= n_out) return;\n"
                f"    {offset('ko', 'o', 'ek', 'sk', spec.nk)}\n    {mean('o')}\n"
                f"    {stype} acc[1];{flags(1)}\n"
                f"    {init('acc[0]')}\n    i64 r = 0;\n"
                + red_loops(step("acc[0]", "comp[0]", "px + ko + ro", "r"), "    ")
                + f"    {{ i64 slot = o; {nan_in('0')} {finish('acc[0]')} }}\n}}\n")
    elif spec.strategy == "block":  # U consecutive outputs x a chunk of rows (nk == 1)
        block_nan = ""
        if fast_nan:  # rare: a NaN was seen, mark the outputs it belongs to
            block_nan = (f"    if (nany) for (i64 r = start; r < end; ++r) {{\n"
                         f"        {offset('ro', 'r', 'er', 'sr', spec.nr)}\n"
                         f"        for (int u = 0; u < nb; ++u) {{ i64 o = o0 + u; "
                         f"{ct} v_ = {value(kept_at)}; if (v_ != v_) acc[u] = v_; }}\n    }}\n")
        slot = "o0 + u" if spec.final else "(o0 + u) * G + g"
        body = (f"{d.kernel} void {name}({decl}) {{\n"
                f"    i64 w = {glo}, b = w / G, g = w - b * G, o0 = b * {U};\n"
                f"    if (o0 >= n_out) return;\n"
                f"    int nb = n_out - o0 < {U} ? (int)(n_out - o0) : {U};\n"
                f"    i64 chunk = (n_red + G - 1) / G, start = g * chunk;\n"
                f"    i64 end = start + chunk < n_red ? start + chunk : n_red;\n"
                f"    {stype} acc[{U}];{' int nany = 0;' if fast_nan else ''}\n"
                f"    for (int u = 0; u < {U}; ++u) {{ {init('acc[u]')} }}\n"
                f"    for (i64 r = start; r < end; ++r) {{\n"
                f"        {offset('ro', 'r', 'er', 'sr', spec.nr)}\n"
                f"        for (int u = 0; u < nb; ++u) {{ i64 o = o0 + u; {mean('o')} "
                f"{step('acc[u]', '', kept_at, 'r')} }}\n    }}\n"
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
            return offset("ro", r, "er", "sr", spec.nr, spec.contiguous)
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
                    f"{ro('rr')} acc[u] += {value('px + ko + ro')}; }}\n"
                    f"        for (int w = {U // 2}; w > 0; w >>= 1)\n"
                    f"            for (int u = 0; u < w; ++u) acc[u] += acc[u + w];\n"
                    f"        {kahan_add('acc[0]')}\n    }}\n"
                    f"    for (; r < end; r += {L}) {{ {ro('r')} {ct} v_ = {value('px + ko + ro')}; "
                    f"{kahan_add('v_')} }}\n"
                    f"    acc[0] = isfinite(plain) ? tot - comp : plain;\n")
        else:
            S = BLOCK_STEPS
            loop = (f"    for (int u = 0; u < {U}; ++u) {{ {init('acc[u]')} }}\n"
                    f"    i64 r = start + lid;\n"
                    f"    for (; r + {(U * S - 1) * L} < end; r += {U * S * L}) {{\n"
                    f"        for (int k = 0; k < {S}; ++k)\n"
                    f"            for (int u = 0; u < {U}; ++u) {{ i64 rr = r + (k * {U} + u) * {L}; "
                    f"{ro('rr')} {step('acc[u]', '', 'px + ko + ro', 'rr')} }}\n    }}\n"
                    f"    for (; r < end; r += {L}) {{ {ro('r')} "
                    f"{step('acc[0]', '', 'px + ko + ro', 'r')} }}\n"
                    f"    for (int u = 0; u < {U}; ++u) {{ {nan_in('u')} }}\n"
                    f"    for (int u = 1; u < {U}; ++u) acc[0] = {join}(acc[0], acc[u]);\n")
        body = (f"{d.kernel} void {name}({decl}) {{\n"
                + (f"    {loc} {stype} buf[{L}];\n" if L > 1 else "")
                + f"    i64 lid = {lid}, grp = {gid};\n"
                f"    i64 o = grp / G, g = grp - o * G;\n"
                f"    i64 chunk = (n_red + G - 1) / G, start = g * chunk;\n"
                f"    i64 end = start + chunk < n_red ? start + chunk : n_red;\n"
                f"    {offset('ko', 'o', 'ek', 'sk', spec.nk)}\n    {mean('o')}\n"
                f"    {stype} acc[{U}];{flags(U)}\n{loop}{tree}"
                f"    {{ i64 slot = {'o' if spec.final else 'grp'}; {finish('acc[0]')} }}\n}}\n")
    text = source(d, [sig]) + helper + body
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
    kernel = _kernel(device, spec)
    values = [*ptrs, n_out, n_red, G, *(n for n, _ in kept), *(s for _, s in kept),
              *(n for n, _ in red), *(s for _, s in red), div]
    L = spec.local
    if spec.strategy == "item":
        kernel.launch(values, -(-n_out // L) * L, L)
    elif spec.strategy == "block":
        kernel.launch(values, -(-n_out // spec.unroll) * G, 1)
    else:
        kernel.launch(values, n_out * G * L, L)


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
        # at least one dim each: fewer distinct kernels (an extent of 1 costs nothing)
        kept, red = kept or [(1, 0)], red or [(1, 0)]
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
        strategy, G, L, U = choose(hint, kept, red, _size(inp))
        if strategy == "block":
            contiguous = kept[0][1] == _size(inp)
        else:  # only the group strategy's per-element offset uses it
            contiguous = strategy == "group" and len(red) == 1 and red[0][1] == _size(inp)
        # Leading axes of extent 1 change no offset: padding to PAD axes lets one kernel
        # serve most layouts (a PoCL build costs about 0.6 s; the group strategy's per-element
        # offset keeps its exact reduced axes)
        if strategy != "block":
            kept = [(1, 0)] * (PAD - len(kept)) + kept
        if strategy != "group":
            red = [(1, 0)] * (PAD - len(red)) + red
        out_key = _key(rd)
        common = dict(dialect=dev.backend, row=row.name, combine=combine, map=row.map,
                      finalize=row.finalize, identity=row.identity, acc=A, local=L, unroll=U)
        out_ptr = result._raw().ptr
        src = raw.ptr + shift
        if G == 1:
            spec = Spec(**common, inp=inp, out=out_key, strategy=strategy, final=True,
                        pairs_in=False, nk=len(kept), nr=len(red), contiguous=contiguous)
            _launch(dev, spec, (src, out_ptr, out_ptr, m_ptr or out_ptr, out_ptr),
                    n_out, n_red, 1, kept, red, div)
            return
        part = new_array((n_out * G,), np.dtype(A), dev, "device")
        temps.append(part)
        pidx = out_ptr
        if arg:
            idx = new_array((n_out * G,), np.dtype(np.int64), dev, "device")
            temps.append(idx)
            pidx = idx._raw().ptr
        spec = Spec(**common, inp=inp, out=A, strategy=strategy, final=False, pairs_in=False,
                    nk=len(kept), nr=len(red), contiguous=contiguous)
        _launch(dev, spec, (src, part._raw().ptr, pidx, m_ptr or out_ptr, out_ptr),
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

