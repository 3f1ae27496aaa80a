"""DLPack: our producer with numpy.from_dlpack / torch.from_dlpack as consumers,
ga.from_dlpack with NumPy / PyTorch / our own arrays as producers, capsule lifetimes.

NumPy is the oracle for layouts and values; lifetimes are checked with storage.refcount,
used_bytes and the producer objects' own lifetimes (weak references).
"""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import threading
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import LAYOUTS, address

import gpuarrays as ga
from gpuarrays._array import dlpack
from gpuarrays._memory.pins import pin_count

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]



@pytest.fixture
def torch():
    try:
        import torch
    except ImportError as e:
        pytest.skip(f"PyTorch is not importable: {e}")
    return torch


def sample(dtype: str, shape=(4, 5, 6)) -> np.ndarray:
    n = int(np.prod(shape))
    values = np.arange(n) % 7 - 3
    if dtype == "bool":
        return (values > 0).reshape(shape)
    if dtype.startswith("complex"):
        return (values + 1j * values[::-1]).astype(dtype).reshape(shape)
    if dtype.startswith("uint"):
        values = values + 3
    return values.astype(dtype).reshape(shape)




def capsule_name(capsule) -> str:
    return repr(capsule).split('"')[1]


def _capi(name: str, restype, *argtypes):
    """A private prototype of a C-API function (``pythonapi``'s shared ones may be altered)."""
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


capsule_get_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object,
                            ctypes.c_char_p)
