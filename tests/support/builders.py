"""Builders of the objects tests are about: tolerations, NoExecute taints, pod and node views."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from controller.objects import NodeView, PodView
from kube.timestamps import format_time
from shared.taints import NO_EXECUTE, NOT_READY, UNREACHABLE

__all__ = ["NOT_READY", "UNREACHABLE", "node", "pod", "taint", "toleration"]


def taint(key: str = UNREACHABLE, added: float | None = None, *, effect: str = NO_EXECUTE) -> dict[str, Any]:
    """A taint, NoExecute unless told; `added` (epoch seconds) becomes its timeAdded."""
    taint: dict[str, Any] = {"key": key, "effect": effect}
    if added is not None:
        taint["timeAdded"] = format_time(added)
    return taint


def toleration(
    key: str | None = UNREACHABLE, seconds: int | None = None, *, operator: str = "Exists", effect: str = NO_EXECUTE
) -> dict[str, Any]:
    """A toleration of `key` (None: every key) for `seconds` (None: forever)."""
    built: dict[str, Any] = {"operator": operator, "effect": effect}
    if key:
        built["key"] = key
    if seconds is not None:
        built["tolerationSeconds"] = seconds
    return built


def pod(
    name: str,
    tolerations: Any = (),
    node: str = "node1",
    uid: str | None = None,
    created: float | None = None,
    terminating: bool = False,
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
) -> PodView:
    """A pod view as the pod informer makes it (no Ready condition, bound when created)."""
    return PodView(
        namespace,
        name,
        uid or f"uid-{name}",
        node,
        tuple(tolerations),
        created,
        terminating,
        None,
        annotations=tuple((annotations or {}).items()),
    )


def node(name: str = "node1", *taints: dict[str, Any]) -> NodeView:
    """A node view carrying `taints` (NoExecute ones) and nothing else."""
    return NodeView(name, f"uid-{name}", tuple(taints))


def kubeconfig_file(directory: Path) -> Path:
    """A token kubeconfig for a server nobody listens on (https://127.0.0.1:1): it loads, and connects to nothing."""
    path = directory / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    return path
