"""The memory layer governs compute (docs/compute.md, "How an operation runs"): one allocation
per result, none for scalars or in-place operations, zero in a cached loop after the first
iteration, nothing allocated for refused arguments, the result's kind."""

from __future__ import annotations

import numpy as np
import pytest

import gpuarrays as ga


def test_one_allocation_per_result_none_for_scalars_or_inplace(device):
    a = ga.ones(1000, dtype="float32", device=device)
    b = ga.ones(1000, dtype="float32", device=device)
    with ga.record_allocations() as rec:
        c = a + b
    assert rec.count == 1 and rec.bytes == 4096
    with ga.record_allocations() as rec:
        d = a * 2.0
        e = ga.where(a > 0, a, 0)  # the comparison's bool array is a second result
    assert rec.count == 3
    with ga.record_allocations() as rec:
        a += 1
        a[10:20] *= 3
        np.multiply(a, b, out=c)
        ga.exp(a)  # the result is dropped at once
    assert rec.count == 1
    assert d.get()[0] == 2.0 and e.get()[0] == 1.0 and c.get()[15] == 6.0


def test_a_cached_loop_allocates_nothing_after_the_first_iteration(device):
    cache = ga.AllocCache()
    host = np.linspace(0, 1, 256, dtype=np.float32)
    x = ga.asarray(host, device=device)
    m = ga.asarray(np.float32(0.5), device=device)

    def body(i):
        y = ga.exp(x - m) * 2 + i
        return ga.where(y > 2, y, 0)

    def want(i):
        y = np.exp(host - np.float32(0.5)) * 2 + i
        return np.where(y > 2, y, 0)

    with ga.cached(cache):
        escaped = body(100)  # escapes the scope: its buffer is never handed out again
    counts = []
    for i in range(6):
        with ga.record_allocations() as rec, ga.cached(cache):
            z = body(i)
            np.testing.assert_allclose(z.get(), want(i), rtol=1e-5)
            del z
        counts.append(rec.count)
    assert all(n == 0 for n in counts[1:]), counts
    np.testing.assert_allclose(escaped.get(), want(100), rtol=1e-5)
    del escaped
    cache.free()


def test_refused_arguments_allocate_nothing(device, used):
    a = ga.zeros((2, 3), dtype="int8", device=device)
    b = ga.zeros((4,), dtype="int8", device=device)
    ro = ga.broadcast_to(a[0], (2, 3))
    f = ga.zeros((3,), dtype="float32", device=device)
    before = used()
    stats = ga.memory_stats(device)
    with ga.record_allocations() as rec:
        for bad in (lambda: a + b, lambda: ga.bitwise_invert(f), lambda: a + 1000, lambda: ga.add(a, [1]),
                    lambda: ro.__iadd__(1), lambda: ga.where(a, a, a),
                    lambda: ga.bitwise_and(a, 1.5)):
            with pytest.raises((TypeError, ValueError, OverflowError)):
                bad()
    assert rec.count == 0
    assert used() == before
    assert ga.memory_stats(device)["reserved_bytes"] == stats["reserved_bytes"]


def test_mixed_devices_are_refused_naming_both(device):
    if device.backend == "cpu":
        other = next((d for d in ga.devices() if d.backend != "cpu"), None)
    else:
        other = ga.get_device("cpu")
    if other is None:
        return  # a machine with the cpu back-end only has no second device to mix
    a = ga.zeros(3, device=device)
    b = ga.zeros(3, dtype="float32", device=other)
    with pytest.raises(ValueError, match="different devices") as info:
        a + b
    assert str(device) in str(info.value) and str(other) in str(info.value)


def test_result_kind_is_the_shared_kind_else_device(device):
    kinds = [k for k in ("host", "unified") if k in device.kinds]
    for kind in kinds:
        a = ga.ones(4, dtype="float32", device=device, kind=kind)
        b = ga.ones(4, dtype="float32", device=device, kind=kind)
        assert (a + b).kind == kind and (a + 1).kind == kind
        c = ga.ones(4, dtype="float32", device=device)
        assert (a + c).kind == "device"


def test_zero_size_and_0d_operands(device):
    e = ga.zeros((0, 3), dtype="float32", device=device)
    r = e + 1
    assert r.shape == (0, 3) and r.storage.nbytes == 0
    s = ga.asarray(np.float32(2.5), device=device)
    assert float(s * s) == 6.25 and (s * s).shape == ()
    assert (ga.ones((2, 3), dtype="float32", device=device) + s).get().tolist() == [[3.5] * 3] * 2


def test_freed_operands_raise_in_every_function(device):
    a = ga.ones(3, dtype="float32", device=device)
    a.free()
    for name in ("exp", "negative", "isnan", "real"):
        with pytest.raises(ga.FreedArrayError):
            getattr(ga, name)(a)
    with pytest.raises(ga.FreedArrayError):
        ga.where(a > 0, 1.0, 0.0)
