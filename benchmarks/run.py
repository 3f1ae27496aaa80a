"""Run the gpuarrays micro-benchmarks: ``python benchmarks/run.py [--device DEVICE] [--json PATH] [--quick]``.

The same as ``gpuarrays bench``: the one implementation lives in ``gpuarrays.cli.bench``.
"""

from __future__ import annotations

import argparse
import os
import sys

try:
    from gpuarrays.cli import bench
except ImportError:  # a source checkout without an install: use src/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    from gpuarrays.cli import bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/run.py", description=bench.__doc__)
    bench.add_arguments(parser)
    return bench.main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
