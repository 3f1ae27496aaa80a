"""Storage and release: handles, local and forced frees, GC, freed-array errors,
storage attributes and memory-overlap questions, on every device and kind."""

from __future__ import annotations

import gc
import pickle
import weakref

import numpy as np
import pytest
from strategies import pair, same_values

import gpuarrays as ga

FREED = "Attempt to use a freed array"


# local free -----------------------------------------------------------------------------------
def test_free_is_local(device, used):
    base = used()
    n, g = pair((4, 4), "f4", device)
    v = g[1:]
    w = g.T
    st = g.storage
    assert st.refcount == 3
    v.free()
    assert v.is_freed and not g.is_freed and not w.is_freed
    assert st.refcount == 2 and not st.is_freed
    same_values(g.get(), n)
    same_values(w.get(), n.T)
    with pytest.raises(ga.FreedArrayError, match=FREED):
        v.get()
    g.free()
    assert st.refcount == 1 and not st.is_freed
    same_values(w.get(), n.T)  # the last sharer keeps the memory alive
    assert used() > base
    w.free()
    assert st.is_freed and st.refcount == 0
    assert used() == base


def test_free_is_idempotent(device, used):
    base = used()
    g = ga.zeros((8,), device=device)
    v = g[2:]
    g.free()
    g.free()
    g.free()
    assert g.storage.refcount == 1  # only g's own handle went, once
    assert v.get().tolist() == [0.0] * 6
    ga.unsafe_free(g)
    assert g.storage.refcount == 1
    v.free()
    v.free()
    assert used() == base
    del g, v
    assert used() == base


def test_unsafe_free(device, used):
    base = used()
    g = ga.ones(16, "i4", device=device)
    v = g[::2]
    ga.unsafe_free(g)
    assert g.is_freed and not v.is_freed
    assert v.get().tolist() == [1] * 8
    ga.unsafe_free(v)
    assert used() == base
    h = ga.ones(16, "i4", device=device)
    hv = h[1:]
    ga.unsafe_free(h, force=True)
    assert hv.is_freed
    with pytest.raises(ga.FreedArrayError, match="forced free"):
        hv.get()
    with pytest.raises(TypeError):
        ga.unsafe_free(np.zeros(3))
    assert used() == base


def test_free_of_a_view_keeps_parent(device):
    n, g = pair((3, 5), "i8", device)
    for v in [g[1], g.T, g.reshape(15), g.view("u1"), ga.broadcast_to(g, (2, 3, 5))]:
        v.free()
        assert v.is_freed
    assert g.storage.refcount == 1
    same_values(g.get(), n)


# forced free -----------------------------------------------------------------------------------
def test_forced_free_invalidates_every_sharer(device, used):
    base = used()
    n, g = pair((6, 2), "f8", device)
    views = [g[1:], g.T, g.view("u1"), g[2, 1], ga.broadcast_to(g, (3, 6, 2))]
    st = g.storage
    views[1].free(force=True)
    assert st.is_freed and st.refcount == 0
    assert used() == base  # memory is back now, not when the arrays die
    for a in [g, *views]:
        assert a.is_freed
        with pytest.raises(ga.FreedArrayError) as info:
            a.get()
        msg = str(info.value)
        assert msg.startswith(FREED)
        assert "forced free" in msg
    # the memory is reused; the dead arrays' handles never give it back twice
    fresh = [ga.full((6, 2), 3.0, device=device) for _ in range(4)]
    del g, views, a
    gc.collect()
    for f in fresh:
        assert f.get().tolist() == [[3.0, 3.0]] * 6
    assert used() == base + sum(f.storage.block for f in fresh)
    del fresh, f
    assert used() == base


def test_forced_free_after_local_free(device, used):
    base = used()
    g = ga.zeros(10, device=device)
    v = g[1:]
    g.free()
    g.free(force=True)  # an already freed handle can still force the allocation
    assert v.is_freed
    with pytest.raises(ga.FreedArrayError, match="forced free"):
        v[0].item()
    with pytest.raises(ga.FreedArrayError):
        g.get()
    g.free(force=True)  # idempotent
    del g, v
    assert used() == base


