"""The node lifecycle monitor: notices dead nodes and taints them (upstream NodeLifecycleController).

Two passes run on one loop thread, which alone changes the monitor's zone and health state (the
pod workers only read it). Each leadership term starts from a clean state, reset on that thread by
the term's first pass, never under a pass still running; a pass belongs to the term it started in
and stops before its next write once that term has ended (a call that hung while the Lease was lost,
and perhaps won again), so nothing an old term decided is written in a new one:
- `monitor_pass` (every --node-monitor-period): per node, decide health (node_health.py),
  post Unknown conditions for stale nodes, queue NoExecute tainting per zone, mark NotReady the pods
  still Ready on nodes not ready;
  then compute zone states and set each zone's tainting rate (`handle_disruption`);
- `tainting_pass` (every 100 ms): per zone, let the token bucket release queued nodes and write
  their `not-ready` / `unreachable` NoExecute taint.
NoSchedule condition taints are event-driven: `on_node_change` queues the node and a work-queue
worker's `sync_node` reconciles them (`sync_no_schedule_taints`), then brings the beta OS/arch labels
in step with the GA ones (`reconcile_node_labels`, as upstream 1.20-1.32). Pods bound to a node that
is already not ready are marked NotReady the same way (`on_pod_change` -> `sync_pod`).

An error on one node is logged and counted; the pass goes on with the other nodes and still
computes the zone states (without that node, as upstream). `stuck()` tells the health endpoint
whether the loop, or one of the workers, has stopped making progress (controller/worker.py's one rule).

Deliberate differences from upstream:
- A NoExecute taint is queued from the Ready status *after* this pass's Unknown update, not the
  one before it, so a dead node is tainted one monitor period sooner.
- A node first seen by this controller (a restart, a new leader) keeps NoExecute taints that its
  Ready status still calls for; upstream strips them and re-adds them later, which resets their
  timeAdded and so every pod's eviction clock.
- Pods are marked NotReady on every node whose Ready is not True: each pass offers every such node
  (False as its kubelet reported it, Unknown as this controller set it, in whatever order) and marks
  its pods still Ready; upstream marks them only when it moves a node's Ready from True itself, so a
  node reported False keeps its pods Ready (k8s #112733, #125618). The rule is the state, not a
  transition: a pod Ready again is marked again, and a restart or a new leader needs no memory.
  --mark-pods-not-ready-on-transition-only restores upstream's rule (and the NodeNotReady node event
  is upstream's either way: on the True -> not-True move only).
- Marking pods NotReady (k8s #77864) is spread out in a disrupted zone: in a zone whose state is
  PartialDisruption or FullDisruption, at most 10 % of the zone's nodes (at least one) have pods
  to mark per monitor pass, the rest on later passes; when every zone is fully disrupted,
  none are marked (as with tainting, the controller is then more likely cut off than the cluster
  dead). In a Normal zone pods are marked at once, as upstream.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

from controller.clock import Clock, RealClock
from controller.nodelifecycle import metrics
from controller.nodelifecycle.decision import (
    NOT_READY_NO_EXECUTE,
    TAINT_WRITE_ATTEMPTS,
    UNREACHABLE_NO_EXECUTE,
    MonitorSettings,
    has_taint,
    labels_to_reconcile,
    no_execute_swap,
    no_schedule_inputs,
    not_ready_marking_budget,
    pass_heartbeat_bound,
    taint_name,
    tainted_node_counts,
)
from controller.nodelifecycle.node_health import HealthTracker, first_heard
from controller.nodelifecycle.rate_limited_queue import RateLimitedTimedQueue
from controller.objects import LeaseView, NodeView, PodView
from controller.worker import (
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
from controller.zones import ZoneState, compute_zone_state, eviction_rate, zone_health_percent, zone_label
from kube.clock_offset import ClockOffset, ServerClock
from kube.errors import describe_error, is_conflict
from kube.events import EventSink
from kube.fence import WriteFenced
from kube.store import StoreReader
from shared.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    Taint,
    desired_no_schedule_taints,
    managed_no_schedule_taints,
    taint_diff,
)

if TYPE_CHECKING:
    from controller.informers import SharedInformers
    from kube.informer import Informer

log = logging.getLogger("taintkeeper.nodelifecycle")

TAINTING_PERIOD = 0.1  # upstream NodeEvictionPeriod
RETRY_WAIT = 0.05  # upstream: a node without a Ready condition is retried after 50 ms
NODE_HEALTH_UPDATE_RETRY = 5  # upstream: an Unknown-condition write is retried on a fresh read, 5 times
RETRY_SLEEP = 0.02  # upstream retrySleepTime
# Threads that reconcile NoSchedule condition taints: twice upstream's UpdateWorkerSize (8), because
# the start-up sweep of registration taints runs on them and each waits on its PATCH, so more threads
# keep the apiserver busy (the envelope benchmark's registration sweep). Idle, a worker wakes once a
# second. podUpdateWorkerSize threads mark pods NotReady.
NO_SCHEDULE_WORKERS = 16
POD_WORKERS = 4


class NodeLifecycleApi(Protocol):
    """The writes the monitor makes (api.py), and the live read a retry needs."""

    def read_node(self, node_name: str) -> NodeView | None:
        """The node as the API has it now (not a cache); None if it is gone; raise on failure."""

    def read_lease_renew_time(self, node_name: str) -> str | None:
        """The renewTime of the node's Lease in kube-node-lease as the API has it now (not a cache);
        None if there is no such Lease; raise on failure."""

    def swap_taints(self, node_name: str, add: Sequence[Taint], remove: Sequence[Taint]) -> Literal[True] | None:
        """Add and remove taints in one write that carries the node's resourceVersion (none if the node has
        them already); None if the node is gone; raise on failure."""

    def post_conditions(self, node: NodeView, conditions: Sequence[dict[str, Any]]) -> Literal[True] | None:
        """Write conditions through nodes/status against the cached resourceVersion; None if the node is
        gone; raise on failure (409 when the node changed since)."""

    def set_labels(self, node: NodeView, labels: Mapping[str, str]) -> Literal[True] | None:
        """Set labels in one write against the cached resourceVersion; None if the node is gone; raise on
        failure (409 when the node changed since)."""

    def mark_pod_not_ready(self, pod: PodView) -> Literal[True] | None:
        """Set the pod's Ready condition False through pods/status; None if the pod is gone or replaced;
        raise on failure."""

    def measure_server_clock(self) -> ServerClock:
        """The apiserver's clock against ours, bounded, and its version (kube/server_clock.py); raise on
        failure."""


class QuietNode(NamedTuple):
    """A healthy node's last full check, which holds while the view and the Lease's renewTime are the same."""

    node: NodeView  # the view checked
    renew_time: str | None  # its Lease's renewTime then
    deadline: float  # when its grace runs out (on the monitor's clock)
    zone: str
    no_schedule_tainted: bool  # carries a NoSchedule taint the controller manages (for the metric)


class TermEnded(Exception):
    """The leadership term a pass started in has ended: the pass stops where it is, writing nothing more."""


class NodeLifecycleMonitor:
    def __init__(
        self,
        nodes: StoreReader[NodeView],
        leases: StoreReader[LeaseView],
        pods: StoreReader[PodView],
        api: NodeLifecycleApi,
        events: EventSink,
        settings: MonitorSettings,
        *,
        clock: Clock | None = None,
        no_schedule_queue: WorkQueue | None = None,
        pod_queue: WorkQueue | None = None,
        pods_synced: Callable[[], bool] = lambda: True,
        term: TermSource = no_term,
        check_terms: bool = True,
    ) -> None:
        self._nodes = nodes
        self._leases = leases
        self._pods = pods
        # The monitor may lead before the pods' LIST has ended (a staged start): until then, pods to
        # mark NotReady wait in _pods_to_mark, and pods the LIST delivers are not queued one by one.
        self._pods_synced = pods_synced
        self._api = api
        self._events = events
        self.settings = settings
        self._clock = clock or RealClock()
        self._lease_term = term  # the term each unit of work acts for (kube/acting_term.py)
        self._check_terms = check_terms
        self.no_schedule_queue = no_schedule_queue or WorkQueue(self._clock)
        self.pod_queue = pod_queue or WorkQueue(self._clock)
        self._active = False
        # Leadership terms: `activate` (the elector's thread) starts term `_term`; the monitor's thread
        # runs each pass in `_pass_term` and keeps its state for `_state_term` (None: fresh, no term's yet).
        self._term = 0
        self._pass_term = 0
        self._state_term: int | None = None
        self._server_clock: ClockOffset | None = None  # measured by each term's first pass
        self._next_monitor_pass = 0.0  # on the monitor's clock
        self._last_pass: tuple[int, float] | None = None  # (term, when its last pass ended), see last_pass
        # The loop's: stamped after each step and wait, and within a pass after each node checked and each
        # node's pods marked, so a long pass through a large failure still moves.
        self.pass_heartbeat = Heartbeat(
            self._clock,
            pass_heartbeat_bound(settings.node_monitor_period),
            "node lifecycle monitor",
            thread_kind="loop",
        )
        self.wakeup = Wakeup(self._clock)
        # The NoSchedule and pod-marking workers': a node's sync makes at most a taint write (a live read
        # and a PATCH per attempt) and a label PATCH; a pod's, one PATCH.
        self.heartbeat = Heartbeat(self._clock, heartbeat_bound(2 * TAINT_WRITE_ATTEMPTS + 1), "node lifecycle monitor")
        self._reset()

    def _reset(self) -> None:
        """Forget everything: a new leader observes every node afresh (and gives it a full grace)."""
        self.health = HealthTracker(self.settings.node_monitor_grace_period, self.settings.node_startup_grace_period)
        self._known: dict[str, NodeView] = {}
        self.zone_states: dict[str, ZoneState] = {}
        self.zone_queues: dict[str, RateLimitedTimedQueue] = {}
        self._pods_to_mark: set[str] = set()
        # node -> (the resourceVersion our Unknown write was made against, the Ready status written):
        # until the informer delivers the write, the cached node is older than what we know.
        self._posted_ready: dict[str, tuple[str, str]] = {}
        self._no_execute_written: set[str] = set()  # nodes whose NoExecute taints this pass changed
        # A healthy node whose check changed nothing (Ready, no NoExecute taint, not queued) -> what
        # must still hold for it to be skipped; see _still_quiet.
        self._quiet: dict[str, QuietNode] = {}
        self.last_pass_checked = 0  # nodes the last pass checked in full (the rest were quiet)

    # --- leadership -------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self._active

    @property
    def last_pass(self) -> float | None:
        """When (the monitor's wall clock) this term's last monitor pass completed; None while not leading
        and before the term's first pass completes. Read from other threads (the leader elector's)."""
        last = self._last_pass
        if last is None or not self._active or last[0] != self._term:
            return None
        return last[1]

    def activate(self) -> None:
        """A new term: its first pass resets the state (`_start_pass`), on the monitor's thread, where a pass
        of the last term may still be running (hung in a call) and must not see its state replaced."""
        self._term += 1  # before `_active`: a pass that sees it leading again sees the new term too
        metrics.ZONE_STATE.clear()  # a zone this replica saw in an earlier term may be gone
        metrics.MASTER_DISRUPTION_MODE.set(0)
        self._active = True
        for node in self._nodes.list():  # NoSchedule taints may have drifted while we were not leading
            self.no_schedule_queue.add(node.name)
        log.info("node lifecycle monitor active")

    def deactivate(self) -> None:
        self._active = False  # a running pass stops before its next write (`_check_term`)
        metrics.ZONE_STATE.clear()  # the leader's view, not a stand-by's stale one
        metrics.MASTER_DISRUPTION_MODE.set(0)
        log.info("node lifecycle monitor inactive")

    # --- NoSchedule taints from conditions (event-driven) -----------------------------------------

    def on_node_change(self, old: NodeView | None, new: NodeView | None) -> None:
        if new is not None and self._active and (old is None or no_schedule_inputs(old) != no_schedule_inputs(new)):
            self.no_schedule_queue.add(new.name)

    def sync_no_schedule_taints(self, name: str) -> None:
        """Make the node's managed NoSchedule taints match its conditions; raise on failure."""
        node = self._nodes.get(name)
        if node is None or not self._active:
            return
        to_add, to_remove = taint_diff(
            managed_no_schedule_taints(node.taints), desired_no_schedule_taints(node.conditions, node.unschedulable)
        )
        if to_add or to_remove:
            self._api.swap_taints(name, to_add, to_remove)

    def reconcile_node_labels(self, name: str) -> None:
        """Set the node's beta OS/arch labels to its GA ones where they differ or are missing; raise on failure."""
        node = self._nodes.get(name)
        if node is None or not self._active:
            return
        labels = labels_to_reconcile(node.label_map)
        if labels:
            self._api.set_labels(node, labels)

    def sync_node(self, name: str) -> SyncResult:
        """Upstream doNodeProcessingPassWorker for one added or updated node (the worker contract,
        controller/worker.py): NoSchedule taints, then labels, each tried whatever the other did. A label
        write right after a taint write conflicts (the cached node is a version behind): it is retried
        with the backoff, on the node the informer has delivered by then."""
        failures = []
        for what, step in (("taints", self.sync_no_schedule_taints), ("labels", self.reconcile_node_labels)):
            try:
                step(name)
            except Exception as error:
                failures.append(f"{what}: {describe_error(error)}")
        return Retry("; ".join(failures)) if failures else Done()

    # --- pods bound to a node that is already not ready (upstream processPod) --------------------

    def on_pod_change(self, old: PodView | None, new: PodView | None) -> None:
        if not self._pods_synced():
            return  # the initial LIST: a not-ready node's pass marks its pods once the LIST has ended
        if new is not None and new.node_name and self._active and (old is None or old.node_name != new.node_name):
            self.pod_queue.add(new.key)

    def sync_pod(self, key: str) -> SyncResult:
        """Mark a newly bound pod NotReady if its node is not ready (the worker contract, controller/worker.py)."""
        pod = self._pods.get(key)
        if pod is None or not self._active or pod.terminating or pod.ready in (None, "False"):
            return Done("unchanged")  # upstream MarkPodsNotReady only flips a Ready condition the pod has
        if self.health.get(pod.node_name) is None:
            return Done("node not observed")  # the node's own pass will handle its pods
        node = self._nodes.get(pod.node_name)
        ready = node.ready_condition if node is not None else None
        if ready is None or ready.get("status") == "True":
            return Done("node ready")
        try:
            self._api.mark_pod_not_ready(pod)
        except Exception as error:
            return Retry(f"could not mark it NotReady on node {pod.node_name}: {error}")
        self._events.pod_event(pod, "NodeNotReady", "Node is not ready", "Warning")
        return Done("marked")

    # --- the monitor pass ------------------------------------------------------------------------

    @property
    def in_master_disruption(self) -> bool:
        """Every zone fully disrupted: no NoExecute tainting, no pods marked (upstream's master disruption mode)."""
        return bool(self.zone_states) and all(s is ZoneState.FULL_DISRUPTION for s in self.zone_states.values())

    def _start_pass(self) -> bool:
        """Whether a pass may run (this replica leads), on the monitor's thread; the first pass of a new
        term forgets the last term's state first (the state of a monitor never active is fresh already)."""
        term = self._term  # before `_active`, as `activate` sets them in the other order
        if not self._active:
            return False
        if self._state_term != term:
            if self._state_term is not None:
                self._reset()
            self._server_clock = self._measured_offset()
        self._state_term = self._pass_term = term
        return True

    def _check_term(self) -> None:
        """Before each write and each event of a pass: raise TermEnded once the pass's term has ended,
        so a pass that hung across a lost (and perhaps regained) Lease writes nothing it decided before.
        Not with `check_terms=False`: the soak judge's sabotage (--unsafe-drop-term-checks)."""
        if self._check_terms and (not self._active or self._term != self._pass_term):
            raise TermEnded

    def monitor_pass(self) -> None:
        """One upstream monitorNodeHealth: health, conditions, tainting queues, pods, zone states."""
        if not self._start_pass():
            return
        try:
            self._monitor_all_nodes()
        except TermEnded:
            log.info("leadership changed during a monitor pass: it stops here, writing nothing more")
            return
        self._last_pass = (self._pass_term, self._clock.now())

    def _monitor_all_nodes(self) -> None:
        pass_started = self._clock.monotonic()
        now = self._clock.now()
        nodes = self._nodes.list()
        renew_times = {lease.name: lease.renew_time for lease in self._leases.list()}
        registered = {node.name for node in nodes if node.name not in self._known}
        self._no_execute_written.clear()
        for node in nodes:
            if node.name in registered:
                self._register(node)
        # Every node listed is known now; unless more are known than listed, none was deleted.
        gone_names: list[str] = []
        if len(self._known) != len(nodes):
            current = {node.name for node in nodes}
            gone_names = [name for name in self._known if name not in current]
        for name in gone_names:
            self._check_term()
            gone = self._known.pop(name)
            self._quiet.pop(name, None)
            self.health.forget(name)
            self._posted_ready.pop(name, None)
            self._pods_to_mark.discard(name)
            for queue in self.zone_queues.values():  # a deleted node must not stay in a queue's name set
                queue.remove(name)
            self._events.node_event(
                name, gone.uid, "RemovingNode", f"Node {name} event: Removing Node {name} from Controller"
            )
        zone_statuses: dict[str, list[str | None]] = {}
        zone_sizes: dict[str, int] = {}
        tainted = {NO_EXECUTE: 0, NO_SCHEDULE: 0}
        checked = 0
        for node in nodes:
            self._check_term()  # leadership lost mid-pass: the new leader acts from here on
            renew_time = renew_times.get(node.name)
            quiet = self._still_quiet(node, renew_time, now)
            if quiet is not None:
                zone_sizes[quiet.zone] = zone_sizes.get(quiet.zone, 0) + 1
                if not node.excluded_from_disruption:
                    zone_statuses.setdefault(quiet.zone, []).append("True")
                tainted[NO_SCHEDULE] += quiet.no_schedule_tainted
                continue
            counts = tainted_node_counts((node,))
            tainted[NO_EXECUTE] += counts[NO_EXECUTE]
            tainted[NO_SCHEDULE] += counts[NO_SCHEDULE]
            checked += 1
            started = self._clock.monotonic()
            try:
                self._monitor_node(node, renew_time, now, zone_statuses, zone_sizes, node.name in registered)
            except TermEnded:
                raise
            except Exception:  # one node must never stop the others being checked; it is not counted
                log.exception("monitoring node %s failed; the other nodes are still checked", node.name)
                metrics.NODE_MONITOR_ERRORS.inc()
            metrics.UPDATE_NODE_HEALTH_DURATION.observe(self._clock.monotonic() - started)
            self.pass_heartbeat.beat()
        self.last_pass_checked = checked
        self._check_term()  # the zone states and their rates are the term's own
        self.handle_disruption(zone_statuses, now)
        self._mark_pods_not_ready(zone_sizes)  # after the zone states: a zone going down now is spread already
        metrics.MASTER_DISRUPTION_MODE.set(1 if self.in_master_disruption else 0)
        for effect, count in tainted.items():
            metrics.TAINTED_NODES.labels(effect).set(count)
        metrics.UPDATE_ALL_NODES_HEALTH_DURATION.observe(self._clock.monotonic() - pass_started)

    def _register(self, node: NodeView) -> None:
        self._check_term()
        self._known[node.name] = node
        self._events.node_event(
            node.name, node.uid, "RegisteredNode", f"Node {node.name} event: Registered Node {node.name} in Controller"
        )

    def _ensure_zone(self, zone: str, now: float) -> None:
        """Upstream addPodEvictorForNewZone: a zone without a state starts Initial, tainting at the normal rate.

        A zone that vanished (its state was dropped) and comes back starts fresh the same way; its
        queue is kept, so nodes already waiting for a token are not forgotten.
        """
        if zone in self.zone_states:
            return
        self.zone_states[zone] = ZoneState.INITIAL
        metrics.set_zone_state(zone, ZoneState.INITIAL)
        queue = self.zone_queues.get(zone)
        if queue is None:
            self.zone_queues[zone] = RateLimitedTimedQueue(self.settings.node_eviction_rate, now)
            metrics.ZONE_EVICTIONS.labels(zone_label(zone)).inc(0)
        else:
            queue.swap_limiter(self.settings.node_eviction_rate, now)

    def _still_quiet(self, node: NodeView, renew_time: str | None, now: float) -> QuietNode | None:
        """What a node whose check would change nothing contributes, else None (check it in full).

        A node is quiet when its last check found it Ready with no NoExecute taint and nothing queued,
        and since then neither the Node (the store hands out the same view until something read
        changes) and its grace has not run out. Checking it again would record the same health, post
        nothing, write no taint and count it Ready in its zone, which is all a quiet node contributes.
        A renewed Lease only moves its probe to now (`lease_renewed`), as the full check would. At
        5,000 nodes this runs for each node every pass, so it reads only what it saved.
        """
        quiet = self._quiet.get(node.name)
        if quiet is None or quiet.node is not node or now > quiet.deadline:
            return None
        queue = self.zone_queues.get(quiet.zone)
        if quiet.zone not in self.zone_states or queue is None or node.name in queue.names_set:
            return None
        if quiet.renew_time != renew_time:
            # Only the Lease was renewed: a full check would move the probe to now and change nothing else.
            if renew_time is None or not self.health.lease_renewed(node.name, renew_time, now):
                return None
            quiet = self._quiet[node.name] = quiet._replace(
                renew_time=renew_time, deadline=now + self.health.grace_period
            )
        return quiet

    def _monitor_node(
        self,
        node: NodeView,
        renew_time: str | None,
        now: float,
        zone_statuses: dict[str, list[str | None]],
        zone_sizes: dict[str, int],
        first_sight: bool,
    ) -> None:
        self._quiet.pop(node.name, None)
        verdict = self.health.update(node, renew_time, now, self._first_heard(node, now))
        if verdict.conditions_to_post and self._lease_cache_behind(node.name, renew_time):
            return  # not judged this pass (nor counted in its zone), as upstream skips it
        attempt = 1
        while verdict.conditions_to_post:
            self._check_term()
            posted = self._post_conditions(node, verdict.conditions_to_post)
            if posted is None:
                return  # deleted meanwhile
            if posted:
                break
            if attempt >= NODE_HEALTH_UPDATE_RETRY:
                log.warning(
                    "could not set the conditions of node %s to Unknown after %d attempts; next pass",
                    node.name,
                    attempt,
                )
                return
            attempt += 1
            self._clock.sleep(RETRY_SLEEP)
            fresh = self._api.read_node(node.name)  # e.g. the kubelet posted meanwhile: judge it again
            if fresh is None:
                return  # deleted meanwhile
            node = fresh
            verdict = self.health.update(node, renew_time, now)
        if verdict.conditions_to_post:
            self._posted_ready[node.name] = (node.resource_version, str(verdict.current_ready.get("status")))
            if verdict.current_ready.get("status") != verdict.observed_ready.get("status"):
                self.health.mark_posted(node.name, now)
        self._known[node.name] = node
        zone = node.zone
        self._ensure_zone(zone, now)  # a node may move to a zone never seen (cloud labels arrive late)
        zone_sizes[zone] = zone_sizes.get(zone, 0) + 1
        # No Ready condition and not yet stale: a node still within its startup grace. It counts as
        # not ready for its zone (as upstream) but nothing is done to it yet.
        has_ready = node.ready_condition is not None or verdict.stale
        status = verdict.current_ready.get("status") if has_ready else None
        if not node.excluded_from_disruption:
            zone_statuses.setdefault(zone, []).append(status)
        if status is None:
            return
        self._process_taint_based_eviction(node, status, zone, now)
        if status == "True":
            self._pods_to_mark.discard(node.name)
            health = self.health.get(node.name)
            if (
                not node.no_execute_taints
                and node.ready_condition is not None
                and health is not None
                and node.name not in self._posted_ready
                and self._known.get(node.name) is node
            ):
                # The probe only moves on a full check (or forward, for every node, leaving master
                # disruption): a deadline saved now is never later than the node's real one.
                self._quiet[node.name] = QuietNode(
                    node,
                    renew_time,
                    health.probe_timestamp + self.health.grace_period,
                    zone,
                    bool(managed_no_schedule_taints(node.taints)),
                )
        elif verdict.observed_ready.get("status") == "True":  # this pass moved it from True: upstream's one event
            self._check_term()
            self._events.node_event(
                node.name, node.uid, "NodeNotReady", f"Node {node.name} status is now: NodeNotReady"
            )
            self._pods_to_mark.add(node.name)
        elif first_sight or not self.settings.mark_pods_not_ready_on_transition_only:
            # Not ready, whoever made it so: its pods still Ready are marked (_mark_pods_not_ready). With the
            # flag, as upstream: only a node already not ready when this controller first saw it.
            self._pods_to_mark.add(node.name)

    def _post_conditions(self, node: NodeView, conditions: Sequence[dict[str, Any]]) -> bool | None:
        """A pass's Unknown-conditions write: True when written, None when the node is gone, False when it
        failed (logged, unless the write fence refused it and logged that itself)."""
        try:
            return self._api.post_conditions(node, conditions)
        except WriteFenced:
            return False
        except Exception as error:
            if is_conflict(error):
                log.info("node %s changed since it was read; its health is judged again next pass", node.name)
            else:
                log.warning("could not update status of node %s: %s", node.name, describe_error(error))
            return False

    def _swap_taints(self, name: str, add: Sequence[Taint], remove: Sequence[Taint]) -> bool:
        """A pass's taint write: True when done (or the node is gone), False when it failed (logged, unless
        the write fence refused it and logged that itself); the pass retries it."""
        try:
            self._api.swap_taints(name, add, remove)
        except WriteFenced:
            return False
        except Exception as error:
            log.warning("could not update taints of node %s: %s", name, describe_error(error))
            return False
        return True

    def _first_heard(self, node: NodeView, now: float) -> float | None:
        """For a node this term sees for the first time: when it was last heard, dated by the apiserver
        (node_health.py `first_heard`); None otherwise, or when it cannot be dated."""
        if self.health.get(node.name) is not None:
            return None
        lease = self._leases.get(node.name)
        return first_heard(now, (lease.stamped if lease else "", node.status_stamped), self._server_clock)

    def _measured_offset(self) -> ClockOffset | None:
        """The apiserver's clock against ours, measured once a term (a few GETs); None if it cannot be, or
        if the apiserver's stamps do not date a heartbeat."""
        try:
            clock = self._api.measure_server_clock()
        except Exception as error:
            log.warning("could not measure the apiserver's clock: nodes first seen are judged from now (%s)", error)
            return None
        offset = clock.offset
        if offset is None:
            log.warning("the apiserver's clock could not be read: nodes first seen are judged from now")
        elif not clock.dates_every_change:
            log.info(
                "the apiserver (%s) dates a Lease's managedFields only when the fields owned change, not at "
                "each renewal (before 1.25, kubernetes#110058): nodes first seen are judged from now",
                clock.git_version or "of an unknown version",
            )
            return None
        else:
            log.info(
                "the apiserver's clock measured",
                extra={"offset_low": round(offset.low, 3), "offset_high": round(offset.high, 3)},
            )
        return offset

    def _lease_cache_behind(self, name: str, cached_renew_time: str | None) -> bool:
        """Before a node is marked Unknown, its Lease read live (upstream 1.37's NodeControllerLeaseCircuitBreaker,
        beta and on): a renewal the informer has not delivered means the cache is behind, and a node is
        never marked dead from a stale cache. A failed read holds the marking too; a Lease the API no
        longer has does not."""
        try:
            live = self._api.read_lease_renew_time(name)
        except Exception as error:
            log.warning("could not read the Lease of node %s before marking it Unknown; next pass: %s", name, error)
            return True
        if live is None or live == (cached_renew_time or None):
            return False
        log.info(
            "the Lease cache is behind: not marking the node Unknown this pass",
            extra={"node": name, "cached_renew_time": cached_renew_time, "live_renew_time": live},
        )
        metrics.LEASE_CACHE_BEHIND.inc()
        return True

    def _process_taint_based_eviction(self, node: NodeView, status: str | None, zone: str, now: float) -> None:
        queue = self.zone_queues[zone]
        swap = no_execute_swap(status)
        if swap is not None:
            add, remove = swap
            if has_taint(node, remove):  # swap at once, never leave the node without either
                self._no_execute_written.add(node.name)
                self._check_term()
                if not self._swap_taints(node.name, [add], [remove]):
                    log.warning(
                        "could not swap %s for %s on node %s; next pass", taint_name(remove), taint_name(add), node.name
                    )
            else:
                self._mark_for_tainting(queue, node, add, now)
        elif status == "True":
            self._mark_reachable(node, queue)

    @staticmethod
    def _mark_for_tainting(queue: RateLimitedTimedQueue, node: NodeView, taint: Taint, now: float) -> None:
        if has_taint(node, taint) or queue.waiting(node.name):
            return  # already tainted (keep its timeAdded), or still waiting for its token
        queue.remove(node.name)  # a name stays in the queue's set after processing; let it back in
        queue.add(node.name, node.uid, now)

    def _mark_reachable(self, node: NodeView, queue: RateLimitedTimedQueue | None, braking: bool = False) -> None:
        present = (
            [t for t in (NOT_READY_NO_EXECUTE, UNREACHABLE_NO_EXECUTE) if has_taint(node, t)]
            if node.no_execute_taints
            else []
        )  # the common case: a healthy node without any
        # The view may be older than the node: swapped this pass, or tainted by the tainting pass
        # before the informer delivered it. Braking, remove both from any node not known healthy
        # (swap_taints reads the node live and writes nothing when neither is there).
        ready = node.ready_condition
        if node.name in self._no_execute_written or (braking and (ready is None or ready.get("status") != "True")):
            present = [NOT_READY_NO_EXECUTE, UNREACHABLE_NO_EXECUTE]
        if present:
            self._check_term()
            if not self._swap_taints(node.name, [], present):
                log.warning("could not remove NoExecute taints from node %s; next pass", node.name)
        if queue is not None and node.name in queue.names_set:
            queue.remove(node.name)

    def _mark_pods_not_ready(self, zone_sizes: dict[str, int]) -> None:
        """Mark the pods of the nodes in _pods_to_mark. A node whose pods are all marked already costs one
        index lookup and no API call, and takes nothing from its zone's budget (else, with every not-ready
        node offered again each pass, the first ones by name would take the budget of a disrupted zone)."""
        if self.in_master_disruption or not self._pods_synced():
            return  # a pass after the brake, or after the pods' LIST has ended, marks them
        budget: dict[str, int] = {}
        for name in sorted(self._pods_to_mark):
            node = self._known.get(name)
            pods = self._pods_still_ready(node) if node is not None else []
            if node is None or not pods:
                self._pods_to_mark.discard(name)
                continue
            zone = node.zone
            if self.zone_states.get(zone) in (ZoneState.PARTIAL_DISRUPTION, ZoneState.FULL_DISRUPTION):
                allowed = budget.setdefault(zone, not_ready_marking_budget(zone_sizes.get(zone, 1)))
                if allowed <= 0:
                    continue
                budget[zone] = allowed - 1
            if self._mark_node_pods_not_ready(pods):
                self._pods_to_mark.discard(name)

    def _pods_still_ready(self, node: NodeView) -> list[PodView]:
        """The node's pods whose Ready condition is not False (upstream MarkPodsNotReady flips only a Ready
        condition the pod has): one index lookup, no API call."""
        return [
            pod
            for pod in self._pods.by_index(node.name)
            if pod.node_name == node.name and pod.ready not in (None, "False")
        ]

    def _mark_node_pods_not_ready(self, pods: Sequence[PodView]) -> bool:
        """Upstream MarkPodsNotReady; True when every pod given is marked (else retried next pass)."""
        done = True
        for pod in pods:
            self._check_term()
            try:
                self._api.mark_pod_not_ready(pod)
            except Exception as error:
                log.warning("could not mark pod %s NotReady: %s", pod.key, error)
                done = False
                continue
            self._check_term()
            self._events.pod_event(pod, "NodeNotReady", "Node is not ready", "Warning")
            self.pass_heartbeat.beat()
        return done

    # --- zones ---------------------------------------------------------------------------------

    def handle_disruption(self, zone_statuses: dict[str, list[str | None]], now: float) -> None:
        """Upstream handleDisruption: zone states, their tainting rates, and the all-zones brake.

        Everything is derived from this pass's zones and the states kept from the last one, never
        from a flag of our own, so no state can latch: a zone with no counted node this pass loses
        its state (and starts afresh, Initial, when it comes back).
        """
        settings = self.settings
        new_states: dict[str, ZoneState] = {}
        for zone, statuses in zone_statuses.items():
            ready, not_ready, state = compute_zone_state(statuses, settings.unhealthy_zone_threshold)
            label = zone_label(zone)
            metrics.ZONE_HEALTH.labels(label).set(zone_health_percent(ready, not_ready))
            metrics.ZONE_SIZE.labels(label).set(ready + not_ready)
            metrics.UNHEALTHY_NODES.labels(label).set(not_ready)
            new_states[zone] = state
        for zone in [zone for zone in self.zone_states if zone not in zone_statuses]:
            label = zone_label(zone)
            metrics.ZONE_SIZE.labels(label).set(0)
            metrics.ZONE_HEALTH.labels(label).set(100)
            metrics.UNHEALTHY_NODES.labels(label).set(0)
            metrics.set_zone_state(zone, None)
            del self.zone_states[zone]
        # A zone still Initial joined this pass: it has no say on whether the brake was on (upstream
        # counts it, so a zone joining during the brake kept the brake's zero rate on the others).
        all_are_fully = bool(new_states) and all(s is ZoneState.FULL_DISRUPTION for s in new_states.values())
        previous = [s for s in self.zone_states.values() if s is not ZoneState.INITIAL]
        all_were_fully = bool(previous) and all(s is ZoneState.FULL_DISRUPTION for s in previous)
        if all_are_fully and all_were_fully:
            # The brake stays on: a zone that joined it fully disrupted is braked like the others.
            for zone in [zone for zone in new_states if self.zone_states.get(zone) is ZoneState.INITIAL]:
                self._brake_zone(zone, now)
            return
        if all_are_fully:
            log.warning(
                "every zone is fully disrupted: entering master disruption mode; no NoExecute tainting "
                "and no NoExecute not-ready/unreachable taints until a zone recovers"
            )
            for zone in list(self.zone_states):
                self._brake_zone(zone, now)
            return
        if all_were_fully:
            log.warning("a zone recovered: leaving master disruption mode; every node gets a fresh grace period")
            self.health.reset_all(now)
            for zone, state in new_states.items():
                self._set_zone_rate(zone, state, len(zone_statuses[zone]), now)
                self.zone_states[zone] = state
                metrics.set_zone_state(zone, state)
            return
        for zone, state in new_states.items():
            if self.zone_states.get(zone) != state:
                log.info("zone %r is now in state %s", zone_label(zone), state.value)
                self._set_zone_rate(zone, state, len(zone_statuses[zone]), now)
                self.zone_states[zone] = state
                metrics.set_zone_state(zone, state)

    def _brake_zone(self, zone: str, now: float) -> None:
        """Master disruption mode for one zone: no NoExecute tainting, and no such taint kept."""
        queue = self.zone_queues[zone]
        for node in self._known.values():
            if node.zone == zone:
                self._mark_reachable(node, queue, braking=True)
        queue.swap_limiter(0, now)
        self.zone_states[zone] = ZoneState.FULL_DISRUPTION
        metrics.set_zone_state(zone, ZoneState.FULL_DISRUPTION)

    def _set_zone_rate(self, zone: str, state: ZoneState, size: int, now: float) -> None:
        queue = self.zone_queues.get(zone)
        if queue is None:
            return
        settings = self.settings
        queue.swap_limiter(
            eviction_rate(
                state,
                size,
                eviction_rate=settings.node_eviction_rate,
                secondary_eviction_rate=settings.secondary_node_eviction_rate,
                large_cluster_threshold=settings.large_cluster_size_threshold,
            ),
            now,
        )

    # --- the NoExecute tainting pass ---------------------------------------------------------------

    def tainting_pass(self) -> None:
        """Upstream doNoExecuteTaintingPass: per zone, write the taints the token bucket lets through."""
        if not self._start_pass():
            return
        now = self._clock.now()
        try:
            for zone in sorted(self.zone_queues):
                self.zone_queues[zone].try_process(functools.partial(self._taint_queued_node, zone=zone), now)
        except TermEnded:
            log.info("leadership changed during a tainting pass: it stops here, writing nothing more")

    def _ready_status(self, node: NodeView) -> str | None:
        """The node's Ready status, counting the Unknown this monitor wrote but the cache has not shown
        yet (else the tainting pass right after the write would drop the node as ready and spend
        the zone's token: a 1/--node-eviction-rate delay)."""
        posted = self._posted_ready.get(node.name)
        if posted is not None:
            if posted[0] == node.resource_version:
                return posted[1]
            del self._posted_ready[node.name]  # the cache caught up, or the kubelet posted since
        ready = node.ready_condition
        return None if ready is None else ready.get("status")

    def _taint_queued_node(self, name: str, _uid: str, zone: str) -> SyncResult:
        """The zone queue's action on a node its token bucket let through (rate_limited_queue.py)."""
        node = self._nodes.get(name)
        if node is None:
            return Done("gone")
        status = self._ready_status(node)
        if status is None:
            return After(RETRY_WAIT, "no Ready condition yet")
        swap = no_execute_swap(status)
        if swap is None:
            return Done("ready again")  # nothing to taint
        add, remove = swap
        self._check_term()
        if not self._swap_taints(name, [add], [remove]):
            return Retry("the NoExecute taint could not be written")
        metrics.ZONE_EVICTIONS.labels(zone_label(zone)).inc()
        log.info("tainted node", extra={"node": name, "taint": f"{add['key']}:NoExecute"})
        return Done("tainted")

    # --- running -------------------------------------------------------------------------------------

    def step(self) -> float:
        """The loop's step (controller/worker.py `run_loop`): a monitor pass when --node-monitor-period has
        passed since the last one began, then a tainting pass; the next step comes after TAINTING_PERIOD."""
        now = self._clock.now()
        period = self.settings.node_monitor_period
        # The clock is the wall clock (deadlines come from API timestamps): one stepped back must not put
        # the next pass off by more than a period.
        if now >= self._next_monitor_pass or self._next_monitor_pass - now > period:
            self._next_monitor_pass = now + period
            self.monitor_pass()
            metrics.LAST_MONITOR_PASS.set(self._clock.now())
        self.tainting_pass()
        return TAINTING_PERIOD

    def stuck(self) -> str | None:
        """Why the monitor looks stuck, or None (controller/worker.py's one rule): its loop has stamped
        neither a step, a wait nor progress within a pass for 3 monitor periods (at least STUCK_FLOOR),
        or one of its workers has neither finished a sync nor waited idle within its heartbeat's bound.

        The controller's /healthz fails on it, so the kubelet restarts the process and a stand-by
        takes over instead of a leader that holds the Lease but no longer watches nodes. A long pass
        that still checks nodes and marks pods (a large failure) is not stuck.
        """
        return self.pass_heartbeat.stuck() or self.heartbeat.stuck()

    # --- the component (controller/component.py) ----------------------------------------------

    def register(self, informers: SharedInformers) -> None:
        """Nodes (NoSchedule taints) and pods (marking newly bound ones); the leases are only read."""
        informers.nodes.add_handler(self.on_node_change)
        informers.pods.add_handler(self.on_pod_change)

    def caches(self, informers: SharedInformers) -> list[Informer[Any]]:
        """Nodes and their Leases: health and taints need no pod, so the monitor (and its sweep of
        registration taints) starts before the pods' LIST ends; marking pods waits for it (`pods_synced`)."""
        return [informers.nodes, informers.leases]

    def start(self, stop: threading.Event) -> None:
        """The monitor loop, the NoSchedule tainting (and label) workers and the pod marking workers."""
        start_loop(
            "node-lifecycle",
            self.step,
            stop,
            wakeup=self.wakeup,
            what="node lifecycle pass",
            log=log,
            heartbeat=self.pass_heartbeat,
            on_crash=metrics.MONITOR_PASS_FAILURES.inc,
            after_crash=TAINTING_PERIOD,
            term=self._lease_term,
        )
        start_workers(
            "no-schedule",
            NO_SCHEDULE_WORKERS,
            self.no_schedule_queue,
            self.sync_node,
            stop,
            what="NoSchedule tainting and labels",
            log=log,
            heartbeat=self.heartbeat,
            term=self._lease_term,
        )
        start_workers(
            "node-pods",
            POD_WORKERS,
            self.pod_queue,
            self.sync_pod,
            stop,
            what="pod NotReady marking",
            log=log,
            heartbeat=self.heartbeat,
            term=self._lease_term,
        )

    def stop(self) -> None:
        self.no_schedule_queue.shut_down()
        self.pod_queue.shut_down()
