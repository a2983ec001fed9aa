"""`python -m bench.report` (`make report`): bench/REPORT.md and its pictures, made from bench/results/.

REPORT.md is made whole, never edited by hand: one line per goal of bench/goals.py with its latest
figure (per point: a cluster size, a rate) from the runs on the local cluster's default Kubernetes or
without an apiserver, the goal, the verdict and the run, linked to its report under bench/runs/; then
the pictures (bench/report_figures.py), the soaks of taintkeeper and the built-ins on the same faults side by
side (bench/report_comparison.py) and an index of every run's report, by day.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import report_comparison as comparison
from bench.goals import GOALS, HEADLINE_KUBERNETES, NO_RUN, Goal, judged, shown
from bench.report_figures import FIGURES, draw_figures
from bench.results import BENCH, Measured, Run, load_runs

REPORT = BENCH / "REPORT.md"
FIGURE_DIRECTORY = BENCH / "figures"
INTRO = f"""\
# Benchmarks: where taintkeeper stands

<!-- Made by `make report` (bench/report.py) from bench/results/*.json: change those, not this file. -->

Each goal's latest figure on this machine (2 vCPUs shared with the rig; a ratio compares taintkeeper with the
counterpart run beside it in the same run), on Kubernetes {HEADLINE_KUBERNETES} where a cluster is involved. A verdict
is *on the line* when the figure, as rounded, could lie either side of the goal."""


@dataclass(frozen=True)
class Latest:
    """A goal's latest figure at one of its points, and the run it came from."""

    at: str
    measured: Measured
    run: Run


def in_headline(run: Run) -> bool:
    return run.kubernetes in (None, HEADLINE_KUBERNETES)


def latest(goal: Goal, runs: Sequence[Run]) -> list[Latest]:
    """The newest figure at each of `goal`'s points, in the goal's order (a point no headline run
    measured is left out); `runs` oldest first."""
    found: dict[str, Latest] = {}
    for run in runs:
        if in_headline(run):
            for entry in run.measured:
                if entry.goal == goal.key:
                    found[entry.at] = Latest(entry.at, entry, run)
    return [found[at] for at in goal.points if at in found]


def _where(at: str) -> str:
    return f" ({at})" if at else ""


def headline_row(goal: Goal, runs: Sequence[Run]) -> str:
    figures = latest(goal, runs)
    if not figures:
        return f"| {goal.name} | - | {goal.target} | {NO_RUN} | - |"
    today = "; ".join(shown(goal, f.measured.figure) + _where(f.at) for f in figures)
    verdicts = [judged(goal, f.measured.figure, f.measured.verdict) for f in figures]
    verdict = (
        verdicts[0]
        if len(set(verdicts)) == 1
        else "; ".join(v + _where(f.at) for v, f in zip(verdicts, figures, strict=True))
    )
    sources = {f.run.name: f.run for f in figures}.values()
    links = ", ".join(f"[{run.date}]({run.report})" for run in sources)
    return f"| {goal.name} | {today} | {goal.target} | {verdict} | {links} |"


def index_lines(runs: Sequence[Run]) -> list[str]:
    """One line per day: each report of that day, linked, named by the runs it holds."""
    days: dict[str, dict[str, list[str]]] = {}
    for run in runs:
        days.setdefault(run.date, {}).setdefault(run.report, []).append(run.title)
    return [
        f"- {day}: " + " · ".join(f"[{'; '.join(titles)}]({report})" for report, titles in reports.items())
        for day, reports in days.items()
    ]


def render(runs: Sequence[Run]) -> str:
    """REPORT.md's text."""
    pictures = [f"![{figure.caption}](figures/{figure.name}.svg)" for figure in FIGURES]
    return "\n".join(
        [
            INTRO,
            "",
            "| goal | today | target | verdict | run |",
            "|---|---|---|---|---|",
            *(headline_row(goal, runs) for goal in GOALS),
            "",
            "\n\n".join(pictures),
            "",
            *comparison.lines(runs),
            "## Runs",
            "",
            "Each run's report as it was written (other Kubernetes versions' runs too), by day, in the order they "
            "were reported:",
            "",
            *index_lines(runs),
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.split("\n")[0])
    parser.add_argument("--report", type=Path, default=REPORT, help="where to write the report (%(default)s)")
    parser.add_argument("--figures", type=Path, default=FIGURE_DIRECTORY, help="where to draw (%(default)s)")
    args = parser.parse_args(argv)
    runs = load_runs()
    args.report.write_text(render(runs))
    for path in draw_figures(runs, args.figures):
        print(f"drew {path}")
    print(f"wrote {args.report} from {len(runs)} runs")


if __name__ == "__main__":
    main()
