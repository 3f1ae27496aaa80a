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


def _unique(ns, given):
    """``np.unique`` over the standard's ``unique_values``/``_counts``/``_inverse``/``_all``
    (flattened input, as NumPy's ``axis=None``)."""
    if given.get("axis") is not None or given.get("equal_nan", True) is not True:
        raise TypeError("numpy.unique with axis= or equal_nan=False has no gpuarrays "
                        "equivalent; use ga.unique_values and friends")
    x = given["ar"]
    want = [given.get("return_index", False), given.get("return_inverse", False),
            given.get("return_counts", False)]
    if not any(want):
        return _call_ns(ns, "unique_values", x)
    if want == [False, False, True]:
        return tuple(_call_ns(ns, "unique_counts", x))
    if want == [False, True, False]:
        r = _call_ns(ns, "unique_inverse", x)
        return r[0], r[1]
    r = _call_ns(ns, "unique_all", x)
    out = [r.values]
    out += [r.indices] if want[0] else []
    out += [r.inverse_indices] if want[1] else []
    out += [r.counts] if want[2] else []
    return tuple(out)


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
        if tuple(a % x.ndim for a in axis) != (x.ndim - 2, x.ndim - 1):
            x = ns.moveaxis(x, axis, (-2, -1))
        return _call_ns(ns, "linalg.matrix_norm", x, ord="fro" if ord_ is None else ord_,
                        keepdims=keepdims)
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


def _sorting(name: str):
    """``np.sort``/``np.argsort`` (and ``a.sort()``): NumPy's default kind lets equal elements
    come in any order, so the namespace's ``stable=False`` (NumPy's fast default sort on
    ``cpu``); ``kind="stable"``/``"mergesort"`` or ``stable=True`` ask for the stable one."""

    def run(ns, g: dict):
        kind, stable = g.pop("kind", None), g.pop("stable", None)
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
    ("unique", _unique, {"needs": "unique_values"}), ("unique_values", "unique_values", {}),
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
        "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
        "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv",
        "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
        "vector_norm")),
    *((f"fft.{n}", f"fft.{n}", {}) for n in (
        "fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
        "fftshift", "ifftshift")),
]

# NumPy's generalized ufuncs that are namespace functions: through __array_ufunc__.
GUFUNCS = {"matmul": "matmul", "vecdot": "vecdot", "matvec": None, "vecmat": None}

# Array methods -> the NumPy function whose entry runs them (called with the array first).
METHODS = {name: name for name in (
    "sum", "prod", "max", "min", "mean", "std", "var", "argmax", "argmin", "any", "all",
    "cumsum", "cumprod", "clip", "round", "nonzero", "argsort", "repeat", "take", "dot")}


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
            if p.kind is _P.VAR_KEYWORD:
                if value:
                    raise TypeError(f"numpy.{self.numpy_name}: gpuarrays takes none of "
                                    f"{', '.join(value)}")
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
        for q in theirs:
            if q.kind is _P.POSITIONAL_ONLY:
                if q.name in mapped and len(pos) == theirs.index(q):
                    pos.append(mapped.pop(q.name))
            elif q.kind is _P.VAR_POSITIONAL:
                pos.extend(mapped.pop(q.name, ()))
            elif q.kind in (_P.POSITIONAL_OR_KEYWORD, _P.KEYWORD_ONLY) and q.name in mapped:
                kw[q.name] = mapped.pop(q.name)
        if mapped:
            raise TypeError(
                f"numpy.{self.numpy_name} on gpuarrays arrays: gpuarrays.{self.target} takes no "
                f"{', '.join(f'{k}={_show(v)}' for k, v in mapped.items())}; leave it at NumPy's "
                "default or copy to the host with .get() and use NumPy")
        return fn(*pos, **kw)


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
    if name == "sort":  # in place, as NumPy's
        entry = _BY_NAME["sort"]
        if not entry.available(ns):
            raise _missing(name, entry.target)
        result = entry(ns, (a, *args), kwargs)
        try:
            if result.shape != a.shape:
                raise ValueError("a.sort(axis=None) would flatten; use np.sort(a, axis=None)")
            a[...] = result
        finally:
            result.free()
        return None
    entry = _BY_NAME[METHODS[name]]
    if not entry.available(ns):
        raise _missing(name, entry.target)
    return entry(ns, (a, *args), kwargs)


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
