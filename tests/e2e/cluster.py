"""Helpers for the end-to-end suite: the cluster handle, raw reads, pods, taints, and polling."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from hack.wait import wait_for as _wait_for
from tests.e2e.providers import Provider

SYSTEM_NAMESPACE = "taintkeeper-system"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"
SKIP_LABEL = "taintkeeper.io/skip"
VICTIM_LABEL = "taintkeeper.io/e2e-victim"  # the node the tests stop; taintkeeper's pods stay off it


def toleration(key: str, seconds: int | None = None, effect: str = "NoExecute") -> dict[str, Any]:
    result: dict[str, Any] = {"key": key, "operator": "Exists", "effect": effect}
    if seconds is not None:
        result["tolerationSeconds"] = seconds
    return result


def default_tolerations(seconds: int = 300) -> list[dict[str, Any]]:
    """What the webhook appends to a pod without them (upstream DefaultTolerationSeconds), in order."""
    return [toleration(NOT_READY, seconds), toleration(UNREACHABLE, seconds)]


# Poll the cluster every second; any exception from the condition (say, the apiserver briefly
# unavailable) counts as "not yet". A timeout raises hack.wait.WaitTimeout (a TimeoutError) naming `what`.
wait_for = functools.partial(_wait_for, ignore=Exception)


@dataclass
class E2ECluster:
    provider: Provider  # kind or the local cluster: how nodes stop and containers die
    kubeconfig: Path
    api_client: client.ApiClient
    victim: str  # the worker the tests stop and start: nothing of taintkeeper runs there
    bystander: str  # another worker, in the same zone

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api_client)

    @staticmethod
    def raw(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Call a kubernetes-client method and return the API's JSON (camelCase, exactly as sent)."""
        response = call(*args, _preload_content=False, _request_timeout=30, **kwargs)
        return json.loads(response.data)

    # nodes

    def node(self, name: str) -> dict[str, Any]:
        return self.raw(self.core.read_node, name)

    def taints(self, name: str) -> list[dict[str, Any]]:
        return self.node(name)["spec"].get("taints") or []

    def taint_keys(self, name: str, effect: str) -> set[str]:
        return {t["key"] for t in self.taints(name) if t["effect"] == effect}

    def taint(self, name: str, key: str, effect: str) -> dict[str, Any] | None:
        return next((t for t in self.taints(name) if t["key"] == key and t["effect"] == effect), None)

    def condition(self, name: str, condition_type: str) -> dict[str, Any] | None:
        return next((c for c in self.node(name)["status"].get("conditions") or [] if c["type"] == condition_type), None)

    def ready(self, name: str) -> str | None:
        condition = self.condition(name, "Ready")
        return condition["status"] if condition else None

    def lifecycle_taints(self, name: str) -> list[str]:
        """The not-ready/unreachable taints on a node, as `key:effect`."""
        return sorted(f"{t['key']}:{t['effect']}" for t in self.taints(name) if t["key"] in (NOT_READY, UNREACHABLE))

    def nodes(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.raw(self.core.list_node)["items"]]

    # pods

    def create_pod(
        self,
        namespace: str,
        name: str,
        *,
        node: str | None = None,
        tolerations: list[dict[str, Any]] | None = None,
        labels: dict[str, str] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Create a pause pod (pinned to `node` by its hostname label) and return the API's answer,
        which shows exactly what admission did to it."""
        spec: dict[str, Any] = {
            "containers": [{"name": "pause", "image": self.provider.pod_image, "imagePullPolicy": "IfNotPresent"}],
            "terminationGracePeriodSeconds": 1,
        }
        if node is not None:
            spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        if tolerations is not None:
            spec["tolerations"] = tolerations
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}
        extra = {"dry_run": "All"} if dry_run else {}
        return self.raw(self.core.create_namespaced_pod, namespace, body, **extra)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.raw(self.core.read_namespaced_pod, name, namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def evicted(self, namespace: str, name: str) -> bool:
        """Deleted, or being deleted (on a stopped node a deleted pod stays Terminating)."""
        pod = self.pod(namespace, name)
        return pod is None or bool(pod["metadata"].get("deletionTimestamp"))

    def pod_phase(self, namespace: str, name: str) -> str | None:
        pod = self.pod(namespace, name)
        return pod["status"].get("phase") if pod else None

    def pod_condition(self, namespace: str, name: str, condition_type: str) -> dict[str, Any] | None:
        pod = self.pod(namespace, name)
        if pod is None:
            return None
        return next((c for c in pod["status"].get("conditions") or [] if c["type"] == condition_type), None)
