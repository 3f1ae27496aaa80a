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

__all__ = ["Operand", "Signature", "Step", "Fused", "Param", "source", "params", "kernel_name",
           "key_of", "fused_of", "fused_name", "fused_params", "step_functions",
           "body_function", "prelude"]

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
    """One input of a kernel: ``storage`` is None for a scalar passed by value.

    A float16 scalar (``compute == "f2"``) is passed as a ``double`` when ``wide``
    (devices with float64) and rounded to float16 once in the kernel, as NumPy
    converts a Python float to the array's float16; as a ``float`` otherwise
    (the compiled launch rounds a Python float to float first, a double rounding
    that can differ from NumPy's in the last bit for a value next to a tie).
    """

    storage: str | None
    compute: str
    contiguous: bool = True
    aligned: bool = True
    wide: bool = False


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
    # Work-groups by rows of the last axis (launcher._shaped_plan): for strided layouts
    # of two or more axes, so that a work-group's items have consecutive last indices;
    # unit_rows: the arrays (numbered as in arrays()) whose last stride is their item
    # size, addressed along a row by a constant (a device vectorises that, not a stride
    # known only at run time).
    rows: bool = False
    unit_rows: tuple[int, ...] = ()

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
            return f"s{o.compute}{'w' if o.wide else ''}"
        return f"{o.storage}{o.compute}{'c' if o.contiguous else 's'}{'' if o.aligned else 'u'}"
    parts = [sig.op, f"{sig.out}{'c' if sig.out_contiguous else 's'}{'' if sig.out_aligned else 'u'}",
             *map(tag, sig.operands), f"d{sig.ndim}", "i64" if sig.index64 else "i32"]
    if sig.exact:
        parts.append("x")
    if sig.rows:
        parts.append("r" + "".join(map(str, sig.unit_rows)))
    return "ew_" + "_".join(parts)


def _scalar_param(o: Operand) -> str:
    """The launch type of a real scalar operand (float16 travels as double or float)."""
    if o.compute == "f2":
        return "f8" if o.wide else "f4"
    return o.compute


def params(sig: Signature) -> list[Param]:
    """The parameters of the signature's kernel, in order (:func:`fused_params` of its
    one-step kernel)."""
    return fused_params(fused_of(sig))


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


def _load_as(d: Dialect, key: str, compute: str, p: str, aligned: bool) -> str:
    """The element of storage key ``key`` at ``p`` in the compute representation of
    ``compute``.  float16 computed in float64 (or complex128) goes straight to double where
    the dialect has ``half_to_double``: through float, the conversion to double would quiet
    a signalling NaN that NumPy's ``npy_halfbits_to_doublebits`` keeps."""
    if key == "f2" and compute in ("f8", "c16") and _has_half_to_double(d):
        g = d.glob
        raw = (f"(*({g}const u16 *)({p}))" if aligned else f"ld_u16({p})")
        v = f"half_to_double({raw})"
        return v if compute == "f8" else f"c_make_c16({v}, 0)"
    return _convert(d, key, compute, _load(d, key, p, aligned))


def _has_half_to_double(d: Dialect) -> bool:
    return "half_to_double" in d.half_src(True)


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


@dataclass(frozen=True)
class Step:
    """One operation of a fused body: ``op`` (an expression of ``expressions.py``) over
    the values ``args`` -- operand ``k`` is value ``k``, step ``j`` of the body value
    ``len(operands) + j`` -- each converted to its compute key in ``arg_keys`` first; its
    value is rounded to ``key`` (float16 keeps float's precision in a register, so a
    float16 step is rounded as storing it would), which is the expression's own result
    key for a lone operation."""

    op: str
    args: tuple[int, ...]
    arg_keys: tuple[str, ...]
    key: str


