"""PyOpenCL interop: the allocator plug-in, to_pyopencl / from_pyopencl.

Runs on the opencl back-end (PoCL's CPU device in CI).  Real PyOpenCL arrays
and kernels throughout; NumPy is the oracle for values.
"""

from __future__ import annotations

import gc
import sys
import warnings

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._memory.pool import round_size

ocl = pytest.importorskip("gpuarrays.interop.pyopencl")


@pytest.fixture(scope="module")
def dev():
    try:
        return ga.get_device("opencl:0")
    except ValueError as e:  # no pyopencl, or no OpenCL device
        pytest.skip(f"opencl back-end unavailable: {e}")


@pytest.fixture(scope="module")
def cl(dev):
    import pyopencl
    import pyopencl.array  # noqa: F401

    return pyopencl


@pytest.fixture
def cq(dev):
    return ocl.context_and_queue(dev)


@pytest.fixture
def used(dev):
    def current() -> int:
        gc.collect()
        return ga.memory_stats(dev)["used_bytes"]
    return current


# context and queue ------------------------------------------------------------------
def test_context_and_queue_are_the_backends_and_stable(dev, cl, cq):
    ctx, queue = cq
    assert isinstance(ctx, cl.Context) and isinstance(queue, cl.CommandQueue)
    assert queue.context == ctx
    ctx2, queue2 = ocl.context_and_queue("opencl:0")
    assert ctx2 is ctx and queue2 is queue
    # in order: gpuarrays' ordering guarantees rely on it
    assert not queue.properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
    # the back-end allocates in this context: a raw SVM pointer of ours is usable by it
    a = ga.arange(4, dtype=np.int32, device=dev)
    assert ocl.to_pyopencl(a).get().tolist() == [0, 1, 2, 3]


def test_context_and_queue_default_device_is_an_opencl_one(dev, cq):
    with ga.use_device("cpu:0"):
        assert ocl.context_and_queue()[0] is cq[0]
    with ga.use_device(dev):
        assert ocl.context_and_queue()[1] is cq[1]


def test_context_and_queue_refuses_other_backends(dev):
    with pytest.raises(ValueError, match="opencl device.*cpu:0"):
        ocl.context_and_queue("cpu:0")


# the allocator ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "complex64"])
def test_allocator_arithmetic_matches_numpy(dev, cl, cq, dtype):
    _, queue = cq
    alloc = ocl.Allocator(dev)
    rng = np.random.default_rng(0)
    if np.dtype(dtype).kind == "c":
        x_h = (rng.standard_normal(1000) + 1j * rng.standard_normal(1000)).astype(dtype)
    else:
        x_h = rng.integers(0, 10, 1000).astype(dtype)
    y_h = (x_h[::-1] + 1).astype(dtype)
    x = cl.array.to_device(queue, x_h, allocator=alloc)
    y = cl.array.to_device(queue, y_h, allocator=alloc)
    assert isinstance(x.base_data, cl.SVMPointer)
    z = x * 3 + x * y  # (no subtraction: PyOpenCL cannot subtract uint8 under NumPy 2)
    np.testing.assert_allclose(z.get(), x_h * 3 + x_h * y_h, rtol=1e-5)
    assert isinstance(z.base_data, cl.SVMPointer)  # the temporaries came from us too
    np.testing.assert_allclose((x * x).get(), x_h * x_h, rtol=1e-5)
    # an offset view of our SVM (PyOpenCL cannot .get() one directly: "src_offset must be 0")
    np.testing.assert_allclose((x[100:200] * 2).get(), x_h[100:200] * 2, rtol=1e-6)
    e = cl.array.empty(queue, (10, 100), dtype, allocator=alloc)
    e.fill(7)
    assert (e.get() == 7).all()


