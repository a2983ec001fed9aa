"""The invariants a soak run must keep, each judged from the rebuilt histories alone:

I1 never early, I2 never late, I3 never twice, I4 one actor, I5 healthy stays healthy,
I6 admission, I7 nothing lost, I8 budgets respected, I9 force only when fenced, I10 some replica leads,
I11 pods of a node not Ready marked NotReady, I12 a stale node-failure taint evicts nothing.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bench.soak.audit import AuditRecord, parse_timestamp
from bench.soak.config import (
    KUBELET_PREFIX,
    TAINTKEEPER_ACCOUNTS,
    SoakConfig,
    replica_of_agent,
    replica_of_holder,
    term_of_agent,
)
from bench.soak.faults import WEBHOOK_FAULTS, Fault, active_at
from bench.soak.leadership import Leadership, Stretch
from bench.soak.recovery import (
    LEADER_KINDS,
    NODE_FAULTS,
    STORE_KINDS,
    Outage,
    outages,
    pods_back_by,
    resume_time,
)
from bench.soak.timeline import HeldTaint, NodeHistory, NodeState, PodHistory, TaintEpisode, Timeline, taint_id
from bench.soak.tolerations import (
    LIFECYCLE_KEYS,
    NO_EXECUTE,
    OUT_OF_SERVICE,
    Taint,
    Toleration,
    grace_seconds,
    has_default_tolerations,
    tolerates,
)

INVARIANTS = ("I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "I9", "I10", "I11", "I12")
KUBELET_KINDS = frozenset({"kubelet-kill", "kubelet-pause", "power-off", "runtime-then-kubelet"})
NODE_HEARTBEAT_WINDOW = 40.0  # seconds: a kubelet renews its node Lease every 10 s
ATTRIBUTION_LEAD = 60.0  # seconds before a taint's start in which a fault may have caused it
SKIP_LABEL = "taintkeeper.io/skip"
ACTING = {"pods": ("", "status", "eviction"), "nodes": ("", "status"), "events": ("",)}
LIFECYCLE_IDS = frozenset((key, NO_EXECUTE) for key in LIFECYCLE_KEYS)
# The taints a pod's disruption budget never holds back: its node has failed, or has been fenced.
NEVER_BUDGETED = frozenset({*LIFECYCLE_KEYS, OUT_OF_SERVICE})
# kube-apiserver's words for a webhook that refused a pod (`admission webhook "x" denied the request`)
# or could not be called (`failed calling webhook "x": ...`, with failurePolicy Fail).
WEBHOOK_FAILURE = re.compile(r"admission webhook|calling webhook")


def clock(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%H:%M:%S.%f")[:-3]


@dataclass(frozen=True)
class Violation:
    invariant: str
    time: float
    subject: str  # the pod, node or replica
    explanation: str
    faults: tuple[int, ...]  # ids of the faults active at `time`


@dataclass(frozen=True)
class EvictionCheck:
    """A pod whose deadline I2 judged; faults intersecting the window are credited with it."""

    subject: str
    window_start: float  # the taint's start, less the attribution lead
    window_end: float  # the controller's deletion, else the deadline
    node: str = ""
    taint_start: float = 0.0
    deadline: float = 0.0
    deleted: float | None = None  # the controller's deletion (None: it never came)


@dataclass(frozen=True)
class Unjudged:
    """A deadline the log ended too soon to judge: its allowance runs past the last record."""

    subject: str
    began: float  # the taint, the kubelet's fault, the pod's creation
    due: float
    limit: float  # when the judgement could be made


@dataclass
class Findings:
    violations: list[Violation] = field(default_factory=list)
    evictions: list[EvictionCheck] = field(default_factory=list)
    max_controller_restarts: int | None = None
    leaderless: list[Stretch] = field(default_factory=list)  # no replica led (bench/soak/leadership.py)
    unjudged: list[Unjudged] = field(default_factory=list)
    beside: list[Violation] = field(default_factory=list)  # of the invariants not applicable to the run
    # What was done -> who did it -> how often ("pods removed", "node taints changed"), every identity seen.
    actors: dict[str, dict[str, int]] = field(default_factory=dict)


class Context:
    def __init__(self, timeline: Timeline, faults: Sequence[Fault], config: SoakConfig) -> None:
        self.timeline = timeline
        self.faults = faults
        self.config = config
        self.slack = config.slack
        self.leadership = Leadership(timeline, faults, config)
        # A stretch with no leader excuses lateness only in its parts the faults account for (I10 judges
        # the rest): a deadline falling past the hand-over bound, or while the replicas were simply not
        # there, is judged as if a leader had been.
        self.outages: list[Outage] = [
            *outages(
                faults, timeline.lease_writes, config.lease is not None, self.leadership.bound, timeline.write_times
            ),
            *self.leadership.excused(),
        ]
        # When each leader's term began: the holder changed, or it wrote again after a stretch without a leader.
        renew_deadline = config.slack.renew_deadline
        self.terms = [
            write.write.completed
            for previous, write in itertools.pairwise(timeline.lease_writes)
            if write.holder
            and (write.holder != previous.holder or write.write.received - previous.write.received > renew_deadline)
        ]
        self.since = -math.inf if config.since is None else config.since
        self.until = timeline.end if config.until is None else min(timeline.end, config.until)
        # A deadline whose allowance runs past the log's last record cannot be judged: it is reported as
        # such (and fails the run), never skipped. bench/chaos.py waits for every one before its last look.
        self.log_end = timeline.end
        self.unjudged: list[Unjudged] = []
        self._kubelet_faults: dict[str, list[Fault]] = defaultdict(list)
        for fault in faults:
            if fault.kind in KUBELET_KINDS:
                self._kubelet_faults[fault.target].append(fault)

    def in_window(self, moment: float) -> bool:
        return self.since <= moment <= self.until

    def judgeable(self, subject: str, began: float, due: float, limit: float) -> bool:
        """Whether the log reaches `limit`; if not, the deadline is noted as unjudged."""
        if limit <= self.log_end:
            return True
        self.unjudged.append(Unjudged(subject, began, due, limit))
        return False

    def violation(self, invariant: str, moment: float, subject: str, explanation: str) -> Violation:
        return Violation(invariant, moment, subject, explanation, active_at(self.faults, moment))

    def healthy(self, node: str, moment: float) -> bool:
        """No kubelet fault on the node within the grace, and its kubelet heartbeating."""
        if any(fault.intersects(moment - self.slack.node_grace, moment) for fault in self._kubelet_faults[node]):
            return False
        return self.timeline.heartbeat_between(node, moment - NODE_HEARTBEAT_WINDOW, moment)

    def fenced(self, node: str, moment: float) -> bool:
        """The node carried the out-of-service taint while not Ready, in a state a reader could have
        seen within the early slack before `moment`."""
        history = self.timeline.nodes.get(node)
        return history is not None and any(
            state.ready != "True" and any(taint.get("key") == OUT_OF_SERVICE for taint in state.taints)
            for state in history.states_between(moment - self.slack.early, moment)
        )

    def node_taints_around(self, pod: PodHistory, moment: float) -> list[list[HeldTaint]]:
        """The NoExecute taints of each state of the pod's node a reader could have seen within the
        early slack before `moment` (a taint removed just before, or added just before, counts)."""
        history = self.timeline.nodes.get(pod.node)
        return history.held_between(moment - self.slack.early, moment) if history else []


# --- I1 never early ---------------------------------------------------------------------------


def _held_due(pod: PodHistory, held: HeldTaint, tolerations: tuple[Toleration, ...]) -> float:
    """When `held` makes the pod due: its episode's start (or the pod's binding, if later) plus the grace."""
    floor = pod.bound_from if pod.bound_from is not None else -math.inf
    return max(held.episode_start, floor) + grace_seconds(tolerations, held.taint)


def never_early(ctx: Context) -> list[Violation]:
    found: list[Violation] = []
    for pod in ctx.timeline.pods.values():
        for removal in pod.controller_removals():
            if not removal.succeeded or removal.force:  # a force deletion has KEP-2268's causes: I9 judges it
                continue
            moment = removal.write.received
            tolerations = pod.tolerations_at(removal.write.completed)
            states = ctx.node_taints_around(pod, moment)
            due = min((_held_due(pod, held, tolerations) for state in states for held in state), default=math.inf)
            if due == math.inf:
                where = f"on {pod.node}" if pod.node else "on no node"
                found.append(
                    ctx.violation(
                        "I1",
                        moment,
                        pod.label,
                        f"deleted by {removal.write.replica} with no cause: {where}, no NoExecute "
                        "taint it does not tolerate forever",
                    )
                )
            elif moment < due - ctx.slack.early:
                found.append(
                    ctx.violation(
                        "I1",
                        moment,
                        pod.label,
                        f"deleted by {removal.write.replica} {due - moment:.1f}s before its "
                        f"deadline {clock(due)} on {pod.node}",
                    )
                )
    return found


# --- I2 never late ----------------------------------------------------------------------------


def _upper_deadline(ctx: Context, pod: PodHistory, taint: Taint, start: float) -> float:
    """`start` plus the seconds the pod's first matching toleration allows; tolerations added (by a
    backfill) before the deadline has passed by the late slack count."""
    tolerations: tuple[Toleration, ...] = pod.tolerations_at(start)
    due = start + grace_seconds(tolerations, taint)
    while due < math.inf:
        later = pod.tolerations_at(due + ctx.slack.late)
        if later == tolerations:
            break
        tolerations = later
        due = start + grace_seconds(tolerations, taint)
    return due


def _carried_start(history: NodeHistory, pod: PodHistory, episode: TaintEpisode) -> float:
    """Where a lifecycle taint swapped in for the other one counts from: the whole lifecycle episode's
    start when the pod's eviction was pending under the old taint (a finite grace), else the swap. A
    Ready=True report between the two ends the pending eviction (a stale taint evicts nothing), so the
    swapped-in taint counts from its own start, as the controller counts (docs/architecture.md)."""
    key = episode.taint.get("key")
    if key not in LIFECYCLE_KEYS:
        return episode.start
    held = [
        h
        for state in history.held_between(episode.shown, episode.shown)
        for h in state
        if taint_id(h.taint) == taint_id(episode.taint)
    ]
    if not held:
        return episode.start
    first = min(held, key=lambda h: h.episode_start)
    if first.episode_start >= episode.start or history.first_ready(first.episode_shown, episode.shown) is not None:
        return episode.start
    other = {"key": LIFECYCLE_KEYS[1 - LIFECYCLE_KEYS.index(key)], "effect": NO_EXECUTE}
    pending = grace_seconds(pod.tolerations_at(episode.start), other) < math.inf
    return first.episode_start if pending else episode.start


def never_late(ctx: Context) -> tuple[list[Violation], list[EvictionCheck]]:
    found: list[Violation] = []
    checked: list[EvictionCheck] = []
    for pod in ctx.timeline.pods.values():
        history, bound = ctx.timeline.nodes.get(pod.node), pod.bound_at
        if history is None or bound is None:
            continue
        termination = pod.termination()
        gone = termination[0] if termination else math.inf
        candidates = []
        for episode in history.no_execute_episodes():
            if (episode.end is not None and episode.end <= bound) or episode.shown >= gone:
                continue
            due = _upper_deadline(ctx, pod, episode.taint, max(_carried_start(history, pod, episode), bound))
            if due < math.inf and episode.taint.get("key") in LIFECYCLE_KEYS:
                owed = _owed_while_not_ready(ctx, history, due, math.inf if episode.end is None else episode.end)
                if owed is None:
                    continue
                due = owed
            # Judged only if the taint was still there when a controller could act on it: one lifted
            # while the apiserver was down or no replica led leaves nothing to do.
            if due < math.inf and episode.held_through(resume_time(due, ctx.outages, ctx.slack.late) + 1.0):
                candidates.append((due, episode.start, episode.taint, math.inf if episode.end is None else episode.end))
        if not candidates:
            continue
        due, taint_start, taint, lifted = min(candidates, key=lambda candidate: candidate[0])
        if termination and termination[0] < due and not termination[1]:
            continue  # someone else was already deleting it
        limit = resume_time(due, ctx.outages, ctx.slack.late) + ctx.slack.late
        deletion = pod.first_controller_removal()
        if _waiting_for_budget(ctx, pod, taint, due, limit):
            checked.append(
                EvictionCheck(
                    pod.label,
                    taint_start - ATTRIBUTION_LEAD,
                    due,
                    pod.node,
                    taint_start,
                    due,
                    deletion.write.received if deletion else None,
                )
            )
            found += _budget_wait_judged(ctx, pod, taint, due, min(lifted, gone))
            continue
        if deletion is not None and deletion.write.received <= limit:
            checked.append(
                EvictionCheck(
                    pod.label,
                    taint_start - ATTRIBUTION_LEAD,
                    deletion.write.received,
                    pod.node,
                    taint_start,
                    due,
                    deletion.write.received,
                )
            )
            continue
        if termination and not termination[1] and termination[0] < limit:
            continue
        if not ctx.judgeable(pod.label, taint_start, due, limit):
            continue
        checked.append(
            EvictionCheck(
                pod.label,
                taint_start - ATTRIBUTION_LEAD,
                due,
                pod.node,
                taint_start,
                due,
                deletion.write.received if deletion else None,
            )
        )
        key = taint.get("key")
        late = (
            f"deleted by the controller {deletion.write.received - due:.1f}s after"
            if deletion
            else "never deleted by the controller since"
        )
        found.append(
            ctx.violation(
                "I2",
                due,
                pod.label,
                f"on {pod.node} under {key}: {late} its deadline {clock(due)} (allowed until {clock(limit)})",
            )
        )
    return found, checked


def _owed_while_not_ready(ctx: Context, history: NodeHistory, due: float, end: float) -> float | None:
    """When an eviction under a node-failure taint is owed: from the first moment at or after `due` the
    node is not Ready under it and stays so until a controller could act (a stale taint on a node
    reporting Ready=True evicts nothing; the monitor lifts it). None: never, before `end`."""
    moment = due
    while (owed := history.first_not_ready(moment, end)) is not None:
        could_act = resume_time(owed, ctx.outages, ctx.slack.late) + ctx.slack.late
        ready_again = history.first_ready(owed, min(could_act, end))
        if ready_again is None:
            return owed
        moment = ready_again
    return None


def _waiting_for_budget(ctx: Context, pod: PodHistory, taint: Taint, due: float, limit: float) -> bool:
    """On time though not yet gone: it respects its disruption budget, the taint is not a node failure's,
    and the controller asked for its Eviction by the limit and the budget refused (429)."""
    if pod.namespace not in ctx.config.budgeted_namespaces or taint.get("key") in NEVER_BUDGETED:
        return False
    return any(
        removal.eviction and removal.code == 429 and due - ctx.slack.early <= removal.write.received <= limit
        for removal in pod.controller_removals()
    )


def _budget_wait_judged(ctx: Context, pod: PodHistory, taint: Taint, due: float, wait_ends: float) -> list[Violation]:
    """A pod waiting for its budget: asked again after each refusal, and deleted once its namespace's
    budget timeout (taintkeeper.io/disruption-budget-timeout, else the flag's default) has run out."""
    found: list[Violation] = []
    missed = _budget_ask_missed(ctx, pod, due, wait_ends)
    if missed is not None:
        asked, allowed = missed
        found.append(
            ctx.violation(
                "I2",
                asked,
                pod.label,
                f"on {pod.node} under {taint.get('key')}: its budget refused its Eviction "
                f"at {clock(asked)} and it was not asked again by {clock(allowed)}",
            )
        )
    timeout = ctx.config.budget_timeouts.get(pod.namespace)
    if timeout is None:
        return found
    ceiling = resume_time(due + timeout, ctx.outages, ctx.slack.late) + ctx.slack.late
    removed = any(
        removal.succeeded and due - ctx.slack.early <= removal.write.received <= ceiling
        for removal in pod.controller_removals()
    )
    if removed or wait_ends <= ceiling or not ctx.judgeable(pod.label, due, due + timeout, ceiling):
        return found
    found.append(
        ctx.violation(
            "I2",
            due + timeout,
            pod.label,
            f"on {pod.node} under {taint.get('key')}: its budget timeout ({timeout:g}s) ran out "
            f"at {clock(due + timeout)} and it was not deleted by {clock(ceiling)}",
        )
    )
    return found


def _budget_ask_missed(ctx: Context, pod: PodHistory, due: float, wait_ends: float) -> tuple[float, float] | None:
    """A pod waiting for its budget is on time only while the controller keeps asking: after each refused
    Eviction, the next ask (or the removal) within the retry interval plus the late slack, counted from an
    outage's end if one falls in between. The first refused ask not followed up in time, and by when it
    should have been; None if the controller kept asking until the pod went, the taint was lifted (or the
    pod left by other hands: `wait_ends`) or the window ended."""
    asks = [
        removal
        for removal in pod.controller_removals()
        if (removal.eviction or removal.succeeded) and removal.write.received >= due - ctx.slack.early
    ]
    for ask, following in zip(asks, [*asks[1:], None], strict=True):
        if ask.succeeded:
            return None
        allowed = resume_time(ask.write.received + ctx.slack.budget_retry, ctx.outages, ctx.slack.late) + ctx.slack.late
        if allowed >= min(wait_ends, ctx.log_end):
            return None
        if following is None or following.write.received > allowed:
            return ask.write.received, allowed
    return None


# Upstream's monitor period (5 s), the per-zone taint rate (one node per 10 s) and 5 s: how long
# after a node's grace runs out its NoExecute taint may take.
TAINT_ALLOWANCE = 20.0


def dead_nodes_tainted(ctx: Context) -> list[Violation]:
    """I2 for the taint itself: a node whose kubelet stopped long enough must get a lifecycle NoExecute
    taint by its last heartbeat plus the grace plus TAINT_ALLOWANCE (counted from the controller's
    return, as I2's deadlines). Without this, a controller that never tainted a dead node would pass."""
    found: list[Violation] = []
    for fault in ctx.faults:
        if fault.kind not in KUBELET_KINDS:
            continue
        beats = ctx.timeline.heartbeats.get(fault.target, [])
        index = bisect.bisect_right(beats, fault.start) - 1
        if index < 0:
            continue
        # A leader that starts leading (a new one, or the same one again after losing the Lease) first
        # sees every node then and gives it a whole grace period, as upstream's does.
        start = beats[index]
        while True:  # a term that begins before the taint was owed (the outages counted) restarts the grace
            due = start + ctx.slack.node_grace + TAINT_ALLOWANCE
            limit = resume_time(due, ctx.outages, ctx.slack.late) + ctx.slack.late
            later = [moment for moment in ctx.terms if start < moment < limit]
            if not later:
                break
            start = later[-1]
        if fault.until < limit or not ctx.judgeable(f"node {fault.target}", fault.start, due, limit):
            continue  # the kubelet came back before the taint was owed (or the log ended first)
        history = ctx.timeline.nodes.get(fault.target)
        states = history.held_between(fault.start, limit) if history else []
        if not any(held.taint.get("key") in LIFECYCLE_KEYS for state in states for held in state):
            found.append(
                ctx.violation(
                    "I2",
                    due,
                    f"node {fault.target}",
                    f"kubelet stopped (fault {fault.id}); no not-ready or unreachable NoExecute "
                    f"taint by {clock(limit)}, {limit - beats[index]:.1f}s after its last "
                    "heartbeat",
                )
            )
    return found


# --- I3 never twice ---------------------------------------------------------------------------


def deleted_twice(ctx: Context) -> list[Violation]:
    found: list[Violation] = []
    for pod in ctx.timeline.pods.values():
        first = pod.first_controller_removal()
        if first is None:
            continue
        for again in pod.controller_removals():
            if again.force and ctx.fenced(pod.node, again.write.received):
                # KEP-2268: a fenced node's terminating pods are force-deleted (I9 judges it), by PodGC too: the
                # one that comes second is answered 404 (or a 504 whose outcome it cannot know).
                continue
            if ctx.config.upstream and again.write.username == first.write.username:
                continue  # upstream re-deletes by design (each taint change), a no-op on a terminating pod
            if again.write.received > first.write.received and again is not first:
                found.append(
                    ctx.violation(
                        "I3",
                        again.write.received,
                        pod.label,
                        f"deleted again by {again.write.replica} (answer {again.code}) "
                        f"{again.write.received - first.write.received:.1f}s after "
                        f"{first.write.replica}'s deletion",
                    )
                )
    return found


@dataclass(frozen=True)
class _Change:
    time: float
    by_controller: bool
    replica: str
    before: str  # a condition's old status; for a taint "absent"/"present"
    after: str


def _changes(before: NodeState, after: NodeState) -> dict[tuple[str, ...], tuple[str, str]]:
    """What a write changed: taints by key and effect, and condition statuses."""
    changes: dict[tuple[str, ...], tuple[str, str]] = {}
    for identity in after.taint_ids - before.taint_ids:
        changes[("taint", *identity)] = ("absent", "present")
    for identity in before.taint_ids - after.taint_ids:
        changes[("taint", *identity)] = ("present", "absent")
    for kind, status in after.conditions.items():
        old = before.conditions.get(kind)
        if old is not None and old != status:
            changes[("condition", kind)] = (old, status)
    return changes


def _is_swap(changes: dict[tuple[str, ...], tuple[str, str]]) -> bool:
    """One write replacing not-ready by unreachable (or back): the lifecycle swap, no revert."""
    lifecycle = [value for key, value in changes.items() if key[0] == "taint" and key[1:] in LIFECYCLE_IDS]
    return ("absent", "present") in lifecycle and ("present", "absent") in lifecycle


def _node_races(ctx: Context, history: NodeHistory) -> list[Violation]:
    found: list[Violation] = []
    window = ctx.slack.lease_duration
    last_controller_change: _Change | None = None
    last_change: dict[tuple[str, ...], _Change] = {}
    outside_condition_change = -math.inf  # the kubelet (or anyone else) changing a condition gives cause
    for before, after in history.pairs():
        write = after.write
        changes = _changes(before, after)
        if write.by_controller and not changes:
            last = last_controller_change
            if last and last.replica != write.replica and write.received - last.time < window:
                found.append(
                    ctx.violation(
                        "I3",
                        write.received,
                        f"node {history.name}",
                        f"{write.replica} wrote a change-less {write.verb} "
                        f"{write.received - last.time:.1f}s after {last.replica} changed the node",
                    )
                )
        elif write.by_controller:
            swap = _is_swap(changes)
            for key, (old, new) in changes.items():
                previous = last_change.get(key)
                if (
                    previous is None
                    or not previous.by_controller
                    or previous.replica == write.replica
                    or write.received - previous.time >= window
                    or outside_condition_change > previous.time
                    or (swap and key[1:] in LIFECYCLE_IDS)
                    or (previous.before, previous.after) != (new, old)
                ):
                    continue
                found.append(
                    ctx.violation(
                        "I3",
                        write.received,
                        f"node {history.name}",
                        f"{write.replica} reverted {':'.join(key[1:])} {old}->{new} "
                        f"{write.received - previous.time:.1f}s after {previous.replica} "
                        f"made it {new}->{old}",
                    )
                )
                break
        for key, (old, new) in changes.items():
            last_change[key] = _Change(after.time, write.by_controller, write.replica, old, new)
        if changes and write.by_controller:
            last_controller_change = _Change(after.time, True, write.replica, "", "")
        if not write.by_controller and any(key[0] == "condition" for key in changes):
            outside_condition_change = after.time
    return found


def deleted_by_two_actors(ctx: Context) -> list[Violation]:
    """A pod the controller removed that a second actor, one the run does not expect, removed too (before or
    after): two deciders for one pod."""
    found: list[Violation] = []
    for pod in ctx.timeline.pods.values():
        deciders = [
            removal
            for removal in pod.removals
            if removal.succeeded
            and (removal.write.by_controller or not ctx.config.may_remove_pods(removal.write.username))
        ]
        if not any(removal.write.by_controller for removal in deciders):
            continue
        first = deciders[0]
        for again in deciders[1:]:
            if again.write.username != first.write.username and not (
                again.write.by_controller and first.write.by_controller
            ):
                found.append(
                    ctx.violation(
                        "I3",
                        again.write.received,
                        pod.label,
                        f"removed again by {again.write.username} {again.write.received - first.write.received:.1f}s "
                        f"after {first.write.username} removed it",
                    )
                )
    return found


def never_twice(ctx: Context) -> list[Violation]:
    found = [*deleted_twice(ctx), *deleted_by_two_actors(ctx)]
    for history in ctx.timeline.nodes.values():
        found += _node_races(ctx, history)
    return found


# --- I4 one actor -----------------------------------------------------------------------------


def _acting(record: AuditRecord) -> bool:
    """A write that acts on a pod or node; an Event counts when it is about a pod ("Marking for deletion",
    a deletion): a replica that may not act may not say it does."""
    if not (record.is_write and record.subresource in ACTING.get(record.resource, ())):
        return False
    if record.resource != "events":
        return True
    request = record.request_object or {}
    about = request.get("involvedObject") or request.get("regarding") or {}
    return about.get("kind") == "Pod"


def _same_term(stamped: str, acquired: str) -> bool:
    """Whether a write's term (as its user agent names it) is the Lease's acquireTime (as the apiserver stored it)."""
    if stamped == acquired:
        return True
    try:
        return parse_timestamp(stamped) == parse_timestamp(acquired)
    except ValueError:
        return False


def one_actor(ctx: Context) -> list[Violation]:
    if ctx.config.lease is None:
        return []
    found: list[Violation] = []
    renewals: dict[str, list[float]] = defaultdict(list)  # replica -> its successful Lease writes (received)
    for write in ctx.timeline.lease_writes:
        if write.holder:
            renewals[replica_of_holder(write.holder)].append(write.write.received)
    for times in renewals.values():
        times.sort()
    for record in ctx.timeline.records:
        if not (_acting(record) and record.succeeded and ctx.config.is_controller(record.username)):
            continue
        replica = replica_of_agent(record.user_agent)
        lease = ctx.timeline.holder_before(record.received)
        holder = lease.holder if lease else ""
        target = "/".join(part for part in (record.resource, record.subresource) if part)
        if replica_of_holder(holder) != replica or not holder:
            found.append(
                ctx.violation(
                    "I4",
                    record.received,
                    f"replica {replica}",
                    f"{record.verb} {target} {record.namespace}/{record.name} while the Lease "
                    f"named {holder or 'no holder'}",
                )
            )
            continue
        # Terms, not replicas: a write made for a term (its user agent names the acquireTime) is that term's,
        # and an old term's write after a new one began is a violation even when the same replica leads again.
        term = term_of_agent(record.user_agent)
        if term is not None and lease is not None and not _same_term(term, lease.acquired):
            found.append(
                ctx.violation(
                    "I4",
                    record.received,
                    f"replica {replica}",
                    f"{record.verb} {target} {record.namespace}/{record.name} for its term acquired at {term}, "
                    f"after its term acquired at {lease.acquired or 'an unknown time'} began",
                )
            )
            continue
        # The fence: a replica writes only within the renew deadline of its own last renewal (the audit log
        # sees the renewal's PUT, later than the attempt the replica counts from: 1 s for the difference).
        renewed = renewals.get(replica, [])
        index = bisect.bisect_right(renewed, record.received) - 1
        age = record.received - renewed[index] if index >= 0 else math.inf
        if age > ctx.slack.renew_deadline + ctx.slack.early:
            found.append(
                ctx.violation(
                    "I4",
                    record.received,
                    f"replica {replica}",
                    f"{record.verb} {target} {record.namespace}/{record.name} {age:.1f}s after "
                    f"its last lease renewal (renew deadline {ctx.slack.renew_deadline:g}s)",
                )
            )
    return found


def _taint_changes(ctx: Context) -> Iterator[tuple[NodeHistory, NodeState]]:
    """Each node state whose write changed the node's taints. A status write cannot change taints: a difference
    it shows is a write the log lost, attributed to no one."""
    for history in ctx.timeline.nodes.values():
        for before, after in history.pairs():
            if after.write.subresource != "status" and after.taint_ids != before.taint_ids:
                yield history, after


def unexpected_actors(ctx: Context) -> list[Violation]:
    """What the controller does, done by an identity the run does not expect (`SoakConfig.may_remove_pods`,
    `may_write_pod_status`, `may_taint_nodes`): a pod removed, a pod's status written, a node's taints
    changed. Each is reported: another controller acting beside this one, or a replica acting as someone else."""
    config = ctx.config
    found: list[Violation] = []
    for pod in ctx.timeline.pods.values():
        for removal in pod.removals:
            if removal.succeeded and not config.may_remove_pods(removal.write.username):
                how = "evicted" if removal.eviction else "deleted"
                found.append(
                    ctx.violation(
                        "I4",
                        removal.write.received,
                        pod.label,
                        f"{how} by {removal.write.username}, not the controller",
                    )
                )
        for state in pod.states:
            if state.write.subresource == "status" and not config.may_write_pod_status(state.write.username):
                found.append(ctx.violation("I4", state.time, pod.label, f"status written by {state.write.username}"))
    for history, after in _taint_changes(ctx):
        if not config.may_taint_nodes(after.write.username):
            found.append(
                ctx.violation(
                    "I4", after.write.received, f"node {history.name}", f"taints changed by {after.write.username}"
                )
            )
    return found


def _identity(username: str) -> str:
    return "kubelets" if username.startswith(KUBELET_PREFIX) else username


def actors_seen(ctx: Context) -> dict[str, dict[str, int]]:
    """Who removed pods and who changed nodes' taints in the window, every identity, with the counts."""
    removed: Counter[str] = Counter(
        _identity(removal.write.username)
        for pod in ctx.timeline.pods.values()
        for removal in pod.removals
        if removal.succeeded and ctx.in_window(removal.write.received)
    )
    tainted: Counter[str] = Counter(
        _identity(after.write.username) for _, after in _taint_changes(ctx) if ctx.in_window(after.write.received)
    )
    return {"pods removed": dict(removed.most_common()), "node taints changed": dict(tainted.most_common())}


# --- I5 healthy stays healthy -----------------------------------------------------------------


def healthy_stays_healthy(ctx: Context) -> list[Violation]:
    found: list[Violation] = []
    for history in ctx.timeline.nodes.values():
        for before, after in history.pairs():
            write = after.write
            if not write.by_controller:
                continue
            added = sorted(key for key, effect in after.taint_ids - before.taint_ids if (key, effect) in LIFECYCLE_IDS)
            unknown = after.ready == "Unknown" and before.ready != "Unknown"
            if (added or unknown) and ctx.healthy(history.name, write.received):
                what = ", ".join([*(["Ready=Unknown"] if unknown else []), *(f"{key}:NoExecute" for key in added)])
                found.append(
                    ctx.violation(
                        "I5",
                        write.received,
                        f"node {history.name}",
                        f"{write.replica} set {what} on a node heartbeating with no kubelet fault",
                    )
                )
    for pod in ctx.timeline.pods.values():
        for removal in pod.controller_removals():
            moment = removal.write.received
            if not removal.succeeded or not pod.node or not ctx.healthy(pod.node, moment):
                continue
            states = ctx.node_taints_around(pod, moment)
            if not any(taint_id(held.taint) not in LIFECYCLE_IDS for state in states for held in state):
                found.append(
                    ctx.violation(
                        "I5",
                        moment,
                        pod.label,
                        f"deleted by {removal.write.replica} from healthy node {pod.node}, "
                        "which held no NoExecute taint but the lifecycle ones",
                    )
                )
    return found


# --- I6 admission -----------------------------------------------------------------------------


def _ready_since(pod: PodHistory, moment: float) -> float | None:
    """When the unbroken run of Ready states that holds at `moment` began (None: not Ready then)."""
    since = None
    for state in pod.current:
        if state.time > moment:
            break
        ready = state.ready == "True" and state.deletion_timestamp is None
        since = (since if since is not None else state.time) if ready else None
    return since


def _reachable_since(ctx: Context, pod: PodHistory, moment: float) -> float | None:
    """When the webhook pod last became reachable: Ready, and re-reported by its kubelet after any
    power-off of its node (the API shows a powered-off node's pods Ready until the node is marked)."""
    since = _ready_since(pod, moment)
    for fault in ctx.faults:
        if since is None:
            return None
        if fault.kind != "power-off" or fault.target != pod.node or fault.start > moment or fault.until <= since:
            continue
        if fault.until >= moment:
            return None
        since = next((state.time for state in pod.current if fault.until <= state.time <= moment), None)
    return since


def _ready_webhook_pods(ctx: Context, moment: float) -> list[str]:
    """The webhook pods kube-apiserver could have called at `moment`: reachable, and published in
    their Service's endpoints since (kube-proxy routes only to those) for the slack kube-proxy needs."""
    if ctx.config.webhook is None:
        return []
    namespace, prefix = ctx.config.webhook
    ready = []
    for pod in ctx.timeline.pods_named(namespace, prefix):
        since = _reachable_since(ctx, pod, moment)
        published = None if since is None else ctx.timeline.endpoints_published(namespace, prefix, since)
        if published is not None and published + ctx.slack.webhook_ready <= moment:
            ready.append(pod.name)
    return ready


def _backfilled_by(ctx: Context, pod: PodHistory, limit: float) -> bool:
    for state in pod.current:
        write = state.write
        if (
            state.time <= limit
            and write.by_controller
            and write.verb in ("update", "patch")
            and not write.subresource
            and has_default_tolerations(state.tolerations)
        ):
            return True
    termination = pod.termination()
    return termination is not None and termination[0] <= limit


def _webhook_taken(ctx: Context, moment: float) -> bool:
    """A fault accounts for the webhook not answering at `moment`: a fault on the node of a webhook pod bound
    there (until `pods_back_by`: its container restarted, or the pod evicted and replaced); a webhook pod
    deleted, or a store fault, until its end plus `Slack.webhook_outage` (a new pod starts at once; a
    running one is only cut off)."""
    if ctx.config.webhook is None:
        return False
    namespace, prefix = ctx.config.webhook
    pods = ctx.timeline.pods_named(namespace, prefix)
    for fault in ctx.faults:
        if fault.kind in WEBHOOK_FAULTS or fault.kind in STORE_KINDS:
            if fault.start <= moment <= fault.until + ctx.slack.webhook_outage:
                return True
        elif (
            fault.kind in NODE_FAULTS
            and fault.start <= moment <= pods_back_by(fault, ctx.slack)
            and any(pod.node == fault.target and (pod.bound_at or math.inf) <= fault.until for pod in pods)
        ):
            return True
    return False


def _outage_young(ctx: Context, record: AuditRecord, failing_since: float | None) -> bool:
    """The webhook's outage at this creation began within `Slack.webhook_outage`: the calls have failed open
    only since then (1.37 says so on each), or a webhook pod could be called then (sampled each second)."""
    outage = ctx.slack.webhook_outage
    if record.failed_open and failing_since is not None:
        return record.received - failing_since <= outage
    return any(_ready_webhook_pods(ctx, record.received - back) for back in range(1, math.ceil(outage) + 1))


def admission_registration_kept(ctx: Context) -> list[Violation]:
    """The objects registering the admission, changed or deleted by anyone but taintkeeper itself (its
    certificate rotation writes the webhook's caBundle): creating them is the install (answered 201)."""
    found: list[Violation] = []
    registered = set(ctx.config.admission_registration)
    for record in ctx.timeline.records:
        if (record.resource, record.name) not in registered or record.verb not in ("update", "patch", "delete"):
            continue
        if record.succeeded and record.code != 201 and not record.username.startswith(TAINTKEEPER_ACCOUNTS):
            how = "deleted" if record.verb == "delete" else "changed"
            found.append(
                ctx.violation("I6", record.received, f"{record.resource}/{record.name}", f"{how} by {record.username}")
            )
    return found


def admission(ctx: Context) -> list[Violation]:
    found = admission_registration_kept(ctx)
    failing_since: float | None = None  # the first of an unbroken run of creations the webhook failed open on
    for record in ctx.timeline.records:
        if (record.resource, record.subresource, record.verb) != ("pods", "", "create"):
            continue
        if record.namespace not in ctx.config.workload_namespaces:
            continue
        if record.code == 201:
            failing_since = (failing_since or record.received) if record.failed_open else None
        subject = f"pod {record.namespace}/{record.name or '(generated)'}"
        if record.code >= 400 and WEBHOOK_FAILURE.search(record.message):
            found.append(
                ctx.violation(
                    "I6", record.received, subject, f"creation refused ({record.code}): {record.message[:160]}"
                )
            )
            continue
        obj = record.response_object or {}
        metadata = obj.get("metadata") or {}
        uid = str(metadata.get("uid") or "")
        if record.code != 201 or uid not in ctx.timeline.pods:
            continue
        pod = ctx.timeline.pods[uid]
        if (metadata.get("labels") or {}).get(SKIP_LABEL) == "true":
            continue
        if has_default_tolerations((obj.get("spec") or {}).get("tolerations") or []):
            continue
        if ctx.config.webhook is None:
            found.append(
                ctx.violation(
                    "I6",
                    record.received,
                    pod.label,
                    f"created without the default tolerations ({ctx.config.in_process_admission})",
                )
            )
            continue
        # The apiserver says (1.37+) that the call failed and was ignored: no webhook pod could be reached
        # (one on a powered-off node still in the endpoints, say), whatever the pods' Ready says: the
        # backfill's turn. Without it (1.20) the callable pods are inferred from their states.
        ready = [] if record.failed_open else _ready_webhook_pods(ctx, record.received)
        if ready:
            found.append(
                ctx.violation(
                    "I6",
                    record.received,
                    pod.label,
                    f"admitted without the default tolerations while webhook pod {ready[0]} was Ready",
                )
            )
            continue
        if not (_webhook_taken(ctx, record.received) or _outage_young(ctx, record, failing_since)):
            how = "the webhook failed open" if record.failed_open else "no webhook pod could be called"
            found.append(
                ctx.violation(
                    "I6",
                    record.received,
                    pod.label,
                    f"admitted without the default tolerations: {how} for over {ctx.slack.webhook_outage:g}s "
                    "and no fault accounts for it",
                )
            )
            continue
        backfill = ctx.slack.backfill
        limit = resume_time(record.completed, ctx.outages, backfill) + backfill
        if _backfilled_by(ctx, pod, limit) or not ctx.judgeable(pod.label, record.received, record.completed, limit):
            continue
        found.append(
            ctx.violation(
                "I6",
                record.received,
                pod.label,
                f"admitted without the default tolerations (no webhook pod Ready) and not backfilled by {clock(limit)}",
            )
        )
    return found


# --- I7 nothing lost --------------------------------------------------------------------------


def nothing_lost(ctx: Context) -> tuple[list[Violation], int | None]:
    """Controller pods that went into CrashLoopBackOff, and the most restarts any container had."""
    found: list[Violation] = []
    most: int | None = None
    namespace, prefix = ctx.config.controller_pods
    for pod in ctx.timeline.pods_named(namespace, prefix):
        crashed = False
        killed = [fault.start for fault in ctx.faults if fault.kind in LEADER_KINDS and fault.target == pod.name]
        for state in pod.current:
            for status in state.container_statuses:
                most = max(most or 0, int(status.get("restartCount") or 0))
                reason = ((status.get("state") or {}).get("waiting") or {}).get("reason")
                if any(0 <= state.time - start <= ctx.slack.restart_backoff for start in killed):
                    continue  # the kubelet's back-off after the soak's own kill, not a crash loop
                if reason == "CrashLoopBackOff" and not crashed:
                    crashed = True
                    found.append(
                        ctx.violation(
                            "I7",
                            state.time,
                            pod.label,
                            f"container {status.get('name')} in CrashLoopBackOff after "
                            f"{status.get('restartCount', 0)} restarts",
                        )
                    )
    return found, most


# --- I10 some replica leads -----------------------------------------------------------------------


def some_replica_leads(ctx: Context) -> list[Violation]:
    """While the apiserver answers and a replica can lead (Ready, unpaused), or none can by no fault's doing
    (scaled to 0, or past what a fault excuses), some replica holds the Lease within the hand-over bound; each
    stretch that went past it is one violation, with the faults around it."""
    found: list[Violation] = []
    for stretch in ctx.leadership.stretches:
        if not stretch.beyond_bound:
            continue
        past = sum(end - start for start, end in stretch.beyond_bound)
        absent = sum(end - start for start, end in stretch.unexplained_absence)
        absence = f", {absent:.1f}s of the stretch with no replica there to lead" if absent else ""
        until = "the log's end" if stretch.still_open else clock(stretch.end)
        around = tuple(
            fault.id for fault in ctx.faults if fault.intersects(stretch.start - ctx.slack.lease_duration, stretch.end)
        )
        found.append(
            Violation(
                "I10",
                stretch.beyond_bound[0][0],
                "the controller Lease",
                f"no replica led from {clock(stretch.start)} to {until} ({stretch.seconds:.1f}s); "
                f"{past:.1f}s of it no fault's doing past the {ctx.leadership.bound:g}s a hand-over takes"
                f"{absence}",
                around,
            )
        )
    return found


# --- I8 budgets respected -----------------------------------------------------------------------


def budgets_respected(ctx: Context) -> list[Violation]:
    """A pod that respects its disruption budget leaves a node tainted by anything but a failure or a
    fence only through an Eviction (which the apiserver refuses while the budget allows none), never a
    DELETE."""
    found: list[Violation] = []
    for pod in ctx.timeline.pods.values():
        if pod.namespace not in ctx.config.budgeted_namespaces:
            continue
        for removal in pod.controller_removals():
            if not removal.succeeded or removal.eviction:
                continue
            moment = removal.write.received
            tolerations = pod.tolerations_at(removal.write.completed)
            floor = pod.bound_from if pod.bound_from is not None else -math.inf
            deadlines: dict[str, float] = {}
            for held in (held for state in ctx.node_taints_around(pod, moment) for held in state):
                key = str(held.taint.get("key"))
                deadline = max(held.episode_start, floor) + grace_seconds(tolerations, held.taint)
                deadlines[key] = min(deadline, deadlines.get(key, math.inf))
            due = {key for key, deadline in deadlines.items() if deadline <= moment + ctx.slack.early}
            if due & NEVER_BUDGETED:
                continue
            timeout = ctx.config.budget_timeouts.get(pod.namespace)
            if due and timeout is not None and all(deadlines[key] + timeout <= moment + ctx.slack.early for key in due):
                continue  # the budget timeout ran out: a DELETE, as upstream's
            found.append(
                ctx.violation(
                    "I8",
                    moment,
                    pod.label,
                    f"deleted by {removal.write.replica} on {pod.node} under "
                    f"{', '.join(sorted(due)) or 'no due taint'} with a DELETE: it respects its "
                    "disruption budget, so only an Eviction may remove it",
                )
            )
    return found


# --- I9 force only when fenced -------------------------------------------------------------------


def force_only_when_fenced(ctx: Context) -> list[Violation]:
    """A force deletion (grace period 0) only of a pod on a node that carries the out-of-service taint
    while not Ready, and only if the pod does not tolerate that taint or was terminating already."""
    found: list[Violation] = []
    for pod in ctx.timeline.pods.values():
        for removal in pod.controller_removals():
            if not (removal.succeeded and removal.force):
                continue
            moment = removal.write.received
            if not ctx.fenced(pod.node, moment):
                found.append(
                    ctx.violation(
                        "I9",
                        moment,
                        pod.label,
                        f"force-deleted by {removal.write.replica} on {pod.node}, which did not "
                        "carry the out-of-service taint while not Ready",
                    )
                )
                continue
            terminating = any(r.succeeded and r.write.received < moment for r in pod.removals) or any(
                state.deletion_timestamp is not None and state.time <= moment for state in pod.current
            )
            fence = {"key": OUT_OF_SERVICE, "effect": NO_EXECUTE}
            if not terminating and any(tolerates(toleration, fence) for toleration in pod.tolerations_at(moment)):
                found.append(
                    ctx.violation(
                        "I9",
                        moment,
                        pod.label,
                        f"force-deleted by {removal.write.replica} on {pod.node}, though it "
                        "tolerates the out-of-service taint and was not terminating",
                    )
                )
    return found


# --- I11 pods of a node not Ready marked NotReady ----------------------------------------------

# Seconds from a node's Ready condition turning not True to its pods' Ready=False: the monitor period
# (5 s by default) and the pods' status writes.
MARK_ALLOWANCE = 10.0


def _not_ready_spans(history: NodeHistory) -> list[tuple[float, float | None]]:
    """When the node's Ready condition was written not True after having been True, until it was True
    again (None: to the log's end). A node that never was Ready (registering) has no span."""
    spans: list[tuple[float, float | None]] = []
    start: float | None = None
    was_ready = False
    for state in history.current:
        if state.ready == "True":
            if start is not None:
                spans.append((start, state.time))
            start, was_ready = None, True
        elif was_ready and start is None:
            start = state.time
    if start is not None:
        spans.append((start, None))
    return spans


def pods_marked_not_ready(ctx: Context) -> list[Violation]:
    """I11: a pod Ready on a node whose Ready condition is not True (False from its kubelet, a runtime
    that failed while the kubelet kept its Lease; Unknown from the controller, in whatever order) is
    marked Ready=False within MARK_ALLOWANCE (counted from the controller's return after an outage),
    unless the node is Ready again, or the pod terminating, first (kubernetes#112733, #125618: upstream
    marks only on a transition from True; taintkeeper's promise)."""
    found: list[Violation] = []
    pods_by_node: dict[str, list[PodHistory]] = defaultdict(list)
    for pod in ctx.timeline.pods.values():
        if pod.node:
            pods_by_node[pod.node].append(pod)
    for name, history in ctx.timeline.nodes.items():
        for start, end in _not_ready_spans(history):
            due = start + MARK_ALLOWANCE
            resumed = resume_time(due, ctx.outages, ctx.slack.late)
            # After an outage the returning controller owes the marking within the whole allowance, as
            # after a transition: its first monitor pass may come a period after it leads again.
            limit = due + ctx.slack.late if resumed == due else resumed + MARK_ALLOWANCE
            if end is not None and end < limit:
                continue  # Ready again before the marking was owed
            for pod in pods_by_node[name]:
                state = pod.state_at(start)
                if state is None or state.ready != "True" or state.deletion_timestamp is not None:
                    continue
                termination = pod.termination()
                if termination is not None and termination[0] <= limit:
                    continue
                if not ctx.judgeable(pod.label, start, due, limit):
                    continue
                if not any(start <= s.time <= limit and s.ready == "False" for s in pod.current):
                    ready = history.states_between(start, start)[-1].ready
                    found.append(
                        ctx.violation(
                            "I11",
                            due,
                            pod.label,
                            f"on node {name}, Ready {ready} since {clock(start)}; still Ready at {clock(limit)}",
                        )
                    )
    return found


# --- I12 a stale node-failure taint evicts nothing --------------------------------------------


def stale_taints_evict_nothing(ctx: Context) -> list[Violation]:
    """A pod deleted from a node that reported Ready=True in every state its deleter could have read
    (the late slack before the DELETE arrived), when only a not-ready or unreachable taint was due."""
    found: list[Violation] = []
    for pod in ctx.timeline.pods.values():
        history = ctx.timeline.nodes.get(pod.node)
        if history is None:
            continue
        for removal in pod.controller_removals():
            if not removal.succeeded or removal.force:
                continue
            moment = removal.write.received
            if any(state.ready != "True" for state in history.states_between(moment - ctx.slack.late, moment)):
                continue
            held = [h for state in ctx.node_taints_around(pod, moment) for h in state]
            tolerations = pod.tolerations_at(removal.write.completed)
            other_due = min(
                (_held_due(pod, h, tolerations) for h in held if taint_id(h.taint) not in LIFECYCLE_IDS),
                default=math.inf,
            )
            if other_due <= moment + ctx.slack.early or not any(taint_id(h.taint) in LIFECYCLE_IDS for h in held):
                continue  # another taint was due, or no cause at all (I1 says so)
            found.append(
                ctx.violation(
                    "I12",
                    moment,
                    pod.label,
                    f"deleted by {removal.write.replica} from {pod.node}, Ready=True, under only a stale "
                    "node-failure taint",
                )
            )
    return found


def check_all(ctx: Context) -> Findings:
    late, checked = never_late(ctx)
    lost, most = nothing_lost(ctx)
    late += dead_nodes_tainted(ctx)
    violations = [
        *never_early(ctx),
        *late,
        *never_twice(ctx),
        *one_actor(ctx),
        *unexpected_actors(ctx),
        *healthy_stays_healthy(ctx),
        *admission(ctx),
        *lost,
        *budgets_respected(ctx),
        *force_only_when_fenced(ctx),
        *some_replica_leads(ctx),
        *pods_marked_not_ready(ctx),
        *stale_taints_evict_nothing(ctx),
    ]
    violations = sorted((v for v in violations if ctx.in_window(v.time)), key=lambda v: (v.time, v.invariant))
    beside = [v for v in violations if v.invariant in ctx.config.not_applicable]
    violations = [v for v in violations if v.invariant not in ctx.config.not_applicable]
    return Findings(
        violations,
        [check for check in checked if ctx.in_window(check.window_end)],
        most,
        [stretch for stretch in ctx.leadership.stretches if ctx.in_window(stretch.start)],
        sorted((u for u in ctx.unjudged if ctx.in_window(u.began)), key=lambda u: u.limit),
        beside,
        actors_seen(ctx),
    )
