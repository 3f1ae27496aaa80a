"""NumPy's operand kinds, arguments, array methods and attributes on gpuarrays arrays (issue 31,
part G): bool operands of arithmetic, calls on scalars only, Python ints beyond a dtype's range
in comparisons, meshgrid/copyto's arguments, the ndarray methods and attributes, and
np.linalg.norm's keepdims.  NumPy is the oracle: the same call on the same host data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuarrays as ga


def check(got, want, exact: bool = True) -> None:
    """``got`` (a gpuarrays array) has NumPy's dtype, shape and values ``want``."""
    assert isinstance(got, ga.GPUArray), type(got)
    want = np.asarray(want)
    host = got.get()
    assert host.dtype == want.dtype, (host.dtype, want.dtype)
    assert host.shape == want.shape, (host.shape, want.shape)
    if exact:
        np.testing.assert_array_equal(host, want)
    else:
        np.testing.assert_allclose(host, want, rtol=2e-3 if want.dtype == np.float16 else 1e-6)


BOOLS = np.array([[True, False, True], [False, False, True]])


# ---------------------------------------------------------------- 1. bool operands
@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "minimum", "less",
                                  "greater_equal", "equal", "floor_divide", "remainder"])
def test_bool_operands_of_arithmetic_as_numpy(device, name):
    x = ga.asarray(BOOLS, device=device)
    y = x.T.T[:, ::-1]  # a non-contiguous operand
    with np.errstate(all="ignore"):
        want = getattr(np, name)(BOOLS, BOOLS[:, ::-1])
    check(getattr(ga, name)(x, y), want)
    check(getattr(np, name)(x, y), want)


def test_bool_operators_and_mixed_kinds(device):
    x = ga.asarray(BOOLS, device=device)
    check(x + x, BOOLS + BOOLS)
    check(x * x[::-1], BOOLS * BOOLS[::-1])
    check(x + True, BOOLS + True)
    i8 = np.array([[1, -2, 3], [4, 5, -6]], np.int8)
    check(x + ga.asarray(i8, device=device), BOOLS + i8)  # bool + int8 is int8
    check(x * 3, BOOLS * 3)
    check(abs(x), abs(BOOLS))
    e = ga.asarray(np.zeros((0, 3), bool), device=device)
    check(e + e, np.zeros((0, 3), bool) + np.zeros((0, 3), bool))


def test_bool_functions_with_float_results(device):
    x = ga.asarray(BOOLS, device=device)
    if device.supports(np.float16):
        check(ga.sin(x), np.sin(BOOLS), exact=False)  # float16, as NumPy
        check(np.round(x), np.round(BOOLS))
    if device.info.float64:
        check(ga.divide(x, 2.0), np.divide(BOOLS, 2.0), exact=False)


@pytest.mark.parametrize(("call", "match"), [
    (lambda x: x - x, "subtract.*bitwise_xor"), (lambda x: -x, "negative"),
    (lambda x: ga.subtract(x, True), "subtract"), (lambda x: ga.sign(x), "sign")])
def test_bool_operations_numpy_refuses_are_type_errors(device, call, match):
    x = ga.asarray(BOOLS, device=device)
    with pytest.raises(TypeError, match=match):
        call(x)
    with pytest.raises(TypeError):
        np.subtract(BOOLS, BOOLS)


# ---------------------------------------------------------------- 2. scalars only
@pytest.mark.parametrize(("name", "args"), [
    ("add", (1, 2)), ("sin", (0.5,)), ("maximum", (1, 2.0)), ("multiply", (True, True)),
    ("add", (np.int8(3), 4)), ("less", (1, 2)), ("divide", (1, 2)), ("multiply", (2, 1j)),
    ("add", (np.float32(1.5), 2.5))])
def test_scalars_only_give_a_0d_array_on_the_default_device(name, args):
    got = getattr(ga, name)(*args)
    want = getattr(np, name)(*args)
    assert got.device == ga.get_device(None)
    check(got, np.asarray(want), exact=False)


def test_scalars_only_through_numpy_with_out(device):
    out = ga.empty((), dtype=np.float32, device=device)
    assert np.add(out, 1) is not out  # (an array operand: the ordinary path)
    got = ga.maximum(3, np.float32(4.5))
    check(got, np.maximum(3, np.float32(4.5)))


