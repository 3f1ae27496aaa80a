"""Device sorting and searching: a stable LSD radix sort, a per-row merge sort and a
binary search, in OpenCL C and CUDA C from one template (docs/sorting.md).

Keys are never stored.  Every kernel works on the raw bits of the elements
(``W`` bytes: 1, 2, 4, 8, or 16 for complex128) and derives an order-preserving
unsigned key from them when it needs one (:func:`program`, ``key_of``):
unsigned integers as they are, signed integers with the sign bit flipped,
bool as 0/1, floats with the sign bit set for positives and all bits inverted
for negatives, ``-0`` as ``+0`` and every NaN as the largest key (NaN last,
in both directions; ``descending`` inverts every other key).  Complex values
sort as NumPy sorts them: by (NaN class, real, imaginary), where the class is
0 without NaN, 1 for a NaN imaginary part, 2 for a NaN real part, 3 for both.

One program per element width and index width holds one kernel; a run-time
``mode`` selects what it does, so a whole sort costs one compile per width
(PoCL takes 0.2-2 s per program):

* ``mode 0`` (histogram): each work-item counts the 256 digit values of pass
  ``pass`` over one chunk of one row;
* ``mode 1`` (scatter): each work-item moves its chunk to the positions the
  exclusive scan of the histograms gives (the scan is ``device/scan.py``'s),
  in order, so the sort is stable;
* ``mode 2`` (rows): each work-item sorts a whole row: insertion sort of runs
  of 16, then bottom-up merges between two buffers (stable);
* ``mode 3`` (search) and the set helpers: one work-item per searched value.

Every row of every pass is handled by the same launch, so a batch of many
short rows costs as many launches as one row.  Buffers (the two ping-pong
buffers of values and of indices, the histograms and their scan) come from
the pool or the active ``ga.cached`` scope and are freed before :func:`sort`
returns.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass

import numpy as np

from ..._array.make import new_array
from ..._array.transfer import copy_raw
from . import reduce as red
from . import scan as device_scan

__all__ = ["sort", "search", "program", "SortSpec", "ROWS_MAX", "ROWS_TOTAL", "CHUNK_MIN", "passes",
           "override_hint"]

ROWS_MAX = 128
"""Rows at most this long are sorted by one work-item each (``mode 2``: insertion sort of
runs of 16, then merges), and so is everything of at most ``ROWS_TOTAL`` elements; longer
rows take the radix passes.  Measured on PoCL here (2 cores shared with other jobs, so
+-30 %; argsort of float32, one launch for all rows; `python benchmarks/sort.py
--crossover`; docs/sorting.md, "The decision"):

  rows x length      merge (rows)   radix
  1 x 64               0.08 ms       0.61 ms
  1 x 1024             0.11 ms       0.68 ms
  1 x 4096             0.28 ms       0.91 ms
  1 x 16384            1.40 ms       0.93 ms
  1 x 65536            6.39 ms       1.29 ms
  16384 x 64           63 ms         73 ms
  4096 x 256           90 ms         57 ms
  1024 x 1024          69 ms         45 ms
  64 x 16384           133 ms        22 ms

