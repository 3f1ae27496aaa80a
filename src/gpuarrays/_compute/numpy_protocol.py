"""NumPy's function protocol (NEP 18) and the NumPy-style array methods.

``np.sum(a, axis=0)``, ``np.concatenate([a, b])``, ``np.linalg.svd(a)`` on
gpuarrays arrays run the namespace's functions on the arrays' device and return
gpuarrays arrays there.  :data:`FUNCTIONS` says which NumPy function is which
namespace function -- by name, resolved when called, so a namespace function
added later (``concat``, ``sort``, ``linalg.svd`` ...) is dispatched as soon as
it exists, and one that is missing is simply not dispatched.

NumPy's arguments are matched to the namespace function's by name (leading
required arguments by position, a few renamed: ``ddof`` -> ``correction``,
``a_min`` -> ``min`` ...).  An argument left at NumPy's default is dropped; one
the namespace function does not take raises ``TypeError`` naming it.  A NumPy
function without an equivalent, or a call mixing gpuarrays with NumPy arrays
(or other array types), gives ``NotImplemented``, so NumPy raises ``TypeError``:
nothing is ever copied to the host (docs/compute.md, "NumPy's protocols").

The array methods (``a.sum(axis=0)``, ``a.std(ddof=1)``, ``a.sort()`` ...) are
the same entries called with the array first; the array layer reaches them
through its hooks (``_array/hooks.py``), filled by :func:`install`.
"""

from __future__ import annotations

import inspect

import numpy as np

from .._array.hooks import HOOKS
from .._array.make import ArrayBase
from .statistical import write_into

__all__ = ["FUNCTIONS", "METHODS", "array_function", "array_method", "install", "dispatched"]

_P = inspect.Parameter
_EMPTY = inspect.Parameter.empty
_SIMPLE = (type(None), bool, int, float, str, tuple)
_NO_FLAT = object()


# --------------------------------------------------------------------------- adaptors
# A custom adaptor takes (namespace, given) -- ``given`` maps NumPy's argument names to
# the values passed, without those left at NumPy's defaults -- and returns the result.

def _where(ns, given):
    if "x" not in given and "y" not in given:
        return _call_ns(ns, "nonzero", given["condition"])
    if "x" not in given or "y" not in given:
        raise TypeError("numpy.where takes either only the condition or both x and y")
    return ns.where(given["condition"], given["x"], given["y"])


def _call_ns(ns, path: str, *args, **kwargs):
    fn = _resolve(ns, path)
    if fn is None:
        raise TypeError(f"gpuarrays has no {path} (needed here); copy to the host with "
                        ".get() and use NumPy")
    return fn(*args, **kwargs)


def _dot(ns, given):
    a, b = given["a"], given["b"]
    if getattr(a, "ndim", 0) == 0 or getattr(b, "ndim", 0) == 0:
        return ns.multiply(a, b)
    if a.ndim <= 2 and b.ndim <= 2 and _resolve(ns, "matmul") is not None:
        return ns.matmul(a, b)
    axes = ([a.ndim - 1], [0 if b.ndim == 1 else b.ndim - 2])
    return _call_ns(ns, "tensordot", a, b, axes=axes)


def _norm(ns, given):
    """``np.linalg.norm``: the standard's ``vector_norm`` or ``matrix_norm``."""
    x, ord_, axis = given["x"], given.get("ord"), given.get("axis")
    keepdims = given.get("keepdims", False)
    if axis is None and (x.ndim == 1 or ord_ is None):
        return _call_ns(ns, "linalg.vector_norm", x, ord=2 if ord_ is None else ord_,
                        keepdims=keepdims)
    if axis is None:
        axis = (-2, -1) if x.ndim == 2 else None
    if isinstance(axis, tuple) and len(axis) == 2:
        if tuple(a % x.ndim for a in axis) == (x.ndim - 2, x.ndim - 1):
            return _call_ns(ns, "linalg.matrix_norm", x, ord="fro" if ord_ is None else ord_,
                            keepdims=keepdims)
        moved = ns.moveaxis(x, axis, (-2, -1))  # a view
        try:
            result = _call_ns(ns, "linalg.matrix_norm", moved,
                              ord="fro" if ord_ is None else ord_, keepdims=keepdims)
        finally:
            moved.free()
        if not keepdims:
            return result
        back = ns.moveaxis(result, (-2, -1), axis)  # the kept axes where NumPy keeps them
        result.free()
        return back
    return _call_ns(ns, "linalg.vector_norm", x, axis=axis,
                    ord=2 if ord_ is None else ord_, keepdims=keepdims)


