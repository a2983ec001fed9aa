"""The taint eviction manager: which pods to delete when, and deleting them on time.

Pipeline (each step named): informer handlers call `on_node_change` / `on_pod_change` ->
`_reconcile_pod` decides (decision.py) and schedules the pod in the timer heap ->
`run_timers` moves due pods into the work queue -> a worker (controller/worker.py `run_worker`) ->
`sync` re-reads the node live, re-checks the pod is still due, then marks and deletes it (api.py), or,
for a pod that respects its disruption budget (disruption_budget.py), creates an Eviction, which the
budget may refuse.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from controller.clock import Clock, RealClock
from controller.objects import NamespaceView, NodeView, PodView
from controller.outofservice.decision import NodeState, node_state, out_of_service_claim
from controller.tainteviction import metrics
from controller.tainteviction.decision import (
    EvictionDecision,
    carry_swap_start,
    decide_eviction,
    due_taints,
    evicting_taints,
)
from controller.tainteviction.disruption_budget import BudgetSettings, Choice, Method, choose_method
from controller.tainteviction.timers import TimerHeap
from controller.worker import After, Done, Heartbeat, Retry, SyncResult, heartbeat_bound, start_workers
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


@dataclass
class ScheduledEviction:
    uid: str
    node_name: str
    at: float
    taint: Taint | None = None  # the taint whose toleration runs out, and since when it counts
    started: float | None = None


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
    ) -> None:
        self._pods = pods
        # The out-of-service handling runs in this process: the pods it force deletes are its alone
        # (out_of_service_claim). Without it (--controllers=-out-of-service) every due pod is deleted
        # here, as upstream's taint eviction controller does, and PodGC force deletes the terminating ones.
        self._defer_to_out_of_service = defer_to_out_of_service
        self._out_of_service: set[str] = set()  # nodes out of service, as the node informer last said
        self._comparison_operators = comparison_operators
        self._namespaces = namespaces
        self._budgets = budgets or BudgetSettings()
        self._workers = workers
        self._actions = actions
        self._events = events
        self._clock = clock or RealClock()
        self._dry_run = dry_run
        self.queue = queue or WorkQueue(self._clock)
        self._lock = threading.RLock()
        self._timer_wakeup = threading.Condition(self._lock)
        self._node_taints: dict[str, tuple[Taint, ...]] = {}
        # node -> taint identity (key, effect) -> when this controller first saw it
        self._first_seen: dict[str, dict[tuple[str, str], float]] = {}
        self._timers = TimerHeap()
        self._scheduled: dict[str, ScheduledEviction] = {}
        # Pods (key -> uid) already deleted or marked: a later update must not evict them twice,
        # but a new pod with the same name (another uid) is evicted normally.
        self._executed: dict[str, str] = {}
        # Pods (key -> uid) whose "Marking for deletion" event was sent: retries do not repeat it.
        self._marked: dict[str, str] = {}
        # Pods (key -> uid) being deleted right now, outside the lock: no reconcile re-schedules them.
        self._evicting: dict[str, str] = {}
        # Pods (key -> uid) whose Eviction their disruption budget refused: told once, counted in a gauge.
        self._waiting: dict[str, str] = {}
        self._active = False
        # A sync makes at most four requests: the live node, then the Eviction (the first asks which policy
        # version the server serves) and the DisruptionTarget patch, or the patch and the DELETE.
        self.heartbeat = Heartbeat(self._clock, heartbeat_bound(4), "taint eviction manager")

    # --- leadership ------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self._active

    def activate(self) -> None:
        """Start acting (this replica leads): recompute every pod on a tainted node, fire what is due."""
        with self._lock:
            self._active = True
            self._resync_locked()
            self._timer_wakeup.notify_all()
        log.info("taint eviction manager active")

    def deactivate(self) -> None:
        """Stop acting at once; in-flight API calls finish, nothing new starts."""
        with self._lock:
            self._active = False
        log.info("taint eviction manager inactive")

    # --- informer handlers ----------------------------------------------------------------

    def on_node_change(self, old: NodeView | None, new: NodeView | None) -> None:
        name = (new or old).name  # type: ignore[union-attr]
        taints = evicting_taints(new) if new is not None else ()
        # First seen is kept for every NoExecute taint, stale ones too: a Ready blip under a taint
        # without timeAdded must not restart its clock.
        identities = {
            (str(t.get("key") or ""), str(t.get("effect") or "")) for t in (new.no_execute_taints if new else ())
        }
        out_of_service = new is not None and node_state(new) is NodeState.OUT_OF_SERVICE
        with self._lock:
            # A node Ready again under the out-of-service taint changes no taint, but gives its pods back.
            out_of_service_changed = self._defer_to_out_of_service and out_of_service != (name in self._out_of_service)
            unchanged = self._node_taints.get(name, ()) == taints and set(self._first_seen.get(name, {})) == identities
            if new is not None and unchanged and not out_of_service_changed:
                return
            if out_of_service:
                self._out_of_service.add(name)
            else:
                self._out_of_service.discard(name)
            now = self._clock.now()
            seen_before = self._first_seen.pop(name, {})
            if identities:
                self._first_seen[name] = {i: seen_before.get(i, now) for i in identities}
            if taints:
                self._node_taints[name] = taints
            else:
                self._node_taints.pop(name, None)
            for pod in self._pods.by_index(name):
                self._reconcile_pod_locked(pod, now)

    def on_pod_change(self, old: PodView | None, new: PodView | None) -> None:
        with self._lock:
            if new is None:
                if old is not None:
                    self._forget_locked(old.key)
                    self._executed.pop(old.key, None)
                return
            if old is not None and old.uid != new.uid:
                self._forget_locked(old.key)
            self._reconcile_pod_locked(new, self._clock.now())

    # --- deciding -------------------------------------------------------------------------

    def decide(self, pod: PodView, taints: Sequence[Taint], now: float) -> EvictionDecision:
        """The decision for `pod` under `taints`, using this manager's first-seen times and the
        start of the pod's pending eviction (kept across a not-ready <-> unreachable swap)."""
        decision = decide_eviction(
            pod.tolerations,
            taints,
            self._first_seen_on(pod.node_name, now),
            pod.arrived,
            now,
            self._comparison_operators,
        )
        pending = self._scheduled.get(pod.key)
        if pending is None or pending.uid != pod.uid:
            return decision
        return carry_swap_start(decision, pending.taint, pending.started)

    def _first_seen_on(self, node_name: str, now: float) -> Callable[[Taint], float]:
        """When this manager first saw each taint of the node (now for one it has not seen)."""
        seen = self._first_seen.get(node_name, {})

        def first_seen(taint: Taint) -> float:
            return seen.get((str(taint.get("key") or ""), str(taint.get("effect") or "")), now)

        return first_seen

    def method(self, pod: PodView, decision: EvictionDecision, taints: Sequence[Taint], now: float) -> Choice:
        """How to act on a due pod: delete it, or evict it through its disruption budget (disruption_budget.py)."""
        due = due_taints(pod.tolerations, taints, self._first_seen_on(pod.node_name, now), pod.arrived, now)
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
            entry = self._scheduled.get(key)
            return entry.at if entry else None

    def pending(self) -> int:
        with self._lock:
            return len(self._scheduled)

    def _reconcile_pod_locked(self, pod: PodView, now: float) -> None:
        key = pod.key
        if pod.terminating or not pod.node_name:
            self._forget_locked(key)
            return
        if self._executed.get(key) == pod.uid or self._evicting.get(key) == pod.uid:
            return  # deleted already, or being deleted now: never twice
        if self._executed.get(key) is not None:
            del self._executed[key]  # the same name, a new pod
        decision = self.decide(pod, self._node_taints.get(pod.node_name, ()), now)
        if decision.at is None:
            self._cancel_locked(pod)
            return
        entry = self._scheduled.get(key)
        if entry is not None and entry.uid == pod.uid and entry.at == decision.at and entry.taint == decision.taint:
            return
        self._scheduled[key] = ScheduledEviction(pod.uid, pod.node_name, decision.at, decision.taint, decision.started)
        self._timers.schedule(key, decision.at)
        metrics.PENDING_EVICTIONS.set(len(self._scheduled))
        self._timer_wakeup.notify_all()

    def _cancel_locked(self, pod: PodView) -> None:
        """The pod is no longer due: drop its eviction and say so if one was scheduled."""
        self._marked.pop(pod.key, None)
        self._stop_waiting_locked(pod.key)
        if self._scheduled.pop(pod.key, None) is None:
            return
        self._timers.cancel(pod.key)
        metrics.PENDING_EVICTIONS.set(len(self._scheduled))
        if self._active:
            self._events.pod_event(pod, EVENT_REASON, f"Cancelling deletion of Pod {pod.key}")
        log.info("cancelled eviction", extra={"pod": pod.key})

    def _forget_locked(self, key: str) -> None:
        """The pod is gone or terminating: drop its scheduled eviction (its timer and its bookkeeping)
        silently. The work queue's backoff for the key is the worker's (controller/worker.py)."""
        self._marked.pop(key, None)
        self._stop_waiting_locked(key)
        if self._scheduled.pop(key, None) is not None:
            self._timers.cancel(key)
            metrics.PENDING_EVICTIONS.set(len(self._scheduled))

    def _stop_waiting_locked(self, key: str) -> None:
        if self._waiting.pop(key, None) is not None:
            metrics.WAITING_FOR_BUDGET.set(len(self._waiting))

    def _resync_locked(self) -> None:
        now = self._clock.now()
        for node_name in list(self._node_taints):
            for pod in self._pods.by_index(node_name):
                self._reconcile_pod_locked(pod, now)
        for key, entry in self._scheduled.items():  # a pod whose eviction had fired while inactive
            if key not in self._timers:
                self._timers.schedule(key, entry.at)

    # --- firing ---------------------------------------------------------------------------

    def fire_due(self) -> list[str]:
        """Move every pod whose deadline has come into the work queue (only while active)."""
        with self._lock:
            if not self._active:
                return []
            due = self._timers.pop_due(self._clock.now())
        for key in due:
            self.queue.add(key)
        return due

    def run_timers(self, stop: threading.Event) -> None:
        """The one timer loop: sleep until the earliest deadline (or a change), fire what is due; it stamps
        the heartbeat as a worker does, so a timer loop that died or hangs makes the manager stuck."""
        self.heartbeat.beat()
        while not stop.is_set():
            self.fire_due()
            with self._lock:
                next_at = self._timers.next_deadline() if self._active else None
                timeout = 1.0 if next_at is None else max(0.0, min(1.0, next_at - self._clock.now()))
                if timeout > 0:
                    self._clock.wait(self._timer_wakeup, timeout)
            self.heartbeat.beat()
        self.heartbeat.leave()

    def sync(self, key: str) -> SyncResult:
        """Delete the pod `key` if it is still due, re-reading its node live first (the worker contract,
        controller/worker.py)."""
        with self._lock:
            entry = self._scheduled.get(key)
            pod = self._pods.get(key)
            if entry is None:
                return Done("not scheduled")
            if not self._active:
                return Done("inactive")
            if pod is None or pod.uid != entry.uid or pod.terminating:
                self._forget_locked(key)
                return Done("gone")
        try:
            live = self._actions.live_node(pod.node_name)
        except Exception as error:
            return Retry(f"reading node {pod.node_name}: {error}")
        live_taints = evicting_taints(live) if live is not None else ()
        claim = out_of_service_claim(live, pod) if self._defer_to_out_of_service and live is not None else None
        if claim is not None:
            return self._leave_to_out_of_service(pod, entry, claim)
        with self._lock:
            if self._scheduled.get(key) is not entry or not self._active:
                return Done("changed")  # changed meanwhile; the newer state decides
            now = self._clock.now()
            decision = self.decide(pod, live_taints, now)
            if decision.at is None:
                self._cancel_locked(pod)  # the cache was stale: the live node no longer calls for it
                return Done("cancelled")
            if decision.at > now:
                entry.at, entry.taint, entry.started = decision.at, decision.taint, decision.started
                self._timers.schedule(key, decision.at)
                self._timer_wakeup.notify_all()
                return Done("rescheduled")
            choice = self.method(pod, decision, live_taints, now)
            method = choice.method
            first_attempt = self._marked.get(key) != pod.uid
            self._marked[key] = pod.uid
            self._evicting[key] = pod.uid
            timed_out = method is Method.DELETE_AFTER_BUDGET_TIMEOUT and key in self._waiting
            if method is not Method.EVICT:
                self._stop_waiting_locked(key)
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
                self._evicting.pop(key, None)
            return Retry(f"deleting: {error}")
        metrics.POD_DELETIONS.inc()
        metrics.POD_DELETION_DURATION.observe(max(0.0, self._clock.now() - entry.at))
        log.info("deleted pod", extra={"pod": key, "node": pod.node_name, "reason": decision.reason})
        self._finish(key, entry)
        return Done("deleted")

    def _leave_to_out_of_service(self, pod: PodView, entry: ScheduledEviction, claim: str) -> SyncResult:
        """The live node is out of service and the pod is the out-of-service handling's: it force deletes
        it. Dropped from the schedule, not retried; the informers bring it back if the node stops being
        out of service (unfenced, or Ready again)."""
        key = pod.key
        with self._lock:
            if self._scheduled.get(key) is not entry or not self._active:
                return Done("changed")  # changed meanwhile; the newer state decides
            self._forget_locked(key)
        log.info("left pod to the out-of-service handling", extra={"pod": key, "node": pod.node_name, "reason": claim})
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
                self._evicting.pop(key, None)
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
            self._evicting.pop(key, None)
            first_refusal = self._waiting.get(key) != pod.uid
            self._waiting[key] = pod.uid
            metrics.WAITING_FOR_BUDGET.set(len(self._waiting))
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
            if self._pods.get(key) is not None:  # its DELETED event has not come yet (it clears this)
                self._executed[key] = entry.uid
            self._marked.pop(key, None)
            self._evicting.pop(key, None)
            self._stop_waiting_locked(key)
            current = self._scheduled.get(key)
            if current is not None and current.uid == entry.uid:  # the same pod, even if re-scheduled meanwhile
                del self._scheduled[key]
                self._timers.cancel(key)
                metrics.PENDING_EVICTIONS.set(len(self._scheduled))

    # --- the component (controller/component.py) ----------------------------------------------

    def register(self, informers: SharedInformers) -> None:
        informers.nodes.add_handler(self.on_node_change)
        informers.pods.add_handler(self.on_pod_change)

    def caches(self, informers: SharedInformers) -> list[Informer[Any]]:
        return [informers.nodes, informers.pods, informers.namespaces]

    def start(self, stop: threading.Event) -> None:
        """The timer loop and the deletion workers."""
        threading.Thread(target=self.run_timers, args=(stop,), name="eviction-timers", daemon=True).start()
        start_workers(
            "eviction-worker",
            self._workers,
            self.queue,
            self.sync,
            stop,
            what="eviction",
            log=log,
            heartbeat=self.heartbeat,
        )

    def stop(self) -> None:
        self.queue.shut_down()

    def stuck(self) -> str | None:
        return self.heartbeat.stuck()
