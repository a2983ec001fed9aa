"""The disruption-budget scenario, run by the real-node suite against a controller process
and by the e2e suite against the deployed controller: a 2-replica Deployment pinned to one node, a
budget `minAvailable: 2`, pods annotated `taintkeeper.io/eviction: respect-disruption-budget`, and a
drain taint on the node. Nothing goes (each Eviction is refused, 429) until a third pod of the set is
Ready on another node; then exactly one goes, and the other waits again (its replacement cannot land
on the tainted node). Judged from the API: the pods, the budget's status (computed by
kube-controller-manager's disruption controller) and the events; `explain` must name the budget.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes import client

from kube.client import REQUEST_TIMEOUT
from kube.policy import budgets_path, served_policy_version
from kube.request import request_json
from tests.integration.kube import raw, wait_for

DRAIN = "example.com/drain"
RESPECT = {"taintkeeper.io/eviction": "respect-disruption-budget"}
HELD_FOR = 20  # seconds the budget must visibly hold both pods


class Budgeted:
    """The scenario's objects in `namespace`: the set's pods on `node` (tainted) and `other`."""

    def __init__(
        self,
        api_client: client.ApiClient,
        kubeconfig: Path,
        namespace: str,
        node: str,
        other: str,
        pod_spec: Callable[[str], dict],
    ) -> None:
        self.api_client, self.kubeconfig, self.namespace = api_client, kubeconfig, namespace
        self.node, self.other, self.pod_spec = node, other, pod_spec
        self.core = client.CoreV1Api(api_client)
        self.policy = served_policy_version(api_client, REQUEST_TIMEOUT)  # 1.20 (the local cluster): v1beta1
        self.budgets = budgets_path(self.policy).format(namespace=namespace)

    def pods(self) -> list[dict]:
        return raw(self.core.list_namespaced_pod, self.namespace, label_selector="app=web")["items"]

    def running_on(self, node: str) -> list[str]:
        return sorted(
            p["metadata"]["name"]
            for p in self.pods()
            if p["spec"].get("nodeName") == node and not p["metadata"].get("deletionTimestamp")
        )

    def ready(self, name: str) -> bool:
        pod = raw(self.core.read_namespaced_pod, name, self.namespace)
        return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])

    def budget_status(self) -> dict:
        return request_json(self.api_client, "GET", f"{self.budgets}/web", timeout=REQUEST_TIMEOUT).get("status") or {}

    def events(self, reason: str) -> list[dict]:
        return [e for e in raw(self.core.list_namespaced_event, self.namespace)["items"] if e["reason"] == reason]

    def set_drain_taint(self, on: bool) -> None:
        node = raw(self.core.read_node, self.node)
        taints = [t for t in node["spec"].get("taints") or [] if t["key"] != DRAIN]
        if on:
            taints.append({"key": DRAIN, "effect": "NoExecute"})
        self.core.patch_node(self.node, {"spec": {"taints": taints}})


def run(b: Budgeted) -> dict[str, float]:
    """The scenario; returns how long the budget held both pods, and how soon one went once it could."""
    figures: dict[str, float] = {}
    request_json(
        b.api_client,
        "POST",
        f"/apis/apps/v1/namespaces/{b.namespace}/deployments",
        timeout=REQUEST_TIMEOUT,
        body={
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}, "annotations": RESPECT},
                    "spec": b.pod_spec(b.node),
                },
            },
        },
    )
    request_json(
        b.api_client,
        "POST",
        b.budgets,
        timeout=REQUEST_TIMEOUT,
        body={
            "apiVersion": b.policy,
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )

    def two_ready() -> list[str] | None:
        names = b.running_on(b.node)
        return names if len(names) == 2 and all(b.ready(name) for name in names) else None

    held = wait_for(two_ready, 120, "two Ready replicas on the node")
    wait_for(lambda: b.budget_status().get("currentHealthy") == 2, 60, "the disruption controller to count them")
    assert b.budget_status().get("disruptionsAllowed") == 0

    tainted = time.monotonic()
    b.set_drain_taint(True)
    wait_for(lambda: b.events("WaitingForDisruptionBudget"), 30, "the controller to report the refused eviction")
    explained = subprocess.run(
        [sys.executable, "-m", "controller", "explain", "--node", b.node, "--kubeconfig", str(b.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )
    assert explained.returncode == 0, explained.stderr
    assert f"{b.namespace}/{held[0]}: waiting for disruption budget web (allowed 0)" in explained.stdout
    while time.monotonic() - tainted < HELD_FOR:  # watched, not slept: both must stay the whole time
        assert b.running_on(b.node) == held, "a pod went although its budget allowed no disruption"
        time.sleep(1)

    extra = "web-extra"
    request_json(
        b.api_client,
        "POST",
        f"/api/v1/namespaces/{b.namespace}/pods",
        timeout=REQUEST_TIMEOUT,
        body={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": extra, "labels": {"app": "web"}},
            "spec": b.pod_spec(b.other),
        },
    )
    wait_for(lambda: b.ready(extra), 120, "the third replica Ready on the other node")
    extra_ready = time.monotonic()
    wait_for(lambda: len(b.running_on(b.node)) == 1, 90, "one replica to be evicted")
    evicted = time.monotonic()
    figures.update(held_seconds=round(evicted - tainted, 1), evicted_after_third_ready=round(evicted - extra_ready, 1))
    print(f"budget figures: {figures}")

    # The evicted replica's replacement cannot land on the tainted node: the budget allows none again.
    wait_for(
        lambda: b.budget_status().get("disruptionsAllowed") == 0 and b.budget_status().get("currentHealthy") == 2,
        60,
        "the budget to allow nothing again",
    )
    since = time.monotonic()
    remaining = b.running_on(b.node)
    while time.monotonic() - since < 10:
        assert b.running_on(b.node) == remaining, "the second replica went although the budget allowed none"
        time.sleep(1)
    assert len(b.events("WaitingForDisruptionBudget")) >= 1
    return figures
