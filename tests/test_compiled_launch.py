"""Elementwise kernels enqueued from C (src/native/core/launch.c, docs/kernels.md "The host path").

On an OpenCL device, ``_core.apply`` launches a known layout's kernel itself: the
arguments that changed are set on a ``cl_kernel`` of its own and the kernel is
enqueued without Python.  These tests pin that the compiled launches run (counted by
``_core.launches()``), give the Python engine's values bit for bit for every kind of
operand (arrays, bool/int/float/complex scalars, signed zeros and NaN, ints at the
edges of their dtype, ints too large for a float to take exactly), keep working
across device resets and alternating layouts, and never disturb the Python kernel
object's own arguments.
"""

from __future__ import annotations

import ctypes
import sys
import threading

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays import _core
from gpuarrays._compute import dispatch
from gpuarrays._compute.table import OPS

pytestmark = pytest.mark.skipif(
    not any(d.backend == "opencl" for d in ga.devices()), reason="needs an OpenCL device (PoCL)")


@pytest.fixture
def cl_device():
    dev = ga.get_device("opencl:0")
    yield dev
    dev.memory.apply_pending()


def _bits(x) -> bytes:
    return x.get().tobytes()


def _python_engine(op, args):
    """The same operation through the Python engine (dispatch.apply_slow)."""
    return dispatch.apply_slow(OPS[op], args)


def test_a_known_layout_is_launched_from_c(cl_device):
    a = ga.asarray(np.arange(1000, dtype=np.float32), device=cl_device)
    b = ga.asarray(np.ones(1000, np.float32), device=cl_device)
    c = a + b  # the first call of the layout may ask Python for its launch
    before = _core.launches()
    for _ in range(5):
        c = a + b
    assert _core.launches() - before == 5
    np.testing.assert_array_equal(c.get(), np.arange(1000, dtype=np.float32) + 1)


_SCALARS = [
    ("add", np.float32, 2.5), ("multiply", np.float32, -0.0), ("add", np.float32, float("nan")),
    ("add", np.float32, True), ("multiply", np.float32, 3), ("add", np.float32, 2**60),
    ("add", np.float64, 2**53 + 1), ("add", np.float64, 1e300), ("multiply", np.complex64, 1 - 2j),
    ("add", np.complex128, 0.5), ("add", np.int8, -128), ("add", np.int8, 127),
    ("add", np.uint8, 255), ("add", np.uint64, 2**64 - 1), ("add", np.int64, -(2**63)),
    ("bitwise_xor", np.uint32, 0xDEADBEEF), ("logical_and", np.bool_, True),
    ("greater", np.float32, 0), ("copysign", np.float32, -0.0), ("atan2", np.float64, -1),
]


@pytest.mark.parametrize("op,dtype,scalar", _SCALARS,
                         ids=[f"{o}-{np.dtype(d).name}-{s!r}" for o, d, s in _SCALARS])
def test_scalars_reach_the_kernel_as_the_python_engine_passes_them(cl_device, op, dtype, scalar):
    rng = np.random.default_rng(3)
    host = rng.standard_normal(257) * 100
    if np.dtype(dtype).kind == "c":
        host = host + 1j * rng.standard_normal(257)
    host = host.astype(dtype)
    a = ga.asarray(host, device=cl_device)
    for args in ((a, scalar), (scalar, a)):
        fast = dispatch.apply(OPS[op], args)
        fast = dispatch.apply(OPS[op], args)  # the layout's launch is known now
        assert _bits(fast) == _bits(_python_engine(op, args))


def test_alternating_layouts_and_operands_keep_their_own_arguments(cl_device):
    """Several layouts of one typing (contiguous, strided, reversed, offset by one element:
    another alignment) one after the other, with the Python kernel object launching the
    same kernel in between: every result is the Python engine's."""
    x = np.arange(64, dtype=np.float32)
    base = ga.asarray(x, device=cl_device)
    views = [base, base[::2], base[::-1], base[1:], base[::-2], base[3:60:3]]
    for _ in range(3):
        for v in views:
            got = ga.exp(v)
            want = _python_engine("exp", (v,))
            assert _bits(got) == _bits(want)
            assert _bits(v * 3.0) == _bits(_python_engine("multiply", (v, 3.0)))


