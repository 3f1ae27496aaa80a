"""The compiled creation paths on every device (src/native/core/fill.c; docs/performance.md,
"Creation"): the same arrays, errors and warnings as the general path and NumPy.

``zeros``/``ones``/``full`` and their ``*_like`` fill in one compiled call, with fill
patterns remembered for Python scalars; ``asarray`` of a NumPy array, ``arange``,
``linspace`` and ``eye`` write host data or values generated as NumPy does; on OpenCL
the writes are enqueued without waiting (a small upload from a private copy).  What the
compiled call does not handle goes to the general path (``a[...] = value``), which is the
oracle here beside NumPy.
"""

from __future__ import annotations

import itertools
import threading
import warnings

import numpy as np
import pytest
from strategies import ALL_DTYPES, same_values, supported

import gpuarrays as ga

STRUCT = np.dtype([("x", np.float32), ("y", np.int16)])  # 6 bytes: no platform fill pattern


def general(shape, dtype, value, device, kind="device") -> np.ndarray:
    """The general path's answer: a new array written with ``a[...] = value``."""
    with ga.empty(shape, dtype, device=device, kind=kind) as a:
        a[...] = value
        return a.get()


def test_fills_are_the_general_paths_on_every_dtype_kind_and_shape(device):
    for dt, kind, shape in itertools.product(supported(device, ALL_DTYPES) + [STRUCT],
                                             device.kinds, [(), (0,), (7,), (3, 0, 2), (4, 5)]):
        for fn, value in ((ga.zeros, 0), (ga.ones, 1)):
            got = fn(shape, dt, device=device, kind=kind)
            assert (got.dtype, got.device, got.kind, got.shape) == (dt, device, kind, shape)
            same_values(got.get(), general(shape, dt, value, device, kind))
        if dt.names is None:
            got = ga.full(shape, 3, dt, device=device, kind=kind)
            same_values(got.get(), general(shape, dt, 3, device, kind))


@pytest.mark.parametrize("value", [0.0, -0.0, 1.5, float("nan"), float("inf"), True, False, 1,
                                   -7, 2**62, 2**62 + 1, 1 + 2j, -0.0 + 0j, np.float32(2.5),
                                   np.int8(-3), np.uint64(2**64 - 1)])
def test_full_values_remembered_or_not_give_numpys_bits(device, value):
    """Twice in a row (the second from the remembered pattern), then the neighbours a
    remembered pattern must not be mistaken for (0.0 / -0.0, 2**62 / 2**62 + 1)."""
    for v in (value, value, 0.0, -0.0, value, 2**62 + 1, value):
        dt = ga.full(1, v, device=device).dtype
        expected = np.full(4, v, dtype=dt)
        for _ in range(2):
            same_values(ga.full(4, v, device=device).get(), expected)
            same_values(ga.full_like(ga.empty(4, dt, device=device), v).get(), expected)


def test_like_functions_keep_dtype_device_kind_and_take_overrides(device):
    for kind in device.kinds:
        x = ga.arange(6, device=device, kind=kind).reshape(2, 3)
        for fn, value in ((ga.zeros_like, 0), (ga.ones_like, 1)):
            got = fn(x)
            assert (got.dtype, got.shape, got.device, got.kind) == (x.dtype, x.shape, device, kind)
            same_values(got.get(), np.full((2, 3), value, x.dtype))
        got = ga.full_like(x, 9, dtype=np.int16, shape=(4,), kind="device")
        assert (got.dtype, got.shape, got.kind) == (np.int16, (4,), "device")
        same_values(got.get(), np.full(4, 9, np.int16))


def test_array_like_fill_values_broadcast_as_before(device):
    same_values(ga.full((2, 3), [1, 2, 3], device=device).get(), np.full((2, 3), [1, 2, 3]))
    with pytest.raises(ValueError, match="broadcast"):
        ga.full((), [1], device=device)
    with pytest.raises(ValueError, match="broadcast"):
        ga.full((0,), [1, 2], device=device)


