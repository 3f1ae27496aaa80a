"""The subcommands ``demo``, ``bench`` and ``plot`` of ``gpuarrays``.

``gpuarrays.cli`` builds the parser and calls :func:`add_commands`; each
command's work lives in its own module (``demo.py``, ``bench.py``,
``plot.py``), imported only when the command runs.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_commands"]


def _demo(args: argparse.Namespace) -> int:
    from . import demo

    return demo.main(args)


def _bench(args: argparse.Namespace) -> int:
    from . import bench

    return bench.main(args)


def _plot(args: argparse.Namespace) -> int:
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
    try:
        from .plot import plot_snapshot

        plot_snapshot(snapshot, args.output, title=args.title)  # imports matplotlib lazily
    except ImportError as e:
        print(f"gpuarrays plot: plotting needs matplotlib ({e}); "
              f'install it with: pip install "gpuarrays[plot]"', file=sys.stderr)
        return 1
    print(f"memory timeline written to {args.output}")
    return 0


def add_commands(subparsers) -> None:
    """Add ``demo``, ``bench`` and ``plot`` to the ``gpuarrays`` parser."""
    from . import bench, demo

    p = subparsers.add_parser(
        "demo", help="a batch pipeline without and with an allocation cache, side by side",
        description=demo.__doc__.split("\n\n")[0])
    demo.add_arguments(p)
    p.set_defaults(func=_demo)

    p = subparsers.add_parser(
        "bench", help="micro-benchmarks beside NumPy, PyTorch and PyOpenCL",
        description=bench.__doc__.split("\n\n")[0])
    bench.add_arguments(p)
    p.set_defaults(func=_bench)

    p = subparsers.add_parser(
        "plot", help="draw a memory history snapshot (ga.memory_history.dump) as a timeline",
        description="Draw used memory over time, stacked by allocation site, from a snapshot "
                    "written by ga.memory_history.dump(path).")
    p.add_argument("snapshot", metavar="SNAPSHOT", help="JSON file from memory_history.dump")
    p.add_argument("-o", "--output", metavar="PATH", required=True, help="PNG file to write")
    p.add_argument("--title", default=None, help="title of the picture")
    p.set_defaults(func=_plot)
