"""kubectl_taintkeeper.status_render: the status as text (plain or coloured) and as JSON whose names are a contract."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from controller.nodelifecycle.decision import MonitorSettings
from kubectl_taintkeeper.budgets import Budgets
from kubectl_taintkeeper.reading import Reading
from kubectl_taintkeeper.status import ClusterStatus, cluster_status
from kubectl_taintkeeper.status_render import render_text, status_json
from shared.taints import NO_SCHEDULE, UNSCHEDULABLE
from tests.support.api_json import lease_json, node_json, pod_json
from tests.support.builders import NOT_READY, UNREACHABLE, taint, toleration

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
LEASE = "taintkeeper-system/taintkeeper-controller"
HOLDER = "taintkeeper-controller-7d9f8-abcde_0f1e2d3c4b5a69788796a5b4c3d2e1f0"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
BORN = NOW - 3600

NODES = [
    node_json("a1", "True", zone="a", region="eu"),
    node_json(
        "a2",
        "Unknown",
        taint(UNREACHABLE, NOW - 120),
        taint(UNREACHABLE, effect=NO_SCHEDULE),
        zone="a",
        region="eu",
        ready_since=NOW - 130,
    ),
    node_json("a3", "True", taint(UNSCHEDULABLE, effect=NO_SCHEDULE), zone="a", region="eu"),
    node_json("b1", "False", taint(NOT_READY, NOW - 20), zone="b", region="eu", ready_since=NOW - 25),
]
PODS = [
    pod_json("web-1", "a2", [toleration(UNREACHABLE, 300)], namespace="shop", created=BORN),
    pod_json("batch", "a2", [toleration(UNREACHABLE, 60)], namespace="jobs", created=BORN),
    pod_json("bare", "b1", [], namespace="shop", created=BORN),
    pod_json("ds", "a2", [toleration(None)], namespace="kube-system", created=BORN),
]


def build(
    nodes: list[dict[str, Any]] = NODES,
    pods: list[dict[str, Any]] = PODS,
    lease: Reading[Any] | None = None,
    last_pass: Reading[float] | None = None,
) -> ClusterStatus:
    return cluster_status(
        nodes,
        pods,
        LEASE,
        Reading(lease_json(HOLDER, NOW - 1)) if lease is None else lease,
        Reading(NOW - 3) if last_pass is None else last_pass,
        MonitorSettings(),
        NOW,
    )


# --- JSON ----------------------------------------------------------------------------------------------


def test_the_json_has_exactly_the_contracts_names() -> None:
    document = json.loads(json.dumps(status_json(build())))
    assert list(document) == ["zones", "brake", "nodes", "leader", "pendingEvictions", "admission"]
    assert document["brake"] is False
    assert document["pendingEvictions"] == [
        {
            "namespace": "jobs",
            "pod": "batch",
            "node": "a2",
            "taint": f"{UNREACHABLE}:NoExecute",
            "deadline": "2027-01-15T07:59:00Z",
            "secondsLeft": -60,
            "waitingFor": None,
        },
        {
            "namespace": "shop",
            "pod": "bare",
            "node": "b1",
            "taint": f"{NOT_READY}:NoExecute",
            "deadline": "2027-01-15T08:00:00Z",
            "secondsLeft": 0,
            "waitingFor": None,
        },
        {
            "namespace": "shop",
            "pod": "web-1",
            "node": "a2",
            "taint": f"{UNREACHABLE}:NoExecute",
            "deadline": "2027-01-15T08:03:00Z",
            "secondsLeft": 180,
            "waitingFor": None,
        },
    ]


def test_the_json_of_zones_nodes_and_the_leader() -> None:
    document = status_json(build())
    assert document["zones"][0] == {
        "zone": "eu::a",
        "state": "Normal",
        "nodes": ["a1", "a2", "a3"],
        "excluded": [],
        "size": 3,
        "notReady": 1,
        "evictionRate": 0.1,
        "evictionRateReason": "--node-eviction-rate",
    }
    assert document["nodes"][0] == {
        "name": "a2",
        "zone": "eu::a",
        "ready": "Unknown",
        "taints": [
            {
                "key": UNREACHABLE,
                "effect": "NoExecute",
                "since": "2027-01-15T07:58:00Z",
                "sinceSource": "timeAdded",
                "ageSeconds": 120,
            },
            {
                "key": UNREACHABLE,
                "effect": "NoSchedule",
                "since": "2027-01-15T07:57:50Z",
                "sinceSource": "Ready.lastTransitionTime",
                "ageSeconds": 130,
            },
        ],
    }
    assert document["nodes"][1]["taints"][0] | {"key": None} == {
        "key": None,
        "effect": "NoSchedule",
        "since": None,
        "sinceSource": None,
        "ageSeconds": None,
    }
    assert document["leader"] == {
        "lease": LEASE,
        "holder": HOLDER,
        "pod": "taintkeeper-controller-7d9f8-abcde",
        "renewTime": "2027-01-15T07:59:59Z",
        "renewedSecondsAgo": 1,
        "leaseDurationSeconds": 15,
        "expired": False,
        "error": None,
        "lastMonitorPass": "2027-01-15T07:59:57Z",
        "lastMonitorPassSecondsAgo": 3,
        "lastMonitorPassError": None,
    }


def test_the_json_of_a_braked_cluster_says_so() -> None:
    document = status_json(build([node_json("n", "Unknown", zone="a")], []))
    assert document["brake"] is True
    assert document["zones"][0]["state"] == "FullDisruption" and document["zones"][0]["evictionRate"] == 0


# --- text ----------------------------------------------------------------------------------------------


def test_plain_text_has_no_escapes_and_colour_differs_only_by_them() -> None:
    plain = render_text(build(), colour=False)
    coloured = render_text(build(), colour=True)
    assert "\x1b" not in plain
    assert ANSI.search(coloured)
    assert ANSI.sub("", coloured) == plain


TEXT_CASES = {
    "a healthy cluster: Normal zones, brake off, nothing tainted or pending": (
        build([node_json("n1", zone="a"), node_json("n2", zone="b")], []),
        [
            "  ::a   Normal  1      0          0.1 nodes/s: --node-eviction-rate",
            "BRAKE  off (a zone is not fully disrupted)",
            "TAINTED NODES  (taintkeeper's taints)\n  none",
            "PENDING EVICTIONS  (0, soonest first)\n  none",
        ],
    ),
    "a small zone partially disrupted: tainting stopped, and why": (
        build([node_json("ok", zone="a")] + [node_json(f"down{i}", "Unknown", zone="a") for i in range(3)], []),
        [
            "PartialDisruption  4      3          0 nodes/s: stopped: partially disrupted, at most 50 nodes "
            "(--large-cluster-size-threshold)"
        ],
    ),
    "every zone fully disrupted: the brake is on": (
        build([node_json("n", "Unknown")], []),
        [
            "  (no zone)  FullDisruption  1      1          0 nodes/s: stopped: every zone is fully disrupted",
            "BRAKE  ON: every zone is fully disrupted; nothing is tainted NoExecute",
        ],
    ),
    "a tainted node's taints with their ages, or why the age is unknown": (
        build(),
        [
            "  a2  zone eu::a  Ready=Unknown",
            f"      {UNREACHABLE}:NoExecute   2m0s (since 2027-01-15T07:58:00Z, timeAdded)",
            f"      {UNREACHABLE}:NoSchedule  2m10s (since 2027-01-15T07:57:50Z, Ready.lastTransitionTime)",
            f"      {UNSCHEDULABLE}:NoSchedule  age unknown (a NoSchedule taint has no timeAdded)",
        ],
    ),
    "pending evictions soonest first, with the time left, the taint and the toleration": (
        build(),
        [
            "PENDING EVICTIONS  (3, soonest first)\n"
            "  DEADLINE              LEFT          POD         NODE  WHY\n"
            f"  2027-01-15T07:59:00Z  overdue 1m0s  jobs/batch  a2    {UNREACHABLE}:NoExecute, toleration "
            f"{UNREACHABLE} Exists NoExecute for 60s\n"
            f"  2027-01-15T08:00:00Z  due now       shop/bare   b1    {NOT_READY}:NoExecute not tolerated\n"
            f"  2027-01-15T08:03:00Z  in 3m0s       shop/web-1  a2    {UNREACHABLE}:NoExecute, toleration "
            f"{UNREACHABLE} Exists NoExecute for 300s"
        ],
    ),
    "a leader with its last monitor pass": (
        build(),
        [
            f"LEADER  taintkeeper-controller-7d9f8-abcde (Lease {LEASE} held by {HOLDER}, renewed 1s ago)\n"
            "  last monitor pass 3s ago"
        ],
    ),
    "a leader whose last monitor pass is unknown: one line saying why": (
        build(last_pass=Reading(error="the Lease has no taintkeeper.io/last-monitor-pass annotation")),
        ["  last monitor pass: cannot tell: the Lease has no taintkeeper.io/last-monitor-pass annotation"],
    ),
    "a Lease without a holder: no leader": (
        build(lease=Reading(lease_json(None, NOW - 5, duration=1)), last_pass=Reading()),
        [f"LEADER  none (the Lease {LEASE} has no holder)\n  last monitor pass: cannot tell: no leader"],
    ),
    "no Lease: no leader": (
        build(lease=Reading(), last_pass=Reading()),
        [f"LEADER  none (the Lease {LEASE} does not exist)"],
    ),
    "a Lease that cannot be read: why": (
        build(lease=Reading(error="403 Forbidden: leases is forbidden"), last_pass=Reading()),
        [f"LEADER  unknown: cannot read the Lease {LEASE}: 403 Forbidden: leases is forbidden"],
    ),
    "an expired Lease says so": (
        build(lease=Reading(lease_json(HOLDER, NOW - 40)), last_pass=Reading(error="x")),
        ["renewed 40s ago; expired: not renewed within its 15s)"],
    ),
}


@pytest.mark.parametrize(("status", "fragments"), TEXT_CASES.values(), ids=TEXT_CASES.keys())
def test_the_text_report(status: ClusterStatus, fragments: list[str]) -> None:
    text = render_text(status)
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in:\n{text}"


def test_a_pod_waiting_for_its_disruption_budget_says_which_in_text_and_json() -> None:
    drain = {"key": "example.com/drain", "effect": "NoExecute", "timeAdded": "2027-01-15T07:58:00Z"}
    nodes = [
        {
            "metadata": {"name": "d1", "labels": {}},
            "spec": {"taints": [drain]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
    ]
    pod = {
        "metadata": {
            "name": "web-9",
            "namespace": "shop",
            "uid": "u9",
            "labels": {"app": "web"},
            "annotations": {"taintkeeper.io/eviction": "respect-disruption-budget"},
            "creationTimestamp": "2027-01-15T07:00:00Z",
        },
        "spec": {"nodeName": "d1"},
    }
    budget = {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0},
    }
    status = cluster_status(
        nodes,
        [pod],
        LEASE,
        Reading(lease_json(HOLDER, NOW - 1)),
        Reading(NOW - 3),
        MonitorSettings(),
        NOW,
        Budgets(budgets=[budget]),
    )
    assert status_json(status)["pendingEvictions"][0]["waitingFor"] == "disruption budget web (allowed 0)"
    assert "example.com/drain:NoExecute not tolerated; waiting for disruption budget web (allowed 0)" in render_text(
        status, colour=False
    )
