"""controller.tainteviction.disruption_budget: which evictions wait for a PodDisruptionBudget, and
how long; and the manager acting on it (Evictions instead of DELETE, retries, the ceiling)."""

from __future__ import annotations

import itertools

import pytest

from controller.budget_annotations import BUDGET_TIMEOUT_ANNOTATION, EVICTION_ANNOTATION, RESPECT_DISRUPTION_BUDGET
from controller.objects import NamespaceView
from controller.options import OptionsError, parse_options
from controller.tainteviction.disruption_budget import (
    BudgetSettings,
    Method,
    budget_timeout,
    check_taint_keys,
    eviction_method,
    opted_in,
    refusal_reason,
    respects_budget,
)
from controller.tainteviction.manager import BUDGET_TIMEOUT_REASON, WAITING_REASON
from tests.support.builders import UNREACHABLE, node, pod, taint, toleration
from tests.unit.controller.tainteviction.harness import Harness

MAINTENANCE = "example.com/maintenance"
NOT_READY = "node.kubernetes.io/not-ready"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
RESPECT = {EVICTION_ANNOTATION: RESPECT_DISRUPTION_BUDGET}


@pytest.mark.parametrize(
    "pod_annotations, namespace_annotations, expected",
    [
        ({}, {}, False),
        (RESPECT, {}, True),
        ({}, RESPECT, True),
        ({EVICTION_ANNOTATION: "delete"}, {}, False),
        ({EVICTION_ANNOTATION: "Respect-Disruption-Budget"}, {}, False),  # values are exact, as label values
    ],
    ids=["neither", "the pod", "its namespace", "another value", "another case"],
)
def test_a_pod_opts_in_by_its_own_or_its_namespaces_annotation(pod_annotations, namespace_annotations, expected):
    assert opted_in(pod_annotations, namespace_annotations) is expected


@pytest.mark.parametrize(
    "due, pod_opted_in, flag_keys, expected",
    [
        ([taint(MAINTENANCE)], True, (), True),
        ([taint(MAINTENANCE)], False, (), False),
        ([taint(MAINTENANCE)], False, (MAINTENANCE,), True),
        ([taint("other")], False, (MAINTENANCE,), False),
        ([taint(UNREACHABLE)], True, (), False),
        ([taint(NOT_READY)], True, (), False),
        ([taint(OUT_OF_SERVICE)], True, (), False),
        ([taint(MAINTENANCE), taint(UNREACHABLE)], True, (), False),
        ([taint(MAINTENANCE), taint("other")], False, (MAINTENANCE,), False),
        ([], True, (), False),
    ],
    ids=[
        "opted-in pod, drain taint",
        "not opted in",
        "the taint key in the flag",
        "another key than the flag's",
        "unreachable never waits",
        "not-ready never waits",
        "out-of-service never waits",
        "a node-failure taint due too deletes",
        "every due taint must be covered",
        "nothing due",
    ],
)
def test_which_evictions_wait_for_a_budget(due, pod_opted_in, flag_keys, expected):
    assert respects_budget(due, pod_opted_in, BudgetSettings(taint_keys=frozenset(flag_keys))) is expected


@pytest.mark.parametrize(
    "pod_annotations, namespace_annotations, default, expected",
    [
        ({}, {}, None, (None, None)),
        ({}, {}, 600.0, (600.0, None)),
        ({BUDGET_TIMEOUT_ANNOTATION: "10m"}, {}, None, (600.0, None)),
        ({}, {BUDGET_TIMEOUT_ANNOTATION: "90s"}, 600.0, (90.0, None)),
        ({BUDGET_TIMEOUT_ANNOTATION: "1m"}, {BUDGET_TIMEOUT_ANNOTATION: "1h"}, None, (60.0, None)),
        ({BUDGET_TIMEOUT_ANNOTATION: "0"}, {}, 600.0, (0.0, None)),
        (
            {BUDGET_TIMEOUT_ANNOTATION: "ten minutes"},
            {},
            600.0,
            (
                600.0,
                "pod annotation taintkeeper.io/disruption-budget-timeout: invalid duration 'ten minutes' "
                "(use Go durations such as 5s, 1m30s, 300ms)",
            ),
        ),
        (
            {},
            {BUDGET_TIMEOUT_ANNOTATION: "-5m"},
            None,
            (None, "namespace annotation taintkeeper.io/disruption-budget-timeout: '-5m' is negative"),
        ),
    ],
    ids=[
        "no ceiling",
        "the flag's",
        "the pod's",
        "the namespace's over the flag",
        "the pod's over the namespace's",
        "zero: delete at the deadline",
        "not a duration: the flag's, and why",
        "negative: ignored, and why",
    ],
)
def test_the_ceiling_comes_from_the_pod_then_the_namespace_then_the_flag(
    pod_annotations, namespace_annotations, default, expected
):
    assert budget_timeout(pod_annotations, namespace_annotations, default) == expected


