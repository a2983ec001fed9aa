"""taintkeeper end to end on real kubelets: the webhook registered (failurePolicy Fail), the controller
running with short grace periods and leader election, three real nodes in two zones.

The scenarios run in order and share the cluster: 2 kills node-1's kubelet and 3 restarts it;
4 stops node-3's and fails the controller over; 5 cordons node-2. Each checks the API and the
containers on the host (containerd's task list for the node, /proc).
"""

from __future__ import annotations

import functools
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from hack.servers import ControllerProcess, WebhookServer, make_certs
from tests.integration.kube import api_time, raw, wait_for
from tests.realnodes.nodes import (
    RealCluster,
    cmdline,
    component_pid,
    descendants,
    process_running,
    rss_mib,
    wait_default_service_account,
)
from webhook.registration import mutating_webhook_configuration

UR = "node.kubernetes.io/unreachable"
NR = "node.kubernetes.io/not-ready"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
GRACE = 10
CONTROLLER_FLAGS = (
    "--node-monitor-period=1s",
    f"--node-monitor-grace-period={GRACE}s",
    "--node-startup-grace-period=30s",
    "--leader-elect=true",
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
)
SKIP = {"taintkeeper.io/skip": "true"}  # the registration's objectSelector leaves these pods alone
FIGURES: dict[str, Any] = {}  # written out as JSON


