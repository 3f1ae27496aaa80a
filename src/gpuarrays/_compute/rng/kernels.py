"""The random-number kernels: one C source template for OpenCL C, CUDA C and plain C.

The same Philox4x32-10 rounds and the same transforms as the NumPy reference
(``philox.py``, ``mapping.py``, ``reference.py``), written once with a few
dialect macros; the plain C is the cpu engine (``c_source``).
Every element is computed from its index alone, so the numbers do not depend
on the launch shape.  The floating families lie in lane groups of 8 blocks
(``layout.py``) and have two kernels: a scalar one (one block per work-item,
every dialect: GPUs, and the tail of a call on CPUs) and, for OpenCL on CPU
devices, a vector one (several lane groups per work-item, the Philox words in
the low halves of ``ulong8`` lanes, each row one vector store, non-temporal for
outputs larger than the device's cache; docs/random.md, "Speed").  cpu:0 runs
the scalar kernel's statements in loops over whole lane groups that gcc
vectorizes (``_c_groups_source``; docs/random.md, "The cpu engine").  The
transforms are straight-line statements, a work-item's several transforms
interleaved statement by statement.  Floating-point work goes
through ``MUL``/``ADD``/``SUB`` macros: plain operators under ``#pragma OPENCL
FP_CONTRACT OFF`` in OpenCL C, the ``__fmul_rn``-family intrinsics (never
contracted) in CUDA C, so each operation is one correctly rounded IEEE
operation as in NumPy, on scalars and vectors alike.

Kernels are compiled and launched through the back-end's ``compile_kernel``
and ``launch_hint`` (``backends/base.py``, ``KernelBackend``); one source per
kernel, built on first use per device (CUDA images go to the disk cache of
``_compute/device/diskcache.py``).  The permutation sorts random keys
with a bitonic network of launches (docs/random.md, "From bits to numbers").
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from ... import _rng
from ...backends.base import RawView
from ..device import qualify
from ..device.reduce import compiled
from .layout import LANES, per_block
from .mapping import SPECS, FloatSpec
from .philox import M0, M1, ROUNDS, W0, W1

__all__ = ["source", "generate", "permutation_index", "take_rows", "write_reference",
           "KERNEL_NAMES", "local_size"]

_PRELUDE = {
    "opencl": """#pragma OPENCL FP_CONTRACT OFF
typedef uchar u8; typedef ushort u16; typedef uint u32; typedef ulong u64; typedef long i64;
typedef int i32;
#define KERNEL __kernel
#define ITEM
#define GLOBAL __global
#define FN inline
#define GID ((u64)get_global_id(0))
#define LID ((u64)get_local_id(0))
#define GRP ((u64)get_group_id(0))
#define LOCAL_MEM __local
#define SYNC() barrier(CLK_LOCAL_MEM_FENCE)
#define MULHI64(a, b) mul_hi((u64)(a), (u64)(b))
#define BITS_f32(x) as_uint(x)
#define FROM_f32(x) as_float(x)
#define BITS_f64(x) as_ulong(x)
#define FROM_f64(x) as_double(x)
#define MUL_f32(a, b) ((a) * (b))
#define ADD_f32(a, b) ((a) + (b))
#define SUB_f32(a, b) ((a) - (b))
#define MUL_f64(a, b) ((a) * (b))
#define ADD_f64(a, b) ((a) + (b))
#define SUB_f64(a, b) ((a) - (b))
""",
    "cuda": """typedef unsigned char u8; typedef unsigned short u16; typedef unsigned int u32;
typedef unsigned long long u64; typedef long long i64; typedef int i32;
#define KERNEL extern "C" __global__
#define ITEM
#define GLOBAL
#define FN __device__ inline
#define GID ((u64)blockIdx.x * blockDim.x + threadIdx.x)
#define LID ((u64)threadIdx.x)
#define GRP ((u64)blockIdx.x)
#define LOCAL_MEM __shared__
#define SYNC() __syncthreads()
#define MULHI64(a, b) __umul64hi((u64)(a), (u64)(b))
#define BITS_f32(x) __float_as_uint(x)
#define FROM_f32(x) __uint_as_float(x)
#define BITS_f64(x) ((u64)__double_as_longlong(x))
#define FROM_f64(x) __longlong_as_double((long long)(x))
#define MUL_f32(a, b) __fmul_rn((a), (b))
#define ADD_f32(a, b) __fadd_rn((a), (b))
#define SUB_f32(a, b) __fsub_rn((a), (b))
#define MUL_f64(a, b) __dmul_rn((a), (b))
#define ADD_f64(a, b) __dadd_rn((a), (b))
#define SUB_f64(a, b) __dsub_rn((a), (b))
""",
    # plain C for the cpu engine (``c_source``, compiled into ``gpuarrays._rng``); a kernel is a
    # function of one work-item, its index the first argument; no contraction (-ffp-contract=off)
    "c": """#include <float.h>
#include <stdint.h>
#include <string.h>
#if FLT_EVAL_METHOD != 0
#error "the random kernels need float and double arithmetic without excess precision"
#endif
typedef uint8_t u8; typedef uint16_t u16; typedef uint32_t u32; typedef uint64_t u64;
typedef int64_t i64; typedef int32_t i32;
#define KERNEL static
#define ITEM u64 gid_,
#define GLOBAL
#define FN static inline
#define GID gid_
static inline u64 rng_mulhi64(u64 a, u64 b)
{
#if defined(__SIZEOF_INT128__)
    return (u64)(((unsigned __int128)a * b) >> 64);
#else
    u64 al = a & 0xFFFFFFFFu, ah = a >> 32, bl = b & 0xFFFFFFFFu, bh = b >> 32;
    u64 mid = (al * bl >> 32) + (al * bh & 0xFFFFFFFFu) + (ah * bl & 0xFFFFFFFFu);
    return ah * bh + (al * bh >> 32) + (ah * bl >> 32) + (mid >> 32);
#endif
}
static inline u32 rng_bits_f32(float x) { u32 b; memcpy(&b, &x, sizeof b); return b; }
static inline float rng_from_f32(u32 b) { float x; memcpy(&x, &b, sizeof x); return x; }
static inline u64 rng_bits_f64(double x) { u64 b; memcpy(&b, &x, sizeof b); return b; }
static inline double rng_from_f64(u64 b) { double x; memcpy(&x, &b, sizeof x); return x; }
#define MULHI64(a, b) rng_mulhi64((u64)(a), (u64)(b))
#define BITS_f32(x) rng_bits_f32(x)
#define FROM_f32(x) rng_from_f32(x)
#define BITS_f64(x) rng_bits_f64(x)
#define FROM_f64(x) rng_from_f64(x)
#define MUL_f32(a, b) ((a) * (b))
#define ADD_f32(a, b) ((a) + (b))
#define SUB_f32(a, b) ((a) - (b))
#define MUL_f64(a, b) ((a) * (b))
#define ADD_f64(a, b) ((a) + (b))
#define SUB_f64(a, b) ((a) - (b))
""",
}
_FP64 = {"opencl": "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n", "cuda": "", "c": ""}

def _philox_source() -> str:
    """Philox4x32-10 as a macro declaring the four words ``X##0 .. X##3`` of one block.

    Scalar variables and unrolled rounds; the 32x32->64-bit products are plain
    ``u64`` multiplications (CUDA emits ``mul.wide``).  On CPU OpenCL devices the
    floating families use the vector rounds of ``_philox_vector_rounds`` instead
    (this scalar form was not vectorised by PoCL there: docs/random.md, "Speed").
    """
    rounds = []
    for r in range(ROUNDS):
        if r:
            rounds.append(f"k0_ += {W0}u; k1_ += {W1}u;")
        rounds.append(
            f"p0_ = (u64){M0}u * X##0; p1_ = (u64){M1}u * X##2; "
            f"y0_ = (u32)(p1_ >> 32) ^ X##1 ^ k0_; y2_ = (u32)(p0_ >> 32) ^ X##3 ^ k1_; "
            "X##1 = (u32)p1_; X##3 = (u32)p0_; X##0 = y0_; X##2 = y2_;")
    body = " \\\n        ".join(rounds)
    return f"""
/* Philox4x32-10 (philox.py): X##0..X##3 = the words of counter (B, B >> 32, C2, C3) */
#define PHILOX_BLOCK(K0, K1, B, C2, C3, X) \\
    u32 X##0 = (u32)(B), X##1 = (u32)((u64)(B) >> 32), X##2 = (C2), X##3 = (C3); \\
    {{ u32 k0_ = (K0), k1_ = (K1), y0_, y2_; u64 p0_, p1_; \\
        {body} \\
    }}
