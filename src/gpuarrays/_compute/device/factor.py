"""Device factorisations in OpenCL C and CUDA C: LU, Cholesky, Jacobi eigen and SVD,
Householder QR, Hessenberg-QR eigen (docs/linalg.md, "Factorisations on device back-ends").

One kernel family per algorithm, each specialised only on the dialect and the
compute type (``f4``, ``f8``, ``c8``, ``c16``): sizes, batch counts and modes are
run-time arguments, so a dtype costs one compile per algorithm.  Every kernel
runs **one work-item per matrix** on a contiguous ``(batch, rows, cols)`` copy of
its operand in the compute type (a pool temporary the caller makes with a
strided device copy, so transposed and sliced inputs need nothing here), with
serial loops inside: meant for many small matrices (up to a few hundred rows),
not for one large one.  The scalar arithmetic is written once over a type
``T`` (``R`` its real type) and a handful of helpers (``t_mul``, ``t_conj``, ...)
whose definitions differ between real and complex types.

* ``lu``: Gaussian elimination with partial pivoting (the row of the largest
  modulus), rows swapped in place.  ``mode`` 0 writes the determinant, 1 the sign
  and log-modulus, 2 solves ``A X = B`` in place in ``B`` (with ``ident`` set, ``B``
  starts as the identity: the inverse).  An exactly zero pivot in mode 2 sets the
  status word (the caller raises ``LinAlgError``).
* ``chol``: Cholesky-Banachiewicz on the lower triangle (with ``upper`` set, the
  lower triangle is first replaced by the conjugate of the upper one, and the
  factor written conjugate-transposed), other triangle zeroed; a diagonal that is
  not positive (or NaN) sets the status word.
* ``jeig``: cyclic Jacobi rotations of a Hermitian matrix (built from its lower
  triangle, as LAPACK's ``UPLO='L'``): each pair ``(p, q)`` with an off-diagonal
  element above ``eps * sqrt(|a_pp a_qq|)`` is annihilated by a rotation with a
  phase, ``U = [[c, z], [-conj(z), c]]``, ``z = s a_pq / |a_pq|``; sweeps stop when
  none rotates.  Eigenvalues ascending, vectors (accumulated) permuted alike.
* ``jsvd``: one-sided Jacobi (Hestenes) on the columns of ``A`` (``M >= N``) or on
  its rows (``M < N``; the same arithmetic, see :func:`program`), accumulating the
  rotations in ``W``; singular values are the final vector norms, sorted
  descending.  Vectors of a zero (or negligible) singular value and the extra ones
  of ``full_matrices`` are completed by Gram-Schmidt against unit vectors.
* ``qr``: Householder reflections with LAPACK's conventions (``geqrf`` + ``orgqr``).
* ``eig`` (complex keys only): Hessenberg reduction and implicit single-shift QR to the
  Schur form, eigenvectors by back substitution (see :func:`_eig`).

Status word (one ``int32`` per call, zeroed by the caller, read once after the launch):
``lu`` in mode 2 (singular), ``chol`` (not positive definite), ``jeig`` and ``jsvd`` (NaN or
infinity in the input: LAPACK does not converge on them), ``eig`` (1: no convergence, 2:
NaN or infinity).  Several work-items may write it; the call reports whichever value
landed (each means ``LinAlgError``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ...backends._kernels import Dialect
from .reduce import compiled

__all__ = ["Spec", "program", "source_all", "launch", "KINDS", "override_hint"]

KINDS = ("lu", "chol", "jeig", "jsvd", "qr", "eig")
"""The kernel families; ``eig`` is complex-only (real input computes in complex)."""

_REAL = {"f4": "float", "f8": "double", "c8": "float", "c16": "double"}
_EPS = {"float": "1.1920929e-07f", "double": "2.220446049250313e-16"}
MAX_SWEEPS = 60
"""Jacobi sweeps at most (a well-conditioned matrix needs 6-12)."""

override_hint: list[str] = []
"""Tests push ``"gpu"`` here to run the GPU launch shape (64 work-items per group, a partial
last group) on a CPU device."""

_lock = threading.Lock()
_kernels: dict[tuple, object] = {}


@dataclass(frozen=True)
class Spec:
    """One factorisation kernel: the dialect, the algorithm (:data:`KINDS`), the compute key."""

    dialect: str
    kind: str
    key: str


def _types(d: Dialect, key: str) -> str:
    """``T``, ``R`` and the scalar helpers of ``key`` in dialect ``d``."""
    real = _REAL[key]
    f = "f" if (d.suffix_math and real == "float") else ""
    fn = "DEV"
    out = [f"typedef {real} R;\n",
           f"#define R_SQRT sqrt{f}\n#define R_ABS fabs{f}\n#define R_HYPOT hypot{f}\n"
           f"#define R_LOG log{f}\n#define EPS (({real}){_EPS[real]})\n"]
    if key[0] == "c":
        out.append(f"""typedef {real}2 T;
{fn} T mk(R re, R im) {{ T z; z.x = re; z.y = im; return z; }}
{fn} T t_real(R r) {{ return mk(r, (R)0); }}
{fn} T t_add(T a, T b) {{ return mk(a.x + b.x, a.y + b.y); }}
{fn} T t_sub(T a, T b) {{ return mk(a.x - b.x, a.y - b.y); }}
{fn} T t_mul(T a, T b) {{ return mk(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }}
{fn} T t_scale(T a, R s) {{ return mk(a.x * s, a.y * s); }}
{fn} T t_conj(T a) {{ return mk(a.x, -a.y); }}
{fn} R t_re(T a) {{ return a.x; }}
{fn} R t_abs(T a) {{ return R_HYPOT(a.x, a.y); }}
{fn} R t_abs2(T a) {{ return a.x * a.x + a.y * a.y; }}
{fn} int t_finite(T a) {{ return isfinite(a.x) && isfinite(a.y); }}
{fn} T t_div(T a, T b) {{  /* Smith's algorithm */
    if (R_ABS(b.x) >= R_ABS(b.y)) {{
        R r = b.y / b.x, den = b.x + b.y * r;
        return mk((a.x + a.y * r) / den, (a.y - a.x * r) / den);
    }}
    R r = b.x / b.y, den = b.x * r + b.y;
    return mk((a.x * r + a.y) / den, (a.y * r - a.x) / den);
}}
""")
    else:
        out.append(f"""typedef R T;
{fn} T t_real(R r) {{ return r; }}
{fn} T t_add(T a, T b) {{ return a + b; }}
{fn} T t_sub(T a, T b) {{ return a - b; }}
{fn} T t_mul(T a, T b) {{ return a * b; }}
{fn} T t_scale(T a, R s) {{ return a * s; }}
{fn} T t_conj(T a) {{ return a; }}
{fn} R t_re(T a) {{ return a; }}
{fn} R t_abs(T a) {{ return R_ABS(a); }}
{fn} R t_abs2(T a) {{ return a * a; }}
{fn} int t_finite(T a) {{ return isfinite(a); }}
{fn} T t_div(T a, T b) {{ return a / b; }}
""")
    return "".join(out)


def _rotation(g: str) -> str:
    """The Jacobi rotation of a 2 x 2 Hermitian block ``[[app, apq], [conj(apq), aqq]]``
    (``r = |apq| > 0``): ``c`` real, ``z`` complex, ``t`` the tangent."""
    return ("        R theta = (aqq - app) / (2 * r);\n"
            "        R t = 1 / (R_ABS(theta) + R_HYPOT(theta, (R)1));\n"
            "        if (theta < 0) t = -t;\n"
            "        R c = 1 / R_SQRT(1 + t * t), s = t * c;\n"
            "        T z = t_scale(apq, s / r), zc = t_conj(z);\n")


def _lu(d: Dialect, g: str) -> tuple[str, list[tuple[str, str]]]:
    params = [("ptr", f"{g}u8 *pa"), ("ptr", f"{g}u8 *pb"), ("ptr", f"{g}u8 *pr1"),
              ("ptr", f"{g}u8 *pr2"), ("ptr", f"{g}u8 *pf"), ("i8", "i64 nb"), ("i8", "i64 n"),
              ("i8", "i64 k"), ("i8", "i64 mode"), ("i8", "i64 ident")]
    body = f"""
    {g}T *a = ({g}T *)pa + bi * n * n;
    {g}T *b = ({g}T *)pb + bi * n * k;
    if (mode == 2 && ident)
        for (i64 i = 0; i < n; ++i)
            for (i64 c = 0; c < k; ++c) b[i * k + c] = t_real(i == c ? (R)1 : (R)0);
    T sgn = t_real((R)1);
    int singular = 0;
    for (i64 j = 0; j < n; ++j) {{
        i64 p = j;
        R best = t_abs(a[j * n + j]);
        for (i64 i = j + 1; i < n; ++i) {{
            R v = t_abs(a[i * n + j]);
            if (v > best) {{ best = v; p = i; }}
        }}
        if (best == 0) {{ singular = 1; continue; }}
        if (p != j) {{
            for (i64 c = 0; c < n; ++c) {{
                T tmp = a[j * n + c]; a[j * n + c] = a[p * n + c]; a[p * n + c] = tmp;
            }}
            if (mode == 2)
                for (i64 c = 0; c < k; ++c) {{
                    T tmp = b[j * k + c]; b[j * k + c] = b[p * k + c]; b[p * k + c] = tmp;
                }}
            sgn = t_scale(sgn, (R)-1);
        }}
        T piv = a[j * n + j];
        for (i64 i = j + 1; i < n; ++i) {{
            T l = t_div(a[i * n + j], piv);
            a[i * n + j] = l;
            for (i64 c = j + 1; c < n; ++c) a[i * n + c] = t_sub(a[i * n + c], t_mul(l, a[j * n + c]));
            if (mode == 2)
                for (i64 c = 0; c < k; ++c) b[i * k + c] = t_sub(b[i * k + c], t_mul(l, b[j * k + c]));
        }}
    }}
    if (mode == 2) {{
        if (singular) {{ *({g}i32 *)pf = 1; return; }}
        for (i64 i = n - 1; i >= 0; --i)
            for (i64 c = 0; c < k; ++c) {{
                T s = b[i * k + c];
                for (i64 t = i + 1; t < n; ++t) s = t_sub(s, t_mul(a[i * n + t], b[t * k + c]));
                b[i * k + c] = t_div(s, a[i * n + i]);
            }}
        return;
    }}
    if (mode == 0) {{
        T det = sgn;
        for (i64 j = 0; j < n; ++j) det = t_mul(det, a[j * n + j]);
        (({g}T *)pr1)[bi] = det;
        return;
    }}
    R logabs = 0;
    for (i64 j = 0; j < n; ++j) {{
        T v = a[j * n + j];
        R m = t_abs(v);
        if (m == 0) continue;
        sgn = t_mul(sgn, t_scale(v, 1 / m));
        logabs += R_LOG(m);
    }}
    if (singular) {{ sgn = t_real((R)0); logabs = -INFINITY; }}
    (({g}T *)pr1)[bi] = sgn;
    (({g}R *)pr2)[bi] = logabs;
"""
    return body, params


def _chol(d: Dialect, g: str) -> tuple[str, list[tuple[str, str]]]:
    params = [("ptr", f"{g}u8 *pa"), ("ptr", f"{g}u8 *pf"), ("i8", "i64 nb"), ("i8", "i64 n"),
              ("i8", "i64 upper")]
    body = f"""
    {g}T *a = ({g}T *)pa + bi * n * n;
    if (upper)
        for (i64 i = 0; i < n; ++i)
            for (i64 j = 0; j < i; ++j) a[i * n + j] = t_conj(a[j * n + i]);
    for (i64 j = 0; j < n; ++j) {{
        R dj = t_re(a[j * n + j]);
        for (i64 t = 0; t < j; ++t) dj -= t_abs2(a[j * n + t]);
        if (!(dj > 0)) {{ *({g}i32 *)pf = 1; return; }}
        R r = R_SQRT(dj);
        a[j * n + j] = t_real(r);
        for (i64 i = j + 1; i < n; ++i) {{
            T s = a[i * n + j];
            for (i64 t = 0; t < j; ++t) s = t_sub(s, t_mul(a[i * n + t], t_conj(a[j * n + t])));
            a[i * n + j] = t_scale(s, 1 / r);
        }}
    }}
    for (i64 i = 0; i < n; ++i)
        for (i64 j = i + 1; j < n; ++j) {{
            if (upper) {{ a[i * n + j] = t_conj(a[j * n + i]); a[j * n + i] = t_real((R)0); }}
            else a[i * n + j] = t_real((R)0);
        }}
"""
    return body, params


def _jeig(d: Dialect, g: str) -> tuple[str, list[tuple[str, str]]]:
    params = [("ptr", f"{g}u8 *pa"), ("ptr", f"{g}u8 *pw"), ("ptr", f"{g}u8 *pv"),
              ("ptr", f"{g}u8 *pf"), ("i8", "i64 nb"), ("i8", "i64 n"), ("i8", "i64 vectors")]
    body = f"""
    {g}T *a = ({g}T *)pa + bi * n * n;
    {g}R *w = ({g}R *)pw + bi * n;
    {g}T *v = ({g}T *)pv + bi * n * n;
    R frob = 0;
    for (i64 i = 0; i < n; ++i) {{
        a[i * n + i] = t_real(t_re(a[i * n + i]));
        for (i64 j = i + 1; j < n; ++j) a[i * n + j] = t_conj(a[j * n + i]);
    }}
    for (i64 i = 0; i < n * n; ++i)
        if (!t_finite(a[i])) {{ *({g}i32 *)pf = 1; return; }}  /* as LAPACK: no convergence */
    for (i64 i = 0; i < n * n; ++i) frob += t_abs2(a[i]);
    R floor_ = EPS * EPS * R_SQRT(frob);
    if (vectors)
        for (i64 i = 0; i < n; ++i)
            for (i64 j = 0; j < n; ++j) v[i * n + j] = t_real(i == j ? (R)1 : (R)0);
    for (int sweep = 0; sweep < {MAX_SWEEPS}; ++sweep) {{
      int rotated = 0;
      for (i64 p = 0; p < n; ++p) for (i64 q = p + 1; q < n; ++q) {{
        T apq = a[p * n + q];
        R r = t_abs(apq), app = t_re(a[p * n + p]), aqq = t_re(a[q * n + q]);
        if (!(r > EPS * R_SQRT(R_ABS(app)) * R_SQRT(R_ABS(aqq))) || !(r > floor_)) continue;
{_rotation(g)}
        for (i64 i = 0; i < n; ++i) {{
            T x = a[i * n + p], y = a[i * n + q];
            a[i * n + p] = t_sub(t_scale(x, c), t_mul(zc, y));
            a[i * n + q] = t_add(t_mul(z, x), t_scale(y, c));
        }}
        for (i64 i = 0; i < n; ++i) {{
            T x = a[p * n + i], y = a[q * n + i];
            a[p * n + i] = t_sub(t_scale(x, c), t_mul(z, y));
            a[q * n + i] = t_add(t_mul(zc, x), t_scale(y, c));
        }}
        a[p * n + q] = t_real((R)0); a[q * n + p] = t_real((R)0);
        a[p * n + p] = t_real(app - t * r); a[q * n + q] = t_real(aqq + t * r);
        if (vectors)
            for (i64 i = 0; i < n; ++i) {{
                T x = v[i * n + p], y = v[i * n + q];
                v[i * n + p] = t_sub(t_scale(x, c), t_mul(zc, y));
                v[i * n + q] = t_add(t_mul(z, x), t_scale(y, c));
            }}
        rotated = 1;
      }}
      if (!rotated) break;
    }}
    for (i64 i = 0; i < n; ++i) w[i] = t_re(a[i * n + i]);
    for (i64 i = 0; i < n; ++i) {{  /* ascending, vectors alike */
        i64 m = i;
        for (i64 j = i + 1; j < n; ++j) if (w[j] < w[m]) m = j;
        if (m == i) continue;
        R tw = w[i]; w[i] = w[m]; w[m] = tw;
        if (vectors)
            for (i64 j = 0; j < n; ++j) {{
                T tv = v[j * n + i]; v[j * n + i] = v[j * n + m]; v[j * n + m] = tv;
            }}
    }}
"""
    return body, params


def _jsvd(d: Dialect, g: str) -> tuple[str, list[tuple[str, str]]]:
    """Vectors are the columns of ``X`` when ``m >= n`` and its rows otherwise; with ``g =
    sum conj(x_p) x_q`` the same update orthogonalises both (for rows it is the Jacobi
    step of ``A^H`` conjugated), and the accumulated ``W`` gives ``V`` (columns) or
    ``conj(U)`` (rows): the other factor is written as ``conj(W)`` in either case."""
    params = [("ptr", f"{g}u8 *px"), ("ptr", f"{g}u8 *pw"), ("ptr", f"{g}u8 *ps"),
              ("ptr", f"{g}u8 *po"), ("ptr", f"{g}u8 *pq"), ("ptr", f"{g}u8 *pf"),
              ("i8", "i64 nb"), ("i8", "i64 m"), ("i8", "i64 n"), ("i8", "i64 full"),
              ("i8", "i64 vectors")]
    body = f"""
    int rows = m < n;
    i64 K = rows ? m : n, L = rows ? n : m;
    i64 vs = rows ? n : 1, es = rows ? 1 : n;
    {g}T *x = ({g}T *)px + bi * m * n;
    for (i64 i = 0; i < m * n; ++i)
        if (!t_finite(x[i])) {{ *({g}i32 *)pf = 1; return; }}  /* as LAPACK: no convergence */
    {g}T *w = ({g}T *)pw + bi * K * K;
    {g}R *sv = ({g}R *)ps + bi * K;
    if (vectors)
        for (i64 i = 0; i < K; ++i)
            for (i64 j = 0; j < K; ++j) w[i * K + j] = t_real(i == j ? (R)1 : (R)0);
    for (int sweep = 0; sweep < {MAX_SWEEPS}; ++sweep) {{
      int rotated = 0;
      for (i64 p = 0; p < K; ++p) for (i64 q = p + 1; q < K; ++q) {{
        R app = 0, aqq = 0;
        T apq = t_real((R)0);
        for (i64 i = 0; i < L; ++i) {{
            T xp = x[p * vs + i * es], xq = x[q * vs + i * es];
            app += t_abs2(xp); aqq += t_abs2(xq);
            apq = t_add(apq, t_mul(t_conj(xp), xq));
        }}
        R r = t_abs(apq);
        if (!(r > EPS * R_SQRT(app) * R_SQRT(aqq))) continue;
{_rotation(g)}
        for (i64 i = 0; i < L; ++i) {{
            T xp = x[p * vs + i * es], xq = x[q * vs + i * es];
            x[p * vs + i * es] = t_sub(t_scale(xp, c), t_mul(zc, xq));
            x[q * vs + i * es] = t_add(t_mul(z, xp), t_scale(xq, c));
        }}
        if (vectors)
            for (i64 i = 0; i < K; ++i) {{
                T xp = w[i * K + p], xq = w[i * K + q];
                w[i * K + p] = t_sub(t_scale(xp, c), t_mul(zc, xq));
                w[i * K + q] = t_add(t_mul(z, xp), t_scale(xq, c));
            }}
        rotated = 1;
      }}
      if (!rotated) break;
    }}
    for (i64 p = 0; p < K; ++p) {{
        R s2 = 0;
        for (i64 i = 0; i < L; ++i) s2 += t_abs2(x[p * vs + i * es]);
        sv[p] = R_SQRT(s2);
    }}
    for (i64 p = 0; p < K; ++p) {{  /* descending, vectors alike */
        i64 mx = p;
        for (i64 j = p + 1; j < K; ++j) if (sv[j] > sv[mx]) mx = j;
        if (mx == p) continue;
        R ts = sv[p]; sv[p] = sv[mx]; sv[mx] = ts;
        if (vectors) {{
            for (i64 i = 0; i < L; ++i) {{
                T t = x[p * vs + i * es]; x[p * vs + i * es] = x[mx * vs + i * es];
                x[mx * vs + i * es] = t;
            }}
            for (i64 i = 0; i < K; ++i) {{
                T t = w[i * K + p]; w[i * K + p] = w[i * K + mx]; w[i * K + mx] = t;
            }}
        }}
    }}
    if (!vectors) return;
    /* O: the normalised vectors (U's columns, or Vh's rows), completed to nO of them */
    i64 nO = full ? L : K;
    i64 ovs = rows ? n : 1, oes = rows ? 1 : nO;
    {g}T *o = ({g}T *)po + bi * nO * L;
    R tol = K > 0 ? sv[0] * EPS * (R)L : (R)0;
    i64 cand = 0;
    for (i64 p = 0; p < nO; ++p) {{
        if (p < K && sv[p] > tol && sv[p] > 0) {{
            R inv = 1 / sv[p];
            for (i64 i = 0; i < L; ++i) o[p * ovs + i * oes] = t_scale(x[p * vs + i * es], inv);
            continue;
        }}
        while (cand < L) {{  /* Gram-Schmidt (twice) of the next unit vector */
            for (i64 i = 0; i < L; ++i) o[p * ovs + i * oes] = t_real(i == cand ? (R)1 : (R)0);
            ++cand;
            for (int pass = 0; pass < 2; ++pass)
                for (i64 j = 0; j < p; ++j) {{
                    T h = t_real((R)0);
                    for (i64 i = 0; i < L; ++i)
                        h = t_add(h, t_mul(t_conj(o[j * ovs + i * oes]), o[p * ovs + i * oes]));
                    for (i64 i = 0; i < L; ++i)
                        o[p * ovs + i * oes] = t_sub(o[p * ovs + i * oes], t_mul(h, o[j * ovs + i * oes]));
                }}
            R nn = 0;
            for (i64 i = 0; i < L; ++i) nn += t_abs2(o[p * ovs + i * oes]);
            if (nn * (R)(2 * L) > 1) {{
                R inv = 1 / R_SQRT(nn);
                for (i64 i = 0; i < L; ++i) o[p * ovs + i * oes] = t_scale(o[p * ovs + i * oes], inv);
                break;
            }}
        }}
    }}
    /* Q = conj(W) placed as Vh (columns case: Vh[p][k]) or U (rows case: U[k][p]) */
    {g}T *q = ({g}T *)pq + bi * K * K;
    i64 qp = rows ? 1 : K, qk = rows ? K : 1;
    for (i64 k = 0; k < K; ++k)
        for (i64 p = 0; p < K; ++p) q[p * qp + k * qk] = t_conj(w[k * K + p]);
"""
    return body, params


def _qr(d: Dialect, g: str) -> tuple[str, list[tuple[str, str]]]:
    """Householder QR as LAPACK's ``geqrf`` + ``orgqr`` (``beta = -sign(re(alpha)) *
    norm``, ``H = I - tau v v^H`` with ``v_j = 1``), so real results match NumPy's."""
    params = [("ptr", f"{g}u8 *px"), ("ptr", f"{g}u8 *ptau"), ("ptr", f"{g}u8 *pq"),
              ("ptr", f"{g}u8 *pr"), ("i8", "i64 nb"), ("i8", "i64 m"), ("i8", "i64 n"),
              ("i8", "i64 complete")]
    body = f"""
    i64 K = m < n ? m : n, mq = complete ? m : K;
    {g}T *x = ({g}T *)px + bi * m * n;
    {g}T *tau = ({g}T *)ptau + bi * K;
    {g}T *q = ({g}T *)pq + bi * m * mq;
    {g}T *r = ({g}T *)pr + bi * mq * n;
    for (i64 j = 0; j < K; ++j) {{
        T alpha = x[j * n + j];
        R xn = 0;
        for (i64 i = j + 1; i < m; ++i) xn += t_abs2(x[i * n + j]);
        T aconj = t_conj(alpha);
        if (xn == 0 && t_abs2(t_sub(alpha, aconj)) == 0) {{  /* H = I */
            tau[j] = t_real((R)0);
            continue;
        }}
        R beta = R_SQRT(t_abs2(alpha) + xn);
        if (t_re(alpha) >= 0) beta = -beta;
        /* tau = (beta - alpha) / beta, v = x / (alpha - beta) */
        tau[j] = t_scale(t_sub(t_real(beta), alpha), 1 / beta);
        T sc = t_div(t_real((R)1), t_sub(alpha, t_real(beta)));
        for (i64 i = j + 1; i < m; ++i) x[i * n + j] = t_mul(x[i * n + j], sc);
        x[j * n + j] = t_real(beta);
        T tc = t_conj(tau[j]);
        for (i64 c = j + 1; c < n; ++c) {{  /* A <- H^H A */
            T w = x[j * n + c];
            for (i64 i = j + 1; i < m; ++i) w = t_add(w, t_mul(t_conj(x[i * n + j]), x[i * n + c]));
            w = t_mul(tc, w);
            x[j * n + c] = t_sub(x[j * n + c], w);
            for (i64 i = j + 1; i < m; ++i) x[i * n + c] = t_sub(x[i * n + c], t_mul(w, x[i * n + j]));
        }}
    }}
    for (i64 i = 0; i < mq; ++i)
        for (i64 c = 0; c < n; ++c) r[i * n + c] = i <= c ? x[i * n + c] : t_real((R)0);
    for (i64 i = 0; i < m; ++i)
        for (i64 c = 0; c < mq; ++c) q[i * mq + c] = t_real(i == c ? (R)1 : (R)0);
    for (i64 j = K - 1; j >= 0; --j)  /* Q <- H_j Q */
        for (i64 c = j; c < mq; ++c) {{
            T w = q[j * mq + c];
            for (i64 i = j + 1; i < m; ++i) w = t_add(w, t_mul(t_conj(x[i * n + j]), q[i * mq + c]));
            w = t_mul(tau[j], w);
            q[j * mq + c] = t_sub(q[j * mq + c], w);
            for (i64 i = j + 1; i < m; ++i) q[i * mq + c] = t_sub(q[i * mq + c], t_mul(w, x[i * n + j]));
        }}
"""
    return body, params