A short single row is launch-bound (the radix sort of float32 is 4 passes of 3 launches);
batches of rows from 256 long are faster by radix, whose chunks stream whole rows."""

ROWS_TOTAL = 8192
"""Elements (all rows together) up to which the merge kernel is used whatever the length."""

CHUNK_MIN = {"cpu": 1 << 14, "gpu": 1 << 12}
"""Fewest elements a radix work-item handles (its 256 counters must pay off)."""

_CHUNKS = {"cpu": 4 * (os.cpu_count() or 2), "gpu": 4096}
"""Radix work-items that keep the device busy (cores x 4 on a CPU device)."""

ROWS_LOCAL = 64

_KERNEL_DIMS = 4
"""Kept (non-sorted) axes a kernel decodes; more are first copied into one."""

override_hint: list[str] = []
"""Tests push ``"gpu"`` here to run the GPU-shaped launches on a CPU device."""

_KINDS = {"b": 0, "u": 1, "i": 2, "f": 3, "c": 4}
_lock = threading.Lock()
_kernels: dict[tuple, object] = {}


@dataclass(frozen=True)
class SortSpec:
    """What a kernel is specialised on: the dialect, the element width in bytes, the index
    width (4 or 8) and the family (``"sort"`` or ``"search"``)."""

    dialect: str
    width: int
    index: int
    family: str = "sort"


def passes(dt: np.dtype) -> int:
    """Radix passes a dtype takes (8-bit digits; complex adds one for the NaN class)."""
    if dt.kind == "c":
        return dt.itemsize + 1
    return dt.itemsize


# The source ---------------------------------------------------------------------------------
def _helpers(d, W: int) -> str:
    fn = "DEV"
    if W == 16:
        vt = "typedef struct { u64 a; u64 b; } VT;\n"
    else:
        vt = f"typedef u{8 * W} VT;\n"
    out = [vt]
    # float keys: NaN -> all ones (last in both directions), -0 -> +0, then the sign trick
    for bits, t, sign, expo in ((16, "u16", "0x8000", "0x7C00"), (32, "u32", "0x80000000u",
                                                                     "0x7F800000u"),
                                (64, "u64", "0x8000000000000000UL", "0x7FF0000000000000UL")):
        if bits > 8 * W:
            continue
        out.append(
            f"{fn} {t} fkey{bits}({t} v, int desc) {{\n"
            f"    {t} m = ({t})(v & ({t})~({t}){sign});\n"
            f"    if (m > ({t}){expo}) return ({t})~({t})0;\n"
            f"    if (m == 0) v = 0;\n"
            f"    {t} k = (v & ({t}){sign}) ? ({t})~v : ({t})(v | ({t}){sign});\n"
            f"    return desc ? ({t})~k : k;\n}}\n"
            f"{fn} u32 fnan{bits}({t} v) {{ return ({t})(v & ({t})~({t}){sign}) > ({t}){expo} "
            f"? 1u : 0u; }}\n")
    if W == 16:  # complex128 only
        out.append(
            f"{fn} u32 digit(VT v, int p, int kind, int desc) {{\n"
            f"    if (p < 8) return (u32)(fkey64(v.b, desc) >> (8 * p)) & 255u;\n"
            f"    if (p < 16) return (u32)(fkey64(v.a, desc) >> (8 * (p - 8))) & 255u;\n"
            f"    return (fnan64(v.a) << 1) | fnan64(v.b);\n}}\n"
            f"{fn} int less(VT x, VT y, int kind, int desc) {{\n"
            f"    u32 cx = (fnan64(x.a) << 1) | fnan64(x.b), cy = (fnan64(y.a) << 1) | fnan64(y.b);\n"
            f"    if (cx != cy) return cx < cy;\n"
            f"    u64 rx = fkey64(x.a, desc), ry = fkey64(y.a, desc);\n"
            f"    if (rx != ry) return rx < ry;\n"
            f"    return fkey64(x.b, desc) < fkey64(y.b, desc);\n}}\n"
            f"{fn} int same(VT x, VT y, int kind) {{\n"
            f"    if (((fnan64(x.a) << 1) | fnan64(x.b)) != 0u) return 0;\n"
            f"    return fkey64(x.a, 0) == fkey64(y.a, 0) && fkey64(x.b, 0) == fkey64(y.b, 0);\n}}\n")
        return "".join(out)
    t = f"u{8 * W}"
    sign = {1: "0x80", 2: "0x8000", 4: "0x80000000u", 8: "0x8000000000000000UL"}[W]
    fl = (f"    if (kind == 3) return fkey{8 * W}(v, desc);\n" if W > 1 else "")
    out.append(
        f"{fn} {t} key_of(VT v, int kind, int desc) {{\n{fl}"
        f"    {t} k = kind == 0 ? ({t})(v != 0) : kind == 2 ? ({t})(v ^ ({t}){sign}) : v;\n"
        f"    return desc ? ({t})~k : k;\n}}\n")
    if W == 8:  # complex64 travels as one u64: real part in the low word
        cplx_digit = ("    if (kind == 4) {\n"
                      "        u32 re = (u32)v, im = (u32)(v >> 32);\n"
                      "        if (p < 4) return (fkey32(im, desc) >> (8 * p)) & 255u;\n"
                      "        if (p < 8) return (fkey32(re, desc) >> (8 * (p - 4))) & 255u;\n"
                      "        return (fnan32(re) << 1) | fnan32(im);\n    }\n")
        cplx_less = ("    if (kind == 4) {\n"
                     "        u32 xr = (u32)x, xi = (u32)(x >> 32), yr = (u32)y, yi = (u32)(y >> 32);\n"
                     "        u32 cx = (fnan32(xr) << 1) | fnan32(xi), cy = (fnan32(yr) << 1) | fnan32(yi);\n"
                     "        if (cx != cy) return cx < cy;\n"
                     "        if (fkey32(xr, desc) != fkey32(yr, desc)) return fkey32(xr, desc) < fkey32(yr, desc);\n"
                     "        return fkey32(xi, desc) < fkey32(yi, desc);\n    }\n")
        cplx_same = ("    if (kind == 4) {\n"
                     "        u32 xr = (u32)x, xi = (u32)(x >> 32), yr = (u32)y, yi = (u32)(y >> 32);\n"
                     "        if (fnan32(xr) | fnan32(xi)) return 0;\n"
                     "        return fkey32(xr, 0) == fkey32(yr, 0) && fkey32(xi, 0) == fkey32(yi, 0);\n    }\n")
    else:
        cplx_digit = cplx_less = cplx_same = ""
    nan = f"    if (kind == 3 && fnan{8 * W}(x)) return 0;\n" if W > 1 else ""
    out.append(
        f"{fn} u32 digit(VT v, int p, int kind, int desc) {{\n{cplx_digit}"
        f"    return (u32)(key_of(v, kind, desc) >> (8 * p)) & 255u;\n}}\n"
        f"{fn} int less(VT x, VT y, int kind, int desc) {{\n{cplx_less}"
        f"    return key_of(x, kind, desc) < key_of(y, kind, desc);\n}}\n"
        f"{fn} int same(VT x, VT y, int kind) {{\n{cplx_same}{nan}"
        f"    return key_of(x, kind, 0) == key_of(y, kind, 0);\n}}\n")
    return "".join(out)


def _row_offsets() -> str:
    out = ["i64 kx = 0, kz = 0; { i64 q_ = o, c_;"]
    for k in range(_KERNEL_DIMS - 1, 0, -1):
        out.append(f" c_ = q_ % ek{k}; q_ /= ek{k}; kx += c_ * skx{k}; kz += c_ * skz{k};")
    out.append(" kx += q_ * skx0; kz += q_ * skz0; }")
    return "".join(out)


def _sort_kernel(d, spec: SortSpec, name: str) -> tuple[str, list[str]]:
    g = d.glob
    IT = f"u{8 * spec.index}"
    glo = red._IDS[spec.dialect][2]
    params = [("ptr", f"{g}const u8 *px"), ("ptr", f"{g}u8 *pz"), ("ptr", f"{g}u8 *pv"),
              ("ptr", f"{g}u8 *va"), ("ptr", f"{g}u8 *ia"), ("ptr", f"{g}u8 *vb"),
              ("ptr", f"{g}u8 *ib"), ("ptr", f"{g}u8 *tab"),
              ("i8", "i64 n_rows"), ("i8", "i64 n"), ("i8", "i64 G"), ("i8", "i64 sx"),
              ("i8", "i64 sz")]
    params += [("i8", f"i64 ek{k}") for k in range(_KERNEL_DIMS)]
    params += [("i8", f"i64 skx{k}") for k in range(_KERNEL_DIMS)]
    params += [("i8", f"i64 skz{k}") for k in range(_KERNEL_DIMS)]
    params += [("i4", "int mode"), ("i4", "int pass"), ("i4", "int kind"), ("i4", "int desc"),
               ("i4", "int with_index"), ("i4", "int src_x"), ("i4", "int dst_z")]
    # NVRTC unrolls the 256-counter loops fully (12-17 s per program); a loop is cheaper
    once = "\n#pragma unroll 1\n        " if spec.dialect == "cuda" else ""
    V = f"({g}VT *)"
    IP = f"({g}{IT} *)"
    # load element j of the source: from x (any strides) or from buffer a
    load = (f"(src_x ? *({g}const VT *)(px + kx + (j) * sx) : ({V}va)[row + (j)])")
    lidx = f"(src_x ? ({IT})(j) : ({IP}ia)[row + (j)])"
    # where the element goes: the result (value or index), or buffer b
    put = (f"if (dst_z) {{\n"
           f"                if (with_index) *({g}i64 *)(pz + kz + p_ * sz) = (i64)ix;\n"
           f"                else *({g}VT *)(pz + kz + p_ * sz) = v;\n"
           f"                if (with_index == 2) ({V}pv)[row + p_] = v;\n"
           f"            }} else {{ ({V}vb)[row + p_] = v; if (with_index) ({IP}ib)[row + p_] = ix; }}")
    body = f"""{d.kernel} void {name}({", ".join(p for _, p in params)}) {{
    i64 t = {glo};
    if (mode == 2) {{  /* one row per work-item: insertion sort of runs, then merges */
        if (t >= n_rows) return;
        i64 o = t, row = t * n;
        {_row_offsets()}
        {g}VT *sv = {V}va; {g}{IT} *si = {IP}ia; {g}VT *dv = {V}vb; {g}{IT} *di = {IP}ib;
        for (i64 j = 0; j < n; ++j) {{
            VT v = *({g}const VT *)(px + kx + j * sx);
            i64 k = j;
            i64 lo = j - j % 16;
            while (k > lo && less(v, sv[row + k - 1], kind, desc)) {{
                sv[row + k] = sv[row + k - 1]; si[row + k] = si[row + k - 1]; --k;
            }}
            sv[row + k] = v; si[row + k] = ({IT})j;
        }}
        for (i64 w = 16; w < n; w *= 2) {{
            for (i64 lo = 0; lo < n; lo += 2 * w) {{
                i64 mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
                i64 a = lo, b = mid, k = lo;
                while (a < mid && b < hi) {{
                    if (less(sv[row + b], sv[row + a], kind, desc)) {{
                        dv[row + k] = sv[row + b]; di[row + k] = si[row + b]; ++b;
                    }} else {{ dv[row + k] = sv[row + a]; di[row + k] = si[row + a]; ++a; }}
                    ++k;
                }}
                for (; a < mid; ++a, ++k) {{ dv[row + k] = sv[row + a]; di[row + k] = si[row + a]; }}
                for (; b < hi; ++b, ++k) {{ dv[row + k] = sv[row + b]; di[row + k] = si[row + b]; }}
            }}
            {g}VT *tv = sv; sv = dv; dv = tv; {g}{IT} *ti = si; si = di; di = ti;
        }}
        for (i64 j = 0; j < n; ++j) {{
            VT v = sv[row + j];
            if (with_index) *({g}i64 *)(pz + kz + j * sz) = (i64)si[row + j];
            else *({g}VT *)(pz + kz + j * sz) = v;
            if (with_index == 2) ({V}pv)[row + j] = v;
        }}
        return;
    }}
    if (t >= n_rows * G) return;
    i64 o = t / G, gg = t - o * G, row = o * n;
    i64 chunk = (n + G - 1) / G, start = gg * chunk;
    i64 end = start + chunk < n ? start + chunk : n;
    {_row_offsets()}
    u32 cnt[256];
    {g}u32 *T = ({g}u32 *)tab;
    if (mode == 0) {{  /* histogram of this chunk's digits */
        {once}for (int k = 0; k < 256; ++k) cnt[k] = 0;
        for (i64 j = start; j < end; ++j) cnt[digit({load}, pass, kind, desc)]++;
        {once}for (int k = 0; k < 256; ++k) T[(o * 256 + k) * G + gg] = cnt[k];
        return;
    }}
    /* scatter: T is the exclusive scan of the histograms, one row of 256 * G + 1 per row */
    {once}for (int k = 0; k < 256; ++k) cnt[k] = T[o * (256 * G + 1) + (i64)k * G + gg];
    for (i64 j = start; j < end; ++j) {{
        VT v = {load};
        {IT} ix = with_index ? {lidx} : ({IT})0;
        i64 p_ = (i64)(cnt[digit(v, pass, kind, desc)]++);
        {put}
    }}
}}
"""
    return body, [t for t, _ in params]


def _search_kernel(d, spec: SortSpec, name: str) -> tuple[str, list[str]]:
    g = d.glob
    glo = red._IDS[spec.dialect][2]
    params = [("ptr", f"{g}const u8 *p1"), ("ptr", f"{g}const u8 *ps"),
              ("ptr", f"{g}const u8 *p2"), ("ptr", f"{g}u8 *pz"),
              ("i8", "i64 n1"), ("i8", "i64 n2"), ("i8", "i64 s1"), ("i8", "i64 ss"),
              ("i4", "int mode"), ("i4", "int kind"), ("i4", "int has_sorter")]
    body = f"""{d.kernel} void {name}({", ".join(p for _, p in params)}) {{
    i64 t = {glo};
    if (t >= n2) return;
    {g}const VT *x2 = ({g}const VT *)p2;
    if (mode == 4) {{  /* run starts of sorted values: pz[t] = t == 0 || x2[t-1] != x2[t] */
        pz[t] = (u8)(t == 0 || !same(x2[t - 1], x2[t], kind));
        return;
    }}
    if (mode == 5) {{  /* counts of runs from their starts (i64, n1 = the element count) */
        {g}const i64 *st = ({g}const i64 *)p2;
        i64 next = t + 1 < n2 ? st[t + 1] : n1;
        (({g}i64 *)pz)[t] = next - st[t];
        return;
    }}
    if (mode == 6) {{  /* inverse: pz[perm[t]] = rank[t] - 1 (ps: perm, p1: inclusive rank) */
        i64 k = (({g}const i64 *)ps)[t];
        (({g}i64 *)pz)[k] = (({g}const i64 *)p1)[t] - 1;
        return;
    }}
    VT v = x2[t];
    i64 lo = 0, hi = n1;
    while (lo < hi) {{  /* the first i with x1[i] >= v (left) or > v (right) */
        i64 mid = lo + (hi - lo) / 2;
        i64 at = mid;
        if (has_sorter) {{
            at = *({g}const i64 *)(ps + mid * ss);
            at = at < 0 ? (at < -n1 ? 0 : at + n1) : (at >= n1 ? n1 - 1 : at);
        }}
        VT e = *({g}const VT *)(p1 + at * s1);
        int go_right = mode == 1 ? !less(v, e, kind, 0) : less(e, v, kind, 0);
        if (go_right) lo = mid + 1; else hi = mid;
    }}
    if (mode <= 1) {{ (({g}i64 *)pz)[t] = lo; return; }}
    /* isin (2) / not in (3): x1 is sorted x2-values, contiguous */
    int found = lo < n1 && same(*({g}const VT *)(p1 + lo * s1), v, kind);
    pz[t] = (u8)(mode == 2 ? found : !found);
}}
"""
    return body, [t for t, _ in params]


def program(d, spec: SortSpec) -> tuple[str, str, list[str]]:
    """(source, kernel name, parameter types) of the kernel of ``spec``."""
    name = f"{spec.family}_w{spec.width}_i{spec.index}"
    head = [d.prelude, "#ifndef DEV\n#define DEV " + d.fn + "\n#endif\n", _helpers(d, spec.width)]
    if spec.family == "sort":
        body, types = _sort_kernel(d, spec, name)
    else:
        body, types = _search_kernel(d, spec, name)
    return "".join(head) + body, name, types


def _kernel(device, spec: SortSpec):
    return red.compiled(device, spec, program, _kernels, _lock)


def _hint(dev) -> str:
    return (override_hint or [dev.impl.launch_hint(dev.index)])[-1]


def _kept(shape, xs, zs, ax: int) -> list[tuple[int, int, int]]:
    return device_scan._kept(shape, xs, zs, ax)


def _aligned_raw(x, temps: list):
    """``x``'s raw view, through an aligned copy when an element is not word-aligned."""
    raw = x._raw()
    unit = min(x._dtype.itemsize, 8)
    bits = raw.ptr
    for s in raw.strides:
        bits |= s
    if bits % unit:
        tmp = new_array(x._shape, x._dtype, x._storage.device, "device")
        temps.append(tmp)
        copy_raw(tmp, x)
        raw = tmp._raw()
    return raw


