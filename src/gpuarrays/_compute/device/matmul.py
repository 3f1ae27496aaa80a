"""Device matmul: one tiled kernel generator for OpenCL C and CUDA C (docs/linalg.md).

``C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]`` for a batch of matrices, every
operand addressed through byte strides (a transposed or sliced view is read in
place; a zero batch stride broadcasts).  A work-group of ``TM x TN`` work-items
computes one ``BM x BN`` tile of ``C`` (``BM = TM * RM``, ``BN = TN * RN``):
each ``BK`` step the group copies an ``BM x BK`` tile of ``A`` and a ``BK x BN``
tile of ``B`` into local memory (converting to the accumulator type once), then
each work-item accumulates its ``RM x RN`` register block, rows ``ty + i * TM``
and columns ``tx + j * TN`` (neighbouring work-items read neighbouring local
words, which both a GPU's banks and PoCL's work-item vectoriser want).

Accumulators: floats and complex in their own type (float16 in float32),
integers in the unsigned type of at least 32 bits (wrapping like NumPy, no
signed overflow in C), converted to the result type at the store.  Floating
multiply-adds are fused (``fma``), as BLAS libraries do: matmul results are
compared within a tolerance, unlike elementwise ones (which keep contraction
off, docs/kernels.md).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from ..._array.make import new_array
from ..._array.transfer import copy_raw
from ...backends._kernels import collapse
from ...backends.base import RawView
from .generator import _CTYPE, Operand, Signature, _convert, _load, _store, source
from .launcher import aligned
from .reduce import _BARRIER, _IDS, _LOCAL, compiled

__all__ = ["Spec", "program", "run", "TILES", "accumulator"]

TILES = {"cpu": (16, 16, 4, 4, 1, 0), "gpu": (16, 16, 4, 4, 16, 1)}
"""``(TM, TN, RM, RN, BK)`` by launch hint: work-items per group along rows and columns,
the register block of one work-item, and the K step of the local tiles.  Measured on
this project's 2-core machine (PoCL 3.1, float32 1024 x 1024, machine shared):
see the table in docs/linalg.md, "Tile shapes".  GPUs take 16 x 16 threads with 4 x 4
registers each (a 64 x 64 tile, 8 KiB of shared memory for float32), the classic
register-blocked SGEMM shape; benchmarks/gpu_check.sh measures it."""

VECTOR = {("cpu", "f4"): (4, 4, 4, 16), ("cpu", "f8"): (4, 4, 4, 8)}
"""``(work-items per group, rows, vectors, vector width)`` of the vector kernel, by
(launch hint, dtype key): float32 and float64 on CPU devices (docs/linalg.md)."""

KERNEL_BATCH_DIMS = 1
"""Collapsed batch dimensions a kernel takes; leading ones beyond loop on the host."""


def accumulator(key: str) -> str:
    """The accumulator key of a result key: u4/u8 for integers, f4 for f2, else itself."""
    if key[0] in "iub":
        return "u8" if int(key[1:]) == 8 else "u4"
    if key == "f2":
        return "f4"
    return key


@dataclass(frozen=True)
class Spec:
    """What one matmul kernel is specialised on: the dialect, the storage keys of ``A``,
    ``B`` and the result, the accumulator key, the tile shape, and whether ``A`` and
    ``B`` tiles are read with the row index fastest (their column stride is the larger)."""

    dialect: str
    a: str
    b: str
    out: str
    acc: str
    tm: int
    tn: int
    rm: int
    rn: int
    bk: int
    local: bool = True
    vector: int = 0
    a_rows_fast: bool = False
    b_rows_fast: bool = False


def _name(s: Spec) -> str:
    return "mm_" + "_".join(str(v) for v in (
        s.a, s.b, s.out, s.acc, s.tm, s.tn, s.rm, s.rn, s.bk, int(s.local), s.vector, int(s.a_rows_fast),
        int(s.b_rows_fast)))


def _mac(d, acc: str, dst: str, x: str, y: str) -> str:
    """``dst += x * y`` in the accumulator type."""
    if acc[0] in "iu":
        return f"{dst} += {x} * {y};"
    fma = "fmaf" if (d.suffix_math and acc in ("f4", "c8")) else "fma"
    if acc[0] == "f":
        return f"{dst} = {fma}({x}, {y}, {dst});"
    return (f"{dst}.x = {fma}({x}.x, {y}.x, {dst}.x); {dst}.x = {fma}(-{x}.y, {y}.y, {dst}.x); "
            f"{dst}.y = {fma}({x}.x, {y}.y, {dst}.y); {dst}.y = {fma}({x}.y, {y}.x, {dst}.y);")


def _zero(acc: str) -> str:
    return f"c_make_{acc}(0, 0)" if acc[0] == "c" else f"(({_CTYPE[acc]})0)"


def program(d, s: Spec) -> tuple[str, str, list[str]]:
    """(source, kernel name, parameter types) of the kernel of ``s``."""
    if s.vector:
        return _vector_program(d, s)
    name = _name(s)
    g = d.glob
    ct = _CTYPE[s.acc]
    lid, gid, _ = _IDS[s.dialect]
    bar, loc = _BARRIER[s.dialect], _LOCAL[s.dialect]
    TM, TN, RM, RN, BK = s.tm, s.tn, s.rm, s.rn, s.bk
    BM, BN, L = TM * RM, TN * RN, TM * TN
    params = [("ptr", f"{g}const u8 *pa"), ("ptr", f"{g}const u8 *pb"), ("ptr", f"{g}u8 *pc")]
    params += [("i8", f"i64 {v}") for v in (
        "M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn", "sab", "sbb", "scb",
        "tiles_m", "tiles_n")]
    decl = ", ".join(p for _, p in params)

    def load(key: str, at: str) -> str:
        return _convert(d, key, s.acc, _load(d, key, at, True))

    def tile(which: str, key: str, rows: int, cols: int, rows_fast: bool) -> str:
        """Copy a ``rows x cols`` tile into local ``{which}s[k][...]`` (zeros outside)."""
        if which == "A":  # rows are i (M), columns kk (K); stored As[kk][i]
            r, c, rn, cn = "i_", "kk_", "M", "K"
            at = f"pa + (m0 + i_) * sam + (k0 + kk_) * sak"
            dst = f"As[kk_][i_]"
            rbase, cbase = "m0", "k0"
        else:  # rows are kk (K), columns j (N); stored Bs[kk][j]
            r, c, rn, cn = "kk_", "j_", "K", "N"
            at = f"pb + (k0 + kk_) * sbk + (n0 + j_) * sbn"
            dst = f"Bs[kk_][j_]"
            rbase, cbase = "k0", "n0"
        if rows_fast:
            split = f"int {c} = e_ / {rows}, {r} = e_ - {c} * {rows};"
        else:
            split = f"int {r} = e_ / {cols}, {c} = e_ - {r} * {cols};"
        return (f"        for (int e_ = (int)l; e_ < {rows * cols}; e_ += {L}) {{ {split}\n"
                f"            {dst} = ({rbase} + {r} < {rn} && {cbase} + {c} < {cn}) ? "
                f"{load(key, at)} : {_zero(s.acc)}; }}\n")

    head = (f"{d.kernel} void {name}({decl}) {{\n"
            f"    i64 l = {lid}, grp = {gid};\n"
            f"    i64 per = tiles_m * tiles_n, bt = grp / per, rest = grp - bt * per;\n"
            f"    i64 tmi = rest / tiles_n, tni = rest - tmi * tiles_n;\n"
            f"    i64 m0 = tmi * {BM}, n0 = tni * {BN};\n"
            f"    int ty = (int)(l / {TN}), tx = (int)(l - (i64)ty * {TN});\n"
            f"    pa += bt * sab; pb += bt * sbb; pc += bt * scb;\n")
    regs = [(i, j) for i in range(RM) for j in range(RN)]
    zero = _zero(s.acc)
    init = "".join(f"    {ct} c{i}_{j} = {zero};\n" for i, j in regs)
    macs = "".join(f"            {_mac(d, s.acc, f'c{i}_{j}', f'a{i}', f'b{j}')}\n"
                   for i, j in regs)
    if s.local:
        body = (head + f"    {loc} {ct} As[{BK}][{BM}];\n    {loc} {ct} Bs[{BK}][{BN}];\n" + init
                + f"    for (i64 k0 = 0; k0 < K; k0 += {BK}) {{\n"
                + tile("A", s.a, BM, BK, s.a_rows_fast) + tile("B", s.b, BK, BN, not s.b_rows_fast)
                + f"        {bar};\n"
                f"        for (int kk = 0; kk < {BK}; ++kk) {{\n"
                + "".join(f"            {ct} a{i} = As[kk][ty + {i * TM}];\n" for i in range(RM))
                + "".join(f"            {ct} b{j} = Bs[kk][tx + {j * TN}];\n" for j in range(RN))
                + macs + f"        }}\n        {bar};\n    }}\n")
    else:  # straight from global memory (rows and columns clamped: no branch in the loop)
        body = (head + init
                + "".join(f"    const {g}u8 *ra{i} = pa + min(m0 + ty + {i * TM}, M - 1) * sam;\n"
                          for i in range(RM))
                + "".join(f"    const {g}u8 *rb{j} = pb + min(n0 + tx + {j * TN}, N - 1) * sbn;\n"
                          for j in range(RN))
                + "    for (i64 k = 0; k < K; ++k) {\n"
                + "".join(f"            {ct} a{i} = {load(s.a, f'ra{i} + k * sak')};\n"
                          for i in range(RM))
                + "".join(f"            {ct} b{j} = {load(s.b, f'rb{j} + k * sbk')};\n"
                          for j in range(RN))
                + macs + "    }\n")
    for i, j in regs:
        body += (f"    {{ i64 row = m0 + ty + {i * TM}, col = n0 + tx + {j * TN};\n"
                 f"      if (row < M && col < N) {{ "
                 f"{_store(d, s.out, 'pc + row * scm + col * scn', True, f'c{i}_{j}', s.acc)} }} }}\n")
    body += "}\n"
    # the prelude, float64 pragma, complex type and helpers the storage types need
    sig = Signature("multiply", s.acc, (Operand(s.a, s.acc), Operand(s.b, s.acc)))
    sig_out = Signature("multiply", s.acc, (Operand(s.out, s.acc), Operand(s.acc, s.acc)))
    return source(d, [sig, sig_out]) + body, name, [t for t, _ in params]


# Running ---------------------------------------------------------------------------------
_kernels: dict[tuple, object] = {}
_lock = threading.Lock()


def _key(dt: np.dtype) -> str:
    return f"{dt.kind}{dt.itemsize}"


def _aligned_view(x, temps: list):
    """``x``'s raw view, or that of an aligned contiguous device copy (from the pool)."""
    raw = x._raw()
    if aligned(raw.ptr, raw.strides, raw.dtype):
        return raw
    tmp = new_array(x._shape, x._dtype, x._storage.device, "device")
    temps.append(tmp)
    copy_raw(tmp, x)
    return tmp._raw()


