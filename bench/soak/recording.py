"""A soak run's audit log cut down to what the checker reads, kept as a compressed recording: the
replays of tests/unit/bench/ judge it as it was, and with sabotages written into it.

    python -m bench.soak.recording --audit DIR/logs/audit.log --faults FAULTS.jsonl --since EPOCH --out DIR

writes DIR/audit.jsonl.xz (each kept Event, its objects slimmed as the checker slims them), DIR/faults.jsonl
and DIR/window.json (`since`: when the run's faults and workload began, as bench/chaos.py judged it).
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.soak.audit import FAILED_OPEN, KEPT_STAGES, rotated_files, slim
from bench.soak.check import CHECKED_RESOURCES

# What of an Event the checker reads (bench/soak/audit.py record_from_event); the rest is dropped.
_KEPT_KEYS = (
    "auditID",
    "stage",
    "verb",
    "user",
    "userAgent",
    "objectRef",
    "responseStatus",
    "requestReceivedTimestamp",
    "stageTimestamp",
    "requestObject",
    "responseObject",
)


def cut(event: dict[str, Any]) -> dict[str, Any] | None:
    """An Event as the recording keeps it, or None when the checker would not read it."""
    ref = event.get("objectRef") or {}
    if event.get("stage") not in KEPT_STAGES or ref.get("resource") not in CHECKED_RESOURCES:
        return None
    kept = {key: event[key] for key in _KEPT_KEYS if key in event}
    user = kept.get("user") or {}
    kept["user"] = {"username": user.get("username", "")}
    for key in ("requestObject", "responseObject"):
        if key in kept:
            kept[key] = slim(kept[key])
    annotations = {key: value for key, value in (event.get("annotations") or {}).items() if key.startswith(FAILED_OPEN)}
    if annotations:
        kept["annotations"] = annotations
    return kept


def cut_lines(lines: Iterable[str]) -> Iterator[str]:
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        kept = cut(event) if isinstance(event, dict) else None
        if kept is not None:
            yield json.dumps(kept, separators=(",", ":"), sort_keys=True)


def read_events(directory: Path) -> list[dict[str, Any]]:
    """The recording's Events, in the order written."""
    with lzma.open(directory / "audit.jsonl.xz", "rt", encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def since(directory: Path) -> float:
    return float(json.loads((directory / "window.json").read_text())["since"])


def record(audit_log: Path, fault_log: Path, since_epoch: float, out: Path) -> int:
    """Writes the recording; returns how many Events it kept."""
    out.mkdir(parents=True, exist_ok=True)
    kept = 0
    with lzma.open(out / "audit.jsonl.xz", "wt", encoding="utf-8", preset=9) as stream:
        for path in rotated_files(audit_log):
            with path.open(encoding="utf-8", errors="replace") as lines:
                for line in cut_lines(lines):
                    stream.write(line + "\n")
                    kept += 1
    shutil.copyfile(fault_log, out / "faults.jsonl")
    (out / "window.json").write_text(json.dumps({"since": since_epoch}) + "\n")
    return kept


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak.recording", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--audit", type=Path, required=True, help="kube-apiserver's audit log (rotated backups beside)")
    parser.add_argument("--faults", type=Path, required=True, help="the driver's fault log")
    parser.add_argument("--since", type=float, required=True, metavar="EPOCH", help="when the run's faults began")
    parser.add_argument("--out", type=Path, required=True, help="the recording's directory")
    args = parser.parse_args(argv)
    if not rotated_files(args.audit) or not args.faults.exists():
        print(f"recording: error: no audit log at {args.audit} or no fault log at {args.faults}", file=sys.stderr)
        return 2
    kept = record(args.audit, args.faults, args.since, args.out)
    print(f"recording: {kept:,} events in {args.out / 'audit.jsonl.xz'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
