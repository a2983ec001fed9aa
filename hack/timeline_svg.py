"""A node failure drawn as a timeline (SVG, with matplotlib: the optional extra `timeline`).

For each node, top to bottom: its Ready status as a band, each of its taints as a band, then its
pods, each a bar from the NoExecute taint that set its deadline to its deletion, the deadline
marked with a diamond and the deletion with an x (a bar running to the end: the pod tolerates the
taint forever, or was still there). A node with more pods than fit a row each (a long soak) gets
them packed into shared rows. Events are ticks along the top. Seconds (minutes for a long record)
on the x axis count from the record's start.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hack.incident import Incident, PodBar

REQUIREMENT = "matplotlib>=3.8"
READY_COLOURS = {"True": "#2e7d32", "False": "#c62828", "Unknown": "#f9a825"}
TAINT_COLOURS = {"NoExecute": "#c62828", "NoSchedule": "#ef6c00"}
POD_COLOUR, DELETED_COLOUR, OTHER = "#1565c0", "#616161", "#9e9e9e"
NAMED_PODS = 12  # up to this many pods per node, one labelled row each; more are packed
PACKED_LANES = 8  # a node's packed pods take at most this many rows
LABELLED_EVENTS = 20  # more events than this are ticks without labels


@dataclass(frozen=True)
class Bar:
    start: float
    end: float
    colour: str
    text: str = ""


@dataclass(frozen=True)
class Row:
    label: str
    bars: tuple[Bar, ...]
    pods: tuple[PodBar, ...] = ()  # the pods drawn in this row (their deadlines and deletions marked)
    packed: bool = False


def ensure_matplotlib() -> None:
    """Install the optional extra into this interpreter's environment the first time it is asked for."""
    if importlib.util.find_spec("matplotlib") is None:
        print(f"timeline: installing {REQUIREMENT} (the optional extra `timeline`)", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", REQUIREMENT], check=True)


def rows_of(incident: Incident) -> list[Row]:
    """What is drawn, top to bottom, in seconds from the incident's start."""
    origin, rows = incident.start, []
    for node in incident.nodes:
        rows.append(
            Row(
                f"{node.name} Ready",
                tuple(
                    Bar(s.start - origin, s.end - origin, READY_COLOURS.get(s.label, OTHER), s.label)
                    for s in node.ready
                ),
            )
        )
        by_label: dict[str, list[Bar]] = {}  # one row per taint, a bar for each time it was held
        for taint in node.taints:
            effect = taint.label.rpartition(":")[2]
            by_label.setdefault(taint.label, []).append(
                Bar(taint.start - origin, taint.end - origin, TAINT_COLOURS.get(effect, OTHER))
            )
        rows.extend(Row(label.removeprefix("node.kubernetes.io/"), tuple(bars)) for label, bars in by_label.items())
        pods = [pod for pod in incident.pods if pod.node == node.name]
        if len(pods) <= NAMED_PODS:
            rows.extend(Row(f"pod {pod.name}", (_pod_bar(pod, incident),), (pod,)) for pod in pods)
        else:
            for number, lane in enumerate(_packed(pods, incident)):
                bars = tuple(_pod_bar(pod, incident) for pod in lane)
                rows.append(Row(f"pods on {node.name}" if number == 0 else "", bars, tuple(lane), packed=True))
    return rows


def _pod_bar(pod: PodBar, incident: Incident) -> Bar:
    end = pod.deleted if pod.deleted is not None else incident.end
    return Bar(pod.start - incident.start, end - incident.start, DELETED_COLOUR if pod.deleted else POD_COLOUR)


def _packed(pods: Sequence[PodBar], incident: Incident) -> list[list[PodBar]]:
    """Greedy interval packing: each pod in the first lane free at its start, at most PACKED_LANES lanes."""
    lanes: list[list[PodBar]] = []
    ends: list[float] = []
    for pod in sorted(pods, key=lambda p: p.start):
        end = pod.deleted if pod.deleted is not None else incident.end
        for index, lane_end in enumerate(ends):
            if lane_end <= pod.start:
                lanes[index].append(pod)
                ends[index] = end
                break
        else:
            if len(lanes) < PACKED_LANES:
                lanes.append([pod])
                ends.append(end)
            else:  # a burst (one taint, dozens of pods): overlap in the lane free soonest
                index = ends.index(min(ends))
                lanes[index].append(pod)
                ends[index] = max(ends[index], end)
    return lanes


def draw(incident: Incident, path: Path) -> Path:
    ensure_matplotlib()
    import matplotlib

    matplotlib.use("svg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable, testable
    import matplotlib.pyplot as plt

    rows = rows_of(incident)
    span = incident.end - incident.start
    scale, unit = (60.0, "minutes") if span > 600 else (1.0, "seconds")
    figure, axes = plt.subplots(figsize=(12, 0.32 * len(rows) + 1.8))
    top = len(rows) - 1
    for index, row in enumerate(rows):
        y = top - index
        height = 0.35 if row.packed else 0.6
        for bar in row.bars:
            axes.barh(
                y,
                max(bar.end - bar.start, span / 2000) / scale,
                left=bar.start / scale,
                height=height,
                color=bar.colour,
                alpha=0.6 if row.pods else 0.85,
            )
            if bar.text and (bar.end - bar.start) > span / 25:
                axes.text(bar.start / scale + span / scale / 300, y, bar.text, va="center", fontsize=7, color="white")
        for pod in row.pods:
            _mark(axes, pod, y, incident, scale, labelled=not row.packed)
    _ticks(axes, incident, len(rows), scale)
    axes.set_yticks(range(len(rows)), [row.label for row in reversed(rows)], fontsize=7)
    axes.set_xlim(0, span / scale)
    axes.set_ylim(-0.7, len(rows) + 1.6)
    axes.set_xlabel(unit)
    axes.set_title(
        "Ready, taints, and each pod from its taint to its deletion (diamond: its deadline; x: deleted)", fontsize=9
    )
    axes.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="svg")
    plt.close(figure)
    return path


def _mark(axes: Any, pod: PodBar, y: float, incident: Incident, scale: float, labelled: bool) -> None:
    size = 5 if labelled else 2.5
    if pod.deadline is not None:
        axes.plot((pod.deadline - incident.start) / scale, y, marker="D", color="black", markersize=size)
    if pod.deleted is not None:
        axes.plot((pod.deleted - incident.start) / scale, y, marker="x", color="#c62828", markersize=size + 2)
    if not labelled:
        return
    label = (
        "tolerates forever"
        if pod.deadline is None
        else (f"deleted {pod.deleted - pod.deadline:+.1f}s from its deadline" if pod.deleted is not None else "")
    )
    if label:
        end = pod.deleted if pod.deleted is not None else incident.end
        axes.text(
            (end - incident.start) / scale + (incident.end - incident.start) / scale / 250,
            y,
            label,
            va="center",
            fontsize=7,
        )


def _ticks(axes: Any, incident: Incident, rows: int, scale: float) -> None:
    labelled = len(incident.events) <= LABELLED_EVENTS
    near = (incident.end - incident.start) / scale / 12  # labels closer than this are raised past each other
    last_x, level = -float("inf"), 0
    for tick in sorted(incident.events, key=lambda t: t.at):
        x = (tick.at - incident.start) / scale
        axes.plot([x, x], [rows - 0.4, rows + 0.1], color="#424242", linewidth=1 if labelled else 0.5)
        if labelled:
            level = level + 1 if x - last_x < near else 0
            last_x = x
            axes.text(x, rows + 0.15 + 0.45 * level, tick.label, fontsize=7, va="bottom", ha="left")
