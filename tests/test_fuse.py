"""ga.fuse against the unfused namespace, on every device (docs/fusion.md).

The oracle is the same Python function run unfused: a fused call must give the
unfused values and dtypes (bit for bit: device kernels compute each step as the
unfused kernel does and contraction stays off; the cpu engine runs the same ufunc
calls per block), allocate only its outputs, refuse what cannot fuse at trace
time, and trace and compile a new signature once however many threads call it.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import gpuarrays as ga

_SETTINGS = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow, HealthCheck.filter_too_much])

# Operations the random expressions draw from: (name, arity, how to call it)
_UNARY = {
    "negative": lambda x: -x, "abs": ga.abs, "square": lambda x: x ** 2, "sin": ga.sin,
    "exp": ga.exp, "sqrt": ga.sqrt, "floor": ga.floor, "isnan": ga.isnan,
    "logical_not": lambda x: ga.logical_not(x.astype(ga.bool)), "invert": lambda x: ~x,
    "to_f32": lambda x: x.astype(ga.float32), "to_i32": lambda x: ga.astype(x, ga.int32),
    "tanh": ga.tanh, "sign": ga.sign, "expm1": ga.expm1,
}
_BINARY = {
    "add": lambda x, y: x + y, "subtract": lambda x, y: x - y, "multiply": lambda x, y: x * y,
    "divide": lambda x, y: x / y, "floor_divide": lambda x, y: x // y,
    "remainder": lambda x, y: x % y, "maximum": ga.maximum, "minimum": ga.minimum,
    "less": lambda x, y: x < y, "equal": lambda x, y: x == y, "and": lambda x, y: x & y,
    "hypot": ga.hypot, "atan2": ga.atan2, "pow": lambda x, y: x ** y,
    "where": lambda x, y: ga.where(x > y, x, y), "copysign": ga.copysign,
}
_SCALARS = [2, -3, 0.5, 1.5, True, 2.5 + 1j, np.float32(0.25), np.int8(3)]
_DTYPES = ["bool", "int8", "int32", "uint16", "int64", "float16", "float32", "float64",
           "complex64"]


def _layouts(device, dt, shape, draw):
    """A gpuarrays array of ``shape`` and ``dt`` with a drawn layout: contiguous, every
    other element, reversed, or a transpose."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    how = draw(st.sampled_from(["c", "step", "reverse", "transpose"]))
    big = tuple(2 * n if how == "step" else n for n in shape)
    if how == "transpose":
        big = big[::-1]
    h = (rng.standard_normal(big) * 4).astype(dt) if dt != "bool" else rng.random(big) < 0.5
    if np.dtype(dt).kind == "c":
        h = h + 1j * rng.standard_normal(big).astype(dt)
    a = ga.asarray(h, device=device)
    if how == "step":
        return a[tuple(slice(None, None, 2) for _ in shape)]
    if how == "reverse":
        return a[tuple(slice(None, None, -1) for _ in shape)]
    if how == "transpose":
        return ga.permute_dims(a, tuple(range(len(shape)))[::-1])
    return a


@st.composite
def _programs(draw, device):
    """(function, arguments): a random expression over 1-3 arrays of broadcastable shapes
    (0-d and zero-size included) and scalars, as one Python function."""
    base = draw(st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple))
    dtypes = [dt for dt in _DTYPES if device.supports(np.dtype(dt))]
    args = []
    for _ in range(draw(st.integers(1, 3))):
        shape = tuple(n if draw(st.booleans()) else 1 for n in base)
        shape = shape[draw(st.integers(0, len(shape))):]
        args.append(_layouts(device, draw(st.sampled_from(dtypes)), shape, draw))
    if draw(st.booleans()):
        args.append(draw(st.sampled_from(_SCALARS)))
    program = []  # (op name, operand numbers): operand k < len(args) is argument k
    arrays = [k for k, a in enumerate(args) if isinstance(a, ga.GPUArray)]
    for _ in range(draw(st.integers(1, 6))):
        values = len(args) + len(program)
        first = draw(st.sampled_from(arrays))  # an array operand (scalars alone do not fuse)
        if draw(st.booleans()):
            program.append((draw(st.sampled_from(sorted(_UNARY))), (first,)))
        else:
            other = draw(st.integers(0, values - 1))
            pair = (first, other) if draw(st.booleans()) else (other, first)
            program.append((draw(st.sampled_from(sorted(_BINARY))), pair))
        arrays.append(values)
    outputs = draw(st.integers(1, 2))

    def fn(*xs):
        values = list(xs)
        for name, ops in program:
            f = _UNARY.get(name) or _BINARY[name]
            values.append(f(*(values[k] for k in ops)))
        last = values[-outputs:]
        return tuple(last) if outputs > 1 else last[0]
    fn.program = program
    return fn, args