def _size(ns, given):
    a = given["a"]
    return a.size if given.get("axis") is None else a.shape[given["axis"]]


def _method(name: str, *keys: str):
    """An entry run by the array layer's own method (views: no namespace function)."""
    def run(ns, given):
        return getattr(given["a"], name)(*(given[k] for k in keys if k in given))
    return run


_SORT_KINDS = ("quicksort", "quick", "q", "mergesort", "merge", "m", "heapsort", "heap", "h",
               "stable", "s")


def _sorting(name: str):
    """``np.sort``/``np.argsort`` (and ``a.sort()``): NumPy's default kind lets equal elements
    come in any order, so the namespace's ``stable=False`` (NumPy's fast default sort on
    ``cpu``); ``kind="stable"``/``"mergesort"`` or ``stable=True`` ask for the stable one."""

    def run(ns, g: dict):
        kind, stable = g.pop("kind", None), g.pop("stable", None)
        if kind is not None and kind not in _SORT_KINDS:
            raise ValueError(f"sort kind must be one of 'quick', 'heap', or 'stable' (got "
                             f"{kind!r})")
        if g.pop("order", None) is not None:
            raise TypeError(f"numpy.{name}(order=...) sorts structured fields, which gpuarrays "
                            f"does not sort; sort a field's array instead")
        stable = bool(stable) or kind in ("stable", "mergesort")
        return getattr(ns, name)(g.pop("a"), axis=g.pop("axis", -1), stable=stable)

    return run


def _attribute(name: str):
    return lambda ns, given: getattr(given[next(iter(given))], name)


# --------------------------------------------------------------------------- the table
# (NumPy function's path, namespace function's path or a custom adaptor, options).
# options: "rename" {numpy name: namespace name}, "ignore" (NumPy arguments whose value
# does not change a gpuarrays result), "flat" (NumPy's axis=None flattens).

