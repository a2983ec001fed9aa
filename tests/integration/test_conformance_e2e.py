"""Scenarios upstream kube-controller-manager 1.20.2 handles, end to end: simulated kubelets against
the real kube-apiserver and the controller as a process. taintkeeper got each of them wrong once (the
fixes are in abed3df); these keep them right.
"""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from kube.timestamps import format_time
from tests.integration.kube import api_time, raw, wait_for
from tests.integration.simulated import NR, UR, Cluster, unreachable

ZONE_LABEL = "topology.kubernetes.io/zone"
CONTROLLER_LOGIC = pytest.mark.version_independent(
    "the controller's own decisions (zones, the brake, taint swaps, matching tolerations); what it reads and writes "
    "on simulated nodes (heartbeats, first-heard dating, taints, events) test_node_lifecycle keeps on 1.20"
)


def relabel_zone(cluster: Cluster, name: str, zone: str) -> None:
    cluster.core.patch_node(
        name, {"metadata": {"labels": {ZONE_LABEL: zone}}}, _content_type="application/strategic-merge-patch+json"
    )


def registered(cluster: Cluster, *names: str) -> None:
    """Wait until the controller has registered these nodes (its RegisteredNode events)."""

    def all_registered() -> bool:
        events = raw(cluster.core.list_namespaced_event, "default", field_selector="reason=RegisteredNode")["items"]
        return set(names) <= {e["involvedObject"]["name"] for e in events}

    wait_for(all_registered, 15, f"RegisteredNode for {', '.join(names)}")


@CONTROLLER_LOGIC
def test_a_node_moved_to_a_new_zone_is_tainted_when_it_dies(cluster: Cluster):
    """A cloud controller manager labels a known node with a zone no node had."""
    mover, *_ = cluster.sim.add_nodes(3, zones=["a"])
    controller = cluster.start_controller()
    registered(cluster, mover)
    relabel_zone(cluster, mover, f"brand-new-{mover}")
    cluster.sim.stop_heartbeats(mover)
    wait_for(lambda: cluster.taint(mover, UR, "NoExecute"), 20, "unreachable:NoExecute on the moved node")
    assert "Traceback" not in controller.log_text()


@CONTROLLER_LOGIC
def test_after_every_node_died_and_was_replaced_a_new_dead_node_is_tainted(cluster: Cluster):
    """The all-zones brake must not outlive the nodes it was entered for."""
    old = cluster.sim.add_nodes(2, zones=["a"])
    controller = cluster.start_controller()
    cluster.sim.stop_heartbeats(*old)
    wait_for(lambda: "entering master disruption mode" in controller.log_text(), 20, "the brake")
    cluster.sim.delete_nodes(*old)
    new = cluster.sim.add_nodes(3, zones=["a"])
    registered(cluster, *new)
    cluster.sim.stop_heartbeats(new[0])
    wait_for(lambda: cluster.taint(new[0], UR, "NoExecute"), 20, "unreachable:NoExecute on the new dead node")
    assert all(cluster.taint(n, UR, "NoExecute") is None for n in new[1:])


@CONTROLLER_LOGIC
def test_a_not_ready_to_unreachable_swap_keeps_the_pods_eviction_time(cluster: Cluster):
    """A node that goes from Ready=False to silent does not restart its pods' clocks."""
    sick, *_ = cluster.sim.add_nodes(3, zones=["a"])
    both = [
        {"key": NR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 12},
        {"key": UR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 12},
    ]
    pod = cluster.pods(sick, both, "both")
    cluster.start_controller()
    cluster.sim.set_condition(sick, "Ready", "False", reason="KubeletNotReady")
    not_ready = wait_for(lambda: cluster.taint(sick, NR, "NoExecute"), 10, "not-ready:NoExecute")
    cluster.sim.stop_heartbeats(sick)
    swapped = wait_for(lambda: cluster.taint(sick, UR, "NoExecute"), 15, "the swap to unreachable:NoExecute")
    assert api_time(swapped["timeAdded"]) > api_time(not_ready["timeAdded"])  # a fresh taint, as upstream
    assert cluster.taint(sick, NR, "NoExecute") is None
    wait_for(lambda: cluster.deleted(pod), 20, "the pod deleted")
    deleted = time.time()
    assert deleted - api_time(not_ready["timeAdded"]) <= 12 + 2  # timeAdded has whole seconds


@CONTROLLER_LOGIC
def test_the_first_matching_toleration_decides_how_long_a_taint_is_tolerated(cluster: Cluster):
    """Upstream GetMatchingTolerations takes the first toleration matching each taint."""
    dead, *_ = cluster.sim.add_nodes(3, zones=["a"])
    five = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
    forever_first = cluster.pods(dead, [*unreachable(None), five], "forever-first")
    five_first = cluster.pods(dead, [five, *unreachable(None)], "five-first")
    cluster.start_controller()
    cluster.sim.stop_heartbeats(dead)
    taint = wait_for(lambda: cluster.taint(dead, UR, "NoExecute"), 15, "unreachable:NoExecute")
    wait_for(lambda: cluster.deleted(five_first), 12, "the pod whose first match says 5 s deleted")
    assert time.time() - api_time(taint["timeAdded"]) >= 5 - 1
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # well past 5 s after the taint: the forever-first pod stays
        assert not cluster.deleted(forever_first)
        time.sleep(0.5)


def test_a_pod_bound_to_a_dead_node_counts_from_its_binding_and_is_marked_not_ready(cluster: Cluster):
    """The pod was created before the taint and bound after it (it waited Pending)."""
    dead, *_ = cluster.sim.add_nodes(3, zones=["a"])
    cluster.core.create_namespaced_pod(
        cluster.namespace,
        client.V1Pod.model_validate(
            {
                "metadata": {"name": "late"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}], "tolerations": [{**unreachable(8)[0]}]},
            }
        ),
    )
    cluster.start_controller()
    cluster.sim.stop_heartbeats(dead)
    wait_for(lambda: cluster.taint(dead, UR, "NoExecute"), 15, "unreachable:NoExecute")
    time.sleep(2)  # the pod is older than the taint by more than this
    # Upstream's processPod flips only a Ready condition the pod has (MarkPodsNotReady): give it one,
    # as a kubelet that ran it elsewhere would have.
    cluster.core.patch_namespaced_pod_status(
        "late",
        cluster.namespace,
        {
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": format_time(time.time())}]
            }
        },
        _content_type="application/strategic-merge-patch+json",
    )
    cluster.core.create_namespaced_binding(
        cluster.namespace,
        client.V1Binding.model_validate({"metadata": {"name": "late"}, "target": {"kind": "Node", "name": dead}}),
        _preload_content=False,
    )
    bound = time.time()
    pod = raw(cluster.core.read_namespaced_pod, "late", cluster.namespace)
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["status"] == "True" and api_time(scheduled["lastTransitionTime"]) >= bound - 1
    wait_for(lambda: cluster.pod_ready("late") == "False", 10, "the late pod marked NotReady")
    assert time.time() - bound < 8 - 1 and not cluster.deleted("late")  # not evicted at once
    wait_for(lambda: cluster.deleted("late"), 15, "the late pod deleted when its 8 s ran out")
    assert 8 - 1.5 <= time.time() - bound <= 8 + 3