def _unfused(fn, args):
    """``fn(*args)`` unfused, or None when the namespace refuses it (a dtype an operation
    does not take, scalars alone, shapes of two results that differ ...)."""
    try:
        out = fn(*args)
    except (TypeError, ValueError, OverflowError):
        return None
    outs = out if isinstance(out, tuple) else (out,)
    if not all(isinstance(o, ga.GPUArray) for o in outs):
        return None
    if len({o.shape for o in outs}) > 1 or any(o is a for o in outs for a in args):
        return None
    return out


def _same(fused, unfused) -> None:
    fused = fused if isinstance(fused, tuple) else (fused,)
    unfused = unfused if isinstance(unfused, tuple) else (unfused,)
    assert len(fused) == len(unfused)
    for f, u in zip(fused, unfused, strict=True):
        assert f.dtype == u.dtype and f.shape == u.shape
        np.testing.assert_array_equal(f.get(), u.get())


@given(data=st.data())
@_SETTINGS
def test_random_programs_equal_the_unfused_namespace(device, data):
    fn, args = data.draw(_programs(device))
    unfused = _unfused(fn, args)
    assume(unfused is not None)
    fused = ga.fuse(fn)
    _same(fused(*args), unfused)
    _same(fused(*args), unfused)  # the traced signature, run again


_REDUCTIONS = ["sum", "prod", "min", "max", "mean", "any", "all"]


@pytest.mark.parametrize("name", _REDUCTIONS)
def test_final_reductions_every_axis_and_keepdims(device, name):
    rng = np.random.default_rng(0)
    x = ga.asarray(rng.standard_normal((3, 4, 5)).astype("f4"), device=device)
    m = ga.asarray(rng.standard_normal(5).astype("f4"), device=device)
    for axis in (None, 0, 1, 2, -1, (0, 2), (0, 1, 2)):
        for keepdims in (False, True):
            def body(x, m):
                return getattr(ga, name)((x - m) * 0.5, axis=axis, keepdims=keepdims)
            fused = ga.fuse(body)(x, m)
            unfused = body(x, m)
            assert fused.dtype == unfused.dtype and fused.shape == unfused.shape
            np.testing.assert_allclose(fused.get(), unfused.get(), rtol=2e-6, atol=1e-6)


def test_final_reduction_dtypes_and_empty_axes(device):
    h = np.arange(12, dtype="i4").reshape(3, 4)
    x = ga.asarray(h, device=device)
    assert ga.fuse(lambda x: ga.sum(x * 2))(x).dtype == ga.sum(x * 2).dtype
    np.testing.assert_array_equal(ga.fuse(lambda x: ga.sum(x * 2, axis=0))(x).get(), (h * 2).sum(0))
    assert bool(ga.fuse(lambda x: ga.any(x > 10))(x).get()) is True
    empty = ga.asarray(np.zeros((0, 3), "f4"), device=device)
    np.testing.assert_array_equal(ga.fuse(lambda x: ga.sum(x + 1, axis=0))(empty).get(),
                                  np.zeros(3, "f4"))
    with pytest.raises(ValueError, match="empty"):
        ga.fuse(lambda x: ga.max(x + 1, axis=0))(empty)


