"""The goals bench/REPORT.md's headline holds taintkeeper to, and the verdict of a figure against one.

A figure is kept as the run's report states it ("0.90", "1,598", "+0.75", "< 0.11"), so its precision
is known: a rounded figure stands for every value it rounds from, and a goal it could fall either
side of is "on the line". Counts are exact. A goal worded rather than numbered ("not measurable")
takes the verdict its run stated.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

MET, NOT_MET, ON_THE_LINE, NO_RUN = "met", "not met", "on the line", "no run"
STATED_VERDICTS = (MET, NOT_MET)
# The Kubernetes version whose runs the headline shows (the local cluster's default); runs of other
# versions stay in their own reports.
HEADLINE_KUBERNETES = "1.37"

COMPARISONS: dict[str, Callable[[Decimal, Decimal], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}


@dataclass(frozen=True)
class Figure:
    """A stated figure as the range of values it stands for."""

    low: Decimal | None  # None: unbounded
    high: Decimal | None

    @classmethod
    def parse(cls, text: str, exact: bool = False) -> Figure:
        """ "0.90" (0.895-0.905), "< 0.11", "> 2", "+0.75"; `exact`: a count, no rounding."""
        stated = text.replace(",", "").strip()
        bound = stated[0] if stated[:1] in ("<", ">") else ""
        try:
            value = Decimal(stated.removeprefix(bound).strip())
        except InvalidOperation:
            raise ValueError(f"not a figure: {text!r}") from None
        if bound == "<":
            return cls(None, value)
        if bound == ">":
            return cls(value, None)
        exponent = value.as_tuple().exponent
        assert isinstance(exponent, int)
        half = Decimal(0) if exact else Decimal(5).scaleb(exponent - 1)
        return cls(value - half, value + half)


@dataclass(frozen=True)
class Goal:
    key: str  # how result files name it
    name: str  # the headline's words
    target: str  # the goal as the headline shows it
    comparison: str | None = None  # None: a goal in words, judged by its run
    threshold: Decimal | None = None  # in the figures' unit
    unit: str = ""  # appended to a figure in the headline ("x", " ms")
    exact: bool = False  # counts: figures are not rounded
    points: tuple[str, ...] = ("",)  # where it is measured (cluster sizes, rates), in the headline's order


def judged(goal: Goal, figure: str | None, stated: str | None = None) -> str:
    """The verdict of one figure (None: no run measured it) against `goal`; `stated` is the run's own
    verdict, which decides a goal in words."""
    if figure is None:
        return NO_RUN
    if goal.comparison is None or goal.threshold is None:
        if stated not in STATED_VERDICTS:
            raise ValueError(f"{goal.key} is judged in words: its figure needs the run's verdict, not {stated!r}")
        return stated
    holds, threshold = COMPARISONS[goal.comparison], goal.threshold
    span = Figure.parse(figure, goal.exact)
    # The end of the range farthest from meeting the goal, and the end nearest (None: unbounded).
    worst, best = (span.low, span.high) if goal.comparison.startswith(">") else (span.high, span.low)
    if worst is not None and holds(worst, threshold):
        return MET
    if best is not None and not holds(best, threshold):
        return NOT_MET
    return ON_THE_LINE


def shown(goal: Goal, figure: str) -> str:
    """A figure as the headline shows it."""
    return f"{figure}{goal.unit}" if goal.comparison is not None else figure


GOALS: tuple[Goal, ...] = (
    Goal("webhook-vs-static", "webhook throughput / constant-answer app", ">= 0.90x", ">=", Decimal("0.90"), "x"),
    Goal("webhook-vs-kopf", "webhook throughput / kopf", ">= 3.8x", ">=", Decimal("3.8"), "x"),
    Goal(
        "webhook-p99-vs-static", "webhook p99 at 500 req/s / constant-answer app", "<= 1.2x", "<=", Decimal("1.2"), "x"
    ),
    Goal("webhook-fast-paths", "webhook throughput, fast paths on / off", "> 1.0x", ">", Decimal("1.0"), "x"),
    Goal("webhook-stuck-max", "slowest review beside 100 stuck connections", "<= 100 ms", "<=", Decimal(100), " ms"),
    Goal("webhook-memory-host", "webhook PSS, master + 2 workers, on the host", "<= 96 MiB", "<=", Decimal(96), " MiB"),
    Goal("webhook-pod-working-set", "webhook pod working set", "<= 96 MiB", "<=", Decimal(96), " MiB"),
    Goal(
        "admission-share-p50",
        "pod creation p50: taintkeeper's share over an echo webhook",
        "<= 0.3 ms",
        "<=",
        Decimal("0.3"),
        " ms",
        points=("20/s", "100/s"),
    ),
    Goal(
        "admission-policy-vs-plugin-p50",
        "pod creation p50: the admission policy over the built-in plugin",
        "<= 0.1 ms",
        "<=",
        Decimal("0.1"),
        " ms",
        points=("20/s", "100/s"),
    ),
    *(
        Goal(
            key,
            name,
            target,
            comparison,
            Decimal(threshold),
            unit,
            points=("5,000 nodes", "2,000 nodes", "1,000 nodes"),
        )
        for key, name, target, comparison, threshold, unit in (
            ("envelope-steady-cpu", "controller steady CPU / kube-controller-manager", "<= 0.5x", "<=", "0.5", "x"),
            ("envelope-rss", "controller RSS / kube-controller-manager", "<= 0.2x", "<=", "0.2", "x"),
            ("envelope-synced", "caches synced from start / kube-controller-manager", "<= 1.0x", "<=", "1.0", "x"),
            (
                "envelope-sweep-done",
                "registration-taint sweep done / kube-controller-manager",
                "<= 1.0x",
                "<=",
                "1.0",
                "x",
            ),
            ("envelope-sweep-rate", "sweep rate / a plain client's node PATCHes", ">= 90 %", ">=", "90", " %"),
            (
                "envelope-first-noexecute",
                "first NoExecute after 5 nodes stop / kube-controller-manager",
                "<= 1.0x",
                "<=",
                "1.0",
                "x",
            ),
        )
    ),
    Goal(
        "monitor-pass-p99",
        "node monitor pass over 5,000 nodes, p99",
        "<= 100 ms",
        "<=",
        Decimal(100),
        " ms",
        points=("steady", "500 nodes stop"),
    ),
    Goal("eviction-lateness-p99", "eviction storm of 15,000 pods, p99 lateness", "<= 1 s", "<=", Decimal(1000), " ms"),
    Goal("eviction-peak-rss", "eviction manager peak RSS, 150,000 pods", "<= 600 MB", "<=", Decimal(600), " MB"),
    Goal("fence-share", "the write fence on the hot path", "not measurable"),
    Goal("failed-nodes-marked", "failed node's pods NotReady: runtime down; kubelet gone", "within a pass"),
    Goal("failed-nodes-hand-over", "Unknown and tainted, hand-over 12 s into silence", "the grace from the heartbeat"),
    Goal("soak-violations", "60-minute soak: violations", "0", "<=", Decimal(0), exact=True),
    Goal("soak-faults", "60-minute soak: faults injected", ">= 300", ">=", Decimal(300), exact=True),
    Goal("soak-evictions", "60-minute soak: evictions checked", ">= 1,000", ">=", Decimal(1000), exact=True),
)
GOALS_BY_KEY = {goal.key: goal for goal in GOALS}
