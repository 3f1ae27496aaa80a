"""Index kernels in OpenCL C and CUDA C: compaction, nonzero coordinates, gather/scatter.

Three kernel families, generated from a :class:`CompactSpec` or an
:class:`IndexSpec` and compiled once per (device, spec) through the path the
reductions and scans share (``device/reduce.py: compiled``).  Elements move as
``word``-byte units (any item size, structured dtypes included); nothing is
converted.

* ``select`` (docs/indexing.md, "Data-dependent shapes"): ``pos`` is the inclusive
  running count of the selected elements (a ``cumulative_sum`` of the mask, made
  by ``device/scan.py``); element ``i`` is selected when ``pos[i] != pos[i - 1]``
  and goes to slot ``pos[i] - 1``.  The element's address comes from its C index
  over up to ``nd`` strided axes, so the source is never copied first.
* ``coords``: the same test, writing the C coordinates of each selected element
  into row ``d`` of an ``(nd, count)`` int64 result (``nonzero``).
* ``index``: one work-item per element of the output (``gather``), of the target
  (``scatter``) or of the broadcast index shape (``check``).  Every collapsed axis
  has an extent and a byte stride per operand (the plain side, the written side,
  each index array; zero where an operand does not move along it); each index
  array adds ``wrap(index) * stride`` of the axis it indexes, negative indices
  wrapped as Python does.  With ``checked`` an index out of range sets its slot
  in a flag buffer (``flag[2j] = 1``, ``flag[2j + 1]`` = the offending value) and
  moves nothing; the host reads the flag buffer once per call.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ...backends._kernels import launch_shape
from .reduce import compiled

__all__ = ["CompactSpec", "IndexSpec", "compact_program", "index_program", "launch_compact",
           "launch_index"]

_WORD = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}
_IDX = {"i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64", "u1": "u8", "u2": "u16",
        "u4": "u32", "u8": "u64"}
"""Index array kernel keys and the C type they are loaded as."""

_lock = threading.Lock()
_kernels: dict[tuple, object] = {}


@dataclass(frozen=True)
class CompactSpec:
    """``kind`` is ``"select"`` (move ``itemsize`` bytes, ``word`` at a time) or
    ``"coords"`` (write coordinates); ``nd`` the axes of the source's layout."""

    dialect: str
    kind: str
    itemsize: int
    word: int
    nd: int


@dataclass(frozen=True)
class IndexSpec:
    """``mode`` is ``"gather"``, ``"scatter"`` or ``"check"``; ``idx`` the kernel keys of
    the index arrays; ``checked`` whether indices are bounds-checked (indices made from a
    mask are in range by construction)."""

    dialect: str
    mode: str
    itemsize: int
    word: int
    nd: int
    idx: tuple[str, ...]
    checked: bool


def _gid(dialect: str) -> str:
    return ("((i64)get_global_id(0))" if dialect == "opencl"
            else "((i64)blockIdx.x * blockDim.x + threadIdx.x)")


def _decode(nd: int, var: str, ext: str, per: list[tuple[str, str]]) -> str:
    """C statements: for C index ``var`` over extents ``ext0..``, add ``c * stride`` to each
    (offset name, stride prefix) of ``per``; the last axis varies fastest."""
    out = [f"{{ i64 q_ = {var}, c_;"]
    for k in range(nd - 1, 0, -1):
        out.append(f" c_ = q_ % {ext}{k}; q_ /= {ext}{k};")
        out += [f" {o} += c_ * {s}{k};" for o, s in per]
    out += [f" {o} += q_ * {s}0;" for o, s in per]
    out.append(" }")
    return "".join(out)


def _move(d, itemsize: int, word: int, dst: str, src: str) -> str:
    g, w = d.glob, _WORD[word]
    return (f"{{ {g}{w} *d_ = ({g}{w} *)({dst}); {g}const {w} *s_ = ({g}const {w} *)({src}); "
            f"for (int k_ = 0; k_ < {itemsize // word}; ++k_) d_[k_] = s_[k_]; }}")


