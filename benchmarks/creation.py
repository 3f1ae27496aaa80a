"""Creation per call: ``python benchmarks/creation.py [--device DEVICE ...] [--sizes 100,1000]``.

Times ``zeros``, ``ones``, ``full``, the ``*_like`` functions, ``arange``, ``linspace``,
``eye`` and ``asarray`` of a list and of a NumPy array at a few element counts beside
``ga.empty`` (the allocation they are held to: docs/performance.md, "Creation"), NumPy and
PyTorch CPU (when installed), and prints a Markdown table per device and size.  The
measurement is ``gpuarrays.cli.bench_creation``'s (its docstring says how it times), the
one ``gpuarrays bench --only creation`` reports with its targets.
"""

from __future__ import annotations

import os
import sys

# Python puts this script's folder first on the path: keep it off (a script here named like
# a module would shadow it).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402 -- after the path fix above

try:
    import gpuarrays as ga
except ImportError:  # a source checkout without an install: use src/
    sys.path.insert(0, os.path.join(_HERE, "..", "src"))
    import gpuarrays as ga

from gpuarrays.cli.bench_creation import measure  # noqa: E402


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
            figures = measure(ga.get_device(device), n, args.repeat, torch)
            print(report(device, n, figures), flush=True)


if __name__ == "__main__":
    main()