def test_forced_free_of_an_unshared_array(device, used):
    base = used()
    a = ga.ones(100, device=device)
    a.free(force=True)
    assert a.is_freed and a.storage.is_freed
    with pytest.raises(ga.FreedArrayError):
        a.get()
    del a
    assert used() == base


# context manager -------------------------------------------------------------------------------
def test_with_releases_handle(device, used):
    base = used()
    with ga.empty((32, 4), device=device) as a:
        assert isinstance(a, ga.GPUArray) and not a.is_freed
        a.fill(1)
        v = a[1:]
    assert a.is_freed and not v.is_freed  # local: a view that escaped stays valid
    assert v.get().sum() == 31 * 4
    del v
    assert used() == base
    with pytest.raises(KeyError):
        with ga.zeros(4, device=device) as b:
            raise KeyError("inside")
    assert b.is_freed
    assert used() == base


# garbage collection -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["device", "host", "unified"])
def test_gc_returns_memory(device, used, kind):
    if kind not in device.kinds:
        pytest.skip(f"{device} has no {kind!r} memory")
    base = used()
    a = ga.zeros((64, 64), "f4", device=device, kind=kind)
    v = a[::2].T
    r = weakref.ref(a)
    assert used() >= base + a.nbytes
    del a
    assert r() is None
    assert used() > base  # v still holds the storage
    del v
    assert used() == base


def test_gc_of_reference_cycles(device, used):
    base = used()

    class Node:
        pass

    for _ in range(3):
        x, y = Node(), Node()
        x.other, y.other = y, x
        x.arr = ga.ones((128,), device=device)
        y.arr = x.arr[::3]
        x.more = [x, ga.zeros(64, "i8", device=device)]
        del x, y
    assert used() == base  # the fixture's used() runs gc.collect()


def test_many_arrays_and_views_return_to_baseline(device, used):
    base = used()
    keep = []
    for i in range(50):
        a = ga.arange(i + 1, device=device)
        keep.append(a[::-1])
        keep.append(a.reshape(1, -1).T)
    del keep[::3]
    del a
    assert used() > base
    keep.clear()
    assert used() == base


# freed arrays: metadata works, every use raises --------------------------------------------------
def _freed_pair(device, how):
    n, g = pair((2, 3), "f4", device)
    if how == "local":
        g.free()
    elif how == "forced":
        g[1:].free(force=True)
    return n, g


@pytest.mark.parametrize("how", ["local", "forced"])
def test_metadata_works_on_freed_arrays(device, how):
    n, g = _freed_pair(device, how)
    assert g.is_freed
    assert g.shape == (2, 3) and g.dtype == np.float32 and g.strides == (12, 4)
    assert g.offset == 0 and g.ndim == 2 and g.size == 6 and g.itemsize == 4 and g.nbytes == 24
    flags = g.flags
    assert flags.c_contiguous and not flags.f_contiguous and flags.writeable
    assert g.device == device and g.kind == "device"
    assert isinstance(g.storage, ga.Storage)
    assert g.storage.device == device and g.storage.nbytes == 24
    r = repr(g)
    assert "freed" in r and "(2, 3)" in r and "float32" in r and str(device) in r
    assert "freed" in str(g)
    assert len(g) == 2


