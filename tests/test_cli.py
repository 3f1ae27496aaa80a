"""The command line: info, demo, bench and plot, run as a user runs them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays.cli import bench, demo, pipeline

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_cli(*args: str, cwd: Path | None = None, script: list[str] | None = None,
            timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m gpuarrays ARGS`` in a fresh interpreter, with src/ importable."""
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, *(script or ["-m", "gpuarrays"]), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd or ROOT, env=env,
                          timeout=timeout)


def assert_clean(proc: subprocess.CompletedProcess, rc: int = 0) -> None:
    assert proc.returncode == rc, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr


# info --------------------------------------------------------------------------------

def test_info_lists_backends_devices_memory_and_kinds():
    proc = run_cli("info")
    assert_clean(proc)
    out = proc.stdout
    assert f"gpuarrays {ga.__version__}" in out
    assert "back-ends:" in out and "cpu" in out
    for dev in ga.devices():
        assert f"{dev}:" in out
        assert ", ".join(dev.kinds) in out
    assert "float64" in out and "limit" in out
    assert "cuda" in out  # a missing back-end is listed with why it is missing
    assert "pool granularity: 512 B" in out and "free blocks" in out


def test_info_shows_the_memory_limit_from_the_environment():
    env = {"GPUARRAYS_MEMORY_LIMIT": "3GiB"}
    proc = run_cli("info", env=env)
    assert_clean(proc)
    assert "GPUARRAYS_MEMORY_LIMIT=3GiB" in proc.stdout
    assert "limit 3.0 GiB" in proc.stdout


def test_no_subcommand_is_a_usage_error():
    proc = run_cli()
    assert proc.returncode == 2
    assert "usage: gpuarrays" in proc.stderr


# demo --------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", [d for d in ("cpu:0", "opencl:0")
                                  if d in {str(x) for x in ga.devices()}])
def test_demo_computes_checks_and_writes_a_png_timeline(tmp_path, spec):
    """``gpuarrays demo`` as a user runs it, on cpu and opencl: k-means checked against
    NumPy, both runs side by side, the picture written."""
    png = tmp_path / "timeline.png"
    proc = run_cli("demo", "--device", spec, "--iterations", "3", "--repeats", "3",
                   "--plot", str(png), timeout=300)
    assert_clean(proc)
    out = proc.stdout
    assert f"gpuarrays demo on {spec}" in out and "k-means" in out
    assert "without cache" in out and "with cache" in out
    for row in ("median time", "time range", "allocations", "platform allocations",
                "cache hits", "peak memory", "matches NumPy"):
        assert row in out
    assert out.split("matches NumPy")[1].splitlines()[0].split() == ["yes", "yes"]
    assert out.count("With the cache:") == 1
    assert f"memory timeline written to {png}" in out
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert "3/3" in proc.stderr  # progress


def test_demo_rejects_bad_iterations():
    proc = run_cli("demo", "--iterations", "0")
    assert proc.returncode == 2
    assert "--iterations must be at least 1" in proc.stderr
    proc = run_cli("demo", "--repeats", "0")
    assert proc.returncode == 2
    assert "--repeats must be at least 1" in proc.stderr


def test_demo_unknown_device_names_the_available_ones():
    proc = run_cli("demo", "--device", "nosuch:3", "--iterations", "1")
    assert proc.returncode != 0
    assert "cpu:0" in proc.stderr


