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

On CPU OpenCL devices float32 and float64 take the vector kernel instead
(:func:`_vector_program`: rows x vectors of columns a work-item, no local memory, the
layout chosen by N); a symmetric product (``x.mT @ x``) leaves out the blocks below the
diagonal and mirrors the upper triangle (:data:`SYMMETRIC_MIN`).

Accumulators: floats and complex in their own type (float16 in float32),
integers in the unsigned type of at least 32 bits (wrapping like NumPy, no
signed overflow in C), converted to the result type at the store.  Floating
multiply-adds are fused (``fma``; contracted in the vector kernel), as BLAS
libraries do: matmul results are compared within a tolerance, unlike
elementwise ones (which keep contraction off, docs/kernels.md).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from ..._array.make import new_array
from ..._array.transfer import copy_raw
from ...backends._kernels import collapse
from ...backends.base import RawView
from . import qualify
from .generator import _CTYPE, Operand, Signature, _convert, _load, _store, source
from .launcher import aligned
from .reduce import _BARRIER, _IDS, _LOCAL, compiled

__all__ = ["Spec", "program", "run", "TILES", "accumulator"]

TILES = {"cpu": (16, 16, 4, 4, 1, 0), "gpu": (16, 16, 4, 4, 16, 1)}
"""``(TM, TN, RM, RN, BK, local)`` of the generic kernel by launch hint: work-items per
group along rows and columns, the register block of one work-item, the K step of the local
tiles and whether tiles go through local memory.  GPUs: 16 x 16 threads with 4 x 4
registers each, 16-deep local tiles (a 64 x 64 tile of C, 8 KiB of shared memory for
float32), the classic register-blocked SGEMM shape (benchmarks/gpu_check.sh measures it).
CPU devices read global memory directly (PoCL's local memory is ordinary memory plus a
loop per barrier).  Measured here, float32 1024 x 1024 on PoCL 3.1, machine shared, NumPy
55-166 GFLOP/s in the same runs: local tiles 8x8 items 4x4 regs 1.8 GFLOP/s, 16x16 / 4x4
6.2-6.4, 8x8 / 8x8 7.1-8.5; without local memory 16x16 / 4x4 13.1 (this entry: integers,
complex and mixed dtypes; float32/float64 take the vector kernel below)."""

VECTOR = {("cpu", "f4"): ((4, 6, 1, 16), (4, 6, 2, 8), (4, 16, 1, 8)),
          ("cpu", "f8"): ((4, 8, 1, 8), (4, 6, 2, 4), (4, 16, 1, 4))}
"""The layouts ``(work-items per group, rows, vectors, vector width)`` of the vector kernel,
by (launch hint, dtype key), widest block of columns first: the first whose shape the device
qualifies (``qualify.py``) and whose block (vectors x width columns) fits in N runs, else the
narrowest the device qualifies (:func:`_vector_layout`).  Columns beyond the last full block
take a scalar loop, so a block wider than N would run every column scalar: ``A.T @ b`` of
24000 x 256 by 8 columns (float32) took 17-24 ms in 64 columns, 4.7-5.8 in 16 rows x 1
vector of 8 (NumPy 4.4-7).

One layout serves both PoCLs, whose targets differ (PoCL 3.1 here compiles for AVX-512,
pip's PoCL 3.0 for the AVX2 of ``znver3``; both report a preferred float width of 16, so the
device cannot be asked): 6 rows by one vector of 16 floats is 6 accumulators on AVX-512 and
12 halves on AVX2 (the classic 6 x 16 SGEMM block of 16 registers).  Measured 2026-12-04,
float32, medians of 7 interleaved runs (ms; NumPy in the same runs: ``x.T @ x`` of
24000 x 256 13.7-14.2, 512 x 512 squared 1.5): PoCL 3.0: 6 x 1 x 16 12.9 / 1.9, 4 x 4 x 16
23.0 / 3.4, 6 x 2 x 8 14.2 / 2.2, 12 x 1 x 16 16.3 / 2.9; PoCL 3.1: 6 x 1 x 16 13.0 / 2.1,
4 x 4 x 16 14.2 / 2.4, 12 x 1 x 16 12.4 / 1.9, 6 x 2 x 8 18.5 / 2.6.  float64 (NumPy 28 /
2.9): PoCL 3.0 8 x 1 x 8 43.7 / 6.7, 4 x 4 x 8 49.9 / 7.4; PoCL 3.1 8 x 1 x 8 26.5 / 3.7,
4 x 4 x 8 22.8 / 3.6.  Narrow products (N = 8: ``A @ x``, ``A.T @ b``) are memory-bound: every
16 rows x 1 vector of 8 layout and its neighbours are within NumPy's 2.5-4 ms."""

