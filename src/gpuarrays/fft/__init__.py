"""``gpuarrays.fft``: the array API standard's FFT extension (docs/linalg.md, "fft").

All 14 functions with the standard's signatures, on every device.  On ``cpu``
the transforms run NumPy's pocketfft on views of the raw memory, writing into
the result from the pool through ``out=``.  On device back-ends they run this
library's own kernels (``_compute/device/fft.py``: Stockham radix-8/4/2 passes
for powers of two, a direct DFT for short other lengths, Bluestein's chirp-z for
long ones), one axis at a time,
entirely on the device; ``fftfreq``, ``rfftfreq``, ``fftshift`` and
``ifftshift`` are creation and block copies.
"""

from __future__ import annotations

import operator
from itertools import product

import numpy as np

from .._array.creation import asarray
from .._array.make import ArrayBase, new_array
from .._array.transfer import copy_raw
from .._compute import cpu_engine
from .._compute.ownership import working
from .._compute.device import fft as device_fft
from .._compute.dtypes import astype
from .._compute.linalg import check_arrays
from .._compute.manipulation import normalize_axis
from .._compute.utility import run_chain

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift", "fft2", "ifft2", "rfft2", "irfft2"]

ON_DEVICES = frozenset(__all__)
"""The functions that run on every device back-end: all of them."""

_NORMS = ("backward", "ortho", "forward")
_C8, _C16, _F4, _F8 = (np.dtype(n) for n in ("complex64", "complex128", "float32", "float64"))
_F2 = np.dtype(np.float16)


def _complex(dt: np.dtype) -> np.dtype:
    return _C8 if dt in (_F4, _C8, np.dtype(np.float16)) else _C16


def _real(dt: np.dtype) -> np.dtype:
    return _F4 if dt in (_F4, _C8, np.dtype(np.float16)) else _F8


def _check(name: str, x, norm: str):
    dev, kind = check_arrays(name, x)
    if norm not in _NORMS:
        raise ValueError(f"fft.{name}(): norm must be 'backward', 'ortho' or 'forward', got "
                         f"{norm!r}")
    if x._dtype.kind not in "fciub":
        raise TypeError(f"fft.{name}() takes numeric or bool data types, got {x._dtype}")
    return dev, kind


def _bool_as_uint8(fn):
    """``fn`` with a bool ``x`` read as uint8 (same bytes; NumPy transforms bool as it
    does integers: in float64/complex128)."""
    def run(name, np_fn, x, *args, **kw):
        if isinstance(x, ArrayBase) and x._dtype.kind == "b":
            v = x.view(np.uint8)
            try:
                return fn(name, np_fn, v, *args, **kw)
            finally:
                v.free()
        return fn(name, np_fn, x, *args, **kw)
    return run


def _real_input(name: str, x) -> None:
    if x._dtype.kind == "c":
        raise TypeError(f"fft.{name}() takes real input, got {x._dtype}; use fft.fft for "
                        f"complex input or take the real part first")


def _length(name: str, n, what: str = "n") -> int:
    try:
        k = operator.index(n)
    except TypeError:
        raise TypeError(f"fft.{name}(): {what} must be an int, got {n!r}") from None
    if k < 1:
        raise ValueError(f"fft.{name}(): {what} must be >= 1, got {k}")
    return k


def _axes_and_sizes(name: str, x, s, axes) -> tuple[list[int], list[int | None]]:
    nd = x.ndim
    if axes is None:
        axes = list(range(nd)) if s is None else list(range(nd - len(s), nd))
    else:
        axes = [normalize_axis(f"fft.{name}", a, nd) for a in axes]
    if s is None:
        sizes: list[int | None] = [None] * len(axes)
    else:
        if len(s) != len(axes):
            raise ValueError(f"fft.{name}(): s {tuple(s)} and axes {tuple(axes)} must have "
                             f"the same length")
        sizes = [None if v == -1 else _length(name, v, "s") for v in s]
    if len(axes) > nd or any(a < 0 for a in axes):
        raise ValueError(f"fft.{name}(): more axes than the array's {nd} dimensions")
    return axes, sizes


