"""NumPy's function protocol (``__array_function__``) and the NumPy-style array methods on
every device, NumPy as the oracle (docs/compute.md, "NumPy's protocols").

Each case runs the same NumPy call twice: on NumPy arrays (the expected result) and on
gpuarrays arrays (the result under test, which must be gpuarrays arrays on the same
device).  A case whose namespace function this build lacks (``concat`` before the
manipulation functions are merged, say) must refuse with ``TypeError`` instead: the
table dispatches by name, so the same test checks the dispatch once the function exists.
"""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._compute import numpy_protocol


def _operands(device):
    dt = np.float64 if device.supports(np.float64) else np.float32
    a = (np.arange(12, dtype=dt).reshape(3, 4) - 4.5) * 1.25
    b = np.linspace(-3, 3, 12, dtype=dt).reshape(3, 4)
    i = np.array([2, 0, 1, 1], dtype=np.int64)
    return a, b, i


# (NumPy function's path in the table, call): the call takes (a, b, i) -- two float 3x4
# arrays and an int64 index vector -- and uses only np.* functions.
CASES = [
    ("sum", lambda a, b, i: np.sum(a)),
    ("sum", lambda a, b, i: np.sum(a, axis=0)),
    ("sum", lambda a, b, i: np.sum(a, 1, keepdims=True)),
    ("sum", lambda a, b, i: np.sum(i, dtype=np.int32)),
    ("prod", lambda a, b, i: np.prod(b, axis=1)),
    ("max", lambda a, b, i: np.max(a, axis=0)),
    ("amax", lambda a, b, i: np.amax(a)),
    ("min", lambda a, b, i: np.min(a, axis=1, keepdims=True)),
    ("amin", lambda a, b, i: np.amin(b, axis=(0, 1))),
    ("mean", lambda a, b, i: np.mean(a, axis=0)),
    ("std", lambda a, b, i: np.std(a, ddof=1)),
    ("var", lambda a, b, i: np.var(b, axis=1, ddof=1)),
    ("argmax", lambda a, b, i: np.argmax(a)),
    ("argmin", lambda a, b, i: np.argmin(b, axis=1)),
    ("any", lambda a, b, i: np.any(a > 5, axis=0)),
    ("all", lambda a, b, i: np.all(b > -4)),
    ("count_nonzero", lambda a, b, i: np.count_nonzero(a > 1, axis=1)),
    ("diff", lambda a, b, i: np.diff(a, axis=0)),
    ("cumsum", lambda a, b, i: np.cumsum(a)),
    ("cumsum", lambda a, b, i: np.cumsum(a.T, axis=1)),
    ("cumprod", lambda a, b, i: np.cumprod(b, axis=0)),
    ("cumulative_sum", lambda a, b, i: np.cumulative_sum(a, axis=1, include_initial=True)),
    ("clip", lambda a, b, i: np.clip(a, -2, 5)),
    ("round", lambda a, b, i: np.round(b)),
    ("around", lambda a, b, i: np.around(a)),
    ("where", lambda a, b, i: np.where(a > b, a, b)),
    ("real", lambda a, b, i: np.real(a)),
    ("result_type", lambda a, b, i: np.result_type(a, i)),
    ("zeros_like", lambda a, b, i: np.zeros_like(a)),
    ("ones_like", lambda a, b, i: np.ones_like(a, dtype=np.int32)),
    ("full_like", lambda a, b, i: np.full_like(i, 7)),
    ("shape", lambda a, b, i: np.shape(a)),
    ("ndim", lambda a, b, i: np.ndim(a)),
    ("size", lambda a, b, i: np.size(a, 1)),
    ("iscomplexobj", lambda a, b, i: np.iscomplexobj(a)),
    ("transpose", lambda a, b, i: np.transpose(a)),
    ("squeeze", lambda a, b, i: np.squeeze(a[None])),
    ("swapaxes", lambda a, b, i: np.swapaxes(a, 0, 1)),
    ("ravel", lambda a, b, i: np.ravel(a.T)),
    ("copy", lambda a, b, i: np.copy(a)),
    ("reshape", lambda a, b, i: np.reshape(a, (4, 3))),
    ("expand_dims", lambda a, b, i: np.expand_dims(a, 1)),
    ("moveaxis", lambda a, b, i: np.moveaxis(a, 0, -1)),
    ("broadcast_to", lambda a, b, i: np.broadcast_to(a[0], (2, 4))),
    ("concatenate", lambda a, b, i: np.concatenate([a, b])),
    ("concatenate", lambda a, b, i: np.concatenate((a, b), axis=None)),
    ("stack", lambda a, b, i: np.stack([a, b], axis=1)),
    ("flip", lambda a, b, i: np.flip(a, axis=0)),
    ("roll", lambda a, b, i: np.roll(a, 2)),
    ("repeat", lambda a, b, i: np.repeat(i, 2)),
    ("tile", lambda a, b, i: np.tile(i, (2, 1))),
    ("tril", lambda a, b, i: np.tril(a)),
    ("take", lambda a, b, i: np.take(a, i[:3])),
    ("take", lambda a, b, i: np.take(a, i, axis=1)),
    ("nonzero", lambda a, b, i: np.nonzero(a > 2)),
    ("sort", lambda a, b, i: np.sort(b, axis=0)),
    ("sort", lambda a, b, i: np.sort(a, axis=None)),
    ("argsort", lambda a, b, i: np.argsort(i, kind="stable")),
    ("searchsorted", lambda a, b, i: np.searchsorted(np.ravel(b), i)),
    ("unique", lambda a, b, i: np.unique(i)),
    ("unique", lambda a, b, i: np.unique(i, return_counts=True)),
    ("isin", lambda a, b, i: np.isin(i, i[:2])),
    ("asarray", lambda a, b, i: np.asarray([1.0, 2.5], like=a)),   # NEP 35: on a's device
    ("array", lambda a, b, i: np.array([[1, 2]], like=a)),
    ("array", lambda a, b, i: np.array([], like=a, ndmin=2)),      # dask's metas
    ("zeros", lambda a, b, i: np.zeros((2, 3), dtype=np.float32, like=a)),
    ("ones", lambda a, b, i: np.ones(4, like=i)),
    ("full", lambda a, b, i: np.full((2,), 7, like=i)),
    ("arange", lambda a, b, i: np.arange(1, 7, 2, like=a)),
    ("eye", lambda a, b, i: np.eye(3, 4, k=1, like=a)),
    ("identity", lambda a, b, i: np.identity(3, like=a)),
    ("dot", lambda a, b, i: np.dot(a, b.T)),
    ("tensordot", lambda a, b, i: np.tensordot(a, b, axes=([1], [1]))),
    ("linalg.vector_norm", lambda a, b, i: np.linalg.vector_norm(a, axis=1)),
    ("linalg.norm", lambda a, b, i: np.linalg.norm(a)),
    ("linalg.matmul", lambda a, b, i: np.linalg.matmul(a, b.T)),
]


