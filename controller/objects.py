"""Slim views of Pods and Nodes: only the fields a decision needs (client-go's transform functions).

At 150,000 pods the full API objects would cost gigabytes; these keep a few hundred bytes each.
Built straight from the API's JSON dicts (camelCase), never from the client's model classes.
Equal views mean nothing a decision reads has changed, so handlers can skip no-op updates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller.budget_annotations import ANNOTATIONS as BUDGET_ANNOTATIONS
from controller.zones import excluded_from_disruption, zone_key
from kube.timestamps import parse_time
from shared.defaults import NOT_READY_SECONDS_ANNOTATION, UNREACHABLE_SECONDS_ANNOTATION, skips
from shared.taints import NO_EXECUTE

Json = dict[str, Any]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

# Identical toleration lists (the webhook's defaults, a DaemonSet's pods) are shared, not copied.
_interned_tolerations: dict[tuple[tuple[tuple[str, Any], ...], ...], tuple[dict[str, Any], ...]] = {}
_interned_taints: dict[tuple[tuple[tuple[str, Any], ...], ...], tuple[dict[str, Any], ...]] = {}


def _intern(
    items: list[Json], table: dict[tuple[tuple[tuple[str, Any], ...], ...], tuple[dict[str, Any], ...]]
) -> tuple[dict[str, Any], ...]:
    key = tuple(tuple(sorted(item.items())) for item in items)
    found = table.get(key)
    if found is None:
        found = tuple(dict(item) for item in items)
        if len(table) < 100_000:  # bound the table; beyond it, lists are simply not shared
            table[key] = found
    return found


@dataclass(frozen=True, slots=True)
class PodView:
    namespace: str
    name: str
    uid: str
    node_name: str
    # Only tolerations that can tolerate a NoExecute taint (effect NoExecute or empty).
    tolerations: tuple[dict[str, Any], ...]
    created: float | None
    terminating: bool
    ready: str | None  # status of the pod's Ready condition, None if absent
    skipped: bool = False  # labelled taintkeeper.io/skip=true: never given default tolerations
    mirror: bool = False  # a static pod's mirror (annotation kubernetes.io/config.mirror): cannot be updated
    # When it was bound to its node: PodScheduled's lastTransitionTime, else its creation. A pod that
    # lands on an already tainted node counts its tolerations from here.
    bound: float | None = None
    # Only taintkeeper.io/eviction and taintkeeper.io/disruption-budget-timeout (budget_annotations.py).
    annotations: tuple[tuple[str, str], ...] = ()
    # metadata.generation: 0 where the server does not set it (before 1.33); the DisruptionTarget
    # condition names it as its observedGeneration, as upstream's taint eviction controller does.
    generation: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def annotation_map(self) -> dict[str, str]:
        return dict(self.annotations)

    @property
    def arrived(self) -> float | None:
        """When the pod reached its node: its binding, else its creation."""
        return self.bound if self.bound is not None else self.created


def pod_view(pod: Json) -> PodView:
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    conditions = (pod.get("status") or {}).get("conditions") or []
    relevant = [t for t in spec.get("tolerations") or [] if (t.get("effect") or "") in ("", NO_EXECUTE)]
    created = parse_time(metadata.get("creationTimestamp"))
    scheduled = next((c for c in conditions if c.get("type") == "PodScheduled" and c.get("status") == "True"), None)
    bound = parse_time(scheduled.get("lastTransitionTime")) if scheduled else None
    annotations = metadata.get("annotations") or {}
    return PodView(
        namespace=metadata.get("namespace") or "",
        name=metadata.get("name") or "",
        uid=metadata.get("uid") or "",
        node_name=spec.get("nodeName") or "",
        tolerations=_intern(relevant, _interned_tolerations),
        created=created,
        terminating=bool(metadata.get("deletionTimestamp")),
        ready=next((str(c.get("status")) for c in conditions if c.get("type") == "Ready"), None),
        skipped=skips(metadata.get("labels")),
        mirror=MIRROR_ANNOTATION in annotations,
        bound=bound if bound is not None else created,
        annotations=_kept(annotations, BUDGET_ANNOTATIONS),
        generation=int(metadata.get("generation") or 0),
    )


def _kept(annotations: dict[str, Any], keys: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((key, str(annotations[key])) for key in keys if key in annotations)


_NODE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "node.kubernetes.io/exclude-disruption",
    # the GA OS/arch labels and their beta twins, kept in step (nodelifecycle/decision.py)
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
)
_CONDITION_FIELDS = ("type", "status", "lastHeartbeatTime", "lastTransitionTime", "reason", "message")


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    uid: str
    no_execute_taints: tuple[dict[str, Any], ...]
    # What the node lifecycle monitor reads besides: every taint (for NoSchedule management),
    # the zone/exclusion/OS/arch labels, the conditions, cordoning, and the version to write against.
    taints: tuple[dict[str, Any], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    conditions: tuple[dict[str, Any], ...] = ()
    unschedulable: bool = False
    created: float | None = None
    resource_version: str = ""
    # When the apiserver, by its own clock, last recorded a status write (its managedFields): what a node
    # first seen was last heard by (controller/nodelifecycle/node_health.py `first_heard`).
    status_stamped: str = ""
    # Derived from the fields above when the view is made, read on every monitor pass.
    zone: str = field(init=False, compare=False)
    excluded_from_disruption: bool = field(init=False, compare=False)
    ready_condition: dict[str, Any] | None = field(init=False, compare=False)

    def __post_init__(self) -> None:
        labels = dict(self.labels)
        object.__setattr__(self, "zone", zone_key(labels))
        object.__setattr__(self, "excluded_from_disruption", excluded_from_disruption(labels))
        object.__setattr__(
            self, "ready_condition", next((c for c in self.conditions if c.get("type") == "Ready"), None)
        )

    @property
    def key(self) -> str:
        return self.name

    def condition(self, condition_type: str) -> dict[str, Any] | None:
        if condition_type == "Ready":
            return self.ready_condition
        return next((c for c in self.conditions if c.get("type") == condition_type), None)

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)


def node_view(node: Json) -> NodeView:
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    all_taints = list(spec.get("taints") or [])
    labels = metadata.get("labels") or {}
    conditions = tuple(
        {k: c[k] for k in _CONDITION_FIELDS if k in c} for c in (node.get("status") or {}).get("conditions") or []
    )
    return NodeView(
        name=metadata.get("name") or "",
        uid=metadata.get("uid") or "",
        no_execute_taints=_intern([t for t in all_taints if t.get("effect") == NO_EXECUTE], _interned_taints),
        taints=_intern(all_taints, _interned_taints),
        labels=tuple((k, labels[k]) for k in _NODE_LABELS if k in labels),
        conditions=conditions,
        unschedulable=bool(spec.get("unschedulable")),
        created=parse_time(metadata.get("creationTimestamp")),
        resource_version=metadata.get("resourceVersion") or "",
        status_stamped=last_stamped(metadata, "status"),
    )


def last_stamped(metadata: Json, subresource: str | None = None) -> str:
    """The latest time the apiserver stamped in the object's managedFields (of writes to `subresource`,
    when given); "" if none. One format, UTC: the latest string is the latest time. Before 1.22 an entry
    does not name its subresource: one that manages the subresource's fields counts."""
    return max(
        (
            str(entry.get("time") or "")
            for entry in metadata.get("managedFields") or ()
            if subresource is None
            or entry.get("subresource") == subresource
            or ("subresource" not in entry and f"f:{subresource}" in (entry.get("fieldsV1") or {}))
        ),
        default="",
    )


