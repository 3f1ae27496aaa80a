"""The namespace itself: version, dtype names, constants, data type functions and the
inspection object (docs/compute.md, "The namespace")."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays._compute.table import NUMPY_ONLY, OPS

_DTYPE_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float32", "float64", "complex64", "complex128"]


def test_version_constants_and_dtype_names():
    assert ga.__array_api_version__ == "2025.12"
    assert (ga.e, ga.pi, ga.inf) == (math.e, math.pi, math.inf) and math.isnan(ga.nan)
    assert ga.newaxis is None
    for name in _DTYPE_NAMES:
        dt = getattr(ga, name)
        assert dt == np.dtype(name) and isinstance(dt, np.dtype)
        assert {np.dtype(name): 1}[dt] == 1
        assert name in ga.__all__


def test_the_namespace_has_the_67_elementwise_functions_and_where():
    names = sorted(n for n in OPS if n != "where" and n not in NUMPY_ONLY)
    assert len(names) == 67
    for name in [*names, "where"]:
        assert callable(getattr(ga, name)) and name in ga.__all__


def test_astype(device):
    a = ga.asarray(np.array([1.7, -2.2, 3.0], np.float32), device=device)
    b = ga.astype(a, ga.int32)
    assert b.dtype == np.int32 and b.get().tolist() == [1, -2, 3]
    assert ga.astype(a, ga.float32, copy=False) is a
    c = ga.astype(a, ga.float32)
    assert c is not a and c.storage is not a.storage
    d = ga.astype(a, ga.int16, device="cpu")
    assert d.device == ga.get_device("cpu") and d.get().tolist() == [1, -2, 3]
    with pytest.raises(TypeError, match="gpuarrays array"):
        ga.astype(np.zeros(2), ga.float32)


def test_can_cast_finfo_iinfo_isdtype():
    assert ga.can_cast(ga.int8, ga.int16) and not ga.can_cast(ga.int16, ga.int8)
    assert ga.can_cast(ga.zeros(1, dtype="float32", device="cpu"), ga.float64)
    f = ga.finfo(ga.float32)
    assert f.bits == 32 and f.eps == np.finfo(np.float32).eps and f.dtype == np.float32
    assert ga.finfo(ga.complex64).dtype == np.float32
    assert ga.finfo(ga.zeros(1, dtype="float64", device="cpu")).bits == 64
    i = ga.iinfo(ga.uint8)
    assert (i.min, i.max, i.bits) == (0, 255, 8)
    with pytest.raises(ValueError, match="iinfo"):
        ga.finfo(ga.int8)
    with pytest.raises(ValueError, match="finfo"):
        ga.iinfo(ga.float32)
    assert ga.isdtype(ga.float32, "real floating")
    assert ga.isdtype(ga.int8, ("signed integer", "bool"))
    assert not ga.isdtype(ga.uint8, "signed integer")
    assert ga.isdtype(ga.complex64, ga.complex64)
    with pytest.raises(ValueError, match="unknown kind"):
        ga.isdtype(ga.float32, "floating")
    with pytest.raises(TypeError):
        ga.isdtype("float32", "numeric")


def test_inspection_object():
    info = ga.__array_namespace_info__()
    caps = info.capabilities()
    assert caps["boolean indexing"] is True and caps["data-dependent shapes"] is True
    assert "max dimensions" in caps
    assert info.default_device() == ga.get_device()
    devices = info.devices()
    assert isinstance(devices, tuple) and ga.get_device("cpu") in devices
    assert info.default_dtypes(device="cpu") == {
        "real floating": ga.float64, "complex floating": ga.complex128,
        "integral": ga.int64, "indexing": ga.int64}
    assert list(info.dtypes(device="cpu")) == _DTYPE_NAMES
    assert info.dtypes(device="cpu", kind="real floating") == {
        "float32": ga.float32, "float64": ga.float64}
    assert list(info.dtypes(device="cpu", kind=("bool", "unsigned integer"))) == [
        "bool", "uint8", "uint16", "uint32", "uint64"]
    with pytest.raises(ValueError, match="unknown dtype kind"):
        info.dtypes(kind="floats")


def test_inspection_follows_the_device(device):
    info = ga.__array_namespace_info__()
    dtypes = info.dtypes(device=device)
    floating = info.default_dtypes(device=device)["real floating"]
    assert floating.name in dtypes
    assert ("float64" in dtypes) == device.info.float64
    assert floating == (ga.float64 if device.info.float64 else ga.float32)
