"""Bad input across the public API, on every device.

Each row is one bad call: it must raise the docs/design.md ("Errors") class, its message must
name the bad value, and it must leave the device's memory figures
(``used_bytes``, ``reserved_bytes``) exactly as they were -- bad input never
leaves a pool, cache or storage inconsistent.
"""

from __future__ import annotations

import gc
import os
import warnings
from unittest import mock

import _profiles
import numpy as np
import pytest

import gpuarrays as ga


class Env:
    """The arrays every row may use: a (3,) float32, a (3, 4) int32, a host array."""

    def __init__(self, device) -> None:
        self.dev = device
        self.a = ga.arange(3, dtype=np.float32, device=device)
        self.m = ga.arange(12, dtype=np.int32, device=device).reshape(3, 4)

    def free(self) -> None:
        self.a.free()
        self.m.free()


def _enter(cm):
    with cm:
        pass



def _strict(view):
    """``view(a)`` as a GPU refuses it: a CPU device's "device" memory is host memory, which
    NumPy reads in place unless GPUARRAYS_STRICT_HOST=1 (tests/test_numpy_conversion.py)."""
    def strict(a):
        with mock.patch.dict(os.environ, {"GPUARRAYS_STRICT_HOST": "1"}):
            return view(a)
    return strict


# (id, call, error class, text the message must contain)
CASES = [
    ("empty-negative", lambda e: ga.empty(-1, device=e.dev), ValueError, "-1"),
    ("empty-negative-dim", lambda e: ga.empty((2, -3), device=e.dev), ValueError, "(2, -3)"),
    ("empty-float-shape", lambda e: ga.empty(2.5, device=e.dev), TypeError, "2.5"),
    ("empty-object-dtype", lambda e: ga.empty(3, dtype=object, device=e.dev),
     ga.UnsupportedDTypeError, "object"),
    ("empty-unicode-dtype", lambda e: ga.empty(3, dtype="U4", device=e.dev),
     ga.UnsupportedDTypeError, "<U4"),
    ("empty-unknown-dtype", lambda e: ga.empty(3, dtype="notadtype", device=e.dev), TypeError,
     "notadtype"),
    ("empty-bad-kind", lambda e: ga.empty(3, kind="pinned", device=e.dev), ValueError, "pinned"),
    ("empty-unknown-device", lambda e: ga.empty(3, device="nosuch:0"), ValueError, "nosuch:0"),
    ("empty-missing-device", lambda e: ga.empty(3, device=f"{e.dev.backend}:9"), ValueError,
     ":9"),
    ("empty-device-type", lambda e: ga.empty(3, device=3.5), TypeError, "3.5"),
    ("full-string-value", lambda e: ga.full(3, "abc", dtype=np.float32, device=e.dev),
     ValueError, "abc"),
    ("index-out-of-range", lambda e: e.a[5], IndexError, "5"),
    ("index-negative-out-of-range", lambda e: e.a[-4], IndexError, "-4"),
    ("index-too-many", lambda e: e.a[0, 0], IndexError, "1-dimensional"),
    ("slice-step-zero", lambda e: e.a[::0], ValueError, "zero"),
    ("reshape-wrong-size", lambda e: e.a.reshape(4), ValueError, "(4,)"),
    ("reshape-two-unknown", lambda e: e.m.reshape(-1, -1), ValueError, "unknown dimension"),
    ("reshape-copy-false", lambda e: e.m.T.reshape(12, copy=False), ValueError, "12"),
    ("reshape-bad-order", lambda e: e.m.reshape(12, order="Q"), ValueError, "'Q'"),
    ("view-indivisible", lambda e: e.a.view(np.int64), ValueError, "int64"),
    ("view-object", lambda e: e.a.view(object), ga.UnsupportedDTypeError, "object"),
    ("astype-datetime", lambda e: e.a.astype("M8[s]"), ga.UnsupportedDTypeError, "datetime64"),
    ("setitem-broadcast", lambda e: e.a.__setitem__(Ellipsis, np.ones(4)), ValueError, "(4,)"),
    ("setitem-string", lambda e: e.a.__setitem__(0, "abc"), ValueError, "abc"),
    ("fill-string", lambda e: e.a.fill("x"), ValueError, "'x'"),
    ("write-read-only-view", lambda e: ga.broadcast_to(e.a, (2, 3)).__setitem__(0, 1),
     ValueError, "read-only"),
    ("broadcast-to-bad-shape", lambda e: ga.broadcast_to(e.a, (2,)), ValueError, "(2,)"),
    ("get-out-shape", lambda e: e.a.get(out=np.empty(4, np.float32)), ValueError, "(4,)"),
    ("get-out-type", lambda e: e.a.get(out=[1, 2, 3]), TypeError, "list"),
    ("copyto-numpy-destination", lambda e: ga.copyto(np.ones(3), e.a), TypeError, "ndarray"),
    ("copyto-shape", lambda e: ga.copyto(e.a, e.m), ValueError, "(3, 4)"),
    ("swapaxes-out-of-range", lambda e: e.m.swapaxes(0, 5), ValueError, "5"),
    ("moveaxis-out-of-range", lambda e: ga.moveaxis(e.m, 0, 3), ValueError, "3"),
    ("expand-dims-out-of-range", lambda e: ga.expand_dims(e.a, 5), ValueError, "5"),
    ("mT-of-1d", lambda e: e.a.mT, ValueError, "(3,)"),
    ("bool-of-3", lambda e: bool(e.a), ValueError, "(3,)"),
    ("item-of-3", lambda e: e.a.item(), ValueError, "(3,)"),
    ("write-imag-of-real", lambda e: e.a.imag.fill(1), ValueError, "read-only"),
    ("operand-list", lambda e: e.a * [1, 2, 3], TypeError, "list"),
    ("host-view-of-device-memory", lambda e: _strict(type(e.a).host_view)(e.a), TypeError,
     "'device'"),
    ("np-asarray-of-device-memory", lambda e: _strict(np.asarray)(e.a), TypeError, "'device'"),
    ("asarray-ragged", lambda e: ga.asarray([[1, 2], [3]], device=e.dev), ValueError,
     "inhomogeneous"),
    ("asarray-copy-false", lambda e: ga.asarray(np.ones(3), device=e.dev, copy=False),
     ValueError, "ndarray"),
    ("asarray-bad-kind", lambda e: ga.asarray([1, 2], device=e.dev, kind="pinned"), ValueError,
     "pinned"),
    ("to-device-bad-kind", lambda e: e.a.to_device(e.dev, kind="pinned"), ValueError, "pinned"),
    ("to-numpy-of-numpy", lambda e: ga.to_numpy(np.ones(3)), TypeError, "ndarray"),
    ("empty-like-of-numpy", lambda e: ga.empty_like(np.ones(3)), TypeError, "ndarray"),
    ("unsafe-free-of-numpy", lambda e: ga.unsafe_free(np.ones(3)), TypeError, "ndarray"),
    ("shares-memory-with-numpy", lambda e: ga.shares_memory(e.a, np.ones(3)), TypeError,
     "ndarray"),
    ("limit-unparsable", lambda e: ga.set_memory_limit("lots", e.dev), ValueError, "'lots'"),
    ("limit-over-100-percent", lambda e: ga.set_memory_limit("150%", e.dev), ValueError,
     "150%"),
    ("parse-size-unit", lambda e: ga.parse_size("12 parsecs"), ValueError, "12 parsecs"),
    ("parse-size-negative", lambda e: ga.parse_size(-5), ValueError, "-5"),
    ("parse-size-none", lambda e: ga.parse_size(None), TypeError, "None"),
    ("wrap-null-nonzero", lambda e: ga.unsafe_wrap(0, (4,), np.float32, device=e.dev,
                                                   kind="device"), ValueError, "NULL"),
    ("wrap-own-and-owner", lambda e: ga.unsafe_wrap(4096, (4,), np.float32, device=e.dev,
                                                    own=True, owner=object()),
     ValueError, "owner"),
    ("wrap-string", lambda e: ga.unsafe_wrap("abc", device=e.dev), TypeError, "str"),
    ("wrap-negative-address", lambda e: ga.unsafe_wrap(-16, (4,), np.float32, device=e.dev,
                                                       kind="host"), ValueError, "-16"),
    ("wrap-bad-kind", lambda e: ga.unsafe_wrap(np.ones(3), device=e.dev, kind="pinned"),
     ValueError, "pinned"),
    ("pointer-info-string", lambda e: ga.pointer_info("0x10"), TypeError, "str"),
    ("cached-not-a-cache", lambda e: _enter(ga.cached("notacache")), TypeError, "notacache"),
    ("use-device-int", lambda e: _enter(ga.use_device(5)), TypeError, "5"),
    ("memory-stats-unknown-device", lambda e: ga.memory_stats("bogus"), ValueError, "bogus"),
    ("trim-not-a-device", lambda e: ga.trim(device=object()), TypeError, "object"),
    ("reset-hook-not-callable", lambda e: ga.register_reset_hook(5), TypeError, "int"),
    ("check-dtype-timedelta", lambda e: ga.check_dtype("m8[s]", e.dev),
     ga.UnsupportedDTypeError, "timedelta64"),
    ("arange-step-zero", lambda e: ga.arange(0, 10, 0, device=e.dev), ValueError, "step"),
    ("len-of-0d", lambda e: len(e.a[0]), TypeError, "0-d"),
    ("impossible-size", lambda e: ga.empty(2**62, np.uint8, device=e.dev), ga.OutOfMemoryError,
     str(2**62)),
    ("larger-than-address-space", lambda e: ga.empty((2**40, 2**40), device=e.dev),
     ValueError, "more than the 9223372036854775807"),
]


