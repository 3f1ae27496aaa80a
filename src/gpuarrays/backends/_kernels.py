"""What the device back-ends share below the interface: layouts and kernel sources.

The opencl and cuda back-ends run the same few kernels -- strided byte copies,
fills and dtype conversions with NumPy's unsafe casting rules -- written in two
C dialects (gathers and scatters are generated above the interface, by the
compute layer's ``_compute/device/indexing.py``).  This module holds everything about them
that does not depend on the platform:

* layout helpers: :func:`collapse` (merge contiguous axes), :func:`word` (the
  widest load/store unit), and the plans of ``fill``/``copy_strided``
  (:func:`plan_fill`, :func:`plan_copy`), which decide between a plain copy or
  memset, a byte kernel and a conversion kernel;
* the numeric types the kernels convert between (:data:`SCALARS`);
* the kernel-source generator (:func:`bytes_source`, :func:`convert_source`),
  parametrised by a :class:`Dialect`: what a kernel, a helper function and a
  pointer to device memory look like, which element a work-item handles, how
  the layout travels, and the platform's float16 and
  float-to-integer conversions.

The sources use portable type names (``u8``..``u64``, ``i8``..``i64``) that
every dialect's prelude defines.  :class:`DeviceOps` implements the interface
methods built on all this (and lazily made device state, ``upload``,
``download``); each back-end module keeps only its dialect and its platform
calls (contexts, copies, compiling, argument passing, launching).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import RawView

__all__ = [
    "SCALARS",
    "Scalar",
    "Dialect",
    "collapse",
    "word",
    "scalar_key",
    "convert_targets",
    "convert_kernel_names",
    "convert_source",
    "bytes_source",
    "access_source",
    "fill_kernel",
    "FillPlan",
    "CopyPlan",
    "plan_fill",
    "plan_copy",
    "DeviceOps",
    "launch_shape",
    "SPLIT_MIN",
    "split_at",
]


# Layouts ------------------------------------------------------------------------------
def collapse(
    shape: tuple[int, ...], *strides: tuple[int, ...]
) -> tuple[list[int], list[list[int]]]:
    """Drop length-1 axes and merge axes that are contiguous in every view (C order)."""
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for d, n in enumerate(shape):
        if n == 1:
            continue
        if out_shape and all(o[-1] == s[d] * n for o, s in zip(out_strides, strides, strict=True)):
            out_shape[-1] *= n
            for o, s in zip(out_strides, strides, strict=True):
                o[-1] = s[d]
            continue
        out_shape.append(n)
        for o, s in zip(out_strides, strides, strict=True):
            o.append(s[d])
    return out_shape, out_strides


def word(itemsize: int, *values: int) -> int:
    """Largest of 8, 4, 2, 1 that divides the item size and every address/stride given."""
    bits = itemsize
    for v in values:
        bits |= v
    for w in (8, 4, 2):
        if bits % w == 0:
            return w
    return 1


@dataclass(frozen=True)
class FillPlan:
    """How to fill a view: by the platform's memset at ``dense_start``, else a fill kernel."""

    shape: list[int]  # collapsed
    strides: list[int]
    n: int  # elements
    pattern: bytes  # the value's bytes
    dense_start: int | None  # lowest address when the view is one dense run, else None
    word: int  # load/store unit of the fill kernel


def plan_fill(dst: RawView, value: np.ndarray) -> FillPlan | None:
    """The plan of ``fill(dst, value)``; None when there is nothing to fill."""
    if 0 in dst.shape:
        return None
    itemsize = dst.dtype.itemsize
    pattern = np.asarray(value, dtype=dst.dtype).reshape(1).view(np.uint8).tobytes()
    shape, (strides,) = collapse(dst.shape, dst.strides)
    n = int(np.prod(shape, dtype=np.int64))
    dense_start = None
    if not shape or (len(shape) == 1 and abs(strides[0]) == itemsize):
        dense_start = dst.ptr + (min(strides[0] * (n - 1), 0) if shape else 0)
    return FillPlan(shape, strides, n, pattern, dense_start, word(itemsize, dst.ptr, *strides))


