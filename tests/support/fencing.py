"""Builders of the raw API objects the out-of-service handling and `fence` read: nodes with a Ready
condition, taints and annotations; pods with owners; VolumeAttachments."""

from __future__ import annotations

from typing import Any

from kube.timestamps import format_time
from shared.taints import NO_EXECUTE, OUT_OF_SERVICE

START = 1_800_000_000.0
OUT_OF_SERVICE_TAINT = {"key": OUT_OF_SERVICE, "value": "nodeshutdown", "effect": NO_EXECUTE}


def node_json(
    name: str = "node1",
    ready: str | None = "Unknown",
    *,
    since: float | None = START - 600,
    heartbeat: float | None = START - 650,
    taints: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    rv: str = "10",
) -> dict[str, Any]:
    """A node whose Ready condition is `ready` (None: no Ready condition) since `since`, last heard at `heartbeat`."""
    metadata: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "resourceVersion": rv}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    conditions = []
    if ready is not None:
        condition: dict[str, Any] = {"type": "Ready", "status": ready}
        if since is not None:
            condition["lastTransitionTime"] = format_time(since)
        if heartbeat is not None:
            condition["lastHeartbeatTime"] = format_time(heartbeat)
        conditions.append(condition)
    spec: dict[str, Any] = {}
    if taints is not None:
        spec["taints"] = [dict(t) for t in taints]
    return {"metadata": metadata, "spec": spec, "status": {"conditions": conditions}}


def owner(kind: str, name: str, controller: bool = True) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": f"uid-{kind}-{name}", "controller": controller}


def pod_json(
    name: str,
    node: str = "node1",
    *,
    namespace: str = "apps",
    tolerations: list[dict[str, Any]] | None = None,
    owners: list[dict[str, Any]] | None = None,
    terminating: bool = False,
    annotations: dict[str, str] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{name}",
        "creationTimestamp": format_time(START - 3600),
    }
    if owners:
        metadata["ownerReferences"] = owners
    if annotations:
        metadata["annotations"] = annotations
    if terminating:
        metadata["deletionTimestamp"] = format_time(START - 60)
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": metadata, "spec": spec}


def attachment_json(
    name: str, node: str = "node1", *, volume: str = "pv-1", attacher: str = "csi.example.com", deleting: bool = False
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if deleting:
        metadata["deletionTimestamp"] = format_time(START - 5)
    return {
        "metadata": metadata,
        "spec": {"attacher": attacher, "nodeName": node, "source": {"persistentVolumeName": volume}},
        "status": {"attached": True},
    }


def tolerate_out_of_service(seconds: int | None = None) -> dict[str, Any]:
    toleration: dict[str, Any] = {"key": OUT_OF_SERVICE, "operator": "Exists", "effect": NO_EXECUTE}
    if seconds is not None:
        toleration["tolerationSeconds"] = seconds
    return toleration
