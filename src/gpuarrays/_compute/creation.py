"""The standard's creation functions, with its signatures and per-device default dtypes.

``dtype=None`` means the device's default (``__array_namespace_info__().default_dtypes``):
float64 for real floating values, or float32 on a device without float64 (complex128 /
complex64 likewise); int64 for integers; bool for bools.  ``ga.empty`` is the compiled
allocation path of the array layer (its ``dtype=None`` is the device's default floating
type too).  Every function also takes gpuarrays' ``kind=`` (``"device"``, ``"host"``,
``"unified"``).

Creation runs at allocation speed (docs/performance.md, "Creation"): ``zeros``, ``ones``,
``full`` and their ``*_like`` are one compiled call each (``_core.Filler``,
src/native/core/fill.c) that allocates and fills -- a memset or a repeated pattern on
``cpu``, one asynchronous ``clEnqueueSVMMemFill`` on OpenCL -- after the Python ``spec``
below has checked the arguments and given the value's bytes (remembered for Python
scalars).  ``arange``, ``linspace`` and ``eye`` of the common argument forms are generated
in C as NumPy computes them (in place on ``cpu``, one asynchronous upload on OpenCL); where
the compiled call declines (other arguments, a larger result on a device), ``arange`` and
``linspace`` compute their values with NumPy on the host and upload them (``from_host``;
nothing is read from the device), and ``eye``, ``tril`` and ``triu`` run index-aware
kernels on device back-ends (``device/indexed.py``) and NumPy on views of the raw memory
on ``cpu``; ``meshgrid`` copies broadcast views with the device's copy kernels
(docs/manipulation.md).
"""

from __future__ import annotations

import operator

import numpy as np

from .. import _core
from .._array import dlpack as _dlpack
from .._array.creation import empty, from_host, generated, write_new, writer
from .._array.make import ArrayBase, new_array
from .._array.transfer import copy_raw
from .._common.sizes import check_size
from .._memory.devices import get_device
from .ownership import filling, working
from .promotion import check_scalar

__all__ = ["arange", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
           "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like"]

_BOOL, _I8 = np.dtype(bool), np.dtype(np.int64)
_SCALARS = (bool, int, float, complex)
_PLAIN = frozenset(_SCALARS)


def _default_float(dev) -> np.dtype:
    return np.dtype(np.float64 if dev.info.float64 else np.float32)


def _default_complex(dev) -> np.dtype:
    return np.dtype(np.complex128 if dev.info.float64 else np.complex64)


def _scalar_dtype(value, dev) -> np.dtype:
    """The default dtype of a fill value on ``dev`` (Python scalars; NumPy values keep theirs
    except that float64/complex128 become the device's default on a device without them)."""
    if isinstance(value, (bool, np.bool_)):
        return _BOOL
    if type(value) is int:
        return _I8
    if type(value) is float:
        return _default_float(dev)
    if type(value) is complex:
        return _default_complex(dev)
    try:
        dt = np.asarray(value).dtype
    except (TypeError, ValueError) as e:
        raise TypeError(f"fill_value must be a bool, int, float or complex, got "
                        f"{type(value).__name__}") from e
    if dt.kind not in "biufc":
        raise TypeError(f"fill_value must be a bool, int, float or complex, got {value!r}")
    if not dev.info.float64 and dt.kind in "fc" and dt.itemsize == (8 if dt.kind == "f" else 16):
        return _default_float(dev) if dt.kind == "f" else _default_complex(dev)
    return dt


def _check_fill(value, dt: np.dtype) -> None:
    """Refuse what NumPy refuses before anything is allocated (int out of range)."""
    check_scalar(value, dt)
    if isinstance(value, ArrayBase):
        raise TypeError("fill_value must be a Python scalar, not a gpuarrays array; "
                        "use ga.broadcast_to(x, shape) and copy it")


