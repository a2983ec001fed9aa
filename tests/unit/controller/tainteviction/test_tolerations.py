"""controller.tainteviction.tolerations: upstream ToleratesTaint, matching, and the minimum toleration time."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.tainteviction.tolerations import (
    first_toleration_for_taint,
    match_tolerations,
    min_toleration_seconds,
    tolerates,
)

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoExecute"}

TOLERATES_CASES = [
    ("empty key with Exists tolerates every taint", {"operator": "Exists"}, TAINT, True),
    (
        "empty key and empty effect with Exists tolerates a NoSchedule taint",
        {"operator": "Exists"},
        {"key": "x", "effect": "NoSchedule"},
        True,
    ),
    ("an empty effect matches every effect", {"key": "dedicated", "operator": "Exists"}, TAINT, True),
    (
        "a different effect does not match",
        {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
        TAINT,
        False,
    ),
    ("a different key does not match", {"key": "other", "operator": "Exists"}, TAINT, False),
    ("Exists ignores the value", {"key": "dedicated", "operator": "Exists", "value": "cpu"}, TAINT, True),
    (
        "Equal compares values: same value tolerates",
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute"},
        TAINT,
        True,
    ),
    (
        "Equal compares values: another value does not",
        {"key": "dedicated", "operator": "Equal", "value": "cpu"},
        TAINT,
        False,
    ),
    ("an empty operator means Equal", {"key": "dedicated", "value": "gpu"}, TAINT, True),
    ("an empty operator with another value does not tolerate", {"key": "dedicated", "value": "x"}, TAINT, False),
    (
        "Equal with no value tolerates a taint with no value",
        {"key": "k", "operator": "Equal"},
        {"key": "k", "effect": "NoExecute"},
        True,
    ),
    ("an unknown operator tolerates nothing", {"key": "dedicated", "operator": "Lt", "value": "gpu"}, TAINT, False),
    (
        "Equal with an empty key only matches the empty-key taint's value",
        {"operator": "Equal", "value": "gpu"},
        TAINT,
        True,
    ),
]


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"), [c[1:] for c in TOLERATES_CASES], ids=[c[0] for c in TOLERATES_CASES]
)
def test_tolerates(toleration, taint, expected):
    assert tolerates(toleration, taint) is expected


NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
TOL_NOT_READY_60 = {
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 60,
}
TOL_NOT_READY_10 = {**TOL_NOT_READY_60, "tolerationSeconds": 10}
TOL_WILDCARD = {"operator": "Exists"}

MATCH_CASES = [
    ("no taints are all tolerated by nothing", [], [], True, [], []),
    ("an untolerated taint is reported", [NOT_READY], [], False, [], [NOT_READY]),
    (
        "the first tolerating toleration is the one used",
        [NOT_READY],
        [TOL_NOT_READY_60, TOL_NOT_READY_10],
        True,
        [TOL_NOT_READY_60],
        [],
    ),
    (
        "one toleration can be used for several taints",
        [NOT_READY, UNREACHABLE],
        [TOL_WILDCARD],
        True,
        [TOL_WILDCARD, TOL_WILDCARD],
        [],
    ),
    (
        "one tolerated and one untolerated taint",
        [NOT_READY, UNREACHABLE],
        [TOL_NOT_READY_60],
        False,
        [TOL_NOT_READY_60],
        [UNREACHABLE],
    ),
]


@pytest.mark.parametrize(
    ("taints", "tolerations", "all_tolerated", "used", "untolerated"),
    [c[1:] for c in MATCH_CASES],
    ids=[c[0] for c in MATCH_CASES],
)
def test_match_tolerations(taints, tolerations, all_tolerated, used, untolerated):
    match = match_tolerations(taints, tolerations)
    assert match.all_tolerated is all_tolerated
    assert match.used == used
    assert match.untolerated == untolerated


@pytest.mark.parametrize(
    "tolerations, expected",
    [
        pytest.param(
            [TOL_NOT_READY_60, {"key": "other", "operator": "Exists"}, TOL_WILDCARD],
            TOL_NOT_READY_60,
            id="the first tolerating toleration wins over later ones",
        ),
        pytest.param(
            [{"key": "other", "operator": "Exists"}, TOL_WILDCARD, TOL_NOT_READY_60],
            TOL_WILDCARD,
            id="a wildcard earlier in the list wins over a keyed one after it",
        ),
        pytest.param([{"key": "other", "operator": "Exists"}], None, id="no tolerating toleration gives None"),
    ],
)
def test_first_toleration_for_taint(tolerations, expected):
    assert first_toleration_for_taint(tolerations, NOT_READY) == expected


def secs(value):
    return {"key": "k", "operator": "Exists"} if value is None else {"key": "k", "tolerationSeconds": value}


MIN_CASES = [  # upstream TestGetMinTolerationTime, plus the <= 0 rule
    ("no tolerations means at once", [], 0),
    ("only unset seconds means forever", [None], None),
    ("the smallest of several seconds wins", [1, 2], 1),
    ("unset seconds after a finite one are ignored", [1, None], 1),
    ("unset seconds before a finite one are ignored", [None, 1], 1),
    ("zero seconds means at once", [30, 0], 0),
    ("negative seconds mean at once", [None, -5, 30], 0),
]


@pytest.mark.parametrize(("seconds", "expected"), [c[1:] for c in MIN_CASES], ids=[c[0] for c in MIN_CASES])
def test_min_toleration_seconds(seconds, expected):
    assert min_toleration_seconds([secs(s) for s in seconds]) == expected


keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz./-", max_size=20)
effects = st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"])
taints = st.fixed_dictionaries({"key": keys, "effect": effects}, optional={"value": st.text(max_size=8)})


@given(taints)
def test_wildcard_exists_toleration_tolerates_any_taint(taint):
    assert tolerates({"operator": "Exists"}, taint)


@given(taints)
def test_a_taint_is_tolerated_by_an_equal_toleration_copied_from_it(taint):
    toleration = {"key": taint["key"], "operator": "Equal", "value": taint.get("value", ""), "effect": taint["effect"]}
    assert tolerates(toleration, taint)


@given(taints, st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]))
def test_a_toleration_with_another_effect_never_tolerates(taint, effect):
    toleration = {"operator": "Exists", "effect": effect}
    assert tolerates(toleration, taint) is (effect == taint["effect"])


@given(st.lists(st.one_of(st.none(), st.integers(min_value=-10, max_value=10**6)), min_size=1))
def test_min_toleration_seconds_is_never_more_than_any_finite_toleration(values):
    result = min_toleration_seconds([secs(v) for v in values])
    finite = [v for v in values if v is not None]
    if not finite:
        assert result is None
    else:
        assert result == max(0, min(finite))
