"""Duck typing: what libraries that probe arrays (xarray, dask, array-api-compat) rely on.

``hasattr`` answers instead of raising, ``dir(ga)`` lists only what attribute access
returns, NumPy scalars go wherever Python scalars go, refusals explain themselves, and
NumPy's refused ufunc methods do not pin memory where gpuarrays can help it
(docs/decisions.md, "Duck typing").
"""

from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

import gpuarrays as ga

DTYPES = ["bool", "int8", "uint16", "int32", "int64", "uint64", "float32", "float64",
          "complex64", "complex128", [("x", "f4"), ("n", "i4")]]
SHAPES = [(), (3,), (2, 3), (0,), (0, 3)]
PUBLIC = sorted({n for n in dir(ga.GPUArray) if not n.startswith("_")}
                | {"__cuda_array_interface__", "__dlpack__", "__array_namespace__"})


# ------------------------------------------------------------------------ the namespace
def test_dir_lists_only_what_attribute_access_returns():
    for name in dir(ga):
        getattr(ga, name)  # AttributeError here: dir() promises a name that is not there
    assert ga.interop.__name__ == "gpuarrays.interop"


# ------------------------------------------------------------------------ attributes
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_hasattr_never_raises_on_any_public_attribute(device, shape):
    """Regression: ``x.imag`` of a real array raised TypeError and ``x.mT`` of a 1-d array
    ValueError, so ``hasattr`` raised (xarray probes ``imag`` after every reduction)."""
    for dt in DTYPES:
        dt = np.dtype(dt)
        if not device.supports(dt):
            continue
        a = ga.zeros(shape, dtype=dt, device=device)
        for name in PUBLIC:
            try:
                getattr(a, name)
            except AttributeError:
                pass  # hasattr answers False: the attribute does not apply here
        a.free()


def test_imag_of_a_real_array_is_numpys_read_only_zeros(device, used):
    before = used()
    for dt in ("bool", "int32", "float32", "float64"):
        host = np.arange(6).astype(dt).reshape(2, 3)
        a = ga.asarray(host, device=device)
        im = a.imag
        assert im.dtype == host.imag.dtype and im.shape == host.shape
        assert not im.flags.writeable
        np.testing.assert_array_equal(im.get(), host.imag)
        with pytest.raises(ValueError, match="read-only"):
            im[...] = 1
        assert not ga.shares_memory(im, a)
        del a, im
    assert ga.zeros((), device=device).imag.get() == 0
    assert ga.zeros((0, 4), device=device).imag.shape == (0, 4)
    z = ga.asarray(np.array([1 + 2j, 3 - 4j]), device=device)
    assert ga.shares_memory(z.imag, z)  # complex: still a view
    del z
    assert used() == before


def test_mT_below_two_dimensions_is_a_value_error_and_an_attribute_error(device):
    a = ga.ones(3, device=device)
    assert not hasattr(a, "mT") and getattr(a, "mT", None) is None
    with pytest.raises(ValueError, match=r"2 dimensions.*\(3,\)"):
        a.mT
    assert hasattr(ga.ones((2, 3), device=device), "mT")


# ------------------------------------------------------------------------ NumPy scalars
def test_result_type_takes_numpy_scalars(device):
    """Regression: xarray passes ``np.float64(nan)`` (a float subclass) to result_type."""
    x = ga.ones(3, dtype="float32", device=device)
    i = ga.ones(3, dtype="int32", device=device)
    assert ga.result_type(np.float64(np.nan), x) == np.result_type(np.float64(np.nan),
                                                                   np.ones(3, np.float32))
    assert ga.result_type(np.float32(1), i) == np.float64
    assert ga.result_type(np.int8(1), i) == np.int32
    assert ga.result_type(np.bool_(True), i) == np.int32

    class MyFloat(float):
        pass

    assert ga.result_type(MyFloat(1.5), x) == np.float32  # a Python float: weak


def test_operators_and_functions_take_numpy_scalars(device):
    x = ga.asarray(np.array([1.0, 2.0, 3.0], np.float32), device=device)
    h = np.array([1.0, 2.0, 3.0], np.float32)
    for got, want in [(x + np.float64(0.5), h + np.float64(0.5)),
                      (np.float32(2) * x, np.float32(2) * h),
                      (x < np.float64(2), h < np.float64(2)),
                      (ga.where(x > 1, x, np.float64(np.nan)),
                       np.where(h > 1, h, np.float64(np.nan))),
                      (ga.diff(x, prepend=np.float32(0)), np.diff(h, prepend=np.float32(0)))]:
        assert isinstance(got, ga.GPUArray) and got.dtype == want.dtype
        np.testing.assert_array_equal(got.get(), want)


