"""Device FFTs: batched 1-D complex transforms in OpenCL C and CUDA C (docs/linalg.md,
"How the device FFT works").

Every transform is one axis at a time over ``rows`` independent rows (the other
axes).  Three kernels per complex type, each written once for both dialects:

``pass``
    One pass of a Stockham autosort FFT over contiguous rows of ``n`` points
    (``n`` a power of two): radix 8 while at least eight points remain per
    butterfly group, then radix 4 or 2.  Each work-item loads ``R`` points
    ``n / R`` apart, multiplies them by their twiddles ``exp(+-2 pi i r k / (Ns
    R))`` (one ``sinpi``/``cospi`` of an exact dyadic fraction: no argument
    reduction error; the other powers by a product tree), does the ``R``-point
    DFT and stores ``Ns`` apart (``Ns`` = the length already transformed).
    Passes ping-pong between two pool buffers; the first may read the input and
    the last may write the result in place when their layouts allow.  An
    optional pointwise factor (Bluestein's transformed chirp) is applied at the
    first pass's loads and a scale (the ``norm``) at the last pass's stores.
    Radix 0 is the direct DFT of short rows (one output per work-item).
``gather``
    Reads a row of any numeric dtype through byte strides (the transformed axis
    anywhere), converts it to the complex type, crops or zero-pads it to the
    transform length, optionally conjugates it, optionally builds the Hermitian
    extension of a half spectrum (``irfft``, ``hfft`` of an odd length), packs
    real points in pairs (``rfft`` of an even length) or folds a half spectrum
    into the half-length one whose inverse gives the pairs (``irfft`` of an even
    length), optionally multiplies by Bluestein's chirp; or writes Bluestein's
    convolution kernel.
``store``
    Writes the first ``n_out`` points of each row through byte strides into the
    result, times the chirp, times the scale, optionally conjugated, converted to
    the result's dtype (the real part for a real result); or unpacks the
    spectrum of packed pairs, or interleaves an inverse's pairs into real points.

Other lengths up to :data:`DIRECT_MAX` take the direct DFT, longer ones
Bluestein's chirp-z: with ``w_k = exp(s pi i k^2 / n)`` (``k^2`` taken mod
``2n`` so the angle stays exact), ``X_k = w_k sum_j (x_j w_j) conj(w_(k-j))``,
a circular convolution of length ``m``, the first power of two ``>= 2n - 1``,
done with three power-of-two transforms.
Temporaries come from the pool (or the active ``ga.cached`` scope) and go back
before :func:`transform` returns; every launch is enqueued, nothing is read back.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from ..._array.make import new_array
from ..._array.transfer import copy_raw
from ...backends._kernels import launch_shape
from .generator import _CTYPE, Operand, Signature, _convert, _load, _store, key_of, source
from .launcher import aligned
from .reduce import _IDS, compiled

__all__ = ["Spec", "program", "transform", "plan_passes", "bluestein_size", "override_radix",
           "direct_max", "DIRECT_MAX", "packing"]

DIRECT_MAX = 12
"""Lengths that are not powers of two up to this take the direct O(n^2) DFT; longer ones
Bluestein (docs/linalg.md, "How the device FFT works", has the measurements)."""

override_radix: list[int] = []
"""Tests and benchmarks push ``2`` or ``4`` here to run every pass in that radix (the
radix-8 passes' fallbacks)."""

packing: list[bool] = [True]
"""Whether real transforms of an even length pack pairs of points (tests push False)."""

direct_max: list[int] = [DIRECT_MAX]
"""Tests and benchmarks push a length here to move the direct-DFT / Bluestein threshold."""

_lock = threading.Lock()
_kernels: dict[tuple, object] = {}
_REAL = {"c8": "f4", "c16": "f8"}


@dataclass(frozen=True)
class Spec:
    """What one FFT kernel is specialised on: ``kind`` is ``"pass"``, ``"gather"`` or
    ``"store"``; ``ckey`` the complex compute key (``"c8"``/``"c16"``); ``io`` the
    storage key read by ``gather`` or written by ``store`` (``ckey`` for ``pass``)."""

    dialect: str
    kind: str
    ckey: str
    io: str


def plan_passes(n: int) -> list[tuple[int, int]]:
    """The (Ns, R) of each Stockham pass for a power of two ``n``."""
    out, ns = [], 1
    radix = override_radix[-1] if override_radix else 8
    while ns < n:
        r = radix
        while n // ns < r:
            r //= 2
        out.append((ns, r))
        ns *= r
    return out


def bluestein_size(n: int) -> int:
    """The convolution length of Bluestein's algorithm for ``n`` points."""
    return 1 << (2 * n - 2).bit_length()


def _math(d, ckey: str, fn: str) -> str:
    return fn + "f" if (d.suffix_math and ckey == "c8") else fn


def program(d, s: Spec) -> tuple[str, str, list[str]]:
    """(source, kernel name, parameter types) of the kernel of ``s``."""
    C, R = _CTYPE[s.ckey], _CTYPE[_REAL[s.ckey]]
    K = s.ckey
    g = d.glob
    gid = _IDS[s.dialect][2]
    name = f"fft_{s.kind}_{s.ckey}_{s.io}"
    sinpi, cospi = _math(d, K, "sinpi"), _math(d, K, "cospi")
    size = 16 if K == "c16" else 8
    sig = Signature("multiply", K, (Operand(s.io, K), Operand(K, K)))
    # exp(sign * pi * i * t): t a fraction of pi, exact where it is dyadic
    helpers = (f"DEV {C} fft_cis_{K}({R} t, {R} sign) {{ "
               f"return c_make_{K}({cospi}(t), sign * {sinpi}(t)); }}\n"
               f"DEV {C} fft_chirp_{K}(i64 k, i64 n, {R} sign) {{ "
               f"i64 q = (k * k) % (2 * n); return fft_cis_{K}(({R})q / ({R})n, sign); }}\n"
               f"DEV {C} fft_conj_{K}({C} a) {{ return c_make_{K}(a.x, -a.y); }}\n")
    if s.kind == "pass":
        params = [("ptr", f"{g}const u8 *src"), ("ptr", f"{g}u8 *dst"),
                  ("ptr", f"{g}const u8 *pw"), ("i8", "i64 total"), ("i8", "i64 n"),
                  ("i8", "i64 ns"), ("i8", "i64 radix"), ("i8", "i64 use_w"),
                  (_REAL[K], f"{R} sign"), (_REAL[K], f"{R} scale")]
        body = (f"    i64 gi = {gid};\n    if (gi >= total) return;\n"
                # radix 0: the direct DFT of rows of n points, one output per work-item
                f"    if (radix == 0) {{\n"
                f"        i64 row = gi / n, k = gi - row * n;\n"
                f"        {C} acc = c_make_{K}(0, 0);\n"
                f"        for (i64 j = 0, e = 0; j < n; ++j, e = (e + k) % n) {{\n"
                f"            {C} a = *({g}const {C} *)(src + (row * n + j) * {size});\n"
                f"            acc = c_add_{K}(acc, e == 0 ? a : c_mul_{K}(a, "
                f"fft_cis_{K}(({R})(2 * e) / ({R})n, sign)));\n"
                f"        }}\n"
                f"        *({g}{C} *)(dst + gi * {size}) = c_scale_{K}(acc, scale);\n"
                f"        return;\n    }}\n"
                f"    i64 q = n / radix, row = gi / q, j = gi - row * q, k = j % ns;\n"
                f"    i64 base = row * n, d0 = base + (j / ns) * ns * radix + k;\n"
                f"    {C} w1 = fft_cis_{K}(({R})(2 * k) / ({R})(ns * radix), sign);\n"
                + "".join(_radix_block(g, K, C, R, size, r) for r in (8, 4, 2)))
    elif s.kind == "gather":
        # mode 0: row (cropped/zero-padded to n); 1: Hermitian extension of the first
        # n // 2 + 1 points to n; 2: Bluestein's kernel conj(w_k) (src unused); 3: real
        # points packed in pairs, z_k = x_2k + i x_2k+1 (rfft of 2n points); 4: the half
        # spectrum X_0..X_n of 2n real points folded into the n-point spectrum whose
        # inverse is (x_2k + i x_2k+1) * 2n (irfft)
        params = [("ptr", f"{g}const u8 *src"), ("ptr", f"{g}u8 *dst"), ("i8", "i64 total"),
                  ("i8", "i64 m"), ("i8", "i64 n"), ("i8", "i64 len"), ("i8", "i64 e1"),
                  ("i8", "i64 s0"), ("i8", "i64 s1"), ("i8", "i64 sax"), ("i8", "i64 mode"),
                  ("i8", "i64 conj"), (_REAL[K], f"{R} chirp")]

        def ld(j: str) -> str:
            return _convert(d, s.io, K, _load(d, s.io, f"src + o * s0 + c1 * s1 + ({j}) * sax",
                                              True))
        zero = f"c_make_{K}(0, 0)"
        body = (f"    i64 gi = {gid};\n    if (gi >= total) return;\n"
                f"    i64 row = gi / m, k = gi - row * m;\n"
                f"    i64 o = row / e1, c1 = row - o * e1;\n"
                f"    {C} v = {zero};\n"
                f"    if (mode == 2) {{\n"
                f"        if (k < n) v = fft_chirp_{K}(k, n, -chirp);\n"
                f"        else if (k > m - n) v = fft_chirp_{K}(m - k, n, -chirp);\n"
                f"    }} else if (k < n && mode == 3) {{\n"
                f"        if (2 * k < len) v.x = ({ld('2 * k')}).x;\n"
                f"        if (2 * k + 1 < len) v.y = ({ld('2 * k + 1')}).x;\n"
                f"    }} else if (k < n && mode == 4) {{\n"
                f"        i64 lim = len < n + 1 ? len : n + 1;\n"
                f"        {C} a = k < lim ? {ld('k')} : {zero};\n"
                f"        {C} b = n - k < lim ? {ld('n - k')} : {zero};\n"
                f"        if (conj) {{ a = fft_conj_{K}(a); b = fft_conj_{K}(b); }}\n"
                # X_0 and X_n (self-conjugate): their imaginary parts drop out, as in pocketfft
                f"        if (k == 0) {{ a.y = 0; b.y = 0; }}\n"
                f"        b = fft_conj_{K}(b);\n"
                f"        {C} e = c_add_{K}(a, b);\n"
                f"        {C} t = c_mul_{K}(c_sub_{K}(a, b), fft_cis_{K}(({R})k / ({R})n, 1));\n"
                f"        v = c_make_{K}(e.x - t.y, e.y + t.x);\n"
                f"    }} else if (k < n) {{\n"
                f"        i64 j = k, flip = 0, lim = len;\n"
                f"        if (mode == 1) {{\n"
                f"            i64 h = n / 2 + 1;\n"
                f"            if (lim > h) lim = h;\n"
                f"            if (k >= h) {{ j = n - k; flip = 1; }}\n"
                f"        }}\n"
                f"        if (j < lim) {{\n"
                f"            v = {ld('j')};\n"
                f"            if (conj != flip) v = fft_conj_{K}(v);\n"
                f"        }}\n"
                f"    }}\n"
                f"    if (mode != 2 && k < n && chirp != 0) v = c_mul_{K}(v, fft_chirp_{K}(k, n, chirp));\n"
                f"    *({g}{C} *)(dst + gi * {size}) = v;\n")
    else:
        # mode 0: point k; 1: X_k of 2n real points from the n-point spectrum Z of their
        # pairs (rfft); 2: real point k of the pairs z_k/2 (irfft)
        params = [("ptr", f"{g}const u8 *src"), ("ptr", f"{g}u8 *dst"), ("i8", "i64 total"),
                  ("i8", "i64 m"), ("i8", "i64 nout"), ("i8", "i64 n"), ("i8", "i64 e1"),
                  ("i8", "i64 s0"), ("i8", "i64 s1"), ("i8", "i64 sax"), ("i8", "i64 conj"),
                  ("i8", "i64 mode"), (_REAL[K], f"{R} chirp"), (_REAL[K], f"{R} scale")]

        def z(idx: str) -> str:
            return f"fft_point_{K}(src + row * m * {size}, {idx}, n, chirp)"
        helpers += (f"DEV {C} fft_point_{K}({g}const u8 *p, i64 k, i64 n, {R} chirp) {{\n"
                    f"    {C} v = *({g}const {C} *)(p + k * {size});\n"
                    f"    return chirp != 0 ? c_mul_{K}(v, fft_chirp_{K}(k, n, chirp)) : v;\n}}\n")
        body = (f"    i64 gi = {gid};\n    if (gi >= total) return;\n"
                f"    i64 row = gi / nout, k = gi - row * nout;\n"
                f"    {C} v;\n"
                f"    if (mode == 1) {{\n"
                f"        {C} a = {z('k % n')}, b = fft_conj_{K}({z('(n - k) % n')});\n"
                f"        {C} e = c_add_{K}(a, b), d = c_sub_{K}(a, b);\n"
                f"        {C} t = c_mul_{K}(c_make_{K}(d.y, -d.x), "
                f"fft_cis_{K}(({R})k / ({R})n, -1));\n"
                f"        v = c_scale_{K}(c_add_{K}(e, t), ({R})0.5);\n"
                f"    }} else if (mode == 2) {{\n"
                f"        {C} a = {z('k / 2')};\n"
                f"        v = c_make_{K}(k % 2 ? a.y : a.x, 0);\n"
                f"    }} else {{\n"
                f"        v = {z('k')};\n"
                f"    }}\n"
                f"    v = c_scale_{K}(v, scale);\n"
                f"    if (conj) v = fft_conj_{K}(v);\n"
                f"    i64 o = row / e1, c1 = row - o * e1;\n"
                f"    {_store(d, s.io, 'dst + o * s0 + c1 * s1 + k * sax', True, 'v', K)}\n")
    decl = ", ".join(p for _, p in params)
    text = (source(d, [sig]) + helpers
            + f"{d.kernel} void {name}({decl}) {{\n{body}}}\n")
    return text, name, [t for t, _ in params]


def _dft(K: str, R: str, vs: list[str], tag: str) -> tuple[str, list[str]]:
    """C statements computing the DFT (sign ``sign``) of the values named ``vs`` (2, 4 or
    8 of them) into new variables; (code, their names).  Radix 8 is two radix-4 DFTs of the
    even and odd points joined with ``exp(sign 2 pi i r / 8)``."""
    add, sub = f"c_add_{K}", f"c_sub_{K}"
    if len(vs) == 2:
        y = [f"{tag}0", f"{tag}1"]
        return (f"{_c(K)} {y[0]} = {add}({vs[0]}, {vs[1]}), {y[1]} = {sub}({vs[0]}, {vs[1]});\n",
                y)
    if len(vs) == 4:
        v0, v1, v2, v3 = vs
        y = [f"{tag}{i}" for i in range(4)]
        return (f"{_c(K)} {tag}a0 = {add}({v0}, {v2}), {tag}a1 = {sub}({v0}, {v2});\n"
                f"{_c(K)} {tag}b0 = {add}({v1}, {v3}), {tag}b1 = {sub}({v1}, {v3});\n"
                f"{_c(K)} {tag}ib = c_make_{K}(-sign * {tag}b1.y, sign * {tag}b1.x);\n"
                f"{_c(K)} {y[0]} = {add}({tag}a0, {tag}b0), {y[1]} = {add}({tag}a1, {tag}ib);\n"
                f"{_c(K)} {y[2]} = {sub}({tag}a0, {tag}b0), {y[3]} = {sub}({tag}a1, {tag}ib);\n",
                y)
    ce, e = _dft(K, R, vs[0::2], tag + "e")
    co, o = _dft(K, R, vs[1::2], tag + "o")
    h = f"(({R})0.70710678118654752440)"
    code = (ce + co
            + f"{o[1]} = c_mul_{K}({o[1]}, c_make_{K}({h}, sign * {h}));\n"
            + f"{o[2]} = c_make_{K}(-sign * {o[2]}.y, sign * {o[2]}.x);\n"
            + f"{o[3]} = c_mul_{K}({o[3]}, c_make_{K}(-{h}, sign * {h}));\n")
    y = [f"{tag}{i}" for i in range(8)]
    for i in range(4):
        code += (f"{_c(K)} {y[i]} = {add}({e[i]}, {o[i]}), "
                 f"{y[i + 4]} = {sub}({e[i]}, {o[i]});\n")
    return code, y


def _c(K: str) -> str:
    return _CTYPE[K]


def _radix_block(g: str, K: str, C: str, R: str, size: int, radix: int) -> str:
    """The body of one radix of the pass kernel, unrolled into scalars (a GPU keeps them in
    registers; dynamically indexed private arrays would go to local memory): twiddles
    ``w^r`` by a product tree of depth log2 r from the one ``sinpi``/``cospi``, loads,
    the optional pointwise factor, the DFT, scaled stores."""
    lines = []
    w = {1: "w1"}
    for r in range(2, radix):
        a, b = r // 2, r - r // 2
        lines.append(f"{C} w{r} = c_mul_{K}({w[a]}, {w[b]});")
        w[r] = f"w{r}"
    for r in range(radix):
        at = f"(j + {r} * q)"
        lines.append(f"{C} v{r} = *({g}const {C} *)(src + (base + {at}) * {size});")
        lines.append(f"if (use_w) v{r} = c_mul_{K}(v{r}, *({g}const {C} *)(pw + {at} * {size}));")
        if r:
            lines.append(f"v{r} = c_mul_{K}(v{r}, {w[r]});")
    code, ys = _dft(K, R, [f"v{r}" for r in range(radix)], "y")
    lines += code.rstrip("\n").split("\n")
    for r, y in enumerate(ys):
        lines.append(f"*({g}{C} *)(dst + (d0 + {r} * ns) * {size}) = c_scale_{K}({y}, scale);")
    inner = "".join(f"        {ln}\n" for ln in lines)
    return f"    if (radix == {radix}) {{\n{inner}        return;\n    }}\n"


def _kernel(device, spec: Spec):
    return compiled(device, spec, program, _kernels, _lock)


def _launch(kernel, hint: str, values: list, total: int) -> None:
    gsize, lsize = launch_shape(hint, total, kernel.max_local)
    kernel.launch(values, gsize, lsize)


def _rows(shape, strides, ax: int) -> list[tuple[int, int]] | None:
    """The axes other than ``ax`` as at most two (extent, byte stride), collapsed, outer
    first; None when they do not collapse to two."""
    out: list[tuple[int, int]] = []
    for k, (n, st) in enumerate(zip(shape, strides, strict=True)):
        if k == ax or n == 1:
            continue
        if out and out[-1][1] == n * st:
            out[-1] = (out[-1][0] * n, st)
        else:
            out.append((n, st))
    if len(out) > 2:
        return None
    while len(out) < 2:
        out.insert(0, (1, 0))
    return out


@dataclass
class _Plan:
    """One axis of one transform: what :func:`transform` is asked to do."""

    n: int  # transform length
    sign: float  # -1 forward, +1 inverse
    nout: int  # points stored per row (n, or n // 2 + 1 for a half spectrum)
    mode: int  # gather mode: 0 plain, 1 Hermitian extension
    conj_in: bool
    conj_out: bool
    scale: float


def transform(x, ax: int, result, *, n: int, inverse: bool, nout: int, hermitian: bool = False,
              conj_in: bool = False, conj_out: bool = False, scale: float = 1.0) -> None:
    """``result`` (a new C-contiguous array, ``nout`` points along ``ax``) = the ``n``-point
    DFT along ``ax`` of ``x`` (cropped or zero-padded to ``n``; with ``hermitian``, its first
    ``n // 2 + 1`` points extended to a Hermitian ``n``-point spectrum), optionally conjugated
    before and after, times ``scale``.  ``x`` and ``result`` live on one device."""
    dev = result._storage.device
    hint = dev.impl.launch_hint(dev.index)
    rdt = result._dtype
    ckey = "c16" if rdt.itemsize == 16 or rdt == np.dtype(np.float64) else "c8"
    cdt = np.dtype("complex128" if ckey == "c16" else "complex64")
    shape = list(result._shape)
    rows = math.prod(shape[:ax]) * math.prod(shape[ax + 1:])
    if rows == 0 or nout == 0:
        return
    sign = 1.0 if inverse else -1.0
    p = _Plan(n, sign, nout, 1 if hermitian else 0, conj_in, conj_out, scale)
    temps: list = []
    try:
        raw = x._raw()
        in_rows = _rows(raw.shape, raw.strides, ax)
        if in_rows is None or not aligned(raw.ptr, raw.strides, raw.dtype):
            tmp = new_array(x._shape, x._dtype, dev, "device")
            temps.append(tmp)
            copy_raw(tmp, x)
            raw = tmp._raw()
            in_rows = _rows(raw.shape, raw.strides, ax)
        out = result._raw()
        out_rows = _rows(out.shape, out.strides, ax)
        length = raw.shape[ax]
        _run(dev, hint, ckey, cdt, p, rows, raw, in_rows, raw.strides[ax], length, out,
             out_rows, out.strides[ax], temps)
    finally:
        for t in temps:
            t.free()


def _run(dev, hint, ckey, cdt, p: _Plan, rows, raw, in_rows, sax, length, out, out_rows,
         oax, temps) -> None:
    n, size = p.n, cdt.itemsize
    ikey, okey = key_of(raw.dtype), key_of(out.dtype)
    gmode, smode = p.mode, 0
    if n % 2 == 0 and packing[-1]:
        # 2n' real points as n' complex pairs: half the work (docs/linalg.md)
        if p.mode == 0 and ikey[0] != "c" and p.sign < 0 and p.nout == n // 2 + 1:
            n, gmode, smode = n // 2, 3, 1  # rfft, ihfft
        elif p.mode == 1 and okey[0] != "c":
            n, gmode, smode = n // 2, 4, 2  # irfft, hfft
    pw2 = n & (n - 1) == 0
    m = n if pw2 else bluestein_size(n)
    chirp = 0.0 if pw2 else p.sign

    def buffer(count):
        t = new_array((count,), cdt, dev, "device")
        temps.append(t)
        return t._raw().ptr

    def gather(dst, mode, conj, ch, total_rows, mm, nn):
        k = _kernel(dev, Spec(dev.backend, "gather", ckey, ikey))
        total = total_rows * mm
        _launch(k, hint, [raw.ptr, dst, total, mm, nn, length, in_rows[1][0], in_rows[0][1],
                          in_rows[1][1], sax, mode, int(conj), ch], total)

    def passes(src, bufs, mm, sign, scale, pw=0, dst_last=None) -> int:
        """Transforms ``rows`` rows of ``mm`` points from ``src``; returns the address
        holding the result (``dst_last`` if given)."""
        k = _kernel(dev, Spec(dev.backend, "pass", ckey, ckey))
        plan = plan_passes(mm)
        cur = src
        for i, (ns, r) in enumerate(plan):
            last = i == len(plan) - 1
            dst = dst_last if (last and dst_last is not None) else bufs[i % 2]
            total = rows_now * mm // r
            _launch(k, hint, [cur, dst, pw if i == 0 else 0, total, mm, ns, r,
                              int(pw != 0 and i == 0), sign, scale if last else 1.0], total)
            cur = dst
        return cur

    def store(src, mm, ch, scale):
        k = _kernel(dev, Spec(dev.backend, "store", ckey, okey))
        total = rows * p.nout
        _launch(k, hint, [src, out.ptr, total, mm, p.nout, n, out_rows[1][0], out_rows[0][1],
                          out_rows[1][1], oax, int(p.conj_out), smode, ch, scale], total)

    rows_now = rows
    if pw2 and m > 1:
        # read the input in place when it already is contiguous complex rows of n points
        direct_in = (ikey == ckey and raw.ptr % size == 0 and gmode == 0 and not p.conj_in
                     and length == n and sax == size
                     and (rows == 1 or in_rows[1][1] == n * size and
                          (in_rows[0][0] == 1 or in_rows[0][1] == in_rows[1][0] * n * size)))
        direct_out = (okey == ckey and smode == 0 and not p.conj_out and p.nout == n
                      and oax == size and out.ptr % size == 0)
        nbuf = len(plan_passes(m)) - (1 if direct_out else 0)
        bufs = [buffer(rows * m) for _ in range(min(nbuf, 2))]
        if direct_in:
            src = raw.ptr
        else:
            src = bufs[-1] if len(bufs) == 2 else buffer(rows * m)
            gather(src, gmode, p.conj_in, 0.0, rows, m, n)
        if direct_out:
            passes(src, bufs, m, p.sign, p.scale, dst_last=out.ptr)
        else:
            store(passes(src, bufs, m, p.sign, 1.0), m, 0.0, p.scale)
        return
    if m == 1:  # one point: the transform is the identity
        a = buffer(rows)
        gather(a, gmode, p.conj_in, 0.0, rows, 1, 1)
        store(a, 1, 0.0, p.scale)
        return
    if n <= direct_max[-1]:  # short rows: the direct DFT
        a, b = buffer(rows * n), buffer(rows * n)
        gather(a, gmode, p.conj_in, 0.0, rows, n, n)
        k = _kernel(dev, Spec(dev.backend, "pass", ckey, ckey))
        _launch(k, hint, [a, b, 0, rows * n, n, 1, 0, 0, p.sign, 1.0], rows * n)
        store(b, n, 0.0, p.scale)
        return
    # Bluestein: the kernel conj(w) transformed once, the chirped rows convolved with it
    a, b = buffer(rows * m), buffer(rows * m)
    w, w2 = buffer(m), buffer(m)
    rows_now = 1
    gather(w, 2, False, p.sign, 1, m, n)
    wf = passes(w, [w2, w], m, -1.0, 1.0 / m)
    rows_now = rows
    gather(a, gmode, p.conj_in, chirp, rows, m, n)
    fa = passes(a, [b, a], m, -1.0, 1.0)
    other = a if fa == b else b
    res = passes(fa, [other, fa], m, 1.0, 1.0, pw=wf)
    store(res, m, chirp, p.scale)