def run(a, b, result) -> None:
    """``result[...] = a @ b`` on a device: ``a`` is ``(..., M, K)``, ``b`` ``(..., K, N)``,
    both at least 2-d with batch shapes that broadcast to ``result``'s ``(..., M, N)``.

    Enqueued on the device's queue (nothing waits); temporaries go back to the pool.
    """
    dev = result._storage.device
    shape = result._shape
    M, N = shape[-2], shape[-1]
    K = a._shape[-1]
    if 0 in shape:
        return
    if K == 0:
        result.fill(0)
        return
    hint = dev.impl.launch_hint(dev.index)
    rkey = _key(result._dtype)
    temps: list = []
    try:
        rc = result._raw()
        vec = VECTOR.get((hint, rkey)) if dev.backend == "opencl" else None
        if vec is not None and not (a._dtype == b._dtype == result._dtype
                                    and rc.strides[-1] == rc.dtype.itemsize):
            vec = None
        ra = _aligned_view(a, temps)
        if vec is not None and b._strides[-1] != b._dtype.itemsize:
            # the vector kernel loads rows of B: a contiguous device copy (K x N work
            # against M x N x K)
            tmp = new_array(b._shape, b._dtype, dev, "device")
            temps.append(tmp)
            copy_raw(tmp, b)
            rb = tmp._raw()
        else:
            rb = _aligned_view(b, temps)
        nb = len(shape) - 2

        def bstrides(r: RawView) -> tuple[int, ...]:
            lead = len(r.shape) - 2
            return tuple([0] * (nb - lead) + [0 if n == 1 else st for n, st in
                                              zip(r.shape[:lead], r.strides[:lead], strict=True)])
        bshape, (sa, sb, sc) = collapse(shape[:nb], bstrides(ra), bstrides(rb),
                                        tuple(rc.strides[:nb]))
        if not bshape:
            bshape, sa, sb, sc = [1], [0], [0], [0]
        lead = len(bshape) - KERNEL_BATCH_DIMS
        outer = list(np.ndindex(*bshape[:lead])) if lead > 0 else [()]
        sam, sak = ra.strides[-2:]
        sbk, sbn = rb.strides[-2:]
        scm, scn = rc.strides[-2:]
        if vec is not None:
            L, RM, RN, VW = vec
            spec = Spec(dev.backend, rkey, rkey, rkey, rkey, L, 1, RM, RN, 0, False, VW)
            tiles_m, tiles_n = -(-M // (L * RM)), -(-N // (VW * RN))
        else:
            TM, TN, RM, RN, BK, local = TILES[hint]
            spec = Spec(dev.backend, _key(ra.dtype), _key(rb.dtype), rkey, accumulator(rkey),
                        TM, TN, RM, RN, BK, bool(local),
                        a_rows_fast=abs(sam) < abs(sak) and M > 1,
                        b_rows_fast=abs(sbk) < abs(sbn) and K > 1)
            tiles_m, tiles_n = -(-M // (TM * RM)), -(-N // (TN * RN))
            L = TM * TN
        kernel = compiled(dev, spec, program, _kernels, _lock)
        groups = bshape[-1] * tiles_m * tiles_n
        for idx in outer:
            oa = sum(i * st for i, st in zip(idx, sa, strict=False))
            ob = sum(i * st for i, st in zip(idx, sb, strict=False))
            oc = sum(i * st for i, st in zip(idx, sc, strict=False))
            values = [ra.ptr + oa, rb.ptr + ob, rc.ptr + oc, M, N, K, sam, sak, sbk, sbn,
                      scm, scn, sa[-1], sb[-1], sc[-1], tiles_m, tiles_n]
            kernel.launch(values, groups * L, L)
    finally:
        for t in temps:
            t.free()


def flops(shape: tuple, k: int, complex_: bool) -> float:
    """Floating-point operations of a matmul with result ``shape`` and inner size ``k``."""
    return (8 if complex_ else 2) * math.prod(shape) * k


_PARAMS = ("M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn", "sab", "sbb", "scb",
           "tiles_m", "tiles_n")


def _vector_program(d, s: Spec) -> tuple[str, str, list[str]]:
    """The CPU-device kernel (OpenCL C only): one work-item computes ``rm`` rows by ``rn``
    vectors of ``vector`` columns from global memory (no local tiles: a CPU's caches
    hold them), ``A`` broadcast from scalars, ``B`` and ``C`` rows loaded and stored as
    vectors (their column stride is the item size); columns beyond the last full block
    take a scalar loop.  Work-groups of one column panel are neighbours (rows fastest),
    so a core finds the panel of ``B`` in its cache."""
    if s.dialect != "opencl":
        raise ValueError("the vector matmul kernel is OpenCL C only (CPU devices)")
    name = _name(s)
    ct = _CTYPE[s.acc]
    VW, RM, RN, L = s.vector, s.rm, s.rn, s.tm
    vt = f"{ct}{VW}"
    NB = VW * RN
    size = int(s.acc[1:])
    g = "__global "
    params = [("ptr", f"{g}const u8 *pa"), ("ptr", f"{g}const u8 *pb"), ("ptr", f"{g}u8 *pc")]
    params += [("i8", f"i64 {v}") for v in _PARAMS]
    decl = ", ".join(p for _, p in params)
    lines = [f"__kernel void {name}({decl}) {{\n",
             "    i64 l = get_local_id(0), grp = get_group_id(0);\n",
             "    i64 per = tiles_m * tiles_n, bt = grp / per, rest = grp - bt * per;\n",
             "    i64 tni = rest / tiles_m, tmi = rest - tni * tiles_m;\n",
             f"    i64 m0 = (tmi * {L} + l) * {RM}, n0 = tni * {NB};\n",
             "    if (m0 >= M) return;\n",
             "    pa += bt * sab; pb += bt * sbb; pc += bt * scb;\n"]
    lines += [f"    {g}const u8 *ra{i} = pa + min(m0 + {i}, M - 1) * sam;\n" for i in range(RM)]
    lines.append(f"    if (n0 + {NB} <= N) {{\n")
    lines += [f"        {vt} c{i}_{v} = ({vt})(0);\n" for i in range(RM) for v in range(RN)]
    lines.append(f"        {g}const {ct} *pbk = ({g}const {ct} *)(pb + n0 * {size});\n")
    lines.append("        for (i64 k = 0; k < K; ++k) {\n")
    lines += [f"            {vt} b{v} = vload{VW}({v}, pbk);\n" for v in range(RN)]
    for i in range(RM):
        lines.append(f"            {vt} a{i} = ({vt})(*({g}const {ct} *)(ra{i} + k * sak));\n")
        lines += [f"            c{i}_{v} = fma(a{i}, b{v}, c{i}_{v});\n" for v in range(RN)]
    lines.append(f"            pbk = ({g}const {ct} *)((({g}const u8 *)pbk) + sbk);\n        }}\n")
    for i in range(RM):
        lines.append(f"        if (m0 + {i} < M) {{ {g}{ct} *pci = ({g}{ct} *)(pc + (m0 + {i}) * scm"
                     f" + n0 * {size});")
        lines += [f" vstore{VW}(c{i}_{v}, {v}, pci);" for v in range(RN)]
        lines.append(" }\n")
    lines.append("    } else {\n")
    lines.append("        for (i64 col = n0; col < N; ++col) {\n")
    lines += [f"            {ct} c{i} = 0;\n" for i in range(RM)]
    lines.append(f"            {g}const u8 *pbc = pb + col * {size};\n")
    lines.append("            for (i64 k = 0; k < K; ++k) {\n")
    lines.append(f"                {ct} b = *({g}const {ct} *)(pbc + k * sbk);\n")
    lines += [f"                c{i} = fma(*({g}const {ct} *)(ra{i} + k * sak), b, c{i});\n"
              for i in range(RM)]
    lines.append("            }\n")
    lines += [f"            if (m0 + {i} < M) *({g}{ct} *)(pc + (m0 + {i}) * scm + col * {size})"
              f" = c{i};\n" for i in range(RM)]
    lines.append("        }\n    }\n}\n")
    sig = Signature("multiply", s.acc, (Operand(s.acc, s.acc), Operand(s.acc, s.acc)))
    return source(d, [sig]) + "".join(lines), name, [t for t, _ in params]
