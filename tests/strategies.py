"""Hypothesis strategies and NumPy-oracle helpers shared by the array test suite.

The oracle pattern: build a NumPy array ``n`` and a GPUArray ``g`` with the same
values and layout (``pair``), apply the same operation to both, and compare
layout (shape, strides, byte offset from the start of the allocation, flags)
and values (``.get()``) with :func:`assert_matches`.
"""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import gpuarrays as ga

# Every numeric dtype docs/design.md ("The storage model") supports, and one structured dtype (odd itemsize, no padding).
NUMERIC_DTYPES = [np.dtype(t) for t in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128")]
STRUCT_DTYPE = np.dtype([("x", "<i4"), ("y", "<f8"), ("z", "u1")])
ALL_DTYPES = [*NUMERIC_DTYPES, STRUCT_DTYPE]

# Hypothesis with the function-scoped ``device`` fixture: the fixture is the same for
# every example, which is what we want.
# GA_HYPOTHESIS_EXAMPLES=1000 for a long, randomised run.
_EXAMPLES = int(os.environ.get("GA_HYPOTHESIS_EXAMPLES", "0"))
SETTINGS = settings(max_examples=_EXAMPLES or 40, deadline=None, derandomize=not _EXAMPLES,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def supported(device: ga.Device, dtypes=ALL_DTYPES) -> list[np.dtype]:
    """The dtypes of ``dtypes`` that ``device`` can hold (an OpenCL device may lack float64;
    every device holds and computes float16)."""
    return [dt for dt in dtypes if device.supports(dt)]


def dtypes(device: ga.Device, choices=ALL_DTYPES) -> st.SearchStrategy[np.dtype]:
    return st.sampled_from(supported(device, choices))


def shapes(min_dims: int = 0, max_dims: int = 4, min_side: int = 0,
           max_side: int = 5) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes including 0-d and zero-size ones."""
    return st.lists(st.integers(min_side, max_side), min_size=min_dims,
                    max_size=max_dims).map(tuple)


def values(shape: tuple[int, ...], dtype: np.dtype, seed: int = 0) -> np.ndarray:
    """A C-contiguous NumPy array of distinct-ish, exactly representable values."""
    n = int(np.prod(shape, dtype=np.int64))
    if dtype.fields is not None:
        raw = (np.arange(n * dtype.itemsize, dtype=np.int64) * 7 + seed) % 251
        out = np.zeros(n, dtype)
        out["x"] = np.arange(n) * 3 - seed
        out["y"] = np.arange(n) * 0.5 + seed
        out["z"] = raw[:n] % 256
        return out.reshape(shape)
    base = (np.arange(n, dtype=np.int64) * 7 + seed) % 61
    if dtype.kind == "b":
        return (base % 3 == 0).reshape(shape)
    if dtype.kind == "c":
        return (base + 1j * (base % 5)).astype(dtype).reshape(shape)
    if dtype.kind == "i":
        base = base - 30
    return base.astype(dtype).reshape(shape)


def pair(shape, dtype, device, seed: int = 0, kind: str = "device"):
    """``(numpy_array, gpuarray)`` with equal values; the GPUArray is C-contiguous."""
    n = values(shape, np.dtype(dtype), seed)
    g = ga.asarray(n, device=device, kind=kind)
    return n, g


def np_offset(derived: np.ndarray, base: np.ndarray) -> int:
    """Byte offset of ``derived``'s element 0 from ``base``'s (the oracle of ``a.offset``)."""
    return (derived.__array_interface__["data"][0] - base.__array_interface__["data"][0])


def same_values(got: np.ndarray, expected: np.ndarray) -> None:
    """Shape, dtype and bytes equal (NaN-safe, works for structured dtypes)."""
    expected = np.asarray(expected)
    assert isinstance(got, np.ndarray)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.tobytes() == expected.tobytes(), (got, expected)


def assert_matches(g: ga.GPUArray, n: np.ndarray, n_base: np.ndarray | None = None,
                   offset: int | None = None, strict_empty: bool = False) -> None:
    """``g`` has ``n``'s layout and values.

    ``n_base`` is the NumPy array whose first byte corresponds to the start of
    ``g.storage``; give it to check the byte offset (or pass ``offset``).
    Strides and offsets of zero-size arrays depend on how NumPy made them;
    they are compared only with ``strict_empty`` (when ``n`` was derived from
    ``np.empty`` of the same shape as ``g``'s root).
    """
    assert type(g) is ga.GPUArray
    assert g.shape == n.shape
    assert g.dtype == n.dtype
    assert g.ndim == n.ndim
    assert g.size == n.size
    assert g.itemsize == n.itemsize
    assert g.nbytes == n.nbytes
    if n.size or strict_empty:
        assert g.strides == n.strides, (g.strides, n.strides)
    if n_base is not None:
        offset = np_offset(n, n_base)
    if offset is not None and (n.size or strict_empty):
        assert g.offset == offset, (g.offset, offset)
    assert g.flags.c_contiguous == n.flags.c_contiguous, ("C", g.shape, g.strides)
    assert g.flags.f_contiguous == n.flags.f_contiguous, ("F", g.shape, g.strides)
    assert g.flags.writeable == n.flags.writeable
    same_values(g.get(), n)


def np_index(n: np.ndarray, key) -> np.ndarray:
    """``n[key]``, as a 0-d array where NumPy would give a scalar (GPUArray never does)."""
    r = n[key]
    if isinstance(r, np.ndarray):
        return r
    return n[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)]


# indices --------------------------------------------------------------------------------
def _slice(n: int) -> st.SearchStrategy[slice]:
    bound = st.none() | st.integers(-n - 2, n + 2)
    step = st.none() | st.integers(-3, 3).filter(lambda s: s != 0)
    return st.builds(slice, bound, bound, step)


@st.composite
def basic_indices(draw, shape: tuple[int, ...], allow_none: bool = True,
                  allow_ellipsis: bool = True):
    """A valid basic index for ``shape``: ints (negative too), slices, None, Ellipsis."""
    ndim = len(shape)

    def item(n):
        if n > 0 and draw(st.booleans()):
            return draw(st.integers(-n, n - 1))
        return draw(_slice(n))

    n_lead = draw(st.integers(0, ndim))
    items = [item(n) for n in shape[:n_lead]]
    if allow_ellipsis and draw(st.booleans()):
        n_trail = draw(st.integers(0, ndim - n_lead))
        items += [Ellipsis] + [item(n) for n in shape[ndim - n_trail:]]
    if allow_none:
        for _ in range(draw(st.integers(0, 2))):
            items.insert(draw(st.integers(0, len(items))), None)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


# derivations ------------------------------------------------------------------------------
@st.composite
def derivation(draw, shape: tuple[int, ...], dtype: np.dtype):
    """One derivation ``(name, numpy_fn, ga_fn)`` applicable to an array of ``shape``.

    The function pairs apply the same operation to a NumPy array and to a
    GPUArray.  Operations NumPy refuses (e.g. an itemsize change on a
    non-contiguous last axis) are left to the caller: both must raise.
    """
    ndim = len(shape)
    names = ["index", "reshape", "view", "T", "expand_dims", "squeeze", "ravel",
             "broadcast_to"]
    if ndim >= 1:
        names += ["transpose", "moveaxis"]
    if ndim >= 2:
        names += ["swapaxes", "mT", "diagonal"]
    if dtype.kind == "c":
        names += ["real", "imag"]
    name = draw(st.sampled_from(names))
    if name == "index":
        key = draw(basic_indices(shape))
        return f"[{key!r}]", (lambda a: np_index(a, key)), (lambda a: a[key])
    if name == "reshape":
        size = int(np.prod(shape, dtype=np.int64))
        if size == 0:
            new = draw(st.sampled_from([(0,), (0, 2), (3, 0), (-1,), (2, 0, -1)]))
        else:
            divisors = [d for d in range(1, size + 1) if size % d == 0]
            first = draw(st.sampled_from(divisors))
            rest = size // first
            second = draw(st.sampled_from([d for d in divisors if rest % d == 0]))
            new = draw(st.sampled_from([(size,), (first, rest), (first, second, rest // second),
                                        (first, -1), (-1, second, rest // second)]))
        return f".reshape({new})", (lambda a: a.reshape(new)), (lambda a: a.reshape(new))
    if name == "view":
        target = draw(st.sampled_from([np.dtype(t) for t in
                                       ("u1", "i2", "u4", "f4", "i8", "c8", "c16")] + [dtype]))
        return f".view({target})", (lambda a: a.view(target)), (lambda a: a.view(target))
    if name == "T":
        return ".T", (lambda a: a.T), (lambda a: a.T)
    if name == "mT":
        return ".mT", (lambda a: a.mT), (lambda a: a.mT)
    if name == "transpose":
        axes = tuple(draw(st.permutations(range(ndim))))
        return (f".transpose{axes}", (lambda a: a.transpose(axes)),
                (lambda a: a.transpose(*axes)))
    if name == "swapaxes":
        i, j = draw(st.integers(-ndim, ndim - 1)), draw(st.integers(-ndim, ndim - 1))
        return f".swapaxes({i}, {j})", (lambda a: a.swapaxes(i, j)), (lambda a: a.swapaxes(i, j))
    if name == "moveaxis":
        i, j = draw(st.integers(-ndim, ndim - 1)), draw(st.integers(-ndim, ndim - 1))
        return (f"moveaxis({i}, {j})", (lambda a: np.moveaxis(a, i, j)),
                (lambda a: ga.moveaxis(a, i, j)))
    if name == "expand_dims":
        axis = draw(st.integers(-ndim - 1, ndim))
        return (f"expand_dims({axis})", (lambda a: np.expand_dims(a, axis)),
                (lambda a: ga.expand_dims(a, axis)))
    if name == "squeeze":
        ones = [i for i, n in enumerate(shape) if n == 1]
        axis = draw(st.none() | st.sampled_from(ones)) if ones else None
        return f".squeeze({axis})", (lambda a: a.squeeze(axis)), (lambda a: a.squeeze(axis))
    if name == "ravel":
        return ".ravel()", (lambda a: a.ravel()), (lambda a: a.ravel())
    if name == "broadcast_to":
        extra = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
        target = extra + tuple(draw(st.integers(0, 3)) if n == 1 else n for n in shape)
        return (f"broadcast_to({target})", (lambda a: np.broadcast_to(a, target)),
                (lambda a: ga.broadcast_to(a, target)))
    if name == "diagonal":
        k = draw(st.integers(-2, 2))
        return f".diagonal({k})", (lambda a: a.diagonal(k)), (lambda a: a.diagonal(k))
    if name == "real":
        return ".real", (lambda a: a.real), (lambda a: a.real)
    return ".imag", (lambda a: a.imag), (lambda a: a.imag)


# Named layouts of a (4, 5, 6) array, applied to NumPy and to GPUArrays alike
# (interchange and host-view tests).
LAYOUTS = {
    "whole": lambda x: x,
    "offset": lambda x: x[1:, 2:],
    "strided": lambda x: x[::2, :, 1::3],
    "negative": lambda x: x[::-1, :, ::-2],
    "transposed": lambda x: x.transpose(2, 0, 1),
    "0-d": lambda x: x[1, 2, 3, ...],
    "zero-size": lambda x: x[:, 3:3],
    "row": lambda x: x[2, 1],
}


def address(n: np.ndarray) -> int:
    """Address of element 0 of a NumPy array."""
    return n.__array_interface__["data"][0]
