"""The taint eviction manager against a real kube-apiserver: timing, cancellation, restarts,
leader hand-over, an apiserver outage and refused deletions.

There is no kubelet: a graceful delete leaves the pod Terminating, so "deleted" here means the
pod got its deletionTimestamp (and the DisruptionTarget condition before it).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from hack.servers import ControllerProcess
from tests.integration.kube import LocalCluster, control_plane, raw, wait_for

TAINT_KEY = "example.com/evict"
STRATEGIC = "application/strategic-merge-patch+json"
FAST_LEADER_ELECTION = (
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=500ms",
)
EVICTION_LOGIC = pytest.mark.version_independent(
    "the eviction manager's own timing and bookkeeping; its requests (the pod's condition, its deletion, the events) "
    "test_an_untolerating_pod_is_marked_and_deleted_within_2s_of_the_taint keeps on 1.20"
)
HAND_OVER = pytest.mark.version_independent(
    "the hand-over between replicas; the Lease requests are LeaseClient's, which test_leader keeps on 1.20, "
    "and the eviction's are the 2 s test's"
)


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Scenario:
    """One test's world: a node, pods on it, and helpers to act on them and read the outcome."""

    def __init__(self, cluster: LocalCluster, namespace: str, tmp_path: Path) -> None:
        self.cluster = cluster
        self.core = client.CoreV1Api(cluster.api_client)
        self.namespace = namespace
        self.tmp_path = tmp_path
        self.node = f"node-{uuid.uuid4().hex[:8]}"
        self.core.create_node(body=client.V1Node.model_validate({"metadata": {"name": self.node}}))
        self.controllers: list[ControllerProcess] = []

    def controller(self, *args: str, kubeconfig: Path | None = None) -> ControllerProcess:
        log = self.tmp_path / f"controller-{len(self.controllers)}.log"
        process = ControllerProcess(kubeconfig or self.cluster.kubeconfig, log, *args)
        self.controllers.append(process)
        return process.start()

    def pod(self, name: str, seconds: int | str | None = "none") -> None:
        """A pod on the node; `seconds` None tolerates forever, "none" means no toleration."""
        spec: dict = {"nodeName": self.node, "containers": [{"name": "c", "image": "busybox"}]}
        if seconds != "none":
            toleration: dict[str, Any] = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoExecute"}
            if seconds is not None:
                toleration["tolerationSeconds"] = seconds
            spec["tolerations"] = [toleration]
        self.core.create_namespaced_pod(
            self.namespace, body=client.V1Pod.model_validate({"metadata": {"name": name}, "spec": spec})
        )

    def taint(self, added: float | None = None) -> float:
        """Add the NoExecute taint with timeAdded (now by default); returns the time it counts from."""
        added = time.time() if added is None else added
        taint = {"key": TAINT_KEY, "value": "x", "effect": "NoExecute", "timeAdded": rfc3339(added)}
        self.core.patch_node(self.node, {"spec": {"taints": [taint]}}, _content_type=STRATEGIC)
        return float(int(added))  # timeAdded has whole seconds

    def untaint(self) -> None:
        self.core.patch_node(self.node, {"spec": {"taints": None}}, _content_type=STRATEGIC)

    def read(self, name: str) -> dict:
        return raw(self.core.read_namespaced_pod, name, self.namespace)

    def deleted_at(self, name: str, timeout: float) -> float:
        """Wait for the pod's deletionTimestamp; return when we saw it (epoch seconds)."""
        wait_for(
            lambda: self.read(name)["metadata"].get("deletionTimestamp"), timeout, f"pod {name} deleted", interval=0.05
        )
        return time.time()

    def assert_not_deleted_for(self, name: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert not self.read(name)["metadata"].get("deletionTimestamp"), f"pod {name} was deleted"
            time.sleep(0.2)

    def events(self, name: str) -> list[dict]:
        listed = raw(self.core.list_namespaced_event, self.namespace, field_selector=f"involvedObject.name={name}")
        return [e for e in listed["items"] if e["reason"] == "TaintManagerEviction"]

    def messages(self, name: str) -> list[str]:
        return [e["message"] for e in self.events(name)]

    def close(self) -> None:
        for process in self.controllers:
            process.kill()
        self.core.delete_node(self.node)


@pytest.fixture
def world(local_cluster: LocalCluster, namespace: str, tmp_path: Path) -> Iterator[Scenario]:
    scenario = Scenario(local_cluster, namespace, tmp_path)
    yield scenario
    scenario.close()


def test_an_untolerating_pod_is_marked_and_deleted_within_2s_of_the_taint(world: Scenario):
    world.pod("victim")
    world.controller("--leader-elect=false")
    tainted = time.time()
    world.taint()
    deleted = world.deleted_at("victim", timeout=10)
    assert deleted - tainted <= 2.0
    pod = world.read("victim")
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (condition["status"], condition["reason"]) == ("True", "DeletionByTaintManager")
    assert condition["message"] == "Taint manager: deleting due to NoExecute taint"
    event = wait_for(lambda: world.events("victim"), 10, "the eviction event")[0]
    assert event["message"] == f"Marking for deletion Pod {world.namespace}/victim"
    assert event["source"]["component"] == "taint-eviction-controller"
    assert event["type"] == "Normal"


@EVICTION_LOGIC
def test_a_pod_tolerating_5s_is_deleted_at_5s(world: Scenario):
    world.pod("five", 5)
    world.pod("forever", None)
    world.controller("--leader-elect=false")
    start = world.taint()
    deleted = world.deleted_at("five", timeout=15)
    assert 4.0 <= deleted - start <= 6.0 + 1.0  # +/- 1 s, plus timeAdded's truncation to whole seconds
    assert not world.read("forever")["metadata"].get("deletionTimestamp")


@EVICTION_LOGIC
def test_removing_the_taint_at_2s_cancels_the_deletion(world: Scenario):
    world.pod("spared", 5)
    world.controller("--leader-elect=false")
    world.taint()
    time.sleep(2)  # the scenario is "removed at 2 s": a point in time, not a condition to wait for
    world.untaint()
    world.assert_not_deleted_for("spared", 5)
    assert wait_for(lambda: world.messages("spared"), 10, "the cancel event") == [
        f"Cancelling deletion of Pod {world.namespace}/spared"
    ]


def test_shortening_toleration_seconds_mid_countdown_deletes_earlier(world: Scenario):
    world.pod("shortened", 60)
    world.controller("--leader-elect=false")
    start = world.taint()
    time.sleep(1)
    world.core.patch_namespaced_pod(
        "shortened",
        world.namespace,
        [{"op": "replace", "path": "/spec/tolerations/0/tolerationSeconds", "value": 4}],
        _content_type="application/json-patch+json",
    )
    deleted = world.deleted_at("shortened", timeout=15)
    assert 3.0 <= deleted - start <= 6.0


@EVICTION_LOGIC
def test_a_controller_killed_mid_countdown_keeps_the_original_deadline(world: Scenario):
    world.pod("steady", 10)
    first = world.controller("--leader-elect=false")
    start = world.taint()
    time.sleep(2)
    first.kill()
    time.sleep(2)
    world.controller("--leader-elect=false")
    deleted = world.deleted_at("steady", timeout=20)
    assert 9.0 <= deleted - start <= 11.0 + 1.0


@EVICTION_LOGIC
def test_dry_run_records_the_event_and_deletes_nothing(world: Scenario):
    world.pod("kept")
    controller = world.controller("--leader-elect=false", "--dry-run")
    world.taint()
    wait_for(lambda: world.messages("kept"), 10, "the eviction event")
    world.assert_not_deleted_for("kept", 2)
    assert "dry run: would delete pod" in controller.log_text()


def lease_holder(world: Scenario, name: str) -> str | None:
    try:
        lease = raw(client.CoordinationV1Api(world.cluster.api_client).read_namespaced_lease, name, world.namespace)
    except client.ApiException:
        return None
    return lease["spec"].get("holderIdentity") or None


def leader_of(controllers: list[ControllerProcess]) -> ControllerProcess | None:
    leading = [c for c in controllers if c.metric("taintkeeper_leader") == 1]
    assert len(leading) <= 1, "two replicas act at once"
    return leading[0] if leading else None


@HAND_OVER
def test_two_replicas_exactly_one_acts_and_killing_it_hands_over(world: Scenario):
    lease = f"lease-{uuid.uuid4().hex[:6]}"
    args = (
        "--leader-elect-resource-namespace",
        world.namespace,
        "--leader-elect-resource-name",
        lease,
        *FAST_LEADER_ELECTION,
    )
    replicas = [world.controller(*args), world.controller(*args)]
    leader = wait_for(lambda: leader_of(replicas), 10, "a leader")
    standby = next(c for c in replicas if c is not leader)
    world.pod("now")
    world.pod("later", 8)
    start = world.taint()
    world.deleted_at("now", timeout=5)
    leader.wait_for_metric("taint_eviction_controller_pod_deletions_total", 1)
    assert standby.metric("taint_eviction_controller_pod_deletions_total") == 0
    assert leader_of(replicas) is leader
    leader.kill()  # crashed: the lease is not released, the stand-by waits it out (4 s)
    deleted = world.deleted_at("later", timeout=20)
    assert 7.0 <= deleted - start <= 10.0
    assert standby.metric("taintkeeper_leader") == 1
    standby.wait_for_metric("taint_eviction_controller_pod_deletions_total", 1)
    assert len(world.events("later")) == 1


@HAND_OVER
def test_sigterm_releases_the_lease_and_the_standby_takes_over_within_seconds(world: Scenario):
    lease = f"lease-{uuid.uuid4().hex[:6]}"
    args = (
        "--leader-elect-resource-namespace",
        world.namespace,
        "--leader-elect-resource-name",
        lease,
        "--leader-elect-lease-duration=15s",
        "--leader-elect-renew-deadline=10s",
        "--leader-elect-retry-period=1s",
    )
    replicas = [world.controller(*args), world.controller(*args)]
    leader = wait_for(lambda: leader_of(replicas), 15, "a leader")
    standby = next(c for c in replicas if c is not leader)
    stopped = time.monotonic()
    assert leader.terminate() == 0
    standby.wait_for_metric("taintkeeper_leader", 1, 5)
    assert time.monotonic() - stopped < 5  # far less than the 15 s lease
    world.pod("after-handover")
    world.taint()
    world.deleted_at("after-handover", timeout=5)


def test_an_apiserver_restart_mid_countdown_loses_and_duplicates_no_eviction(world: Scenario):
    names = {"a": 4, "b": 8, "c": 30}
    for name, seconds in names.items():
        world.pod(name, seconds)
    controller = world.controller("--leader-elect=false")
    start = world.taint()
    time.sleep(1)
    control_plane("stop-apiserver", world.cluster.directory)
    try:
        time.sleep(5)  # the outage spans pod a's deadline
    finally:
        control_plane("start-apiserver", world.cluster.directory)
    deleted = {name: world.deleted_at(name, timeout=60) - start for name in names}
    assert deleted["c"] == pytest.approx(30, abs=1.5)  # after the outage, on time
    for name in names:
        assert world.messages(name) == [f"Marking for deletion Pod {world.namespace}/{name}"]
    controller.wait_for_metric("taint_eviction_controller_pod_deletions_total", 3)


CONTROLLER_USER = "system:serviceaccount:taintkeeper-system:taintkeeper-controller"


def test_a_refused_delete_is_retried_until_it_is_allowed(world: Scenario):
    rbac = client.RbacAuthorizationV1Api(world.cluster.api_client)
    suffix = uuid.uuid4().hex[:6]
    base_rules = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
        # The namespaces' eviction annotation (taintkeeper.io/eviction) opts their pods into budgets.
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    subject = [{"kind": "User", "name": CONTROLLER_USER, "apiGroup": "rbac.authorization.k8s.io"}]
    names = [f"tk-read-{suffix}", f"tk-delete-{suffix}"]
    rbac.create_cluster_role(client.V1ClusterRole.model_validate({"metadata": {"name": names[0]}, "rules": base_rules}))
    rbac.create_cluster_role_binding(
        client.V1ClusterRoleBinding.model_validate(
            {
                "metadata": {"name": names[0]},
                "subjects": subject,
                "roleRef": {"kind": "ClusterRole", "name": names[0], "apiGroup": "rbac.authorization.k8s.io"},
            }
        )
    )
    try:
        world.pod("guarded")
        kubeconfig = world.cluster.directory / "kubeconfig-taintkeeper-controller"
        # Only the eviction manager: these rules are exactly what it needs (the monitor needs more).
        controller = world.controller(
            "--leader-elect=false", "--controllers=taint-eviction-controller", kubeconfig=kubeconfig
        )
        world.taint()
        wait_for(lambda: controller.metric("taintkeeper_pod_deletion_failures_total") >= 2, 15, "refused deletions")
        assert not world.read("guarded")["metadata"].get("deletionTimestamp")
        rbac.create_cluster_role(
            client.V1ClusterRole.model_validate(
                {
                    "metadata": {"name": names[1]},
                    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}],
                }
            )
        )
        rbac.create_cluster_role_binding(
            client.V1ClusterRoleBinding.model_validate(
                {
                    "metadata": {"name": names[1]},
                    "subjects": subject,
                    "roleRef": {"kind": "ClusterRole", "name": names[1], "apiGroup": "rbac.authorization.k8s.io"},
                }
            )
        )
        allowed = time.time()
        deleted = world.deleted_at("guarded", timeout=40)
        assert deleted - allowed < 35  # within one capped backoff (30 s) of being allowed
        controller.wait_for_metric("taint_eviction_controller_pod_deletions_total", 1)
    finally:
        for name in names:
            for delete in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
                with contextlib.suppress(client.ApiException):
                    delete(name)