@dataclass(frozen=True)
class Fused:
    """A kernel over a body of steps: ``operands`` are loaded (arrays) or passed
    (scalars) in their compute representation, the ``steps`` run in order, and each of
    ``results`` (a value number) is stored into output ``j`` of storage key
    ``outs[j][0]`` (contiguous ``outs[j][1]``, aligned ``outs[j][2]``).  A lone
    elementwise :class:`Signature` is the one-step case (:func:`fused_of`); ``ga.fuse``
    traces the others (docs/fusion.md)."""

    operands: tuple[Operand, ...]
    steps: tuple[Step, ...]
    results: tuple[int, ...]
    outs: tuple[tuple[str, bool, bool], ...]
    ndim: int = 1
    index64: bool = False
    exact: bool = False
    rows: bool = False  # as Signature.rows
    unit_rows: tuple[int, ...] = ()  # as Signature.unit_rows

    def arrays(self) -> list[tuple[int, str, bool, bool]]:
        """(array number, storage key, contiguous, aligned): the outputs, then array operands."""
        m = len(self.outs)
        out = [(j, key, c, a) for j, (key, c, a) in enumerate(self.outs)]
        for k, o in enumerate(self.operands):
            if o.storage is not None:
                out.append((m + k, o.storage, o.contiguous, o.aligned))
        return out


_ASTYPE = ex.Expr("x")
"""``astype`` in a fused body: the value itself, which the step's key converts."""


def _step_expr(step: Step) -> tuple[ex.Expr, str]:
    """A step's expression and the compute key its placeholders are filled for."""
    if step.op == "astype":
        return _ASTYPE, step.arg_keys[0]
    ckey = step.arg_keys[ex.value_arg(step.op)]
    by_class = ex.EXPRESSIONS[step.op]
    cls = ex.dtype_class(np.dtype(_DTYPE_OF[ckey]))
    if cls not in by_class:
        raise ValueError(f"{step.op} has no device expression for {_DTYPE_OF[ckey]} ({cls})")
    return by_class[cls], ckey


def fused_of(sig: Signature) -> Fused:
    """The one-step :class:`Fused` kernel of a lone elementwise signature."""
    n = len(sig.operands)
    keys = tuple(o.compute for o in sig.operands)
    expr, ckey = _step_expr(Step(sig.op, tuple(range(n)), keys, ""))
    step = Step(sig.op, tuple(range(n)), keys, ex.result_key(expr, ckey))
    return Fused(sig.operands, (step,), (n,), ((sig.out, sig.out_contiguous, sig.out_aligned),),
                 sig.ndim, sig.index64, sig.exact, sig.rows, sig.unit_rows)


def fused_name(f: Fused) -> str:
    """A C identifier for a fused kernel, from a hash of what it is specialised on."""
    import hashlib

    return "fu_" + hashlib.sha256(repr(f).encode()).hexdigest()[:20]


def fused_params(f: Fused) -> list[Param]:
    """The parameters of a fused kernel, in order: the outputs' addresses, then each
    operand's (address, value or parts), the count, the extents, the strides of every
    array addressed through strides (roles as :class:`Param`; array ``j < len(outs)``
    is output ``j``, array ``len(outs) + k`` operand ``k``)."""
    idx, off = ("u8", "i8") if f.index64 else ("u4", "i4")
    m = len(f.outs)
    out = [Param("ptr", ("ptr", j)) for j in range(m)]
    for k, o in enumerate(f.operands):
        if o.storage is not None:
            out.append(Param("ptr", ("ptr", m + k)))
        elif o.compute in _REAL_OF:
            real = _REAL_OF[o.compute]
            out += [Param(real, ("re", k)), Param(real, ("im", k))]
        else:
            out.append(Param(_scalar_param(o), ("scalar", k)))
    out.append(Param(idx, ("n",)))
    out += [Param(idx, ("extent", d)) for d in range(1, f.ndim)]
    for a, _, contiguous, _ in f.arrays():
        if not contiguous:
            out += [Param(off, ("stride", a, d)) for d in range(f.ndim)]
    return out