PANEL_BYTES = 65536
"""Bytes of ``B`` per launch of the vector kernel: K is taken in chunks of
``PANEL_BYTES / (block columns x item size)`` rows (256 for 64 float32 or 32 float64
columns), so the panel of B a core streams stays in its cache.  Measured here (2048 x 2048,
PoCL, machine shared): float32 10.6 GFLOP/s with K whole, 29.6 / 39.6 / 33.1 with chunks of
512 / 256 / 128 rows of 64 columns (NumPy 30-59 in the same runs); float64 4.2 whole, 10.3
in chunks of 256 (NumPy 15); 1024 x 1024 float32 30.5 whole, 34.8 in chunks of 256.
24000 x 256 ``A.T @ A`` float32: chunks of 256 / 512 / 1024 / 2048 rows all 33-39 ms;
every chunk is a launch (30-60 us each on PoCL here)."""

SYMMETRIC_MIN = 1 << 22
"""Fewest multiply-adds (M x N x K) of a symmetric product (``x.mT @ x``, ``x @ x.mT``) for
which the vector kernel leaves out the blocks below the diagonal and a second launch
mirrors the upper triangle (``syrk``'s saving, as NumPy's OpenBLAS does): a launch costs
30-60 us on PoCL here, about what 4M multiply-adds take.  With 64-column blocks it leaves
out 37.5% of a 256 x 256 result, towards half for larger ones; 24000 x 256 float32
``x.T @ x`` went from 41 to 22 ms of CPU time (and exactly symmetric results)."""

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
        s.a, s.b, s.out, s.acc, s.tm, s.tn, s.rm, s.rn, s.bk, int(s.local), s.vector,
        int(s.a_rows_fast), int(s.b_rows_fast)))


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
    params += [("i8", f"i64 {v}") for v in _PARAMS]
    decl = ", ".join(p for _, p in params)

    def load(key: str, at: str) -> str:
        return _convert(d, key, s.acc, _load(d, key, at, True))

    def tile(which: str, key: str, rows: int, cols: int, rows_fast: bool) -> str:
        """Copy a ``rows x cols`` tile into local ``{which}s[k][...]`` (zeros outside)."""
        if which == "A":  # rows are i (M), columns kk (K); stored As[kk][i]
            r, c, rn, cn = "i_", "kk_", "M", "K"
            at = "pa + (m0 + i_) * sam + (k0 + kk_) * sak"
            dst = "As[kk_][i_]"
            rbase, cbase = "m0", "k0"
        else:  # rows are kk (K), columns j (N); stored Bs[kk][j]
            r, c, rn, cn = "kk_", "j_", "K", "N"
            at = "pb + (k0 + kk_) * sbk + (n0 + j_) * sbn"
            dst = "Bs[kk_][j_]"
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


def _vector_shape(key: str, width: int) -> str:
    return f"matmul_vector_{key}x{width}"


def _vector_layout(dev, hint: str, key: str, n: int) -> tuple | None:
    """The vector layout for ``key`` results of ``n`` columns: the first the device
    qualifies whose block of columns fits in ``n``, else the narrowest it qualifies, else
    None."""
    found = None
    for layout in VECTOR.get((hint, key), ()):
        if qualify.allows(dev, _vector_shape(key, layout[3])):
            found = layout
            if layout[2] * layout[3] <= n:
                break
    return found


