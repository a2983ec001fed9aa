"""A worker dies and comes back: tests/integration/test_node_lifecycle.py's main scenario, with a
real kubelet instead of a simulated one and the controller running in a pod. The provider stops
the node's kubelet (no more Lease renewals or status: `docker stop` on kind, SIGKILL to the
kubelet on the local cluster) and starts it again.

The controller runs with --node-monitor-period=2s --node-monitor-grace-period=20s
(tests/e2e/overlay/settings); the kubelets renew their Lease every 5 s (kind) or 2 s (local).
"""

from __future__ import annotations

import time

import pytest

from kube.timestamps import parse_time
from tests.e2e.cluster import NOT_READY, UNREACHABLE, E2ECluster, toleration, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("webhook_ready")]

GRACE = 20  # --node-monitor-grace-period in the overlay
SHORT = 10  # tolerationSeconds of the pod that must be evicted


@pytest.mark.timeout(900)
def test_a_stopped_worker_is_tainted_its_pods_evicted_on_schedule_and_it_recovers(
    e2e: E2ECluster, namespace: str, victim: str
):
    short = "short"  # tolerates unreachable for 10 s: evicted
    forever = "forever"  # tolerates unreachable without a limit: stays
    default = "default"  # the webhook's 300 s: outlives the test
    elsewhere = "elsewhere"  # on the healthy worker, 10 s: untouched
    e2e.create_pod(namespace, short, node=victim, tolerations=[toleration(UNREACHABLE, SHORT)])
    e2e.create_pod(namespace, forever, node=victim, tolerations=[toleration(UNREACHABLE)])
    created = e2e.create_pod(namespace, default, node=victim)
    assert created["spec"]["tolerations"][1] == toleration(UNREACHABLE, 300)
    e2e.create_pod(namespace, elsewhere, node=e2e.bystander, tolerations=[toleration(UNREACHABLE, SHORT)])
    for name in (short, forever, default, elsewhere):

        def running(name: str = name) -> bool:
            return e2e.pod_phase(namespace, name) == "Running"

        wait_for(running, 180, f"pod {name} Running")

    stopped = time.time()
    e2e.provider.stop_node(victim)

    # The node lifecycle monitor: conditions Unknown after the grace period, then the taints.
    wait_for(lambda: e2e.ready(victim) == "Unknown", GRACE + 60, f"{victim} Ready=Unknown")
    ready = e2e.condition(victim, "Ready")
    assert ready is not None and ready["reason"] == "NodeStatusUnknown"
    assert time.time() - stopped >= GRACE - 5  # not before the grace period (5 s: a Lease renewal)
    wait_for(lambda: UNREACHABLE in e2e.taint_keys(victim, "NoSchedule"), 60, "unreachable:NoSchedule")
    taint = wait_for(lambda: e2e.taint(victim, UNREACHABLE, "NoExecute"), 60, "unreachable:NoExecute")
    assert NOT_READY not in e2e.taint_keys(victim, "NoExecute")
    tainted_at = parse_time(taint.get("timeAdded"))
    assert tainted_at is not None, f"the NoExecute taint has no timeAdded: {taint}"
    wait_for(
        lambda: (e2e.pod_condition(namespace, forever, "Ready") or {}).get("status") == "False",
        60,
        "the stopped node's pods marked NotReady",
    )

    # The taint eviction manager: the 10 s pod goes 10 s after the taint, the others stay.
    wait_for(lambda: e2e.evicted(namespace, short), SHORT + 60, "the 10 s pod evicted", interval=0.5)
    evicted_after = time.time() - tainted_at
    assert evicted_after >= SHORT - 1.5, f"evicted {evicted_after:.1f}s after the taint, before its {SHORT}s"
    assert evicted_after <= SHORT + 30, f"evicted only {evicted_after:.1f}s after the taint"
    pod = e2e.pod(namespace, short)
    if pod is not None:  # still Terminating: the kubelet that would finish the deletion is stopped
        disruption = next(c for c in pod["status"].get("conditions") or [] if c["type"] == "DisruptionTarget")
        assert (disruption["status"], disruption["reason"]) == ("True", "DeletionByTaintManager")
        # 1.35+ track pod generations (locked on): the condition names the one it was written for, the
        # last before the graceful DELETE, which bumps a generation by one (1.20 sets none)
        generation = pod["metadata"].get("generation")
        written_for = generation - 1 if generation and pod["metadata"].get("deletionTimestamp") else generation
        assert disruption.get("observedGeneration") == written_for, (disruption, pod["metadata"])
    for name in (forever, default, elsewhere):
        assert not e2e.evicted(namespace, name), f"pod {name} was evicted"
    assert e2e.lifecycle_taints(e2e.bystander) == []

    # Back again: the kubelet reports Ready, the controller lifts both taints, nobody else goes.
    e2e.provider.start_node(victim)
    wait_for(lambda: e2e.ready(victim) == "True", 240, f"{victim} Ready again", interval=2)
    wait_for(lambda: e2e.lifecycle_taints(victim) == [], 60, f"the {UNREACHABLE} taints lifted from {victim}")
    lifted_after = time.time() - tainted_at
    survivors = [forever, elsewhere]
    if lifted_after < 300 - 5:  # the webhook's 300 s had not run out: that pod must have been spared too
        survivors.append(default)
    for name in survivors:
        assert not e2e.evicted(namespace, name), f"pod {name} was evicted"
    wait_for(
        lambda: e2e.pod(namespace, short) is None, 180, "the evicted pod's deletion finished by its kubelet", interval=2
    )
