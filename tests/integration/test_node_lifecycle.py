"""The node lifecycle monitor end to end: simulated kubelets (hack/simulator.py) against the real
kube-apiserver, the controller as a process with short grace periods: a dead node marked, tainted,
drained and recovered; condition taints; partially and fully disrupted zones.
"""

from __future__ import annotations

import itertools
import time

import pytest

from tests.integration.kube import api_time, raw, wait_for
from tests.integration.simulated import NR, UR, Cluster, unreachable


def test_a_dead_node_is_marked_tainted_and_drained_on_schedule_and_recovers(cluster: Cluster):
    dead, *healthy = cluster.sim.add_nodes(3, zones=["a"])
    now_pod = cluster.pods(dead, None, "untolerating")
    five = cluster.pods(dead, unreachable(5), "five")
    sixty = cluster.pods(dead, unreachable(60), "sixty")
    forever = cluster.pods(dead, unreachable(None), "forever")
    cluster.start_controller()
    stopped = time.time()
    cluster.sim.stop_heartbeats(dead)

    wait_for(lambda: cluster.condition(dead, "Ready")["status"] == "Unknown", 15, "Ready=Unknown")
    for condition_type in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"):
        condition = cluster.condition(dead, condition_type)
        assert (condition["status"], condition["reason"]) == ("Unknown", "NodeStatusUnknown")
        assert condition["message"] == "Kubelet stopped posting node status."
    wait_for(lambda: cluster.taints(dead, "NoSchedule") == [UR], 10, "unreachable:NoSchedule")
    taint = wait_for(lambda: cluster.taint(dead, UR, "NoExecute"), 10, "unreachable:NoExecute")
    tainted_at = api_time(taint["timeAdded"])
    assert tainted_at - stopped < 4 + 1 + 2 + 1  # grace + lease period + monitor period, + slack
    wait_for(lambda: cluster.pod_ready(forever) == "False", 10, "pods marked NotReady")

    wait_for(lambda: cluster.deleted(now_pod), 5, "the untolerating pod deleted")
    wait_for(lambda: cluster.deleted(five), 12, "the 5 s pod deleted")
    deleted_five = time.time()
    assert 5 - 1 <= deleted_five - tainted_at <= 5 + 2  # timeAdded has whole seconds
    assert not cluster.deleted(forever)
    assert not cluster.deleted(sixty)

    cluster.sim.resume_heartbeats(dead)
    wait_for(
        lambda: cluster.taints(dead, "NoExecute") == [] and cluster.taints(dead, "NoSchedule") == [],
        15,
        "taints removed after the node returned",
    )

    def cancel_recorded() -> bool:  # events are posted asynchronously, after the cancellation
        events = raw(
            cluster.core.list_namespaced_event, cluster.namespace, field_selector=f"involvedObject.name={sixty}"
        )
        return "Cancelling deletion of Pod " + f"{cluster.namespace}/{sixty}" in [e["message"] for e in events["items"]]

    wait_for(cancel_recorded, 10, "the Cancelling deletion event")
    time.sleep(1)
    assert not cluster.deleted(sixty)
    assert not cluster.deleted(forever)
    for name in healthy:
        assert cluster.taints(name, "NoExecute") == []


def test_ready_false_gets_the_not_ready_taints(cluster: Cluster):
    sick, *_ = cluster.sim.add_nodes(3, zones=["a"])
    cluster.start_controller()
    cluster.sim.set_condition(sick, "Ready", "False", reason="KubeletNotReady")
    wait_for(lambda: cluster.taints(sick, "NoSchedule") == [NR], 10, "not-ready:NoSchedule")
    wait_for(lambda: cluster.taints(sick, "NoExecute") == [NR], 10, "not-ready:NoExecute")
    cluster.sim.set_condition(sick, "Ready", "True", reason="KubeletReady")
    wait_for(
        lambda: not cluster.taints(sick, "NoSchedule") and not cluster.taints(sick, "NoExecute"),
        10,
        "not-ready taints removed",
    )