# Sorting --------------------------------------------------------------------------------------
def sort(x, ax: int, descending: bool, result, indices: bool, values=None,
         kind: str | None = None) -> None:
    """Sort ``x`` (live, non-empty, on a device) along ``ax`` stably into ``result``: the
    sorted values, or with ``indices`` the int64 indices (argsort), with the sorted values also written into ``values`` (a
    contiguous array of ``x``'s dtype and shape, rows along the last axis) when given.
    ``kind`` overrides the dtype kind the keys are made for (tests sort float16 bits held
    in a uint16 array with ``kind="f"`` on a device without float16)."""
    dev = x._storage.device
    temps = []
    try:
        raw = _aligned_raw(x, temps)
        z = result._raw()
        kept = _kept(raw.shape, raw.strides, z.strides, ax)
        if len(kept) > _KERNEL_DIMS:  # a contiguous copy collapses the kept axes
            tmp = new_array(x._shape, x._dtype, dev, "device")
            temps.append(tmp)
            copy_raw(tmp, x)
            raw = tmp._raw()
            kept = _kept(raw.shape, raw.strides, z.strides, ax)
        kept = [(1, 0, 0)] * (_KERNEL_DIMS - len(kept)) + kept
        n = raw.shape[ax]
        n_rows = math.prod(k[0] for k in kept)
        with_index = (2 if values is not None else 1) if indices else 0
        dt = x._dtype
        W = dt.itemsize
        IW = 4 if n < 2**32 else 8
        kernel = _kernel(dev, SortSpec(dev.backend, W, IW))
        hint = _hint(dev)
        kind = _KINDS[kind or dt.kind]
        tail = [*(k[0] for k in kept), *(k[1] for k in kept), *(k[2] for k in kept)]
        pv = values._raw().ptr if values is not None else 0
        total = n_rows * n
        pz = z.ptr

        def buf(size: int) -> int:
            a = new_array((total * size,), np.dtype(np.uint8), dev, "device")
            temps.append(a)
            return a._raw().ptr

        vdt, idt = W, IW
        if n <= ROWS_MAX or n_rows * n <= ROWS_TOTAL:
            va, vb = buf(vdt), buf(vdt)
            ia, ib = buf(idt), buf(idt)
            L = ROWS_LOCAL
            kernel.launch([raw.ptr, pz, pv, va, ia, vb, ib, 0, n_rows, n, 1, raw.strides[ax],
                           z.strides[ax], *tail, 2, 0, kind, int(descending), with_index, 1, 1],
                          -(-n_rows // L) * L, L)
            return
        G = max(1, min(-(-_CHUNKS[hint] // n_rows), -(-n // CHUNK_MIN[hint]), 1 << 16))
        L = 1 if hint == "cpu" else 64
        gsize = -(-(n_rows * G) // L) * L
        P = passes(dt)
        bufs = [(0, 0), (0, 0)]
        if P > 1:
            bufs[0] = (buf(vdt), buf(idt) if with_index else 0)
        if P > 2:
            bufs[1] = (buf(vdt), buf(idt) if with_index else 0)
        hist = new_array((n_rows, 256 * G), np.dtype(np.uint32), dev, "device")
        temps.append(hist)
        offs = new_array((n_rows, 256 * G + 1), np.dtype(np.uint32), dev, "device")
        temps.append(offs)
        from ..reductions import SCANS  # same layer; reductions imports the device package

        scan_row = SCANS["cumulative_sum"]
        src = (0, 0)
        for p in range(P):
            first, last = p == 0, p == P - 1
            dst = (0, 0) if last else bufs[p % 2]
            common = [raw.ptr, pz, pv, src[0], src[1], dst[0], dst[1]]
            scalars = [n_rows, n, G, raw.strides[ax], z.strides[ax], *tail]
            flags = [p, kind, int(descending), with_index, int(first), int(last)]
            kernel.launch([*common, hist._raw().ptr, *scalars, 0, *flags], gsize, L)
            device_scan.run(scan_row, hist, 1, True, offs)
            kernel.launch([*common, offs._raw().ptr, *scalars, 1, *flags], gsize, L)
            src = dst
    finally:
        for t in temps:
            t.free()


# Searching ------------------------------------------------------------------------------------
def search(mode: int, x1, sorter, x2, result, n1: int | None = None) -> None:
    """One work-item per element of ``x2`` (contiguous, ``x1``'s dtype): ``mode`` 0/1
    searchsorted left/right (``x1`` 1-d, ``sorter`` None or 1-d int64), 2/3 isin / not in
    (``x1`` sorted and contiguous), 4 run starts of a sorted ``x2`` (bool), 5 run counts
    from int64 starts ``x2`` (``n1`` the element count), 6 the inverse of unique
    (``x1`` inclusive ranks, ``sorter`` the permutation, ``x2`` the permutation too)."""
    dev = x2._storage.device
    r1 = x1._raw() if x1 is not None else None
    r2 = x2._raw()
    dt = x2._dtype
    W = dt.itemsize
    kernel = _kernel(dev, SortSpec(dev.backend, W, 8, "search"))
    n2 = math.prod(x2._shape)
    if n2 == 0:
        return
    rs = sorter._raw() if sorter is not None else None
    n1v = n1 if n1 is not None else (r1.shape[0] if r1 is not None else 0)
    s1 = r1.strides[0] if r1 is not None and r1.shape else 0
    L = 256 if _hint(dev) == "gpu" else 64
    kernel.launch([r1.ptr if r1 is not None else 0, rs.ptr if rs is not None else 0, r2.ptr,
                   result._raw().ptr, n1v, n2, s1, rs.strides[0] if rs is not None and rs.shape
                   else 0, mode, _KINDS[dt.kind] if dt.kind in _KINDS else 1,
                   int(sorter is not None and mode <= 1)], -(-n2 // L) * L, L)