@dataclass(frozen=True)
class CopyPlan:
    """How to copy between two views of one shape.

    ``how`` is ``"memcpy"`` (both dense, same dtype: ``n * itemsize`` bytes),
    ``"bytes"`` (same dtype: the ``copy_bytes`` kernel moving ``word`` bytes at
    a time), ``"rows"`` (same dtype, two or more axes whose last strides are the item
    size, rows of at least :data:`ROWS_MIN`: ``copy_rows``, launched over
    :func:`rows_items` work-items) or ``"convert"`` (the ``convert_<dst_key>`` kernel of
    the program of ``src_key``, with byte-wise accesses where a view is not aligned).
    """

    how: str
    shape: list[int]  # collapsed
    dst_strides: list[int]
    src_strides: list[int]
    n: int
    word: int = 0
    src_key: str = ""
    dst_key: str = ""
    src_aligned: bool = True
    dst_aligned: bool = True
    contiguous: bool = False  # "convert" of two dense 1-d views: the ``convert_<dst>_c`` kernel


ROWS_MIN = 64
"""The shortest rows a strided layout runs by rows for: ``copy_rows`` here, the generated
kernels' launch by rows (docs/kernels.md "Launch shapes")."""


def rows_items(n: int, last: int, local: int) -> int:
    """The work-items a launch by rows of ``n`` elements in rows of ``last`` takes with
    groups of ``local``: each row takes whole groups."""
    return n // last * -(-last // local) * local


def plan_copy(dst: RawView, src: RawView, where: str) -> CopyPlan | None:
    """The plan of ``copy_strided(dst, src)``; None when there is nothing to copy.

    ``where`` names the device in errors (``"cuda:0"``).
    """
    if 0 in dst.shape:
        return None
    if tuple(dst.shape) != tuple(src.shape):
        raise ValueError(f"copy_strided needs equal shapes, got {dst.shape} and {src.shape}")
    shape, (dstrides, sstrides) = collapse(dst.shape, dst.strides, src.strides)
    n = int(np.prod(shape, dtype=np.int64))
    if dst.dtype == src.dtype:
        itemsize = dst.dtype.itemsize
        if not shape or (len(shape) == 1 and dstrides[0] == sstrides[0] == itemsize):
            return CopyPlan("memcpy", shape, dstrides, sstrides, n)
        w = word(itemsize, dst.ptr, src.ptr, *dstrides, *sstrides)
        rows = (len(shape) >= 2 and dstrides[-1] == sstrides[-1] == itemsize
                and shape[-1] >= ROWS_MIN)
        return CopyPlan("rows" if rows else "bytes", shape, dstrides, sstrides, n, word=w)
    skey, dkey = scalar_key(src.dtype), scalar_key(dst.dtype)
    if skey is None or dkey is None:
        raise ValueError(f"{where} cannot convert {src.dtype} to {dst.dtype}")
    s_align, d_align = SCALARS[skey].size, SCALARS[dkey].size
    dense = not shape or (len(shape) == 1 and dstrides[0] == dst.dtype.itemsize
                          and sstrides[0] == src.dtype.itemsize)
    return CopyPlan(
        "convert", shape, dstrides, sstrides, n, src_key=skey, dst_key=dkey,
        src_aligned=word(s_align, src.ptr, *sstrides) >= s_align,
        dst_aligned=word(d_align, dst.ptr, *dstrides) >= d_align, contiguous=dense,
    )  # fmt: skip


# Numeric types -------------------------------------------------------------------------
@dataclass(frozen=True)
class Scalar:
    """How one NumPy numeric type is stored and computed with in the kernels."""

    storage: str  # portable C type of one stored component
    real: str  # C type of (one component of) the value between load and store
    kind: str  # "b" bool, "i" signed, "u" unsigned, "f" float, "c" complex
    size: int  # bytes of one stored component


