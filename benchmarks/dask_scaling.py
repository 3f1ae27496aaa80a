"""Dask scaling: ``python benchmarks/dask_scaling.py [--size 1GiB] [--device cpu:0] [--workers 1 2]``.

One graph, ``(sin(x) * 2 + x * x)`` then a sum over axis 0, of a float64 array of ``--size``
(1 GiB by default) in 64 MiB chunks made on the workers by ``da.full`` (``--input random``:
by ``da.random.default_rng``, which adds each library's generator to the figures), on a
``distributed.LocalCluster`` of 1 and of 2 worker processes (one thread each), with NumPy chunks
(Dask's default backend) and with gpuarrays chunks (``array.backend = "gpuarrays"``, each
worker on ``--device``).  A second graph adds ``rechunk`` to whole columns before the sum, so
every chunk travels between the workers.  Printed per run: wall time and the bytes the workers
sent each other (``transfer_outgoing_bytes_total``), so the cost of serialisation shows beside
the compute.  Times are best of ``--repeat``; docs/dask.md quotes the figures.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402 -- after the path fix above
import time  # noqa: E402

try:
    import gpuarrays as ga
except ImportError:  # a source checkout without an install: use src/
    sys.path.insert(0, os.path.join(_HERE, "..", "src"))
    import gpuarrays as ga

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import distributed  # noqa: E402

import gpuarrays.interop.dask as gd  # noqa: E402
from gpuarrays._common.sizes import format_bytes  # noqa: E402

CHUNK = 64 * 2**20


def _sent(dask_worker) -> int:
    return dask_worker.transfer_outgoing_bytes_total


def graph(n_rows: int, n_cols: int, backend: str, shuffle: bool, source: str):
    rows = max(1, CHUNK // (8 * n_cols))
    with dask.config.set({"array.backend": backend}):
        if source == "random":
            x = da.random.default_rng(0).random((n_rows, n_cols), chunks=(rows, n_cols))
        else:
            x = da.full((n_rows, n_cols), 0.5, chunks=(rows, n_cols))
    y = da.sin(x) * 2 + x * x
    if shuffle:
        y = y.rechunk((n_rows, max(1, n_cols // 8)))
    return y.sum(axis=0)


def run(n_workers: int, backend: str, shuffle: bool, size: int, device: str,
        repeat: int, source: str) -> tuple[float, int]:
    n_cols = 1024
    n_rows = max(1, size // (8 * n_cols))
    with distributed.LocalCluster(n_workers=n_workers, processes=True, threads_per_worker=1,
                                  dashboard_address=":0", worker_dashboard_address=None,
                                  memory_limit=0) as cluster, distributed.Client(cluster) as c:
        c.register_plugin(gd.GPUArraysWorker(device=device))
        best = float("inf")
        sent = 0
        for _ in range(repeat):
            before = sum(c.run(_sent)
                         .values())
            t = time.perf_counter()
            # P2P rechunk takes NumPy buffers only (docs/dask.md, "Limits"): tasks for both
            with dask.config.set({"array.rechunk.method": "tasks"}):
                r = c.compute(graph(n_rows, n_cols, backend, shuffle, source)).result()
            best = min(best, time.perf_counter() - t)
            after = sum(c.run(_sent)
                        .values())
            sent = after - before
            assert r.shape == (n_cols,)
        return best, sent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/dask_scaling.py", description=__doc__)
    parser.add_argument("--size", default="1GiB", help="array size (default 1GiB)")
    parser.add_argument("--device", default="cpu:0", help="each worker's device")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--input", choices=["full", "random"], default="full",
                        help="x from da.full (default: the graph's own cost) or "
                             "da.random.default_rng (adds each library's generator)")
    args = parser.parse_args(argv)
    size = ga.parse_size(args.size)
    print(f"graph: x = da.{args.input}(...), sin(x)*2 + x*x, sum(axis=0); "
          f"{ga.parse_size(args.size) / 2**20:.0f} MiB float64 in 64 MiB chunks; gpuarrays "
          f"chunks on {args.device}; best of {args.repeat}")
    print(f"{'graph':<18}{'workers':>8}{'numpy s':>10}{'gpuarrays s':>13}{'ratio':>7}"
          f"{'numpy sent':>13}{'gpuarrays sent':>16}")
    for shuffle in (False, True):
        for n in args.workers:
            t_np, b_np = run(n, "numpy", shuffle, size, args.device, args.repeat, args.input)
            t_ga, b_ga = run(n, "gpuarrays", shuffle, size, args.device, args.repeat,
                             args.input)
            name = "rechunk + sum" if shuffle else "elementwise + sum"
            print(f"{name:<18}{n:>8}{t_np:>10.2f}{t_ga:>13.2f}{t_ga / t_np:>7.2f}"
                  f"{format_bytes(b_np):>13}{format_bytes(b_ga):>16}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
