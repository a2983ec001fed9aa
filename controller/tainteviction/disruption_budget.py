"""Does a pod's due eviction go through the Eviction API, so that its PodDisruptionBudget holds?

Upstream's taint eviction deletes (DELETE), so a NoExecute taint ignores every budget. taintkeeper
asks the Eviction API instead, opt-in, for taints put on on purpose (draining a node, moving work
off a pool): a pod or namespace annotated `taintkeeper.io/eviction: respect-disruption-budget`, or
a taint key named in `--respect-disruption-budgets-for-taints`. The node-failure taints
(not-ready, unreachable) and out-of-service never are: their pods are already cut off from the
cluster, and a budget waiting for them to be healthy again would wait on something that cannot come.

A refused eviction is retried; the optional ceiling (`taintkeeper.io/disruption-budget-timeout` on
the pod, else on its namespace, else `--disruption-budget-timeout`) counts from the pod's eviction
deadline, which is restart-proof, and once passed the pod is deleted as upstream would.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.budget_annotations import BUDGET_TIMEOUT_ANNOTATION, EVICTION_ANNOTATION, RESPECT_DISRUPTION_BUDGET
from controller.label_selector import selects
from plumbing.durations import parse_duration
from shared.taints import NOT_READY, OUT_OF_SERVICE, UNREACHABLE, Taint

# Taints whose pods are gone from the cluster's point of view: never held back by a budget.
NEVER_BUDGETED_TAINT_KEYS = frozenset({NOT_READY, UNREACHABLE, OUT_OF_SERVICE})

Annotations = Mapping[str, str]


class Method(enum.Enum):
    DELETE = "delete"  # upstream's way: DisruptionTarget, then DELETE
    EVICT = "evict"  # an Eviction, which the pod's budget may refuse (429)
    DELETE_AFTER_BUDGET_TIMEOUT = "delete-after-budget-timeout"  # the budget refused for too long


@dataclass(frozen=True)
class BudgetSettings:
    """The cluster-wide part: taint keys whose evictions always respect budgets, and the default ceiling."""

    taint_keys: frozenset[str] = frozenset()
    timeout: float | None = None  # seconds; None: wait for the budget as long as it takes


def check_taint_keys(keys: Iterable[str]) -> frozenset[str]:
    """The flag's keys; a node-failure key is refused, with the reason."""
    chosen = frozenset(key.strip() for key in keys if key.strip())
    refused = sorted(chosen & NEVER_BUDGETED_TAINT_KEYS)
    if refused:
        raise ValueError(
            f"{', '.join(refused)} cannot respect disruption budgets: a pod on a failed or out-of-service "
            f"node is already cut off, and its budget would hold the eviction until the node is back"
        )
    return chosen


def opted_in(pod_annotations: Annotations, namespace_annotations: Annotations) -> bool:
    return RESPECT_DISRUPTION_BUDGET in (
        pod_annotations.get(EVICTION_ANNOTATION),
        namespace_annotations.get(EVICTION_ANNOTATION),
    )


def respects_budget(due: Iterable[Taint], pod_opted_in: bool, settings: BudgetSettings) -> bool:
    """True if every taint the eviction acts on may wait for a budget: none is a node-failure taint,
    and each is opted in (by the pod or namespace annotation, or its key in the flag)."""
    keys = [str(taint.get("key") or "") for taint in due]
    return bool(keys) and all(
        key not in NEVER_BUDGETED_TAINT_KEYS and (pod_opted_in or key in settings.taint_keys) for key in keys
    )


def budget_timeout(
    pod_annotations: Annotations, namespace_annotations: Annotations, default: float | None
) -> tuple[float | None, str | None]:
    """The ceiling in seconds (None: none) and, for an annotation that is not a duration, why it was
    ignored: the pod's annotation, else the namespace's, else `default`."""
    for where, found in (("pod", pod_annotations), ("namespace", namespace_annotations)):
        text = found.get(BUDGET_TIMEOUT_ANNOTATION)
        if text is None:
            continue
        try:
            seconds = parse_duration(text)
        except ValueError as error:
            return default, f"{where} annotation {BUDGET_TIMEOUT_ANNOTATION}: {error}"
        if seconds < 0:
            return default, f"{where} annotation {BUDGET_TIMEOUT_ANNOTATION}: {text!r} is negative"
        return seconds, None
    return default, None


def eviction_method(respects: bool, deadline: float, timeout: float | None, now: float) -> Method:
    """How to act on a pod whose eviction `deadline` has come."""
    if not respects:
        return Method.DELETE
    if timeout is not None and now >= deadline + timeout:
        return Method.DELETE_AFTER_BUDGET_TIMEOUT
    return Method.EVICT


@dataclass(frozen=True)
class Choice:
    """How to act on a due pod, the ceiling that applies (None: none), and what was wrong with a
    ceiling annotation that was ignored (None if nothing)."""

    method: Method
    timeout: float | None = None
    problem: str | None = None


def choose_method(
    due: Iterable[Taint],
    pod_annotations: Annotations,
    namespace_annotations: Annotations,
    settings: BudgetSettings,
    due_since: float,
    now: float,
) -> Choice:
    """For a pod due since `due_since` because of the taints `due`: delete it, or evict it through its budget."""
    if not respects_budget(due, opted_in(pod_annotations, namespace_annotations), settings):
        return Choice(Method.DELETE)
    timeout, problem = budget_timeout(pod_annotations, namespace_annotations, settings.timeout)
    return Choice(eviction_method(True, due_since, timeout, now), timeout, problem)


def refusal_reason(status: Mapping[str, Any]) -> str | None:
    """Why an Eviction answered 429 was refused, if a disruption budget refused it (a Status whose
    causes name a DisruptionBudget); None for any other 429 (the apiserver's own throttling)."""
    causes = (status.get("details") or {}).get("causes") or []
    budget = [
        str(cause.get("message") or "")
        for cause in causes
        if cause.get("reason") == "DisruptionBudget" or cause.get("type") == "DisruptionBudget"
    ]
    if budget:
        return "; ".join(message for message in budget if message) or str(status.get("message") or "")
    message = str(status.get("message") or "")
    return message if "disruption budget" in message else None


def selecting_budgets(
    budgets: Iterable[Mapping[str, Any]], namespace: str, labels: Mapping[str, str], empty_selects_all: bool
) -> list[Mapping[str, Any]]:
    """The PodDisruptionBudgets (API JSON, any namespaces) that cover a pod. A budget without a
    selector covers nothing; an empty one covers every pod of its namespace in policy/v1
    (`empty_selects_all`), and none in policy/v1beta1 (the two versions differ there)."""
    found = []
    for budget in budgets:
        metadata, spec = budget.get("metadata") or {}, budget.get("spec") or {}
        selector = spec.get("selector")
        if metadata.get("namespace") != namespace or selector is None:
            continue
        if not (selector.get("matchLabels") or selector.get("matchExpressions")) and not empty_selects_all:
            continue
        if selects(selector, labels):
            found.append(budget)
    return found


def budget_text(budget: Mapping[str, Any]) -> str:
    """`disruption budget NAME (allowed N)`, as `explain` and `status` say it."""
    allowed = (budget.get("status") or {}).get("disruptionsAllowed", 0)
    return f"disruption budget {(budget.get('metadata') or {}).get('name', '')} (allowed {allowed})"
