"""A worker dies and comes back: tests/integration/test_node_lifecycle.py's main scenario, with a
real kubelet instead of a simulated one. `docker stop` ends the node's kubelet (no more Lease
renewals or status), `docker start` brings it back.

The controller runs with --node-monitor-period=2s --node-monitor-grace-period=20s
(tests/e2e_kind/overlay), the kubelets renew their Lease every 5 s (hack/kind-config.yaml).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from controller.objects import parse_time
from tests.e2e_kind.cluster import NOT_READY, UNREACHABLE, KindCluster, docker, toleration, wait_for

pytestmark = [pytest.mark.kind, pytest.mark.usefixtures("webhook_ready")]

GRACE = 20  # --node-monitor-grace-period in the overlay
SHORT = 10  # tolerationSeconds of the pod that must be evicted


@pytest.fixture
def victim(kind: KindCluster) -> Iterator[str]:
    """The worker to stop; started again (and waited for) however the test ends."""
    assert kind.container_running(kind.victim), f"{kind.victim} is not running before the test"
    wait_for(lambda: kind.ready(kind.victim) == "True" and kind.lifecycle_taints(kind.victim) == [], 120,
             f"{kind.victim} Ready and untainted before the test")
    try:
        yield kind.victim
    finally:
        if not kind.container_running(kind.victim):
            docker("start", kind.victim)
            wait_for(lambda: kind.ready(kind.victim) == "True", 300, f"{kind.victim} Ready again (cleanup)",
                     interval=2)


@pytest.mark.timeout(900)
def test_a_stopped_worker_is_tainted_its_pods_evicted_on_schedule_and_it_recovers(
        kind: KindCluster, namespace: str, victim: str):
    short = "short"  # tolerates unreachable for 10 s: evicted
    forever = "forever"  # tolerates unreachable without a limit: stays
    default = "default"  # the webhook's 300 s: outlives the test
    elsewhere = "elsewhere"  # on the healthy worker, 10 s: untouched
    kind.create_pod(namespace, short, node=victim, tolerations=[toleration(UNREACHABLE, SHORT)])
    kind.create_pod(namespace, forever, node=victim, tolerations=[toleration(UNREACHABLE)])
    created = kind.create_pod(namespace, default, node=victim)
    assert created["spec"]["tolerations"][1] == toleration(UNREACHABLE, 300)
    kind.create_pod(namespace, elsewhere, node=kind.bystander, tolerations=[toleration(UNREACHABLE, SHORT)])
    for name in (short, forever, default, elsewhere):
        wait_for(lambda name=name: kind.pod_phase(namespace, name) == "Running", 180, f"pod {name} Running")

    stopped = time.time()
    docker("stop", victim)

    # The node lifecycle monitor: conditions Unknown after the grace period, then the taints.
    wait_for(lambda: kind.ready(victim) == "Unknown", GRACE + 60, f"{victim} Ready=Unknown")
    ready = kind.condition(victim, "Ready")
    assert ready is not None and ready["reason"] == "NodeStatusUnknown"
    assert time.time() - stopped >= GRACE - 5  # not before the grace period (5 s: a Lease renewal)
    wait_for(lambda: UNREACHABLE in kind.taint_keys(victim, "NoSchedule"), 60, "unreachable:NoSchedule")
    taint = wait_for(lambda: kind.taint(victim, UNREACHABLE, "NoExecute"), 60, "unreachable:NoExecute")
    assert NOT_READY not in kind.taint_keys(victim, "NoExecute")
    tainted_at = parse_time(taint.get("timeAdded"))
    assert tainted_at is not None, f"the NoExecute taint has no timeAdded: {taint}"
    wait_for(lambda: (kind.pod_condition(namespace, forever, "Ready") or {}).get("status") == "False", 60,
             "the stopped node's pods marked NotReady")

    # The taint eviction manager: the 10 s pod goes 10 s after the taint, the others stay.
    wait_for(lambda: kind.evicted(namespace, short), SHORT + 60, "the 10 s pod evicted", interval=0.5)
    evicted_after = time.time() - tainted_at
    assert evicted_after >= SHORT - 1.5, f"evicted {evicted_after:.1f}s after the taint, before its {SHORT}s"
    assert evicted_after <= SHORT + 30, f"evicted only {evicted_after:.1f}s after the taint"
    pod = kind.pod(namespace, short)
    if pod is not None:  # still Terminating: the kubelet that would finish the deletion is stopped
        disruption = next(c for c in pod["status"].get("conditions") or [] if c["type"] == "DisruptionTarget")
        assert (disruption["status"], disruption["reason"]) == ("True", "DeletionByTaintManager")
    for name in (forever, default, elsewhere):
        assert not kind.evicted(namespace, name), f"pod {name} was evicted"
    assert kind.lifecycle_taints(kind.bystander) == []

    # Back again: the kubelet reports Ready, the controller lifts both taints, nobody else goes.
    docker("start", victim)
    wait_for(lambda: kind.ready(victim) == "True", 240, f"{victim} Ready again", interval=2)
    wait_for(lambda: kind.lifecycle_taints(victim) == [], 60, f"the {UNREACHABLE} taints lifted from {victim}")
    lifted_after = time.time() - tainted_at
    survivors = [forever, elsewhere]
    if lifted_after < 300 - 5:  # the webhook's 300 s had not run out: that pod must have been spared too
        survivors.append(default)
    for name in survivors:
        assert not kind.evicted(namespace, name), f"pod {name} was evicted"
    wait_for(lambda: kind.pod(namespace, short) is None, 180, "the evicted pod's deletion finished by its kubelet",
             interval=2)