def _compare(got, want, device):
    if isinstance(want, (tuple, list)):
        assert type(got) in (tuple, list) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _compare(g, w, device)
        return
    if isinstance(want, np.ndarray):
        assert isinstance(got, ga.GPUArray), f"a {type(got).__name__}, not a GPUArray"
        assert got.device == device
        assert got.shape == want.shape
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got.get(), want, rtol=1e-6, atol=1e-9)
        return
    if isinstance(want, np.generic):  # NumPy's 0-d results are scalars; ours 0-d arrays
        assert isinstance(got, ga.GPUArray) and got.shape == () and got.device == device
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got.get(), want, rtol=1e-6)
        return
    assert got == want


@pytest.mark.parametrize(("path", "call"), CASES,
                         ids=[f"{p}-{n}" for n, (p, _) in enumerate(CASES)])
def test_numpy_function_dispatches_or_refuses(device, path, call):
    a, b, i = _operands(device)
    da, db, di = (ga.asarray(x, device=device) for x in (a, b, i))
    if path in numpy_protocol.dispatched():
        _compare(call(da, db, di), call(a, b, i), device)
    else:  # the namespace function is not in this build: refused (NumPy's TypeError)
        with pytest.raises(TypeError, match="gpuarrays|GPUArray|__array_function__"):
            call(da, db, di)


def test_dispatch_table_covers_the_namespace_today():
    """What exists now is dispatched (the cases above would refuse otherwise)."""
    table = numpy_protocol.dispatched()
    for path in ("sum", "mean", "std", "cumsum", "clip", "where", "reshape", "transpose",
                 "argmax", "diff", "zeros_like"):
        assert path in table
    for path, target, _ in numpy_protocol.FUNCTIONS:
        if isinstance(target, str):
            present = numpy_protocol._resolve(ga, target) is not None
            assert (path in table) == (present and numpy_protocol._numpy_function(path)
                                       is not None), path


