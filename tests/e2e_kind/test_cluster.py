"""The cluster is what the suite claims: upstream's pieces are off and taintkeeper's are running.

Without these, a passing node-failure test could be kube-controller-manager's work, and a
passing webhook test the built-in admission plugin's.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.e2e_kind.cluster import (
    CONTROL_PLANE_TAINT,
    NOT_READY,
    SYSTEM_NAMESPACE,
    UNREACHABLE,
    KindCluster,
    wait_for,
)

pytestmark = pytest.mark.kind


def flag(kind: KindCluster, static_pod: str, name: str) -> str | None:
    """The value of `--name=...` in a control-plane static pod's command line."""
    pod = kind.raw(kind.core.read_namespaced_pod, f"{static_pod}-{kind.control_plane}", "kube-system")
    container = pod["spec"]["containers"][0]
    for argument in [*container.get("command", []), *container.get("args", [])]:
        if argument.startswith(f"--{name}="):
            return argument.split("=", 1)[1]
    return None


def test_the_built_in_default_toleration_seconds_plugin_is_off(kind: KindCluster):
    disabled = flag(kind, "kube-apiserver", "disable-admission-plugins") or ""
    assert "DefaultTolerationSeconds" in disabled.split(","), disabled


def test_kube_controller_manager_runs_no_node_lifecycle_or_taint_eviction(kind: KindCluster):
    controllers = (flag(kind, "kube-controller-manager", "controllers") or "*").split(",")
    assert "-node-lifecycle-controller" in controllers or "-nodelifecycle" in controllers, controllers
    assert "-taint-eviction-controller" in controllers, controllers


def test_one_controller_replica_holds_the_lease(kind: KindCluster):
    coordination = client.CoordinationV1Api(kind.api_client)

    def holder() -> str | None:
        lease = kind.raw(coordination.read_namespaced_lease, "taintkeeper-controller", SYSTEM_NAMESPACE)
        return lease["spec"].get("holderIdentity")

    wait_for(holder, 60, "a holder of the Lease taintkeeper-system/taintkeeper-controller")


def test_taintkeeper_runs_nowhere_near_the_node_the_tests_stop(kind: KindCluster):
    pods = kind.raw(kind.core.list_namespaced_pod, SYSTEM_NAMESPACE)["items"]
    on_victim = [p["metadata"]["name"] for p in pods
                 if p["spec"].get("nodeName") == kind.victim and not p["metadata"].get("deletionTimestamp")
                 and p["status"].get("phase") not in ("Succeeded", "Failed")]
    assert on_victim == [], f"taintkeeper pods on {kind.victim}: the overlay's placement patch is not in effect"


def test_new_nodes_lose_their_not_ready_taints_once_ready(kind: KindCluster):
    # The apiserver gives every new node node.kubernetes.io/not-ready:NoSchedule; with upstream's
    # node lifecycle controller off, only taintkeeper's controller takes it away again.
    nodes = [kind.control_plane, kind.victim, kind.bystander]
    wait_for(lambda: all(kind.ready(n) == "True" for n in nodes), 120, "all nodes Ready")
    wait_for(lambda: all(kind.lifecycle_taints(n) == [] for n in nodes), 60,
             f"no {NOT_READY} or {UNREACHABLE} taints on Ready nodes")
    # The control plane's own taint is kubeadm's and is left alone.
    assert kind.taint(kind.control_plane, CONTROL_PLANE_TAINT, "NoSchedule") is not None
