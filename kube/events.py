"""Kubernetes Events, recorded asynchronously so an eviction never waits on one.

Events are best effort (as upstream's recorder): a full queue or a failed POST is logged and
dropped. What upstream's recorder expects the server to reject is logged at DEBUG, not as a
warning: an event that already exists, and one for a namespace being deleted (a pod of a
namespace going away is still marked NotReady or evicted). Cluster-scoped objects (Nodes) get
their events in the `default` namespace, as upstream.

An event is posted only while the write fence is open (kube/fence.py): it goes out later than it
was queued, and a replica that may no longer lead must not speak for the controller (a "Marking for
deletion" queued just before the Lease was lost would announce a deletion that the new leader may
not make). The recorder's thread asks the fence right before each POST and drops the event when it
is closed: each drop is counted, and one warning is logged per run of drops. An event belongs to the
leadership term of the unit of work that queued it (kube/acting_term.py): it is posted as that term's,
and dropped by the fence once that term has ended, even if this replica leads again by then.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from kubernetes import client

from kube.acting_term import acting_for, acting_term
from kube.client import WORKER_REQUEST_TIMEOUT, release
from kube.errors import is_conflict, status_body, status_code
from kube.fence import WriteFence
from kube.timestamps import format_time

log = logging.getLogger("taintkeeper.events")

# Why an event was dropped (the `reason` passed to `on_dropped`: a metric label).
FENCED = "fenced"
QUEUE_FULL = "queue-full"


class PodRef(Protocol):
    """What an event needs of the pod it is about (a controller's pod view has it)."""

    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def uid(self) -> str: ...


class EventSink(Protocol):
    """Where components record events: `EventRecorder`, or a test's recording stand-in."""

    def pod_event(self, pod: PodRef, reason: str, message: str, event_type: str = "Normal") -> None: ...

    def node_event(self, name: str, uid: str, reason: str, message: str, event_type: str = "Normal") -> None: ...


def expected_rejection(error: BaseException) -> bool:
    """Whether the server refused an event as upstream's recorder expects it to, and so logs at V(5):
    409 AlreadyExists, or any refusal whose causes include NamespaceTerminating (a 403)."""
    if is_conflict(error):
        return True
    if status_code(error) is None:
        return False
    causes = (status_body(error).get("details") or {}).get("causes") or []
    return any(isinstance(cause, dict) and cause.get("reason") == "NamespaceTerminating" for cause in causes)


def event_body(
    involved: dict[str, Any],
    namespace: str,
    reason: str,
    message: str,
    event_type: str,
    component: str,
    host: str,
    now: float,
) -> dict[str, Any]:
    stamp = format_time(now)
    return {
        "metadata": {"name": f"{involved['name']}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": {"component": component, "host": host},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host,
    }


class EventRecorder:
    """Queues events on the caller's thread and posts them from its own (`run`), each behind `fence`.

    `on_dropped(reason)` is called for every event dropped unposted: FENCED or QUEUE_FULL (the metric).
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        component: str,
        fence: WriteFence,
        *,
        on_dropped: Callable[[str], object] = lambda _reason: None,
        max_queued: int = 10_000,
    ) -> None:
        self._core = client.CoreV1Api(api_client)
        self.component = component
        self._fence = fence
        self._on_dropped = on_dropped
        self._host = socket.gethostname()
        # (namespace, body, the term of the unit of work that queued it)
        self._queue: queue.Queue[tuple[str, dict[str, Any], str | None]] = queue.Queue(max_queued)
        self._fenced_drops = 0  # dropped by the fence since an event was last posted (the recorder's thread only)

    def pod_event(self, pod: PodRef, reason: str, message: str, event_type: str = "Normal") -> None:
        involved = {"kind": "Pod", "apiVersion": "v1", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid}
        self._enqueue(pod.namespace, involved, reason, message, event_type)

    def node_event(self, name: str, uid: str, reason: str, message: str, event_type: str = "Normal") -> None:
        involved = {"kind": "Node", "apiVersion": "v1", "name": name, "uid": uid}
        self._enqueue("default", involved, reason, message, event_type)

    def _enqueue(self, namespace: str, involved: dict[str, Any], reason: str, message: str, event_type: str) -> None:
        body = event_body(involved, namespace, reason, message, event_type, self.component, self._host, time.time())
        try:
            self._queue.put_nowait((namespace, body, acting_term()))
        except queue.Full:
            self._on_dropped(QUEUE_FULL)
            log.warning("event queue full; dropped event %s: %s", reason, message)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set() or not self._queue.empty():
            try:
                namespace, body, term = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            with acting_for(term):
                self._post(namespace, body)

    def _post(self, namespace: str, body: dict[str, Any]) -> None:
        """Post one event if the fence is open (for the term that queued it), right before the request; else drop it."""
        if not self._fence.is_open():
            self._drop_fenced(body)
            return
        if self._fenced_drops:
            log.info("posting events again; %d dropped while the write fence was closed", self._fenced_drops)
            self._fenced_drops = 0
        try:
            release(
                self._core.create_namespaced_event(
                    namespace,
                    body,  # type: ignore[arg-type]  # the client sends a dict body as it is (it wants a model)
                    _preload_content=False,
                    _request_timeout=WORKER_REQUEST_TIMEOUT,
                )
            )
        except Exception as error:  # best effort, as upstream
            level = logging.DEBUG if expected_rejection(error) else logging.WARNING
            log.log(level, "could not record event %s (%s): %s", body["reason"], body["message"], error)

    def _drop_fenced(self, body: dict[str, Any]) -> None:
        """Count an event the fence refused; warn at the first of a run of them (until one is posted again)."""
        self._on_dropped(FENCED)
        if not self._fenced_drops:
            log.warning(
                "write fence closed: not posting events until this replica leads again; dropped "
                "%s (%s) and any that follow",
                body["reason"],
                body["message"],
            )
        self._fenced_drops += 1

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name=f"events-{self.component}", daemon=True)
        thread.start()
        return thread
