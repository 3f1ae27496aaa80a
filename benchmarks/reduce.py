"""The reductions benchmark: ``python benchmarks/reduce.py [--device DEVICE] [--json PATH] [--quick]``.

The same as ``gpuarrays bench --only reduce``: sum/max/mean over all axes and axis 0 / 1 of a
4096x4096 float32 array and of 16 M elements, cumulative_sum of 1 M and 16 M, beside NumPy,
PyTorch CPU and pyopencl.array / pyopencl.scan (docs/reductions.md, "Speed").  The one
implementation lives in ``gpuarrays.cli.bench``.

``--per-call N`` instead times single calls, N rounds, each round running NumPy, NumPy handed
to a worker thread and gpuarrays (result freed, device synchronized) one after the other on
every form, and prints medians of the wall time and of the process's CPU time (all threads,
PoCL's workers included).  On a loaded machine the CPU time tells how much work a kernel does
and the hand-off column how long a woken thread waits for a core (docs/reductions.md, "Speed").
"""

from __future__ import annotations

import os
import sys

# Python puts this script's folder first on the path; a script in benchmarks/ named like a
# standard module (random.py once was) would shadow it: keep the folder off the path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402 -- after the path fix above
import queue  # noqa: E402
import statistics  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

try:
    from gpuarrays.cli import bench
except ImportError:  # a source checkout without an install: use src/
    sys.path.insert(0, os.path.join(_HERE, "..", "src"))
    from gpuarrays.cli import bench

import gpuarrays as ga  # noqa: E402


def per_call(device: str, rounds: int, side: int = 4096) -> list[dict]:
    """Median wall and CPU times (s) per form: NumPy, NumPy handed to a thread, gpuarrays."""
    h2 = np.random.default_rng(0).random((side, side), dtype=np.float32)
    a2 = ga.asarray(h2, device=device)
    dev = a2.device
    forms = [("all axes", h2, a2, None), ("axis 0", h2, a2, 0), ("axis 1", h2, a2, 1),
             (f"{side * side >> 20} M elements" if side * side >= 1 << 20 else
              f"{side * side} elements", h2.reshape(-1), a2.reshape(-1), None)]
    jobs: queue.SimpleQueue = queue.SimpleQueue()
    done: queue.SimpleQueue = queue.SimpleQueue()

    def serve() -> None:
        while (fn := jobs.get()) is not None:
            done.put(fn())

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()

    def handed(fn):
        jobs.put(fn)
        return done.get()

    cases = []
    for op in ("sum", "max", "mean"):
        for label, h, a, axis in forms:
            def ours(op=op, a=a, axis=axis):
                getattr(ga, op)(a, axis=axis).free()
                dev.synchronize()

            def numpy(op=op, h=h, axis=axis):
                return getattr(np, op)(h, axis=axis)

            cases.append((f"{op} {label}", {"numpy": numpy, "numpy, handed to a thread":
                                            lambda f=numpy: handed(f), "gpuarrays": ours}))
    wall = {(name, k): [] for name, fns in cases for k in fns}
    cpu = {key: [] for key in wall}
    for _, fns in cases:
        for fn in fns.values():
            fn()  # warm up: kernel builds, pool
    try:
        for _ in range(rounds):
            for name, fns in cases:
                for k, fn in fns.items():
                    c0, t0 = time.process_time(), time.perf_counter()
                    fn()
                    wall[name, k].append(time.perf_counter() - t0)
                    cpu[name, k].append(time.process_time() - c0)
    finally:
        jobs.put(None)
        worker.join()
        a2.free()
    out = []
    for name, fns in cases:
        out.append({"name": name, "bytes": h2.nbytes,
                    **{f"wall {k}": statistics.median(wall[name, k]) for k in fns},
                    **{f"cpu {k}": statistics.median(cpu[name, k]) for k in fns}})
    return out


def print_per_call(rows: list[dict]) -> None:
    print(f"{'reduction':24s} {'numpy':>10s} {'handed':>10s} {'gpuarrays':>10s}"
          f" {'ratio':>6s}   CPU ms: {'numpy':>6s} {'gpuarrays':>9s}")
    for r in rows:
        gb = {k: r["bytes"] / r[f"wall {k}"] / 1e9
              for k in ("numpy", "numpy, handed to a thread", "gpuarrays")}
        print(f"{r['name']:24s} {gb['numpy']:6.1f}GB/s {gb['numpy, handed to a thread']:6.1f}GB/s"
              f" {gb['gpuarrays']:6.1f}GB/s {gb['gpuarrays'] / gb['numpy']:5.2f}x"
              f"   {r['cpu numpy'] * 1e3:14.2f} {r['cpu gpuarrays'] * 1e3:9.2f}")
    print("ratio: gpuarrays' throughput / NumPy's (medians of interleaved single calls)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/reduce.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_arguments(parser)
    parser.add_argument("--per-call", metavar="N", type=int, default=0,
                        help="time N interleaved rounds of single calls instead (wall and CPU)")
    args = parser.parse_args(argv)
    if args.per_call:
        print_per_call(per_call(args.device or "opencl:0", args.per_call,
                                256 if args.smoke else 4096))
        return 0
    args.only = "reduce"
    return bench.main(args)


if __name__ == "__main__":
    sys.exit(main())
