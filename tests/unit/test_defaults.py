"""shared.defaults: which default NoExecute tolerations a pod is missing (upstream TestForgivenessAdmission)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.defaults import already_tolerates, missing_default_tolerations

NR = "node.kubernetes.io/not-ready"
UR = "node.kubernetes.io/unreachable"


def default(key, seconds=300):
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


CASES = [
    ("a pod with no tolerations gets both", [], [default(NR), default(UR)]),
    ("an unrelated toleration does not count", [{"key": "foo", "operator": "Equal", "value": "bar",
                                                  "effect": "NoSchedule", "tolerationSeconds": 700}],
     [default(NR), default(UR)]),
    ("an existing not-ready toleration keeps its seconds; only unreachable is added", [default(NR, 700)],
     [default(UR)]),
    ("an existing unreachable toleration keeps its seconds; only not-ready is added", [default(UR, 700)],
     [default(NR)]),
    ("a pod tolerating both gets nothing", [default(NR, 700), default(UR, 700)], []),
    ("an empty-effect toleration counts for its key", [{"key": UR, "operator": "Exists", "tolerationSeconds": 700}],
     [default(NR)]),
    ("the Exists wildcard counts for both", [{"operator": "Exists", "tolerationSeconds": 700}], []),
    ("a NoSchedule-only not-ready toleration does not count",
     [{"key": NR, "operator": "Exists", "effect": "NoSchedule"}], [default(NR), default(UR)]),
    ("an empty key with a NoExecute effect counts for both", [{"operator": "Exists", "effect": "NoExecute"}], []),
    ("an Equal toleration with a value still counts (operator and value are ignored)",
     [{"key": NR, "operator": "Equal", "value": "x", "effect": "NoExecute"}], [default(UR)]),
    ("a toleration with zero seconds is the author's choice and counts",
     [default(NR, 0), {"key": UR, "operator": "Exists", "effect": "NoExecute"}], []),
]


@pytest.mark.parametrize(("tolerations", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_missing_default_tolerations(tolerations, expected):
    assert missing_default_tolerations(tolerations) == expected


def test_seconds_are_set_separately_for_each_key():
    assert missing_default_tolerations([], not_ready_seconds=60, unreachable_seconds=0) == [
        default(NR, 60), default(UR, 0)]


toleration_st = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(["", NR, UR, "other"]),
        "operator": st.sampled_from(["Exists", "Equal", ""]),
        "effect": st.sampled_from(["", "NoExecute", "NoSchedule", "PreferNoSchedule"]),
        "tolerationSeconds": st.one_of(st.none(), st.integers(-5, 1000)),
    },
)


@given(st.lists(toleration_st, max_size=6))
def test_after_adding_the_missing_defaults_nothing_more_is_missing(tolerations):
    missing = missing_default_tolerations(tolerations)
    assert missing_default_tolerations(tolerations + missing) == []
    assert [t["key"] for t in missing] == [k for k in (NR, UR) if not already_tolerates(tolerations, k)]
