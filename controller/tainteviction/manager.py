"""The taint eviction manager: which pods to delete when, and deleting them on time.

Pipeline (each step named): informer handlers call `on_node_change` / `on_pod_change` ->
`_reconcile_pod` decides (verdict.py, the one rule `status` and `explain` report too) and schedules the
pod in the timer heap -> the timer loop's `step` (controller/worker.py `run_loop`) moves due pods into the
work queue -> a worker (`run_worker`) -> `sync` re-reads the node live, re-checks the pod is still due,
then marks and deletes it (api.py), or, for a pod that respects its disruption budget
(disruption_budget.py), creates an Eviction, which the budget may refuse.
What the manager remembers is one object, state.py's `EvictionState`, whose methods keep its invariants;
every call to it is made under the manager's lock.
One actor per pod: when the out-of-service handling runs in this process, a pod it owns on the live
node (controller/outofservice/decision.py `out_of_service_claim`: the node is out of service and the
pod does not tolerate the taint) is left to it and dropped from the schedule, whatever taint made it
due; it comes back through the informers if the node stops being out of service.
A failed deletion is retried with capped exponential backoff until it succeeds or is no longer wanted;
a refused Eviction every 5 s, until its budget allows it or its ceiling passes (then it is deleted).
Only the leader acts: while inactive, state is kept (a warm stand-by) but nothing fires.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from controller.clock import Clock, RealClock
from controller.objects import NamespaceView, NodeView, PodView
from controller.outofservice.decision import NodeState, node_state
from controller.tainteviction import metrics
from controller.tainteviction.decision import EvictionDecision, due_taints, evicting_taints
from controller.tainteviction.disruption_budget import BudgetSettings, Choice, Method, choose_method
from controller.tainteviction.state import EvictionState, ScheduledEviction
from controller.tainteviction.verdict import EvictionRule, Pending, PodVerdict, decide, pod_verdict
from controller.worker import (
    IDLE_WAIT,
    After,
    Done,
    Heartbeat,
    Retry,
    SyncResult,
    TermSource,
    Wakeup,
    heartbeat_bound,
    no_term,
    start_loop,
    start_workers,
)
from controller.workqueue import WorkQueue
from kube.events import EventSink
from kube.fence import WriteFenced
from kube.store import StoreReader
from kube.timestamps import format_time
from shared.taints import Taint

if TYPE_CHECKING:
    from controller.informers import SharedInformers
    from kube.informer import Informer

log = logging.getLogger("taintkeeper.eviction")

EVENT_REASON = "TaintManagerEviction"
WAITING_REASON = "WaitingForDisruptionBudget"  # an Eviction was refused (429): retried
BUDGET_TIMEOUT_REASON = "DisruptionBudgetTimeout"  # refused past the ceiling: deleted instead
# A refused Eviction is asked again this often (kubectl drain's pace on 429): a refusal is cheap for the
# apiserver, and a budget that frees up is used within seconds, not after a grown backoff.
BUDGET_RETRY_SECONDS = 5.0
DEFAULT_WORKERS = 8  # concurrent pod deletions (--taint-eviction-workers)


class BudgetRefused(Exception):
    """The pod's disruption budget refused its Eviction (429); the message says why."""


class EvictionActions(Protocol):
    """The API calls an eviction needs (api.py)."""

    def live_node(self, node_name: str) -> NodeView | None:
        """The node read from the API now (not a cache): its NoExecute taints decide again, its taints and
        Ready condition say whether the out-of-service handling owns the pod. None if the node is gone."""

    def evict(self, pod: PodView) -> Literal[True] | None:
        """Set DisruptionTarget and delete the pod; None if it was gone or replaced; raise on failure."""

    def request_eviction(self, pod: PodView) -> Literal[True] | None:
        """Create an Eviction (then set DisruptionTarget); True once admitted, None if the pod was gone or
        replaced; raise BudgetRefused when its disruption budget refuses it, another exception on failure."""


