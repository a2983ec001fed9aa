"""controller.explain: the per-pod eviction report, from the controller's own decision code."""

import pytest

from controller.explain import describe_duration, explain
from kube.timestamps import format_time

NOW = 1_800_000_000.0
UR = "node.kubernetes.io/unreachable"


def node(*taints: dict) -> dict:
    return {"metadata": {"name": "n1"}, "spec": {"taints": list(taints)},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}


def pod(name: str, tolerations: list[dict] | None = None, created: float = NOW - 3600, **metadata) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}",
                         "creationTimestamp": format_time(created), **metadata},
            "spec": {"nodeName": "n1", "tolerations": tolerations or []}}


TAINT = {"key": UR, "effect": "NoExecute", "timeAdded": format_time(NOW - 60)}
CASES = [
    ("an untolerating pod goes now", pod("a"), "ns/a: evicted now: taint node.kubernetes.io/unreachable:NoExecute "
                                               "is not tolerated"),
    ("a tolerating pod goes when its seconds run out", pod("b", [{"key": UR, "operator": "Exists",
                                                                  "effect": "NoExecute", "tolerationSeconds": 300}]),
     f"ns/b: evicted at {format_time(NOW + 240)} (in 4m0s): taint node.kubernetes.io/unreachable:NoExecute counted "
     f"from {format_time(NOW - 60)}, toleration node.kubernetes.io/unreachable Exists NoExecute for 300s"),
    ("an overdue pod is due now", pod("c", [{"key": UR, "operator": "Exists", "effect": "NoExecute",
                                             "tolerationSeconds": 30}]), "(overdue by 30s: due now)"),
    ("a pod tolerating forever stays", pod("d", [{"operator": "Exists"}]),
     "ns/d: not evicted (tolerates every NoExecute taint forever)"),
    ("a terminating pod is said to be so", pod("e", deletionTimestamp=format_time(NOW)), "ns/e: already terminating"),
]


@pytest.mark.parametrize(("pod_json", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_explain_lines(pod_json, expected):
    lines = explain(node(TAINT), [pod_json], NOW)
    assert lines[0] == ("node n1: Ready=Unknown; NoExecute taints: node.kubernetes.io/unreachable:NoExecute "
                        f"(added {format_time(NOW - 60)})")
    assert expected in lines[1]


def test_a_node_without_taints_evicts_nobody_and_says_when_it_has_no_pods():
    assert explain(node(), [pod("a")], NOW)[1] == "  ns/a: not evicted (no NoExecute taints)"
    assert explain(node(), [], NOW)[1] == "  (no pods on this node)"


def test_a_taint_without_time_added_is_counted_from_now_and_says_so():
    lines = explain(node({"key": "example.com/x", "effect": "NoExecute"}),
                    [pod("a", [{"key": "example.com/x", "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": 10}])], NOW)
    assert "(no timeAdded: counted from now)" in lines[0]
    assert f"evicted at {format_time(NOW + 10)} (in 10s)" in lines[1]


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (59.6, "1m0s"), (3725, "1h2m5s"), (-90, "1m30s")])
def test_describe_duration(seconds, text):
    assert describe_duration(seconds) == text
