"""Where a test run's time went: each test's time recorded by the session (tests/conftest.py), and the table
`make test` ends with: each suite's wall time and outcomes, per Kubernetes version, and the slowest tests.

A suite is a folder under tests/ (unit, conformance, integration, e2e, ...). A test's time is its setup,
call and teardown, so a cluster a module's fixture brings up counts in the first test that uses it; what
no test owns (collection, the builds and installs made before the first test) is its own row.

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
    started: float = field(default_factory=time.monotonic)
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, nodeid: str, when: str, seconds: float, outcome: str) -> None:
        test = self.tests.setdefault(nodeid, {"seconds": 0.0, "outcome": "passed"})
        test["seconds"] += seconds
        if outcome == "failed" or (outcome == "skipped" and test["outcome"] == "passed"):
            test["outcome"] = "error" if outcome == "failed" and when != "call" else outcome

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.label}.json"
        path.write_text(
            json.dumps({"label": self.label, "wall": time.monotonic() - self.started, "tests": self.tests}, indent=1)
        )
        return path


def session_label() -> str:
    """The run's name in the table: the Kubernetes version its clusters run."""
    return f"kubernetes-{os.environ.get('TAINTKEEPER_KUBERNETES') or '1.37'}"


def suite_of(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]


def table(runs: list[dict[str, Any]], slowest: int = 15) -> str:
    """The table, one block per run: suites by wall time, then the run's slowest tests."""
    lines = []
    for run in runs:
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
