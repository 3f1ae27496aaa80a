"""Devices agree on edge cases: every device answers as NumPy does (the cpu engine's
answer), or every device refuses with the same error class.

One shared table, run on every available device; each row found a disagreement between
cpu:0 and OpenCL once (zero-size norms, structured dtypes in sort/unique/search, unsigned
index extremes, structured ``tril``/``eye``).
"""

from __future__ import annotations

import numpy as np
import pytest

import gpuarrays as ga

STRUCT = np.dtype([("x", "f4"), ("y", "i2")])


def _struct(shape) -> np.ndarray:
    h = np.zeros(shape, STRUCT)
    h["x"] = np.arange(h.size).reshape(shape) + 1
    h["y"] = -np.arange(h.size).reshape(shape) - 1
    return h


def _z(*shape):
    return np.zeros(shape, np.float32)


# name -> (NumPy's call on host arrays, the same call on device arrays, or an error class
# every device raises where NumPy's answer is not ours to give)
CASES = {
    "vector_norm inf, empty": (lambda xp, a: xp.linalg.vector_norm(a(_z(0)), ord=np.inf),),
    "vector_norm inf, empty axis": (
        lambda xp, a: xp.linalg.vector_norm(a(_z(2, 0)), ord=np.inf, axis=1),),
    "vector_norm -1, empty": (lambda xp, a: xp.linalg.vector_norm(a(_z(2, 0)), ord=-1, axis=1),),
    "vector_norm -inf, empty": (
        lambda xp, a: xp.linalg.vector_norm(a(_z(0)), ord=-np.inf), ValueError),
    "matrix_norm 2, empty": (lambda xp, a: xp.linalg.matrix_norm(a(_z(0, 0)), ord=2),),
    "matrix_norm nuc, empty": (lambda xp, a: xp.linalg.matrix_norm(a(_z(2, 0, 3)), ord="nuc"),),
    "matrix_norm 1, empty": (lambda xp, a: xp.linalg.matrix_norm(a(_z(2, 3, 0)), ord=1),),
    "matrix_norm inf, empty": (lambda xp, a: xp.linalg.matrix_norm(a(_z(0, 3)), ord=np.inf),),
    "matrix_norm -2, empty": (
        lambda xp, a: xp.linalg.matrix_norm(a(_z(2, 0, 3)), ord=-2), ValueError),
    "uint64 index 2**64 - 1": (
        lambda xp, a: a(np.arange(4.0))[a(np.array([2**64 - 1, 0, 2**64 - 4], np.uint64))],),
    "uint64 index 2**63": (
        lambda xp, a: a(np.arange(4.0))[a(np.array([2**63], np.uint64))], IndexError),
    "tril structured": (lambda xp, a: xp.tril(a(_struct((2, 3, 4))), k=-1),),
    "triu structured, strided": (
        lambda xp, a: xp.triu(a(_struct((2, 3, 4)))[:, ::-1, ::2], k=1),),
    "eye structured": (lambda xp, a: xp.eye(3, 5, k=1, dtype=STRUCT),),
    "eye structured, below": (lambda xp, a: xp.eye(4, 2, k=-1, dtype=STRUCT),),
    "sort structured": (lambda xp, a: xp.sort(a(_struct((4,)))), TypeError),
    "argsort structured": (lambda xp, a: xp.argsort(a(_struct((4,)))), TypeError),
    "unique_values structured": (lambda xp, a: xp.unique_values(a(_struct((4,)))), TypeError),
    "searchsorted structured": (
        lambda xp, a: xp.searchsorted(a(_struct((4,))), a(_struct((2,)))), TypeError),
    "isin structured": (lambda xp, a: xp.isin(a(_struct((4,))), a(_struct((2,)))), TypeError),
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_device_answers_the_edge_case_as_numpy(device, name):
    call, *refused = CASES[name]
    if refused:
        with pytest.raises(refused[0]):
            call(ga, lambda h: ga.asarray(h, device=device))
        return
    with np.errstate(divide="ignore"):  # NumPy's vector_norm(ord=-1) of nothing warns
        want = np.asarray(call(np, lambda h: h))
    got = call(_OnDevice(device), lambda h: ga.asarray(h, device=device)).get()
    assert got.dtype == want.dtype and got.shape == want.shape
    assert (got == want).all()


class _OnDevice:
    """``ga`` with creation functions placed on one device."""

    def __init__(self, device) -> None:
        self._device = device
        self.linalg = ga.linalg

    def eye(self, *args, **kwargs):
        return ga.eye(*args, device=self._device, **kwargs)

    def __getattr__(self, name):
        return getattr(ga, name)
