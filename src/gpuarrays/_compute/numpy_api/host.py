"""NumPy's printing, text and file functions, and its dtype/metadata helpers.

Their work is on the host by nature: printing and saving read the array's values
(one copy to the host, as ``a.get()``), loading and parsing make a host array
that is then copied to the device once (``device=``, the default device when
None).  The dtype helpers (``promote_types``, ``issubdtype``, ``common_type`` ...)
only look at dtypes and never touch device memory.  NumPy's own functions do the
formatting and parsing, so the output and the accepted files are exactly NumPy's.
"""

from __future__ import annotations

import numpy as np

from ..._array.creation import asarray
from ..._array.make import ArrayBase

__all__ = [
    # printing
    "array2string", "array_repr", "array_str", "format_float_positional",
    "format_float_scientific", "get_printoptions", "set_printoptions", "printoptions",
    "base_repr", "binary_repr",
    # files and buffers
    "save", "savez", "savez_compressed", "load", "savetxt", "loadtxt", "genfromtxt",
    "fromfile", "frombuffer", "fromstring", "fromiter",
    # dtypes and metadata
    "isscalar", "iterable", "issubdtype", "promote_types", "min_scalar_type", "mintypecode",
    "common_type", "typename", "isfortran", "show_config",
]

# NumPy's functions that need no device array at all: the same objects, so a setting made
# through one (``ga.set_printoptions(precision=3)``) is the one both print with.
format_float_positional = np.format_float_positional
format_float_scientific = np.format_float_scientific
get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions
printoptions = np.printoptions
base_repr = np.base_repr
binary_repr = np.binary_repr
isscalar = np.isscalar
iterable = np.iterable
issubdtype = np.issubdtype
promote_types = np.promote_types
mintypecode = np.mintypecode
typename = np.typename


def _host(a):
    """A host copy of a gpuarrays array (anything else is passed on to NumPy as it is)."""
    return a.get() if isinstance(a, ArrayBase) else a


def _on_device(value, device):
    """A NumPy result copied to ``device`` (a tuple/list of them likewise); others as given."""
    if isinstance(value, np.ndarray):
        return asarray(value, device=device)
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, np.ndarray)
                                                         for v in value):
        return type(value)(asarray(v, device=device) for v in value)
    return value


# --------------------------------------------------------------------------- printing

def array2string(a, max_line_width=None, precision=None, suppress_small=None, separator=" ",
                 prefix="", *, formatter=None, threshold=None, edgeitems=None, sign=None,
                 floatmode=None, suffix="", legacy=None) -> str:
    """NumPy's ``array2string`` of the array's values (one copy to the host)."""
    return np.array2string(_host(a), max_line_width, precision, suppress_small, separator,
                           prefix, formatter=formatter, threshold=threshold,
                           edgeitems=edgeitems, sign=sign, floatmode=floatmode, suffix=suffix,
                           legacy=legacy)


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None) -> str:
    """``repr`` as gpuarrays prints it (``GPUArray([...], dtype=..., device=...)``), with
    NumPy's formatting options for the values."""
    if not isinstance(arr, ArrayBase):
        return np.array_repr(arr, max_line_width, precision, suppress_small)
    if max_line_width is None and precision is None and suppress_small is None:
        return repr(arr)
    with np.printoptions(**{k: v for k, v in (("linewidth", max_line_width),
                                              ("precision", precision),
                                              ("suppress", suppress_small)) if v is not None}):
        return repr(arr)


def array_str(a, max_line_width=None, precision=None, suppress_small=None) -> str:
    """NumPy's ``array_str`` of the array's values (``str(a)``)."""
    return np.array_str(_host(a), max_line_width, precision, suppress_small)


# --------------------------------------------------------------------------- files

def save(file, arr, allow_pickle=True) -> None:
    """Write the array's values to a ``.npy`` file (NumPy's format, readable by ``np.load``)."""
    np.save(file, _host(arr), allow_pickle=allow_pickle)


def savez(file, *args, allow_pickle=True, **kwds) -> None:
    """Several arrays into one uncompressed ``.npz`` file (NumPy's ``savez``)."""
    np.savez(file, *map(_host, args), allow_pickle=allow_pickle,
             **{k: _host(v) for k, v in kwds.items()})


def savez_compressed(file, *args, allow_pickle=True, **kwds) -> None:
    """Several arrays into one compressed ``.npz`` file (NumPy's ``savez_compressed``)."""
    np.savez_compressed(file, *map(_host, args), allow_pickle=allow_pickle,
                        **{k: _host(v) for k, v in kwds.items()})


def savetxt(fname, X, fmt="%.18e", delimiter=" ", newline="\n", header="", footer="",
            comments="# ", encoding=None) -> None:
    """The array's values as text (NumPy's ``savetxt``)."""
    np.savetxt(fname, _host(X), fmt, delimiter, newline, header, footer, comments, encoding)