SCALARS = {
    "b1": Scalar("u8", "u8", "b", 1),
    "i1": Scalar("i8", "i8", "i", 1),
    "i2": Scalar("i16", "i16", "i", 2),
    "i4": Scalar("i32", "i32", "i", 4),
    "i8": Scalar("i64", "i64", "i", 8),
    "u1": Scalar("u8", "u8", "u", 1),
    "u2": Scalar("u16", "u16", "u", 2),
    "u4": Scalar("u32", "u32", "u", 4),
    "u8": Scalar("u64", "u64", "u", 8),
    "f2": Scalar("u16", "float", "f", 2),
    "f4": Scalar("float", "float", "f", 4),
    "f8": Scalar("double", "double", "f", 8),
    "c8": Scalar("float", "float", "c", 4),
    "c16": Scalar("double", "double", "c", 8),
}


def scalar_key(dtype: np.dtype) -> str | None:
    """The kernel key of a numeric dtype (native byte order only), else None."""
    if dtype.fields is not None or dtype.subdtype is not None or not dtype.isnative:
        return None
    key = f"{dtype.kind}{dtype.itemsize}"
    return key if key in SCALARS else None


def convert_targets(src_key: str, doubles: bool = True) -> tuple[str, ...]:
    """The destination types of the conversion program of ``src_key`` (float64 ones if ``doubles``)."""
    return tuple(
        k for k in SCALARS if k != src_key and (doubles or SCALARS[k].storage != "double")
    )


def convert_kernel_names(dst_keys: Iterable[str], exact: bool = False) -> tuple[str, ...]:
    """The kernels of a conversion program: ``convert_<dst>`` (any layout) and
    ``convert_<dst>_c`` (two dense 1-d views: addresses ``i * itemsize``, which a
    CPU device's compiler vectorises; about 1.5x faster on PoCL); with ``exact`` also
    ``convert_<dst>_x``, the dense kernel without a bounds check, for a launch whose
    work-items are exactly the elements (docs/performance.md, "Conversions")."""
    kinds = ("", "_c", "_x") if exact else ("", "_c")
    return tuple(f"convert_{k}{kind}" for k in dst_keys for kind in kinds)


# Dialects -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Dialect:
    """What differs between the C dialects of the back-ends' kernels."""

    kernel: str  # what precedes ``void`` in a kernel's declaration
    fn: str  # what precedes a helper function's return type
    glob: str  # qualifier (with its space) of a pointer to device memory
    # typedefs u8..u64, i8..i64; GRID_START (the work-item's global index), GROUP_ID,
    # LOCAL_ID, LOCAL_SIZE (its work-group's index, its index in it, the group's size);
    # layout types if any
    prelude: str
    layout: tuple[str, str]  # kernel parameter ``m``: the layout of one view, of two
    layout_ref: tuple[str, str]  # the same as a helper function's parameter
    shape: str  # extent of axis ``d`` of ``m`` (``ndim`` in scope)
    strides: tuple[str, str]  # byte stride of axis ``d`` in view a, in view b
    fp64: str  # what a source using double starts with
    # (whether doubles are used) -> helpers: half_to_float(u16) and what to_half uses
    half_src: Callable[[bool], str]
    # (real C type of the value, value) -> float16 bits (u16) of it, rounded to nearest even
    to_half: Callable[[str, str], str]
    # (destination key, floating value) -> the destination integer, as NumPy casts
    float_to_int: Callable[[str, str], str]
    # What the generated compute kernels add to the prelude (contraction off, NAN and
    # INFINITY), and whether float32 math functions take an ``f`` suffix (CUDA's expf).
    compute_prelude: str = ""
    suffix_math: bool = False


def _offsets_src(d: Dialect) -> str:
    sa, sb = d.strides
    return f"""
/* Byte offset of element i (C order) in one view. */
{d.fn} i64 offset1(i64 i, int ndim, {d.layout_ref[0]}) {{
    if (ndim == 1) return i * {sa.replace("d]", "0]")};  /* no division on the common path */
    i64 a = 0;
    for (int d = ndim - 1; d >= 0; --d) {{
        i64 n = {d.shape};
        a += (i % n) * {sa};
        i /= n;
    }}
    return a;
}}

/* Byte offsets of element i (C order) in two views of one shape. */
{d.fn} void offsets2(i64 i, int ndim, {d.layout_ref[1]}, i64 *oa, i64 *ob) {{
    if (ndim == 1) {{
        *oa = i * {sa.replace("d]", "0]")};
        *ob = i * {sb.replace("d]", "0]")};
        return;
    }}
    i64 a = 0, b = 0;
    for (int d = ndim - 1; d >= 0; --d) {{
        i64 n = {d.shape};
        i64 k = i % n;
        i /= n;
        a += k * {sa};
        b += k * {sb};
    }}
    *oa = a;
    *ob = b;
}}
"""