FUNCTIONS: list[tuple[str, object, dict]] = [
    # reductions and statistics (docs/reductions.md)
    ("sum", "sum", {}), ("prod", "prod", {}), ("max", "max", {}), ("amax", "max", {}),
    ("min", "min", {}), ("amin", "min", {}), ("mean", "mean", {}),
    ("std", "std", {"rename": {"ddof": "correction"}}),
    ("var", "var", {"rename": {"ddof": "correction"}}),
    ("argmax", "argmax", {}), ("argmin", "argmin", {}), ("any", "any", {}), ("all", "all", {}),
    ("count_nonzero", "count_nonzero", {}), ("diff", "diff", {}),
    ("cumsum", "cumulative_sum", {"flat": None}), ("cumprod", "cumulative_prod", {"flat": None}),
    ("cumulative_sum", "cumulative_sum", {}), ("cumulative_prod", "cumulative_prod", {}),
    # elementwise functions that are not ufuncs in NumPy
    ("clip", "clip", {"rename": {"a_min": "min", "a_max": "max"}}),
    ("round", "round", {}), ("around", "round", {}), ("where", _where, {"needs": "where"}),
    ("real", "real", {}), ("imag", "imag", {}),
    # data types and creation from a prototype
    ("result_type", "result_type", {}), ("can_cast", "can_cast", {}),
    ("astype", "astype", {}),
    ("empty_like", "empty_like", {"ignore": ("order", "subok")}),
    ("zeros_like", "zeros_like", {"ignore": ("order", "subok")}),
    ("ones_like", "ones_like", {"ignore": ("order", "subok")}),
    ("full_like", "full_like", {"ignore": ("order", "subok")}),
    ("copyto", "copyto", {}), ("shares_memory", "shares_memory", {"ignore": ("max_work",)}),
    ("may_share_memory", "may_share_memory", {"ignore": ("max_work",)}),
    # shapes and views (the array's own methods where NumPy's defaults need them)
    ("shape", _attribute("shape"), {}), ("ndim", _attribute("ndim"), {}), ("size", _size, {}),
    ("iscomplexobj", lambda ns, g: g["x"].dtype.kind == "c", {}),
    ("isrealobj", lambda ns, g: g["x"].dtype.kind != "c", {}),
    ("transpose", _method("transpose", "axes"), {}),
    ("permute_dims", _method("transpose", "axes"), {}),
    ("squeeze", _method("squeeze", "axis"), {}),
    ("swapaxes", _method("swapaxes", "axis1", "axis2"), {}),
    ("ravel", _method("ravel", "order"), {}),
    ("copy", _method("copy", "order"), {"ignore": ("subok",)}),
    ("diagonal", _method("diagonal", "offset", "axis1", "axis2"), {}),
    ("reshape", "reshape", {}), ("expand_dims", "expand_dims", {}), ("moveaxis", "moveaxis", {}),
    ("broadcast_to", "broadcast_to", {"ignore": ("subok",)}),
    ("broadcast_arrays", "broadcast_arrays", {"ignore": ("subok",)}),
    ("matrix_transpose", "matrix_transpose", {}),
    # manipulation (branch manip)
    ("concatenate", "concat", {}), ("stack", "stack", {}), ("flip", "flip", {}),
    ("roll", "roll", {}), ("repeat", "repeat", {}), ("tile", "tile", {}),
    ("tril", "tril", {}), ("triu", "triu", {}), ("meshgrid", "meshgrid", {}),
    # indexing, searching and sorting (branches indexing, sorting)
    ("take", "take", {"flat": None, "ignore": ("mode",)}),
    ("take_along_axis", "take_along_axis", {}), ("nonzero", "nonzero", {}),
    ("sort", _sorting("sort"), {"flat": -1, "needs": "sort"}),
    ("argsort", _sorting("argsort"), {"flat": -1, "needs": "argsort"}),
    ("searchsorted", "searchsorted", {}), ("isin", "isin", {"ignore": ("assume_unique", "kind")}),
    ("unique", "unique", {}), ("unique_values", "unique_values", {}),
    ("unique_counts", "unique_counts", {}), ("unique_inverse", "unique_inverse", {}),
    ("unique_all", "unique_all", {}),
    # creation with NumPy's like= (NEP 35): np.zeros(3, like=a) makes a gpuarrays array on
    # a's device -- an explicit request, as ga.zeros(3, device=a.device) is
    ("array", "array", {"like": True, "ignore": ("order", "subok")}),
    ("asarray", "asarray", {"like": True, "ignore": ("order",)}),
    ("ascontiguousarray", "asarray", {"like": True}),
    ("arange", "arange", {"like": True}), ("empty", "empty", {"like": True, "ignore": ("order",)}),
    ("zeros", "zeros", {"like": True, "ignore": ("order",)}),
    ("ones", "ones", {"like": True, "ignore": ("order",)}),
    ("full", "full", {"like": True, "ignore": ("order",)}),
    ("eye", "eye", {"like": True, "rename": {"M": "n_cols"}, "ignore": ("order",)}),
    ("identity", "eye", {"like": True}),
    # linear algebra and fft (branch linalg)
    ("dot", _dot, {"needs": "tensordot"}), ("tensordot", "tensordot", {}),
    ("linalg.norm", _norm, {"needs": "linalg.vector_norm"}),
    *((f"linalg.{n}", f"linalg.{n}", {}) for n in (
        "cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
        "matmul",
        "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv",
        "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
        "vector_norm")),
    *((f"fft.{n}", f"fft.{n}", {}) for n in (
        "fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
        "fftshift", "ifftshift")),
    # NumPy's functions beyond the standard (docs/numpy.md): each runs the namespace function
    # of the same name, which takes NumPy's signature (_compute/numpy_api/, linalg/_polynomial.py)
    *((n, n, {}) for n in (
        "allclose", "angle", "append", "apply_along_axis", "apply_over_axes",
        "argpartition", "argwhere", "array2string", "array_equal", "array_equiv",
        "array_repr", "array_split", "array_str", "atleast_1d", "atleast_2d", "atleast_3d",
        "average", "bincount", "choose", "column_stack", "compress", "convolve", "corrcoef",
        "correlate", "cov", "cross", "delete", "diag", "diag_indices_from", "diagflat",
        "digitize", "dsplit", "dstack", "ediff1d", "einsum", "extract", "fill_diagonal",
        "fix", "flatnonzero", "fliplr", "flipud", "gradient", "histogram", "histogram2d",
        "histogramdd", "hsplit", "hstack", "i0", "inner", "interp", "intersect1d",
        "isclose", "iscomplex", "isneginf", "isposinf", "isreal", "ix_", "kron", "lexsort",
        "median", "nan_to_num", "nanargmax", "nanargmin", "nancumprod", "nancumsum",
        "nanmax", "nanmean", "nanmedian", "nanmin", "nanprod", "nanstd", "nansum", "nanvar",
        "outer", "packbits", "pad", "partition", "percentile", "piecewise", "place", "poly",
        "polyadd", "polyfit", "polymul", "polysub", "polyval", "ptp", "put",
        "put_along_axis", "putmask", "quantile", "ravel_multi_index", "real_if_close",
        "resize", "rollaxis", "roots", "rot90", "save", "savetxt", "savez",
        "savez_compressed", "select", "setdiff1d", "setxor1d", "sinc", "sort_complex",
        "split", "trace", "trapezoid", "tril_indices_from", "trim_zeros",
        "triu_indices_from", "union1d", "unpackbits", "unravel_index", "unwrap", "vander",
        "vdot", "vsplit", "vstack")),
    ("linspace", "linspace", {}), ("logspace", "logspace", {}),
    ("common_type", "common_type", {}), ("min_scalar_type", "min_scalar_type", {}),
    *((n, n, {"like": True}) for n in (
        "asanyarray", "asarray_chkfinite", "asfortranarray", "require", "fromfunction",
        "frombuffer", "fromiter", "fromfile", "genfromtxt", "loadtxt", "tri")),
    *((f"linalg.{n}", f"linalg.{n}", {}) for n in ("cond", "lstsq", "tensorinv", "tensorsolve")),
    *((f"fft.{n}", f"fft.{n}", {}) for n in ("fft2", "ifft2", "rfft2", "irfft2")),
]

