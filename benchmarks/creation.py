"""Creation per call: ``python benchmarks/creation.py [--device DEVICE ...] [--sizes 100,1000]``.

Times ``zeros``, ``ones``, ``full``, the ``*_like`` functions, ``arange``, ``linspace``,
``eye`` and ``asarray`` of a list and of a NumPy array at a few element counts beside
``ga.empty`` (the allocation they are held to: docs/performance.md, "Creation"), NumPy and
PyTorch CPU (when installed).  Each figure is the least, over repetitions, of the mean time
per call of a loop of calls (``timeit``, garbage collector off, about 2 ms a loop; all the
statements of a size interleaved, so that a change of load hits them alike).  Each call's
result is dropped at once, as a loop would.  On a device back-end a loop makes at most 200
calls and the device is synchronized after it, outside the timing: the figure is the time
a call takes the caller (one asynchronous enqueue), not the device's own time per command,
which runs meanwhile (PoCL's worker threads; a longer loop would end up waiting for them,
as the 257th small upload without a synchronize does: opencl.py, ``_KEPT_MAX``).  ``eye``
of n elements is the square ``eye(isqrt(n))``.
"""

from __future__ import annotations

import os
import sys

# Python puts this script's folder first on the path: keep it off (a script here named like
# a module would shadow it).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402 -- after the path fix above
import math  # noqa: E402
import timeit  # noqa: E402

import numpy as np  # noqa: E402

try:
    import gpuarrays as ga
except ImportError:  # a source checkout without an install: use src/
    sys.path.insert(0, os.path.join(_HERE, "..", "src"))
    import gpuarrays as ga

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


def least_times(stmts: dict[str, str], ns: dict, repeat: int, sync,
                most: int | None = None) -> dict[str, float]:
    """The least mean time per call (ns) of each statement over ``repeat`` interleaved
    loops of about 2 ms (at most ``most`` calls); ``sync()`` runs after each loop, untimed."""
    timers = {key: timeit.Timer(stmt, globals=ns) for key, stmt in stmts.items()}
    numbers = {}
    for key, timer in timers.items():
        timer.timeit(3)  # first use: kernels compiled, pools warm
        sync()
        once = max(timer.timeit(20) / 20, 1e-8)
        sync()
        numbers[key] = min(max(10, int(2e-3 / once)), most or 1 << 30)
    best = dict.fromkeys(timers, float("inf"))
    for _ in range(repeat):
        for key, timer in timers.items():
            best[key] = min(best[key], timer.timeit(numbers[key]) / numbers[key] * 1e9)
            sync()
    return best


def run(device: str, n: int, repeat: int, torch) -> dict[str, tuple]:
    """``{form: (gpuarrays, NumPy, PyTorch)}`` in ns per call (PyTorch ``None`` without it)."""
    dev = ga.get_device(device)
    host = np.arange(n, dtype=np.float64)
    ns = {"ga": ga, "np": np, "torch": torch, "dev": dev, "n": n, "side": math.isqrt(n),
          "lst": host.tolist(), "host": host, "like": ga.asarray(host, device=dev),
          "f8": torch and torch.float64, "t_like": torch and torch.asarray(host)}
    stmts = {}
    for form, (mine, numpy_stmt, torch_stmt) in FORMS.items():
        stmts[form, "ga"], stmts[form, "np"] = mine, numpy_stmt
        if torch is not None:
            stmts[form, "torch"] = torch_stmt
    t = least_times(stmts, ns, repeat, dev.synchronize, None if dev.backend == "cpu" else 200)
    return {form: (t[form, "ga"], t[form, "np"], t.get((form, "torch"))) for form in FORMS}


def report(device: str, n: int, figures: dict[str, tuple]) -> str:
    """A Markdown table: µs per call and the ratio to ``ga.empty``."""
    empty = figures["empty"][0]
    lines = [f"{device}, n = {n}:", "",
             "| function | gpuarrays µs | × ga.empty | NumPy µs | PyTorch µs |",
             "|---|---:|---:|---:|---:|"]
    for form, (mine, numpy_t, torch_t) in figures.items():
        torch_text = "n/a" if torch_t is None else f"{torch_t / 1e3:.2f}"
        lines.append(f"| {form} | {mine / 1e3:.2f} | {mine / empty:.1f} | "
                     f"{numpy_t / 1e3:.2f} | {torch_text} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", action="append", help="device spec (repeatable); "
                        "default cpu:0 and every opencl device")
    parser.add_argument("--sizes", default="100,1000", help="element counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=25, help="loops per statement")
    args = parser.parse_args()
    opencl = ga.devices("opencl")[:1] if "opencl" in ga.backends() else []
    devices = args.device or ["cpu:0"] + [str(d) for d in opencl]
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    for device in devices:
        for n in (int(s) for s in args.sizes.split(",")):
            print(report(device, n, run(device, n, args.repeat, torch)), flush=True)


if __name__ == "__main__":
    main()
