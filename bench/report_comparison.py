"""REPORT's like-for-like section: taintkeeper and the built-ins soaked on the same seed (so the same faults
drawn), judged by the same frozen judge, side by side; only what each run measured.

A pair is two 60-minute soaks on one Kubernetes version with the same seed, one per controller, whose
`judged` names the same commit ("as committed at SHA"). Each side's figures are its result file's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bench.results import Run

TAINTKEEPER, BUILTINS = "taintkeeper", "built-ins"
JUDGE_COMMIT = re.compile(r"committed at ([0-9a-f]{7,40})")
HEADING = "## Like for like: taintkeeper and the built-ins on the same faults"
# What a reader must know to read the two sides together: said once, under the table.
CAVEATS = (
    "Each pair ran the same seed, so the same faults were drawn (`--without webhook-delete`: the built-ins have "
    "no webhook; a fault is skipped while a conflicting one still runs, so the counts differ by a few), for 60 "
    "minutes, each controller with two leader-elected replicas, judged by the judge as committed before either "
    "run. The built-ins are judged on upstream's own promises (I1 never early, I2 never late, I3 never twice, "
    "I5 healthy stays healthy, I6 admission, I7 nothing lost); taintkeeper's own (I8, I9, I11, I12) are listed "
    "beside. I4 and I10 "
    "(writes from a term no longer held, no leader) cannot be judged for kube-controller-manager, whose writes "
    "do not say which replica sent them, and a leader fault there is excused to its end plus the hand-over "
    "bound, where taintkeeper's excuse ends at the next Lease write: the built-ins' side is judged more "
    "leniently."
)


def pairs(runs: Sequence[Run]) -> list[tuple[Run, Run]]:
    """(taintkeeper's run, the built-ins' run) per seed both ran under one frozen judge, by seed."""
    found: dict[tuple[str | None, int, str], dict[str, Run]] = {}
    for run in runs:
        soak: dict[str, Any] | None = run.data.get("soak")
        if soak is None or soak.get("minutes") != 60:
            continue
        judge = JUDGE_COMMIT.search(str(soak.get("judged", "")))
        if judge is None:
            continue
        found.setdefault((run.kubernetes, int(soak["seed"]), judge[1]), {})[soak["controller"]] = run
    return [
        (both[TAINTKEEPER], both[BUILTINS])
        for _, both in sorted(found.items(), key=lambda item: (item[0][1], item[0][0] or ""))
        if TAINTKEEPER in both and BUILTINS in both
    ]


def _side(run: Run) -> dict[str, Any]:
    soak: dict[str, Any] = run.data["soak"]
    return soak


def lines(runs: Sequence[Run]) -> list[str]:
    """The section's lines; none when no seed was run by both."""
    found = pairs(runs)
    if not found:
        return []
    rows = []
    for mine, theirs in found:
        a, b = _side(mine), _side(theirs)
        judge = JUDGE_COMMIT.search(a["judged"])
        rows.append(
            f"| {a['seed']} ({mine.kubernetes}, judge {judge[1] if judge else '?'}) "
            f"| {a['faults']} / {b['faults']} "
            f"| {a['evictions_checked']} / {b['evictions_checked']} "
            f"| {a['violations']} / {b['violations']} "
            f"| {a['judged']} · [report]({mine.report}) "
            f"| {b['judged']} · [report]({theirs.report}) |"
        )
    return [
        HEADING,
        "",
        "| seed | faults (taintkeeper / built-ins) | evictions checked | violations | taintkeeper judged | "
        "built-ins judged |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        CAVEATS,
        "",
    ]
