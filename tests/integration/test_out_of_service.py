"""The out-of-service handling (controller/outofservice/) and `fence`/`unfence` (kubectl_taintkeeper/fencing_command.py)
against the real kube-apiserver, on simulated nodes (hack/simulator.py) with the controller as a process.

A simulated kubelet that stopped heartbeating never finishes a pod's deletion, as a dead machine's
kubelet never does: the pods the taint eviction deletes stay Terminating until the node is fenced.
VolumeAttachments are written through the API (no CSI driver runs here, so nothing holds them).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import pytest
from kubernetes import client

from controller.fencing import CONFIRMED_AT_ANNOTATION, FENCED_AT_ANNOTATION, FENCED_BY_ANNOTATION
from kube.client import MERGE_PATCH
from kube.timestamps import format_time
from tests.integration.kube import audit_events, raw, wait_for
from tests.integration.simulated import UR, Cluster

ROOT = Path(__file__).resolve().parents[2]
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
TOLERATE_OUT_OF_SERVICE = [{"key": OUT_OF_SERVICE, "operator": "Exists", "effect": "NoExecute"}]


def command(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m controller fence|unfence ...` as an operator runs it (stdin is no terminal here)."""
    return subprocess.run(
        [sys.executable, "-m", "controller", *args, "--kubeconfig", str(cluster.local.kubeconfig)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def exists(cluster: Cluster, name: str) -> bool:
    try:
        cluster.pod(name)
    except client.ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def terminating(cluster: Cluster, name: str) -> bool:
    return exists(cluster, name) and bool(cluster.pod(name)["metadata"].get("deletionTimestamp"))


def node_events(cluster: Cluster, node: str, reason: str) -> list[dict]:
    events = raw(cluster.core.list_namespaced_event, "default", field_selector=f"involvedObject.name={node}")
    return [event for event in events["items"] if event["reason"] == reason]


def pod_event_reasons(cluster: Cluster) -> list[str]:
    return [event["reason"] for event in raw(cluster.core.list_namespaced_event, cluster.namespace)["items"]]


@pytest.fixture
def attachments(cluster: Cluster) -> Iterator[dict[str, str]]:
    """VolumeAttachments the test creates (name -> node), deleted at the end."""
    made: dict[str, str] = {}
    yield made
    storage = client.StorageV1Api(cluster.local.api_client)
    for name in made:
        try:
            storage.delete_volume_attachment(name)
        except client.ApiException as error:
            if error.status != 404:
                raise


def attach(cluster: Cluster, made: dict[str, str], node: str) -> str:
    name = f"csi-{uuid.uuid4().hex[:12]}"
    client.StorageV1Api(cluster.local.api_client).create_volume_attachment(
        body=client.V1VolumeAttachment.model_validate(
            {
                "metadata": {"name": name},
                "spec": {
                    "attacher": "csi.taintkeeper.test",
                    "nodeName": node,
                    "source": {"persistentVolumeName": f"pv-{name}"},
                },
            }
        )
    )
    made[name] = node
    return name


def attachment_exists(cluster: Cluster, name: str) -> bool:
    try:
        client.StorageV1Api(cluster.local.api_client).read_volume_attachment(name)
    except client.ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def test_a_fenced_dead_node_loses_its_pods_and_attachments_even_against_a_concurrent_force_delete(
    cluster: Cluster, attachments: dict[str, str]
):
    dead, healthy, _ = cluster.sim.add_nodes(3, zones=["a"])
    stuck = cluster.sim.create_pods(dead, 12, namespace=cluster.namespace, name_prefix="stuck")
    kept = cluster.pods(dead, [*TOLERATE_OUT_OF_SERVICE, {"operator": "Exists", "key": UR}], "kept")
    on_dead, on_healthy = attach(cluster, attachments, dead), attach(cluster, attachments, healthy)
    controller = cluster.start_controller()
    cluster.sim.stop_heartbeats(dead)
    wait_for(lambda: cluster.condition(dead, "Ready")["status"] == "Unknown", 15, "Ready=Unknown")
    wait_for(lambda: all(terminating(cluster, name) for name in stuck), 20, "the taint eviction to delete the pods")
    time.sleep(3)
    assert all(terminating(cluster, name) for name in stuck), "a dead node's pods stay Terminating"

    refused = command(cluster, "fence", healthy, "--yes")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.splitlines() == [refused.stderr.strip()]
    assert refused.stderr.startswith(f"fence: error: node {healthy} is Ready")
    too_soon = command(cluster, "fence", dead, "--yes", "--min-down=1h")
    assert too_soon.returncode == 1 and "less than --min-down 1h0s" in too_soon.stderr
    no_terminal = command(cluster, "fence", dead)
    assert no_terminal.returncode == 2 and "pass --yes" in no_terminal.stderr
    assert cluster.taint(dead, OUT_OF_SERVICE, "NoExecute") is None

    # Someone else force deletes half of the pods at the same moment (an operator, PodGC on 1.26+).
    others = stuck[::2]
    with futures.ThreadPoolExecutor(len(others) + 1) as pool:
        fencing = pool.submit(command, cluster, "fence", dead, "--yes", "--min-down=1s")
        deleted = [
            pool.submit(cluster.core.delete_namespaced_pod, name, cluster.namespace, grace_period_seconds=0)
            for name in others
        ]
        fenced = fencing.result()
        for each in deleted:
            try:
                each.result()
            except client.ApiException as error:
                assert error.status == 404  # the controller won that one
    assert fenced.returncode == 0, fenced.stderr
    assert f"Node {dead} fenced: taint {OUT_OF_SERVICE}=nodeshutdown:NoExecute" in fenced.stdout
    assert on_dead in fenced.stdout and on_healthy not in fenced.stdout
    assert f"{cluster.namespace}/{kept}" in fenced.stdout.split("tolerate the taint and stay:")[1]

    wait_for(lambda: not any(exists(cluster, name) for name in stuck), 15, "every stuck pod gone")
    wait_for(lambda: not attachment_exists(cluster, on_dead), 10, "the dead node's volume attachment deleted")
    assert attachment_exists(cluster, on_healthy)
    assert exists(cluster, kept) and not terminating(cluster, kept)
    node = cluster.node(dead)
    assert set(node["metadata"]["annotations"]) >= {FENCED_BY_ANNOTATION, FENCED_AT_ANNOTATION}
    controller.wait_for_metric("taintkeeper_out_of_service_volume_attachments_deleted_total", 1)
    assert controller.metric("taintkeeper_out_of_service_failures_total") == 0
    assert 0 < controller.metric("taintkeeper_out_of_service_pods_deleted_total") <= len(stuck)
    wait_for(lambda: node_events(cluster, dead, "NodeOutOfService"), 10, "the node's NodeOutOfService event")
    wait_for(lambda: "OutOfServiceForceDelete" in pod_event_reasons(cluster), 10, "a pod's OutOfServiceForceDelete")

    # The node comes back still fenced: nothing more is done, one warning says to drop the taint.
    cluster.sim.resume_heartbeats(dead)
    wait_for(lambda: cluster.condition(dead, "Ready")["status"] == "True", 15, "Ready again")
    wait_for(lambda: node_events(cluster, dead, "OutOfServiceTaintOnReadyNode"), 10, "the warning")
    time.sleep(3)
    (warning,) = node_events(cluster, dead, "OutOfServiceTaintOnReadyNode")
    assert warning["type"] == "Warning"
    assert exists(cluster, kept) and not terminating(cluster, kept)

    unfenced = command(cluster, "unfence", dead)
    assert unfenced.returncode == 0, unfenced.stderr
    node = cluster.node(dead)
    assert cluster.taint(dead, OUT_OF_SERVICE, "NoExecute") is None
    assert not set(node["metadata"].get("annotations") or {}) & {FENCED_BY_ANNOTATION, FENCED_AT_ANNOTATION}
    again = command(cluster, "unfence", dead)
    assert again.returncode == 0 and "is not fenced" in again.stdout


def test_a_fenced_nodes_pods_are_removed_by_the_out_of_service_handling_alone(cluster: Cluster):
    """The chaos soak (seed 9090) once saw the out-of-service handling force delete a pod, and the taint
    eviction delete it again 26 ms later. Here the pods tolerate unreachable for an hour, so nothing is due until
    the fence, which makes them due to both at once: only the force delete may touch them."""
    dead, _ = cluster.sim.add_nodes(2, zones=["a"])
    waiting = cluster.sim.create_pods(
        dead,
        6,
        namespace=cluster.namespace,
        name_prefix="waiting",
        tolerations=[{"key": UR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 3600}],
    )
    cluster.start_controller()
    cluster.sim.stop_heartbeats(dead)
    wait_for(lambda: cluster.taint(dead, UR, "NoExecute"), 20, "the unreachable taint")
    time.sleep(2)  # --min-down=1s: not Ready for over a second
    fenced = command(cluster, "fence", dead, "--yes", "--min-down=1s")
    assert fenced.returncode == 0, fenced.stderr
    wait_for(lambda: not any(exists(cluster, name) for name in waiting), 15, "every pod force deleted")
    time.sleep(2)  # a second actor would have written by now: the eviction acts within milliseconds

    # What the controller did to each pod: deletions, Evictions and DisruptionTarget marks (the node
    # lifecycle's Ready=False mark of a pod on an unreachable node is no removal, and is not counted).
    removals: dict[str, list[str]] = {name: [] for name in waiting}
    prefix = f"/api/v1/namespaces/{cluster.namespace}/pods/"
    for event in audit_events(cluster.local, "taintkeeper-controller"):
        path = event["requestURI"].split("?")[0]
        name, _, subresource = path[len(prefix) :].partition("/")
        if not path.startswith(prefix) or event["verb"] in ("get", "list", "watch"):
            continue
        if event["verb"] == "delete" or subresource == "eviction":
            removals.setdefault(name, []).append(f"{event['verb']} {subresource}".strip())
        elif "DisruptionTarget" in json.dumps(event.get("requestObject")):
            removals.setdefault(name, []).append("DisruptionTarget")
    assert removals == {name: ["delete"] for name in waiting}
    assert "TaintManagerEviction" not in pod_event_reasons(cluster)


def test_auto_fence_waits_for_an_external_confirmation_newer_than_the_last_heartbeat(cluster: Cluster):
    dead, _ = cluster.sim.add_nodes(2, zones=["a"])
    # It tolerates unreachable forever: only fencing removes it.
    web = cluster.pods(dead, [{"key": UR, "operator": "Exists", "effect": "NoExecute"}], "web")
    controller = cluster.start_controller("--auto-fence-after=2s")
    cluster.sim.stop_heartbeats(dead)
    wait_for(lambda: cluster.condition(dead, "Ready")["status"] == "Unknown", 15, "Ready=Unknown")
    time.sleep(2 + 4)
    assert cluster.taint(dead, OUT_OF_SERVICE, "NoExecute") is None, "fenced without a confirmation"
    assert exists(cluster, web)
    assert f"not fencing unreachable node {dead}: no {CONFIRMED_AT_ANNOTATION} annotation" in controller.log_text()

    stale = format_time(time.time() - 3600)  # before its last heartbeat: the kubelet was alive after it
    cluster.core.patch_node(
        dead, {"metadata": {"annotations": {CONFIRMED_AT_ANNOTATION: stale}}}, _content_type=MERGE_PATCH
    )
    time.sleep(3)
    assert cluster.taint(dead, OUT_OF_SERVICE, "NoExecute") is None, "fenced on a confirmation older than a heartbeat"

    cluster.core.patch_node(
        dead,
        {"metadata": {"annotations": {CONFIRMED_AT_ANNOTATION: format_time(time.time())}}},
        _content_type=MERGE_PATCH,
    )
    taint = wait_for(lambda: cluster.taint(dead, OUT_OF_SERVICE, "NoExecute"), 10, "the out-of-service taint")
    assert taint["value"] == "nodeshutdown" and taint["timeAdded"]
    marks = cluster.node(dead)["metadata"]["annotations"]
    assert marks[FENCED_BY_ANNOTATION] == "taintkeeper-controller (--auto-fence-after 2s)"
    wait_for(lambda: not exists(cluster, web), 10, "the pod force deleted")
    wait_for(lambda: node_events(cluster, dead, "NodeAutoFenced"), 10, "the NodeAutoFenced event")
    assert controller.metric("taintkeeper_auto_fenced_nodes_total") == 1
