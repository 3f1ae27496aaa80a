"""From raw Philox words to each distribution: constants and the cpu engine's transforms.

docs/random.md, "From bits to numbers", states the mapping; ``kernels.py``
writes the very same operations in C with the constants defined here, so the
cpu engine (NumPy) and the device kernels agree bit for bit.  Everything is
built from integer operations and IEEE additions, subtractions and
multiplications in the result's precision -- each correctly rounded on every
back-end (contraction into fused multiply-adds is switched off in the
kernels) -- so no platform ``log``, ``sqrt``, ``cos`` or division is used:
the normal and exponential transforms carry their own logarithm, square root
and sine/cosine, accurate to a few ulp and identical everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, getcontext

import numpy as np

__all__ = ["FloatSpec", "SPECS", "uniform_bits", "to_unit", "to_open_unit", "log", "sqrt",
           "sincos_turns", "normal_pair", "exponential", "mulhilo64", "M32"]

M32 = np.uint64(0xFFFFFFFF)

getcontext().prec = 60
_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494")
_LN2 = Decimal("0.693147180559945309417232121458176568075500134360255254120680")


def _rounded(value: Decimal | float, dtype: np.dtype) -> float:
    return float(dtype.type(float(value)))


def _taylor_turns(odd: bool, terms: int) -> list[Decimal]:
    """Coefficients of sin(2 pi f) (odd) or cos(2 pi f) in powers of f**2."""
    out = []
    for k in range(terms):
        n = 2 * k + (1 if odd else 0)
        out.append((-1) ** k * (2 * _PI) ** n / math.factorial(n))
    return out


@dataclass(frozen=True)
class FloatSpec:
    """One floating result type: its bit layout and the constants of its transforms."""

    dtype: np.dtype
    bits: np.dtype  # the unsigned integer of the same width
    sbits: np.dtype  # the signed one
    mant: int  # explicit mantissa bits
    bias: int
    ubits: int  # random bits in a uniform: 24 (float32) or 53 (float64)
    words: int  # 32-bit words per uniform
    recip_steps: int  # Newton steps of the reciprocal in log
    rsqrt_steps: int  # Newton steps of the reciprocal square root
    log_c: tuple[float, ...]  # 2 / (2k + 1): log(m) = s * sum(log_c[k] * s**2k)
    sin_c: tuple[float, ...]  # sin(2 pi f) = f * sum(sin_c[k] * f**2k)
    cos_c: tuple[float, ...]  # cos(2 pi f) = sum(cos_c[k] * f**2k)
    recip_a: float  # 1/d ~ recip_a - recip_b * d on [1 + sqrt(1/2), 1 + sqrt(2)]
    recip_b: float
    ln2_hi: float  # few significant bits, so e * ln2_hi is exact
    ln2_lo: float
    sqrt2_bits: int  # bits of the largest mantissa kept in [1, sqrt 2]
    rsqrt_magic: int

    @property
    def name(self) -> str:
        return self.dtype.name


def _spec(dtype, bits, sbits, mant, bias, ubits, recip_steps, rsqrt_steps, log_terms,
          sin_terms, cos_terms, hi_bits, magic) -> FloatSpec:
    dt = np.dtype(dtype)
    a, b = 1 + math.sqrt(0.5), 1 + math.sqrt(2.0)  # where d = m + 1 lies
    beta = 2 / (a * b + (a + b) ** 2 / 4)  # equioscillating linear guess of 1/d
    hi = Decimal(round(_LN2 * 2 ** hi_bits)) / 2 ** hi_bits
    sqrt2 = np.array(math.sqrt(2.0), dt).view(np.dtype(bits)).item()
    return FloatSpec(
        dtype=dt, bits=np.dtype(bits), sbits=np.dtype(sbits), mant=mant, bias=bias,
        ubits=ubits, words=dt.itemsize // 4, recip_steps=recip_steps, rsqrt_steps=rsqrt_steps,
        log_c=tuple(_rounded(Decimal(2) / (2 * k + 1), dt) for k in range(log_terms)),
        sin_c=tuple(_rounded(c, dt) for c in _taylor_turns(True, sin_terms)),
        cos_c=tuple(_rounded(c, dt) for c in _taylor_turns(False, cos_terms)),
        recip_a=_rounded(beta * (a + b), dt), recip_b=_rounded(beta, dt),
        ln2_hi=float(hi), ln2_lo=_rounded(_LN2 - hi, dt), sqrt2_bits=sqrt2, rsqrt_magic=magic)


# Term counts: the first omitted term is below 2**-30 (float32) / 2**-60 (float64) of the
# result on the reduced range (|s| <= 0.172 for log, |2 pi f| <= pi/4 for sin and cos).
SPECS: dict[np.dtype, FloatSpec] = {
    np.dtype(np.float32): _spec(np.float32, np.uint32, np.int32, 23, 127, 24, 3, 3, 5, 5, 6,
                                16, 0x5F3759DF),
    np.dtype(np.float64): _spec(np.float64, np.uint64, np.int64, 52, 1023, 53, 4, 4, 11, 9, 10,
                                32, 0x5FE6EB50C7B537A9),
}


# The cpu engine's transforms (NumPy, in the spec's dtype) ----------------------------------
def uniform_bits(w: np.ndarray, spec: FloatSpec) -> np.ndarray:
    """The ``ubits``-bit integers of uniforms from the words (uint64 of 32-bit values).

    float32: ``w >> 8`` of each word.  float64: ``(lo | hi << 32) >> 11`` of each
    pair of words, the even word the low half.
    """
    if spec.words == 1:
        return w >> np.uint64(8)
    return (w[0::2] | (w[1::2] << np.uint64(32))) >> np.uint64(11)


def to_unit(k: np.ndarray, spec: FloatSpec) -> np.ndarray:
    """``k * 2**-ubits`` in [0, 1) (exact)."""
    return k.astype(spec.dtype) * spec.dtype.type(2.0 ** -spec.ubits)


def to_open_unit(k: np.ndarray, spec: FloatSpec) -> np.ndarray:
    """``(k | 1) * 2**-ubits`` in (0, 1) (exact; never 0 nor 1, so log is finite, nonzero)."""
    return (k | np.uint64(1)).astype(spec.dtype) * spec.dtype.type(2.0 ** -spec.ubits)


def _horner(z: np.ndarray, coefs: tuple[float, ...], t) -> np.ndarray:
    p = np.full_like(z, t(coefs[-1]))
    for c in reversed(coefs[:-1]):
        p = t(c) + z * p
    return p


def log(x: np.ndarray, spec: FloatSpec) -> np.ndarray:
    """Natural logarithm of positive normal ``x``: ``e ln 2 + 2 atanh((m - 1)/(m + 1))``."""
    t = spec.dtype.type
    b = x.view(spec.bits)
    mant = spec.bits.type((1 << spec.mant) - 1)
    e = (b >> spec.bits.type(spec.mant)).astype(spec.sbits) - spec.sbits.type(spec.bias)
    mb = (b & mant) | spec.bits.type(spec.bias << spec.mant)
    big = mb > spec.bits.type(spec.sqrt2_bits)
    mb = np.where(big, mb - spec.bits.type(1 << spec.mant), mb)
    e = e + big.astype(spec.sbits)
    m = mb.view(spec.dtype)
    f = m - t(1)
    d = m + t(1)
    y = t(spec.recip_a) - t(spec.recip_b) * d
    for _ in range(spec.recip_steps):
        y = y * (t(2) - d * y)
    s = f * y
    lm = s * _horner(s * s, spec.log_c, t)
    fe = e.astype(spec.dtype)
    return fe * t(spec.ln2_hi) + (fe * t(spec.ln2_lo) + lm)


def sqrt(x: np.ndarray, spec: FloatSpec) -> np.ndarray:
    """Square root of positive normal ``x``: ``x * rsqrt(x)``, rsqrt by Newton from a bit guess."""
    t = spec.dtype.type
    y = (spec.bits.type(spec.rsqrt_magic) - (x.view(spec.bits) >> spec.bits.type(1))
         ).view(spec.dtype)
    hx = t(0.5) * x
    for _ in range(spec.rsqrt_steps):
        y = y * (t(1.5) - hx * (y * y))
    return x * y


def sincos_turns(k: np.ndarray, spec: FloatSpec) -> tuple[np.ndarray, np.ndarray]:
    """``(cos, sin)`` of ``2 pi k 2**-ubits``: the quadrant from the top bits, then polynomials."""
    t = spec.dtype.type
    ub = spec.ubits
    j = (k + np.uint64(1 << (ub - 3))) >> np.uint64(ub - 2)
    fi = k.astype(np.int64) - (j << np.uint64(ub - 2)).astype(np.int64)
    q = j & np.uint64(3)
    f = fi.astype(spec.dtype) * t(2.0 ** -ub)
    z = f * f
    s = f * _horner(z, spec.sin_c, t)
    c = _horner(z, spec.cos_c, t)
    odd = (q & np.uint64(1)).astype(bool)
    cq = np.where(odd, s, c)
    sq = np.where(odd, c, s)
    cq = np.where((q == 1) | (q == 2), -cq, cq)
    sq = np.where(q >= 2, -sq, sq)
    return cq, sq


def normal_pair(k_radius: np.ndarray, k_angle: np.ndarray, spec: FloatSpec):
    """Box--Muller: ``r cos(theta), r sin(theta)``, ``r = sqrt(-2 log u)``, u in (0, 1)."""
    r = sqrt(spec.dtype.type(-2) * log(to_open_unit(k_radius, spec), spec), spec)
    c, s = sincos_turns(k_angle, spec)
    return r * c, r * s


def exponential(k: np.ndarray, spec: FloatSpec) -> np.ndarray:
    """``-log(u)``, u in (0, 1)."""
    return -log(to_open_unit(k, spec), spec)


def mulhilo64(x: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """The high and low 64 bits of ``x * r`` (``x`` uint64, ``0 <= r < 2**64``)."""
    rl, rh = np.uint64(r & 0xFFFFFFFF), np.uint64(r >> 32)
    xl, xh = x & M32, x >> np.uint64(32)
    ll, lh, hl, hh = xl * rl, xl * rh, xh * rl, xh * rh
    mid = (ll >> np.uint64(32)) + (lh & M32) + (hl & M32)
    hi = hh + (lh >> np.uint64(32)) + (hl >> np.uint64(32)) + (mid >> np.uint64(32))
    return hi, x * np.uint64(r)
