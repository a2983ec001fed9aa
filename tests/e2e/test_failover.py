"""taintkeeper's own pods fail: the controller's leader is killed, the webhook's pods are gone.

The controller runs active/passive on the Lease taintkeeper-system/taintkeeper-controller
(--leader-elect-lease-duration 15s, --leader-elect-retry-period 2s: the defaults); the
MutatingWebhookConfiguration has failurePolicy Ignore, and the controller backfills the default
tolerations of pods admitted without them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from kube.timestamps import parse_time
from tests.e2e.cluster import SYSTEM_NAMESPACE, UNREACHABLE, E2ECluster, default_tolerations, toleration, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("webhook_ready")]

LEASE = "taintkeeper-controller"
LEASE_DURATION = 15
RETRY_PERIOD = 2
TOLERATED = 40  # seconds the pending pod tolerates `unreachable`: long enough to outlast the handover


def lease_holder(e2e: E2ECluster) -> str:
    lease = e2e.raw(client.CoordinationV1Api(e2e.api_client).read_namespaced_lease, LEASE, SYSTEM_NAMESPACE)
    return lease["spec"].get("holderIdentity") or ""


def controller_pod(e2e: E2ECluster, identity: str) -> dict[str, Any]:
    """The running controller pod whose process holds `identity` (hostname_uuid; the hostname is the pod's name)."""
    pods = e2e.raw(
        e2e.core.list_namespaced_pod, SYSTEM_NAMESPACE, label_selector="app.kubernetes.io/component=controller"
    )["items"]
    (pod,) = [p for p in pods if identity.startswith(f"{p['metadata']['name']}_")]
    return pod


@pytest.mark.timeout(900)
def test_killing_the_leaders_container_hands_the_lease_over_and_pending_evictions_stay_on_time(
    e2e: E2ECluster, namespace: str, victim: str
):
    e2e.create_pod(namespace, "pending", node=victim, tolerations=[toleration(UNREACHABLE, TOLERATED)])
    e2e.create_pod(namespace, "forever", node=victim, tolerations=[toleration(UNREACHABLE)])
    for name in ("pending", "forever"):

        def running(name: str = name) -> bool:
            return e2e.pod_phase(namespace, name) == "Running"

        wait_for(running, 180, f"pod {name} Running")

    e2e.provider.stop_node(victim)
    taint = wait_for(lambda: e2e.taint(victim, UNREACHABLE, "NoExecute"), 120, "unreachable:NoExecute")
    tainted_at = parse_time(taint.get("timeAdded"))
    assert tainted_at is not None, taint

    # The leader has the eviction pending now; kill its process outright (no Lease release).
    leader = lease_holder(e2e)
    pod = controller_pod(e2e, leader)
    (status,) = pod["status"]["containerStatuses"]
    killed_at = time.time()
    e2e.provider.kill_container(pod["spec"]["nodeName"], status["containerID"])
    successor = wait_for(
        lambda: (lambda h: h if h and h != leader else None)(lease_holder(e2e)),
        LEASE_DURATION + 3 * RETRY_PERIOD + 10,
        "another holder of the Lease",
        interval=0.2,
    )
    handover = time.time() - killed_at
    # The Lease runs out LEASE_DURATION after its last renewal (at most RETRY_PERIOD before the kill);
    # a candidate sees that on its next try (every RETRY_PERIOD); 1 s for this poll and clock skew.
    assert handover <= LEASE_DURATION + RETRY_PERIOD + 1, f"the Lease changed hands {handover:.1f}s after the kill"
    print(f"lease handed over {handover:.1f}s after the leader was killed: {leader} -> {successor}")

    # The new leader finds the taint and keeps its clock: the eviction comes TOLERATED s after the taint.
    wait_for(lambda: e2e.evicted(namespace, "pending"), TOLERATED + 60, "the pending pod evicted", interval=0.5)
    evicted_after = time.time() - tainted_at
    assert TOLERATED - 1.5 <= evicted_after <= TOLERATED + 10, f"evicted {evicted_after:.1f}s after the taint"
    assert not e2e.evicted(namespace, "forever")


@pytest.fixture
def webhook_scaled_down(e2e: E2ECluster) -> Iterator[None]:
    """Both webhook pods deleted, with none to replace them, until the test ends; then 2 again."""
    apps = client.AppsV1Api(e2e.api_client)
    apps.patch_namespaced_deployment_scale("taintkeeper-webhook", SYSTEM_NAMESPACE, {"spec": {"replicas": 0}})
    try:

        def gone() -> bool:
            pods = e2e.raw(
                e2e.core.list_namespaced_pod, SYSTEM_NAMESPACE, label_selector="app.kubernetes.io/component=webhook"
            )["items"]
            return not pods

        wait_for(gone, 120, "both webhook pods gone")

        def refused_at_once() -> bool:
            # The pods' deletion reaches the apiserver's route to the Service (EndpointSlice, then kube-proxy's
            # rules) a moment later; until then a call can still go to a dead pod's address and wait out the
            # webhook's timeoutSeconds (5 s, seen once in CI). Wait for the route, not for the clock.
            started = time.monotonic()
            probe = e2e.create_pod(namespace="default", name="webhook-probe", dry_run=True)
            return not probe["spec"].get("tolerations") and time.monotonic() - started < 1

        wait_for(refused_at_once, 60, "the apiserver's calls to the webhook refused at once", interval=0.5)
        yield
    finally:
        apps.patch_namespaced_deployment_scale("taintkeeper-webhook", SYSTEM_NAMESPACE, {"spec": {"replicas": 2}})

        def available() -> bool:
            status = e2e.raw(apps.read_namespaced_deployment, "taintkeeper-webhook", SYSTEM_NAMESPACE)["status"]
            return status.get("availableReplicas") == 2 and status.get("updatedReplicas") == 2

        wait_for(available, 180, "the webhook Available again with 2 pods")
        wait_for(
            lambda: (
                e2e.create_pod(namespace="default", name="webhook-probe", dry_run=True)["spec"].get("tolerations")
                == default_tolerations()
            ),
            120,
            "the webhook adding tolerations again",
            interval=2,
        )


def test_with_both_webhook_pods_gone_pods_are_still_admitted_and_the_backfill_adds_the_defaults(
    e2e: E2ECluster, namespace: str, webhook_scaled_down: None
):
    started = time.monotonic()
    created = e2e.create_pod(namespace, "admitted-without-webhook")
    admitted_in = time.monotonic() - started
    assert not created["spec"].get("tolerations"), "admitted with tolerations: was the webhook still answering?"
    # failurePolicy Ignore: no endpoints behind the Service, so the call fails at once (no timeout).
    assert admitted_in < 5, f"admission took {admitted_in:.1f}s"

    def backfilled() -> bool:
        pod = e2e.pod(namespace, "admitted-without-webhook")
        return pod is not None and pod["spec"].get("tolerations") == default_tolerations()

    wait_for(backfilled, 60, "the controller's backfill to add the default tolerations", interval=0.5)
