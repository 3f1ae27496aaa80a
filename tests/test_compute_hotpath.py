"""The compiled elementwise path (``_core.apply``, src/native/core/compute.c) and the gate.

``_core.apply`` runs the common case itself and hands everything else to the Python
dispatch (``dispatch.apply_slow``).  These tests pin that both give the same values,
dtypes and errors; that the compiled path keeps every rule (freed arrays, resets,
devices, promotion, int overflow, out=, overlap, refusal before allocation, no
allocation in a cached loop); the per-operation remembered typings and cpu views; the
compiled usage gate; and the cpu engine's branch-free ``where`` on large arrays
(docs/performance.md, "The elementwise host path").
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays import _core
from gpuarrays._compute import cpu_engine, dispatch
from gpuarrays._compute.table import OPS


def _same(x, y) -> None:
    """Same dtype, shape and bits (NaN payloads and signed zeros included)."""
    x = x.get() if isinstance(x, ga.GPUArray) else x
    y = y.get() if isinstance(y, ga.GPUArray) else y
    assert x.dtype == y.dtype and x.shape == y.shape
    assert x.tobytes() == y.tobytes()


# the same results as the Python dispatch ---------------------------------------------------
_CASES = [  # (operation, operands: "a"/"b" arrays of the dtype, or a scalar), few signatures
    ("add", ("a", "b")), ("multiply", ("a", 2)), ("multiply", (2.5, "a")),
    ("exp", ("a",)), ("greater", ("a", 0)), ("maximum", ("a", "b")), ("where", ("c", "a", 0)),
]


@pytest.mark.parametrize("name,spec", _CASES, ids=[c[0] + str(len(c[1])) for c in _CASES])
def test_compiled_and_python_dispatch_agree(device, name, spec):
    rng = np.random.default_rng(5)
    host = {"a": rng.standard_normal(37).astype(np.float32),
            "b": rng.standard_normal(37).astype(np.float32)}
    host["a"][3] = np.nan
    host["c"] = host["a"] > 0
    arrays = {k: ga.asarray(v, device=device) for k, v in host.items()}
    args = tuple(arrays[x] if isinstance(x, str) else x for x in spec)
    op = OPS[name]
    fast, slow = dispatch.apply(op, args), dispatch.apply_slow(op, args)
    _same(fast, slow)
    want = op.ufunc(*(host[x] if isinstance(x, str) else x for x in spec)) \
        if name != "where" else np.where(host["c"], host["a"], np.float32(0))
    np.testing.assert_allclose(fast.get(), want, rtol=2e-6)
    out = ga.empty(fast.shape, fast.dtype, device=device)  # an exact out: compiled too
    assert dispatch.apply(op, args, out) is out
    _same(out, slow)


def test_operators_take_the_compiled_path_and_give_numpy_values(device):
    h = np.arange(-4, 5, dtype=np.int16)
    a = ga.asarray(h, device=device)
    _same(a + a, h + h)
    _same(3 - a, 3 - h)
    _same(-a, -h)
    _same(a * True, h * True)
    b = ga.asarray(h, device=device)
    b -= 2
    _same(b, h - 2)
    b += a  # an array operand in place
    _same(b, 2 * h - 2)


def test_operands_the_compiled_path_leaves_to_python(device):
    """NumPy scalars, lists, NumPy arrays, broadcasting: the Python dispatch's answers."""
    h = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = ga.asarray(h, device=device)
    _same(a + np.float32(1), h + np.float32(1))
    _same(a + a[0], h + h[0])
    for other in ([1, 2, 3], np.ones(3)):
        with pytest.raises(TypeError):
            a + other
        with pytest.raises(TypeError):
            other - a  # (NumPy takes the list; gpuarrays refuses host data in __array_ufunc__)
    with pytest.raises(TypeError, match="ga.asarray"):  # host data: the remedies, at once
        a.__add__([1])
    assert a.__iadd__("x") is NotImplemented and a.__eq__([None]) is NotImplemented
    assert not (a == (None,)) and a != ["x"]  # no numbers to compare: identity answers
    assert a in (None, (None,), a)