# ---------------------------------------------------------------- 3. ints beyond the range
@pytest.mark.parametrize("dtype", ["int8", "uint8", "uint64"])  # more: the hypothesis test
def test_python_ints_beyond_the_range_in_comparisons_as_numpy(device, dtype):
    info = np.iinfo(dtype)
    h = np.array([info.min, 0, info.max, 1], dtype)
    x = ga.asarray(h, device=device)[::-1]
    hx = h[::-1]
    for value in (int(info.max) + 1, int(info.min) - 1):
        for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
            check(getattr(x, op)(value), getattr(hx, op)(value))
        for name in ("less", "greater_equal", "equal", "not_equal"):
            check(getattr(ga, name)(x, value), getattr(np, name)(hx, value))
            check(getattr(ga, name)(value, x), getattr(np, name)(value, hx))
            check(getattr(np, name)(x, value), getattr(np, name)(hx, value))


_INT_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
_COMPARE = ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"]


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dtype=st.sampled_from(_INT_DTYPES), op=st.sampled_from(_COMPARE),
       value=st.integers(-(2 ** 65), 2 ** 65) | st.sampled_from([-1, 128, 256, 2 ** 63, -129]),
       left=st.booleans())
def test_any_python_int_compares_as_numpy(device, dtype, op, value, left):
    info = np.iinfo(dtype)
    h = np.array([info.min, info.max, 0, 1], dtype)
    x = ga.asarray(h, device=device)[::-1]
    args, hargs = ((value, x), (value, h[::-1])) if left else ((x, value), (h[::-1], value))
    want = getattr(np, op)(*hargs)
    check(getattr(ga, op)(*args), want)
    check(getattr(np, op)(*args), want)


@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(op=st.sampled_from(["add", "multiply", "maximum", "minimum", "less", "not_equal",
                           "bitwise_xor", "logical_and", "subtract", "floor_divide"]),
       other=st.sampled_from(["bool", "int8", "uint16", "float32", True, 3, 2.5]),
       seed=st.integers(0, 2 ** 16))
def test_bool_operands_mixed_with_other_kinds_as_numpy(device, op, other, seed):
    rng = np.random.default_rng(seed)
    h = rng.integers(0, 2, (3, 4)).astype(bool)
    x = ga.asarray(h, device=device)[:, ::2]
    h = h[:, ::2]
    if isinstance(other, str):
        ho = rng.integers(1, 5, h.shape).astype(other)
        y = ga.asarray(ho, device=device)
    else:
        ho = y = other
    try:
        with np.errstate(all="ignore"):
            want = getattr(np, op)(h, ho)
    except TypeError:
        with pytest.raises(TypeError):
            getattr(ga, op)(x, y)
        return
    if not device.supports(want.dtype):
        return
    check(getattr(ga, op)(x, y), want)
    check(getattr(np, op)(x, y), want)


def test_python_ints_beyond_the_range_in_arithmetic_are_overflow_errors(device, used):
    x = ga.asarray(np.array([1, 2], np.int8), device=device)
    before = used()
    with pytest.raises(OverflowError, match="1000 out of bounds for int8"):
        x + 1000
    with pytest.raises(OverflowError):
        np.add(x, 1000)
    with pytest.raises(OverflowError):
        np.add(np.array([1, 2], np.int8), 1000)
    assert used() == before


def test_out_of_range_comparison_fills_out_and_broadcasts(device):
    h = np.arange(6, dtype=np.int8).reshape(2, 3)
    x = ga.asarray(h, device=device)
    out = ga.zeros((2, 3), dtype=bool, device=device)
    assert np.less(x, 300, out=out) is out
    check(out, np.less(h, 300))
    check(x[:, :0] < 300, np.zeros((2, 0), bool))
    check(x[0, 0] == -300, np.array(False))
    check(ga.less(x.T, 2 ** 64), np.less(h.T, 2 ** 64))


# ---------------------------------------------------------------- 4. meshgrid, copyto
@pytest.mark.parametrize("kw", [{}, {"sparse": True}, {"copy": False}, {"indexing": "ij"},
                                {"sparse": True, "copy": False, "indexing": "ij"}])
