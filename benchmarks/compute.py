"""The compute benchmarks: ``python benchmarks/compute.py [--device DEVICE] [--quick] [--json PATH]``.

The ``compute`` group of ``gpuarrays bench`` (one implementation, in
``gpuarrays.cli.bench_compute``): elementwise ``a + b``, ``a * 2``, ``exp(a)``,
``where(a > 0, a, 0)`` at 1, 1 000, 1 M and 16 M float32 beside NumPy, PyTorch
CPU, ``pyopencl.array`` and a one-item-per-work-item kernel, the enqueue path
and the data-movement kernels, with the targets of docs/design.md
("Performance") and docs/kernels.md ("Measurements").  The default device is
opencl:0 when there is one.
"""

from __future__ import annotations

import argparse
import os
import sys

# This folder is sys.path[0] when the script runs; a benchmark module here named like a
# standard module (random.py) would shadow it for everything imported below.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

try:
    from gpuarrays.cli import bench
except ImportError:  # a source checkout without an install: use src/
    sys.path.insert(0, os.path.join(_HERE, "..", "src"))
    from gpuarrays.cli import bench


def main(argv: list[str] | None = None) -> int:
    import gpuarrays as ga

    parser = argparse.ArgumentParser(prog="benchmarks/compute.py", description=__doc__)
    bench.add_arguments(parser)
    args = parser.parse_args(argv)
    args.only = "compute"
    if args.device is None and any(d.backend == "opencl" for d in ga.devices()):
        args.device = "opencl:0"
    return bench.main(args)


if __name__ == "__main__":
    sys.exit(main())