def test_refused_fills_leave_no_memory_behind(device, used):
    before = used()
    with pytest.raises(OverflowError):
        ga.full(3, 300, dtype=np.int8, device=device)
    with pytest.raises(TypeError, match="cannot assign complex"):
        ga.full(3, 1 + 2j, dtype=np.float32, device=device)
    with pytest.raises(ValueError, match="cannot assign float nan"):
        ga.full(3, float("nan"), dtype=np.int64, device=device)
    with pytest.raises(TypeError, match="fill_value"):
        ga.full(3, "abc", device=device)
    assert used() == before


def test_a_fill_that_warns_warns_on_every_call(device):
    """An inexact conversion (float -> float16 overflow, NaN -> int) is never remembered:
    NumPy's warning comes with every call, as on the general path."""
    dt = np.float16 if device.supports(np.float16) else np.float32
    for _ in range(3):
        with pytest.warns(RuntimeWarning, match="overflow"):
            got = ga.full(2, 1e300, dtype=dt, device=device)
        same_values(got.get(), general(2, dt, np.inf, device))


def test_asarray_copies_the_host_data_at_the_call(device):
    """The upload is asynchronous on OpenCL, from a private copy: changing the NumPy array
    after the call changes nothing on the device."""
    for n in (1, 100, 20_000):  # the last one past the staged size: a blocking upload
        h = np.arange(n, dtype=np.float32)
        a = ga.asarray(h, device=device)
        b = ga.array(h, device=device)
        h[:] = -1
        same_values(a.get(), np.arange(n, dtype=np.float32))
        same_values(b.get(), np.arange(n, dtype=np.float32))


def test_asarray_of_any_layout_and_byte_order_is_numpys(device):
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    for host in (base, base[:, ::2], base.T, base.astype(">i4"), base[::-1], base[1:2, 3],
                 np.asarray(5, np.int32), np.zeros((0, 3), np.int32)):
        got = ga.asarray(host, device=device)
        assert got.flags.c_contiguous
        same_values(got.get(), np.array(host, order="C"))
    for dt in supported(device, ALL_DTYPES):
        same_values(ga.asarray(base, dtype=dt, device=device).get(), base.astype(dt))


def test_many_uploads_without_a_synchronize_all_land(device):
    """More asynchronous uploads than the device keeps copies for (the next one blocks
    and lets them go); every array holds its own values."""
    arrays = [ga.asarray(np.full(16, i, np.int64), device=device) for i in range(700)]
    for i, a in enumerate(arrays):
        same_values(a.get(), np.full(16, i, np.int64))
    if device.backend == "opencl":
        assert len(device.impl._state(device.index).kept) <= 256


def test_arange_is_numpys(device):
    for args in [(5,), (0,), (-3,), (2, 11, 3), (10, 0, -3), (5, 5), (2**62, 2**62 + 10, 3),
                 (-(2**63), -(2**63) + 5), (2**63 - 6, 2**63 - 1, 2), (np.int32(3), 10),
                 (0, 2**40, 2**38), (np.uint8(250), 255), (-7, 2**53 - 1, 2**50), (20_000,),
                 (2**53 - 3, 2**53 + 3), (-(2**53) - 2, -(2**53) + 2)]:
        same_values(ga.arange(*args, device=device).get(), np.arange(*args))
    with pytest.raises(ValueError, match="step"):
        ga.arange(0, 5, 0, device=device)
    for args in [(0.5, 3), (1, 2, 0.25), (0, -1, -0.1)]:
        dt = ga.arange(*args, device=device).dtype
        same_values(ga.arange(*args, device=device).get(), np.arange(*args, dtype=dt))
    same_values(ga.arange(1, 9, 2, dtype=np.int16, device=device).get(),
                np.arange(1, 9, 2, dtype=np.int16))


