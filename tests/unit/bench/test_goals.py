"""bench/goals.py: the verdict of a figure, as its run stated it, against a goal."""

from __future__ import annotations

from decimal import Decimal

import pytest

from bench.goals import GOALS, MET, NO_RUN, NOT_MET, ON_THE_LINE, Figure, Goal, judged

AT_LEAST = Goal("at-least", "throughput", ">= 0.90x", ">=", Decimal("0.90"), "x")
AT_MOST = Goal("at-most", "latency", "<= 1.0x", "<=", Decimal("1.0"), "x")
ABOVE = Goal("above", "speed-up", "> 1.0x", ">", Decimal("1.0"), "x")
NONE_ALLOWED = Goal("none", "violations", "0", "<=", Decimal(0), exact=True)
AT_LEAST_COUNT = Goal("count", "faults", ">= 300", ">=", Decimal(300), exact=True)
IN_WORDS = Goal("words", "the fence", "not measurable")

VERDICTS = [
    ("above the goal", AT_LEAST, "0.91", None, MET),
    ("below the goal", AT_LEAST, "0.79", None, NOT_MET),
    ("rounded onto the goal: either side", AT_LEAST, "0.90", None, ON_THE_LINE),
    ("one more digit clears it", AT_LEAST, "0.905", None, MET),
    ("within a ceiling", AT_MOST, "0.99", None, MET),
    ("over a ceiling", AT_MOST, "1.10", None, NOT_MET),
    ("on a ceiling, rounded", AT_MOST, "1.0", None, ON_THE_LINE),
    ("a bound below the ceiling", AT_MOST, "< 0.11", None, MET),
    ("a bound that may reach past the ceiling", AT_MOST, "< 2", None, ON_THE_LINE),
    ("a bound past a floor", AT_LEAST, "> 1", None, MET),
    ("signed and below the ceiling", AT_MOST, "-0.17", None, MET),
    ("strictly above", ABOVE, "1.27", None, MET),
    ("thousands separators", AT_LEAST_COUNT, "1,598", None, MET),
    ("a count short of the goal by one is short", AT_LEAST_COUNT, "299", None, NOT_MET),
    ("a count exactly on the goal meets it", AT_LEAST_COUNT, "300", None, MET),
    ("no violation", NONE_ALLOWED, "0", None, MET),
    ("one violation", NONE_ALLOWED, "1", None, NOT_MET),
    ("no run measured it", AT_LEAST, None, None, NO_RUN),
    ("no run, a goal in words", IN_WORDS, None, None, NO_RUN),
    ("a goal in words takes its run's verdict", IN_WORDS, "0.019 % of an eviction", MET, MET),
    ("and its run's miss", IN_WORDS, "3 % of an eviction", NOT_MET, NOT_MET),
]


@pytest.mark.parametrize(
    ("goal", "figure", "stated", "verdict"), [c[1:] for c in VERDICTS], ids=[c[0] for c in VERDICTS]
)
def test_a_figure_against_its_goal(goal: Goal, figure: str | None, stated: str | None, verdict: str):
    assert judged(goal, figure, stated) == verdict


@pytest.mark.parametrize(("goal", "stated"), [(IN_WORDS, None), (IN_WORDS, "on the line")])
def test_a_goal_in_words_needs_its_runs_verdict(goal: Goal, stated: str | None):
    with pytest.raises(ValueError, match="judged in words"):
        judged(goal, "101 ns", stated)


FIGURES = [
    ("two decimals", "0.90", False, Figure(Decimal("0.895"), Decimal("0.905"))),
    ("a whole number", "98", False, Figure(Decimal("97.5"), Decimal("98.5"))),
    ("a count", "1,598", True, Figure(Decimal(1598), Decimal(1598))),
    ("an upper bound", "< 0.11", False, Figure(None, Decimal("0.11"))),
    ("a lower bound", "> 5", False, Figure(Decimal(5), None)),
    ("a sign", "+0.75", False, Figure(Decimal("0.745"), Decimal("0.755"))),
]


@pytest.mark.parametrize(("text", "exact", "figure"), [c[1:] for c in FIGURES], ids=[c[0] for c in FIGURES])
def test_a_stated_figure_stands_for_what_it_rounds_from(text: str, exact: bool, figure: Figure):
    assert Figure.parse(text, exact) == figure


def test_a_figure_that_is_no_number_is_refused():
    with pytest.raises(ValueError, match="not a figure"):
        Figure.parse("never")


def test_every_goal_has_its_own_key():
    keys = [goal.key for goal in GOALS]
    assert len(keys) == len(set(keys))