def _kernel(d: Dialect, name: str, params: Sequence[str], body: str, setup: str = "") -> str:
    """A kernel running ``body`` for element ``i``, one element per work-item
    (:func:`launch_shape`)."""
    return f"""
{d.kernel} void {name}({", ".join(params)}) {{{setup}
    i64 i = GRID_START;
    if (i < n) {{
{body}    }}
}}
"""


SPLIT_MIN = 1 << 15
"""Fewest elements of a split launch on CPU devices: the whole work-groups by a kernel
without a bounds check, then one group with it from the index they left (OpenCL's global
offset).  pip's PoCL 3.0 vectorises no work-group loop with the check: ``x + x`` over
1 000 000 float32 took 0.42 ms there, 0.15 ms split (1 048 576 elements: 0.15 ms); PoCL 3.1
vectorises both (0.12 ms either way).  Below this count a second enqueue (2-5 us on PoCL)
costs more than the unvectorised groups save.  Used by the generated elementwise kernels
(_compute/device/launcher.py) and the dense conversions (opencl.py)."""


def split_at(hint: str, n: int, local: int) -> int | None:
    """Where a launch of ``n`` items in groups of ``local`` splits (:data:`SPLIT_MIN`): the
    items of the whole groups, launched without a bounds check, after which one checked group
    runs from that index; None for one launch (whole groups cover ``n``, a GPU, fewer than
    ``SPLIT_MIN`` items)."""
    whole = n // local * local
    if whole == n or hint != "cpu" or n < SPLIT_MIN:
        return None
    return whole


