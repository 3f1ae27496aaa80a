"""NumPy's products, polynomials and the linalg/fft extras on gpuarrays arrays (issue 31, E).

NumPy is the oracle: each function runs both ways -- ``np.<name>(garray)`` through the
protocol and ``ga.<name>(garray)`` -- on every device, and the values and dtype are
compared with NumPy's on the same host data.
"""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuarrays as ga

RNG = np.random.default_rng(31)
HYP = settings(max_examples=15, deadline=None, derandomize=True, database=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])


def _g(h, device):
    return ga.asarray(np.array(h, order="C"), device=device)


def _check(got, want, rtol=None, atol=None):
    want = np.asarray(want)
    assert isinstance(got, ga.GPUArray), type(got)
    g = got.get()
    assert g.dtype == want.dtype, (g.dtype, want.dtype)
    assert g.shape == want.shape, (g.shape, want.shape)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(g, want)
    else:
        eps = np.finfo(want.dtype).eps
        np.testing.assert_allclose(g, want, rtol=rtol or 200 * eps, atol=atol or 200 * eps)


def _data(shape, dt, seed=0):
    r = np.random.default_rng(seed)
    dt = np.dtype(dt)
    if dt.kind == "b":
        return r.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        return r.integers(0 if dt.kind == "u" else -4, 5, shape).astype(dt)
    h = r.integers(-4, 5, shape).astype(np.float64) / 2  # exact in float16
    if dt.kind == "c":
        h = h + 1j * (r.integers(-4, 5, shape) / 2)
    return h.astype(dt)


def _dtypes(device, names=("bool", "int32", "float16", "float32", "complex64")):
    return [np.dtype(n) for n in names if device.supports(np.dtype(n))]


def _both(name, device, *hosts, **kw):
    """``ga.<name>`` and ``np.<name>`` on the device arrays against NumPy on the hosts."""
    want = getattr(np, name)(*hosts, **kw)
    gs = [_g(h, device) if isinstance(h, np.ndarray) else h for h in hosts]
    _check(getattr(ga, name)(*gs, **kw), want)
    _check(getattr(np, name)(*gs, **kw), want)


