"""controller/fencing.py: whether `fence` may fence a node (its Ready condition not True for --min-down),
and the JSON patches that fence and unfence it, applied for real (the `jsonpatch` library) so a node
changed since it was read is refused as the apiserver refuses it (a failed `test` op: 422)."""

from __future__ import annotations

import copy

import jsonpatch
import pytest

from controller.fencing import (
    CONFIRMED_AT_ANNOTATION,
    FENCED_AT_ANNOTATION,
    FENCED_BY_ANNOTATION,
    fence_patch,
    fence_refusal,
    fenced_text,
    out_of_service_taint,
    unfence_patch,
)
from shared.taints import NO_EXECUTE, NO_SCHEDULE, OUT_OF_SERVICE, UNREACHABLE
from tests.support.fencing import OUT_OF_SERVICE_TAINT, START, node_json

MIN_DOWN = 300.0
NOW = START
UNREACHABLE_TAINTS = [
    {"key": UNREACHABLE, "effect": NO_SCHEDULE},
    {"key": UNREACHABLE, "effect": NO_EXECUTE, "timeAdded": "2027-01-15T07:50:00Z"},
]

REFUSALS = {
    "down 10m, Unknown: may be fenced": (node_json(since=NOW - 600), None),
    "down exactly --min-down: may be fenced": (node_json(since=NOW - MIN_DOWN), None),
    "NotReady (False) 10m: may be fenced": (node_json("node1", "False", since=NOW - 600), None),
    "Ready: refused": (
        node_json("node1", "True", since=NOW - 3600),
        "node node1 is Ready: its kubelet is reporting, so its pods may be running; not fencing it "
        "(fence only a node that is powered off, cut off, or whose workloads are known to be stopped)",
    ),
    "down for less than --min-down: refused": (
        node_json(since=NOW - 130),
        "node node1 has not been Ready for only 2m10s (since 2027-01-15T07:57:50Z), less than --min-down 5m0s; "
        "not fencing it yet",
    ),
    "no Ready condition: refused": (
        node_json("node1", None),
        "node node1 has no Ready condition: cannot tell how long it has been down; not fencing it",
    ),
    "no transition time: refused": (
        node_json(since=None),
        "node node1 is not Ready (Unknown) but its Ready condition has no lastTransitionTime: cannot tell since "
        "when; not fencing it",
    ),
}


@pytest.mark.parametrize(("node", "refusal"), REFUSALS.values(), ids=REFUSALS.keys())
def test_only_a_node_down_for_min_down_may_be_fenced(node, refusal):
    assert fence_refusal(node, MIN_DOWN, NOW) == refusal


def test_min_down_zero_fences_any_node_that_is_not_ready():
    assert fence_refusal(node_json(since=NOW), 0, NOW) is None
    assert fence_refusal(node_json("node1", "True"), 0, NOW) is not None


def applied(node: dict, ops) -> dict:
    return jsonpatch.apply_patch(copy.deepcopy(node), list(ops))


FENCES = {
    "a node with no taints and no annotations": node_json(),
    "a node with the failure taints and annotations": node_json(
        taints=UNREACHABLE_TAINTS, annotations={"a": "b", CONFIRMED_AT_ANNOTATION: "x"}
    ),
    "a node with an empty taint list": node_json(taints=[], annotations={}),
}


@pytest.mark.parametrize("node", FENCES.values(), ids=FENCES.keys())
def test_fencing_adds_the_taint_and_who_and_when_and_keeps_everything_else(node):
    patch = fence_patch(node, "alice@laptop as admin", NOW)
    assert patch is not None
    fenced = applied(node, patch.ops)
    taints = fenced["spec"]["taints"]
    assert taints[:-1] == (node["spec"].get("taints") or [])
    assert (
        taints[-1]
        == {"key": OUT_OF_SERVICE, "value": "nodeshutdown", "effect": NO_EXECUTE, "timeAdded": "2027-01-15T08:00:00Z"}
        == patch.taint
    )
    marks = fenced["metadata"]["annotations"]
    assert marks == {
        **(node["metadata"].get("annotations") or {}),
        FENCED_BY_ANNOTATION: "alice@laptop as admin",
        FENCED_AT_ANNOTATION: "2027-01-15T08:00:00Z",
    }
    assert patch.annotations == {
        FENCED_BY_ANNOTATION: "alice@laptop as admin",
        FENCED_AT_ANNOTATION: "2027-01-15T08:00:00Z",
    }
    assert fenced_text(fenced) == "by alice@laptop as admin at 2027-01-15T08:00:00Z"


def test_a_node_changed_since_it_was_read_is_not_patched():
    read = node_json(taints=UNREACHABLE_TAINTS, rv="10")
    patch = fence_patch(read, "me", NOW)
    assert patch is not None
    changed = node_json(taints=UNREACHABLE_TAINTS[:1], rv="11")  # the node lifecycle took a taint off meanwhile
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        applied(changed, patch.ops)


def test_a_node_fenced_already_gets_no_patch():
    assert fence_patch(node_json(taints=[OUT_OF_SERVICE_TAINT]), "me", NOW) is None


UNFENCES = {
    "fenced by `fence`: the taint and both annotations go": (
        node_json(
            taints=[*UNREACHABLE_TAINTS, OUT_OF_SERVICE_TAINT],
            annotations={"keep": "me", FENCED_BY_ANNOTATION: "a", FENCED_AT_ANNOTATION: "t"},
        ),
        UNREACHABLE_TAINTS,
        {"keep": "me"},
    ),
    "the confirmation goes too (the fencing it confirmed is over)": (
        node_json(taints=[OUT_OF_SERVICE_TAINT], annotations={CONFIRMED_AT_ANNOTATION: "t"}),
        [],
        {},
    ),
    "the taint put on by hand, with another value, in the middle": (
        node_json(
            taints=[
                UNREACHABLE_TAINTS[0],
                {"key": OUT_OF_SERVICE, "value": "x", "effect": NO_EXECUTE},
                UNREACHABLE_TAINTS[1],
            ]
        ),
        UNREACHABLE_TAINTS,
        None,
    ),
    "the key with another effect stays": (
        node_json(taints=[{"key": OUT_OF_SERVICE, "effect": NO_SCHEDULE}, OUT_OF_SERVICE_TAINT]),
        [{"key": OUT_OF_SERVICE, "effect": NO_SCHEDULE}],
        None,
    ),
    "only stray annotations": (node_json(annotations={FENCED_AT_ANNOTATION: "t"}), None, {}),
}


@pytest.mark.parametrize(("node", "taints", "annotations"), UNFENCES.values(), ids=UNFENCES.keys())
def test_unfencing_removes_the_taint_and_the_annotations_only(node, taints, annotations):
    unfenced = applied(node, unfence_patch(node))
    assert unfenced["spec"].get("taints") == taints
    assert unfenced["metadata"].get("annotations") == annotations
    assert out_of_service_taint(unfenced["spec"].get("taints") or []) is None


def test_a_node_that_is_not_fenced_gets_no_unfence_patch():
    assert unfence_patch(node_json(taints=UNREACHABLE_TAINTS, annotations={"a": "b"})) == ()


def test_unfencing_a_node_changed_since_it_was_read_is_refused():
    read = node_json(taints=[OUT_OF_SERVICE_TAINT], rv="10")
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        applied(node_json(taints=[OUT_OF_SERVICE_TAINT, UNREACHABLE_TAINTS[0]], rv="12"), unfence_patch(read))


def test_fenced_text_without_annotations():
    assert fenced_text(node_json()) == "by someone else (no taintkeeper.io/fenced-by annotation)"
