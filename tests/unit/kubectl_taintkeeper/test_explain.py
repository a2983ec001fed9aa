"""kubectl_taintkeeper.explain: the per-pod eviction report, from the controller's own decision code."""

import pytest

from controller.tainteviction.disruption_budget import BudgetSettings
from kube.timestamps import format_time
from kubectl_taintkeeper.explain import Budgets, describe_duration, explain

NOW = 1_800_000_000.0
UR = "node.kubernetes.io/unreachable"


def node(*taints: dict) -> dict:
    return {
        "metadata": {"name": "n1"},
        "spec": {"taints": list(taints)},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]},
    }


def pod(name: str, tolerations: list[dict] | None = None, created: float = NOW - 3600, **metadata) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"u-{name}",
            "creationTimestamp": format_time(created),
            **metadata,
        },
        "spec": {"nodeName": "n1", "tolerations": tolerations or []},
    }


TAINT = {"key": UR, "effect": "NoExecute", "timeAdded": format_time(NOW - 60)}
CASES = [
    (
        "an untolerating pod goes now",
        pod("a"),
        "ns/a: evicted now: taint node.kubernetes.io/unreachable:NoExecute is not tolerated",
    ),
    (
        "a tolerating pod goes when its seconds run out",
        pod("b", [{"key": UR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
        f"ns/b: evicted at {format_time(NOW + 240)} (in 4m0s): taint node.kubernetes.io/unreachable:NoExecute counted "
        f"from {format_time(NOW - 60)}, toleration node.kubernetes.io/unreachable Exists NoExecute for 300s",
    ),
    (
        "an overdue pod is due now",
        pod("c", [{"key": UR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]),
        "(overdue by 30s: due now)",
    ),
    (
        "a pod tolerating forever stays",
        pod("d", [{"operator": "Exists"}]),
        "ns/d: not evicted (tolerates every NoExecute taint forever)",
    ),
    ("a terminating pod is said to be so", pod("e", deletionTimestamp=format_time(NOW)), "ns/e: already terminating"),
]


@pytest.mark.parametrize(("pod_json", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_explain_lines(pod_json, expected):
    lines = explain(node(TAINT), [pod_json], NOW)
    assert lines[0] == (
        "node n1: Ready=Unknown; NoExecute taints: node.kubernetes.io/unreachable:NoExecute "
        f"(added {format_time(NOW - 60)})"
    )
    assert expected in lines[1]


def test_a_node_without_taints_evicts_nobody_and_says_when_it_has_no_pods():
    assert explain(node(), [pod("a")], NOW)[1] == "  ns/a: not evicted (no NoExecute taints)"
    assert explain(node(), [], NOW)[1] == "  (no pods on this node)"


def test_a_taint_without_time_added_is_counted_from_now_and_says_so():
    lines = explain(
        node({"key": "example.com/x", "effect": "NoExecute"}),
        [pod("a", [{"key": "example.com/x", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}])],
        NOW,
    )
    assert "(no timeAdded: counted from now)" in lines[0]
    assert f"evicted at {format_time(NOW + 10)} (in 10s)" in lines[1]


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (59.6, "1m0s"), (3725, "1h2m5s"), (-90, "1m30s")])
def test_describe_duration(seconds, text):
    assert describe_duration(seconds) == text


# --- pods whose eviction respects their disruption budget ------------------------------------------

DRAIN = {"key": "example.com/drain", "effect": "NoExecute", "timeAdded": format_time(NOW - 60)}
RESPECT = {"taintkeeper.io/eviction": "respect-disruption-budget"}


def budget(name: str, allowed: int, selector: dict | None, namespace: str = "ns") -> dict:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": selector},
        "status": {"disruptionsAllowed": allowed},
    }


WEB = {"matchLabels": {"app": "web"}}
BUDGET_CASES = [
    (
        "a budget allowing none: waiting for it",
        {"annotations": RESPECT},
        [budget("web", 0, WEB)],
        Budgets(),
        "ns/a: waiting for disruption budget web (allowed 0): taint example.com/drain:NoExecute is not tolerated; "
        "through the Eviction API",
    ),
    (
        "a budget allowing one: evicted through it",
        {"annotations": RESPECT},
        [budget("web", 1, WEB)],
        Budgets(),
        "ns/a: evicted now: taint example.com/drain:NoExecute is not tolerated; through the Eviction API: "
        "disruption budget web (allowed 1)",
    ),
    (
        "no budget covers it",
        {"annotations": RESPECT},
        [budget("db", 0, {"matchLabels": {"app": "db"}}), budget("web", 0, WEB, namespace="other")],
        Budgets(),
        "ns/a: evicted now: taint example.com/drain:NoExecute is not tolerated; through the Eviction API (no "
        "disruption budget covers it)",
    ),
    (
        "not opted in: deleted, whatever the budget",
        {},
        [budget("web", 0, WEB)],
        Budgets(),
        "ns/a: evicted now: taint example.com/drain:NoExecute is not tolerated",
    ),
    (
        "opted in by its namespace",
        {},
        [budget("web", 0, WEB)],
        Budgets(namespace_annotations={"ns": RESPECT}),
        "ns/a: waiting for disruption budget web (allowed 0)",
    ),
    (
        "opted in by the controller's flag",
        {},
        [budget("web", 0, WEB)],
        Budgets(BudgetSettings(taint_keys=frozenset({"example.com/drain"}))),
        "ns/a: waiting for disruption budget web",
    ),
    (
        "with a ceiling: when it is deleted anyway",
        {"annotations": {**RESPECT, "taintkeeper.io/disruption-budget-timeout": "10m"}},
        [budget("web", 0, WEB)],
        Budgets(),
        f"through the Eviction API; deleted anyway at {format_time(NOW - 60 + 600)}",
    ),
    (
        "past its ceiling: deleted",
        {"annotations": {**RESPECT, "taintkeeper.io/disruption-budget-timeout": "30s"}},
        [budget("web", 0, WEB)],
        Budgets(),
        "ns/a: evicted now: taint example.com/drain:NoExecute is not tolerated; deleted, not evicted: its disruption "
        "budget ceiling (30s) has passed",
    ),
    (
        "an empty selector in policy/v1beta1 covers nothing",
        {"annotations": RESPECT},
        [budget("all", 0, {})],
        Budgets(empty_selects_all=False),
        "(no disruption budget covers it)",
    ),
]


@pytest.mark.parametrize(
    ("metadata", "budgets", "known", "expected"), [c[1:] for c in BUDGET_CASES], ids=[c[0] for c in BUDGET_CASES]
)
def test_explain_says_which_disruption_budget_a_pod_waits_for(metadata, budgets, known, expected):
    known = Budgets(known.settings, known.namespace_annotations, budgets, empty_selects_all=known.empty_selects_all)
    lines = explain(node(DRAIN), [pod("a", labels={"app": "web"}, **metadata)], NOW, known)
    assert lines[1].startswith(f"  {expected}") or expected in lines[1], lines[1]


def test_a_node_failure_taint_never_waits_for_a_budget():
    lines = explain(
        node(TAINT),
        [pod("a", labels={"app": "web"}, annotations=RESPECT)],
        NOW,
        Budgets(budgets=[budget("web", 0, WEB)]),
    )
    assert lines[1] == "  ns/a: evicted now: taint node.kubernetes.io/unreachable:NoExecute is not tolerated"


def test_a_pod_not_yet_due_says_which_budget_its_eviction_will_ask():
    lines = explain(
        node(DRAIN),
        [
            pod(
                "a",
                [{"key": "example.com/drain", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600}],
                labels={"app": "web"},
                annotations=RESPECT,
            )
        ],
        NOW,
        Budgets(budgets=[budget("web", 0, WEB)]),
    )
    assert lines[1].startswith(f"  ns/a: evicted at {format_time(NOW + 540)} (in 9m0s)")
    assert lines[1].endswith("; through the Eviction API: disruption budget web (allowed 0)")


def test_unreadable_budgets_are_said():
    lines = explain(
        node(DRAIN),
        [pod("a", annotations=RESPECT)],
        NOW,
        Budgets(budgets=None, unreadable="403 Forbidden: poddisruptionbudgets is forbidden"),
    )
    assert lines[1].endswith("(disruption budgets unreadable: 403 Forbidden: poddisruptionbudgets is forbidden)")


def test_a_ready_nodes_stale_node_failure_taint_evicts_nobody_and_says_why():
    ready = {**node(TAINT), "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    lines = explain(ready, [pod("a")], NOW)
    assert "its not-ready/unreachable taint is stale" in lines[1]
    assert lines[2] == "  ns/a: not evicted (no NoExecute taint but the stale one)"
