"""Memory timelines: used memory over time, stacked by allocation site.

``plot_snapshot(ga.memory_history.snapshot(), "timeline.png")`` replays the
snapshot's events (``alloc`` adds a block, ``free`` removes it, ``reset``
drops every block of the device; ``reuse`` of a cached buffer changes
nothing, the buffer was already counted) and draws, per device, the bytes in
use over time as a stacked area: one band per allocation site (the first
frame of the allocation's stack), the largest eight by their peak, the rest
as "other".  Memory that was already in use when recording started is not
part of the snapshot and is not drawn.

Matplotlib is imported only here, and only when a picture is drawn (the
``plot`` extra: ``pip install 'gpuarrays[plot]'``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["plot_snapshot", "timeline"]

UNKNOWN_SITE = "(site not recorded)"
_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1))


def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError(
            "plotting a memory timeline needs matplotlib, which is not installed; "
            "install the 'plot' extra: pip install 'gpuarrays[plot]'") from e
    return Figure


def _runs(snapshot) -> list[tuple[str | None, list[dict]]]:
    """``[(run label or None, events)]`` from one snapshot, a list of them, or ``{"runs": ...}``."""
    if isinstance(snapshot, dict) and "runs" in snapshot:
        items = snapshot["runs"]
    elif isinstance(snapshot, (list, tuple)):
        items = snapshot
    elif isinstance(snapshot, dict):
        items = [snapshot]
    else:
        raise TypeError("plot_snapshot expects a ga.memory_history.snapshot() dict (or a list "
                        f"of them), got {type(snapshot).__name__}")
    runs = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise TypeError(f"run {i} of the snapshot is a {type(item).__name__}, expected a "
                            "snapshot dict with an 'events' list")
        inner = item.get("snapshot", item)
        events = inner.get("events") if isinstance(inner, dict) else None
        if not isinstance(events, list):
            raise ValueError(f"run {i} of the snapshot has no 'events' list; expected the dict "
                             "returned by ga.memory_history.snapshot()")
        label = item.get("label", item.get("name"))
        if label is None and len(items) > 1:
            label = f"run {i + 1}"
        runs.append((label, events))
    return runs


def _site(event: dict) -> str:
    stack = event.get("stack")
    if stack:
        return str(stack[0])
    return UNKNOWN_SITE


def timeline(events: Iterable[dict], device: str, top: int = 8):
    """Replay the events of one device: ``(times, {site: bytes per time}, peak, peak_time)``.

    The sites kept are the ``top`` largest by their own peak; the others are
    summed under ``"other"``.  Values are in bytes, one per event (a step
    function: each value holds until the next time).
    """
    events = [e for e in events if e.get("device") == device]
    # First pass: each site's own peak, to choose which sites get a band.
    live: dict[int, tuple[int, str]] = {}
    per_site: dict[str, int] = {}
    site_peak: dict[str, int] = {}
    for e in events:
        _apply(e, live, per_site, site_peak)
    ranked = sorted(site_peak, key=lambda s: (-site_peak[s], s))
    shown = ranked if len(ranked) <= top + 1 else ranked[:top]  # never 'other' for one site
    index = {s: i for i, s in enumerate(shown)}
    has_other = len(ranked) > len(shown)
    n_series = len(shown) + (1 if has_other else 0)
    # Second pass: the stacked values after every event.
    live.clear()
    per_site.clear()
    current = [0] * n_series
    times: list[float] = []
    values: list[list[int]] = [[] for _ in range(n_series)]
    total = peak = 0
    peak_time = 0.0
    for e in events:
        changes = _apply(e, live, per_site, None)
        for site, change in changes:
            current[index.get(site, n_series - 1)] += change
            total += change
        times.append(float(e.get("time", 0.0)))
        for i in range(n_series):
            values[i].append(current[i])
        if total > peak:
            peak, peak_time = total, times[-1]
    labels = shown + (["other"] if has_other else [])
    return times, dict(zip(labels, values, strict=True)), peak, peak_time


def _apply(event: dict, live: dict, per_site: dict, site_peak: dict | None) -> list:
    """Update ``live``/``per_site`` for one event; returns ``[(site, byte change)]``."""
    action = event.get("action")
    changes = []
    if action == "alloc":
        address, size, site = event.get("address"), int(event.get("size", 0)), _site(event)
        old = live.pop(address, None)
        if old is not None:  # its free was not recorded (ring buffer): replace it
            changes.append((old[1], -old[0]))
        live[address] = (size, site)
        changes.append((site, size))
    elif action == "free":
        old = live.pop(event.get("address"), None)
        if old is not None:  # frees of blocks allocated before recording are ignored
            changes.append((old[1], -old[0]))
    elif action == "reset":
        changes = [(site, -size) for size, site in live.values()]
        live.clear()
    for site, change in changes:
        now = per_site[site] = per_site.get(site, 0) + change
        if site_peak is not None and now > site_peak.get(site, 0):
            site_peak[site] = now
    return changes


def _unit(nbytes: int) -> tuple[str, int]:
    for name, scale in _UNITS:
        if nbytes >= scale:
            return name, scale
    return "B", 1


def _format(nbytes: int) -> str:
    name, scale = _unit(nbytes)
    return f"{nbytes} B" if scale == 1 else f"{nbytes / scale:.1f} {name}"


def _short(site: str, width: int = 60) -> str:
    return site if len(site) <= width else "…" + site[-(width - 1):]


def plot_snapshot(snapshot, path: str | os.PathLike, title: str | None = None, *,
                  top: int = 8, dpi: int = 110) -> None:
    """Draw used memory over time, stacked by allocation site, and save it to ``path``.

    ``snapshot`` is ``ga.memory_history.snapshot()`` (or the JSON written by
    ``ga.memory_history.dump``, loaded), a list of such snapshots (one run
    each), or ``{"runs": [{"label": ..., "events": [...]}, ...]}``.  Each
    (run, device) gets its own panel, titled with the device and its peak.
    The file format follows the extension of ``path`` (PNG, SVG, PDF ...).

    Raises ``ImportError`` naming the ``plot`` extra when matplotlib is
    missing, ``TypeError``/``ValueError`` for something that is not a snapshot.
    """
    if not isinstance(top, int) or top < 1:
        raise ValueError(f"top must be a positive int, got {top!r}")
    runs = _runs(snapshot)
    Figure = _figure_class()
    panels = []
    for label, events in runs:
        devices = list(dict.fromkeys(str(e.get("device")) for e in events
                                     if e.get("action") in ("alloc", "free", "reset")))
        for device in devices:
            panels.append((label, device, timeline(events, device, top)))
    legend_width = 4.2
    fig = Figure(figsize=(7.5 + legend_width, 1.2 + 3.3 * max(1, len(panels))),
                 layout="constrained")
    if title:
        fig.suptitle(title, fontsize=13)
    if not panels:
        ax = fig.add_subplot()
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no allocation events in this snapshot\n(was ga.memory_history "
                "started before allocating?)", ha="center", va="center", fontsize=12)
        fig.savefig(path, dpi=dpi)
        return
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    palette = [f"C{i}" for i in range(10)]
    for ax, (label, device, (times, series, peak, peak_time)) in zip(axes, panels,
                                                                       strict=True):
        unit, scale = _unit(peak)
        names = list(series)
        colors = [palette[i % len(palette)] if name != "other" else "0.72"
                  for i, name in enumerate(names)]
        if times:
            # Start from zero at the first event and hold the last value a little.
            end = times[-1] + max(1e-6, 0.01 * (times[-1] - times[0]))
            xs = [times[0]] + times + [end]
            ys = [[0] + [v / scale for v in series[n]] + [series[n][-1] / scale]
                  for n in names]
            ax.stackplot(xs, ys, labels=[_short(n) for n in names], colors=colors,
                         step="post", linewidth=0)
            ax.set_xlim(xs[0], xs[-1])
        ax.set_ylim(0, max(peak / scale * 1.08, 1e-9))
        if peak:
            ax.axhline(peak / scale, color="0.3", linestyle=":", linewidth=1)
            ax.annotate(f"peak {_format(peak)}", (peak_time, peak / scale),
                        xytext=(4, 3), textcoords="offset points", fontsize=8, color="0.25")
        what = f"{label} — " if label else ""
        ax.set_title(f"{what}memory used on {device} (peak {_format(peak)})", fontsize=11,
                     loc="left")
        ax.set_xlabel("time since recording started (s)")
        ax.set_ylabel(f"used memory ({unit})")
        ax.grid(True, axis="y", alpha=0.3)
        ax.margins(x=0)
        if names:
            handles, labels = ax.get_legend_handles_labels()
            ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      fontsize=8, title="allocation site", title_fontsize=8, frameon=False)
    fig.savefig(path, dpi=dpi)


def block_names(buffers) -> dict[int, str]:
    """``{pool block size: "name / name"}`` for ``(name, nbytes)`` pairs (512 B blocks)."""
    names: dict[int, str] = {}
    for name, nbytes in buffers:
        block = -(-nbytes // 512) * 512
        names[block] = f"{names[block]} / {name}" if block in names else name
    return names


def plot_runs(snapshots: list[tuple[str, dict]], path: str, device, names: dict[int, str],
              title: str) -> None:
    """Draw labelled ``memory_history`` snapshots of one device, one panel each, their
    allocations named by block size (``names``, from :func:`block_names`)."""
    runs = []
    for label, snap in snapshots:
        events = []
        for e in snap["events"]:
            if e["device"] != str(device):
                continue
            if "stack" in e:
                e = {**e, "stack": [names.get(e["size"], f"other ({e['size']} B)")]}
            events.append(e)
        runs.append({"label": label, "events": events})
    plot_snapshot({"runs": runs}, path, title=title)
