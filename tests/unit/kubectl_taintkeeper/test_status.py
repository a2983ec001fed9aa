"""kubectl_taintkeeper.status: zones, the brake, tainted nodes, pending evictions and the leader, computed purely."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.nodelifecycle.decision import MonitorSettings
from controller.zones import ZoneState
from kubectl_taintkeeper.reading import Reading
from kubectl_taintkeeper.status import (
    ClusterStatus,
    any_no_execute_taint,
    cluster_status,
    last_monitor_pass,
    leader_pod,
    leader_status,
)
from shared.taints import MEMORY_PRESSURE, NO_SCHEDULE, UNSCHEDULABLE
from tests.support.api_json import condition, lease_json, node_json, pod_json
from tests.support.builders import NOT_READY, UNREACHABLE, taint, toleration

NOW = 1_800_000_000.0
LEASE = "taintkeeper-system/taintkeeper-controller"
HOLDER = "taintkeeper-controller-7d9f8-abcde_0f1e2d3c4b5a69788796a5b4c3d2e1f0"
DEFAULTS = MonitorSettings()
NORMAL, PARTIAL, FULL, INITIAL = (
    ZoneState.NORMAL,
    ZoneState.PARTIAL_DISRUPTION,
    ZoneState.FULL_DISRUPTION,
    ZoneState.INITIAL,
)


NOTHING: Reading[Any] = Reading()


def status(
    nodes: list[dict[str, Any]], pods: Sequence[dict[str, Any]] = (), settings: MonitorSettings = DEFAULTS
) -> ClusterStatus:
    return cluster_status(nodes, pods, LEASE, NOTHING, NOTHING, settings, NOW)


def zone(name: str, ready: int, not_ready: int, *, excluded_not_ready: int = 0) -> list[dict[str, Any]]:
    """A zone's nodes: `ready` Ready ones, `not_ready` Unknown ones, and excluded Unknown ones."""
    return (
        [node_json(f"{name}-ok-{i}", "True", zone=name) for i in range(ready)]
        + [node_json(f"{name}-down-{i}", "Unknown", zone=name) for i in range(not_ready)]
        + [node_json(f"{name}-excluded-{i}", "Unknown", zone=name, excluded=True) for i in range(excluded_not_ready)]
    )


# --- zones and the brake ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZoneCase:
    nodes: list[dict[str, Any]]
    zones: dict[str, tuple[ZoneState, int, int, float]]  # zone -> (state, counted nodes, not ready, rate)
    brake: bool = False
    settings: MonitorSettings = field(default=DEFAULTS)


ZONE_CASES = {
    "a healthy cluster: every zone Normal at --node-eviction-rate, no brake": ZoneCase(
        zone("a", 3, 0) + zone("b", 2, 0), {"::a": (NORMAL, 3, 0, 0.1), "::b": (NORMAL, 2, 0, 0.1)}
    ),
    "two not-ready nodes never make a zone partially disrupted (upstream needs more than two)": ZoneCase(
        zone("a", 1, 2), {"::a": (NORMAL, 3, 2, 0.1)}
    ),
    "a small zone partially disrupted stops tainting (at most --large-cluster-size-threshold nodes)": ZoneCase(
        zone("a", 1, 3) + zone("b", 2, 0), {"::a": (PARTIAL, 4, 3, 0.0), "::b": (NORMAL, 2, 0, 0.1)}
    ),
    "a large zone partially disrupted slows to --secondary-node-eviction-rate": ZoneCase(
        zone("a", 20, 40), {"::a": (PARTIAL, 60, 40, 0.01)}
    ),
    "the rate flags given change the figures": ZoneCase(
        zone("a", 2, 3) + zone("b", 1, 0),
        {"::a": (PARTIAL, 5, 3, 0.5), "::b": (NORMAL, 1, 0, 2.0)},
        settings=MonitorSettings(
            node_eviction_rate=2,
            secondary_node_eviction_rate=0.5,
            large_cluster_size_threshold=4,
            unhealthy_zone_threshold=0.6,
        ),
    ),
    "one zone fully disrupted is drained at the normal rate: no brake while another zone is up": ZoneCase(
        zone("a", 0, 3) + zone("b", 1, 0), {"::a": (FULL, 3, 3, 0.1), "::b": (NORMAL, 1, 0, 0.1)}
    ),
    "every zone fully disrupted: the brake is on and nothing is tainted": ZoneCase(
        zone("a", 0, 3) + zone("b", 0, 1), {"::a": (FULL, 3, 3, 0.0), "::b": (FULL, 1, 1, 0.0)}, brake=True
    ),
    "excluded nodes do not vote on their zone's state": ZoneCase(
        zone("a", 1, 0, excluded_not_ready=5), {"::a": (NORMAL, 1, 0, 0.1)}
    ),
    "a zone of excluded nodes only is Initial at --node-eviction-rate, even under the brake": ZoneCase(
        zone("a", 0, 2) + zone("x", 0, 0, excluded_not_ready=2),
        {"::a": (FULL, 2, 2, 0.0), "::x": (INITIAL, 0, 0, 0.1)},
        brake=True,
    ),
    "a node without a Ready condition counts as not ready": ZoneCase(
        [node_json("n", None, zone="a")], {"::a": (FULL, 1, 1, 0.0)}, brake=True
    ),
    'nodes without zone labels share the zone ""': ZoneCase(
        [node_json("n1"), node_json("n2", "False")], {"": (NORMAL, 2, 1, 0.1)}
    ),
}