class NpzFile:
    """What :func:`load` returns for an ``.npz`` file: NumPy's lazy archive whose arrays
    come out on ``device`` (``f["x"]``, ``f.files``, ``with ga.load(path) as f:``).
    Closing it closes NumPy's archive; the arrays already read stay."""

    def __init__(self, npz, device) -> None:
        self._npz = npz
        self._device = device
        self.files = npz.files

    def __getitem__(self, key):
        return _on_device(self._npz[key], self._device)

    def __contains__(self, key) -> bool:
        return key in self._npz

    def __iter__(self):
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def keys(self):
        return self._npz.keys()

    def close(self) -> None:
        self._npz.close()

    def __enter__(self) -> NpzFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load(file, mmap_mode=None, allow_pickle=False, fix_imports=True, encoding="ASCII", *,
         max_header_size=10000, device=None):
    """Arrays from a ``.npy`` or ``.npz`` file onto ``device`` (NumPy's ``load``).

    ``mmap_mode`` is refused: a device array cannot be a view of a mapped file.
    """
    if mmap_mode is not None:
        raise ValueError(f"gpuarrays.load(mmap_mode={mmap_mode!r}): a device array cannot map "
                         "a file; leave mmap_mode=None (the file is read and copied once), or "
                         "use numpy.load for a memory-mapped host array")
    value = np.load(file, None, allow_pickle, fix_imports, encoding,
                    max_header_size=max_header_size)
    if isinstance(value, np.lib.npyio.NpzFile):
        return NpzFile(value, device)
    return _on_device(value, device)


def loadtxt(fname, dtype=float, comments="#", delimiter=None, converters=None, skiprows=0,
            usecols=None, unpack=False, ndmin=0, encoding=None, max_rows=None, *,
            quotechar=None, device=None):
    """NumPy's ``loadtxt``, the result copied to ``device``."""
    return _on_device(np.loadtxt(fname, dtype, comments, delimiter, converters, skiprows,
                                 usecols, unpack, ndmin, encoding, max_rows,
                                 quotechar=quotechar), device)


def genfromtxt(fname, dtype=float, comments="#", delimiter=None, skip_header=0,
               skip_footer=0, converters=None, missing_values=None, filling_values=None,
               usecols=None, names=None, excludelist=None,
               deletechars=" !#$%&'()*+,-./:;<=>?@[\\]^{|}~", replace_space="_",
               autostrip=False, case_sensitive=True, defaultfmt="f%i", unpack=None,
               usemask=False, loose=True, invalid_raise=True, max_rows=None, encoding=None, *,
               ndmin=0, device=None):
    """NumPy's ``genfromtxt``, the result copied to ``device``.

    ``usemask=True`` (a masked array) is refused: gpuarrays has no masked arrays.
    """
    if usemask:
        raise TypeError("gpuarrays.genfromtxt(usemask=True) would make a masked array, which "
                        "gpuarrays does not have; use filling_values= for the missing entries")
    return _on_device(np.genfromtxt(
        fname, dtype, comments, delimiter, skip_header, skip_footer, converters,
        missing_values, filling_values, usecols, names, excludelist, deletechars,
        replace_space, autostrip, case_sensitive, defaultfmt, unpack, usemask, loose,
        invalid_raise, max_rows, encoding, ndmin=ndmin), device)


def fromfile(file, dtype=float, count=-1, sep="", offset=0, *, device=None):
    """NumPy's ``fromfile``, the result copied to ``device``."""
    return _on_device(np.fromfile(file, dtype, count, sep, offset), device)


def frombuffer(buffer, dtype=float, count=-1, offset=0, *, device=None):
    """A device array holding a copy of ``buffer``'s bytes (NumPy's ``frombuffer``; the
    result is a copy, never a view of the buffer)."""
    return _on_device(np.frombuffer(buffer, dtype, count, offset), device)


def fromstring(string, dtype=float, count=-1, *, sep, device=None):
    """NumPy's ``fromstring`` of text (``sep`` is required: NumPy deprecated its binary
    mode; use :func:`frombuffer` for bytes), the result copied to ``device``."""
    return _on_device(np.fromstring(string, dtype, count, sep=sep), device)


def fromiter(iter, dtype, count=-1, *, device=None):  # noqa: A002 -- NumPy's name
    """NumPy's ``fromiter``, the result copied to ``device``."""
    return _on_device(np.fromiter(iter, dtype, count), device)


# --------------------------------------------------------------------------- metadata

def _dtype_of(a):
    return a.dtype if isinstance(a, ArrayBase) else a


def min_scalar_type(a, /) -> np.dtype:
    """NumPy's ``min_scalar_type``: an array's own dtype (NumPy's answer for any array with
    dimensions; a 0-d gpuarrays array reads its one value)."""
    if isinstance(a, ArrayBase):
        return a.dtype if a.ndim else np.min_scalar_type(a.get())
    return np.min_scalar_type(a)


def common_type(*arrays) -> type:
    """NumPy's ``common_type``: the scalar type of the inexact type the arrays promote to."""
    return np.common_type(*(np.empty(0, _dtype_of(a)) for a in arrays))


def isfortran(a) -> bool:
    """True when ``a`` is Fortran-contiguous and not C-contiguous (NumPy's rule), e.g. the
    transpose of a C-ordered matrix."""
    if not isinstance(a, ArrayBase):
        return np.isfortran(a)
    return bool(a.flags["F_CONTIGUOUS"] and not a.flags["C_CONTIGUOUS"])


def show_config() -> None:
    """Print gpuarrays's devices and the versions it runs with (``gpuarrays info``)."""
    import platform

    from ..._memory.devices import devices

    print(f"gpuarrays on Python {platform.python_version()}, NumPy {np.__version__}")
    for dev in devices():
        print(f"  {dev}: {dev.info.name}")
