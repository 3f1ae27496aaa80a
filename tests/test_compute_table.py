"""One description per operation (docs/compute.md, "Engines"): the operations' table and the
device expressions describe the same operations for the same dtype classes."""

from __future__ import annotations

import numpy as np
import pytest

from gpuarrays._compute.device import expressions as ex
from gpuarrays._compute.promotion import resolve
from gpuarrays._compute.table import BY_UFUNC, OPS, POWERS

ROWS = {**OPS, **POWERS}  # the namespace's operations and the rows standing in for pow


def _compute_classes(op) -> frozenset[str]:
    """The dtype classes the device kernels receive as compute types for this row."""
    found = set()
    k = ex.value_arg(op.name)
    for dt in op.accepts:
        keys = (np.dtype(bool), dt, dt) if op.name == "where" else (dt,) * op.nin
        if op.name == "ldexp":  # the exponent is an integer (NumPy's loops)
            if dt == np.uint64:
                continue  # np.ldexp refuses it, as every other operand dtype but ints and bool
            keys = (dt, np.dtype("int32"))
        args, _ = resolve(op, keys)
        found.add(ex.dtype_class(args[k]))
    return frozenset(found)


def test_the_table_and_the_expressions_name_the_same_operations():
    assert set(ROWS) == set(ex.EXPRESSIONS)
    assert not set(OPS) & set(POWERS)
    for name, op in ROWS.items():
        assert ex.NIN[name] == op.nin, name


@pytest.mark.parametrize("name", sorted(ROWS))
def test_every_accepted_dtype_class_has_an_expression_and_no_other(name):
    op = ROWS[name]
    assert _compute_classes(op) == ex.classes(name), name


def test_numpy_ufuncs_map_to_their_rows():
    assert BY_UFUNC[np.add] is OPS["add"]
    assert BY_UFUNC[np.true_divide] is OPS["divide"]
    assert BY_UFUNC[np.power] is OPS["pow"]
    assert BY_UFUNC[np.conjugate] is OPS["conj"]
    assert len({op.name for op in BY_UFUNC.values()}) == len(BY_UFUNC)
