"""Linear algebra on every device, NumPy as the oracle (docs/linalg.md): matmul and ``@``
(stacks, broadcasting, 1-d operands, 1x1, empty, strided and transposed views, every
numeric dtype class, integer wrapping), tensordot, vecdot, matrix_transpose, the linalg
extension, which functions run on which device (the table in docs/linalg.md), errors
refused before anything is allocated, cached loops that allocate nothing, and the CUDA
kernels compiled with NVRTC.  Few dtypes x shapes per compiled signature: a PoCL
compile costs about a second."""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuarrays as ga
import gpuarrays.linalg as gl
from gpuarrays._compute.device import matmul as device_matmul

ROOT = pathlib.Path(__file__).resolve().parents[1]


def values(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        lo = 0 if dt.kind == "u" else -9
        return rng.integers(lo, 10, shape).astype(dt)
    v = rng.standard_normal(shape)
    if dt.kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return np.asarray(v).astype(dt)


def check(got, want: np.ndarray, k: int = 1) -> None:
    """Values of ``got`` (a gpuarrays array) against NumPy's ``want``: integers exactly,
    floats within ``k`` (the summed length) times a few epsilons of the magnitudes."""
    g = got.get() if hasattr(got, "get") else got
    assert g.shape == want.shape, (g.shape, want.shape)
    assert g.dtype == want.dtype, (g.dtype, want.dtype)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(g, want)
        return
    eps = np.finfo(want.dtype).eps
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(g, want, rtol=8 * eps * max(k, 1),
                               atol=8 * eps * max(k, 1) * scale)


def put(x: np.ndarray, device):
    return ga.asarray(x, device=device)


# matmul -------------------------------------------------------------------------------
SHAPES = [((70, 3), (3, 130)), ((2, 1, 5, 67), (3, 67, 65)), ((1, 1), (1, 1)),
          ((0, 4), (4, 3)), ((4, 0), (0, 3)), ((5,), (5, 70)), ((70, 5), (5,)), ((7,), (7,)),
          ((3, 33, 17), (17,)), ((1, 65, 2), (4, 2, 64)),
          ((9, 300), (300, 70))]  # K in two chunks on CPU OpenCL devices


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "int8", "uint32"])
def test_matmul_matches_numpy(device, dtype):
    if not device.supports(np.dtype(dtype)):  # a device without float64
        with pytest.raises(ga.UnsupportedDTypeError):
            put(values((2, 2), dtype), device)
        return
    for k, (sa, sb) in enumerate(SHAPES):
        a, b = values(sa, dtype, k), values(sb, dtype, k + 50)
        check(ga.matmul(put(a, device), put(b, device)), np.matmul(a, b), sa[-1])


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_matmul_layouts_hypothesis(device, data):
    """Random batch shapes (broadcast), sizes, transposed and reversed operands."""
    batch_a = tuple(data.draw(st.lists(st.sampled_from([1, 2, 3]), max_size=2)))
    batch_b = tuple(n if data.draw(st.booleans()) else 1 for n in batch_a)
    m, k, n = (data.draw(st.integers(1, 70)) for _ in range(3))
    a = values((*batch_a, k, m) if data.draw(st.booleans()) else (*batch_a, m, k), "float32", 1)
    b = values((*batch_b, n, k) if data.draw(st.booleans()) else (*batch_b, k, n), "float32", 2)
    A, B = put(a, device), put(b, device)
    if a.shape[-2:] != (m, k):
        a, A = np.swapaxes(a, -1, -2), A.mT
    if b.shape[-2:] != (k, n):
        b, B = np.swapaxes(b, -1, -2), B.mT
    if data.draw(st.booleans()):
        a, A = a[..., ::-1, :], A[..., ::-1, :]
    check(A @ B, a @ b, k)


@pytest.mark.parametrize("name", [str(d) for d in ga.devices()
                                  if d.index == 0 and d.backend != "cpu"])
def test_the_gpu_tiled_kernel_on_every_device_back_end(name):
    """The local-memory kernel GPUs take (the CUDA one is the same source in CUDA C), run on
    every device back-end here -- on PoCL too -- in both read orders, with edges."""
    device = ga.get_device(name)
    for dtype in ("float32", "complex64", "int16"):
        a = values((2, 70, 37), dtype, 1)
        b = values((37, 65), dtype, 2)
        for ta, tb in ((False, False), (True, True)):
            A = put(np.ascontiguousarray(np.swapaxes(a, -1, -2)), device).mT if ta else put(a, device)
            B = put(np.ascontiguousarray(b.T), device).mT if tb else put(b, device)
            out = ga.empty((2, 70, 65), dtype=dtype, device=device)
            device_matmul.run(A, B, out, hint="gpu")
            check(out, a @ b, 37)