# ------------------------------------------------------------------------ errors that explain
def test_a_numpy_array_operand_names_both_types_and_both_remedies(device):
    a = ga.ones(4, device=device)
    for call in (lambda: a + np.ones(4), lambda: np.ones(4) + a, lambda: a == np.ones(4),
                 lambda: np.add(a, np.ones(4)), lambda: a.__iadd__(np.ones(4))):
        with pytest.raises(TypeError) as info:
            call()
        message = str(info.value)
        assert "GPUArray" in message and "ndarray" in message
        assert "ga.asarray(" in message and f"device='{device}'" in message
        assert ".get()" in message
        assert "NotImplemented" not in message


def test_a_list_operand_is_refused_with_a_message_about_lists(device):
    """Regression: ``a * [1, 2, 3, 4]`` said "only integer arrays can be used as an index"
    (Python's ``list * int`` repetition asked the array for ``__index__``)."""
    a = ga.ones(4, device=device)
    for call in (lambda: a * [1, 2, 3, 4], lambda: [1, 2, 3, 4] * a, lambda: a + [1, 2, 3, 4],
                 lambda: [1, 2, 3, 4] - a, lambda: a == [1, 2, 3, 4], lambda: a + (1, 2, 3, 4)):
        with pytest.raises(TypeError) as info:
            call()
        message = str(info.value)
        assert "list" in message or "tuple" in message
        assert "index" not in message and "ga.asarray(" in message and ".get()" in message
    with pytest.raises(TypeError, match="list"):
        a *= [1, 2, 3, 4]
    assert (a == "text") is False  # no elementwise meaning: Python's identity fallback


DECIMALS = [-3, -1, 0, 1, 2, 4]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "int32", "int64"])
def test_round_takes_decimals_as_numpy(device, dtype):
    """Regression: ``ga.round(a, 2)`` said "takes 1 positional argument"."""
    rng = np.random.default_rng(7)
    host = rng.standard_normal(64) * 2000
    host[:8] = [0.125, 0.135, 2.5, -2.5, 1234.5, -0.05, 15.0, 25.0]
    if dtype.startswith("complex"):
        host = host + 1j * host[::-1]
    host = host.astype(dtype)
    a = ga.asarray(host, device=device)
    for d in DECIMALS:
        want = np.round(host, d)
        for got in (ga.round(a, d), ga.round(a, decimals=d), a.round(d), np.round(a, d)):
            assert isinstance(got, ga.GPUArray) and got.dtype == want.dtype
            np.testing.assert_array_equal(got.get(), want, err_msg=f"decimals={d}")
    with pytest.raises(TypeError, match="decimals must be an int"):
        ga.round(a, 1.5)


# ------------------------------------------------------------------------ ufunc methods
def test_refused_ufunc_methods_say_what_to_do_instead(device):
    a = ga.ones(0, device=device)  # zero-size: NumPy leaks the operand of a refused reduce
    # (ufunc methods and keywords on gpuarrays operands run: tests/test_numpy_ufuncs.py)
    for call, words in [(lambda: np.subtract.reduce(a, out=np.empty(())),
                         ["subtract.reduce", "ga.asarray"]),
                        (lambda: np.add.outer(a, np.ones(2)), ["add.outer", ".get()"]),
                        (lambda: np.isnat(a), ["isnat", ".get()"]),
                        (lambda: np.add(a, 1, subok=False), ["subok=", "defaults"])]:
        with pytest.raises(TypeError) as info:
            call()
        for word in words:
            assert word in str(info.value)


@pytest.mark.parametrize("ufunc, namespace", [
    (np.add, "sum"), (np.multiply, "prod"), (np.maximum, "max"), (np.minimum, "min"),
    (np.logical_and, "all"), (np.logical_or, "any")])
def test_ufunc_reduce_runs_on_the_device_and_frees_the_operand(device, used, ufunc, namespace):
    """NumPy 2.4 keeps the operand of a *refused* ``ufunc.reduce`` alive for ever (raising
    from ``__array_ufunc__`` leaks alike); the reductions that map to namespace functions
    answer, and then the operand and its memory go back."""
    before = used()
    host = np.arange(1, 13, dtype=np.float64).reshape(3, 4)
    if namespace in ("all", "any"):
        host = host % 3 == 0
    a = ga.asarray(host, device=device)
    probe = weakref.ref(a)
    for kwargs in ({}, {"axis": 1}, {"axis": None}, {"axis": 0, "keepdims": True},
                   *([{"axis": 1, "dtype": np.float32}] if namespace in ("sum", "prod") else [])):
        got = ufunc.reduce(a, **kwargs)
        want = ufunc.reduce(host, **kwargs)
        assert isinstance(got, ga.GPUArray) and got.shape == np.shape(want)
        assert got.dtype == np.asarray(want).dtype
        np.testing.assert_allclose(got.get(), want)
        del got
    refs = sys.getrefcount(a)
    assert refs == sys.getrefcount(a)
    del a
    gc.collect()
    assert probe() is None
    assert used() == before
