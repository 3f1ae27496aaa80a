"""Index-aware kernels: ``eye``, ``tril``, ``triu`` (one table) and ``repeat``'s fill.

The elementwise generator (``generator.py``) sees values only; these functions need an
element's position.  :data:`MATRIX` describes each matrix function once -- the
condition on row ``r``, column ``c`` and diagonal offset ``k`` under which an element is
kept, and what is written there (``"x"``: the input element, ``"1"``: one) -- and
:func:`matrix_program` prints the kernel of a :class:`MatrixSpec` in either C dialect
(OpenCL C or CUDA C): one work-item per element of the C-contiguous result, the input
read in place through its strides (leading batch axes collapsed where its layout
allows).  Elements outside the condition are zero.

:func:`repeat_program` prints ``repeat``'s fill: one work-item per input element,
writing it ``positions[a] - positions[a - 1]`` times from ``positions[a - 1]`` on (the
running sum of the repeats, computed on the device before).  Both compile once per
(device, spec) through the reductions' compile-once path (``reduce.compiled``, with the
disk cache for CUDA).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ...backends._kernels import collapse
from . import reduce as red
from .generator import _load, _store, key_of

__all__ = ["MATRIX", "MatrixOp", "MatrixSpec", "RepeatSpec", "matrix_program",
           "repeat_program", "matrix", "repeat"]

_lock = threading.Lock()
_kernels: dict[tuple, object] = {}

_LOCAL = 64


@dataclass(frozen=True)
class MatrixOp:
    """One index-aware matrix function: keep ``value`` where ``keep`` holds, else zero."""

    name: str
    keep: str  # C condition on i64 r (row), c (column), k (diagonal offset)
    value: str  # "x" (the input element) or "1"


MATRIX = {op.name: op for op in (
    MatrixOp("tril", "c <= r + k", "x"),
    MatrixOp("triu", "c >= r + k", "x"),
    MatrixOp("eye", "c == r + k", "1"),
)}


@dataclass(frozen=True)
class MatrixSpec:
    """What one matrix kernel is specialised on: the dialect, the operation, the storage
    keys of the input (``""`` for none) and the output, the input's batch axes (after
    collapsing) and whether the input's addresses are aligned."""

    dialect: str
    op: str
    inp: str
    out: str
    nbatch: int
    aligned: bool = True


def matrix_program(d, spec: MatrixSpec) -> tuple[str, str, list[str]]:
    """(source, kernel name, parameter types) of the kernel of ``spec``."""
    op = MATRIX[spec.op]
    glo = red._IDS[spec.dialect][2]
    g = d.glob
    name = f"mat_{spec.op}_{spec.inp or 'none'}_{spec.out}_b{spec.nbatch}_{int(spec.aligned)}"
    params = [("ptr", f"{g}u8 *pz")]
    if op.value == "x":
        params.append(("ptr", f"{g}const u8 *px"))
    params += [("i8", "i64 n"), ("i8", "i64 R"), ("i8", "i64 C"), ("i8", "i64 k")]
    if op.value == "x":
        params += [("i8", "i64 sr"), ("i8", "i64 sc")]
        params += [("i8", f"i64 e{b}") for b in range(spec.nbatch)]
        params += [("i8", f"i64 s{b}") for b in range(spec.nbatch)]
    size = _itemsize(spec.out)
    lines = [f"    i64 i = {glo};\n    if (i >= n) return;\n",
             "    i64 c = i % C, t = i / C, r = t % R;\n",
             f"    int keep_ = ({op.keep});\n"]
    zero = _store(d, spec.out, f"pz + i * {size}", True, "0", "i4")
    if op.value == "1":
        lines.append(f"    if (keep_) {{ {_store(d, spec.out, f'pz + i * {size}', True, '1', 'i4')}"
                     f" }} else {{ {zero} }}\n")
    else:
        lines.append("    t = t / R;\n    i64 o = r * sr + c * sc;\n")
        for b in range(spec.nbatch - 1, 0, -1):
            lines.append(f"    o += (t % e{b}) * s{b}; t = t / e{b};\n")
        if spec.nbatch:
            lines.append("    o += t * s0;\n")
        value = _load(d, spec.inp, "px + o", spec.aligned)
        lines.append(f"    if (keep_) {{ {_store(d, spec.out, f'pz + i * {size}', True, value, spec.inp)}"
                     f" }} else {{ {zero} }}\n")
    decl = ", ".join(p for _, p in params)
    text = _prelude(d, spec.inp, spec.out) + f"{d.kernel} void {name}({decl}) {{\n" + \
        "".join(lines) + "}\n"
    return text, name, [t for t, _ in params]


@dataclass(frozen=True)
class RepeatSpec:
    """``repeat``'s fill: the element's storage key and whether addresses are aligned."""

    dialect: str
    key: str
    aligned: bool = True


