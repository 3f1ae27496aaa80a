"""A reduction fused with an elementwise body (``device/reduce.py: run_fused``) on device back-ends.

``ga.fuse`` hands a traced body (a ``generator.Fused``) and raw views of its operands,
broadcast to the full shape, to ``run_fused``; these tests build the bodies by hand and call
it directly.  The oracle is NumPy on the same body value (the bodies here use operations
NumPy computes exactly as the kernels do, so integer and bool results are compared exactly,
floating ones to the accuracy of the accumulation), and for the kernel shape ``ga.fuse``
is measured on, the unfused namespace bit for bit.  The cpu back-end runs no kernels, so
these run on the first OpenCL and CUDA devices only.  Kernel builds dominate the time
(about 0.7 s each on PoCL): small shapes take the ``item`` strategy, whose kernel pads its
dims so one build serves every axis and layout of a body; the other strategies get one
case each.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._array.layout import broadcast_strides
from gpuarrays._compute import reductions
from gpuarrays._compute.device import reduce as device_reduce
from gpuarrays._compute.device.generator import Fused, Operand, Step
from gpuarrays._compute.device.launcher import aligned
from gpuarrays.backends.base import RawView

DEVICES = [str(d) for d in ga.devices() if d.backend != "cpu" and d.index == 0]
_KEYS = {"float32": "f4", "float64": "f8", "float16": "f2", "int32": "i4", "bool": "b1",
         "complex64": "c8"}


@pytest.fixture(params=DEVICES)
def gpu(request) -> ga.Device:
    """The first device of each back-end that runs kernels (opencl:0, cuda:0)."""
    return ga.get_device(request.param)


# Building a call ------------------------------------------------------------------------------
def view(a, shape: tuple) -> RawView:
    """``a``'s raw view broadcast to ``shape`` (what ``ga.fuse`` passes for an array)."""
    r = a._raw()
    return RawView(r.ptr, shape, broadcast_strides(tuple(r.shape), tuple(r.strides), shape),
                   r.dtype)


def body_of(args: list, steps: list) -> Fused:
    """A body over ``args`` (device arrays or NumPy scalars) and ``(op, args, key)`` steps;
    the last step's value is reduced.  Each step takes its arguments in their own keys."""
    operands = []
    keys = []
    for a in args:
        key = _KEYS[str(a.dtype)]
        if isinstance(a, np.ndarray):
            operands.append(Operand(None, key, wide=key == "f2"))
        else:
            r = a._raw()
            operands.append(Operand(key, key, aligned=aligned(r.ptr, r.strides, r.dtype)))
        keys.append(key)
    out = []
    for op, idx, key in steps:
        out.append(Step(op, tuple(idx), tuple(keys[i] for i in idx), key))
        keys.append(key)
    return Fused(tuple(operands), tuple(out), (len(args) + len(steps) - 1,), ())


def fused(name: str, args: list, steps: list, axis=None, keepdims=False, shape=None, dev=None):
    """``name`` of the body's value over ``axis``, through ``run_fused`` (``shape``: the
    full shape, by default the arrays' broadcast shape; ``dev``: the arrays' device)."""
    dev = dev or next(a.device for a in args if not isinstance(a, np.ndarray))
    if shape is None:
        shape = np.broadcast_shapes(*(a.shape for a in args if not isinstance(a, np.ndarray)))
    row = reductions.REDUCTIONS[name]
    body = body_of(args, steps)
    value_dtype = np.dtype({v: k for k, v in _KEYS.items()}[
        body.steps[-1].key if body.steps else body.operands[-1].compute])
    rd = reductions._result_dtype(row, value_dtype, None, dev)
    axes = reductions.normalize_axes(name, axis, len(shape))
    out_shape = reductions._out_shape(shape, axes, keepdims)
    result = ga.empty(out_shape, dtype=rd, device=dev)
    inputs = [a if isinstance(a, np.ndarray) else view(a, shape) for a in args]
    count = int(np.prod([shape[k] for k in axes]))
    device_reduce.run_fused(row, body, inputs, axes, result, count)
    return result


_NP = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean,
       "any": np.any, "all": np.all}


def expect(name: str, value: np.ndarray, axis, keepdims: bool, rd: np.dtype) -> np.ndarray:
    """NumPy's reduction of the body's value, accumulated in double where floating."""
    acc = {"f": np.float64, "c": np.complex128}.get(rd.kind)
    if name in ("sum", "prod", "mean") and acc is not None:
        return _NP[name](value.astype(acc), axis=axis, keepdims=keepdims)
    if name in ("sum", "prod"):
        return _NP[name](value, axis=axis, keepdims=keepdims, dtype=rd)
    return _NP[name](value, axis=axis, keepdims=keepdims)


