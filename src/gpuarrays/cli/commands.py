"""The subcommands ``demo``, ``bench`` and ``plot`` of ``gpuarrays``.

``gpuarrays.cli`` builds the parser and calls :func:`add_commands`; each
command's work lives in its own module (``demo.py``, ``bench.py``,
``plot.py``), imported only when the command runs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import textwrap

__all__ = ["add_commands", "missing_extra"]

# Optional libraries a command cannot run without, and the extra of gpuarrays that installs
# each.  (``bench`` runs without its optional libraries: their columns read n/a.)
_EXTRAS = {"matplotlib.figure": "plot"}


class _WholeWords(argparse.HelpFormatter):
    """Wraps help text at spaces only, so a name such as ``pool-trace`` or ``opencl:0`` is
    never split across lines (argparse's own formatter breaks at hyphens and inside long
    words)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False,
                             break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent,
                             subsequent_indent=indent, break_on_hyphens=False,
                             break_long_words=False)


def missing_extra(command: str, module: str, purpose: str) -> str | None:
    """The one-line message for a missing optional ``module``, or None when it imports.

    Checked before a command starts any work, so a user never waits for a run that
    fails at its end.
    """
    try:
        importlib.import_module(module)
    except ImportError:
        extra = _EXTRAS[module]
        library = module.split(".")[0]
        return (f"gpuarrays {command}: {purpose} needs {library}, which is not installed; "
                f'install it with: pip install "gpuarrays[{extra}]"')
    return None


def _refuse(message: str) -> int:
    print(message, file=sys.stderr)
    return 2


def _demo(args: argparse.Namespace) -> int:
    if args.plot is not None:
        message = missing_extra("demo", "matplotlib.figure", "--plot")
        if message:
            return _refuse(message)
    from . import demo

    return demo.main(args)


def _bench(args: argparse.Namespace) -> int:
    from . import bench

    return bench.main(args)


def _plot(args: argparse.Namespace) -> int:
    message = missing_extra("plot", "matplotlib.figure", "drawing a timeline")
    if message:
        return _refuse(message)
    try:
        with open(args.snapshot, encoding="utf-8") as f:
            snapshot = json.load(f)
    except OSError as e:
        print(f"gpuarrays plot: cannot read {args.snapshot}: {e.strerror}", file=sys.stderr)
        return 1
    except json.JSONDecodeError as e:
        print(f"gpuarrays plot: {args.snapshot} is not a JSON snapshot "
              f"(ga.memory_history.dump writes one): {e}", file=sys.stderr)
        return 1
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("events"), list):
        print(f"gpuarrays plot: {args.snapshot} is not a memory history snapshot: expected a "
              f"JSON object with an 'events' list (ga.memory_history.dump writes one)",
              file=sys.stderr)
        return 1
    from .plot import plot_snapshot

    plot_snapshot(snapshot, args.output, title=args.title)
    print(f"memory timeline written to {args.output}")
    return 0


def add_commands(subparsers) -> None:
    """Add ``demo``, ``bench`` and ``plot`` to the ``gpuarrays`` parser."""
    from . import bench, demo

    p = subparsers.add_parser(
        "demo", help="k-means over a stream of batches without and with an allocation cache",
        description="Run mini-batch k-means over a stream of batches on a device, without and "
                    "with an allocation cache, check it against NumPy, and print the median "
                    "time, allocations, platform allocations, cache hits and peak memory side "
                    "by side.")
    demo.add_arguments(p)
    p.set_defaults(func=_demo)

    p = subparsers.add_parser(
        "bench", help="micro-benchmarks beside NumPy, PyTorch and PyOpenCL",
        formatter_class=_WholeWords,
        description="Time gpuarrays' hot paths side by side with NumPy and PyTorch (and "
                    "PyOpenCL or CuPy where present) in one process, and compare the ratios "
                    "with the project's performance targets (docs/performance.md).  PyTorch "
                    "is optional: without it, its columns read n/a "
                    '(pip install "gpuarrays[bench]" adds it).')
    bench.add_arguments(p)
    p.set_defaults(func=_bench)

    p = subparsers.add_parser(
        "plot", help="draw a memory history snapshot as a timeline picture",
        description="Draw used memory over time, stacked by allocation site, from a snapshot "
                    "written by gpuarrays.memory_history.dump(path).")
    p.add_argument("snapshot", metavar="SNAPSHOT", help="JSON file written by gpuarrays.memory_history.dump")
    p.add_argument("-o", "--output", metavar="PATH", required=True, help="PNG file to write")
    p.add_argument("--title", default=None, help="title of the picture")
    p.set_defaults(func=_plot)