USES = {
    "get": lambda g: g.get(),
    "get_out": lambda g: g.get(out=np.empty((2, 3), "f4")),
    "to_numpy": lambda g: ga.to_numpy(g),
    "item": lambda g: g[0, 0].item(),
    "tolist": lambda g: g.tolist(),
    "index": lambda g: g[0],
    "index_int": lambda g: g[0, 1],
    "slice": lambda g: g[1:],
    "step_slice": lambda g: g[::-1],
    "adv_index": lambda g: g[[0, 1]],
    "mask_index": lambda g: g[np.ones((2, 3), bool)],
    "setitem": lambda g: g.__setitem__(0, 1.0),
    "setitem_adv": lambda g: g.__setitem__([0], 1.0),
    "fill": lambda g: g.fill(0),
    "copy": lambda g: g.copy(),
    "astype": lambda g: g.astype("f8"),
    "astype_same": lambda g: g.astype("f4", copy=False),
    "reshape": lambda g: g.reshape(6),
    "reshape_same": lambda g: g.reshape(2, 3),
    "view": lambda g: g.view("i4"),
    "view_bytes": lambda g: g.view("u1"),
    "T": lambda g: g.T,
    "mT": lambda g: g.mT,
    "transpose": lambda g: g.transpose(1, 0),
    "swapaxes": lambda g: g.swapaxes(0, 1),
    "squeeze": lambda g: g.squeeze(),
    "ravel": lambda g: g.ravel(),
    "diagonal": lambda g: g.diagonal(),
    "real": lambda g: g.real,
    "moveaxis": lambda g: ga.moveaxis(g, 0, 1),
    "expand_dims": lambda g: ga.expand_dims(g, 0),
    "broadcast_to": lambda g: ga.broadcast_to(g, (2, 2, 3)),
    "copyto_dst": lambda g: ga.copyto(g, 1.0),
    "copyto_src": lambda g: ga.copyto(ga.zeros((2, 3), "f4", device=g.device), g),
    "assign_src": lambda g: ga.zeros((2, 3), "f4", device=g.device).__setitem__(..., g),
    "to_device": lambda g: g.to_device("cpu", kind="host"),
    "to_device_same": lambda g: g.to_device(g.device),
    "asarray": lambda g: ga.asarray(g),
    "asarray_copy": lambda g: ga.asarray(g, copy=True),
    "iter": lambda g: list(g),
    "pickle": lambda g: pickle.dumps(g),
    "data_ptr": lambda g: g.data_ptr,
    "shares_memory": lambda g: ga.shares_memory(g, g),
    "may_share_memory": lambda g: ga.may_share_memory(g, g),
    "format": lambda g: format(g[0, 0], ".2f"),
}


@pytest.mark.parametrize("how", ["local", "forced"])
@pytest.mark.parametrize("use", sorted(USES))
def test_every_use_of_a_freed_array_raises(device, used, how, use):
    n, g = _freed_pair(device, how)
    before = used()
    with pytest.raises(ga.FreedArrayError) as info:
        USES[use](g)
    assert str(info.value).startswith(FREED)
    if how == "forced":
        assert "forced free" in str(info.value)
    del info  # its traceback's frames hold the arrays the use made
    assert used() == before  # nothing leaked on the way out


@pytest.mark.parametrize("how", ["local", "forced"])
def test_scalar_conversions_of_freed_array_raise(device, how):
    g = ga.ones((1, 1), device=device)
    v = g.reshape(1)
    g.free(force=how == "forced")
    for fn in (float, int, bool, complex, lambda a: a.item()):
        with pytest.raises(ga.FreedArrayError, match=FREED):
            fn(g)
    if how == "local":
        assert v.item() == 1.0


def test_freed_error_hierarchy(device):
    g = ga.zeros(2, device=device)
    g.free()
    with pytest.raises(RuntimeError):  # FreedArrayError is a RuntimeError
        g.get()


def test_host_view_and_array_protocol_of_freed_array(device):
    if "host" not in device.kinds:
        pytest.skip(f"{device} has no host memory")
    g = ga.zeros(3, device=device, kind="host")
    g.free()
    with pytest.raises(ga.FreedArrayError):
        g.host_view()
    with pytest.raises(ga.FreedArrayError):
        np.asarray(g)