def check(got, want, rd: np.dtype, count: int) -> None:
    got = got.get()
    assert got.dtype == rd and got.shape == np.shape(want)
    if rd.kind in "fc":
        eps = float(np.finfo(rd).eps)
        np.testing.assert_allclose(got, np.asarray(want).astype(rd), rtol=4 * eps,
                                   atol=4 * eps * max(count, 1) * 4)
    else:
        np.testing.assert_array_equal(got, want)


# Every row, dtype and layout (the item strategy) -----------------------------------------------
SHAPE = (2, 2, 4)
AXES = [None, 0, 1, (0, 2), -1, (-3, -2, -1)]


def operands(dev, dtype: str, seed: int, layout: str):
    """``x`` (full shape, in ``layout``) and ``m`` (a broadcast vector) on the device, and
    their host copies: small integers, so differences have zeros and products stay exact."""
    rng = np.random.default_rng(seed)

    def draw(shape):
        v = rng.integers(-3, 4, size=shape)
        if dtype == "bool":
            return v > 0
        if dtype == "complex64":
            v = v + 1j * rng.integers(-3, 4, size=shape)
        return v.astype(dtype)
    if layout == "C":
        hx = draw(SHAPE)
        x = ga.asarray(hx, device=dev)
    elif layout == "negative":  # negative strides on a reduced-or-kept axis and the last
        big = draw(SHAPE)
        x = ga.asarray(big, device=dev)[::-1, :, ::-1]
        hx = big[::-1, :, ::-1]
    else:  # transposed: a C array of the reversed shape
        base = draw(SHAPE[::-1])
        x = ga.asarray(base, device=dev).T
        hx = base.T
    hm = draw(SHAPE[-1:])
    return x, hx, ga.asarray(hm, device=dev), hm


CASES = [  # (row, operand dtype, body: "sub" x - m, "scale" (x - m) * s, "less" x < m,
    #         "mul" x * m, "and" x & m & s; m a broadcast vector, s a scalar)
    ("sum", "float32", "scale"), ("sum", "float16", "scale"), ("sum", "int32", "scale"),
    ("sum", "float32", "less"), ("sum", "complex64", "scale"), ("prod", "float64", "mul"),
    ("prod", "int32", "sub"), ("max", "float32", "sub"), ("max", "float32", "less"),
    ("min", "int32", "sub"), ("min", "float16", "sub"), ("mean", "float32", "scale"),
    ("mean", "int32", "sub"), ("mean", "complex64", "sub"), ("any", "float32", "sub"),
    ("any", "float32", "less"), ("all", "complex64", "sub"), ("all", "bool", "and"),
]


def body_case(dev, dtype: str, kind: str, x, hx, m, hm):
    """(args, steps, the body's value on the host) of one body kind."""
    key = _KEYS[dtype]
    if kind == "and":  # bool operands (drawn as such by ``operands``) and a bool scalar
        s = np.asarray(True)
        return ([x, m, s], [("logical_and", (0, 1), "b1"), ("logical_and", (3, 2), "b1")],
                hx & hm & s)
    if kind == "less":
        return [x, m], [("less", (0, 1), "b1")], hx < hm
    if kind == "mul":
        return [x, m], [("multiply", (0, 1), key)], hx * hm
    if kind == "sub":
        return [x, m], [("subtract", (0, 1), key)], hx - hm
    s = np.asarray({"c8": 1.5 - 0.5j, "i4": 3}.get(key, 1.5), dtype=dtype)
    return ([x, m, s], [("subtract", (0, 1), key), ("multiply", (3, 2), key)],
            (hx - hm) * s)


@pytest.mark.parametrize("name, dtype, kind", CASES, ids=[f"{n}-{d}-{k}" for n, d, k in CASES])
def test_every_row_axis_and_layout_as_numpy(gpu, name, dtype, kind):
    """Each row and dtype over every axis form, keepdims, broadcast and scalar operands,
    negative and transposed strides: NumPy's values and the row's result dtype."""
    if dtype == "float64" and not gpu.info.float64:
        dtype = "float32"
    for seed, layout in enumerate(("C", "negative", "transposed")):
        x, hx, m, hm = operands(gpu, dtype, seed, layout)
        args, steps, value = body_case(gpu, dtype, kind, x, hx, m, hm)
        for i, axis in enumerate(AXES):
            keepdims = (i + seed) % 2 == 1
            got = fused(name, args, steps, axis, keepdims)
            count = value.size // max(got.size, 1)
            check(got, expect(name, value, axis, keepdims, got.dtype), got.dtype, count)