def test_dtypes_follow_the_unfused_promotion(device):
    x8 = ga.asarray(np.arange(5, dtype="i1"), device=device)
    f = ga.fuse(lambda x, s: (x + s, x * 1.5, x < 300))
    a, b, c = f(x8, 1)
    assert (a.dtype, b.dtype, c.dtype) == ((x8 + 1).dtype, (x8 * 1.5).dtype, np.dtype(bool))
    with pytest.raises(OverflowError):
        f(x8, 1000)  # a Python int beyond int8, as x8 + 1000 unfused


def test_scalar_arguments_take_new_values_without_a_new_trace(device):
    calls = []

    @ga.fuse
    def scale(x, a):
        calls.append(1)
        return x * a + 1

    x = ga.asarray(np.arange(6, dtype="f4"), device=device)
    for a in (1.0, 2.5, -3.0):
        np.testing.assert_array_equal(scale(x, a).get(), np.arange(6, dtype="f4") * a + 1)
    assert len(calls) == 1
    scale(x, 2)  # an int: another signature
    assert len(calls) == 2


def test_outputs_allocate_nothing_else(device):
    x = ga.asarray(np.linspace(-1, 1, 1000, dtype="f4"), device=device)
    y = ga.asarray(np.linspace(0, 2, 1000, dtype="f4"), device=device)

    @ga.fuse
    def two(x, y):
        t = ga.sin(x) * y + 2
        return t, ga.where(t > 2, t, -t) / 3

    two(x, y)  # traced and compiled
    with ga.record_allocations() as rec:
        out = two(x, y)
    assert rec.count == 2
    del out
    total = ga.fuse(lambda x: ga.sum(x * x + 1, axis=0))
    total(x)
    with ga.record_allocations() as rec:
        total(x)
    assert rec.count == 1
    cache = ga.AllocCache()
    per_iteration = []
    for _ in range(4):
        with ga.record_allocations() as rec, ga.cached(cache):
            a, b = two(x, y)
            del a, b
        per_iteration.append(rec.count)
    assert per_iteration[0] == 2 and per_iteration[1:] == [0, 0, 0]
    cache.free()


def test_zero_size_and_0d(device):
    f = ga.fuse(lambda x, y: x * y + 1)
    z = ga.asarray(np.zeros((0, 3), "f4"), device=device)
    assert f(z, z).shape == (0, 3)
    s = ga.asarray(np.float32(2), device=device)
    assert float(f(s, s).get()) == 5.0


@pytest.mark.parametrize("body, what", [
    (lambda x: x[0] + 1, "indexing"),
    (lambda x: x + 1 if x > 0 else x, "bool"),
    (lambda x: x @ x, "matmul"),
    (lambda x: ga.sum(x) + 1, "after the reduction"),
    (lambda x: ga.sum(ga.sum(x, axis=0)), "second reduction"),
    (lambda x: ga.sort(x), None),
    (lambda x: len(x) * x, "len"),
    (lambda x: (x + 1, ga.sum(x)), "together"),
    (lambda x: ga.var(x), "var"),
])
def test_what_cannot_fuse_is_refused_at_trace_time(device, body, what):
    x = ga.asarray(np.arange(4, dtype="f4"), device=device)
    with pytest.raises(TypeError) as info:
        ga.fuse(body)(x)
    if what:
        assert what in str(info.value)


def test_refused_calls(device):
    x = ga.asarray(np.arange(4, dtype="f4"), device=device)
    other = ga.asarray(np.arange(4, dtype="f4"), device=device)
    with pytest.raises(TypeError, match="not an argument"):
        ga.fuse(lambda a: a + other)(x)
    with pytest.raises(TypeError, match="at least one"):
        ga.fuse(lambda a: a)(1.0)
    with pytest.raises(TypeError, match="NumPy|host"):
        ga.fuse(lambda a, b: a + b)(x, np.ones(4))
    with pytest.raises(TypeError, match="scalar arguments alone"):
        ga.fuse(lambda a, s: a + (s * 2))(x, 3.0)
    with pytest.raises(ValueError, match="broadcast"):
        ga.fuse(lambda a, b: a + b)(x, ga.asarray(np.ones(3, "f4"), device=device))
    freed = ga.asarray(np.arange(4, dtype="f4"), device=device)
    freed.free()
    with pytest.raises(ga.FreedArrayError):
        ga.fuse(lambda a: a + 1)(freed)


