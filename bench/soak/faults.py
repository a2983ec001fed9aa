"""The soak driver's fault log: one JSON line per fault it injected, written by the driver and read
by the checker.

    {"id": 7, "kind": "kubelet-kill", "target": "node-2", "start": 1700000012.5, "end": 1700000071.0,
     "detail": {}}

`end` null means the fault lasted to the end of the run. A driver may write a fault when it starts
(end null) and again when it ends: the later line with the same id replaces the earlier one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FAULT_KINDS = (
    "leader-kill",  # the controller's leader process killed
    "leader-pause",  # SIGSTOP past the Lease, SIGCONT at end
    "webhook-delete",  # a webhook pod deleted
    "apiserver-stop",  # end: the apiserver ready again
    "etcd-restart",  # end: etcd back
    "kubelet-kill",  # target node; end: the kubelet restarted
    "kubelet-pause",  # target node; end: SIGCONT
    "manual-taint",  # target node; detail key, value, effect, timeAdded; end: removed
    "zone-relabel",  # target node; detail from, to
    "etcd-pause",  # etcd SIGSTOPped past the leader's renew deadline: its API calls hang, it loses the Lease
    "runtime-then-kubelet",  # target node; containerd killed, later the kubelet too; detail kubelet_stopped
)


# The faults that act on taintkeeper's webhook: none to inject without it, and what excuses its absence (I6).
WEBHOOK_FAULTS = frozenset({"webhook-delete"})


class FaultLogError(ValueError):
    """A fault line that is not what the driver writes."""


@dataclass(frozen=True)
class Fault:
    id: int
    kind: str
    target: str
    start: float
    end: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def until(self) -> float:
        """The end of the window, infinite while the fault lasted to the end of the run."""
        return math.inf if self.end is None else self.end

    def active_at(self, moment: float) -> bool:
        return self.start <= moment <= self.until

    def intersects(self, start: float, end: float) -> bool:
        return self.start <= end and start <= self.until

    def to_json(self) -> str:
        return json.dumps(
            {
                "id": self.id,
                "kind": self.kind,
                "target": self.target,
                "start": self.start,
                "end": self.end,
                "detail": self.detail,
            },
            sort_keys=True,
        )


def append_fault(path: Path, fault: Fault) -> None:
    """Append one fault as a line (the driver's writer); flushed so a crashed driver keeps its log."""
    with path.open("a", encoding="utf-8") as stream:
        stream.write(fault.to_json() + "\n")
        stream.flush()


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FaultLogError(f"{name} is not a number: {value!r}")
    return float(value)


def parse_fault(line: str) -> Fault:
    try:
        raw = json.loads(line)
    except ValueError as error:
        raise FaultLogError(f"not JSON: {error}") from None
    if not isinstance(raw, dict):
        raise FaultLogError("not a JSON object")
    fault_id, kind, target, detail = raw.get("id"), raw.get("kind"), raw.get("target", ""), raw.get("detail") or {}
    if isinstance(fault_id, bool) or not isinstance(fault_id, int):
        raise FaultLogError(f"id is not an integer: {fault_id!r}")
    if not isinstance(kind, str) or not kind:
        raise FaultLogError(f"fault {fault_id}: kind is not a string: {kind!r}")
    if not isinstance(target, str) or not isinstance(detail, dict):
        raise FaultLogError(f"fault {fault_id}: target must be a string and detail an object")
    end = raw.get("end")
    return Fault(
        fault_id,
        kind,
        target,
        _number(raw.get("start"), f"fault {fault_id}: start"),
        None if end is None else _number(end, f"fault {fault_id}: end"),
        detail,
    )


def parse_faults(lines: Iterable[str]) -> list[Fault]:
    """Faults in the order of their first line; blank lines are ignored, anything else must parse."""
    faults: dict[int, Fault] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            fault = parse_fault(line)
        except FaultLogError as error:
            raise FaultLogError(f"line {number}: {error}") from None
        faults[fault.id] = fault
    return list(faults.values())


def read_faults(path: Path) -> list[Fault]:
    with path.open(encoding="utf-8") as stream:
        return parse_faults(stream)


def overlapping(faults: Sequence[Fault]) -> set[int]:
    """Ids of the faults whose [start, end] intersects another fault's.

    A sweep by start: a fault overlaps an earlier one exactly when it starts before the latest end
    so far, and then it overlaps the fault holding that end.
    """
    result: set[int] = set()
    latest: Fault | None = None
    for fault in sorted(faults, key=lambda fault: (fault.start, fault.id)):
        if latest is not None and fault.start <= latest.until:
            result.update((fault.id, latest.id))
        if latest is None or fault.until > latest.until:
            latest = fault
    return result


def active_at(faults: Iterable[Fault], moment: float) -> tuple[int, ...]:
    return tuple(sorted(fault.id for fault in faults if fault.active_at(moment)))
