"""NumPy conversion follows the memory (docs/design.md, "Foreign memory").

``np.asarray(a)`` / ``np.array(a)`` of memory the host addresses in place (the device's
``info.host_kinds``, and ``"host"``/``"unified"`` everywhere) is a zero-copy view that
holds the storage as ``a.host_view()`` does, so a forced free can never alias it; other
device memory is refused with a message naming ``.get()`` and ``ga.to_numpy``;
``GPUARRAYS_STRICT_HOST=1`` keeps only ``"host"``/``"unified"`` convertible.
"""

from __future__ import annotations

import dataclasses
import gc

import numpy as np
import pytest
from strategies import LAYOUTS, address

import gpuarrays as ga

STRICT = "GPUARRAYS_STRICT_HOST"
PORTABLE_KINDS = ("host", "unified")


@pytest.fixture(autouse=True)
def _not_strict(monkeypatch):
    """Each test starts with the default rule, whatever the caller's environment says."""
    monkeypatch.delenv(STRICT, raising=False)


def numpy_kinds(device) -> list[str]:
    """The kinds of ``device`` that NumPy reads in place."""
    return [k for k in device.kinds if k in PORTABLE_KINDS or k in device.info.host_kinds]


def as_gpu(monkeypatch, device) -> None:
    """Make ``device`` describe its "device" memory as a GPU's: not host-addressable."""
    info = dataclasses.replace(device.info, host_kinds=tuple(
        k for k in device.info.host_kinds if k != "device"))
    monkeypatch.setattr(device, "info", info)


def test_cpu_device_memory_converts():
    """The issue's case: cpu:0's default kind is host memory, and NumPy reads it."""
    a = ga.arange(5.0, device="cpu:0")
    assert a.kind == "device"
    n = np.asarray(a)
    assert isinstance(n, np.ndarray) and n.flags.writeable
    assert address(n) == a.storage.ptr + a.offset
    np.testing.assert_array_equal(n, np.arange(5.0))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_asarray_is_a_zero_copy_view(device, layout):
    """Offset, strided, negative-stride, transposed, 0-d and zero-size views: NumPy's
    layout and the same address."""
    host = np.arange(120, dtype=np.float32).reshape(4, 5, 6)
    for kind in numpy_kinds(device):
        a = ga.asarray(host, device=device, kind=kind)
        v = LAYOUTS[layout](a)
        want = LAYOUTS[layout](host)
        n = np.asarray(v)
        assert type(n) is np.ndarray
        assert n.shape == want.shape and n.dtype == want.dtype
        np.testing.assert_array_equal(n, want)
        if want.size:
            assert n.strides == want.strides
            assert address(n) == v.storage.ptr + v.offset == v.data_ptr
            assert np.shares_memory(n, np.asarray(a))


def test_writes_show_both_ways(device):
    for kind in numpy_kinds(device):
        a = ga.zeros((3, 4), dtype=np.float32, device=device, kind=kind)
        np.asarray(a[1])[:] = 2.0
        np.testing.assert_array_equal(a.get()[1], [2.0] * 4)
        n = np.asarray(a)
        a[0, 0] = 7.0
        ga.synchronize(device)  # later gpuarrays writes show after a synchronize
        assert n[0, 0] == 7.0


def test_queued_device_work_is_done_before_numpy_reads(device):
    for kind in numpy_kinds(device):
        a = ga.zeros(1 << 20, dtype=np.float32, device=device, kind=kind)
        a += 1  # queued on the device; no explicit synchronize before the read
        assert np.asarray(a).min() == 1.0


def test_view_pins_the_storage(device, used):
    for kind in numpy_kinds(device):
        baseline = used()
        a = ga.arange(1000.0, device=device, kind=kind)
        st = a.storage
        before = st.refcount
        n = np.asarray(a)
        assert st.refcount == before + 1
        m = np.asarray(a[10:])
        assert st.refcount == before + 2
        a.free()
        assert not st.is_freed
        np.testing.assert_array_equal(n, np.arange(1000.0))
        del n
        derived = m[::2]  # NumPy's views of the view hold it too
        del m
        assert st.refcount == 1 and not st.is_freed
        np.testing.assert_array_equal(derived[:2], [10.0, 12.0])
        del derived
        assert st.is_freed
        assert used() == baseline