def test_demo_kmeans_matches_numpy_and_the_cache_stops_allocating(device):
    """In-process: the k-means job is right on every device; inside a cache it allocates
    the same few buffers however many batches run, and gives every byte back."""
    stream = demo.make_stream(3, points=256)
    want, inertia = demo.numpy_kmeans(stream, 4)
    before = ga.memory_stats(device)["used_bytes"]
    plain = demo.run_kmeans(stream, 4, device)
    np.testing.assert_allclose(plain.centres, want, rtol=1e-4, atol=1e-4)
    assert plain.inertia == pytest.approx(inertia, rel=1e-4)
    per_batch = plain.allocations // 4
    assert per_batch >= 15 and plain.allocations == 4 * per_batch and plain.cache_hits == 0
    counts = []
    for batches in (2, 4):
        cache = ga.AllocCache()
        r = demo.run_kmeans(stream, batches, device, cache)
        counts.append(r.allocations)
        assert r.cache_hits == batches * per_batch - r.allocations
        cache.free()
    np.testing.assert_allclose(r.centres, want, rtol=1e-4, atol=1e-4)
    assert counts[0] == counts[1] < 2 * per_batch  # the first batch or two only
    assert ga.memory_stats(device)["used_bytes"] == before
    line = demo.conclusion(plain, r, [1.0, 1.1, 1.2], [0.5, 0.6, 0.7])
    assert line.startswith("With the cache:") and "faster (every repeat)" in line
    assert "no speed claim" in demo.conclusion(plain, r, [1.0, 1.1, 1.2], [1.05, 1.0, 1.3])
    assert "no speed claim" in demo.conclusion(plain, r, [1.0], [0.5])


def test_pipeline_matches_numpy_and_counts_cache_hits(device):
    """In-process: the pipeline is right on every device, and the cache turns every
    allocation after the first iteration into a hit."""
    batches = pipeline.make_batches(2, shape=(4, 24, 20, 3))
    out = pipeline.pipeline_step(batches[1], device)
    np.testing.assert_array_equal(out, pipeline.numpy_step(batches[1], device))

    cache = ga.AllocCache()
    before = ga.memory_stats(device)["used_bytes"]
    plain = pipeline.run_workload(3, device, None, batches)
    withc = pipeline.run_workload(3, device, cache, batches)
    assert plain.correct and withc.correct and plain.checksum == withc.checksum
    per_iteration = plain.allocations // 3
    assert per_iteration >= 6 and plain.allocations == 3 * per_iteration
    assert withc.allocations == per_iteration  # the first iteration only
    assert withc.cache_hits == 2 * per_iteration
    assert plain.peak_bytes > 0 and withc.peak_bytes > 0
    assert cache.n_busy == 0 and cache.n_free == per_iteration
    cache.free()
    assert ga.memory_stats(device)["used_bytes"] == before
    line = pipeline.conclusion(plain, withc)
    assert line.startswith("With the cache:") and "cache hits" in line


def test_pipeline_buffer_names_cover_every_allocation(device):
    """The timeline names its bands after the pipeline's buffers: every block size the
    pipeline allocates has a name."""
    shape = (4, 24, 20, 3)
    batches = pipeline.make_batches(1, shape=shape)
    names = pipeline.buffer_names(device, shape)
    ga.memory_history.start(stacks=False)
    try:
        pipeline.pipeline_step(batches[0], device)
    finally:
        ga.memory_history.stop()
    sizes = {e["size"] for e in ga.memory_history.snapshot()["events"]
             if e["action"] == "alloc" and e["device"] == str(device)}
    assert sizes and sizes <= set(names)


# bench -------------------------------------------------------------------------------

JSON_KEYS = {"device", "device_name", "settings", "python", "platform", "versions", "command",
             "unavailable", "seconds", "results", "targets"}
GROUPS = {"derive", "alloc", "cache", "fragmentation", "dlpack", "copy", "workload", "random",
          "reduce", "compute", "compute bandwidth", "pool-trace", "linalg", "sort", "programs",
          "elementwise", "fusion", "creation", "streams"}
PROGRAMS = ["least squares", "MLP training", "2-D stencil", "Monte-Carlo",
            "image filter + histogram", "k-NN"]