def test_meshgrid_arguments_as_numpy(device, kw):
    a, b, c = np.arange(3.0, dtype=np.float32), np.arange(4, dtype=np.int32), \
        np.arange(6, dtype=np.int16)
    xs = [ga.asarray(v, device=device) for v in (a, b, c)]
    for args, hosts in (((xs[0], xs[1]), (a, b)), ((xs[0][::2], xs[1], xs[2][::-1]), (a[::2], b, c[::-1])),
                        ((xs[1][:0], xs[0]), (b[:0], a))):
        got, want = np.meshgrid(*args, **kw), np.meshgrid(*hosts, **kw)
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            check(g, w)
        got = ga.meshgrid(*args, **kw)
        assert type(got) is type(want)  # NumPy 2.5's tuple, 2.4's list for sparse views
        for g, w in zip(got, want, strict=True):
            check(g, w)
    with pytest.raises(ValueError, match="indexing must be 'xy' or 'ij'"):
        ga.meshgrid(xs[0], indexing="yx")
    with pytest.raises(ValueError, match="1-d.*reshape"):
        np.meshgrid(xs[2].reshape(2, 3), xs[0])


@pytest.mark.parametrize("as_list", [True, False], ids=["numpy_2_4", "numpy_2_5"])
def test_meshgrid_sparse_views_container_follows_numpy(device, monkeypatch, as_list):
    """Both containers, whichever NumPy is installed: the import-time decision is the only
    switch, and it matches the installed NumPy."""
    from gpuarrays._compute import creation
    assert creation._SPARSE_VIEWS_AS_LIST is (
        type(np.meshgrid(np.zeros(1), sparse=True, copy=False)) is list)
    monkeypatch.setattr(creation, "_SPARSE_VIEWS_AS_LIST", as_list)
    x = ga.arange(3.0, device=device)
    got = ga.meshgrid(x, x[:2], sparse=True, copy=False)
    assert type(got) is (list if as_list else tuple) and len(got) == 2
    check(got[0], np.arange(3.0).reshape(1, 3))
    for kw in ({}, {"sparse": True}, {"copy": False}):
        assert type(ga.meshgrid(x, x, **kw)) is tuple


def test_meshgrid_copy_false_shares_storage(device):
    x = ga.asarray(np.arange(3.0, dtype=np.float32), device=device)
    g = ga.meshgrid(x, x, copy=False)
    assert all(ga.shares_memory(v, x) for v in g)
    s = ga.meshgrid(x, x, sparse=True)
    assert not any(ga.shares_memory(v, x) for v in s)


def test_copyto_casting_and_where_as_numpy(device):
    d = np.arange(6, dtype=np.float32).reshape(2, 3)
    mask = np.array([True, False, True])
    src = np.array([10, 20, 30], np.int32)
    for kw in ({}, {"casting": "unsafe"}):
        dst = ga.asarray(d, device=device)
        np.copyto(dst, ga.asarray(src, device=device), where=ga.asarray(mask, device=device), **kw)
        want = d.copy()
        np.copyto(want, src, where=mask, **kw)
        check(dst, want)
    dst = ga.asarray(d, device=device).T  # non-contiguous destination, scalar source
    ga.copyto(dst, 7, where=ga.asarray(mask[:, None], device=device))
    want = d.copy().T
    np.copyto(want, 7, where=mask[:, None])
    check(dst, want)
    ga.copyto(dst, 1.5, where=False)
    check(dst, want)
    i8 = ga.zeros(3, dtype=np.int8, device=device)
    with pytest.raises(TypeError, match="same_kind.*casting='unsafe'"):
        np.copyto(i8, ga.asarray(np.ones(3, np.float32), device=device))
    with pytest.raises(TypeError, match="casting='unsafe'"):
        ga.copyto(i8, 1.5)
    with pytest.raises(TypeError, match="bool"):
        ga.copyto(i8, 1, where=ga.ones(3, dtype=np.int8, device=device))
    with pytest.raises(ValueError, match="casting must be one of"):
        ga.copyto(i8, 1, casting="bad")
    ga.copyto(i8, 1.7, casting="unsafe")
    check(i8, np.ones(3, np.int8))


# ---------------------------------------------------------------- 6. linalg.norm's keepdims
@pytest.mark.parametrize("axis", [(0, 1), (1, 0), (0, 2), (-1, -2)])
def test_norm_keepdims_keeps_the_axes_where_numpy_does(device, axis):
    dt = np.float64 if device.info.float64 else np.float32
    h = np.arange(12, dtype=dt).reshape(2, 3, 2)
    x = ga.asarray(h, device=device)
    for ord_ in (None, 1):
        check(np.linalg.norm(x, ord_, axis=axis, keepdims=True),
              np.linalg.norm(h, ord_, axis=axis, keepdims=True), exact=False)
        check(np.linalg.norm(x, ord_, axis=axis), np.linalg.norm(h, ord_, axis=axis),
              exact=False)