# the rules ---------------------------------------------------------------------------------
def test_freed_operands_and_outputs_raise(device, used):
    a = ga.ones(8, dtype="float32", device=device)
    b = ga.ones(8, dtype="float32", device=device)
    a + b  # remember the typing
    out = ga.empty(8, dtype="float32", device=device)
    view = b[2:]
    b.free(force=True)  # the storage goes: every view of it is freed too
    before = used()
    with ga.record_allocations() as rec:
        for bad in (lambda: a + b, lambda: b * 2, lambda: view + 1, lambda: ga.exp(view),
                    lambda: dispatch.apply(OPS["add"], (a, a), view[:6])):
            with pytest.raises(ga.FreedArrayError):
                bad()
        out.free()
        with pytest.raises(ga.FreedArrayError):
            dispatch.apply(OPS["add"], (a, a), out)
        with pytest.raises(ga.FreedArrayError):
            a.__iadd__(view)
    assert rec.count == 0 and used() < before


def test_operands_from_before_a_reset_raise(device):
    a = ga.ones(4, dtype="float32", device=device)
    (a + a).free()
    gate = device.gate
    ga.device_reset(device)
    assert gate._readers == 0 and not gate._writer
    with pytest.raises(ga.DeviceResetError):
        a + a
    with pytest.raises(ga.DeviceResetError):
        a += 1
    b = ga.ones(4, dtype="float32", device=device)
    _same(b + b, np.full(4, 2, np.float32))  # the remembered typing still serves


def test_wrong_dtypes_and_overflowing_ints_are_refused_before_allocating(device, used):
    i8 = ga.asarray(np.arange(4, dtype=np.int8), device=device)
    f4 = ga.ones(4, dtype="float32", device=device)
    bl = i8 == i8
    _same(i8 + 100, np.arange(4, dtype=np.int8) + 100)  # remembers (int8, int) with limits
    before = used()
    with ga.record_allocations() as rec:
        for bad, err in ((lambda: i8 + 300, OverflowError), (lambda: i8 - (-129), OverflowError),
                         (lambda: ga.bitwise_and(f4, 1), TypeError),
                         (lambda: f4 & i8, TypeError), (lambda: bl & 1.5, TypeError)):
            with pytest.raises(err):
                bad()
    assert rec.count == 0 and used() == before
    _same(i8 + 127, np.arange(4, dtype=np.int8) + 127)  # the bounds themselves pass
    _same(i8 + (-128), np.arange(4, dtype=np.int8) + (-128))


def test_more_typings_than_a_plan_remembers(device):
    plan = dispatch.PLANS[OPS["negative"]]
    plan.forget()
    dts = ["int8", "int16", "int32", "int64", "uint8", "float32", "uint16", "uint32", "int8",
           "float32", "int16"]  # more than the eight a plan keeps, some again
    for dt in dts:
        if not device.info.float64 and dt == "float64":
            continue
        h = np.arange(5).astype(dt)
        _same(-ga.asarray(h, device=device), -h)
    assert 1 <= plan.remembered() <= 8


def test_out_that_is_not_exact_goes_through_python(device):
    a = ga.asarray(np.arange(6, dtype=np.float32), device=device)
    wide = ga.zeros(6, dtype="float32" if not device.info.float64 else "float64",
                    device=device)
    np.add(a, a, out=wide)  # a same-kind cast or exact: either way NumPy's values
    np.testing.assert_array_equal(wide.get(), np.arange(6) * 2.0)
    ro = ga.broadcast_to(a[:1], (6,))
    with pytest.raises(ValueError, match="read-only"):
        ro += 1
    with pytest.raises(ValueError, match="shape"):
        dispatch.apply(OPS["add"], (a, a), a[:3])
    with pytest.raises(TypeError, match="cast"):
        dispatch.apply(OPS["add"], (a, a), ga.zeros(6, dtype="int32", device=device))


def test_overlapping_output_gives_numpy_values(device):
    h = np.arange(10, dtype=np.int32)
    a = ga.asarray(h, device=device)
    a[1:] += a[:-1]
    h[1:] += h[:-1].copy()  # NumPy's ufunc reads the operands as they were
    _same(a, h)
    a += a  # exactly the same view: fine without staging
    _same(a, h + h)


def test_kinds_mix_to_device(device):
    for kind in [k for k in ("host", "unified") if k in device.kinds]:
        a = ga.ones(4, dtype="float32", device=device, kind=kind)
        c = ga.ones(4, dtype="float32", device=device)
        assert (a + a).kind == kind and (a * 2).kind == kind and (a + c).kind == "device"


def test_a_cached_loop_of_operators_allocates_nothing(device):
    cache = ga.AllocCache()
    a = ga.asarray(np.linspace(-1, 1, 100, dtype=np.float32), device=device)
    counts = []
    for i in range(4):
        with ga.record_allocations() as rec, ga.cached(cache):
            c = ga.where(a * 2 + a > 0, ga.exp(a), 0)
            c += i
            del c
        counts.append(rec.count)
    assert counts[1:] == [0, 0, 0], counts
    cache.free()