def test_bench_writes_json_results(tmp_path):
    path = tmp_path / "bench.json"
    proc = run_cli("bench", "--smoke", "--json", str(path))
    assert_clean(proc)
    result = json.loads(path.read_text())
    assert JSON_KEYS <= set(result)
    assert result["device"] == str(ga.get_device())
    assert result["command"] == "gpuarrays bench --smoke"
    assert {r["group"] for r in result["results"]} == GROUPS
    for row in result["results"]:
        assert {"group", "name", "unit", "values"} <= set(row)
    derive = [r for r in result["results"] if r["group"] == "derive"]
    assert [r["name"] for r in derive] == ["a[1:]", "a.reshape(4096)", "a.view(int32)", "a.T"]
    for row in derive:
        assert row["values"]["gpuarrays"] > 0 and row["values"]["numpy"] > 0
    frag = next(r for r in result["results"] if r["group"] == "fragmentation")
    assert list(frag["pool_free_blocks"]) == ["10", "100"]
    assert all(n >= int(k) for k, n in frag["pool_free_blocks"].items())
    for target in result["targets"]:
        assert {"name", "ratio", "limit", "reference", "met"} <= set(target)
    # the human report: tables, ratios and the targets section
    assert "derive (ns)" in proc.stdout and "Targets" in proc.stdout
    assert "]" in proc.stderr  # progress bar


def test_benchmarks_run_py_is_the_same_implementation(tmp_path):
    path = tmp_path / "b.json"
    proc = run_cli("--smoke", "--only", "derive,cache", "--json", str(path),
                   script=[str(ROOT / "benchmarks" / "run.py")])
    assert_clean(proc)
    result = json.loads(path.read_text())
    assert {r["group"] for r in result["results"]} == {"derive", "alloc", "cache"}


def test_bench_rejects_unknown_groups():
    proc = run_cli("bench", "--smoke", "--only", "derive,bogus")
    assert proc.returncode == 2
    assert "bogus" in proc.stderr


def test_bench_unknown_device_is_a_message_not_a_traceback():
    proc = run_cli("bench", "--smoke", "--device", "nosuch:3")
    assert proc.returncode == 2
    assert proc.stderr.startswith("gpuarrays bench: unknown or unavailable device 'nosuch:3'")
    assert "cpu:0" in proc.stderr and "Traceback" not in proc.stderr


def _only_help(columns: int, monkeypatch, capsys) -> list[str]:
    """The lines of ``--only``'s entry in ``gpuarrays bench --help`` at ``columns`` wide."""
    from gpuarrays.cli import main

    monkeypatch.setenv("COLUMNS", str(columns))  # argparse's width: COLUMNS - 2
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    lines = text[text.index("--only GROUPS"):].splitlines()
    assert all(len(line) <= columns - 2 for line in lines), text
    return lines


@pytest.mark.parametrize("columns", [40, 60, 72, 80, 100, 120])
def test_bench_help_never_breaks_a_group_name(columns, monkeypatch, capsys):
    # Regression: "derive,alloc,...,pool-trace" was one word to argparse and wrapped
    # mid-name at 80 and 60 columns ("d / lpack", "pool- / trace").
    lines = _only_help(columns, monkeypatch, capsys)
    for name in bench.group_names():
        pattern = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
        assert any(pattern.search(line) for line in lines), (name, lines)
    assert not any(line.rstrip().endswith("-") for line in lines), lines


def test_bench_help_lists_every_group_it_accepts():
    assert set(bench.group_names()) == GROUPS - {"compute bandwidth"}
    proc = run_cli("bench", "--help", env={"COLUMNS": "60"})
    assert_clean(proc)
    assert "pool-trace" in proc.stdout and "n/a" in proc.stdout