def test_nan_propagates_through_max_and_sum(gpu):
    h = np.arange(16, dtype=np.float32).reshape(SHAPE)
    h[1, 0, 2] = np.nan
    x, hm = ga.asarray(h, device=gpu), np.ones(4, np.float32)
    m = ga.asarray(hm, device=gpu)
    for axis in (None, 0, (1, 2)):
        for name in ("max", "sum"):
            got = fused(name, [x, m], [("subtract", (0, 1), "f4")], axis)
            want = expect(name, h - hm, axis, False, np.dtype(np.float32))
            np.testing.assert_array_equal(got.get(), np.asarray(want).astype(np.float32))


def test_one_element_and_scalar_only_bodies(gpu):
    x = ga.asarray(np.array([2.5], np.float32), device=gpu)
    m = ga.asarray(np.array([0.5], np.float32), device=gpu)
    s = np.asarray(3.0, np.float32)
    steps = [("subtract", (0, 1), "f4"), ("multiply", (3, 2), "f4")]
    assert float(fused("sum", [x, m, s], steps)) == 6.0
    assert fused("sum", [x, m, s], steps, 0, keepdims=True).get().tolist() == [6.0]
    # no array operand: any layout of outputs and reduced elements will do
    got = fused("sum", [s], [("negative", (0,), "f4")], axis=(0, 2), shape=(4, 3, 5),
                dev=gpu)
    np.testing.assert_array_equal(got.get(), np.full(3, -60.0, np.float32))


def test_zero_size_reductions_as_the_namespace(gpu):
    """count 0 fills the row's empty value; an empty result does nothing; max of nothing is
    the ValueError ``ga.max`` raises (run_fused handles these, so callers need not)."""
    x = ga.empty((0, 3), dtype="float32", device=gpu)
    m = ga.ones(3, dtype="float32", device=gpu)
    steps = [("subtract", (0, 1), "f4")]
    assert fused("sum", [x, m], steps, 0).get().tolist() == [0.0, 0.0, 0.0]
    assert fused("prod", [x, m], steps, 0, keepdims=True).get().tolist() == [[1.0] * 3]
    assert np.isnan(fused("mean", [x, m], steps, 0).get()).all()
    assert fused("all", [x, m], steps).get() == np.True_
    assert fused("sum", [x, m], steps, 1).shape == (0,)
    with pytest.raises(ValueError, match="empty sequence"):
        fused("max", [x, m], steps, 0)


def test_refuses_inconsistent_arguments(gpu):
    x = ga.ones((2, 3), dtype="float32", device=gpu)
    body = body_of([x, x], [("add", (0, 1), "f4")])
    row = reductions.REDUCTIONS["sum"]
    out = ga.empty((3,), dtype="float32", device=gpu)
    with pytest.raises(ValueError, match="full shape"):
        device_reduce.run_fused(row, body, [view(x, (2, 3)), view(x[:1], (1, 3))], (0,), out, 2)
    with pytest.raises(ValueError, match="count 3"):
        device_reduce.run_fused(row, body, [view(x, (2, 3))] * 2, (0,), out, 3)
    with pytest.raises(ValueError, match="has 3 element"):
        device_reduce.run_fused(row, body, [view(x, (2, 3))] * 2, (1,), out, 3)
    with pytest.raises(ValueError, match="2 operand"):
        device_reduce.run_fused(row, body, [view(x, (2, 3))], (0,), out, 2)
    with pytest.raises(ValueError, match="f4 array in the body, got int32"):
        i = ga.ones((2, 3), dtype="int32", device=gpu)
        device_reduce.run_fused(row, body, [view(x, (2, 3)), view(i, (2, 3))], (0,), out, 2)