def test_an_engine_failure_gives_the_result_back(device, used):
    """A plan whose function raises: the error propagates, the result goes back, the
    gate is left."""
    class Boom(Exception):
        pass

    def fail(*args):
        raise Boom("engine failed")

    f4 = np.dtype(np.float32)
    op = object()  # any key: the compiled apply looks plans up by the operation object
    engine = None if device.backend == "cpu" else fail
    dispatch.PLANS[op] = _core.Plan(fail, 1, lambda keys, dev: (f4, (), engine, dev.gate))
    try:
        a = ga.ones(1024, dtype="float32", device=device)
        before = used()
        for _ in range(3):
            with pytest.raises(Boom):
                _core.apply(op, (a,))
        assert used() == before and device.gate._readers == 0
    finally:
        del dispatch.PLANS[op]


def test_plan_and_apply_check_their_arguments():
    typer = lambda keys, dev: None  # noqa: E731
    with pytest.raises(ValueError, match="call"):
        _core.Plan(np.add, 2, typer, call="sideways")
    with pytest.raises(ValueError, match="operands"):
        _core.Plan(np.add, 4, typer)
    with pytest.raises(TypeError, match="callable"):
        _core.Plan(np.add, 2, "typer")
    with pytest.raises(TypeError):
        _core.apply(OPS["add"])
    with pytest.raises(TypeError):
        _core.apply(OPS["add"], (), None, None)
    with pytest.raises(TypeError):
        _core.apply(OPS["add"], (), output=None)
    a = ga.ones(3, dtype="float32", device="cpu:0")
    op = object()
    dispatch.PLANS[op] = _core.Plan(np.negative, 1, typer)
    try:
        with pytest.raises(TypeError, match="typer must return"):
            _core.apply(op, (a,))
    finally:
        del dispatch.PLANS[op]
    _same(_core.apply(OPS["add"], [a, a]), np.full(3, 2, np.float32))  # a list: Python path


# the cpu views -----------------------------------------------------------------------------
def test_host_views_follow_every_layout():
    h = np.arange(24, dtype=np.float64).reshape(4, 6)
    a = ga.asarray(h, device="cpu:0")
    for v, want in ((a, h), (a[1:, ::-2], h[1:, ::-2]), (a.T, h.T), (a[2], h[2]),
                    (a[1:3, 2:5], h[1:3, 2:5]), (a.view(np.int64), h.view(np.int64))):
        view = cpu_engine.view(v)
        np.testing.assert_array_equal(view, want)
        assert view.flags.writeable and cpu_engine.view(v) is view  # remembered
    _core.clear_views()
    assert cpu_engine.view(a) is not None
    with pytest.raises(TypeError, match="gpuarrays array"):
        _core.host_view(h)


# the gate ----------------------------------------------------------------------------------
def test_gate_counts_and_refuses_an_unbalanced_exit():
    gate = ga.get_device("cpu:0").gate
    with gate:
        with gate:
            assert gate._readers == 2
    assert gate._readers == 0
    with pytest.raises(RuntimeError, match="more often"):
        gate.__exit__(None, None, None)


def test_a_reset_waits_for_shared_holders_and_holders_wait_for_a_reset():
    from gpuarrays._memory.gate import UsageGate

    gate = UsageGate()
    events = []
    gate.__enter__()

    def reset():
        with gate.exclusive():
            events.append("reset")
            time.sleep(0.05)
        events.append("reset done")

    t = threading.Thread(target=reset)
    t.start()
    time.sleep(0.05)
    assert events == [] and gate._waiting == 1
    with gate:  # readers are preferred: a nested shared entry never waits for a reset
        pass
    gate.__exit__(None, None, None)
    t.join(5)
    assert events == ["reset", "reset done"]

    entered = threading.Event()

    def holder():
        with gate:
            entered.set()

    with gate.exclusive():
        t = threading.Thread(target=holder)
        t.start()
        time.sleep(0.05)
        assert not entered.is_set() and gate._writer
    t.join(5)
    assert entered.is_set() and gate._readers == 0 and gate._waiting == 0


# where on the cpu engine -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint16", "bool", "complex64",
                                   "complex128", "float16"])