def test_bench_runs_on_every_device(device):
    """In-process, smoke settings: every group runs on every back-end, and the
    fragmentation group really fills the pool with free blocks."""
    result = bench.run(device, bench.Settings.smoke())
    assert result["device"] == str(device)
    groups = {r["group"] for r in result["results"]}
    assert groups == GROUPS
    frag = next(r for r in result["results"] if r["group"] == "fragmentation")
    assert frag["pool_free_blocks"]["100"] >= 100
    copy = next(r for r in result["results"] if r["group"] == "copy")
    assert all(v > 0 for v in copy["values"].values())
    if "host" in device.kinds:
        assert "host kind->device (copyto)" in copy["values"]
    report = bench.format_report(result)
    assert str(device) in report and "fragmentation" in report
    programs = [r for r in result["results"] if r["group"] == "programs"]
    assert [r["program"] for r in programs] == PROGRAMS
    assert not [r["disagrees"] for r in programs if "disagrees" in r]  # same answers as NumPy
    if device.backend == "opencl":
        alloc = next(r for r in result["results"] if r["group"] == "alloc")
        assert alloc["values"]["raw SVM"] > 0 and alloc["values"]["pyopencl.array"] > 0
    json.dumps(result)  # machine-readable


def test_bench_programs_smoke(tmp_path):
    # The whole-program group (cli/bench_programs.py): every program runs under NumPy,
    # PyTorch and gpuarrays, agrees with NumPy, and is reported as a ratio to NumPy's time.
    path = tmp_path / "p.json"
    proc = run_cli("bench", "--only", "programs", "--smoke", "--device", "cpu:0", "--json",
                   str(path), timeout=60)
    assert_clean(proc)
    result = json.loads(path.read_text())
    rows = result["results"]
    assert [r["program"] for r in rows] == PROGRAMS
    assert {r["group"] for r in rows} == {"programs"}
    assert not [r["disagrees"] for r in rows if "disagrees" in r]
    for row in rows:
        assert row["values"]["numpy"] > 0 and row["values"]["gpuarrays"] > 0
        assert ("gpuarrays uncached" in row["values"]) == row["cached"]  # the loops
    targets = {t["name"]: t for t in result["targets"]}
    assert list(targets) == [f"program: {name}" for name in PROGRAMS]
    assert all(t["limit"] == 1.1 and t["ratio"] > 0 for t in targets.values())
    out = proc.stdout
    header = out[out.index("programs (ms)"):].splitlines()[0].split()
    assert header[-2:] == ["gpuarrays/numpy", "torch/numpy"]
    assert "checked against NumPy's" in out and "DISAGREES" not in out


def test_bench_creation_smoke(device):
    # The creation group (cli/bench_creation.py): every form at each size, with its ratio to
    # ga.empty, and the targets of issue 32 item 3 at 100 elements (figures not checked).
    from gpuarrays.cli.bench_creation import FORMS, SIZES

    result = bench.run(device, bench.Settings.smoke(), groups=("creation",))
    rows = result["results"]
    assert [r["name"] for r in rows] == [f"{f}, n = {n}" for n in SIZES for f in FORMS]
    for row in rows:
        assert row["group"] == "creation" and row["unit"] == "us"
        assert row["values"]["gpuarrays"] > 0 and row["values"]["numpy"] > 0
        assert row["values"]["x ga.empty"] > 0
    forms = [f for f in FORMS if f != "empty"]
    cpu = device.backend == "cpu"
    refs = ["ga.empty", "torch"] if cpu and result["versions"]["torch"] else ["ga.empty"]
    got = [(t["name"], t["reference"], t["limit"]) for t in result["targets"]]
    assert got == [(f"creation {f}, n = 100", ref, {"ga.empty": 2.0 if cpu else 8.0,
                                                    "torch": 1.0}[ref])
                   for f in forms for ref in refs]
    report = bench.format_report(result)
    assert "creation (us)" in report and "x ga.empty" in report
    assert "creation zeros, n = 100" in report


def test_bench_measure_is_a_per_operation_median():
    settings = bench.Settings(repeat=3, target_ns=200_000)
    slow = bench.measure("sum(r)", {"r": range(2000)}, settings)
    fast = bench.measure("sum(r)", {"r": range(20)}, settings)
    assert 0 < fast < slow


# plot --------------------------------------------------------------------------------

