"""Kernel source for one elementwise signature, from one template for both C dialects.

A :class:`Signature` is everything a kernel is specialised on
(docs/kernels.md, "Signatures"): the operation, the output's and every
operand's storage dtype and compute dtype, whether each array is addressed as
``i * itemsize`` (contiguous after collapse) or through strides, whether its
addresses are aligned to its element, whether an operand is a scalar argument,
the collapsed number of dimensions and the index width (32 or 64 bits).

:func:`source` prints a program holding the kernels of one or more signatures
in a :class:`~gpuarrays.backends._kernels.Dialect` (OpenCL C or CUDA C, which
the back-end hands out as ``impl.dialect``); :func:`params` lists a kernel's
parameters as the back-end's launch interface types them, each with its role,
so the launcher knows what to pass.  One work-item computes one element
(docs/kernels.md, "Launch shapes"): ``i`` is decoded into per-array byte
offsets with one division per collapsed dimension beyond the first, and not at
all on the flat path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...backends._kernels import SCALARS, Dialect, access_source, scalar_key
from . import expressions as ex

__all__ = ["Operand", "Signature", "Param", "source", "params", "kernel_name", "key_of"]

_CTYPE = {k: ("u8" if k == "b1" else s.real if s.kind != "c" else ("c64" if k == "c8" else "c128"))
          for k, s in SCALARS.items()}
_STORAGE = {k: s.storage for k, s in SCALARS.items()}
_REAL_OF = {"c8": "f4", "c16": "f8"}


def key_of(dtype: np.dtype) -> str:
    """The kernel key of a dtype (``"f4"``); ``ValueError`` for one no kernel handles."""
    key = scalar_key(np.dtype(dtype))
    if key is None:
        raise ValueError(f"no device kernel handles dtype {np.dtype(dtype)} "
                         f"(numeric and bool dtypes in native byte order only)")
    return key


@dataclass(frozen=True)
class Operand:
    """One input of a kernel: ``storage`` is None for a scalar passed by value."""

    storage: str | None
    compute: str
    contiguous: bool = True
    aligned: bool = True


@dataclass(frozen=True)
class Signature:
    """What one generated kernel is specialised on (see the module docstring)."""

    op: str
    out: str
    operands: tuple[Operand, ...]
    ndim: int = 1
    index64: bool = False
    out_contiguous: bool = True
    out_aligned: bool = True
    # The launch has exactly n work-items: no bounds check (which costs PoCL's vectorised
    # work-group loop 20-25 % on compute-bound operations such as exp).
    exact: bool = False

    def arrays(self) -> list[tuple[int, str, bool, bool]]:
        """(array number, storage key, contiguous, aligned): the output (0), then array operands."""
        out = [(0, self.out, self.out_contiguous, self.out_aligned)]
        for k, o in enumerate(self.operands):
            if o.storage is not None:
                out.append((k + 1, o.storage, o.contiguous, o.aligned))
        return out


@dataclass(frozen=True)
class Param:
    """A kernel parameter: its launch type (``"ptr"`` or a NumPy dtype code) and role.

    Roles: ``("ptr", a)`` the address of array ``a`` (0 is the output, ``k + 1``
    operand ``k``), ``("scalar", k)`` / ``("re", k)`` / ``("im", k)`` operand
    ``k``'s value (or its parts), ``("n",)`` the element count, ``("extent", d)``
    the extent of collapsed axis ``d``, ``("stride", a, d)`` array ``a``'s byte
    stride along it.
    """

    type: str
    role: tuple


def kernel_name(sig: Signature) -> str:
    """A C identifier unique to the signature within a program."""
    def tag(o: Operand) -> str:
        if o.storage is None:
            return f"s{o.compute}"
        return f"{o.storage}{o.compute}{'c' if o.contiguous else 's'}{'' if o.aligned else 'u'}"
    parts = [sig.op, f"{sig.out}{'c' if sig.out_contiguous else 's'}{'' if sig.out_aligned else 'u'}",
             *map(tag, sig.operands), f"d{sig.ndim}", "i64" if sig.index64 else "i32"]
    if sig.exact:
        parts.append("x")
    return "ew_" + "_".join(parts)


def params(sig: Signature) -> list[Param]:
    """The parameters of the signature's kernel, in order."""
    idx, off = ("u8", "i8") if sig.index64 else ("u4", "i4")
    out = [Param("ptr", ("ptr", 0))]
    for k, o in enumerate(sig.operands):
        if o.storage is not None:
            out.append(Param("ptr", ("ptr", k + 1)))
        elif o.compute in _REAL_OF:
            real = _REAL_OF[o.compute]
            out += [Param(real, ("re", k)), Param(real, ("im", k))]
        else:
            out.append(Param("f4" if o.compute == "f2" else o.compute, ("scalar", k)))
    out.append(Param(idx, ("n",)))
    out += [Param(idx, ("extent", d)) for d in range(1, sig.ndim)]
    for a, _, contiguous, _ in sig.arrays():
        if not contiguous:
            out += [Param(off, ("stride", a, d)) for d in range(sig.ndim)]
    return out