def test_integer_matmul_wraps_like_numpy(device):
    a = np.full((3, 40), 100, np.int8)
    b = np.full((40, 5), 7, np.int8)
    check(put(a, device) @ put(b, device), a @ b)  # 28 000 wraps in int8
    a64 = np.full((2, 3), 2**62, np.int64)
    check(put(a64, device) @ put(a64.T.copy(), device), a64 @ a64.T)


def test_matmul_strided_transposed_and_offset_views(device):
    for dtype in ("float32", "complex64"):
        a = values((90, 80), dtype, 1)
        b = values((135, 50), dtype, 2)
        A, B = put(a, device), put(b, device)
        check(A[::-2, 1:].T @ B[::3, ::-1], a[::-2, 1:].T @ b[::3, ::-1], 45)
        check(A.T @ A, a.T @ a, 90)
        check(A[:50] @ B[:80].mT.mT[:, 3:40], a[:50] @ b[:80][:, 3:40], 80)
        check(ga.matmul(A[5:9], A[3:83, ::-1]), a[5:9] @ a[3:83, ::-1], 80)
    # a view whose address is not a multiple of its element: an aligned device copy
    v = values((5, 13), "float32", 3)
    raw = np.zeros(v.nbytes + 1, np.uint8)
    raw[1:] = v.reshape(-1).view(np.uint8)
    odd = put(raw, device)[1:].view(ga.float32).reshape((5, 13))
    check(odd @ odd.T, v @ v.T, 13)


def test_matmul_mixed_dtypes_promote_as_numpy(device):
    a = values((6, 9), "int8", 3)
    b = values((9, 4), "float32", 4)
    check(put(a, device) @ put(b, device), a @ b, 9)
    u = values((3, 4), "uint16", 5)
    i = values((4, 2), "int16", 6)
    check(put(u, device) @ put(i, device), u @ i)


def test_matmul_operator_forms(device):
    a, b = values((4, 4), "float32", 1), values((4, 4), "float32", 2)
    A, B = put(a, device), put(b, device)
    check(A @ B, a @ b, 4)
    check(B.__rmatmul__(A), a @ b, 4)
    keep = A
    A @= B
    assert A is keep
    check(A, a @ b, 4)
    with pytest.raises(TypeError):
        A @ np.ones((4, 4), np.float32)
    with pytest.raises(TypeError):
        A @ 2
    with pytest.raises(ValueError, match="change x1's shape"):
        A @= put(values((4, 2), "float32"), device)
    with pytest.raises(TypeError, match="same_kind"):
        ints = put(values((4, 4), "int32"), device)
        ints @= B
    with pytest.raises(ValueError, match="read-only"):
        view = ga.broadcast_to(B[0], (4, 4))
        view @= B


def test_matmul_of_bools_is_numpys(device):
    """bool @ bool is bool ("any of the ands"), bool beside a number takes its dtype, as
    NumPy's matmul (issue 31: NumPy's operand kinds)."""
    m = values((5, 7), "float32") > 0
    g = put(m, device)
    got = g @ g.mT
    assert got.dtype == np.bool_ and got.get().tolist() == (m @ m.T).tolist()
    w = values((7, 3), "int16")
    mixed = np.matmul(g, put(w, device))
    assert mixed.dtype == np.int16
    np.testing.assert_array_equal(mixed.get(), m @ w)


def test_matmul_refuses_bad_input_before_allocating(device):
    a = put(values((3, 4), "float32"), device)
    mask = a > 0
    scalar = ga.asarray(np.float32(1), device=device)
    s1 = put(values((2, 3, 4), "float32"), device)
    s2 = put(values((3, 4, 2), "float32"), device)
    cases = [
        (TypeError, lambda: ga.matmul(a, np.ones((4, 2)))),
        (ValueError, lambda: ga.matmul(a, a)),
        (ValueError, lambda: ga.matmul(scalar, a)),
        (ValueError, lambda: ga.matmul(s1, s2)),
        (ValueError, lambda: ga.tensordot(a, a, axes=([0], [1]))),
        (ValueError, lambda: ga.vecdot(a, s2)),
    ]
    for error, call in cases:
        with ga.record_allocations() as rec, pytest.raises(error):
            call()
        assert rec.count == 0, call
    other = "cpu:0" if device.backend != "cpu" else None
    if other is not None:
        with pytest.raises(ValueError, match="different devices"):
            ga.matmul(a, ga.ones((4, 2), dtype=ga.float32, device=other))
    b = put(values((4, 2), "float32"), device)
    b.free()
    with pytest.raises(ga.FreedArrayError):
        a @ b


