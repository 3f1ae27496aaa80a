"""The ``elementwise`` group of ``gpuarrays bench`` (docs/performance.md, "Elementwise functions
against the device's limit").

Every elementwise function of the namespace that takes float32, at 2 M elements, side by
side with NumPy's ufunc and, on OpenCL devices, a bare kernel: one work-item per element
calling the device's own builtin (``sin``, ``exp``, ``fmax`` ...) or operator on the same
data, built by PyOpenCL -- the device's limit for that function.  The kernel's time is
what PoCL's builtin costs; gpuarrays's kernel should add nothing to it (target: at most
1.25x the bare kernel).  On ``cpu`` the NumPy ufunc is the engine's own loop, so the
ratio to NumPy is the wrapper's cost (target: at most 1.2x at 2 M, issue 32 item 2), and
a second row times the call on 1 000 elements, where the call is most of the time (target:
at most 1.5x).

Each call is timed with its synchronize (``ga.synchronize`` / ``queue.finish()``); the
inputs are uniform in (0.25, 0.75) (every function's domain; ``acosh`` gets 1 + x).
"""

from __future__ import annotations

import dataclasses

import numpy as np

import gpuarrays as ga

from . import bench as b

__all__ = ["bench_elementwise", "BUILTINS"]

# namespace function -> the bare kernel's body over x (= a[i]) and y (= c[i]), or None when
# OpenCL C has no builtin or operator of that meaning (the row is then timed without one)
BUILTINS: dict[str, str | None] = {
    "abs": "fabs(x)", "acos": "acos(x)", "acosh": "acosh(x)", "asin": "asin(x)",
    "asinh": "asinh(x)", "atan": "atan(x)", "atanh": "atanh(x)", "ceil": "ceil(x)",
    "cos": "cos(x)", "cosh": "cosh(x)", "exp": "exp(x)", "expm1": "expm1(x)",
    "floor": "floor(x)", "log": "log(x)", "log1p": "log1p(x)", "log2": "log2(x)",
    "log10": "log10(x)", "round": "rint(x)", "sin": "sin(x)", "sinh": "sinh(x)",
    "sqrt": "sqrt(x)", "tan": "tan(x)", "tanh": "tanh(x)", "trunc": "trunc(x)",
    "negative": "-x", "positive": "x", "square": "x * x", "reciprocal": "1.0f / x",
    "sign": "sign(x)", "signbit": "(uchar)(signbit(x) != 0)",
    "isfinite": "(uchar)(isfinite(x) != 0)", "isinf": "(uchar)(isinf(x) != 0)",
    "isnan": "(uchar)(isnan(x) != 0)",
    "add": "x + y", "subtract": "x - y", "multiply": "x * y", "divide": "x / y",
    "atan2": "atan2(x, y)", "hypot": "hypot(x, y)", "copysign": "copysign(x, y)",
    "nextafter": "nextafter(x, y)", "pow": "pow(x, y)", "maximum": "fmax(x, y)",
    "minimum": "fmin(x, y)", "floor_divide": "numpy_floor_divide(x, y)",
    "remainder": "fmod(x, y)",
    "logaddexp": None, "equal": "(uchar)(x == y)", "not_equal": "(uchar)(x != y)",
    "less": "(uchar)(x < y)", "less_equal": "(uchar)(x <= y)", "greater": "(uchar)(x > y)",
    "greater_equal": "(uchar)(x >= y)",
    # NumPy's functions beyond the standard that are table rows
    "cbrt": "cbrt(x)", "exp2": "exp2(x)", "fabs": "fabs(x)", "fmax": "fmax(x, y)",
    "fmin": "fmin(x, y)", "fmod": "fmod(x, y)", "deg2rad": "radians(x)",
    "rad2deg": "degrees(x)", "degrees": "degrees(x)", "radians": "radians(x)",
    "logaddexp2": None, "heaviside": None, "float_power": None,
}

# NumPy's floor division (npy_divmod: exact, from C's fmod) on the device's own fmod: the
# device's limit for that function.  floor(x / y) is another function (1.0 // 0.1 is 9.0 in
# NumPy, floor(1.0f / 0.1f) is 10).
_PREAMBLE = """
float numpy_floor_divide(float a, float b)
{
    if (b == 0.0f) return a / b;
    float mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) div -= 1.0f;
    if (div == 0.0f) return copysign(0.0f, a / b);
    float f = floor(div);
    return div - f > 0.5f ? f + 1.0f : f;
}
"""

_KERNEL = _PREAMBLE + """
__kernel void k(__global %s *o, __global const float *a, __global const float *c)
{ size_t i = get_global_id(0); float x = a[i]; float y = c[i]; o[i] = %s; }
"""

SMALL = 1000
"""Elements of the cpu rows that time the call rather than the loop (issue 32, item 2:
at most 1.5x NumPy's time)."""


