"""The runs' result files, bench/results/*.json: one per run, read and checked.

A result file holds what its run's report states, figures as written there (strings: "1,598",
"0.90", "< 0.11"), never figures worked out afterwards:

- `title`: the run in a few words (the index of runs shows it);
- `date` (YYYY-MM-DD) the run's; `reported` (YYYY-MM-DDTHH:MMZ) when its report was first written,
  which orders the runs of a day;
- `kubernetes`: the cluster's version ("1.37", "1.20"), or null for a benchmark without an apiserver;
- `report`: its full report, a file under bench/runs/ (relative to bench/);
- `commands`: how it was run, machine paths written DIR or FILE;
- `measured`: its figures against the goals of bench/goals.py: `goal`, `at` (one of the goal's
  points, "" for a goal measured in one place), `figure`, and for a goal in words the run's `verdict`;
- `figures`: its other figures, by name;
- `envelope`, `soak`, `webhook`: the tables the pictures draw (bench/report_figures.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.goals import GOALS_BY_KEY, Figure, judged

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
KEYS = {
    "title",
    "date",
    "reported",
    "kubernetes",
    "report",
    "commands",
    "measured",
    "figures",
    "envelope",
    "soak",
    "webhook",
}


@dataclass(frozen=True)
class Measured:
    goal: str
    at: str
    figure: str
    verdict: str | None = None  # the run's own, for a goal in words


@dataclass(frozen=True)
class Run:
    name: str  # the result file's stem
    title: str
    date: str
    reported: str
    kubernetes: str | None
    report: str
    commands: tuple[str, ...]
    measured: tuple[Measured, ...]
    data: dict[str, Any] = field(default_factory=dict)  # figures, envelope, soak, webhook

    @property
    def order(self) -> tuple[str, str, str]:
        return (self.date, self.reported, self.name)


def run_of(name: str, raw: dict[str, Any]) -> Run:
    """One result file's run, checked: unknown keys, goals and points, and figures that do not parse
    are errors naming the file."""
    unknown = set(raw) - KEYS
    missing = {"title", "date", "reported", "kubernetes", "report", "commands"} - set(raw)
    if unknown or missing:
        raise ValueError(f"{name}: unknown keys {sorted(unknown)}, missing {sorted(missing)}")
    measured = tuple(Measured(**entry) for entry in raw.get("measured", []))
    for entry in measured:
        goal = GOALS_BY_KEY.get(entry.goal)
        if goal is None:
            raise ValueError(f"{name}: no goal {entry.goal!r} in bench/goals.py")
        if entry.at not in goal.points:
            raise ValueError(
                f"{name}: {entry.goal} is measured at {', '.join(map(repr, goal.points))}, not {entry.at!r}"
            )
        try:
            if goal.comparison is not None:
                Figure.parse(entry.figure, goal.exact)
            judged(goal, entry.figure, entry.verdict)
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from None
    if not (BENCH / raw["report"]).is_file():
        raise ValueError(f"{name}: its report {raw['report']} is not a file under bench/")
    return Run(
        name=name,
        title=raw["title"],
        date=raw["date"],
        reported=raw["reported"],
        kubernetes=raw["kubernetes"],
        report=raw["report"],
        commands=tuple(raw["commands"]),
        measured=measured,
        data={key: raw[key] for key in ("figures", "envelope", "soak", "webhook") if key in raw},
    )


def load_runs(directory: Path = RESULTS) -> list[Run]:
    """Every run of `directory`, oldest first."""
    runs = [run_of(path.stem, json.loads(path.read_text())) for path in directory.glob("*.json")]
    return sorted(runs, key=lambda run: run.order)


def number(text: str | None) -> float | None:
    """A stated figure's leading number ("1,637.2" -> 1637.2, "31.1 % (inside its sweep)" -> 31.1); None
    for none ("-", null)."""
    if text is None:
        return None
    head = text.replace(",", "").split()[0] if text.strip() else ""
    try:
        return float(head)
    except ValueError:
        return None
