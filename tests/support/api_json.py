"""Builders of API objects as the apiserver returns them (JSON dicts, camelCase): nodes, pods, the
leader Lease. For code that reads raw JSON (kubectl_taintkeeper/status.py); taints and tolerations are
builders.py's, which are already API-shaped."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from controller.zones import EXCLUDE_DISRUPTION_LABEL, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE
from kube.timestamps import format_micro_time, format_time

Json = dict[str, Any]


def condition(condition_type: str, status: str, since: float | None = None) -> Json:
    """A node condition; `since` (epoch seconds) becomes its lastTransitionTime."""
    built: Json = {"type": condition_type, "status": status}
    if since is not None:
        built["lastTransitionTime"] = format_time(since)
    return built


def node_json(
    name: str,
    ready: str | None = "True",
    *taints: Json,
    zone: str = "",
    region: str = "",
    excluded: bool = False,
    conditions: Iterable[Json] = (),
    ready_since: float | None = None,
) -> Json:
    """A Node with a Ready condition of status `ready` (None: no Ready condition), `taints`, in `zone`
    of `region` (topology labels; both empty: no zone labels), labelled exclude-disruption if `excluded`."""
    labels: dict[str, str] = {}
    if zone:
        labels[LABEL_TOPOLOGY_ZONE] = zone
    if region:
        labels[LABEL_TOPOLOGY_REGION] = region
    if excluded:
        labels[EXCLUDE_DISRUPTION_LABEL] = ""
    all_conditions = ([condition("Ready", ready, ready_since)] if ready is not None else []) + list(conditions)
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "spec": {"taints": list(taints)} if taints else {},
        "status": {"conditions": all_conditions},
    }


def pod_json(
    name: str,
    node: str = "node1",
    tolerations: Iterable[Json] = (),
    *,
    namespace: str = "default",
    created: float | None = None,
    terminating: bool = False,
) -> Json:
    """A Pod bound to `node` carrying `tolerations`, created (and so bound) at `created`."""
    metadata: Json = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if created is not None:
        metadata["creationTimestamp"] = format_time(created)
    if terminating:
        metadata["deletionTimestamp"] = format_time(created or 0)
    return {"metadata": metadata, "spec": {"nodeName": node, "tolerations": list(tolerations)}}


def lease_json(
    holder: str | None,
    renewed: float | None = None,
    duration: int = 15,
    namespace: str = "taintkeeper-system",
    name: str = "taintkeeper-controller",
) -> Json:
    """The controller's leader Lease held by `holder` (None: released), last renewed at `renewed`."""
    spec: Json = {"leaseDurationSeconds": duration}
    if holder is not None:
        spec["holderIdentity"] = holder
    if renewed is not None:
        spec["renewTime"] = format_micro_time(renewed)
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
