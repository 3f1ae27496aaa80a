"""Foreign memory stays alive while device work uses it (issue 30, item 2).

Releasing a wrap (``free()``, ``del``, the garbage collector) gives its memory
back to its owner: the NumPy array or ``owner=`` object goes, an ``own=True``
address is freed.  On a device with a queue (OpenCL, CUDA) kernels reading the
wrap may still be queued then, so the release first waits for the device's
queued work (docs/design.md, "Foreign memory").  Without that wait the kernels
read freed memory: another array's values, or a segfault -- so the reproducers
run in a child process, which prints its results for the parent to check
against NumPy.  On ``cpu`` compute is synchronous: the tests pass trivially.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import threading
import weakref

import faults
import numpy as np
import pytest

import gpuarrays as ga

faulty = faults.faulty

N = 1 << 22  # 32 MiB of float64: PoCL on two cores still runs the first kernel at the release
SCALES = (1.0, 2.0, 3.0, 4.0)

# argv: device, how, n.  Queues len(SCALES) kernels reading a wrap, releases the wrap
# (how), drops the last reference to the memory and reuses it with new host memory of
# the same size filled with -1, then prints the results' sums and wrong elements.
CHILD = textwrap.dedent("""
    import gc, json, sys, warnings
    import numpy as np
    import gpuarrays as ga

    dev, how, n = ga.get_device(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    scales = %r
    source = np.arange(n, dtype=np.float64)
    if how == "pyopencl":  # a queue-less PyOpenCL SVM allocation: freed with clSVMFree
        import pyopencl as cl, pyopencl.array, pyopencl.tools
        from gpuarrays.interop import pyopencl as ocl
        context, queue = ocl.context_and_queue(dev)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            alloc = cl.tools.SVMAllocator(context, flags=cl.svm_mem_flags.READ_WRITE)
            memory = cl.array.to_device(queue, source, allocator=alloc)
        queue.finish()
        w = ocl.from_pyopencl(memory)
    elif how == "owner":  # an address, kept alive by owner=
        memory = source.copy()
        w = ga.unsafe_wrap(memory.ctypes.data, (n,), np.float64, device=dev, kind="host",
                           owner=memory)
    else:
        memory = source.copy()
        w = ga.unsafe_wrap(memory, device=dev)
    ys = [w * s for s in scales]
    if how == "free":
        w.free()
    elif how == "collect":  # released by the garbage collector (a cycle holds it)
        cycle = [w]
        cycle.append(cycle)
        del cycle
    del w, memory  # the wrap held the last reference to the memory
    gc.collect()
    reuse = [np.full(n, -1.0) for _ in scales]
    got = [y.get() for y in ys]
    print(json.dumps({"sums": [float(g.sum()) for g in got],
                      "wrong": [int((g != source * s).sum()) for g, s in zip(got, scales)]}))
""") % (SCALES,)


def run_child(device, how: str, n: int = N) -> None:
    """Run the reproducer in a child; assert it exits 0 with NumPy's results."""
    r = subprocess.run([sys.executable, "-c", CHILD, str(device), how, str(n)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (f"the child died ({r.returncode}) reading released memory:\n"
                               f"{r.stderr[-2000:]}")
    result = json.loads(r.stdout.strip().splitlines()[-1])
    source = np.arange(n, dtype=np.float64)
    assert result["wrong"] == [0] * len(SCALES)
    assert result["sums"] == [float((source * s).sum()) for s in SCALES]


@pytest.mark.parametrize("how", ["free", "del", "collect", "owner"])
def test_wrap_release_waits_for_the_kernels_reading_it(device, how):
    run_child(device, how)


def test_from_pyopencl_release_waits_for_the_kernels_reading_it(device):
    if device.backend != "opencl":
        pytest.skip("from_pyopencl imports OpenCL memory")
    pytest.importorskip("pyopencl")
    run_child(device, "pyopencl")


# The order of the release, in process ------------------------------------------------------
class Owner:
    """Any object: kept alive by the arrays that name it as owner."""


def test_release_waits_before_the_owner_goes_and_the_memory_is_freed(device, faulty):
    events: list[str] = []
    faulty.on_call("synchronize", lambda *args: events.append("synchronize"))
    faulty.on_call("free", lambda *args: events.append("free"))
    wait = [] if device.backend == "cpu" else ["synchronize"]  # cpu computes synchronously

    host, owner = np.ones(64), Owner()
    weakref.finalize(owner, events.append, "owner")
    a = ga.unsafe_wrap(host.ctypes.data, host.shape, device=device, kind="host", owner=owner)
    y = a * 2.0
    events.clear()
    del owner, a
    assert events == wait + ["owner"]

    b = ga.unsafe_wrap(faulty.allocate(device.index, "device", 512), (64,), device=device,
                       own=True)
    b.fill(1.0)
    events.clear()
    b.free()
    assert events == wait + ["free"]
    np.testing.assert_array_equal(y.get(), host * 2.0)


def test_a_failing_wait_warns_and_the_release_goes_on(device, faulty):
    if device.backend == "cpu":
        pytest.skip("cpu has no queue to wait for")
    host, owner = np.ones(8), Owner()
    ref = weakref.ref(owner)
    a = ga.unsafe_wrap(host.ctypes.data, (8,), device=device, kind="host", owner=owner)
    del owner
    faulty.fail("synchronize")
    with pytest.warns(ga.GPUArraysWarning, match="synchronize"):
        a.free()
    assert ref() is None


def test_a_release_during_a_reset_does_not_wait_for_the_gate(device, faulty):
    # A reset holds the gate exclusively and has drained the queue before: a wrap
    # released meanwhile (a finalizer on another thread) neither blocks nor syncs.
    host, owner = np.ones(8), Owner()
    ref = weakref.ref(owner)
    wraps = [ga.unsafe_wrap(host.ctypes.data, (8,), device=device, kind="host", owner=owner)]
    del owner
    released = threading.Event()

    def release() -> None:
        wraps.clear()
        gc.collect()
        released.set()

    with device.gate.exclusive():
        worker = threading.Thread(target=release, daemon=True)
        worker.start()
        assert released.wait(10), "a wrap release waited for the gate a reset holds"
    worker.join(10)
    assert ref() is None and faulty.calls["synchronize"] == 0