def _eig(d: Dialect, g: str) -> tuple[str, list[tuple[str, str]]]:
    """The non-symmetric eigenproblem in complex arithmetic (complex keys only): Householder
    reduction to Hessenberg form, then implicit single-shift QR sweeps of Givens rotations
    (Wilkinson shift, an exceptional shift every tenth iteration, at most ``30 n`` in all;
    more set the status word), giving the Schur form ``A = Q T Q^H``.  Eigenvalues are the
    diagonal of ``T``; eigenvector ``k`` is ``Q x`` with ``x`` from back substitution in
    ``T - t_kk I`` (a zero divisor replaced by ``eps |A|``, as LAPACK's ``trevc``), scaled to
    norm 1 with its largest component real (``geev``'s convention)."""
    params = [("ptr", f"{g}u8 *pa"), ("ptr", f"{g}u8 *pw"), ("ptr", f"{g}u8 *pv"),
              ("ptr", f"{g}u8 *pf"), ("i8", "i64 nb"), ("i8", "i64 n"), ("i8", "i64 vectors")]
    body = f"""
    {g}T *a = ({g}T *)pa + bi * n * n;
    {g}T *w = ({g}T *)pw + bi * n;
    {g}T *v = ({g}T *)pv + bi * n * n;
    R anorm = 0;
    for (i64 i = 0; i < n * n; ++i) {{
        if (!t_finite(a[i])) {{ *({g}i32 *)pf = 2; return; }}  /* NumPy refuses them first */
        anorm += t_abs2(a[i]);
    }}
    anorm = R_SQRT(anorm);
    if (vectors)
        for (i64 i = 0; i < n; ++i)
            for (i64 j = 0; j < n; ++j) v[i * n + j] = t_real(i == j ? (R)1 : (R)0);
    /* Hessenberg: H_k = I - tau u u^H on rows/columns k+1.., u stored below a[k+1][k] */
    for (i64 k = 0; k + 2 < n; ++k) {{
        T alpha = a[(k + 1) * n + k];
        R xn = 0;
        for (i64 i = k + 2; i < n; ++i) xn += t_abs2(a[i * n + k]);
        if (xn == 0 && alpha.y == 0) continue;
        R beta = R_SQRT(t_abs2(alpha) + xn);
        if (alpha.x >= 0) beta = -beta;
        T tau = t_scale(t_sub(t_real(beta), alpha), 1 / beta), tc = t_conj(tau);
        T sc = t_div(t_real((R)1), t_sub(alpha, t_real(beta)));
        for (i64 i = k + 2; i < n; ++i) a[i * n + k] = t_mul(a[i * n + k], sc);
        a[(k + 1) * n + k] = t_real(beta);
        for (i64 c = k + 1; c < n; ++c) {{  /* A <- H^H A */
            T s = a[(k + 1) * n + c];
            for (i64 i = k + 2; i < n; ++i) s = t_add(s, t_mul(t_conj(a[i * n + k]), a[i * n + c]));
            s = t_mul(tc, s);
            a[(k + 1) * n + c] = t_sub(a[(k + 1) * n + c], s);
            for (i64 i = k + 2; i < n; ++i) a[i * n + c] = t_sub(a[i * n + c], t_mul(s, a[i * n + k]));
        }}
        for (int which = 0; which < (vectors ? 2 : 1); ++which) {{  /* A <- A H, Q <- Q H */
            {g}T *m_ = which ? v : a;
            for (i64 r = 0; r < n; ++r) {{
                T s = m_[r * n + k + 1];
                for (i64 j = k + 2; j < n; ++j) s = t_add(s, t_mul(m_[r * n + j], a[j * n + k]));
                s = t_mul(tau, s);
                m_[r * n + k + 1] = t_sub(m_[r * n + k + 1], s);
                for (i64 j = k + 2; j < n; ++j)
                    m_[r * n + j] = t_sub(m_[r * n + j], t_mul(s, t_conj(a[j * n + k])));
            }}
        }}
        for (i64 i = k + 2; i < n; ++i) a[i * n + k] = t_real((R)0);
    }}
    /* shifted QR on the active block [l, hi] */
    i64 hi = n - 1, its = 0, total = 0;
    while (hi > 0) {{
        i64 l = hi;
        for (; l > 0; --l) {{
            R thr = EPS * (t_abs(a[(l - 1) * n + l - 1]) + t_abs(a[l * n + l]));
            if (thr == 0) thr = EPS * anorm;
            if (t_abs(a[l * n + l - 1]) <= thr) {{ a[l * n + l - 1] = t_real((R)0); break; }}
        }}
        if (l == hi) {{ --hi; its = 0; continue; }}
        if (++total > 30 * n) {{ *({g}i32 *)pf = 1; return; }}
        ++its;
        T mu;
        if (its % 10 == 0) {{
            mu = t_add(a[hi * n + hi], t_real(t_abs(a[hi * n + hi - 1])));
        }} else {{  /* the eigenvalue of the trailing 2 x 2 nearer its last entry */
            T p = a[(hi - 1) * n + hi - 1], q = a[(hi - 1) * n + hi];
            T r = a[hi * n + hi - 1], s = a[hi * n + hi];
            T hd = t_scale(t_sub(p, s), (R)0.5);
            T disc = t_add(t_mul(hd, hd), t_mul(q, r));
            R dr = t_abs(disc), sq_ = R_SQRT((dr + R_ABS(disc.x)) / 2);
            T root = dr == 0 ? t_real((R)0)
                : (disc.x >= 0 ? mk(sq_, disc.y / (2 * sq_))
                               : mk(R_ABS(disc.y) / (2 * sq_), disc.y < 0 ? -sq_ : sq_));
            T m1 = t_add(t_add(s, hd), root), m2 = t_sub(t_add(s, hd), root);
            mu = t_abs(t_sub(m1, s)) <= t_abs(t_sub(m2, s)) ? m1 : m2;
        }}
        i64 c0 = vectors ? 0 : l, c1 = vectors ? n : hi + 1;
        for (i64 k = l; k < hi; ++k) {{
            T x = k == l ? t_sub(a[l * n + l], mu) : a[k * n + k - 1];
            T y = k == l ? a[(l + 1) * n + l] : a[(k + 1) * n + k - 1];
            R ax = t_abs(x), ay = t_abs(y), rho = R_HYPOT(ax, ay);
            if (rho == 0) continue;
            R c;
            T s;
            if (ax == 0) {{ c = 0; s = t_scale(t_conj(y), 1 / ay); }}
            else {{ c = ax / rho; s = t_mul(t_scale(x, 1 / ax), t_scale(t_conj(y), 1 / rho)); }}
            T sc = t_conj(s);
            for (i64 j = (k > l ? k - 1 : k); j < c1; ++j) {{  /* rows k, k+1 <- G^H */
                T h1 = a[k * n + j], h2 = a[(k + 1) * n + j];
                a[k * n + j] = t_add(t_scale(h1, c), t_mul(s, h2));
                a[(k + 1) * n + j] = t_sub(t_scale(h2, c), t_mul(sc, h1));
            }}
            if (k > l) a[(k + 1) * n + k - 1] = t_real((R)0);
            i64 rend = k + 2 < hi ? k + 2 : hi;
            for (i64 i = c0; i <= rend; ++i) {{  /* columns k, k+1 <- G */
                T h1 = a[i * n + k], h2 = a[i * n + k + 1];
                a[i * n + k] = t_add(t_scale(h1, c), t_mul(h2, sc));
                a[i * n + k + 1] = t_sub(t_scale(h2, c), t_mul(h1, s));
            }}
            if (vectors)
                for (i64 i = 0; i < n; ++i) {{
                    T h1 = v[i * n + k], h2 = v[i * n + k + 1];
                    v[i * n + k] = t_add(t_scale(h1, c), t_mul(h2, sc));
                    v[i * n + k + 1] = t_sub(t_scale(h2, c), t_mul(h1, s));
                }}
        }}
    }}
    for (i64 i = 0; i < n; ++i) w[i] = a[i * n + i];
    if (!vectors) return;
    R small = EPS * (anorm > 0 ? anorm : (R)1);
    for (i64 k = n - 1; k >= 0; --k) {{
        T lam = a[k * n + k];
        for (i64 i = k - 1; i >= 0; --i) {{  /* x_i into a[i][k] */
            T s = a[i * n + k];
            for (i64 j = i + 1; j < k; ++j) s = t_add(s, t_mul(a[i * n + j], a[j * n + k]));
            T dd = t_sub(a[i * n + i], lam);
            if (t_abs(dd) < small) dd = t_real(small);
            a[i * n + k] = t_scale(t_div(s, dd), (R)-1);
        }}
        R nn = 0;
        i64 big = 0;
        R bigv = -1;
        for (i64 r = 0; r < n; ++r) {{  /* v[:, k] = Q x */
            T s = v[r * n + k];
            for (i64 j = 0; j < k; ++j) s = t_add(s, t_mul(v[r * n + j], a[j * n + k]));
            v[r * n + k] = s;
            R m2 = t_abs2(s);
            nn += m2;
            if (m2 > bigv) {{ bigv = m2; big = r; }}
        }}
        T ph = v[big * n + k];
        R pm = t_abs(ph);
        T scale = pm > 0 ? t_scale(t_conj(ph), 1 / (pm * R_SQRT(nn))) : t_real((R)1);
        for (i64 r = 0; r < n; ++r) v[r * n + k] = t_mul(v[r * n + k], scale);
        v[big * n + k] = t_real(t_re(v[big * n + k]));
    }}
"""
    return body, params