def _rows():
    """(name, NumPy ufunc, number of operands) of every float32 row of the table."""
    from .._compute.table import OPS

    f4 = np.dtype(np.float32)
    for name, op in sorted(OPS.items()):
        if op.ufunc is None or op.nin > 2 or f4 not in op.accepts or name == "clip":
            continue
        if getattr(ga, name, None) is None or "f" * op.nin not in {
                t.split("->")[0] for t in op.ufunc.types}:
            continue  # not in this namespace, or no float32 loop (ldexp, gcd ...)
        yield name, op.ufunc, op.nin


def bench_elementwise(dev, settings, libs, rows, targets) -> None:
    """Measure the group on ``dev``; append ``bench.Row``/``bench.Target`` objects."""
    n = 1 << 16 if settings.name == "smoke" else 1 << 21
    rng = np.random.default_rng(0)
    h = rng.uniform(0.25, 0.75, n).astype(np.float32)
    h2 = rng.uniform(0.25, 0.75, n).astype(np.float32)
    ocl = libs["pyopencl"] if dev.backend == "opencl" else None
    # 2 M elements: 11 repetitions (5 with --quick) of at least 2 ms each; a repetition of
    # one or two calls mostly measures which caches the other library left warm
    few = dataclasses.replace(settings, repeat=min(settings.repeat, 11 if
                              settings.name == "full" else 5),
                              target_ns=max(settings.target_ns, 2_000_000))
    chosen = list(_rows())
    if settings.name == "smoke":  # the harness's check: a few rows of each kind
        chosen = [r for r in chosen if r[0] in ("add", "exp", "isnan", "maximum", "sqrt")]
    for name, ufunc, nin in chosen:
        x = h + 1 if name == "acosh" else h
        args = (x, h2)[:nin]
        g = [ga.asarray(v, device=dev) for v in args]
        ns = {"ga": ga, "dev": dev, "f": getattr(ga, name), "g": g, "np": np, "u": ufunc,
              "h": _numpy_operands(g, args)}
        cases = {"gpuarrays": b.Case("f(*g).free()\nga.synchronize(dev)", ns),
                 "numpy": b.Case("u(*h)", ns)}
        body = BUILTINS.get(name)
        if ocl is not None and body is not None:
            cl, cl_array, ctx, queue = ocl
            out_t = "uchar" if body.startswith("(uchar)") else "float"
            kernel = cl.Program(ctx, _KERNEL % (out_t, body)).build().k
            da = cl_array.to_device(queue, x)
            dc = cl_array.to_device(queue, h2)
            do = cl_array.empty(queue, n, np.uint8 if out_t == "uchar" else np.float32)
            ns.update(kernel=kernel, queue=queue, n=(n,), bufs=(do.data, da.data, dc.data))
            cases["bare kernel (device builtin)"] = b.Case(
                "kernel(queue, n, None, *bufs)\nqueue.finish()", ns)
        t = b.side_by_side(cases, few)
        rows.append(b.Row("elementwise", f"{name}, 2 M float32", "us",
                          {k: None if v is None else v / 1e3 for k, v in t.items()}))
        bare = t.get("bare kernel (device builtin)")
        if bare:
            targets.append(b.Target(f"elementwise {name}, 2 M float32", t["gpuarrays"] / bare,
                                    1.25, None, "bare kernel", "the device's builtin"))
        elif dev.backend == "cpu":
            targets.append(b.Target(f"elementwise {name}, 2 M float32",
                                    t["gpuarrays"] / t["numpy"], 1.2, None, "numpy",
                                    "the engine's own loop"))
            _small(name, ufunc, args, dev, settings, rows, targets)
    libs["progress"].step("elementwise")


def _numpy_operands(g: list, args: tuple) -> list:
    """NumPy's operands: on ``cpu`` the very bytes gpuarrays reads (host views of ``g``), so
    neither side finds its inputs colder in the caches than the other's (on 2 M elements the
    side that runs after the other's different data measured up to 2.5x slower); elsewhere
    the host arrays."""
    if g and g[0].device.backend == "cpu":
        return [x.host_view() for x in g]
    return list(args)


def _small(name, ufunc, args, dev, settings, rows, targets) -> None:
    """The same call on 1 000 elements (cpu): what the call costs beside NumPy's."""
    g = [ga.asarray(v[:SMALL], device=dev) for v in args]
    ns = {"f": getattr(ga, name), "u": ufunc, "g": g, "h": _numpy_operands(g, args)}
    t = b.side_by_side({"gpuarrays": b.Case("f(*g)", ns), "numpy": b.Case("u(*h)", ns)},
                       settings)
    rows.append(b.Row("elementwise", f"{name}, 1 000 float32", "us",
                      {k: v / 1e3 for k, v in t.items()}))
    targets.append(b.Target(f"elementwise {name}, 1 000 float32", t["gpuarrays"] / t["numpy"],
                            1.5, None, "numpy", "the engine's own loop"))
