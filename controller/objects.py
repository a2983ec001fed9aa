"""Slim views of Pods and Nodes: only the fields a decision needs (client-go's transform functions).

At 150,000 pods the full API objects would cost gigabytes; these keep a few hundred bytes each.
Built straight from the API's JSON dicts (camelCase), never from the client's model classes.
Equal views mean nothing a decision reads has changed, so handlers can skip no-op updates.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.taints import NO_EXECUTE

Json = dict[str, Any]

# Identical toleration lists (the webhook's defaults, a DaemonSet's pods) are shared, not copied.
_interned_tolerations: dict[tuple[tuple[tuple[str, Any], ...], ...], tuple[dict[str, Any], ...]] = {}
_interned_taints: dict[tuple[tuple[tuple[str, Any], ...], ...], tuple[dict[str, Any], ...]] = {}


def _intern(items: list[Json], table: dict) -> tuple[dict[str, Any], ...]:
    key = tuple(tuple(sorted(item.items())) for item in items)
    found = table.get(key)
    if found is None:
        found = tuple(dict(item) for item in items)
        if len(table) < 100_000:  # bound the table; beyond it, lists are simply not shared
            table[key] = found
    return found


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (as the API writes `creationTimestamp`, `timeAdded`, MicroTime) -> epoch seconds."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


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

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_view(pod: Json) -> PodView:
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    conditions = (pod.get("status") or {}).get("conditions") or []
    relevant = [t for t in spec.get("tolerations") or [] if (t.get("effect") or "") in ("", NO_EXECUTE)]
    return PodView(
        namespace=metadata.get("namespace") or "",
        name=metadata.get("name") or "",
        uid=metadata.get("uid") or "",
        node_name=spec.get("nodeName") or "",
        tolerations=_intern(relevant, _interned_tolerations),
        created=parse_time(metadata.get("creationTimestamp")),
        terminating=bool(metadata.get("deletionTimestamp")),
        ready=next((str(c.get("status")) for c in conditions if c.get("type") == "Ready"), None),
    )


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    uid: str
    no_execute_taints: tuple[dict[str, Any], ...]

    @property
    def key(self) -> str:
        return self.name


def node_view(node: Json) -> NodeView:
    metadata = node.get("metadata") or {}
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") == NO_EXECUTE]
    return NodeView(
        name=metadata.get("name") or "",
        uid=metadata.get("uid") or "",
        no_execute_taints=_intern(taints, _interned_taints),
    )