def launch_shape(hint: str, n: int, most: int = 1 << 30) -> tuple[int, int]:
    """(global size, local size) of a kernel over ``n`` elements: one element per work-item.

    The one place that chooses launch shapes, for the data-movement kernels here
    and the generated compute kernels (docs/kernels.md, "Launch shapes").
    Measured on this project's 2-core machine, ``a + b`` over 16 M float32 on
    PoCL 3.1 (``hint == "cpu"``): one element per work-item reaches 19-25 GB/s
    (machine shared; 35-54 GB/s quiet) with the local size left to the driver,
    and the same with a fixed 64, 256, 1024 or 4096; the grid-stride loop of
    2^20 work-items in groups of 64 used before reached 0.5-1.7 GB/s.  A fixed
    local size is kept because PoCL compiles a work-group function per local
    size, and a driver-chosen one changes with the global size.  GPUs
    (``"gpu"``): 256 threads per block, one element per thread, as CuPy's and
    PyTorch's elementwise kernels (benchmarks/gpu_check.sh measures it).  ``most``
    is the kernel's ``max_local``: the local size drops to the largest power of two
    within it.
    """
    local = 256
    while local > most and local > 1:
        local //= 2
    return -(-n // local) * local, local


def _two_views(d: Dialect) -> list[str]:
    g = d.glob
    return [f"{g}u8 *dst", f"{g}const u8 *src", d.layout[1], "int ndim", "i64 n"]


# Byte-moving kernels ----------------------------------------------------------------------
def fill_kernel(d: Dialect, name: str, value_param: str | None, value: str) -> str:
    """A fill kernel ``name(dst, m, [value_param,] ndim, n)``: ``value`` addresses the bytes."""
    g = d.glob
    params = [f"{g}u8 *dst", d.layout[0], *([value_param] if value_param else []), "int ndim",
              "i64 n"]  # fmt: skip
    return _kernel(
        d, name, params,
        f"        {g}W *p = ({g}W *)(dst + offset1(i, ndim, m));\n"
        "        for (int k = 0; k < WORDS; ++k) p[k] = v[k];\n",
        setup=f"\n    {g}const W *v = ({g}const W *)({value});",
    )  # fmt: skip


def bytes_source(
    d: Dialect,
    itemsize: int,
    word: int,
    fills: Iterable[tuple[str, str | None, str]],
    extra: str = "",
) -> str:
    """The byte-moving kernels for one item size, moving ``word`` bytes at a time.

    ``copy_bytes`` and one fill kernel per
    ``(name, value_param, value)`` of ``fills`` (see :func:`fill_kernel`);
    ``extra`` is source they need (a value struct).
    """
    if itemsize < 1 or itemsize % word:
        raise ValueError(f"word {word} does not divide item size {itemsize}")
    g = d.glob
    move = "        for (int k = 0; k < WORDS; ++k) d[k] = s[k];\n"
    parts = [
        d.prelude,
        _offsets_src(d),
        f"\n#define ITEMSIZE {itemsize}\ntypedef {_WORD_TYPE[word]} W;\n"
        "#define WORDS (ITEMSIZE / (int)sizeof(W))\n",
        extra,
        _kernel(d, "copy_bytes", _two_views(d),
                "        i64 od, os;\n"
                "        offsets2(i, ndim, m, &od, &os);\n"
                f"        {g}W *d = ({g}W *)(dst + od);\n"
                f"        {g}const W *s = ({g}const W *)(src + os);\n" + move),
        _copy_rows_kernel(d, move),
        *(fill_kernel(d, name, param, value) for name, param, value in fills),
    ]  # fmt: skip
    return "".join(parts)


def _copy_rows_kernel(d: Dialect, move: str) -> str:
    """``copy_rows``: ``copy_bytes`` for two views whose last strides are the item size,
    by rows of the last axis (:func:`rows_items`): a work-group's items move consecutive
    elements of one row, whose start is decomposed once per group, so a device vectorises
    the moves (the generated kernels' launch by rows, docs/kernels.md)."""
    g, (sa, sb), shape = d.glob, d.strides, d.shape
    last = shape.replace("d]", "ndim - 1]")
    return f"""
{d.kernel} void copy_rows({", ".join(_two_views(d))}) {{
    i64 per = ({last} + LOCAL_SIZE - 1) / LOCAL_SIZE;
    i64 iy = GROUP_ID / per;
    i64 ix = (GROUP_ID - iy * per) * LOCAL_SIZE + LOCAL_ID;
    if (ix < {last}) {{
        i64 od = ix * ITEMSIZE, os = ix * ITEMSIZE;
        if (ndim == 2) {{  /* the common 2-d view: no division per item */
            od += iy * {sa.replace("d]", "0]")};
            os += iy * {sb.replace("d]", "0]")};
        }} else {{
            for (int d = ndim - 2; d >= 0; --d) {{
                i64 e = {shape};
                i64 k = iy % e;
                iy /= e;
                od += k * {sa};
                os += k * {sb};
            }}
        }}
        {g}W *d = ({g}W *)(dst + od);
        {g}const W *s = ({g}const W *)(src + os);
{move}    }}
}}
"""


_WORD_TYPE = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}


# Conversion kernels -----------------------------------------------------------------------
def access_source(d: Dialect, ctype: str, aligned: bool, store: bool) -> str:
    """A ``ld_<type>`` or ``st_<type>`` helper for one storage type, direct or byte-wise."""
    g, fn = d.glob, d.fn
    direct = aligned or ctype in ("u8", "i8")
    bytewise = f"union {{ {ctype} v; u8 b[sizeof({ctype})]; }} x;"
    each = f"for (int k = 0; k < (int)sizeof({ctype}); ++k)"
    if store:
        if direct:
            return f"{fn} void st_{ctype}({g}u8 *p, {ctype} v) {{ *({g}{ctype} *)p = v; }}\n"
        return f"{fn} void st_{ctype}({g}u8 *p, {ctype} v) {{ {bytewise} x.v = v; {each} p[k] = x.b[k]; }}\n"
    if direct:
        return f"{fn} {ctype} ld_{ctype}({g}const u8 *p) {{ return *({g}const {ctype} *)p; }}\n"
    return f"{fn} {ctype} ld_{ctype}({g}const u8 *p) {{ {bytewise} {each} x.b[k] = p[k]; return x.v; }}\n"


