"""What the taint eviction manager does with one pod on one node: the one rule that the manager acts on
and that `status` and `explain` report (kubectl_taintkeeper/), so the two differ only in what they know.

The manager feeds it what it remembers: when it first saw each taint, and the start of the pod's pending
eviction (kept across a not-ready <-> unreachable swap, decision.py `carry_swap_start`). A command feeds it
what it can read: a taint without timeAdded counted from now, no pending eviction; and the controller's
flags it is given (`EvictionRule`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from controller.objects import NodeView, PodView
from controller.outofservice.decision import out_of_service_claim
from controller.tainteviction.decision import EvictionDecision, carry_swap_start, decide_eviction, evicting_taints
from shared.taints import Taint

NOT_THE_MANAGERS = "not the manager's"
TERMINATING = "already terminating"


@dataclass(frozen=True)
class EvictionRule:
    """The controller's settings the rule depends on: --feature-gates=TaintTolerationComparisonOperators,
    and whether the out-of-service handling runs beside the manager (--controllers)."""

    comparison_operators: bool = False
    defer_to_out_of_service: bool = True


@dataclass(frozen=True)
class Pending:
    """The pod's eviction already counting down: the taint that set it, and since when it counts."""

    taint: Taint | None
    started: float | None


@dataclass(frozen=True)
class PodVerdict:
    """`decision` says whether and when the manager deletes the pod; `left_because` says why it leaves the
    pod alone whatever its taints (terminating, or the out-of-service handling force deletes it)."""

    decision: EvictionDecision
    left_because: str | None = None


def decide(
    pod: PodView,
    taints: Sequence[Taint],
    first_seen: Callable[[Taint], float],
    now: float,
    rule: EvictionRule,
    pending: Pending | None = None,
) -> EvictionDecision:
    """When the pod is deleted under the node's evicting `taints`: the earliest deadline, its start carried
    across a node-failure taint swap from the `pending` eviction."""
    decision = decide_eviction(pod.tolerations, taints, first_seen, pod.arrived, now, rule.comparison_operators)
    if pending is None:
        return decision
    return carry_swap_start(decision, pending.taint, pending.started)


def pod_verdict(
    pod: PodView,
    node: NodeView,
    first_seen: Callable[[Taint], float],
    now: float,
    rule: EvictionRule,
    pending: Pending | None = None,
) -> PodVerdict:
    """What the manager does with `pod` on `node` as the node is now (the manager reads it live before it
    acts): nothing for a terminating pod or one the out-of-service handling owns, else `decide` on the
    node's evicting taints."""
    if pod.terminating:
        return PodVerdict(EvictionDecision(at=None, reason=NOT_THE_MANAGERS), TERMINATING)
    claim = out_of_service_claim(node, pod) if rule.defer_to_out_of_service else None
    if claim is not None:
        return PodVerdict(
            EvictionDecision(at=None, reason=NOT_THE_MANAGERS), f"left to the out-of-service handling: {claim}"
        )
    return PodVerdict(decide(pod, evicting_taints(node), first_seen, now, rule, pending))
