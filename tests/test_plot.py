"""Memory timelines: gpuarrays.cli.plot.plot_snapshot and ``gpuarrays plot``."""

from __future__ import annotations

import gc
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import gpuarrays as ga
from gpuarrays.cli.plot import plot_snapshot, timeline

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def png_size(path) -> tuple[int, int]:
    """(width, height) of a PNG file, after checking its signature."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG_MAGIC, head[:8]
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def weights(device):
    return [ga.empty(50_000, dtype=np.float32, device=device) for _ in range(2)]


def temporaries(device, i):
    return ga.empty(1000 * (i + 1), dtype=np.float32, device=device)


@pytest.fixture
def snapshot(device):
    """A real history of a small workload on ``device``."""
    gc.collect()
    ga.memory_history.start()
    try:
        w = weights(device)
        for i in range(20):
            t = temporaries(device, i % 4)
            u = t.copy()
            del t, u
        del w
    finally:
        ga.memory_history.stop()
    snap = ga.memory_history.snapshot()
    ga.memory_history.clear()
    return snap


def test_plot_snapshot_writes_a_png(device, snapshot, tmp_path):
    path = tmp_path / "timeline.png"
    plot_snapshot(snapshot, path, title="a small workload")
    width, height = png_size(path)
    assert 600 <= width <= 3000 and 300 <= height <= 3000
    assert path.stat().st_size > 10_000  # a real drawing, not an empty canvas


def test_plot_snapshot_from_dumped_json(device, snapshot, tmp_path):
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snapshot), encoding="utf-8")
    loaded = json.loads(path.read_text(encoding="utf-8"))
    plot_snapshot(loaded, str(tmp_path / "out.png"))  # str paths, no title
    png_size(tmp_path / "out.png")


def test_several_runs_and_devices_get_one_panel_each(device, snapshot, tmp_path):
    plot_snapshot(snapshot, tmp_path / "one.png")
    plot_snapshot([snapshot, snapshot], tmp_path / "list.png")
    plot_snapshot({"runs": [{"label": "without cache", "events": snapshot["events"]},
                            {"label": "with cache", "snapshot": snapshot}]},
                  tmp_path / "runs.png")
    one = png_size(tmp_path / "one.png")[1]
    assert png_size(tmp_path / "list.png")[1] > 1.7 * one
    assert png_size(tmp_path / "runs.png")[1] > 1.7 * one
    # One snapshot with events of every device: one panel per device.
    ga.memory_history.start()
    try:
        for dev in ga.devices():
            ga.empty(10_000, device=dev).free()
    finally:
        ga.memory_history.stop()
    multi = ga.memory_history.snapshot()
    ga.memory_history.clear()
    plot_snapshot(multi, tmp_path / "devices.png")
    height = png_size(tmp_path / "devices.png")[1]
    if len(ga.devices()) > 1:
        assert height > 1.7 * one


def test_empty_snapshot_still_draws(tmp_path):
    plot_snapshot({"version": 1, "recording": False, "events": []}, tmp_path / "empty.png")
    png_size(tmp_path / "empty.png")


def test_other_formats_follow_the_extension(device, snapshot, tmp_path):
    plot_snapshot(snapshot, tmp_path / "t.svg")
    assert b"<svg" in (tmp_path / "t.svg").read_bytes()[:1000]


@pytest.mark.parametrize("bad, error", [
    (None, TypeError), ("snapshot.json", TypeError), (42, TypeError),
    ({"version": 1}, ValueError), ({"events": "nope"}, ValueError), ([1, 2], TypeError),
])
def test_not_a_snapshot(bad, error, tmp_path):
    with pytest.raises(error, match="snapshot"):
        plot_snapshot(bad, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_missing_matplotlib_names_the_plot_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails
    with pytest.raises(ImportError, match=r"gpuarrays\[plot\]"):
        plot_snapshot({"events": []}, tmp_path / "x.png")


def _event(action, t, address=0, size=0, site=None, device="cpu:0"):
    e = {"action": action, "time": t, "device": device, "size": size, "address": address,
         "kind": "device"}
    if site is not None:
        e["stack"] = [site, "main.py:1 in main"]
    return e


def test_timeline_replays_the_events():
    events = [
        _event("free", 0.0, address=99, size=512),  # allocated before recording: ignored
        _event("alloc", 0.1, 1, 1024, "a.py:1 in f"),
        _event("alloc", 0.2, 2, 4096, "b.py:2 in g"),
        _event("alloc", 0.25, 7, 512, "b.py:2 in g", device="opencl:0"),  # another device
        _event("reuse", 0.3, 2, 4096, "c.py:3 in h"),  # a cache hit: already counted
        _event("alloc", 0.4, 3, 512),  # no stack recorded
        _event("free", 0.5, 2, 4096),
        _event("reset", 0.6),
        _event("alloc", 0.7, 1, 2048, "a.py:1 in f"),  # same address after the reset
    ]
    times, series, peak, peak_time = timeline(events, "cpu:0")
    assert times == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
    assert series["a.py:1 in f"] == [0, 1024, 1024, 1024, 1024, 1024, 0, 2048]
    assert series["b.py:2 in g"] == [0, 0, 4096, 4096, 4096, 0, 0, 0]
    assert series["(site not recorded)"] == [0, 0, 0, 0, 512, 512, 0, 0]
    assert list(series)[0] == "b.py:2 in g"  # the largest site first
    assert (peak, peak_time) == (1024 + 4096 + 512, 0.4)
    totals = [sum(v[i] for v in series.values()) for i in range(len(times))]
    assert max(totals) == peak
    times, series, peak, _ = timeline(events, "opencl:0")
    assert series == {"b.py:2 in g": [512]} and peak == 512


def test_timeline_keeps_the_top_sites_and_sums_the_rest():
    events = [_event("alloc", i / 10, i + 1, 512 * (i + 1), f"s.py:{i} in f") for i in range(12)]
    _, series, peak, _ = timeline(events, "cpu:0", top=8)
    assert list(series)[:8] == [f"s.py:{i} in f" for i in range(11, 3, -1)]
    assert list(series)[-1] == "other"
    assert series["other"][-1] == 512 * (1 + 2 + 3 + 4)
    assert peak == 512 * sum(range(1, 13))
    _, series, _, _ = timeline(events[:9], "cpu:0", top=8)  # one site too many: no "other"
    assert "other" not in series and len(series) == 9


def _cli(*args, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(ROOT, "src")] + [p for p in sys.path if p]))
    return subprocess.run([sys.executable, "-m", "gpuarrays", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=ROOT, **kw)


def test_cli_plot(device, snapshot, tmp_path):
    assert _cli("plot", "--help").returncode == 0
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(snapshot), encoding="utf-8")
    out = tmp_path / "timeline.png"
    result = _cli("plot", str(snap), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert str(out) in result.stdout
    png_size(out)
    bad = tmp_path / "bad.json"
    bad.write_text("not json", encoding="utf-8")
    result = _cli("plot", str(bad), "-o", str(tmp_path / "bad.png"))
    assert result.returncode != 0 and "bad.json" in result.stderr
    assert not (tmp_path / "bad.png").exists()


def test_cli_plot_without_matplotlib_names_the_extra(device, snapshot, tmp_path):
    # Regression: the command caught ImportError only around importing gpuarrays.cli.plot,
    # which imports matplotlib lazily, so a missing matplotlib gave a traceback.
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(snapshot), encoding="utf-8")
    code = ("import sys; sys.modules['matplotlib.figure'] = None\n"
            "from gpuarrays.cli import main\n"
            f"sys.exit(main(['plot', {str(snap)!r}, '-o', {str(tmp_path / 'x.png')!r}]))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(ROOT, "src")] + [p for p in sys.path if p]))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env=env, cwd=ROOT)
    assert result.returncode == 2, result.stderr
    assert "gpuarrays[plot]" in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.count("gpuarrays[plot]") == 1 and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "x.png").exists()