# NumPy's generalized ufuncs that are namespace functions: through __array_ufunc__.
GUFUNCS = {"matmul": "matmul", "vecdot": "vecdot", "matvec": None, "vecmat": None}

# Array methods -> the NumPy function whose entry runs them (called with the array first).
METHODS = {name: name for name in (
    "sum", "prod", "max", "min", "mean", "std", "var", "argmax", "argmin", "any", "all",
    "cumsum", "cumprod", "clip", "round", "nonzero", "argsort", "repeat", "take", "dot",
    "searchsorted", "trace", "ptp", "choose", "put", "compress", "partition", "argpartition")}

# Methods that change the array in place and return None, from the function's result
# (NumPy's a.sort(), a.partition()).
_IN_PLACE = ("sort", "partition")


def _resolve(ns, path: str):
    obj = ns
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _numpy_function(path: str):
    obj = np
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


_SIGNATURES: dict = {}


def _signature(fn) -> inspect.Signature | None:
    sig = _SIGNATURES.get(fn)
    if sig is None:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return None
        _SIGNATURES[fn] = sig
    return sig


def _show(value) -> str:
    return repr(value) if type(value) in _SIMPLE else f"<{type(value).__name__}>"


def _same(value, default) -> bool:
    if value is default:
        return True
    return type(value) is type(default) and type(value) in _SIMPLE and value == default