def _convert_kernel(d: Dialect, src_key: str, dst_key: str, kind: str = "") -> str:
    """``convert_<dst>``: load (re, im), convert with NumPy's unsafe casting, store.
    ``kind``: ``""`` any layout; ``"c"`` (``convert_<dst>_c``) two dense 1-d views;
    ``"x"`` (``convert_<dst>_x``) the same without a bounds check, for a launch of
    exactly ``n`` work-items (a masked tail keeps PoCL from vectorising the loop)."""
    s, t = SCALARS[src_key], SCALARS[dst_key]
    ld, st = f"ld_{s.storage}", f"st_{t.storage}"
    # load: re, im (im only for complex sources), in the source's real type
    if s.kind == "b":
        load = f"u8 re = (u8)({ld}(ps) != 0);"
    elif src_key == "f2" and t.kind == "b":  # x != 0: every bit but the sign's (NaN is true)
        load = f"u16 re = (u16)({ld}(ps) & 0x7fffu);"
    elif src_key == "f2" and t.kind in "iu":  # the value as far as a truncation to integer sees
        load = f"float re = half_for_int({ld}(ps));"
    elif src_key == "f2" and t.real == "double":  # straight to double: a signalling NaN stays one
        load = f"double re = half_to_double({ld}(ps));"
    elif src_key == "f2":
        load = f"float re = half_to_float({ld}(ps));"
    elif s.kind == "c":
        load = f"{s.real} re = {ld}(ps); {s.real} im = {ld}(ps + {s.size});"
    else:
        load = f"{s.real} re = {ld}(ps);"
    if t.kind == "c":
        im = "im" if s.kind == "c" else "0"
        store = f"{st}(pd, ({t.storage})(re)); {st}(pd + {t.size}, ({t.storage})({im}));"
    elif t.kind == "b":
        store = f"{st}(pd, (u8)(re != 0 || im != 0));" if s.kind == "c" else f"{st}(pd, (u8)(re != 0));"
    elif dst_key == "f2":
        store = f"{st}(pd, {d.to_half(s.real, 're')});"
    elif s.kind in "fc" and t.kind in "iu":
        store = f"{st}(pd, {d.float_to_int(dst_key, 're')});"
    else:
        store = f"{st}(pd, ({t.real})(re));"
    g = d.glob
    sizes = (2 * t.size if t.kind == "c" else t.size, 2 * s.size if s.kind == "c" else s.size)
    offsets = (f"        i64 od = i * {sizes[0]}, os = i * {sizes[1]};\n" if kind else
               "        i64 od, os;\n        offsets2(i, ndim, m, &od, &os);\n")
    body = (offsets +
            f"        {g}const u8 *ps = src + os;\n"
            f"        {g}u8 *pd = dst + od;\n"
            f"        {load}\n"
            f"        {store}\n")  # fmt: skip
    name = f"convert_{dst_key}{'_' + kind if kind else ''}"
    if kind == "x":
        return (f"\n{d.kernel} void {name}({', '.join(_two_views(d))}) {{\n"
                f"    i64 i = GRID_START;\n    {{\n{body}    }}\n}}\n")
    return _kernel(d, name, _two_views(d), body)


