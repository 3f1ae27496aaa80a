"""The command line: ``gpuarrays info | demo | bench | plot``."""

from __future__ import annotations

import argparse
import sys

from . import commands

__all__ = ["main"]


def _info(args: argparse.Namespace) -> int:
    import gpuarrays as ga
    from gpuarrays._common.sizes import format_bytes
    from gpuarrays._memory.devices import _load, default_device, unavailable_backends

    print(f"gpuarrays {ga.__version__}")
    print(f"back-ends: {', '.join(ga.backends())}")
    for name, why in unavailable_backends().items():
        print(f"  {name}: unavailable ({why})")
    for name, impl in _load().items():
        for dev, why in getattr(impl, "left_out", {}).items():
            print(f"  {name}: left out {dev} ({why})")
    import os

    from gpuarrays._memory.pool import GRANULARITY

    env = {k: os.environ[k] for k in ("GPUARRAYS_DEVICE", "GPUARRAYS_MEMORY_LIMIT")
           if k in os.environ}
    print(f"default device: {default_device()}"
          + (f" ({', '.join(f'{k}={v}' for k, v in env.items())})" if env else ""))
    print(f"pool granularity: {GRANULARITY} B (byte counts are pool block sizes)")
    _print_kernel_cache(format_bytes)
    for dev in ga.devices():
        stats = ga.memory_stats(dev)
        print(f"{dev}: {dev.name}")
        print(f"  memory {format_bytes(dev.total_memory)}, kinds {', '.join(dev.kinds)}, "
              f"float64 {'yes' if dev.info.float64 else 'no'}, "
              f"float16 {'yes' if dev.info.float16 else 'no'}")
        print(f"  limit {format_bytes(stats['limit_bytes'])}, used "
              f"{format_bytes(stats['used_bytes'])}, pool {format_bytes(stats['pool_cached_bytes'])}"
              f" ({stats['pool_free_blocks']} free blocks), caches "
              f"{format_bytes(stats['cache_held_bytes'])}")
        if dev.backend == "opencl":
            _print_qualification(dev, args.requalify)
    return 0


def _print_kernel_cache(format_bytes) -> None:
    """Where compiled kernels are kept between processes, and how much (docs/kernels.md,
    "Kernel caches")."""
    from gpuarrays._compute.device import diskcache

    use = diskcache.usage()
    if use["folder"] is None:
        print("kernel cache: off (GPUARRAYS_KERNEL_CACHE=off)")
        return
    print(f"kernel cache: {use['folder']} ({use['entries']} entries, "
          f"{format_bytes(use['bytes'])}; clear: gpuarrays.clear_kernel_cache() or "
          f"GPUARRAYS_KERNEL_CACHE_CLEAR=1)")


def _print_qualification(dev, again: bool) -> None:
    """The device's kernel-shape verdict (docs/kernels.md, "Qualification")."""
    from gpuarrays._compute.device import qualify

    v = qualify.requalify(dev) if again else qualify.verdict(dev)
    on = [name for name, why in sorted(v.shapes.items()) if not why]
    off = [(name, why) for name, why in sorted(v.shapes.items()) if why]
    how = f"probed now in {v.seconds:.1f} s" if v.probed else "from an earlier probe"
    print(f"  kernel shapes ({how}; kept in {v.path}; probe again: gpuarrays info --requalify)")
    print(f"    on: {', '.join(on) or 'none'}")
    for name, why in off:
        print(f"    off: {name} ({why[:160]})")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuarrays",
        description="gpuarrays: device arrays whose memory is managed correctly and fast on "
                    "every back-end (cpu, OpenCL, CUDA).")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="back-ends, devices, memory, kinds, limits, and the "
                                       "kernel shapes each OpenCL device qualified")
    info.add_argument("--requalify", action="store_true",
                      help="probe each OpenCL device's kernel shapes again (docs/kernels.md)")
    info.set_defaults(func=_info)
    commands.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