# Conversions between compute representations (float16 is float) ----------------------------
def _convert(d: Dialect, src: str, dst: str, v: str) -> str:
    """``v`` (compute representation of ``src``) as ``dst``, with NumPy's casting rules."""
    if src == dst:
        return v
    s, t = src[0], dst[0]
    if t == "b":
        return f"(u8)(({v}).x != 0 || ({v}).y != 0)" if s == "c" else f"(u8)(({v}) != 0)"
    if t == "c":
        real = _CTYPE[_REAL_OF[dst]]
        if s == "c":
            return f"c_make_{dst}(({real})({v}).x, ({real})({v}).y)"
        return f"c_make_{dst}(({real})({v}), 0)"
    if s == "c":  # complex to real: the real part, as NumPy (with a ComplexWarning)
        return _convert(d, _REAL_OF[src], dst, f"({v}).x")
    if s == "f" and t in "iu":
        return d.float_to_int(dst, v)
    if dst == "f2":  # round to float16, keep computing in float
        return f"half_to_float({d.to_half(_CTYPE[src] if s == 'f' else 'float', v)})"
    return f"({_CTYPE[dst]})({v})"


def _load(d: Dialect, key: str, p: str, aligned: bool) -> str:
    """The compute representation of the element stored at byte address ``p``."""
    g, storage = d.glob, _STORAGE[key]

    def raw(ctype: str, at: str) -> str:
        if aligned or ctype in ("u8", "i8"):
            return f"(*({g}const {ctype} *)({at}))"
        return f"ld_{ctype}({at})"
    if key == "b1":
        return f"(u8)({raw('u8', p)} != 0)"
    if key == "f2":
        return f"half_to_float({raw('u16', p)})"
    if key in _REAL_OF:
        size = SCALARS[key].size
        return f"c_make_{key}({raw(storage, p)}, {raw(storage, f'{p} + {size}')})"
    return raw(storage, p)


def _store(d: Dialect, key: str, p: str, aligned: bool, v: str, vkey: str) -> str:
    """Statement storing the value ``v`` (compute representation of ``vkey``) as ``key``."""
    g, storage = d.glob, _STORAGE[key]

    def raw(ctype: str, at: str, value: str) -> str:
        if aligned or ctype in ("u8", "i8"):
            return f"*({g}{ctype} *)({at}) = {value};"
        return f"st_{ctype}({at}, {value});"
    if key == "f2":
        if vkey[0] == "c":
            v, vkey = f"({v}).x", _REAL_OF[vkey]
        real = _CTYPE[vkey] if vkey[0] == "f" else "float"
        value = v if vkey[0] == "f" else f"(float)({v})"
        return raw("u16", p, d.to_half(real, value))
    c = _convert(d, vkey, key, v)
    if key in _REAL_OF:
        size = SCALARS[key].size
        return (f"{{ {_CTYPE[key]} r_ = {c}; {raw(storage, p, 'r_.x')} "
                f"{raw(storage, f'{p} + {size}', 'r_.y')} }}")
    return raw(storage, p, c)


# The program ----------------------------------------------------------------------------------
_TANH_BIG = {"c8": "9.0f", "c16": "22.0"}


def _helpers(d: Dialect, sigs: list[Signature]) -> tuple[list[str], set[str], set[str]]:
    """Helper source the kernels need (each group once per compute type), complex and access types."""
    wanted: list[tuple[str, str]] = []
    complex_keys: set[str] = set()
    access: set[tuple[str, bool]] = set()

    def want(group: str, key: str) -> None:
        for dep in ex.HELPERS[group].needs:
            want(dep, key)
        if (group, key) not in wanted:
            wanted.append((group, key))

    for sig in sigs:
        expr, ckey = _expr(sig)
        keys = [o.compute for o in sig.operands] + [ex.result_key(expr, ckey), sig.out]
        keys += [o.storage for o in sig.operands if o.storage]
        for k in keys:
            if k in _REAL_OF:
                complex_keys.add(k)
                want("complex", k)
        for group in expr.helpers:
            want(group, ckey)
        for _, key, _, aligned in sig.arrays():
            if not aligned:
                access.add(_STORAGE[key])
    src = []
    for group, key in wanted:
        src.append(ex.HELPERS[group].source(ex.TypeNames(key, d.suffix_math)))
        if group == "complex":
            src.insert(len(src) - 1, f"#define TANH_BIG_{key} {_TANH_BIG[key]}\n")
    return src, complex_keys, access


def _expr(sig: Signature) -> tuple[ex.Expr, str]:
    """The signature's expression and the compute key its placeholders are filled for."""
    ckey = sig.operands[ex.value_arg(sig.op)].compute
    by_class = ex.EXPRESSIONS[sig.op]
    cls = ex.dtype_class(np.dtype(_DTYPE_OF[ckey]))
    if cls not in by_class:
        raise ValueError(f"{sig.op} has no device expression for {_DTYPE_OF[ckey]} ({cls})")
    return by_class[cls], ckey


