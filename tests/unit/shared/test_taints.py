"""shared.taints: NoExecute filter, condition -> taint mapping, taint diffs."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.taints import (
    MANAGED_NO_SCHEDULE_KEYS,
    desired_no_schedule_taints,
    managed_no_schedule_taints,
    no_execute_taints,
    node_taints,
    ready_status,
    taint_diff,
)


def test_no_execute_taints_keeps_only_no_execute():  # upstream TestFilterNoExecuteTaints
    taints = [
        {"key": "one", "value": "one", "effect": "NoExecute"},
        {"key": "two", "value": "two", "effect": "NoSchedule"},
    ]
    assert no_execute_taints(taints) == [taints[0]]


def node(conditions=(), unschedulable=False, taints=None):
    return {
        "spec": {"unschedulable": unschedulable, **({"taints": taints} if taints is not None else {})},
        "status": {"conditions": [{"type": t, "status": s} for t, s in conditions]},
    }


NS = "NoSchedule"
CONDITION_CASES = [  # upstream TestTaintNodeByCondition / TestTaintsNodeByCondition
    ("a healthy node needs no taints", [("Ready", "True")], False, []),
    ("Ready=False calls for not-ready", [("Ready", "False")], False, ["node.kubernetes.io/not-ready"]),
    ("Ready=Unknown calls for unreachable", [("Ready", "Unknown")], False, ["node.kubernetes.io/unreachable"]),
    ("memory pressure", [("Ready", "True"), ("MemoryPressure", "True")], False, ["node.kubernetes.io/memory-pressure"]),
    ("disk pressure", [("Ready", "True"), ("DiskPressure", "True")], False, ["node.kubernetes.io/disk-pressure"]),
    ("pid pressure", [("Ready", "True"), ("PIDPressure", "True")], False, ["node.kubernetes.io/pid-pressure"]),
    (
        "network unavailable on a ready node",
        [("Ready", "True"), ("NetworkUnavailable", "True")],
        False,
        ["node.kubernetes.io/network-unavailable"],
    ),
    (
        "network unavailable on a not-ready node calls for both",
        [("Ready", "False"), ("NetworkUnavailable", "True")],
        False,
        ["node.kubernetes.io/not-ready", "node.kubernetes.io/network-unavailable"],
    ),
    (
        "pressure conditions that are False call for nothing",
        [("Ready", "True"), ("MemoryPressure", "False"), ("DiskPressure", "Unknown")],
        False,
        [],
    ),
    (
        "several pressures at once give several taints",
        [("Ready", "True"), ("PIDPressure", "True"), ("MemoryPressure", "True"), ("DiskPressure", "True")],
        False,
        ["node.kubernetes.io/pid-pressure", "node.kubernetes.io/memory-pressure", "node.kubernetes.io/disk-pressure"],
    ),
    ("a cordoned node gets unschedulable", [("Ready", "True")], True, ["node.kubernetes.io/unschedulable"]),
    ("a node with no Ready condition gets no readiness taint", [], False, []),
]


@pytest.mark.parametrize(
    ("conditions", "unschedulable", "keys"), [c[1:] for c in CONDITION_CASES], ids=[c[0] for c in CONDITION_CASES]
)
def test_desired_no_schedule_taints(conditions, unschedulable, keys):
    api_node = node(conditions, unschedulable)
    desired = desired_no_schedule_taints(api_node["status"]["conditions"], api_node["spec"]["unschedulable"])
    assert desired == [{"key": k, "effect": NS} for k in keys]


def test_only_managed_no_schedule_taints_are_considered_ours():
    taints = [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
        {"key": "example.com/gpu", "effect": "NoSchedule"},
    ]
    assert managed_no_schedule_taints(taints) == [taints[0], taints[2]]


def test_ready_status_and_taints_read_missing_fields_as_empty():
    assert ready_status({}) is None
    assert ready_status(node([("Ready", "Unknown")])) == "Unknown"
    assert node_taints({}) == []
    assert node_taints({"spec": {"taints": None}}) == []


A = {"key": "a", "effect": "NoSchedule"}
A_EXEC = {"key": "a", "effect": "NoExecute"}
B = {"key": "b", "effect": "NoSchedule"}
A_OTHER_VALUE = {"key": "a", "value": "v", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}
DIFF_CASES = [
    ("equal sets need nothing", [A, B], [B, A], [], []),
    ("a missing taint is added", [A], [A, B], [B], []),
    ("an extra taint is removed", [A, B], [A], [], [B]),
    ("same key with another effect is another taint", [A], [A_EXEC], [A_EXEC], [A]),
    ("same key and effect with another value is the same taint", [A_OTHER_VALUE], [A], [], []),
]


@pytest.mark.parametrize(
    ("current", "desired", "to_add", "to_remove"), [c[1:] for c in DIFF_CASES], ids=[c[0] for c in DIFF_CASES]
)
def test_taint_diff(current, desired, to_add, to_remove):
    assert taint_diff(current, desired) == (to_add, to_remove)


taint_st = st.fixed_dictionaries(
    {
        "key": st.sampled_from([*sorted(MANAGED_NO_SCHEDULE_KEYS), "x", "y"]),
        "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
    }
)


@given(
    st.lists(taint_st, unique_by=lambda t: (t["key"], t["effect"])),
    st.lists(taint_st, unique_by=lambda t: (t["key"], t["effect"])),
)
def test_applying_a_taint_diff_reaches_the_desired_set(current, desired):
    to_add, to_remove = taint_diff(current, desired)
    removed = {(t["key"], t["effect"]) for t in to_remove}
    result = [t for t in current if (t["key"], t["effect"]) not in removed] + to_add
    assert {(t["key"], t["effect"]) for t in result} == {(t["key"], t["effect"]) for t in desired}