def compact_program(d, spec: CompactSpec) -> tuple[str, str, list[str]]:
    """(source, kernel name, parameter types) of a ``select`` or ``coords`` kernel."""
    g = d.glob
    name = f"compact_{spec.kind}_{spec.itemsize}_{spec.word}_{spec.nd}"
    params = [("ptr", f"{g}const u8 *px"), ("ptr", f"{g}const u8 *pp"), ("ptr", f"{g}u8 *pz"),
              ("i8", "i64 n"), ("i8", "i64 count")]
    params += [("i8", f"i64 e{k}") for k in range(spec.nd)]
    params += [("i8", f"i64 s{k}") for k in range(spec.nd)]
    head = (f"    i64 i = {_gid(spec.dialect)};\n    if (i >= n) return;\n"
            f"    {g}const i64 *pos = ({g}const i64 *)pp;\n"
            f"    i64 p = pos[i];\n    if (p == (i > 0 ? pos[i - 1] : 0)) return;\n")
    if spec.kind == "select":
        body = (f"    i64 ox = 0; {_decode(spec.nd, 'i', 'e', [('ox', 's')])}\n"
                f"    {_move(d, spec.itemsize, spec.word, f'pz + (p - 1) * {spec.itemsize}', 'px + ox')}\n")
    else:  # coords: row k of the (nd, count) result
        body = [f"    {g}i64 *z = ({g}i64 *)pz + (p - 1);\n    i64 q_ = i, c_;\n"]
        for k in range(spec.nd - 1, 0, -1):
            body.append(f"    c_ = q_ % e{k}; q_ /= e{k}; z[{k} * count] = c_;\n")
        body.append("    z[0] = q_;\n")
        body = "".join(body)
    decl = ", ".join(p for _, p in params)
    text = d.prelude + f"{d.kernel} void {name}({decl}) {{\n{head}{body}}}\n"
    return text, name, [t for t, _ in params]


def index_program(d, spec: IndexSpec) -> tuple[str, str, list[str]]:
    """(source, kernel name, parameter types) of a ``gather``/``scatter``/``check`` kernel."""
    g = d.glob
    nd, nidx = spec.nd, len(spec.idx)
    name = (f"index_{spec.mode}_{spec.itemsize}_{spec.word}_{nd}_{'_'.join(spec.idx)}_"
            f"{int(spec.checked)}")
    params = [("ptr", f"{g}const u8 *ps"), ("ptr", f"{g}u8 *pd"), ("ptr", f"{g}u8 *pf"),
              ("i8", "i64 n")]
    params += [("i8", f"i64 e{k}") for k in range(nd)]
    params += [("i8", f"i64 ss{k}") for k in range(nd)]
    params += [("i8", f"i64 ds{k}") for k in range(nd)]
    for j in range(nidx):
        params += [("ptr", f"{g}const u8 *pi{j}"), ("i8", f"i64 n{j}"), ("i8", f"i64 v{j}")]
        params += [("i8", f"i64 is{j}_{k}") for k in range(nd)]
    per = [("os", "ss"), ("od", "ds")] + [(f"oi{j}", f"is{j}_") for j in range(nidx)]
    lines = [f"    i64 i = {_gid(spec.dialect)};\n    if (i >= n) return;\n",
             "    i64 os = 0, od = 0" + "".join(f", oi{j} = 0" for j in range(nidx)) + ";\n",
             f"    {_decode(nd, 'i', 'e', per)}\n"]
    # the indexed side: the source of a gather, the target of a scatter
    side = "os" if spec.mode == "gather" else "od"
    if spec.checked:
        lines.append("    int bad = 0;\n")
    for j, key in enumerate(spec.idx):
        ct = _IDX[key]
        lines.append(f"    {ct} r{j} = *({g}const {ct} *)(pi{j} + oi{j});\n")
        if key[0] == "u":
            lines.append(f"    i64 w{j} = (i64)r{j};\n")
            test = f"(u64)r{j} >= (u64)n{j}"
        else:
            lines.append(f"    i64 w{j} = (i64)r{j} < 0 ? (i64)r{j} + n{j} : (i64)r{j};\n")
            test = f"w{j} < 0 || w{j} >= n{j}"
        if spec.checked:
            lines.append(f"    if ({test}) {{ bad = 1; (({g}i64 *)pf)[{2 * j}] = 1; "
                         f"(({g}i64 *)pf)[{2 * j + 1}] = (i64)r{j}; }}\n")
        lines.append(f"    {side} += w{j} * v{j};\n")
    if spec.mode != "check":
        if spec.checked:
            lines.append("    if (bad) return;\n")
        lines.append(f"    {_move(d, spec.itemsize, spec.word, 'pd + od', 'ps + os')}\n")
    decl = ", ".join(p for _, p in params)
    text = d.prelude + f"{d.kernel} void {name}({decl}) {{\n{''.join(lines)}}}\n"
    return text, name, [t for t, _ in params]


