"""Generate docs/api.md from the docstrings of every name in ``gpuarrays.__all__`` and in
the ``__all__`` of the public subpackages (``ga.linalg``, ``ga.fft``, ``ga.random`` and
the modules of ``ga.interop``).

Run ``python docs/gen_api.py`` after changing a public signature or docstring, in an
environment with every extra installed (``pip install -e ".[all]"``: the interop modules
import their library); ``tests/test_docs.py`` checks that api.md covers exactly those
names and that every summary line still matches its docstring.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

import gpuarrays as ga  # noqa: E402

# Sections of the reference, in reading order; names not listed go to "Other".
SECTIONS = (
    ("Arrays and storage", ["GPUArray", "Storage"]),
    ("Devices", ["Device", "backends", "devices", "get_device", "use_device", "synchronize"]),
    ("Creating arrays", ["array", "empty", "zeros", "ones", "full", "empty_like", "zeros_like",
                         "ones_like", "full_like", "arange", "asarray", "to_numpy",
                         "from_dlpack", "check_dtype", "eye", "linspace", "meshgrid", "tril",
                         "triu"]),
    ("Derived arrays, copies and overlap", ["reshape", "broadcast_to", "moveaxis", "expand_dims",
                                            "copyto", "shares_memory", "may_share_memory",
                                            "unsafe_free"]),
    # manipulation (docs/manipulation.md)
    ("Array API namespace: manipulation", [
        "broadcast_arrays", "broadcast_shapes", "concat", "concatenate", "flip", "permute_dims",
        "repeat", "roll", "squeeze", "stack", "tile", "transpose", "unstack"]),
    ("Foreign memory", ["unsafe_wrap", "pointer_info", "PointerInfo"]),
    ("Allocation caches", ["AllocCache", "cached", "uncached"]),
    ("Statistics, limits and history", ["memory_stats", "memory_status",
                                        "reset_peak_memory_stats", "record_allocations", "trim",
                                        "set_memory_limit", "parse_size", "memory_history"]),
    ("Device lifecycle", ["device_reset", "register_reset_hook", "clear_kernel_cache"]),
    ("Fused functions", ["fuse"]),  # docs/fusion.md
    ("Array API namespace: data types", [
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float32", "float64", "complex64", "complex128",
        "astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type"]),
    ("Array API namespace: constants and inspection", [
        "e", "inf", "nan", "newaxis", "pi", "__array_api_version__", "__array_namespace_info__"]),
    ("Array API namespace: elementwise functions", sorted(ga._compute.elementwise.__all__)),
    ("Array API namespace: statistics, scans, searching and utility", [
        "sum", "prod", "min", "max", "mean", "var", "std", "cumulative_sum", "cumulative_prod",
        "argmax", "argmin", "count_nonzero", "all", "any", "diff"]),
    # linear algebra (docs/linalg.md)
    ("Array API namespace: linear algebra", ["matmul", "matrix_transpose", "tensordot", "vecdot"]),
    # indexing (docs/indexing.md)
    ("Array API namespace: indexing", ["take", "take_along_axis", "nonzero"]),
    # sorting, searching and sets (docs/sorting.md) -- sorting engineer's block
    ("Array API namespace: sorting, searching and sets", [
        "sort", "argsort", "searchsorted", "unique_all", "unique_counts", "unique_inverse",
        "unique_values", "isin"]),
    ("Errors and warnings", ["GPUArraysError", "FreedArrayError", "DeviceResetError",
                             "OutOfMemoryError", "UnsupportedDTypeError", "CacheInUseError",
                             "BackendError", "GPUArraysWarning"]),
)

# The public subpackages, in reading order: (name under ``ga``, the section's title).  Their
# entries are headed ``ga.<subpackage>.<name>``; each section opens with the module docstring.
SUBPACKAGES = (
    ("linalg", "Linear algebra extension: ga.linalg"),
    ("fft", "FFT extension: ga.fft"),
    ("random", "Random numbers: ga.random"),
    ("interop.cupy", "Interop: ga.interop.cupy"),
    ("interop.numba", "Interop: ga.interop.numba"),
    ("interop.pyopencl", "Interop: ga.interop.pyopencl"),
    ("interop.dask", "Interop: ga.interop.dask"),
)

NO_DOC = "*(no docstring)*"
# Public values (dtypes, constants) have no docstring of their own: their text is here.
VALUES = {
    **{n: f"`numpy.dtype('{n}')`: the array API data type (docs/compute.md, \"The namespace\")."
       for n in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float32", "float64", "complex64", "complex128")},
    "e": "Euler's number, 2.718281828459045 (a Python float).",
    "inf": "Positive infinity (a Python float).",
    "nan": "Not a number (a Python float).",
    "newaxis": "`None`: an index that inserts an axis of length 1.",
    "pi": "3.141592653589793 (a Python float).",
    "__array_api_version__": "`\"2025.12\"`: the version of the array API standard implemented.",
}
# Classes users never construct (factories make them): no constructor signature.
NO_CONSTRUCTOR = {"GPUArray", "Storage", "Device"}
# Members that exist for gpuarrays' own modules, not for users.
INTERNAL = {"Storage": {"decref", "release", "invalidate", "freed_error"},
            "Device": {"require"}, "memory_history": {"record", "site"},
            "AllocCache": {"storage", "release_storage", "release_unused", "usage"}}
# Used only while a function has no docstring of its own (marked as such in api.md).
FALLBACK = {
    "zeros": "An array filled with 0; arguments as ``ga.empty``.",
    "ones": "An array filled with 1; arguments as ``ga.empty``.",
    "empty_like": "``ga.empty`` with the shape, dtype, device and kind of ``a`` "
                  "(each can be overridden).",
    "zeros_like": "``ga.zeros`` with the shape, dtype, device and kind of ``a``.",
    "ones_like": "``ga.ones`` with the shape, dtype, device and kind of ``a``.",
    "full_like": "``ga.full`` with the shape, dtype, device and kind of ``a``.",
    "moveaxis": "A view with axes moved, as ``numpy.moveaxis`` (shares the storage).",
    "expand_dims": "A view with a new axis of length 1, as ``numpy.expand_dims``.",
}


class _Text:
    """An annotation kept as text (``from __future__ import annotations``), shown unquoted."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _clean(sig: inspect.Signature) -> inspect.Signature:
    params = [p.replace(annotation=_Text(p.annotation)) if isinstance(p.annotation, str) else p
              for p in sig.parameters.values()]
    ret = sig.return_annotation
    return sig.replace(parameters=params,
                       return_annotation=_Text(ret) if isinstance(ret, str) else ret)