def test_returned_argument_is_a_copy(device):
    x = ga.asarray(np.arange(4, dtype="f4"), device=device)
    a, b = ga.fuse(lambda x: (x, x + 1))(x)
    assert a is not x and not ga.shares_memory(a, x)
    np.testing.assert_array_equal(a.get(), np.arange(4, dtype="f4"))


def test_nested_fused_functions_inline(device):
    inner = ga.fuse(lambda x: x * 2 + 1)
    outer = ga.fuse(lambda x: inner(x) - inner(x * 3))
    x = ga.asarray(np.arange(5, dtype="f4"), device=device)
    h = np.arange(5, dtype="f4")
    np.testing.assert_array_equal(outer(x).get(), (h * 2 + 1) - (h * 3 * 2 + 1))


def test_numpy_ufuncs_inside(device):
    x = ga.asarray(np.linspace(0, 1, 7, dtype="f4"), device=device)
    f = ga.fuse(lambda x: np.exp(x) + np.sin(x) * 2)
    np.testing.assert_array_equal(f(x).get(), (ga.exp(x) + ga.sin(x) * 2).get())


def test_source_shows_one_kernel(device):
    f = ga.fuse(lambda x, y: ga.sqrt(x * x + y * y) + 1)
    x = ga.asarray(np.ones(8, "f4"), device=device)
    src = f.source(x, x)
    if device.backend == "cpu":
        assert "sqrt(" in src and "multiply(" in src
    else:
        assert src.count("void fu_") == 1 or src.count("__global__ void fu_") == 1


def test_eight_threads_trace_and_compile_a_new_function_once(device):
    calls = []

    def body(x, y):
        calls.append(1)
        return ga.cos(x) * y - 0.125  # a new expression: a kernel nobody compiled yet

    f = ga.fuse(body)
    x = ga.asarray(np.linspace(0, 1, 4096, dtype="f4"), device=device)
    impl = device.impl
    builds = getattr(impl, "builds", 0)
    results, errors = [], []
    barrier = threading.Barrier(8)

    def call():
        try:
            barrier.wait()
            results.append(f(x, x).get())
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)
    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(calls) == 1
    if device.backend != "cpu":
        assert getattr(impl, "builds", 0) - builds <= 1
    for r in results:
        np.testing.assert_array_equal(r, results[0])


def _cuda_kernel_of(fn, args):
    """The generated CUDA C of ``fn``'s fused kernel for ``args`` (traced on ``cpu:0``), its
    arrays addressed through strides and unaligned (the most general layout)."""
    from gpuarrays._compute.device.generator import Fused, Operand, key_of, source
    from gpuarrays._compute.fusion.fuse import _device_body
    from gpuarrays.backends import cuda

    f = ga.fuse(fn)
    f(*args)
    (graph,) = f._graphs.values()
    body = _device_body(graph)
    operands = tuple(Operand(key_of(dt), key_of(dt), False, False) if src[0] == "array"
                     else Operand(None, key_of(dt), wide=key_of(dt) == "f2")
                     for src, dt in zip(graph.operands, graph.arg_dtypes, strict=True))
    outs = tuple((key_of(dt), False, False) for dt in graph.dtypes)
    return source(cuda.DIALECT, [Fused(operands, body.steps, body.results, outs, 2, True)])


