"""NumPy's ufunc protocol on gpuarrays arrays (issue 31, part F): the methods ``reduce``,
``accumulate``, ``outer``, ``at`` and ``reduceat`` over the ufuncs the table computes, the
keywords of a plain call (``dtype``, ``casting``, ``order``, ``where``, ``out`` tuples,
``signature``, ``subok``), the fallback by name, and Python ints beyond an integer
array's range in comparisons.  NumPy on the same host data is the oracle.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuarrays as ga
from gpuarrays._compute.table import BY_UFUNC


@pytest.fixture(autouse=True)
def _free_what_numpy_leaks():
    """NumPy 2.4 keeps the operands of a ufunc method whose override raises (a refused
    comparison reduce, a non-reorderable reduce over several axes ...; see
    test_numpy_protocol's xfail), so the arrays these tests expect errors for would hold pool
    blocks for the rest of the worker -- and the pool tests that follow in it count on a
    trimmable pool.  The arrays a test made and NumPy still holds are freed after it."""
    import gc

    # type(), not isinstance(): isinstance reads __class__, which some libraries' objects in
    # the heap (torch.distributed's reduce_op) answer with a deprecation warning.
    before = {id(o) for o in gc.get_objects() if issubclass(type(o), ga.GPUArray)}
    yield
    gc.collect()
    for o in gc.get_objects():
        if issubclass(type(o), ga.GPUArray) and id(o) not in before and not o.is_freed:
            o.free()

_SETTINGS = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])

BINARY = sorted((u for u, op in BY_UFUNC.items() if op.nin == 2), key=lambda u: u.__name__)
"""Every binary ufunc the table computes (rows added later are tested too)."""


def _dtype_for(ufunc, device) -> np.dtype | None:
    """One dtype ``ufunc`` has a same-type loop for that the device holds: int32 when it
    takes integers, else float32, else bool."""
    for dt in (np.int32, np.float32, np.bool_, np.float64):
        try:
            loop = ufunc.resolve_dtypes((np.dtype(dt), np.dtype(dt), None))
        except TypeError:
            continue
        if loop[0] == dt and loop[2] == dt and device.supports(dt):
            return np.dtype(dt)
    return None


def _host(shape, dt: np.dtype, seed: int = 0) -> np.ndarray:
    """Values safe for every table ufunc: 1..3 (no division by 0, no overflow in power)."""
    n = int(np.prod(shape, dtype=np.int64))
    base = (np.arange(n, dtype=np.int64) * 7 + seed) % 3 + 1
    if dt.kind == "b":
        return (base % 2 == 0).reshape(shape)
    if dt.kind == "f":
        return (base * 0.75).astype(dt).reshape(shape)
    return base.astype(dt).reshape(shape)


def _same(got, want, exact: bool = True) -> None:
    want = np.asarray(want)
    got = got.get() if isinstance(got, ga.GPUArray) else np.asarray(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if exact or want.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-6 if want.dtype == np.float32 else 1e-3)


def _exact(ufunc, dt) -> bool:
    return dt.kind in "biu" or ufunc in (np.maximum, np.minimum)


# ----------------------------------------------------------------------------- reduce
@pytest.mark.parametrize("ufunc", BINARY, ids=lambda u: u.__name__)
def test_reduce_and_accumulate_over_the_table(device, ufunc):
    dt = _dtype_for(ufunc, device)
    if dt is None:  # ldexp (float, int): NumPy refuses to reduce it; so must we, alike
        h = _host((3, 5), np.dtype(np.float32))
        a = ga.asarray(h, device=device)
        for method in (ufunc.reduce, ufunc.accumulate):
            with pytest.raises(TypeError) as numpy_error:
                method(h)
            with pytest.raises(type(numpy_error.value)):
                method(a)
        return
    h = _host((3, 5), dt)
    a = ga.asarray(h, device=device)
    ht = h.T  # non-contiguous: the transpose
    at = a.T
    exact = _exact(ufunc, dt)
    for x, hx, kw in ((at, ht, {"axis": -1}),):  # lean: PoCL compiles each new kernel
        try:
            want = ufunc.reduce(hx, **kw)
            if ufunc is np.arctan2:  # NumPy 2.4's reduce gives arctan2(first, last): a
                # bug in its SIMD loop; its accumulate is the left fold reduce promises
                want = np.take(ufunc.accumulate(hx, **kw), -1, axis=kw["axis"])
        except TypeError:  # comparisons: no loop that reduces (bool out, int in)
            with pytest.raises(TypeError):
                ufunc.reduce(x, **kw)
            continue
        _same(ufunc.reduce(x, **kw), want, exact)
        _same(ufunc.accumulate(a, axis=0), ufunc.accumulate(h, axis=0), exact)
    try:
        want = ufunc.reduce(h, axis=None)
    except (ValueError, TypeError) as e:
        with pytest.raises(type(e), match="reorderable|loop"):
            ufunc.reduce(a, axis=None)
    else:
        _same(ufunc.reduce(a, axis=None), want, exact)


def test_non_reorderable_reduce_follows_numpys_order(device):
    # a left fold: float rounding and sign exactly NumPy's
    h = np.array([[1e8, 3.0, -7.5], [1.0, 1e-3, 2.0], [0.1, 0.2, 0.3], [5.0, 4.0, 3.0]],
                 np.float32)
    a = ga.asarray(h, device=device)
    for u in (np.subtract, np.divide):
        for ax in (0, 1):
            _same(u.reduce(a, axis=ax), u.reduce(h, axis=ax))
            _same(u.accumulate(a, axis=ax), u.accumulate(h, axis=ax))
    with pytest.raises(ValueError, match="not reorderable.*one axis"):
        np.subtract.reduce(a, axis=(0, 1))


@pytest.mark.parametrize("ufunc", [np.add, np.maximum, np.bitwise_xor, np.subtract,
                                   np.logical_or], ids=lambda u: u.__name__)
def test_reduce_keywords(device, ufunc):
    dt = np.dtype(bool) if ufunc is np.logical_or else np.dtype(np.int16)
    h = _host((4, 3, 2), dt, seed=1)
    a = ga.asarray(h, device=device)
    hm = _host((3, 2), np.dtype(bool), seed=2)
    m = ga.asarray(hm, device=device)
    reorderable = ufunc is not np.subtract
    cases = [{"axis": 1, "keepdims": True}, {"axis": 0, "dtype": dt},
             {"axis": 2, "initial": 5}, {"axis": 0, "where": hm, "initial": 3},
             {"axis": ()}]
    if reorderable:
        cases += [{"axis": (0, 2)}, {"axis": None, "keepdims": True, "initial": 2},
                  {"axis": (1, 2), "where": hm}]
    for kw in cases:
        if ufunc.identity is None and "where" in kw and "initial" not in kw:
            continue
        gkw = dict(kw, where=m) if "where" in kw else kw
        want = ufunc.reduce(h, **kw)
        _same(ufunc.reduce(a, **gkw), want)
        out = ga.empty(want.shape, dtype=want.dtype, device=device)
        assert ufunc.reduce(a, out=out, **gkw) is out
        _same(out, want)
        assert ufunc.reduce(a, out=(out,), **gkw) is out


def test_reduce_out_sets_the_computing_dtype(device):
    h = np.array([100, 100, 100], np.int8)
    a = ga.asarray(h, device=device)
    out = ga.empty((), dtype=np.int8, device=device)
    with np.errstate(over="ignore"):
        want = np.add.reduce(h, out=np.empty((), np.int8))
    np.add.reduce(a, out=out)
    _same(out, want)  # wraps in int8, as NumPy's loop does
    _same(np.add.reduce(a), np.add.reduce(h))  # int64 by default


def test_reduce_of_nothing(device):
    h = np.zeros((0, 3), np.int32)
    a = ga.asarray(h, device=device)
    for u in (np.add, np.multiply, np.bitwise_and, np.bitwise_or, np.logical_xor):
        _same(u.reduce(a, axis=0), u.reduce(h, axis=0))
        _same(u.reduce(a, axis=1), u.reduce(h, axis=1))
    for u in (np.maximum, np.subtract):
        with pytest.raises(ValueError, match="no identity"):
            u.reduce(a, axis=0)
        _same(u.reduce(a, axis=0, initial=7), u.reduce(h, axis=0, initial=7))
    with pytest.raises(ValueError, match="initial"):
        np.maximum.reduce(a, axis=0, where=ga.asarray(np.ones(3, bool), device=device))
    _same(np.add.reduce(a, axis=0, where=False), np.add.reduce(h, axis=0, where=False))


def test_reduce_dtypes(device):
    for dt, ufuncs in ((np.int8, (np.add, np.bitwise_or)), (np.uint16, (np.subtract,)),
                       (np.float16, (np.maximum, np.subtract)),
                       (np.float64, (np.bitwise_or, np.subtract)), (np.bool_, (np.add,))):
        if not device.supports(dt):
            continue
        h = _host((5, 2), np.dtype(dt), seed=3)
        a = ga.asarray(h, device=device)[::2]
        for u in ufuncs:
            try:
                want = u.reduce(h[::2])
            except TypeError:
                with pytest.raises(TypeError):
                    u.reduce(a)
                continue
            _same(u.reduce(a), want, exact=dt != np.float16)
    h = _host((6,), np.dtype(np.int32))
    a = ga.asarray(h, device=device)
    _same(np.subtract.reduce(a, dtype=np.float32), np.subtract.reduce(h, dtype=np.float32))
    _same(np.add.accumulate(a, dtype=np.int8), np.add.accumulate(h, dtype=np.int8))
    _same(np.maximum.reduce(a, dtype=np.float32), np.maximum.reduce(h, dtype=np.float32))
    _same(np.add.reduce(a, dtype=np.int8), np.add.reduce(h, dtype=np.int8))
    with pytest.raises(TypeError):
        np.logical_or.reduce(a, dtype=np.int64)


@_SETTINGS
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=3).map(tuple),
       data=st.data())
def test_tree_reductions_match_numpy(device, shape, data):
    """The tree (halving) and the Hillis-Steele scan at odd and even lengths."""
    u = data.draw(st.sampled_from([np.bitwise_xor, np.bitwise_and, np.maximum, np.gcd
                                   if np.gcd in BY_UFUNC else np.bitwise_or]))
    ax = data.draw(st.integers(0, len(shape) - 1))
    h = ((np.arange(int(np.prod(shape))) * 37 + 11) % 23 - 4).astype(np.int32).reshape(shape)
    a = ga.asarray(h, device=device)
    _same(u.reduce(a, axis=ax), u.reduce(h, axis=ax))
    _same(u.reduce(a, axis=None), u.reduce(h, axis=None))
    _same(u.accumulate(a, axis=ax), u.accumulate(h, axis=ax))


def test_supported_reduce_does_not_pin_the_operand(device, used):
    """NumPy 2.4 leaks the operand of a refused reduce; answered calls leave nothing."""
    before = used()
    a = ga.asarray(np.arange(64, dtype=np.int32), device=device)
    refs = sys.getrefcount(a)
    for u in (np.subtract, np.add):
        r = u.reduce(a)
        r.free()
        r = u.accumulate(a)
        r.free()
    assert sys.getrefcount(a) == refs
    # the temporaries of every method go back to the pool as they finish
    m = a > 30
    for r in (np.add.reduce(a, where=m), np.subtract.reduce(a[:5], where=m[:5], initial=1),
              np.add.outer(a[:4], a[:3]), np.add.reduceat(a, [0, 9, 3]),
              np.add(a, 1, where=m)):
        r.free()
    b = ga.zeros(8, dtype=np.int32, device=device)
    np.add.at(b, [0, 0, 1, -1] * 4, a[:16])
    del a, r, m, b
    assert used() == before


# ----------------------------------------------------------------------------- outer
def test_outer(device):
    h1 = _host((3,), np.dtype(np.int32))
    h2 = _host((2, 4), np.dtype(np.int32), seed=5)
    a1, a2 = ga.asarray(h1, device=device), ga.asarray(h2, device=device)
    for u in (np.subtract, np.less):
        _same(u.outer(a1, a2), u.outer(h1, h2))
    _same(np.maximum.outer(a2.T, a1), np.maximum.outer(h2.T, h1))
    _same(np.add.outer(a1, a2, dtype=np.float32), np.add.outer(h1, h2, dtype=np.float32))
    out = ga.empty((3, 2, 4), dtype=np.int64, device=device)
    assert np.multiply.outer(a1, a2, out=out) is out
    _same(out, np.multiply.outer(h1, h2).astype(np.int64))
    empty = ga.asarray(np.zeros(0, np.int32), device=device)
    _same(np.add.outer(empty, a1), np.add.outer(np.zeros(0, np.int32), h1))


# ----------------------------------------------------------------------------- at
def _at_both(device, ufunc, h, idx, b=None, g_idx=None):
    a = ga.asarray(h, device=device)
    hb = b.get() if isinstance(b, ga.GPUArray) else b
    want = h.copy()
    if b is None:
        ufunc.at(want, idx)
        assert ufunc.at(a, idx if g_idx is None else g_idx) is None
    else:
        ufunc.at(want, idx, hb)
        assert ufunc.at(a, idx if g_idx is None else g_idx, b) is None
    _same(a, want, exact=h.dtype.kind not in "fc")


def test_add_at_repeated_and_negative_indices(device):
    h = np.zeros(6, np.int64)
    _at_both(device, np.add, h, [0, 0, 1, -1, -1, -1, 3], 1)
    idx = np.array([2, 2, -4, 5, 0, 2])
    vals = np.arange(6, dtype=np.int64) * 3 - 4
    _at_both(device, np.add, h, idx, ga.asarray(vals, device=device),
             g_idx=ga.asarray(idx, device=device))
    # broadcasting b: one value for every index
    _at_both(device, np.add, h, idx, ga.asarray(np.array([7]), device=device))
    # many repeats of one position (past the rounds: the segmented scan)
    many = np.array([4] * 40 + [1] * 3 + [-2] * 17)
    _at_both(device, np.add, h, many, ga.asarray(np.arange(60), device=device))
    _at_both(device, np.add, np.zeros(3, np.float32), [0] * 25 + [2],
             ga.asarray(np.linspace(0, 1, 26, dtype=np.float32), device=device))


@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply, np.maximum, np.minimum,
                                   np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.divide,
                                   np.logical_and, np.logical_or, np.logical_xor],
                         ids=lambda u: u.__name__)
def test_at_ufuncs_with_repeats(device, ufunc):
    dt = (np.dtype(bool) if ufunc.__name__.startswith("logical")
          else np.dtype(np.float32) if ufunc is np.divide else np.dtype(np.int32))
    h = _host((4, 5), dt, seed=4)
    for rep in (3, 12):  # rounds in NumPy's order; the segmented scan
        idx = ([0] * rep + [3, -1, 2] * 2, [1] * rep + [4, 0, 2] * 2)
        n = len(idx[0])
        b = ga.asarray(_host((n,), dt, seed=rep), device=device)
        _at_both(device, ufunc, h, idx, b)
    # a non-contiguous target: the transpose
    a = ga.asarray(h.T.copy(), device=device).T
    want = h.copy()
    ufunc.at(want, (slice(None), [0, 0, 4]), _host((3,), dt, seed=9))
    ufunc.at(a, (slice(None), [0, 0, 4]), ga.asarray(_host((3,), dt, seed=9), device=device))
    _same(a, want, exact=ufunc is not np.divide)


def test_at_indices_of_every_kind(device):
    h = np.arange(24, dtype=np.int32).reshape(4, 6)
    _at_both(device, np.add, h, (slice(1, 3), [0, 0, 5]), 10)
    _at_both(device, np.subtract, h, np.array([[0, 3], [3, 3]]), 1)
    _at_both(device, np.add, h, 2, ga.asarray(np.arange(6, dtype=np.int32), device=device))
    _at_both(device, np.negative, h, [1, 1, 2])  # unary: applied once per occurrence
    _at_both(device, np.add, h, ([], []), 1)  # nothing selected
    _at_both(device, np.maximum, h, (Ellipsis, [5, 5]),
             ga.asarray(np.array([[30], [1], [50], [2]], np.int32), device=device))
    if device.supports(np.float16):
        _at_both(device, np.add, np.zeros(4, np.float16), [1, 1, 3], np.float16(0.5))


def test_at_errors(device):
    a = ga.asarray(np.zeros(5, np.int32), device=device)
    with pytest.raises(IndexError):
        np.add.at(a, [0, 5], 1)
    with pytest.raises(ValueError, match="second operand"):
        np.add.at(a, [0])
    with pytest.raises(ValueError, match="broadcast"):
        np.add.at(a, [0, 1, 2], ga.asarray(np.ones(2, np.int32), device=device))
    with pytest.raises(TypeError, match="same_kind"):
        np.add.at(a, [0], 1.5)
    ro = ga.broadcast_to(a[:1], (3,))
    with pytest.raises(ValueError, match="read-only"):
        np.add.at(ro, [0], 1)
    np.testing.assert_array_equal(a.get(), np.zeros(5, np.int32))  # nothing changed


# ----------------------------------------------------------------------------- reduceat
def test_reduceat(device):
    h = _host((4, 7), np.dtype(np.int32), seed=6)
    a = ga.asarray(h, device=device)
    for u in (np.add, np.multiply, np.maximum, np.subtract, np.bitwise_or):
        for idx, ax in (([0, 2, 5], 1), ([0, 3, 1, 6], 1), ([1, 1, 3], 0), ([2], -1)):
            _same(u.reduceat(a, idx, axis=ax), u.reduceat(h, idx, axis=ax))
    gidx = ga.asarray(np.array([0, 4]), device=device)
    _same(np.add.reduceat(a.T, gidx), np.add.reduceat(h.T, [0, 4]))
    out = ga.empty((2, 7), dtype=np.int64, device=device)
    assert np.add.reduceat(a, [0, 2], out=out) is out
    _same(out, np.add.reduceat(h, [0, 2]))
    with pytest.raises(IndexError, match="out-of-bounds"):
        np.add.reduceat(a, [0, 9], axis=1)


# ----------------------------------------------------------------------------- keywords
def test_call_dtype_and_casting(device):
    h1 = _host((3, 4), np.dtype(np.int8))
    h2 = _host((3, 4), np.dtype(np.int8), seed=2)
    a1, a2 = ga.asarray(h1, device=device), ga.asarray(h2, device=device)
    for u in (np.multiply, np.maximum):
        _same(u(a1, a2, dtype=np.float32), u(h1, h2, dtype=np.float32))
        _same(u(a1, 3, dtype=np.int16), u(h1, 3, dtype=np.int16))
        _same(u(a1.T, a2.T, signature=(None, None, np.int64)),
              u(h1.T, h2.T, signature=(None, None, np.int64)))
    f = ga.asarray(h1.astype(np.float32) / 2, device=device)
    hf = h1.astype(np.float32) / 2
    out = ga.empty((3, 4), dtype=np.int32, device=device)
    with pytest.raises(TypeError, match="same_kind|Cannot cast"):
        np.multiply(f, f, out=out)
    assert np.multiply(f, f, out=out, casting="unsafe") is out
    _same(out, np.multiply(hf, hf, out=np.empty((3, 4), np.int32), casting="unsafe"))
    with pytest.raises(TypeError):
        np.add(a1, f, casting="no")
    with pytest.raises(ValueError, match="casting"):
        np.add(a1, a2, casting="sometimes")


def test_call_where_order_and_out_tuples(device):
    h = _host((3, 4), np.dtype(np.float32))
    hm = _host((3, 4), np.dtype(bool), seed=1)
    a, m = ga.asarray(h, device=device), ga.asarray(hm, device=device)
    out = ga.asarray(np.full((3, 4), -1, np.float32), device=device)
    want = np.full((3, 4), -1, np.float32)
    np.add(h, 1, out=want, where=hm)
    assert np.add(a, 1, out=(out,), where=m) is out
    _same(out, want)
    assert np.sqrt(a, out=out, where=m[0]) is out  # the mask broadcasts
    np.sqrt(h, out=want, where=hm[0])
    _same(out, want)
    r = np.multiply(a, 2, where=m)  # no out: only the masked elements are defined
    np.testing.assert_array_equal(r.get()[hm], (h * 2)[hm])
    assert np.add(a, 1, where=False, out=out) is out
    _same(out, want)
    for order in ("C", "F", "A", "K"):
        r = np.add(a.T, 1, order=order)
        _same(r, h.T + 1)
        assert r.flags.c_contiguous  # results are C-ordered whatever the order
    with pytest.raises(TypeError, match="subok"):
        np.add(a, 1, subok=False)
    with pytest.raises(TypeError, match="NumPy array"):
        np.add(a, 1, where=hm)  # a host mask is refused, never copied


def test_comparisons_with_python_ints_beyond_the_range(device):
    h = np.array([-128, 0, 127], np.int8)
    a = ga.asarray(h, device=device)
    for u in (np.greater, np.less, np.equal, np.not_equal, np.less_equal, np.greater_equal):
        for v in (1000, -1000, 2**70, -(2**70)):
            _same(u(a, v), u(h, v))
            _same(u(v, a), u(v, h))
    hu = np.array([0, 255], np.uint8)
    au = ga.asarray(hu, device=device)
    _same(np.less(au, -1), np.less(hu, -1))
    out = ga.empty(2, dtype=bool, device=device)
    assert np.equal(au, 2**70, out=out) is out
    _same(out, np.zeros(2, bool))


def test_ufunc_without_a_row_runs_the_namespace_function_of_its_name(device, monkeypatch):
    """np.divmod on gpuarrays arrays: ga.divmod (by the ufunc's name), out= tuples."""
    if not hasattr(ga, "divmod"):
        monkeypatch.setattr(ga, "divmod", lambda x1, x2: (ga.floor_divide(x1, x2),
                                                          ga.remainder(x1, x2)),
                            raising=False)
    h1 = np.array([7, -7, 9, 4], np.int32)
    h2 = np.array([2, 2, -4, 3], np.int32)
    a1, a2 = ga.asarray(h1, device=device), ga.asarray(h2, device=device)
    q, r = np.divmod(a1, a2)
    wq, wr = np.divmod(h1, h2)
    _same(q, wq)
    _same(r, wr)
    oq = ga.empty(4, dtype=np.int64, device=device)
    orr = ga.empty(4, dtype=np.int32, device=device)
    got = np.divmod(a1, a2, out=(oq, orr))
    assert got[0] is oq and got[1] is orr
    _same(oq, wq.astype(np.int64))
    _same(orr, wr)
