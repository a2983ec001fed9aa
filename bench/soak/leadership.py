"""Leadership (I10): each stretch with no leader, split into what the run's faults account for and
what they do not.

A stretch runs from the moment leadership was lost (the holder's last renewal, or its release) to the
next Lease write. Within it:
- the apiserver down (a store fault): nobody can lead;
- no controller replica able (Ready, its caches synced, or holding the Lease; and no fault taking it):
  nobody can lead either; excused only when a fault took the replicas able shortly before (a leader
  kill or pause, a fault on a replica's node, a store fault), and only until what must follow that fault
  has had its time (`recovery.pods_back_by`); never when they were simply not there (a Deployment
  scaled to 0, its pods deleted);
- otherwise a replica can lead and the apiserver answers.
In the seconds no fault accounts for (a replica able but not leading, or none there by no fault's
doing), some replica must hold the Lease within the hand-over bound (lease duration + retry period +
5 s). Seconds past the bound are I10 violations, and deadlines falling in them, or in an absence no
fault explains, are judged as if a leader had been there.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.soak.config import SoakConfig, replica_of_agent, replica_of_holder
from bench.soak.faults import Fault
from bench.soak.recovery import LEADER_KINDS, NODE_FAULTS, STORE_KINDS, Outage, leaderless, pods_back_by
from bench.soak.timeline import PodHistory, Timeline

Interval = tuple[float, float]
# How long before replicas went missing a fault on their node may have caused it: the node's grace,
# its taint's allowance and a pod's shutdown.
REPLICA_FAULT_LEAD = 120.0


def union(intervals: Iterable[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for start, end in sorted(interval for interval in intervals if interval[1] > interval[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def subtract(intervals: Iterable[Interval], holes: Iterable[Interval]) -> list[Interval]:
    result = union(intervals)
    for hole_start, hole_end in union(holes):
        kept: list[Interval] = []
        for start, end in result:
            if hole_end <= start or end <= hole_start:
                kept.append((start, end))
                continue
            if start < hole_start:
                kept.append((start, hole_start))
            if hole_end < end:
                kept.append((hole_end, end))
        result = kept
    return result


def clip(intervals: Iterable[Interval], start: float, end: float) -> list[Interval]:
    return [(max(a, start), min(b, end)) for a, b in intervals if min(b, end) > max(a, start)]


def _began(intervals: Sequence[Interval], moment: float) -> float:
    """The start of the interval holding `moment` (`moment` itself when none does)."""
    return next((start for start, end in intervals if start <= moment <= end), moment)


def length(intervals: Iterable[Interval]) -> float:
    return sum(end - start for start, end in intervals)


@dataclass(frozen=True)
class Stretch:
    """One stretch with no leader and how its seconds divide."""

    start: float  # leadership lost: the last renewal, or the release
    end: float  # the next Lease write, or the log's end
    still_open: bool  # no Lease write ended it before the log did
    apiserver_down: float  # seconds with a store fault
    no_replica: float  # seconds with no replica able to lead: Ready or holding the Lease, unpaused, answered
    within_bound: float  # seconds no fault accounts for, within the hand-over bound
    beyond_bound: list[Interval]  # no fault accounts for them, past the bound: I10
    unexplained_absence: list[Interval]  # no replica able, and no fault took them (or past its excuse)

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def excused(self) -> list[Interval]:
        """The parts a deadline's allowance counts through: all but the unexcused ones."""
        return subtract([(self.start, self.end)], [*self.beyond_bound, *self.unexplained_absence])


def _ready(pod: PodHistory) -> list[Interval]:
    """When the kubelet reported the replica Ready (its caches synced: it can take over, as its readiness
    probe says; a starting one campaigns only once they are), until it reported otherwise, or the pod
    began terminating."""
    result: list[Interval] = []
    since: float | None = None
    termination = pod.termination()
    gone = termination[0] if termination else math.inf
    for state in pod.current:
        ready = state.deletion_timestamp is None and state.ready == "True"
        if ready and since is None:
            since = state.time
        elif not ready and since is not None:
            result.append((since, state.time))
            since = None
    if since is not None:
        result.append((since, math.inf))
    return clip(result, -math.inf, gone)


def _down_until_reported(pod: PodHistory, fault: Fault) -> Interval:
    """A replica whose process a fault ended (its node powered off, or its container killed) is gone from
    the fault's start until its kubelet reports the pod again: only the kubelet restarts the container,
    and a dead kubelet (another fault on the node) leaves the pod shown Ready meanwhile."""
    kubelet = f"system:node:{pod.node}"
    back = next(
        (state.time for state in pod.current if state.time >= fault.until and state.write.username == kubelet),
        math.inf,
    )
    return fault.start, back