class Entry:
    """One NumPy function and how it runs on the namespace."""

    __slots__ = ("numpy_name", "target", "rename", "ignore", "flat", "needs", "like",
                 "signature")

    def __init__(self, numpy_name: str, func, target, options: dict) -> None:
        self.numpy_name = numpy_name
        self.target = target
        self.rename = dict(options.get("rename", {}))
        self.ignore = frozenset(options.get("ignore", ()))
        self.flat = options.get("flat", _NO_FLAT)  # NumPy's default axis where None flattens
        self.needs = options.get("needs", target if isinstance(target, str) else None)
        self.like = options.get("like", False)  # NEP 35: made on the like= array's device
        self.signature = _signature(func)

    def available(self, ns) -> bool:
        return self.needs is None or _resolve(ns, self.needs) is not None

    def given(self, args: tuple, kwargs: dict) -> dict:
        """NumPy's arguments by name, without those left at NumPy's defaults."""
        bound = self.signature.bind(*args, **kwargs)
        params = self.signature.parameters
        given = {}
        for name, value in bound.arguments.items():
            p = params[name]
            if p.kind is _P.VAR_KEYWORD:  # np.savez(f, x=a): passed on by name
                given.update(value)
                continue
            if name in self.ignore or (p.default is not _EMPTY and _same(value, p.default)):
                continue
            given[name] = value
        return given

    def __call__(self, ns, args: tuple, kwargs: dict, like=None):
        given = self.given(args, kwargs)
        ndmin = 0
        if self.like:
            given.pop("like", None)
            ndmin = given.pop("ndmin", 0)  # np.array(..., ndmin=): leading axes of length 1
            if like is not None and "device" not in given:
                given["device"] = like.device
        out = given.pop("out", None)
        if type(out) is tuple and len(out) == 1:
            out = out[0]
        if out is not None and not isinstance(out, ArrayBase):
            raise TypeError(f"numpy.{self.numpy_name}(out=...) on gpuarrays arrays needs a "
                            f"gpuarrays array as out, got {type(out).__name__}")
        if self.numpy_name in _MOMENTS and "where" in given:
            return self._finish(_masked_moment(self.numpy_name, ns, given), out, 0)
        if self.numpy_name in _REDUCE_FILL and ("where" in given or "initial" in given):
            return self._finish(_masked_reduction(self, ns, given), out, 0)
        temp = None
        if self.flat is not _NO_FLAT and given.get("axis", self.flat) is None:
            first = next(iter(self.signature.parameters))
            x = given[first]
            if isinstance(x, ArrayBase) and x.ndim != 1:
                temp = given[first] = x.reshape(-1)  # a view, or a copy: freed below
            given["axis"] = 0
        try:
            if isinstance(self.target, str):
                result = self._call(_resolve(ns, self.target), given)
            else:
                result = self.target(ns, given)
        finally:
            if temp is not None:
                temp.free()
        return self._finish(result, out, ndmin)

    def _finish(self, result, out, ndmin: int):
        if ndmin and ndmin > result.ndim:
            view = result.reshape((1,) * (ndmin - result.ndim) + result.shape)
            result.free()  # the view holds its own handle on the storage
            result = view
        if out is None:
            return result
        try:
            out[...] = result
        finally:
            result.free()
        return out

    def _call(self, fn, given: dict):
        sig = _signature(fn)
        names = list(self.signature.parameters.values())
        theirs = list(sig.parameters.values()) if sig is not None else []
        mapped = {}
        # NumPy's leading required arguments are the namespace function's, by position.
        lead = 0
        while (lead < len(names) and lead < len(theirs)
               and names[lead].default is _EMPTY and theirs[lead].default is _EMPTY
               and names[lead].kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)
               and theirs[lead].kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)):
            lead += 1
        auto = {names[i].name: theirs[i].name for i in range(lead)}
        for p, q in zip(names, theirs, strict=False):
            if p.kind is _P.VAR_POSITIONAL and q.kind is _P.VAR_POSITIONAL:
                auto[p.name] = q.name
        for name, value in given.items():
            mapped[self.rename.get(name, auto.get(name, name))] = value
        pos: list = []
        kw: dict = {}
        star = next((i for i, q in enumerate(theirs) if q.kind is _P.VAR_POSITIONAL), -1)
        for i, q in enumerate(theirs):
            if i < star and q.name in mapped and len(pos) == i:  # before a *args: by position
                pos.append(mapped.pop(q.name))
            elif q.kind is _P.POSITIONAL_ONLY:
                if q.name in mapped and len(pos) == theirs.index(q):
                    pos.append(mapped.pop(q.name))
            elif q.kind is _P.VAR_POSITIONAL:
                pos.extend(mapped.pop(q.name, ()))
            elif q.kind in (_P.POSITIONAL_OR_KEYWORD, _P.KEYWORD_ONLY) and q.name in mapped:
                kw[q.name] = mapped.pop(q.name)
        if mapped and theirs and theirs[-1].kind is _P.VAR_KEYWORD:
            kw.update(mapped)  # the namespace function takes NumPy's **kwargs too
            mapped = {}
        if mapped:
            raise TypeError(
                f"numpy.{self.numpy_name} on gpuarrays arrays: gpuarrays.{self.target} takes no "
                f"{', '.join(f'{k}={_show(v)}' for k, v in mapped.items())}; leave it at NumPy's "
                "default or copy to the host with .get() and use NumPy")
        return fn(*pos, **kw)