def _run(fn, x, shape, dt, dev, kind, *, into: bool = True, **kw):
    """NumPy's ``fn`` on a view of ``x``: into a new array from the pool through ``out=``
    (``into``), else NumPy's result copied into one (the n-d functions apply ``out=`` at
    every axis, so NumPy refuses it when a size changes)."""
    out = new_array(tuple(shape), dt, dev, kind)
    try:
        with working(dev, x, out), np.errstate(all="ignore"):
            if into:
                fn(cpu_engine.view(x), out=cpu_engine.view(out), **kw)
            else:
                np.copyto(cpu_engine.view(out), fn(cpu_engine.view(x), **kw), casting="unsafe")
    except BaseException:
        out.free()
        raise
    return out


@_bool_as_uint8
def _one_axis(name: str, fn, x, n, axis, norm, *, real_in: bool, real_out: bool,
              half: str) -> object:
    dev, kind = _check(name, x, norm)
    if real_in:
        _real_input(name, x)
    if x.ndim == 0:
        raise ValueError(f"fft.{name}() needs at least one dimension, got a 0-d array")
    ax = normalize_axis(f"fft.{name}", axis, x.ndim)
    m = x._shape[ax]
    size = None if n is None else _length(name, n)
    shape = list(x._shape)
    if half == "in":  # the output length n from a half spectrum (irfft, hfft)
        shape[ax] = size if size is not None else 2 * (m - 1)
        if shape[ax] < 1:
            raise ValueError(f"fft.{name}(): the output length {shape[ax]} from an axis of "
                             f"{m} points is invalid; pass n >= 1")
    elif half == "out":  # a half spectrum of n points (rfft, ihfft)
        shape[ax] = (size if size is not None else m) // 2 + 1
    else:
        shape[ax] = size if size is not None else m
    if half != "in" and (size if size is not None else m) < 1:
        raise ValueError(f"fft.{name}(): invalid number of points 0; pass n >= 1")
    dt = _real(x._dtype) if real_out else _complex(x._dtype)
    half16 = real_out and x._dtype == _F2  # NumPy's irfft/hfft keep float16 (via float32)
    if dev.backend != "cpu":
        dev.require(dt)
        out = new_array(tuple(shape), dt, dev, kind)
        try:
            _device_step(name, x, ax, out, size if size is not None else (
                shape[ax] if half == "in" else m), norm)
        except BaseException:
            out.free()
            raise
        if half16:
            try:
                return astype(out, _F2)
            finally:
                out.free()
        return out
    # NumPy's hfft ignores out= (it returns a new array; NumPy 2.4): copy its result
    return _run(fn, x, shape, _F2 if half16 else dt, dev, kind,
                into=name != "hfft" and not half16, n=size, axis=ax, norm=norm)


def fft(x, /, *, n=None, axis=-1, norm="backward"):
    """The one-dimensional discrete Fourier transform along ``axis``."""
    return _one_axis("fft", np.fft.fft, x, n, axis, norm, real_in=False, real_out=False, half="")


def ifft(x, /, *, n=None, axis=-1, norm="backward"):
    """The one-dimensional inverse discrete Fourier transform."""
    return _one_axis("ifft", np.fft.ifft, x, n, axis, norm, real_in=False, real_out=False,
                     half="")


def rfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The transform of real input: ``n // 2 + 1`` points along ``axis``."""
    return _one_axis("rfft", np.fft.rfft, x, n, axis, norm, real_in=True, real_out=False,
                     half="out")


def irfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The inverse of :func:`rfft`: ``n`` real points (default ``2 * (m - 1)``)."""
    return _one_axis("irfft", np.fft.irfft, x, n, axis, norm, real_in=False, real_out=True,
                     half="in")


def hfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The transform of a Hermitian-symmetric signal: ``n`` real points."""
    return _one_axis("hfft", np.fft.hfft, x, n, axis, norm, real_in=False, real_out=True,
                     half="in")


def ihfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The inverse of :func:`hfft`: ``n // 2 + 1`` complex points."""
    return _one_axis("ihfft", np.fft.ihfft, x, n, axis, norm, real_in=True, real_out=False,
                     half="out")