def convert_source(
    d: Dialect, src_key: str, dst_keys: Sequence[str], src_aligned: bool, dst_aligned: bool,
    exact: bool = False,
) -> str:
    """Kernels converting from one source type: ``convert_<dst>`` for each of ``dst_keys``
    (the kernels :func:`convert_kernel_names` lists, ``exact`` as there).

    One program per source type keeps compiler runs few.  ``*_aligned``:
    whether every address of the view is a multiple of the component size
    (else byte-wise loads/stores are used).
    """
    if src_key not in SCALARS:
        raise ValueError(f"no conversion kernels for {src_key!r}")
    s = SCALARS[src_key]
    storages = sorted({SCALARS[k].storage for k in dst_keys})
    doubles = "double" in storages or s.storage == "double"
    parts = [
        d.fp64 if doubles else "",
        d.prelude,
        _offsets_src(d),
        d.half_src(doubles),
        access_source(d, s.storage, src_aligned, store=False),
        *(access_source(d, t, dst_aligned, store=True) for t in storages),
        *(_convert_kernel(d, src_key, k, kind) for k in dst_keys
          for kind in ("", "c", "x")[: 3 if exact else 2]),
    ]
    return "".join(parts)


# The interface methods device back-ends share, over their platform calls -----------------
class DeviceOps:
    """Per-device state made on first use, ``upload``/``download``, and the kernel
    operations ``fill`` and ``copy_strided`` from the plans above.

    A back-end class mixes this in and provides ``name``, ``memcpy``, the
    ``_states`` dict and ``_lock``, and the platform calls: ``_new_state``
    (context and queue/stream of a device), ``_copy`` (bytes between any two
    addresses, waiting for them when asked), ``_memset`` (a dense fill without
    a kernel, or False), ``_launch_fill``, ``_launch_copy`` (a ``"bytes"``,
    ``"rows"`` or ``"convert"`` plan).
    """

    name: str
    _states: dict
    _lock: Any

    def _new_state(self, index: int) -> Any:
        raise NotImplementedError

    def _state(self, index: int) -> Any:
        """The device's platform state, made on first use (and after a reset)."""
        state = self._states.get(index)
        if state is not None:
            return state
        with self._lock:
            state = self._states.get(index)
            if state is None:
                state = self._states[index] = self._new_state(index)
        return state

    def _copy(self, index: int, dst: int, src: int, nbytes: int, wait: bool) -> None:
        raise NotImplementedError

    def memcpy(self, index: int, dst: int, src: int, nbytes: int) -> None:
        raise NotImplementedError

    def upload(self, index: int, dst: int, src: np.ndarray) -> None:
        src = np.ascontiguousarray(src)
        self._copy(index, dst, src.ctypes.data, src.nbytes, wait=True)

    def download(self, index: int, dst: np.ndarray, src: int) -> None:
        if not dst.flags.c_contiguous:
            raise ValueError("download needs a C-contiguous destination array")
        self._copy(index, dst.ctypes.data, src, dst.nbytes, wait=True)

    def download_async(self, index: int, dst: np.ndarray, src: int) -> None:
        """``download`` enqueued on the current stream without waiting: ``dst`` must stay
        alive and untouched until that stream has run it (``a.get(out, blocking=False)``)."""
        if not dst.flags.c_contiguous:
            raise ValueError("download needs a C-contiguous destination array")
        self._copy(index, dst.ctypes.data, src, dst.nbytes, wait=False)

    def _memset(self, index: int, start: int, pattern: bytes, nbytes: int) -> bool:
        raise NotImplementedError

    def _launch_fill(self, index: int, dst: RawView, plan: FillPlan) -> None:
        raise NotImplementedError

    def _launch_copy(self, index: int, dst: RawView, src: RawView, plan: CopyPlan) -> None:
        raise NotImplementedError

    def fill(self, index: int, dst: RawView, value: np.ndarray) -> None:
        plan = plan_fill(dst, value)
        if plan is None:
            return
        nbytes = plan.n * dst.dtype.itemsize
        if plan.dense_start is None or not self._memset(index, plan.dense_start, plan.pattern,
                                                        nbytes):  # fmt: skip
            self._launch_fill(index, dst, plan)

    def copy_strided(self, index: int, dst: RawView, src: RawView) -> None:
        plan = plan_copy(dst, src, f"{self.name}:{index}")
        if plan is None:
            return
        if plan.how == "memcpy":
            self.memcpy(index, dst.ptr, src.ptr, plan.n * dst.dtype.itemsize)
        else:
            self._launch_copy(index, dst, src, plan)