REFUSED = [
    lambda a, b, i: np.std(a, mean=a),                  # an option the namespace lacks
    # np.round(a, decimals=2) runs: gpuarrays.round takes decimals (tests/test_duck_typing.py)
    lambda a, b, i: np.sum(a, out=np.empty(())),        # a NumPy out
    lambda a, b, i: np.where(a > 0, a, np.ones((3, 4))),  # a NumPy array among the inputs
    lambda a, b, i: np.add(a, np.ones(4)),
    lambda a, b, i: np.busday_count(a, b),              # a NumPy function gpuarrays lacks
    # np.asarray/np.array follow the memory instead: tests/test_numpy_conversion.py
]


def test_numpy_function_refuses(device):
    a, b, i = _operands(device)
    da, db, di = (ga.asarray(x, device=device) for x in (a, b, i))
    for n, call in enumerate(REFUSED):
        with pytest.raises(TypeError):
            call(da, db, di)
            pytest.fail(f"REFUSED[{n}] ran")


def test_out_argument_writes_into_a_gpuarrays_array(device, used):
    a, _, _ = _operands(device)
    da = ga.asarray(a, device=device)
    out = ga.empty((4,), a.dtype, device=device)
    before = used()
    assert np.sum(da, axis=0, out=out) is out
    assert np.cumsum(da, axis=0, out=ga.empty((3, 4), a.dtype, device=device)).shape == (3, 4)
    np.testing.assert_allclose(out.get(), a.sum(axis=0))
    gc.collect()
    assert used() == before  # the result buffer went back; out was there already


def test_flattening_adaptor_frees_its_copy(device, used):
    a, _, _ = _operands(device)
    da = ga.asarray(a, device=device).T  # not contiguous: flattening copies
    before = used()
    r = np.cumsum(da)
    np.testing.assert_allclose(r.get(), np.cumsum(a.T))
    r.free()
    assert used() == before


# ------------------------------------------------------------------------- array methods
METHOD_CASES = [
    ("sum", (), {"axis": 0}), ("sum", (1,), {"keepdims": True}), ("sum", (), {}),
    ("prod", (), {"axis": 1}), ("max", (), {}), ("min", (0,), {}), ("mean", (), {"axis": 1}),
    ("std", (), {"ddof": 1}), ("var", (), {"axis": 0, "ddof": 1}), ("argmax", (), {}),
    ("argmin", (), {"axis": 0}), ("cumsum", (), {}), ("cumsum", (), {"axis": 1}),
    ("cumprod", (0,), {}), ("clip", (-1, 3), {}), ("clip", (), {"max": 0}),
    ("round", (), {}), ("conj", (), {}), ("conjugate", (), {}),
    ("repeat", (2,), {}), ("argsort", (), {"axis": 0}), ("nonzero", (), {}),
]


def test_array_methods_match_numpy(device):
    a, _, _ = _operands(device)
    da = ga.asarray(a, device=device)
    table = numpy_protocol.dispatched()
    for name, args, kwargs in METHOD_CASES:
        target = numpy_protocol.METHODS.get(name, "conj")
        want = getattr(a, name)(*args, **kwargs)
        if target == "conj" or target in table:
            _compare(getattr(da, name)(*args, **kwargs), want, device)
        else:
            with pytest.raises(NotImplementedError, match=name):
                getattr(da, name)(*args, **kwargs)


def test_any_all_methods_and_take(device):
    a, _, i = _operands(device)
    da, di = ga.asarray(a, device=device), ga.asarray(i, device=device)
    _compare((da > 0).any(axis=0), (a > 0).any(axis=0), device)
    _compare((da > -10).all(), (a > -10).all(), device)
    if "take" in numpy_protocol.dispatched():
        _compare(da.take(di, axis=1), a.take(i, axis=1), device)
    if "dot" in numpy_protocol.dispatched():
        _compare(da.dot(da.T), a.dot(a.T), device)


def test_sort_method_sorts_in_place(device):
    a, b, _ = _operands(device)
    db = ga.asarray(b[:, ::-1], device=device)
    if "sort" not in numpy_protocol.dispatched():
        with pytest.raises(NotImplementedError, match="sort"):
            db.sort()
        return
    assert db.sort(axis=0) is None
    want = b[:, ::-1].copy()
    want.sort(axis=0)
    np.testing.assert_array_equal(db.get(), want)