def test_plot_draws_a_dumped_snapshot(tmp_path, device):
    ga.memory_history.start()
    try:
        a = ga.empty((1000,), np.float32, device=device)
        b = ga.empty((5000,), np.float32, device=device)
        a.free()
        b.free()
    finally:
        ga.memory_history.stop()
    snap = tmp_path / "snap.json"
    ga.memory_history.dump(snap)
    png = tmp_path / "out.png"
    proc = run_cli("plot", str(snap), "-o", str(png))
    assert_clean(proc)
    assert png.read_bytes()[:8] == PNG_MAGIC


def test_plot_reports_a_file_that_is_not_a_snapshot(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    proc = run_cli("plot", str(bad), "-o", str(tmp_path / "x.png"))
    assert proc.returncode == 1
    assert "not a JSON snapshot" in proc.stderr and "Traceback" not in proc.stderr
    bad.write_text('{"nothing": 1}')
    proc = run_cli("plot", str(bad), "-o", str(tmp_path / "x.png"))
    assert proc.returncode == 1 and "'events' list" in proc.stderr
    proc = run_cli("plot", str(tmp_path / "missing.json"), "-o", str(tmp_path / "x.png"))
    assert proc.returncode == 1 and "cannot read" in proc.stderr


@pytest.mark.parametrize("command", ["demo", "bench", "plot"])
def test_help_of_every_subcommand(command):
    proc = run_cli(command, "--help")
    assert_clean(proc)
    assert f"usage: gpuarrays {command}" in proc.stdout


# Without the optional libraries --------------------------------------------------------------
# Each subcommand run in a fresh interpreter where importing matplotlib / torch fails exactly as
# it does when they are not installed (sys.modules[name] = None makes the import raise).

def _run_without(blocked: tuple[str, ...], argv: list[str], tmp_path):
    code = ("import sys\n"
            + "".join(f"sys.modules[{name!r}] = None\n" for name in blocked)
            + "from gpuarrays.cli import main\n"
            + f"sys.exit(main({argv!r}))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "src")] + [p for p in sys.path if p]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)


NO_PLOT = ("matplotlib", "matplotlib.figure")
NO_TORCH = ("torch",)


def test_demo_plot_without_matplotlib_refuses_before_any_work(tmp_path):
    # Regression: the demo ran to its end and then died with a two-exception traceback.
    out = tmp_path / "p.png"
    proc = _run_without(NO_PLOT, ["demo", "--device", "cpu:0", "--iterations", "1",
                                  "--plot", str(out)], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ('gpuarrays demo: --plot needs matplotlib, which is not '
                                   'installed; install it with: pip install "gpuarrays[plot]"')
    assert proc.stdout == "" and not out.exists()  # nothing ran


def test_demo_without_matplotlib_runs_when_no_picture_is_asked(tmp_path):
    proc = _run_without(NO_PLOT + NO_TORCH, ["demo", "--device", "cpu:0", "--iterations", "2"],
                        tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "with cache" in proc.stdout


def test_plot_without_matplotlib_says_so_once(tmp_path):
    # Regression: the install hint was printed twice.
    snap = tmp_path / "s.json"
    snap.write_text(json.dumps({"events": []}), encoding="utf-8")
    proc = _run_without(NO_PLOT, ["plot", str(snap), "-o", str(tmp_path / "t.png")], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("gpuarrays[plot]") == 1 and len(proc.stderr.splitlines()) == 1
    assert "Traceback" not in proc.stderr and not (tmp_path / "t.png").exists()


def test_bench_without_torch_runs_and_marks_its_columns(tmp_path):
    # Regression: bench refused to start (exit 2) without PyTorch, an optional comparison.
    path = tmp_path / "b.json"
    proc = _run_without(NO_TORCH, ["bench", "--device", "cpu:0", "--smoke", "--only",
                                   "derive,alloc,dlpack,compute,sort", "--json", str(path)],
                        tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    out = proc.stdout
    assert ('torch not installed: PyTorch\'s columns read n/a and the targets against it are '
            'not checked (pip install "gpuarrays[bench]")') in out
    # under each table with a torch column: derive, alloc, dlpack, compute (two), sort
    assert out.count("(n/a: torch not installed)") == 6
    derive = out[out.index("derive (ns)"):].splitlines()
    header, first = derive[0].split(), derive[1].split()
    assert header[-2:] == ["torch", "gpuarrays/torch"] and first[-2:] == ["n/a", "n/a"]
    compute = out[out.index("compute (ns)"):].splitlines()[:2]
    assert "torch" in compute[0].split() and "n/a" in compute[1].split()
    result = json.loads(path.read_text())
    assert result["unavailable"] == {"torch": "torch not installed"}
    assert result["versions"]["torch"] is None
    assert not any(t["reference"].startswith("torch") for t in result["targets"])
    rows = {r["name"]: r for r in result["results"]}
    assert rows["a[1:]"]["values"]["torch"] is None and rows["a[1:]"]["values"]["numpy"] > 0


def test_bench_programs_without_torch(tmp_path):
    proc = _run_without(NO_TORCH, ["bench", "--device", "cpu:0", "--smoke", "--only",
                                   "programs"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count("(n/a: torch not installed)") == 1
    rows = out[out.index("programs (ms)"):].splitlines()
    assert rows[1].split()[-1] == "n/a" and "DISAGREES" not in out


@pytest.mark.skipif("opencl:0" not in {str(d) for d in ga.devices()},
                    reason="no OpenCL device (pip install \"gpuarrays[opencl]\")")
def test_bench_without_mako_runs_on_opencl(tmp_path):
    # Regression: without Mako, pyopencl.array's sum (and pyopencl.scan, RadixSort) raised
    # ImportError in the middle of the reduce group.  (No linalg: its own group's test.)
    proc = _run_without(NO_TORCH + ("mako", "mako.template"),
                        ["bench", "--device", "opencl:0", "--smoke", "--only", "reduce,sort"],
                        tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    out = proc.stdout
    assert "mako not installed: pyopencl's reductions, scans and RadixSort need it" in out
    assert out.count("(n/a: mako not installed)") == 2
    sort = out[out.index("sort (ms)"):].splitlines()[:2]
    assert "RadixSort" in sort[0] and "n/a" in sort[1].split()


def test_info_without_optional_libraries(tmp_path):
    proc = _run_without(NO_PLOT + NO_TORCH, ["info"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "cpu:0" in proc.stdout


# Regression: the compute layer imported the OpenCL back-end's module to install the disk
# cache, so with that module unimportable (no device back-end: the sanitizer run of CI) the
# whole package failed to import.  Only NumPy is required.
NO_DEVICE_BACKENDS = ("gpuarrays.backends.opencl", "gpuarrays.backends.cuda", "pyopencl",
                      "cuda", "cuda.bindings")


def test_cpu_works_with_no_device_back_end_importable(tmp_path):
    proc = _run_without(NO_DEVICE_BACKENDS, ["demo", "--device", "cpu:0", "--iterations", "1"],
                        tmp_path)
    assert proc.returncode == 0, proc.stderr
    code = ("import sys\n"
            + "".join(f"sys.modules[{name!r}] = None\n" for name in NO_DEVICE_BACKENDS)
            + "import numpy as np, gpuarrays as ga\n"
            "f = ga.fuse(lambda x, y: ga.sum(x * y + 1.0))\n"
            "x = ga.asarray(np.arange(5.0))\n"
            "print([str(d) for d in ga.devices()], float(f(x, x)))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src")] + [p for p in sys.path if p]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["['cpu:0']", "35.0"]


@pytest.mark.parametrize("command", ["", "info", "demo", "bench", "plot"])
def test_help_speaks_to_users(command):
    argv = [command, "--help"] if command else ["--help"]
    proc = subprocess.run([sys.executable, "-m", "gpuarrays", *argv], capture_output=True,
                          text=True, timeout=120, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "``" not in text and ":func:" not in text and ":class:" not in text
    assert "SP" "EC" not in text  # no outside document (spelt apart for the repository grep)
    assert "design.md" not in text and "ga." not in text