# einsum ---------------------------------------------------------------------------------------
EINSUM_CASES = [
    ("ij,jk", [(3, 4), (4, 5)]),            # implicit output: ik
    ("ij,jk->ki", [(3, 4), (4, 5)]),        # explicit, transposed
    ("ba", [(3, 4)]),                       # implicit: alphabetical order -> transpose
    ("ii", [(3, 3)]),                       # trace
    ("ii->i", [(3, 3)]),                    # diagonal
    ("iij->j", [(3, 3, 2)]),                # diagonal of a stack, summed
    ("ij->", [(3, 4)]),
    ("i,j", [(3,), (4,)]),                  # outer
    ("i,i", [(3,), (3,)]),                  # inner
    ("ij,ij->ij", [(3, 4), (3, 4)]),        # elementwise
    ("ijk,ikl->ijl", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),  # ellipsis with broadcasting batch axes
    ("i...->...", [(3, 2, 2)]),
    ("...,...", [(2, 3), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ab,bc,cd,da", [(2, 3), (3, 2), (2, 4), (4, 2)]),
    ("i,i,i->", [(4,), (4,), (4,)]),
    ("ij,j->i", [(0, 3), (3,)]),            # zero-size
    ("ij,jk", [(2, 0), (0, 3)]),            # zero-size contraction: zeros
]


@pytest.mark.parametrize("sub,shapes", EINSUM_CASES)
def test_einsum_matches_numpy_both_routes_every_optimize(device, sub, shapes):
    hs = [_data(s, np.float32, k) for k, s in enumerate(shapes)]
    gs = [_g(h, device) for h in hs]
    for opt in (False, True, "greedy", "optimal"):
        _check(ga.einsum(sub, *gs, optimize=opt), np.einsum(sub, *hs, optimize=opt))
    _check(np.einsum(sub, *gs), np.einsum(sub, *hs))


def test_einsum_dtypes_noncontiguous_and_keywords(device):
    for dt in _dtypes(device, ("bool", "float16", "float32")):  # int32: the hypothesis test
        a, b = _data((4, 6), dt, 1), _data((6, 4), dt, 2)
        ga_, gb = _g(a, device), _g(b, device)
        # non-contiguous views: every other row, a transpose
        _check(ga.einsum("ij,jk->ik", ga_[::2], gb[:, ::2]),
               np.einsum("ij,jk->ik", a[::2], b[:, ::2]))
        _check(np.einsum("ii", ga_[:, :4]), np.einsum("ii", a[:, :4]))
    a, b = _data((3, 4), np.float32, 3), _data((4, 2), np.float32, 4)
    ga_, gb = _g(a, device), _g(b, device)
    if device.supports(np.float64):
        _check(np.einsum("ij,jk", ga_, gb, dtype=np.float64),
               np.einsum("ij,jk", a, b, dtype=np.float64))
    # the interleaved form, and an einsum_path list as optimize
    _check(ga.einsum(ga_, [0, 1], gb, [1, 2], [2, 0]), np.einsum(a, [0, 1], b, [1, 2], [2, 0]))
    c = _data((2, 5), np.float32, 5)
    path = np.einsum_path("ij,jk,kl", a, b, c, optimize="optimal")[0]
    _check(ga.einsum("ij,jk,kl", ga_, gb, _g(c, device), optimize=path),
           np.einsum("ij,jk,kl", a, b, c))
    out = ga.empty((3, 2), dtype=np.float32, device=device)
    assert np.einsum("ij,jk", ga_, gb, out=out) is out
    _check(out, a @ b)
    assert ga.einsum("ij,jk", ga_, gb, out=out) is out


def test_einsum_refuses_bad_subscripts_with_numpys_classes(device):
    a = _g(np.ones((2, 3), np.float32), device)
    with pytest.raises(ValueError, match="the operand has 2"):
        ga.einsum("ijk", a)
    with pytest.raises(ValueError, match="sizes"):
        ga.einsum("ij,ij", a, _g(np.ones((2, 4), np.float32), device))
    with pytest.raises(ValueError, match="names no input axis"):
        ga.einsum("ij->k", a)
    with pytest.raises(ValueError, match="operands"):
        ga.einsum("ij,jk", a)
    with pytest.raises(TypeError, match="casting"):
        ga.einsum("ij", _g(np.ones(3, np.float64 if device.supports(np.float64) else
                                   np.float32), device)[None], dtype=np.int8)
    with pytest.raises(ValueError, match="optimize"):
        ga.einsum("ij,jk,kl", a, a.T, a, optimize="fastest")


@given(st.data())
@HYP
def test_einsum_random_subscripts(device, data):
    letters = "abcd"
    sizes = {c: data.draw(st.integers(1, 3)) for c in letters}
    n_ops = data.draw(st.integers(1, 3))
    terms = [data.draw(st.lists(st.sampled_from(letters), min_size=0, max_size=3))
             for _ in range(n_ops)]
    used = sorted(set("".join("".join(t) for t in terms)))
    explicit = data.draw(st.booleans())
    sub = ",".join("".join(t) for t in terms)
    if explicit:
        out = data.draw(st.permutations(used))[:data.draw(st.integers(0, len(used)))]
        sub += "->" + "".join(out)
    hs = [_data(tuple(sizes[c] for c in t), np.int32, k) for k, t in enumerate(terms)]
    gs = [_g(h, device) for h in hs]
    opt = data.draw(st.sampled_from([False, True, "optimal"]))
    _check(ga.einsum(sub, *gs, optimize=opt), np.einsum(sub, *hs))


# inner, outer, kron, vdot, trace -------------------------------------------------------------
def test_inner_outer_kron_vdot_dtypes(device):
    # dtypes spread over the functions (each pair of a kernel and a dtype compiles once)
    for dt in _dtypes(device, ("bool", "float16", "complex64")):  # matmul's
        a, b = _data((3, 4), dt, 1), _data((2, 4), dt, 2)
        _both("inner", device, a, b)
        _both("vdot", device, a, _data((4, 3), dt, 3))
        _both("inner", device, a[0], b[1])
    for dt in _dtypes(device, ("bool", "int32", "float16")):  # multiply's
        a, b = _data((3, 4), dt, 1), _data((2, 4), dt, 2)
        _both("outer", device, a, b)
        _both("kron", device, a, b)
    a, b = _data((5, 4), np.float32, 4), _data((4, 6), np.float32, 5)
    ga_, gb = _g(a, device), _g(b, device)
    _check(ga.inner(ga_[::2], gb.T[::3]), np.inner(a[::2], b.T[::3]))
    _check(np.kron(ga_.T, gb[:, ::2]), np.kron(a.T, b[:, ::2]))
    _check(np.kron(ga_[0], gb), np.kron(a[0], b))  # different ndims
    _check(np.outer(ga_.T, gb[::2]), np.outer(a.T, b[::2]))
    _check(np.vdot(ga_.T, gb.T[:5, :4]), np.vdot(a.T, b.T[:5, :4]))
    _check(np.inner(ga_, _g(np.float32(2), device)), np.inner(a, np.float32(2)))
    z4 = np.zeros((0, 4), np.float32)
    _check(np.inner(_g(z4, device), ga_), np.inner(z4, a))
    z = np.zeros((0, 3), np.float32)
    _both("kron", device, z, a)
    _both("outer", device, z, a)
    _both("vdot", device, z, z)
    out = ga.empty((20, 24), dtype=np.float32, device=device)
    assert np.outer(ga_, gb, out=out) is out
    _check(out, np.outer(a, b))
    with pytest.raises(ValueError, match="last axes"):
        ga.inner(ga_, gb)
    with pytest.raises(ValueError, match="as many"):
        np.vdot(ga_, gb)


def test_trace_offsets_axes_dtypes(device):
    for dt in _dtypes(device, ("bool", "uint8", "float16", "float32")):
        h = _data((3, 4, 5), dt, 6)
        for kw in ({}, {"offset": 1}, {"offset": -2, "axis1": 1, "axis2": 2},
                   {"offset": 1, "axis1": 2, "axis2": 0}, {"offset": 7}):
            _both("trace", device, h, **kw)
        _both("trace", device, h[:, ::2].T)
    h = _data((3, 3), np.int32, 7)
    _both("trace", device, h, dtype=np.float32)
    out = ga.empty((), dtype=np.int64, device=device)
    assert np.trace(_g(h, device), out=out) is out
    _check(out, np.trace(h))
    with pytest.raises(ValueError, match="2 dimensions"):
        ga.trace(_g(h[0], device))


# cross -------------------------------------------------------------------------------------
def _numpy_crosses_2_vectors() -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            np.cross(np.ones(2), np.ones(2))
    except ValueError:  # NumPy 2.5: "Both input arrays must be (arrays of) 3-dimensional ..."
        return False
    return True


NUMPY_CROSSES_2_VECTORS = _numpy_crosses_2_vectors()


def _cross_of_2_vectors(a, b):
    """NumPy 2.0-2.4's cross of 2-element vectors (a zero z component; two of them give the
    z component only), from 3-element cross products, which every NumPy has."""
    def pad(v):
        return np.concatenate([v, np.zeros(v.shape[:-1] + (3 - v.shape[-1],), v.dtype)], -1)
    c = np.cross(pad(a), pad(b))
    return c[..., 2] if a.shape[-1] == b.shape[-1] == 2 else c


def test_cross_vectors_axes_and_broadcasting(device):
    for dt in _dtypes(device, ("int32", "float16", "float32")):
        a, b = _data((4, 3), dt, 1), _data((4, 3), dt, 2)
        _both("cross", device, a, b)
        _both("cross", device, a[::2], b[1])               # broadcast outside the vector axis
        _both("cross", device, a.T, b.T, axisa=0, axisb=0, axisc=0)
        _both("cross", device, a.T, b, axisa=0, axisc=0)
        _both("cross", device, a.T, b.T, axis=0)
    a, b = _data((2, 4, 3), np.float32, 3), _data((3, 4), np.float32, 4)
    _both("cross", device, a, b, axisb=0, axisc=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for x, y in (((4, 2), (4, 2)), ((4, 2), (4, 3)), ((4, 3), (4, 2)), ((2,), (4, 2))):
            a, b = _data(x, np.float32, 5), _data(y, np.float32, 6)
            want = _cross_of_2_vectors(a, b)
            if NUMPY_CROSSES_2_VECTORS:  # NumPy <= 2.4 (deprecated); 2.5 refuses them
                np.testing.assert_array_equal(np.cross(a, b), want)  # the reference is NumPy's
            for f in (ga.cross, np.cross):  # np.cross dispatches to gpuarrays on 2.5 as well
                _check(f(_g(a, device), _g(b, device)), want)
    with pytest.warns(DeprecationWarning):
        ga.cross(_g(_data((2,), np.float32), device), _g(_data((2,), np.float32), device))
    with pytest.raises(ValueError, match="must be 2 or 3"):
        ga.cross(_g(np.ones(4, np.float32), device), _g(np.ones(4, np.float32), device))
    with pytest.raises(TypeError, match="numeric"):
        np.cross(_g(np.ones(3, bool), device), _g(np.ones(3, bool), device))


# convolve, correlate -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["convolve", "correlate"])
def test_convolve_correlate_every_mode_and_length(device, name):
    ct = np.complex128 if device.supports(np.complex128) else np.complex64
    for n in (1, 2, 5, 6):
        for m in (1, 3, 4, 8):
            a, v = _data((n,), ct, n), _data((m,), ct, 10 + m)  # complex: conjugation
            for mode in ("full", "same", "valid"):
                _both(name, device, a, v, mode=mode)
    for dt in _dtypes(device, ("bool", "float16", "float32")):
        a, v = _data((9,), dt, 1), _data((3,), dt, 2)
        _both(name, device, a, v)
        _check(getattr(np, name)(_g(a, device)[::2], _g(v, device)[::-1], "full"),
               getattr(np, name)(a[::2], v[::-1], "full"))
    with pytest.raises(ValueError, match="empty"):
        getattr(ga, name)(_g(np.zeros(0, np.float32), device), _g(np.ones(2, np.float32),
                                                                   device))
    with pytest.raises(ValueError, match="mode"):
        getattr(ga, name)(_g(np.ones(3, np.float32), device), _g(np.ones(2, np.float32),
                                                                  device), "middle")


# gpuarrays.linalg: lstsq, cond, tensorinv, tensorsolve ----------------------------------------
def _f64(device):
    return np.float64 if device.supports(np.float64) else np.float32


@pytest.mark.parametrize("sa,sb", [((5, 3), (5,)), ((5, 3), (5, 2)), ((3, 5), (3,)),
                                   ((4, 4), (4, 2)), ((0, 2), (0,)), ((3, 0), (3,)),
                                   ((3, 2), (3, 0))])
def test_lstsq_four_results_as_numpy(device, sa, sb):
    ft = _f64(device)
    a, b = RNG.standard_normal(sa).astype(ft), RNG.standard_normal(sb).astype(ft)
    want = np.linalg.lstsq(a, b)
    for got in (ga.linalg.lstsq(_g(a, device), _g(b, device)),
                np.linalg.lstsq(_g(a, device), _g(b, device))):
        for i in (0, 1, 3):
            _check(got[i], want[i], rtol=1e-4, atol=1e-4)
        assert got[2] == want[2]


def test_lstsq_rank_deficient_complex_integer_and_rcond(device):
    ft = _f64(device)
    a = np.ones((5, 3), ft)
    a[:, 2] = a[:, 1]
    b = RNG.standard_normal(5).astype(ft)
    got, want = np.linalg.lstsq(_g(a, device), _g(b, device)), np.linalg.lstsq(a, b)
    assert got[2] == want[2] == 1
    for i in (0, 1, 3):
        _check(got[i], want[i], rtol=1e-4, atol=1e-4)
    ct = np.complex128 if device.supports(np.complex128) else np.complex64
    c = (RNG.standard_normal((5, 3)) + 1j * RNG.standard_normal((5, 3))).astype(ct)
    cb = (RNG.standard_normal((5, 2)) + 1j * RNG.standard_normal((5, 2))).astype(ct)
    got, want = np.linalg.lstsq(_g(c, device)[:, ::1], _g(cb, device)), np.linalg.lstsq(c, cb)
    for i in (0, 1, 3):
        _check(got[i], want[i], rtol=1e-4, atol=1e-4)
    if device.supports(np.float64):  # NumPy's int -> float64
        ai, bi = RNG.integers(-3, 4, (6, 3)), RNG.integers(-3, 4, 6)
        got, want = np.linalg.lstsq(_g(ai, device), _g(bi, device)), np.linalg.lstsq(ai, bi)
        _check(got[0], want[0], rtol=1e-6, atol=1e-6)
    got = np.linalg.lstsq(_g(a, device), _g(b, device), rcond=0.9)
    assert got[2] == np.linalg.lstsq(a, b, rcond=0.9)[2]
    with pytest.raises(np.linalg.LinAlgError, match="two-dimensional"):
        ga.linalg.lstsq(_g(np.ones((2, 2, 2), ft), device), _g(np.ones((2, 2), ft), device))


def test_cond_every_p_and_tensor_solvers(device):
    for ft in (_f64(device),):
        m = RNG.standard_normal((2, 3, 3)).astype(ft)
        for p in (None, 2, -2, "fro", "nuc", 1, -1, np.inf, -np.inf):
            want = np.linalg.cond(m, p)
            _check(np.linalg.cond(_g(m, device), p), want, rtol=1e-3, atol=1e-3)
            _check(ga.linalg.cond(_g(m, device).mT, p), np.linalg.cond(m.transpose(0, 2, 1), p),
                   rtol=1e-3, atol=1e-3)
    ft = _f64(device)
    assert float(np.linalg.cond(_g(np.ones((2, 2), ft), device)).get()) > 1e6  # singular
    with pytest.raises(ValueError, match="invalid p"):
        ga.linalg.cond(_g(np.eye(2, dtype=ft), device), 3)
    t = RNG.standard_normal((4, 6, 8, 3)).astype(ft)
    _check(np.linalg.tensorinv(_g(t, device), ind=2), np.linalg.tensorinv(t, ind=2),
           rtol=1e-3, atol=1e-3)
    t1 = RNG.standard_normal((6, 2, 3)).astype(ft)
    _check(ga.linalg.tensorinv(_g(t1, device), ind=1), np.linalg.tensorinv(t1, ind=1),
           rtol=1e-3, atol=1e-3)
    with pytest.raises(np.linalg.LinAlgError):
        ga.linalg.tensorinv(_g(t1, device), ind=2)
    a, b = RNG.standard_normal((2, 3, 6)).astype(ft), RNG.standard_normal((2, 3)).astype(ft)
    _check(np.linalg.tensorsolve(_g(a, device), _g(b, device)), np.linalg.tensorsolve(a, b),
           rtol=1e-3, atol=1e-3)
    a3 = RNG.standard_normal((6, 2, 3)).astype(ft)
    _check(np.linalg.tensorsolve(_g(a3, device), _g(b, device), axes=(0,)),
           np.linalg.tensorsolve(a3, b, axes=(0,)), rtol=1e-3, atol=1e-3)
    with pytest.raises(np.linalg.LinAlgError):
        ga.linalg.tensorsolve(_g(a[:, :, :5], device), _g(b, device))


# argument fixes: norms of ints/bools, svd/qr keywords, empty eig, bool/float16 fft ----------
def test_norms_of_integer_and_bool_input_as_numpy(device):
    for dt in (np.int8, np.int64, bool):
        x = RNG.integers(0, 3, (3, 4)).astype(dt)
        g = _g(x, device)
        want_dt = np.linalg.norm(x).dtype if device.supports(np.float64) else np.float32
        for kw in ({}, {"ord": 1}, {"axis": 0}, {"ord": np.inf, "axis": 1}, {"ord": "nuc"},
                   {"ord": -2}, {"keepdims": True}, {"ord": 0, "axis": 1}):
            want = np.linalg.norm(x, **kw).astype(want_dt)
            _check(np.linalg.norm(g, **kw), want, rtol=1e-4, atol=1e-4)
        _check(np.linalg.vector_norm(g[:, ::2], ord=3),
               np.linalg.vector_norm(x[:, ::2], ord=3).astype(want_dt), rtol=1e-4)
        _check(ga.linalg.matrix_norm(g.T, ord="fro"),
               np.linalg.matrix_norm(x.T, ord="fro").astype(want_dt), rtol=1e-4)


def test_linalg_norm_numpys_signature(device):
    ft = _f64(device)
    x = RNG.standard_normal((3, 4, 5)).astype(ft)
    g = _g(x, device)
    for kw in ({}, {"keepdims": True}, {"axis": 1}, {"axis": (0, 2)}, {"axis": -1, "ord": 3},
               {"axis": (2, 0), "ord": 1, "keepdims": True}, {"axis": (0, 1), "ord": "nuc"}):
        want = np.linalg.norm(x, **kw)
        _check(ga.linalg.norm(g, **kw), want, rtol=1e-4, atol=1e-4)
        _check(np.linalg.norm(g, **kw), want, rtol=1e-4, atol=1e-4)
    for o in (None, "fro", "nuc", 1, -1, 2, -2, np.inf):
        _check(ga.linalg.norm(g[0].T, o), np.linalg.norm(x[0].T, o), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="dimensions"):
        ga.linalg.norm(g, ord=1)
    with pytest.raises(ValueError, match="for vectors"):
        ga.linalg.norm(g, ord="fro", axis=0)


def test_svd_compute_uv_hermitian_and_qr_modes(device):
    ft = _f64(device)
    for shape in ((4, 3), (3, 5), (2, 4, 3)):
        x = RNG.standard_normal(shape).astype(ft)
        g = _g(x, device)
        _check(np.linalg.svd(g, compute_uv=False), np.linalg.svd(x, compute_uv=False),
               rtol=1e-4, atol=1e-4)
        u, s, vh = np.linalg.svd(g, full_matrices=False)
        _check(s, np.linalg.svd(x)[1], rtol=1e-4, atol=1e-4)
        _check(np.linalg.qr(g, mode="r"), np.linalg.qr(x, mode="r"), rtol=1e-4, atol=1e-4)
        h, tau = np.linalg.qr(g, mode="raw")
        wh, wtau = np.linalg.qr(x, mode="raw")
        _check(h, wh, rtol=1e-4, atol=1e-4)
        _check(tau, wtau, rtol=1e-4, atol=1e-4)
        q, r = np.linalg.qr(g, mode="complete")
        _check(ga.matmul(q, r), x, rtol=1e-4, atol=1e-4)
    sym = RNG.standard_normal((3, 3)).astype(ft)
    sym = sym + sym.T
    _check(np.linalg.svd(_g(sym, device), hermitian=True)[1],
           np.linalg.svd(sym, hermitian=True)[1], rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="mode"):
        ga.linalg.qr(_g(sym, device), mode="economic")


def test_eigenvalues_of_empty_matrices_keep_numpys_dtype(device):
    for dt in _dtypes(device, ("float32", "float64", "int32", "complex64")):
        e = np.zeros((0, 0), dt)
        if not device.supports(np.linalg.eigvals(e).dtype):
            continue
        _check(ga.linalg.eigvals(_g(e, device)), np.linalg.eigvals(e))
        w, v = ga.linalg.eig(_g(e, device))
        _check(w, np.linalg.eig(e)[0])
        _check(v, np.linalg.eig(e)[1])
        e3 = np.zeros((2, 0, 0), dt)
        _check(ga.linalg.eigvals(_g(e3, device)), np.linalg.eigvals(e3))


def test_fft2_family_both_routes(device):
    ft = _f64(device)
    x = RNG.standard_normal((3, 4, 6)).astype(ft)
    g = _g(x, device)
    for name in ("fft2", "ifft2", "rfft2", "irfft2"):
        for kw in ({}, {"axes": (0, 2)}, {"s": (4, 8)}, {"norm": "ortho"},
                   {"s": (2, 3), "axes": (2, 0)}, {"norm": "forward"}):
            want = getattr(np.fft, name)(x, **kw)
            _check(getattr(ga.fft, name)(g, **kw), want, rtol=1e-4, atol=1e-4)
            _check(getattr(np.fft, name)(g, **kw), want, rtol=1e-4, atol=1e-4)
        _check(getattr(np.fft, name)(g[:, ::2].mT), getattr(np.fft, name)(x[:, ::2].swapaxes(-1,
                                                                                          -2)),
               rtol=1e-4, atol=1e-4)
        want = getattr(np.fft, name)(x)
        out = ga.empty(want.shape, dtype=want.dtype, device=device)
        assert getattr(np.fft, name)(g, out=out) is out
        _check(out, want, rtol=1e-4, atol=1e-4)


def test_fft_of_bool_and_float16_input_in_numpys_dtypes(device):
    b = RNG.integers(0, 2, (4, 6)).astype(bool)
    g = _g(b, device)
    for name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "rfftn", "irfftn",
                 "fft2"):
        want = getattr(np.fft, name)(b)
        if not device.supports(want.dtype):
            continue
        _check(getattr(np.fft, name)(g), want, rtol=1e-5, atol=1e-5)
    if device.supports(np.float16):
        h = RNG.standard_normal((4, 6)).astype(np.float16)
        for name in ("fft", "irfft", "hfft", "rfft", "ihfft", "irfftn", "fft2"):
            want = getattr(np.fft, name)(h)
            _check(getattr(ga.fft, name)(_g(h, device)), want, rtol=1e-2, atol=1e-2)


# polynomials ---------------------------------------------------------------------------------
def _sorted_check(got, want, tol):
    want = np.asarray(want)
    g = got.get()
    assert g.dtype == want.dtype and g.shape == want.shape, (g.dtype, want.dtype, g.shape)
    np.testing.assert_allclose(np.sort(g), np.sort(want), rtol=tol, atol=tol)


def test_poly_and_roots(device):
    ft = _f64(device)
    ct = np.complex128 if ft == np.float64 else np.complex64
    cases = [np.array([1, 2, 3], ft), np.array([1 + 1j, 1 - 1j, 2], ct),
             np.array([1 + 1j, 2], ct), np.array([], ft), np.array([3], ft)]
    if ft == np.float64:
        cases += [np.array([1, 2, 3]), np.array([True, False])]  # ints/bools: float64
    for z in cases:
        want = np.poly(z)
        for got in (ga.poly(_g(z, device)), np.poly(_g(z, device))):
            if np.ndim(want) == 0:
                assert got == want
            else:
                _check(got, want, rtol=1e-4, atol=1e-4)
    m = RNG.standard_normal((3, 3)).astype(ft)
    _check(np.poly(_g(m, device)), np.poly(m), rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match="square"):
        ga.poly(_g(np.ones((2, 3), ft), device))
    for p in (np.array([1, -3, 2], ft), np.array([1, 0, 1], ft),
              np.array([0, 0, 1, -3, 2, 0, 0], ft),
              np.array([0, 0], ft), np.array([5], ft), np.array([1, -6, 11, -6], ft),
              np.array([1 + 1j, 2, 3], ct)):
        want = np.roots(p)
        if want.dtype == np.float64 and ft != np.float64:
            want = want.astype(ft)
        for got in (ga.roots(_g(p, device)), np.roots(_g(p, device)[::1])):
            _sorted_check(got, want, 1e-3 if p.dtype == np.float32 else 1e-6)
    if ft == np.float64:
        _sorted_check(np.roots(_g(np.array([2, 3, -4], np.int32), device)),
                      np.roots(np.array([2, 3, -4], np.int32)), 1e-6)


def test_polyadd_polysub_polymul_polyval(device):
    for dt1, dt2 in ((np.float32, np.int32), (np.int32, np.int32)):
        if not (device.supports(dt1) and device.supports(dt2)):
            continue
        a, b = _data((3,), dt1, 1), _data((2,), dt2, 2)
        for name in ("polyadd", "polysub", "polymul"):
            for x, y in ((a, b), (b, a), (a, a), (a[:1].reshape(()), b)):
                _both(name, device, x, y)
        xs = _data((3, 4), dt1, 3)
        for p in (a, b, a[:0], a[1:2]):
            _both("polyval", device, p, xs)
            _both("polyval", device, p, xs[:, ::2].T)
    p = _data((3,), np.float32, 4)
    _check(np.polyval(_g(p, device), 2.5), np.polyval(p, 2.5).astype(
        np.float64 if device.supports(np.float64) else np.float32))
    _check(ga.polyval(_g(p, device), np.float32(2)), np.polyval(p, np.float32(2)))
    with pytest.raises(TypeError):
        np.polysub(_g(np.ones(2, bool), device), _g(np.ones(2, bool), device))


def test_polyfit_full_weights_cov_and_rank_warning(device):
    ft = _f64(device)
    x = np.linspace(0, 1, 12).astype(ft)
    y = (3 * x ** 2 - x + 0.5 + RNG.standard_normal(12) * 0.01).astype(ft)
    y2 = np.stack([y, 2 * y], 1)
    tol = 1e-6 if ft == np.float64 else 2e-3
    for kw in ({}, {"full": True}, {"w": x + 1}, {"cov": True}, {"cov": "unscaled"},
               {"rcond": 1e-3}):
        for yy in (y, y2):
            gkw = {k: _g(v, device) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
            got = np.polyfit(_g(x, device), _g(yy, device), 2, **gkw)
            want = np.polyfit(x, yy, 2, **kw)
            if isinstance(want, tuple):
                assert len(got) == len(want)
                for g, w in zip(got, want, strict=True):
                    if isinstance(w, np.ndarray):
                        _check(g, w, rtol=tol, atol=tol)
                    else:
                        assert np.isclose(g, w) and type(g) is type(w), (g, w)
            else:
                _check(got, want, rtol=tol, atol=tol)
    _check(ga.polyfit(_g(x[::2], device), _g(y[::2], device), 1), np.polyfit(x[::2], y[::2], 1),
           rtol=tol, atol=tol)
    with pytest.warns(np.exceptions.RankWarning):
        ga.polyfit(_g(np.ones(3, ft), device), _g(x[:3], device), 2)
    with pytest.raises(ValueError, match="deg"):
        ga.polyfit(_g(x, device), _g(y, device), -1)
    with pytest.raises(TypeError, match="same length"):
        ga.polyfit(_g(x, device), _g(y[:5], device), 1)


# Python scalars and lists beside a device array (NumPy programs' literals) -------------------
def test_python_literals_beside_a_device_array(device):
    ft = _f64(device)
    a = _data((5,), np.float32, 1)
    g = _g(a, device)
    for name, args in (("convolve", (a, [1.0, 2.0, 1.0])), ("correlate", ([1, 2], a)),
                       ("inner", (a, 2)), ("outer", (a, 2)), ("kron", (a, [1, 2])),
                       ("vdot", (a, [1, 2, 3, 4, 5])), ("cross", (a[:3], [1.0, 0.0, 0.0]))):
        want = getattr(np, name)(*args)
        if want.dtype == np.float64:
            want = want.astype(ft)
        gargs = [(g if x.shape == (5,) else g[:3]) if isinstance(x, np.ndarray) else x
                 for x in args]
        _check(getattr(np, name)(*gargs), want)
        _check(getattr(ga, name)(*gargs), want)
    want = np.einsum("i,i->", a, [1, 2, 3, 4, 5])
    _check(np.einsum("i,i->", g, [1, 2, 3, 4, 5]), want)


# the pool: every temporary goes back -----------------------------------------------------------
def test_temporaries_are_freed(device, used):
    ft = _f64(device)
    a = _g(RNG.standard_normal((4, 5)).astype(ft), device)
    b = _g(RNG.standard_normal((5, 3)).astype(ft), device)
    c = _g(RNG.standard_normal((3, 4)).astype(ft), device)
    v = _g(RNG.standard_normal(7).astype(ft), device)
    bools = _g(np.ones((4, 5), bool), device)
    calls = [
        lambda: ga.einsum("ij,jk,kl->il", a, b, c, optimize=True),
        lambda: ga.einsum("ij,jk,kl->li", a, b, c), lambda: ga.einsum("ii->i", a[:4, :4]),
        lambda: ga.einsum("...j,j", a, b[:, 0]), lambda: np.einsum("ij,ij->", bools, bools),
        lambda: ga.inner(a, b.T), lambda: ga.kron(a, c), lambda: ga.vdot(a, a),
        lambda: ga.trace(a), lambda: ga.cross(b, b[::-1]), lambda: ga.convolve(v, v[:3]),
        lambda: ga.correlate(v[:3], v, "same"),
        lambda: ga.linalg.lstsq(a.T, b), lambda: ga.linalg.cond(a[:4, :4], 1),
        lambda: ga.linalg.qr(a, mode="raw"), lambda: ga.linalg.tensorinv(a[:4, :4], ind=1),
        lambda: np.linalg.norm(bools), lambda: ga.poly(v[:3]), lambda: ga.roots(v[:4]),
        lambda: ga.polyfit(v, v, 2, cov=True), lambda: ga.polyval(v[:3], a),
        lambda: ga.polymul(v, v[:2]), lambda: ga.fft.rfft2(a), lambda: ga.fft.irfft(bools),
    ]
    for call in calls:
        call()  # kernels compiled, caches warm
    before = used()
    gc.disable()  # no reference cycle may keep a temporary's memory until a collection
    try:
        for k, call in enumerate(calls):
            r = call()
            for x in (r if isinstance(r, tuple) else (r,)):
                if isinstance(x, ga.GPUArray):
                    x.free()
            assert ga.memory_stats(device)["used_bytes"] == before, k
    finally:
        gc.enable()