def unreachable(seconds: int | None) -> list[dict]:
    toleration: dict = {"key": UR, "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        toleration["tolerationSeconds"] = seconds
    return [toleration]


@dataclass
class World:
    cluster: RealCluster
    namespace: str
    webhook: WebhookServer
    tmp: Path
    controllers: list[ControllerProcess] = field(default_factory=list)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.cluster.api_client)

    def start_controller(self, name: str) -> ControllerProcess:
        controller = ControllerProcess(self.cluster.kubeconfig, self.tmp / f"controller-{name}.log", *CONTROLLER_FLAGS)
        self.controllers.append(controller.start())
        return controller

    def leader(self) -> ControllerProcess | None:
        alive = [c for c in self.controllers if c.process is not None and c.process.poll() is None]
        return next((c for c in alive if c.metric("taintkeeper_leader") == 1), None)

    def node(self, name: str) -> dict:
        return raw(self.core.read_node, name)

    def taints(self, name: str) -> list[tuple[str, str]]:
        return sorted((t["key"], t["effect"]) for t in self.node(name)["spec"].get("taints") or [])

    def taint(self, name: str, key: str, effect: str) -> dict | None:
        return next(
            (t for t in self.node(name)["spec"].get("taints") or [] if (t["key"], t["effect"]) == (key, effect)), None
        )

    def conditions(self, name: str) -> dict[str, str]:
        return {c["type"]: c["status"] for c in self.node(name)["status"].get("conditions") or []}

    def create_pod(
        self, name: str, node: str, tolerations: list[dict] | None = None, labels: dict[str, str] | None = None
    ) -> dict:
        image = self.cluster.nodes[node]["busyboxImage"]
        spec: dict = {
            "nodeName": node,
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "c", "image": image, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}],
        }
        if tolerations is not None:
            spec["tolerations"] = tolerations
        return raw(
            self.core.create_namespaced_pod,
            self.namespace,
            body={"metadata": {"name": name, "labels": labels or {}}, "spec": spec},
        )

    def pod(self, name: str) -> dict | None:
        try:
            return raw(self.core.read_namespaced_pod, name, self.namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def deleted(self, name: str) -> bool:
        pod = self.pod(name)
        return pod is None or bool(pod["metadata"].get("deletionTimestamp"))

    def ready(self, name: str) -> str | None:
        pod = self.pod(name)
        return next(
            (c["status"] for c in (pod or {}).get("status", {}).get("conditions") or [] if c["type"] == "Ready"), None
        )

    def running_container(self, name: str) -> str | None:
        """The containerd id of the pod's running container, from the API."""
        pod = self.pod(name)
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
        if statuses and "running" in statuses[0].get("state", {}):
            return statuses[0]["containerID"].removeprefix("containerd://")
        return None

    def wait_running(self, names: list[str], timeout: float = 60) -> dict[str, str]:
        return {
            name: wait_for(functools.partial(self.running_container, name), timeout, f"{name} Running")
            for name in names
        }


@pytest.fixture(scope="module")
def world(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("scenarios")
    core = client.CoreV1Api(real_cluster.api_client)
    namespace = f"rn-{uuid.uuid4().hex[:6]}"
    core.create_namespace(
        body=client.V1Namespace.model_validate(
            {"metadata": {"name": namespace, "labels": {"taintkeeper-test": namespace}}}
        )
    )
    wait_default_service_account(core, namespace)
    try:
        core.create_namespace(body=client.V1Namespace.model_validate({"metadata": {"name": "taintkeeper-system"}}))
    except client.ApiException as error:
        if error.status != 409:
            raise
    ca_bundle = make_certs(tmp / "certs")
    webhook = WebhookServer(tmp / "certs", tmp / "webhook.log")
    admission = client.AdmissionregistrationV1Api(real_cluster.api_client)
    registration = mutating_webhook_configuration(
        ca_bundle,
        url=webhook.url,
        name="taintkeeper-realnodes",
        failure_policy="Fail",
        namespace_selector={"matchLabels": {"taintkeeper-test": namespace}},
    )
    with webhook:
        admission.create_mutating_webhook_configuration(
            body=client.V1MutatingWebhookConfiguration.model_validate(registration)
        )
        made = World(real_cluster, namespace, webhook, tmp)
        try:
            made.start_controller("a")
            wait_for(made.leader, 20, "the controller to lead")
            yield made
        finally:
            for controller in made.controllers:
                controller.kill()
            admission.delete_mutating_webhook_configuration("taintkeeper-realnodes")
            core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            figures = os.environ.get("TAINTKEEPER_REALNODES_FIGURES")
            if figures:
                Path(figures).write_text(json.dumps(FIGURES, indent=2))


def test_1_a_pod_gets_the_default_tolerations_and_runs_in_a_real_container(world: World):
    node = "node-2"

    def webhook_called() -> bool:
        probe = {
            "metadata": {"name": f"probe-{uuid.uuid4().hex[:6]}"},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
        return bool(
            raw(world.core.create_namespaced_pod, world.namespace, body=probe, dry_run="All")["spec"].get("tolerations")
        )

    wait_for(webhook_called, 30, "the apiserver to call the webhook")
    created = world.create_pod("defaults", node)
    assert created["spec"]["tolerations"] == [
        {"key": NR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": UR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ]
    container = world.wait_running(["defaults"])["defaults"]
    pid, status = world.cluster.tasks(node)[container]
    assert status == "RUNNING"
    assert process_running(pid) and cmdline(pid) == ["sleep", "3600"]

    # Resident memory of every component, for the report.
    directory = world.cluster.directory
    memory = {
        "etcd": rss_mib(int((directory / "etcd.pid").read_text())),
        "kube-apiserver": rss_mib(int((directory / "apiserver.pid").read_text())),
    }
    for name, info in sorted(world.cluster.refresh().items()):
        memory[f"containerd {name}"] = rss_mib(info["pids"]["containerd"])
        memory[f"kubelet {name}"] = rss_mib(info["pids"]["kubelet"])
    for component in ("kube-scheduler", "kube-controller-manager", "kube-proxy"):
        running = component_pid(directory, component)
        assert running, f"{component} is not running"
        memory[component] = rss_mib(running)
    controller, webhook = world.controllers[0].process, world.webhook.process
    assert controller is not None and webhook is not None  # both started by the fixture
    memory["controller"] = rss_mib(controller.pid)
    webhook_pids = descendants(webhook.pid)
    memory["webhook (gunicorn master + worker)"] = sum(rss_mib(pid) for pid in webhook_pids)
    FIGURES["rss_mib"] = {key: round(value, 1) for key, value in memory.items()}
    FIGURES["up_seconds"] = round(world.cluster.up_seconds, 1)


DEAD = "node-1"
STATE: dict[str, dict[str, str]] = {}


def test_2_a_killed_kubelet_taints_the_node_and_evicts_on_schedule(world: World):
    world.create_pod("now", DEAD, labels=SKIP)
    ten = world.create_pod("ten", DEAD, unreachable(10))
    world.create_pod("forever", DEAD, unreachable(None))
    now = world.pod("now")
    assert now is not None and now["spec"].get("tolerations") is None
    assert {"key": NR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300} in ten["spec"][
        "tolerations"
    ]  # the webhook added only what the pod lacked
    containers = world.wait_running(["now", "ten", "forever"])

    killed = world.cluster.stop_kubelet(DEAD, "KILL")
    wait_for(lambda: world.conditions(DEAD).get("Ready") == "Unknown", GRACE + 15, "Ready=Unknown")
    unknown_seen = time.time()
    assert set(world.conditions(DEAD).values()) == {"Unknown"}
    taint = wait_for(lambda: world.taint(DEAD, UR, "NoExecute"), 10, "unreachable:NoExecute")
    taint_seen = time.time()
    # The NoSchedule taint follows the node's watch event for the Unknown condition (a work-queue worker), the
    # NoExecute one the monitor pass that wrote it: upstream orders them no more than this does.
    wait_for(lambda: (UR, "NoSchedule") in world.taints(DEAD), 10, "unreachable:NoSchedule", interval=0.1)
    tainted_at = api_time(taint["timeAdded"])
    wait_for(lambda: world.ready("forever") == "False", 10, "pods marked NotReady")

    wait_for(lambda: world.deleted("now"), 5, "the untolerating pod evicted at once", interval=0.05)
    now_evicted = time.time()
    wait_for(lambda: world.deleted("ten"), 15, "the 10 s pod evicted", interval=0.05)
    ten_evicted = time.time()
    assert now_evicted - taint_seen < 3
    assert 10 - 2 <= ten_evicted - tainted_at <= 10 + 2 + 1  # timeAdded has whole seconds
    time.sleep(3)
    assert not world.deleted("forever")

    # The kubelet is dead: nothing stops the containers, including the evicted pods' ones.
    tasks = world.cluster.tasks(DEAD)
    for container in containers.values():
        assert tasks[container][1] == "RUNNING" and process_running(tasks[container][0])
    FIGURES["scenario2"] = {
        "grace_s": GRACE,
        "kill_to_unknown_seen_s": round(unknown_seen - killed, 1),
        "kill_to_taint_timeAdded_s": round(tainted_at - killed, 1),
        "kill_to_taint_seen_s": round(taint_seen - killed, 1),
        "kill_to_untolerating_evicted_s": round(now_evicted - killed, 1),
        "kill_to_10s_pod_evicted_s": round(ten_evicted - killed, 1),
        "taint_to_10s_pod_evicted_s": round(ten_evicted - tainted_at, 1),
        "forever_pod_evicted": False,
    }
    STATE["containers"] = containers  # scenario 3 goes on from here


def test_3_the_restarted_kubelet_clears_the_taints_and_kills_the_evicted_containers(world: World):
    if "containers" not in STATE:
        if not world.cluster.kubelet_pid(DEAD):
            world.cluster.start_kubelet(DEAD)  # the scenarios after this one need the node
        pytest.fail("scenario 2 did not finish, so there is no killed kubelet with evicted pods to restart")
    containers = STATE["containers"]
    forever_pid = world.cluster.tasks(DEAD)[containers["forever"]][0]
    started = time.time()
    world.cluster.start_kubelet(DEAD)
    wait_for(lambda: world.conditions(DEAD).get("Ready") == "True", 40, "Ready again")
    wait_for(lambda: not any(key == UR for key, _ in world.taints(DEAD)), 15, "the unreachable taints removed")
    FIGURES.setdefault("scenario3", {})["restart_to_untainted_s"] = round(time.time() - started, 1)
    # The kubelet deletes a pod once its containers are removed: at once when it sees them die, else by its
    # container GC, which runs once a minute; so up to a minute and then some.
    wait_for(lambda: world.pod("now") is None and world.pod("ten") is None, 90, "the evicted pods gone")
    FIGURES["scenario3"]["restart_to_evicted_pods_gone_s"] = round(time.time() - started, 1)
    tasks = world.cluster.tasks(DEAD)
    assert containers["now"] not in tasks and containers["ten"] not in tasks
    assert tasks[containers["forever"]] == (forever_pid, "RUNNING") and process_running(forever_pid)
    wait_for(lambda: world.ready("forever") == "True", 30, "the tolerating pod Ready again")
    assert not world.deleted("forever")


@pytest.mark.version_independent(
    "the elector's hand-over and the eviction manager's countdown are taintkeeper's own (test_leader and "
    "test_taint_eviction are marked alike); the 1.20 kubelet's stop and restart are test_2's and test_3's, kept"
)
def test_4_a_standby_controller_takes_over_mid_countdown_and_the_deadline_holds(world: World):
    node = "node-3"
    world.create_pod("twenty", node, unreachable(20))
    container = world.wait_running(["twenty"])["twenty"]
    first = world.leader()
    assert first is not None
    standby = world.start_controller("b")
    assert standby.metric("taintkeeper_leader") == 0

    stopped = world.cluster.stop_kubelet(node, "TERM")
    taint = wait_for(lambda: world.taint(node, UR, "NoExecute"), GRACE + 15, "unreachable:NoExecute")
    tainted_at = api_time(taint["timeAdded"])
    time.sleep(max(0.0, tainted_at + 5 - time.time()))
    first.kill()  # crashes mid-countdown: the Lease is not released
    crashed = time.time()
    standby.wait_for_metric("taintkeeper_leader", 1, 15)
    took_over = time.time()
    wait_for(lambda: world.deleted("twenty"), 25, "the 20 s pod evicted", interval=0.05)
    evicted = time.time()
    assert 20 - 2 <= evicted - tainted_at <= 20 + 2 + 1
    tasks = world.cluster.tasks(node)
    assert tasks[container][1] == "RUNNING"  # the kubelet is still down
    FIGURES["scenario4"] = {
        "kill_to_taint_timeAdded_s": round(tainted_at - stopped, 1),
        "leader_crash_to_takeover_s": round(took_over - crashed, 1),
        "taint_to_20s_pod_evicted_s": round(evicted - tainted_at, 1),
    }

    world.cluster.start_kubelet(node)
    wait_for(lambda: world.conditions(node).get("Ready") == "True", 40, f"{node} Ready again")
    wait_for(lambda: world.pod("twenty") is None, 60, "the evicted pod gone")
    assert container not in world.cluster.tasks(node)


@pytest.mark.version_independent(
    "the unschedulable taint is the controller's own rule; the node patch and the taint write it makes are "
    "the requests test_2 and test_3 make on 1.20, kept"
)
def test_5_a_cordoned_node_gets_unschedulable_and_nothing_is_evicted(world: World):
    node = "node-2"
    container = world.wait_running(["defaults"])["defaults"]
    world.create_pod("cordoned", node, labels=SKIP)  # tolerates nothing
    plain = world.wait_running(["cordoned"])["cordoned"]
    world.core.patch_node(node, {"spec": {"unschedulable": True}})
    try:
        wait_for(lambda: (UNSCHEDULABLE, "NoSchedule") in world.taints(node), 15, "unschedulable:NoSchedule")
        time.sleep(5)
        assert [t for t in world.taints(node) if t[1] == "NoExecute"] == []
        assert not world.deleted("cordoned") and not world.deleted("defaults")
        tasks = world.cluster.tasks(node)
        assert tasks[plain][1] == "RUNNING" and tasks[container][1] == "RUNNING"
    finally:
        world.core.patch_node(node, {"spec": {"unschedulable": False}})
    wait_for(lambda: (UNSCHEDULABLE, "NoSchedule") not in world.taints(node), 15, "the taint removed")
