"""The node lifecycle's pure decisions (decision.py): the taint list a write makes, and whether there is one;
the beta OS/arch labels to bring in step with the GA ones."""

from __future__ import annotations

from typing import Any

import pytest

from controller.nodelifecycle.decision import labels_to_reconcile, tainted_node_counts, taints_to_write
from controller.objects import NodeView
from kube.timestamps import format_time
from tests.support.builders import NOT_READY, UNREACHABLE, taint

NOW = 1_700_000_000.0
NO_SCHEDULE_NOT_READY = taint(NOT_READY, effect="NoSchedule")
OPERATOR = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}

CASES: list[
    tuple[str, list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]] | None]
] = [
    ("removing a taint the node has", [NO_SCHEDULE_NOT_READY, OPERATOR], [], [NO_SCHEDULE_NOT_READY], [OPERATOR]),
    ("removing a taint the node lacks: nothing to write", [OPERATOR], [], [NO_SCHEDULE_NOT_READY], None),
    ("adding a taint the node has: nothing to write", [NO_SCHEDULE_NOT_READY], [NO_SCHEDULE_NOT_READY], [], None),
    ("a new NoExecute taint gets timeAdded", [OPERATOR], [taint(UNREACHABLE)], [], [OPERATOR, taint(UNREACHABLE, NOW)]),
    (
        "a swap: one out, the other in",
        [taint(NOT_READY, NOW - 60)],
        [taint(UNREACHABLE)],
        [taint(NOT_READY)],
        [{"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": format_time(NOW)}],
    ),
]


@pytest.mark.parametrize(
    ("current", "add", "remove", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_taints_to_write(
    current: list[dict[str, Any]],
    add: list[dict[str, Any]],
    remove: list[dict[str, Any]],
    expected: list[dict[str, Any]] | None,
) -> None:
    assert taints_to_write(current, add, remove, NOW) == expected


GA_OS, GA_ARCH = "kubernetes.io/os", "kubernetes.io/arch"
BETA_OS, BETA_ARCH = "beta.kubernetes.io/os", "beta.kubernetes.io/arch"
ZONE = "topology.kubernetes.io/zone"

LABEL_CASES: list[tuple[str, dict[str, str], dict[str, str]]] = [
    ("no labels: nothing to set", {}, {}),
    ("no GA OS/arch label: nothing to set", {ZONE: "z1", BETA_OS: "windows"}, {}),
    (
        "GA labels without beta twins: both twins set",
        {GA_OS: "linux", GA_ARCH: "amd64"},
        {BETA_OS: "linux", BETA_ARCH: "amd64"},
    ),
    (
        "beta twins that differ: set to the GA values",
        {GA_OS: "linux", GA_ARCH: "amd64", BETA_OS: "windows", BETA_ARCH: "arm"},
        {BETA_OS: "linux", BETA_ARCH: "amd64"},
    ),
    (
        "beta twins already equal: nothing to set",
        {GA_OS: "linux", GA_ARCH: "arm64", BETA_OS: "linux", BETA_ARCH: "arm64"},
        {},
    ),
    (
        "only one GA label: only its twin is set, the other beta label is left alone",
        {GA_ARCH: "arm64", BETA_OS: "windows"},
        {BETA_ARCH: "arm64"},
    ),
    ("an empty GA value is copied too", {GA_OS: "", BETA_OS: "linux"}, {BETA_OS: ""}),
]


@pytest.mark.parametrize(
    ("labels", "expected"), [case[1:] for case in LABEL_CASES], ids=[case[0] for case in LABEL_CASES]
)
def test_labels_to_reconcile(labels: dict[str, str], expected: dict[str, str]) -> None:
    assert labels_to_reconcile(labels) == expected


def tainted(name: str, *taints: dict[str, Any]) -> NodeView:
    return NodeView(name, f"uid-{name}", tuple(t for t in taints if t["effect"] == "NoExecute"), taints=taints)


MAINTENANCE = {"key": "example.com/maintenance", "effect": "NoExecute"}
COUNTS = [
    ("no taints: none counted", [tainted("a")], 0, 0),
    (
        "a not-ready and an unreachable node count NoExecute",
        [tainted("a", taint(NOT_READY)), tainted("b", taint(UNREACHABLE))],
        2,
        0,
    ),
    (
        "an operator's NoExecute or NoSchedule taint is not ours",
        [tainted("a", MAINTENANCE), tainted("b", OPERATOR)],
        0,
        0,
    ),
    ("a node with both effects counts once under each", [tainted("a", taint(NOT_READY), NO_SCHEDULE_NOT_READY)], 1, 1),
    (
        "cordoning and condition taints count NoSchedule",
        [
            tainted("a", {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}),
            tainted("b", {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}),
        ],
        0,
        2,
    ),
]


@pytest.mark.parametrize(
    ("nodes", "no_execute", "no_schedule"), [case[1:] for case in COUNTS], ids=[case[0] for case in COUNTS]
)
def test_tainted_node_counts(nodes: list[NodeView], no_execute: int, no_schedule: int) -> None:
    assert tainted_node_counts(nodes) == {"NoExecute": no_execute, "NoSchedule": no_schedule}