LOCAL_BYTES_MAX = 32768
"""The most local (CUDA: shared) memory a kernel's tiles may take: what every OpenCL device
of the full profile offers (``CL_DEVICE_LOCAL_MEM_SIZE`` >= 32 KiB), below CUDA's 48 KiB of
static shared memory per block.  An H200 refused the matrix-vector shape (1024 rows of A,
16 deep: 64 KiB) with ptxas's "uses too much shared data"."""


def local_depth(bm: int, bn: int, bk: int, acc: str) -> int:
    """The K depth of the local tiles of a ``bm x bn`` block: ``bk``, halved until the
    ``As[bk][bm]`` and ``Bs[bk][bn]`` tiles of ``acc`` elements fit in
    :data:`LOCAL_BYTES_MAX` (at least 1)."""
    size = int(acc[1:])
    while bk > 1 and bk * (bm + bn) * size > LOCAL_BYTES_MAX:
        bk //= 2
    return bk


def tile_shape(tiles: tuple, M: int, N: int, acc: str) -> tuple:
    """``(TM, TN, RM, RN, BK, local)`` of the generic kernel for an ``M x N`` result from
    the launch hint's :data:`TILES` entry: a matrix times a vector puts every work-item on
    its own rows (a vector times a matrix, on its own columns), and local tiles are made
    shallow enough to fit (:func:`local_depth`)."""
    TM, TN, RM, RN, BK, local = tiles
    if N == 1:
        TM, TN, RM, RN = TM * TN, 1, RM, 1
    elif M == 1:
        TM, TN, RM, RN = 1, TM * TN, 1, RN
    if local:
        BK = local_depth(TM * RM, TN * RN, BK, acc)
    return TM, TN, RM, RN, BK, local


def _tiles(dev, hint: str) -> tuple:
    """``TILES[hint]``, without local tiles where the device does not qualify them."""
    tiles = TILES[hint]
    if tiles[5] and not qualify.allows(dev, "matmul_local_tiles"):
        return TILES["cpu"]
    return tiles


