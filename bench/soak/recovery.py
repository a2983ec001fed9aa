"""When the controller could act again after a disruptive fault: the apiserver or etcd back, or a
leader holding the Lease again after the old one was killed or paused; and when no replica led at
all (the Lease released, or a renewal missed), whatever the cause: a leader
that evicted its own pod (a NoExecute taint on its node) hands over to a stand-by that may still be
starting."""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.soak.config import Slack
from bench.soak.faults import Fault
from bench.soak.timeline import LeaseWrite

STORE_KINDS = frozenset({"apiserver-stop", "etcd-restart", "etcd-pause"})  # recover once writes are prompt again
LEADER_KINDS = frozenset({"leader-kill", "leader-pause"})  # recover when the Lease is written again
NODE_FAULTS = frozenset({"kubelet-kill", "kubelet-pause", "power-off", "manual-taint", "runtime-then-kubelet"})
# A Lease write received this soon after the fault began may be the dying leader's own renewal.
_LEASE_SETTLE = 0.5
# After a store fault ends the apiserver can take seconds more to answer writes of one resource (seed
# 7207: pod PATCHes took 3.5 s after etcd restarted, while node and Lease writes took 0.01 s: the pods'
# watch cache catching up): its outage lasts until writes of pods and of nodes, what the controller
# writes, are each answered within STORE_SETTLED again, at most STORE_SETTLE_MAX after the end.
STORE_SETTLED = 1.0
SETTLED_RESOURCES = ("pods", "nodes")
STORE_SETTLE_MAX = 30.0


@dataclass(frozen=True)
class Outage:
    fault_id: int
    start: float
    end: float  # infinite when the log never shows the recovery


def store_settled(end: float, writes: Sequence[tuple[float, float]]) -> float:
    """When the apiserver answered writes of one resource promptly again after a store fault that ended at
    `end`. Only slowness seen extends it: `end` itself when the first write received since then was answered
    within STORE_SETTLED; else the arrival of the first one that was (at most STORE_SETTLE_MAX later).
    `writes`: (received, completed) of that resource's writes, by arrival."""
    first = bisect.bisect_left(writes, (end, -math.inf))
    for index in range(first, len(writes)):
        received, completed = writes[index]
        if received > end + STORE_SETTLE_MAX:
            return end + STORE_SETTLE_MAX
        if completed - received <= STORE_SETTLED:
            return end if index == first else received
    return end if first == len(writes) else end + STORE_SETTLE_MAX


def outages(
    faults: Sequence[Fault],
    lease_writes: Sequence[LeaseWrite],
    lease_configured: bool,
    handover_bound: float,
    writes: Mapping[str, Sequence[tuple[float, float]]] | None = None,
) -> list[Outage]:
    """The disruptive faults' windows, each up to its recovery. A store fault's lasts until the apiserver
    answers writes of pods and of nodes promptly again (`store_settled`; `writes`: each resource's writes'
    receipt and answer, by receipt). A leader fault's lasts until the Lease is written again, at most
    `handover_bound`: past it, the stretch without a leader is judged by what it was
    (bench/soak/leadership.py), not excused by the fault that began it. Without a Lease to watch (the
    built-ins), a leader fault lasts to its end plus `handover_bound`, and a store fault to the later of
    its recovery and its end plus `handover_bound`: kube-controller-manager exits when a store fault
    takes its Lease, and leads again once started and its old Lease expired, as a taintkeeper replica
    takes over within the bound its stretches are excused for."""
    result: list[Outage] = []
    for fault in faults:
        if fault.kind in STORE_KINDS:
            end = fault.until
            if writes and end < math.inf:
                end = max(store_settled(fault.until, writes.get(resource, ())) for resource in SETTLED_RESOURCES)
            if not lease_configured:
                end = max(end, fault.until + handover_bound)
            result.append(Outage(fault.id, fault.start, end))
        elif fault.kind in LEADER_KINDS and not lease_configured:
            # kube-controller-manager, leader-elected, unobserved: continued or restarted at the fault's end,
            # it leads again once its Lease expired and was taken, within the same bound.
            result.append(Outage(fault.id, fault.start, fault.until + handover_bound))
        elif fault.kind in LEADER_KINDS:
            acquired = next(
                (lease.write.completed for lease in lease_writes if lease.write.received > fault.start + _LEASE_SETTLE),
                math.inf,
            )
            result.append(Outage(fault.id, fault.start, min(acquired, fault.start + handover_bound)))
    return result


def leaderless(lease_writes: Sequence[LeaseWrite], missed_after: float, end: float) -> list[Outage]:
    """The stretches with no leader, from the Lease's writes: after a release until the next write, and
    from a holder's last renewal plus `missed_after` (two retry periods: it renews every one, so it has
    missed one by then: dead, paused or cut off) until the next write. fault_id -1: they are the
    controller's own, whatever fault caused them."""
    result: list[Outage] = []
    for write, following in zip(lease_writes, [*lease_writes[1:], None], strict=True):
        next_write = following.write.completed if following is not None else end
        start = write.write.received + missed_after if write.holder else write.write.completed
        if next_write > start:
            result.append(Outage(-1, start, next_write if following is not None else math.inf))
    return result


def resume_time(moment: float, windows: Sequence[Outage], slack: float) -> float:
    """When the controller could act on something due at `moment`: `moment` itself, or the recovery
    of an outage it falls in, repeated while that recovery falls in another (faults overlap).

    An outage that begins within `slack` after the moment interrupts the allowance too, so it also
    counts from that outage's recovery.
    """
    resume = moment
    changed = True
    while changed:
        changed = False
        for window in windows:
            if window.start <= resume + slack and window.end > resume:
                resume, changed = window.end, True
    return resume


def pods_back_by(fault: Fault, slack: Slack) -> float:
    """Until when a fault accounts for taintkeeper's pods (the controller's replicas, the webhook's) being
    gone: its end, plus the kubelet's longest restart back-off (`Slack.restart_backoff`) for a container
    it killed, paused or cut off to come back. A fault on a node that outlasts the pods' toleration of
    the node's failure (`Slack.pod_toleration`) accounts for them at most until their eviction
    (`Slack.node_grace` after the fault, plus the toleration) and the same back-off for their
    replacements to start on another node."""
    end = fault.until
    if fault.kind in NODE_FAULTS:
        end = min(end, fault.start + slack.node_grace + slack.pod_toleration)
    return end + slack.restart_backoff
