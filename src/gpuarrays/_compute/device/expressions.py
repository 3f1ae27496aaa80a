"""The C expression of every elementwise operation, per dtype class, for both dialects.

Each entry of :data:`EXPRESSIONS` says what one work-item computes for one
element: a C expression over the operands ``x``, ``y``, ``z`` -- already
converted to the *compute type* of the kernel (docs/kernels.md, "Signatures")
-- and the type of its value.  The same text is valid OpenCL C and CUDA C: it
names types and functions through placeholders that a :class:`TypeNames`
fills per concrete dtype and dialect (``{T}`` the compute type, ``{W}`` the
unsigned type integer arithmetic wraps in, ``{exp}`` the dialect's ``exp`` for
that type ...), and anything longer than an expression is a helper function
(:data:`HELPERS`) written once over the same placeholders.

What C leaves undefined is guarded here, as NumPy defines it
(docs/kernels.md, "Semantics"): signed overflow wraps (arithmetic in the
unsigned type), integer division and remainder by zero give 0 and
``MIN // -1`` gives ``MIN``, ``floor_divide``/``remainder`` follow Python's
sign rules, shifts by the width or more (or by a negative count) give 0 or
-1, ``abs(MIN)`` is ``MIN``, ``round`` is ``rint`` (half to even),
``maximum``/``minimum`` propagate NaN, ``sign(NaN)`` is NaN.  float16 is
computed in float32 (its helpers are float32's), except ``nextafter``, which
steps in float16's own spacing.

Dtype classes are :data:`CLASSES`; :func:`dtype_class` maps a dtype to one.
Nothing here knows about devices, launches or the promotion rules: the
operations' table (``_compute/table.py``) says which dtypes an operation
accepts, and the launcher receives the compute dtypes already chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CLASSES",
    "Expr",
    "EXPRESSIONS",
    "HELPERS",
    "NIN",
    "TypeNames",
    "classes",
    "dtype_class",
    "expression",
    "result_key",
    "value_arg",
]

BOOL, SIGNED, UNSIGNED, REAL, COMPLEX = (
    "bool", "signed integer", "unsigned integer", "real floating", "complex floating")
CLASSES = (BOOL, SIGNED, UNSIGNED, REAL, COMPLEX)
"""The dtype classes an expression is written for (the array API's ``isdtype`` kinds)."""

_KIND_CLASS = {"b": BOOL, "i": SIGNED, "u": UNSIGNED, "f": REAL, "c": COMPLEX}


def dtype_class(dtype: np.dtype) -> str:
    """The class of a dtype (``"real floating"`` for float16/32/64 ...)."""
    return _KIND_CLASS[np.dtype(dtype).kind]


@dataclass(frozen=True)
class Expr:
    """What one element of an operation computes.

    ``c`` is the C expression over ``x``, ``y``, ``z`` with placeholders;
    ``result`` types its value: ``"same"`` (the compute type), ``"bool"``, or
    ``"real"`` (the real type of a complex compute type: ``abs``, ``real``,
    ``imag``); ``helpers`` are the :data:`HELPERS` it calls.
    """

    c: str
    result: str = "same"
    helpers: tuple[str, ...] = ()


# Per-dtype names ------------------------------------------------------------------------
_MATH = frozenset("""
acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh exp exp2 expm1 fabs floor fmax
fmod hypot ldexp log log1p log2 log10 nextafter pow rint sin sinh sqrt tan tanh trunc
""".split())

_INT_LIMITS = {
    "i1": ("(i8)-128", "8"), "i2": ("(i16)-32768", "16"),
    "i4": ("(i32)(-2147483647 - 1)", "32"), "i8": ("(i64)(-9223372036854775807LL - 1)", "64"),
    "u1": ("(u8)0", "8"), "u2": ("(u16)0", "16"), "u4": ("(u32)0", "32"), "u8": ("(u64)0", "64"),
}
_CTYPE = {
    "b1": "u8", "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64", "u1": "u8", "u2": "u16",
    "u4": "u32", "u8": "u64", "f2": "float", "f4": "float", "f8": "double", "c8": "c64",
    "c16": "c128",
}
_REAL_OF = {"c8": "f4", "c16": "f8"}


class TypeNames(dict):
    """The placeholders of the expressions and helpers for one compute dtype and dialect.

    ``key`` is the kernel key of the compute dtype (``"f4"``, ``"i8"``, ``"c16"``
    ...); ``suffix_math`` says whether the dialect names float32 math
    functions with an ``f`` suffix (CUDA's ``expf``) rather than overloading
    them (OpenCL's ``exp``).
    """

    def __init__(self, key: str, suffix_math: bool) -> None:
        super().__init__()
        self.key = key
        kind = key[0]
        real_key = _REAL_OF.get(key, key)
        real = _CTYPE[real_key] if kind in "fc" else _CTYPE[key]
        self.update(T=_CTYPE[key], R=real, K=key, C=_CTYPE.get(key if kind == "c" else "", ""))
        if kind in "iu":
            lo, bits = _INT_LIMITS[key]
            self.update(MIN=lo, BITS=bits, W="u64" if bits == "64" else "u32")
        self._float_suffix = "f" if (kind in "fc" and real == "float") else ""
        self["L"] = self._float_suffix  # literal suffix: 0.5{L}
        self._suffix_math = suffix_math

    def __missing__(self, name: str) -> str:
        if name in _MATH:
            return name + (self._float_suffix if self._suffix_math else "")
        raise KeyError(f"no placeholder {{{name}}} for compute type {self.key}")


def result_key(expr: Expr, compute_key: str) -> str:
    """The kernel key of an expression's value for a given compute dtype key."""
    if expr.result == "bool":
        return "b1"
    if expr.result == "real":
        return _REAL_OF.get(compute_key, compute_key)
    return compute_key


# Helpers: C functions over the placeholders, emitted once per (name, compute type) ------
def _complex_core(t: TypeNames) -> str:
    return """
DEV {C} c_make_{K}({R} re, {R} im) {{ {C} z; z.x = re; z.y = im; return z; }}
DEV {C} c_add_{K}({C} a, {C} b) {{ return c_make_{K}(a.x + b.x, a.y + b.y); }}
DEV {C} c_sub_{K}({C} a, {C} b) {{ return c_make_{K}(a.x - b.x, a.y - b.y); }}
DEV {C} c_mul_{K}({C} a, {C} b) {{
    return c_make_{K}(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}}
DEV {C} c_scale_{K}({C} a, {R} s) {{ return c_make_{K}(a.x * s, a.y * s); }}
/* Smith's algorithm, as NumPy divides. */
DEV {C} c_div_{K}({C} a, {C} b) {{
    {R} ar = {fabs}(b.x), ai = {fabs}(b.y);
    if (ar >= ai) {{
        if (ar == 0 && ai == 0) return c_make_{K}(a.x / ar, a.y / ar);
        {R} rat = b.y / b.x, scl = 1.0{L} / (b.x + b.y * rat);
        return c_make_{K}((a.x + a.y * rat) * scl, (a.y - a.x * rat) * scl);
    }}
    {R} rat = b.x / b.y, scl = 1.0{L} / (b.y + b.x * rat);
    return c_make_{K}((a.x * rat + a.y) * scl, (a.y * rat - a.x) * scl);
}}
/* NumPy's complex reciprocal (the formula of its loop, so the same values bit for bit). */
DEV {C} c_recip_{K}({C} a) {{
    if ({fabs}(a.y) <= {fabs}(a.x)) {{
        {R} r = a.y / a.x, d = a.x + a.y * r;
        return c_make_{K}(1 / d, -r / d);
    }}
    {R} r = a.x / a.y, d = a.x * r + a.y;
    return c_make_{K}(r / d, -1 / d);
}}
DEV {C} c_mul_i_{K}({C} a) {{ return c_make_{K}(-a.y, a.x); }}      /* i * a */
DEV {C} c_mul_mi_{K}({C} a) {{ return c_make_{K}(a.y, -a.x); }}     /* -i * a */
""".format_map(t)


def _complex_exp(t: TypeNames) -> str:
    return """
/* Special values (infinite or NaN parts) as the standard's lists, which are C99's. */
DEV {C} c_exp_{K}({C} z) {{
    if (z.y == 0) return c_make_{K}({exp}(z.x), z.y);
    if (isinf(z.x)) {{
        if (z.x < 0) return isfinite(z.y) ? c_make_{K}(0 * {cos}(z.y), 0 * {sin}(z.y))
                                          : c_make_{K}(0, 0);
        if (!isfinite(z.y)) return c_make_{K}(z.x, NAN);
    }} else if (!isfinite(z.x) || !isfinite(z.y)) {{
        return c_make_{K}(NAN, NAN);
    }}
    {R} e = {exp}(z.x);
    return c_make_{K}(e * {cos}(z.y), e * {sin}(z.y));
}}
DEV {C} c_log_{K}({C} z) {{ return c_make_{K}({log}({hypot}(z.x, z.y)), {atan2}(z.y, z.x)); }}
/* The principal square root without overflow in the intermediate modulus. */
DEV {C} c_sqrt_{K}({C} z) {{
    if (z.x == 0 && z.y == 0) return c_make_{K}(0, z.y);
    if (isinf(z.y)) return c_make_{K}(INFINITY, z.y);
    if (isnan(z.x)) return c_make_{K}(z.x, z.x);
    if (isinf(z.x)) {{
        if (z.x > 0) return c_make_{K}(z.x, isnan(z.y) ? z.y : {copysign}(({R})0, z.y));
        return c_make_{K}(isnan(z.y) ? z.y : 0, {copysign}(({R})INFINITY, z.y));
    }}
    {R} t = {sqrt}(({fabs}(z.x) + {hypot}(z.x, z.y)) * 0.5{L});
    if (z.x >= 0) return c_make_{K}(t, z.y / (2 * t));
    return c_make_{K}({fabs}(z.y) / (2 * t), {copysign}(t, z.y));
}}
DEV {C} c_expm1_{K}({C} z) {{
    if (isinf(z.x)) {{
        if (z.x < 0) return c_make_{K}(-1, isfinite(z.y) ? {copysign}(({R})0, {sin}(z.y)) : 0);
        if (z.y == 0) return z;
        return isfinite(z.y) ? c_make_{K}(z.x * {cos}(z.y), z.x * {sin}(z.y))
                             : c_make_{K}(z.x, NAN);
    }}
    if (isnan(z.x)) return c_make_{K}(z.x, z.y == 0 ? z.y : NAN);
    if (!isfinite(z.y)) return c_make_{K}(NAN, NAN);
    if (z.x == 0 && z.y == 0) return c_make_{K}(0, z.y);
    {R} h = {sin}(z.y * 0.5{L});
    return c_make_{K}({expm1}(z.x) * {cos}(z.y) - 2 * h * h, {exp}(z.x) * {sin}(z.y));
}}
DEV {C} c_log1p_{K}({C} z) {{
    {R} re = z.x + 1;
    return c_make_{K}({log}({hypot}(re, z.y)), {atan2}(z.y, re));
}}
""".format_map(t)


def _complex_trig(t: TypeNames) -> str:
    return """
/* Infinite and NaN parts give the standard's special values (C99's); sin, cos, tan,
   asin, acos and atan inherit them through the identities below. */
DEV {C} c_sinh_{K}({C} z) {{
    if (z.y == 0) return c_make_{K}({sinh}(z.x), z.y);  /* also when sinh overflows */
    if (isfinite(z.x) && isfinite(z.y))
        return c_make_{K}({sinh}(z.x) * {cos}(z.y), {cosh}(z.x) * {sin}(z.y));
    if (isinf(z.x)) {{
        if (z.y == 0) return z;
        return isfinite(z.y) ? c_make_{K}(z.x * {cos}(z.y), INFINITY * {sin}(z.y))
                             : c_make_{K}(z.x, NAN);
    }}
    if (z.y == 0) return c_make_{K}(NAN, z.y);
    if (z.x == 0) return c_make_{K}(z.x, NAN);
    return c_make_{K}(NAN, NAN);
}}
DEV {C} c_cosh_{K}({C} z) {{
    if (z.y == 0) return c_make_{K}({cosh}(z.x), {copysign}(({R})0, z.x) * z.y);
    if (isfinite(z.x) && isfinite(z.y))
        return c_make_{K}({cosh}(z.x) * {cos}(z.y), {sinh}(z.x) * {sin}(z.y));
    if (isinf(z.x)) {{
        if (z.y == 0) return c_make_{K}(INFINITY, {copysign}(({R})0, z.x) * z.y);
        return isfinite(z.y) ? c_make_{K}(INFINITY * {cos}(z.y), z.x * {sin}(z.y))
                             : c_make_{K}(INFINITY, NAN);
    }}
    if (z.y == 0) return c_make_{K}(NAN, z.y);
    if (z.x == 0) return c_make_{K}(NAN, 0);
    return c_make_{K}(NAN, NAN);
}}
/* Kahan's formula; far from the imaginary axis tanh is +-1 (and a tiny imaginary part). */
DEV {C} c_tanh_{K}({C} z) {{
    if (isinf(z.x)) return c_make_{K}({copysign}(({R})1, z.x), {copysign}(({R})0, z.y));
    if (isnan(z.x)) return c_make_{K}(z.x, z.y == 0 ? z.y : NAN);
    if (!isfinite(z.y)) return c_make_{K}(z.x == 0 ? z.x : NAN, NAN);
    if ({fabs}(z.x) > TANH_BIG_{K}) {{
        {R} e = {exp}(-2 * {fabs}(z.x));
        return c_make_{K}({copysign}(({R})1, z.x), 4 * {sin}(z.y) * {cos}(z.y) * e);
    }}
    {R} tn = {tan}(z.y), beta = 1 + tn * tn, s = {sinh}(z.x), rho = {sqrt}(1 + s * s);
    {R} den = 1 + beta * s * s;
    return c_make_{K}(beta * rho * s / den, tn / den);
}}
DEV {C} c_sin_{K}({C} z) {{ return c_mul_mi_{K}(c_sinh_{K}(c_mul_i_{K}(z))); }}
DEV {C} c_cos_{K}({C} z) {{ return c_cosh_{K}(c_mul_i_{K}(z)); }}
DEV {C} c_tan_{K}({C} z) {{ return c_mul_mi_{K}(c_tanh_{K}(c_mul_i_{K}(z))); }}
/* asinh(z) = log(z + sqrt(z*z + 1)), evaluated where it does not cancel (odd function).
   Adding 1 touches the real part only, so a zero imaginary part keeps its sign (the side of
   the branch cut).  Infinite and NaN parts: the standard's (C99's) values, computed for
   |x| + i|y| and signed back (odd and conjugate-symmetric). */
DEV {C} c_asinh_{K}({C} z) {{
    if (!isfinite(z.x) || !isfinite(z.y)) {{
        {R} ax = {fabs}(z.x), ay = {fabs}(z.y), re, im;
        if (isinf(ay)) {{ re = INFINITY; im = isnan(ax) ? NAN : (isinf(ax) ? ({R})0.785398163397448309616 : ({R})1.57079632679489661923); }}
        else if (isinf(ax)) {{ re = INFINITY; im = isnan(ay) ? NAN : 0; }}
        else if (isnan(ax)) {{ re = NAN; im = ay == 0 ? ay : NAN; }}
        else {{ re = NAN; im = NAN; }}
        return c_make_{K}({copysign}(re, z.x), {copysign}(im, z.y));
    }}
    int neg = z.x < 0 || (z.x == 0 && signbit(z.x));
    {C} w = neg ? c_make_{K}(-z.x, -z.y) : z;
    {C} r;
    if ({fmax}(w.x, {fabs}(w.y)) > ({R})(sizeof({R}) == 4 ? 4096.0 : 67108864.0)) {{
        /* |z| beyond 1/sqrt(eps): sqrt(z*z + 1) is z, and z*z could overflow */
        r = c_log_{K}(w);
        r.x += ({R})0.693147180559945309417232121458176568;
    }} else {{
        {C} w2 = c_mul_{K}(w, w);
        r = c_log_{K}(c_add_{K}(w, c_sqrt_{K}(c_make_{K}(w2.x + 1, w2.y))));
    }}
    return neg ? c_make_{K}(-r.x, -r.y) : r;
}}
DEV {C} c_asin_{K}({C} z) {{ return c_mul_mi_{K}(c_asinh_{K}(c_mul_i_{K}(z))); }}
DEV {C} c_acos_{K}({C} z) {{
    {C} a = c_asin_{K}(z);
    return c_make_{K}(({R})1.57079632679489661923 - a.x, -a.y);
}}
/* acosh(z) = log(z + sqrt(z + 1) * sqrt(z - 1)) */
DEV {C} c_acosh_{K}({C} z) {{
    if (!isfinite(z.x) || !isfinite(z.y)) {{  /* C99's values; conjugate-symmetric */
        {R} ay = {fabs}(z.y), re, im;
        if (isinf(ay)) {{
            re = INFINITY;
            im = isnan(z.x) ? NAN : (isinf(z.x) ? (z.x > 0 ? ({R})0.785398163397448309616
                                                          : ({R})2.35619449019234492885)
                                                : ({R})1.57079632679489661923);
        }} else if (isinf(z.x)) {{
            re = INFINITY;
            im = isnan(ay) ? NAN : (z.x > 0 ? 0 : ({R})3.14159265358979323846);
        }} else if (z.x == 0) {{ re = NAN; im = ({R})1.57079632679489661923; }}
        else {{ re = NAN; im = NAN; }}
        return c_make_{K}(re, isnan(im) ? im : {copysign}(im, z.y));
    }}
    {C} s = c_mul_{K}(c_sqrt_{K}(c_make_{K}(z.x + 1, z.y)),
                      c_sqrt_{K}(c_make_{K}(z.x - 1, z.y)));
    return c_log_{K}(c_add_{K}(z, s));
}}
/* atanh(z) = (log1p(z) - log1p(-z)) / 2; infinite and NaN parts as C99 (odd and
   conjugate-symmetric: computed for |x| + i|y| and signed back) */
DEV {C} c_atanh_{K}({C} z) {{
    if (!isfinite(z.x) || !isfinite(z.y)) {{
        {R} ax = {fabs}(z.x), ay = {fabs}(z.y), re, im;
        if (isinf(ay)) {{ re = 0; im = ({R})1.57079632679489661923; }}
        else if (isinf(ax)) {{ re = 0; im = isnan(ay) ? NAN : ({R})1.57079632679489661923; }}
        else if (isnan(ax)) {{ re = NAN; im = NAN; }}
        else {{ re = ax == 0 ? ax : NAN; im = NAN; }}
        return c_make_{K}({copysign}(re, z.x), {copysign}(im, z.y));
    }}
    {C} r = c_sub_{K}(c_log1p_{K}(z), c_log1p_{K}(c_make_{K}(-z.x, -z.y)));
    return c_scale_{K}(r, 0.5{L});
}}
DEV {C} c_atan_{K}({C} z) {{ return c_mul_mi_{K}(c_atanh_{K}(c_mul_i_{K}(z))); }}
""".format_map(t)


def _complex_misc(t: TypeNames) -> str:
    return """
/* a ** n for an integer n, |n| < 100: NumPy's npy_cpow, the same multiplies in the same
   order (so the same values bit for bit), and 1 / a ** |n| for n < 0. */
DEV {C} c_powi_{K}({C} a, int n) {{
    if (n == 0) return c_make_{K}(1, 0);
    if (a.x == 0 && a.y == 0) return n > 0 ? c_make_{K}(0, 0) : c_make_{K}(NAN, NAN);
    if (n == 1) return a;
    if (n == 2) return c_mul_{K}(a, a);
    if (n == 3) return c_mul_{K}(a, c_mul_{K}(a, a));
    int m = n < 0 ? -n : n, mask = 1;
    {C} r = c_make_{K}(1, 0), p = a;
    for (;;) {{
        if (m & mask) r = c_mul_{K}(r, p);
        mask <<= 1;
        if (m < mask) break;
        p = c_mul_{K}(p, p);
    }}
    return n < 0 ? c_div_{K}(c_make_{K}(1, 0), r) : r;
}}
/* NumPy's npy_cpow: 1 for a zero exponent, 0 (or NaN when Re b <= 0) for a zero base,
   multiplies for small integer exponents, exp(b log a) otherwise. */
DEV {C} c_pow_{K}({C} a, {C} b) {{
    if (b.x == 0 && b.y == 0) return c_make_{K}(1, 0);
    if (a.x == 0 && a.y == 0) return b.x > 0 ? c_make_{K}(0, 0) : c_make_{K}(NAN, NAN);
    if (b.y == 0 && b.x > -100 && b.x < 100 && b.x == ({R})(int)b.x) return c_powi_{K}(a, (int)b.x);
    return c_exp_{K}(c_mul_{K}(b, c_log_{K}(a)));
}}
/* NumPy 2: z / |z|; 0 at 0; NaN if a part is NaN; infinite parts count as +-1. */
DEV {C} c_sign_{K}({C} z) {{
    if (isnan(z.x) || isnan(z.y)) return c_make_{K}(NAN, NAN);
    if (isinf(z.x) || isinf(z.y)) {{
        z = c_make_{K}(isinf(z.x) ? {copysign}(({R})1, z.x) : 0, isinf(z.y) ? {copysign}(({R})1, z.y) : 0);
    }}
    {R} a = {hypot}(z.x, z.y);
    if (a == 0) return c_make_{K}(0, 0);
    return c_make_{K}(z.x / a, z.y / a);
}}
""".format_map(t)


def _int_helpers(t: TypeNames) -> str:
    """Python-sign division and remainder, and powers, wrapping like NumPy."""
    signed = t.key[0] == "i"
    if signed:
        div = """
DEV {T} floordiv_{K}({T} a, {T} b) {{
    if (b == 0) return 0;
    if (b == -1) return ({T})(0 - ({W})a);        /* MIN // -1 wraps to MIN */
    {T} q = ({T})(a / b);
    if ((a % b != 0) && ((a < 0) != (b < 0))) q = ({T})(q - 1);
    return q;
}}
DEV {T} mod_{K}({T} a, {T} b) {{
    if (b == 0 || b == -1) return 0;
    {T} r = ({T})(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = ({T})(r + b);
    return r;
}}
"""
    else:
        div = """
DEV {T} floordiv_{K}({T} a, {T} b) {{ return b == 0 ? ({T})0 : ({T})(a / b); }}
DEV {T} mod_{K}({T} a, {T} b) {{ return b == 0 ? ({T})0 : ({T})(a % b); }}
"""
    neg = """
    if (e < 0) return a == 1 ? ({T})1 : (a == -1 ? ((e & 1) ? a : ({T})1) : ({T})0);""" if signed else ""
    pw = """
/* Integer powers by squaring, wrapping; a negative exponent (an error in NumPy,
   which the device cannot raise) gives 1 / a truncated: 0 except for a = +-1. */
DEV {T} ipow_{K}({T} a, {T} e) {{""" + neg + """
    {W} r = 1, b = ({W})a;
    u64 k = (u64)e;
    while (k) {{ if (k & 1) r *= b; b *= b; k >>= 1; }}
    return ({T})r;
}}
"""
    return (div + pw).format_map(t)


def _float_helpers(t: TypeNames) -> str:
    """NumPy's npy_divmod (Python's sign rules), logaddexp, NaN-propagating extrema, sign."""
    return """
DEV {T} floordiv_{K}({T} a, {T} b) {{
    /* NumPy's npy_divmod, written with selects rather than branches (a device vectorises
       it).  The standard: an infinite operand against a finite one gives the quotient's
       signed infinity or zero (Python and NumPy give NaN for inf // 2 and -1 for
       1 // -inf); so does a zero divisor. */
    {T} q = a / b;
    {T} mod = fmod_{K}(a, b);
    {T} div = (a - mod) / b;
    div = (mod != 0 && (b < 0) != (mod < 0)) ? div - 1 : div;
    {T} fl = {floor}(div);
    fl = div - fl > 0.5{L} ? fl + 1 : fl;
    fl = div != 0 ? fl : {copysign}(({T})0, q);
    return (b == 0 || !isinf(a) != !isinf(b)) ? q : fl;
}}
DEV {T} mod_{K}({T} a, {T} b) {{
    {T} mod = fmod_{K}(a, b);  /* NaN for b == 0 */
    {T} m = (mod != 0 && (b < 0) != (mod < 0)) ? mod + b : mod;
    return (mod == 0 && b != 0) ? {copysign}(({T})0, b) : m;
}}
DEV {T} logaddexp_{K}({T} a, {T} b) {{
    if (a == b) return a + ({T})0.693147180559945309417232121458176568;  /* also +-inf */
    {T} d = a - b;
    if (d > 0) return a + {log1p}({exp}(-d));
    if (d <= 0) return b + {log1p}({exp}(d));
    return d;  /* NaN */
}}
DEV {T} sign_{K}({T} a) {{ return isnan(a) ? a : (a > 0 ? ({T})1 : (a < 0 ? ({T})-1 : ({T})0)); }}
""".format_map(t)


def _fmod_helper(t: TypeNames) -> str:
    """C's fmod, exactly.  For float operands on an OpenCL device with doubles, through
    double arithmetic where that is exact: the builtin is a bit-by-bit loop (PoCL: 23 ms
    per 2 M float32 pairs, against 2 ms this way).

    Why it is exact: for float operands with ``|a / b| < 2**28`` and finite ``b``, the
    correctly rounded double quotient never crosses an integer the true quotient does not
    reach (a non-integer quotient is at least ``2**-52`` of it away from every integer),
    so its truncation ``q`` is the true one; ``q * b`` takes at most 28 + 24 bits, and
    ``a - q * b`` (C's remainder, smaller than ``|b|``) is a float.  The other operands
    (a zero, infinite or NaN ``b``, an infinite or NaN ``a``, larger quotients) call the
    builtin."""
    if t["T"] != "float":
        return "\nDEV {T} fmod_{K}({T} a, {T} b) {{ return {fmod}(a, b); }}\n".format_map(t)
    return """
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
DEV float fmod_{K}(float a, float b) {{
#ifdef cl_khr_fp64
    double q = (double)a / (double)b;
    if (fabs(q) < 268435456.0 && fabs((double)b) < INFINITY) {{
        double r = (double)a - (double)(int)q * (double)b;
        return r == 0 ? copysign(0.0f, a) : (float)r;
    }}
#endif
    return {fmod}(a, b);
}}
""".format_map(t)


def _pow_helpers(t: TypeNames) -> str:
    """The real rows that stand in for pow with a scalar exponent (table.POWERS)."""
    return """
/* pow(x, 0.5): sqrt, but +0 at -0 and +inf at -inf, as pow (and the standard) give. */
DEV {T} psqrt_{K}({T} x) {{
    return x == 0 ? ({T})0 : (x == -INFINITY ? ({T})INFINITY : {sqrt}(x));
}}
/* x ** n for a small integer n (|n| < 8; table.SMALL_POWERS) by multiplies: binary powering
   of x, or of 1 / x for n < 0 (x ** |n| may overflow where x ** n does not).  The products
   start from an exact 1 * b, so n = 0 gives 1 (even for NaN) and n = 1, -1, 2 pow's exact
   values; others round |n| - 1 times (twice that for n < 0). */
DEV {T} powi_{K}({T} x, int n) {{
    int m = n < 0 ? -n : n;
    {T} b = n < 0 ? ({T})1 / x : x;
    {T} r = (m & 1) ? b : ({T})1;
    b = b * b;
    r = (m & 2) ? r * b : r;
    b = b * b;
    r = (m & 4) ? r * b : r;
    return r;
}}
""".format_map(t)


def _nextafter(t: TypeNames) -> str:
    if t.key != "f2":
        return "DEV {T} nextafter_{K}({T} a, {T} b) {{ return {nextafter}(a, b); }}\n".format_map(t)
    # float16: one step of float16's spacing (float32's nextafter would round back).
    return """
DEV float nextafter_f2(float a, float b) {
    if (isnan(a) || isnan(b)) return a + b;
    if (a == b) return b;
    u16 h = float_to_half(a);
    if (a == 0) h = (u16)((b < 0 ? 0x8000u : 0u) | 1u);
    else if ((a < b) == (a > 0)) h = (u16)(h + 1);
    else h = (u16)(h - 1);
    return half_to_float(h);
}
"""


def _numpy_int_helpers(t: TypeNames) -> str:
    """NumPy's integer ufuncs beyond the standard: fmod (C's sign rule: the dividend's),
    gcd and lcm (of the magnitudes, in the unsigned type, as NumPy's npy_gcdu/npy_lcmu),
    and bitwise_count (the 1-bits of the magnitude)."""
    signed = t.key[0] == "i"
    mag = "(a < 0 ? ({W})0 - ({W})a : ({W})a)" if signed else "({W})a"
    src = """
DEV {T} fmod_{K}({T} a, {T} b) {{
    /* NumPy: 0 (and MIN % -1 is 0) */
    if (b == 0""" + (" || b == -1" if signed else "") + """) return 0;
    return ({T})(a % b);
}}
DEV {W} gcdu_{K}({W} x, {W} y) {{
    while (x != 0) {{ {W} c = x; x = y % x; y = c; }}
    return y;
}}
DEV {T} gcd_{K}({T} a, {T} b) {{ return ({T})gcdu_{K}(MAG(a), MAG(b)); }}
DEV {T} lcm_{K}({T} a, {T} b) {{
    {W} x = MAG(a), y = MAG(b), g = gcdu_{K}(x, y);
    return g == 0 ? ({T})0 : ({T})(x / g * y);
}}
DEV u8 popcount_{K}({T} a) {{
    u64 v = (u64)MAG(a);
    v = v - ((v >> 1) & (u64)0x5555555555555555LL);
    v = (v & (u64)0x3333333333333333LL) + ((v >> 2) & (u64)0x3333333333333333LL);
    v = (v + (v >> 4)) & (u64)0x0F0F0F0F0F0F0F0FLL;
    return (u8)((v * (u64)0x0101010101010101LL) >> 56);
}}
"""
    return src.replace("MAG(a)", mag).replace("MAG(b)", mag.replace("a", "b")).format_map(t)


_LOG2E = "1.442695040888963407359924681001892137"


def _numpy_float_helpers(t: TypeNames) -> str:
    """NumPy's real ufuncs beyond the standard that need more than an expression."""
    # fmax/fmin of equal operands (+0 and -0): NumPy's float32/float64 vector loops give x2
    # (its scalar loop, for arrays shorter than a vector, gives x1); float16 has only the
    # scalar loop, x1.  y != y: isnan(y) exactly, without pip's PoCL 3.0's function call
    tie = "x >= y" if t.key == "f2" else "x > y"
    return f"""
DEV {{T}} fmax_{{K}}({{T}} x, {{T}} y) {{{{ return ({tie} || y != y) ? x : y; }}}}
DEV {{T}} fmin_{{K}}({{T}} x, {{T}} y) {{{{ return ({tie.replace(">", "<")} || y != y) ? x : y; }}}}
""".format_map(t) + """
/* npy_logaddexp2 */
DEV {T} logaddexp2_{K}({T} a, {T} b) {{
    if (a == b) return a + 1;  /* also +-inf */
    {T} d = a - b;
    if (d > 0) return a + {log1p}({exp2}(-d)) * ({T})LOG2E;
    if (d <= 0) return b + {log1p}({exp2}(d)) * ({T})LOG2E;
    return d;  /* NaN */
}}
/* npy_heaviside: NaN stays, 0 gives h0 */
DEV {T} heaviside_{K}({T} x, {T} h0) {{
    if (isnan(x)) return x;
    if (x == 0) return h0;
    return x < 0 ? ({T})0 : ({T})1;
}}
/* ldexp with an exponent of any integer width: beyond +-100000 every result is the
   same (0 or +-inf), so it is clamped to an int first, as NumPy's long loops do */
DEV {T} ldexp_{K}({T} x, i64 e) {{
    return {ldexp}(x, (int)(e > 100000 ? 100000 : (e < -100000 ? -100000 : e)));
}}
""".replace("LOG2E", _LOG2E).format_map(t)


def _numpy_complex_helpers(t: TypeNames) -> str:
    """fmax/fmin of complex values as NumPy: ordered by real part, then imaginary part; a
    NaN part in x2 gives x1, else one in x1 gives x2 (NumPy's CGE/CLE)."""
    return """
DEV {C} c_fmax_{K}({C} a, {C} b) {{
    if (isnan(b.x) || isnan(b.y)) return a;
    int ge = (a.x > b.x && !isnan(a.y)) || (a.x == b.x && a.y >= b.y);
    return ge ? a : b;
}}
DEV {C} c_fmin_{K}({C} a, {C} b) {{
    if (isnan(b.x) || isnan(b.y)) return a;
    int le = (a.x < b.x && !isnan(a.y)) || (a.x == b.x && a.y <= b.y);
    return le ? a : b;
}}
""".format_map(t)


@dataclass(frozen=True)
class Helper:
    """A group of helper functions for one compute type, and the groups it calls."""

    source: Callable[[TypeNames], str]
    needs: tuple[str, ...] = ()
    kinds: str = "fc"  # key kinds it is written for


HELPERS: dict[str, Helper] = {
    "complex": Helper(_complex_core, kinds="c"),
    "cexp": Helper(_complex_exp, ("complex",), kinds="c"),
    "ctrig": Helper(_complex_trig, ("complex", "cexp"), kinds="c"),
    "cmisc": Helper(_complex_misc, ("complex", "cexp"), kinds="c"),
    "int": Helper(_int_helpers, kinds="iu"),
    "fmod": Helper(_fmod_helper, kinds="f"),
    "float": Helper(_float_helpers, ("fmod",), kinds="f"),
    "nextafter": Helper(_nextafter, kinds="f"),
    "pow": Helper(_pow_helpers, kinds="f"),
    "npint": Helper(_numpy_int_helpers, kinds="iu"),
    "npfloat": Helper(_numpy_float_helpers, kinds="f"),
    "npcomplex": Helper(_numpy_complex_helpers, kinds="c"),
}
"""Helper groups by name; an :class:`Expr` lists the groups it calls."""


# The expressions ---------------------------------------------------------------------------
def _wrap(op: str) -> str:
    """Integer arithmetic in the unsigned type ``W``: wraps as NumPy does, never overflows."""
    return f"({{T}})(({{W}})x {op} ({{W}})y)"


_INTS = (SIGNED, UNSIGNED)


def _same(expr: Expr, *classes_: str) -> dict[str, Expr]:
    return dict.fromkeys(classes_, expr)


def _unary_float(name: str) -> dict[str, Expr]:
    """A real math function, and its complex form ``c_<name>``."""
    group = "ctrig" if name in ("sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos",
                                "atan", "asinh", "acosh", "atanh") else "cexp"
    return {REAL: Expr(f"{{{name}}}(x)"),
            COMPLEX: Expr(f"c_{name}_{{K}}(x)", helpers=(group,))}


def _compare(op: str, complex_too: bool = False, bool_too: bool = False) -> dict[str, Expr]:
    e = Expr(f"(x {op} y)", "bool")
    out = _same(e, *_INTS, REAL)
    if bool_too:
        out[BOOL] = e
    if complex_too:
        join = "&&" if op == "==" else "||"
        out[COMPLEX] = Expr(f"((x.x {op} y.x) {join} (x.y {op} y.y))", "bool")
    return out


_LN2, _LN10 = "0.693147180559945309417232121458176568", "2.30258509299404568401799145468436421"

EXPRESSIONS: dict[str, dict[str, Expr]] = {
    # arithmetic
    "add": {**_same(Expr(_wrap("+")), *_INTS), REAL: Expr("x + y"),
            COMPLEX: Expr("c_add_{K}(x, y)", helpers=("complex",))},
    "subtract": {**_same(Expr(_wrap("-")), *_INTS), REAL: Expr("x - y"),
                 COMPLEX: Expr("c_sub_{K}(x, y)", helpers=("complex",))},
    "multiply": {**_same(Expr(_wrap("*")), *_INTS), REAL: Expr("x * y"),
                 COMPLEX: Expr("c_mul_{K}(x, y)", helpers=("complex",))},
    "divide": {REAL: Expr("x / y"), COMPLEX: Expr("c_div_{K}(x, y)", helpers=("complex",))},
    "floor_divide": {**_same(Expr("floordiv_{K}(x, y)", helpers=("int",)), *_INTS),
                     REAL: Expr("floordiv_{K}(x, y)", helpers=("float",))},
    "remainder": {**_same(Expr("mod_{K}(x, y)", helpers=("int",)), *_INTS),
                  REAL: Expr("mod_{K}(x, y)", helpers=("float",))},
    "pow": {**_same(Expr("ipow_{K}(x, y)", helpers=("int",)), *_INTS), REAL: Expr("{pow}(x, y)"),
            COMPLEX: Expr("c_pow_{K}(x, y)", helpers=("cmisc",))},
    "negative": {**_same(Expr("({T})(0 - ({W})x)"), *_INTS), REAL: Expr("-x"),
                 COMPLEX: Expr("c_make_{K}(-x.x, -x.y)", helpers=("complex",))},
    "positive": _same(Expr("x"), *_INTS, REAL, COMPLEX),
    "square": {**_same(Expr("({T})(({W})x * ({W})x)"), *_INTS), REAL: Expr("x * x"),
               COMPLEX: Expr("c_mul_{K}(x, x)", helpers=("complex",))},
    "reciprocal": {REAL: Expr("1 / x"), COMPLEX: Expr("c_recip_{K}(x)", helpers=("complex",))},
    "abs": {SIGNED: Expr("(x < 0 ? ({T})(0 - ({W})x) : x)"), UNSIGNED: Expr("x"),
            REAL: Expr("{fabs}(x)"), COMPLEX: Expr("{hypot}(x.x, x.y)", "real")},
    "sign": {SIGNED: Expr("({T})((x > 0) - (x < 0))"), UNSIGNED: Expr("({T})(x > 0)"),
             REAL: Expr("sign_{K}(x)", helpers=("float",)),
             COMPLEX: Expr("c_sign_{K}(x)", helpers=("cmisc",))},
    "conj": {**_same(Expr("x"), *_INTS, REAL),
             COMPLEX: Expr("c_make_{K}(x.x, -x.y)", helpers=("complex",))},
    "real": {**_same(Expr("x"), *_INTS, REAL), COMPLEX: Expr("x.x", "real")},
    "imag": {COMPLEX: Expr("x.y", "real")},
    # rounding
    "round": {**_same(Expr("x"), *_INTS), REAL: Expr("{rint}(x)"),
              COMPLEX: Expr("c_make_{K}({rint}(x.x), {rint}(x.y))", helpers=("complex",))},
    "ceil": {**_same(Expr("x"), *_INTS), REAL: Expr("{ceil}(x)")},
    "floor": {**_same(Expr("x"), *_INTS), REAL: Expr("{floor}(x)")},
    "trunc": {**_same(Expr("x"), *_INTS), REAL: Expr("{trunc}(x)")},
    # transcendental
    **{name: _unary_float(name) for name in (
        "exp", "expm1", "log", "log1p", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh",
        "asin", "acos", "atan", "asinh", "acosh", "atanh")},
    "log2": {REAL: Expr("{log2}(x)"),
             COMPLEX: Expr(f"c_scale_{{K}}(c_log_{{K}}(x), ({{R}})1 / ({{R}}){_LN2})",
                           helpers=("cexp",))},
    "log10": {REAL: Expr("{log10}(x)"),
              COMPLEX: Expr(f"c_scale_{{K}}(c_log_{{K}}(x), ({{R}})1 / ({{R}}){_LN10})",
                            helpers=("cexp",))},
    "atan2": {REAL: Expr("{atan2}(x, y)")},
    "hypot": {REAL: Expr("{hypot}(x, y)")},
    "copysign": {REAL: Expr("{copysign}(x, y)")},
    "nextafter": {REAL: Expr("nextafter_{K}(x, y)", helpers=("nextafter",))},
    "logaddexp": {REAL: Expr("logaddexp_{K}(x, y)", helpers=("float",))},
    "signbit": {REAL: Expr("(signbit(x) != 0)", "bool")},
    # extrema: NumPy's (x > y || isnan(x)) ? x : y, so NaN wins and ties give y; x != x is
    # isnan(x) exactly (IEEE comparisons, no fast-math), one vector compare where pip's
    # PoCL 3.0 calls a function for isnan (maximum 2.5x a bare fmax kernel there)
    "maximum": {**_same(Expr("(x > y ? x : y)"), *_INTS),
                REAL: Expr("((x > y || x != x) ? x : y)")},
    "minimum": {**_same(Expr("(x < y ? x : y)"), *_INTS),
                REAL: Expr("((x < y || x != x) ? x : y)")},
    "clip": {**_same(Expr("(((x > y ? x : y) < z) ? (x > y ? x : y) : z)"), *_INTS),
             REAL: Expr("clip_{K}(x, y, z)", helpers=("clip",))},
    # comparisons
    "equal": _compare("==", complex_too=True, bool_too=True),
    "not_equal": _compare("!=", complex_too=True, bool_too=True),
    "less": _compare("<"),
    "less_equal": _compare("<="),
    "greater": _compare(">"),
    "greater_equal": _compare(">="),
    # classification
    # reals by IEEE comparisons, exactly the builtins (no fast-math; x - x is 0 for every
    # finite x, NaN for infinities and NaN), vector compares where pip's PoCL 3.0 calls a
    # function for isnan/isinf/isfinite (2-3 ms per 2 M float32 there, NumPy 0.25-0.95)
    "isnan": {**_same(Expr("0", "bool"), *_INTS), REAL: Expr("(x != x)", "bool"),
              COMPLEX: Expr("(isnan(x.x) || isnan(x.y))", "bool")},
    "isinf": {**_same(Expr("0", "bool"), *_INTS), REAL: Expr("(x == x && x - x != x - x)", "bool"),
              COMPLEX: Expr("(isinf(x.x) || isinf(x.y))", "bool")},
    "isfinite": {**_same(Expr("1", "bool"), *_INTS), REAL: Expr("(x - x == x - x)", "bool"),
                 COMPLEX: Expr("(isfinite(x.x) && isfinite(x.y))", "bool")},
    # bitwise (bool operands are 0 or 1)
    "bitwise_and": _same(Expr("({T})(x & y)"), BOOL, *_INTS),
    "bitwise_or": _same(Expr("({T})(x | y)"), BOOL, *_INTS),
    "bitwise_xor": _same(Expr("({T})(x ^ y)"), BOOL, *_INTS),
    "bitwise_invert": {BOOL: Expr("({T})!x"), **_same(Expr("({T})~x"), *_INTS)},
    # shifts by a negative count or by the width or more: 0 (and -1 for negative >>)
    "bitwise_left_shift": _same(Expr("(((u64)y < {BITS}) ? ({T})(({W})x << y) : ({T})0)"),
                                *_INTS),
    "bitwise_right_shift": {
        SIGNED: Expr("(((u64)y < {BITS}) ? ({T})(x >> y) : (x < 0 ? ({T})-1 : ({T})0))"),
        UNSIGNED: Expr("(((u64)y < {BITS}) ? ({T})(x >> y) : ({T})0)")},
    # logical (bool operands)
    "logical_and": {BOOL: Expr("(x && y)", "bool")},
    "logical_or": {BOOL: Expr("(x || y)", "bool")},
    "logical_xor": {BOOL: Expr("(x != y)", "bool")},
    "logical_not": {BOOL: Expr("(!x)", "bool")},
    # selection: x and y share the compute type, the condition is bool
    "where": _same(Expr("(x ? y : z)"), BOOL, *_INTS, REAL, COMPLEX),
    # pow with a scalar exponent (table.POWERS): x ** 0.5, x ** -0.5, x ** n (n small)
    "pow_sqrt": {REAL: Expr("psqrt_{K}(x)", helpers=("pow",)),
                 COMPLEX: Expr("c_sqrt_{K}(x)", helpers=("cexp",))},
    "pow_rsqrt": {REAL: Expr("({T})1 / psqrt_{K}(x)", helpers=("pow",))},
    "pow_int": {REAL: Expr("powi_{K}(x, (int)y)", helpers=("pow",))},
    # NumPy's ufuncs beyond the standard (table.NUMPY_ONLY); float16 computes in float32
    "cbrt": {REAL: Expr("{cbrt}(x)")},
    "exp2": {REAL: Expr("{exp2}(x)"),  # complex: NumPy's nc_exp2, exp(z * ln 2)
             COMPLEX: Expr(f"c_exp_{{K}}(c_scale_{{K}}(x, ({{R}}){_LN2}))", helpers=("cexp",))},
    "fabs": {REAL: Expr("{fabs}(x)")},
    "deg2rad": {REAL: Expr("x * (3.14159265358979323846264338327950288{L} / 180.0{L})")},
    "radians": {REAL: Expr("x * (3.14159265358979323846264338327950288{L} / 180.0{L})")},
    "rad2deg": {REAL: Expr("x * (180.0{L} / 3.14159265358979323846264338327950288{L})")},
    "degrees": {REAL: Expr("x * (180.0{L} / 3.14159265358979323846264338327950288{L})")},
    "bitwise_count": _same(Expr("popcount_{K}(x)", helpers=("npint",)), *_INTS),
    # NumPy's fmax/fmin: the non-NaN operand (helpers: which of +0 and -0 as NumPy's loops)
    "fmax": {BOOL: Expr("(x > y ? x : y)"), **_same(Expr("(x > y ? x : y)"), *_INTS),
             REAL: Expr("fmax_{K}(x, y)", helpers=("npfloat",)),
             COMPLEX: Expr("c_fmax_{K}(x, y)", helpers=("npcomplex",))},
    "fmin": {BOOL: Expr("(x < y ? x : y)"), **_same(Expr("(x < y ? x : y)"), *_INTS),
             REAL: Expr("fmin_{K}(x, y)", helpers=("npfloat",)),
             COMPLEX: Expr("c_fmin_{K}(x, y)", helpers=("npcomplex",))},
    "fmod": {**_same(Expr("fmod_{K}(x, y)", helpers=("npint",)), *_INTS),
             REAL: Expr("fmod_{K}(x, y)", helpers=("fmod",))},
    "gcd": _same(Expr("gcd_{K}(x, y)", helpers=("npint",)), *_INTS),
    "lcm": _same(Expr("lcm_{K}(x, y)", helpers=("npint",)), *_INTS),
    "ldexp": {REAL: Expr("ldexp_{K}(x, (i64)y)", helpers=("npfloat",))},
    "heaviside": {REAL: Expr("heaviside_{K}(x, y)", helpers=("npfloat",))},
    "float_power": {REAL: Expr("{pow}(x, y)"),
                    COMPLEX: Expr("c_pow_{K}(x, y)", helpers=("cmisc",))},
    "logaddexp2": {REAL: Expr("logaddexp2_{K}(x, y)", helpers=("npfloat",))},
}
"""Operation (array API name, or a row of ``table.POWERS``) -> dtype class -> :class:`Expr`."""

HELPERS["clip"] = Helper(lambda t: """
DEV {T} clip_{K}({T} x, {T} lo, {T} hi) {{
    {T} m = (x > lo || isnan(x)) ? x : lo;
    return (m < hi || isnan(m)) ? m : hi;
}}
""".format_map(t), kinds="f")

_UNARY = frozenset("""
abs acos acosh asin asinh atan atanh bitwise_invert ceil conj cos cosh exp expm1 floor imag
isfinite isinf isnan log log1p log2 log10 logical_not negative positive pow_sqrt real
reciprocal round sign signbit sin sinh sqrt square tan tanh trunc
bitwise_count cbrt deg2rad degrees exp2 fabs rad2deg radians""".split())
NIN = {op: 1 if op in _UNARY else 3 if op in ("where", "clip") else 2 for op in EXPRESSIONS}
"""Operation -> number of operands."""

# where's operands: the condition is x; the value operands decide the class.
_VALUE_ARG = {"where": 1}


def classes(op: str) -> frozenset[str]:
    """The dtype classes an operation has an expression for (KeyError if unknown)."""
    return frozenset(EXPRESSIONS[op])


def expression(op: str, compute: np.dtype) -> Expr:
    """The expression of ``op`` for operands of the compute dtype ``compute``.

    Raises ``ValueError`` naming the classes that exist when there is none.
    """
    by_class = EXPRESSIONS.get(op)
    if by_class is None:
        raise ValueError(f"no elementwise operation {op!r}; known: {', '.join(sorted(EXPRESSIONS))}")
    cls = dtype_class(compute)
    expr = by_class.get(cls)
    if expr is None:
        raise ValueError(
            f"{op} has no device expression for {np.dtype(compute)} ({cls}); it has one for "
            f"{', '.join(sorted(by_class))}")
    return expr


def value_arg(op: str) -> int:
    """Which operand's compute dtype is the expression's (``where``: the first value)."""
    return _VALUE_ARG.get(op, 0)