# The other strategies, and the shape ga.fuse is measured on -------------------------------------
def test_block_strategy_matches_the_unfused_namespace_bit_for_bit(gpu):
    """``sum((x - m) ** 2, axis=0)``: one kernel per pass reads ``x`` and ``m`` (broadcast
    along the reduced axis) and gives the bits of the unfused namespace, allocating only
    its output and the split's partials (back in the pool at the end).  509 rows: the
    block strategy's chunks of rows are no multiple of its step (``BLOCK_ROWS``)."""
    h = np.random.default_rng(5).random((509, 256), dtype=np.float32)
    hm = h.mean(axis=0)
    x, m = ga.asarray(h, device=gpu), ga.asarray(hm, device=gpu)
    want = ga.sum((x - m) ** 2, axis=0)
    steps = [("subtract", (0, 1), "f4"), ("square", (2,), "f4")]
    fused("sum", [x, m], steps, 0).free()  # compile
    ga.synchronize(gpu)
    before = ga.memory_stats(gpu)
    got = fused("sum", [x, m], steps, 0)
    ga.synchronize(gpu)
    after = ga.memory_stats(gpu)
    assert after["alloc_count"] - before["alloc_count"] <= 2  # the output, the partials
    assert after["used_bytes"] - before["used_bytes"] == got.nbytes
    np.testing.assert_array_equal(got.get(), want.get())
    np.testing.assert_allclose(got.get(), ((h - hm) ** 2).sum(axis=0, dtype=np.float64),
                               rtol=1e-5)


def test_strategies_with_broadcast_operands_as_numpy(gpu):
    """A column vector (broadcast along the kept axis) beside a row vector: the block
    strategy (axis 0, partials and their pass), the group strategy (axis 1, one group per
    row, compensated sum), a full reduction of 2**20 elements split over work-groups, and
    max's NaN sweep of the block strategy."""
    rng = np.random.default_rng(6)
    for shape in ((509, 256), (64, 300), (1024, 1024)):
        h = rng.random(shape, dtype=np.float32)
        hm = rng.random(shape[1], dtype=np.float32)
        hc = rng.random((shape[0], 1), dtype=np.float32)
        x, m, c = (ga.asarray(v, device=gpu) for v in (h, hm, hc))
        steps = [("subtract", (0, 1), "f4"), ("multiply", (3, 2), "f4")]
        value = ((h - hm) * hc).astype(np.float64)
        for axis in ((0,) if shape[0] == 509 else (1,) if shape[0] == 64 else (None,)):
            got = fused("sum", [x, m, c], steps, axis)
            np.testing.assert_allclose(got.get(), value.sum(axis=axis), rtol=1e-5, atol=1e-3)
    h = rng.random((509, 256), dtype=np.float32)
    h[300, 7] = np.nan
    x = ga.asarray(h, device=gpu)
    m = ga.asarray(np.full(256, 0.5, np.float32), device=gpu)
    got = fused("max", [x, m], [("subtract", (0, 1), "f4")], 0)
    np.testing.assert_array_equal(got.get(), (h - np.float32(0.5)).max(axis=0))


def test_fused_reduction_kernels_compile_with_nvrtc(nvrtc):
    """Every strategy's kernel over a body of array, broadcast and scalar operands (a
    complex scalar, a float16 one passed as a double) is valid CUDA C (no GPU needed)."""
    from gpuarrays.backends import cuda

    cases = [  # (row, body operands, steps, walk, fixed)
        ("sum", [Operand("f4", "f4"), Operand("f4", "f4")],
         [Step("subtract", (0, 1), ("f4", "f4"), "f4"), Step("square", (2,), ("f4",), "f4")],
         "cc", "01"),
        ("max", [Operand("f2", "f2"), Operand(None, "f2", wide=True)],
         [Step("multiply", (0, 1), ("f2", "f2"), "f2")], "s", ""),
        ("any", [Operand("c8", "c8", aligned=False), Operand(None, "c8")],
         [Step("subtract", (0, 1), ("c8", "c8"), "c8")], "0", "1"),
    ]
    for name, ops, steps, walk, fixed in cases:
        row = reductions.REDUCTIONS[name]
        body = Fused(tuple(ops), tuple(steps), (len(ops) + len(steps) - 1,), ())
        value = steps[-1].key
        acc = {"sum": "f4", "max": "f4", "any": "b1"}[name]
        out = {"sum": "f4", "max": "f2", "any": "b1"}[name]
        for strategy, final in [("item", True), ("block", True), ("group", False),
                                ("group", True)]:
            spec = device_reduce.Spec(
                "cuda", name, row.combine, row.map, row.finalize, row.identity, value, acc,
                out if final else acc, strategy, final, False, 1 if strategy == "block" else 2,
                1 if strategy == "group" else 4, 256 if strategy == "group" else 1,
                4 if strategy != "item" else 1, body=body,
                walk=walk if strategy != "item" else "s" * len(walk), fixed=fixed)
            text, _, _ = device_reduce.program(cuda.DIALECT, spec)
            image, kind = cuda.compile_image(text, 90)
            assert image and kind == "cubin", (name, strategy)