def test_allocator_memory_is_counted_in_stats_history_and_records(dev, cl, cq, used):
    _, queue = cq
    alloc = ocl.Allocator(dev)
    base = used()
    ga.memory_history.start(stacks=False)
    try:
        with ga.record_allocations() as rec:
            x = cl.array.empty(queue, (1000,), np.float32, allocator=alloc)
        snap = ga.memory_history.snapshot()
    finally:
        ga.memory_history.stop()
    assert rec.count == 1 and rec.bytes == round_size(4000)
    assert used() == base + round_size(4000)
    svm = x.base_data
    assert svm.array.storage.nbytes == 4000
    assert ga.pointer_info(svm.svm_ptr, dev).kind == "device"
    allocs = [ev for ev in snap["events"] if ev["action"] == "alloc"]
    assert [(ev["address"], ev["size"], ev["device"]) for ev in allocs] == [
        (svm.svm_ptr, round_size(4000), str(dev))]
    del x, svm
    assert used() == base


@pytest.mark.parametrize("kind", ["host", "unified"])
def test_allocator_kinds(dev, cl, cq, kind):
    if kind not in dev.kinds:
        pytest.skip(f"{dev} has no {kind!r} memory")
    _, queue = cq
    x = cl.array.to_device(queue, np.arange(8.0), allocator=ocl.Allocator(dev, kind))
    assert x.base_data.array.kind == kind
    assert ((x + x).get() == np.arange(8.0) * 2).all()


def test_allocator_rejects_bad_kind_and_device(dev):
    with pytest.raises(ValueError, match="'pinned'"):
        ocl.Allocator(dev, "pinned")
    with pytest.raises(ValueError, match="opencl device"):
        ocl.Allocator("cpu:0")


def test_allocator_releases_memory_when_pyopencl_drops_it(dev, cl, cq, used):
    _, queue = cq
    alloc = ocl.Allocator(dev)
    base = used()
    arrays = [cl.array.zeros(queue, (n,), np.float32, allocator=alloc) for n in (10, 300, 5000)]
    assert used() == base + sum(round_size(4 * n) for n in (10, 300, 5000))
    del arrays
    assert used() == base


def test_allocator_called_directly(dev, used):
    alloc = ocl.Allocator(dev, "device")
    base = used()
    with ga.record_allocations() as rec:
        empty = alloc(0)
        svm = alloc(np.int64(1000))
    assert rec.count == 1 and rec.bytes == round_size(1000)
    assert empty.size == 0 and svm.size == 1000 and svm.array.storage.refcount == 1
    assert svm._queue is alloc.queue and alloc.queue is ocl.context_and_queue(dev)[1]
    with pytest.raises(ValueError, match="negative"):
        alloc(-1)
    with pytest.raises(TypeError):
        alloc(10.5)
    del empty, svm
    assert used() == base
    assert "opencl:0" in repr(alloc)


# caches ---------------------------------------------------------------------------------
def test_cached_loop_of_pyopencl_temporaries_stops_allocating(dev, cl, cq):
    _, queue = cq
    alloc = ocl.Allocator(dev)
    x_h = np.linspace(0, 1, 4096, dtype=np.float32)
    x = cl.array.to_device(queue, x_h, allocator=alloc)
    cache = ga.AllocCache()
    counts = []
    with ga.cached(cache):
        for _ in range(5):
            with ga.record_allocations() as rec:
                y = (x * 2 + 1) ** 2 - x
                np.testing.assert_allclose(y.get(), (x_h * 2 + 1) ** 2 - x_h, rtol=1e-6)
                del y
            counts.append(rec.count)
    assert counts[0] > 0
    assert counts[1:] == [0, 0, 0, 0], counts
    assert cache.hits > 0 and cache.n_busy == 0
    cache.free()


def test_cached_buffer_of_a_live_pyopencl_array_is_not_handed_out(dev, cl, cq):
    _, queue = cq
    alloc = ocl.Allocator(dev)
    cache = ga.AllocCache()
    kept = []
    with ga.cached(cache):
        for i in range(4):
            kept.append(cl.array.zeros(queue, (256,), np.int32, allocator=alloc) + i)
    ptrs = {k.base_data.svm_ptr for k in kept}
    assert len(ptrs) == len(kept)
    assert [int(k.get()[0]) for k in kept] == [0, 1, 2, 3]
    del kept
    cache.free()


def test_uncached_inside_cached_goes_to_the_pool(dev, cl, cq):
    _, queue = cq
    alloc = ocl.Allocator(dev)
    cache = ga.AllocCache()
    with ga.cached(cache), ga.uncached():
        x = cl.array.empty(queue, (64,), np.float32, allocator=alloc)
    assert cache.misses == 0 and cache.n_busy == 0
    del x