def test_explain_tells_when_and_why_each_pod_on_a_node_goes(world: Scenario):
    world.pod("untolerating")
    world.pod("sixty", 60)
    world.pod("forever", None)
    start = world.taint()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller",
            "explain",
            "--node",
            world.node,
            "--kubeconfig",
            str(world.cluster.kubeconfig),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"node {world.node}: Ready=none; NoExecute taints: {TAINT_KEY}=x:NoExecute (added ")
    by_pod = {line.split(":")[0].strip(): line for line in lines[1:]}
    ns = world.namespace
    assert "evicted now: taint example.com/evict=x:NoExecute is not tolerated" in by_pod[f"{ns}/untolerating"]
    assert f"evicted at {rfc3339(start + 60)}" in by_pod[f"{ns}/sixty"]
    assert "toleration example.com/evict Exists NoExecute for 60s" in by_pod[f"{ns}/sixty"]
    assert "not evicted (tolerates every NoExecute taint forever)" in by_pod[f"{ns}/forever"]


@pytest.mark.version_independent("a missing node is a 404 on every version, and explain stops there")
def test_explain_names_a_missing_node_and_exits_1(world: Scenario):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller",
            "explain",
            "--node",
            "no-such-node",
            "--kubeconfig",
            str(world.cluster.kubeconfig),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "explain: error: node no-such-node: no such node"