def summary(obj) -> str:
    """The first line of ``obj``'s own docstring ('' when it has none)."""
    doc = _doc(obj)
    return doc.strip().splitlines()[0].strip() if doc.strip() else ""


def _doc(obj) -> str:
    if obj is None or isinstance(obj, (float, str, ga._compute.dtypes.np.dtype)):
        return ""  # a public value: its text is in VALUES
    if isinstance(obj, (property, staticmethod, classmethod)):
        obj = obj.fget if isinstance(obj, property) else obj.__func__
    doc = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    if doc is None and not isinstance(obj, type) and not callable(obj):
        doc = type(obj).__doc__  # an instance such as memory_history
    return inspect.cleandoc(doc) if doc else ""


def _signature(name: str, obj) -> str:
    if isinstance(obj, type):
        if issubclass(obj, BaseException) or name in NO_CONSTRUCTOR:
            return ""
        try:
            sig = inspect.signature(obj)
        except (TypeError, ValueError):
            return ""
        return f"ga.{name}{_clean(sig)}"
    if not callable(obj) or not inspect.isroutine(obj) and not hasattr(obj, "__signature__"):
        return ""  # a callable instance (a Dask dispatch): its class's signature would mislead
    try:
        return f"ga.{name}{_clean(inspect.signature(obj))}"
    except (TypeError, ValueError):
        return ""


