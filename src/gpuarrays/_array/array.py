"""The array: one class for every array, derived or not.

A :class:`GPUArray` is a layout (shape, byte strides, byte offset, dtype) over
a shared :class:`~gpuarrays._memory.storage.Storage` plus one handle on it.  Views,
reshapes, reinterpretations and transposes are ``GPUArray`` objects over the
same storage -- never wrappers.  Moving data lives in ``transfer.py``; layout
arithmetic in ``layout.py``.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import _core
from .._common.dtypes import normalize_dtype
from .._common.errors import GPUArraysWarning
from .._common.raw import c_strides, is_c_contiguous, is_f_contiguous
from .._common.sizes import BYTES_MAX, check_size
from .._memory.alloc import new_storage
from .._memory.cache import current_cache
from .._memory.devices import get_device
from .._memory.storage import FREED_CACHE, FREED_FORCED, Storage
from ..backends.base import RawView
from . import conversion as _conversion
from . import dlpack as _dlpack
from . import transfer
from .hooks import HOOKS as _HOOKS
from .layout import basic_index, engine, from_engine, normalize_shape
from .make import make, new_array, wrap_storage

__all__ = ["GPUArray", "new_array", "wrap_storage"]

class _NotApplicable(ValueError, AttributeError):
    """An attribute that this array lacks (``mT`` below 2-d): NumPy's ``ValueError``, and an
    ``AttributeError`` so that ``hasattr`` and ``getattr(a, name, default)`` answer."""


_NO_CONSTRUCTOR = ("GPUArray has no public constructor; create arrays with ga.empty, "
                   "ga.zeros, ga.ones, ga.full, ga.arange, ga.asarray or ga.unsafe_wrap")


class Flags:
    """``a.flags``: ``c_contiguous``, ``f_contiguous``, ``writeable`` (read-only)."""

    __slots__ = ("c_contiguous", "f_contiguous", "writeable")

    def __init__(self, c: bool, f: bool, w: bool) -> None:
        self.c_contiguous = c
        self.f_contiguous = f
        self.writeable = w

    def __getitem__(self, name: str) -> bool:
        key = {"C_CONTIGUOUS": "c_contiguous", "C": "c_contiguous", "F_CONTIGUOUS": "f_contiguous",
               "F": "f_contiguous", "WRITEABLE": "writeable", "W": "writeable"}.get(name.upper())
        if key is None:
            raise KeyError(f"unknown flag {name!r}; expected C_CONTIGUOUS, F_CONTIGUOUS or WRITEABLE")
        return getattr(self, key)

    def __repr__(self) -> str:
        return (f"  C_CONTIGUOUS : {self.c_contiguous}\n  F_CONTIGUOUS : {self.f_contiguous}\n"
                f"  WRITEABLE : {self.writeable}")


_make = make


def _new_array_slow(shape: tuple, dtype: np.dtype, device, kind: str) -> GPUArray:
    """``new_array`` for sizes past 2**63 bytes and for negative lengths (a caller's size
    that wrapped): both ``ValueError`` before any allocation."""
    if any(n < 0 for n in shape):
        raise ValueError(f"cannot make an array of shape {shape}: a length is negative (a "
                         f"size computed from data that wrapped around?)")
    itemsize = dtype.itemsize
    check_size(None, shape, itemsize)
    return _make(new_storage(device, kind, math.prod(shape) * itemsize), shape,
                 c_strides(shape, itemsize), 0, dtype, True, True)


def _is_basic(key: object) -> bool:
    items = key if type(key) is tuple else (key,)
    for k in items:
        if not (k is None or k is Ellipsis or type(k) is slice
                or (isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)))):
            return False
    return True


class GPUArray(_core.Array):
    """An array in device memory over a shared, reference-counted storage.

    Created by factories only (``ga.empty``, ``ga.asarray`` ...).  Every array
    holds one handle on ``a.storage``; ``a.free()`` releases it now (other
    arrays sharing the storage are unaffected), ``a.free(force=True)`` releases
    the memory for every sharer.  Using a freed array raises
    ``FreedArrayError``; metadata keeps working.
    """

    # Fields (_storage, _shape, _strides, _offset, _dtype, _writeable, _contig, _freed),
    # free() and the finalizer are compiled (_core.Array).
    __slots__ = ()
    __array_priority__ = 100

    def __new__(cls, *args, **kwargs):
        raise TypeError(_NO_CONSTRUCTOR)

    # lifetime (free() and the finalizer are compiled) --------------------------------
    def __enter__(self) -> GPUArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    @property
    def is_freed(self) -> bool:
        """Whether using this array would raise ``FreedArrayError``."""
        return self._freed or self._storage.is_freed

    def _live(self) -> Storage:
        """The storage, after checking the array may be used."""
        st = self._storage
        if self._freed or st._reason is not None or not st._epoch.live:
            raise self._freed_error()
        return st

    def _freed_error(self):
        st = self._storage
        local = self._freed and st._reason not in (FREED_FORCED, FREED_CACHE)
        return st.freed_error(local)

    # metadata (works on freed arrays) -------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides (may be negative or zero)."""
        return self._strides

    @property
    def offset(self) -> int:
        """Byte offset of element ``[0, ..., 0]`` from the start of the storage."""
        return self._offset

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return math.prod(self._shape) * self._dtype.itemsize

    @property
    def device(self):
        return self._storage.device

    @property
    def kind(self) -> str:
        return self._storage.kind

    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def flags(self) -> Flags:
        itemsize = self._dtype.itemsize
        return Flags(self._is_c(), is_f_contiguous(self._shape, self._strides, itemsize),
                     self._writeable)

    @property
    def data_ptr(self) -> int:
        """Address of element ``[0, ..., 0]`` (raises on a freed array)."""
        return self._live().ptr + self._offset

    def _is_c(self) -> bool:
        c = self._contig
        if c is None:
            c = self._contig = is_c_contiguous(self._shape, self._strides, self._dtype.itemsize)
        return c

    def _raw(self) -> RawView:
        return RawView(self._live().ptr + self._offset, self._shape, self._strides, self._dtype)

    # deriving ---------------------------------------------------------------------
    def _derive(self, shape, strides, offset, dtype, writeable, contiguous=None) -> GPUArray:
        st = self._storage
        if self._freed or st._reason is not None or not st._epoch.live:
            raise self._freed_error()
        return _make(st, shape, strides, offset, dtype,
                     writeable, contiguous)

    def _engine(self) -> np.ndarray:
        self._live()
        return engine(self._shape, self._strides, self._offset, self._dtype, self._writeable)

    def _from_engine(self, arr: np.ndarray) -> GPUArray:
        shape, strides, offset, dtype, writeable = from_engine(arr)
        return self._derive(shape, strides, offset, dtype, writeable)

    def __getitem__(self, key) -> GPUArray:
        st = self._storage
        if self._freed or st._reason is not None or not st._epoch.live:
            raise self._freed_error()
        shape = self._shape
        if type(key) is slice and shape and key.step is None:
            # Hot path: a[i:j] -- NumPy's arithmetic inlined, zero-size results deferred.
            start, stop, _ = key.indices(shape[0])
            if stop > start:
                strides = self._strides
                return _make(st, (stop - start,) + shape[1:], strides,
                             self._offset + start * strides[0], self._dtype, self._writeable,
                             self._contig)
        found = basic_index(shape, self._strides, key)
        if found is not None:
            shape, strides, delta = found
            return self._derive(shape, strides, self._offset + delta, self._dtype,
                                self._writeable)
        if _is_basic(key):
            eng = self._engine()
            if type(key) is not tuple:
                key = (key,)
            return self._from_engine(eng[key + (Ellipsis,)] if Ellipsis not in key
                                     else eng[key])
        return _HOOKS.getitem(self, key)  # indexing: integer arrays and masks

    def reshape(self, *shape, order: str = "C", copy: bool | None = None) -> GPUArray:
        """NumPy's reshape: a view when NumPy gives one, else a copy.

        ``copy=False`` raises ``ValueError`` when a copy would be needed;
        reshaping to the same shape returns ``self``.
        """
        if len(shape) == 1:
            shape = shape[0]
            if type(shape) is int and copy is None and order == "C" and self._contig:
                # Hot path: a contiguous array to 1-d.
                st = self._storage
                if self._freed or st._reason is not None or not st._epoch.live:
                    raise self._freed_error()
                old_shape = self._shape
                if len(old_shape) == 1 and (shape == old_shape[0] or shape == -1):
                    return self
                if shape == -1:
                    shape = math.prod(old_shape)
                if shape == math.prod(old_shape):
                    return _make(st, (shape,), (self._dtype.itemsize,), self._offset, self._dtype,
                                 self._writeable, True)
        if order not in ("C", "F", "A"):
            raise ValueError(f"order must be 'C', 'F' or 'A', got {order!r}")
        if (type(shape) is tuple and shape == self._shape and copy is not True
                and all(type(n) is int for n in shape)):  # (4, 6.0) == (4, 6) is a TypeError
            self._live()
            return self
        if order == "C" and copy is None and not self._freed and (
                self._contig or self._contig is None and self._is_c()):
            new_shape = _resolve_shape(shape, math.prod(self._shape))
            if new_shape is not None:
                if new_shape == self._shape:
                    self._live()
                    return self
                return self._derive(new_shape, c_strides(new_shape, self._dtype.itemsize),
                                    self._offset, self._dtype, self._writeable, True)
        if copy:
            return self.copy(order="F" if order == "F" else "C").reshape(shape, order=order)
        eng = self._engine()
        try:
            result = eng.reshape(shape, order=order, copy=False)
        except ValueError as e:
            if "copy" not in str(e):
                raise
            if copy is False:
                raise ValueError(
                    f"cannot reshape array of shape {self._shape} into {shape} without a copy "
                    f"(its strides {self._strides} do not allow a view); pass copy=None or "
                    f"call .copy() first") from None
            return self.copy(order="F" if order == "F" else "C").reshape(shape, order=order)
        if result.shape == self._shape and result.strides == self._strides:
            return self
        return self._from_engine(result)

    def view(self, dtype=None) -> GPUArray:
        """Reinterpret the bytes as ``dtype`` (NumPy's rules), sharing the storage."""
        if dtype is None:
            return self._derive(self._shape, self._strides, self._offset, self._dtype,
                                self._writeable, self._contig)
        st = self._storage
        try:
            dt = st.device._accepts[dtype]
        except (KeyError, TypeError):
            dt = None
        if dt is not None and dt.itemsize == self._dtype.itemsize:
            # Hot path: same-itemsize reinterpretation of a checked dtype.
            if self._freed or st._reason is not None or not st._epoch.live:
                raise self._freed_error()
            return _make(st, self._shape, self._strides, self._offset, dt,
                         self._writeable, self._contig)
        if isinstance(dtype, type) and issubclass(dtype, GPUArray):
            return self.view()
        dt = st.device.dtype_of(dtype)
        if dt.itemsize == self._dtype.itemsize and dt.subdtype is None:
            return self._derive(self._shape, self._strides, self._offset, dt,
                                self._writeable, self._contig)
        eng = self._engine()
        try:
            result = eng.view(dt)
        except ValueError as e:
            raise ValueError(
                f"cannot reinterpret a {self._dtype} array of shape {self._shape} and "
                f"strides {self._strides} as {dt}: {e}") from None
        return self._from_engine(result)

    @property
    def T(self) -> GPUArray:
        st = self._storage
        if self._freed or st._reason is not None or not st._epoch.live:
            raise self._freed_error()
        return _make(st, self._shape[::-1], self._strides[::-1], self._offset, self._dtype,
                     self._writeable, None if len(self._shape) > 1 else self._contig)

    @property
    def mT(self) -> GPUArray:
        """The last two axes swapped (a view).  Below 2 dimensions it raises an error that
        is both NumPy's ``ValueError`` and an ``AttributeError``, so ``hasattr(a, "mT")``
        answers ``False`` instead of raising (duck-typing clients probe attributes)."""
        if len(self._shape) < 2:
            raise _NotApplicable(f"mT needs at least 2 dimensions, this array has shape "
                                 f"{self._shape}; use a.T or reshape to 2-d first")
        return self.swapaxes(-1, -2)

    def transpose(self, *axes) -> GPUArray:
        if not axes or (len(axes) == 1 and axes[0] is None):
            return self.T
        if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            axes = tuple(axes[0])
        return self._from_engine(self._engine().transpose(axes))

    def swapaxes(self, axis1: int, axis2: int) -> GPUArray:
        return self._from_engine(self._engine().swapaxes(axis1, axis2))

    def squeeze(self, axis=None) -> GPUArray:
        return self._from_engine(self._engine().squeeze(axis))

    def ravel(self, order: str = "C") -> GPUArray:
        """A 1-d view when NumPy's ``ravel`` gives one (C-contiguous for ``"C"``,
        Fortran-contiguous for ``"F"``), else a copy.  ``"A"`` and ``"K"`` read Fortran
        order for a Fortran-contiguous array, C order otherwise."""
        order = self._memory_order(order, "ravel")
        if order == "F" and len(self._shape) > 1:
            t = self.T
            try:
                return t.ravel()  # a view of t's storage, or a copy: never t itself
            finally:
                t.free()
        if self._is_c():
            return self.reshape(self.size)
        return self.copy().reshape(self.size)

    def flatten(self, order: str = "C") -> GPUArray:
        """A 1-d copy, always new storage (as NumPy); ``order`` as in :meth:`ravel`."""
        if self._memory_order(order, "flatten") == "F" and len(self._shape) > 1:
            t = self.T
            try:
                return t.flatten()
            finally:
                t.free()
        return self.copy().reshape(self.size)

    def _memory_order(self, order, what: str) -> str:
        """``"C"`` or ``"F"`` for NumPy's ``order`` argument (``"A"``/``"K"``: ``"F"`` for a
        Fortran-contiguous array that is not C-contiguous)."""
        if order is None:
            order = "K"
        if order not in ("C", "F", "A", "K"):
            raise ValueError(f"{what}(): order must be one of 'C', 'F', 'A' or 'K', got "
                             f"{order!r}")
        if order in ("A", "K"):
            f = is_f_contiguous(self._shape, self._strides, self._dtype.itemsize)
            return "F" if f and not self._is_c() else "C"
        return order

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> GPUArray:
        """Read-only strided view of a diagonal, as NumPy."""
        return self._from_engine(self._engine().diagonal(offset, axis1, axis2))

    @property
    def real(self) -> GPUArray:
        if self._dtype.kind != "c":
            return self.view()
        return self._from_engine(self._engine().real)

    @real.setter
    def real(self, value) -> None:
        """``a.real = v``: writes the real parts (the whole array of a real array)."""
        part = self.real
        try:
            part[...] = value
        finally:
            part.free()

    @property
    def imag(self) -> GPUArray:
        """The imaginary part: a view of a complex array.  Of a real array, NumPy's answer:
        a read-only array of zeros of the same dtype and shape -- one zero element with
        zero strides, so it costs one pool block whatever the shape (docs/decisions.md,
        "Duck typing")."""
        if self._dtype.kind != "c":
            return self._zeros_view()
        return self._from_engine(self._engine().imag)

    @imag.setter
    def imag(self, value) -> None:
        """``a.imag = v``: writes the imaginary parts of a complex array; a real array has
        none to set (``TypeError``, as NumPy)."""
        if self._dtype.kind != "c":
            raise TypeError(f"array does not have imaginary part to set (a {self._dtype} "
                            f"array); convert it first with astype(ga.complex64)")
        part = self._from_engine(self._engine().imag)
        try:
            part[...] = value
        finally:
            part.free()

    def _zeros_view(self) -> GPUArray:
        st = self._live()
        zero = new_array(() if self.size else self._shape, self._dtype, st.device, st.kind)
        try:
            if self.size:
                transfer.assign(zero, np.zeros((), self._dtype))
            return zero._derive(self._shape, zero._strides if not self.size
                                else (0,) * len(self._shape), 0, self._dtype, False)
        finally:
            zero.free()

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of unsized object (a 0-d GPUArray)")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d GPUArray")
        for i in range(self._shape[0]):
            yield self[i]

    # writes and copies -----------------------------------------------------------
    def __setitem__(self, key, value) -> None:
        if not self._writeable:
            raise ValueError("assignment destination is read-only")
        found = basic_index(self._shape, self._strides, key) if not self._freed else None
        if found is not None:
            shape, strides, delta = found
            target = self._derive(shape, strides, self._offset + delta, self._dtype, True)
        elif self._freed or _is_basic(key):
            target = self[key]
        else:
            _HOOKS.setitem(self, key, value)  # indexing: integer arrays and masks
            return
        try:
            transfer.assign(target, value)
        finally:
            target.free()

    def __delitem__(self, key) -> None:
        raise ValueError("cannot delete array elements (NumPy neither); make a new array "
                         "without them, e.g. ga.delete(a, index) or a[mask]")

    def fill(self, value) -> None:
        """Set every element to ``value`` (converted like NumPy)."""
        if not self._writeable:
            raise ValueError("assignment destination is read-only")
        transfer.assign(self, value)

    def copy(self, order: str = "C") -> GPUArray:
        """A copy in new, C-contiguous storage (Fortran with ``order='F'``, and with
        ``"A"``/``"K"`` for a Fortran-contiguous array that is not C-contiguous)."""
        if order != "C" and order != "F":
            order = self._memory_order(order, "copy")
        return transfer.copy(self, self._dtype, order)

    def astype(self, dtype, order: str = "K", casting: str = "unsafe", subok: bool = True,
               copy: bool = True) -> GPUArray:
        """Convert to ``dtype`` (NumPy's conversions); ``copy=False`` may return ``self``.

        ``casting`` is NumPy's rule (``TypeError`` when it refuses the conversion);
        ``order`` is the copy's layout (``"K"``/``"A"``: Fortran for a Fortran-contiguous
        array, else C); ``subok`` changes nothing (there are no subclasses).  ``copy``
        is a bool (``TypeError`` otherwise, e.g. for ``"maybe"``)."""
        if copy is not True and copy is not False and type(copy) is not np.bool_:
            raise TypeError(f"astype(): copy must be True or False, got {copy!r}; False "
                            f"returns the array itself when the dtype does not change")
        dt = normalize_dtype(dtype)
        if casting != "unsafe":
            if casting not in ("no", "equiv", "safe", "same_kind"):
                raise ValueError(f"astype(): casting must be one of 'no', 'equiv', 'safe', "
                                 f"'same_kind' or 'unsafe', got {casting!r}")
            if not np.can_cast(self._dtype, dt, casting):
                raise TypeError(f"Cannot cast array data from {self._dtype!r} to {dt!r} "
                                f"according to the rule {casting!r}; pass casting='unsafe'")
        layout = "C" if order == "K" and self._contig else self._memory_order(order, "astype")
        if not copy and dt == self._dtype and (
                order == "K" or (layout == "C" and self._is_c())
                or (layout == "F" and self.flags.f_contiguous)):
            self._live()  # any layout is order "K"'s; "A": C or Fortran contiguous
            return self
        self._storage.device.require(dt)
        return transfer.copy(self, dt, layout)

    def get(self, out: np.ndarray | None = None, blocking: bool = True) -> np.ndarray:
        """Copy to a new NumPy array, or into ``out`` (same shape).  ``blocking=False`` with
        ``out`` (same dtype, both C-contiguous) on OpenCL or CUDA enqueues the copy on the
        current stream and returns at once: wait for that stream (``synchronize()`` or an
        event recorded after the call) before reading ``out``; otherwise it blocks."""
        return transfer.to_host(self, out, blocking)

    def tolist(self):
        return self.get().tolist()

    def item(self, *args):
        """An element as a Python scalar, as NumPy: ``a.item()`` (size-1 arrays),
        ``a.item(i)`` (flat index, C order) or ``a.item(i, j, ...)`` (one index per axis).
        Copies that one element to the host."""
        if len(args) == 1 and isinstance(args[0], tuple):
            args = args[0]
        if not args:
            if self.size != 1:
                raise ValueError(f"can only convert an array of size 1 to a Python scalar, "
                                 f"this one has shape {self._shape}; pass an index "
                                 f"(a.item(i) or a.item(i, j, ...))")
            return self.get().item()
        if len(args) == 1:
            size = self.size
            i = operator.index(args[0])
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for size {size}")
            args = np.unravel_index(i % size, self._shape) if self._shape else ()
        elif len(args) != len(self._shape):
            raise ValueError(f"item(): incorrect number of indices for an array of shape "
                             f"{self._shape}: {len(args)}; pass one per axis or one flat index")
        with self[tuple(int(k) for k in args)] as element:
            return element.get().item()

    def tobytes(self, order: str = "C") -> bytes:
        """The raw bytes, as NumPy's ``tobytes`` (copies the array to the host)."""
        return self.get().tobytes(order)

    def tofile(self, fid, sep: str = "", format: str = "%s") -> None:
        """Write to a file as NumPy's ``tofile`` (copies the array to the host)."""
        self.get().tofile(fid, sep, format)

    def dumps(self) -> bytes:
        """A pickle of the array (``pickle.loads`` restores it on a device)."""
        import pickle

        return pickle.dumps(self)

    def dump(self, file) -> None:
        """Pickle the array into ``file`` (a path or a binary file)."""
        import pickle

        if isinstance(file, (str, bytes)) or hasattr(file, "__fspath__"):
            with open(file, "wb") as f:
                pickle.dump(self, f)
        else:
            pickle.dump(self, file)

    def __copy__(self) -> GPUArray:
        return self.copy()

    def __deepcopy__(self, memo) -> GPUArray:
        return self.copy()

    @classmethod
    def __class_getitem__(cls, item):
        import types

        return types.GenericAlias(cls, item)

    def getfield(self, dtype, offset: int = 0) -> GPUArray:
        """A view of ``dtype`` at byte ``offset`` inside each element, as NumPy."""
        dt = self._storage.device.dtype_of(dtype)
        offset = operator.index(offset)
        if offset < 0 or offset + dt.itemsize > self._dtype.itemsize:
            raise ValueError(f"getfield(): {dt} at offset {offset} does not fit in the "
                             f"{self._dtype.itemsize}-byte elements of this {self._dtype} "
                             f"array; need offset >= 0 and offset + {dt.itemsize} <= "
                             f"{self._dtype.itemsize}")
        return self._derive(self._shape, self._strides, self._offset + offset, dt,
                            self._writeable)

    def byteswap(self, inplace: bool = False) -> GPUArray:
        """The bytes of each element (of each part of a complex) reversed, as NumPy; on the
        device by a reversed strided copy.  ``inplace=True`` writes them back and returns
        ``self``."""
        unit = self._dtype.itemsize // (2 if self._dtype.kind == "c" else 1)
        if unit == 1 or not self.size:
            result = self if inplace else self.copy()
            return result
        flat = self.flatten()
        try:
            raw = flat.view(np.uint8)
            rows = raw.reshape(-1, unit)
            flipped = rows[:, ::-1]
            swapped = flipped.copy()
            for t in (flipped, rows, raw):
                t.free()
            line = swapped.reshape(-1)
            typed = line.view(self._dtype)
            result = typed.reshape(self._shape)
            for t in {id(x): x for x in (swapped, line, typed)}.values():
                if t is not result:
                    t.free()
        finally:
            flat.free()
        if not inplace:
            return result
        try:
            self[...] = result
        finally:
            result.free()
        return self

    @property
    def base(self) -> GPUArray | None:
        """``None`` for an array that is its storage's whole allocation as allocated (what
        a factory or a copy returns), else an array over the whole storage (the bytes the
        view looks into, as uint8, or in the view's dtype when it divides them).  Unlike
        NumPy it is a new object each time, not the array the view was taken from: an
        array keeps its storage, not the array it came from (docs/numpy.md)."""
        st = self._live()
        itemsize = self._dtype.itemsize
        if (self._offset == 0 and self._writeable and self._is_c()
                and math.prod(self._shape) * itemsize == st.nbytes):
            return None
        dt = self._dtype if st.nbytes % itemsize == 0 else np.dtype(np.uint8)
        n = st.nbytes // dt.itemsize
        return self._derive((n,), (dt.itemsize,), 0, dt, True, True)

    @property
    def flat(self) -> FlatIter:
        """A flat (C-order) view for indexing: ``a.flat[i]``, ``a.flat[i:j]``,
        ``a.flat[[i, j]]``, ``a.flat[...] = v``, ``len``, iteration; ``a.flat = v`` fills
        (repeating ``v`` as NumPy does)."""
        self._live()
        return FlatIter(self)

    @flat.setter
    def flat(self, value) -> None:
        FlatIter(self)[...] = value

    def __divmod__(self, other):
        q = _HOOKS.binary("floor_divide", self, other)
        if q is NotImplemented:
            return q
        return q, _HOOKS.binary("remainder", self, other)

    def __rdivmod__(self, other):
        q = _HOOKS.reflected("floor_divide", self, other)
        if q is NotImplemented:
            return q
        return q, _HOOKS.reflected("remainder", self, other)

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(
                f"The truth value of an array with more than one element is ambiguous "
                f"(shape {self._shape}); copy it with .get() and use .any() or .all()")
        return bool(self.item())

    # operators (the compute layer fills the hooks, _array/hooks.py) -------------------
    __hash__ = None  # elementwise == makes arrays unhashable, as NumPy's

    def __add__(self, other):
        return _HOOKS.binary("add", self, other)

    def __radd__(self, other):
        return _HOOKS.reflected("add", self, other)

    def __iadd__(self, other):
        return _HOOKS.inplace("add", self, other)

    def __sub__(self, other):
        return _HOOKS.binary("subtract", self, other)

    def __rsub__(self, other):
        return _HOOKS.reflected("subtract", self, other)

    def __isub__(self, other):
        return _HOOKS.inplace("subtract", self, other)

    def __mul__(self, other):
        return _HOOKS.binary("multiply", self, other)

    def __rmul__(self, other):
        return _HOOKS.reflected("multiply", self, other)

    def __imul__(self, other):
        return _HOOKS.inplace("multiply", self, other)

    def __truediv__(self, other):
        return _HOOKS.binary("divide", self, other)

    def __rtruediv__(self, other):
        return _HOOKS.reflected("divide", self, other)

    def __itruediv__(self, other):
        return _HOOKS.inplace("divide", self, other)

    def __floordiv__(self, other):
        return _HOOKS.binary("floor_divide", self, other)

    def __rfloordiv__(self, other):
        return _HOOKS.reflected("floor_divide", self, other)

    def __ifloordiv__(self, other):
        return _HOOKS.inplace("floor_divide", self, other)

    def __mod__(self, other):
        return _HOOKS.binary("remainder", self, other)

    def __rmod__(self, other):
        return _HOOKS.reflected("remainder", self, other)

    def __imod__(self, other):
        return _HOOKS.inplace("remainder", self, other)

    def __pow__(self, other, mod=None):
        return _HOOKS.binary("pow", self, other)

    def __rpow__(self, other, mod=None):
        return _HOOKS.reflected("pow", self, other)

    def __ipow__(self, other):
        return _HOOKS.inplace("pow", self, other)

    def __and__(self, other):
        return _HOOKS.binary("bitwise_and", self, other)

    def __rand__(self, other):
        return _HOOKS.reflected("bitwise_and", self, other)

    def __iand__(self, other):
        return _HOOKS.inplace("bitwise_and", self, other)

    def __or__(self, other):
        return _HOOKS.binary("bitwise_or", self, other)

    def __ror__(self, other):
        return _HOOKS.reflected("bitwise_or", self, other)

    def __ior__(self, other):
        return _HOOKS.inplace("bitwise_or", self, other)

    def __xor__(self, other):
        return _HOOKS.binary("bitwise_xor", self, other)

    def __rxor__(self, other):
        return _HOOKS.reflected("bitwise_xor", self, other)

    def __ixor__(self, other):
        return _HOOKS.inplace("bitwise_xor", self, other)

    def __lshift__(self, other):
        return _HOOKS.binary("bitwise_left_shift", self, other)

    def __rlshift__(self, other):
        return _HOOKS.reflected("bitwise_left_shift", self, other)

    def __ilshift__(self, other):
        return _HOOKS.inplace("bitwise_left_shift", self, other)

    def __rshift__(self, other):
        return _HOOKS.binary("bitwise_right_shift", self, other)

    def __rrshift__(self, other):
        return _HOOKS.reflected("bitwise_right_shift", self, other)

    def __irshift__(self, other):
        return _HOOKS.inplace("bitwise_right_shift", self, other)

    def __eq__(self, other):
        return _HOOKS.binary("equal", self, other)

    def __ne__(self, other):
        return _HOOKS.binary("not_equal", self, other)

    def __lt__(self, other):
        return _HOOKS.binary("less", self, other)

    def __le__(self, other):
        return _HOOKS.binary("less_equal", self, other)

    def __gt__(self, other):
        return _HOOKS.binary("greater", self, other)

    def __ge__(self, other):
        return _HOOKS.binary("greater_equal", self, other)

    def __neg__(self):
        return _HOOKS.unary("negative", self)

    def __pos__(self):
        return _HOOKS.unary("positive", self)

    def __invert__(self):
        return _HOOKS.unary("bitwise_invert", self)

    def __abs__(self):
        return _HOOKS.unary("abs", self)

    # linear algebra: @ is matmul (docs/linalg.md)
    def __matmul__(self, other):
        return _HOOKS.binary("matmul", self, other)

    def __rmatmul__(self, other):
        return _HOOKS.reflected("matmul", self, other)

    def __imatmul__(self, other):
        return _HOOKS.inplace("matmul", self, other)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy ufuncs the namespace has run on the device; others raise ``TypeError`` saying
        what to do instead (``NotImplemented`` only when another library's array takes part)."""
        return _HOOKS.ufunc(self, ufunc, method, *inputs, **kwargs)

    # NumPy's function protocol and NumPy-style methods (clients; _compute/numpy_protocol.py)
    def __array_function__(self, func, types, args, kwargs):
        """``np.sum(a)``, ``np.concatenate([a, b])``...: the namespace's function on the
        device; ``NotImplemented`` (NumPy raises ``TypeError``) for the rest."""
        return _HOOKS.function(self, func, types, args, kwargs)

    sum = _HOOKS.method_of("sum", "Sum over ``axis`` (``np.sum``'s arguments).")
    prod = _HOOKS.method_of("prod", "Product over ``axis`` (``np.prod``'s arguments).")
    max = _HOOKS.method_of("max", "Largest element over ``axis`` (``np.max``'s arguments).")
    min = _HOOKS.method_of("min", "Smallest element over ``axis`` (``np.min``'s arguments).")
    mean = _HOOKS.method_of("mean", "Mean over ``axis`` (``np.mean``'s arguments).")
    std = _HOOKS.method_of("std", "Standard deviation; ``ddof`` is the standard's ``correction``.")
    var = _HOOKS.method_of("var", "Variance; ``ddof`` is the standard's ``correction``.")
    argmax = _HOOKS.method_of("argmax", "Index of the largest element (first on ties).")
    argmin = _HOOKS.method_of("argmin", "Index of the smallest element (first on ties).")
    any = _HOOKS.method_of("any", "Whether any element over ``axis`` is true.")
    all = _HOOKS.method_of("all", "Whether every element over ``axis`` is true.")
    cumsum = _HOOKS.method_of("cumsum", "Running sum (``axis=None``: of the flattened array).")
    cumprod = _HOOKS.method_of("cumprod", "Running product (``axis=None``: flattened).")
    clip = _HOOKS.method_of("clip", "Elements limited to ``[min, max]``.")
    round = _HOOKS.method_of("round", "Rounded to ``decimals`` places, halves to even (NumPy's).")
    conj = conjugate = _HOOKS.method_of("conj", "Complex conjugate.")
    nonzero = _HOOKS.method_of("nonzero", "Indices of the non-zero elements (a tuple).")
    sort = _HOOKS.method_of("sort", "Sort in place along ``axis`` (returns ``None``).")
    argsort = _HOOKS.method_of("argsort", "Indices that sort along ``axis``.")
    repeat = _HOOKS.method_of("repeat", "Each element repeated (``axis=None``: flattened).")
    take = _HOOKS.method_of("take", "Elements at ``indices`` (``axis=None``: flattened).")
    dot = _HOOKS.method_of("dot", "``np.dot(a, b)``: matmul for 1-d/2-d, else a tensordot.")
    searchsorted = _HOOKS.method_of("searchsorted", "Where ``v`` would go in this sorted 1-d "
                                    "array (``np.searchsorted``'s arguments).")
    trace = _HOOKS.method_of("trace", "Sum along a diagonal (``np.trace``'s arguments).")
    ptp = _HOOKS.method_of("ptp", "Maximum minus minimum over ``axis`` (CuPy's method).")
    choose = _HOOKS.method_of("choose", "An array from ``choices`` picked by this index array.")
    put = _HOOKS.method_of("put", "Write ``values`` at flat ``indices`` (in place).")
    compress = _HOOKS.method_of("compress", "Elements where ``condition`` holds, along ``axis``.",
                                first="a")
    partition = _HOOKS.method_of("partition", "Partially sort in place around ``kth`` "
                                 "(returns ``None``).")
    argpartition = _HOOKS.method_of("argpartition", "Indices that partition around ``kth``.")

    def __array_namespace__(self, *, api_version: str | None = None):
        """The ``gpuarrays`` module (array API 2023.12 to 2025.12; ``ValueError`` otherwise)."""
        return _HOOKS.namespace(api_version)

    def __index__(self) -> int:
        """The integer of a size-1 integer array (copies it to the host)."""
        if self._dtype.kind not in "iu":
            raise TypeError(f"only integer arrays can be used as an index, this one is "
                            f"{self._dtype}; convert with astype(ga.int64)")
        return int(self.item())

    # conformance: the standard's signature, kind= kept as an extra keyword
    def to_device(self, device, /, *, stream=None, kind: str | None = None) -> GPUArray:
        """This array on ``device`` (and ``kind``); ``self`` if it is already there.

        ``stream``: ``None``, or on CUDA an int as ``__dlpack__`` takes (the copy is
        complete when this returns); ``ValueError`` on devices without streams.
        """
        dev = get_device(device)
        if stream is not None:
            transfer.check_stream(self, dev, stream)
        return transfer.to_device(self, dev, kind)

    # host views and pickling -----------------------------------------------------------
    def host_view(self) -> np.ndarray:
        """A NumPy array over the same memory, where the host addresses it in place (the
        rule of ``np.asarray``: ``_array/conversion.py``).

        The NumPy array holds a handle on the storage while it lives.
        ``TypeError`` for device memory the host cannot address: use ``.get()``.
        """
        return _conversion.to_numpy_protocol(self)

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(a)``: a zero-copy view holding the storage (as ``host_view``) for
        memory the host addresses in place (every kind on ``cpu``, ``"host"``/``"unified"``
        everywhere), ``TypeError`` naming ``.get()`` for other device memory;
        ``GPUARRAYS_STRICT_HOST=1`` refuses all but ``"host"``/``"unified"``
        (``_array/conversion.py``)."""
        return _conversion.to_numpy_protocol(self, dtype, copy)

    def __reduce__(self):
        return _restore, (self.get(), str(self._storage.device), self._storage.kind)

    # interchange ----------------------------------------------------------------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _dlpack.export(self, stream=stream, max_version=max_version,
                              dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return _dlpack.device_of(self)

    @property
    def __cuda_array_interface__(self) -> dict:
        """CUDA Array Interface v3; ``AttributeError`` (so ``hasattr`` is False) off CUDA."""
        if self._storage.device.backend != "cuda":
            raise AttributeError(f"__cuda_array_interface__ exists only for arrays on CUDA "
                                 f"devices; this one is on {self._storage.device}")
        from . import cai

        return cai.interface(self)

    # text ----------------------------------------------------------------------------
    def __repr__(self) -> str:
        dev = self._storage.device
        kind = self._storage.kind
        if self.is_freed:
            why = "reset" if not self._storage._epoch.live else "freed"
            return (f"<GPUArray ({why}) shape={self._shape}, dtype={self._dtype}, "
                    f"device={dev}, kind={kind}>")
        prefix = "GPUArray("
        body = np.array2string(self.get(), separator=", ", prefix=prefix)
        return f"{prefix}{body}, dtype={self._dtype}, device='{dev}', kind='{kind}')"

    def __str__(self) -> str:
        if self.is_freed:
            return repr(self)
        return str(self.get())

    def __format__(self, spec: str) -> str:
        if self.ndim == 0 and spec:
            return format(self.item(), spec)
        return str(self) if not spec else format(str(self), spec)


class FlatIter:
    """``a.flat``: a C-order flat view of ``a`` for indexing and assignment (NumPy's
    ``flatiter`` with gpuarrays' rules: ``a.flat[i]`` is a 0-d array, not a scalar).
    Integer indices address the element in place; other keys index ``a.ravel()`` (a view
    when ``a`` is C-contiguous, else a copy) and write back through ``a[...]``."""

    __slots__ = ("base",)

    def __init__(self, base: GPUArray) -> None:
        self.base = base

    def __len__(self) -> int:
        return self.base.size

    def __iter__(self):
        a = self.base
        for i in range(a.size):
            yield a[np.unravel_index(i, a._shape)] if a._shape else a[...]

    def _element(self, key):
        """The in-place index tuple of an integer ``key``, or None for other keys."""
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)):
            return None
        size = self.base.size
        i = int(key)
        if not -size <= i < size:
            raise IndexError(f"index {i} is out of bounds for a flat iterator of size {size}")
        return tuple(int(k) for k in np.unravel_index(i % size, self.base._shape))

    def __getitem__(self, key) -> GPUArray:
        a = self.base
        at = self._element(key)
        if at is not None:
            return a[at] if at else a[...]
        if isinstance(key, tuple) and len(key) == 1:
            key = key[0]
        line = a.ravel()
        try:
            return line[key]
        finally:
            if line is not a:
                line.free()

    def __setitem__(self, key, value) -> None:
        a = self.base
        if not a._writeable:
            raise ValueError("assignment destination is read-only")
        at = self._element(key)
        if at is not None:
            a[at if at else ...] = value
            return
        if isinstance(key, tuple) and len(key) == 1:
            key = key[0]
        if key is Ellipsis or (type(key) is slice and key == slice(None)):
            _fill_flat(a, value)
            return
        if a._is_c():
            line = a.reshape(a.size)
            try:
                line[key] = value
            finally:
                if line is not a:
                    line.free()
            return
        line = a.flatten()
        try:
            line[key] = value
            a[...] = line.reshape(a._shape)  # (a view of line: freed with it)
        finally:
            line.free()

    def copy(self) -> GPUArray:
        return self.base.flatten()

    def __repr__(self) -> str:
        return f"<GPUArray.flat of shape {self.base._shape}, dtype={self.base._dtype}>"


def _fill_flat(a: GPUArray, value) -> None:
    """``a.flat = value``: NumPy repeats ``value``'s elements (C order) to fill ``a``."""
    n = a.size
    if not isinstance(value, GPUArray):
        host = np.asarray(value)
        if host.size == 0 or n == 0:
            return
        if host.size == 1:
            a[...] = host.reshape(())
        else:  # host data the caller gave, repeated (np.resize) and uploaded
            a[...] = np.resize(host, a._shape)
        return
    m = value.size
    if m == 0 or n == 0:
        return
    line = value.ravel()
    temps = [line] if line is not value else []
    try:
        if m == 1:
            a[...] = line[0]
            return
        if m >= n:
            head = line[:n]
            temps.append(head)
            shaped = head.reshape(a._shape)
            if shaped is not head:
                temps.append(shaped)
            a[...] = shaped
            return
        ns = _HOOKS.namespace(None)
        index = ns.remainder(ns.arange(n, device=a.device), m)
        temps.append(index)
        picked = ns.take(line, index)
        temps.append(picked)
        shaped = picked.reshape(a._shape)
        if shaped is not picked:
            temps.append(shaped)
        a[...] = shaped
    finally:
        for t in temps:
            t.free()


def _resolve_shape(shape, size: int) -> tuple[int, ...] | None:
    """Fast path of reshape: the target shape with -1 resolved, or None to defer."""
    if type(shape) is int:
        shape = (shape,)
    elif type(shape) is not tuple:
        try:
            shape = tuple(operator.index(n) for n in shape)
        except TypeError:
            return None
    known = 1
    unknown = -1
    spans = 1  # the product of the non-zero lengths: past int64, NumPy's reshape refuses
    for i, n in enumerate(shape):
        if type(n) is not int:
            return None
        if n == -1 and unknown < 0:
            unknown = i
        elif n < 0:
            return None
        else:
            known *= n
            spans *= n or 1
    if spans > BYTES_MAX:
        return None
    if unknown >= 0:
        if known == 0 or size % known:
            return None
        shape = shape[:unknown] + (size // known,) + shape[unknown + 1:]
    elif known != size:
        return None
    return shape


def _restore(host: np.ndarray, spec: str, kind: str) -> GPUArray:
    """Unpickle: same device spec when it exists here, else the default device."""
    try:
        dev = get_device(spec)
    except ValueError:
        dev = get_device(None)
    if kind not in dev.kinds:
        kind = "device"
    a = new_array(normalize_shape(host.shape), host.dtype, dev, kind)
    transfer.assign(a, host)
    return a


_core.configure(array_type=GPUArray, slow_new_array=_new_array_slow, slow_new_storage=new_storage,
                cache_var=current_cache, warning=GPUArraysWarning)