def test_matmul_in_a_cached_loop_allocates_nothing_after_the_first(device):
    a = put(values((20, 33), "float32"), device)
    b = put(values((40, 33), "float32"), device)
    cache = ga.AllocCache()
    with ga.cached(cache):
        c = a @ b.mT  # a transposed B: a device copy on CPU devices, from the cache
        c = a @ b.mT  # two results alive while c is rebound: two buffers (docs/design.md)
        for _ in range(2):
            with ga.record_allocations() as rec:
                c = a @ b.mT
            assert rec.count == 0
        out = c.get()
    np.testing.assert_allclose(out, a.get() @ b.get().T, rtol=1e-4, atol=1e-4)
    del c
    cache.free()


# tensordot, vecdot, matrix_transpose ---------------------------------------------------
def test_tensordot_matches_numpy(device):
    x = values((3, 4, 5), "float64" if device.supports(np.dtype("float64")) else "float32", 1)
    y = values((4, 5, 2), x.dtype, 2)
    X, Y = put(x, device), put(y, device)
    for axes in (2, 0, ([1, 2], [0, 1]), ([2, 1], [1, 0]), ([1], [0])):
        check(ga.tensordot(X, Y, axes=axes), np.tensordot(x, y, axes=axes), 20)
    z = values((5, 3), x.dtype, 3)
    check(ga.tensordot(X, put(z, device), axes=([2, 0], [0, 1])),
          np.tensordot(x, z, axes=([2, 0], [0, 1])), 15)
    check(gl.tensordot(X[:, ::-1], Y[::-1], axes=([1], [0])),
          np.tensordot(x[:, ::-1], y[::-1], axes=([1], [0])), 4)
    with pytest.raises(ValueError, match="differ"):
        ga.tensordot(X, Y, axes=([0], [0]))
    with pytest.raises(ValueError):
        ga.tensordot(X, Y, axes=4)
    with pytest.raises(TypeError):
        ga.tensordot(X, Y, axes="x")


def test_vecdot_conjugates_and_broadcasts(device):
    x = values((2, 3, 6), "complex64", 1)
    y = values((3, 6), "complex64", 2)
    X, Y = put(x, device), put(y, device)
    check(ga.vecdot(X, Y), np.vecdot(x, y), 6)
    check(gl.vecdot(X, Y, axis=-1), np.vecdot(x, y), 6)
    f = values((4, 5), "float32", 3)
    F = put(f, device)
    check(ga.vecdot(F, F, axis=-2), np.vecdot(f, f, axis=-2), 4)
    i = values((7,), "int16", 4)
    check(ga.vecdot(put(i, device), put(i, device)), np.vecdot(i, i))
    with pytest.raises(ValueError, match="must be equal"):
        ga.vecdot(X, put(values((3, 5), "complex64"), device))
    with pytest.raises(ValueError):
        ga.vecdot(X, Y, axis=-3)


def test_matrix_transpose_is_a_view(device):
    x = put(values((2, 3, 4), "float32"), device)
    t = ga.matrix_transpose(x)
    assert t.shape == (2, 4, 3) and ga.shares_memory(t, x)
    np.testing.assert_array_equal(t.get(), np.swapaxes(x.get(), -1, -2))
    assert gl.matrix_transpose(x).shape == (2, 4, 3)
    with pytest.raises(ValueError):
        ga.matrix_transpose(x[0, 0])


# the extension: the functions every device runs ----------------------------------------
def test_outer_trace_diagonal(device):
    a, b = values((5,), "float32", 1), values((3,), "int16", 2)
    check(gl.outer(put(a, device), put(b, device)), np.outer(a, b))
    x = values((2, 4, 6), "int32", 3)
    X = put(x, device)
    for offset in (0, 2, -3, 6, -5):
        d = gl.diagonal(X, offset=offset)
        check(d, np.diagonal(x, offset=offset, axis1=-2, axis2=-1))
        check(gl.trace(X, offset=offset), np.trace(x, offset=offset, axis1=-2, axis2=-1))
    assert ga.shares_memory(gl.diagonal(X), X)
    with pytest.raises(ValueError, match="read-only"):
        d = gl.diagonal(X)
        d += 1
    check(gl.trace(put(values((3, 3), "uint8"), device)),
          np.trace(values((3, 3), "uint8")).astype(np.uint64))
    f = values((3, 3), "float32", 4)
    check(gl.trace(put(f, device), dtype=ga.float32), np.trace(f, dtype=np.float32), 3)
    with pytest.raises(ValueError):
        gl.outer(X, X)