def _pad(dims: list[tuple[int, ...]], width: int) -> list[tuple[int, ...]]:
    """At least one axis (a single element: extent 1, strides 0).

    Not padded further: measured on PoCL, a 1-d gather of 1 M indices decoding four
    padded axes (three 64-bit divisions per element) took 20 ms, the 1-d kernel without a
    division a fraction of that; a kernel per number of axes is worth its compile."""
    return dims or [(1,) + (0,) * (width - 1)]


def launch_compact(device, kind: str, x_ptr: int, pos_ptr: int, z_ptr: int, n: int,
                   count: int, dims: list[tuple[int, int]], itemsize: int, word: int) -> None:
    """Enqueue a ``select``/``coords`` kernel over ``n`` elements; ``dims`` are the source's
    (extent, byte stride) in C order (for ``coords`` the strides are ignored)."""
    if kind == "select":  # coords writes one row per axis: its axes stay exact
        dims = _pad(list(dims), 2)
    spec = CompactSpec(device.backend, kind, itemsize, word, len(dims))
    kernel = compiled(device, spec, compact_program, _kernels, _lock)
    gsize, lsize = launch_shape(device.impl.launch_hint(device.index), n, kernel.max_local)
    kernel.launch([x_ptr, pos_ptr, z_ptr, n, count, *(e for e, _ in dims),
                   *(s for _, s in dims)], gsize, lsize)


def launch_index(device, mode: str, src: int, dst: int, flag: int, dims: list[tuple],
                 indices: list[tuple], itemsize: int, word: int, checked: bool) -> None:
    """Enqueue a ``gather``/``scatter``/``check`` kernel.

    ``dims``: per axis of the iteration space (C order) ``(extent, plain-side stride,
    written-side stride, stride of index array 0, 1, ...)``; ``indices``: per index
    array ``(key, address, bound, stride of the axis it indexes)``.
    """
    nidx = len(indices)
    dims = _pad(list(dims), 3 + nidx)
    n = 1
    for t in dims:
        n *= t[0]
    if n == 0:
        return
    spec = IndexSpec(device.backend, mode, itemsize, word, len(dims),
                     tuple(k for k, *_ in indices), checked)
    kernel = compiled(device, spec, index_program, _kernels, _lock)
    values = [src, dst, flag, n, *(t[0] for t in dims), *(t[1] for t in dims),
              *(t[2] for t in dims)]
    for j, (_, ptr, bound, stride) in enumerate(indices):
        values += [ptr, bound, stride, *(t[3 + j] for t in dims)]
    gsize, lsize = launch_shape(device.impl.launch_hint(device.index), n, kernel.max_local)
    kernel.launch(values, gsize, lsize)