def _helpers(d: Dialect, kernels: list[Fused]) -> tuple[list[str], set[str], set[str]]:
    """Helper source the kernels need (each group once per compute type), complex and access types."""
    wanted: list[tuple[str, str]] = []
    complex_keys: set[str] = set()
    access: set[str] = set()

    def want(group: str, key: str) -> None:
        for dep in ex.HELPERS[group].needs:
            want(dep, key)
        if (group, key) not in wanted:
            wanted.append((group, key))

    for f in kernels:
        keys = [o.compute for o in f.operands] + [o.storage or "" for o in f.operands]
        keys += [key for key, _, _ in f.outs]
        for step in f.steps:
            expr, ckey = _step_expr(step)
            keys += [*step.arg_keys, ex.result_key(expr, ckey), step.key]
            for group in expr.helpers:
                want(group, ckey)
        for k in keys:
            if k in _REAL_OF:
                complex_keys.add(k)
                want("complex", k)
        for _, key, _, aligned in f.arrays():
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
    n = len(sig.operands)
    return _step_expr(Step(sig.op, tuple(range(n)), tuple(o.compute for o in sig.operands), ""))


_DTYPE_OF = {"b1": "bool", "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
             "u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64", "f2": "float16",
             "f4": "float32", "f8": "float64", "c8": "complex64", "c16": "complex128"}


def step_functions(d: Dialect, f: Fused, name: str) -> tuple[str, list[str]]:
    """(source of one ``DEV`` function per step, the C expression of each step's value).

    Operand ``k`` is the variable ``v{k}`` in its compute representation and step ``j``'s
    value the variable ``v{len(operands) + j}``; step ``j`` calls its function
    (``{name}_f`` for a lone step, else ``{name}_f{j}``) on its arguments converted to
    their compute keys, and its value is converted (float16: rounded) to the step's key."""
    keys = [o.compute for o in f.operands] + [s.key for s in f.steps]
    lines, values = [], []
    for j, step in enumerate(f.steps):
        expr, ckey = _step_expr(step)
        rkey = ex.result_key(expr, ckey)
        fn = f"{name}_f" if len(f.steps) == 1 else f"{name}_f{j}"
        args = "xyz"[: len(step.args)]
        fn_params = ", ".join(f"{_CTYPE[k]} {a}" for k, a in zip(step.arg_keys, args, strict=True))
        code = expr.c.format_map(ex.TypeNames(ckey, d.suffix_math))
        lines.append(f"DEV {_CTYPE[rkey]} {fn}({fn_params}) {{ return {code}; }}\n")
        given = [_convert(d, keys[v], k, f"v{v}")
                 for v, k in zip(step.args, step.arg_keys, strict=True)]
        value = _convert(d, rkey, step.key, f"{fn}({', '.join(given)})")
        if step.key == "f2" and rkey == "f2":  # a float16 value held in a float: round it
            value = f"half_to_float({d.to_half('float', value)})"
        values.append(value)
    return "".join(lines), values


def body_function(d: Dialect, f: Fused, name: str) -> tuple[str, str, list[tuple[str, str]]]:
    """A fused body as one device function, for kernels that address their operands
    themselves (a fused reduction reads its element through this): ``(source, result
    key, parameters)``.  ``DEV <T> {name}(...)`` takes, per operand ``k``, the address
    ``a{k}`` of its element (arrays: ``<glob> const u8 *``; ``f.operands[k].aligned``
    says how to load it) or its value (scalars: ``s{k}``, or ``s{k}_re``/``s{k}_im``),
    and returns ``f.results[0]``'s value in its compute representation (C type of the
    result key).  ``parameters`` lists ``(launch type, C declaration)`` in order, with
    ``"ptr"`` for addresses (as :class:`Param`)."""
    fns, values = step_functions(d, f, name)
    params: list[tuple[str, str]] = []
    body = []
    for k, o in enumerate(f.operands):
        if o.storage is None:
            if o.compute in _REAL_OF:
                real = _REAL_OF[o.compute]
                params += [(real, f"{_CTYPE[real]} s{k}_re"), (real, f"{_CTYPE[real]} s{k}_im")]
                v = f"c_make_{o.compute}(s{k}_re, s{k}_im)"
            else:
                base = "double" if o.wide else _CTYPE[o.compute]
                params.append((_scalar_param(o), f"{base} s{k}"))
                v = (f"half_to_float({d.to_half(base, f's{k}')})" if o.compute == "f2"
                     else f"s{k}")
        else:
            params.append(("ptr", f"{d.glob}const u8 *a{k}"))
            v = _load_as(d, o.storage, o.compute, f"a{k}", o.aligned)
        body.append(f"    {_CTYPE[o.compute]} v{k} = {v};\n")
    n = len(f.operands)
    for j, step in enumerate(f.steps):
        body.append(f"    {_CTYPE[step.key]} v{n + j} = {values[j]};\n")
    r = f.results[0]
    rkey = f.operands[r].compute if r < n else f.steps[r - n].key
    decl = ", ".join(c for _, c in params)
    src = fns + f"DEV {_CTYPE[rkey]} {name}({decl}) {{\n{''.join(body)}    return v{r};\n}}\n"
    return src, rkey, params