def test_forced_free_never_aliases_a_numpy_view(device, used):
    """The source is force-freed while its NumPy view lives: the memory is quarantined,
    new arrays of the same size get other memory, and the view's contents stay."""
    for kind in numpy_kinds(device):
        baseline = used()
        a = ga.arange(4096.0, device=device, kind=kind)
        n = np.asarray(a)
        a.free(force=True)
        assert a.is_freed
        with pytest.raises(ga.FreedArrayError):
            np.asarray(a)
        assert ga.memory_stats(device)["quarantined_bytes"] >= a.nbytes
        others = [ga.full(4096, -1.0, device=device, kind=kind) for _ in range(4)]
        ga.synchronize(device)
        for o in others:
            assert o.data_ptr != address(n)
            o[...] = 5.0
        ga.synchronize(device)
        np.testing.assert_array_equal(n, np.arange(4096.0))
        del others, o, n  # o: the loop's last array
        assert ga.memory_stats(device)["quarantined_bytes"] == 0
        assert used() == baseline


def test_read_only_arrays_give_read_only_views(device):
    for kind in numpy_kinds(device):
        a = ga.arange(9.0, device=device, kind=kind).reshape(3, 3)
        for v, want in ((ga.broadcast_to(a[0], (2, 3)), np.broadcast_to(np.arange(3.0), (2, 3))),
                        (ga.linalg.diagonal(a), np.array([0.0, 4.0, 8.0]))):
            n = np.asarray(v)
            assert not n.flags.writeable
            np.testing.assert_array_equal(n, want)
            with pytest.raises(ValueError, match="read-only"):
                n[0] = 1.0
            c = np.array(v)  # copy=True: NumPy's own writable array
            assert c.flags.writeable and not np.shares_memory(c, n)
        assert np.asarray(a).flags.writeable


def test_copy_and_dtype_arguments(device):
    for kind in numpy_kinds(device):
        a = ga.arange(6, dtype=np.int32, device=device, kind=kind)
        v = a[::2]
        for c in (np.array(v), np.asarray(v, copy=True), np.array(v, copy=True)):
            assert not np.shares_memory(c, np.asarray(v))
            c[0] = 9
        assert a.get()[0] == 0
        assert address(np.asarray(v, copy=False)) == v.data_ptr
        assert address(np.asarray(v, dtype=np.int32, copy=False)) == v.data_ptr
        f = np.asarray(v, dtype=np.float64)
        assert f.dtype == np.float64 and not np.shares_memory(f, np.asarray(v))
        np.testing.assert_array_equal(f, [0.0, 2.0, 4.0])
        g = np.array(v, dtype=np.int8, copy=True)
        assert g.dtype == np.int8
        np.testing.assert_array_equal(g, [0, 2, 4])
        with pytest.raises(ValueError, match="without a copy"):
            np.asarray(v, dtype=np.float64, copy=False)
        gc.collect()
        assert a.storage.refcount == 2  # a and v: the copies took no handle with them


def test_structured_dtype(device):
    dt = np.dtype([("x", "f4"), ("y", "i2")])
    host = np.zeros(4, dtype=dt)
    host["x"] = np.arange(4)
    host["y"] = -np.arange(4)
    for kind in numpy_kinds(device):
        a = ga.asarray(host, device=device, kind=kind)
        n = np.asarray(a)
        assert n.dtype == dt and address(n) == a.data_ptr
        np.testing.assert_array_equal(n, host)
        np.testing.assert_array_equal(np.asarray(a[::-1])["y"], -np.arange(4)[::-1])


def test_device_memory_the_host_cannot_address_is_refused(device, monkeypatch):
    """Real where the device has such memory (a GPU); on a CPU device (cpu, PoCL) every
    kind is host memory, so its description is made a GPU's."""
    if "device" in device.info.host_kinds:
        as_gpu(monkeypatch, device)
    if "device" not in device.kinds:
        pytest.skip(f"{device} has no 'device' memory")
    a = ga.arange(4.0, device=device, kind="device")
    for call in (np.asarray, np.array, lambda x: np.asarray(x, copy=False),
                 lambda x: np.asarray(x, dtype=np.float32)):
        with pytest.raises(TypeError, match=r"'device' memory .*a\.get\(\) \(or ga\.to_numpy\(a\)\)"):
            call(a)
        with pytest.raises(TypeError, match="kind='host'"):
            call(a[1:])
    gc.collect()
    assert a.storage.refcount == 1  # a refusal takes no handle
    np.testing.assert_array_equal(a.get(), np.arange(4.0))  # the explicit copy works
    np.testing.assert_array_equal(ga.to_numpy(a), np.arange(4.0))
    for kind in PORTABLE_KINDS:
        if kind in device.kinds:
            np.testing.assert_array_equal(np.asarray(ga.ones(2, device=device, kind=kind)), [1, 1])