def test_cross_matches_numpy(device):
    x = values((4, 3), "int32", 1)
    y = values((3,), "int32", 2)
    check(gl.cross(put(x, device), put(y, device)), np.cross(x, y))
    f = values((3, 5), "float32", 3)
    g = values((2, 3, 5), "float32", 4)
    check(gl.cross(put(f, device), put(g, device), axis=-2), np.cross(f, g, axis=-2), 2)
    with pytest.raises(ValueError, match="size 3"):
        gl.cross(put(values((4,), "float32"), device), put(values((4,), "float32"), device))
    with pytest.raises(ValueError, match="negative"):
        gl.cross(put(x, device), put(x, device), axis=0)


def test_matrix_power(device):
    x = values((2, 5, 5), "float32", 1) / 3
    X = put(x, device)
    for n in (0, 1, 2, 5):
        check(gl.matrix_power(X, n), np.linalg.matrix_power(x, n), 5 * n)
    i = values((3, 3), "int8", 2)
    check(gl.matrix_power(put(i, device), 3), np.linalg.matrix_power(i, 3))
    check(gl.matrix_power(X, -2), np.linalg.matrix_power(x, -2), 50)  # the inverse first


@pytest.mark.parametrize("dtype", ["float32", "complex64"])
def test_vector_norm(device, dtype):
    x = values((3, 4, 5), dtype, 1)
    X = put(x, device)
    for ord_ in (2, 1, math.inf, -math.inf, 0, 0.5):
        for axis, keepdims in ((None, False), (1, True), ((0, 2), False)):
            want = np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord_)
            check(gl.vector_norm(X, axis=axis, keepdims=keepdims, ord=ord_),
                  np.asarray(want), 60)


def test_matrix_norm(device):
    x = values((2, 4, 5), "complex64", 1)
    X = put(x, device)
    for ord_ in ("fro", 1, -1, math.inf, -math.inf):
        for keepdims in (False, True):
            want = np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord_)
            check(gl.matrix_norm(X, keepdims=keepdims, ord=ord_), np.asarray(want), 20)
    for ord_ in ("nuc", 2, -2):  # singular values (one-sided Jacobi on devices)
        for keepdims in (False, True):
            want = np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord_)
            got = gl.matrix_norm(X, keepdims=keepdims, ord=ord_)
            check(got, np.asarray(want), 200)
    with pytest.raises(ValueError, match="invalid ord"):
        gl.matrix_norm(X, ord=3)
    ints = values((3,), "int32")  # converted to the default float first, as NumPy (issue 31)
    ft = np.float64 if device.supports(np.float64) else np.float32
    check(gl.vector_norm(put(ints, device)), np.asarray(np.linalg.vector_norm(ints), ft), 3)


# the extension: the factorisations (NumPy on cpu, this library's kernels on devices) ----
def _spd(n, dtype, seed=0, batch=()):
    a = values((*batch, n, n), dtype, seed)
    return a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n, dtype=dtype)


def _calls():
    """(name, gpuarrays call, NumPy call) for each factorisation, on a few inputs."""
    out = []
    for dtype in ("float64", "complex64"):
        sq = values((2, 4, 4), dtype, 1) + 4 * np.eye(4, dtype=dtype)
        rect = values((3, 5, 3), dtype, 2)
        spd = _spd(4, dtype, 3, (2,))
        one = values((1, 1), dtype, 4) + 1
        empty = np.zeros((0, 3, 3), dtype)
        rhs = values((2, 4, 2), dtype, 5)
        out += [
            ("cholesky", (spd,), {}), ("cholesky", (spd,), {"upper": True}),
            ("det", (sq,), {}), ("det", (one,), {}), ("det", (empty,), {}),
            ("slogdet", (sq,), {}), ("inv", (sq,), {}), ("inv", (sq.swapaxes(-1, -2),), {}),
            ("eigh", (spd,), {}), ("eigvalsh", (spd,), {}),
            ("eigvals", (sq,), {}), ("eig", (sq,), {}),
            ("solve", (sq, rhs), {}), ("solve", (sq[0], rhs[0, :, 0]), {}),
            ("svd", (rect,), {}), ("svd", (rect,), {"full_matrices": False}),
            ("svdvals", (rect,), {}), ("qr", (rect,), {}), ("qr", (rect,), {"mode": "complete"}),
            ("pinv", (rect,), {}), ("pinv", (rect,), {"rtol": 0.1}),
            ("matrix_rank", (rect,), {}), ("matrix_rank", (np.zeros((3, 3), dtype),), {}),
        ]
    return out


