"""A node failure drawn as a timeline (SVG, with matplotlib: the optional extra `timeline`).

Top to bottom: the node's Ready status as a band, each of its taints as a band, then one bar per pod
from the NoExecute taint that set its deadline to its deletion, its deadline marked with a diamond
(an open bar: the pod tolerates the taint forever, or was still there at the end), and the
recorded events as ticks along the top. Seconds on the x axis count from the record's start.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

from hack.incident import Incident

REQUIREMENT = "matplotlib>=3.8"
READY_COLOURS = {"True": "#2e7d32", "False": "#c62828", "Unknown": "#f9a825"}
TAINT_COLOURS = {"NoExecute": "#c62828", "NoSchedule": "#ef6c00"}
POD_COLOUR, DELETED_COLOUR = "#1565c0", "#616161"


def ensure_matplotlib() -> None:
    """Install the optional extra into this interpreter's environment the first time it is asked for."""
    if importlib.util.find_spec("matplotlib") is None:
        print(f"timeline: installing {REQUIREMENT} (the optional extra `timeline`)", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", REQUIREMENT], check=True)


def draw(incident: Incident, path: Path) -> Path:
    ensure_matplotlib()
    import matplotlib

    matplotlib.use("svg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable, testable
    import matplotlib.pyplot as plt

    rows: list[tuple[str, list[tuple[float, float, str, str]]]] = []  # label, [(start, end, colour, text)]
    origin = incident.start
    rows.append((f"{incident.node} Ready", [(s.start - origin, s.end - origin, READY_COLOURS.get(s.label, "#9e9e9e"),
                                             s.label) for s in incident.ready]))
    for taint in incident.taints:
        key, _, effect = taint.label.rpartition(":")
        rows.append((f"{key.removeprefix('node.kubernetes.io/')}:{effect}",
                     [(taint.start - origin, taint.end - origin, TAINT_COLOURS.get(effect, "#9e9e9e"), "")]))
    pod_rows = len(rows)
    for pod in incident.pods:
        end = (pod.deleted if pod.deleted is not None else incident.end) - origin
        rows.append((f"pod {pod.name}", [(pod.start - origin, end, DELETED_COLOUR if pod.deleted else POD_COLOUR,
                                          "")]))

    figure, axes = plt.subplots(figsize=(11, 0.42 * len(rows) + 1.6))
    for index, (_, spans) in enumerate(rows):
        y = len(rows) - 1 - index
        for start, end, colour, text in spans:
            axes.barh(y, max(end - start, 0.05), left=start, height=0.6, color=colour,
                      alpha=0.55 if index >= pod_rows else 0.8)
            if text:
                axes.text(start + 0.3, y, text, va="center", fontsize=8, color="white")
    for offset, pod in enumerate(incident.pods):
        y = len(rows) - 1 - (pod_rows + offset)
        if pod.deadline is not None:
            axes.plot(pod.deadline - origin, y, marker="D", color="black", markersize=5)
        if pod.deleted is not None:
            axes.plot(pod.deleted - origin, y, marker="x", color="#c62828", markersize=7)
        label = "tolerates forever" if pod.deadline is None else (
            f"deleted {pod.deleted - pod.deadline:+.1f}s from its deadline" if pod.deleted is not None else "")
        if label:
            axes.text((pod.deleted or incident.end) - origin + 0.4, y, label, va="center", fontsize=7)
    _ticks(axes, incident, len(rows))
    axes.set_yticks(range(len(rows)), [label for label, _ in reversed(rows)], fontsize=8)
    axes.set_xlim(0, incident.end - origin)
    axes.set_ylim(-0.7, len(rows) + 0.9)
    axes.set_xlabel("seconds")
    axes.set_title(f"Node failure on {incident.node}: Ready, taints, and each pod from its taint to its deletion "
                   "(diamond: its deadline; x: deleted)", fontsize=9)
    axes.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="svg")
    plt.close(figure)
    return path


def _ticks(axes: Any, incident: Incident, rows: int) -> None:
    for tick in incident.events:
        x = tick.at - incident.start
        axes.axvline(x, ymin=(rows - 0.3) / (rows + 1.6), ymax=(rows + 0.2) / (rows + 1.6), color="#424242",
                     linewidth=1)
        axes.text(x, rows + 0.05, tick.label, rotation=30, fontsize=7, va="bottom", ha="left")
