"""The ``creation`` group of ``gpuarrays bench`` (docs/performance.md, "Creation").

Times ``zeros``, ``ones``, ``full``, the ``*_like`` functions, ``arange``, ``linspace``,
``eye`` and ``asarray`` of a list and of a NumPy array at 100 and 1000 elements beside
``ga.empty`` (the allocation they are held to), NumPy and PyTorch CPU (when installed).
``eye`` of n elements is the square ``eye(isqrt(n))``.

Each figure is the least, over repetitions, of the mean time per call of a loop of calls
(``timeit``, garbage collector off, about 2 ms a loop; all the statements of a size
interleaved, so that a change of load hits them alike).  Each call's result is dropped at
once, as a loop would.  On a device back-end a loop makes at most 200 calls and the device
is synchronized after it, outside the timing: the figure is the time a call takes the
caller (one asynchronous enqueue), not the device's own time per command, which runs
meanwhile (PoCL's worker threads; a longer loop would end up waiting for them, as the 257th
small upload without a synchronize does: opencl.py, ``_KEPT_MAX``).

Targets (issue 32, item 3; docs/design.md, "Performance"), at 100 elements: on ``cpu``
every form at most 2x ``ga.empty``'s time per call and at most PyTorch's; on a device
back-end at most 8x ``ga.empty``'s.  The rows at 1000 elements are measured, not targeted.
``benchmarks/creation.py`` prints the same measurements as Markdown tables.
"""

from __future__ import annotations

import math
import timeit

import numpy as np

import gpuarrays as ga

from . import bench as b

__all__ = ["FORMS", "SIZES", "bench_creation", "least_times", "measure"]

# name -> (gpuarrays, NumPy, PyTorch) statements; n, side, lst, host, like, t_like in scope
FORMS = {
    "empty": ("ga.empty(n, device=dev)", "np.empty(n)", "torch.empty(n, dtype=f8)"),
    "zeros": ("ga.zeros(n, device=dev)", "np.zeros(n)", "torch.zeros(n, dtype=f8)"),
    "ones": ("ga.ones(n, device=dev)", "np.ones(n)", "torch.ones(n, dtype=f8)"),
    "full": ("ga.full(n, 2.5, device=dev)", "np.full(n, 2.5)", "torch.full((n,), 2.5, dtype=f8)"),
    "empty_like": ("ga.empty_like(like)", "np.empty_like(host)", "torch.empty_like(t_like)"),
    "zeros_like": ("ga.zeros_like(like)", "np.zeros_like(host)", "torch.zeros_like(t_like)"),
    "ones_like": ("ga.ones_like(like)", "np.ones_like(host)", "torch.ones_like(t_like)"),
    "full_like": ("ga.full_like(like, 2.5)", "np.full_like(host, 2.5)",
                  "torch.full_like(t_like, 2.5)"),
    "arange": ("ga.arange(n, device=dev)", "np.arange(n)", "torch.arange(n)"),
    "linspace": ("ga.linspace(0, 1, n, device=dev)", "np.linspace(0, 1, n)",
                 "torch.linspace(0, 1, n, dtype=f8)"),
    "eye": ("ga.eye(side, device=dev)", "np.eye(side)", "torch.eye(side, dtype=f8)"),
    "asarray(list)": ("ga.asarray(lst, device=dev)", "np.asarray(lst)", "torch.asarray(lst)"),
    "asarray(ndarray)": ("ga.asarray(host, device=dev)", "np.array(host)",
                         "torch.asarray(host, copy=True)"),
}

SIZES = (100, 1000)
"""The element counts measured."""

TARGET_SIZES = (100,)
"""The element counts the targets hold ("small inputs": docs/performance.md, "Creation")."""

DEVICE_MOST = 200
"""At most this many calls in one loop on a device back-end (then a synchronize)."""

LIBS = ("gpuarrays", "numpy", "torch")


