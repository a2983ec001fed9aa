"""Backfill of the default NoExecute tolerations on pods admitted without them.

The webhook's `failurePolicy` is `Ignore`, so pods created while it is down miss the default
not-ready/unreachable tolerations, and would be evicted at once when their node goes NotReady.
This component finds such pods and appends the missing tolerations (adding tolerations to a
running pod is an allowed update), at a bounded rate, with an event on each pod.

Pipeline: informer handlers (`on_pod_change`, `on_namespace_change`) and the full resync on
`activate` decide on the cached views (`decide_backfill`) and put pod keys in the work queue ->
a worker (`run_worker`) -> `process`: re-checks the cached view, waits for a token of the rate limiter,
re-reads the pod live, decides again on the live object and writes a JSON patch (`json_patch`)
that tests the pod's uid and resourceVersion and only appends. A conflict (409/422: the pod
changed meanwhile) or an error is retried through the queue with backoff; a gone pod is done.
Only the leader acts: while inactive, events are ignored (activation resyncs everything).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

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
from controller.workqueue import WorkQueue, run_worker
from kube.events import EventSink
from kube.fence import WriteFenced
from kube.store import StoreReader

if TYPE_CHECKING:
    from controller.informers import SharedInformers
    from kube.informer import Informer

log = logging.getLogger("taintkeeper.backfill")


class Conflict(Exception):
    """The pod changed since it was read (409, or 422 from a failed `test` op): re-read and retry."""


class BackfillApi(Protocol):
    """The API calls a backfill makes (api.py)."""

    def read_pod(self, namespace: str, name: str) -> Json | None:
        """The pod as the API's JSON, read now; None if it is gone."""

    def patch_pod(self, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]) -> bool:
        """Apply the JSON patch; False if the pod is gone; raise Conflict on 409/422, else on failure."""


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
    ) -> None:
        self._pods = pods
        self._namespaces = namespaces
        self._api = api
        self._events = events
        self.settings = settings
        self._clock = clock or RealClock()
        self._dry_run = dry_run
        self.queue = queue or WorkQueue(self._clock)
        # Burst 1: at most `rate` pods per second, never a burst after a quiet spell.
        self.limiter = TokenBucket(settings.rate, 1, now=self._clock.now())
        self._token_wakeup = threading.Condition()
        self._active = False

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

    def process(self, key: str, stop: threading.Event | None = None) -> str:
        """Backfill the pod `key` if it still needs it; returns what happened (for logs and tests)."""
        if not self._active:
            self.queue.forget(key)  # the resync on the next activation re-queues what still needs it
            return "inactive"
        cached = self._pods.get(key)
        if cached is None:
            self.queue.forget(key)
            return "gone"
        if not self.decide(cached).needed:
            self.queue.forget(key)
            return "unneeded"
        if not self._take_token(stop):
            self.queue.forget(key)
            return "inactive"  # re-queued by the resync on the next activation
        try:
            raw = self._api.read_pod(cached.namespace, cached.name)
        except Exception as error:
            return self._retry(key, f"reading the pod: {error}")
        if raw is None:
            self.queue.forget(key)
            return "gone"
        live = pod_view(raw)
        decision = self.decide(live)
        if not decision.needed:
            log.debug("no backfill for %s: %s", key, decision.reason)
            self.queue.forget(key)
            return "unneeded"
        ops = json_patch(raw, decision.tolerations)
        message = event_message(decision.tolerations)
        if self._dry_run:
            log.info("dry run: would add default tolerations", extra={"pod": key, "added": message})
            self.queue.forget(key)
            return "dry-run"
        try:
            if not self._api.patch_pod(live.namespace, live.name, ops):
                self.queue.forget(key)
                return "gone"
        except Conflict as error:
            metrics.BACKFILL_FAILURES.inc()
            self._retry(key, f"the pod changed meanwhile: {error}")
            return "conflict"
        except Exception as error:
            if not isinstance(error, WriteFenced):  # refused by the write fence: retried, but no API failure
                metrics.BACKFILL_FAILURES.inc()
            return self._retry(key, f"patching: {error}")
        metrics.BACKFILLED_PODS.inc()
        self.queue.forget(key)
        for warning in decision.warnings:
            log.warning("pod %s: %s", key, warning)
            self._events.pod_event(live, INVALID_ANNOTATION_REASON, warning, "Warning")
        self._events.pod_event(live, EVENT_REASON, message)
        log.info("added default tolerations", extra={"pod": key, "added": message})
        return "patched"

    def _take_token(self, stop: threading.Event | None) -> bool:
        """Wait for the rate limiter; False if this replica stopped leading (or is stopping) meanwhile."""
        with self._token_wakeup:
            while True:
                if not self._active or (stop is not None and stop.is_set()):
                    return False
                delay = self.limiter.reserve(self._clock.now())
                if delay <= 0:
                    return True
                self._clock.wait(self._token_wakeup, min(delay, 1.0))

    def _retry(self, key: str, why: str) -> str:
        delay = self.queue.add_rate_limited(key)
        log.warning("backfill of %s will be retried in %.2fs: %s", key, delay, why)
        return "retry"

    # --- the component (controller/component.py) ----------------------------------------------

    def register(self, informers: SharedInformers) -> None:
        informers.pods.add_handler(self.on_pod_change)
        informers.namespaces.add_handler(self.on_namespace_change)

    def caches(self, informers: SharedInformers) -> list[Informer[Any]]:
        return [informers.pods, informers.namespaces]

    def start(self, stop: threading.Event) -> None:
        """One worker: the rate limit, not parallelism, bounds the throughput."""
        threading.Thread(
            target=run_worker,
            args=(self.queue, lambda key: self.process(key, stop), stop, "backfill", metrics.BACKFILL_FAILURES.inc),
            name="backfill-worker",
            daemon=True,
        ).start()

    def stop(self) -> None:
        self.queue.shut_down()

    def stuck(self) -> str | None:
        return None  # a worker waits for tokens and the API with timeouts: it cannot hang
