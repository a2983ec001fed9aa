"""A worker failed the ways kind's users fail one, each in turn on the victim: its container paused (`docker
pause`: the kubelet frozen with everything else), cut off from kind's network (`docker network disconnect`),
its kubelet stopped inside it (`systemctl stop kubelet`: containers run on). `docker stop` is
test_node_failure's. Each time: Ready Unknown after the grace period, the unreachable taints, the pod that
tolerates 5 s evicted on time and the one that tolerates it forever kept; back: the taints lifted.

On the kind provider only: the local cluster's nodes are processes (their failures: tests/realnodes).
"""

from __future__ import annotations

import time

import pytest

from kube.timestamps import parse_time
from tests.e2e.cluster import UNREACHABLE, E2ECluster, toleration, wait_for
from tests.e2e.providers import KindProvider

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("webhook_ready")]

GRACE = 20  # --node-monitor-grace-period in the overlay
SHORT = 5  # tolerationSeconds of the pod that must be evicted


@pytest.mark.timeout(600)
@pytest.mark.parametrize("how", KindProvider.FAILURES)
def test_a_worker_failed_as_kind_users_do_is_tainted_its_pod_evicted_on_time_and_it_recovers(
    e2e: E2ECluster, namespace: str, victim: str, how: str
):
    provider = e2e.provider
    if not isinstance(provider, KindProvider):
        pytest.skip("fails a kind node container: the kind provider only")
    short, forever = f"short-{how}", f"forever-{how}"
    e2e.create_pod(namespace, short, node=victim, tolerations=[toleration(UNREACHABLE, SHORT)])
    e2e.create_pod(namespace, forever, node=victim, tolerations=[toleration(UNREACHABLE)])
    for name in (short, forever):

        def running(name: str = name) -> bool:
            return e2e.pod_phase(namespace, name) == "Running"

        wait_for(running, 180, f"pod {name} Running")

    address = provider.node_address(victim)
    failed = time.time()
    provider.fail_node(victim, how)
    try:
        wait_for(lambda: e2e.ready(victim) == "Unknown", GRACE + 60, f"{victim} Ready=Unknown ({how})")
        unknown_after = time.time() - failed
        assert unknown_after >= GRACE - 5  # not before the grace period (5 s: a Lease renewal)
        taint = wait_for(lambda: e2e.taint(victim, UNREACHABLE, "NoExecute"), 60, "unreachable:NoExecute")
        tainted_at = parse_time(taint.get("timeAdded"))
        assert tainted_at is not None, taint
        wait_for(lambda: e2e.evicted(namespace, short), SHORT + 60, f"the {SHORT} s pod evicted", interval=0.5)
        evicted_after = time.time() - tainted_at
        assert SHORT - 1.5 <= evicted_after <= SHORT + 30, f"evicted {evicted_after:.1f}s after the taint"
        assert not e2e.evicted(namespace, forever)
        assert e2e.lifecycle_taints(e2e.bystander) == []
    finally:
        provider.restore_node(victim, how, address)

    restored = time.time()
    wait_for(lambda: e2e.ready(victim) == "True", 240, f"{victim} Ready again ({how})", interval=2)
    wait_for(lambda: e2e.lifecycle_taints(victim) == [], 60, f"the taints lifted from {victim} ({how})")
    assert not e2e.evicted(namespace, forever)
    print(
        f"\nkind node failure {how}: Unknown {unknown_after:.1f}s after, "
        f"unreachable:NoExecute {tainted_at - failed:.1f}s after, "
        f"the {SHORT} s pod evicted {evicted_after:.1f}s after the taint, the forever pod kept, "
        f"the taints lifted {time.time() - restored:.1f}s after the node was back"
    )
