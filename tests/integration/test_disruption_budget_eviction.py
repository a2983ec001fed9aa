"""The Eviction edge (controller/tainteviction/api.py `request_eviction`) and the manager's use of it
against a real kube-apiserver: 1.20 serves Evictions and PodDisruptionBudgets in policy/v1beta1 only,
1.21+ in policy/v1 (1.25 removed v1beta1 budgets), and the edge asks discovery which.

No kube-controller-manager runs here, so the test writes the budget's status itself, as its
disruption controller would (the apiserver admits an Eviction from that status); tests/realnodes and
tests/e2e run the same against the real disruption controller.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from controller.objects import pod_view
from controller.tainteviction.api import KubeEvictionActions
from controller.tainteviction.manager import BudgetRefused
from hack.servers import ControllerProcess
from kube.client import REQUEST_TIMEOUT
from kube.fence import WriteFence
from kube.policy import V1, V1BETA1, budgets_path, served_policy_version
from kube.request import request_json
from tests.integration.kube import LocalCluster, raw, wait_for
from tests.support.kubernetes_version import server_minor

DRAIN = "example.com/drain"
RESPECT = {"taintkeeper.io/eviction": "respect-disruption-budget"}


class Budget:
    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        self.api, self.namespace = cluster.api_client, namespace
        self.core = client.CoreV1Api(cluster.api_client)
        self.version = served_policy_version(cluster.api_client, REQUEST_TIMEOUT)
        self.path = budgets_path(self.version).format(namespace=namespace)
        self.node = f"node-{uuid.uuid4().hex[:8]}"
        self.core.create_node(body=client.V1Node.model_validate({"metadata": {"name": self.node}}))

    def create(self, min_available: int) -> None:
        request_json(
            self.api,
            "POST",
            self.path,
            timeout=REQUEST_TIMEOUT,
            body={
                "apiVersion": self.version,
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web"},
                "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}},
            },
        )

    def allow(self, disruptions: int) -> None:
        """Write the status the disruption controller would: `disruptions` allowed, observed."""
        budget = request_json(self.api, "GET", f"{self.path}/web", timeout=REQUEST_TIMEOUT)
        budget["status"] = {
            "observedGeneration": budget["metadata"]["generation"],
            "disruptionsAllowed": disruptions,
            "currentHealthy": 2,
            "desiredHealthy": 2,
            "expectedPods": 2,
            "disruptedPods": {},
        }
        request_json(self.api, "PUT", f"{self.path}/web/status", timeout=REQUEST_TIMEOUT, body=budget)

    def pod(self, name: str, annotations: dict[str, str] | None = None) -> dict:
        """A Running pod (as its kubelet would report it: the apiserver ignores budgets for Pending pods)."""
        raw(
            self.core.create_namespaced_pod,
            self.namespace,
            body={
                "metadata": {"name": name, "labels": {"app": "web"}, "annotations": annotations or {}},
                "spec": {"nodeName": self.node, "containers": [{"name": "c", "image": "busybox"}]},
            },
        )
        return raw(
            self.core.patch_namespaced_pod_status,
            name,
            self.namespace,
            body={"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        )

    def read(self, name: str) -> dict | None:
        try:
            return raw(self.core.read_namespaced_pod, name, self.namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def deleted(self, name: str) -> bool:
        pod = self.read(name)
        return pod is None or bool(pod["metadata"].get("deletionTimestamp"))


@pytest.fixture
def budget(local_cluster: LocalCluster, namespace: str) -> Iterator[Budget]:
    made = Budget(local_cluster, namespace)
    yield made
    made.core.delete_node(made.node)


def test_the_policy_version_asked_is_the_one_the_server_serves(local_cluster: LocalCluster):
    """1.20 serves policy/v1beta1 only; policy/v1 from 1.21 on."""
    expected = V1BETA1 if server_minor(local_cluster.api_client) < 21 else V1
    assert served_policy_version(local_cluster.api_client, REQUEST_TIMEOUT) == expected


def test_a_budget_refusal_is_raised_with_its_reason_and_an_admitted_eviction_marks_the_pod(budget: Budget):
    actions = KubeEvictionActions(budget.api, WriteFence.without_lease())
    pod = budget.pod("web-1")
    budget.create(min_available=2)
    budget.allow(0)
    with pytest.raises(BudgetRefused, match="disruption budget web"):
        actions.request_eviction(pod_view(pod))
    assert not budget.deleted("web-1")
    assert not any(
        c["type"] == "DisruptionTarget" for c in (budget.read("web-1") or {})["status"].get("conditions") or []
    ), "a refused pod must not look disrupted"

    budget.allow(1)
    assert actions.request_eviction(pod_view(pod)) is True
    after = budget.read("web-1")
    assert after is None or after["metadata"].get("deletionTimestamp")
    if after is not None:
        target = next(c for c in after["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert target["reason"] == "DeletionByTaintManager"


def test_an_eviction_never_touches_a_new_pod_that_took_the_name(budget: Budget):
    actions = KubeEvictionActions(budget.api, WriteFence.without_lease())
    budget.create(min_available=0)
    budget.allow(5)
    old = budget.pod("web-1")
    budget.core.delete_namespaced_pod("web-1", budget.namespace, grace_period_seconds=0)
    wait_for(lambda: budget.read("web-1") is None, 10, "the old pod gone")
    assert actions.request_eviction(pod_view(old)) is None  # gone: done
    budget.pod("web-1")
    assert actions.request_eviction(pod_view(old)) is None  # replaced (409 on the uid): done
    assert not budget.deleted("web-1")


def test_the_controller_waits_for_the_budget_then_evicts(budget: Budget, local_cluster: LocalCluster, tmp_path: Path):
    budget.pod("web-1", RESPECT)
    budget.pod("web-2")  # not opted in: deleted at once
    budget.create(min_available=2)
    budget.allow(0)
    controller = ControllerProcess(
        local_cluster.kubeconfig,
        tmp_path / "controller.log",
        "--leader-elect=false",
        "--controllers=taint-eviction-controller",
        "--backfill-default-tolerations=false",
    )
    controller.start()
    try:
        budget.core.patch_node(budget.node, {"spec": {"taints": [{"key": DRAIN, "effect": "NoExecute"}]}})
        wait_for(lambda: budget.deleted("web-2"), 15, "the pod that did not opt in deleted")
        controller.wait_for_metric("taintkeeper_pods_waiting_for_disruption_budget", 1, 15)  # web-1 waiting

        def waiting_events() -> list[dict]:
            return [
                e
                for e in raw(budget.core.list_namespaced_event, budget.namespace)["items"]
                if e["reason"] == "WaitingForDisruptionBudget"
            ]

        # Events are posted from the recorder's own thread, after the gauge moves.
        wait_for(lambda: waiting_events(), 15, "the WaitingForDisruptionBudget event posted")
        events = waiting_events()
        assert [e["involvedObject"]["name"] for e in events] == ["web-1"]
        assert events[0]["type"] == "Warning"
        held_until = time.monotonic() + 5
        while time.monotonic() < held_until:
            assert not budget.deleted("web-1")
            time.sleep(0.5)
        budget.allow(1)
        wait_for(lambda: budget.deleted("web-1"), 40, "web-1 evicted once its budget allows it")
        controller.wait_for_metric("taintkeeper_disruption_budget_evictions_total", 1)
        controller.wait_for_metric("taintkeeper_pods_waiting_for_disruption_budget", 0)
    finally:
        controller.kill()
