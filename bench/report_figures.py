"""bench/REPORT.md's pictures (SVG, matplotlib), drawn from the runs' result files.

Each picture's data (the figures as the runs state them) is picked here from the runs, without
matplotlib, and written into the SVG as its description (JSON), so a test can tell a stale picture
from the data alone:

- envelope: the controller's steady CPU and RSS beside kube-controller-manager's by cluster size,
  the latest run of each size on each Kubernetes version;
- soak: each 60-minute soak's faults, evictions checked, violations and seconds without a leader,
  taintkeeper's and the built-ins';
- webhook: each webhook benchmark's throughput (median of the paired slices) and p99 at 500 req/s,
  taintkeeper beside its peers.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.results import Run, number
from hack.timeline_svg import ensure_matplotlib

TAINTKEEPER, KCM = "taintkeeper", "kube-controller-manager"
COLOURS = {TAINTKEEPER: "#1565c0", KCM: "#9e9e9e", "built-ins": "#9e9e9e"}
SERVER_NAMES = {
    "ours": "taintkeeper",
    "static": "constant-answer app",
    "kopf": "kopf",
    "ours-plain": "taintkeeper,\nfast paths off",
}
RUN_COLOURS = ("#90caf9", "#1565c0", "#0d47a1")


def envelope_data(runs: Sequence[Run]) -> dict[str, Any]:
    """{version: {controller: {nodes: {cpu, rss, run}}}}: the newest row of each (version, controller,
    size); kube-controller-manager's rows whatever its name's version suffix, baselines (taintkeeper@REV)
    left out."""
    data: dict[str, Any] = {}
    for run in runs:
        for row in run.data.get("envelope", []):
            controller = KCM if row["controller"].startswith(KCM) else row["controller"]
            if controller not in (TAINTKEEPER, KCM) or run.kubernetes is None:
                continue
            by_size = data.setdefault(run.kubernetes, {}).setdefault(controller, {})
            by_size[str(row["nodes"])] = {
                "steady_cpu_percent": row["steady_cpu_percent"],
                "rss_mb": row["rss_mb"],
                "run": run.name,
            }
    return {version: data[version] for version in sorted(data, reverse=True)}


def soak_data(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Each 60-minute soak, oldest first, with the figures of its latest judgement."""
    return [
        {
            "run": run.name,
            "label": ("" if soak["controller"] == TAINTKEEPER else "built-ins, ")
            + f"seed {soak['seed']}, {run.kubernetes}",
            "controller": soak["controller"],
            "faults": soak["faults"],
            "evictions_checked": soak["evictions_checked"],
            "violations": soak["violations"],
            "no_leader_s": soak["no_leader_s"],
        }
        for run in runs
        if (soak := run.data.get("soak")) and soak["minutes"] == 60
    ]


