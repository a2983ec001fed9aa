"""A dead node's StatefulSet pod, stuck Terminating, back in one safe step (fencing), on real
kubelets: taintkeeper's controller as a process (short grace periods, --auto-fence-after 5s) and
`python -m controller fence|unfence` / `kubectl taintkeeper fence` as an operator runs them.

The steps run in order and share the state: a 3-replica StatefulSet; one node "dies" (`stop-node`:
its kubelet, its containerd and every container on it SIGKILLed, nothing reported); the taint
eviction deletes the pod, which stays Terminating (only its kubelet could confirm it stopped) and the
StatefulSet cannot replace it; without a fencing confirmation auto-fence does nothing; `fence` refuses
a Ready node and a node down less than --min-down, then fences the dead one; the pod is force deleted
and recreated on another node, where it becomes Ready (the time from `fence` to Ready is printed);
the node comes back (`start-node`), is warned about, unfenced, and the cluster is whole.

Run with `-s` to see the figures.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client

from controller.fencing import CONFIRMED_AT_ANNOTATION, FENCED_AT_ANNOTATION, FENCED_BY_ANNOTATION
from hack.servers import ControllerProcess
from tests.integration.kube import raw, wait_for
from tests.realnodes.nodes import ROOT, RealCluster, wait_default_service_account

OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
UR = "node.kubernetes.io/unreachable"
GRACE = 10
AUTO_FENCE_AFTER = 5
CONTROLLER_FLAGS = (
    "--leader-elect=false",
    "--node-monitor-period=1s",
    f"--node-monitor-grace-period={GRACE}s",
    "--node-startup-grace-period=30s",
    "--backfill-default-tolerations=false",
    f"--auto-fence-after={AUTO_FENCE_AFTER}s",
)
HELD = 15  # seconds the dead node's pod must visibly stay Terminating
PLUGIN = Path(sys.executable).parent / "kubectl-taintkeeper"
FIGURES: dict[str, float] = {}


@dataclass
class Fencing:
    cluster: RealCluster
    namespace: str
    controller: ControllerProcess
    state: dict[str, object] = field(default_factory=dict)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.cluster.api_client)

    def pod(self, name: str) -> dict | None:
        try:
            return raw(self.core.read_namespaced_pod, name, self.namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def ready(self, pod: dict | None) -> bool:
        return any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (pod or {}).get("status", {}).get("conditions") or []
        )

    def node(self, name: str) -> dict:
        return raw(self.core.read_node, name)

    def node_ready(self, name: str) -> str | None:
        return next(
            (c["status"] for c in self.node(name)["status"].get("conditions") or [] if c["type"] == "Ready"), None
        )

    def taint(self, name: str, key: str) -> dict | None:
        return next(
            (t for t in self.node(name)["spec"].get("taints") or [] if t["key"] == key and t["effect"] == "NoExecute"),
            None,
        )

    def statefulset(self) -> dict:
        return raw(client.AppsV1Api(self.cluster.api_client).read_namespaced_stateful_set, "web", self.namespace)

    def node_events(self, node: str, reason: str) -> list[dict]:
        events = raw(self.core.list_namespaced_event, "default", field_selector=f"involvedObject.name={node}")
        return [e for e in events["items"] if e["reason"] == reason]

    def command(self, *args: str, plugin: bool = False) -> subprocess.CompletedProcess[str]:
        program = [str(PLUGIN)] if plugin else [sys.executable, "-m", "controller"]
        return subprocess.run(
            [*program, *args, "--kubeconfig", str(self.cluster.kubeconfig)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )


def statefulset(name: str, image: str) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 3,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    # Spread over the nodes, but a replacement may share a node with a sibling.
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "labelSelector": {"matchLabels": labels},
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                }
                            ]
                        }
                    },
                    "containers": [
                        {"name": "c", "image": image, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}
                    ],
                },
            },
        },
    }


@pytest.fixture(scope="module")
def fencing(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fencing]:
    tmp = tmp_path_factory.mktemp("fencing")
    core = client.CoreV1Api(real_cluster.api_client)
    namespace = f"fence-{uuid.uuid4().hex[:6]}"
    core.create_namespace(body=client.V1Namespace.model_validate({"metadata": {"name": namespace}}))
    wait_default_service_account(core, namespace)
    controller = ControllerProcess(real_cluster.kubeconfig, tmp / "controller.log", *CONTROLLER_FLAGS)
    controller.start()
    made = Fencing(real_cluster, namespace, controller)
    try:
        yield made
    finally:
        controller.kill()
        victim = made.state.get("victim")
        if isinstance(victim, str):  # whatever happened: the node back, unfenced
            if not real_cluster.refresh()[victim]["pids"]["kubelet"]:
                real_cluster.start_node(victim)
            made.command("unfence", victim)
        client.AppsV1Api(real_cluster.api_client).delete_namespaced_stateful_set("web", namespace)
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        core.delete_namespace(namespace)
        print(f"controller log: {tmp / 'controller.log'}; figures: {FIGURES}")


def test_1_a_dead_nodes_statefulset_pod_stays_terminating_and_auto_fence_waits_for_a_confirmation(fencing: Fencing):
    image = next(iter(fencing.cluster.refresh().values()))["busyboxImage"]
    client.AppsV1Api(fencing.cluster.api_client).create_namespaced_stateful_set(
        fencing.namespace, body=client.V1StatefulSet.model_validate(statefulset("web", image))
    )
    wait_for(lambda: all(fencing.ready(fencing.pod(f"web-{i}")) for i in range(3)), 120, "3 Ready replicas")
    pod = fencing.pod("web-1")
    assert pod is not None
    victim = pod["spec"]["nodeName"]
    fencing.state.update(
        victim=victim,
        uid=pod["metadata"]["uid"],
        container=pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://"),
    )

    stopped = fencing.cluster.stop_node(victim)
    info = fencing.cluster.refresh()[victim]
    assert info["pids"]["kubelet"] is None and info["pids"]["containerd"] is None
    wait_for(lambda: fencing.node_ready(victim) == "Unknown", GRACE + 20, "Ready=Unknown")
    wait_for(lambda: fencing.taint(victim, UR), 10, "unreachable:NoExecute")
    wait_for(
        lambda: (fencing.pod("web-1") or {}).get("metadata", {}).get("deletionTimestamp"),
        10,
        "the taint eviction to delete web-1",
    )
    FIGURES["stop_to_terminating_s"] = round(time.time() - stopped, 1)

    # Only its kubelet could say the pod stopped: it stays, and the StatefulSet cannot replace it.
    deadline = time.monotonic() + HELD
    while time.monotonic() < deadline:
        stuck = fencing.pod("web-1")
        assert stuck is not None and stuck["metadata"]["uid"] == fencing.state["uid"], "web-1 was replaced"
        assert stuck["metadata"].get("deletionTimestamp")
        time.sleep(1)
    # Unreachable for longer than --auto-fence-after, but no fencing agent confirmed the machine is off.
    assert fencing.taint(victim, OUT_OF_SERVICE) is None, "auto-fenced without a confirmation"
    assert CONFIRMED_AT_ANNOTATION not in (fencing.node(victim)["metadata"].get("annotations") or {})
    assert (
        f"not fencing unreachable node {victim}: no {CONFIRMED_AT_ANNOTATION} annotation"
        in fencing.controller.log_text()
    )


def test_2_fence_refuses_a_ready_node_and_a_node_down_less_than_min_down(fencing: Fencing):
    victim = str(fencing.state["victim"])
    ready_node = next(name for name in fencing.cluster.names() if name != victim)
    refused = fencing.command("fence", ready_node, "--yes", plugin=True)  # as `kubectl taintkeeper fence`
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.splitlines() == [refused.stderr.strip()]
    assert refused.stderr.startswith(f"fence: error: node {ready_node} is Ready")
    too_soon = fencing.command("fence", victim, "--yes", "--min-down=1h")
    assert too_soon.returncode == 1 and "less than --min-down 1h0s" in too_soon.stderr
    no_terminal = fencing.command("fence", victim)
    assert no_terminal.returncode == 2 and "pass --yes" in no_terminal.stderr
    assert fencing.taint(victim, OUT_OF_SERVICE) is None


def test_3_fencing_the_dead_node_brings_the_statefulset_pod_back_elsewhere(fencing: Fencing):
    victim = str(fencing.state["victim"])
    storage = client.StorageV1Api(fencing.cluster.api_client)
    attachment = f"csi-{uuid.uuid4().hex[:12]}"  # no CSI driver runs here: one written as the attach-detach would
    storage.create_volume_attachment(
        body=client.V1VolumeAttachment.model_validate(
            {
                "metadata": {"name": attachment},
                "spec": {
                    "attacher": "csi.taintkeeper.test",
                    "nodeName": victim,
                    "source": {"persistentVolumeName": "pv-web-1"},
                },
            }
        )
    )

    fenced_at = time.time()
    fenced = fencing.command("fence", victim, "--yes", "--min-down=10s")
    assert fenced.returncode == 0, fenced.stderr
    print(fenced.stdout)
    assert f"{fencing.namespace}/web-1" in fenced.stdout and "StatefulSet/web" in fenced.stdout
    assert attachment in fenced.stdout
    taint = fencing.taint(victim, OUT_OF_SERVICE)
    assert taint is not None and taint["value"] == "nodeshutdown"
    marks = fencing.node(victim)["metadata"]["annotations"]
    assert marks[FENCED_BY_ANNOTATION] and marks[FENCED_AT_ANNOTATION]

    def replacement() -> dict | None:
        pod = fencing.pod("web-1")
        return pod if pod is not None and pod["metadata"]["uid"] != fencing.state["uid"] else None

    wait_for(replacement, 30, "web-1 force deleted and recreated", interval=0.1)
    replaced_at = time.time()

    def ready_replacement() -> dict | None:
        pod = replacement()
        return pod if pod and fencing.ready(pod) else None

    new = wait_for(ready_replacement, 60, "the new web-1 Ready", interval=0.1)
    ready_at = time.time()
    assert new["spec"]["nodeName"] != victim
    FIGURES["fence_to_recreated_s"] = round(replaced_at - fenced_at, 1)
    FIGURES["fence_to_ready_s"] = round(ready_at - fenced_at, 1)
    print(
        f"fence to the StatefulSet's replacement pod Ready: {ready_at - fenced_at:.1f}s "
        f"(recreated after {replaced_at - fenced_at:.1f}s, on {new['spec']['nodeName']})"
    )

    def attachment_gone() -> bool:
        try:
            storage.read_volume_attachment(attachment)
        except client.ApiException as error:
            return error.status == 404
        return False

    wait_for(attachment_gone, 10, "the node's volume attachment deleted")
    wait_for(lambda: fencing.node_events(victim, "NodeOutOfService"), 10, "the NodeOutOfService event")
    events = raw(fencing.core.list_namespaced_event, fencing.namespace, field_selector="involvedObject.name=web-1")
    assert any(
        e["reason"] == "OutOfServiceForceDelete" and e["involvedObject"].get("uid") == fencing.state["uid"]
        for e in events["items"]
    )
    assert fencing.controller.metric("taintkeeper_out_of_service_pods_deleted_total") >= 1
    assert fencing.controller.metric("taintkeeper_out_of_service_failures_total") == 0


def test_4_the_node_comes_back_is_unfenced_and_the_cluster_is_whole(fencing: Fencing):
    victim = str(fencing.state["victim"])
    started = time.time()
    fencing.cluster.start_node(victim)  # returns once Ready
    FIGURES["start_to_ready_s"] = round(time.time() - started, 1)
    warning = wait_for(
        lambda: fencing.node_events(victim, "OutOfServiceTaintOnReadyNode"), 15, "the warning that the taint should go"
    )
    assert warning[0]["type"] == "Warning"

    unfenced = fencing.command("unfence", victim)
    assert unfenced.returncode == 0, unfenced.stderr
    assert fencing.taint(victim, OUT_OF_SERVICE) is None
    marks = fencing.node(victim)["metadata"].get("annotations") or {}
    assert not {FENCED_BY_ANNOTATION, FENCED_AT_ANNOTATION} & set(marks)

    names = fencing.cluster.names()
    wait_for(lambda: all(fencing.node_ready(name) == "True" for name in names), 30, "every node Ready")
    wait_for(
        lambda: (
            not any(
                t["effect"] == "NoExecute" for name in names for t in fencing.node(name)["spec"].get("taints") or []
            )
        ),
        20,
        "no NoExecute taint left",
    )
    wait_for(lambda: (fencing.statefulset().get("status") or {}).get("readyReplicas") == 3, 60, "3 Ready replicas")
    pods = raw(fencing.core.list_namespaced_pod, fencing.namespace)["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == ["web-0", "web-1", "web-2"]
    assert not any(p["metadata"].get("deletionTimestamp") for p in pods)
    # The returned node runs nothing of the force-deleted pod (its container died with the machine).
    tasks = fencing.cluster.tasks(victim)
    old = tasks.get(str(fencing.state["container"]))
    assert old is None or old[1] != "RUNNING"
    fencing.state.pop("victim")  # whole again: nothing for the fixture to repair