# to_pyopencl ----------------------------------------------------------------------------
def test_to_pyopencl_shares_memory_both_ways(dev, cl):
    a = ga.arange(12, dtype=np.float32, device=dev).reshape(3, 4)
    v = ocl.to_pyopencl(a)
    assert v.shape == (3, 4) and v.strides == a.strides and v.dtype == a.dtype
    assert v.base_data.svm_ptr == a.storage.ptr
    np.testing.assert_array_equal(v.get(), np.arange(12, dtype=np.float32).reshape(3, 4))
    v += 1  # a PyOpenCL kernel writes ...
    np.testing.assert_array_equal(a.get(), np.arange(1, 13, dtype=np.float32).reshape(3, 4))
    a[0, :] = -5  # ... gpuarrays writes
    a[2, 3] = 99
    expect = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    expect[0, :] = -5
    expect[2, 3] = 99
    np.testing.assert_array_equal(v.get(), expect)


def test_to_pyopencl_of_offset_and_strided_views(dev, cl):
    host = np.arange(40, dtype=np.int64).reshape(5, 8)
    a = ga.asarray(host, device=dev)
    rows = ocl.to_pyopencl(a[2:4])  # contiguous, at a byte offset into the storage
    assert rows.base_data.svm_ptr == a.storage.ptr + 2 * 8 * 8
    np.testing.assert_array_equal(rows.get(), host[2:4])
    rows.fill(0)
    host[2:4] = 0
    np.testing.assert_array_equal(a.get(), host)
    t = ocl.to_pyopencl(a.T)  # F-contiguous
    assert t.strides == a.T.strides
    np.testing.assert_array_equal(t.get(), host.T)
    block = ocl.to_pyopencl(a[1:, 2:5])  # strided: shares the right bytes
    assert block.strides == (64, 8) and block.offset == 0
    assert block.base_data.svm_ptr == a.storage.ptr + 1 * 64 + 2 * 8
    back = ocl.from_pyopencl(block)
    np.testing.assert_array_equal(back.get(), host[1:, 2:5])


def test_to_pyopencl_of_negative_strides_round_trips(dev):
    host = np.arange(10, dtype=np.int32)
    a = ga.asarray(host, device=dev)
    v = ocl.to_pyopencl(a[::-2])
    assert v.strides == (-8,) and v.offset == 8 * 4
    assert v.base_data.svm_ptr == a.storage.ptr + 1 * 4
    np.testing.assert_array_equal(ocl.from_pyopencl(v).get(), host[::-2])


def test_to_pyopencl_keeps_the_storage_alive(dev, cl, used):
    base = used()
    a = ga.arange(1000, dtype=np.float64, device=dev)
    st = a.storage
    assert st.refcount == 1
    v = ocl.to_pyopencl(a)
    assert st.refcount == 2
    a.free()  # a local free: the PyOpenCL view keeps its own handle
    assert st.refcount == 1 and not st.is_freed
    assert used() == base + round_size(8000)
    np.testing.assert_array_equal((v * 2).get(), np.arange(1000) * 2.0)
    del v
    assert st.is_freed and st.refcount == 0
    assert used() == base


def test_to_pyopencl_temporaries_come_from_gpuarrays(dev, cl):
    a = ga.ones(100, dtype=np.float32, device=dev)
    v = ocl.to_pyopencl(a)
    with ga.record_allocations() as rec:
        w = v * 3
    assert rec.count == 1
    assert isinstance(w.base_data, cl.SVMPointer) and w.base_data.array.device == dev
    assert (w.get() == 3).all()


def test_to_pyopencl_after_forced_free_raises(dev):
    a = ga.zeros(16, device=dev)
    v = ocl.to_pyopencl(a)
    a.free(force=True)
    with pytest.raises(ga.FreedArrayError, match="forced free"):
        ocl.to_pyopencl(a)
    with pytest.raises(ga.FreedArrayError, match="forced free"):
        ocl.from_pyopencl(v)