def webhook_data(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Each webhook benchmark, oldest first: per server, its paired-slice median and p99 at 500 req/s."""
    return [
        {
            "run": run.name,
            "label": f"{run.date} ({bench['machine']})",
            "servers": {
                server["server"]: {
                    "paired_median_rps": server["paired_median_rps"],
                    "p99_at_500_ms": server["p99_at_500_ms"],
                }
                for server in bench["servers"]
            },
        }
        for run in runs
        if (bench := run.data.get("webhook"))
    ]


def _draw_envelope(data: dict[str, Any], plt: Any) -> Any:
    metrics = (("steady_cpu_percent", "steady CPU, % of a core"), ("rss_mb", "RSS, MB"))
    figure, grid = plt.subplots(len(data), len(metrics), figsize=(10, 2.6 * len(data) + 0.6), squeeze=False)
    for axes_row, (version, controllers) in zip(grid, data.items(), strict=True):
        for axes, (key, label) in zip(axes_row, metrics, strict=True):
            for controller, sizes in controllers.items():
                nodes = sorted(sizes, key=int)
                stated = [sizes[n][key] for n in nodes]
                axes.plot(
                    [int(n) for n in nodes],
                    [number(text) for text in stated],
                    marker="o",
                    color=COLOURS[controller],
                    label=controller,
                )
                for n, text in zip(nodes, stated, strict=True):
                    axes.annotate(
                        text, (int(n), number(text)), textcoords="offset points", xytext=(0, 5), ha="center", fontsize=7
                    )
            axes.set_xticks([1000, 2000, 5000], ["1,000", "2,000", "5,000"])
            axes.set_xlim(300, 5700)
            highest = max(number(s[key]) or 0.0 for c in data.values() for sizes in c.values() for s in sizes.values())
            axes.set_ylim(0, highest * 1.2)  # each column on one scale, both versions
            axes.set_title(f"{label}, Kubernetes {version}", fontsize=9)
            axes.grid(alpha=0.3)
        axes_row[0].legend(fontsize=7, loc="upper left")
    for axes in grid[-1]:
        axes.set_xlabel("nodes (30 pods each)")
    figure.suptitle(
        "The controller beside kube-controller-manager at 1,000-5,000 nodes (the latest run of each size)", fontsize=10
    )
    return figure


def _draw_soak(data: list[dict[str, Any]], plt: Any) -> Any:
    panels = (
        ("faults", "faults injected"),
        ("evictions_checked", "evictions checked"),
        ("violations", "violations"),
        ("no_leader_s", "seconds without a leader"),
    )
    figure, axes_row = plt.subplots(1, len(panels), figsize=(12, 0.32 * len(data) + 1.6), sharey=True)
    rows = list(range(len(data)))[::-1]
    colours = [COLOURS.get(soak["controller"], COLOURS[KCM]) for soak in data]
    for axes, (key, title) in zip(axes_row, panels, strict=True):
        stated = [soak[key] for soak in data]
        values = [number(text) or 0.0 for text in stated]
        axes.barh(rows, values, color=colours)
        if key == "violations":  # from none to thousands
            axes.set_xscale("symlog", linthresh=1)
            axes.set_xticks([0, 1, 10, 100, 1000], ["0", "1", "10", "100", "1,000"])
        for y, value, text in zip(rows, values, stated, strict=True):
            axes.text(value, y, f" {text}" if text is not None else " not stated", va="center", fontsize=7)
        axes.set_title(title, fontsize=9)
        axes.grid(axis="x", alpha=0.3)
        axes.margins(x=0.25)
    axes_row[0].set_yticks(rows, [soak["label"] for soak in data], fontsize=7)
    figure.suptitle(
        "Each 60-minute chaos soak, oldest at the top (blue: taintkeeper; grey: the built-ins)", fontsize=10
    )
    return figure


def _draw_webhook(data: list[dict[str, Any]], plt: Any) -> Any:
    servers = [s for s in SERVER_NAMES if any(s in run["servers"] for run in data)]
    figure, (rate, p99) = plt.subplots(1, 2, figsize=(10, 3.8))
    width = 0.8 / max(len(data), 1)
    for axes, key, title in (
        (rate, "paired_median_rps", "requests/s (median of the paired slices)"),
        (p99, "p99_at_500_ms", "p99 at 500 req/s, ms"),
    ):
        top = 0.0
        for index, run in enumerate(data):
            shifted = (index - (len(data) - 1) / 2) * width
            present = [(i, run["servers"][s][key]) for i, s in enumerate(servers) if s in run["servers"]]
            xs = [i + shifted for i, _ in present]
            values = [number(text) or 0.0 for _, text in present]
            axes.bar(xs, values, width, color=RUN_COLOURS[index % len(RUN_COLOURS)], label=run["label"])
            for x, value, (_, text) in zip(xs, values, present, strict=True):
                axes.text(x, value, text, ha="center", va="bottom", fontsize=7)
            top = max([top, *values])
        axes.set_ylim(0, top * 1.3)
        axes.set_xticks(range(len(servers)), [SERVER_NAMES[s] for s in servers], fontsize=8)
        axes.set_title(title, fontsize=9)
        axes.grid(axis="y", alpha=0.3)
    rate.legend(fontsize=7, loc="upper right")
    figure.suptitle("The webhook beside its peers, in each run of the webhook benchmark", fontsize=10)
    return figure


@dataclass(frozen=True)
class Picture:
    name: str  # bench/figures/NAME.svg
    caption: str
    data: Callable[[Sequence[Run]], Any]
    draw: Callable[[Any, Any], Any]  # (data, pyplot) -> a matplotlib figure


FIGURES = (
    Picture(
        "envelope",
        "The controller's steady CPU and RSS beside kube-controller-manager's, by cluster size",
        envelope_data,
        _draw_envelope,
    ),
    Picture(
        "soak",
        "Each 60-minute soak: faults, evictions checked, violations, time without a leader",
        soak_data,
        _draw_soak,
    ),
    Picture("webhook", "The webhook's throughput and p99 latency beside its peers", webhook_data, _draw_webhook),
)

DESCRIPTION = re.compile(r"<dc:description>(.*?)</dc:description>", re.S)


def embedded_data(svg: str) -> Any:
    """The data a picture was drawn from, as written into it."""
    found = DESCRIPTION.search(svg)
    if found is None:
        raise ValueError("the picture holds no data")
    return json.loads(html.unescape(found.group(1)))


def draw_figures(runs: Sequence[Run], directory: Path) -> list[Path]:
    ensure_matplotlib()
    import matplotlib

    matplotlib.use("svg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text
    matplotlib.rcParams["svg.hashsalt"] = "bench/report_figures.py"  # the same data draws the same file
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for picture in FIGURES:
        data = picture.data(runs)
        figure = picture.draw(data, plt)
        figure.tight_layout()
        path = directory / f"{picture.name}.svg"
        metadata = {"Date": None, "Creator": None, "Description": json.dumps(data, sort_keys=True)}
        figure.savefig(path, format="svg", metadata=metadata)
        plt.close(figure)
        paths.append(path)
    return paths
