"""Backfill of the default NoExecute tolerations on pods admitted without them.

The webhook's `failurePolicy` is `Ignore`, so pods created while it is down miss the default
not-ready/unreachable tolerations, and would be evicted at once when their node goes NotReady.
This component finds such pods and appends the missing tolerations (adding tolerations to a
running pod is an allowed update), at a bounded rate, with an event on each pod.

Pipeline: informer handlers (`on_pod_change`, `on_namespace_change`) and the full resync on
`activate` decide on the cached views (`decide_backfill`) and put pod keys in the work queue ->
a worker (controller/worker.py `run_worker`) -> `sync`: re-checks the cached view, waits for a token of
the rate limiter, re-reads the pod live, decides again on the live object and writes a JSON patch
(`json_patch`) that tests the pod's uid and resourceVersion and only appends. A conflict (409/422: the
pod changed meanwhile) or an error is retried with backoff (`Retry`); a gone pod is done.
Only the leader acts: while inactive, events are ignored (activation resyncs everything).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from controller.backfill import metrics
from controller.backfill.decision import (
    EVENT_REASON,
    INVALID_ANNOTATION_REASON,
    BackfillDecision,
    BackfillSettings,
    Json,
    decide_backfill,
    event_message,
    json_patch,
)
from controller.clock import Clock, RealClock
from controller.objects import NamespaceView, PodView, pod_view
from controller.token_bucket import TokenBucket
from controller.worker import Done, Heartbeat, Retry, SyncResult, TermSource, heartbeat_bound, no_term, start_workers
from controller.workqueue import WorkQueue
from kube.errors import ChangedSinceRead
from kube.events import EventSink
from kube.fence import WriteFenced
from kube.store import StoreReader

if TYPE_CHECKING:
    from controller.informers import SharedInformers
    from kube.informer import Informer

log = logging.getLogger("taintkeeper.backfill")


class BackfillApi(Protocol):
    """The API calls a backfill makes (api.py)."""

    def read_pod(self, namespace: str, name: str) -> Json | None:
        """The pod as the API's JSON, read now; None if it is gone; raise on failure."""

    def patch_pod(self, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]) -> Literal[True] | None:
        """Apply the JSON patch; None if the pod is gone; raise ChangedSinceRead on 409/422, else on failure."""