def test_large_where_is_bit_exact(dtype):
    """Beyond the select threshold (several blocks and a tail), every dtype and operand form."""
    n = 2 * 65536 + 123
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(n) * 100).astype(dtype)
    y = (rng.standard_normal(n) * 100).astype(dtype)
    if x.dtype.kind in "fc":
        x[::7] = np.nan
        x[1::11] = -0.0
    cond = rng.standard_normal(n) > 0
    gx, gy, gc = (ga.asarray(v, device="cpu:0") for v in (x, y, cond))
    scalar = True if dtype == "bool" else 3
    _same(ga.where(gc, gx, gy), np.where(cond, x, y))
    _same(ga.where(gc, gx, 0 if dtype != "bool" else False), np.where(cond, x, x.dtype.type(0)))
    _same(ga.where(gc, scalar, gx), np.where(cond, x.dtype.type(scalar), x))
    _same(ga.where(gc, gx[::-1], gy), np.where(cond, x[::-1], y))  # not contiguous: masked copy
    _same(ga.where(gc[:1000], gx[:1000], gy[:1000]), np.where(cond[:1000], x[:1000], y[:1000]))


def test_floating_point_errors_are_silenced_and_the_callers_state_kept():
    """The cpu engine runs NumPy with every floating-point error ignored (in the thread's
    quiet context, or by setting the state around its own kernels) and leaves the caller's
    error state as it was, in every thread."""
    big = ga.asarray(np.full(4, 3e38, np.float32), device="cpu:0")
    zero = ga.zeros(4, dtype="float32", device="cpu:0")
    seen = []

    def run():
        with np.errstate(all="raise"):
            before = np.geterr()
            r = [big + big, big * 10, zero / zero, ga.where(big > 0, big * big, 0), ga.log(zero)]
            seen.append((np.geterr() == before, [np.isfinite(x.get()).any() for x in r]))
            np.testing.assert_raises(FloatingPointError, np.add, np.float32(3e38),
                                     np.float32(3e38))

    run()
    t = threading.Thread(target=run)
    t.start()
    t.join(10)
    assert seen == [(True, [False] * 5)] * 2


# NumPy's loop called directly (cpu) ----------------------------------------------------------
_DIRECT_DTYPES = ["bool", "int8", "uint16", "int32", "int64", "float16", "float32", "float64",
                  "complex64", "complex128"]


def _host(dtype: str, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 50, n).astype(dtype)
    v = (rng.standard_normal(n) * 4).astype(dtype)
    if v.dtype.kind == "f" and n > 3:
        v[:3] = [np.nan, np.inf, -0.0]
    return v


@pytest.mark.parametrize("dtype", _DIRECT_DTYPES)
def test_the_cpu_engine_calls_numpys_own_loop_with_numpys_values(dtype):
    """Same-dtype operands of a ufunc row run NumPy's strided loop for those dtypes with no
    ufunc call around it (compute.c, run_direct): every layout it takes gives NumPy's bits,
    and every layout it leaves (strided, broadcast rows, partial overlap, unaligned) still
    does, through the ufunc."""
    dev = ga.get_device("cpu:0")
    h, h2 = _host(dtype, 1000, 1), _host(dtype, 1000, 2)
    a, b = ga.asarray(h, device=dev), ga.asarray(h2, device=dev)
    kind = np.dtype(dtype).kind
    names = ["equal"] + ([] if kind == "b" else ["add", "multiply"]) + (  # bool: uint8 rows
        [] if kind in "bc" else ["maximum"]) + (["negative", "sqrt", "exp"] if kind in "fc" else [])
    for name in names:
        op = OPS[name]
        dispatch.PLANS[op].forget()
        binary = op.nin == 2
        got = dispatch.apply(op, (a, b) if binary else (a,))
        with np.errstate(all="ignore"):
            _same(got, op.ufunc(h, h2) if binary else op.ufunc(h))
            assert dispatch.PLANS[op].direct() == 1, name
            if binary:
                one = ga.asarray(h2[:1], device=dev)  # one element: read with a zero step
                _same(dispatch.apply(op, (a, one)), op.ufunc(h, h2[:1]))
                zero_d = ga.asarray(h2[0], device=dev)
                _same(dispatch.apply(op, (zero_d, a)), op.ufunc(h2[0:1].reshape(()), h))
                _same(dispatch.apply(op, (a[::2], b[::2])), op.ufunc(h[::2], h2[::2]))
                m, m2 = a.reshape(40, 25), b[:25]  # broadcast rows: the ufunc's layout
                _same(dispatch.apply(op, (m, m2)), op.ufunc(h.reshape(40, 25), h2[:25]))
            empty = ga.asarray(h[:0], device=dev)
            _same(dispatch.apply(op, (empty, empty) if binary else (empty,)),
                  op.ufunc(h[:0], h[:0]) if binary else op.ufunc(h[:0]))


