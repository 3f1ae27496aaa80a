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