# NumPy's reductions with where= and initial=: (the ufunc that adds initial in, namespace
# name; the identity that masked elements take, None where there is none)
_REDUCE_FILL = {"sum": ("add", 0), "prod": ("multiply", 1), "max": ("maximum", None),
                "amax": ("maximum", None), "min": ("minimum", None),
                "amin": ("minimum", None), "any": (None, False), "all": (None, True)}


def _masked_reduction(entry: Entry, ns, given: dict):
    """``np.max(x, initial=v, where=mask)`` and friends (also ``a.max(...)``): masked-out
    elements become the reduction's identity (``initial`` for ``max``/``min``) by
    ``ga.where`` on the device, the namespace reduction runs, and ``initial`` joins the
    result by ``ga.maximum``/``add``...  A zero-size reduction gives ``initial``
    everywhere (``ga.full``), as NumPy."""
    combine, identity = _REDUCE_FILL[entry.numpy_name]
    where = given.pop("where", True)
    initial = given.pop("initial", None)
    has_initial = initial is not None
    x = given["a"]
    if not isinstance(x, ArrayBase):
        raise TypeError(f"numpy.{entry.numpy_name}(where=/initial=) takes a gpuarrays array, "
                        f"got {type(x).__name__}")
    if where is not True and identity is None and not has_initial:
        raise ValueError(f"reduction operation '{combine}' does not have an identity, so to "
                         f"use a where mask one has to specify 'initial' (e.g. initial="
                         f"{'-inf' if combine == 'maximum' else 'inf'} for floats)")
    if where is not True and not (isinstance(where, ArrayBase) or where is False
                                  or type(where) is np.bool_):
        raise TypeError(f"numpy.{entry.numpy_name}(where=...) takes a bool gpuarrays array, "
                        f"True or False, got {type(where).__name__}; copy the mask to the "
                        f"device with ga.asarray(mask, device={str(x.device)!r})")
    if isinstance(where, ArrayBase) and where.dtype != np.bool_:
        raise TypeError(f"numpy.{entry.numpy_name}(where=...) needs a bool mask, got "
                        f"{where.dtype}; compare first (mask != 0)")
    filler = identity if identity is not None else initial
    temps = []
    try:
        if where is not True:
            if isinstance(where, ArrayBase):
                masked = ns.where(where, x, filler)
            elif not bool(where):
                masked = ns.full(x.shape, filler, dtype=x.dtype, device=x.device)
            else:
                masked = x
            if masked is not x:
                temps.append(masked)
                if masked.shape != x.shape:
                    raise ValueError(f"numpy.{entry.numpy_name}: the where mask of shape "
                                     f"{where.shape} does not broadcast to the array's shape "
                                     f"{x.shape}")
            given["a"] = masked
        x = given["a"]
        axis = given.get("axis")
        reduced = _reduced_shape(x.shape, axis, given.get("keepdims", False))
        if has_initial and x.size == 0:
            dt = given.get("dtype") or _reduce_dtype(entry.numpy_name, x.dtype)
            return ns.full(reduced, initial, dtype=dt, device=x.device)
        target = _resolve(ns, entry.target)
        if axis is None and x.ndim != 1 and entry.flat is not _NO_FLAT:
            given["axis"] = None
        result = entry._call(target, given)
        if not has_initial:
            return result
        try:
            return getattr(ns, combine)(result, initial)
        finally:
            result.free()
    finally:
        for t in temps:
            t.free()