@pytest.mark.parametrize("dtype,scalars", [
    ("int8", (3, True, -7)), ("uint16", (7, False)), ("int64", (-(2 ** 40), 5)),
    ("float32", (2, 0.1, -1e300, True)), ("float64", (0.1, 3, 2 ** 60 + 1)),
    ("complex64", (1j, 0.5, 3)), ("complex128", (2 - 1j,)), ("float16", (0.1, 3)),
    ("bool", (True, False))])
def test_python_scalars_are_packed_as_numpy_converts_them(dtype, scalars):
    dev = ga.get_device("cpu:0")
    h = _host(dtype, 50)
    a = ga.asarray(h, device=dev)
    for s in scalars:
        for name in ("add", "multiply", "maximum", "not_equal"):
            if (dtype == "bool" and name in ("add", "multiply")) or (
                    dtype.startswith("complex") and name == "maximum"):
                continue
            op = OPS[name]
            with np.errstate(all="ignore"):
                _same(dispatch.apply(op, (a, s)), op.ufunc(h, s))
                _same(dispatch.apply(op, (s, a)), op.ufunc(s, h))


def test_outputs_on_their_operands_and_unaligned_views_give_numpy_values():
    dev = ga.get_device("cpu:0")
    h = np.arange(2000, dtype=np.float32)
    a = ga.asarray(h, device=dev)
    a += a  # exactly on an operand: the loop runs in place, as NumPy's does
    h += h
    _same(a, h)
    a[1:] += a[:-1]  # partly overlapping: NumPy copies (through the ufunc)
    h[1:] += h[:-1]
    _same(a, h)
    raw = np.arange(4004, dtype=np.uint8)
    u = ga.asarray(raw, device=dev)[1:4001].view(np.float32)  # unaligned: NumPy buffers
    want = raw[1:4001].view(np.float32)
    with np.errstate(all="ignore"):
        _same(u * 2.0, want * np.float32(2.0))
        _same(ga.add(u, u), want + want)


def test_a_loop_that_raises_raises_with_or_without_the_gil():
    """NumPy's integer power raises for negative exponents from inside its loop; the engine
    reports it, on short loops (GIL held) and long ones (GIL released)."""
    dev = ga.get_device("cpu:0")
    for n in (10, 1 << 15):
        x = ga.asarray(np.arange(n, dtype=np.int32), device=dev)
        e = ga.asarray(np.full(n, -1, np.int32), device=dev)
        with pytest.raises(ValueError, match="negative integer powers"):
            ga.pow(x, e)
        with np.errstate(all="raise"):  # the loop's flags are not left for NumPy to find
            ga.asarray(np.ones(n, np.float32), device=dev) / 0.0
            np.add(np.ones(3), 1.0)


@pytest.mark.parametrize("name,dtype", [
    ("floor_divide", "float16"), ("floor_divide", "float32"), ("floor_divide", "float64"),
    ("tanh", "complex64"), ("tanh", "complex128"), ("sign", "complex64"),
    ("sign", "complex128")])
def test_standard_fixes_run_numpys_loop_only_while_everything_is_finite(name, dtype):
    """Where the standard's values differ from NumPy's only at infinities and NaN, finite
    operands run NumPy's loop directly and any infinity or NaN (an array element, or a
    scalar) runs the fix: both give what the Python engine gives."""
    dev = ga.get_device("cpu:0")
    op = OPS[name]
    dispatch.PLANS[op].forget()
    h = _host(dtype, 300, 3)[3:]  # finite
    h2 = _host(dtype, 300, 4)[3:] + 3
    specials = [np.inf, -np.inf, np.nan]
    cases = [(h, h2)]
    for k, v in enumerate(specials):
        bad = h.copy()
        bad[7 * k + 1] = v if np.dtype(dtype).kind == "f" else complex(v, 1.0)
        cases += [(bad, h2), (h2, bad)]
    for x1, x2 in cases:
        args = tuple(ga.asarray(v, device=dev) for v in ((x1, x2) if op.nin == 2 else (x1,)))
        with np.errstate(all="ignore"):
            _same(dispatch.apply(op, args), dispatch.apply_slow(op, args))
    assert dispatch.PLANS[op].direct() == 1
    if op.nin == 2:
        a = ga.asarray(h, device=dev)
        for s in (2.5, float("inf"), float("nan")):
            _same(dispatch.apply(op, (a, s)), dispatch.apply_slow(op, (a, s)))