@dataclass(frozen=True, slots=True)
class LeaseView:
    """A node's heartbeat Lease in kube-node-lease: its renewTime (compared only with itself), and when the
    apiserver last recorded a change to it, by the apiserver's clock (its managedFields)."""

    name: str
    renew_time: str
    stamped: str = ""

    @property
    def key(self) -> str:
        return self.name


def lease_view(lease: Json) -> LeaseView:
    return LeaseView(
        name=(lease.get("metadata") or {}).get("name") or "",
        renew_time=(lease.get("spec") or {}).get("renewTime") or "",
        stamped=last_stamped(lease.get("metadata") or {}),
    )


_NAMESPACE_ANNOTATIONS = (NOT_READY_SECONDS_ANNOTATION, UNREACHABLE_SECONDS_ANNOTATION, *BUDGET_ANNOTATIONS)


@dataclass(frozen=True, slots=True)
class NamespaceView:
    """A namespace as the toleration backfill and the taint eviction see it: the skip label, the two
    toleration-seconds annotations and the two disruption-budget ones."""

    name: str
    skipped: bool = False  # labelled taintkeeper.io/skip=true
    annotations: tuple[tuple[str, str], ...] = ()  # only those four annotations

    @property
    def key(self) -> str:
        return self.name

    @property
    def annotation_map(self) -> dict[str, str]:
        return dict(self.annotations)


def namespace_view(namespace: Json) -> NamespaceView:
    metadata = namespace.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    return NamespaceView(
        name=metadata.get("name") or "",
        skipped=skips(metadata.get("labels")),
        annotations=_kept(annotations, _NAMESPACE_ANNOTATIONS),
    )
