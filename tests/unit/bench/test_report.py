"""bench/report.py: bench/REPORT.md and its pictures are what bench/results/ makes of them.

After a result file changes, `make report` brings REPORT.md and bench/figures/ back in step; these tests
fail until it has. The pictures are checked by the data written into them (no drawing here).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bench.goals import GOALS_BY_KEY
from bench.report import REPORT, latest, render
from bench.report_figures import FIGURES, embedded_data
from bench.results import BENCH, RESULTS, Measured, Run, load_runs, run_of

RUNS = load_runs()
FIRST_SCREEN = 40  # lines: the headline table and the pictures


def test_report_md_is_made_from_the_result_files():
    made, committed = render(RUNS), REPORT.read_text()
    assert committed == made, "bench/REPORT.md is out of date with bench/results/: run `make report`"


@pytest.mark.parametrize("picture", FIGURES, ids=[picture.name for picture in FIGURES])
def test_each_picture_is_drawn_from_the_result_files(picture):
    drawn = embedded_data((BENCH / "figures" / f"{picture.name}.svg").read_text())
    assert drawn == json.loads(json.dumps(picture.data(RUNS))), (
        f"bench/figures/{picture.name}.svg is out of date with bench/results/: run `make report`"
    )


def test_the_table_and_the_pictures_fit_one_screen():
    first_part = REPORT.read_text().split("\n## ", 1)[0]
    assert len(first_part.rstrip("\n").split("\n")) <= FIRST_SCREEN


def test_every_run_report_is_indexed():
    reported = {run.report for run in RUNS}
    orphans = [
        f"runs/{path.name}" for path in sorted((BENCH / "runs").glob("*.md")) if f"runs/{path.name}" not in reported
    ]
    assert not orphans, f"no result file in bench/results/ names these reports: {', '.join(orphans)}"


MACHINE_PATH = re.compile(r"(?<![\w.$])/(?:tmp|root|work|home|var|srv|mnt)/")


@pytest.mark.parametrize(
    "path",
    [REPORT, *sorted((BENCH / "runs").glob("*.md")), *sorted(RESULTS.glob("*.json"))],
    ids=lambda path: str(path.relative_to(BENCH)),
)
def test_no_machine_path_is_written(path: Path):
    found = [line for line in path.read_text().splitlines() if MACHINE_PATH.search(line)]
    assert not found, f"write DIR or FILE for a machine's path: {found[0][:120]}"


# --- which figure is today's --------------------------------------------------------------------------


def a_run(name: str, date: str, kubernetes: str | None, *measured: tuple[str, str], reported: str = "") -> Run:
    return Run(
        name=name,
        title=name,
        date=date,
        reported=reported or f"{date}T12:00Z",
        kubernetes=kubernetes,
        report=f"runs/{name}.md",
        commands=(),
        measured=tuple(Measured("envelope-rss", at, figure) for at, figure in measured),
    )


RSS = GOALS_BY_KEY["envelope-rss"]
LATEST = [
    (
        "the newer run",
        [
            a_run("old", "2026-11-26", "1.37", ("5,000 nodes", "0.20")),
            a_run("new", "2026-11-27", "1.37", ("5,000 nodes", "0.15")),
        ],
        [("5,000 nodes", "0.15", "new")],
    ),
    (
        "the later report of one day",
        [
            a_run("b", "2026-11-27", "1.37", ("5,000 nodes", "0.15"), reported="2026-11-27T09:00Z"),
            a_run("a", "2026-11-27", "1.37", ("5,000 nodes", "0.16"), reported="2026-11-27T18:00Z"),
        ],
        [("5,000 nodes", "0.16", "a")],
    ),
    (
        "each point from its own newest run, in the goal's order",
        [
            a_run("small", "2026-11-26", "1.37", ("1,000 nodes", "0.29")),
            a_run("big", "2026-11-27", "1.37", ("5,000 nodes", "0.15")),
        ],
        [("5,000 nodes", "0.15", "big"), ("1,000 nodes", "0.29", "small")],
    ),
    (
        "another Kubernetes version is not the headline's",
        [
            a_run("default", "2026-11-26", "1.37", ("5,000 nodes", "0.15")),
            a_run("old-end", "2026-11-27", "1.20", ("5,000 nodes", "0.13")),
        ],
        [("5,000 nodes", "0.15", "default")],
    ),
    ("no run", [a_run("old-end", "2026-11-27", "1.20", ("5,000 nodes", "0.13"))], []),
]


@pytest.mark.parametrize(("runs", "today"), [c[1:] for c in LATEST], ids=[c[0] for c in LATEST])
def test_todays_figure_is_the_newest_on_the_headline_version(runs: list[Run], today: list[tuple[str, str, str]]):
    ordered = sorted(runs, key=lambda run: run.order)
    assert [(f.at, f.measured.figure, f.run.name) for f in latest(RSS, ordered)] == today


# --- result files are checked as they are read ---------------------------------------------------------------

VALID: dict[str, Any] = {
    "title": "envelope",
    "date": "2026-11-27",
    "reported": "2026-11-27T18:41Z",
    "kubernetes": "1.37",
    "report": "runs/2026-11-27-envelope-1.37-5000.md",
    "commands": ["bench/envelope.py --sizes 5000"],
    "measured": [{"goal": "envelope-rss", "at": "5,000 nodes", "figure": "0.15"}],
}


def measuring(goal: str, at: str, figure: str) -> dict[str, Any]:
    return {"measured": [{"goal": goal, "at": at, "figure": figure}]}


REFUSED = [
    ("an unknown key", {"figure": "0.15"}, "unknown keys"),
    ("an unknown goal", measuring("speed", "", "1"), "no goal 'speed'"),
    ("a point the goal has not", measuring("envelope-rss", "3,000 nodes", "0.1"), "3,000"),
    ("a figure that is no number", measuring("envelope-rss", "5,000 nodes", "low"), "not a figure"),
    ("a goal in words without the run's verdict", measuring("fence-share", "", "101 ns"), "in words"),
    ("a report that is not there", {"report": "runs/nowhere.md"}, "not a file"),
]


@pytest.mark.parametrize(("change", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_result_file_that_does_not_hold_is_refused_by_name(change: dict[str, Any], message: str):
    run_of("VALID", VALID)
    with pytest.raises(ValueError, match=message) as refused:
        run_of("broken", {**VALID, **change})
    assert "broken" in str(refused.value)
