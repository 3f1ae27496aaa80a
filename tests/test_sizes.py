"""Sizes computed from arguments or data are checked before anything is allocated or
launched: a result past the 2**63 - 1 bytes an array can address is a ``ValueError``
naming the operation (when there is one) and the size -- never an out-of-memory error
for an impossible size, a ``SystemError``, a wrapped-around length or a crash.  The
results sized by data (``nonzero``, ``unique_*``, masks) are bounded by an operand, which
itself cannot pass the limit; ``repeat``'s data-sized total is checked on the device.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpuarrays as ga

BIG = 2**62


def _views(device):
    x = ga.ones((2,), device=device)
    return x, ga.broadcast_to(x, (2**58, 2))  # 2**62 bytes: the largest view here


CASES = {
    "tile": (lambda x, v: ga.tile(x, (BIG, 4)), r"tile\(\).*\(4611686018427387904, 8\)"),
    "tile_1d": (lambda x, v: ga.tile(x, (2**63 - 1,)), r"tile\(\).*18446744073709551614"),
    "concat": (lambda x, v: ga.concat([v, v]), r"concat\(\).*\(576460752303423488, 2\)"),
    "concat_flat": (lambda x, v: ga.concat([v, v], axis=None),
                    r"concat\(\).*\(1152921504606846976,\)"),
    "stack": (lambda x, v: ga.stack([v, v]), r"stack\(\).*\(2, 288230376151711744, 2\)"),
    "repeat": (lambda x, v: ga.repeat(x, BIG), r"repeat\(\).*9223372036854775808"),
    "broadcast_to": (lambda x, v: ga.broadcast_to(x, (2**62, 2)),
                     r"broadcast_to\(\).*73786976294838206464 bytes"),
    "arange": (lambda x, v: ga.arange(0, 2**63, device=x.device),
               r"arange\(\).*\(9223372036854775808,\)"),
    "arange_float": (lambda x, v: ga.arange(0.0, 1e300, 1e-300, device=x.device),
                     r"arange\(\).*too many values"),
    "linspace": (lambda x, v: ga.linspace(0, 1, 2**63, device=x.device),
                 r"linspace\(\).*\(9223372036854775808,\)"),
    "eye": (lambda x, v: ga.eye(2**40, device=x.device), r"eye\(\).*\(1099511627776, "),
    "zeros": (lambda x, v: ga.zeros((BIG, BIG), device=x.device),
              r"^an array of shape \(4611686018427387904, 4611686018427387904\)"),
    "full": (lambda x, v: ga.full((2**63,), 1.0, device=x.device), r"9223372036854775808"),
    "reshape_zero_size": (lambda x, v: ga.reshape(ga.ones((0,), device=x.device),
                                                  (BIG, BIG, 0)), r"cannot reshape"),
    "reshape": (lambda x, v: ga.reshape(x, (-1, 2**63)), r"dimension"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_size_past_int64_is_a_value_error_before_any_allocation(device, used, name):
    make, message = CASES[name]
    x, v = _views(device)
    before = used()
    with pytest.raises(ValueError, match=message):
        make(x, v)
    assert used() == before


def test_the_largest_view_is_allowed_and_one_more_element_is_not(device):
    x = ga.ones((1,), dtype=ga.uint8, device=device)
    v = ga.broadcast_to(x, (2**63 - 1,))
    assert v.shape == (2**63 - 1,)
    with pytest.raises(ValueError, match="broadcast_to"):
        ga.broadcast_to(x, (2**63,))
    np.testing.assert_array_equal(v[:3].get(), np.ones(3, np.uint8))
