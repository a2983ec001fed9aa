"""controller/outofservice/auto_fence.py: --auto-fence-after fences only a node unreachable that long whose
fencing an external agent confirmed after its last heartbeat; nothing else makes it fence a node."""

from __future__ import annotations

import pytest

from controller.fencing import CONFIRMED_AT_ANNOTATION, ready_condition
from controller.outofservice.auto_fence import (
    ALREADY_FENCED,
    BAD_CONFIRMATION,
    CONFIRMED,
    NO_CONFIRMATION,
    NO_HEARTBEAT,
    NO_TRANSITION_TIME,
    NOT_UNREACHABLE,
    STALE_CONFIRMATION,
    TOO_SOON,
    auto_fenced_message,
    decide_auto_fence,
    fenced_by,
    rfc3339,
    unreachable_since,
)
from kube.timestamps import format_time
from tests.support.fencing import OUT_OF_SERVICE_TAINT, START, node_json

AFTER = 300.0
NOW = START
DOWN = NOW - 600  # unreachable for 10 minutes
HEARD = NOW - 650  # its last heartbeat


def confirmed(at: float | str) -> dict[str, str]:
    return {CONFIRMED_AT_ANNOTATION: at if isinstance(at, str) else format_time(at)}


# (the node, its annotations, the decision's reason, whether it is fenced)
CASES = {
    "unreachable long enough, confirmed after its last heartbeat: fenced": (
        node_json(since=DOWN, heartbeat=HEARD),
        confirmed(NOW - 30),
        CONFIRMED,
        True,
    ),
    "confirmed a second after the heartbeat: fenced": (
        node_json(since=DOWN, heartbeat=HEARD),
        confirmed(HEARD + 1),
        CONFIRMED,
        True,
    ),
    "confirmed with an offset other than Z: fenced": (
        node_json(since=DOWN, heartbeat=HEARD),
        confirmed("2027-01-15T09:59:00+02:00"),
        CONFIRMED,
        True,
    ),
    "without the confirmation annotation: never": (node_json(since=DOWN, heartbeat=HEARD), {}, NO_CONFIRMATION, False),
    "a confirmation from before the last heartbeat: the node was heard after it": (
        node_json(since=DOWN, heartbeat=HEARD),
        confirmed(HEARD - 60),
        STALE_CONFIRMATION,
        False,
    ),
    "a confirmation at the very second of the heartbeat is not newer": (
        node_json(since=DOWN, heartbeat=HEARD),
        confirmed(HEARD),
        STALE_CONFIRMATION,
        False,
    ),
    "a confirmation that is not a time": (
        node_json(since=DOWN, heartbeat=HEARD),
        confirmed("yes"),
        BAD_CONFIRMATION,
        False,
    ),
    "a confirmation without a time zone": (
        node_json(since=DOWN, heartbeat=HEARD),
        confirmed("2027-01-15T09:00:00"),
        BAD_CONFIRMATION,
        False,
    ),
    "unreachable for less than --auto-fence-after": (
        node_json(since=NOW - 60, heartbeat=NOW - 100),
        confirmed(NOW - 30),
        TOO_SOON,
        False,
    ),
    "Ready False (the kubelet reports NotReady: it is alive)": (
        node_json("n", "False", since=DOWN, heartbeat=NOW - 5),
        confirmed(NOW - 30),
        NOT_UNREACHABLE,
        False,
    ),
    "Ready True": (node_json("n", "True", since=DOWN, heartbeat=NOW - 5), confirmed(NOW - 30), NOT_UNREACHABLE, False),
    "no Ready condition": (node_json("n", None), confirmed(NOW - 30), NOT_UNREACHABLE, False),
    "already fenced": (
        node_json(since=DOWN, heartbeat=HEARD, taints=[OUT_OF_SERVICE_TAINT]),
        confirmed(NOW - 30),
        ALREADY_FENCED,
        False,
    ),
    "Unknown without a transition time": (
        node_json(since=None, heartbeat=HEARD),
        confirmed(NOW - 30),
        NO_TRANSITION_TIME,
        False,
    ),
    "no heartbeat to compare the confirmation with": (
        node_json(since=DOWN, heartbeat=None),
        confirmed(NOW - 30),
        NO_HEARTBEAT,
        False,
    ),
}