"""


_PHILOX = _philox_source()

_CTYPE = {"float32": ("f32", "float", "u32", "i32"), "float64": ("f64", "double", "u64", "i64")}


def _lit(spec: FloatSpec, value: float) -> str:
    """A C literal of ``value`` that parses to exactly the spec's constant."""
    text = repr(float(spec.dtype.type(value)))  # shortest round trip: always a '.' or an 'e'
    return text + "f" if spec.dtype.itemsize == 4 else text


def _horner(spec: FloatSpec, tag: str, z: str, coefs: tuple[float, ...]) -> str:
    expr = _lit(spec, coefs[-1])
    for c in reversed(coefs[:-1]):
        expr = f"ADD_{tag}({_lit(spec, c)}, MUL_{tag}({z}, {expr}))"
    return expr


_VECTOR_INTS = {"u32": "uint", "u64": "ulong", "i32": "int", "i64": "long"}


class _Flavour:
    """Scalar (``width == 0``: one block per work-item, any dialect) or OpenCL vector
    (``width`` 8 or 16 lanes) spelling of one float type's code: the same operations in the
    same order either way, so the same bits."""

    def __init__(self, spec: FloatSpec, width: int = 0):
        self.tag, t, u, s = _CTYPE[spec.name]
        self.width, self.spec = width, spec
        if width:
            t, u, s = t + str(width), _VECTOR_INTS[u] + str(width), _VECTOR_INTS[s] + str(width)
        self.t, self.u, self.s = t, u, s

    def to_t(self, signed: str) -> str:  # an integer (signed type) converted exactly
        return f"convert_{self.t}({signed})" if self.width else f"({self.t})({signed})"

    def as_s(self, unsigned: str) -> str:  # reinterpreted as the signed type (values fit)
        return f"as_{self.s}({unsigned})" if self.width else f"({self.s})({unsigned})"

    def bits(self, x: str) -> str:
        return f"as_{self.u}({x})" if self.width else f"BITS_{self.tag}({x})"

    def from_bits(self, b: str) -> str:
        return f"as_{self.t}({b})" if self.width else f"FROM_{self.tag}({b})"

    def one_if(self, cond: str) -> str:  # 1 where cond holds, else 0, in the unsigned type
        return f"(as_{self.u}({cond}) & 1)" if self.width else f"({self.u})({cond})"

    def pick(self, cond: str, yes: str, no: str) -> str:  # exact selection, no rounding
        return f"select({no}, {yes}, {cond})" if self.width else f"(({cond}) ? {yes} : {no})"


def _log_lines(spec: FloatSpec, fl: _Flavour, x: str, n: str) -> list[str]:
    """Statements declaring ``lg{n}``, the natural logarithm of the positive normal ``x``
    (mapping.log): exponent and mantissa, a Newton reciprocal, the atanh series."""
    tag, t, u, s = fl.tag, fl.t, fl.u, fl.s
    lit = functools.partial(_lit, spec)
    mul, add, sub = f"MUL_{tag}", f"ADD_{tag}", f"SUB_{tag}"
    return [
        f"{u} b{n} = {fl.bits(x)};",
        f"{s} e{n} = {fl.as_s(f'b{n} >> {spec.mant}')} - {spec.bias};",
        f"{u} mb{n} = (b{n} & ((({u})1 << {spec.mant}) - 1)) | (({u}){spec.bias} << {spec.mant});",
        # m > sqrt 2: halve it (branch-free)
        f"{u} big{n} = {fl.one_if(f'mb{n} > ({u}){spec.sqrt2_bits}u')};",
        f"mb{n} -= big{n} << {spec.mant};",
        f"e{n} += {fl.as_s(f'big{n}')};",
        f"{t} m{n} = {fl.from_bits(f'mb{n}')};",
        f"{t} f{n} = {sub}(m{n}, {lit(1)});",
        f"{t} d{n} = {add}(m{n}, {lit(1)});",
        f"{t} y{n} = {sub}({lit(spec.recip_a)}, {mul}({lit(spec.recip_b)}, d{n}));",
        *[f"y{n} = {mul}(y{n}, {sub}({lit(2)}, {mul}(d{n}, y{n})));"
          for _ in range(spec.recip_steps)],
        f"{t} sv{n} = {mul}(f{n}, y{n});",
        f"{t} z{n} = {mul}(sv{n}, sv{n});",
        f"{t} lm{n} = {mul}(sv{n}, {_horner(spec, tag, f'z{n}', spec.log_c)});",
        f"{t} fe{n} = {fl.to_t(f'e{n}')};",
        f"{t} lg{n} = {add}({mul}(fe{n}, {lit(spec.ln2_hi)}), "
        f"{add}({mul}(fe{n}, {lit(spec.ln2_lo)}), lm{n}));",
    ]


def _sqrt_lines(spec: FloatSpec, fl: _Flavour, x: str, n: str) -> list[str]:
    """Statements declaring ``sq{n}``, the square root of the positive normal ``x``
    (mapping.sqrt): ``x`` times a Newton reciprocal square root from a bit guess."""
    tag, t, u = fl.tag, fl.t, fl.u
    lit = functools.partial(_lit, spec)
    mul, sub = f"MUL_{tag}", f"SUB_{tag}"
    return [
        f"{t} ry{n} = {fl.from_bits(f'({u}){spec.rsqrt_magic}u - ({fl.bits(x)} >> 1)')};",
        f"{t} hx{n} = {mul}({lit(0.5)}, {x});",
        *[f"ry{n} = {mul}(ry{n}, {sub}({lit(1.5)}, {mul}(hx{n}, {mul}(ry{n}, ry{n}))));"
          for _ in range(spec.rsqrt_steps)],
        f"{t} sq{n} = {mul}({x}, ry{n});",
    ]


def _open(spec: FloatSpec, fl: _Flavour, k: str) -> str:
    """``(k | 1) 2**-ubits``: a uniform in (0, 1) (mapping.to_open_unit)."""
    return f"MUL_{fl.tag}({fl.to_t(fl.as_s(f'({k}) | 1'))}, {_lit(spec, 2.0 ** -spec.ubits)})"


def _exponential_lines(spec: FloatSpec, fl: _Flavour, n: str, k: str) -> list[str]:
    """Statements declaring ``ex{n}`` = -log u of the uniform bits ``k`` (mapping.exponential)."""
    return [f"{fl.t} u{n} = {_open(spec, fl, k)};", *_log_lines(spec, fl, f"u{n}", n),
            f"{fl.t} ex{n} = -lg{n};"]


def _normal_pair_lines(spec: FloatSpec, fl: _Flavour, n: str, radius: str, angle: str
                       ) -> list[str]:
    """Statements declaring ``z{n}_0``, ``z{n}_1``: the normal pair of the uniform bits
    ``radius`` and ``angle`` (mapping.normal_pair, Box--Muller)."""
    tag, t, u = fl.tag, fl.t, fl.u
    lit = functools.partial(_lit, spec)
    mul = f"MUL_{tag}"
    ub = spec.ubits
    turn = fl.as_s(f"ka{n}") + " - " + fl.as_s(f"j{n} << {ub - 2}")
    return [
        f"{t} u{n} = {_open(spec, fl, radius)};",
        *_log_lines(spec, fl, f"u{n}", n),
        f"{t} r2{n} = {mul}({lit(-2)}, lg{n});",
        *_sqrt_lines(spec, fl, f"r2{n}", n),  # sq{n}: the radius
        f"{u} ka{n} = {angle};",
        f"{u} j{n} = (ka{n} + (({u})1 << {ub - 3})) >> {ub - 2};  /* quarter turns */",
        f"{t} fa{n} = {mul}({fl.to_t(turn)}, {lit(2.0 ** -ub)});",
        f"{u} q{n} = j{n} & 3;",
        f"{t} za{n} = {mul}(fa{n}, fa{n});",
        f"{t} s{n} = {mul}(fa{n}, {_horner(spec, tag, f'za{n}', spec.sin_c)});",
        f"{t} c{n} = {_horner(spec, tag, f'za{n}', spec.cos_c)};",
        f"{t} cq{n} = {fl.pick(f'(q{n} & 1) != 0', f's{n}', f'c{n}')};",
        f"{t} sn{n} = {fl.pick(f'(q{n} & 1) != 0', f'c{n}', f's{n}')};",
        f"{t} z{n}_0 = {mul}(sq{n}, {fl.pick(f'(q{n} == 1) | (q{n} == 2)', f'-cq{n}', f'cq{n}')});",
        f"{t} z{n}_1 = {mul}(sq{n}, {fl.pick(f'q{n} >= 2', f'-sn{n}', f'sn{n}')});",
    ]


def _interleaved(parts: list[list[str]]) -> str:
    """Several transforms' statements, statement by statement: the independent dependency
    chains side by side, so the core overlaps their latencies (docs/random.md, "Speed")."""
    out = []
    for row in zip(*parts, strict=True):
        out += row
    return "".join(f"    {line}\n" for line in out)


