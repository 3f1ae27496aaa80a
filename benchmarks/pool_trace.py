"""Replay the seeded mixed-size allocation trace through the pool of one or more devices.

    python benchmarks/pool_trace.py [--device cpu:0 --device opencl:0] [--seeds 8]
                                    [--requests 6000] [--family mixed --family sawtooth]

Prints, per device, trace family (all five by default) and seed, peak reserved / peak used (and / peak requested),
platform allocations per request after warm-up (the second half of the requests),
and the allocation time per request beside an exact-size warm hit.  The same replay
is ``gpuarrays bench --only pool-trace`` (seed 0); the trace is described in
``gpuarrays.cli.pool_trace``, the targets in docs/design.md, "Performance".
"""

from __future__ import annotations

import argparse
import statistics

from gpuarrays.cli.pool_trace import FAMILIES, make_trace, replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", action="append", default=None)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--family", action="append", choices=FAMILIES, default=None)
    args = parser.parse_args()
    for device, family in ((d, f) for d in args.device or ["cpu:0"]
                           for f in args.family or FAMILIES):
        ratios, fractions = [], []
        device_name = device
        for seed in range(args.seeds):
            r = replay(device, make_trace(args.requests, seed=seed, family=family))
            ratios.append(r.reserved_over_used)
            fractions.append(r.platform_fraction)
            print(f"{device_name} {family} seed {seed}: peak reserved {r.peak_reserved / 2**20:.0f} MiB = "
                  f"{r.reserved_over_used:.3f}x peak used ({r.peak_used / 2**20:.0f} MiB), "
                  f"{r.peak_reserved / r.peak_requested:.3f}x peak requested; platform "
                  f"allocations {100 * r.platform_fraction:.2f}% of requests after warm-up; "
                  f"allocation {r.alloc_ns_median / 1e3:.2f} us median, "
                  f"{r.alloc_ns_mean / 1e3:.2f} us mean (exact-size hit "
                  f"{r.hit_ns_median:.0f} ns)")
        if args.seeds > 1:
            met = sum(x <= 1.15 for x in ratios)
            print(f"{device_name} {family}: reserved/used median {statistics.median(ratios):.3f}, max "
                  f"{max(ratios):.3f}, <= 1.15 on {met} of {args.seeds} seeds; platform "
                  f"allocations max {100 * max(fractions):.2f}%")


if __name__ == "__main__":
    main()
