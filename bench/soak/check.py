"""Check a finished soak run: its audit log and fault log in, the report out.

    python -m bench.soak.check --audit DIR/logs/audit.log --faults FAULTS.jsonl \\
        [--builtin | --admission policy] [--workload-namespace NS ...] [--since EPOCH] [--until EPOCH]

Exit 0 when no invariant was violated, 1 when any was, 2 on input that cannot be read.
bench/chaos.py calls `judge_run` with `soak_config(...)` (the report, and what the picture is drawn from).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.soak.audit import AuditRecord, read_files, rotated_files
from bench.soak.config import (
    DEFAULT_WORKLOAD_NAMESPACES,
    POLICY_REGISTRATION,
    WEBHOOK_REGISTRATION,
    SoakConfig,
    soak_config,
)
from bench.soak.faults import Fault, read_faults
from bench.soak.invariants import Context, Findings, check_all
from bench.soak.report import SoakReport, summarize
from bench.soak.timeline import Timeline, build_timeline

# bench/chaos.py takes soak_config here
__all__ = ["CheckInputError", "Judged", "check_run", "judge_run", "main", "soak_config"]


ADMISSION_REGISTRATION = (*WEBHOOK_REGISTRATION, *POLICY_REGISTRATION)
# The only resources an invariant reads (the histories in bench/soak/timeline.py; events, read straight off
# the records by I4); requests to any other are skipped as the log is read.
CHECKED_RESOURCES = frozenset(
    {"pods", "nodes", "leases", "endpointslices", "events", *(resource for resource, _ in ADMISSION_REGISTRATION)}
)


class CheckInputError(Exception):
    """The audit log or the fault log cannot be judged (one line)."""


@dataclass(frozen=True)
class Judged:
    """The report, and what it was judged from (for the timeline picture, bench/soak/picture.py)."""

    report: SoakReport
    timeline: Timeline
    findings: Findings
    faults: Sequence[Fault]


def judge(audit_records: Sequence[AuditRecord], faults: Sequence[Fault], config: SoakConfig) -> Judged:
    timeline = build_timeline(audit_records, config)
    findings = check_all(Context(timeline, faults, config))
    return Judged(summarize(findings, faults, config, len(audit_records)), timeline, findings, faults)


def check_run(audit_log: Path, fault_log: Path, config: SoakConfig) -> SoakReport:
    return judge_run(audit_log, fault_log, config).report


def judge_run(audit_log: Path, fault_log: Path, config: SoakConfig) -> Judged:
    """Judge a finished run from its files: the audit log (with its rotated backups) and the fault log."""
    files = rotated_files(audit_log)
    try:
        if not files:
            raise CheckInputError(f"no audit log at {audit_log}")
        audit = read_files(files, CHECKED_RESOURCES)
        faults = read_faults(fault_log) if fault_log.exists() else []  # no line: no fault was injected
    except (OSError, ValueError) as error:  # a FaultLogError, or a file that is not UTF-8
        raise CheckInputError(str(error)) from error
    if not audit.records:
        raise CheckInputError(f"no audit events in {audit_log} ({audit.unreadable_lines} unreadable lines)")
    judged = judge(audit.records, faults, config)
    return replace(judged, report=replace(judged.report, unreadable_lines=audit.unreadable_lines))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak.check", description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--audit",
        type=Path,
        required=True,
        help="kube-apiserver's audit log; its rotated backups beside it (audit-*.log) are read too",
    )
    parser.add_argument("--faults", type=Path, required=True, help="the driver's fault log (JSON lines)")
    parser.add_argument(
        "--builtin",
        action="store_true",
        help="judge kube-controller-manager's node controller and DefaultTolerationSeconds instead",
    )
    parser.add_argument(
        "--admission",
        choices=("webhook", "policy"),
        default="webhook",
        help="what added the default tolerations in the run: taintkeeper's webhook (default), or its admission "
        "policy (bench/chaos.py --admission policy)",
    )
    parser.add_argument(
        "--workload-namespace",
        action="append",
        dest="namespaces",
        metavar="NS",
        help=f"a namespace of the driver's pods (repeatable; default: {' '.join(DEFAULT_WORKLOAD_NAMESPACES)})",
    )
    parser.add_argument("--since", type=float, default=None, metavar="EPOCH", help="count violations from then on")
    parser.add_argument("--until", type=float, default=None, metavar="EPOCH", help="count violations until then")
    args = parser.parse_args(argv)
    if args.builtin and args.admission == "policy":
        parser.error("--admission policy judges taintkeeper's policy; the built-ins have their own plugin")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    config = soak_config(
        builtin=args.builtin,
        policy=args.admission == "policy",
        since=args.since,
        until=args.until,
        workload_namespaces=tuple(args.namespaces or DEFAULT_WORKLOAD_NAMESPACES),
    )
    if not args.faults.exists():
        print(f"check: error: no fault log at {args.faults}", file=sys.stderr)
        return 2
    try:
        report = check_run(args.audit, args.faults, config)
    except CheckInputError as error:
        print(f"check: error: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(report.render())
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