def _operand_values(d: Dialect, f: Fused) -> list[str]:
    """Statements defining ``v{k}``, operand ``k`` in its compute representation, from
    array ``len(outs) + k`` at byte offset ``o{a}`` of ``p{a}`` or from scalar parameters."""
    m, body = len(f.outs), []
    for k, o in enumerate(f.operands):
        if o.storage is None:
            if o.compute in _REAL_OF:
                v = f"c_make_{o.compute}(s{k}_re, s{k}_im)"
            elif o.compute == "f2":  # the scalar rounded to float16 once, as NumPy does
                v = f"half_to_float({d.to_half('double' if o.wide else 'float', f's{k}')})"
            else:
                v = f"s{k}"
        else:
            a = m + k
            v = _load_as(d, o.storage, o.compute, f"p{a} + o{a}", o.aligned)
        body.append(f"    {_CTYPE[o.compute]} v{k} = {v};\n")
    return body


def _kernel(d: Dialect, f: Fused, name: str) -> str:
    fns, values = step_functions(d, f, name)
    n = len(f.operands)
    keys = [o.compute for o in f.operands] + [s.key for s in f.steps]
    g = d.glob
    m = len(f.outs)
    idx, off = ("u64", "i64") if f.index64 else ("u32", "i32")
    decl = []
    for p in fused_params(f):
        role = p.role
        ctype = {"ptr": None, "u4": "u32", "u8": "u64", "i4": "i32", "i8": "i64"}.get(p.type, "")
        if role[0] == "ptr":
            decl.append(f"{g}u8 *p{role[1]}" if role[1] < m else f"{g}const u8 *p{role[1]}")
        elif role[0] in ("scalar", "re", "im"):
            o = f.operands[role[1]]
            base = "double" if o.wide else _CTYPE[_REAL_OF.get(o.compute, o.compute)]
            suffix = "" if role[0] == "scalar" else f"_{role[0]}"
            decl.append(f"{base} s{role[1]}{suffix}")
        elif role[0] == "n":
            decl.append(f"{ctype} n")
        elif role[0] == "extent":
            decl.append(f"{ctype} n{role[1]}")
        else:
            decl.append(f"{ctype} s{role[1]}_{role[2]}")
    strided = [a for a, _, contiguous, _ in f.arrays() if not contiguous]
    if f.rows:
        body = _rows_index(f, idx, off, strided)
    else:
        body = [f"    {idx} i = ({idx})GRID_START;\n"]
        if not f.exact:
            body.append("    if (i >= n) return;\n")
    for a, key, contiguous, _ in f.arrays():
        if contiguous:
            body.append(f"    {off} o{a} = ({off})i * {item_size(key)};\n")
        elif not f.rows:  # (launched by rows: set by _rows_index)
            body.append(f"    {off} o{a} = 0;\n")
    if strided and not f.rows:
        if f.ndim == 1:
            body += [f"    o{a} = ({off})i * s{a}_0;\n" for a in strided]
        else:
            body.append(f"    {idx} r = i, c;\n")
            for dim in range(f.ndim - 1, 0, -1):
                body.append(f"    c = r % n{dim}; r = r / n{dim};\n")
                body += [f"    o{a} += ({off})c * s{a}_{dim};\n" for a in strided]
            body += [f"    o{a} += ({off})r * s{a}_0;\n" for a in strided]
    body += _operand_values(d, f)
    for j, step in enumerate(f.steps):  # each step's value once, in a variable
        body.append(f"    {_CTYPE[step.key]} v{n + j} = {values[j]};\n")
    for j, (key, _, aligned) in enumerate(f.outs):
        v = f.results[j]
        body.append(f"    {_store(d, key, f'p{j} + o{j}', aligned, f'v{v}', keys[v])}\n")
    return fns + f"{d.kernel} void {name}({', '.join(decl)}) {{\n{''.join(body)}}}\n"