@pytest.mark.parametrize("case", ZONE_CASES.values(), ids=ZONE_CASES.keys())
def test_zone_states_rates_and_the_brake(case: ZoneCase) -> None:
    computed = status(case.nodes, settings=case.settings)
    assert {z.zone: (z.state, z.size, z.not_ready, z.rate) for z in computed.zones} == case.zones
    assert computed.brake is case.brake


def test_a_zone_lists_every_node_and_which_are_excluded() -> None:
    (only,) = status(zone("a", 1, 1, excluded_not_ready=1)).zones
    assert only.nodes == ("a-down-0", "a-excluded-0", "a-ok-0")
    assert only.excluded == ("a-excluded-0",)


# --- tainted nodes and their taints' ages -------------------------------------------------------------


@dataclass(frozen=True)
class AgeCase:
    node: dict[str, Any]
    taints: list[tuple[str, float | None, str | None]]  # (taint, age, where the age comes from)


AGE_CASES = {
    "a NoExecute taint is as old as its timeAdded": AgeCase(
        node_json("n", "Unknown", taint(UNREACHABLE, NOW - 125)), [(f"{UNREACHABLE}:NoExecute", 125.0, "timeAdded")]
    ),
    "a NoExecute taint without timeAdded has no known age": AgeCase(
        node_json("n", "False", taint(NOT_READY)), [(f"{NOT_READY}:NoExecute", None, None)]
    ),
    "a NoSchedule condition taint is as old as the condition calling for it": AgeCase(
        node_json("n", "False", taint(NOT_READY, effect=NO_SCHEDULE), ready_since=NOW - 40),
        [(f"{NOT_READY}:NoSchedule", 40.0, "Ready.lastTransitionTime")],
    ),
    "a pressure taint takes its own condition's time": AgeCase(
        node_json(
            "n",
            "True",
            taint(MEMORY_PRESSURE, effect=NO_SCHEDULE),
            conditions=[condition("MemoryPressure", "True", NOW - 7)],
        ),
        [(f"{MEMORY_PRESSURE}:NoSchedule", 7.0, "MemoryPressure.lastTransitionTime")],
    ),
    "the unschedulable taint has no condition: age unknown": AgeCase(
        node_json("n", "True", taint(UNSCHEDULABLE, effect=NO_SCHEDULE)), [(f"{UNSCHEDULABLE}:NoSchedule", None, None)]
    ),
    "a NoSchedule taint no condition calls for any more (about to go): age unknown": AgeCase(
        node_json("n", "True", taint(UNREACHABLE, effect=NO_SCHEDULE), ready_since=NOW - 3),
        [(f"{UNREACHABLE}:NoSchedule", None, None)],
    ),
    "only taintkeeper's taints are listed, NoExecute first": AgeCase(
        node_json(
            "n",
            "Unknown",
            taint(UNREACHABLE, effect=NO_SCHEDULE),
            taint("example.com/x", NOW - 1),
            taint("example.com/y", effect=NO_SCHEDULE),
            taint(UNREACHABLE, NOW - 2),
            ready_since=NOW - 9,
        ),
        [
            (f"{UNREACHABLE}:NoExecute", 2.0, "timeAdded"),
            (f"{UNREACHABLE}:NoSchedule", 9.0, "Ready.lastTransitionTime"),
        ],
    ),
}


@pytest.mark.parametrize("case", AGE_CASES.values(), ids=AGE_CASES.keys())
def test_a_tainted_nodes_taints_and_their_ages(case: AgeCase) -> None:
    (node,) = status([case.node]).nodes
    assert [(t.taint, t.age, t.since_source) for t in node.taints] == case.taints


def test_nodes_with_only_other_taints_or_none_are_not_listed() -> None:
    nodes = [
        node_json("clean"),
        node_json("foreign", "True", taint("example.com/x", NOW), taint("example.com/y", effect=NO_SCHEDULE)),
    ]
    assert status(nodes).nodes == ()


