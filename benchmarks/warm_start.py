"""Warm start: the first call of an operation in a new process, with and without the disk
cache of compiled OpenCL programs (docs/kernels.md, "Kernel caches").

``python benchmarks/warm_start.py [--repeat 3] [--runtime system,pip]``

Each measurement is a new Python process with a fresh ``POCL_CACHE_DIR`` unless said
otherwise, so PoCL's own kernel cache does not help.  Per OpenCL runtime (the system's
PoCL, ``opencl:0`` by default, and pip's PoCL alone through ``OCL_ICD_VENDORS``):

- ``cold``: an empty gpuarrays cache: every program is compiled from source (today's
  first process), then saved;
- ``disk``: the cache the cold run filled (what this cache is for);
- ``pocl``: gpuarrays' cache off, PoCL's own cache warm from the cold run (a second
  process before this cache existed, when PoCL's cache folder persists).

For ``x + y`` and ``ga.sum(x)`` on 1 000 float32, a strided copy ``x[::3].copy()`` and a
conversion ``x.astype(np.float64)`` (the back-end's data-movement programs), the table gives the first call (to the result on the host), the
part of it spent getting the program (compiled or loaded), the part spent reading the
binary to save it (cold only: PoCL compiles a generic work-group function then), and a
second call of the same operation; ``first - hot`` is what the first call costs beyond
the operation itself; ``start`` is the import and the device's start (PoCL's own
compile of the back-end's probe kernel included, hence slower with a fresh PoCL cache).
Medians over ``--repeat`` processes.  Not a test: it prints a table.
"""

from __future__ import annotations

import os
import sys

# Python puts this script's folder first on the path; a script in benchmarks/ named like a
# standard module would shadow it: keep the folder off the path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402 -- after the path fix above
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402

CHILD = r"""
import json, time
t0 = time.perf_counter()
import numpy as np
import gpuarrays as ga
dev = ga.get_device("opencl:0")
impl = dev.impl
h = np.arange(1, 1001, dtype=np.float32)
x = ga.asarray(h, device=dev)
y = ga.asarray(h / 7, device=dev)
ga.synchronize(dev)
started = time.perf_counter() - t0
spent = [0.0]
built = impl._built_kernels
def timed(*args, **kwargs):  # the time spent getting programs (compiled or loaded)
    t = time.perf_counter()
    try:
        return built(*args, **kwargs)
    finally:
        spent[0] += time.perf_counter() - t
impl._built_kernels = timed
saving = [0.0]
read = impl._program_binary
def timed_read(program):  # reading a binary to save it (first process only)
    t = time.perf_counter()
    try:
        return read(program)
    finally:
        saving[0] += time.perf_counter() - t
impl._program_binary = timed_read
ops = {"x + y": lambda: (x + y).get(), "ga.sum(x)": lambda: float(ga.sum(x)),
       "x[::3].copy()": lambda: x[::3].copy().get(),
       "x.astype(f8)": lambda: x.astype(np.float64).get()}
out = {"name": dev.name, "start": started, "ops": {}}
for name, op in ops.items():
    spent[0] = saving[0] = 0.0
    t = time.perf_counter(); op(); first = time.perf_counter() - t
    program, save = spent[0], saving[0]
    t = time.perf_counter(); op(); hot = time.perf_counter() - t
    out["ops"][name] = {"first": first, "program": program, "save": save, "hot": hot}
out["builds"], out["loads"] = impl.builds, impl.binary_loads
ga.synchronize(dev)
print(json.dumps(out))
"""


def _runtimes() -> dict[str, dict]:
    """The OpenCL runtimes to measure: environment overrides per runtime."""
    found = {"system": {}}
    try:
        import pyopencl
    except ImportError:
        return found
    libs = os.path.join(os.path.dirname(pyopencl.__file__), ".libs")
    if os.path.exists(os.path.join(libs, "pocl.icd")):
        found["pip"] = {"OCL_ICD_VENDORS": libs}
    return found


def _child(env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode:
        raise SystemExit(f"the measuring process failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(runtime: dict, repeat: int) -> dict[str, list[dict]]:
    """``{mode: [child results]}`` for one runtime (see the module docstring)."""
    base = {k: v for k, v in os.environ.items() if k != "GPUARRAYS_KERNEL_CACHE_CLEAR"}
    base.update(runtime)
    with tempfile.TemporaryDirectory(prefix="warm-start-") as tmp:
        kernels = os.path.join(tmp, "kernels")
        pocl = os.path.join(tmp, "pocl-cold")
        runs: dict[str, list[dict]] = {"cold": [], "disk": [], "pocl": []}
        runs["cold"].append(_child(dict(base, GPUARRAYS_KERNEL_CACHE=kernels,
                                        POCL_CACHE_DIR=pocl)))
        for i in range(repeat):
            runs["disk"].append(_child(dict(base, GPUARRAYS_KERNEL_CACHE=kernels,
                                            POCL_CACHE_DIR=os.path.join(tmp, f"pocl-{i}"))))
            runs["pocl"].append(_child(dict(base, GPUARRAYS_KERNEL_CACHE="off",
                                            POCL_CACHE_DIR=pocl)))
    return runs


def table(name: str, runs: dict[str, list[dict]]) -> str:
    device = runs["cold"][0]["name"]
    lines = [f"{name} runtime: {device}",
             f"{'mode':<5} {'operation':<14} {'first ms':>9} {'program ms':>11} {'save ms':>8} "
             f"{'hot ms':>7} {'first-hot':>10} {'builds':>7} {'loads':>6} {'start s':>8}"]
    for mode, results in runs.items():
        for op in results[0]["ops"]:
            def med(field: str, op: str = op) -> float:
                return 1e3 * statistics.median(r["ops"][op][field] for r in results)
            first, program, save, hot = med("first"), med("program"), med("save"), med("hot")
            lines.append(
                f"{mode:<5} {op:<14} {first:9.1f} {program:11.1f} {save:8.1f} {hot:7.2f} "
                f"{first - hot:10.1f} "
                f"{statistics.median(r['builds'] for r in results):7.0f} "
                f"{statistics.median(r['loads'] for r in results):6.0f} "
                f"{statistics.median(r['start'] for r in results):8.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3,
                        help="processes per warm mode (medians); default 3")
    parser.add_argument("--runtime", default=None,
                        help="comma-separated: system, pip (default: those installed)")
    args = parser.parse_args(argv)
    found = _runtimes()
    wanted = args.runtime.split(",") if args.runtime else list(found)
    unknown = [r for r in wanted if r not in found]
    if unknown:
        parser.error(f"unknown or missing runtime(s) {unknown}; found {list(found)}")
    print(f"first call in a new process (fresh POCL_CACHE_DIR unless 'pocl'); medians of "
          f"{args.repeat} processes (cold: 1)")
    for name in wanted:
        print()
        print(table(name, measure(found[name], args.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