def _holding(timeline: Timeline, missed_after: float) -> dict[str, list[Interval]]:
    """Each replica -> when it held the Lease: a run of one holder identity's writes, none more than
    `missed_after` after the last (as `leaderless` judges renewals), from its first arrival to its last
    completion. A replica writing the Lease as holder can lead, whatever its kubelet last reported (a dead
    kubelet reports nothing, and a new container's readiness probe lags its caches); a gap ends the run,
    so a holder that crashed and came back is not counted able in between."""
    holding: dict[str, list[Interval]] = {}
    run: tuple[str, float, float] | None = None  # (holder identity, first arrival, last completion)
    for lease in timeline.lease_writes:
        if run is not None and (lease.holder != run[0] or lease.write.received - run[2] > missed_after):
            holding.setdefault(replica_of_holder(run[0]), []).append((run[1], run[2]))
            run = None
        if lease.holder:
            run = (lease.holder, run[1] if run is not None else lease.write.received, lease.write.completed)
    if run is not None:
        holding.setdefault(replica_of_holder(run[0]), []).append((run[1], run[2]))
    return holding


def _there(pod: PodHistory, holding: dict[str, list[Interval]]) -> list[Interval]:
    """When a replica was there to lead had no fault taken it: Ready, or holding the Lease."""
    return union([*_ready(pod), *holding.get(pod.name, [])])


def replica_intervals(timeline: Timeline, faults: Sequence[Fault], config: SoakConfig) -> dict[str, list[Interval]]:
    """Each controller replica (pod name) -> when it could lead: there (`_there`) and no fault taking
    it. Without pods (kube-controller-manager's replicas run as processes), one "controller" throughout but
    for the leader faults."""
    if not config.replicas_are_pods:
        paused = [(f.start, f.until) for f in faults if f.kind in LEADER_KINDS]
        return {"controller": subtract([(timeline.start, math.inf)], paused)}
    namespace, prefix = config.controller_pods
    contacts = _contacts(timeline, config)
    holding = _holding(timeline, 2 * config.slack.retry_period)
    result: dict[str, list[Interval]] = {}
    for pod in timeline.pods_named(namespace, prefix):
        holes = [(f.start, f.until) for f in faults if f.kind == "leader-pause" and f.target == pod.name]
        holes += [_down_until_reported(pod, f) for f in faults if f.kind == "leader-kill" and f.target == pod.name]
        holes += [_down_until_reported(pod, f) for f in faults if f.kind == "power-off" and f.target == pod.node]
        holes += [_unreachable(contacts.get(pod.name, []), f) for f in faults if f.kind in STORE_KINDS]
        result[pod.name] = [*result.get(pod.name, []), *subtract(_there(pod, holding), holes)]
    return result


def _contacts(timeline: Timeline, config: SoakConfig) -> dict[str, list[tuple[float, float]]]:
    """Each replica -> (completed, received) of its requests that succeeded, by completion (its Lease reads
    every retry period among them)."""
    contacts: dict[str, list[tuple[float, float]]] = {}
    for record in timeline.records:
        if record.succeeded and config.is_controller(record.username):
            contacts.setdefault(replica_of_agent(record.user_agent), []).append((record.completed, record.received))
    for times in contacts.values():
        times.sort()
    return contacts


def _unreachable(contacts: list[tuple[float, float]], fault: Fault) -> Interval:
    """A store fault cuts a replica off from its start until the apiserver next answers that replica: a pod
    reaches it through the kubernetes Service, whose route kube-proxy restores some seconds after the
    apiserver is back (seen: 30 s), and no replica can lead meanwhile. The answer shows the route worked
    from when its request arrived (a Lease write, say), or from the fault's end if it arrived before."""
    index = bisect.bisect_left(contacts, (fault.until, -math.inf))
    if index == len(contacts):
        return fault.start, math.inf
    _, received = contacts[index]
    return fault.start, max(fault.until, received)