@pytest.mark.parametrize(
    "respects, timeout, now, expected",
    [
        (False, None, 100.0, Method.DELETE),
        (True, None, 10_000.0, Method.EVICT),
        (True, 60.0, 159.9, Method.EVICT),
        (True, 60.0, 160.0, Method.DELETE_AFTER_BUDGET_TIMEOUT),
        (True, 0.0, 100.0, Method.DELETE_AFTER_BUDGET_TIMEOUT),
    ],
    ids=[
        "not opted in: delete",
        "no ceiling: evict forever",
        "before the ceiling: evict",
        "at the ceiling: delete",
        "zero ceiling: delete at once",
    ],
)
def test_the_ceiling_counts_from_the_deadline(respects, timeout, now, expected):
    assert eviction_method(respects, 100.0, timeout, now) is expected


@pytest.mark.parametrize(
    "status, expected",
    [
        (
            {
                "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                "details": {
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
                        }
                    ]
                },
            },
            "The disruption budget web needs 2 healthy pods and has 2 currently",
        ),
        (
            {"message": "Cannot evict pod as it would violate the pod's disruption budget."},
            "Cannot evict pod as it would violate the pod's disruption budget.",
        ),
        ({"message": "Too many requests, please try again later."}, None),
        ({}, None),
    ],
    ids=["a budget's cause", "a budget's message only", "the apiserver's throttling", "no status"],
)
def test_only_a_budget_refusal_counts_as_waiting_for_a_budget(status, expected):
    assert refusal_reason(status) == expected


@pytest.mark.parametrize(
    "value, error",
    [
        ("example.com/maintenance,example.com/pool", None),
        ("node.kubernetes.io/unreachable", "node.kubernetes.io/unreachable cannot respect disruption budgets"),
        (
            "a,node.kubernetes.io/not-ready,node.kubernetes.io/out-of-service",
            "node.kubernetes.io/not-ready, node.kubernetes.io/out-of-service cannot respect",
        ),
    ],
)
def test_the_flag_refuses_the_node_failure_taints(value, error):
    if error is None:
        assert check_taint_keys(value.split(",")) == frozenset(value.split(","))
        assert parse_options([f"--respect-disruption-budgets-for-taints={value}"]).budgets.taint_keys == frozenset(
            value.split(",")
        )
        return
    with pytest.raises(OptionsError, match=f"--respect-disruption-budgets-for-taints: {error}"):
        parse_options([f"--respect-disruption-budgets-for-taints={value}"])


@pytest.mark.parametrize("flag, expected", [("10m", 600.0), ("0", None)])
def test_the_ceiling_flag(flag, expected):
    assert parse_options([f"--disruption-budget-timeout={flag}"]).budgets.timeout == expected


@pytest.mark.parametrize("flag, error", [("ten", "invalid duration"), ("-1m", "must not be negative")])
def test_a_bad_ceiling_flag_is_refused(flag, error):
    with pytest.raises(OptionsError, match=error):
        parse_options([f"--disruption-budget-timeout={flag}"])


# --- the manager ----------------------------------------------------------------------------------


def refusals(h: Harness) -> list[tuple[str, str, str, str]]:
    return [event for event in h.events.recorded if event[2] == WAITING_REASON]


def test_an_opted_in_pod_is_evicted_through_the_api_not_deleted():
    h = Harness()
    h.set_node(node("node1", taint(MAINTENANCE)))
    h.add_pod(pod("p", annotations=RESPECT))
    h.drain()
    assert [key for key, _ in h.actions.eviction_requests] == ["default/p"]
    assert h.evicted_keys() == ["default/p"]
    assert refusals(h) == []


def test_a_pod_not_opted_in_is_deleted_as_upstream_does():
    h = Harness()
    h.set_node(node("node1", taint(MAINTENANCE)))
    h.add_pod(pod("p"))
    h.drain()
    assert h.actions.eviction_requests == []
    assert h.evicted_keys() == ["default/p"]


def test_a_refused_eviction_is_retried_until_the_budget_allows_it_and_said_once():
    h = Harness()
    h.actions.budget_refusals_left = 6
    h.set_node(node("node1", taint(MAINTENANCE)))
    h.add_pod(pod("p", annotations=RESPECT))
    h.run_for(60)
    assert len(h.actions.eviction_requests) == 7
    times = [at for _, at in h.actions.eviction_requests]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([5.0] * 6, abs=0.11)  # kubectl drain's pace (the fake clock steps 0.1 s)
    assert h.evicted_keys() == ["default/p"]
    assert refusals(h) == [
        (
            "default/p",
            "Warning",
            WAITING_REASON,
            "Eviction of Pod default/p refused: The disruption budget web needs 2 healthy pods and "
            "has 2 currently; retrying until the budget allows it",
        )
    ]


