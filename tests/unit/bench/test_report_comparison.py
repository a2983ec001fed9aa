"""bench/report_comparison.py pairs taintkeeper's and the built-ins' 60-minute soaks only where both ran the
same seed on one Kubernetes version under one frozen judge; anything else stays out of the comparison."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from bench import report_comparison
from bench.results import Run


def soak_run(name: str, controller: str, seed: int, judged: str, minutes: int = 60, kubernetes: str = "1.37") -> Run:
    soak: dict[str, Any] = {
        "controller": controller,
        "seed": seed,
        "minutes": minutes,
        "faults": "300",
        "evictions_checked": "1,000",
        "violations": "0",
        "judged": judged,
    }
    return Run(name, name, "2026-11-29", "2026-11-29T00:00Z", kubernetes, f"runs/{name}.md", (), (), {"soak": soak})


FROZEN = "as run, by the judge as committed at 2c4ba9b"
OTHER = "as run, by the judge as committed at 1234567"


class Case(NamedTuple):
    name: str
    runs: list[Run]
    paired: list[tuple[str, str]]


CASES = [
    Case(
        "both controllers, one seed, one judge: a pair",
        [soak_run("tk", "taintkeeper", 5, FROZEN), soak_run("bi", "built-ins", 5, FROZEN)],
        [("tk", "bi")],
    ),
    Case(
        "another seed for the built-ins: no pair",
        [soak_run("tk", "taintkeeper", 5, FROZEN), soak_run("bi", "built-ins", 6, FROZEN)],
        [],
    ),
    Case(
        "judged by two commits: no pair",
        [soak_run("tk", "taintkeeper", 5, FROZEN), soak_run("bi", "built-ins", 5, OTHER)],
        [],
    ),
    Case(
        "judged without a frozen judge: no pair",
        [soak_run("tk", "taintkeeper", 5, "rejudged"), soak_run("bi", "built-ins", 5, "rejudged")],
        [],
    ),
    Case(
        "a 10-minute soak does not count",
        [soak_run("tk", "taintkeeper", 5, FROZEN), soak_run("bi", "built-ins", 5, FROZEN, minutes=10)],
        [],
    ),
    Case(
        "two Kubernetes versions: no pair",
        [soak_run("tk", "taintkeeper", 5, FROZEN), soak_run("bi", "built-ins", 5, FROZEN, kubernetes="1.20")],
        [],
    ),
    Case(
        "two seeds, two pairs, by seed",
        [
            soak_run("tk9", "taintkeeper", 9, FROZEN),
            soak_run("bi5", "built-ins", 5, FROZEN),
            soak_run("bi9", "built-ins", 9, FROZEN),
            soak_run("tk5", "taintkeeper", 5, FROZEN),
        ],
        [("tk5", "bi5"), ("tk9", "bi9")],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_only_the_same_seed_under_the_same_frozen_judge_is_compared(case: Case):
    found = report_comparison.pairs(case.runs)
    assert [(mine.name, theirs.name) for mine, theirs in found] == case.paired
    section = report_comparison.lines(case.runs)
    assert (section[:1] == [report_comparison.HEADING]) == bool(case.paired)
    assert len([line for line in section if line.startswith("| ") and "runs/" in line]) == len(case.paired)
