"""Errors: the hierarchy, unsupported dtypes, and bad input of every kind,
which must raise the documented class and leave memory accounting untouched."""

from __future__ import annotations

import contextlib
import gc

import numpy as np
import pytest
from strategies import pair, same_values

import gpuarrays as ga

HEADER = ("GPUArray only supports element types stored inline "
          "(numbers, bool, or structured types made of them).")


# the hierarchy ------------------------------------------------------------------------------
@pytest.mark.parametrize("cls,builtin", [
    (ga.FreedArrayError, RuntimeError), (ga.DeviceResetError, ga.FreedArrayError),
    (ga.OutOfMemoryError, MemoryError), (ga.UnsupportedDTypeError, TypeError),
    (ga.CacheInUseError, RuntimeError), (ga.BackendError, RuntimeError),
])
def test_hierarchy(cls, builtin):
    assert issubclass(cls, ga.GPUArraysError)
    assert issubclass(cls, builtin)
    assert issubclass(ga.GPUArraysError, Exception)
    assert cls.__module__.startswith("gpuarrays")


def test_device_reset_error_is_a_runtime_error():
    assert issubclass(ga.DeviceResetError, RuntimeError)
    assert not issubclass(ga.FreedArrayError, ga.DeviceResetError)
    assert not issubclass(ga.GPUArraysError, (RuntimeError, TypeError, MemoryError))
    assert issubclass(ga.GPUArraysWarning, Warning)


def test_backend_error_message_names_call_and_code():
    e = ga.BackendError("clSVMAlloc", -61, "CL_INVALID_BUFFER_SIZE")
    assert "clSVMAlloc" in str(e) and "-61" in str(e) and "CL_INVALID_BUFFER_SIZE" in str(e)
    assert isinstance(e, RuntimeError) and isinstance(e, ga.GPUArraysError)


def test_gpuarray_has_no_public_constructor():
    for args in [(), ((3,),), ((3,), np.float32)]:
        with pytest.raises(TypeError) as info:
            ga.GPUArray(*args)
        msg = str(info.value)
        assert "ga.empty" in msg and "ga.asarray" in msg


# unsupported dtypes --------------------------------------------------------------------------
def test_unsupported_dtype_message_spec_example(device):
    dt = np.dtype([("x", "f4"), ("name", "O")])
    expected = (
        f"{HEADER}\n"
        "  dtype([('x', '<f4'), ('name', 'O')]) is a structured type with an unsupported field:\n"
        "    field 'name': object holds references to Python objects"
    )
    with pytest.raises(ga.UnsupportedDTypeError) as info:
        ga.check_dtype(dt)
    assert str(info.value) == expected
    with pytest.raises(ga.UnsupportedDTypeError) as info:
        ga.empty(3, dt, device=device)
    assert str(info.value) == expected


def test_unsupported_dtype_message_nested(device):
    dt = np.dtype([("a", "i4"), ("inner", [("y", "f4"), ("s", "U3")])])
    with pytest.raises(ga.UnsupportedDTypeError) as info:
        ga.zeros(2, dt, device=device)
    lines = str(info.value).split("\n")
    assert lines[0] == HEADER
    assert lines[1] == (f"  {dt!r} is a structured type with an unsupported field:")
    assert lines[2] == (f"    field 'inner': {dt.fields['inner'][0]!r} is a structured type "
                        "with an unsupported field:")
    assert lines[3].startswith("      field 's': ")
    assert "unicode" in lines[3] or "string" in lines[3]
    assert len(lines) == 4
    deeper = np.dtype([("p", [("q", [("t", "M8[s]")])])])
    with pytest.raises(ga.UnsupportedDTypeError) as info:
        ga.check_dtype(deeper)
    lines = str(info.value).split("\n")
    assert [len(line) - len(line.lstrip()) for line in lines] == [0, 2, 4, 6, 8]
    assert lines[-1].lstrip().startswith("field 't': ") and "datetime64" in lines[-1]


