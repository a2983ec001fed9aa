"""controller.nodelifecycle.node_health: when a node's conditions go stale (upstream tryUpdateNodeHealth tables)."""

import pytest

from controller.nodelifecycle.node_health import HealthTracker
from controller.objects import NodeView
from kube.timestamps import format_time

NOW = 1_800_000_000.0
GRACE = 50.0
STARTUP = 60.0
OLD = NOW - 7200  # created two hours ago
RECENT = NOW - 10


def node(
    created: float,
    heartbeat: float | None = None,
    status: str = "True",
    transition: float | None = None,
    extra: tuple = (),
) -> NodeView:
    conditions = []
    if heartbeat is not None:
        conditions.append(
            {
                "type": "Ready",
                "status": status,
                "lastHeartbeatTime": format_time(heartbeat),
                "lastTransitionTime": format_time(transition or created),
            }
        )
        conditions += [
            {
                "type": t,
                "status": "False",
                "lastHeartbeatTime": format_time(heartbeat),
                "lastTransitionTime": format_time(created),
            }
            for t in extra
        ]
    return NodeView("n1", "uid-n1", (), conditions=tuple(conditions), created=created, resource_version="1")


def lease(renew: float | None) -> str | None:
    return None if renew is None else format_time(renew).replace("Z", ".000000Z")


# Each case: what the controller saw first (70 s ago, or at the node's creation), and what it sees at NOW.
CASES = [
    # (name, created, first heartbeat, first lease, heartbeat now, lease now, stale?)
    ("a recent node without a lease is within its startup grace", RECENT, None, None, None, None, False),
    ("a recent node with a renewed lease is healthy", RECENT, None, NOW - 70, None, NOW - 5, False),
    ("an old node with no status and no lease is Unknown", OLD, None, None, None, None, True),
    ("an old node with no status but a renewed lease is healthy", OLD, None, NOW - 70, None, NOW - 5, False),
    ("an old node with no status and an expired lease is Unknown", OLD, None, NOW - 70, None, NOW - 70, True),
    ("a stale status with a renewed lease is healthy", OLD, NOW - 70, NOW - 70, NOW - 70, NOW - 5, False),
    ("a fresh status with an expired lease is healthy", OLD, NOW - 70, NOW - 70, NOW - 5, NOW - 70, False),
    ("a stale status and an expired lease is Unknown", OLD, NOW - 70, NOW - 70, NOW - 70, NOW - 70, True),
    ("a fresh status without any lease is healthy", OLD, NOW - 70, None, NOW - 5, None, False),
    ("a stale status without any lease is Unknown", OLD, NOW - 70, None, NOW - 70, None, True),
]


@pytest.mark.parametrize(
    ("created", "hb1", "lease1", "hb2", "lease2", "stale"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_staleness_from_status_and_lease(created, hb1, lease1, hb2, lease2, stale):
    tracker = HealthTracker(GRACE, STARTUP)
    tracker.update(node(created, hb1), lease(lease1), max(created, NOW - 70))
    verdict = tracker.update(node(created, hb2), lease(lease2), NOW)
    assert verdict.stale is stale
    assert (verdict.current_ready["status"] == "Unknown") is (stale or hb2 is None)


def test_a_node_that_never_posted_status_gets_four_never_updated_conditions():
    verdict = HealthTracker(GRACE, STARTUP).update(node(OLD), None, NOW)
    assert [c["type"] for c in verdict.conditions_to_post] == ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"]
    assert {c["reason"] for c in verdict.conditions_to_post} == {"NodeStatusNeverUpdated"}
    assert {c["message"] for c in verdict.conditions_to_post} == {"Kubelet never posted node status."}
    assert {c["status"] for c in verdict.conditions_to_post} == {"Unknown"}
    assert verdict.grace_period == STARTUP


def test_a_stale_status_becomes_unknown_with_node_status_unknown():
    tracker = HealthTracker(GRACE, STARTUP)
    tracker.update(node(OLD, NOW - 100, extra=("MemoryPressure",)), None, NOW - 60)
    verdict = tracker.update(node(OLD, NOW - 100, extra=("MemoryPressure",)), None, NOW)
    by_type = {c["type"]: c for c in verdict.conditions_to_post}
    assert by_type["Ready"]["reason"] == "NodeStatusUnknown"
    assert by_type["Ready"]["message"] == "Kubelet stopped posting node status."
    assert by_type["MemoryPressure"]["status"] == "Unknown"
    assert by_type["DiskPressure"]["reason"] == "NodeStatusNeverUpdated"  # missing conditions are added
    assert verdict.observed_ready["status"] == "True"
    assert verdict.current_ready["status"] == "Unknown"


def test_conditions_already_unknown_are_not_posted_again():
    tracker = HealthTracker(GRACE, STARTUP)
    unknown = NodeView(
        "n1",
        "u",
        (),
        conditions=tuple(
            {"type": t, "status": "Unknown", "lastHeartbeatTime": format_time(OLD)}
            for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
        ),
        created=OLD,
    )
    tracker.update(unknown, None, NOW - 60)
    assert tracker.update(unknown, None, NOW).conditions_to_post == []


@pytest.mark.parametrize(
    "kubelet_clock_offset", [-86400, -60, 0, 3600], ids=["a day behind", "a minute behind", "in step", "an hour ahead"]
)
def test_kubelet_clock_skew_does_not_matter_only_changes_do(kubelet_clock_offset):
    tracker = HealthTracker(GRACE, STARTUP)
    for step in range(10):  # the kubelet posts every 10 s by its own (skewed) clock
        now = NOW + step * 10
        verdict = tracker.update(node(OLD, now + kubelet_clock_offset), None, now)
        assert not verdict.stale
    assert tracker.update(node(OLD, NOW + 90 + kubelet_clock_offset), None, NOW + 90 + GRACE + 1).stale


def test_a_node_first_seen_gets_a_full_grace_period_whatever_its_heartbeat_says():
    tracker = HealthTracker(GRACE, STARTUP)
    assert not tracker.update(node(OLD, OLD), None, NOW).stale  # heartbeat two hours old, but first sight
    assert tracker.update(node(OLD, OLD), None, NOW + GRACE + 1).stale


def test_reset_all_gives_every_node_a_fresh_grace_period():
    tracker = HealthTracker(GRACE, STARTUP)
    tracker.update(node(OLD, NOW - 100), None, NOW - 100)
    tracker.reset_all(NOW)
    assert not tracker.update(node(OLD, NOW - 100), None, NOW + GRACE - 1).stale


def test_a_ready_transition_moves_the_transition_timestamp():
    tracker = HealthTracker(GRACE, STARTUP)
    tracker.update(node(OLD, NOW - 20, "True", transition=OLD), None, NOW - 20)
    tracker.update(node(OLD, NOW - 10, "False", transition=NOW - 10), None, NOW)
    assert tracker.get("n1").ready_transition_timestamp == NOW
    tracker.update(node(OLD, NOW, "False", transition=NOW - 10), None, NOW + 10)
    assert tracker.get("n1").ready_transition_timestamp == NOW