def _compare(name, got, want, x, exact: bool = True) -> None:
    fields = {"eig": None, "eigh": "EighResult", "qr": "QRResult", "slogdet": "SlogdetResult",
              "svd": "SVDResult"}
    if name in ("eig", "eigvals"):  # the standard: complex even when NumPy gives real
        ct = np.result_type(x.dtype, np.complex64)
        want = tuple(np.asarray(w).astype(ct) for w in want) if name == "eig" else (
            np.asarray(want).astype(ct))
        if not exact:  # another order than LAPACK's: the same set of eigenvalues
            g = (got[0] if name == "eig" else got).get()
            w = want[0] if name == "eig" else want
            assert g.dtype == w.dtype and g.shape == w.shape
            dist = np.abs(g[..., :, None] - w[..., None, :])
            tol = 1e-4 * max(1.0, np.abs(w).max(initial=0))
            assert dist.min(axis=-1).max(initial=0) < tol
            assert dist.min(axis=-2).max(initial=0) < tol
            return
    if name in fields:
        assert type(got).__name__ == (fields[name] or "EigResult")
        assert tuple(type(got)._fields) == tuple(type(want)._fields) if name != "eig" else True
        if name in ("eigh", "svd") and not exact:  # vectors agree up to a sign/phase each:
            i = 0 if name == "eigh" else 1  # the values here, the vectors in
            check(got[i], np.asarray(want[i]), 40)  # test_linalg_device.py
            return
        for g, w in zip(got, want, strict=True):
            check(g, np.asarray(w), 40)
        return
    check(got, np.asarray(want), 40)


def test_factorisations_match_numpy(device):
    """NumPy's results on every device (the kernels of _compute/device/factor.py on device
    back-ends; eigenvectors and singular vectors are checked in test_linalg_device.py)."""
    for name, args, kw in _calls():
        xs = [put(a, device) for a in args]
        got = getattr(gl, name)(*xs, **kw)
        want = getattr(np.linalg, name)(*args, **kw)
        _compare(name, got, want, args[0], exact=device.backend == "cpu")


def test_factorisations_refuse_bad_shapes(device):
    dt = "float64" if device.supports(np.dtype("float64")) else "float32"
    rect = put(values((3, 4), dt), device)
    for name in ("det", "inv", "cholesky", "eigh", "slogdet"):
        with ga.record_allocations() as rec, pytest.raises(ValueError, match="square"):
            getattr(gl, name)(rect)
        assert rec.count == 0
    with pytest.raises(ValueError, match="mode"):
        gl.qr(rect, mode="economic")
    with pytest.raises(np.linalg.LinAlgError):
        gl.inv(put(np.zeros((2, 2), dt), device))


# which function runs where: the table in docs/linalg.md --------------------------------
def _table() -> dict[str, dict[str, bool]]:
    text = (ROOT / "docs" / "linalg.md").read_text()
    section = text.split("## Which functions run where", 1)[1].split("\n## ", 1)[0]
    rows = {}
    header = None
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4:
            continue
        if cells[0] == "function":
            header = cells[1:]
            continue
        m = re.fullmatch(r"`(?:linalg\.|fft\.)?(\w+)`", cells[0])
        if m and header:
            key = ("fft." if cells[0].startswith("`fft.") else "linalg.") + m.group(1)
            rows[key] = {b: c.startswith("yes") for b, c in zip(header, cells[1:], strict=True)}
    return rows


def test_the_docs_table_lists_every_function_as_the_code_does():
    import gpuarrays.fft as gf

    table = _table()
    names = [f"linalg.{n}" for n in gl.__all__ if n[0].islower()]
    names += [f"fft.{n}" for n in gf.__all__]
    assert sorted(table) == sorted(names)
    for key, row in table.items():
        mod, name = key.split(".")
        on_devices = (gl if mod == "linalg" else gf).ON_DEVICES
        assert row["cpu"], key
        assert row["opencl"] == row["cuda"] == (name in on_devices), key


