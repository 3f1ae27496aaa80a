"""xarray over gpuarrays data: the operations a first xarray user tries, NumPy as the oracle.

xarray probes its data (``hasattr(x, "imag")`` after reductions, ``result_type`` with
``np.float64(nan)``); these tests hold the fixes in place (docs/decisions.md, "Duck
typing").  The data hold a NaN: xarray's default skip-NaN reductions call ``np.nanmean``,
``np.nanmax``, ``np.nancumsum`` ... on the data, which run on the device (docs/numpy.md);
``skipna=False`` takes the plain reductions.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpuarrays as ga

xr = pytest.importorskip("xarray", reason="xarray is in the test extra")


def _pair(device):
    host = np.arange(12.0).reshape(3, 4)
    host[1, 2] = 9.5
    host[2, 1] = np.nan
    coords = {"x": [10, 20, 30, 40]}
    on_device = xr.DataArray(ga.asarray(host, device=device), dims=("y", "x"), coords=coords)
    on_host = xr.DataArray(host, dims=("y", "x"), coords=coords)
    return on_device, on_host


def _same(got, want) -> None:
    assert isinstance(got.data, ga.GPUArray), type(got.data)
    assert got.dims == want.dims and got.shape == want.shape
    np.testing.assert_allclose(got.data.get(), want.data, equal_nan=True)


CASES = {
    "sum": lambda d: d.sum(),
    "sum-x": lambda d: d.sum("x"),
    "mean-skipna-false": lambda d: d.mean(skipna=False),
    "mean-y-skipna-false": lambda d: d.mean("y", skipna=False),
    "max-skipna-false": lambda d: d.max(skipna=False),
    "mean": lambda d: d.mean(),
    "mean-y": lambda d: d.mean("y"),
    "max-x": lambda d: d.max("x"),
    "min": lambda d: d.min(),
    "std-ddof": lambda d: d.std("y", ddof=1),
    "var": lambda d: d.var(),
    "sum-skipna": lambda d: d.sum("y", skipna=True),
    "prod-x": lambda d: d.prod("x"),
    "median-x": lambda d: d.median("x"),
    "cumsum-x": lambda d: d.cumsum("x"),
    "argmin-y": lambda d: d.argmin("y"),
    "any": lambda d: (d > 5).any(),
    "any-y": lambda d: (d > 5).any("y"),
    "all": lambda d: (d > 0).all(),
    "argmax-x": lambda d: d.argmax("x", skipna=False),
    "where": lambda d: d.where(d > 4),
    "isel-slice": lambda d: d.isel(x=slice(1, 3)),
    "isel-int": lambda d: d.isel(y=1),
    "isel-list": lambda d: d.isel(x=[0, 2]),
    "arithmetic": lambda d: d * 2 + 1,
    "imag": lambda d: d.imag,
    "transpose": lambda d: d.T,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dataarray_over_gpuarrays_matches_numpy(device, name):
    on_device, on_host = _pair(device)
    _same(CASES[name](on_device), CASES[name](on_host))


def test_dataarray_argmax_without_a_dimension(device):
    on_device, on_host = _pair(device)
    with pytest.warns(FutureWarning):  # xarray's own deprecation of the flat argmax
        got = on_device.argmax(skipna=False)
    with pytest.warns(FutureWarning):
        want = on_host.argmax(skipna=False)
    _same(got, want)