capsule_set_name = _capi("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
capsule_new = _capi("PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                    ctypes.c_void_p)
# Names given to capsules by these tests must outlive the capsules: module-level bytes.
USED_NAMES = {b"dltensor": b"used_dltensor", b"dltensor_versioned": b"used_dltensor_versioned"}


def managed_of(capsule):
    """The DLManagedTensor[Versioned] struct of an unconsumed capsule (for inspection)."""
    name = capsule_name(capsule)
    ptr = capsule_get_pointer(capsule, name.encode())
    kind = dlpack.DLManagedTensorVersioned if name.endswith("versioned") else dlpack.DLManagedTensor
    return kind.from_address(ptr)


# ------------------------------------------------------------------------ device tuple
def test_dlpack_device_cpu_backend_is_kdlcpu_for_every_kind():
    for kind in ("device", "host", "unified"):
        a = ga.zeros(3, device="cpu:0", kind=kind)
        assert a.__dlpack_device__() == (dlpack.kDLCPU, 0)


def test_dlpack_device(device):
    a = ga.zeros(3, device=device)
    expected = {"cpu": (1, 0), "opencl": (4, device.index)}.get(device.backend)
    if expected is not None:
        assert a.__dlpack_device__() == expected
    a.free()
    assert a.__dlpack_device__() == expected or expected is None  # metadata survives a free


# ------------------------------------------------------------------------ capsule format
def test_versioned_only_when_max_version_allows(device):
    a = ga.arange(6, dtype="int32", device=device)
    versioned = "dltensor_versioned"
    assert capsule_name(a.__dlpack__()) == "dltensor"
    assert capsule_name(a.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert capsule_name(a.__dlpack__(max_version=(1, 0))) == versioned
    assert capsule_name(a.__dlpack__(max_version=(1, 3))) == versioned
    assert capsule_name(a.__dlpack__(max_version=(2, 0))) == versioned
    ro = ga.broadcast_to(a, (2, 6))
    assert capsule_name(ro.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    del ro
    gc.collect()
    assert a.storage.refcount == 1


@pytest.mark.parametrize("layout", ["whole", "offset", "negative", "transposed", "0-d"])
def test_struct_fields(device, layout):
    """Strides always filled in (elements); data = address of element 0; byte_offset 0."""
    host = sample("float32")
    a = ga.asarray(host, device=device)
    v = LAYOUTS[layout](a)
    h = LAYOUTS[layout](host)
    capsule = v.__dlpack__(max_version=(1, 0))
    m = managed_of(capsule)  # the capsule must outlive m
    assert (m.version.major, m.version.minor) == (1, 0)
    assert m.flags == 0
    t = m.dl_tensor
    assert t.ndim == h.ndim
    assert t.byte_offset == 0
    assert t.data == v.data_ptr
    assert (t.device.device_type, t.device.device_id) == v.__dlpack_device__()
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (dlpack.kDLFloat, 32, 1)
    assert tuple(t.shape[i] for i in range(t.ndim)) == h.shape
    if h.ndim:
        assert bool(t.strides)
        assert tuple(t.strides[i] for i in range(t.ndim)) == tuple(s // 4 for s in h.strides)


def test_read_only_flag_and_legacy_refusal(device):
    a = ga.arange(6.0, device=device)
    ro = ga.broadcast_to(a, (3, 6))
    assert not ro.flags.writeable
    capsule = ro.__dlpack__(max_version=(1, 0))
    m = managed_of(capsule)  # the capsule must outlive m
    assert m.flags & dlpack.FLAG_READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        ro.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        ro.__dlpack__(max_version=(0, 9))
    # a copy is writeable, so even a legacy capsule can carry it
    capsule = ro.__dlpack__(copy=True)
    assert capsule_name(capsule) == "dltensor"
    del capsule, m
    gc.collect()
    assert a.storage.refcount == 2  # a and ro


def test_copy_true_sets_is_copied(device):
    a = ga.arange(5.0, device=device)
    capsule = a.__dlpack__(max_version=(1, 0), copy=True)
    m = managed_of(capsule)  # the capsule must outlive m
    assert m.flags & dlpack.FLAG_IS_COPIED
    assert m.dl_tensor.data != a.data_ptr
    capsule = a.__dlpack__(max_version=(1, 0), copy=False)
    m = managed_of(capsule)  # the capsule must outlive m
    assert not m.flags & dlpack.FLAG_IS_COPIED
    assert m.dl_tensor.data == a.data_ptr


def test_bad_requests(device):
    a = ga.arange(4.0, device=device)
    own_type, own_index = a.__dlpack_device__()
    # Neither the array's own DLPack device nor the host on any back-end ((2, 0), kDLCUDA 0,
    # is cuda:0's own): a device type no back-end has, another device of the array's type.
    for dl_device in ((dlpack.kDLVulkan, 0), (int(own_type), int(own_index) + 1)):
        with pytest.raises(BufferError, match="DLPack device"):
            a.__dlpack__(max_version=(1, 0), dl_device=dl_device)
    with pytest.raises(ValueError, match="stream"):
        a.__dlpack__(stream="3")  # not an int: refused on every back-end
    if device.backend in ("cpu", "opencl"):  # no streams there; on CUDA 3 is a stream handle
        with pytest.raises(ValueError, match="stream"):
            a.__dlpack__(stream=3)
    with pytest.raises(ValueError, match="max_version"):
        a.__dlpack__(max_version="1.0")
    with pytest.raises(ValueError, match="copy"):
        a.__dlpack__(copy="yes")
    structured = ga.zeros(3, dtype=[("x", "f4"), ("y", "i4")], device=device)
    with pytest.raises(BufferError):
        structured.__dlpack__(max_version=(1, 0))
    gc.collect()
    assert a.storage.refcount == 1
    assert structured.storage.refcount == 1


def test_freed_array_cannot_be_exported(device):
    a = ga.arange(4.0, device=device)
    a.free()
    with pytest.raises(ga.FreedArrayError):
        a.__dlpack__(max_version=(1, 0))
    b = ga.arange(4.0, device=device)
    c = b[1:]
    b.free(force=True)
    with pytest.raises(ga.FreedArrayError, match="forced free"):
        c.__dlpack__()


# ------------------------------------------------------------------------ capsule lifetime
@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_unconsumed_capsule_releases_its_handle(device, used, max_version):
    baseline = used()
    a = ga.zeros((64, 64), device=device)
    capsules = [a[i].__dlpack__(max_version=max_version) for i in range(3)]
    assert a.storage.refcount == 4
    a.free()
    assert not a.storage.is_freed  # the capsules keep the memory
    assert used() > baseline
    capsules.pop()
    assert a.storage.refcount == 2
    del capsules
    assert a.storage.is_freed
    assert used() == baseline


def test_capsule_dropped_in_another_thread(device, used):
    baseline = used()
    a = ga.ones(1000, device=device)
    box = [a.__dlpack__(max_version=(1, 0)), a.__dlpack__()]
    a.free()
    assert box[0] is not None and a.storage.refcount == 2
    t = threading.Thread(target=box.clear)
    t.start()
    t.join()
    assert a.storage.is_freed
    assert used() == baseline


def test_consumed_twice_is_refused(device, used):
    baseline = used()
    a = ga.arange(5.0, device=device)
    for max_version in (None, (1, 0)):
        capsule = a.__dlpack__(max_version=max_version)
        b = ga.from_dlpack(capsule)
        assert capsule_name(capsule).startswith("used_")
        with pytest.raises(BufferError, match="already consumed"):
            ga.from_dlpack(capsule)
        assert ga.shares_memory(a, b)
        np.testing.assert_array_equal(b.get(), np.arange(5.0))
        b.free()
        del capsule
    gc.collect()
    assert a.storage.refcount == 1
    a.free()
    assert used() == baseline


def test_numpy_refuses_a_used_capsule():
    a = ga.arange(5.0, device="cpu:0")
    box = [a.__dlpack__(max_version=(1, 0))]

    class Producer:
        def __dlpack_device__(self):
            return (dlpack.kDLCPU, 0)

        def __dlpack__(self, **kwargs):
            return box[0]

    n = np.from_dlpack(Producer())
    with pytest.raises((BufferError, ValueError, RuntimeError)):
        np.from_dlpack(Producer())
    box.clear()
    assert a.storage.refcount == 2  # n holds the capsule's handle
    del n
    assert a.storage.refcount == 1


# ------------------------------------------------------------------------ deleters (C)
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # called without the GIL


def deleter_of(capsule):
    """(address of the managed tensor, its deleter as a ctypes function) of a fresh capsule."""
    m = managed_of(capsule)
    return ctypes.addressof(m), DELETER(m.deleter)


def consume(capsule):
    """Take a capsule as a C consumer would (rename it); the caller now owns the deleter."""
    name = capsule_name(capsule).encode()
    ptr, deleter = deleter_of(capsule)
    assert capsule_set_name(capsule, USED_NAMES[name]) == 0
    return ptr, deleter


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_deleter_called_without_the_gil_from_another_thread(device, used, max_version):
    baseline = used()
    a = ga.ones(100, device=device)
    capsule = a[10:].__dlpack__(max_version=max_version)
    ptr, deleter = consume(capsule)
    del capsule  # consumed: its destructor leaves the handle to the deleter
    assert a.storage.refcount == 2
    a.free()
    t = threading.Thread(target=deleter, args=(ptr,))  # ctypes releases the GIL for the call
    t.start()
    t.join()
    assert used() == baseline


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_deleter_called_twice_before_the_capsule_dies(max_version):
    """torch.from_dlpack's refusal path: deleter called, capsule left unconsumed, so the
    destructor releases again -- exactly one handle goes, the block stays valid."""
    a = ga.arange(6.0, device="cpu:0")
    capsule = a.__dlpack__(max_version=max_version)
    ptr, deleter = deleter_of(capsule)
    assert a.storage.refcount == 2
    deleter(ptr)
    assert a.storage.refcount == 1
    deleter(ptr)  # a second call while the capsule lives: harmless
    assert a.storage.refcount == 1
    del capsule
    gc.collect()
    assert a.storage.refcount == 1
    np.testing.assert_array_equal(a.get(), np.arange(6.0))


def test_capsule_refused_with_an_error_pending(capfd):
    """NumPy refusing a capsule (a DLPack version it does not read) drops it with its
    error set: the destructor releases the handle and prints nothing."""
    a = ga.arange(4.0, device="cpu:0")
    box = []

    class Producer:
        def __dlpack_device__(self):
            return (dlpack.kDLCPU, 0)

        def __dlpack__(self, **kwargs):
            capsule = a.__dlpack__(max_version=(1, 0))
            managed_of(capsule).version.major = 99
            box.append(capsule)
            return box.pop()

    capfd.readouterr()
    for _ in range(3):
        with pytest.raises(BufferError):
            np.from_dlpack(Producer())
    assert a.storage.refcount == 1
    out, err = capfd.readouterr()
    assert "Exception ignored" not in out + err and "SystemError" not in out + err


def test_capsule_dropped_unconsumed_in_every_flavour(device):
    a = ga.arange(6.0, device=device)
    ro = ga.broadcast_to(a, (2, 6))
    capsules = [a.__dlpack__(), a.__dlpack__(max_version=(1, 0)),
                ro.__dlpack__(max_version=(1, 0)), a[::2].__dlpack__(max_version=(1, 0)),
                a.__dlpack__(max_version=(1, 0), copy=True)]
    assert a.storage.refcount == 2 + 4  # the copy has storage of its own
    capsules.clear()
    assert a.storage.refcount == 2
    del ro
    assert a.storage.refcount == 1


def _foreign_capsule(host: np.ndarray, calls: list, lanes: int = 1):
    """A legacy capsule over ``host`` made the way a C producer would (no destructor):
    its deleter appends to ``calls``."""
    shape = (ctypes.c_int64 * host.ndim)(*host.shape)
    strides = (ctypes.c_int64 * host.ndim)(*(s // host.itemsize for s in host.strides))
    m = dlpack.DLManagedTensor()
    t = m.dl_tensor
    t.data = host.ctypes.data
    t.device.device_type, t.device.device_id = dlpack.kDLCPU, 0
    t.ndim = host.ndim
    t.dtype.code, t.dtype.bits, t.dtype.lanes = dlpack.kDLFloat, 64, lanes
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    keep = (m, shape, strides, host)

    @DELETER
    def deleter(ptr):
        calls.append(ptr)

    m.deleter = ctypes.cast(deleter, ctypes.c_void_p).value
    calls_keep.append((keep, deleter))
    return capsule_new(ctypes.addressof(m), b"dltensor", None), ctypes.addressof(m)


calls_keep: list = []  # the producers' structs and callbacks outlive the tests


def test_import_owner_calls_the_producer_deleter_exactly_once():
    host = np.arange(12.0).reshape(3, 4)
    calls: list = []
    capsule, ptr = _foreign_capsule(host, calls)
    g = ga.from_dlpack(capsule)
    assert capsule_name(capsule) == "used_dltensor"
    assert g.data_ptr == address(host)
    np.testing.assert_array_equal(g.get(), host)
    view = g[1:]
    g.free()
    del capsule
    gc.collect()
    assert calls == []
    view.free()
    assert calls == [ptr]
    gc.collect()
    assert calls == [ptr]
    # refused after taking it (two lanes): the deleter still runs, once
    calls.clear()
    capsule, ptr = _foreign_capsule(host, calls, lanes=2)
    with pytest.raises(BufferError, match="lanes=2"):
        ga.from_dlpack(capsule)
    gc.collect()
    assert calls == [ptr]


def test_import_owner_release_is_idempotent():
    calls: list = []
    capsule, ptr = _foreign_capsule(np.ones(3), calls)
    owner = dlpack._take(capsule).owner
    assert owner.ptr == ptr
    owner.release()
    owner.release()
    assert calls == [ptr] and owner.ptr == 0
    del owner
    gc.collect()
    assert calls == [ptr]


def test_import_owner_dropped_in_another_thread():
    host = np.arange(100.0)
    ref = weakref.ref(host)
    box = [ga.from_dlpack(host)]
    del host
    t = threading.Thread(target=box.clear)
    t.start()
    t.join()
    gc.collect()
    assert ref() is None


def test_torch_refusing_an_opencl_capsule_does_not_crash():
    """torch.from_dlpack calls the deleter of a capsule it refuses and leaves the capsule
    unconsumed; the capsule's destructor then runs the deleter again.  Ours is idempotent
    while the capsule lives.  (In a subprocess: a regression would crash.)"""
    if not [d for d in ga.devices() if d.backend == "opencl"]:
        pytest.skip("no OpenCL device")
    pytest.importorskip("torch")
    code = """if True:
        import gc, torch, gpuarrays as ga
        d = [x for x in ga.devices() if x.backend == "opencl"][0]
        a = ga.arange(5.0, device=d)
        for _ in range(20):
            for take in (torch.from_dlpack, lambda a: torch.utils.dlpack.from_dlpack(a.__dlpack__())):
                try:
                    take(a)
                except RuntimeError:
                    pass
        gc.collect()
        assert a.storage.refcount == 1, a.storage.refcount
        print("ok")
    """
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
    assert "Exception ignored" not in r.stderr


# ------------------------------------------------------------------------ numpy consumer
@pytest.mark.parametrize("kind", ["device", "host", "unified"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_numpy_from_dlpack_zero_copy_and_keep_alive(kind, layout):
    dev = ga.get_device("cpu:0")
    gc.collect()
    baseline = ga.memory_stats(dev)["used_bytes"]
    host = sample("float64")
    a = ga.asarray(host, device=dev, kind=kind)
    v = LAYOUTS[layout](a)
    expected = LAYOUTS[layout](host)
    n = np.from_dlpack(v)
    assert n.shape == expected.shape
    assert n.strides == expected.strides or expected.size <= 1
    np.testing.assert_array_equal(n, expected)
    if expected.size:
        assert address(n) == v.data_ptr
    storage = a.storage
    assert storage.refcount == (2 if v is a else 3)  # a, v, the capsule consumed by n
    a.free()
    v.free()
    assert not storage.is_freed and storage.refcount == 1
    np.testing.assert_array_equal(n, expected)  # memory still valid
    del n
    gc.collect()
    assert storage.is_freed
    assert ga.memory_stats(dev)["used_bytes"] == baseline


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_from_dlpack_every_dtype(dtype):
    host = sample(dtype, (3, 4))
    a = ga.asarray(host, device="cpu:0")
    for v, h in ((a, host), (a[1:, ::2], host[1:, ::2]), (a[2, 3], host[2, 3])):
        n = np.from_dlpack(v)
        assert n.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(n, h)
        assert address(n) == v.data_ptr


def test_numpy_sees_writes_both_ways():
    a = ga.zeros((3, 4), device="cpu:0", kind="host")
    n = np.from_dlpack(a[1:, 1:])
    n[0, 0] = 7.0
    a[2, 3] = 9.0
    assert a.get()[1, 1] == 7.0
    assert n[1, 2] == 9.0


def test_numpy_read_only():
    a = ga.arange(6.0, device="cpu:0")
    n = np.from_dlpack(ga.broadcast_to(a, (2, 6)))
    assert not n.flags.writeable
    assert n.strides == (0, 8)
    np.testing.assert_array_equal(n, np.broadcast_to(np.arange(6.0), (2, 6)))
    d = np.from_dlpack(ga.asarray(np.eye(3), device="cpu:0").diagonal())
    assert not d.flags.writeable
    np.testing.assert_array_equal(d, np.ones(3))


def test_numpy_asks_for_a_host_copy(device):
    """np.from_dlpack(device="cpu") passes dl_device=(kDLCPU, 0): a host copy off-host."""
    host = sample("float32")[:, ::2]
    a = ga.asarray(host, device=device)
    n = np.from_dlpack(a, device="cpu")
    np.testing.assert_array_equal(n, host)
    n2 = np.from_dlpack(a, device="cpu", copy=True)
    np.testing.assert_array_equal(n2, host)
    assert not np.shares_memory(n, n2)
    if device.backend != "cpu":  # copy=True alone copies on the device, which NumPy refuses
        # NumPy's own refusal, its class depends on NumPy's version: RuntimeError up to 2.4,
        # BufferError("Unsupported device in DLTensor.") on 2.5
        with pytest.raises((RuntimeError, BufferError), match="device"):
            np.from_dlpack(a, copy=True)
    del n, n2
    gc.collect()
    assert a.storage.refcount == 1


def test_host_addressable_memory_exports_in_place_as_kdlcpu(device):
    """dl_device=(kDLCPU, 0) without copy=True reads the device's host_kinds in place (every
    kind on cpu and on a CPU OpenCL device, fine-grain SVM, CUDA pinned and managed memory),
    after the device's pending work; copy=False raises BufferError for the other kinds."""
    host = sample("float32")[:, ::2]
    for kind in device.info.kinds:
        a = ga.asarray(host, device=device, kind=kind)
        if kind not in device.info.host_kinds:
            with pytest.raises(BufferError, match="copy=False"):
                a.__dlpack__(max_version=(1, 0), dl_device=(dlpack.kDLCPU, 0), copy=False)
            assert a.storage.refcount == 1
            continue
        a += 1  # queued on the device: the export waits for it
        n = np.from_dlpack(a, device="cpu")
        assert address(n) == a.data_ptr
        np.testing.assert_array_equal(n, host + 1)
        capsule = a.__dlpack__(max_version=(1, 0), dl_device=(dlpack.kDLCPU, 0), copy=False)
        assert a.storage.refcount == 3
        del capsule, n
        gc.collect()
        assert a.storage.refcount == 1


def test_opencl_export_is_refused_by_numpy_and_released(capfd):
    """NumPy drops the capsule with its error pending: released, nothing printed."""
    devs = [d for d in ga.devices() if d.backend == "opencl"]
    if not devs:
        pytest.skip("no OpenCL device")
    a = ga.arange(5.0, device=devs[0])
    assert a.__dlpack_device__() == (dlpack.kDLOpenCL, devs[0].index)
    capfd.readouterr()
    with pytest.raises((BufferError, RuntimeError), match="device"):
        np.from_dlpack(a)
    assert a.storage.refcount == 1
    np.testing.assert_array_equal(np.from_dlpack(a, device="cpu"), np.arange(5.0))
    assert a.storage.refcount == 1
    out, err = capfd.readouterr()
    assert "Exception ignored" not in out + err and "SystemError" not in out + err


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_numpy_from_dlpack_random_slices(data):
    shape = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=3).map(tuple))
    host = np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape)
    key = tuple(data.draw(st.slices(n)) for n in shape)
    a = ga.asarray(host, device="cpu:0")
    n = np.from_dlpack(a[key])
    np.testing.assert_array_equal(n, host[key])
    if n.size:
        assert n.strides == host[key].strides
        assert address(n) == a[key].data_ptr


# ------------------------------------------------------------------------ ga.from_dlpack
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_from_dlpack_numpy_zero_copy(layout):
    host = LAYOUTS[layout](sample("float64"))
    g = ga.from_dlpack(host)
    assert g.device == ga.get_device("cpu:0")
    assert g.kind == "host"
    assert g.shape == host.shape and g.dtype == host.dtype
    if host.size > 1:
        assert g.strides == host.strides
    if host.size:
        assert g.data_ptr == address(host)
    np.testing.assert_array_equal(g.get(), host)
    np.testing.assert_array_equal(g.host_view(), host)


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_dlpack_every_dtype(device, dtype):
    host = sample(dtype, (3, 4))[::-1, 1:]
    if not device.supports(dtype):
        with pytest.raises(ga.UnsupportedDTypeError):
            ga.from_dlpack(host, device=device)
        return
    g = ga.from_dlpack(host, device=device)
    assert g.dtype == host.dtype and g.device == device
    np.testing.assert_array_equal(g.get(), host)


def test_from_dlpack_numpy_keeps_the_producer_alive():
    host = np.arange(10.0)
    ref = weakref.ref(host)
    g = ga.from_dlpack(host)
    view = g[2:]
    del host
    gc.collect()
    assert ref() is not None
    g.free()
    assert ref() is not None  # view still uses the memory
    np.testing.assert_array_equal(view.get(), np.arange(2.0, 10.0))
    view.free()
    gc.collect()
    assert ref() is None  # the producer's deleter ran when the last handle went


def test_from_dlpack_host_memory_is_not_pinned():
    """kDLCPU imports skip the cpu back-end's tracking-only host registration (decisions.md)."""
    before = pin_count("cpu:0")
    host = np.arange(100.0)
    g = ga.from_dlpack(host)
    assert g.storage.ptr == address(host) and not g.storage.owned
    assert pin_count("cpu:0") == before
    g.free()
    assert pin_count("cpu:0") == before


def test_from_dlpack_numpy_writes_and_read_only():
    host = np.zeros(4)
    g = ga.from_dlpack(host)
    g[1] = 5.0
    assert host[1] == 5.0
    ro = np.arange(4.0)
    ro.flags.writeable = False
    r = ga.from_dlpack(ro)
    assert not r.flags.writeable
    with pytest.raises(ValueError):
        r[0] = 1.0
    assert r.data_ptr == address(ro)


def test_from_dlpack_copy(device):
    host = np.arange(12.0).reshape(3, 4)[:, 1::2]
    g = ga.from_dlpack(host, copy=True)
    assert g.data_ptr != address(host)
    np.testing.assert_array_equal(g.get(), host)
    g[0, 0] = -1.0
    assert host[0, 0] == 1.0
    on = ga.from_dlpack(host, device=device)
    assert on.device == device
    np.testing.assert_array_equal(on.get(), host)
    if device.backend == "cpu":
        assert on.data_ptr == address(host)
    else:
        with pytest.raises(ValueError, match="copy"):
            ga.from_dlpack(host, device=device, copy=False)


def test_from_dlpack_gpuarray(device):
    a = ga.arange(6.0, device=device)
    b = ga.from_dlpack(a[1:])
    assert b.storage is a.storage and b.offset == 8
    c = ga.from_dlpack(a, copy=True)
    assert c.storage is not a.storage
    np.testing.assert_array_equal(c.get(), np.arange(6.0))
    d = ga.from_dlpack(a, device="cpu:0")
    np.testing.assert_array_equal(d.get(), np.arange(6.0))


def test_from_dlpack_own_capsule_zero_copy(device):
    a = ga.arange(8.0, device=device)
    for max_version in (None, (1, 0)):
        b = ga.from_dlpack(a[2:].__dlpack__(max_version=max_version))
        assert b.device == device
        assert b.data_ptr == a.data_ptr + 16
        assert ga.shares_memory(a, b)
        np.testing.assert_array_equal(b.get(), np.arange(2.0, 8.0))
        assert a.storage.refcount == 2
        b.free()
        assert a.storage.refcount == 1
    ro = ga.from_dlpack(ga.broadcast_to(a, (2, 8)).__dlpack__(max_version=(1, 0)))
    assert not ro.flags.writeable


def test_from_dlpack_round_trip_through_numpy_shares_memory():
    a = ga.arange(6.0, device="cpu:0")
    b = ga.from_dlpack(np.from_dlpack(a[::2]))
    assert ga.shares_memory(a, b)
    np.testing.assert_array_equal(b.get(), [0.0, 2.0, 4.0])
    a.free()
    np.testing.assert_array_equal(b.get(), [0.0, 2.0, 4.0])


def test_from_dlpack_legacy_producer_without_keywords():
    class Old:
        def __init__(self, n):
            self.n = n

        def __dlpack_device__(self):
            return (dlpack.kDLCPU, 0)

        def __dlpack__(self, stream=None):
            return self.n.__dlpack__()

    host = np.arange(5, dtype=np.int32)
    g = ga.from_dlpack(Old(host))
    assert g.data_ptr == address(host)
    np.testing.assert_array_equal(g.get(), host)


def test_from_dlpack_foreign_device_asks_for_a_host_copy():
    host = np.arange(4.0)
    calls = []

    class OnAnAccelerator:
        def __dlpack_device__(self):
            return (dlpack.kDLVulkan, 0)

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            calls.append((dl_device, copy))
            if dl_device != (dlpack.kDLCPU, 0):
                raise BufferError("only host copies")
            return host.copy().__dlpack__(max_version=max_version)

    g = ga.from_dlpack(OnAnAccelerator(), device="cpu:0")
    assert calls == [((dlpack.kDLCPU, 0), None)]
    np.testing.assert_array_equal(g.get(), host)
    with pytest.raises(ValueError, match="copy"):
        ga.from_dlpack(OnAnAccelerator(), copy=False)

    class Stubborn(OnAnAccelerator):
        def __dlpack__(self, **kwargs):
            raise BufferError("no")

    with pytest.raises(BufferError, match="host copy"):
        ga.from_dlpack(Stubborn())


def test_from_dlpack_bad_arguments():
    with pytest.raises(TypeError, match="__dlpack__"):
        ga.from_dlpack([1, 2, 3])
    with pytest.raises(ValueError, match="copy"):
        ga.from_dlpack(np.zeros(2), copy="no")
    with pytest.raises(ValueError):
        ga.from_dlpack(np.zeros(2), device="nope:7")


def test_asarray_of_a_dlpack_producer(device):
    host = np.arange(6.0)

    class Producer:
        def __dlpack_device__(self):
            return host.__dlpack_device__()

        def __dlpack__(self, **kwargs):
            return host.__dlpack__(**kwargs)

    g = ga.asarray(Producer(), device=device)
    np.testing.assert_array_equal(g.get(), host)
    assert g.device == device


# ------------------------------------------------------------------------ PyTorch
@pytest.mark.parametrize("kind", ["device", "host"])
def test_torch_from_dlpack_zero_copy(torch, kind):
    dev = ga.get_device("cpu:0")
    gc.collect()
    baseline = ga.memory_stats(dev)["used_bytes"]
    host = sample("float32")
    a = ga.asarray(host, device=dev, kind=kind)
    for layout in ("whole", "offset", "strided", "transposed", "0-d", "zero-size"):
        v = LAYOUTS[layout](a)
        t = torch.from_dlpack(v)
        expected = LAYOUTS[layout](host)
        assert tuple(t.shape) == expected.shape
        np.testing.assert_array_equal(t.numpy(), expected)
        if expected.size:
            assert t.data_ptr() == v.data_ptr
    t = torch.from_dlpack(a[1])
    storage = a.storage
    a.free()
    gc.collect()
    assert not storage.is_freed  # the tensor keeps the memory
    t.add_(1)
    np.testing.assert_array_equal(t.numpy(), host[1] + 1)
    del t, v
    gc.collect()
    assert storage.is_freed
    assert ga.memory_stats(dev)["used_bytes"] == baseline


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_dtypes_both_ways(torch, dtype):
    host = sample(dtype, (3, 4))
    a = ga.asarray(host, device="cpu:0")
    t = torch.from_dlpack(a)
    np.testing.assert_array_equal(t.numpy(), host)
    g = ga.from_dlpack(t)
    assert g.dtype == host.dtype
    assert g.data_ptr == t.data_ptr() == a.data_ptr
    np.testing.assert_array_equal(g.get(), host)


def test_torch_writes_visible_through_gpuarray(torch):
    a = ga.zeros((2, 3), dtype="float32", device="cpu:0")
    t = torch.from_dlpack(a)
    t[1, 2] = 4.0
    assert a.get()[1, 2] == 4.0
    a[0, 0] = 2.0
    assert float(t[0, 0]) == 2.0


def test_from_dlpack_torch_tensor(torch, device):
    t = torch.arange(12, dtype=torch.float64).reshape(3, 4)[:, 1::2]
    g = ga.from_dlpack(t)
    assert g.device == ga.get_device("cpu:0") and g.kind == "host"
    assert g.data_ptr == t.data_ptr()
    assert g.strides == (32, 16)
    np.testing.assert_array_equal(g.get(), t.numpy())
    g[0, 0] = -5.0
    assert float(t[0, 0]) == -5.0
    c = ga.from_dlpack(t, copy=True)
    assert c.data_ptr != t.data_ptr()
    np.testing.assert_array_equal(c.get(), t.numpy())
    on = ga.asarray(t, device=device)
    assert on.device == device
    np.testing.assert_array_equal(on.get(), t.numpy())


def test_from_dlpack_torch_keeps_tensor_memory(torch):
    t = torch.arange(1000, dtype=torch.int64)
    g = ga.from_dlpack(t[10:])
    del t
    gc.collect()
    np.testing.assert_array_equal(g.get(), np.arange(10, 1000))
    g.free()


def test_torch_round_trip_shares_memory(torch):
    a = ga.arange(10.0, device="cpu:0")
    b = ga.from_dlpack(torch.from_dlpack(a[3:]))
    assert ga.shares_memory(a, b)
    assert b.data_ptr == a.data_ptr + 24
    a.free()
    np.testing.assert_array_equal(b.get(), np.arange(3.0, 10.0))


def test_torch_deleter_from_another_thread(torch):
    dev = ga.get_device("cpu:0")
    gc.collect()
    baseline = ga.memory_stats(dev)["used_bytes"]
    a = ga.ones(4096, device=dev)
    box = [torch.from_dlpack(a[i::4]) for i in range(4)]
    storage = a.storage
    a.free()
    assert storage.refcount == 4
    t = threading.Thread(target=box.clear)
    t.start()
    t.join()
    gc.collect()
    assert storage.is_freed
    assert ga.memory_stats(dev)["used_bytes"] == baseline


def test_numpy_deleter_from_another_thread():
    dev = ga.get_device("cpu:0")
    gc.collect()
    baseline = ga.memory_stats(dev)["used_bytes"]
    a = ga.ones(4096, device=dev)
    box = [np.from_dlpack(a), np.from_dlpack(a[::2])]
    a.free()
    t = threading.Thread(target=box.clear)
    t.start()
    t.join()
    assert ga.memory_stats(dev)["used_bytes"] == baseline


def test_to_device_refuses_a_dtype_the_target_lacks(device):
    """Regression: transfer.to_device moved float16 to a device without half arithmetic."""
    a = ga.asarray(np.ones(3, dtype=np.float16), device="cpu:0")
    if device.supports("float16"):
        np.testing.assert_array_equal(a.to_device(device).get(), np.ones(3))
    else:
        with pytest.raises(ga.UnsupportedDTypeError, match="float16"):
            a.to_device(device)


# ------------------------------------------------------------------------ CUDA Array Interface
# The dict logic runs anywhere; NumPy's __array_interface__ (the same format) is the oracle.
from gpuarrays._array import cai  # noqa: E402


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", ["float32", "complex128", "bool", "int16"])
def test_cai_build_matches_numpy_interface(layout, dtype):
    h = LAYOUTS[layout](sample(dtype))
    ref = h.__array_interface__
    d = cai.build(address(h), h.shape, h.strides, h.dtype, readonly=False)
    assert d["version"] == 3
    assert d["shape"] == ref["shape"]
    assert d["typestr"] == ref["typestr"]
    assert d["descr"] == ref["descr"]
    assert d["strides"] == ref["strides"]  # None exactly when C-contiguous
    assert d["data"] == ((address(h) if h.size else 0), False)
    assert d["stream"] is None


def test_cai_build_structured_read_only_and_stream():
    dt = np.dtype([("x", "f4"), ("y", "i2")])
    d = cai.build(4096, (3,), (dt.itemsize,), dt, readonly=True, stream=2)
    assert d["typestr"] == f"|V{dt.itemsize}"
    assert np.dtype(d["descr"]) == dt
    assert d["data"] == (4096, True)
    assert d["stream"] == 2
    with pytest.raises(ValueError, match="stream"):
        cai.build(4096, (3,), (8,), "f8", stream=0)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_cai_parse_round_trip(layout):
    h = LAYOUTS[layout](sample("float64"))
    for iface in (h.__array_interface__,
                  cai.build(address(h), h.shape, h.strides, h.dtype, readonly=True, stream=7)):
        d = cai.parse(dict(iface))
        assert d.shape == h.shape and d.dtype == h.dtype
        if h.size > 1:
            assert d.strides == h.strides
        if h.size:
            assert d.ptr == address(h)
            assert (d.ptr + d.lo, d.ptr + d.hi) == np.lib.array_utils.byte_bounds(h)
    structured = cai.build(64, (2,), (6,), np.dtype([("a", "u2"), ("b", "f4")]))
    assert cai.parse(structured).dtype == np.dtype([("a", "u2"), ("b", "f4")])
    assert cai.parse(cai.build(64, (2,), (8,), "f8", readonly=True, stream=5)).stream == 5
    assert cai.parse(cai.build(64, (2,), (8,), "f8", readonly=True)).readonly


@pytest.mark.parametrize("change, error", [
    ({"mask": object()}, ValueError),
    ({"version": 9}, ValueError),
    ({"stream": 0}, ValueError),
    ({"stream": "s"}, TypeError),
    ({"shape": (2, -1)}, ValueError),
    ({"shape": "x"}, TypeError),
    ({"strides": (8,)}, ValueError),
    ({"data": 64}, TypeError),
    ({"data": (0, False)}, ValueError),
    ({"typestr": "O?"}, TypeError),
])
def test_cai_parse_rejects(change, error):
    iface = cai.build(64, (2, 3), (24, 8), "f8")
    iface.update(change)
    with pytest.raises(error):
        cai.parse(iface)
    with pytest.raises(TypeError):
        cai.parse([("shape", (2,))])
    with pytest.raises(ValueError, match="typestr"):
        cai.parse({"shape": (2,), "data": (64, False)})


def test_cai_needs_cuda(device):
    """Without CUDA: no interface for our arrays, and imports say why."""
    a = ga.arange(3.0, device=device)
    if device.backend != "cuda":
        with pytest.raises(AttributeError, match="CUDA"):
            cai.interface(a)

    class Fake:
        __cuda_array_interface__ = cai.build(64, (2,), (8,), "f8")

    if not [d for d in ga.devices() if d.backend == "cuda"]:
        with pytest.raises(ValueError, match="no CUDA device"):
            cai.import_interface(Fake())
        with pytest.raises(ValueError, match="CUDA"):
            ga.asarray(Fake())