def item_size(key: str) -> int:
    """The bytes of one element of storage key ``key`` (a complex one: both parts)."""
    return SCALARS[key].size * (2 if key in _REAL_OF else 1)


def _rows_index(f: Fused, idx: str, off: str, strided: list[int]) -> list[str]:
    """The element of a work-item launched by rows (``f.rows``): each row of the last axis
    takes whole work-groups, so a group's items have consecutive last indices ``ix`` and
    one row index ``iy`` (computed once per group: a device vectorises the loads and
    stores along the row); items past the row's end return.  Defines ``i`` (the element's
    C-order index) and each strided array's offset ``o{a}`` up to the contiguous ones'."""
    last = f.ndim - 1
    body = [f"    {idx} per = ({idx})((n{last} + LOCAL_SIZE - 1) / LOCAL_SIZE);\n",
            f"    {idx} iy = ({idx})GROUP_ID / per;\n",
            f"    {idx} ix = (({idx})GROUP_ID - iy * per) * ({idx})LOCAL_SIZE + ({idx})LOCAL_ID;\n",
            f"    if (ix >= n{last}) return;\n",
            f"    {idx} i = iy * n{last} + ix;\n"]
    if not strided:
        return body
    sizes = {a: item_size(key) for a, key, _, _ in f.arrays()}
    body += [f"    {off} o{a} = ({off})ix * "
             f"{sizes[a] if a in f.unit_rows else f's{a}_{last}'};\n" for a in strided]
    body.append(f"    {idx} r = iy, c;\n")
    for dim in range(last - 1, 0, -1):
        body.append(f"    c = r % n{dim}; r = r / n{dim};\n")
        body += [f"    o{a} += ({off})c * s{a}_{dim};\n" for a in strided]
    body += [f"    o{a} += ({off})r * s{a}_0;\n" for a in strided]
    return body


def _doubles(f: Fused) -> bool:
    keys = [key for key, _, _ in f.outs] + [o.compute for o in f.operands]
    keys += [o.storage or "" for o in f.operands]
    for step in f.steps:
        keys += [*step.arg_keys, step.key]
    return any(k in ("f8", "c16") for k in keys) or any(o.wide for o in f.operands)


def source(d: Dialect, sigs: list) -> str:
    """A program with the kernels of ``sigs`` -- lone :class:`Signature` s (named by
    :func:`kernel_name`) and :class:`Fused` kernels (named by :func:`fused_name`)."""
    kernels = [(fused_of(s), kernel_name(s)) if isinstance(s, Signature) else (s, fused_name(s))
               for s in sigs]
    parts = [prelude(d, [f for f, _ in kernels])]
    seen = set()
    for f, name in kernels:
        if name not in seen:
            seen.add(name)
            parts.append(_kernel(d, f, name))
    return "".join(parts)


def prelude(d: Dialect, kernels: list[Fused]) -> str:
    """What a program needs before the functions of ``kernels`` (types, helpers, the
    dialect's prelude): for kernels written elsewhere that call :func:`body_function`."""
    doubles = any(_doubles(f) for f in kernels)
    helpers, complex_keys, access = _helpers(d, kernels)
    parts = [d.fp64 if doubles else "", d.prelude, "#ifndef DEV\n#define DEV " + d.fn + "\n#endif\n",
             d.compute_prelude, d.half_src(doubles)]
    if "c8" in complex_keys:
        parts.append("typedef float2 c64;\n")
    if "c16" in complex_keys:
        parts.append("typedef double2 c128;\n")
    for ctype in sorted(access):
        parts += [access_source(d, ctype, False, False), access_source(d, ctype, False, True)]
    parts += helpers
    return "".join(parts)
