"""A new leader judges a node's silence from when the apiserver last dated its heartbeat.

Upstream's monitor starts every node's silence from its own first look, so a node that died 40 s
before a hand-over gets a whole new grace period: marked and tainted 40 s late. taintkeeper dates the
last heartbeat by the apiserver's stamps (the Lease's and the status's managedFields times), converted
to its own clock with the offset it measured, taken as late as the bounds allow: never earlier than
the grace, never later than upstream. Each row runs the same story; what varies is what the new
leader can know.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kube.clock_offset import ClockOffset
from kube.timestamps import format_time
from tests.conformance.harness import (
    UNREACHABLE_KEY,
    UPSTREAM_TEST_SETTINGS,
    Cluster,
    lease_json,
    node_json,
    ready,
    zone_labels,
)

T0 = 1_800_000_000.0  # the node's last heartbeat, by the controller's clock
GRACE = UPSTREAM_TEST_SETTINGS.node_monitor_grace_period  # 50 s
HAND_OVER = T0 + 40.0  # the new leader's first pass
PERIOD = UPSTREAM_TEST_SETTINGS.node_monitor_period


@dataclass(frozen=True)
class Knowledge:
    skew: float = 0.0  # the apiserver's clock minus the controller's (the truth)
    measured: tuple[float, float] | None = (-0.1, 0.9)  # the offset's bounds around the skew; None: unmeasured
    lease_stamped: bool = True  # the Lease carries the apiserver's stamp
    status_stamped: bool = True  # the node's status does
    server_version: str = "v1.37.2"  # which says whether a renewal re-dates the Lease's stamp

    def offset(self) -> ClockOffset | None:
        if self.measured is None:
            return None
        return ClockOffset(self.skew + self.measured[0], self.skew + self.measured[1])


def stamp(moment: float, skew: float) -> str:
    """The apiserver's managedFields time of a write at `moment` (our clock): its own clock, whole seconds."""
    return format_time(moment + skew)


def node0_heartbeats(cluster: Cluster, moment: float, knows: Knowledge) -> None:
    """node0's kubelet renews its Lease (and the apiserver stamps it) at `moment`."""
    lease = lease_json("node0", moment)
    if knows.lease_stamped:
        lease["metadata"]["managedFields"] = [
            {"manager": "kubelet", "operation": "Update", "time": stamp(moment, knows.skew)}
        ]
    cluster.put_lease(lease)


def two_nodes(cluster: Cluster, knows: Knowledge) -> None:
    """node0, which will fall silent, and a healthy node in another zone (one dead node alone would be a
    fully disrupted cluster, never tainted)."""
    node = node_json(
        "node0",
        created=T0 - 3600,
        conditions=[ready("True", T0 - 40.0, T0 - 3600)],
        labels=zone_labels("region1", "zone-a"),
    )
    if knows.status_stamped:
        node["metadata"]["managedFields"] = [
            {"manager": "kubelet", "operation": "Update", "subresource": "status", "time": stamp(T0 - 40.0, knows.skew)}
        ]
    cluster.put_node(node)
    cluster.put_node(
        node_json(
            "node1",
            created=T0 - 3600,
            conditions=[ready("True", T0 - 40.0, T0 - 3600)],
            labels=zone_labels("region1", "zone-b"),
        )
    )


def heartbeat(cluster: Cluster, moment: float) -> None:
    cluster.put_lease(lease_json("node1", moment))


def tainted_at(knows: Knowledge) -> float:
    """The story: the node's last heartbeat at T0; the old leader's passes until it is killed; the new
    leader's first pass at T0 + 40 s, then every period. When the unreachable NoExecute taint came."""
    cluster = Cluster(T0 - 30.0)
    two_nodes(cluster, knows)
    moment = T0 - 30.0
    while moment < HAND_OVER:  # the old leader: node0's renewals seen until T0
        cluster.advance_to(moment)
        heartbeat(cluster, moment)
        if moment <= T0:
            node0_heartbeats(cluster, moment, knows)
        cluster.monitor_pass()
        moment += PERIOD
    cluster.server_clock = knows.offset()
    cluster.server_version = knows.server_version
    cluster.restart()  # the new leader: nothing of the old one's memory
    moment = HAND_OVER
    while moment < T0 + GRACE + 60.0:
        cluster.advance_to(moment)
        heartbeat(cluster, moment)
        cluster.monitor_pass()
        cluster.tainting_passes()
        if (UNREACHABLE_KEY, "NoExecute") in cluster.taints("node0"):
            return moment - T0
        moment += PERIOD
    raise AssertionError("never tainted")


UPSTREAMS = GRACE + 40.0 + PERIOD  # the new leader's first look + the grace, at the next pass: 95 s

CASES = [
    (
        "a hand-over 40 s into a node's silence: tainted at its grace, dated by the apiserver",
        Knowledge(),
        GRACE + PERIOD,
    ),
    (
        "the controller's clock 30 s ahead of the apiserver's: still not before the grace",
        Knowledge(skew=-30.0),
        GRACE + PERIOD,
    ),
    ("the controller's clock 30 s behind the apiserver's: the grace as well", Knowledge(skew=30.0), GRACE + PERIOD),
    (
        "the offset known only within 2.5 s: taken as late as it may be, the grace still",
        Knowledge(measured=(-2.0, 0.5)),
        GRACE + PERIOD,
    ),
    ("the apiserver's clock could not be measured: upstream's first look", Knowledge(measured=None), UPSTREAMS),
    ("the offset known no better than 5 s: upstream's first look", Knowledge(measured=(-4.0, 1.0)), UPSTREAMS),
    ("a Lease without the apiserver's stamp: upstream's first look", Knowledge(lease_stamped=False), UPSTREAMS),
    (
        "a status without the apiserver's stamp (it may be the later heartbeat): upstream's first look",
        Knowledge(status_stamped=False),
        UPSTREAMS,
    ),
    (
        "an apiserver before 1.25 (a renewal does not re-date the Lease's stamp): upstream's first look",
        Knowledge(server_version="v1.24.17"),
        UPSTREAMS,
    ),
    ("an apiserver whose version cannot be read: upstream's first look", Knowledge(server_version=""), UPSTREAMS),
]


@pytest.mark.parametrize(("knows", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_new_leader_taints_a_silent_node_at_its_grace_counted_from_its_last_heartbeat(
    knows: Knowledge, expected: float
):
    assert tainted_at(knows) == expected


def test_a_stamp_that_claims_a_heartbeat_after_the_first_look_counts_from_the_first_look():
    """Never later than upstream: a stamp the bounds put after now (a clock stepped) gives now."""
    assert tainted_at(Knowledge(skew=100.0, measured=(-100.5, -99.5))) == UPSTREAMS
