"""Indexing benchmark: ``python benchmarks/indexing.py [--device DEVICE ...] [--n N] [--repeat R]``.

Boolean-mask selection ``x[mask]`` and ``nonzero(x)`` of 16 M float32 (about half the
elements selected), and a gather ``x[idx]`` / scatter ``x[idx] = v`` of 1 M random int64
indices, side by side in one process with NumPy and PyTorch CPU (docs/indexing.md,
"Speed").  Best of ``--repeat`` wall times, in ms, each ending with the result on the
device (``ga.synchronize``); a mask selection and ``nonzero`` include their one count read.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import numpy as np  # noqa: E402 -- after the path fix above

try:
    import gpuarrays as ga
except ImportError:  # a source checkout without an install: use src/
    sys.path.insert(0, os.path.join(_HERE, "..", "src"))
    import gpuarrays as ga


def best(fn, repeat: int, sync=None) -> float:
    """Best wall time of ``fn()`` in ms (after one warm-up call)."""
    out = fn()
    del out
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        if sync is not None:
            sync()
        times.append(time.perf_counter() - t)
        del out
    return 1e3 * min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/indexing.py", description=__doc__)
    parser.add_argument("--device", action="append", help="gpuarrays device (repeatable); "
                        "default: the first device of each back-end")
    parser.add_argument("--n", type=int, default=16 * 2**20, help="elements (default 16 M)")
    parser.add_argument("--gather", type=int, default=2**20, help="indices of the gather")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    h = rng.standard_normal(args.n).astype(np.float32)
    h[h < 0] = 0  # about half zero: nonzero keeps half
    hm = h > 0
    hi = rng.integers(-args.n, args.n, args.gather)
    hv = rng.standard_normal(args.gather).astype(np.float32)
    rows: list[tuple[str, str, float]] = []
    r = args.repeat
    rows.append(("x[mask]", "numpy", best(lambda: h[hm], r)))
    rows.append(("nonzero", "numpy", best(lambda: np.nonzero(h), r)))
    rows.append(("x[idx]", "numpy", best(lambda: h[hi], r)))
    hs = h.copy()
    rows.append(("x[idx] = v", "numpy", best(lambda: hs.__setitem__(hi, hv), r)))
    try:
        import torch

        t, tm = torch.from_numpy(h), torch.from_numpy(hm)
        ti, tv = torch.from_numpy(hi % args.n), torch.from_numpy(hv)
        ts = t.clone()
        rows.append(("x[mask]", "torch cpu", best(lambda: t[tm], r)))
        rows.append(("nonzero", "torch cpu", best(lambda: torch.nonzero(t, as_tuple=True), r)))
        rows.append(("x[idx]", "torch cpu", best(lambda: t[ti], r)))
        rows.append(("x[idx] = v", "torch cpu", best(lambda: ts.__setitem__(ti, tv), r)))
    except ImportError:
        print("(PyTorch is not installed: no torch column)")
    for spec in args.device or [str(d) for d in ga.devices() if d.index == 0]:
        dev = ga.get_device(spec)
        x = ga.asarray(h, device=dev)
        m = ga.asarray(hm, device=dev)
        i = ga.asarray(hi, device=dev)
        v = ga.asarray(hv, device=dev)
        xs = ga.asarray(h, device=dev)

        def sync(dev=dev) -> None:
            ga.synchronize(dev)

        rows.append(("x[mask]", spec, best(lambda x=x, m=m: x[m], r, sync)))
        rows.append(("nonzero", spec, best(lambda x=x: ga.nonzero(x), r, sync)))
        rows.append(("x[idx]", spec, best(lambda x=x, i=i: x[i], r, sync)))
        rows.append(("x[idx] = v", spec,
                     best(lambda xs=xs, i=i, v=v: xs.__setitem__(i, v), r, sync)))
        for a in (x, m, i, v, xs):
            a.free()
    print(f"indexing, {args.n:,} float32 (mask, nonzero) and {args.gather:,} indices "
          f"(gather, scatter); best of {r}, ms")
    ops = list(dict.fromkeys(op for op, _, _ in rows))
    who = list(dict.fromkeys(w for _, w, _ in rows))
    table = {(op, w): t for op, w, t in rows}
    print(f"{'':12}" + "".join(f"{w:>12}" for w in who))
    for op in ops:
        print(f"{op:12}" + "".join(f"{table[(op, w)]:12.1f}" if (op, w) in table else
                                   f"{'-':>12}" for w in who))
    return 0


if __name__ == "__main__":
    sys.exit(main())