def _u64(v: str, a: int) -> str:
    """The 64-bit value of words ``a`` (low half) and ``a + 1`` of block ``v``."""
    return f"(((u64){v}{a}) | ((u64){v}{a + 1} << 32))"


def _bits(spec: FloatSpec, e: int, fl: _Flavour | None = None, v: str = "x") -> str:
    """The uniform's integer bits for output ``e`` of the block(s) ``v`` (mapping.uniform_bits)."""
    if spec.words == 1:
        return f"({v}{e} >> 8)"
    if fl is not None and fl.width:
        return (f"((convert_{fl.u}({v}{2 * e}) | (convert_{fl.u}({v}{2 * e + 1}) << 32)) "
                ">> 11)")
    return f"({_u64(v, 2 * e)} >> 11)"


def _values(family: str, spec: FloatSpec, fl: _Flavour, v: str) -> tuple[str, list[str]]:
    """(statements, one expression per output) of the block(s) whose words are ``v0 .. v3``."""
    tag = fl.tag
    e = per_block(family, spec.dtype)
    lit = functools.partial(_lit, spec)
    if family == "uniform":
        return "", [f"ADD_{tag}(low, MUL_{tag}(span, MUL_{tag}("
                    f"{fl.to_t(fl.as_s(_bits(spec, i, fl, v)))}, {lit(2.0 ** -spec.ubits)})))"
                    for i in range(e)]
    if family == "exponential":
        parts = [_exponential_lines(spec, fl, f"_{v}{i}", _bits(spec, i, fl, v))
                 for i in range(e)]
        return _interleaved(parts), [f"MUL_{tag}(scale, ex_{v}{i})" for i in range(e)]
    # normal: pairs of uniforms (radius, angle), Box--Muller (mapping.normal_pair)
    parts = [_normal_pair_lines(spec, fl, f"_{v}{q}", _bits(spec, 2 * q, fl, v),
                                _bits(spec, 2 * q + 1, fl, v)) for q in range(e // 2)]
    return _interleaved(parts), [
        f"ADD_{tag}(loc, MUL_{tag}(scale, z_{v}{i // 2}_{i % 2}))" for i in range(e)]


def _wide_values(family: str, spec: FloatSpec, names: list[str]) -> tuple[str, dict]:
    """The normal and exponential transforms of the vector kernel, two lane groups' inputs
    joined into one 16-wide vector, all of a work-item's transforms interleaved statement by
    statement.  Returns (statements, {(group, row): expression})."""
    fl = _Flavour(spec, 2 * LANES)
    fl8 = _Flavour(spec, LANES)
    tag, u = fl.tag, fl.u
    e = per_block(family, spec.dtype)
    if family == "normal":  # items: (rows, radius bits, angle bits) of one lane group
        items = [((g, 2 * q), (g, 2 * q + 1), _bits(spec, 2 * q, fl8, v),
                  _bits(spec, 2 * q + 1, fl8, v))
                 for g, v in enumerate(names) for q in range(e // 2)]
    else:
        items = [((g, r), _bits(spec, r, fl8, v)) for g, v in enumerate(names) for r in range(e)]
    parts, out = [], {}
    for i in range(0, len(items), 2):
        a, b = items[i], items[i + 1]
        n = f"_w{i // 2}"
        if family == "normal":
            parts.append(_normal_pair_lines(spec, fl, n, f"({u})({a[2]}, {b[2]})",
                                            f"({u})({a[3]}, {b[3]})"))
            for k in (0, 1):
                y = f"ADD_{tag}(loc, MUL_{tag}(scale, z{n}_{k}))"
                out[a[k]], out[b[k]] = f"({y}).lo", f"({y}).hi"
        else:
            parts.append(_exponential_lines(spec, fl, n, f"({u})({a[1]}, {b[1]})"))
            y = f"MUL_{tag}(scale, ex{n})"
            out[a[0]], out[b[0]] = f"({y}).lo", f"({y}).hi"
    return _interleaved(parts), out


def _family_params(family: str, spec: FloatSpec) -> tuple[str, list[str]]:
    t = _CTYPE[spec.name][1]
    code = spec.dtype.str[1:]
    return {"uniform": (f", {t} low, {t} span", [code, code]),
            "exponential": (f", {t} scale", [code]),
            "normal": (f", {t} loc, {t} scale", [code, code])}[family]


def _stores(e: int, values: list[str]) -> str:
    """Store the block's ``e`` elements: unconditionally for a whole block, else up to ``n``."""
    whole = "\n".join(f"        out[first + {i}] = {v};" for i, v in enumerate(values))
    tail = "\n".join(f"        if (first + {i} < n) out[first + {i}] = {v};"
                      for i, v in enumerate(values))
    return f"""    if (first + {e} <= n) {{
{whole}
    }} else {{
{tail}
    }}"""


def _float_kernel(family: str, spec: FloatSpec) -> tuple[str, list[str]]:
    """One block per work-item (every dialect): block ``start + GID`` of the call, its outputs
    stored at their lane-group places (layout.py), each checked against ``n``."""
    fl = _Flavour(spec)
    tag, t = fl.tag, fl.t
    e = per_block(family, spec.dtype)
    extra, params = _family_params(family, spec)
    pre, values = _values(family, spec, fl, "x")
    whole = "\n".join(f"        out[first + {r * LANES}] = {val};" for r, val in enumerate(values))
    tail = "\n".join(f"        if (first + {r * LANES} < n) out[first + {r * LANES}] = {val};"
                     for r, val in enumerate(values))
    src = f"""
KERNEL void rng_{family}_{tag}(ITEM GLOBAL {t} *out, u64 n, u32 k0, u32 k1, u64 off, u64 start{extra}) {{
    u64 b = start + GID;  /* the call's block; element of output r: first + r * {LANES} */
    u64 first = (b / {LANES}) * {e * LANES} + b % {LANES};
    if (first >= n) return;
    PHILOX_BLOCK(k0, k1, off + b, 0, 0, x)
{pre}    if (first + {(e - 1) * LANES} < n) {{
{whole}
    }} else {{
{tail}
    }}
}}
"""
    return src, ["ptr", "u8", "u4", "u4", "u8", "u8", *params]


# The cpu engine's lane-group loops ------------------------------------------------------------
#
# cpu:0 runs the scalar kernels' own statements, but as loops over the blocks of whole lane groups
# that gcc vectorizes: a chunk of C_CHUNK blocks has its Philox words computed into arrays (one
# loop), then each block's transform (a second loop: the scalar kernel's statements with its words
# read from those arrays), then its rows copied out, 8 elements at a time.  Each lane does the
# scalar code's IEEE operations in its order (-ffp-contract=off, no -ffast-math), so the bits are
# the scalar kernel's.  On x86-64 with gcc 12 or later the loops are compiled three times and the
# runner picks by __builtin_cpu_supports (no ifunc): x86-64-v4 (Philox in 64-bit lanes, whose
# multiplies are AVX-512DQ's vpmullq), x86-64-v3 (Philox in AVX2 intrinsics: gcc's own
# vectorization of the 32x32->64-bit products was slower than SSE2's) and the baseline (the scalar
# rounds, vectorized by gcc).  docs/random.md, "The cpu engine".

C_CHUNK = 128  # blocks per chunk (16 lane groups): the words and rows of a chunk stay in L1


class _LoopFlavour(_Flavour):
    """The scalar flavour, but float64's conversions of 64-bit integers (all below 2**53 in
    magnitude, so exact either way) go through ``rng_i2d``: the plain conversion, except in
    x86-64-v3's loops (AVX2 converts no 64-bit integers to vectors of doubles, so gcc left those
    loops scalar) an exact sum of two exact halves, which AVX2 vectorizes.  The baseline keeps
    the plain conversion: measured faster there, SSE2 vectorizing little of the float64 code."""

    def to_t(self, signed: str) -> str:
        if self.tag == "f64":
            return f"rng_i2d({signed}, isa != 2)"
        return super().to_t(signed)


def _c_words_source() -> str:
    """The loops computing the words ``w[r][i]`` of blocks ``b0 + i``, ``i < nb`` (``nb`` a
    multiple of 8), and what picks the code at run time."""
    narrow, wide, avx2 = [], [], []
    for r in range(ROUNDS):
        if r:
            narrow.append(f"k0_ += {W0}u; k1_ += {W1}u;")
            wide.append(f"k0_ = (u32)(k0_ + {W0}u); k1_ = (u32)(k1_ + {W1}u);")
            avx2.append(f"k0_ += {W0}u; k1_ += {W1}u;")
        narrow.append(
            f"p0_ = (u64){M0}u * x0; p1_ = (u64){M1}u * x2; "
            "y0_ = (u32)(p1_ >> 32) ^ x1 ^ k0_; y2_ = (u32)(p0_ >> 32) ^ x3 ^ k1_; "
            "x1 = (u32)p1_; x3 = (u32)p0_; x0 = y0_; x2 = y2_;")
        wide.append(
            f"p0_ = (x0 & 0xFFFFFFFFu) * {M0}u; p2_ = (x2 & 0xFFFFFFFFu) * {M1}u; "
            "x0 = (p2_ >> 32) ^ x1 ^ k0_; x1 = p2_; x2 = (p0_ >> 32) ^ x3 ^ k1_; x3 = p0_;")
        avx2.append("RNG_ROUND_AVX2(x0, x1, x2, x3, k0_, k1_)")
    ind = "\n        "
    return f"""
/* The cpu engine's lane-group loops (kernels.py, "The cpu engine's lane-group loops";
 * docs/random.md, "The cpu engine"): whole lane groups in chunks of RNG_CHUNK blocks, the
 * Philox words of a chunk in one loop, the transforms in a second (each lane the scalar
 * kernel's statements, so its bits), the rows copied out.  gcc vectorizes the loops; on x86-64
 * they are compiled for x86-64-v4, x86-64-v3 and the baseline, picked at run time. */
#define RNG_CHUNK {C_CHUNK}
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && defined(__x86_64__)
#include <immintrin.h>
#define RNG_X86 1
#define RNG_V4 __attribute__((target("arch=x86-64-v4")))
#define RNG_V3 __attribute__((target("arch=x86-64-v3")))
#define RNG_RUN(isa, f, args) ((isa) == 3 ? f##_v4 args : (isa) == 2 ? f##_v3 args : f##_base args)
#else
#define RNG_RUN(isa, f, args) f##_base args
#endif
/* What computes the whole lane groups: 0 the scalar kernel alone, 1 the loops compiled for the
 * baseline, 2 for x86-64-v3, 3 for x86-64-v4.  rng_level -1 (always, but in tests): the best
 * the CPU runs.  rng.c's use_isa() sets it, for tests and measurements only. */
static int rng_level = -1;
static int rng_best(void)
{{
#ifdef RNG_X86
    if (__builtin_cpu_supports("x86-64-v4"))
        return 3;
    if (__builtin_cpu_supports("x86-64-v3"))
        return 2;
#endif
    return 1;
}}
#define RNG_INLINE static inline __attribute__((always_inline))

/* (double)x for |x| < 2**53, vectorizable by AVX2 (native: the plain conversion):
 * x = hi 2**32 + lo, hi = x >> 32 (|hi| < 2**21) and lo < 2**32 each made a double exactly by
 * the bits of 1.5 2**52 + hi and 2**52 + lo less those constants, hi scaled by 2**32 exactly,
 * and the sum is x itself, representable: so exactly the plain conversion's value. */
RNG_INLINE double rng_i2d(i64 x, int native)
{{
    if (native)
        return (double)x;
    double hi = SUB_f64(FROM_f64((u64)0x4338000000000000u + (u64)(x >> 32)),
                        6755399441055744.0);
    double lo = SUB_f64(FROM_f64((u64)0x4330000000000000u | ((u64)x & 0xFFFFFFFFu)),
                        4503599627370496.0);
    return ADD_f64(MUL_f64(hi, 4294967296.0), lo);
}}

/* Philox in 32-bit lanes (the scalar rounds, vectorized by gcc): the baseline's */
RNG_INLINE void rng_words32(u32 (*w)[RNG_CHUNK], u32 k0, u32 k1, u64 b0, u64 nb)
{{
    for (u64 i = 0; i < nb; i++) {{
        u32 x0 = (u32)(b0 + i), x1 = (u32)((b0 + i) >> 32), x2 = 0, x3 = 0;
        u32 k0_ = k0, k1_ = k1, y0_, y2_; u64 p0_, p1_;
        {ind.join(narrow)}
        w[0][i] = x0; w[1][i] = x1; w[2][i] = x2; w[3][i] = x3;
    }}
}}

/* Philox in 64-bit lanes, each word in the low half (the high half is garbage nothing reads,
 * as in the OpenCL vector kernels): one 64-bit multiply, shift and xor per word pair;
 * x86-64-v4's */
RNG_INLINE void rng_words64(u32 (*w)[RNG_CHUNK], u32 k0, u32 k1, u64 b0, u64 nb)
{{
    for (u64 i = 0; i < nb; i++) {{
        u64 x0 = b0 + i, x1 = (b0 + i) >> 32, x2 = 0, x3 = 0, p0_, p2_;
        u64 k0_ = k0, k1_ = k1;
        {ind.join(wide)}
        w[0][i] = (u32)x0; w[1][i] = (u32)x1; w[2][i] = (u32)x2; w[3][i] = (u32)x3;
    }}
}}

#ifdef RNG_X86
/* Philox in AVX2, 8 blocks per step, x86-64-v3's: the even and odd lanes' 64-bit products
 * (vpmuludq), their halves blended into the high and low words */
#define RNG_MULHILO_AVX2(x, m, hi, lo) {{ \\
        __m256i e_ = _mm256_mul_epu32(x, m), o_ = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m); \\
        hi = _mm256_blend_epi32(_mm256_srli_epi64(e_, 32), o_, 0xAA); \\
        lo = _mm256_blend_epi32(e_, _mm256_slli_epi64(o_, 32), 0xAA); }}
#define RNG_ROUND_AVX2(x0, x1, x2, x3, k0, k1) {{ __m256i h0_, l0_, h2_, l2_; \\
        RNG_MULHILO_AVX2(x0, m0_, h0_, l0_) RNG_MULHILO_AVX2(x2, m1_, h2_, l2_) \\
        x0 = _mm256_xor_si256(_mm256_xor_si256(h2_, x1), _mm256_set1_epi32((int)k0)); \\
        x2 = _mm256_xor_si256(_mm256_xor_si256(h0_, x3), _mm256_set1_epi32((int)k1)); \\
        x1 = l2_; x3 = l0_; }}
RNG_V3 static inline void rng_words_avx2(u32 (*w)[RNG_CHUNK], u32 k0, u32 k1, u64 b0, u64 nb)
{{
    const __m256i m0_ = _mm256_set1_epi64x({M0}), m1_ = _mm256_set1_epi64x({M1});
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    for (u64 i = 0; i < nb; i += 8) {{
        u64 b = b0 + i;  /* blocks b .. b + 7: low words b + l, high words + 1 past a wrap */
        __m256i lo = _mm256_set1_epi32((int)(u32)b);
        __m256i x0 = _mm256_add_epi32(lo, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256i wrap = _mm256_cmpgt_epi32(_mm256_xor_si256(lo, sign), _mm256_xor_si256(x0, sign));
        __m256i x1 = _mm256_sub_epi32(_mm256_set1_epi32((int)(u32)(b >> 32)), wrap);
        __m256i x2 = _mm256_setzero_si256(), x3 = _mm256_setzero_si256();
        u32 k0_ = k0, k1_ = k1;
        {ind.join(avx2)}
        _mm256_storeu_si256((__m256i *)(w[0] + i), x0);
        _mm256_storeu_si256((__m256i *)(w[1] + i), x1);
        _mm256_storeu_si256((__m256i *)(w[2] + i), x2);
        _mm256_storeu_si256((__m256i *)(w[3] + i), x3);
    }}
}}
#endif

/* the words of blocks b0 .. b0 + nb - 1 by the code of isa (3, 2, 1: rng_level's) */
RNG_INLINE void rng_words(u32 (*w)[RNG_CHUNK], u32 k0, u32 k1, u64 b0, u64 nb, int isa)
{{
    if (isa == 3)
        rng_words64(w, k0, k1, b0, nb);
#ifdef RNG_X86
    else if (isa == 2)
        rng_words_avx2(w, k0, k1, b0, nb);
#endif
    else
        rng_words32(w, k0, k1, b0, nb);
}}
"""


def _c_groups_source(family: str, spec: FloatSpec) -> str:
    """The lane-group loops of one floating kernel and its runner ``run_rng_<family>_<tag>``:
    the whole lane groups of the launch by the loops, the blocks around them (a partial last
    group, a start inside a group) by the scalar kernel."""
    fl = _LoopFlavour(spec)
    tag, t = fl.tag, fl.t
    e = per_block(family, spec.dtype)
    extra, params = _family_params(family, spec)
    names = [p.split()[-1] for p in extra.split(", ")[1:]]
    pre, values = _values(family, spec, fl, "x")
    pre = "".join(f"            {line.strip()}\n" for line in pre.splitlines())
    rows = "".join(f"            r_[{r}][i] = {v};\n" for r, v in enumerate(values))
    copies = "".join(f"            memcpy(o + {r * LANES}, r_[{r}] + {LANES} * j, "
                     f"sizeof r_[0][0] * {LANES});\n" for r in range(e))
    name = f"rng_{family}_{tag}"
    sig = f"{t} *out, u32 k0, u32 k1, u64 off, u64 g0, u64 ng{extra}"
    call = ", ".join(["out", "k0", "k1", "off", "g0", "ng", *names])
    args = ", ".join(_C_ARGS[p][1].format(i + 6) for i, p in enumerate(params))
    return f"""
/* lane groups g0 .. g0 + ng - 1 of {name}, whole: blocks off + 8 g0 on */
RNG_INLINE void {name}_groups({sig}, int isa)
{{
    u32 w_[4][RNG_CHUNK];
    {t} r_[{e}][RNG_CHUNK];
    for (u64 c = 0; c < ng; c += RNG_CHUNK / {LANES}) {{
        u64 nb = (ng - c < RNG_CHUNK / {LANES} ? ng - c : RNG_CHUNK / {LANES}) * {LANES};
        rng_words(w_, k0, k1, off + (g0 + c) * {LANES}, nb, isa);
        for (u64 i = 0; i < nb; i++) {{
            u32 x0 = w_[0][i], x1 = w_[1][i], x2 = w_[2][i], x3 = w_[3][i];
{pre}{rows}        }}
        for (u64 j = 0; j < nb / {LANES}; j++) {{
            {t} *o = out + (g0 + c + j) * {e * LANES};
{copies}        }}
    }}
}}
#ifdef RNG_X86
RNG_V4 static void {name}_groups_v4({sig}) {{ {name}_groups({call}, 3); }}
RNG_V3 static void {name}_groups_v3({sig}) {{ {name}_groups({call}, 2); }}
#endif
static void {name}_groups_base({sig}) {{ {name}_groups({call}, 1); }}

static void run_{name}(const rng_value *a, u64 items)
{{
    {t} *out = a[0].p;
    u64 n = a[1].u, off = a[4].u, start = a[5].u;
    u32 k0 = (u32)a[2].u, k1 = (u32)a[3].u;
    u64 gs = (start + {LANES - 1}) / {LANES}, ge = (start + items) / {LANES};  /* whole groups */
    if (ge > n / {e * LANES})
        ge = n / {e * LANES};  /* ... and whole in the output */
    int isa = rng_level >= 0 ? rng_level : rng_best();
    if (gs >= ge || isa == 0)
        gs = ge = (start + {LANES - 1}) / {LANES};  /* all by the scalar kernel */
    else
        RNG_RUN(isa, {name}_groups, (out, k0, k1, off, gs, ge - gs, {args}));
    for (u64 g = 0; g < gs * {LANES} - start && g < items; g++)
        {name}(g, out, n, k0, k1, off, start, {args});
    for (u64 g = ge * {LANES} - start; g < items; g++)
        {name}(g, out, n, k0, k1, off, start, {args});
}}
"""


def _philox_vector(v: str, base: str) -> str:
    """Declarations of the ``ulong8`` words ``v0 .. v3`` of the ``LANES`` blocks from ``base`` on.

    Each 32-bit word sits in the low half of a 64-bit lane; the high half is garbage that
    nothing reads (``vpmuludq`` multiplies the low halves only, and the words are truncated
    at the end), so a round is one multiply, one shift and one three-way xor per word pair.
    """
    lanes = ", ".join(str(i) for i in range(LANES))
    return (f"    ulong{LANES} {v}0 = (ulong{LANES})({base}) + (ulong{LANES})({lanes});\n"
            f"    ulong{LANES} {v}1 = {v}0 >> 32, {v}2 = 0, {v}3 = 0;\n")


def _philox_vector_rounds(names: list[str]) -> str:
    """The ten rounds over several lane groups at once (independent chains hide latencies).

    ``(x & 0xFFFFFFFF) * M`` is LLVM's ``vpmuludq``: the whole 64-bit product, whose low
    half is the new odd word as it stands (its high half is the garbage above) and whose
    high half, shifted down, is xored into the new even word.
    """
    out = [f"    {{ u64 k0_ = k0, k1_ = k1; ulong{LANES} p0_, p2_;"]
    for r in range(ROUNDS):
        if r:
            out.append(f"      k0_ = (u32)(k0_ + {W0}u); k1_ = (u32)(k1_ + {W1}u);")
        for v in names:
            out.append(
                f"      p0_ = ({v}0 & 0xFFFFFFFFul) * {M0}ul; p2_ = ({v}2 & 0xFFFFFFFFul) * {M1}ul; "
                f"{v}0 = (p2_ >> 32) ^ {v}1 ^ k0_; {v}1 = p2_; "
                f"{v}2 = (p0_ >> 32) ^ {v}3 ^ k1_; {v}3 = p0_;")
    out.append("    }")
    return "\n".join(out) + "\n"


def _philox_vector_words(v: str) -> str:
    """``uint8`` words ``v``u0 .. u3 of the ``ulong8`` words (truncated: the garbage goes)."""
    return (f"    uint{LANES} " + ", ".join(f"{v}u{i} = convert_uint{LANES}({v}{i})"
                                           for i in range(4)) + ";\n")


def _row_stores(rows: list[tuple[str, int, str, str]]) -> str:
    """The rows ``(type, width, value, address)`` of a work-item: every value first, then one
    branch on ``stream`` for all the stores (non-temporal ones skip the cache).  A branch
    per store made PoCL's kernel a third slower (docs/random.md, "Speed")."""
    values = "".join(f"    {t}{w} s{i}_ = {value};\n" for i, (t, w, value, _) in enumerate(rows))
    past = "".join(f"        __builtin_nontemporal_store(s{i}_, (GLOBAL {t}{w} *)({ptr}));\n"
                   for i, (t, w, _, ptr) in enumerate(rows))
    cached = "".join(f"        vstore{w}(s{i}_, 0, {ptr});\n"
                     for i, (t, w, _, ptr) in enumerate(rows))
    return f"{values}    if (stream) {{\n{past}    }} else {{\n{cached}    }}\n"


def _uniform32_rows(spec: FloatSpec, v: str, o: str) -> list[tuple[str, int, str, str]]:
    """float32 uniforms of one lane group: rows ``r`` and ``r + 1`` (adjacent in memory)
    joined into one 16-wide vector from the ``ulong8`` words by one two-source shuffle."""
    evens = ", ".join(str(2 * i) for i in range(2 * LANES))
    w = 2 * LANES
    rows = []
    for r in (0, 2):
        bits = (f"(shuffle2(as_uint{w}({v}{r}), as_uint{w}({v}{r + 1}), (uint{w})({evens})) "
                ">> 8)")
        value = (f"ADD_f32(low, MUL_f32(span, MUL_f32(convert_float{w}(as_int{w}({bits})), "
                 f"{_lit(spec, 2.0 ** -spec.ubits)})))")
        rows.append(("float", w, value, f"{o} + {r * LANES}"))
    return rows


def _float_vector_kernel(family: str, spec: FloatSpec, groups: int) -> tuple[str, list[str]]:
    """OpenCL C for CPU devices: ``groups`` whole lane groups per work-item, ``LANES`` blocks
    in the lanes of ``ulong8`` words, each output row one vector store (docs/random.md,
    "Speed").  Work-item ``w < nwi`` covers groups ``w * groups ..``; no bounds checks
    inside (the caller launches the whole work-items only, a scalar kernel does the rest).
    ``stream`` (the output is larger than the device's cache and 64-byte aligned) makes the
    stores non-temporal: they skip the cache and the read of each line before its write."""
    fl = _Flavour(spec, LANES)
    e = per_block(family, spec.dtype)
    extra, params = _family_params(family, spec)
    t = _CTYPE[spec.name][1]
    names = [f"a{g}_" for g in range(groups)]
    body = "".join(_philox_vector(v, f"off + (w * {groups} + {g}) * {LANES}")
                   for g, v in enumerate(names))
    body += _philox_vector_rounds(names)
    joined = family == "uniform" and spec.dtype.itemsize == 4
    if not joined:
        body += "".join(_philox_vector_words(v) for v in names)
    if family != "uniform":  # groups is even: pairs of groups share 16-wide transforms
        pre, wide = _wide_values(family, spec, [f"{v}u" for v in names])
        body += pre
    rows = []
    for g, v in enumerate(names):
        o = f"o{v}"
        body += f"    GLOBAL {t} *{o} = out + (w * {groups} + {g}) * {e * LANES};\n"
        if joined:
            rows += _uniform32_rows(spec, v, o)
            continue
        if family == "uniform":
            pre, values = _values(family, spec, fl, f"{v}u")
            body += pre
        else:
            values = [wide[g, r] for r in range(e)]
        rows += [(t, LANES, val, f"{o} + {r * LANES}") for r, val in enumerate(values)]
    body += _row_stores(rows)
    name = f"rng_{family}_{fl.tag}_v{groups}"
    src = f"""
KERNEL void {name}(ITEM GLOBAL {t} *out, u64 nwi, u32 k0, u32 k1, u64 off, u32 stream{extra}) {{
    u64 w = GID;
    if (w >= nwi) return;
{body}}}
"""
    return src, ["ptr", "u8", "u4", "u4", "u8", "u4", *params]


def _integers_kernel(width: int, wide: bool) -> tuple[str, list[str]]:
    """Lemire's multiply-shift; a rejected element retries from blocks (b, b >> 32, a, lane)."""
    ot = f"u{width}"
    lanes = 2 if wide else 4
    if wide:
        helper = """
FN u64 draw64(u64 v, u32 k0, u32 k1, u64 blk, u32 lane, u64 range, u64 thresh) {
    if (range == 0) return v;
    u64 lo = v * range;
    u64 r = MULHI64(v, range);
    for (u32 a = 1; lo < thresh; ++a) {
        PHILOX_BLOCK(k0, k1, blk, a, lane, y)
        v = (((u64)y0) | ((u64)y1 << 32));
        lo = v * range; r = MULHI64(v, range);
        if (lo < thresh) {
            v = (((u64)y2) | ((u64)y3 << 32));
            lo = v * range; r = MULHI64(v, range);
        }
    }
    return r;
}
"""
        values = [f"({ot})(low + draw64({_u64('x', 2 * i)}, k0, k1, off + b, {i}, range, thresh))"
                  for i in range(lanes)]
    else:
        helper = """
FN u64 draw32(u32 v, u32 k0, u32 k1, u64 blk, u32 lane, u64 range, u64 thresh) {
    u64 m = (u64)v * range;
    for (u32 a = 1; (u32)m < thresh; ++a) {
        PHILOX_BLOCK(k0, k1, blk, a, lane, y)
        m = (u64)y0 * range;
        if ((u32)m < thresh) m = (u64)y1 * range;
        if ((u32)m < thresh) m = (u64)y2 * range;
        if ((u32)m < thresh) m = (u64)y3 * range;
    }
    return m >> 32;
}
"""
        values = [f"({ot})(low + draw32(x{i}, k0, k1, off + b, {i}, range, thresh))"
                  for i in range(lanes)]
    name = f"rng_integers{64 if wide else 32}_{ot}"
    src = f"""{helper}
KERNEL void {name}(ITEM GLOBAL {ot} *out, u64 n, u32 k0, u32 k1, u64 off, u64 low, u64 range, u64 thresh) {{
    u64 b = GID;
    u64 first = b * {lanes};
    if (first >= n) return;
    PHILOX_BLOCK(k0, k1, off + b, 0, 0, x)
{_stores(lanes, values)}
}}
"""
    return src, ["ptr", "u8", "u4", "u4", "u8", "u8", "u8", "u8"]


_PERM = {
    "rng_keys": (f"""
/* out[t] = the random 64-bit key of element t: words 2l | 2l + 1 of block t / 2 */
KERNEL void rng_keys(ITEM GLOBAL u64 *out, u64 n, u32 k0, u32 k1, u64 off) {{
    u64 b = GID;
    u64 first = 2 * b;
    if (first >= n) return;
    PHILOX_BLOCK(k0, k1, off + b, 0, 0, x)
{_stores(2, [_u64("x", 0), _u64("x", 2)])}
}}
""", ["ptr", "u8", "u4", "u4", "u8"]),
    "rng_perm_init": (f"""
/* keys[t] = the random 64-bit key of element t (t < n), all ones for the padding; idx[t] = t */
KERNEL void rng_perm_init(ITEM GLOBAL u64 *keys, GLOBAL u32 *idx, u64 n, u64 p, u32 k0, u32 k1, u64 off) {{
    u64 b = GID;
    u64 t = 2 * b;
    if (t >= p) return;
    PHILOX_BLOCK(k0, k1, off + b, 0, 0, x)
    keys[t] = t < n ? {_u64("x", 0)} : ~(u64)0;
    idx[t] = (u32)t;
    if (t + 1 < p) {{
        keys[t + 1] = t + 1 < n ? {_u64("x", 2)} : ~(u64)0;
        idx[t + 1] = (u32)(t + 1);
    }}
}}
""", ["ptr", "ptr", "u8", "u8", "u4", "u4", "u8"]),
    "rng_bitonic": ("""
/* One compare-exchange stage of a bitonic sort of (key, index) pairs: p / 2 work-items */
KERNEL void rng_bitonic(ITEM GLOBAL u64 *keys, GLOBAL u32 *idx, u64 j, u64 k, u64 pairs) {
    u64 t = GID;
    if (t >= pairs) return;
    u64 lo = ((t & ~(j - 1)) << 1) | (t & (j - 1));
    u64 hi = lo + j;
    u64 ka = keys[lo], kb = keys[hi];
    u32 ia = idx[lo], ib = idx[hi];
    int greater = ka > kb || (ka == kb && ia > ib);
    int up = (lo & k) == 0;
    if (greater == up) {
        keys[lo] = kb; keys[hi] = ka;
        idx[lo] = ib; idx[hi] = ia;
    }
}
""", ["ptr", "ptr", "u8", "u8", "u8"]),
    "rng_perm_index": ("""
KERNEL void rng_perm_index(ITEM GLOBAL i64 *out, GLOBAL const u32 *idx, u64 n) {
    u64 t = GID;
    if (t < n) out[t] = (i64)idx[t];
}
""", ["ptr", "ptr", "u8"]),
}


def _bitonic_local_kernel(seg: int) -> tuple[str, list[str]]:
    """The stages with ``j < seg / 2`` of steps ``kmin .. kmax`` in local memory, ``seg / 2``
    work-items per group, each group on its own ``seg`` elements (one barrier per stage)."""
    half = seg // 2
    src = f"""
KERNEL void rng_bitonic_local_{seg}(ITEM GLOBAL u64 *keys, GLOBAL u32 *idx, u64 kmin, u64 kmax) {{
    LOCAL_MEM u64 lk[{seg}];
    LOCAL_MEM u32 li[{seg}];
    u64 base = GRP * {seg}, t = LID;
    lk[t] = keys[base + t]; li[t] = idx[base + t];
    lk[t + {half}] = keys[base + t + {half}]; li[t + {half}] = idx[base + t + {half}];
    SYNC();
    for (u64 k = kmin; k <= kmax; k <<= 1) {{
        for (u64 j = (k >> 1) < {half} ? (k >> 1) : {half}; j >= 1; j >>= 1) {{
            u64 lo = ((t & ~(j - 1)) << 1) | (t & (j - 1));
            u64 hi = lo + j;
            u64 ka = lk[lo], kb = lk[hi];
            u32 ia = li[lo], ib = li[hi];
            int greater = ka > kb || (ka == kb && ia > ib);
            int up = ((base + lo) & k) == 0;
            if (greater == up) {{
                lk[lo] = kb; lk[hi] = ka;
                li[lo] = ib; li[hi] = ia;
            }}
            SYNC();
        }}
    }}
    keys[base + t] = lk[t]; idx[base + t] = li[t];
    keys[base + t + {half}] = lk[t + {half}]; idx[base + t + {half}] = li[t + {half}];
}}
"""
    return src, ["ptr", "ptr", "u8", "u8"]


def _take_kernel(width: int, index: str) -> tuple[str, list[str]]:
    it = {"u32": "u32", "i64": "i64"}[index]
    name = f"rng_take_u{width}_{index}"
    src = f"""
/* dst word t = word c of row idx[r] of src (t = r * rowwords + c); rows of src step by stride words */
KERNEL void {name}(ITEM GLOBAL u{width} *dst, GLOBAL const u{width} *src, GLOBAL const {it} *idx,
                   u64 nwords, u64 rowwords, i64 stride) {{
    u64 t = GID;
    if (t >= nwords) return;
    u64 r = t / rowwords;
    u64 c = t - r * rowwords;
    dst[t] = src[(i64)idx[r] * stride + (i64)c];
}}
"""
    return src, ["ptr", "ptr", "ptr", "u8", "u8", "i8"]


_WRITE_REFERENCE = ("""
/* The bandwidth yardstick of the benchmark: one float32 store per work-item */
KERNEL void bench_write_f32(ITEM GLOBAL float *out, u64 n) {
    u64 i = GID;
    if (i < n) out[i] = (float)(u32)i;
}
""", ["ptr", "u8"])


# Work-items per group: 64 on a CPU device (PoCL vectorises across a group and recompiles
# for each new runtime-chosen size), 256 on a GPU (a common occupancy sweet spot).
_LOCAL = {"cpu": 64, "gpu": 256}
# Whether the sort runs its short stages in local memory: on PoCL (2 cores) a permutation of
# 2**20 + 3 took 2.1-2.6 s with global stages only and 3.2-3.7 s with them (barriers cost
# there); on a GPU they save about half the passes through global memory (not measured yet).
_SORT_IN_LOCAL = {"cpu": False, "gpu": True}


# Lane groups per work-item of the vector kernels (CPU OpenCL devices): independent chains
# hide the multiplies' latencies; measured on PoCL (docs/random.md, "Speed").
_GROUPS = {"uniform": 4, "normal": 4, "exponential": 4}
_BOTH = ("opencl", "cuda")
_ALL = ("opencl", "cuda", "c")  # the scalar kernels the cpu engine runs too


def _kernel_table() -> dict[str, tuple]:
    """kernel name -> (body builder, float spec needing fp64 helpers or None, dialects)."""
    table: dict[str, tuple] = {}
    for spec in SPECS.values():
        tag = _CTYPE[spec.name][0]
        doubles = spec.dtype.itemsize == 8
        for family in ("uniform", "normal", "exponential"):
            table[f"rng_{family}_{tag}"] = (functools.partial(_float_kernel, family, spec),
                                            doubles, _ALL)
            g = _GROUPS[family]
            table[f"rng_{family}_{tag}_v{g}"] = (
                functools.partial(_float_vector_kernel, family, spec, g), doubles, ("opencl",))
    for width in (8, 16, 32, 64):
        for wide in (False, True):
            table[f"rng_integers{64 if wide else 32}_u{width}"] = (
                functools.partial(_integers_kernel, width, wide), False, _ALL)
        for index in ("u32", "i64"):
            table[f"rng_take_u{width}_{index}"] = (
                functools.partial(_take_kernel, width, index), False, _BOTH)
    for local in set(_LOCAL.values()):
        table[f"rng_bitonic_local_{2 * local}"] = (
            functools.partial(_bitonic_local_kernel, 2 * local), False, _BOTH)
    for name, (src, params) in (*_PERM.items(), ("bench_write_f32", _WRITE_REFERENCE)):
        table[name] = ((lambda s=src, p=params: (s, p)), False,
                       _ALL if name == "rng_keys" else _BOTH)
    return table


_TABLE = _kernel_table()
KERNEL_NAMES = tuple(_TABLE)


def names(dialect: str) -> tuple[str, ...]:
    """The kernels written for ``dialect`` (the vector kernels are OpenCL C only)."""
    return tuple(name for name, (_, _, dialects) in _TABLE.items() if dialect in dialects)


@functools.cache
def source(dialect: str, name: str) -> tuple[str, tuple[str, ...]]:
    """``(C source, parameter types)`` of kernel ``name`` in ``dialect`` (``opencl``, ``cuda``,
    or ``c``: the cpu engine's, whole in ``c_source``)."""
    build, doubles, dialects = _TABLE[name]
    if dialect not in dialects:
        raise ValueError(f"kernel {name} is written for {', '.join(dialects)} only, "
                         f"not {dialect}; use the scalar kernel of its family")
    body, params = build()
    text = _PRELUDE[dialect] + (_FP64[dialect] if doubles else "") + _PHILOX + body
    return text, tuple(params)


# The cpu engine's C ------------------------------------------------------------------------

_C_ARGS = {"ptr": ("p", "a[{}].p"), "u8": ("q", "a[{}].u"), "u4": ("i", "(u32)a[{}].u"),
           "f4": ("f", "(float)a[{}].f"), "f8": ("d", "a[{}].f")}
C_HEADER = "src/native/rng/rng_kernels.h"  # where ``c_source`` is kept, from the checkout


def c_source() -> str:
    """The kernels the cpu engine runs, in plain C, for ``gpuarrays._rng`` (``C_HEADER``).

    Each kernel is a function of one work-item (its index first); ``run_<name>`` runs
    work-items ``0 .. items - 1`` with arguments from an ``rng_value`` array, and
    ``rng_kernels`` lists them with one character per parameter (``p`` pointer, ``q`` u64,
    ``i`` u32, ``f`` float, ``d`` double).  A helper shared by several kernels is written
    once.  ``write_c_header()`` rewrites the header; a test checks that the committed one is
    current.
    """
    parts = ["/* Generated by gpuarrays/_compute/rng/kernels.py (c_source): do not edit.\n"
             " * The random-number kernels in plain C for the cpu engine (docs/random.md). */\n",
             _PRELUDE["c"], _PHILOX,
             "typedef union { u64 u; double f; void *p; } rng_value;\n", _c_words_source()]
    floats = {f"rng_{family}_{_CTYPE[spec.name][0]}": (family, spec)
              for spec in SPECS.values() for family in ("uniform", "normal", "exponential")}
    helpers, table = set(), []
    for name in names("c"):
        body, params = _TABLE[name][0]()
        helper, kernel = body.split("\nKERNEL void ", 1)
        if helper not in helpers:
            helpers.add(helper)
            parts.append(helper)
        parts.append(f"\nKERNEL void {kernel}")
        if name in floats:  # the lane-group loops, the scalar kernel around them
            parts.append(_c_groups_source(*floats[name]))
        else:
            args = ", ".join(_C_ARGS[t][1].format(i) for i, t in enumerate(params))
            parts.append(f"\nstatic void run_{name}(const rng_value *a, u64 items)\n{{\n"
                         f"    for (u64 g = 0; g < items; g++)\n        {name}(g, {args});\n}}\n")
        table.append(f'    {{"{name}", "{"".join(_C_ARGS[t][0] for t in params)}", run_{name}}},')
    parts.append("\ntypedef struct {\n    const char *name;\n    const char *params;\n"
                 "    void (*run)(const rng_value *, u64);\n} rng_kernel;\n\n"
                 "static const rng_kernel rng_kernels[] = {\n" + "\n".join(table) + "\n};\n")
    return "".join(parts)


def write_c_header(path: str = C_HEADER) -> None:
    """Rewrite the cpu engine's C (``path`` from the checkout's root); rebuild ``_rng`` after:
    ``python -c "from gpuarrays._compute.rng import kernels; kernels.write_c_header()"``."""
    with open(path, "w") as f:
        f.write(c_source())


# Launching ------------------------------------------------------------------------------


def local_size(device) -> int:
    return _LOCAL[device.impl.launch_hint(device.index)]


_kernels: dict[tuple, object] = {}  # (device, (back-end, kernel name)) -> compiled kernel
_lock = threading.Lock()


def _program(_dialect, key: tuple[str, str]) -> tuple[str, str, tuple[str, ...]]:
    """``compiled``'s build: kernel ``key = (back-end name, kernel name)`` (our ``source``
    takes the back-end's name, not its Dialect)."""
    text, params = source(*key)
    return text, key[1], params


def _launch(device, name: str, values: list, items: int, local: int | None = None) -> None:
    if device.backend == "cpu":  # gpuarrays._rng runs the C of the same template
        _rng.launch(name, tuple(values), items)
        return
    impl = device.impl
    if not hasattr(impl, "compile_kernel"):
        raise NotImplementedError(
            f"random numbers on {device} need the back-end's kernel interface "
            f"(compile_kernel), which the {impl.name} back-end does not offer")
    if items == 0:
        return
    # compiled once per device (a kernel object outlives device resets); both CUDA and OpenCL
    # keep the compiled program on disk (docs/kernels.md, "Kernel caches")
    kernel = compiled(device, (impl.name, name), _program, _kernels, _lock)
    local = local or local_size(device)
    while local > kernel.max_local:  # the numbers never depend on the launch shape
        local //= 2
    kernel.launch(values, -(-items // local) * local, local)


def generate(family: str, device, out: RawView, key: tuple[int, int], offset: int,
             params: tuple) -> None:
    """Fill the contiguous ``out`` with ``family``'s numbers from block ``offset`` on."""
    n = int(np.prod(out.shape))
    if n == 0:
        return
    e = per_block(family, out.dtype, params)
    values = [out.ptr, n, key[0], key[1], offset]
    if family == "integers":
        low, rng, thresh, wide = params
        name = f"rng_integers{64 if wide else 32}_u{out.dtype.itemsize * 8}"
        values += [low, rng, thresh]
    elif family == "keys":
        name = "rng_keys"
    else:
        _generate_floats(family, device, out, n, e, key, offset, [float(p) for p in params])
        return
    _launch(device, name, values, -(-n // e))


# The vector kernels run where the device qualifies their shape (qualify.py): PoCL 3.0-rc2
# (LLVM 14) zeroes convert_uint8(ulong8), and dies in LLVM on the whole kernels ("Do not
# know how to scalarize this operator's operand!", a segfault after a minute and a half), so
# there the scalar kernels run (docs/random.md, "Speed").  The representative is the vector
# kernels' constructs in two small kernels: first the truncation of 64-bit lanes alone
# (wrong on PoCL 3.0 in a second, where the second kernel takes LLVM a minute and a half to
# crash), then 64-bit-lane Philox words, the two-source shuffle into 16-wide rows, the
# conversions, and both kinds of store.
_facts: dict[tuple[int, int], int] = {}
_PROBE_ITEMS = 8
_PROBE_TRUNCATE = """__kernel void probe(__global const ulong *x, __global uint *u) {
    size_t i = get_global_id(0);
    vstore8(convert_uint8((ulong8)(x[i]) + (ulong8)(0, 1, 2, 3, 4, 5, 6, 7)), 0, u + 8 * i);
}
"""
_PROBE_SOURCE = """#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void probe(__global const ulong *x, __global float *f, __global double *d) {
    size_t i = get_global_id(0);
    ulong8 v0 = (ulong8)(x[i]) + (ulong8)(0, 1, 2, 3, 4, 5, 6, 7);
    ulong8 p = (v0 & 0xFFFFFFFFul) * 0xD2511F53ul;
    ulong8 v1 = (p >> 32) ^ v0 ^ 0x9E3779B9ul;
    uint8 u = convert_uint8(v1);
    uint16 s = shuffle2(as_uint16(v0), as_uint16(v1),
                        (uint16)(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)) >> 8;
    float16 a = convert_float16(as_int16(s)) * 0x1p-24f;
    float8 b = convert_float8(u);
    double8 c = convert_double8(v1 >> 11) * 0x1p-53;
    __global float *fo = f + 32 * i;  /* rows 64-byte aligned, as the kernels' streams are */
    __global double *dout = d + 8 * i;
    if (i & 1) {
        __builtin_nontemporal_store(a, (__global float16 *)fo);
        __builtin_nontemporal_store(b, (__global float8 *)(fo + 16));
        __builtin_nontemporal_store(c, (__global double8 *)dout);
    } else {
        vstore16(a, 0, fo);
        vstore8(b, 0, fo + 16);
        vstore8(c, 0, dout);
    }
}
"""


def _probe_vectors(device) -> None:
    """Run ``_PROBE_SOURCE`` on ``device``; ``ValueError`` when a value is wrong."""
    x = (np.arange(_PROBE_ITEMS, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
         + np.uint64(12345))
    v0 = x[:, None] + np.arange(8, dtype=np.uint64)
    low = np.uint64(0xFFFFFFFF)
    u, = qualify.run_probe(device, _PROBE_TRUNCATE, [x], [(_PROBE_ITEMS * 8, np.uint32)],
                           _PROBE_ITEMS)
    if not np.array_equal(u, (v0 & low).astype(np.uint32).ravel()):
        raise ValueError("convert_uint8(ulong8) gives wrong values")
    f, d = qualify.run_probe(device, _PROBE_SOURCE, [x], [(_PROBE_ITEMS * 32, np.float32),
                                                          (_PROBE_ITEMS * 8, np.float64)],
                             _PROBE_ITEMS)
    v1 = (((v0 & low) * np.uint64(0xD2511F53)) >> np.uint64(32)) ^ v0 ^ np.uint64(0x9E3779B9)
    s = np.concatenate([v0 & low, v1 & low], axis=1).astype(np.uint32) >> np.uint32(8)
    want_f = np.concatenate([s.view(np.int32).astype(np.float32) * np.float32(2.0 ** -24),
                             (v1 & low).astype(np.uint32).astype(np.float32)], axis=1)
    want_d = (v1 >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    got_f = f.reshape(_PROBE_ITEMS, 32)[:, :24]
    got_d = d.reshape(_PROBE_ITEMS, 8)
    if not (np.array_equal(got_f, want_f) and np.array_equal(got_d, want_d)):
        raise ValueError("wrong values from the vector constructs (64-bit lanes, shuffle2, "
                         "conversions, non-temporal stores)")


qualify.register("rng_vectors", "random: ulong8 Philox lanes, shuffle2, 16-wide rows",
                 lambda: _PROBE_TRUNCATE + _PROBE_SOURCE, _probe_vectors)


def _cache_bytes(device) -> int:
    """The global memory cache of a CPU OpenCL device, read once from the back-end's public
    PyOpenCL view."""
    key = (id(device.impl), device.index)
    size = _facts.get(key)
    if size is None:
        context, _ = device.impl.context_and_queue(device.index)
        size = _facts[key] = int(context.devices[0].global_mem_cache_size)
    return size


def _vectors(device) -> bool:
    """Whether the floating families run their vector kernels here: OpenCL on a CPU device
    that qualifies their shape."""
    impl = device.impl
    if impl.name != "opencl" or impl.launch_hint(device.index) != "cpu":
        return False
    return qualify.allows(device, "rng_vectors")


_STREAM_ALIGN = 64  # bytes: the widest row a vector kernel stores (16 float32, 8 float64)


def _stream_above(device) -> int:
    """Output bytes above which the vector kernels store past the cache: the device's global
    memory cache (an output that large would not stay in it anyway, and non-temporal stores
    skip reading each line before writing it: docs/random.md, "Speed")."""
    return _cache_bytes(device)


def _generate_floats(family: str, device, out: RawView, n: int, e: int, key, offset: int,
                     params: list) -> None:
    """The whole work-items of the vector kernel (where it runs), then the scalar kernel for
    the rest of the call's blocks, one block per work-item, stores checked against ``n``."""
    tag = _CTYPE[out.dtype.name][0]
    start = 0  # the call's first block left to the scalar kernel
    if _vectors(device):
        groups = _GROUPS[family]
        nwi = n // (groups * LANES * e)
        if nwi:
            stream = (out.ptr % _STREAM_ALIGN == 0
                      and n * out.dtype.itemsize > _stream_above(device))
            _launch(device, f"rng_{family}_{tag}_v{groups}",
                    [out.ptr, nwi, key[0], key[1], offset, int(stream), *params], nwi)
            start = nwi * groups * LANES
    left = -(-n // (e * LANES)) * LANES - start
    if left:
        _launch(device, f"rng_{family}_{tag}",
                [out.ptr, n, key[0], key[1], offset, start, *params], left)


def permutation_index(device, out: RawView, keys: RawView, idx: RawView, key: tuple[int, int],
                      offset: int) -> None:
    """``out`` (int64, n) = the order of the random keys, ties by index, by a bitonic sort.

    ``keys`` (uint64) and ``idx`` (uint32) are scratch of ``p`` elements, ``p``
    the power of two at or above ``n``.
    """
    n, p = out.shape[0], keys.shape[0]
    _launch(device, "rng_perm_init", [keys.ptr, idx.ptr, n, p, key[0], key[1], offset],
            -(-p // 2))
    local = local_size(device)
    seg = 2 * local  # elements a work-group sorts in local memory
    k, jmin = 2, 1  # steps k from here on; stages j >= jmin run as global launches
    if p >= seg and _SORT_IN_LOCAL[device.impl.launch_hint(device.index)]:  # the stages with j <= seg / 2 run in local memory, one launch per step
        _launch(device, f"rng_bitonic_local_{seg}", [keys.ptr, idx.ptr, 2, seg], p // 2, local)
        k, jmin = 2 * seg, seg
    while k <= p:
        j = k // 2
        while j >= jmin:
            _launch(device, "rng_bitonic", [keys.ptr, idx.ptr, j, k, p // 2], p // 2)
            j //= 2
        if jmin > 1:
            _launch(device, f"rng_bitonic_local_{seg}", [keys.ptr, idx.ptr, k, k], p // 2, local)
        k *= 2
    _launch(device, "rng_perm_index", [out.ptr, idx.ptr, n], n)


def write_reference(device, out: RawView) -> None:
    """Store ``float(i)`` into each element of the float32 ``out``, one per work-item.

    The one-item-per-work-item write whose bandwidth the random kernels are
    measured against (``gpuarrays bench``, group ``random``).
    """
    n = int(np.prod(out.shape))
    _launch(device, "bench_write_f32", [out.ptr, n], n)


def take_rows(device, dst: RawView, src: RawView, index: RawView, width: int) -> None:
    """``dst[r] = src[index[r]]``: ``dst`` contiguous rows, ``src`` rows ``src.strides[0]`` apart.

    ``width`` (bytes, 1/2/4/8) divides the row size, ``src``'s address and row stride.
    """
    rows = dst.shape[0]
    rowbytes = int(np.prod(dst.shape[1:], dtype=np.int64)) * dst.dtype.itemsize
    rowwords = rowbytes // width
    if rows == 0 or rowwords == 0:
        return
    kind = "u32" if index.dtype == np.uint32 else "i64"
    _launch(device, f"rng_take_u{width * 8}_{kind}",
            [dst.ptr, src.ptr, index.ptr, rows * rowwords, rowwords, src.strides[0] // width],
            rows * rowwords)