def test_linspace_bits_and_warnings_are_numpys(device):
    values = [0, 1, -1, 0.0, -0.0, 1.5, 0.1, 1 / 3, 1e-310, 5e-324, 3.5e38, 1e300, -1e308,
              float("inf"), float("nan"), 2**62, -(2**63)]
    default = ga.empty(0, device=device).dtype
    floats = [None] + [dt for dt in (np.float64, np.float32) if device.supports(dt)]
    for start, stop, num, endpoint, dt in itertools.product(values, values, (0, 1, 2, 3, 50),
                                                            (True, False), floats):
        with warnings.catch_warnings(record=True) as expected:
            warnings.simplefilter("always")
            ref = np.linspace(start, stop, num, endpoint=endpoint, dtype=np.float64)
            ref = ref.astype(default if dt is None else dt)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = ga.linspace(start, stop, num, endpoint=endpoint, dtype=dt, device=device)
        same_values(got.get(), ref)
        assert sorted(map(str, (w.message for w in seen))) == \
            sorted(map(str, (w.message for w in expected))), (start, stop, num, endpoint, dt)


def test_eye_is_numpys(device):
    for (rows, cols, k), dt in itertools.product(
            [(3, None, 0), (3, 5, 2), (5, 3, -1), (4, 4, 10), (4, 4, -2**70), (0, 3, 0),
             (1, 1, 0), (40, 40, 1), (130, 120, -3)], supported(device, ALL_DTYPES) + [STRUCT]):
        got = ga.eye(rows, cols, k=k, dtype=dt, device=device)
        with np.errstate(all="ignore"):
            k_numpy = max(-rows - 1, min((rows if cols is None else cols) + 1, k))
            same_values(got.get(), np.eye(rows, cols, k_numpy, dtype=dt))


def test_large_creations_are_numpys(device):
    """Past a MiB the cpu writes let the GIL go; on OpenCL past the staged size the uploads
    block and eye runs its kernel."""
    n = 300_000  # 2.4 MB of float64 (float32 where the device lacks it)
    dt = ga.empty(0, device=device).dtype
    host = np.arange(n, dtype=dt)
    same_values(ga.zeros(n, device=device).get(), np.zeros(n, dt))
    same_values(ga.full((3, n), 2.5, device=device).get(), np.full((3, n), 2.5, dt))
    same_values(ga.asarray(host, device=device).get(), host)
    same_values(ga.arange(n, device=device).get(), np.arange(n))
    same_values(ga.linspace(-1, 1, n, device=device).get(), np.linspace(-1, 1, n).astype(dt))
    same_values(ga.eye(600, k=3, device=device).get(), np.eye(600, k=3, dtype=dt))


def test_creation_after_a_device_reset(device):
    """A reset makes the compiled writer stale; the next calls use the new device state."""
    h = np.arange(10.0, dtype=np.float32)
    ga.zeros(3, device=device), ga.asarray(h, device=device)
    ga.device_reset(device)
    same_values(ga.zeros(3, device=device).get(), np.zeros(3))
    same_values(ga.full(3, 2.0, device=device).get(), np.full(3, 2.0))
    same_values(ga.asarray(h, device=device).get(), h)
    same_values(ga.arange(4, device=device).get(), np.arange(4))
    same_values(ga.eye(2, device=device).get(), np.eye(2))


def test_creation_inside_a_cache_scope(device):
    cache = ga.AllocCache()
    for _ in range(3):
        with ga.cached(cache):
            z = ga.zeros(100, device=device)
            a = ga.asarray(np.arange(100.0), device=device)
            same_values(z.get(), np.zeros(100))
            same_values(a.get(), np.arange(100.0))
            z.free(), a.free()
    cache.free()


def test_creation_from_threads(device):
    errors = []

    def work(i: int) -> None:
        try:
            for j in range(200):
                v = i * 1000 + j
                z = ga.full(50, v, dtype=np.int64, device=device)
                a = ga.asarray(np.full(50, v, np.int64), device=device)
                for x in (z, a):
                    same_values(x.get(), np.full(50, v, np.int64))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