def test_method_errors_are_numpys(device):
    da = ga.asarray(np.arange(6.0), device=device)
    with pytest.raises(TypeError, match="correction|ddof|unexpected"):
        da.std(bogus=1)
    assert float(da.sum(where=da > 1)) == 14.0  # NumPy's where= runs on the device
    freed = ga.asarray(np.arange(3.0), device=device)
    freed.free()
    with pytest.raises(ga.FreedArrayError):
        freed.sum()
    with pytest.raises(ga.FreedArrayError):
        np.mean(freed)


# ------------------------------------------------------------------- ufunc methods we refuse
def test_refused_ufunc_methods_raise_type_error(device):
    # zero-size: NumPy leaks the operand of a refused reduce (below); an empty array pins
    # no pool block that later tests of this worker expect back.  Every method runs on
    # gpuarrays operands (tests/test_numpy_ufuncs.py); host data among them is refused.
    a = ga.zeros(0, device=device)
    with pytest.raises(TypeError, match="NumPy array"):
        np.subtract.reduce(a, out=np.empty(()))
    with pytest.raises(TypeError, match="NumPy array"):
        np.add.reduceat(a, [0], out=np.empty(1))
    with pytest.raises(TypeError, match="NumPy array"):
        np.add.outer(a, np.zeros(2))
    with pytest.raises(TypeError, match="NumPy array"):
        np.add.at(a, [], np.zeros(0))


def test_numpy_reduction_options_do_not_pin_memory(device, used):
    """Regression (NumPy 2.4 leak): np.max(a, initial=...), np.sum(a, where=...) used to be
    refused inside NumPy's ufunc.reduce, which leaks the operand of a refused override.  They
    run on the device now (masked by ga.where), and np.prod(a, out=<NumPy>) is refused by the
    function protocol before NumPy's reduce is reached: either way the array's memory goes
    back when it dies."""
    before = used()
    h = np.arange(64.0)
    a = ga.asarray(h, device=device)
    mask = a > 3
    refs = sys.getrefcount(a)
    for call, want in ((lambda x, m: np.max(x, initial=70.0), 70.0),
                       (lambda x, m: np.sum(x, where=m), h[h > 3].sum()),
                       (lambda x, m: np.min(x, where=m, initial=9.0), 4.0),
                       (lambda x, m: x.sum(where=m), h[h > 3].sum())):
        assert float(call(a, mask)) == want
    with pytest.raises(TypeError):
        np.prod(a, out=np.empty(()))
    assert sys.getrefcount(a) == refs
    del a, mask
    assert used() == before


@pytest.mark.xfail(strict=True, reason=(
    "NumPy 2.4 leaks the operand tuple of a ufunc.reduce/accumulate/reduceat whose "
    "__array_ufunc__ override refuses (returning NotImplemented or raising alike); "
    "this test passes once NumPy stops leaking"))
def test_refused_ufunc_reduce_does_not_pin_the_operand():
    """Every reduce gpuarrays can compute is answered (no leak: see
    test_numpy_ufuncs.py::test_supported_reduce_does_not_pin_the_operand); what is left
    -- host out=, or an error such as a reduction of nothing without an identity -- still
    raises inside NumPy's override, and NumPy 2.4 keeps the operand then."""
    a = ga.zeros(0, device="cpu:0")  # zero-size: the leak pins no memory
    before = sys.getrefcount(a)
    with pytest.raises(TypeError):
        np.subtract.reduce(a, out=np.empty(()))
    with pytest.raises(ValueError, match="no identity"):
        np.subtract.reduce(a)
    assert sys.getrefcount(a) == before


def test_np_matmul_writes_into_out(device):
    """Regression: np.matmul(a, b, out=o) was refused ("no equivalent of numpy.matmul")."""
    x = np.arange(12.0).reshape(3, 4)
    a, b = ga.asarray(x, device=device), ga.asarray(x.T.copy(), device=device)
    for dtype in (np.float64, np.float32):
        o = ga.empty((3, 3), dtype=dtype, device=device)
        assert np.matmul(a, b, out=o) is o and np.matmul(a, b, out=(o,)) is o
        np.testing.assert_allclose(o.get(), x @ x.T)
    with pytest.raises(TypeError, match="same_kind"):
        np.matmul(a, b, out=ga.empty((3, 3), dtype=np.int64, device=device))
    with pytest.raises(ValueError, match=r"out= has shape \(9,\)"):
        np.matmul(a, b, out=ga.empty(9, device=device))