def repeat_program(d, spec: RepeatSpec) -> tuple[str, str, list[str]]:
    """(source, kernel name, parameter types) of ``repeat``'s fill kernel.

    The input is addressed as (outer ``O``, axis ``S``, inner ``I``) with byte strides;
    the output is C-contiguous (``O``, ``T``, ``I``); ``pos`` holds the inclusive running
    sum of the repeats (int64).
    """
    glo = red._IDS[spec.dialect][2]
    g = d.glob
    name = f"repeat_fill_{spec.key}_{int(spec.aligned)}"
    size = _itemsize(spec.key)
    params = [("ptr", f"{g}u8 *pz"), ("ptr", f"{g}const u8 *px"), ("ptr", f"{g}const u8 *pp"),
              ("i8", "i64 n"), ("i8", "i64 S"), ("i8", "i64 I"), ("i8", "i64 T"),
              ("i8", "i64 so"), ("i8", "i64 ss"), ("i8", "i64 si")]
    pos = f"(({g}const i64 *)pp)"
    value = _load(d, spec.key, "px + o * so + a * ss + ii * si", spec.aligned)
    store = _store(d, spec.key, f"pz + ((o * T + p) * I + ii) * {size}", True, "v_", spec.key)
    from .generator import _CTYPE

    body = (f"    i64 i = {glo};\n    if (i >= n) return;\n"
            "    i64 ii = i % I, t = i / I, a = t % S, o = t / S;\n"
            f"    i64 start = a ? {pos}[a - 1] : 0, end = {pos}[a];\n"
            f"    {_CTYPE[spec.key]} v_ = {value};\n"
            f"    for (i64 p = start; p < end; ++p) {{ {store} }}\n")
    decl = ", ".join(p for _, p in params)
    text = _prelude(d, spec.key, spec.key) + f"{d.kernel} void {name}({decl}) {{\n{body}}}\n"
    return text, name, [t for t, _ in params]


def _itemsize(key: str) -> int:
    return int(key[1:])  # "c8" (complex64) is 8 bytes, "b1" one


def _prelude(d, *keys: str) -> str:
    """The elementwise generator's prelude (types, float16, complex, access helpers)."""
    from .generator import Operand, Signature, source

    # A copy signature pulls in exactly what loading and storing these keys needs.
    keys = [k for k in keys if k]
    sig = Signature("positive" if keys[0] != "b1" else "logical_not", keys[-1],
                    (Operand(keys[0], keys[0], True, False),), out_aligned=False)
    return source(d, [sig])


def _launch(kernel, values: list, n: int) -> None:
    local = min(_LOCAL, kernel.max_local)  # _LOCAL and max_local are powers of two
    kernel.launch(values, -(-n // local) * local, local)


def matrix(op: str, out, x=None, k: int = 0) -> None:
    """``out`` (C-contiguous, ``(..., R, C)``) = ``op`` of ``x`` (same shape) or of nothing."""
    dev = out._storage.device
    z = out._raw()
    R, C = out._shape[-2], out._shape[-1]
    n = out.size
    if n == 0:
        return
    okey = key_of(out._dtype)
    if x is None:
        spec = MatrixSpec(dev.backend, op, "", okey, 0)
        kern = red.compiled(dev, spec, matrix_program, _kernels, _lock)
        _launch(kern, [z.ptr, n, R, C, k], n)
        return
    raw = x._raw()
    from .launcher import aligned

    batch_shape, (batch_strides,) = collapse(raw.shape[:-2], raw.strides[:-2])
    spec = MatrixSpec(dev.backend, op, key_of(raw.dtype), okey, len(batch_shape),
                      aligned(raw.ptr, raw.strides, raw.dtype))
    kern = red.compiled(dev, spec, matrix_program, _kernels, _lock)
    _launch(kern, [z.ptr, raw.ptr, n, R, C, k, raw.strides[-2], raw.strides[-1],
                   *batch_shape, *batch_strides], n)


def repeat(out, x, positions, ax: int) -> None:
    """``out`` = ``x`` with element ``a`` along ``ax`` written ``pos[a] - pos[a-1]`` times.

    ``x`` must be addressable as (outer, axis, inner) with one stride each: the caller
    passes a C-contiguous copy otherwise (see :func:`addressable`).
    """
    dev = out._storage.device
    raw = x._raw()
    S = x._shape[ax]
    outer, inner = 1, 1
    for e in x._shape[:ax]:
        outer *= e
    for e in x._shape[ax + 1:]:
        inner *= e
    so = _one_stride(x._shape[:ax], x._strides[:ax])
    si = _one_stride(x._shape[ax + 1:], x._strides[ax + 1:])
    from .launcher import aligned

    spec = RepeatSpec(dev.backend, key_of(raw.dtype), aligned(raw.ptr, raw.strides, raw.dtype))
    kern = red.compiled(dev, spec, repeat_program, _kernels, _lock)
    n = outer * S * inner
    _launch(kern, [out._raw().ptr, raw.ptr, positions._raw().ptr, n, S, inner, out._shape[ax],
                   so, x._strides[ax], si], n)


def _one_stride(shape, strides) -> int | None:
    """The single stride that addresses these axes as one, or None."""
    found, (merged,) = collapse(tuple(shape), tuple(strides))
    if len(found) == 0:
        return 0
    if len(found) == 1:
        return merged[0]
    return None


def addressable(x, ax: int) -> bool:
    """Whether :func:`repeat` can read ``x`` in place (outer and inner axes collapse)."""
    return (_one_stride(x._shape[:ax], x._strides[:ax]) is not None
            and _one_stride(x._shape[ax + 1:], x._strides[ax + 1:]) is not None)