_MOMENTS = ("mean", "var", "std")


def _masked_moment(name: str, ns, given: dict):
    """``np.mean/var/std(x, where=mask)``: sums over ``ga.where(mask, x, 0)`` divided by
    the count of true mask elements along the axes (``ddof`` taken off for var/std), all
    on the device; a count of 0 gives NaN, as NumPy (without its warning)."""
    where = given.pop("where")
    x = given.pop("a")
    axis = given.pop("axis", None)
    keepdims = given.pop("keepdims", False)
    ddof = given.pop("ddof", 0)
    dtype = given.pop("dtype", None)
    if given:
        raise TypeError(f"numpy.{name}(where=...) on gpuarrays arrays takes axis, dtype, "
                        f"keepdims and ddof, not {', '.join(given)}")
    if not isinstance(where, ArrayBase) or where.dtype != np.bool_:
        raise TypeError(f"numpy.{name}(where=...) takes a bool gpuarrays array, got "
                        f"{getattr(where, 'dtype', type(where).__name__)}; copy the mask to "
                        f"the device with ga.asarray(mask, device=...) or compare first")
    dt = np.dtype(dtype) if dtype is not None else _reduce_dtype("mean", x.dtype)
    temps = []

    def keep(v):
        temps.append(v)
        return v

    try:
        mask = keep(ns.broadcast_to(where, x.shape))
        xs = keep(ns.where(mask, keep(ns.astype(x, dt)), 0))
        count = keep(ns.sum(mask, axis=axis, keepdims=True, dtype=np.int64))
        n = keep(ns.astype(count, _real(dt)))
        mean = keep(ns.divide(keep(ns.sum(xs, axis=axis, keepdims=True)), n))
        if name != "mean":
            d = keep(ns.subtract(xs, mean))
            sq = keep(ns.abs(d)) if dt.kind == "c" else d
            sq = keep(ns.multiply(sq, sq))
            sq = keep(ns.where(mask, sq, 0))
            n = keep(ns.astype(keep(ns.subtract(count, ddof)), _real(dt)))
            mean = keep(ns.divide(keep(ns.sum(sq, axis=axis, keepdims=True)), n))
            if name == "std":
                mean = keep(ns.sqrt(mean))
        if keepdims:
            temps[:] = [t for t in temps if t is not mean]
            return mean
        axes = tuple(range(x.ndim)) if axis is None else (
            axis if isinstance(axis, tuple) else (axis,))
        return ns.squeeze(mean, axis=axes)
    finally:
        for t in temps:
            t.free()


def _real(dt: np.dtype) -> np.dtype:
    return np.dtype(f"f{dt.itemsize // 2}") if dt.kind == "c" else dt


def _reduced_shape(shape: tuple, axis, keepdims: bool) -> tuple:
    """The shape NumPy's reduction of an array of ``shape`` over ``axis`` has (no data)."""
    n = len(shape)
    axes = range(n) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    axes = {int(a) % n if n else 0 for a in axes}
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_dtype(name: str, dtype: np.dtype) -> np.dtype:
    """NumPy's result dtype of reduction ``name`` over ``dtype`` (no data)."""
    return getattr(np, name)(np.zeros(1, dtype)).dtype


_TABLE: dict = {}
_BY_NAME: dict = {}


def _table() -> dict:
    if not _TABLE:
        for path, target, options in FUNCTIONS:
            func = _numpy_function(path)
            if func is None or _signature(func) is None:
                continue  # not in this NumPy
            entry = Entry(path, func, target, options)
            _TABLE[func] = entry
            _BY_NAME[path] = entry
    return _TABLE


def _namespace():
    return HOOKS.namespace(None)


def dispatched() -> dict[str, str]:
    """NumPy function -> what runs it, for the functions dispatched now (docs, tests)."""
    ns = _namespace()
    _table()
    return {path: (e.target if isinstance(e.target, str) else "adaptor")
            for path, e in _BY_NAME.items() if e.available(ns)}