@pytest.mark.parametrize("dtype,words", [
    (object, "object"), ("U4", "string"), ("S3", "string"), ("M8[s]", "datetime64"),
    ("m8[ms]", "timedelta64"), ("V8", "void"), (np.dtype([("x", ("O", 2))]), "object"),
    (np.dtype([("ok", "f8"), ("when", "M8[D]")]), "datetime64"),
])
def test_unsupported_dtypes_everywhere(device, dtype, words):
    before = ga.memory_stats(device)["used_bytes"]
    calls = [
        lambda: ga.check_dtype(dtype), lambda: ga.check_dtype(dtype, device),
        lambda: ga.empty(2, dtype, device=device), lambda: ga.zeros(2, dtype, device=device),
        lambda: ga.ones(2, dtype, device=device), lambda: ga.asarray([], dtype=dtype, device=device),
        lambda: ga.zeros(3, "u1", device=device).view(dtype),
        lambda: ga.zeros(3, "u1", device=device).astype(dtype),
        lambda: ga.empty_like(ga.zeros(1, device=device), dtype=dtype),
    ]
    if np.dtype(dtype).kind in "OUS":
        host = np.array(["a", "b"], dtype=dtype) if np.dtype(dtype).kind != "O" else \
            np.array([None, 1], dtype=object)
        calls.append(lambda: ga.asarray(host, device=device))
    for call in calls:
        with pytest.raises(ga.UnsupportedDTypeError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith(HEADER)
        assert words in msg
        assert isinstance(info.value, TypeError)
    del info
    gc.collect()
    assert ga.memory_stats(device)["used_bytes"] == before
    assert not device.supports(dtype)


def test_check_dtype_returns_normalised_dtype(device):
    assert ga.check_dtype("f4", device) == np.dtype(np.float32)
    assert isinstance(ga.check_dtype(int), np.dtype) and ga.check_dtype(int) == np.dtype(int)
    assert ga.check_dtype(np.int16) == np.dtype("int16")
    st = [("x", "i4"), ("y", "f4", (2,))]
    assert ga.check_dtype(st, device) == np.dtype(st)
    assert ga.check_dtype(np.dtype([("p", [("q", "u1")])])).names == ("p",)
    with pytest.raises(TypeError):
        ga.check_dtype("not a dtype at all")
    with pytest.raises(ValueError):
        ga.check_dtype("f4", "nope:0")
    with pytest.raises(ga.UnsupportedDTypeError, match="sub-array"):
        ga.check_dtype(np.dtype(("f4", (2,))))


# bad input leaves memory accounting untouched -------------------------------------------------
@contextlib.contextmanager
def untouched(device, *arrays):
    """The block raises; used bytes, refcounts and values stay as they were."""
    gc.collect()
    stats = ga.memory_stats(device)
    refcounts = [a.storage.refcount for a in arrays]
    contents = [a.get() for a in arrays]
    yield
    gc.collect()
    after = ga.memory_stats(device)
    assert after["used_bytes"] == stats["used_bytes"]
    assert after["reserved_bytes"] <= stats["reserved_bytes"] + 4096
    assert [a.storage.refcount for a in arrays] == refcounts
    for a, c in zip(arrays, contents, strict=True):
        same_values(a.get(), c)
    probe = ga.full(7, 1.0, device=device)  # the pool still works
    assert probe.get().tolist() == [1.0] * 7


def expect(exc, device, fn, *arrays, match=None):
    with untouched(device, *arrays):
        with pytest.raises(exc, match=match) as info:
            fn()
        del info


@pytest.mark.parametrize("shape", [-1, (2, -3), (-1,), [4, -2]])
def test_negative_shape_is_value_error(device, shape):
    for fn in (ga.empty, ga.zeros, ga.ones):
        expect(ValueError, device, lambda fn=fn: fn(shape, device=device), match="negative")
    expect(ValueError, device, lambda: ga.full(shape, 1, device=device))


@pytest.mark.parametrize("shape", [2.0, (2, 3.0), (2.5,), "3", (None,), ((2,),), [1, [2]]])
def test_non_integer_shape_is_type_error(device, shape):
    for fn in (ga.empty, ga.zeros, ga.ones):
        expect(TypeError, device, lambda fn=fn: fn(shape, device=device))


def test_bad_reshape(device):
    n, g = pair((4, 6), "f4", device)
    for shape in [(5, 5), (7, -1), (-1, -1), (25,), (0,), (4, 6.0), (4.0, 6)]:
        exc = TypeError if any(type(x) is float for x in shape) else ValueError
        with pytest.raises(exc):
            n.reshape(shape)
        expect(exc, device, lambda shape=shape: g.reshape(shape), g)
    expect(ValueError, device, lambda: g.T.reshape(24, copy=False), g)
    with pytest.raises(ValueError) as info:
        g.T.reshape(24, copy=False)
    assert "copy" in str(info.value)


def test_bad_view(device):
    n, g = pair((4, 6), "i2", device)
    cases = [(g.T, "i4"), (g[:, ::2], "i8"), (g[:, :3], "i4"), (g[1, 2], "i4"), (g, "V7")]
    for arr, target in cases:
        exc = ga.UnsupportedDTypeError if target == "V7" else ValueError
        expect(exc, device, lambda arr=arr, target=target: arr.view(target), g)
    with pytest.raises(ValueError) as info:
        g[:, :3].view("i4")
    msg = str(info.value)
    assert "int16" in msg and "int32" in msg  # names the dtypes involved


def test_bad_indices(device):
    n, g = pair((3, 4), "i4", device)
    cases = [(3,), (-4,), (0, 4), (0, -5), (1, 2, 0), (0, 0, 0), (Ellipsis, 0, 0, 0),
             (Ellipsis, Ellipsis), (np.array([0, 3]),), (np.array([True, False]),),
             (slice(None), np.array([4])), (np.array([[True] * 4] * 2),)]
    for key in cases:
        with pytest.raises(IndexError):
            n[key]
        expect(IndexError, device, lambda key=key: g[key], g)
        expect(IndexError, device, lambda key=key: g.__setitem__(key, 1), g)
    with pytest.raises(IndexError) as info:
        g[5]
    assert "5" in str(info.value)
    with pytest.raises(IndexError, match="too many indices"):
        g[0, 0, 0]
    z = ga.zeros((), device=device)
    expect(IndexError, device, lambda: z[0], z)
    e = ga.zeros(0, device=device)
    expect(IndexError, device, lambda: e[0], e)


def test_bad_index_types(device):
    n, g = pair((3, 4), "i4", device)
    for key in ["a", 1.5, (0, 1.0), {0}, object()]:
        with pytest.raises(IndexError):
            n[key]
        expect((IndexError, TypeError), device, lambda key=key: g[key], g)


def test_bad_transpose_axes(device):
    n, g = pair((2, 3, 4), "f8", device)
    for axes in [(0, 0, 1), (0, 1), (0, 1, 3), (0, 1, 2, 3), (-4, 0, 1)]:
        with pytest.raises((ValueError, np.exceptions.AxisError)):
            n.transpose(axes)
        expect(ValueError, device, lambda axes=axes: g.transpose(axes), g)
    expect(ValueError, device, lambda: g.transpose(1, 1, 0), g)
    expect(ValueError, device, lambda: g.swapaxes(0, 3), g)
    expect(ValueError, device, lambda: ga.moveaxis(g, 0, 5), g)
    expect(ValueError, device, lambda: ga.moveaxis(g, [0, 0], [1, 2]), g)
    expect(ValueError, device, lambda: ga.expand_dims(g, 5), g)
    expect(ValueError, device, lambda: g.squeeze(1), g)
    expect(ValueError, device, lambda: ga.zeros(3, device=device).mT)


def test_copyto_shape_mismatch(device):
    n, g = pair((3, 4), "f4", device)
    src = ga.ones((2, 4), "f4", device=device)
    expect(ValueError, device, lambda: ga.copyto(g, src), g, src)
    expect(ValueError, device, lambda: ga.copyto(g, np.ones((4, 3))), g)
    expect(ValueError, device, lambda: ga.copyto(g[:, :2], g[0]), g)
    expect(ValueError, device, lambda: g.__setitem__(slice(None), np.ones(5)), g)
    with pytest.raises(ValueError) as info:
        ga.copyto(g, src)
    assert "(2, 4)" in str(info.value) and "(3, 4)" in str(info.value)
    expect(TypeError, device, lambda: ga.copyto(n, g), g)


def test_unknown_kind(device):
    for kind in ["nonsense", "Device", "", "pinned"]:
        for fn in (lambda kind=kind: ga.empty(4, device=device, kind=kind),
                   lambda kind=kind: ga.zeros(4, device=device, kind=kind),
                   lambda kind=kind: ga.asarray([1], device=device, kind=kind),
                   lambda kind=kind: ga.empty((0,), device=device, kind=kind)):
            expect(ValueError, device, fn)
        with pytest.raises(ValueError) as info:
            ga.empty(4, device=device, kind=kind)
        assert repr(kind) in str(info.value) or kind in str(info.value)
    a = ga.zeros(4, device=device)
    expect(ValueError, device, lambda: a.to_device(device, kind="nonsense"), a)
    expect(ValueError, device, lambda: ga.zeros_like(a, kind="nonsense"), a)


def test_writing_to_read_only_views(device):
    n, g = pair((3, 4), "i8", device)
    for ro in [ga.broadcast_to(g, (2, 3, 4)), g.diagonal(), ga.broadcast_to(g[0], (3, 4)).T,
               g.diagonal()[::-1]]:
        assert not ro.flags.writeable
        expect(ValueError, device, lambda ro=ro: ro.__setitem__(..., 1), g)
        expect(ValueError, device, lambda ro=ro: ro.__setitem__(0, 1), g)
        expect(ValueError, device, lambda ro=ro: ro.fill(1), g)
        expect(ValueError, device, lambda ro=ro: ga.copyto(ro, 1), g)
        expect(ValueError, device, lambda ro=ro: ro.__setitem__(np.array([0]), 1), g)
        with pytest.raises(ValueError, match="read-only"):
            ro[...] = 0
    ro = g.diagonal()
    c = ro.copy()  # copies of read-only views are writeable
    assert c.flags.writeable
    c[0] = 5


def test_bad_values_for_writes(device):
    n, g = pair((3,), "f8", device)
    expect(ValueError, device, lambda: g.__setitem__(..., "abc"), g)
    expect((TypeError, ValueError), device, lambda: g.__setitem__(..., object()), g)
    expect(ValueError, device, lambda: g.__setitem__(..., [1, 2]), g)
    m = np.zeros(3)
    m.fill(None)  # NumPy converts None to NaN for floats; so do we
    g.fill(None)
    same_values(g.get(), m)


def test_bad_device_arguments(device):
    expect(ValueError, device, lambda: ga.empty(2, device="nope:0"))
    expect(TypeError, device, lambda: ga.empty(2, device=1.5))
    expect(ValueError, device, lambda: ga.zeros(2, device="cpu:5"))
    a = ga.zeros(2, device=device)
    expect(ValueError, device, lambda: a.to_device("gpu:0"), a)
    expect(TypeError, device, lambda: a.to_device(0.5), a)


def test_bad_dtype_arguments(device):
    expect(TypeError, device, lambda: ga.empty(2, "float7", device=device))
    expect(TypeError, device, lambda: ga.zeros(2, "not-a-dtype", device=device))
    a = ga.zeros(2, device=device)
    expect(TypeError, device, lambda: a.astype("float7"), a)
    expect(TypeError, device, lambda: a.view("float7"), a)


def test_astype_conversion_error_leaves_nothing(device):
    s = ga.zeros(3, [("x", "i4"), ("y", "f4")], device=device)
    # structured -> number has no meaning: NumPy refuses it, so must we
    with pytest.raises((TypeError, ValueError)):
        np.zeros(3, [("x", "i4"), ("y", "f4")]).astype("f4")
    expect((TypeError, ValueError), device, lambda: s.astype("f4"), s)


def test_misc_argument_errors(device):
    a = ga.zeros((2, 3), device=device)
    expect(ValueError, device, lambda: a.reshape(6, order="Q"), a)
    expect(ValueError, device, lambda: a.item(), a)
    expect(ValueError, device, lambda: bool(a), a)
    expect(TypeError, device, lambda: len(ga.zeros((), device=device)), a)
    expect(ValueError, device, lambda: a.get(out=np.empty((3, 2))), a)
    expect(TypeError, device, lambda: a.get(out=[1, 2]), a)
    expect(ValueError, device, lambda: ga.broadcast_to(a, (3, 3)), a)
    expect(TypeError, device, lambda: ga.broadcast_to(np.zeros(3), (3, 3)), a)
    expect(TypeError, device, lambda: ga.reshape([1, 2], (2,)), a)
    expect(TypeError, device, lambda: ga.moveaxis(np.zeros(3), 0, 0), a)
    expect(TypeError, device, lambda: ga.may_share_memory(a, [1]), a)
    expect(TypeError, device, lambda: ga.to_numpy([1, 2]), a)