def _valid_call(key: str, device):
    """A call of ``key`` with valid arguments on ``device``."""
    import gpuarrays.fft as gf

    mod, name = key.split(".")
    dt = "float64" if device.supports(np.dtype("float64")) else "float32"
    sq = put(values((3, 3), dt) + 3 * np.eye(3, dtype=dt), device)
    vec = put(values((3,), dt), device)
    if mod == "fft":
        if name in ("fftfreq", "rfftfreq"):
            return lambda: getattr(gf, name)(8, device=device)
        if name in ("rfft", "rfftn", "ihfft", "rfft2"):
            return lambda: getattr(gf, name)(sq)
        return lambda: getattr(gf, name)(put(values((3, 3), "complex64"), device))
    two = {"cross": (vec, vec), "matmul": (sq, sq), "outer": (vec, vec), "solve": (sq, sq),
           "tensordot": (sq, sq), "vecdot": (sq, sq), "lstsq": (sq, vec),
           "tensorsolve": (sq, vec)}
    if name in two:
        return lambda: getattr(gl, name)(*two[name])
    if name == "matrix_power":
        return lambda: gl.matrix_power(sq, 3)
    if name == "tensorinv":
        return lambda: gl.tensorinv(sq, ind=1)
    if name in ("cholesky", "eigh", "eigvalsh"):
        spd = put(_spd(3, dt), device)
        return lambda: getattr(gl, name)(spd)
    return lambda: getattr(gl, name)(sq)


def test_each_function_runs_where_the_table_says(device):
    backend = device.backend
    for key, row in _table().items():
        call = _valid_call(key, device)
        if row[backend]:
            call()
        else:
            with pytest.raises(NotImplementedError, match=str(device)):
                call()


# CUDA: the generated kernels compile with NVRTC -----------------------------------------
def test_matmul_kernels_compile_with_nvrtc(nvrtc):
    from gpuarrays.backends import cuda

    cases = [("f4", "f4", "f4"), ("f8", "f8", "f8"), ("c8", "c8", "c8"), ("c16", "c16", "c16"),
             ("i1", "i1", "i1"), ("u8", "u8", "u8"), ("i4", "f4", "f8"), ("f2", "f2", "f2"),
             ("u2", "i2", "i4")]
    # the general shape, a matrix times a vector and a vector times a matrix, as run() picks
    # them (regression: ptxas refused the matrix-vector tiles of 64 KiB on an H200)
    shapes = [(64, 64), (64, 1), (1, 64)]
    for k, (a, b, out) in enumerate(cases):
        acc = device_matmul.accumulator(out)
        for m, n in shapes if out in ("f4", "f8", "c16") else shapes[:1]:
            tm, tn, rm, rn, bk, local = device_matmul.tile_shape(device_matmul.TILES["gpu"],
                                                                 m, n, acc)
            assert bk * (tm * rm + tn * rn) * int(acc[1:]) <= device_matmul.LOCAL_BYTES_MAX
            rows_fast = k % 2 == 0  # both read orders, across the cases
            spec = device_matmul.Spec("cuda", a, b, out, acc, tm, tn, rm, rn, bk, bool(local),
                                      0, rows_fast, not rows_fast)
            text, _, _ = device_matmul.program(cuda.DIALECT, spec)
            image, kind = cuda.compile_image(text, 90)
            assert image and kind == "cubin", (a, b, out, m, n)
    with pytest.raises(ValueError, match="OpenCL C only"):
        device_matmul.program(cuda.DIALECT, device_matmul.Spec(
            "cuda", "f4", "f4", "f4", "f4", 4, 1, 4, 4, 0, False, 16))


def test_temporaries_go_back_to_the_pool(device, used):
    x = put(values((3, 4, 5), "float32", 1), device)
    y = put(values((4, 5, 2), "float32", 2), device)
    v = put(values((4, 3), "float32", 3), device)
    before = used()
    results = [
        ga.tensordot(x[:, ::-1], y, axes=([1, 2], [0, 1])),  # a reshape copy of x
        x @ y[0].mT.mT,
        ga.vecdot(x, x),
        gl.matrix_power(put(values((3, 3), "float32", 4), device), 5),
        gl.cross(v, v[::-1]),
        gl.vector_norm(x, ord=3, axis=(0, 2)),
        gl.matrix_norm(x, ord=1),
    ]
    for r in results:
        r.free()
    assert used() == before