def test_forgetting_the_launchers_plans_keeps_one_argument_memory_per_kernel(cl_device):
    """``launcher.clear()`` (plans and kernel handles forgotten) while an engine still holds
    a launch of a kernel, then a new layout of the same kernel, then the old layout again:
    each call reads and writes its own arrays.  (A second ClKernel for the same cl_kernel
    once skipped the old layout's addresses as already set, and ``a + 1`` wrote ``c + 2``'s
    values into its result.)"""
    from gpuarrays._compute.device import launcher

    a = ga.asarray(np.arange(8, dtype=np.float32), device=cl_device)
    c = ga.asarray(np.arange(10, dtype=np.float32) * 10, device=cl_device)
    for _ in range(3):
        ra = a + 1.0
    launcher.clear()
    for _ in range(3):
        rc = c + 2.0  # a layout the engine has not met: a new launch of the same kernel
        ra = a + 1.0  # the launch made before clear()
    np.testing.assert_array_equal(ra.get(), np.arange(8, dtype=np.float32) + 1)
    np.testing.assert_array_equal(rc.get(), np.arange(10, dtype=np.float32) * 10 + 2)


def test_launches_survive_a_device_reset(cl_device):
    x = np.linspace(-3, 3, 101, dtype=np.float32)
    a = ga.asarray(x, device=cl_device)
    first = ga.exp(a)
    first = ga.exp(a)
    ga.device_reset(cl_device)
    a = ga.asarray(x, device=cl_device)
    before = _core.launches()
    again = [ga.exp(a) for _ in range(3)]
    assert _core.launches() - before >= 2  # a stale launch is made again, then runs from C
    want = _python_engine("exp", (a,))
    for g in again:
        assert _bits(g) == _bits(want)
    del first


def test_threads_launching_the_same_kernel_get_their_own_values(cl_device):
    """Argument setting and enqueueing happen under the GIL without Python in between, and
    a cl_kernel has one ClKernel (which remembers the values it set), even when threads
    make their first launches of it at once: threads adding different scalars to arrays of
    different shapes never see each other's values."""
    from gpuarrays._compute.device import launcher

    arrays = [ga.asarray(np.full(509 + k, k, np.float32), device=cl_device) for k in range(6)]
    # every thread's first call makes its launch; no engine keeps a launch of the ClKernels
    # forgotten (a second ClKernel of a cl_kernel in use would skip values it did not set)
    for p in dispatch.PLANS.values():
        p.forget()
    launcher._cl_kernels.clear()
    start = threading.Barrier(len(arrays))
    errors = []

    def work(k: int) -> None:
        try:
            start.wait()
            for i in range(60):
                r = arrays[k] + float(i)
                np.testing.assert_array_equal(r.get(), np.full(509 + k, k + i, np.float32))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(len(arrays))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[0]


def test_given_outputs_apart_or_exact_are_launched_from_c(cl_device):
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = ga.asarray(host, device=cl_device)
    z = ga.empty((3, 4), np.float32, device=cl_device)
    for _ in range(2):  # the second round runs the known layouts from C
        before = _core.launches()
        a += 1  # the output is exactly the operand
        dispatch.apply(OPS["multiply"], (a, 2), z)  # an output in other memory
        assert _core.launches() - before == 2
    host += 2
    np.testing.assert_array_equal(a.get(), host)
    np.testing.assert_array_equal(z.get(), host * 2)


def test_broadcast_operands_are_launched_from_c(cl_device):
    """Operands of other shapes (a row, a 0-d array, a column view) broadcast to the result
    in the kernel: no copy and no Python, and an exact broadcasting output too."""
    rng = np.random.default_rng(4)
    host = rng.standard_normal((5, 6)).astype(np.float32)
    x = ga.asarray(host, device=cl_device)
    m = ga.mean(x, axis=0)
    s = ga.sum(x)
    col = x[:, :1]
    for _ in range(2):
        before = _core.launches()
        centred = x - m
        scaled = s * x
        spread = col + m
        assert _core.launches() - before == 3
    np.testing.assert_allclose(centred.get(), host - m.get(), rtol=1e-6)
    np.testing.assert_allclose(scaled.get(), s.get() * host, rtol=1e-6)
    np.testing.assert_allclose(spread.get(), host[:, :1] + m.get(), rtol=1e-6)
    assert _bits(centred) == _bits(_python_engine("subtract", (x, m)))
    x += m  # a given output the row broadcasts into
    np.testing.assert_allclose(x.get(), host + m.get(), rtol=1e-6)