_BODIES = {"lu": _lu, "chol": _chol, "jeig": _jeig, "jsvd": _jsvd, "qr": _qr, "eig": _eig}


def _prefix(d: Dialect, key: str) -> str:
    """The prelude, float64 pragma and scalar helpers of compute key ``key``."""
    doubles = _REAL[key] == "double"
    return ((d.fp64 if doubles else "") + d.prelude
            + "#ifndef DEV\n#define DEV " + d.fn + "\n#endif\n" + d.compute_prelude
            + _types(d, key))


def _kernel(d: Dialect, s: Spec) -> tuple[str, str, list[str]]:
    name = f"fac_{s.kind}_{s.key}"
    if s.kind == "eig" and s.key[0] != "c":
        raise ValueError(f"the eig kernel computes in complex arithmetic; got key {s.key!r} "
                         f"(copy real input as complex first)")
    body, params = _BODIES[s.kind](d, d.glob)
    text = (f"{d.kernel} void {name}({', '.join(p for _, p in params)}) {{\n"
            + "    i64 bi = GRID_START;\n    if (bi >= nb) return;\n" + body + "}\n")
    return text, name, [t for t, _ in params]


def program(d: Dialect, s: Spec) -> tuple[str, str, list[str]]:
    """(source, kernel name, parameter types) of the kernel of ``s``."""
    text, name, types = _kernel(d, s)
    return _prefix(d, s.key) + text, name, types


def source_all(d: Dialect, key: str) -> str:
    """One program with every kernel family of ``key`` (the NVRTC test compiles it once)."""
    return _prefix(d, key) + "".join(
        _kernel(d, Spec("", kind, key))[0] for kind in KINDS if kind != "eig" or key[0] == "c")


def launch(device, kind: str, key: str, values: list, nb: int) -> None:
    """Enqueue the ``kind`` kernel of compute key ``key`` over ``nb`` matrices (one
    work-item each; work-groups of one on a CPU device, so matrices spread over cores)."""
    if nb == 0:
        return
    kernel = compiled(device, Spec(device.backend, kind, key), program, _kernels, _lock)
    hint = override_hint[-1] if override_hint else device.impl.launch_hint(device.index)
    local = 1 if hint == "cpu" else 64
    while local > kernel.max_local and local > 1:
        local //= 2
    kernel.launch(values, -(-nb // local) * local, local)
