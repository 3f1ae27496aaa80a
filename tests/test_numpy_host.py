"""NumPy's printing, file and dtype helpers on gpuarrays arrays (docs/numpy.md, "Host-side
functions"), on every device: the output is NumPy's, loaded arrays land on the device asked
for, and np.testing's assertions read gpuarrays arrays."""

from __future__ import annotations

import dataclasses
import io
import warnings

import numpy as np
import pytest

import gpuarrays as ga

H = np.arange(12, dtype=np.float32).reshape(3, 4) / 7


def _on(device, h=H):
    return ga.asarray(h, device=device)


def test_printing_is_numpys(device):
    a = _on(device)
    assert np.array2string(a) == ga.array2string(a) == np.array2string(H)
    assert np.array2string(a, precision=2, separator=",") == np.array2string(H, precision=2,
                                                                              separator=",")
    assert np.array_str(a[::2]) == np.array_str(H[::2])
    assert np.array_repr(a) == repr(a) and repr(a).startswith("GPUArray(")
    assert "0.14" in np.array_repr(a, precision=2) and "0.142" not in np.array_repr(a, precision=2)
    with ga.printoptions(precision=1):
        assert ga.array_str(a) == np.array_str(H, precision=1)


def test_save_and_load_round_trip_on_the_device(device, tmp_path):
    a = _on(device)
    np.save(tmp_path / "a.npy", a.T)
    back = ga.load(tmp_path / "a.npy", device=device)
    assert isinstance(back, ga.GPUArray) and back.device == device
    np.testing.assert_array_equal(back.get(), H.T)
    assert np.load(tmp_path / "a.npy").dtype == np.float32  # a plain NumPy file

    np.savez(tmp_path / "z.npz", a, b=a[1])
    ga.savez_compressed(tmp_path / "c.npz", x=a[:, 0])
    with ga.load(tmp_path / "z.npz", device=device) as f:
        assert sorted(f.files) == ["arr_0", "b"] and "b" in f and len(f) == 2
        np.testing.assert_array_equal(f["b"].get(), H[1])
        assert f["arr_0"].device == device
    np.testing.assert_array_equal(ga.load(tmp_path / "c.npz", device=device)["x"].get(), H[:, 0])

    with pytest.raises(ValueError, match="mmap_mode"):
        ga.load(tmp_path / "a.npy", mmap_mode="r")


def test_text_files_and_buffers(device, tmp_path):
    a = _on(device)
    np.savetxt(tmp_path / "a.txt", a, fmt="%.6f")
    text = (tmp_path / "a.txt").read_text()
    buf = io.StringIO()
    np.savetxt(buf, H, fmt="%.6f")
    assert text == buf.getvalue()
    got = np.loadtxt(tmp_path / "a.txt", dtype=np.float32, like=a)  # NEP 35: on a's device
    assert isinstance(got, ga.GPUArray) and got.device == device
    np.testing.assert_allclose(got.get(), H, atol=1e-6)
    g = ga.genfromtxt(io.StringIO("1,2\n3,\n"), delimiter=",", filling_values=-1,
                      device=device)
    np.testing.assert_array_equal(g.get(), [[1, 2], [3, -1]])
    with pytest.raises(TypeError, match="masked"):
        ga.genfromtxt(io.StringIO("1,2\n"), delimiter=",", usemask=True)

    H.tofile(tmp_path / "raw.bin")
    f = ga.fromfile(tmp_path / "raw.bin", dtype=np.float32, device=device)
    np.testing.assert_array_equal(f.get(), H.ravel())
    b = ga.frombuffer(b"\x01\x02\x03\x04", dtype=np.uint8, offset=1, device=device)
    assert b.get().tolist() == [2, 3, 4] and b.device == device
    assert ga.fromstring("1 2 3", dtype=np.int32, sep=" ", device=device).get().tolist() == [1, 2, 3]
    assert ga.fromiter((i * i for i in range(4)), np.int64, device=device).get().tolist() == [
        0, 1, 4, 9]


def test_dtype_and_metadata_helpers(device):
    a = _on(device)
    i = ga.asarray(np.arange(3, dtype=np.int16), device=device)
    assert ga.common_type(a) is np.common_type(H)
    assert ga.common_type(a, a[0]) is np.float32
    assert ga.min_scalar_type(i) == np.int16 and ga.min_scalar_type(ga.asarray(300)) == np.uint16
    assert ga.isfortran(a.T) and not ga.isfortran(a) and not ga.isfortran(a[:, :1])
    assert not ga.isscalar(a) and ga.isscalar(3.0) and ga.iterable(a)
    assert ga.promote_types(np.int8, np.uint8) == np.int16
    assert ga.issubdtype(a.dtype, np.floating)
    with warnings.catch_warnings():  # NumPy 2.5 deprecates typename (ga.typename is NumPy's)
        warnings.filterwarnings("ignore", "numpy.typename is deprecated", DeprecationWarning)
        assert ga.typename("f") == np.typename("f") == "single precision"
    assert ga.base_repr(10, 3) == "101" and ga.binary_repr(-3, width=4) == "1101"
    assert ga.mintypecode(["d", "f"]) == "d"
    assert ga.format_float_positional(np.float32(0.1)) == "0.1"


@pytest.mark.parametrize("gpu_like", [False, True], ids=["as_is", "as_gpu"])
def test_numpy_testing_reads_gpuarrays_arrays(device, monkeypatch, gpu_like):
    """np.testing reads every kind NumPy reads in place (``host``/``unified`` everywhere,
    all memory on cpu and PoCL); memory it cannot read (CUDA ``device``) is refused with
    the remedy, never copied behind the caller's back.  ``as_gpu``: ``device`` memory
    described as a GPU's (not host-addressable), so that branch runs on every device."""
    if gpu_like:
        monkeypatch.setattr(device, "info", dataclasses.replace(device.info, host_kinds=tuple(
            k for k in device.info.host_kinds if k != "device")))
    readable = [k for k in device.kinds if k in ("host", "unified")
                or k in device.info.host_kinds]
    for kind in device.kinds:
        a = ga.asarray(H, device=device, kind=kind)
        if kind not in readable:
            with pytest.raises(TypeError, match=r"a\.get\(\)"):
                np.testing.assert_allclose(a, H)
            np.testing.assert_allclose(a.get(), H)
            continue
        np.testing.assert_allclose(a, H)
        np.testing.assert_array_equal(a[1:], H[1:])
        np.testing.assert_array_almost_equal(a, H + 1e-9, decimal=6)
        with pytest.raises(AssertionError):
            np.testing.assert_allclose(a, H + 1)


def test_show_config_names_every_device(capsys):
    ga.show_config()
    out = capsys.readouterr().out
    assert all(str(d) in out for d in ga.devices()) and np.__version__ in out