# ---------------------------------------------------------------- 5. methods and attributes
H = np.array([[3, 1, 2], [9, 7, 8]], np.float32)

# (expression on ``a``, the host array ``a`` starts as); the same expression runs on a NumPy
# array and on a gpuarrays array of the same data, and the results are compared
METHOD_CASES = [
    ("a.searchsorted([1.5, 5.0], side='right')", "sorted"), ("a.searchsorted(2.5)", "sorted"),
    ("a.flat[3]", "H"), ("a.flat[1:5]", "H"), ("a.flat[[0, 5]]", "H"), ("a.T.flat[1:4]", "H"),
    ("a.item(3)", "H"), ("a.item(1, 2)", "H"), ("a.item((0, 1))", "H"), ("a.item(-1)", "H"),
    ("a.tolist()", "H"), ("a.trace()", "H"), ("a.trace(1)", "H"), ("np.ptp(a, axis=1)", "H"),
    ("a.squeeze(0)", "H3"), ("a.swapaxes(0, 1)", "H"), ("a.flatten()", "H"),
    ("a.flatten('F')", "H"), ("a.T.flatten('A')", "H"), ("a.ravel('F')", "H"),
    ("a.T.ravel('K')", "H"), ("a.view(np.int32)", "H"), ("a.dot(a.T)", "H"),
    ("a.conj()", "C"), ("a.astype(np.int16, casting='unsafe')", "H"),
    ("a.astype('f4', order='F')", "H"), ("a.argmax(axis=1, keepdims=True)", "H"),
    ("a.min(initial=0)", "H"), ("a.max(axis=1, initial=8.5)", "H"),
    ("a.max(where=np.array([True, False, True]), initial=-1)", "H"),
    ("a.sum(axis=1, where=np.array([True, False, True]))", "H"),
    ("a.prod(where=np.array([True, False, True]), initial=2)", "H"),
    ("a.any(axis=0, where=np.array([True, False, True]))", "H"),
    ("a.min(axis=0, initial=5)", "E"), ("a.sum(initial=3)", "E"),
    ("a.repeat([1, 2], axis=0)", "H"), ("a.diagonal(1)", "H"), ("a.clip(2, 8)", "H"),
    ("(a / 3).round(2)", "H"), ("a.cumsum(axis=1)", "H"), ("a.compress([True, False, True], axis=1)", "H"),
    ("a.itemsize", "H"), ("a.nbytes", "H"), ("a.T.strides", "H"), ("a.base is None", "H"),
    ("a.copy().base is None", "H"), ("a[1:].base is not None", "H"), ("len(a.flat)", "H"),
    ("a.tobytes()", "H"), ("a.T.tobytes()", "H"), ("a.byteswap()", "H"), ("a.byteswap()", "C"),
    ("a.byteswap()", "I"), ("divmod(a, 4)", "H"), ("divmod(7, a)", "H"),
    ("a.getfield(np.float32)", "C"), ("a.getfield(np.float32, 4)", "C"),
    ("a.argpartition(1)[:, 1]", "H"), ("a.T.copy('A').strides", "H"),
    ("a.mean(axis=1, where=np.array([True, False, True]))", "H"),
    ("a.std(where=np.array([True, False, True]), ddof=1)", "H"),
    ("np.var(a, axis=1, keepdims=True, where=np.array([True, False, True]))", "I2"),
]
MUTATIONS = [
    "a.flat = 7", "a.flat = [1, 2]", "a.flat[[1, 2]] = 0", "a.flat[...] = 2", "a.flat[4] = -1",
    "a.T.flat[1:3] = 5", "a.real = 5", "a.fill(3.5)", "a.sort(axis=0)", "a.sort(kind='stable')",
    "a.partition(1)", "a.byteswap(inplace=True)", "a.put(indices=[0, 4], values=[-1, -2])",
]
_HOSTS = {"H": H, "H3": H.reshape(1, 2, 3), "sorted": np.array([1.0, 2, 3, 4], np.float32),
          "C": np.array([1 + 2j, 3 - 1j], np.complex64), "I": np.array([1, 256, -2], np.int32),
          "E": np.zeros((0, 3), np.float32), "I2": H.astype(np.int16)}


def _to_host(x):
    if isinstance(x, ga.GPUArray):
        return x.get()
    if isinstance(x, tuple):
        return tuple(_to_host(v) for v in x)
    return x