# --- pending evictions ---------------------------------------------------------------------------------

TAINTED = node_json("n1", "Unknown", taint(UNREACHABLE, NOW - 60))
BORN = NOW - 3600


@dataclass(frozen=True)
class PendingCase:
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    expected: list[tuple[str, float, str, str | None]]  # (namespace/pod, seconds left, taint, toleration)


PENDING_CASES = {
    "soonest first, overdue and untolerated (due now) before those still counting": PendingCase(
        [TAINTED],
        [
            pod_json("late", "n1", [toleration(UNREACHABLE, 600)], created=BORN),
            pod_json("soon", "n1", [toleration(UNREACHABLE, 300)], created=BORN),
            pod_json("bare", "n1", [], created=BORN),
            pod_json("over", "n1", [toleration(UNREACHABLE, 30)], created=BORN),
        ],
        [
            ("default/over", -30.0, f"{UNREACHABLE}:NoExecute", f"{UNREACHABLE} Exists NoExecute for 30s"),
            ("default/bare", 0.0, f"{UNREACHABLE}:NoExecute", None),
            ("default/soon", 240.0, f"{UNREACHABLE}:NoExecute", f"{UNREACHABLE} Exists NoExecute for 300s"),
            ("default/late", 540.0, f"{UNREACHABLE}:NoExecute", f"{UNREACHABLE} Exists NoExecute for 600s"),
        ],
    ),
    "a pod tolerating forever is not pending": PendingCase(
        [TAINTED], [pod_json("forever", "n1", [toleration(None)], created=BORN)], []
    ),
    "a terminating pod is not pending": PendingCase(
        [TAINTED], [pod_json("going", "n1", [], created=BORN, terminating=True)], []
    ),
    "a pod on a node without NoExecute taints is not pending": PendingCase(
        [node_json("n2", "False", taint(NOT_READY, effect=NO_SCHEDULE))], [pod_json("p", "n2", [], created=BORN)], []
    ),
    "a pod bound after the taint counts from its binding": PendingCase(
        [TAINTED],
        [pod_json("new", "n1", [toleration(UNREACHABLE, 300)], created=NOW - 10)],
        [("default/new", 290.0, f"{UNREACHABLE}:NoExecute", f"{UNREACHABLE} Exists NoExecute for 300s")],
    ),
    "anyone's NoExecute taint evicts, as the eviction manager does": PendingCase(
        [node_json("n3", "True", taint("example.com/drain", NOW - 5))],
        [pod_json("p", "n3", [])],
        [("default/p", 0.0, "example.com/drain:NoExecute", None)],
    ),
    "a node-failure taint on a Ready node is stale: nothing pending, as the manager evicts nothing": PendingCase(
        [node_json("n5", "True", taint(UNREACHABLE, NOW - 60))], [pod_json("p", "n5", [], created=BORN)], []
    ),
    "a Ready node's other NoExecute taints still evict beside a stale one": PendingCase(
        [node_json("n6", "True", taint(UNREACHABLE, NOW - 60), taint("example.com/drain", NOW - 5))],
        [pod_json("p", "n6", [toleration(UNREACHABLE, None)], created=BORN)],
        [("default/p", 0.0, "example.com/drain:NoExecute", None)],
    ),
    "the earliest of several taints sets the deadline": PendingCase(
        [node_json("n4", "False", taint(NOT_READY, NOW - 100), taint("example.com/x", NOW - 10))],
        [pod_json("p", "n4", [toleration(NOT_READY, 300), toleration("example.com/x", 60)], created=BORN)],
        [("default/p", 50.0, "example.com/x:NoExecute", "example.com/x Exists NoExecute for 60s")],
    ),
}


@pytest.mark.parametrize("case", PENDING_CASES.values(), ids=PENDING_CASES.keys())
def test_pending_evictions(case: PendingCase) -> None:
    pending = status(case.nodes, case.pods).pending
    assert [(f"{p.namespace}/{p.pod}", p.seconds_left, p.taint, p.toleration) for p in pending] == case.expected
    assert all(p.deadline == NOW + p.seconds_left for p in pending)


def test_a_taint_without_time_added_is_counted_from_now_and_says_so() -> None:
    nodes = [node_json("n", "False", taint(NOT_READY)), node_json("m", "False", taint(NOT_READY, NOW - 1))]
    pods = [
        pod_json("p", "n", [toleration(NOT_READY, 10)], created=BORN),
        pod_json("q", "m", [toleration(NOT_READY, 10)], created=BORN),
    ]
    assert [(p.pod, p.seconds_left, p.counted_from_now) for p in status(nodes, pods).pending] == [
        ("q", 9.0, False),
        ("p", 10.0, True),
    ]