@pytest.mark.parametrize("gpu_like", [False, True], ids=["as_is", "as_gpu"])
def test_strict_switch_refuses_as_a_gpu_would(device, monkeypatch, gpu_like):
    if gpu_like:  # 'device' memory the host cannot read, as on CUDA, on every device
        as_gpu(monkeypatch, device)
    monkeypatch.setenv(STRICT, "1")  # read at each call
    for kind in device.kinds:
        a = ga.arange(3.0, device=device, kind=kind)
        if kind in PORTABLE_KINDS:
            assert address(np.asarray(a)) == a.data_ptr
            continue
        if kind in device.info.host_kinds:  # readable in place: the switch is the reason
            with pytest.raises(TypeError, match=rf"{STRICT}=1 is set.*a\.get\(\)"):
                np.asarray(a)
            with pytest.raises(TypeError, match=STRICT):
                np.array(a)
        else:  # never readable in place (CUDA 'device' memory): the switch is not named
            for call in (np.asarray, np.array):
                with pytest.raises(TypeError, match=rf"'{kind}' memory on {device}, and .*"
                                                    rf"a\.get\(\)") as e:
                    call(a)
                assert STRICT not in str(e.value)
        assert a.storage.refcount == 1
    monkeypatch.setenv(STRICT, "0")
    for kind in numpy_kinds(device):
        np.testing.assert_array_equal(np.asarray(ga.zeros(2, device=device, kind=kind)), [0, 0])


def test_strict_switch_on_cpu(monkeypatch):
    a = ga.zeros(3, device="cpu:0")
    monkeypatch.setenv(STRICT, "1")
    with pytest.raises(TypeError, match=r"'device' memory on cpu:0"):
        np.asarray(a)
    monkeypatch.setenv(STRICT, "yes")
    with pytest.raises(ValueError, match=rf"{STRICT}='yes'"):
        np.asarray(a)
    monkeypatch.delenv(STRICT)
    np.testing.assert_array_equal(np.asarray(a), np.zeros(3))


def test_numpy_functions_still_return_gpuarrays_arrays(device):
    """``__array__`` does not take over NumPy's function and ufunc protocols: what the
    namespace has runs on the device, the rest is still refused (no host round trip)."""
    h = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    a = ga.asarray(h, device=device)
    for got, want in ((np.sum(a, axis=0), h.sum(axis=0)), (np.add(a, 1), h + 1),
                      (np.concatenate([a, a]), np.concatenate([h, h])), (np.exp(a), np.exp(h)),
                      (np.mean(a), h.mean())):
        assert isinstance(got, ga.GPUArray) and got.device == device
        np.testing.assert_allclose(got.get(), want, rtol=1e-6)
    for call in (lambda: np.isnat(a), lambda: np.add(a, np.ones(4, np.float32)),
                 lambda: np.where(a > 0, a, np.ones((3, 4)))):
        with pytest.raises(TypeError):
            call()


@pytest.fixture(scope="module")
def scipy():
    """SciPy with ``SCIPY_ARRAY_API=1`` (tests/conftest.py); skipped when not installed."""
    try:
        import scipy.fft
        import scipy.special
        import scipy.stats
    except ImportError as e:
        pytest.skip(f"SciPy is not installed: {e}")
    return scipy


def test_scipy_converts_through_numpy_on_cpu(scipy):
    """SciPy's array API support reads inputs with ``np.asarray`` where it has no native
    path, then converts the result back with the input's namespace: ``xp.asarray`` without a
    device, so the result lands on the default device (cpu:0 inside ``use_device``; on a
    machine whose default is cuda:0 it would land there)."""
    dev = ga.get_device("cpu:0")
    x = np.linspace(-2.0, 2.0, 16)
    y = np.cos(np.arange(16.0))
    dx, dy = ga.asarray(x, device=dev), ga.asarray(y, device=dev)
    with ga.use_device(dev):
        results = [scipy.special.erf(dx), scipy.fft.dct(dx), scipy.special.ndtr(dx)]
        got = scipy.stats.ttest_ind(dx, dy)
    for g, want in zip(results, (scipy.special.erf(x), scipy.fft.dct(x), scipy.special.ndtr(x)),
                       strict=True):
        assert isinstance(g, ga.GPUArray) and g.device == dev
        np.testing.assert_allclose(g.get(), want, rtol=1e-12, atol=1e-14)
    want = scipy.stats.ttest_ind(x, y)
    for g, w in ((got.statistic, want.statistic), (got.pvalue, want.pvalue)):
        assert isinstance(g, ga.GPUArray) and g.device == dev
        np.testing.assert_allclose(g.get(), w, rtol=1e-12)
