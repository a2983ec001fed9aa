"""When must a pod on a NoExecute-tainted node be deleted? The pure decision, with `now` passed in.

Upstream semantics (taint-eviction-controller) with taintkeeper's deliberate differences:
- the deadline comes from the taint, not from when this controller noticed it: for each NoExecute
  taint, its start (`timeAdded`, or when the controller first saw it if `timeAdded` is missing
  or in the future) plus the `tolerationSeconds` of the pod's first toleration that tolerates
  that taint (upstream `GetMatchingTolerations`); the pod's deadline is the earliest over its
  node's taints. A restart or leader hand-over therefore resets nobody's clock;
- a not-ready <-> unreachable swap does not restart the clock of a pod whose eviction was already
  counting down (`carry_swap_start`; upstream's processPodOnNode keeps the scheduled eviction's
  start the same way); a pod that tolerated the old taint forever starts counting at the swap;
- a pod bound to the node after a taint was added counts from its binding (a pod that lands on an
  already tainted node gets its full toleration, as upstream gives it), which is equally
  restart-proof;
- it is recomputed on every change, so toleration edits take effect both ways.
- a node-failure taint (not-ready, unreachable) on a node that reports Ready=True evicts nothing
  (`evicting_taints`): it is stale, and the leader's node lifecycle monitor lifts it on its next pass.
  Its clock still counts from its `timeAdded`: a node not Ready again under it loses overdue pods at
  once. Upstream's taint manager acts on it meanwhile, so a new leader can delete pods from a node
  that is Ready again in the moment before its monitor lifts the taint.
Kept from upstream: an untolerated NoExecute taint means now; tolerations without seconds mean
never; seconds <= 0 mean now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from controller.objects import NodeView
from controller.tainteviction.tolerations import first_toleration_for_taint, min_toleration_seconds
from kube.timestamps import parse_time
from shared.taints import Taint, is_node_failure_taint, taint_identity

Toleration = Mapping[str, Any]

NO_TAINTS = "no NoExecute taints"
UNTOLERATED = "untolerated taint"
EXPIRES = "toleration expires"
FOREVER = "tolerated forever"


@dataclass(frozen=True)
class EvictionDecision:
    """`at` is when to delete (epoch seconds; <= now means now), None means never.

    `taint` and `toleration` say why: the taint that sets the time and the toleration whose
    seconds run out (None for an untolerated taint).
    """

    at: float | None
    reason: str
    taint: Taint | None = None
    toleration: Toleration | None = None
    started: float | None = None

    @property
    def evicts(self) -> bool:
        return self.at is not None

    @property
    def due_since(self) -> float | None:
        """When the pod became due: its deadline, or for an untolerated taint (due now, whenever
        asked) the taint's start, which a restart does not move."""
        return self.started if self.reason == UNTOLERATED else self.at


def evicting_taints(node: NodeView) -> tuple[Taint, ...]:
    """The node's NoExecute taints that evict: all of them, but the node-failure ones while the node
    reports Ready=True."""
    ready = node.ready_condition
    if ready is None or ready.get("status") != "True":
        return node.no_execute_taints
    return tuple(taint for taint in node.no_execute_taints if not is_node_failure_taint(taint))


def taint_start(taint: Taint, first_seen: float, now: float) -> float:
    """When the taint's clock started: its `timeAdded`, unless missing or in the future."""
    added = parse_time(taint.get("timeAdded"))
    if added is None or added > now:
        return first_seen
    return added


def taint_deadline(
    tolerations: Sequence[Toleration],
    taint: Taint,
    first_seen: Callable[[Taint], float],
    pod_arrived: float | None,
    now: float,
    comparison_operators: bool = False,
) -> EvictionDecision:
    """When `taint` alone calls for the pod's deletion (`at` None: never)."""
    started = taint_start(taint, first_seen(taint), now)
    if pod_arrived is not None and pod_arrived > started:
        started = min(pod_arrived, now)
    toleration = first_toleration_for_taint(tolerations, taint, comparison_operators)
    if toleration is None:
        return EvictionDecision(at=now, reason=UNTOLERATED, taint=taint, started=started)
    seconds = min_toleration_seconds([toleration])
    if seconds is None:
        return EvictionDecision(at=None, reason=FOREVER, taint=taint, toleration=toleration)
    return EvictionDecision(at=started + seconds, reason=EXPIRES, taint=taint, toleration=toleration, started=started)


def decide_eviction(
    tolerations: Sequence[Toleration],
    taints: Iterable[Taint],
    first_seen: Callable[[Taint], float],
    pod_arrived: float | None,
    now: float,
    comparison_operators: bool = False,
) -> EvictionDecision:
    """The eviction decision for a pod with `tolerations` on a node with NoExecute `taints`: the
    earliest of their deadlines (an untolerated taint at once).

    `pod_arrived` is when the pod was bound to the node; `comparison_operators` lets `Lt`/`Gt`
    tolerations tolerate (--feature-gates=TaintTolerationComparisonOperators=true).
    """
    earliest: EvictionDecision | None = None
    any_taint = False
    for taint in taints:
        any_taint = True
        decision = taint_deadline(tolerations, taint, first_seen, pod_arrived, now, comparison_operators)
        if decision.reason == UNTOLERATED:
            return decision
        if decision.at is not None and (earliest is None or earliest.at is None or decision.at < earliest.at):
            earliest = decision
    if earliest is not None:
        return earliest
    return EvictionDecision(at=None, reason=FOREVER if any_taint else NO_TAINTS)


def due_taints(
    tolerations: Sequence[Toleration],
    taints: Iterable[Taint],
    first_seen: Callable[[Taint], float],
    pod_arrived: float | None,
    now: float,
) -> list[Taint]:
    """Every taint whose deadline for this pod has come: what a deletion now acts on."""
    return [
        taint
        for taint in taints
        if (at := taint_deadline(tolerations, taint, first_seen, pod_arrived, now).at) is not None and at <= now
    ]


def carry_swap_start(
    decision: EvictionDecision, pending_taint: Taint | None, pending_started: float | None
) -> EvictionDecision:
    """Keep the start of a pending eviction across a not-ready <-> unreachable swap.

    `pending_taint` and `pending_started` describe the pod's eviction that was counting down before
    this decision (None if none was). When the new decision's taint is the other node-failure taint,
    its clock starts where the pending one did, so a node flapping between the two cannot postpone
    the eviction; the very same taint (same timeAdded) keeps a start carried so once. Anything else,
    a new taint of the same key after a recovery included, keeps the new decision as it is.
    """
    if (
        decision.at is None
        or decision.taint is None
        or decision.started is None
        or pending_taint is None
        or pending_started is None
        or pending_started >= decision.started
        or not is_node_failure_taint(decision.taint)
        or not is_node_failure_taint(pending_taint)
    ):
        return decision
    if taint_identity(decision.taint) == taint_identity(pending_taint) and decision.taint != pending_taint:
        return decision
    return replace(decision, at=decision.at - (decision.started - pending_started), started=pending_started)