@_bool_as_uint8
def _many_axes(name: str, fn, x, s, axes, norm, *, real_in: bool, real_out: bool,
               half: str):
    dev, kind = _check(name, x, norm)
    if real_in:
        _real_input(name, x)
    ax, sizes = _axes_and_sizes(name, x, s, axes)
    shape = list(x._shape)
    for k, (a, v) in enumerate(zip(ax, sizes, strict=True)):
        last = k == len(ax) - 1
        if last and half == "in":
            shape[a] = v if v is not None else 2 * (x._shape[a] - 1)
        elif last and half == "out":
            shape[a] = (v if v is not None else x._shape[a]) // 2 + 1
        else:
            shape[a] = v if v is not None else x._shape[a]
        if shape[a] < 1:
            raise ValueError(f"fft.{name}(): invalid number of points along axis {a}")
    dt = _real(x._dtype) if real_out else _complex(x._dtype)
    full = [v if v is not None else (
        2 * (x._shape[a] - 1) if (half == "in" and k == len(ax) - 1) else x._shape[a])
        for k, (a, v) in enumerate(zip(ax, sizes, strict=True))]
    if dev.backend != "cpu":
        dev.require(dt)
        return _device_many(name, x, ax, full, dt, dev, kind, norm)
    s_arg = None if s is None else full
    return _run(fn, x, shape, dt, dev, kind, into=False, s=s_arg, axes=ax, norm=norm)


def fftn(x, /, *, s=None, axes=None, norm="backward"):
    """The n-dimensional discrete Fourier transform over ``axes``."""
    return _many_axes("fftn", np.fft.fftn, x, s, axes, norm, real_in=False, real_out=False,
                      half="")


def ifftn(x, /, *, s=None, axes=None, norm="backward"):
    """The n-dimensional inverse discrete Fourier transform."""
    return _many_axes("ifftn", np.fft.ifftn, x, s, axes, norm, real_in=False, real_out=False,
                      half="")


def rfftn(x, /, *, s=None, axes=None, norm="backward"):
    """The n-dimensional transform of real input (the last axis halved)."""
    return _many_axes("rfftn", np.fft.rfftn, x, s, axes, norm, real_in=True, real_out=False,
                      half="out")


def irfftn(x, /, *, s=None, axes=None, norm="backward"):
    """The inverse of :func:`rfftn`: real output."""
    return _many_axes("irfftn", np.fft.irfftn, x, s, axes, norm, real_in=False, real_out=True,
                      half="in")


# NumPy's two-dimensional transforms (docs/numpy.md) -----------------------------------------
def _two(name: str, nd_fn, a, s, axes, norm, out):
    if norm is None:
        norm = "backward"
    r = nd_fn(a, s=s, axes=axes, norm=norm)
    if out is None:
        return r
    if not isinstance(out, ArrayBase):
        r.free()
        raise TypeError(f"fft.{name}(out=...) needs a gpuarrays array, got "
                        f"{type(out).__name__}")
    if out.shape != r.shape:
        r.free()
        raise ValueError(f"fft.{name}(): out has shape {out.shape}, the result {r.shape}; "
                         f"pass an out of the result's shape")
    try:
        out[...] = r
    finally:
        r.free()
    return out


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """NumPy's two-dimensional transform: :func:`fftn` over ``axes`` (the last two)."""
    return _two("fft2", fftn, a, s, axes, norm, out)


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """NumPy's two-dimensional inverse transform: :func:`ifftn` over ``axes``."""
    return _two("ifft2", ifftn, a, s, axes, norm, out)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """NumPy's two-dimensional transform of real input: :func:`rfftn` over ``axes``."""
    return _two("rfft2", rfftn, a, s, axes, norm, out)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """The inverse of :func:`rfft2`: :func:`irfftn` over ``axes``."""
    return _two("irfft2", irfftn, a, s, axes, norm, out)


# Device back-ends -------------------------------------------------------------------------
_STEP = {  # name: (inverse, hermitian input, conjugate input, conjugate output, half output)
    "fft": (False, False, False, False, False), "ifft": (True, False, False, False, False),
    "rfft": (False, False, False, False, True), "irfft": (True, True, False, False, False),
    "hfft": (True, True, True, False, False), "ihfft": (False, False, False, True, True)}
_SWAP = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _scale(norm: str, n: int, inverse: bool) -> float:
    if norm == "ortho":
        return 1.0 / np.sqrt(n)
    return 1.0 / n if (norm == "forward") != inverse else 1.0


def _device_step(name: str, x, ax: int, out, n: int, norm: str) -> None:
    """``out`` = the one-axis transform ``name`` of ``x`` along ``ax`` with ``n`` points,
    on the device (hfft and ihfft as NumPy defines them: irfft / rfft of the conjugate
    with the norm's direction swapped)."""
    inverse, herm, conj_in, conj_out, half = _STEP[name]
    if name in ("hfft", "ihfft"):
        norm = _SWAP[norm]
    nout = n // 2 + 1 if half else n
    with working(out._storage.device, x, out):  # no reset, no free under the passes
        device_fft.transform(x, ax, out, n=n, inverse=inverse, nout=nout, hermitian=herm,
                             conj_in=conj_in, conj_out=conj_out, scale=_scale(norm, n, inverse))


