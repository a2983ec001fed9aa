"""controller.label_selector: upstream's LabelSelector semantics, as `explain` matches budgets to pods."""

import pytest

from controller.label_selector import selects

LABELS = {"app": "web", "tier": "front"}
CASES = [
    ("an empty selector selects everything", {}, True),
    ("matchLabels that hold", {"matchLabels": {"app": "web"}}, True),
    ("matchLabels with another value", {"matchLabels": {"app": "db"}}, False),
    ("matchLabels with a missing key", {"matchLabels": {"zone": "a"}}, False),
    ("In holds", {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "web"]}]}, True),
    ("In on a missing key", {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}, False),
    (
        "NotIn on a missing key holds",
        {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]},
        True,
    ),
    ("NotIn on a listed value", {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, False),
    ("Exists", {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
    ("DoesNotExist on a present key", {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
    (
        "every term must hold",
        {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["back"]}]},
        False,
    ),
    ("an unknown operator selects nothing", {"matchExpressions": [{"key": "app", "operator": "Gt"}]}, False),
]


@pytest.mark.parametrize(("selector", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_selects(selector, expected):
    assert selects(selector, LABELS) is expected