def run(a, b, result, hint: str | None = None) -> None:
    """``result[...] = a @ b`` on a device: ``a`` is ``(..., M, K)``, ``b`` ``(..., K, N)``,
    both at least 2-d with batch shapes that broadcast to ``result``'s ``(..., M, N)``.

    Enqueued on the device's queue (nothing waits); temporaries go back to the pool.
    ``hint`` overrides the device's launch hint (tests run the GPU kernels on PoCL).
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
    hint = hint or dev.impl.launch_hint(dev.index)
    rkey = _key(result._dtype)
    temps: list = []
    try:
        rc = result._raw()
        vec = _vector_layout(dev, hint, rkey, N) if dev.backend == "opencl" else None
        if vec is not None and not (a._dtype == b._dtype == result._dtype
                                    and rc.strides[-1] == rc.dtype.itemsize):
            vec = None
        sym = (vec is not None and N > vec[2] * vec[3] and M * N * K >= SYMMETRIC_MIN
               and _transposes(a._raw(), b._raw()))
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
            TM, TN, RM, RN, BK, local = tile_shape(_tiles(dev, hint), M, N, accumulator(rkey))
            spec = Spec(dev.backend, _key(ra.dtype), _key(rb.dtype), rkey, accumulator(rkey),
                        TM, TN, RM, RN, BK, bool(local),
                        a_rows_fast=abs(sam) < abs(sak) and M > 1,
                        b_rows_fast=abs(sbk) < abs(sbn) and K > 1)
            tiles_m, tiles_n = -(-M // (TM * RM)), -(-N // (TN * RN))
            L = TM * TN
        kernel = compiled(dev, spec, program, _kernels, _lock)
        groups = bshape[-1] * tiles_m * tiles_n
        # the vector kernel takes K in chunks (C += A[:, chunk] B[chunk]), so the panel of B
        # a core streams stays in its cache
        chunk = K if vec is None else max(1, PANEL_BYTES // (vec[2] * vec[3] * rc.dtype.itemsize))
        for idx in outer:
            oa = sum(i * st for i, st in zip(idx, sa, strict=False))
            ob = sum(i * st for i, st in zip(idx, sb, strict=False))
            oc = sum(i * st for i, st in zip(idx, sc, strict=False))
            for k0 in range(0, K, chunk):
                kn = min(chunk, K - k0)
                values = [ra.ptr + oa + k0 * sak, rb.ptr + ob + k0 * sbk, rc.ptr + oc, M, N,
                          kn, sam, sak, sbk, sbn, scm, scn, sa[-1], sb[-1], sc[-1], tiles_m,
                          tiles_n]
                if vec is not None:
                    values += [int(k0 > 0), int(sym)]
                kernel.launch(values, groups * L, L)
            if sym:  # the blocks left out below the diagonal: the transposes of those above
                mirror = compiled(dev, Mirror(dev.backend, rkey), _mirror_program, _kernels,
                                  _lock)
                mirror.launch([rc.ptr + oc, M, scm, scn, sc[-1]], bshape[-1] * M, 1)
    finally:
        for t in temps:
            t.free()


def _transposes(ra: RawView, rb: RawView) -> bool:
    """Whether ``ra`` is ``rb`` with its last two axes swapped (``x.mT @ x`` or
    ``x @ x.mT``): the same memory, so the product is symmetric."""
    return (ra.ptr == rb.ptr and ra.dtype == rb.dtype and ra.shape[:-2] == rb.shape[:-2]
            and ra.strides[:-2] == rb.strides[:-2]
            and ra.shape[-2:] == rb.shape[-1:-3:-1] and ra.strides[-2:] == rb.strides[-1:-3:-1])


@dataclass(frozen=True)
class Mirror:
    """The kernel that copies the upper triangle of a batch of square results to the lower
    (``C[i, j] = C[j, i]`` for ``i > j``): the end of a symmetric product."""

    dialect: str
    key: str


def _mirror_program(d, s: Mirror) -> tuple[str, str, list[str]]:
    """One work-item per row ``i`` of one matrix of the batch: ``C[i, :i] = C[:i, i]``."""
    ct = _CTYPE[s.key]
    g = d.glob
    name = f"mm_mirror_{s.key}"
    params = [("ptr", f"{g}u8 *pc"), ("i8", "i64 M"), ("i8", "i64 scm"), ("i8", "i64 scn"),
              ("i8", "i64 scb")]
    glo = _IDS[s.dialect][2]
    body = (f"{d.kernel} void {name}({', '.join(p for _, p in params)}) {{\n"
            f"    i64 t = {glo}, bt = t / M, i = t - bt * M;\n"
            f"    pc += bt * scb;\n"
            f"    for (i64 j = 0; j < i; ++j)\n"
            f"        *({g}{ct} *)(pc + i * scm + j * scn) = "
            f"*({g}const {ct} *)(pc + j * scm + i * scn);\n}}\n")
    sig = Signature("multiply", s.key, (Operand(s.key, s.key), Operand(s.key, s.key)))
    return source(d, [sig]) + body, name, [t for t, _ in params]


_PARAMS = ("M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn", "sab", "sbb", "scb",
           "tiles_m", "tiles_n")


def _vector_program(d, s: Spec) -> tuple[str, str, list[str]]:
    """The CPU-device kernel (OpenCL C only): one work-item computes ``rm`` rows by ``rn``
    vectors of ``vector`` columns from global memory (no local tiles: a CPU's caches
    hold them), ``A`` broadcast from scalars, ``B`` and ``C`` rows loaded and stored as
    vectors (their column stride is the item size); columns beyond the last full block
    take a scalar loop.  Work-groups of one column panel are neighbours (rows fastest),
    so a core finds the panel of ``B`` in its cache.

    Vectors are read and written through a typedef of item alignment (one unaligned
    ``vmovups``; pip's PoCL 3.0 makes each ``vloadN`` a function call, and aborts on the
    16-wide ones), and the multiply-adds are contracted (``FP_CONTRACT ON`` for this kernel:
    ``vfmadd`` on both PoCLs, where PoCL 3.0 calls a function for each vector ``fma()``)."""
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
    params.append(("i8", "i64 more"))  # 0: C = A B; 1: C += A B (a later chunk of K)
    params.append(("i8", "i64 sym"))  # 1: C symmetric, blocks below the diagonal left out
    decl = ", ".join(p for _, p in params)
    ut = f"{vt}_u{size}"
    lines = ["#pragma OPENCL FP_CONTRACT ON\n",
             f"typedef {vt} {ut} __attribute__((aligned({size})));\n",
             f"__kernel void {name}({decl}) {{\n",
             "    i64 l = get_local_id(0), grp = get_group_id(0);\n",
             "    i64 per = tiles_m * tiles_n, bt = grp / per, rest = grp - bt * per;\n",
             "    i64 tni = rest / tiles_m, tmi = rest - tni * tiles_m;\n",
             f"    i64 m0 = (tmi * {L} + l) * {RM}, n0 = tni * {NB};\n",
             f"    if (m0 >= M || (sym && m0 >= n0 + {NB})) return;\n",
             "    pa += bt * sab; pb += bt * sbb; pc += bt * scb;\n"]
    lines += [f"    {g}const u8 *ra{i} = pa + min(m0 + {i}, M - 1) * sam;\n" for i in range(RM)]
    lines.append(f"    if (n0 + {NB} <= N) {{\n")
    lines += [f"        {vt} c{i}_{v} = ({vt})(0);\n" for i in range(RM) for v in range(RN)]
    lines.append("        if (more) {\n")
    lines += [f"            if (m0 + {i} < M) c{i}_{v} = (({g}const {ut} *)(pc + (m0 + {i}) * scm"
              f" + n0 * {size}))[{v}];\n" for i in range(RM) for v in range(RN)]
    lines.append("        }\n")
    lines.append(f"        {g}const {ct} *pbk = ({g}const {ct} *)(pb + n0 * {size});\n")
    lines.append("        for (i64 k = 0; k < K; ++k) {\n")
    lines += [f"            {vt} b{v} = (({g}const {ut} *)pbk)[{v}];\n" for v in range(RN)]
    for i in range(RM):
        lines.append(f"            {vt} a{i} = ({vt})(*({g}const {ct} *)(ra{i} + k * sak));\n")
        lines += [f"            c{i}_{v} += a{i} * b{v};\n" for v in range(RN)]
    lines.append(f"            pbk = ({g}const {ct} *)((({g}const u8 *)pbk) + sbk);\n        }}\n")
    for i in range(RM):
        lines.append(f"        if (m0 + {i} < M) {{ {g}{ut} *pci = ({g}{ut} *)(pc + (m0 + {i}) * scm"
                     f" + n0 * {size});")
        lines += [f" pci[{v}] = c{i}_{v};" for v in range(RN)]
        lines.append(" }\n")
    lines.append("    } else {\n")
    lines.append("        for (i64 col = n0; col < N; ++col) {\n")
    lines += [f"            {ct} c{i} = (more && m0 + {i} < M) ? *({g}const {ct} *)(pc + "
              f"(m0 + {i}) * scm + col * {size}) : 0;\n" for i in range(RM)]
    lines.append(f"            {g}const u8 *pbc = pb + col * {size};\n")
    lines.append("            for (i64 k = 0; k < K; ++k) {\n")
    lines.append(f"                {ct} b = *({g}const {ct} *)(pbc + k * sbk);\n")
    lines += [f"                c{i} += *({g}const {ct} *)(ra{i} + k * sak) * b;\n"
              for i in range(RM)]
    lines.append("            }\n")
    lines += [f"            if (m0 + {i} < M) *({g}{ct} *)(pc + (m0 + {i}) * scm + col * {size})"
              f" = c{i};\n" for i in range(RM)]
    lines.append("        }\n    }\n}\n")
    sig = Signature("multiply", s.acc, (Operand(s.acc, s.acc), Operand(s.acc, s.acc)))
    return source(d, [sig]) + "".join(lines), name, [t for t, _ in params]


# Qualification (qualify.py): each vector width is a shape whose representative is the
# construct the vector kernel adds to the scalar kernels: vectors of that width loaded and
# stored through the unaligned typedef and a contracted multiply-add of a broadcast scalar.
# PoCL 3.0's LLVM 14 aborts the process on ``fma()`` of 16 floats or 8 doubles and on its own
# ``vload16``/``vstore16`` ("Do not know how to scalarize this operator's operand"), so the
# kernel uses neither; its other 16-wide constructs pass there.  The local tiles' shape has a
# representative that exchanges values through local memory across a barrier.  Small kernels
# keep the probe to seconds.

_PROBE_ITEMS = 64
_CL_TYPE = {"f4": "float", "f8": "double"}


def _vector_source(key: str, width: int) -> str:
    ct = _CL_TYPE[key]
    t = f"{ct}{width}"
    ut = f"{t}_u"
    size = int(key[1:])
    return (("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if key == "f8" else "")
            + "#pragma OPENCL FP_CONTRACT ON\n"
            + f"typedef {t} {ut} __attribute__((aligned({size})));\n"
            + f"__kernel void probe(__global const {ct} *x, __global {ct} *out) {{\n"
            f"    size_t i = get_global_id(0);\n"
            f"    {t} r = *(__global const {ut} *)(x + i), b = *(__global const {ut} *)(x + i + 1);\n"
            f"    r += ({t})(x[i + 2]) * b;\n"
            f"    *(__global {ut} *)(out + i * {width}) = r;\n}}\n")


_LOCAL_SOURCE = """__kernel void probe(__global const float *x, __global float *out) {
    __local float tile[64];
    size_t l = get_local_id(0);
    tile[l] = x[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_global_id(0)] = tile[63 - l] + tile[l];
}
"""


def _vector_probe(dev, key: str, width: int) -> None:
    dt = np.dtype(f"f{key[1]}")
    n = _PROBE_ITEMS
    x = (np.arange(n + width) % 7 + 1).astype(dt)
    got, = qualify.run_probe(dev, _vector_source(key, width), [x], [(n * width, dt)], n)
    rows = np.lib.stride_tricks.sliding_window_view(x, width)
    want = rows[:n] + x[2:n + 2, None] * rows[1:n + 1]  # small integers: exact, fused or not
    if not np.array_equal(got.reshape(n, width), want):
        raise ValueError(f"wrong multiply-add of {_CL_TYPE[key]}{width} vectors: {got[:4]} "
                         f"for {want.ravel()[:4]}")


def _local_probe(dev) -> None:
    x = np.arange(_PROBE_ITEMS, dtype=np.float32)
    got, = qualify.run_probe(dev, _LOCAL_SOURCE, [x], [(_PROBE_ITEMS, x.dtype)], _PROBE_ITEMS,
                             64)
    if not np.array_equal(got, x[::-1] + x):
        raise ValueError(f"wrong exchange through local memory: {got[:4]}")


def _register_shapes() -> None:
    for (_hint, key), layouts in VECTOR.items():
        for layout in layouts:
            width = layout[3]
            qualify.register(_vector_shape(key, width),
                             f"matmul: unaligned {_CL_TYPE[key]}{width} vectors, multiply-add",
                             lambda key=key, width=width: _vector_source(key, width),
                             lambda dev, key=key, width=width: _vector_probe(dev, key, width))
    qualify.register("matmul_local_tiles", "matmul: local-memory tiles and barriers",
                     lambda: _LOCAL_SOURCE, _local_probe)


_register_shapes()
