"""plumbing/durations.py: Go duration strings, as kube-controller-manager's flags and taintkeeper's
annotations take them."""

from __future__ import annotations

import pytest

from plumbing.durations import parse_duration

DURATIONS = [
    ("0", 0.0),
    ("5s", 5.0),
    ("300ms", 0.3),
    ("1m30s", 90.0),
    ("1.5h", 5400.0),
    ("-5s", -5.0),
    ("2us", 2e-6),
    ("10ns", 1e-8),
    (".5s", 0.5),
]


@pytest.mark.parametrize(("text", "seconds"), DURATIONS, ids=[text for text, _ in DURATIONS])
def test_go_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "s", "5 s", "1x", "5s5"])
def test_not_go_durations(text):
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)
