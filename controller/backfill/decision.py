"""Which pods the toleration backfill gives the default tolerations, and the patch that does it:
pure decisions on views and raw JSON, with no I/O (the component is controller.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.objects import NamespaceView, PodView
from shared.defaults import DefaultSeconds, missing_default_tolerations, namespace_seconds

Json = dict[str, Any]

# The event source component and reasons (documented in docs/operating.md "The controller").
COMPONENT = "taintkeeper-backfill"
EVENT_REASON = "DefaultTolerationsAdded"
INVALID_ANNOTATION_REASON = "InvalidTolerationSecondsAnnotation"

# kube-system: static pods (their mirror pods cannot be updated anyway) and system pods, which
# carry their own tolerations from their manifests and add-on defaults; and taintkeeper's own namespace,
# where its Lease is (--leader-elect-resource-namespace; taintkeeper-system unless installed elsewhere).
SYSTEM_NAMESPACES = ("kube-system",)
DEFAULT_EXCLUDED_NAMESPACES = ("taintkeeper-system", *SYSTEM_NAMESPACES)


def default_excluded_namespaces(own_namespace: str) -> tuple[str, ...]:
    """What --backfill-excluded-namespaces is when not given: taintkeeper's own namespace, and kube-system."""
    return (own_namespace, *(n for n in SYSTEM_NAMESPACES if n != own_namespace))


DEFAULT_RATE = 10.0

# Why a pod gets no backfill (or does).
MISSING = "missing default tolerations"
ALREADY_TOLERATES = "already tolerates not-ready and unreachable"
TERMINATING = "terminating"
MIRROR_POD = "mirror pod (cannot be updated)"
POD_SKIPPED = "pod labelled taintkeeper.io/skip=true"
NAMESPACE_SKIPPED = "namespace labelled taintkeeper.io/skip=true"
EXCLUDED_NAMESPACE = "namespace excluded (--backfill-excluded-namespaces)"
NAMESPACE_UNKNOWN = "namespace not in the cache (yet)"


@dataclass(frozen=True)
class BackfillSettings:
    enabled: bool = True
    rate: float = DEFAULT_RATE  # pods per second
    excluded_namespaces: frozenset[str] = frozenset(DEFAULT_EXCLUDED_NAMESPACES)
    cluster_seconds: DefaultSeconds = field(default_factory=DefaultSeconds)


@dataclass(frozen=True)
class BackfillDecision:
    reason: str
    tolerations: tuple[dict[str, Any], ...] = ()  # to append, not-ready first
    warnings: tuple[str, ...] = ()  # invalid namespace annotations (their cluster default is used)

    @property
    def needed(self) -> bool:
        return bool(self.tolerations)


def decide_backfill(
    pod: PodView, namespace: NamespaceView | None, cluster: DefaultSeconds, excluded: Collection[str]
) -> BackfillDecision:
    """Which default tolerations `pod` should be given, and why (not)."""
    if pod.terminating:
        return BackfillDecision(TERMINATING)
    if pod.mirror:
        return BackfillDecision(MIRROR_POD)
    if pod.skipped:
        return BackfillDecision(POD_SKIPPED)
    if pod.namespace in excluded:
        return BackfillDecision(EXCLUDED_NAMESPACE)
    if namespace is None:
        return BackfillDecision(NAMESPACE_UNKNOWN)
    if namespace.skipped:
        return BackfillDecision(NAMESPACE_SKIPPED)
    seconds, warnings = namespace_seconds(namespace.annotation_map, cluster)
    missing = missing_default_tolerations(pod.tolerations, seconds.not_ready, seconds.unreachable)
    if not missing:
        return BackfillDecision(ALREADY_TOLERATES)
    return BackfillDecision(MISSING, tuple(missing), tuple(warnings))


def json_patch(pod: Json, tolerations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Append `tolerations` to the raw pod's list, guarded by its uid and resourceVersion.

    Existing tolerations are never touched: each new one is added at the next index (or the list
    is created when the pod has none), and the `test` ops make the apiserver refuse the patch if
    the pod changed since it was read (or is another pod of the same name).
    """
    metadata = pod.get("metadata") or {}
    existing = (pod.get("spec") or {}).get("tolerations")
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/uid", "value": metadata.get("uid") or ""},
        {"op": "test", "path": "/metadata/resourceVersion", "value": metadata.get("resourceVersion") or ""},
    ]
    if existing is None:
        ops.append({"op": "add", "path": "/spec/tolerations", "value": [dict(t) for t in tolerations]})
    else:
        ops += [
            {"op": "add", "path": f"/spec/tolerations/{len(existing) + i}", "value": dict(t)}
            for i, t in enumerate(tolerations)
        ]
    return ops


def event_message(tolerations: Sequence[Mapping[str, Any]]) -> str:
    added = ", ".join(f"{t.get('key')}:{t.get('effect')} for {t.get('tolerationSeconds')}s" for t in tolerations)
    return f"Added default tolerations the pod was admitted without: {added}"