class TaintEvictionManager:
    def __init__(
        self,
        pods: StoreReader[PodView],
        actions: EvictionActions,
        events: EventSink,
        *,
        clock: Clock | None = None,
        dry_run: bool = False,
        queue: WorkQueue | None = None,
        workers: int = DEFAULT_WORKERS,
        namespaces: StoreReader[NamespaceView] | None = None,
        budgets: BudgetSettings | None = None,
        comparison_operators: bool = False,
        defer_to_out_of_service: bool = False,
        term: TermSource = no_term,
    ) -> None:
        self._pods = pods
        # The out-of-service handling runs in this process: the pods it force deletes are its alone
        # (verdict.py). Without it (--controllers=-out-of-service) every due pod is deleted here, as
        # upstream's taint eviction controller does, and PodGC force deletes the terminating ones.
        self.rule = EvictionRule(comparison_operators, defer_to_out_of_service)
        self._namespaces = namespaces
        self._budgets = budgets or BudgetSettings()
        self._workers = workers
        self._actions = actions
        self._events = events
        self._clock = clock or RealClock()
        self._lease_term = term  # the term each unit of work acts for (kube/acting_term.py)
        self._dry_run = dry_run
        self.queue = queue or WorkQueue(self._clock)
        self._lock = threading.RLock()
        self.state = EvictionState()  # read and changed only under _lock
        self.wakeup = Wakeup(self._clock)  # a new deadline for the timer loop
        self._active = False
        # A sync makes at most four requests: the live node, then the Eviction (the first asks which policy
        # version the server serves) and the DisruptionTarget patch, or the patch and the DELETE.
        self.heartbeat = Heartbeat(self._clock, heartbeat_bound(4), "taint eviction manager")
        # The timer loop's steps make no request, but wait for the manager's lock, which a new leader's resync
        # holds over every pod on a tainted node: the workers' bound.
        self.timers_heartbeat = Heartbeat(self._clock, heartbeat_bound(4), "taint eviction manager", thread_kind="loop")

    # --- leadership ------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self._active

    def activate(self) -> None:
        """Start acting (this replica leads): recompute every pod on a tainted node, fire what is due."""
        with self._lock:
            self._active = True
            self._resync_locked()
        self.wakeup.notify()
        log.info("taint eviction manager active")

    def deactivate(self) -> None:
        """Stop acting at once; in-flight API calls finish, nothing new starts."""
        with self._lock:
            self._active = False
        log.info("taint eviction manager inactive")

    # --- informer handlers ----------------------------------------------------------------

    def on_node_change(self, old: NodeView | None, new: NodeView | None) -> None:
        name = (new or old).name  # type: ignore[union-attr]
        with self._lock:
            now = self._clock.now()
            if new is None:
                self.state.forget_node(name)
            else:
                out_of_service = node_state(new) is NodeState.OUT_OF_SERVICE
                taints_changed, service_changed = self.state.update_node(
                    name, evicting_taints(new), new.no_execute_taints, out_of_service, now
                )
                # A node Ready again under the out-of-service taint changes no taint, but gives its pods back.
                if not taints_changed and not (self.rule.defer_to_out_of_service and service_changed):
                    return
            for pod in self._pods.by_index(name):
                self._reconcile_pod_locked(pod, now)
            self._publish_locked()

    def on_pod_change(self, old: PodView | None, new: PodView | None) -> None:
        with self._lock:
            if new is None:
                if old is not None:
                    self.state.pod_deleted(old.key)
            else:
                if old is not None and old.uid != new.uid:
                    self.state.unschedule(old.key)
                self._reconcile_pod_locked(new, self._clock.now())
            self._publish_locked()

    # --- deciding -------------------------------------------------------------------------

    def decide(self, pod: PodView, taints: Sequence[Taint], now: float) -> EvictionDecision:
        """The decision for `pod` under `taints` (verdict.py), with this manager's first-seen times and the
        start of the pod's pending eviction (kept across a not-ready <-> unreachable swap)."""
        with self._lock:
            first_seen = self.state.first_seen_on(pod.node_name, now)
            return decide(pod, taints, first_seen, now, self.rule, self._pending(pod))

    def _pending(self, pod: PodView) -> Pending | None:
        entry = self.state.scheduled(pod.key)
        return Pending(entry.taint, entry.started) if entry is not None and entry.uid == pod.uid else None

    def method(self, pod: PodView, decision: EvictionDecision, taints: Sequence[Taint], now: float) -> Choice:
        """How to act on a due pod: delete it, or evict it through its disruption budget (disruption_budget.py)."""
        with self._lock:
            first_seen = self.state.first_seen_on(pod.node_name, now)
        due = due_taints(pod.tolerations, taints, first_seen, pod.arrived, now)
        if decision.taint is not None:
            due.append(decision.taint)
        namespace = self._namespaces.get(pod.namespace) if self._namespaces is not None else None
        return choose_method(
            due,
            pod.annotation_map,
            namespace.annotation_map if namespace is not None else {},
            self._budgets,
            decision.due_since if decision.due_since is not None else now,
            now,
        )

    def scheduled_at(self, key: str) -> float | None:
        with self._lock:
            entry = self.state.scheduled(key)
            return entry.at if entry else None

    def pending(self) -> int:
        with self._lock:
            return self.state.pending()

    def _reconcile_pod_locked(self, pod: PodView, now: float) -> None:
        key = pod.key
        if pod.terminating or not pod.node_name:
            self.state.unschedule(key)
            return
        if self.state.is_deleted_or_deleting(key, pod.uid):
            return  # never twice
        decision = self.decide(pod, self.state.taints_of(pod.node_name), now)
        if decision.at is None:
            self._cancel_locked(pod)
        elif self.state.schedule(key, pod.uid, pod.node_name, decision):
            self.wakeup.notify()

    def _cancel_locked(self, pod: PodView) -> None:
        """The pod is no longer due: drop its eviction and say so if one was scheduled."""
        if not self.state.unschedule(pod.key):
            return
        if self._active:
            self._events.pod_event(pod, EVENT_REASON, f"Cancelling deletion of Pod {pod.key}")
        log.info("cancelled eviction", extra={"pod": pod.key})

    def _publish_locked(self) -> None:
        """The gauges of what the state holds, after each change."""
        metrics.PENDING_EVICTIONS.set(self.state.pending())
        metrics.WAITING_FOR_BUDGET.set(self.state.waiting())

    def _resync_locked(self) -> None:
        now = self._clock.now()
        for node_name in self.state.tainted_nodes():
            for pod in self._pods.by_index(node_name):
                self._reconcile_pod_locked(pod, now)
        self.state.rearm_fired()
        self._publish_locked()

    # --- firing ---------------------------------------------------------------------------

    def fire_due(self) -> list[str]:
        """Move every pod whose deadline has come into the work queue (only while active)."""
        with self._lock:
            if not self._active:
                return []
            due = self.state.pop_due(self._clock.now())
        for key in due:
            self.queue.add(key)
        return due

    def step(self) -> float:
        """The timer loop's step (controller/worker.py `run_loop`): fire what is due; the seconds until the
        earliest deadline (a new one wakes the loop sooner)."""
        self.fire_due()
        with self._lock:
            next_at = self.state.next_deadline() if self._active else None
            return IDLE_WAIT if next_at is None else max(0.0, next_at - self._clock.now())

    def sync(self, key: str) -> SyncResult:
        """Delete the pod `key` if it is still due, re-reading its node live first (the worker contract,
        controller/worker.py)."""
        with self._lock:
            entry = self.state.scheduled(key)
            pod = self._pods.get(key)
            if entry is None:
                return Done("not scheduled")
            if not self._active:
                return Done("inactive")
            if pod is None or pod.uid != entry.uid or pod.terminating:
                self.state.unschedule(key)
                self._publish_locked()
                return Done("gone")
        try:
            live = self._actions.live_node(pod.node_name)
        except Exception as error:
            return Retry(f"reading node {pod.node_name}: {error}")
        with self._lock:
            if self.state.scheduled(key) is not entry or not self._active:
                return Done("changed")  # changed meanwhile; the newer state decides
            now = self._clock.now()
            first_seen = self.state.first_seen_on(pod.node_name, now)
            pending = Pending(entry.taint, entry.started)
            if live is None:  # the node is gone, and its taints with it
                verdict = PodVerdict(decide(pod, (), first_seen, now, self.rule, pending))
                live_taints: tuple[Taint, ...] = ()
            else:
                verdict = pod_verdict(pod, live, first_seen, now, self.rule, pending)
                live_taints = evicting_taints(live)
            decision = verdict.decision
            if verdict.left_because is not None:
                return self._leave_to_out_of_service_locked(pod, verdict.left_because)
            if decision.at is None:
                self._cancel_locked(pod)  # the cache was stale: the live node no longer calls for it
                self._publish_locked()
                return Done("cancelled")
            if decision.at > now:
                self.state.reschedule(key, entry, decision)
                self.wakeup.notify()
                return Done("rescheduled")
            choice = self.method(pod, decision, live_taints, now)
            method = choice.method
            first_attempt, was_refused = self.state.begin_deletion(key, entry)
            timed_out = method is Method.DELETE_AFTER_BUDGET_TIMEOUT and was_refused
            if method is not Method.EVICT:
                self.state.stop_waiting(key)
                self._publish_locked()
        if first_attempt:
            self._events.pod_event(pod, EVENT_REASON, f"Marking for deletion Pod {key}")
        if self._dry_run:
            log.info(
                "dry run: would %s pod",
                "evict" if method is Method.EVICT else "delete",
                extra={"pod": key, "node": pod.node_name, "reason": decision.reason},
            )
            self._finish(key, entry)
            return Done("dry-run")
        if method is Method.EVICT:
            return self._evict_through_budget(pod, entry, decision.due_since or now, choice)
        if method is Method.DELETE_AFTER_BUDGET_TIMEOUT and (timed_out or first_attempt):
            metrics.BUDGET_TIMEOUTS.inc()
            self._events.pod_event(
                pod,
                BUDGET_TIMEOUT_REASON,
                f"Disruption budget did not allow the eviction within {choice.timeout or 0:g}s "
                f"of its deadline; deleting Pod {key}",
                "Warning",
            )
        try:
            self._actions.evict(pod)
        except Exception as error:
            if not isinstance(error, WriteFenced):  # refused by the write fence: retried, but no API failure
                metrics.POD_DELETION_FAILURES.inc()
            with self._lock:
                self.state.deletion_failed(key)
            return Retry(f"deleting: {error}")
        metrics.POD_DELETIONS.inc()
        metrics.POD_DELETION_DURATION.observe(max(0.0, self._clock.now() - entry.at))
        log.info("deleted pod", extra={"pod": key, "node": pod.node_name, "reason": decision.reason})
        self._finish(key, entry)
        return Done("deleted")

    def _leave_to_out_of_service_locked(self, pod: PodView, why: str) -> SyncResult:
        """The live node is out of service and the pod is the out-of-service handling's: it force deletes
        it. Dropped from the schedule, not retried; the informers bring it back if the node stops being
        out of service (unfenced, or Ready again)."""
        self.state.unschedule(pod.key)
        self._publish_locked()
        log.info(
            "left pod to the out-of-service handling", extra={"pod": pod.key, "node": pod.node_name, "reason": why}
        )
        return Done("left to the out-of-service handling")

    def _evict_through_budget(
        self, pod: PodView, entry: ScheduledEviction, deadline: float, choice: Choice
    ) -> SyncResult:
        """Create an Eviction; refused by the budget, say so once and try again after a while, at the
        latest when the ceiling passes (`sync` then deletes)."""
        key = pod.key
        try:
            self._actions.request_eviction(pod)
        except BudgetRefused as refusal:
            return self._refused(pod, deadline, choice, str(refusal))
        except Exception as error:
            if not isinstance(error, WriteFenced):
                metrics.POD_DELETION_FAILURES.inc()
            with self._lock:
                self.state.deletion_failed(key)
            return Retry(f"evicting: {error}")
        metrics.POD_DELETIONS.inc()
        metrics.BUDGET_EVICTIONS.inc()
        metrics.POD_DELETION_DURATION.observe(max(0.0, self._clock.now() - entry.at))
        log.info("evicted pod through its disruption budget", extra={"pod": key, "node": pod.node_name})
        self._finish(key, entry)
        return Done("evicted")

    def _refused(self, pod: PodView, deadline: float, choice: Choice, refused: str) -> SyncResult:
        """The pod's disruption budget refused its Eviction: say so once, ask again in a while."""
        key = pod.key
        metrics.REFUSED_BY_BUDGET.inc()
        with self._lock:
            first_refusal = self.state.refused(key, pod.uid)
            self._publish_locked()
        timeout = choice.timeout
        if first_refusal:
            until = (
                f" until {format_time(deadline + timeout)}, then deleting it"
                if timeout is not None
                else " until the budget allows it"
            )
            also = f" (ignored: {choice.problem})" if choice.problem else ""
            self._events.pod_event(
                pod, WAITING_REASON, f"Eviction of Pod {key} refused: {refused}; retrying{until}{also}", "Warning"
            )
        delay = (
            BUDGET_RETRY_SECONDS
            if timeout is None
            else min(BUDGET_RETRY_SECONDS, deadline + timeout - self._clock.now())
        )
        log.info("eviction of %s refused by its disruption budget (%s); retrying in %.1fs", key, refused, delay)
        return After(delay, "refused by its disruption budget")

    def _finish(self, key: str, entry: ScheduledEviction) -> None:
        with self._lock:
            self.state.deleted(key, entry, still_cached=self._pods.get(key) is not None)
            self._publish_locked()

    # --- the component (controller/component.py) ----------------------------------------------

    def register(self, informers: SharedInformers) -> None:
        informers.nodes.add_handler(self.on_node_change)
        informers.pods.add_handler(self.on_pod_change)

    def caches(self, informers: SharedInformers) -> list[Informer[Any]]:
        return [informers.nodes, informers.pods, informers.namespaces]

    def start(self, stop: threading.Event) -> None:
        """The timer loop and the deletion workers."""
        start_loop(
            "eviction-timers",
            self.step,
            stop,
            wakeup=self.wakeup,
            what="eviction timers",
            log=log,
            heartbeat=self.timers_heartbeat,
            term=self._lease_term,
        )
        start_workers(
            "eviction-worker",
            self._workers,
            self.queue,
            self.sync,
            stop,
            what="eviction",
            log=log,
            heartbeat=self.heartbeat,
            term=self._lease_term,
        )

    def stop(self) -> None:
        self.queue.shut_down()

    def stuck(self) -> str | None:
        return self.timers_heartbeat.stuck() or self.heartbeat.stuck()
