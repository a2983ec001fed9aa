"""What `explain` and `status` know of disruption budgets, and what a pod's eviction waits for:
decided as the taint eviction manager decides (tainteviction/disruption_budget.py), then matched to
the budgets that cover the pod. Pure; kubectl_taintkeeper/budget_reads.py reads the API for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.describe import describe_duration
from controller.objects import PodView
from controller.tainteviction.decision import EvictionDecision, due_taints
from controller.tainteviction.disruption_budget import (
    BudgetSettings,
    Method,
    budget_text,
    choose_method,
    selecting_budgets,
)
from kube.timestamps import format_time
from shared.taints import Taint

Json = dict[str, Any]


@dataclass(frozen=True)
class Budgets:
    """What a report knows of disruption budgets: the controller's flags, the namespaces'
    annotations, and every PodDisruptionBudget (None: they could not be read, and why)."""

    settings: BudgetSettings = field(default_factory=BudgetSettings)
    namespace_annotations: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    budgets: list[Json] | None = field(default_factory=list)
    unreadable: str = ""
    empty_selects_all: bool = True  # policy/v1 (1.21+); policy/v1beta1 selects nothing with {}


def budget_note(
    pod: PodView,
    labels: Mapping[str, str],
    decision: EvictionDecision,
    taints: Sequence[Taint],
    budgets: Budgets,
    now: float,
) -> tuple[str, str]:
    """For a pod whose eviction respects its disruption budget: what it waits for now ("" if nothing),
    and how it will go; ("", "") for a pod that will simply be deleted. Decided as the manager decides."""
    at = decision.at if decision.at is not None else now
    when = max(at, now)
    due = due_taints(pod.tolerations, taints, lambda _taint: now, pod.arrived, when)
    choice = choose_method(
        [*due, *([decision.taint] if decision.taint else [])],
        pod.annotation_map,
        budgets.namespace_annotations.get(pod.namespace, {}),
        budgets.settings,
        decision.due_since if decision.due_since is not None else at,
        when,
    )
    if choice.method is Method.DELETE:
        return "", ""
    if choice.method is Method.DELETE_AFTER_BUDGET_TIMEOUT:
        return "", (
            f"; deleted, not evicted: its disruption budget ceiling "
            f"({describe_duration(choice.timeout or 0)}) has passed"
        )
    ceiling = (
        ""
        if choice.timeout is None
        else f"; deleted anyway at {format_time((decision.due_since or at) + choice.timeout)}"
    )
    if budgets.budgets is None:
        return "", f"; through the Eviction API (disruption budgets unreadable: {budgets.unreadable}){ceiling}"
    found = selecting_budgets(budgets.budgets, pod.namespace, labels, budgets.empty_selects_all)
    if not found:
        return "", f"; through the Eviction API (no disruption budget covers it){ceiling}"
    blocking = [b for b in found if int((b.get("status") or {}).get("disruptionsAllowed") or 0) < 1]
    if blocking and at <= now:
        return f"waiting for {budget_text(blocking[0])}", f"; through the Eviction API{ceiling}"
    return "", f"; through the Eviction API: {', '.join(budget_text(b) for b in found)}{ceiling}"