def _figures(device, trim: bool = False) -> tuple[int, int]:
    gc.collect()  # first: garbage of earlier calls goes back to the pool before any trim
    if trim:
        ga.trim(device)
    s = ga.memory_stats(device)
    return s["used_bytes"], s["reserved_bytes"]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(device, case):
    name, call, error, text = case
    env = Env(device)
    try:
        before = _figures(device, trim=True)  # the out-of-memory ladder trims: start empty
        with pytest.raises(error) as info:
            call(env)
        assert text in str(info.value), f"{name}: message {str(info.value)!r} lacks {text!r}"
        del info
        used, reserved = _figures(device)
        assert used == before[0], f"{name} changed used_bytes"
        # A call that allocated before it could validate leaves its block in the pool
        # (reserved, not used); trimming gives it back: nothing was lost on the way.
        assert _figures(device, trim=True) == before, f"{name} lost memory (reserved {reserved})"
        # the arrays the call was given are intact
        np.testing.assert_array_equal(env.a.get(), np.arange(3, dtype=np.float32))
        np.testing.assert_array_equal(env.m.get(), np.arange(12, dtype=np.int32).reshape(3, 4))
    finally:
        env.free()
        ga.set_memory_limit(None, device)
    _profiles.record("bad_input", device=str(device), case=name)


