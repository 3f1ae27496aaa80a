"""The linear algebra benchmark: ``python benchmarks/linalg.py [--device DEVICE] [--json PATH] [--quick]``.

The same as ``gpuarrays bench --only linalg``: ``matmul`` of N x N matrices, N = 256, 1024 and
2048, float32 and float64, in GFLOP/s beside NumPy and PyTorch CPU (docs/linalg.md, "Speed").
The one implementation lives in ``gpuarrays.cli.bench_linalg``.
"""

from __future__ import annotations

import os
import sys

# Python puts this script's folder first on the path; a script in benchmarks/ named like a
# standard module (random.py once was) would shadow it: keep the folder off the path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402 -- after the path fix above

try:
    from gpuarrays.cli import bench
except ImportError:  # a source checkout without an install: use src/
    sys.path.insert(0, os.path.join(_HERE, "..", "src"))
    from gpuarrays.cli import bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/linalg.py", description=__doc__)
    bench.add_arguments(parser)
    args = parser.parse_args(argv)
    args.only = "linalg"
    return bench.main(args)


if __name__ == "__main__":
    sys.exit(main())
