"""The out-of-service handling (`out-of-service`): KEP-2268's non-graceful node shutdown on any version.

A node that carries `node.kubernetes.io/out-of-service` (NoExecute, any value) and whose Ready
condition is not True is out of service: every pod on it that does not tolerate the taint, and every
pod on it already terminating, is force deleted (grace period 0, the pod's uid as precondition), and
every VolumeAttachment to it is deleted, so a StatefulSet can start the pod's replacement elsewhere
and the volume can follow it. Each pod gets an event; the node gets one per pass that deleted
something. A node that is Ready again while it still carries the taint gets nothing more done, and
one Warning event per such stretch that the taint should be removed. With --auto-fence-after, a node
unreachable that long whose fencing an external agent confirmed after it was last heard (its Ready
condition's heartbeat, or its Lease's renewal) is given the taint (auto_fence.py); nothing else ever
makes the controller fence a node.

Pipeline: informer handlers (nodes, pods, VolumeAttachments) and the resync on `activate` queue node
names -> one worker (controller/worker.py `run_worker`) -> `sync`: decides on the cached views
(decision.py), re-reads the node live before deleting anything (a node unfenced or Ready again
meanwhile is left alone), then deletes (api.py, each write behind the write fence), asking the node's
cache before each deletion, so a node unfenced or Ready again mid-pass loses nothing more. A failed
deletion is retried with the work queue's backoff (`Retry`); a pod or attachment gone or replaced
meanwhile is done (a concurrent force delete, upstream PodGC's on 1.26+, is no failure). What this
replica deleted is remembered by uid, so an object its finalizers keep is not deleted twice. Only the
leader acts.

One actor per pod: the taint eviction manager sees the same NoExecute taint, but a pod this handling
force deletes is its alone. Both ask one rule (decision.py `out_of_service_claim`): on a node out of
service, a pod that does not tolerate the taint or is terminating already is force deleted here, and
the eviction manager, asking it on the node it reads live just before acting, leaves the pod, whatever
taint made its deadline due. Every other pod is the eviction manager's (a pod tolerating the taint for
some seconds: deleted gracefully when they run out, then force deleted here as terminating, upstream's
split between the taint eviction controller and PodGC). With this handling disabled
(--controllers=-out-of-service) the eviction manager deletes every due pod, as upstream's does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from controller.clock import Clock, RealClock
from controller.fencing import fence_patch, node_annotations, out_of_service_taint, ready_condition
from controller.objects import LeaseView, NodeView, PodView, node_view
from controller.outofservice import metrics
from controller.outofservice.auto_fence import (
    ALREADY_FENCED,
    auto_fenced_message,
    decide_auto_fence,
    fenced_by,
    unreachable_since,
)
from controller.outofservice.decision import (
    NODE_REASON,
    POD_REASON,
    READY_REASON,
    NodeState,
    Work,
    node_message,
    node_state,
    pod_message,
    ready_message,
    work_for,
)
from controller.volume_attachments import VolumeAttachmentView
from controller.worker import (
    After,
    Done,
    Heartbeat,
    Retry,
    SyncResult,
    TermSource,
    heartbeat_bound,
    no_term,
    start_workers,
)
from controller.workqueue import WorkQueue
from kube.events import EventSink
from kube.fence import WriteFenced
from kube.store import StoreReader
from kube.timestamps import parse_time

if TYPE_CHECKING:
    from controller.informers import SharedInformers
    from kube.informer import Informer

log = logging.getLogger("taintkeeper.outofservice")

Json = dict[str, Any]
AUTO_FENCED_REASON = "NodeAutoFenced"


class OutOfServiceApi(Protocol):
    """The API calls the handling makes (api.py)."""

    def read_node(self, name: str) -> Json | None:
        """The node as the API has it now (not a cache), raw JSON; None if it is gone; raise on failure."""

    def force_delete_pod(self, pod: PodView) -> Literal[True] | None:
        """Delete with grace period 0 and the uid as precondition; None if gone or replaced; raise on failure."""

    def delete_volume_attachment(self, attachment: VolumeAttachmentView) -> Literal[True] | None:
        """Delete with the uid as precondition; None if gone or replaced; raise on failure."""

    def fence_node(self, name: str, ops: Sequence[dict[str, Any]]) -> Literal[True] | None:
        """Apply the fencing JSON patch; None if the node is gone; raise ChangedSinceRead if it changed, else on
        failure."""


class OutOfServiceController:
    def __init__(
        self,
        nodes: StoreReader[NodeView],
        pods: StoreReader[PodView],
        attachments: StoreReader[VolumeAttachmentView],
        api: OutOfServiceApi,
        events: EventSink,
        *,
        auto_fence_after: float | None = None,
        leases: StoreReader[LeaseView] | None = None,
        clock: Clock | None = None,
        queue: WorkQueue | None = None,
        dry_run: bool = False,
        term: TermSource = no_term,
    ) -> None:
        self._nodes = nodes
        self._pods = pods
        self._attachments = attachments
        self._api = api
        self._events = events
        self.auto_fence_after = auto_fence_after
        self._leases = leases  # the nodes' heartbeat Leases: when each kubelet was last heard (--auto-fence-after)
        self._clock = clock or RealClock()
        self._lease_term = term  # the term each unit of work acts for (kube/acting_term.py)
        self._dry_run = dry_run
        self.queue = queue or WorkQueue(self._clock)
        self._lock = threading.Lock()
        self._active = False
        # What this replica deleted (key -> uid): not again, while a finalizer keeps it.
        self._deleted_pods: dict[str, str] = {}
        self._deleted_attachments: dict[str, str] = {}
        self._warned: set[str] = set()  # nodes told, in this Ready-and-tainted stretch, to drop the taint
        self._auto_fence_said: dict[str, str] = {}  # node -> the last reason logged for not fencing it
        self._states: dict[str, NodeState] = {}  # every tainted node's state, for the gauge
        # Between two stamps a pass makes at most two requests: the live read and one deletion (or the
        # read and the fencing patch); a pass stamps after each deletion however many pods it deletes.
        self.heartbeat = Heartbeat(self._clock, heartbeat_bound(2), "out-of-service handling")
        for ready in ("true", "false"):
            metrics.NODES.labels(ready).set(0)

    # --- leadership ----------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self._active

    def activate(self) -> None:
        """Start acting (this replica leads): queue every node that needs looking at."""
        self._active = True
        queued = 0
        for node in self._nodes.list():
            if self._wants(node):
                self.queue.add(node.name)
                queued += 1
        log.info("out-of-service handling active; %d node(s) queued", queued)

    def deactivate(self) -> None:
        """Stop acting: a pass under way stops before its next write."""
        self._active = False
        with self._lock:
            self._warned.clear()  # a new term warns afresh
            self._auto_fence_said.clear()
        log.info("out-of-service handling inactive")

    def _wants(self, node: NodeView) -> bool:
        """Whether the node needs a pass: tainted, warned before (to clear it), or an auto-fence candidate."""
        if node_state(node) is not NodeState.IN_SERVICE:
            return True
        with self._lock:
            if node.name in self._warned or node.name in self._auto_fence_said:
                return True
        return self.auto_fence_after is not None and unreachable_since(node.ready_condition, node.taints) is not None

    # --- informer handlers ---------------------------------------------------------------------------

    def on_node_change(self, old: NodeView | None, new: NodeView | None) -> None:
        self._count(old, new)
        if new is None:
            with self._lock:
                self._warned.discard(old.name if old is not None else "")
                self._auto_fence_said.pop(old.name if old is not None else "", None)
            return
        if self._active and self._wants(new):
            self.queue.add(new.name)

    def on_pod_change(self, old: PodView | None, new: PodView | None) -> None:
        self._on_node_object_change(old, new, self._deleted_pods)

    def on_attachment_change(self, old: VolumeAttachmentView | None, new: VolumeAttachmentView | None) -> None:
        self._on_node_object_change(old, new, self._deleted_attachments)

    def _on_node_object_change(
        self,
        old: PodView | VolumeAttachmentView | None,
        new: PodView | VolumeAttachmentView | None,
        deleted: dict[str, str],
    ) -> None:
        """A pod or VolumeAttachment changed: its deletion, once seen gone, is no longer in flight; one
        added or moved onto an out-of-service node queues that node's pass."""
        if new is None:
            if old is not None:
                with self._lock:
                    if deleted.get(old.key) == old.uid:
                        del deleted[old.key]
            return
        if not self._active or not new.node_name:
            return
        node = self._nodes.get(new.node_name)
        if node is not None and node_state(node) is NodeState.OUT_OF_SERVICE:
            self.queue.add(node.name)

    def _count(self, old: NodeView | None, new: NodeView | None) -> None:
        """taintkeeper_out_of_service_nodes{ready}: kept on every replica, from the cache."""
        name = (new or old).name  # type: ignore[union-attr]
        state = node_state(new) if new is not None else NodeState.IN_SERVICE
        with self._lock:
            before = self._states.get(name, NodeState.IN_SERVICE)
            if before is state:
                return
            if state is NodeState.IN_SERVICE:
                del self._states[name]
            else:
                self._states[name] = state
            ready = sum(1 for s in self._states.values() if s is NodeState.TAINTED_READY)
            not_ready = len(self._states) - ready
        metrics.NODES.labels("true").set(ready)
        metrics.NODES.labels("false").set(not_ready)

    # --- working -------------------------------------------------------------------------------------

    def sync(self, name: str) -> SyncResult:
        """One pass over node `name` (the worker contract, controller/worker.py)."""
        if not self._active:
            return Done("inactive")  # the next activation resyncs
        node = self._nodes.get(name)
        if node is None:
            return Done("gone")
        state = node_state(node)
        if state is NodeState.TAINTED_READY:
            with self._lock:
                first = name not in self._warned
                self._warned.add(name)
            if first:
                message = ready_message(name)
                log.warning("%s", message, extra={"node": name})
                self._events.node_event(name, node.uid, READY_REASON, message, "Warning")
            return Done("ready")
        with self._lock:
            self._warned.discard(name)  # a new stretch of Ready-and-tainted is told again
        if state is NodeState.IN_SERVICE:
            if self.auto_fence_after is None:
                return Done("in service")
            return self._auto_fence(node, self.auto_fence_after)
        with self._lock:
            work = work_for(
                node,
                self._pods.by_index(name),
                self._attachments.by_index(name),
                self._deleted_pods,
                self._deleted_attachments,
            )
        if not work:
            return Done("nothing to do")
        try:
            live = self._api.read_node(name)
        except Exception as error:
            return Retry(f"reading the node: {error}")
        if live is None or node_state(node_view(live)) is not NodeState.OUT_OF_SERVICE:
            return Done("not out of service")  # unfenced, Ready again or gone: the informer brings the change
        return self._delete(node, work)

    def _delete(self, node: NodeView, work: Work) -> SyncResult:
        """Force delete the pods, then delete the attachments; the heartbeat is stamped after each
        deletion, so a pass over a node with many pods in a slow apiserver does not look stuck."""
        name = node.name
        taint = out_of_service_taint(node.taints) or {}
        if self._dry_run:
            for pod, reason in work.pods:
                log.info("dry run: would force delete pod", extra={"pod": pod.key, "node": name, "reason": reason})
            for attachment in work.attachments:
                log.info(
                    "dry run: would delete volume attachment", extra={"volumeattachment": attachment.name, "node": name}
                )
            return Done("dry-run")
        deleted_pods = deleted_attachments = 0
        failures: list[str] = []
        for pod, reason in work.pods:
            if not self._active:
                return Done("inactive")
            if not self._still_out_of_service(name):
                break
            try:
                deleted = self._api.force_delete_pod(pod) is not None
            except WriteFenced as error:  # not an API failure; every later write would be refused too
                failures.append(str(error))
                break
            except Exception as error:
                metrics.FORCE_DELETE_PODS.labels(pod.namespace, metrics.OUT_OF_SERVICE_REASON).inc()
                metrics.FORCE_DELETE_POD_ERRORS.labels(pod.namespace, metrics.OUT_OF_SERVICE_REASON).inc()
                metrics.FAILURES.inc()
                failures.append(f"force deleting pod {pod.key}: {error}")
                continue
            finally:
                self.heartbeat.beat()
            metrics.FORCE_DELETE_PODS.labels(pod.namespace, metrics.OUT_OF_SERVICE_REASON).inc()
            with self._lock:
                self._deleted_pods[pod.key] = pod.uid
            if deleted:
                deleted_pods += 1
                metrics.PODS_DELETED.inc()
                message = pod_message(pod, name, taint, reason)
                self._events.pod_event(pod, POD_REASON, message)
                log.info("force deleted pod", extra={"pod": pod.key, "node": name, "reason": reason})
        # Volumes are detached once every pod to go is gone: a failed pod is retried first.
        for attachment in work.attachments if not failures else ():
            if not self._active:
                return Done("inactive")
            if not self._still_out_of_service(name):
                break
            try:
                deleted = self._api.delete_volume_attachment(attachment) is not None
            except WriteFenced as error:
                failures.append(str(error))
                break
            except Exception as error:
                metrics.FAILURES.inc()
                failures.append(f"deleting volume attachment {attachment.name}: {error}")
                continue
            finally:
                self.heartbeat.beat()
            with self._lock:
                self._deleted_attachments[attachment.key] = attachment.uid
            if deleted:
                deleted_attachments += 1
                metrics.VOLUME_ATTACHMENTS_DELETED.inc()
                log.info(
                    "deleted volume attachment",
                    extra={"volumeattachment": attachment.name, "node": name, "volume": attachment.persistent_volume},
                )
        if deleted_pods or deleted_attachments:
            self._events.node_event(name, node.uid, NODE_REASON, node_message(name, deleted_pods, deleted_attachments))
        if failures:
            return Retry("; ".join(failures))
        if not self._still_out_of_service(name):
            log.info(
                "node back in service during a pass: its other pods are left alone",
                extra={"node": name, "deleted": deleted_pods},
            )
            return Done("not out of service")
        return Done("deleted")

    def _still_out_of_service(self, name: str) -> bool:
        """Asked of the node's cache before each deletion: the live read at the pass's start is seconds old
        by its fiftieth pod, and a node powered on and unfenced meanwhile runs its pods again."""
        node = self._nodes.get(name)
        return node is not None and node_state(node) is NodeState.OUT_OF_SERVICE

    def _auto_fence(self, node: NodeView, after: float) -> SyncResult:
        name = node.name
        since = unreachable_since(node.ready_condition, node.taints)
        if since is None:
            with self._lock:
                self._auto_fence_said.pop(name, None)
            return Done("not unreachable")
        now = self._clock.now()
        if now - since < after:
            return After(since + after - now, "too soon")  # look again when it may be fenced
        try:
            live = self._api.read_node(name)  # the annotations are not cached; and the cache may be behind
        except Exception as error:
            return Retry(f"reading the node: {error}")
        if live is None:
            return Done("gone")
        ready = ready_condition(live)
        taints = (live.get("spec") or {}).get("taints") or []
        lease = self._leases.get(name) if self._leases is not None else None
        decision = decide_auto_fence(
            ready,
            taints,
            node_annotations(live),
            after,
            now,
            parse_time(lease.renew_time) if lease is not None else None,
        )
        if not decision.fence:
            if decision.reason != ALREADY_FENCED:
                self._say_not_fencing(name, decision.reason, decision.detail)
            if decision.recheck_at is not None:
                return After(max(0.0, decision.recheck_at - now), decision.reason)
            return Done(decision.reason)
        if self._dry_run:
            log.info("dry run: would fence node", extra={"node": name, "detail": decision.detail})
            return Done("dry-run")
        patch = fence_patch(live, fenced_by(after), now)
        if patch is None:
            return Done(ALREADY_FENCED)
        try:
            if self._api.fence_node(name, patch.ops) is None:
                return Done("gone")
        except Exception as error:  # ChangedSinceRead (the node changed), the write fence, an API failure
            return Retry(f"fencing: {error}")
        metrics.AUTO_FENCED.inc()
        with self._lock:
            self._auto_fence_said.pop(name, None)
        message = auto_fenced_message(name, decision)
        self._events.node_event(name, node.uid, AUTO_FENCED_REASON, message, "Warning")
        log.warning("%s", message, extra={"node": name})
        return Done("fenced")

    def _say_not_fencing(self, name: str, reason: str, detail: str) -> None:
        """Log why an unreachable node is not fenced, once per reason."""
        with self._lock:
            if self._auto_fence_said.get(name) == reason:
                return
            self._auto_fence_said[name] = reason
        log.info(
            "not fencing unreachable node %s: %s%s",
            name,
            reason,
            f" ({detail})" if detail else "",
            extra={"node": name},
        )

    # --- the component (controller/component.py) ----------------------------------------------

    def register(self, informers: SharedInformers) -> None:
        informers.nodes.add_handler(self.on_node_change)
        informers.pods.add_handler(self.on_pod_change)
        informers.volume_attachments.add_handler(self.on_attachment_change)

    def caches(self, informers: SharedInformers) -> list[Informer[Any]]:
        leases = [informers.leases] if self._leases is not None else []
        return [informers.nodes, informers.pods, informers.volume_attachments, *leases]

    def start(self, stop: threading.Event) -> None:
        """One worker: a dead node's pods are few, and each deletion is one request."""
        start_workers(
            "out-of-service-worker",
            1,
            self.queue,
            self.sync,
            stop,
            what="out-of-service pass",
            log=log,
            heartbeat=self.heartbeat,
            on_crash=metrics.FAILURES.inc,
            term=self._lease_term,
        )

    def stop(self) -> None:
        self.queue.shut_down()

    def stuck(self) -> str | None:
        return self.heartbeat.stuck()