def test_removing_the_taint_while_waiting_for_the_budget_cancels_the_eviction():
    h = Harness()
    h.actions.budget_refusals_left = 1000
    h.set_node(node("node1", taint(MAINTENANCE)))
    h.add_pod(pod("p", annotations=RESPECT))
    h.run_for(5)
    h.set_node(node("node1"))
    h.run_for(120)
    assert h.evicted_keys() == []
    assert h.manager.pending() == 0
    assert h.events.recorded[-1][2:] == ("TaintManagerEviction", "Cancelling deletion of Pod default/p")


def test_past_the_ceiling_the_pod_is_deleted_with_an_event():
    h = Harness()
    h.actions.budget_refusals_left = 1000
    h.set_node(node("node1", taint(MAINTENANCE)))
    h.add_pod(pod("p", annotations={**RESPECT, BUDGET_TIMEOUT_ANNOTATION: "45s"}))
    h.run_for(44.9)
    assert h.evicted_keys() == []
    h.run_for(0.2)
    assert h.evicted_keys() == ["default/p"]
    assert h.evicted_at("default/p") == pytest.approx(45, abs=0.11)  # at the ceiling, not a backoff later
    assert refusals(h)[0][3].endswith("retrying until 2027-01-15T08:00:45Z, then deleting it")
    assert [event[1:] for event in h.events.recorded if event[2] == BUDGET_TIMEOUT_REASON] == [
        (
            "Warning",
            BUDGET_TIMEOUT_REASON,
            "Disruption budget did not allow the eviction within 45s of its deadline; deleting Pod default/p",
        )
    ]


def test_the_ceiling_counts_from_the_deadline_so_a_new_leader_does_not_restart_it():
    h = Harness()
    h.actions.budget_refusals_left = 1000
    start = h.clock.now()
    h.set_node(node("node1", taint(MAINTENANCE, added=start - 600)))  # due ten minutes ago
    h.add_pod(pod("p", [toleration(MAINTENANCE, seconds=0)], annotations={**RESPECT, BUDGET_TIMEOUT_ANNOTATION: "5m"}))
    h.drain()
    assert h.actions.eviction_requests == []
    assert h.evicted_keys() == ["default/p"]


def test_a_node_failure_taint_deletes_an_opted_in_pod_at_once():
    h = Harness()
    h.actions.budget_refusals_left = 1000
    h.set_node(node("node1", taint(UNREACHABLE)))
    h.add_pod(pod("p", annotations=RESPECT))
    h.drain()
    assert h.actions.eviction_requests == []
    assert h.evicted_keys() == ["default/p"]


def test_a_node_failing_while_its_pod_waits_for_the_budget_deletes_it_when_that_taint_is_due():
    h = Harness()
    h.actions.budget_refusals_left = 1000
    h.set_node(node("node1", taint(MAINTENANCE)))
    h.add_pod(pod("p", [toleration(UNREACHABLE, seconds=30)], annotations=RESPECT))
    h.run_for(10)
    assert h.evicted_keys() == []
    h.set_node(node("node1", taint(MAINTENANCE), taint(UNREACHABLE)))
    h.run_for(29.5)
    assert h.evicted_keys() == []
    h.run_for(31)
    assert h.evicted_keys() == ["default/p"]


def test_the_namespace_annotation_and_the_flag_opt_pods_in():
    by_namespace = Harness()
    by_namespace.namespaces.items["team"] = NamespaceView("team", annotations=tuple(RESPECT.items()))
    by_flag = Harness(budgets=BudgetSettings(taint_keys=frozenset({MAINTENANCE})))
    for h in (by_namespace, by_flag):
        h.actions.budget_refusals_left = 1000
        h.set_node(node("node1", taint(MAINTENANCE)))
        h.add_pod(pod("p", namespace="team"))
        h.run_for(5)
        assert h.evicted_keys() == []
        assert len(h.actions.eviction_requests) > 1


def test_a_bad_ceiling_annotation_is_said_in_the_waiting_event_and_the_flag_applies():
    h = Harness(budgets=BudgetSettings(timeout=20.0))
    h.actions.budget_refusals_left = 1000
    h.set_node(node("node1", taint(MAINTENANCE)))
    h.add_pod(pod("p", annotations={**RESPECT, BUDGET_TIMEOUT_ANNOTATION: "soon"}))
    h.run_for(21)
    assert (
        "(ignored: pod annotation taintkeeper.io/disruption-budget-timeout: invalid duration 'soon'"
        in refusals(h)[0][3]
    )
    assert h.evicted_at("default/p") == pytest.approx(20, abs=0.11)


def test_dry_run_evicts_nothing_for_an_opted_in_pod():
    from controller.tainteviction.manager import TaintEvictionManager
    from controller.workqueue import WorkQueue

    h = Harness()
    h.manager = TaintEvictionManager(
        h.pods, h.actions, h.events, clock=h.clock, dry_run=True, queue=WorkQueue(h.clock), namespaces=h.namespaces
    )
    h.manager.activate()
    h.set_node(node("node1", taint(MAINTENANCE)))
    h.add_pod(pod("p", annotations=RESPECT))
    h.drain()
    assert h.actions.eviction_requests == [] and h.evicted_keys() == []