def test_fused_kernels_compile_with_nvrtc(nvrtc):
    from gpuarrays.backends import cuda

    def on(dt, shape=(3, 4)):
        return ga.asarray(np.ones(shape, dt), device="cpu:0")
    programs = [
        (lambda x, m, a: ga.where(x * a > m, ga.sqrt(x), -x) + 1.5, (on("f4"), on("f4", 4), 2.0)),
        (lambda x, y: (x * y + 1, ga.exp(x.astype(ga.float32)) > 2), (on("f2"), on("f2"))),
        (lambda x, y: ga.abs(x * y - 1j) + ga.real(x), (on("c8"), on("c8"))),
        (lambda x, s: (x // s) % 7 << 2, (on("i8"), np.int8(3))),
        (lambda x, y: ga.logical_and(x > 0, y < 3) | (x == y), (on("u2"), on("i4"))),
        (lambda x: x.astype(ga.float64) ** 2.5, (on("u1"),)),
    ]
    for fn, args in programs:
        text = _cuda_kernel_of(fn, args)
        image, kind = cuda.compile_image(text, 90)
        assert kind == "cubin" and image


def test_contraction_stays_off(device):
    """``a * b + c`` rounds twice, as unfused (an FMA would round once): values chosen so
    that the two differ in float32."""
    a = np.float32(1 + 2**-12)
    c = np.float32(-(1 + 2**-11))
    x = ga.asarray(np.full(4, a, np.float32), device=device)
    z = ga.asarray(np.full(4, c, np.float32), device=device)
    twice = np.float32(np.float32(a * a) + c)  # NumPy rounds the product, then the sum
    once = np.float32(np.float64(a) * np.float64(a) + np.float64(c))  # a fused multiply-add
    assert twice != once
    got = ga.fuse(lambda x, z: x * x + z)(x, z).get()
    np.testing.assert_array_equal(got, np.full(4, twice, np.float32))


_CHILD = """
import sys, json
import numpy as np
import gpuarrays as ga
dev = ga.get_device(sys.argv[1])
x = ga.asarray(np.linspace(0, 1, 1000, dtype=np.float32), device=dev)
ga.synchronize(dev)
before = dev.impl.builds
f = ga.fuse(lambda x, a: ga.where(x > 0.5, ga.exp(x) * a, x - 0.0625))
y = f(x, 3.0).get()
print(json.dumps({"compiled": dev.impl.builds - before, "sum": float(y.sum())}))
"""


def test_opencl_a_fused_kernel_starts_warm_in_a_new_process(tmp_path):
    """A second process finds the fused kernel on disk and compiles nothing from source."""
    import json
    import os
    import subprocess
    import sys

    dev = next((d for d in ga.devices() if d.backend == "opencl"), None)
    if dev is None:
        pytest.skip("no OpenCL device on this machine")
    env = dict(os.environ, GPUARRAYS_KERNEL_CACHE=str(tmp_path))
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _CHILD, str(dev)], env=env, check=True,
                             capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    assert runs[0]["compiled"] >= 1 and runs[1]["compiled"] == 0
    assert runs[0]["sum"] == runs[1]["sum"]


@pytest.mark.parametrize("layout", ["c", "strided", "transposed"])
def test_large_calls_equal_the_unfused_namespace(device, layout):
    """Beyond the cpu engine's whole-array size (blocks, dealt to threads), with a broadcast
    row, a broadcast column, a scalar and a final reduction over each axis."""
    rng = np.random.default_rng(3)
    h = rng.standard_normal((1100, 1300)).astype("f4")
    x = ga.asarray(h, device=device)
    if layout == "strided":
        x = x[::2, ::-1]
    elif layout == "transposed":
        x = ga.permute_dims(x, (1, 0))
    row = ga.asarray(rng.standard_normal(x.shape[1]).astype("f4"), device=device)
    col = ga.asarray(rng.standard_normal((x.shape[0], 1)).astype("f4"), device=device)

    def body(x, r, c, a):
        t = (x - r) * a + c
        return ga.where(t > 0, ga.sqrt(t), t * t), t < -1

    _same(ga.fuse(body)(x, row, col, 0.5), body(x, row, col, 0.5))
    for axis in (None, 0, 1):
        def total(x, r, c):
            return ga.sum((x - r) * c, axis=axis)
        np.testing.assert_allclose(ga.fuse(total)(x, row, col).get(),
                                   total(x, row, col).get(), rtol=1e-4, atol=1e-2)