def _device_many(name: str, x, axes: list[int], full: list[int], dt, dev, kind, norm: str):
    """The n-d transform as NumPy composes it from one-axis steps (fftn/ifftn: the last
    axis first; rfftn: rfft on the last axis, then fft on the others in order; irfftn:
    ifft on all but the last in order, then irfft on the last); each intermediate from
    the pool, freed once the next step has read it; ``full`` the lengths along ``axes``)."""
    steps = list(zip(axes, full, strict=True))
    one = {"fftn": "fft", "ifftn": "ifft"}.get(name)
    if one is not None:
        plan = [(one, a, v) for a, v in reversed(steps)]
    elif name == "rfftn":
        plan = [("rfft", *steps[-1])] + [("fft", a, v) for a, v in steps[:-1]]
    else:
        plan = [("ifft", a, v) for a, v in steps[:-1]] + [("irfft", *steps[-1])]
    if not plan:  # no axes: NumPy returns the input converted
        return astype(x, dt)
    def one(step: str, a: int, v: int, out_dt: np.dtype):
        def run(cur):
            shape = list(cur._shape)
            shape[a] = v // 2 + 1 if step == "rfft" else v
            nxt = new_array(tuple(shape), out_dt, dev, kind)
            try:
                _device_step(step, cur, a, nxt, v, norm)
            except BaseException:
                nxt.free()
                raise
            return nxt
        return run

    last = len(plan) - 1
    return run_chain(x, [one(step, a, v, dt if k == last else _complex(dt))
                         for k, (step, a, v) in enumerate(plan)])


# Every device ------------------------------------------------------------------------------
def _freq_args(name: str, n, d, dtype, device):
    from .._memory.devices import get_device  # the memory layer, below us

    k = _length(name, n)
    if isinstance(d, bool) or not isinstance(d, int | float | np.number):
        raise TypeError(f"fft.{name}(): d must be a real number, got {d!r}")
    dev = get_device(device)
    if dtype is None:
        dt = _F8 if dev.info.float64 else _F4
    else:
        dt = dev.dtype_of(dtype)
        if dt.kind != "f":
            raise TypeError(f"fft.{name}(): dtype must be a real floating type, got {dt}")
    return k, float(d), dt, dev


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an ``n``-point transform with spacing ``d``
    (``[0, 1, ..., -(n // 2), ..., -1] / (d * n)``), made on ``device``."""
    k, d, dt, dev = _freq_args("fftfreq", n, d, dtype, device)
    return asarray(np.fft.fftfreq(k, d).astype(dt), device=dev)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The non-negative sample frequencies of :func:`rfft` (``n // 2 + 1`` of them)."""
    k, d, dt, dev = _freq_args("rfftfreq", n, d, dtype, device)
    return asarray(np.fft.rfftfreq(k, d).astype(dt), device=dev)


def _shift(name: str, x, axes, sign: int):
    dev, kind = check_arrays(name, x)
    nd = x.ndim
    if axes is None:
        axes = tuple(range(nd))
    elif isinstance(axes, int | np.integer):
        axes = (axes,)
    shifts = [0] * nd
    for a in axes:
        k = normalize_axis(f"fft.{name}", a, nd)
        shifts[k] += sign * (x._shape[k] // 2)
    out = new_array(x._shape, x._dtype, dev, kind)
    try:
        pieces = []
        for n, sh in zip(x._shape, shifts, strict=True):
            k = sh % n if n else 0
            if k == 0:
                pieces.append([(slice(None), slice(None))])
            else:  # out[(i + k) % n] = x[i]
                pieces.append([(slice(0, n - k), slice(k, n)), (slice(n - k, n), slice(0, k))])
        for combo in product(*pieces):
            src = tuple(p[0] for p in combo)
            dst = tuple(p[1] for p in combo)
            copy_raw(out[dst] if nd else out, x[src] if nd else x)
    except BaseException:
        out.free()
        raise
    return out


def fftshift(x, /, *, axes=None):
    """``x`` with the zero-frequency term moved to the centre of ``axes`` (all by default):
    a roll by ``n // 2``, as block copies on the device."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, /, *, axes=None):
    """The inverse of :func:`fftshift` (a roll by ``-(n // 2)``)."""
    return _shift("ifftshift", x, axes, -1)