@pytest.mark.parametrize(
    ("condition_type", "key"),
    [
        ("MemoryPressure", "node.kubernetes.io/memory-pressure"),
        ("DiskPressure", "node.kubernetes.io/disk-pressure"),
        ("PIDPressure", "node.kubernetes.io/pid-pressure"),
        ("NetworkUnavailable", "node.kubernetes.io/network-unavailable"),
    ],
)
def test_each_pressure_condition_gets_its_no_schedule_taint(cluster: Cluster, condition_type: str, key: str):
    node, *_ = cluster.sim.add_nodes(1, zones=["a"])
    cluster.start_controller()
    cluster.sim.set_condition(node, condition_type, "True")
    wait_for(lambda: cluster.taints(node, "NoSchedule") == [key], 10, f"{key}:NoSchedule")
    assert cluster.taints(node, "NoExecute") == []
    cluster.sim.set_condition(node, condition_type, "False")
    wait_for(lambda: cluster.taints(node, "NoSchedule") == [], 10, f"{key} removed")


def test_cordoning_adds_unschedulable_and_leaves_foreign_taints(cluster: Cluster):
    node, *_ = cluster.sim.add_nodes(1, zones=["a"])
    foreign = {"key": "example.com/dedicated", "value": "gpu", "effect": "NoSchedule"}
    cluster.core.patch_node(
        node, {"spec": {"taints": [foreign]}}, _content_type="application/strategic-merge-patch+json"
    )
    cluster.start_controller()
    cluster.core.patch_node(
        node, {"spec": {"unschedulable": True}}, _content_type="application/strategic-merge-patch+json"
    )
    wait_for(
        lambda: cluster.taints(node, "NoSchedule") == ["example.com/dedicated", "node.kubernetes.io/unschedulable"],
        10,
        "unschedulable",
    )
    kept = cluster.taint(node, "example.com/dedicated", "NoSchedule")
    assert kept is not None and kept["value"] == "gpu"


def dead_zone_taint_times(cluster: Cluster, names: list[str]) -> list[float]:
    times = []
    for name in names:
        taint = cluster.taint(name, UR, "NoExecute")
        if taint:
            times.append(api_time(taint["timeAdded"]))
    return sorted(times)


def test_a_partially_disrupted_small_zone_is_not_tainted(cluster: Cluster):
    zone_a = cluster.sim.add_nodes(5, zones=["a"])
    cluster.sim.add_nodes(4, zones=["b", "c"])
    # The three fall silent before the controller starts, so it first sees all of them in one pass and their
    # grace runs out in one pass too: 60 % of a 5-node zone, PartialDisruption, a small zone's rate 0. Falling
    # silent under a running controller, their last renewals up to a lease period apart (more on a loaded
    # machine), one may be seen dead alone first: 1 of 5 is a Normal zone, tainted at once, as upstream does.
    cluster.sim.stop_heartbeats(*zone_a[:3])
    cluster.start_controller("--node-eviction-rate=10", "--secondary-node-eviction-rate=10")
    wait_for(
        lambda: all(cluster.taints(n, "NoSchedule") == [UR] for n in zone_a[:3]),
        20,
        "the dead nodes marked unreachable",
    )
    time.sleep(3)  # three monitor periods: long enough for any taint the queue would let through
    assert dead_zone_taint_times(cluster, zone_a) == []


def test_a_partially_disrupted_large_zone_is_tainted_at_the_secondary_rate(cluster: Cluster):
    zone_a = cluster.sim.add_nodes(5, zones=["a"])
    cluster.sim.add_nodes(4, zones=["b", "c"])
    cluster.start_controller(
        "--node-eviction-rate=10", "--secondary-node-eviction-rate=0.25", "--large-cluster-size-threshold=3"
    )
    cluster.sim.stop_heartbeats(*zone_a[:3])
    wait_for(lambda: len(dead_zone_taint_times(cluster, zone_a)) >= 3, 30, "all three tainted at 0.25/s")
    times = dead_zone_taint_times(cluster, zone_a)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # The first may go at the normal rate before the zone's state turns (as upstream); after that 4 s apart.
    assert max(gaps) >= 3


def test_when_every_node_is_dead_no_node_keeps_a_no_execute_taint(cluster: Cluster):
    names = cluster.sim.add_nodes(4, zones=["a", "b"])
    cluster.start_controller()
    cluster.sim.stop_heartbeats(*names)
    wait_for(lambda: all(cluster.condition(n, "Ready")["status"] == "Unknown" for n in names), 20, "all Unknown")
    wait_for(lambda: all(cluster.taints(n, "NoExecute") == [] for n in names), 10, "no NoExecute taints")
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:  # and none come back while everything stays dead
        assert all(cluster.taints(n, "NoExecute") == [] for n in names)
        time.sleep(0.5)
    assert cluster.controller is not None
    assert "entering master disruption mode" in cluster.controller.log_text()