def least_times(stmts: dict, ns: dict, repeat: int, sync, most: int | None = None,
                loop_s: float = 2e-3) -> dict:
    """The least mean time per call (ns) of each statement over ``repeat`` interleaved
    loops of about ``loop_s`` seconds (at most ``most`` calls); ``sync()`` runs after each
    loop, untimed.  Returns ``{key: ns}`` for the keys of ``stmts``."""
    timers = {key: timeit.Timer(stmt, globals=ns) for key, stmt in stmts.items()}
    numbers = {}
    for key, timer in timers.items():
        timer.timeit(3)  # first use: kernels compiled, pools warm
        sync()
        once = max(timer.timeit(20) / 20, 1e-8)
        sync()
        numbers[key] = min(max(10, int(loop_s / once)), most or 1 << 30)
    best = dict.fromkeys(timers, float("inf"))
    for _ in range(repeat):
        for key, timer in timers.items():
            best[key] = min(best[key], timer.timeit(numbers[key]) / numbers[key] * 1e9)
            sync()
    return best


def _namespace(dev, n: int, torch) -> dict:
    """The names the statements of ``FORMS`` use, for ``n`` elements on ``dev``."""
    host = np.arange(n, dtype=np.float64)
    return {"ga": ga, "np": np, "torch": torch, "dev": dev, "n": n, "side": math.isqrt(n),
            "lst": host.tolist(), "host": host, "like": ga.asarray(host, device=dev),
            "f8": torch and torch.float64, "t_like": torch and torch.asarray(host)}


def measure(dev, n: int, repeat: int, torch, loop_s: float = 2e-3) -> dict:
    """``{form: (gpuarrays, NumPy, PyTorch)}`` in ns per call at ``n`` elements on ``dev``
    (PyTorch ``None`` when ``torch`` is ``None``)."""
    stmts = {}
    for form, (mine, numpy_stmt, torch_stmt) in FORMS.items():
        stmts[form, "gpuarrays"], stmts[form, "numpy"] = mine, numpy_stmt
        if torch is not None:
            stmts[form, "torch"] = torch_stmt
    most = None if dev.backend == "cpu" else DEVICE_MOST
    t = least_times(stmts, _namespace(dev, n, torch), repeat, dev.synchronize, most, loop_s)
    return {form: tuple(t.get((form, lib)) for lib in LIBS) for form in FORMS}


def bench_creation(dev, settings, libs, rows, targets) -> None:
    """Measure the group on ``dev``; append ``bench.Row`` (µs per call and the ratio to
    ``ga.empty``) and ``bench.Target`` objects.  One progress step per size."""
    repeat = {"quick": 10, "smoke": 1}.get(settings.name, min(settings.repeat, 40))
    loop_s = 1e-4 if settings.name == "smoke" else 2e-3
    torch = libs["torch"]
    for n in SIZES:
        figures = measure(dev, n, repeat, torch, loop_s)
        empty = figures["empty"][0]
        for form, (mine, numpy_t, torch_t) in figures.items():
            values = {"gpuarrays": mine / 1e3, "x ga.empty": mine / empty,
                      "numpy": numpy_t / 1e3, "torch": None if torch_t is None else torch_t / 1e3}
            rows.append(b.Row("creation", f"{form}, n = {n}", "us", values, {"elements": n}))
            if form != "empty" and n in TARGET_SIZES:
                targets.extend(_targets(dev, f"creation {form}, n = {n}", mine, empty, torch_t))
        libs["progress"].step(f"creation n = {n}")


def _targets(dev, name: str, mine: float, empty: float, torch_t: float | None) -> list:
    """The targets of one form: ``vs ga.empty`` (2x on ``cpu``, 8x elsewhere) and, on
    ``cpu`` with PyTorch, ``vs torch`` (1x)."""
    cpu = dev.backend == "cpu"
    out = [b.Target(name, mine / empty, 2.0 if cpu else 8.0, None, "ga.empty")]
    if cpu and torch_t is not None:
        out.append(b.Target(name, mine / torch_t, 1.0, None, "torch"))
    return out