def test_overlapping_outputs_go_through_the_python_engine(cl_device):
    """An output that overlaps an operand other than exactly needs the Python engine's
    temporary for NumPy's values; so does an operand of the output's own memory that
    broadcasts into it."""
    flat = ga.asarray(np.arange(9, dtype=np.float32), device=cl_device)
    grid = ga.asarray(np.arange(12, dtype=np.float32).reshape(3, 4), device=cl_device)
    for _ in range(2):
        before = _core.launches()
        flat[1:] += flat[:-1]
        grid += grid[0]
        assert _core.launches() == before
    want = np.arange(9, dtype=np.float32)
    wgrid = np.arange(12, dtype=np.float32).reshape(3, 4)
    for _ in range(2):
        want[1:] += want[:-1].copy()
        wgrid += wgrid[0].copy()
    np.testing.assert_array_equal(flat.get(), want)
    np.testing.assert_array_equal(grid.get(), wgrid)


def test_shapes_that_do_not_broadcast_are_refused_before_allocating(device, used):
    a = ga.ones((3, 4), np.float32, device=device)
    b = ga.ones((3,), np.float32, device=device)
    before = used()
    with pytest.raises(ValueError, match="could not be broadcast together"):
        a + b
    with pytest.raises(ValueError, match="broadcast to"):
        a += ga.ones((2, 3, 4), np.float32, device=device)
    assert used() == before  # (the operand made for the second case is gone too)


def test_a_launch_refuses_sources_that_do_not_fit_its_kernel(cl_device):
    """The constructor checks what apply() relies on: one source per parameter, addresses
    only for address parameters, a global size that is a multiple of the local size."""
    a = ga.asarray(np.ones(256, np.float32), device=cl_device)
    a + a
    from gpuarrays._compute.device import launcher
    kernel = next(k for k in launcher._cl_kernels.values() if not k.stale())
    with pytest.raises(ValueError, match="sources for a kernel"):
        _core.Launch(kernel, 256, 256, ((0, None),))
    with pytest.raises(ValueError, match="multiple of the local size"):
        _core.Launch(kernel, 300, 256, ((0, None),))
    with pytest.raises(TypeError):
        _core.Launch(object(), 256, 256, ())


_PROTOS = {  # the OpenCL entry points a ClKernel calls, by their place in compiled_handles()
    "clSetKernelArg": (2, ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint32,
                                           ctypes.c_size_t, ctypes.c_void_p)),
    "clSetKernelArgSVMPointer": (3, ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p,
                                                     ctypes.c_uint32, ctypes.c_void_p)),
    "clEnqueueNDRangeKernel": (4, ctypes.CFUNCTYPE(
        ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p)),
}


@pytest.mark.parametrize("entry", sorted(_PROTOS))
def test_an_opencl_error_in_a_compiled_launch_hands_the_call_to_the_python_engine(
        cl_device, entry):
    """A fault-injecting wrapper around the real entry point fails its first calls with
    CL_OUT_OF_RESOURCES: those calls run in the Python engine (right values, nothing
    counted as launched from C, nothing lost), and the next ones run from C again."""
    from gpuarrays._compute.device import launcher

    host = np.arange(300, dtype=np.float32)
    a = ga.asarray(host, device=cl_device)
    f4 = np.dtype(np.float32)
    kernel = launcher._plan_of(cl_device, "add", a._raw(), [a._raw(), np.asarray(1, f4)],
                               [f4, f4]).kernel
    handles = list(kernel.compiled_handles())
    place, proto = _PROTOS[entry]
    real = proto(handles[place])
    fails = [2]

    def failing(*args):
        if fails[0]:
            fails[0] -= 1
            return -5  # CL_OUT_OF_RESOURCES
        return real(*args)

    wrapper = proto(failing)
    handles[place] = ctypes.cast(wrapper, ctypes.c_void_p).value
    plans = list(dispatch.PLANS.values())
    try:
        for p in plans:
            p.forget()
        with launcher._lock:
            launcher._cl_kernels[kernel] = _core.ClKernel(*handles)
        used = ga.memory_stats(cl_device)["used_bytes"]
        before = _core.launches()
        results = [a + 1.0 for _ in range(4)]
        assert fails == [0]
        assert _core.launches() - before == 2  # the two failed calls ran in Python
        for r in results:
            np.testing.assert_array_equal(r.get(), host + 1)
        del results, r
        assert ga.memory_stats(cl_device)["used_bytes"] == used
    finally:  # no engine keeps the wrapper's ClKernel, and neither does the launcher
        for p in plans:
            p.forget()
        with launcher._lock:
            del launcher._cl_kernels[kernel]