class Leadership:
    """The run's stretches without a leader, judged against the replicas and the store faults."""

    def __init__(self, timeline: Timeline, faults: Sequence[Fault], config: SoakConfig) -> None:
        slack = config.slack
        self.bound = slack.lease_duration + slack.retry_period + slack.handover
        self._faults = faults
        self._timeline = timeline
        self._config = config
        self._restart_backoff = slack.restart_backoff
        self._replicas = replica_intervals(timeline, faults, config)
        self._can_lead = union(interval for intervals in self._replicas.values() for interval in intervals)
        self._withdrawals = sorted(
            moment
            for pod in self._timeline.pods_named(*config.controller_pods)
            if config.replicas_are_pods and (moment := self._withdrawn_at(pod)) is not None
        )
        self._down = union((f.start, f.until) for f in faults if f.kind in STORE_KINDS)
        self.stretches: list[Stretch] = []
        if config.lease is None:
            return
        missed_after = 2 * slack.retry_period
        for outage in leaderless(timeline.lease_writes, missed_after, timeline.end):
            lost = outage.start - missed_after if self._renewal_missed(outage) else outage.start
            self.stretches.append(self._divide(lost, outage.end))

    def _renewal_missed(self, outage: Outage) -> bool:
        """Whether the stretch began with a missed renewal (counted from it) rather than a release."""
        before = self._timeline.holder_before(outage.start)
        return before is not None and bool(before.holder)

    def _divide(self, lost: float, end: float) -> Stretch:
        still_open = end == math.inf
        end = self._timeline.end if still_open else end
        whole = [(lost, end)]
        down = clip(self._down, lost, end)
        # No replica able, the apiserver down or not: a store fault inside an absence does not begin a new one,
        # so each part of it is judged by the replicas that ran shortly before the whole began.
        missing = subtract(whole, self._can_lead)
        absent = subtract(missing, down)
        unexplained = [
            (max(start, excused_until), stop)
            for start, stop in absent
            if (excused_until := self._taken_until((_began(missing, start), stop))) < stop
        ]
        # The controller's own time: a replica able and not leading, or none there by no fault's doing.
        accountable = union([*subtract(whole, [*down, *absent]), *unexplained])
        within, beyond = [], []
        for start, stop in accountable:
            allowed = min(stop, start + self.bound)
            within.append((start, allowed))
            if stop > allowed:
                beyond.append((allowed, stop))
        return Stretch(lost, end, still_open, length(down), length(absent), length(within), beyond, unexplained)

    def _taken_until(self, interval: Interval) -> float:
        """Until when the faults that took the replicas running shortly before excuse their absence: a
        leader fault on one (its container may wait out the kubelet's restart back-off), a fault on its
        node, or a store fault (the apiserver not yet answering it), each until `pods_back_by`. -inf when
        none did: a replica whose pod someone deleted (a Deployment scaled down) was withdrawn, not taken, and
        from its withdrawal on no fault accounts for the absence (replicas the faults took before were
        replaced by those)."""
        start, end = interval
        withdrawn = [moment for moment in self._withdrawals if start - REPLICA_FAULT_LEAD <= moment <= end]
        if withdrawn:
            return min(withdrawn)
        excused_until = -math.inf
        for pod in self._recent_replicas(start):
            for fault in self._faults:
                if (
                    (
                        fault.kind in LEADER_KINDS
                        and fault.target == pod.name
                        and fault.intersects(start - self._restart_backoff, end)
                    )
                    or (
                        fault.kind in NODE_FAULTS
                        and fault.target == pod.node
                        and fault.intersects(start - REPLICA_FAULT_LEAD, end)
                    )
                    or (fault.kind in STORE_KINDS and fault.intersects(start - REPLICA_FAULT_LEAD, end))
                ):
                    excused_until = max(excused_until, pods_back_by(fault, self._config.slack))
        return excused_until

    def _recent_replicas(self, moment: float) -> list[PodHistory]:
        """The replicas able to lead within REPLICA_FAULT_LEAD before `moment`, and not withdrawn."""
        if not self._config.replicas_are_pods:
            return [PodHistory("", "", "controller")]  # kube-controller-manager's replicas, as one; no node
        namespace, prefix = self._config.controller_pods
        return [
            pod
            for pod in self._timeline.pods_named(namespace, prefix)
            if not self._withdrawn(pod)
            and any(a <= moment and b >= moment - REPLICA_FAULT_LEAD for a, b in self._replicas.get(pod.name, []))
        ]

    def _withdrawn(self, pod: PodHistory) -> bool:
        return self._withdrawn_at(pod) is not None

    def _withdrawn_at(self, pod: PodHistory) -> float | None:
        """When its pod was deleted by someone other than the controller (its own eviction) or its kubelet."""
        removal = next((removal for removal in pod.removals if removal.succeeded), None)
        if removal is None or removal.write.by_controller or removal.write.username == f"system:node:{pod.node}":
            return None
        return removal.write.received

    def excused(self) -> list[Outage]:
        """The parts of the stretches a deadline's allowance counts through (fault_id -1)."""
        return [Outage(-1, start, end) for stretch in self.stretches for start, end in stretch.excused]