_DTYPE_OF = {"b1": "bool", "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
             "u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64", "f2": "float16",
             "f4": "float32", "f8": "float64", "c8": "complex64", "c16": "complex128"}


def _kernel(d: Dialect, sig: Signature) -> str:
    expr, ckey = _expr(sig)
    names = ex.TypeNames(ckey, d.suffix_math)
    rkey = ex.result_key(expr, ckey)
    name = kernel_name(sig)
    g = d.glob
    idx, off = ("u64", "i64") if sig.index64 else ("u32", "i32")
    args = "xyz"[: len(sig.operands)]
    fn_params = ", ".join(f"{_CTYPE[o.compute]} {a}" for o, a in zip(sig.operands, args, strict=True))
    lines = [f"DEV {_CTYPE[rkey]} {name}_f({fn_params}) {{ return {expr.c.format_map(names)}; }}\n"]
    decl = []
    for p in params(sig):
        role = p.role
        ctype = {"ptr": None, "u4": "u32", "u8": "u64", "i4": "i32", "i8": "i64"}.get(p.type, "")
        if role[0] == "ptr":
            decl.append(f"{g}u8 *p{role[1]}" if role[1] == 0 else f"{g}const u8 *p{role[1]}")
        elif role[0] in ("scalar", "re", "im"):
            o = sig.operands[role[1]]
            base = _CTYPE[_REAL_OF.get(o.compute, o.compute)]
            suffix = "" if role[0] == "scalar" else f"_{role[0]}"
            decl.append(f"{base} s{role[1]}{suffix}")
        elif role[0] == "n":
            decl.append(f"{ctype} n")
        elif role[0] == "extent":
            decl.append(f"{ctype} n{role[1]}")
        else:
            decl.append(f"{ctype} s{role[1]}_{role[2]}")
    body = [f"    {idx} i = ({idx})GRID_START;\n"]
    if not sig.exact:
        body.append("    if (i >= n) return;\n")
    strided = [(a, key) for a, key, contiguous, _ in sig.arrays() if not contiguous]
    for a, key, contiguous, _ in sig.arrays():
        if contiguous:
            body.append(f"    {off} o{a} = ({off})i * {SCALARS[key].size * (2 if key in _REAL_OF else 1)};\n")
        else:
            body.append(f"    {off} o{a} = 0;\n")
    if strided:
        if sig.ndim == 1:
            for a, _ in strided:
                body.append(f"    o{a} = ({off})i * s{a}_0;\n")
        else:
            body.append(f"    {idx} r = i, c;\n")
            for dim in range(sig.ndim - 1, 0, -1):
                body.append(f"    c = r % n{dim}; r = r / n{dim};\n")
                body += [f"    o{a} += ({off})c * s{a}_{dim};\n" for a, _ in strided]
            body += [f"    o{a} += ({off})r * s{a}_0;\n" for a, _ in strided]
    values = []
    for k, (o, a) in enumerate(zip(sig.operands, args, strict=True)):
        if o.storage is None:
            v = f"c_make_{o.compute}(s{k}_re, s{k}_im)" if o.compute in _REAL_OF else f"s{k}"
        else:
            v = _convert(d, o.storage, o.compute, _load(d, o.storage, f"p{k + 1} + o{k + 1}", o.aligned))
        body.append(f"    {_CTYPE[o.compute]} {a} = {v};\n")
        values.append(a)
    result = f"{name}_f({', '.join(values)})"
    body.append(f"    {_store(d, sig.out, 'p0 + o0', sig.out_aligned, result, rkey)}\n")
    lines.append(f"{d.kernel} void {name}({', '.join(decl)}) {{\n{''.join(body)}}}\n")
    return "".join(lines)


def _doubles(sig: Signature) -> bool:
    keys = [sig.out] + [o.compute for o in sig.operands] + [o.storage or "" for o in sig.operands]
    return any(k in ("f8", "c16") for k in keys)


def source(d: Dialect, sigs: list[Signature]) -> str:
    """A program with the kernels of ``sigs`` (names from :func:`kernel_name`)."""
    doubles = any(map(_doubles, sigs))
    helpers, complex_keys, access = _helpers(d, sigs)
    parts = [d.fp64 if doubles else "", d.prelude, "#ifndef DEV\n#define DEV " + d.fn + "\n#endif\n",
             d.compute_prelude, d.half_src(doubles)]
    if "c8" in complex_keys:
        parts.append("typedef float2 c64;\n")
    if "c16" in complex_keys:
        parts.append("typedef double2 c128;\n")
    for ctype in sorted(access):
        parts += [access_source(d, ctype, False, False), access_source(d, ctype, False, True)]
    parts += helpers
    seen = set()
    for sig in sigs:
        if sig not in seen:
            seen.add(sig)
            parts.append(_kernel(d, sig))
    return "".join(parts)