def _same(got, want, what: str) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), what
        for g, w in zip(got, want, strict=True):
            _same(g, w, what)
    elif isinstance(want, (np.ndarray, np.generic)):
        assert isinstance(got, ga.GPUArray), (what, type(got))
        host = got.get()
        assert host.dtype == want.dtype and host.shape == np.shape(want), (what, host, want)
        np.testing.assert_allclose(host, want, rtol=1e-6, err_msg=what)
    else:
        assert type(got) is type(want) and got == want, (what, got, want)


def _on_device(expr: str, device, host: np.ndarray):
    a = ga.asarray(host, device=device)
    env = {"a": a, "np": np, "ga": ga}
    # NumPy masks written as host arrays in the expression become device masks
    expr = expr.replace("np.array([True, False, True])",
                        "ga.asarray(np.array([True, False, True]), device=a.device)")
    return eval(expr, env), a  # noqa: S307 (the expressions above)


@pytest.mark.parametrize(("expr", "host"), METHOD_CASES, ids=[f"{e}-{h}" for e, h in METHOD_CASES])
def test_array_methods_and_attributes_as_numpy(device, expr, host):
    h = _HOSTS[host]
    if h.dtype.kind == "c" and not device.supports(h.dtype):
        pytest.skip(f"{device} has no {h.dtype}")
    want = eval(expr, {"a": h.copy(), "np": np})  # noqa: S307
    got, _ = _on_device(expr, device, h)
    _same(got, want, expr)


@pytest.mark.parametrize("expr", MUTATIONS)
def test_array_methods_that_write_in_place_as_numpy(device, expr):
    h = H.copy()
    exec(expr, {"a": h, "np": np})  # noqa: S102
    a = ga.asarray(H, device=device)
    assert exec(expr, {"a": a, "np": np}) is None  # noqa: S102
    check(a, h)


def test_flat_assignment_repeats_a_device_value(device):
    h = np.zeros((2, 3), np.int32)
    a = ga.asarray(h, device=device)
    a.flat = ga.asarray(np.array([1, 2, 3, 4], np.int32), device=device)
    h.flat = np.array([1, 2, 3, 4], np.int32)
    check(a, h)
    a.T.flat = ga.asarray(np.arange(10, 16, dtype=np.int32), device=device)
    h.T.flat = np.arange(10, 16, dtype=np.int32)
    check(a, h)
    assert [int(v) for v in a.flat] == list(h.flat)
    with pytest.raises(IndexError, match="out of bounds"):
        a.flat[6]


def test_item_tolist_and_imag_errors_are_numpys(device):
    a = ga.asarray(H, device=device)
    with pytest.raises(ValueError, match="size 1"):
        a.item()
    with pytest.raises(IndexError, match="out of bounds"):
        a.item(6)
    with pytest.raises(ValueError, match="number of indices"):
        a.item(0, 1, 2)
    assert a.tolist() == H.tolist() and isinstance(a.item(0), float)
    with pytest.raises(TypeError, match="imaginary part"):
        a.imag = 1
    with pytest.raises(TypeError, match="Cannot cast.*'safe'"):
        a.astype(np.int16, casting="safe")
    with pytest.raises(ValueError, match="identity.*initial"):
        a.max(where=a > 2)
    with pytest.raises(ValueError, match="read-only"):
        ga.broadcast_to(a[0], (2, 3)).sort()
    with pytest.raises(ValueError, match="sort kind must be one of"):
        a.sort(kind="bogus")
    with pytest.raises(ValueError, match="cannot delete array elements"):
        del a[0]


def test_copies_views_and_base(device):
    import copy

    a = ga.asarray(H, device=device)
    for c in (copy.copy(a), copy.deepcopy(a), a.flatten(), a.astype(np.float32)):
        assert c.base is None and not ga.shares_memory(c, a)
        check(c, H.reshape(c.shape))
    v = a[1:, ::2]
    assert v.base is not None and ga.shares_memory(v.base, a)
    assert a.astype(np.float32, copy=False) is a
    t = a.T  # NumPy: order "K" keeps any layout, "C" copies, "A" keeps a Fortran one
    assert t.astype(np.float32, copy=False) is t and t.astype("f4", copy=False, order="A") is t
    c = t.astype(np.float32, copy=False, order="C")
    assert c is not t and c.flags.c_contiguous
    assert ga.shares_memory(a.T.ravel("F"), a)  # a view, as NumPy's
