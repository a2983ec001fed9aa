"""The node lifecycle controller's pure decisions, with every input passed in (no I/O, no clock).

The monitor (monitor.py) keeps the state across passes and makes the writes; what it decides with
is here: which NoExecute taint a Ready status calls for, the taint list a write produces (and
whether there is anything to write), how many of a disrupted zone's nodes get their pods marked
per pass, which beta OS/arch labels to bring in step with the GA ones, how many nodes carry its
taints (a metric), and when the loop counts as stuck.
Node health (is a node heartbeating) is node_health.py; zone states are controller/zones.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.objects import NodeView
from kube.timestamps import format_time
from shared.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    NOT_READY,
    UNREACHABLE,
    Taint,
    is_node_failure_taint,
    managed_no_schedule_taints,
    taint_identity,
)

NOT_READY_NO_EXECUTE: Taint = {"key": NOT_READY, "effect": NO_EXECUTE}
UNREACHABLE_NO_EXECUTE: Taint = {"key": UNREACHABLE, "effect": NO_EXECUTE}
NOT_READY_SPREAD = 0.10  # share of a disrupted zone's nodes whose pods are marked NotReady per pass
# /healthz fails after 3 monitor periods without progress, but never sooner than this: one API call
# may take its connect and read timeouts (5 s + 15 s) during an apiserver brownout.
STUCK_FLOOR = 30.0
# A taint write is redone on a fresh read when it conflicts (409), this many attempts in all (upstream
# UpdateTaintBackoff: 5 steps of 100 ms with jitter).
TAINT_WRITE_ATTEMPTS = 5
# Upstream labelReconcileInfo (1.20-1.32): each GA label is the truth for its beta twin, which
# nodeSelectors written before the GA labels (1.14) still select on.
BETA_LABEL_OF_GA_LABEL: Mapping[str, str] = {
    "kubernetes.io/os": "beta.kubernetes.io/os",
    "kubernetes.io/arch": "beta.kubernetes.io/arch",
}


@dataclass(frozen=True)
class MonitorSettings:
    """Upstream flag names and 1.32+ defaults (kube-controller-manager), and taintkeeper's own in their style."""

    node_monitor_period: float = 5.0
    node_monitor_grace_period: float = 50.0
    node_startup_grace_period: float = 60.0
    node_eviction_rate: float = 0.1
    secondary_node_eviction_rate: float = 0.01
    large_cluster_size_threshold: int = 50
    unhealthy_zone_threshold: float = 0.55
    # Upstream's rule for marking pods NotReady: only when this controller moves a node's Ready from True
    # (and on a node first seen not ready). Off: every pass marks the pods still Ready on every node whose
    # Ready is not True, whoever set it and in whatever order (k8s #112733, #125618; monitor.py).
    mark_pods_not_ready_on_transition_only: bool = False


def has_taint(node: NodeView, template: Taint) -> bool:
    return any(t.get("key") == template["key"] and t.get("effect") == template["effect"] for t in node.taints)


def no_execute_swap(ready_status: str | None) -> tuple[Taint, Taint] | None:
    """(the NoExecute taint to add, the one to remove) for a node's Ready status; None when it calls
    for neither (Ready, or no status yet). False is not-ready, Unknown is unreachable: never both."""
    if ready_status == "False":
        return NOT_READY_NO_EXECUTE, UNREACHABLE_NO_EXECUTE
    if ready_status == "Unknown":
        return UNREACHABLE_NO_EXECUTE, NOT_READY_NO_EXECUTE
    return None


def taint_name(taint: Taint) -> str:
    """`not-ready` for node.kubernetes.io/not-ready: how the logs name the two failure taints."""
    return str(taint["key"]).rsplit("/", 1)[-1]


def updated_taints(
    current: Sequence[Taint], add: Sequence[Taint], remove: Sequence[Taint], now: float
) -> list[dict[str, Any]]:
    """`current` without `remove` (by key+effect) plus `add` where missing; new NoExecute taints get timeAdded."""
    removed = {taint_identity(t) for t in remove}
    result = [dict(t) for t in current if taint_identity(t) not in removed]
    present = {taint_identity(t) for t in result}
    for taint in add:
        if taint_identity(taint) in present:
            continue
        new = dict(taint)
        if new.get("effect") == NO_EXECUTE:
            new["timeAdded"] = format_time(now)
        result.append(new)
        present.add(taint_identity(taint))
    return result


def taints_to_write(
    current: Sequence[Taint], add: Sequence[Taint], remove: Sequence[Taint], now: float
) -> list[dict[str, Any]] | None:
    """The taint list a write of `add` and `remove` makes from `current` (updated_taints); None when
    `current` already is that list (the same taints by key+effect, in order): nothing to write."""
    wanted = updated_taints(current, add, remove, now)
    if [taint_identity(t) for t in wanted] == [taint_identity(t) for t in current]:
        return None
    return wanted


def no_schedule_inputs(node: NodeView) -> tuple[Any, ...]:
    """What the NoSchedule taint and label sync reads of a node. A Node update that leaves these the
    same (a status post with a fresh heartbeat, every minute per node) has nothing for it to do."""
    return (
        node.taints,
        node.unschedulable,
        node.labels,
        tuple((condition.get("type"), condition.get("status")) for condition in node.conditions),
    )


def labels_to_reconcile(labels: Mapping[str, str]) -> dict[str, str]:
    """The beta OS/arch labels to set, each to its GA label's value, where missing or different
    (upstream reconcileNodeLabels); empty when there is nothing to write. A node without a GA
    label has nothing to copy: its beta label is left as it is."""
    return {
        beta: labels[ga]
        for ga, beta in BETA_LABEL_OF_GA_LABEL.items()
        if ga in labels and labels.get(beta) != labels[ga]
    }


def not_ready_marking_budget(zone_size: int) -> int:
    """How many of a disrupted zone's nodes have their pods marked NotReady in one pass (at least one)."""
    return max(1, math.ceil(NOT_READY_SPREAD * zone_size))


def pass_heartbeat_bound(monitor_period: float) -> float:
    """How long the monitor's loop may go without a step, a wait or progress within a pass before it is
    stuck: 3 monitor periods, at least STUCK_FLOOR."""
    return max(3 * monitor_period, STUCK_FLOOR)


def tainted_node_counts(nodes: Sequence[NodeView]) -> dict[str, int]:
    """Per effect, the nodes carrying a taint the controller manages: NoExecute not-ready or unreachable,
    NoSchedule from a condition or cordoning."""
    return {
        NO_EXECUTE: sum(1 for node in nodes if any(is_node_failure_taint(t) for t in node.no_execute_taints)),
        NO_SCHEDULE: sum(1 for node in nodes if managed_no_schedule_taints(node.taints)),
    }
