"""Where a test run's time went: each test's time recorded by the session (tests/conftest.py), and the table
`make test` ends with: each suite's wall time and outcomes, per Kubernetes version, and the slowest tests.

A suite is a folder under tests/ (unit, conformance, integration, e2e, ...). A test's time is its setup,
call and teardown, so a cluster a module's fixture brings up counts in the first test that uses it; what
no test owns (collection, the builds and installs made before the first test) is its own row. `make test`
runs its sessions in two lanes side by side (tests/support/lanes.py): the table opens with the run's span,
from the first session's start to the last one's end, and each lane's.

    python -m tests.support.suite_times DIR [--slowest N]   print the table of the runs recorded in DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path(__file__).resolve().parents[2] / ".local" / "test-times"
OUTSIDE_TESTS = "(collection, builds, installs)"


@dataclass
class Recorder:
    """One pytest session's times: started when the session starts, written when it finishes."""

    label: str
    lane: str = ""  # the lane of `make test` the session ran in (TAINTKEEPER_TEST_LANE); "": none
    started: float = field(default_factory=time.monotonic)
    began: float = field(default_factory=time.time)  # wall clock: sessions of two lanes overlap
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, nodeid: str, when: str, seconds: float, outcome: str) -> None:
        test = self.tests.setdefault(nodeid, {"seconds": 0.0, "outcome": "passed"})
        test["seconds"] += seconds
        if outcome == "failed" or (outcome == "skipped" and test["outcome"] == "passed"):
            test["outcome"] = "error" if outcome == "failed" and when != "call" else outcome

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.label}.json"
        wall = time.monotonic() - self.started
        record = {"label": self.label, "lane": self.lane, "began": self.began, "ended": self.began + wall}
        path.write_text(json.dumps({**record, "wall": wall, "tests": self.tests}, indent=1))
        return path


def session_label() -> str:
    """The session's name in the table: the one `make test`'s runner gives it (TAINTKEEPER_TEST_SESSION, unique
    in a run), else the Kubernetes version its clusters run."""
    return (
        os.environ.get("TAINTKEEPER_TEST_SESSION") or f"kubernetes-{os.environ.get('TAINTKEEPER_KUBERNETES') or '1.37'}"
    )


def session_lane() -> str:
    return os.environ.get("TAINTKEEPER_TEST_LANE", "")


def suite_of(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]


def overview(runs: list[dict[str, Any]]) -> list[str]:
    """The whole run's span and each lane's, from sessions that recorded when they began and ended."""
    timed = [run for run in runs if "began" in run and "ended" in run]
    if not timed:
        return []
    span = max(run["ended"] for run in timed) - min(run["began"] for run in timed)
    lines = [f"all sessions: {span / 60:.1f} min from the first one's start to the last one's end"]
    lanes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in timed:
        lanes[run.get("lane") or "(no lane)"].append(run)
    for lane, members in sorted(lanes.items()):
        wall = max(run["ended"] for run in members) - min(run["began"] for run in members)
        names = ", ".join(run["label"] for run in sorted(members, key=lambda run: run["began"]))
        lines.append(f"  lane {lane}: {wall / 60:.1f} min ({names})")
    return [*lines, ""]


def table(runs: list[dict[str, Any]], slowest: int = 15) -> str:
    """The table: the run's span and its lanes', then one block per session: suites by wall time, then the
    session's slowest tests."""
    lines = overview(runs)
    for run in sorted(runs, key=lambda run: run.get("began", 0.0)):
        per_suite: dict[str, list[float]] = defaultdict(lambda: [0.0, 0, 0, 0])
        for nodeid, test in run["tests"].items():
            row = per_suite[suite_of(nodeid)]
            row[0] += test["seconds"]
            row[1 if test["outcome"] == "passed" else 2 if test["outcome"] == "skipped" else 3] += 1
        inside = sum(row[0] for row in per_suite.values())
        lines += [
            f"{run['label']}: {run['wall'] / 60:.1f} min",
            f"  {'suite':<32} {'wall':>9} {'passed':>7} {'skipped':>8} {'failed':>7}",
        ]
        for suite, (seconds, passed, skipped, failed) in sorted(per_suite.items(), key=lambda item: -item[1][0]):
            lines.append(f"  {suite:<32} {seconds:>8.0f}s {passed:>7} {skipped:>8} {failed:>7}")
        lines.append(f"  {OUTSIDE_TESTS:<32} {max(0.0, run['wall'] - inside):>8.0f}s")
        lines.append(f"  slowest {slowest}:")
        ranked = sorted(run["tests"].items(), key=lambda item: -item[1]["seconds"])[:slowest]
        lines += [f"  {test['seconds']:>8.1f}s  {nodeid}" for nodeid, test in ranked]
        lines.append("")
    return "\n".join(lines)


def load(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.suite_times", description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--slowest", type=int, default=15)
    args = parser.parse_args(argv)
    runs = load(args.directory)
    if not runs:
        print(f"suite_times: no recorded run in {args.directory}", file=sys.stderr)
        return 1
    print(table(runs, args.slowest))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
