"""The ``random`` benchmark group on every device: ``python benchmarks/random_numbers.py [--quick]``.

(Not ``random.py``: a script folder is first on ``sys.path``, and a file named like the
standard library's ``random`` would shadow it for every script here.)

Runs ``gpuarrays bench --only random`` (``gpuarrays.cli.bench``) on cpu:0 and on the
first device of every other back-end, one report each: ``random`` and
``standard_normal`` of 16 M float32 beside NumPy's ``default_rng``, PyTorch CPU and,
on device back-ends, a one-item-per-work-item write kernel (docs/random.md, "Speed").
"""

from __future__ import annotations

import argparse
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import gpuarrays as ga
    from gpuarrays.cli import bench
except ImportError:  # a source checkout without an install: use src/
    sys.path.insert(0, os.path.join(_HERE, "..", "src"))
    import gpuarrays as ga
    from gpuarrays.cli import bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/random_numbers.py", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--smoke", action="store_true", help="check the harness only")
    args = parser.parse_args(argv)
    settings = (bench.Settings.smoke() if args.smoke else
                bench.Settings.quick() if args.quick else bench.Settings())
    for dev in [d for d in ga.devices() if d.index == 0]:
        result = bench.run(dev, settings, progress=sys.stderr, groups=("random",))
        print(bench.format_report(result))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
