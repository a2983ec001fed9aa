"""bench/run_reports.py: a benchmark's run report goes to bench/runs/, one file per kind and day."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from bench import run_reports
from bench.run_reports import append_run_report, run_report_path


def test_a_runs_report_is_named_for_its_day_and_kind():
    assert run_report_path("fence", date(2026, 11, 28)) == run_reports.RUNS / "2026-11-28-fence.md"


def test_a_second_run_of_the_day_follows_the_first_in_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(run_reports, "RUNS", tmp_path / "runs")
    first = append_run_report("fence", "Write fence check (first)", "| a | b |")
    second = append_run_report("fence", "Write fence check (second)", "| c | d |")
    assert first == second == run_report_path("fence")
    assert (
        first.read_text() == "# Write fence check (first)\n\n| a | b |\n\n# Write fence check (second)\n\n| c | d |\n"
    )