def test_to_pyopencl_errors(dev, cl):
    with pytest.raises(TypeError, match="GPUArray"):
        ocl.to_pyopencl(np.zeros(3))
    with pytest.raises(ValueError, match="opencl device.*cpu:0"):
        ocl.to_pyopencl(ga.zeros(3, device="cpu:0"))
    a = ga.zeros(6, device=dev)
    with pytest.raises(ValueError, match="read-only"):
        ocl.to_pyopencl(ga.broadcast_to(a[:1], (4,)))
    other = cl.CommandQueue(cl.Context([ocl.context_and_queue(dev)[0].devices[0]]))
    with pytest.raises(ValueError, match="another OpenCL context"):
        ocl.to_pyopencl(a, queue=other)
    a.free()
    with pytest.raises(ga.FreedArrayError):
        ocl.to_pyopencl(a)


def test_to_pyopencl_zero_size(dev):
    v = ocl.to_pyopencl(ga.empty((0, 3), device=dev))
    assert v.shape == (0, 3) and v.size == 0
    assert ocl.from_pyopencl(v).shape == (0, 3)


# from_pyopencl ------------------------------------------------------------------------
def test_from_pyopencl_of_our_memory_shares_the_storage(dev, cl, cq):
    _, queue = cq
    x = cl.array.to_device(queue, np.arange(20, dtype=np.int16),
                           allocator=ocl.Allocator(dev))
    st = x.base_data.array.storage
    b = ocl.from_pyopencl(x)
    assert b.storage is st and st.refcount == 2
    assert b.shape == (20,) and b.dtype == np.int16
    b[:5] = 7
    assert x.get()[:6].tolist() == [7, 7, 7, 7, 7, 5]
    x.fill(1)
    assert (b.get() == 1).all()
    del x
    gc.collect()
    assert st.refcount == 1 and (b.get() == 1).all()
    sub = ocl.from_pyopencl(ocl.to_pyopencl(b)[4:9])
    assert sub.storage is st and sub.offset == 8 and sub.shape == (5,)


