"""Where a benchmark writes its run's report: bench/runs/DATE-WHAT.md (the UTC date of the run).

bench/REPORT.md is made by `make report` from bench/results/ and links each run's report from
there once the run's result file is added; no benchmark writes REPORT.md itself.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

RUNS = Path(__file__).resolve().parent / "runs"


def run_report_path(what: str, day: date | None = None) -> Path:
    """bench/runs/DATE-WHAT.md for today's run (or `day`'s)."""
    return RUNS / f"{(day or datetime.now(UTC).date()).isoformat()}-{what}.md"


def append_run_report(what: str, title: str, body: str) -> Path:
    """Add a run's section, headed `title`, to today's report of `what` (a second run of the day
    follows the first in the same file); returns the file."""
    path = run_report_path(what)
    path.parent.mkdir(parents=True, exist_ok=True)
    after = "\n" if path.exists() and path.stat().st_size else ""
    with path.open("a") as out:
        out.write(f"{after}# {title}\n\n{body}\n")
    return path