# --- the leader -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderCase:
    lease: Reading[Any]
    last_pass: Reading[float]
    expected: dict[str, Any]


LEADER_CASES = {
    "a holder that published its last monitor pass: its pod and the pass's age": LeaderCase(
        Reading(lease_json(HOLDER, NOW - 2)),
        Reading(NOW - 4.5),
        {
            "holder": HOLDER,
            "pod": "taintkeeper-controller-7d9f8-abcde",
            "renewed_ago": 2.0,
            "expired": False,
            "last_pass_ago": 4.5,
            "last_pass_error": None,
        },
    ),
    "a holder whose last monitor pass is unknown: why": LeaderCase(
        Reading(lease_json(HOLDER, NOW - 2)),
        Reading(error="the Lease has no taintkeeper.io/last-monitor-pass annotation"),
        {
            "pod": "taintkeeper-controller-7d9f8-abcde",
            "last_pass_ago": None,
            "last_pass_error": "the Lease has no taintkeeper.io/last-monitor-pass annotation",
        },
    ),
    "a released Lease: no leader": LeaderCase(
        Reading(lease_json(None, NOW - 2, duration=1)),
        Reading(),
        {"lease_found": True, "holder": None, "pod": None, "last_pass_error": "no leader"},
    ),
    "no Lease at all: no leader": LeaderCase(
        Reading(), Reading(), {"lease_found": False, "holder": None, "last_pass_error": "no leader"}
    ),
    "a Lease that cannot be read: why": LeaderCase(
        Reading(error="403 Forbidden"),
        Reading(),
        {"lease_error": "403 Forbidden", "holder": None, "last_pass_error": "the Lease could not be read"},
    ),
    "a holder that stopped renewing is expired": LeaderCase(
        Reading(lease_json(HOLDER, NOW - 16, duration=15)),
        Reading(error="connection refused"),
        {"holder": HOLDER, "expired": True, "renewed_ago": 16.0, "lease_duration": 15},
    ),
}


@pytest.mark.parametrize("case", LEADER_CASES.values(), ids=LEADER_CASES.keys())
def test_the_leader(case: LeaderCase) -> None:
    leader = leader_status(LEASE, case.lease, case.last_pass, NOW)
    assert leader.lease == LEASE
    assert {name: getattr(leader, name) for name in case.expected} == case.expected


@pytest.mark.parametrize(
    ("holder", "pod"),
    [
        (HOLDER, "taintkeeper-controller-7d9f8-abcde"),
        ("someone-else", "someone-else"),
    ],
)
def test_the_leaders_pod_is_its_identity_before_the_uuid(holder: str, pod: str) -> None:
    assert leader_pod(holder) == pod


def annotated(value: str | None) -> dict[str, Any]:
    lease = lease_json(HOLDER, NOW - 2)
    if value is not None:
        lease["metadata"]["annotations"] = {"other": "x", "taintkeeper.io/last-monitor-pass": value}
    return lease


NO_ANNOTATION = (
    "the Lease has no taintkeeper.io/last-monitor-pass annotation (the leader has not completed a monitor pass "
    "yet, runs without the nodelifecycle controller, or is older than this command)"
)
LAST_PASS_CASES = {
    "the annotation's time, to the microsecond": (annotated("2027-01-15T08:00:00.500000Z"), Reading(1_800_000_000.5)),
    "no annotation: why, and what that may mean": (annotated(None), Reading(error=NO_ANNOTATION)),
    "not a time: why": (
        annotated("soon"),
        Reading(error="the Lease's taintkeeper.io/last-monitor-pass is not a time: 'soon'"),
    ),
}


@pytest.mark.parametrize(("lease", "expected"), LAST_PASS_CASES.values(), ids=LAST_PASS_CASES.keys())
def test_the_last_monitor_pass_is_read_from_the_leases_annotation(
    lease: dict[str, Any], expected: Reading[float]
) -> None:
    assert last_monitor_pass(lease) == expected


@pytest.mark.parametrize(
    ("nodes", "needed"),
    [
        ([node_json("a"), node_json("b", "False", taint(NOT_READY, effect=NO_SCHEDULE))], False),
        ([node_json("a"), node_json("b", "Unknown", taint(UNREACHABLE, NOW))], True),
        ([], False),
    ],
    ids=["no NoExecute taint: no pod can be pending", "a NoExecute taint: the pods are needed", "no nodes"],
)
def test_the_pods_are_needed_only_when_a_node_has_a_no_execute_taint(nodes: list[dict[str, Any]], needed: bool) -> None:
    assert any_no_execute_taint(nodes) is needed