def _foreign_svm_array(cl, queue, host, flags=None):
    """A PyOpenCL array over a ``pyopencl.SVMAllocation`` (not gpuarrays memory).

    Unbound to a queue on purpose: a queue-bound allocation is released with
    clEnqueueSVMFree over a pointer array PoCL < 3.1 reads after PyOpenCL has
    dropped it, which corrupts the heap (seen as random segfaults).  PyOpenCL
    warns about the unbound allocation; that warning is expected here.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.array.InconsistentOpenCLQueueWarning)
        alloc = cl.tools.SVMAllocator(queue.context, flags=flags or cl.svm_mem_flags.READ_WRITE)
        return cl.array.to_device(queue, host, allocator=alloc)


def test_from_pyopencl_wraps_foreign_svm_and_keeps_it_alive(dev, cl, cq, used):
    _, queue = cq
    base = used()
    x = _foreign_svm_array(cl, queue, np.arange(50, dtype=np.float32))
    b = ocl.from_pyopencl(x)
    assert b.kind == "device" and b.storage.owner is x.base_data and not b.storage.owned
    assert b.storage.ptr == x.base_data.svm_ptr
    assert used() == base  # a wrap is not an allocation
    del x
    gc.collect()
    np.testing.assert_array_equal(b.get(), np.arange(50, dtype=np.float32))
    b[0] = 42
    assert b.get()[0] == 42
    assert ocl.from_pyopencl(x_view := ocl.to_pyopencl(b[10:])).storage is b.storage
    del x_view
    if "unified" in dev.kinds:  # kind= is taken as given
        fine = cl.svm_mem_flags.READ_WRITE | cl.svm_mem_flags.SVM_FINE_GRAIN_BUFFER
        u = ocl.from_pyopencl(_foreign_svm_array(cl, queue, np.ones(3), fine), kind="unified")
        assert u.kind == "unified" and u.host_view().tolist() == [1.0, 1.0, 1.0]
    dev.synchronize()  # the SVMAllocations are freed with a plain clSVMFree


def test_from_pyopencl_of_a_buffer_copies_or_refuses(dev, cl, cq):
    _, queue = cq
    x = cl.array.to_device(queue, np.arange(6.0))  # plain cl.Buffer: no address
    with pytest.raises(ValueError, match="no address"):
        ocl.from_pyopencl(x, copy=False)
    b = ocl.from_pyopencl(x)
    assert b.device == dev and b.get().tolist() == list(range(6))
    b[0] = 9
    assert x.get()[0] == 0


def test_from_pyopencl_copy_true_gives_new_memory(dev, cl, cq):
    _, queue = cq
    x = cl.array.to_device(queue, np.arange(6.0), allocator=ocl.Allocator(dev))
    st = x.base_data.array.storage
    b = ocl.from_pyopencl(x, copy=True)
    assert b.storage is not st and st.refcount == 1
    b[0] = 5
    assert x.get()[0] == 0


def test_from_pyopencl_errors(dev, cl):
    with pytest.raises(TypeError, match="pyopencl.array.Array"):
        ocl.from_pyopencl(np.zeros(3))
    ctx = cl.Context([ocl.context_and_queue(dev)[0].devices[0]])
    queue = cl.CommandQueue(ctx)
    foreign = _foreign_svm_array(cl, queue, np.arange(3.0))
    with pytest.raises(ValueError, match="context gpuarrays does not use"):
        ocl.from_pyopencl(foreign)
    ours = ocl.to_pyopencl(ga.zeros(3, device=dev))
    with pytest.raises(ValueError, match="not on cpu:0"):
        ocl.from_pyopencl(ours, device="cpu:0")


# missing PyOpenCL ---------------------------------------------------------------------
def test_missing_pyopencl_raises_import_error_naming_the_extra(monkeypatch):
    # A None entry in sys.modules makes ``import pyopencl`` raise ImportError, as
    # on a machine without it.
    monkeypatch.setitem(sys.modules, "pyopencl", None)
    monkeypatch.setitem(sys.modules, "pyopencl.array", None)
    for call in (ocl.context_and_queue, ocl.Allocator, lambda: ocl.to_pyopencl(None),
                 lambda: ocl.from_pyopencl(None)):
        with pytest.raises(ImportError, match=r'gpuarrays\[opencl\]') as info:
            call()
        assert "PyOpenCL" in str(info.value)
        assert isinstance(info.value.__cause__, ImportError)


# float16 ------------------------------------------------------------------------------
def test_float16_is_held_everywhere_and_native_half_reported_apart(dev, cl, cq):
    """gpuarrays' kernels compute float16 in float (vload_half/vstore_half need no
    cl_khr_fp16), so every device supports it; native half arithmetic, which a PyOpenCL
    kernel written in ``half`` needs, is the back-end's separate answer."""
    cl_dev = cq[0].devices[0]
    computes_half = "cl_khr_fp16" in cl_dev.extensions.split() or bool(cl_dev.half_fp_config)
    assert dev.supports(np.float16) and dev.supports(np.float32)
    assert dev.impl.half_arithmetic(dev.index) is computes_half
    a = ga.asarray(np.float16([1.5, -2.25, 0.1]), device=dev)
    np.testing.assert_array_equal(ocl.to_pyopencl(a).get(), np.float16([1.5, -2.25, 0.1]))


# reset (last: it replaces the device's context) ------------------------------------------
def test_allocator_made_before_a_reset_refuses_to_allocate(dev, cl):
    old_ctx, _ = ocl.context_and_queue(dev)
    alloc = ocl.Allocator(dev)
    x = ocl.to_pyopencl(ga.zeros(4, device=dev))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ga.device_reset(dev)
    with pytest.raises(ga.DeviceResetError, match="before a device reset"):
        alloc(64)
    with pytest.raises(ga.DeviceResetError):
        ocl.from_pyopencl(x)
    del x
    gc.collect()
    new_ctx, new_queue = ocl.context_and_queue(dev)
    assert new_ctx is not old_ctx
    y = cl.array.to_device(new_queue, np.arange(5.0), allocator=ocl.Allocator(dev))
    assert ((y * 2).get() == np.arange(5.0) * 2).all()
    v = ocl.to_pyopencl(ga.arange(3.0, device=dev))
    assert (v + 1).get().tolist() == [1.0, 2.0, 3.0]