def array_function(a, func, types, args, kwargs):
    """``GPUArray.__array_function__``: the namespace's function, or ``NotImplemented``."""
    for t in types:
        if not issubclass(t, ArrayBase):
            return NotImplemented  # a NumPy array or another library's array among the inputs
    entry = _table().get(func)
    if entry is None:
        return NotImplemented
    ns = _namespace()
    if not entry.available(ns):
        return NotImplemented
    return entry(ns, args, kwargs, a)


def array_method(name: str, a, args: tuple, kwargs: dict):
    """``a.sum(...)`` and the other NumPy-style methods (``METHODS``, ``sort``, ``conj``)."""
    ns = _namespace()
    if name in ("conj", "conjugate"):
        return ns.conj(a)
    _table()
    if name in _IN_PLACE:  # in place, as NumPy's
        if not a._writeable:
            raise ValueError(f"a.{name}(): the array is read-only (a broadcast_to or "
                             f"diagonal view); {name} a copy")
        entry = _BY_NAME[name]
        if not entry.available(ns):
            raise _missing(name, entry.target)
        result = entry(ns, (a, *args), kwargs)
        try:
            if result.shape != a.shape:
                raise ValueError(f"a.{name}(axis=None) would flatten; use "
                                 f"np.{name}(a, axis=None)")
            a[...] = result
        finally:
            result.free()
        return None
    entry = _BY_NAME[METHODS[name]]
    if not entry.available(ns):
        raise _missing(name, entry.target)
    if name == "put":  # ndarray.put(indices, values, mode): np.put(a, ind, v, mode)
        kwargs = {{"indices": "ind", "values": "v"}.get(k, k): v for k, v in kwargs.items()}
    if name == "compress":  # np.compress(condition, a, ...): the array comes second
        if args:
            args = (args[0], a, *args[1:])
        elif "condition" in kwargs:
            args = (kwargs.pop("condition"), a)
        else:
            raise TypeError("a.compress() missing 1 required argument: 'condition'")
        return entry(ns, args, kwargs)
    if name in _ON_DEVICE and args and isinstance(args[0], (list, tuple)):
        # a small host sequence given as the argument (a.searchsorted([1, 5]),
        # a.repeat([1, 2], axis=0)): copied to the array's device, as NumPy converts it
        arg = ns.asarray(args[0], device=a.device)
        try:
            return entry(ns, (a, arg, *args[1:]), kwargs)
        finally:
            arg.free()
    return entry(ns, (a, *args), kwargs)


# methods whose first argument NumPy converts from a sequence (an explicit, small argument)
_ON_DEVICE = ("searchsorted", "repeat", "take")


def _missing(name: str, target) -> NotImplementedError:
    return NotImplementedError(f"GPUArray.{name}() needs gpuarrays.{target}, which this "
                               "version of gpuarrays does not have")


def _gufunc(inner):
    """Wrap the elementwise ``__array_ufunc__`` so NumPy's gufuncs that are namespace
    functions (``np.matmul``, ``np.vecdot``) run there once the namespace has them."""
    def array_ufunc(a, ufunc, method, *inputs, **kwargs):
        target = GUFUNCS.get(getattr(ufunc, "__name__", None)) if method == "__call__" else None
        if target is not None and getattr(np, ufunc.__name__, None) is ufunc:
            fn = _resolve(_namespace(), target)
            out = kwargs.get("out")
            if type(out) is tuple and len(out) == 1:
                out = out[0]
            if (fn is not None and len(inputs) == 2 and set(kwargs) <= {"out"}
                    and (out is None or isinstance(out, ArrayBase))
                    and all(isinstance(x, ArrayBase) for x in inputs)):
                return fn(*inputs) if out is None else write_into(ufunc.__name__, fn(*inputs),
                                                                  out)
        return inner(a, ufunc, method, *inputs, **kwargs)
    return array_ufunc


def install() -> None:
    """Fill the array layer's ``function`` and ``method`` hooks; wrap its ``ufunc`` hook."""
    HOOKS.function = array_function
    HOOKS.method = array_method
    HOOKS.ufunc = _gufunc(HOOKS.ufunc)