class BackfillController:
    def __init__(
        self,
        pods: StoreReader[PodView],
        namespaces: StoreReader[NamespaceView],
        api: BackfillApi,
        events: EventSink,
        settings: BackfillSettings,
        *,
        clock: Clock | None = None,
        queue: WorkQueue | None = None,
        dry_run: bool = False,
        term: TermSource = no_term,
    ) -> None:
        self._pods = pods
        self._namespaces = namespaces
        self._api = api
        self._events = events
        self.settings = settings
        self._clock = clock or RealClock()
        self._lease_term = term  # the term each unit of work acts for (kube/acting_term.py)
        self._dry_run = dry_run
        self.queue = queue or WorkQueue(self._clock)
        # Burst 1: at most `rate` pods per second, never a burst after a quiet spell.
        self.limiter = TokenBucket(settings.rate, 1, now=self._clock.now())
        self._token_wakeup = threading.Condition()
        self._stop = threading.Event()  # the runner's, from `start`: a worker waiting for a token gives up
        self._active = False
        # A sync waits for one token (one worker, burst 1), then reads and patches the pod.
        self.heartbeat = Heartbeat(self._clock, heartbeat_bound(2, 1 / settings.rate), "toleration backfill")

    # --- leadership ----------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self._active

    def activate(self) -> None:
        """Start acting (this replica leads): queue every pod that misses a default toleration."""
        self._active = True
        queued = self.resync()
        log.info("toleration backfill active; %d pod(s) queued", queued)

    def deactivate(self) -> None:
        """Stop acting: a worker waiting for a token gives up; an in-flight write finishes."""
        self._active = False
        with self._token_wakeup:
            self._token_wakeup.notify_all()
        log.info("toleration backfill inactive")

    def resync(self) -> int:
        queued = 0
        for pod in self._pods.list():
            if self.decide(pod).needed:
                self.queue.add(pod.key)
                queued += 1
        return queued

    # --- informer handlers ---------------------------------------------------------------------------

    def on_pod_change(self, old: PodView | None, new: PodView | None) -> None:
        if new is None or not self._active:
            return
        if self.decide(new).needed:
            self.queue.add(new.key)

    def on_namespace_change(self, old: NamespaceView | None, new: NamespaceView | None) -> None:
        """A namespace appeared or its skip label/annotations changed: its pods may need a backfill now.
        (A pod seen before its namespace is picked up here.)"""
        if new is None or old == new or not self._active:
            return
        for pod in self._pods.list():
            if pod.namespace == new.name and self.decide(pod).needed:
                self.queue.add(pod.key)

    def decide(self, pod: PodView) -> BackfillDecision:
        return decide_backfill(
            pod, self._namespaces.get(pod.namespace), self.settings.cluster_seconds, self.settings.excluded_namespaces
        )

    # --- working -------------------------------------------------------------------------------------

    def sync(self, key: str) -> SyncResult:
        """Backfill the pod `key` if it still needs it (the worker contract, controller/worker.py)."""
        if not self._active:
            return Done("inactive")  # the resync on the next activation re-queues what still needs it
        cached = self._pods.get(key)
        if cached is None:
            return Done("gone")
        if not self.decide(cached).needed:
            return Done("unneeded")
        if not self._take_token():
            return Done("inactive")  # re-queued by the resync on the next activation
        try:
            raw = self._api.read_pod(cached.namespace, cached.name)
        except Exception as error:
            return Retry(f"reading the pod: {error}")
        if raw is None:
            return Done("gone")
        live = pod_view(raw)
        decision = self.decide(live)
        if not decision.needed:
            log.debug("no backfill for %s: %s", key, decision.reason)
            return Done("unneeded")
        ops = json_patch(raw, decision.tolerations)
        message = event_message(decision.tolerations)
        if self._dry_run:
            log.info("dry run: would add default tolerations", extra={"pod": key, "added": message})
            return Done("dry-run")
        try:
            if self._api.patch_pod(live.namespace, live.name, ops) is None:
                return Done("gone")
        except ChangedSinceRead as error:
            metrics.BACKFILL_FAILURES.inc()
            return Retry(f"the pod changed meanwhile: {error}")
        except Exception as error:
            if not isinstance(error, WriteFenced):  # refused by the write fence: retried, but no API failure
                metrics.BACKFILL_FAILURES.inc()
            return Retry(f"patching: {error}")
        metrics.BACKFILLED_PODS.inc()
        for warning in decision.warnings:
            log.warning("pod %s: %s", key, warning)
            self._events.pod_event(live, INVALID_ANNOTATION_REASON, warning, "Warning")
        self._events.pod_event(live, EVENT_REASON, message)
        log.info("added default tolerations", extra={"pod": key, "added": message})
        return Done("patched")

    def _take_token(self) -> bool:
        """Wait for the rate limiter; False if this replica stopped leading (or is stopping) meanwhile."""
        with self._token_wakeup:
            while True:
                if not self._active or self._stop.is_set():
                    return False
                delay = self.limiter.reserve(self._clock.now())
                if delay <= 0:
                    return True
                self._clock.wait(self._token_wakeup, min(delay, 1.0))

    # --- the component (controller/component.py) ----------------------------------------------

    def register(self, informers: SharedInformers) -> None:
        informers.pods.add_handler(self.on_pod_change)
        informers.namespaces.add_handler(self.on_namespace_change)

    def caches(self, informers: SharedInformers) -> list[Informer[Any]]:
        return [informers.pods, informers.namespaces]

    def start(self, stop: threading.Event) -> None:
        """One worker: the rate limit, not parallelism, bounds the throughput."""
        self._stop = stop
        start_workers(
            "backfill-worker",
            1,
            self.queue,
            self.sync,
            stop,
            what="backfill",
            log=log,
            heartbeat=self.heartbeat,
            on_crash=metrics.BACKFILL_FAILURES.inc,
            term=self._lease_term,
        )

    def stop(self) -> None:
        self.queue.shut_down()

    def stuck(self) -> str | None:
        return self.heartbeat.stuck()