def _pattern(value, dt: np.dtype) -> tuple[bytes | None, bool]:
    """``value``'s bytes as one element of ``dt`` and whether they may be remembered for
    an equal value (a Python scalar that converts exactly: nothing warned); None for a
    value the general path writes (``write_new``): an array-like, which broadcasts, or a
    value that does not convert, whose error it raises."""
    if type(value) not in _SCALARS and not isinstance(value, np.generic):
        return None, False
    try:
        host = np.asarray(value, dtype=dt)
    except (TypeError, ValueError):
        return None, False
    item = host.item() if dt.names is None else None
    exact = type(value) in _SCALARS and item is not None and (
        item == value or (item != item and value != value))
    return host.tobytes(), exact


def _number_spec(dev, dtype, value):
    """zeros/ones (and their ``_like``): the device's dtype for ``dtype`` (None: its
    default floating type) and the value's pattern (a ``_core.Filler``'s spec)."""
    dt = dev.dtype_of(dtype)
    return (dt, *_pattern(value, dt))


def _full_spec(dev, dtype, value):
    """full (and ``full_like``): ``dtype`` or the value's default dtype on the device, the
    value checked (``_check_fill``), and its pattern (a ``_core.Filler``'s spec)."""
    dt = _scalar_dtype(value, dev) if dtype is None else dev.dtype_of(dtype)
    _check_fill(value, dt)
    return (dt, *_pattern(value, dt))


# filled(shape, dtype, device, kind, value): allocate and fill in one compiled call
_NUMBERS = _core.Filler(spec=_number_spec, slow=write_new, writer_of=writer)
_number_filled = _NUMBERS.array
_full_filled = _core.Filler(spec=_full_spec, slow=write_new, writer_of=writer).array


def full(shape, fill_value, dtype=None, *, device=None, kind="device"):
    """A new array of ``shape`` filled with ``fill_value`` (``dtype=None``: bool, int64, or
    the device's default floating/complex type, after the value's Python type)."""
    return _full_filled(shape, dtype, device, kind, fill_value)


def zeros(shape, dtype=None, *, device=None, kind="device"):
    """A new array of zeros (``dtype=None``: the device's default floating type)."""
    return _number_filled(shape, dtype, device, kind, 0)


def ones(shape, dtype=None, *, device=None, kind="device"):
    """A new array of ones (``dtype=None``: the device's default floating type)."""
    return _number_filled(shape, dtype, device, kind, 1)


def _like(name: str, x, dtype, device, kind, shape):
    if not isinstance(x, ArrayBase):
        raise TypeError(f"{name}() takes a gpuarrays array, got {type(x).__name__}")
    dev = x._storage.device if device is None else get_device(device)
    dt = x._dtype if dtype is None else dev.dtype_of(dtype)
    return (x._shape if shape is None else shape, dt, dev,
            x._storage.kind if kind is None else kind)


def empty_like(x, /, *, dtype=None, device=None, kind=None, shape=None):
    """Like :func:`empty`: dtype, device, kind and shape default to ``x``'s."""
    shape, dt, dev, kind = _like("empty_like", x, dtype, device, kind, shape)
    return empty(shape, dt, device=dev, kind=kind)


def zeros_like(x, /, *, dtype=None, device=None, kind=None, shape=None):
    """Like :func:`zeros`: dtype, device, kind and shape default to ``x``'s."""
    shape, dt, dev, kind = _like("zeros_like", x, dtype, device, kind, shape)
    return _number_filled(shape, dt, dev, kind, 0)


def ones_like(x, /, *, dtype=None, device=None, kind=None, shape=None):
    """Like :func:`ones`: dtype, device, kind and shape default to ``x``'s."""
    shape, dt, dev, kind = _like("ones_like", x, dtype, device, kind, shape)
    return _number_filled(shape, dt, dev, kind, 1)


