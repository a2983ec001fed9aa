"""controller.tainteviction.decision.decide_eviction: the pure deadline rule, with `now` passed in."""

import pytest

from controller.objects import NodeView
from controller.tainteviction.decision import (
    EXPIRES,
    FOREVER,
    NO_TAINTS,
    UNTOLERATED,
    decide_eviction,
    evicting_taints,
)
from tests.support.builders import taint
from tests.support.builders import toleration as tol

NOW = 1_800_000_000.0


def first_seen_at(when):
    return lambda _taint: when


CASES = [
    # (name, tolerations, taints, first seen, pod created, expected at, expected reason)
    ("no NoExecute taints means never", [tol(seconds=5)], [], NOW, None, None, NO_TAINTS),
    ("an untolerated taint means now", [], [taint()], NOW - 50, None, NOW, UNTOLERATED),
    ("a toleration for another taint does not help", [tol("other", 100)], [taint()], NOW, None, NOW, UNTOLERATED),
    (
        "one tolerated and one untolerated taint means now",
        [tol(seconds=100)],
        [taint(), taint("node.kubernetes.io/not-ready")],
        NOW,
        None,
        NOW,
        UNTOLERATED,
    ),
    ("tolerating forever means never", [tol()], [taint(added=NOW - 10)], NOW, None, None, FOREVER),
    ("the deadline counts from timeAdded", [tol(seconds=300)], [taint(added=NOW - 100)], NOW, None, NOW + 200, EXPIRES),
    ("without timeAdded it counts from first seen", [tol(seconds=300)], [taint()], NOW - 30, None, NOW + 270, EXPIRES),
    (
        "a timeAdded in the future counts from first seen",
        [tol(seconds=300)],
        [taint(added=NOW + 3600)],
        NOW - 30,
        None,
        NOW + 270,
        EXPIRES,
    ),
    (
        "a deadline already passed is returned as is (fire now)",
        [tol(seconds=5)],
        [taint(added=NOW - 60)],
        NOW,
        None,
        NOW - 55,
        EXPIRES,
    ),
    (
        "zero seconds means at the taint's start",
        [tol(seconds=0)],
        [taint(added=NOW - 10)],
        NOW,
        None,
        NOW - 10,
        EXPIRES,
    ),
    (
        "negative seconds mean at the taint's start",
        [tol(seconds=-5)],
        [taint(added=NOW - 10)],
        NOW,
        None,
        NOW - 10,
        EXPIRES,
    ),
    (
        "the first tolerating toleration decides, not the shortest (upstream GetMatchingTolerations)",
        [tol(seconds=100), {"operator": "Exists", "tolerationSeconds": 10, "effect": "NoExecute"}],
        [taint(added=NOW)],
        NOW,
        None,
        NOW + 100,
        EXPIRES,
    ),
    (
        "a first toleration without seconds tolerates forever, whatever follows it",
        [
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists"},
            {"operator": "Exists", "tolerationSeconds": 60, "effect": "NoExecute"},
        ],
        [taint(added=NOW)],
        NOW,
        None,
        None,
        FOREVER,
    ),
    (
        "the earliest over several taints wins",
        [tol(seconds=100), tol("node.kubernetes.io/not-ready", 20)],
        [taint(added=NOW), taint("node.kubernetes.io/not-ready", added=NOW - 5)],
        NOW,
        None,
        NOW + 15,
        EXPIRES,
    ),
    (
        "a forever taint does not hide a finite one",
        [tol(), tol("node.kubernetes.io/not-ready", 20)],
        [taint(added=NOW), taint("node.kubernetes.io/not-ready", added=NOW)],
        NOW,
        None,
        NOW + 20,
        EXPIRES,
    ),
    (
        "a pod created after the taint counts from its creation",
        [tol(seconds=300)],
        [taint(added=NOW - 1000)],
        NOW,
        NOW - 100,
        NOW + 200,
        EXPIRES,
    ),
    (
        "a pod created before the taint counts from the taint",
        [tol(seconds=300)],
        [taint(added=NOW - 100)],
        NOW,
        NOW - 1000,
        NOW + 200,
        EXPIRES,
    ),
    (
        "a creation time in the future counts from now",
        [tol(seconds=300)],
        [taint(added=NOW - 100)],
        NOW,
        NOW + 50,
        NOW + 300,
        EXPIRES,
    ),
]


@pytest.mark.parametrize(
    ("tolerations", "taints", "seen", "created", "at", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decide_eviction(tolerations, taints, seen, created, at, reason):
    decision = decide_eviction(tolerations, taints, first_seen_at(seen), created, NOW)
    assert decision.at == at
    assert decision.reason == reason
    assert decision.evicts is (at is not None)


def test_the_decision_names_the_taint_and_the_toleration_that_set_it():
    short = tol("node.kubernetes.io/not-ready", 20)
    nr = taint("node.kubernetes.io/not-ready", added=NOW)
    decision = decide_eviction([tol(seconds=100), short], [taint(added=NOW), nr], first_seen_at(NOW), None, NOW)
    assert decision.taint == nr
    assert decision.toleration == short
    assert decision.started == NOW


NR, UR = "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"
NOT_READY_TAINT, UNREACHABLE_TAINT = taint(NR), taint(UR)


def ready_node(status: str | None, *taints: dict) -> NodeView:
    conditions = () if status is None else ({"type": "Ready", "status": status},)
    return NodeView("node1", "uid-node1", tuple(taints), taints=tuple(taints), conditions=conditions)


DRAIN = {"key": "example.com/drain", "effect": "NoExecute"}
STALE_CASES = [
    # name, Ready, the node's NoExecute taints -> the keys that evict
    ("a not-ready taint on a node not Ready evicts", "False", [NOT_READY_TAINT], [NR]),
    ("an unreachable taint on a node Unknown evicts", "Unknown", [UNREACHABLE_TAINT], [UR]),
    ("a not-ready taint on a Ready node is stale: it evicts nothing", "True", [NOT_READY_TAINT], []),
    ("an unreachable taint on a Ready node is stale too", "True", [UNREACHABLE_TAINT], []),
    ("another NoExecute taint on a Ready node evicts", "True", [NOT_READY_TAINT, DRAIN], ["example.com/drain"]),
    ("a node without a Ready condition: every taint evicts", None, [UNREACHABLE_TAINT], [UR]),
]


@pytest.mark.parametrize("ready,taints,keys", [c[1:] for c in STALE_CASES], ids=[c[0] for c in STALE_CASES])
def test_node_failure_taints_on_a_ready_node_evict_nothing(ready, taints, keys):
    assert [t["key"] for t in evicting_taints(ready_node(ready, *taints))] == keys
