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
    (
        "an unrelated toleration does not count",
        [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule", "tolerationSeconds": 700}],
        [default(NR), default(UR)],
    ),
    (
        "an existing not-ready toleration keeps its seconds; only unreachable is added",
        [default(NR, 700)],
        [default(UR)],
    ),
    (
        "an existing unreachable toleration keeps its seconds; only not-ready is added",
        [default(UR, 700)],
        [default(NR)],
    ),
    ("a pod tolerating both gets nothing", [default(NR, 700), default(UR, 700)], []),
    (
        "an empty-effect toleration counts for its key",
        [{"key": UR, "operator": "Exists", "tolerationSeconds": 700}],
        [default(NR)],
    ),
    ("the Exists wildcard counts for both", [{"operator": "Exists", "tolerationSeconds": 700}], []),
    (
        "a NoSchedule-only not-ready toleration does not count",
        [{"key": NR, "operator": "Exists", "effect": "NoSchedule"}],
        [default(NR), default(UR)],
    ),
    ("an empty key with a NoExecute effect counts for both", [{"operator": "Exists", "effect": "NoExecute"}], []),
    (
        "an Equal toleration with a value still counts (operator and value are ignored)",
        [{"key": NR, "operator": "Equal", "value": "x", "effect": "NoExecute"}],
        [default(UR)],
    ),
    (
        "a toleration with zero seconds is the author's choice and counts",
        [default(NR, 0), {"key": UR, "operator": "Exists", "effect": "NoExecute"}],
        [],
    ),
]


@pytest.mark.parametrize(("tolerations", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_missing_default_tolerations(tolerations, expected):
    assert missing_default_tolerations(tolerations) == expected


def test_seconds_are_set_separately_for_each_key():
    assert missing_default_tolerations([], not_ready_seconds=60, unreachable_seconds=0) == [
        default(NR, 60),
        default(UR, 0),
    ]


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


NS_CASES = [
    ("no annotations keep the cluster values", {}, (60, 120), []),
    ("each annotation overrides its own key", {"taintkeeper.io/not-ready-toleration-seconds": "10"}, (10, 120), []),
    (
        "both can be set",
        {"taintkeeper.io/not-ready-toleration-seconds": "0", "taintkeeper.io/unreachable-toleration-seconds": "900"},
        (0, 900),
        [],
    ),
    (
        "a negative value is ignored with a warning",
        {"taintkeeper.io/unreachable-toleration-seconds": "-5"},
        (60, 120),
        ["taintkeeper.io/unreachable-toleration-seconds='-5' is not a whole number"],
    ),
    (
        "a word is ignored with a warning",
        {"taintkeeper.io/not-ready-toleration-seconds": "soon"},
        (60, 120),
        ["taintkeeper.io/not-ready-toleration-seconds='soon' is not a whole number"],
    ),
    (
        "a fraction is ignored with a warning",
        {"taintkeeper.io/not-ready-toleration-seconds": "1.5"},
        (60, 120),
        ["using the cluster default 60"],
    ),
    (
        "a digit-like character int() rejects is ignored",
        {"taintkeeper.io/not-ready-toleration-seconds": "①"},
        (60, 120),
        ["is not a whole number"],
    ),
    (
        "a superscript digit is ignored",
        {"taintkeeper.io/unreachable-toleration-seconds": "²"},
        (60, 120),
        ["is not a whole number"],
    ),
    (
        "a number beyond 2^53-1 is ignored: a policy's patch could not carry it exactly",
        {"taintkeeper.io/unreachable-toleration-seconds": str(2**53)},
        (60, 120),
        ["at most 9007199254740991"],
    ),
    (
        "the largest int64 is ignored too",
        {"taintkeeper.io/unreachable-toleration-seconds": str(2**63 - 1)},
        (60, 120),
        ["at most 9007199254740991"],
    ),
    (
        "ASCII whitespace around the digits is allowed",
        {"taintkeeper.io/not-ready-toleration-seconds": "\t\v 45\r\n"},
        (45, 120),
        [],
    ),
    (
        "other whitespace is not (the policy's pattern has only ASCII's)",
        {"taintkeeper.io/not-ready-toleration-seconds": "\x1c45\u00a0"},
        (60, 120),
        ["is not a whole number"],
    ),
    (
        "a long zero-padded number is still a number",
        {"taintkeeper.io/not-ready-toleration-seconds": "0" * 70 + "300"},
        (300, 120),
        [],
    ),
]


@pytest.mark.parametrize(
    ("annotations", "seconds", "warnings"), [c[1:] for c in NS_CASES], ids=[c[0] for c in NS_CASES]
)
def test_namespace_seconds(annotations, seconds, warnings):
    from shared.defaults import DefaultSeconds, namespace_seconds

    result, said = namespace_seconds(annotations, DefaultSeconds(60, 120))
    assert (result.not_ready, result.unreachable) == seconds
    assert len(said) == len(warnings)
    for fragment, warning in zip(warnings, said, strict=True):
        assert fragment in warning


@pytest.mark.parametrize(
    ("labels", "skipped"),
    [
        ({}, False),
        (None, False),
        ({"taintkeeper.io/skip": "true"}, True),
        ({"taintkeeper.io/skip": "false"}, False),
        ({"taintkeeper.io/skip": "True"}, False),
    ],
)
def test_only_the_exact_skip_label_value_true_opts_out(labels, skipped):
    from shared.defaults import skips

    assert skips(labels) is skipped