# storage attributes ----------------------------------------------------------------------------
def test_storage_attributes(device):
    for kind in device.kinds:
        g = ga.empty((10, 3), "i2", device=device, kind=kind)
        st = g.storage
        assert isinstance(st, ga.Storage)
        assert isinstance(st.ptr, int) and st.ptr != 0
        assert g.data_ptr == st.ptr
        assert st.nbytes == 60
        assert st.device == device and st.kind == kind
        assert st.refcount == 1 and st.is_freed is False and st.owned is True
        v = g[3:, 1]
        assert v.storage is st and st.refcount == 2
        assert v.data_ptr == st.ptr + v.offset == st.ptr + 3 * 6 + 2
        assert st.nbytes == 60  # the allocation, not the view
        del v
        assert st.refcount == 1
        g.free()
        assert st.is_freed and st.refcount == 0
        assert st.ptr != 0 and st.nbytes == 60 and st.device == device  # metadata stays
        assert repr(st)


def test_zero_size_storage(device):
    g = ga.empty((0, 4), device=device)
    st = g.storage
    assert st.nbytes == 0 and st.refcount == 1 and not st.is_freed
    assert g[:, 1:].storage is st
    g.free()


# shares_memory / may_share_memory -----------------------------------------------------------------
def test_shares_memory_exact_vs_bounds(device):
    a = ga.zeros(16, "i4", device=device)
    b = ga.zeros(16, "i4", device=device)
    n = np.zeros(16, "i4")
    cases = [
        (a, a), (a, a[1:]), (a[::2], a[1::2]), (a[:8], a[8:]), (a[:9], a[8:]), (a, b),
        (a[::3], a[1::3]), (a[::4], a[2::2]), (a.view("u1")[1::4], a.view("u1")[::4]),
        (a.reshape(4, 4)[:, 0], a.reshape(4, 4)[:, 1]), (a.reshape(4, 4).T, a[5:6]),
        (a[:0], a), (a[::-1], a[3:5]), (ga.broadcast_to(a[3], (5,)), a[3:4]),
    ]
    oracles = [
        (n, n), (n, n[1:]), (n[::2], n[1::2]), (n[:8], n[8:]), (n[:9], n[8:]), None,
        (n[::3], n[1::3]), (n[::4], n[2::2]), (n.view("u1")[1::4], n.view("u1")[::4]),
        (n.reshape(4, 4)[:, 0], n.reshape(4, 4)[:, 1]), (n.reshape(4, 4).T, n[5:6]),
        (n[:0], n), (n[::-1], n[3:5]), (np.broadcast_to(n[3, ...], (5,)), n[3:4]),
    ]
    for (x, y), oracle in zip(cases, oracles, strict=True):
        if oracle is None:
            assert not ga.shares_memory(x, y) and not ga.may_share_memory(x, y)
            continue
        nx, ny = oracle
        assert ga.shares_memory(x, y) == np.shares_memory(nx, ny), (x.shape, x.strides, x.offset)
        assert ga.may_share_memory(x, y) == np.may_share_memory(nx, ny), (x.offset, y.offset)
        assert ga.shares_memory(y, x) == ga.shares_memory(x, y)
    # the brief's example, explicitly
    assert ga.may_share_memory(a[::2], a[1::2]) and not ga.shares_memory(a[::2], a[1::2])


def test_shares_memory_across_devices_and_copies(device):
    a = ga.zeros(8, device=device)
    for other in ga.devices():
        m = a.to_device(other, kind="host" if "host" in other.kinds else "device")
        assert not ga.shares_memory(a, m) and not ga.may_share_memory(a, m)
    assert not ga.shares_memory(a, a.copy())
    with pytest.raises(TypeError):
        ga.shares_memory(a, np.zeros(8))


def test_shares_memory_of_two_wraps_of_one_range(device):
    a = ga.zeros(8, "f8", device=device)
    w1 = ga.unsafe_wrap(a.data_ptr, (8,), "f8", device=device, kind=a.kind)
    w2 = ga.unsafe_wrap(a.data_ptr + 16, (2,), "f8", device=device, kind=a.kind)
    assert w1.storage is not a.storage
    assert ga.shares_memory(a, w1) and ga.shares_memory(w1, w2)
    assert ga.shares_memory(a[2:4], w2) and not ga.shares_memory(a[4:], w2)
    w1.free()
    w2.free()
