"""What kube-apiserver's audit log says happened while a release changed: records the product did not write.

Pure functions over bench/soak/audit.py's records. Each taintkeeper process names its version in its
User-Agent (`taintkeeper-controller/0.1.0+next (POD)`, kube/identity.py), so the log tells which build
made each write, and the Lease's writes tell when a build took over.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bench.soak.audit import AuditRecord

LEASE = ("taintkeeper-system", "taintkeeper-controller")
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
# `COMPONENT/VERSION (POD)`, or `(POD; term ACQUIRE_TIME)` for the controller's units of work (kube/acting_term.py)
_AGENT = re.compile(r"^(taintkeeper-[a-z-]+)/(\S+) \(([^();]*)(?:; [^()]*)?\)")


@dataclass(frozen=True)
class Agent:
    component: str  # taintkeeper-controller, taintkeeper-webhook, taintkeeper-certs
    version: str
    pod: str


def agent(record: AuditRecord) -> Agent | None:
    """The taintkeeper process behind a request, from its User-Agent; None for anyone else."""
    match = _AGENT.match(record.user_agent)
    return Agent(*match.groups()) if match else None


def _has_default_tolerations(pod: dict | None) -> bool:
    tolerations = ((pod or {}).get("spec") or {}).get("tolerations") or []
    keys = {(t.get("key"), t.get("effect")) for t in tolerations}
    return {(NOT_READY, "NoExecute"), (UNREACHABLE, "NoExecute")} <= keys


@dataclass(frozen=True)
class Holding:
    at: float  # when the Lease write completed
    holder: str  # "" when released
    version: str  # of the writer


def lease_holdings(records: Iterable[AuditRecord]) -> list[Holding]:
    """Every successful write of the controller's Lease by a taintkeeper controller, in order."""
    found = []
    for record in records:
        who = agent(record)
        if (
            who is None
            or who.component != "taintkeeper-controller"
            or record.resource != "leases"
            or (record.namespace, record.name) != LEASE
            or not (record.is_write and record.succeeded)
        ):
            continue
        spec = (record.response_object or record.request_object or {}).get("spec") or {}
        found.append(Holding(record.completed, str(spec.get("holderIdentity") or ""), who.version))
    return found


def takeover(holdings: Sequence[Holding], version: str, since: float) -> float | None:
    """When a controller of `version` first held the Lease at or after `since`."""
    return next((h.at for h in holdings if h.at >= since and h.holder and h.version == version), None)


def leaderless(holdings: Sequence[Holding], start: float, end: float) -> list[tuple[float, float]]:
    """Stretches within [start, end] after a release and before the next holder: the backfill's pauses."""
    stretches: list[tuple[float, float]] = []
    released_at: float | None = None
    for holding in holdings:
        if not holding.holder and released_at is None:
            released_at = holding.at
        elif holding.holder and released_at is not None:
            if holding.at >= start and released_at <= end:
                stretches.append((max(released_at, start), min(holding.at, end)))
            released_at = None
    if released_at is not None and released_at <= end:
        stretches.append((max(released_at, start), end))
    return stretches


@dataclass
class Writes:
    """Successful writes by taintkeeper's processes, by version, before and after a takeover."""

    before: Counter[str] = field(default_factory=Counter)
    after: Counter[str] = field(default_factory=Counter)
    late: list[AuditRecord] = field(default_factory=list)  # by the old version, after the takeover


def writes_around(records: Iterable[AuditRecord], start: float, end: float, takeover_at: float, old: str) -> Writes:
    writes = Writes()
    for record in records:
        who = agent(record)
        if who is None or not (record.is_write and record.succeeded) or not start <= record.completed <= end:
            continue
        if record.completed < takeover_at:
            writes.before[who.version] += 1
        else:
            writes.after[who.version] += 1
            if who.version == old:
                writes.late.append(record)
    return writes


@dataclass(frozen=True)
class Admission:
    name: str
    created: float  # when the create completed
    by_webhook: bool
    backfilled: float | None  # when the controller's patch gave the tolerations, if it did


def admissions(records: Sequence[AuditRecord], namespace: str) -> dict[str, Admission]:
    """Each pod created in `namespace` (201): whether admission gave it the default tolerations, and if
    not, when a taintkeeper controller's write did."""
    created: dict[str, AuditRecord] = {}
    backfills: dict[str, float] = {}
    for record in records:
        if record.resource != "pods" or record.subresource or record.namespace != namespace:
            continue
        if record.verb == "create" and record.code == 201:
            name = (record.response_object or {}).get("metadata", {}).get("name") or record.name
            created[name] = record
        elif record.verb in ("patch", "update") and record.succeeded and record.name not in backfills:
            who = agent(record)
            if who and who.component == "taintkeeper-controller" and _has_default_tolerations(record.response_object):
                backfills[record.name] = record.completed
    return {
        name: Admission(name, record.completed, _has_default_tolerations(record.response_object), backfills.get(name))
        for name, record in created.items()
    }


def backfill_limit(created: float, stretches: Sequence[tuple[float, float]], bound: float) -> float:
    """The latest moment the backfill may give a pod created at `created` its tolerations: `bound` seconds
    after it was created, or after the leaderless stretch it was created in ended."""
    resumed = next((end for start, end in stretches if start <= created <= end), created)
    return resumed + bound


def deletions(records: Iterable[AuditRecord], namespace: str, name: str) -> list[AuditRecord]:
    """Every successful DELETE of the pod (evictions included), by anyone but its node's kubelet, whose
    last DELETE (grace 0) only finishes a deletion once the containers are gone."""
    return [
        r
        for r in records
        if r.resource == "pods"
        and r.namespace == namespace
        and r.name == name
        and r.succeeded
        and not r.username.startswith("system:node:")
        and (r.verb == "delete" or (r.verb == "create" and r.subresource == "eviction"))
    ]