LACKING = [(str(d), t) for d in ga.devices() for t in ("float64", "float16")
           if not d.supports(t)]


@pytest.mark.parametrize(("spec", "dtype"), LACKING or [("cpu:0", None)],
                         ids=[f"{s}-{t}" for s, t in LACKING] or ["no-device-lacks-a-type"])
def test_dtype_the_device_lacks(spec, dtype):
    """A device without float16/float64 refuses it naming the device and suggesting float32."""
    dev = ga.get_device(spec)
    if dtype is None:  # every device here holds every type: the check must accept them all
        assert all(dev.supports(t) for t in ("float16", "float64"))
        return
    before = _figures(dev, trim=True)
    for call in (lambda: ga.empty(3, dtype=dtype, device=dev),
                 lambda: ga.arange(3, dtype=np.float32, device=dev).astype(dtype),
                 lambda: ga.zeros(2, np.int64, device=dev).view(dtype)):
        with pytest.raises(ga.UnsupportedDTypeError) as info:
            call()
        text = str(info.value)
        assert spec in text and "float32" in text and dtype in text, text
        del info  # its traceback holds the temporaries of the call
    assert _figures(dev, trim=True) == before


# regression tests for bugs the table found ------------------------------------------------

def test_empty_larger_than_address_space_is_refused(device):
    """A byte size beyond size_t was truncated by ctypes into a tiny malloc (cpu back-end):
    ga.empty((2**40, 2**40)) "succeeded" over a few bytes.  Past 2**63 - 1 bytes the size
    is impossible (a ValueError, test_sizes.py); below it, out of memory."""
    with pytest.raises(ValueError, match="more than"):
        ga.empty((2**40, 2**40), np.float64, device=device)
    with pytest.raises(ValueError, match="more than"):
        ga.empty(2**64 + 8, np.uint8, device=device)
    with pytest.raises(ga.OutOfMemoryError):
        ga.empty(2**63 - 1, np.uint8, device=device)


def test_arange_step_zero_raises_value_error(device):
    """ga.arange(0, 10, 0) raised ZeroDivisionError, not docs/design.md ("Errors") ValueError."""
    with pytest.raises(ValueError, match="step"):
        ga.arange(0, 10, 0, device=device)


def test_alloc_cache_failed_construction_does_not_warn():
    """AllocCache(5) raised TypeError and then its finalizer warned about a missing slot."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError):
            ga.AllocCache(5)
        gc.collect()
    assert [str(w.message) for w in caught if w.category is ga.GPUArraysWarning] == []


@pytest.mark.parametrize("copy", ["maybe", None, 1, 0.0])
def test_astype_copy_must_be_a_bool(device, copy):
    """Regression: ga.astype(x, dtype, copy="maybe") was accepted (and meant True)."""
    x = ga.asarray(np.arange(3.0), device=device)
    for call in (lambda: ga.astype(x, np.float32, copy=copy),
                 lambda: x.astype(np.float32, copy=copy)):
        with pytest.raises(TypeError, match="copy must be True or False"):
            call()
    assert ga.astype(x, np.float64, copy=False) is x
    assert ga.astype(x, np.float32, copy=np.bool_(True)).dtype == np.float32
