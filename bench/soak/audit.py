"""kube-apiserver's audit log (audit.k8s.io/v1 Event JSON lines) -> slim typed records, ordered by
the time each request completed.

A record keeps of its request and response objects only the fields the checker reads (`SLIM_FIELDS`):
an hour's node statuses with their image lists would not fit beside a running cluster otherwise.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

JsonObject = dict[str, Any]

# deletecollection answers with the objects it removed (`items`): each is a deletion (bench/soak/timeline.py).
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
FAILED_OPEN = "failed-open.mutation.webhook.admission.k8s.io/"
# The stages that carry a response: Panic is a request that failed inside the apiserver.
KEPT_STAGES = frozenset({"ResponseComplete", "Panic"})
# Object section -> the fields kept ("" is the object itself). Status objects carry a string `status`.
SLIM_FIELDS: dict[str, frozenset[str]] = {
    "": frozenset(
        {
            "kind",
            "apiVersion",
            "metadata",
            "spec",
            "status",
            "target",
            "preconditions",
            "deleteOptions",
            "gracePeriodSeconds",
            "involvedObject",
            "regarding",
            "reason",
            "items",
        }
    ),
    "metadata": frozenset(
        {
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
            "labels",
            "ownerReferences",
        }
    ),
    "spec": frozenset({"nodeName", "tolerations", "taints", "unschedulable", "holderIdentity", "acquireTime"}),
    "status": frozenset({"phase", "conditions", "containerStatuses"}),
    "deleteOptions": frozenset({"preconditions", "gracePeriodSeconds"}),
}


@dataclass(frozen=True, slots=True)
class AuditRecord:
    verb: str
    username: str
    user_agent: str
    resource: str
    subresource: str
    namespace: str
    name: str
    api_group: str
    code: int
    message: str
    received: float  # requestReceivedTimestamp, epoch seconds
    completed: float  # stageTimestamp, epoch seconds
    request_object: JsonObject | None
    response_object: JsonObject | None
    audit_id: str = ""
    # The webhooks whose call failed and was ignored (failurePolicy Ignore): 1.37's
    # `failed-open.mutation.webhook.admission.k8s.io/round_R_index_I` annotations (1.20 writes none).
    failed_open: tuple[str, ...] = ()

    @property
    def succeeded(self) -> bool:
        return 200 <= self.code < 300

    @property
    def is_write(self) -> bool:
        return self.verb in WRITE_VERBS


@dataclass(frozen=True)
class AuditLog:
    records: list[AuditRecord]
    unreadable_lines: int  # blank, not JSON, or not an Event with timestamps


def parse_timestamp(value: str) -> float:
    """RFC 3339 as the apiserver writes MicroTime (`2021-01-13T10:00:00.123456Z`) -> epoch seconds."""
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:  # fromisoformat takes at most six fractional digits; nanoseconds add nothing here
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[: min(digits, 6)].ljust(6, '0')}{rest[digits:]}"
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _object(value: Any) -> JsonObject | None:
    return value if isinstance(value, dict) else None


def slim(value: Any) -> JsonObject | None:
    """An object with only the fields in SLIM_FIELDS (a list's items each so); None for anything that is not
    an object."""
    obj = _object(value)
    if obj is None:
        return None
    kept = {key: item for key, item in obj.items() if key in SLIM_FIELDS[""]}
    if isinstance(kept.get("items"), list):
        kept["items"] = [slimmed for item in kept["items"] if (slimmed := slim(item)) is not None]
    for section, fields in SLIM_FIELDS.items():
        inner = kept.get(section) if section else None
        if isinstance(inner, dict):
            kept[section] = {key: item for key, item in inner.items() if key in fields}
    return kept


def _text(value: Any) -> str:
    # Verbs, users, agents, resources and names repeat over thousands of records: share one string each.
    return sys.intern(str(value or ""))


def record_from_event(event: JsonObject, resources: frozenset[str] | None = None) -> AuditRecord | None:
    """One Event -> a record; None for stages without a response (RequestReceived, ResponseStarted)
    and, when `resources` is given, for requests to any other resource."""
    stage = event.get("stage")
    if stage not in KEPT_STAGES:
        return None
    ref = _object(event.get("objectRef")) or {}
    if resources is not None and ref.get("resource") not in resources:
        return None
    status = _object(event.get("responseStatus")) or {}
    code = int(status.get("code") or 0)
    if stage == "Panic":
        code = max(code, 500)
    user = _object(event.get("user")) or {}
    received = parse_timestamp(str(event["requestReceivedTimestamp"]))
    completed_text = event.get("stageTimestamp")
    return AuditRecord(
        verb=_text(event.get("verb")),
        username=_text(user.get("username")),
        user_agent=_text(event.get("userAgent")),
        resource=_text(ref.get("resource")),
        subresource=_text(ref.get("subresource")),
        namespace=_text(ref.get("namespace")),
        name=_text(ref.get("name")),
        api_group=_text(ref.get("apiGroup")),
        code=code,
        message=str(status.get("message") or ""),
        received=received,
        completed=parse_timestamp(str(completed_text)) if completed_text else received,
        request_object=slim(event.get("requestObject")),
        response_object=slim(event.get("responseObject")),
        audit_id=str(event.get("auditID") or ""),
        failed_open=_failed_open(event.get("annotations")),
    )


def _failed_open(annotations: Any) -> tuple[str, ...]:
    if not isinstance(annotations, dict):
        return ()
    return tuple(sorted(str(name) for key, name in annotations.items() if str(key).startswith(FAILED_OPEN)))


def parse_lines(lines: Iterable[str], resources: frozenset[str] | None = None) -> AuditLog:
    """Records from audit lines (only of `resources`, when given), ordered by completion; a record
    seen twice (same auditID and stage, as in overlapping copies of a rotated file) is kept once."""
    records: list[AuditRecord] = []
    unreadable = 0
    seen: set[tuple[str, str]] = set()
    for line in lines:
        try:
            event = json.loads(line)
            if not isinstance(event, dict):
                raise ValueError("not an object")
            record = record_from_event(event, resources)
        except (ValueError, KeyError, TypeError):
            unreadable += 1
            continue
        if record is None:
            continue
        if record.audit_id:
            identity = (record.audit_id, str(event.get("stage")))
            if identity in seen:
                continue
            seen.add(identity)
        records.append(record)
    records.sort(key=lambda record: record.completed)
    return AuditLog(records, unreadable)


def rotated_files(path: Path) -> list[Path]:
    """`audit.log` and its rotated backups beside it (`audit-<time>.log`), oldest name first."""
    backups = sorted(path.parent.glob(f"{path.stem}-*{path.suffix}"))
    return [*backups, path] if path.exists() else backups


def read_files(paths: Sequence[Path], resources: frozenset[str] | None = None) -> AuditLog:
    """Every record of every file (only of `resources`, when given), as one log ordered by completion."""

    def lines() -> Iterable[str]:
        for path in paths:
            with path.open(encoding="utf-8", errors="replace") as stream:
                yield from stream

    return parse_lines(lines(), resources)