def _attribute_doc(module, name: str) -> str:
    """The string literal that follows ``name = ...`` in ``module``'s source (an attribute
    docstring, as Sphinx reads them), or ''."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return ""
    body = tree.body
    for node, after in zip(body, body[1:]):
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                 for t in node.targets)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            return inspect.cleandoc(after.value.value)
    return ""


def _members(owner: str, cls: type) -> list[tuple[str, object]]:
    found: dict[str, object] = {}
    if issubclass(cls, tuple):
        return []  # a namedtuple result: its fields are in the signature
    # gpuarrays' own classes only: what a base from Dask or NumPy offers is documented there
    own = [k for k in cls.__mro__[:-1] if k.__module__.split(".")[0] == "gpuarrays"]
    for klass in reversed(own):
        for mname, member in vars(klass).items():
            if mname.startswith("_") or mname in INTERNAL.get(owner, ()):
                continue
            if callable(member) or isinstance(member, (property, staticmethod, classmethod)):
                found[mname] = member
    return list(found.items())


def _member_text(mname: str, member) -> str:
    if isinstance(member, property):
        return f"`{mname}`"
    fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
    try:
        params = list(inspect.signature(fn).parameters.values())
        if params and params[0].name in ("self", "cls"):
            params = params[1:]
        sig = str(_clean(inspect.Signature(params)))
    except (TypeError, ValueError):
        sig = "(...)"
    return f"`.{mname}{sig}`"


def _member_lines(owner: str, members: list[tuple[str, object]]) -> list[str]:
    documented = [(m, member) for m, member in members if summary(member)]
    plain = [(m, member) for m, member in members if not summary(member)]
    lines = ["Members:", ""] if members else []
    for m, member in documented:
        lines.append(f"- {_member_text(m, member)}: {summary(member)}")
    if plain:
        lines.append("- also: " + ", ".join(_member_text(m, member)
                                                          for m, member in plain))
    return lines + ([""] if members else [])


def _entry(name: str, obj=None, module=None) -> list[str]:
    """The entry of ``ga.<name>`` (``name`` may be dotted: ``linalg.solve``)."""
    obj = getattr(ga, name) if obj is None else obj
    lines = [f"### `ga.{name}`", ""]
    sig = _signature(name, obj)
    if sig:
        lines += ["```text", sig, "```", ""]
    if isinstance(obj, type) and issubclass(obj, BaseException):
        lines += [f"Inherits: {', '.join(b.__name__ for b in obj.__bases__)}.", ""]
    doc = VALUES.get(name) or _doc(obj) or (FALLBACK[name] + " *(summary from docs/gen_api.py: the function has "
                        "no docstring yet)*" if name in FALLBACK else "") or (
        _attribute_doc(module, name.rsplit(".", 1)[-1]) if module is not None else "") or NO_DOC
    lines += [doc, ""]
    if isinstance(obj, type) and not issubclass(obj, BaseException):
        if name in NO_CONSTRUCTOR:
            lines += ["Not constructed directly: gpuarrays' functions make and return it.", ""]
        lines += _member_lines(name, _members(name, obj))
    elif not callable(obj) and name not in VALUES:  # an instance, such as memory_history
        lines += _member_lines(name, _members(name, type(obj)))
    return lines


def subpackage(sub: str):
    """The module ``gpuarrays.<sub>``; ImportError when the library it wraps is missing."""
    return importlib.import_module(f"gpuarrays.{sub}")


def _subpackage_section(sub: str) -> tuple[list[str], list[str]]:
    """(the names of ``ga.<sub>.__all__``, the lines of its section after the title)."""
    try:
        module = subpackage(sub)
    except ImportError as e:  # an interop module whose library is not installed here
        return [], [f"*Not rendered: `gpuarrays.{sub}` cannot be imported here ({e}); run "
                    "docs/gen_api.py where every extra is installed.*", ""]
    lines = []
    if sub.startswith("interop."):
        lines += [f"`import gpuarrays.{sub}` first: `import gpuarrays` does not import the "
                  "interop modules.", ""]
    lines += [_doc(module), ""]
    for name in module.__all__:
        obj = getattr(module, name)
        top = name in ga.__all__ and getattr(ga, name) is obj
        if top:  # the same function as the top-level one (ga.linalg.matmul is ga.matmul)
            lines += [f"### `ga.{sub}.{name}`", "",
                      f"The same function as [`ga.{name}`](#{_anchor(f'ga.{name}')}).", ""]
        else:
            lines += _entry(f"{sub}.{name}", obj, module)
    return list(module.__all__), lines


def render() -> str:
    """The text of api.md."""
    names = list(ga.__all__)
    placed = [n for _, group in SECTIONS for n in group if n in names]
    other = [n for n in names if n not in placed]
    sections = [(title, [n for n in group if n in names]) for title, group in SECTIONS]
    if other:
        sections.append(("Other", other))
    subs = [(title, sub, *_subpackage_section(sub)) for sub, title in SUBPACKAGES]
    lines = ["# API reference", "",
             "<!-- Generated by docs/gen_api.py from the docstrings; do not edit by hand. -->",
             "",
             "Every public name of `gpuarrays` (`import gpuarrays as ga`), that is every name in "
             "`ga.__all__`, then the public subpackages `ga.linalg`, `ga.fft`, `ga.random` and "
             "`ga.interop`. The storage model behind them is explained in "
             "[guide.md](guide.md).",
             ""]
    for title, group in sections:
        if group:
            lines.append(f"- [{title}](#{_anchor(title)}): "
                         + ", ".join(f"`{n}`" for n in group))
    for title, _, sub_names, _ in subs:
        lines.append(f"- [{title}](#{_anchor(title)}): "
                     + (", ".join(f"`{n}`" for n in sub_names) or "*(not rendered)*"))
    lines.append("")
    for title, group in sections:
        if not group:
            continue
        lines += [f"## {title}", ""]
        for name in group:
            lines += _entry(name)
    for title, _, _, sub_lines in subs:
        lines += [f"## {title}", ""] + sub_lines
    return "\n".join(lines).rstrip() + "\n"


def _anchor(title: str) -> str:
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c == "-")


def main() -> int:
    path = os.path.join(HERE, "api.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(render())
    count = len(ga.__all__)
    for sub, _ in SUBPACKAGES:
        try:
            count += len(subpackage(sub).__all__)
        except ImportError:
            print(f"warning: gpuarrays.{sub} cannot be imported: its section is not rendered",
                  file=sys.stderr)
    print(f"wrote {path} ({count} names)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
