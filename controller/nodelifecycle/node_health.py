"""Is a node still heartbeating? Upstream `tryUpdateNodeHealth`, pure, with `now` passed in.

A node proves it is alive by renewing its Lease in kube-node-lease or by posting a new Ready
heartbeat. Whenever either changes, this controller stamps the change with its OWN clock
(`probe_timestamp`): kubelet timestamps are never compared with ours, so clock skew between
machines cannot make a node look dead or alive. A node whose probe is older than the grace
period (the startup grace while it has never posted a Ready condition) is stale: its Ready,
MemoryPressure, DiskPressure and PIDPressure conditions are to be set to Unknown.

A node first seen (this controller started, or became the leader) is judged from when it was last
heard as the apiserver dated it (`first_heard`), not from this first look as upstream does: a node
that died 40 s before a hand-over is marked at its grace, not 40 s after. The apiserver stamps each
change of an object in its managedFields by its own clock; converted to ours with the measured offset
(kube/clock_offset.py) and taken as late as the bounds allow, it is never earlier than the node's
real last heartbeat, so the grace is never cut short. Undatable (no stamp, no offset, or an offset
too uncertain): upstream's first look.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from controller.objects import NodeView
from kube.clock_offset import ClockOffset
from kube.timestamps import format_time, parse_time

STALE_CONDITION_TYPES = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
REASON_UNKNOWN = "NodeStatusUnknown"
MESSAGE_UNKNOWN = "Kubelet stopped posting node status."
REASON_NEVER_UPDATED = "NodeStatusNeverUpdated"
MESSAGE_NEVER_UPDATED = "Kubelet never posted node status."


# An offset known no better than this is not used: the grace would be judged that much later than upstream's
# at worst, never earlier, but a clock that cannot be pinned down is no record to trust.
MAX_OFFSET_UNCERTAINTY = 3.0


def first_heard(
    now: float, stamps: Iterable[str], offset: ClockOffset | None, max_uncertainty: float = MAX_OFFSET_UNCERTAINTY
) -> float | None:
    """When a node first seen was last heard, by our clock, as late as it may have been: the latest of the
    apiserver's stamps on its Lease and its status (whole seconds: the second may have run to its end),
    less the least offset. Never later than `now` (upstream's first look); None when it cannot be dated:
    no offset, one too uncertain, or a heartbeat without its stamp (the other may be the later)."""
    if offset is None or offset.uncertainty > max_uncertainty:
        return None
    times = [parse_time(stamp) if stamp else None for stamp in stamps]
    if not times or any(moment is None for moment in times):
        return None
    return min(now, max(moment for moment in times if moment is not None) + 1.0 - offset.low)


@dataclass(slots=True)
class NodeHealth:
    """What this controller last saw of a node, and when (by its own clock)."""

    probe_timestamp: float
    ready_transition_timestamp: float
    ready: dict[str, Any] | None  # the Ready condition as last seen
    lease_renew_time: float | None  # the Lease's renewTime as last seen (compared only with itself)
    lease_renew_raw: str | None = None  # the same, as written: most passes see it unchanged and skip parsing


@dataclass(frozen=True)
class HealthVerdict:
    grace_period: float
    observed_ready: dict[str, Any]  # the Ready condition as the node reported it (fake Unknown if none)
    current_ready: dict[str, Any]  # after marking stale conditions Unknown
    conditions_to_post: list[dict[str, Any]]  # changed conditions to write through nodes/status; [] if none

    @property
    def stale(self) -> bool:
        return bool(self.conditions_to_post)


class HealthTracker:
    """Per-node health bookkeeping across monitor passes (upstream's nodeHealthMap)."""

    def __init__(self, grace_period: float, startup_grace_period: float) -> None:
        self.grace_period = grace_period
        self.startup_grace_period = startup_grace_period
        self._health: dict[str, NodeHealth] = {}

    def get(self, name: str) -> NodeHealth | None:
        return self._health.get(name)

    def forget(self, name: str) -> None:
        self._health.pop(name, None)

    def reset_all(self, now: float) -> None:
        """Leaving full disruption: give every node a fresh grace period (upstream does the same)."""
        for health in self._health.values():
            health.probe_timestamp = now
            health.ready_transition_timestamp = now

    def mark_posted(self, name: str, now: float) -> None:
        """The Unknown conditions were written: the Ready transition happened now."""
        health = self._health.get(name)
        if health is not None:
            health.ready_transition_timestamp = now

    def update(
        self, node: NodeView, lease_renew_time: str | None, now: float, heard: float | None = None
    ) -> HealthVerdict:
        """Record what the node shows now and decide whether its conditions have gone stale. `heard`: when a
        node first seen was last heard (`first_heard`); None judges it from now, as upstream."""
        created = node.created if node.created is not None else now
        saved = self._health.get(node.name)
        current_ready = node.condition("Ready")
        if current_ready is None:
            # Never posted: judge it against the startup grace, counting from its creation.
            observed_ready = {
                "type": "Ready",
                "status": "Unknown",
                "lastHeartbeatTime": format_time(created),
                "lastTransitionTime": format_time(created),
            }
            grace = self.startup_grace_period
            health = saved if saved is not None else NodeHealth(created, created, None, None)
            health.ready = None
        else:
            observed_ready = current_ready
            grace = self.grace_period
            saved_ready = saved.ready if saved is not None else None
            if saved is None or saved_ready is None:
                # First sight (or the controller restarted with the node already there): its Lease as seen
                # now is the heartbeat `heard` dates, not a new one.
                health = NodeHealth(
                    now if heard is None else heard, now, current_ready, saved.lease_renew_time if saved else None
                )
                if saved is None and heard is not None and lease_renew_time:
                    health.lease_renew_time = parse_time(lease_renew_time)
                    health.lease_renew_raw = lease_renew_time
            elif saved_ready.get("lastHeartbeatTime") != current_ready.get("lastHeartbeatTime"):
                transitioned = saved_ready.get("lastTransitionTime") != current_ready.get("lastTransitionTime")
                health = NodeHealth(
                    now,
                    now if transitioned else saved.ready_transition_timestamp,
                    current_ready,
                    saved.lease_renew_time,
                )
            else:
                health = saved  # nothing new from the kubelet's status
                health.ready = current_ready

        self._note_lease(health, lease_renew_time, now)
        self._health[node.name] = health

        if now <= health.probe_timestamp + grace:
            return HealthVerdict(grace, observed_ready, observed_ready, [])
        to_post = self._unknown_conditions(node, created, now)
        current = next((c for c in to_post if c["type"] == "Ready"), None)
        if current is None:  # Ready is Unknown already: upstream writes only when Ready itself changes
            return HealthVerdict(grace, observed_ready, observed_ready, [])
        return HealthVerdict(grace, observed_ready, current, to_post)

    def lease_renewed(self, name: str, lease_renew_time: str, now: float) -> bool:
        """Record the Lease as `update` would on an unchanged Node; True if it moved the probe (a renewal
        later than the last one seen), else `update` must judge the node."""
        health = self._health.get(name)
        return health is not None and self._note_lease(health, lease_renew_time, now)

    @staticmethod
    def _note_lease(health: NodeHealth, lease_renew_time: str | None, now: float) -> bool:
        """A renewed Lease is a heartbeat too (a kubelet that only renews its Lease is healthy); True if
        it moved the probe."""
        moved = False
        if lease_renew_time and lease_renew_time != health.lease_renew_raw:
            renew = parse_time(lease_renew_time)
            if renew is not None and (health.lease_renew_time is None or health.lease_renew_time < renew):
                health.probe_timestamp = now
                health.lease_renew_time = renew
                moved = True
            health.lease_renew_raw = lease_renew_time
        return moved

    @staticmethod
    def _unknown_conditions(node: NodeView, created: float, now: float) -> list[dict[str, Any]]:
        """The conditions that must become Unknown (only those not Unknown already)."""
        changed: list[dict[str, Any]] = []
        for condition_type in STALE_CONDITION_TYPES:
            condition = node.condition(condition_type)
            if condition is None:
                changed.append(
                    {
                        "type": condition_type,
                        "status": "Unknown",
                        "reason": REASON_NEVER_UPDATED,
                        "message": MESSAGE_NEVER_UPDATED,
                        "lastHeartbeatTime": format_time(created),
                        "lastTransitionTime": format_time(now),
                    }
                )
            elif condition.get("status") != "Unknown":
                changed.append(
                    {
                        **condition,
                        "status": "Unknown",
                        "reason": REASON_UNKNOWN,
                        "message": MESSAGE_UNKNOWN,
                        "lastTransitionTime": format_time(now),
                    }
                )
        return changed