@pytest.mark.parametrize(("node", "annotations", "reason", "fence"), CASES.values(), ids=CASES.keys())
def test_when_a_node_is_fenced_by_itself(node, annotations, reason, fence):
    taints = node["spec"].get("taints") or []
    decision = decide_auto_fence(ready_condition(node), taints, annotations, AFTER, NOW)
    assert (decision.reason, decision.fence) == (reason, fence)


# A kubelet with a Lease posts its status only every 5 minutes while nothing changes: its Lease renewal
# may be later than the Ready condition's lastHeartbeatTime. (the node, the confirmation, the renewal, ...)
LEASES = {
    "confirmed after the condition's heartbeat but before the Lease's renewal: the kubelet was alive after it": (
        node_json(since=DOWN, heartbeat=NOW - 900),
        NOW - 700,
        NOW - 620,
        STALE_CONFIRMATION,
        False,
    ),
    "confirmed after both: fenced": (node_json(since=DOWN, heartbeat=NOW - 900), NOW - 30, NOW - 620, CONFIRMED, True),
    "a Lease renewal older than the condition's heartbeat changes nothing": (
        node_json(since=DOWN, heartbeat=HEARD),
        NOW - 30,
        NOW - 5000,
        CONFIRMED,
        True,
    ),
    "no heartbeat on the condition, but a Lease renewal before the confirmation: fenced": (
        node_json(since=DOWN, heartbeat=None),
        NOW - 30,
        NOW - 620,
        CONFIRMED,
        True,
    ),
    "no heartbeat on the condition, and a Lease renewal after the confirmation": (
        node_json(since=DOWN, heartbeat=None),
        NOW - 700,
        NOW - 620,
        STALE_CONFIRMATION,
        False,
    ),
}


@pytest.mark.parametrize(("node", "confirmed_at", "renewed", "reason", "fence"), LEASES.values(), ids=LEASES.keys())
def test_the_last_heartbeat_is_the_later_of_the_condition_and_the_lease(node, confirmed_at, renewed, reason, fence):
    decision = decide_auto_fence(ready_condition(node), [], confirmed(confirmed_at), AFTER, NOW, renewed)
    assert (decision.reason, decision.fence) == (reason, fence)


def test_too_soon_says_when_to_look_again():
    decision = decide_auto_fence(ready_condition(node_json(since=NOW - 60)), [], {}, AFTER, NOW)
    assert decision.recheck_at == NOW - 60 + AFTER


def test_the_event_names_the_times_compared():
    decision = decide_auto_fence(
        ready_condition(node_json(since=DOWN, heartbeat=HEARD)), [], confirmed(NOW - 30), AFTER, NOW
    )
    assert auto_fenced_message("node1", decision) == (
        "Fenced node node1 (node.kubernetes.io/out-of-service:NoExecute): unreachable since 2027-01-15T07:50:00Z "
        "(10m0s); fencing confirmed at 2027-01-15T07:59:30Z, last heartbeat 2027-01-15T07:49:10Z"
    )
    assert fenced_by(600) == "taintkeeper-controller (--auto-fence-after 10m0s)"


CANDIDATES = {
    "unreachable: since its transition": (node_json(since=DOWN), [], DOWN),
    "not Ready but reporting: no candidate": (node_json("n", "False"), [], None),
    "Ready: no candidate": (node_json("n", "True"), [], None),
    "fenced already: no candidate": (node_json(), [OUT_OF_SERVICE_TAINT], None),
}


@pytest.mark.parametrize(("node", "taints", "expected"), CANDIDATES.values(), ids=CANDIDATES.keys())
def test_which_nodes_are_candidates_at_all(node, taints, expected):
    assert unreachable_since(ready_condition(node), taints) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2027-01-15T08:00:00Z", START),
        ("2027-01-15T08:00:00z", START),
        ("2027-01-15T10:00:00+02:00", START),
        (" 2027-01-15T08:00:00Z ", START),
        ("2027-01-15T08:00:00.5Z", START + 0.5),
        ("2027-01-15T08:00:00", None),
        ("2027-01-15", None),
        ("now", None),
        ("", None),
    ],
)
def test_rfc3339_needs_an_offset(text, expected):
    assert rfc3339(text) == expected