def full_like(x, /, fill_value, *, dtype=None, device=None, kind=None, shape=None):
    """Like :func:`full`: dtype, device, kind and shape default to ``x``'s."""
    shape, dt, dev, kind = _like("full_like", x, dtype, device, kind, shape)
    return _full_filled(shape, dt, dev, kind, fill_value)


def _number(name: str, what: str, v):
    if type(v) in _PLAIN:
        return v
    if isinstance(v, ArrayBase) or not isinstance(v, (int, float, complex, np.number,
                                                      np.bool_)):
        raise TypeError(f"{name}(): {what} must be a Python number, got {type(v).__name__}")
    return v


def arange(start, /, stop=None, step=1, *, dtype=None, device=None, kind="device"):
    """Values from ``start`` (inclusive) to ``stop`` (exclusive) spaced by ``step``; one
    argument means ``arange(0, start)``.  ``dtype=None``: int64 for ints, else the device's
    default floating type.  ``ValueError`` for a zero step."""
    if dtype is None:  # the common form: Python ints, NumPy's int64 values made in C
        out = generated.arange(start, stop, step, _I8, device, kind)
        if out is not NotImplemented:
            return out
    for what, v in (("start", start), ("stop", stop), ("step", step)):
        if v is not None or what != "stop":
            _number("arange", what, v)
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange(): step must not be zero")
    dev = get_device(device)
    ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
               for v in (start, stop, step))
    if dtype is None:
        dt = _I8 if ints else _default_float(dev)
    else:
        dt = dev.dtype_of(dtype)
    if ints:  # NumPy wraps a length past int64 to nothing
        check_size("arange", (max(0, -(-(int(stop) - int(start)) // int(step))),),
                   dt.itemsize)
    try:
        values = np.arange(start, stop, step, dtype=dt)
    except ValueError as e:  # NumPy's "Maximum allowed size exceeded"
        raise ValueError(f"arange(): {start}, {stop}, {step} give too many values ({e}); "
                         f"ask for fewer") from None
    return from_host(values, None, dev, kind)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True, kind="device"):
    """``num`` evenly spaced values from ``start`` to ``stop`` (included when
    ``endpoint``).  ``dtype=None``: the device's default floating type, or its default
    complex type when ``start`` or ``stop`` is complex.  ``ValueError`` for ``num < 0``."""
    if dtype is None:  # the common form: Python ints and floats, NumPy's values made in C
        out = generated.linspace(start, stop, num, endpoint, None, device, kind)
        if out is not NotImplemented:
            return out
    _number("linspace", "start", start)
    _number("linspace", "stop", stop)
    try:
        num = operator.index(num)
    except TypeError:
        raise TypeError(f"linspace(): num must be an int, got {num!r}") from None
    if num < 0:
        raise ValueError(f"linspace(): num must be >= 0, got {num}")
    dev = get_device(device)
    if dtype is None:
        cplx = isinstance(start, (complex, np.complexfloating)) or isinstance(
            stop, (complex, np.complexfloating))
        dt = _default_complex(dev) if cplx else _default_float(dev)
    else:
        dt = dev.dtype_of(dtype)
    wide = np.complex128 if dt.kind == "c" else np.float64
    check_size("linspace", (num,), np.dtype(wide).itemsize)
    host = np.linspace(start, stop, num, endpoint=endpoint, dtype=wide)
    return from_host(host.astype(dt), None, dev, kind)


def from_dlpack(x, /, *, device=None, copy=None):
    """A gpuarrays array from a DLPack producer: zero-copy when its memory is on one of our
    devices and no other ``device`` is asked for (see ``ga.asarray`` and docs/design.md)."""
    return _dlpack.from_dlpack(x, device=device, copy=copy)


# NumPy <= 2.4 returns a list from meshgrid(sparse=True, copy=False), 2.5 a tuple: the
# container follows the NumPy installed, decided once here (docs/numpy.md).
_SPARSE_VIEWS_AS_LIST = type(np.meshgrid(np.zeros(1), sparse=True, copy=False)) is list


def meshgrid(*arrays, copy=True, sparse=False, indexing="xy"):
    """Coordinate matrices from 1-d coordinate vectors, as NumPy's ``meshgrid`` (a tuple;
    for ``sparse=True, copy=False`` the container the installed NumPy returns: a list on
    NumPy <= 2.4, a tuple on 2.5).

    ``indexing="xy"`` (Cartesian) swaps the first two axes, ``"ij"`` (matrix) keeps them.
    ``sparse=True`` gives arrays with length-1 axes except their own (NumPy's
    broadcastable shapes); ``copy=False`` gives views over the inputs' storage instead
    of new arrays -- the full (not sparse) ones are read-only broadcast views (zero
    strides), as ``ga.broadcast_to``'s.  The arrays must be 1-d, as the standard says
    (NumPy flattens others: pass ``x.reshape(-1)``)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid(): indexing must be 'xy' or 'ij', got {indexing!r}")
    if copy not in (True, False) or sparse not in (True, False):
        raise TypeError(f"meshgrid(): copy and sparse must be True or False, got "
                        f"copy={copy!r}, sparse={sparse!r}")
    for a in arrays:
        if not isinstance(a, ArrayBase):
            raise TypeError(f"meshgrid() takes gpuarrays arrays, got {type(a).__name__}; "
                            f"copy it to the device first with ga.asarray(x, device=...)")
        a._live()
        if a.ndim != 1:
            raise ValueError(f"meshgrid() takes 1-d arrays, got shape {a._shape}; flatten it "
                             f"first with x.reshape(-1) (NumPy flattens it)")
        if a._storage.device != arrays[0]._storage.device:
            raise ValueError(f"meshgrid(): arrays on different devices "
                             f"({arrays[0]._storage.device} and {a._storage.device}); move "
                             f"one with x.to_device(...)")
    return _meshgrid(list(arrays), copy, sparse, indexing)


def _meshgrid(xs: list, copy: bool, sparse: bool, indexing: str) -> tuple:
    n = len(xs)
    shape = [a._shape[0] for a in xs]
    axis_of = list(range(n))
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
        axis_of[0], axis_of[1] = 1, 0
    out = []
    try:
        for a, ax in zip(xs, axis_of, strict=True):
            strides = [0] * n
            strides[ax] = a._strides[0]
            if sparse:
                own = [1] * n
                own[ax] = a._shape[0]
                view = a._derive(tuple(own), tuple(strides), a._offset, a._dtype,
                                 a._writeable)
                if not copy:
                    out.append(view)
                    continue
                try:
                    out.append(view.copy())
                finally:
                    view.free()
                continue
            if not copy:
                out.append(a._derive(tuple(shape), tuple(strides), a._offset, a._dtype, False))
                continue
            r = new_array(tuple(shape), a._dtype, a._storage.device, a._storage.kind)
            out.append(r)
            if 0 not in shape:
                with a._derive(tuple(shape), tuple(strides), a._offset, a._dtype,
                               False) as src:
                    copy_raw(r, src)
    except BaseException:
        for r in out:
            r.free()
        raise
    return out if sparse and not copy and _SPARSE_VIEWS_AS_LIST else tuple(out)


def _int(name: str, what: str, v) -> int:
    if type(v) is int:
        return v
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name}(): {what} must be an int, got {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{name}(): {what} must be an int, got {v!r}") from None


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None, kind="device"):
    """A new ``n_rows`` x ``n_cols`` array with ones on the ``k``-th diagonal and zeros
    elsewhere (``dtype=None``: the device's default floating type)."""
    # the common form, Python ints: NumPy's eye made in C
    out = _NUMBERS.eye(n_rows, n_cols, k, dtype, device, kind, 1)
    if out is not NotImplemented:
        return out
    n_rows = _int("eye", "n_rows", n_rows)
    n_cols = n_rows if n_cols is None else _int("eye", "n_cols", n_cols)
    k = _int("eye", "k", k)
    if n_rows < 0 or n_cols < 0:
        raise ValueError(f"eye(): n_rows and n_cols must be >= 0, got {n_rows} and {n_cols}")
    dev = get_device(device)
    dt = dev.dtype_of(dtype)
    check_size("eye", (n_rows, n_cols), dt.itemsize)
    out = empty((n_rows, n_cols), dt, device=dev, kind=kind)
    with filling(out):
        _matrix("eye", out, None, k)
    return out


def _tri(name: str, x, k):
    if not isinstance(x, ArrayBase):
        raise TypeError(f"{name}() takes a gpuarrays array, got {type(x).__name__}")
    x._live()
    if x.ndim < 2:
        raise ValueError(f"{name}() needs an array with at least 2 dimensions, got shape "
                         f"{x._shape}")
    k = _int(name, "k", k)
    out = new_array(x._shape, x._dtype, x._storage.device, x._storage.kind)
    with filling(out):
        _matrix(name, out, x, k)
    return out


def tril(x, /, *, k=0):
    """A new array: ``x`` on and below the ``k``-th diagonal of its last two axes, zero
    above (``ValueError`` for fewer than 2 dimensions)."""
    return _tri("tril", x, k)


def triu(x, /, *, k=0):
    """A new array: ``x`` on and above the ``k``-th diagonal of its last two axes, zero
    below (``ValueError`` for fewer than 2 dimensions)."""
    return _tri("triu", x, k)


def _matrix(op: str, out, x, k: int) -> None:
    if out.size == 0:
        return
    dev = out._storage.device
    R, C = out._shape[-2], out._shape[-1]
    # clamp k: a diagonal beyond the matrix keeps all or nothing, and fits 64 bits
    k = max(-R - 1, min(C + 1, k))
    if dev.backend == "cpu":
        from .cpu_engine import view

        mask = np.tri(R, C, k - 1 if op == "triu" else k, dtype=bool)
        if op == "triu":
            mask = ~mask
        elif op == "eye":
            mask = np.eye(R, C, k, dtype=bool)
        with working(dev, out, x):
            z = view(out)
            z[...] = 0
            if x is None:
                np.copyto(z, 1, where=mask, casting="unsafe")
            else:
                np.copyto(z, view(x), where=mask)
        return
    if out._dtype.names is not None:
        _structured_matrix(op, out, x, k)
        return
    from .device import indexed

    with working(dev, out, x):
        indexed.matrix(op, out, x, k)


def _structured_matrix(op: str, out, x, k: int) -> None:
    """``_matrix`` of a structured dtype on a device, whose kernels handle numbers: ``eye``
    zeroes ``out`` and writes the element whose every field is 1 along its diagonal (NumPy's
    eye); ``tril``/``triu`` run on the elements' bytes, moved to a leading axis (zero
    bytes are NumPy's zero of every field)."""
    R, C = out._shape[-2], out._shape[-1]
    if x is None:
        out.fill(0)
        count = min(R, C - k) if k >= 0 else min(R + k, C)
        if count > 0:
            start = k if k >= 0 else -k * C
            with out.reshape(-1) as flat, flat[start:start + (count - 1) * (C + 1) + 1:C + 1] \
                    as diagonal:
                diagonal.fill(np.ones((), out._dtype))
        return
    from .manipulation import moveaxis

    size = out._dtype.itemsize
    src = x.copy() if not x._is_c() else x
    try:
        with src.view(np.uint8) as b, b.reshape((*src._shape, size)) as elements, \
                moveaxis(elements, -1, 0) as fields, _tri(op, fields, k) as kept, \
                moveaxis(kept, 0, -1) as back, out.view(np.uint8) as ob, \
                ob.reshape((*out._shape, size)) as target:
            copy_raw(target, back)
    finally:
        if src is not x:
            src.free()

