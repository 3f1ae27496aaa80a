"""Device scans (cumulative_sum, cumulative_prod): reduce-then-scan in OpenCL C and CUDA C.

Every row along the scan axis is scanned independently (docs/reductions.md,
"Scans").  Short rows, or many rows, take one work-item per row scanning
sequentially (``rows``).  Long rows take three passes, none of which needs
forward progress between work-groups (so PoCL's one-group-after-another
execution is fine):

1. ``G`` work-groups per row reduce contiguous chunks of it into partials (the
   reduction generator's ``group`` kernel, ``device/reduce.py``);
2. one work-item per row turns its ``G`` partials into an exclusive scan, in place;
3. each work-group rescans its chunk starting from its partial: sequentially on a
   CPU device (one work-item per group), and on a GPU in tiles of ``L * K``
   elements -- each item scans ``K`` of its own, a work-efficient (Blelloch)
   scan of the ``L`` item totals in local memory, then each item writes.

Partials come from the pool or the active ``ga.cached`` scope and go back
before :func:`run` returns.  ``include_initial`` writes the identity into the
first slot along the axis and scans into the rest.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from ..._array.make import new_array
from ..._array.transfer import copy_raw
from . import reduce as red
from .generator import _CTYPE, Operand, Signature, _convert, _load, _store, kernel_name, source

__all__ = ["run", "ScanSpec", "program", "TILE", "override_hint"]

TILE = {"cpu": (1, 1), "gpu": (256, 4)}
"""(work-group size, elements per work-item) of the third pass, by launch hint."""

_ROWS_MAX = 4096
"""Rows at most this long are scanned by one work-item each."""

override_hint: list[str] = []
"""Tests push ``"gpu"`` here to run the GPU-shaped kernels on a CPU device."""

_lock = threading.Lock()
_kernels: dict[tuple, object] = {}


@dataclass(frozen=True)
class ScanSpec:
    """What one scan kernel is specialised on: ``kind`` is ``"rows"`` (``exclusive``
    for the partials' pass), ``"chunk"`` or ``"tile"``; keys as in ``device/reduce.py``."""

    dialect: str
    combine: str
    identity: str
    inp: str
    acc: str
    out: str
    kind: str
    exclusive: bool
    nk: int
    local: int
    per_item: int


def _size(key: str) -> int:
    return int(key[1:])


def program(d, spec: ScanSpec) -> tuple[str, str, list[str]]:
    """(source, kernel name, parameter types) of the kernel of ``spec``."""
    sig = Signature(spec.combine, spec.acc, (Operand(spec.inp, spec.acc),
                                             Operand(spec.acc, spec.acc)))
    fn = kernel_name(sig) + "_f"
    name = "scan_" + "_".join(str(v) for v in (
        spec.combine, spec.inp, spec.acc, spec.out, spec.kind, int(spec.exclusive), spec.nk,
        spec.local, spec.per_item))
    g = d.glob
    A, ct = spec.acc, _CTYPE[spec.acc]
    lid, gid, glo = red._IDS[spec.dialect]
    L, K = spec.local, spec.per_item
    ident = red._literal(spec.identity, A)
    params = [("ptr", f"{g}const u8 *px"), ("ptr", f"{g}u8 *pz"), ("ptr", f"{g}const u8 *pp"),
              ("i8", "i64 n_rows"), ("i8", "i64 n"), ("i8", "i64 G"), ("i8", "i64 sx"),
              ("i8", "i64 sz")]
    params += [("i8", f"i64 ek{k}") for k in range(spec.nk)]
    params += [("i8", f"i64 skx{k}") for k in range(spec.nk)]
    params += [("i8", f"i64 skz{k}") for k in range(spec.nk)]

    def offsets(idx: str) -> str:
        if spec.nk == 0:
            return "i64 kx = 0, kz = 0;"
        out = [f"i64 kx = 0, kz = 0; {{ i64 q_ = {idx}, c_;"]
        for k in range(spec.nk - 1, 0, -1):
            out.append(f" c_ = q_ % ek{k}; q_ /= ek{k}; kx += c_ * skx{k}; kz += c_ * skz{k};")
        out.append(" kx += q_ * skx0; kz += q_ * skz0; }")
        return "".join(out)

    def load(j: str) -> str:
        return _convert(d, spec.inp, A, _load(d, spec.inp, f"px + kx + ({j}) * sx", True))

    def store(j: str, v: str) -> str:
        return _store(d, spec.out, f"pz + kz + ({j}) * sz", True, v, A)

    decl = ", ".join(p for _, p in params)
    if spec.kind == "rows":
        if spec.exclusive:
            step = f"{ct} v_ = {load('j')}; {store('j', 'acc')} acc = {fn}(acc, v_);"
        else:
            step = f"acc = {fn}(acc, {load('j')}); {store('j', 'acc')}"
        body = (f"{d.kernel} void {name}({decl}) {{\n"
                f"    i64 o = {glo};\n    if (o >= n_rows) return;\n    {offsets('o')}\n"
                f"    {ct} acc = {ident};\n"
                f"    for (i64 j = 0; j < n; ++j) {{ {step} }}\n}}\n")
    else:
        head = (f"    i64 grp = {gid};\n    i64 o = grp / G, g = grp - o * G;\n"
                f"    i64 chunk = (n + G - 1) / G, start = g * chunk;\n"
                f"    i64 end = start + chunk < n ? start + chunk : n;\n    {offsets('o')}\n"
                f"    {ct} carry = {_load(d, A, f'pp + grp * {_size(A)}', True)};\n")
        if spec.kind == "chunk":
            body = (f"{d.kernel} void {name}({decl}) {{\n{head}"
                    f"    for (i64 j = start; j < end; ++j) {{ carry = {fn}(carry, {load('j')}); "
                    f"{store('j', 'carry')} }}\n}}\n")
        else:
            bar = red._BARRIER[spec.dialect]
            loc = red._LOCAL[spec.dialect]
            body = (f"{d.kernel} void {name}({decl}) {{\n"
                    f"    {loc} {ct} buf[{L}];\n    i64 lid = {lid};\n{head}"
                    f"    for (i64 t = start; t < end; t += {L * K}) {{\n"
                    f"        i64 j0 = t + lid * {K};\n"
                    f"        {ct} v[{K}];\n        {ct} s = {ident};\n"
                    f"        for (int k = 0; k < {K}; ++k) {{\n"
                    f"            v[k] = j0 + k < end ? {load('j0 + k')} : {ident};\n"
                    f"            s = {fn}(s, v[k]); v[k] = s;\n        }}\n"
                    # Blelloch: up-sweep, clear the root, down-sweep (exclusive prefix)
                    f"        buf[lid] = s;\n"
                    f"        for (int d = 1; d < {L}; d <<= 1) {{\n"
                    f"            {bar};\n"
                    f"            int i = (int)(lid + 1) * 2 * d - 1;\n"
                    f"            if (i < {L}) buf[i] = {fn}(buf[i - d], buf[i]);\n"
                    f"        }}\n"
                    f"        {bar};\n        {ct} total = buf[{L - 1}];\n        {bar};\n"
                    f"        if (lid == 0) buf[{L - 1}] = {ident};\n"
                    f"        for (int d = {L // 2}; d >= 1; d >>= 1) {{\n"
                    f"            {bar};\n"
                    f"            int i = (int)(lid + 1) * 2 * d - 1;\n"
                    f"            if (i < {L}) {{ {ct} l_ = buf[i - d]; buf[i - d] = buf[i]; "
                    f"buf[i] = {fn}(buf[i], l_); }}\n"
                    f"        }}\n"
                    f"        {bar};\n"
                    f"        {ct} pre = {fn}(carry, buf[lid]);\n"
                    f"        for (int k = 0; k < {K}; ++k)\n"
                    f"            if (j0 + k < end) {{ {ct} w_ = {fn}(pre, v[k]); "
                    f"{store('j0 + k', 'w_')} }}\n"
                    f"        carry = {fn}(carry, total);\n"
                    f"        {bar};\n    }}\n}}\n")
    return source(d, [sig]) + body, name, [t for t, _ in params]


def _kernel(device, spec: ScanSpec):
    return red.compiled(device, spec, program, _kernels, _lock)


def _kept(shape, xs, zs, ax: int) -> list[tuple[int, int, int]]:
    """The other axes as (extent, x stride, z stride), collapsed where both layouts allow."""
    out: list[tuple[int, int, int]] = []
    for k, (n, a, b) in enumerate(zip(shape, xs, zs, strict=True)):
        if k == ax or n == 1:
            continue
        if out and out[-1][1] == n * a and out[-1][2] == n * b:
            out[-1] = (out[-1][0] * n, a, b)
        else:
            out.append((n, a, b))
    return out


def run(row, x, ax: int, include_initial: bool, result) -> None:
    """``result`` = the inclusive scan ``row`` of ``x`` along ``ax`` (with the identity
    first when ``include_initial``); ``x`` live and non-empty on a device."""
    from ..reductions import accumulator_dtype  # same layer; reductions imports us

    dev = x._storage.device
    temps = []
    try:
        raw = x._raw()
        if not red._aligned(raw.ptr, raw.strides, raw.dtype):
            tmp = new_array(x._shape, x._dtype, dev, "device")
            temps.append(tmp)
            copy_raw(tmp, x)
            raw = tmp._raw()
        z = result._raw()
        zptr = z.ptr
        if include_initial:
            idx = [slice(None)] * result.ndim
            idx[ax] = slice(0, 1)
            with result[tuple(idx)] as first:
                first.fill(row.empty)
            zptr += z.strides[ax]
        hint = (override_hint or [dev.impl.launch_hint(dev.index)])[-1]
        A = red._key(accumulator_dtype(result._dtype))
        inp, out = red._key(raw.dtype), red._key(result._dtype)
        n = raw.shape[ax]
        kept = _kept(raw.shape, raw.strides, z.strides, ax)
        n_rows = math.prod(k[0] for k in kept)
        sx, sz = raw.strides[ax], z.strides[ax]
        ext = [k[0] for k in kept]
        common = dict(dialect=dev.backend, combine=row.combine, identity=row.identity, acc=A,
                      nk=len(kept))
        tail = [*ext, *(k[1] for k in kept), *(k[2] for k in kept)]
        if n <= _ROWS_MAX or n_rows >= red._ITEM_MIN_OUTPUTS[hint]:
            spec = ScanSpec(**common, inp=inp, out=out, kind="rows", exclusive=False, local=64,
                            per_item=1)
            _kernel(dev, spec).launch([raw.ptr, zptr, zptr, n_rows, n, 1, sx, sz, *tail],
                                      -(-n_rows // 64) * 64, 64)
            return
        G = max(2, min(-(-red._GROUPS[hint] // n_rows), -(-n // 4096), 1024))
        part = new_array((n_rows * G,), np.dtype(A), dev, "device")
        temps.append(part)
        pptr = part._raw().ptr
        # 1: chunk totals, with the reduction generator's group kernel
        rspec = red.Spec(dialect=dev.backend, row=row.name, combine=row.combine, map="x",
                         finalize="", identity=row.identity, inp=inp, acc=A, out=A,
                         strategy="group", final=False, pairs_in=False, nk=len(kept), nr=1,
                         local=red.LOCAL_SIZES[hint], unroll=red.UNROLL[hint],
                         contiguous=sx == _size(inp))
        red._launch(dev, rspec, (raw.ptr, pptr, pptr, pptr, pptr), n_rows, n, G,
                    [(k[0], k[1]) for k in kept], [(n, sx)], 0.0)
        # 2: exclusive scan of each row's partials, in place
        pspec = ScanSpec(**{**common, "nk": 1}, inp=A, out=A, kind="rows", exclusive=True,
                         local=64, per_item=1)
        size = _size(A)
        _kernel(dev, pspec).launch([pptr, pptr, pptr, n_rows, G, 1, size, size, n_rows,
                                    G * size, G * size], -(-n_rows // 64) * 64, 64)
        # 3: rescan each chunk from its partial
        L, K = TILE[hint]
        kind = "chunk" if L == 1 else "tile"
        sspec = ScanSpec(**common, inp=inp, out=out, kind=kind, exclusive=False, local=L,
                         per_item=K)
        _kernel(dev, sspec).launch([raw.ptr, zptr, pptr, n_rows, n, G, sx, sz, *tail],
                                   n_rows * G * L, L)
    finally:
        for t in temps:
            t.free()
