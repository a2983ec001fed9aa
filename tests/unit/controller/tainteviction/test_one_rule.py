"""The manager, `status` and `explain` on the same cases: one rule (controller/tainteviction/verdict.py)
decides whether and when a pod is deleted, so what the commands report is what the manager does.

Each case is a node and a pod as the API has them. The manager runs on them (a fake clock, every timer
fired and worked off each 0.1 s); `status` lists the pod's pending eviction or not, at a deadline; `explain`
prints the deadline or says why the pod stays. All three must agree."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from controller.objects import node_view, pod_view
from controller.tainteviction.verdict import EvictionRule
from kube.timestamps import format_time
from kubectl_taintkeeper.explain import explain
from kubectl_taintkeeper.status import pending_evictions
from tests.support.api_json import node_json, pod_json
from tests.support.builders import NOT_READY, UNREACHABLE, taint, toleration
from tests.support.fencing import OUT_OF_SERVICE_TAINT
from tests.unit.controller.tainteviction.harness import START, Harness

HORIZON = 400.0  # seconds the manager runs: past every case's deadline


@dataclass(frozen=True)
class Case:
    node: dict[str, Any]
    pod: dict[str, Any]
    deleted_after: float | None  # seconds after START; None: never
    explained: str  # what explain's line for the pod says


CASES = {
    "an untolerated taint deletes at once": Case(
        node_json("node1", "Unknown", taint(UNREACHABLE, added=START - 50)),
        pod_json("p", created=START - 3600),
        0,
        "is not tolerated",
    ),
    "a toleration's seconds count from the taint's timeAdded": Case(
        node_json("node1", "False", taint(NOT_READY, added=START - 100)),
        pod_json("p", tolerations=[toleration(NOT_READY, 300)], created=START - 3600),
        200,
        "evicted at",
    ),
    "of two taints the earlier deadline wins": Case(
        node_json("node1", "Unknown", taint(UNREACHABLE, added=START), taint("example.com/maintenance", added=START)),
        pod_json(
            "p",
            tolerations=[toleration(UNREACHABLE, 300), toleration("example.com/maintenance", 60)],
            created=START - 3600,
        ),
        60,
        "example.com/maintenance",
    ),
    "a pod bound after the taint counts from its binding": Case(
        node_json("node1", "Unknown", taint(UNREACHABLE, added=START - 1000)),
        pod_json("p", tolerations=[toleration(UNREACHABLE, 300)], created=START - 100),
        200,
        "evicted at",
    ),
    "a taint without timeAdded counts from when it is first seen": Case(
        node_json("node1", "Unknown", taint(UNREACHABLE)),
        pod_json("p", tolerations=[toleration(UNREACHABLE, 30)], created=START - 3600),
        30,
        "evicted at",
    ),
    "a pod tolerating forever stays": Case(
        node_json("node1", "Unknown", taint(UNREACHABLE, added=START)),
        pod_json("p", tolerations=[toleration(UNREACHABLE)], created=START - 3600),
        None,
        "tolerates every NoExecute taint forever",
    ),
    "a stale node-failure taint on a Ready node evicts nothing": Case(
        node_json("node1", "True", taint(NOT_READY, added=START - 600)),
        pod_json("p", created=START - 3600),
        None,
        "no NoExecute taint but the stale one",
    ),
    "anyone's NoExecute taint on a Ready node evicts": Case(
        node_json("node1", "True", taint("example.com/drain", added=START - 10)),
        pod_json("p", tolerations=[toleration("example.com/drain", 20)], created=START - 3600),
        10,
        "evicted at",
    ),
    "a terminating pod is left alone": Case(
        node_json("node1", "Unknown", taint(UNREACHABLE, added=START)),
        pod_json("p", created=START - 3600, terminating=True),
        None,
        "already terminating",
    ),
    "a pod the out-of-service handling force deletes is left to it": Case(
        node_json("node1", "Unknown", taint(UNREACHABLE, added=START - 400), OUT_OF_SERVICE_TAINT),
        pod_json("p", tolerations=[toleration(UNREACHABLE, 300)], created=START - 3600),
        None,
        "left to the out-of-service handling",
    ),
}


def manager_deletes(case: Case, rule: EvictionRule) -> float | None:
    h = Harness(comparison_operators=rule.comparison_operators, defer_to_out_of_service=rule.defer_to_out_of_service)
    h.set_node(node_view(case.node))
    h.add_pod(pod_view(case.pod))
    h.run_for(HORIZON, step=0.1)
    deleted = [at for key, _uid, at in h.actions.evicted if key == "default/p"]
    assert len(deleted) <= 1
    return deleted[0] - START if deleted else None


WITHOUT_OUT_OF_SERVICE = EvictionRule(defer_to_out_of_service=False)  # --controllers=*,-out-of-service
RULES = {
    **{name: (case, EvictionRule()) for name, case in CASES.items()},
    "without the out-of-service handling, the manager deletes the pod the handling would own": (
        replace(
            CASES["a pod the out-of-service handling force deletes is left to it"],
            deleted_after=0,
            explained="is not tolerated",
        ),
        WITHOUT_OUT_OF_SERVICE,
    ),
}


@pytest.mark.parametrize(("case", "rule"), RULES.values(), ids=RULES.keys())
def test_the_manager_status_and_explain_agree(case, rule):
    deleted_after = manager_deletes(case, rule)
    if case.deleted_after is None:
        assert deleted_after is None
    else:
        assert deleted_after == pytest.approx(case.deleted_after, abs=0.11)

    pending = pending_evictions([node_view(case.node)], [case.pod], START, rule=rule)
    if case.deleted_after is None:
        assert pending == ()
    else:
        assert [(p.pod, p.deadline - START) for p in pending] == [("p", case.deleted_after)]

    line = next(line for line in explain(case.node, [case.pod], START, rule=rule) if "default/p" in line)
    assert case.explained in line
    if case.deleted_after:
        assert format_time(START + case.deleted_after) in line
