"""The soak's verdict: violations and evictions checked per fault kind, as one table and a summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bench.soak.config import SoakConfig
from bench.soak.faults import FAULT_KINDS, Fault, overlapping
from bench.soak.invariants import INVARIANTS, Findings, Unjudged, Violation
from bench.soak.leadership import Stretch, length

NO_FAULT = "none"  # the row of violations and evictions while no fault was active


@dataclass(frozen=True)
class FaultRow:
    kind: str
    injected: int
    overlapping: int
    evictions: int
    violations: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SoakReport:
    violations: list[Violation]
    evictions_checked: int
    rows: list[FaultRow]  # per fault kind, then the "none" row
    total: FaultRow
    one_actor_checked: bool  # False: no controller Lease, so I4 and I10 are n/a
    max_controller_restarts: int | None
    records: int
    unreadable_lines: int = 0
    leaderless: tuple[Stretch, ...] = ()  # each stretch with no leader, and how its seconds divide
    unjudged: tuple[Unjudged, ...] = ()  # deadlines the log ended too soon to judge
    not_applicable: frozenset[str] = frozenset()  # shown n/a in the table
    beside: tuple[Violation, ...] = ()  # violations of those, reported beside the verdict
    actors: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # what was done -> who -> how often

    @property
    def passed(self) -> bool:
        """No violation, and every deadline judged: a judge that could not look does not pass a run."""
        return not self.violations and not self.unjudged

    def render(self) -> str:
        return render(self)


def _counts(violations: Sequence[Violation]) -> dict[str, int]:
    return {invariant: sum(1 for v in violations if v.invariant == invariant) for invariant in INVARIANTS}


def summarize(findings: Findings, faults: Sequence[Fault], config: SoakConfig, records: int) -> SoakReport:
    overlap = overlapping(faults)
    kinds = [kind for kind in FAULT_KINDS if any(f.kind == kind for f in faults)]
    kinds += sorted({f.kind for f in faults} - set(FAULT_KINDS))
    rows = []
    for kind in kinds:
        of_kind = [fault for fault in faults if fault.kind == kind]
        ids = {fault.id for fault in of_kind}
        evictions = sum(
            1
            for check in findings.evictions
            if any(fault.intersects(check.window_start, check.window_end) for fault in of_kind)
        )
        rows.append(
            FaultRow(
                kind,
                len(of_kind),
                len(ids & overlap),
                evictions,
                _counts([v for v in findings.violations if ids & set(v.faults)]),
            )
        )
    unattributed = sum(
        1
        for check in findings.evictions
        if not any(fault.intersects(check.window_start, check.window_end) for fault in faults)
    )
    rows.append(FaultRow(NO_FAULT, 0, 0, unattributed, _counts([v for v in findings.violations if not v.faults])))
    total = FaultRow("total", len(faults), len(overlap), len(findings.evictions), _counts(findings.violations))
    return SoakReport(
        findings.violations,
        len(findings.evictions),
        rows,
        total,
        config.lease is not None,
        findings.max_controller_restarts,
        records,
        leaderless=tuple(findings.leaderless),
        unjudged=tuple(findings.unjudged),
        not_applicable=config.not_applicable,
        beside=tuple(findings.beside),
        actors=findings.actors,
    )


def iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _table(report: SoakReport) -> list[str]:
    header = ["fault kind", "injected", "overlapping", "evictions checked", *INVARIANTS]

    def cells(row: FaultRow) -> list[str]:
        named = row.kind not in (NO_FAULT,)
        counts = [f"{row.violations.get(invariant, 0):,}" for invariant in INVARIANTS]
        for invariant in report.not_applicable:
            counts[INVARIANTS.index(invariant)] = "n/a"
        return [
            row.kind,
            f"{row.injected:,}" if named else "-",
            f"{row.overlapping:,}" if named else "-",
            f"{row.evictions:,}",
            *counts,
        ]

    body = [cells(row) for row in [*report.rows, report.total]]
    widths = [max(len(line[column]) for line in [header, *body]) for column in range(len(header))]

    def line(values: list[str]) -> str:
        padded = [
            value.ljust(width) if column == 0 else value.rjust(width)
            for column, (value, width) in enumerate(zip(values, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (width + 1) + (":" if column else "-") for column, width in enumerate(widths)) + "|"
    return [line(header), rule, *(line(values) for values in body)]


def summary_line(report: SoakReport) -> str:
    total = report.total
    head = (
        f"{total.injected:,} faults ({total.overlapping:,} overlapping), "
        f"{report.evictions_checked:,} evictions checked, {len(report.violations):,} violations"
    )
    if report.passed:
        return f"{head}: PASS"
    per = ", ".join(
        [
            *(f"{invariant} {count:,}" for invariant, count in total.violations.items() if count),
            *([f"{len(report.unjudged):,} deadlines unjudged"] if report.unjudged else []),
        ]
    )
    return f"{head} ({per}): FAIL"


def beside_line(report: SoakReport) -> str:
    """The promises only taintkeeper makes, counted for the built-ins beside their verdict."""
    counts = ", ".join(
        f"{invariant} {sum(1 for v in report.beside if v.invariant == invariant):,}"
        for invariant in INVARIANTS
        if invariant in report.not_applicable - {"I4", "I10"}
    )
    return f"not applicable to upstream, reported beside the verdict: {counts}"


def unjudged_line(unjudged: Unjudged) -> str:
    return (
        f"unjudged {iso(unjudged.due)} {unjudged.subject}: the log ended before {iso(unjudged.limit)}, "
        "when its allowance ran out"
    )


def violation_line(violation: Violation) -> str:
    faults = ", ".join(str(fault) for fault in violation.faults) or "none"
    return (
        f"{violation.invariant} {iso(violation.time)} {violation.subject}: {violation.explanation} [faults: {faults}]"
    )


def leaderless_line(stretches: Sequence[Stretch]) -> str:
    """The seconds without a leader, and what accounts for them."""
    if not stretches:
        return "no leader: never"
    total = sum(stretch.seconds for stretch in stretches)
    longest = max(stretches, key=lambda stretch: stretch.seconds)

    def part(seconds: float) -> str:
        return f"{seconds:,.1f}s"

    absent = sum(stretch.no_replica for stretch in stretches)
    unexplained = sum(length(stretch.unexplained_absence) for stretch in stretches)
    beyond = sum(length(stretch.beyond_bound) for stretch in stretches)
    still_open = " (the last still open when the log ended)" if stretches[-1].still_open else ""
    return (
        f"no leader {len(stretches):,} times, {part(total)} in all, longest {part(longest.seconds)}{still_open}: "
        f"apiserver down {part(sum(stretch.apiserver_down for stretch in stretches))}, no replica able to lead "
        f"{part(absent)} ({part(unexplained)} of it no fault's doing); no fault's doing within the hand-over bound "
        f"{part(sum(stretch.within_bound for stretch in stretches))}, past it {part(beyond)}"
    )


def actors_line(actors: Mapping[str, Mapping[str, int]]) -> str:
    """Every identity that did what the controller does, with the counts: the judge attributes to each."""
    parts = [
        f"{done} by " + (", ".join(f"{who} {count:,}" for who, count in by.items()) or "nobody")
        for done, by in actors.items()
    ]
    return "who acted: " + "; ".join(parts)


def render(report: SoakReport) -> str:
    restarts = "-" if report.max_controller_restarts is None else f"{report.max_controller_restarts:,}"
    notes = (
        f"audit: {report.records:,} records, {report.unreadable_lines:,} unreadable lines skipped; "
        f"controller restarts: max {restarts}"
    )
    lines = [
        notes,
        *([leaderless_line(report.leaderless)] if report.one_actor_checked else []),
        *([beside_line(report)] if report.not_applicable - {"I4", "I10"} else []),
        *([actors_line(report.actors)] if report.actors else []),
    ]
    return (
        "\n".join(
            [
                *lines,
                "",
                *_table(report),
                "",
                summary_line(report),
                *(violation_line(violation) for violation in report.violations),
                *(unjudged_line(unjudged) for unjudged in report.unjudged),
            ]
        )
        + "\n"
    )
