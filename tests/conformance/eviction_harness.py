"""A harness for driving taintkeeper's taint eviction manager the way upstream's unit tests drive theirs.

Upstream's tests (pkg/controller/tainteviction/taint_eviction_test.go) feed a real controller from a
fake clientset and watch which API actions it sends. Here the real `TaintEvictionManager` runs on a
`FakeClock`, with:

- an informer store stand-in (`PodStore`) holding slim views built from raw API JSON by
  `controller.objects.pod_view` / `node_view`, exactly as the informers build them, so any field the
  views learn to read (say, when a pod was bound) is picked up without changing these tests;
- the real API edge (`controller.tainteviction.api.KubeEvictionActions`) talking to a recording
  stand-in for `CoreV1Api` (`RecordingCore`): reading a node live, patching `DisruptionTarget` through
  pods/status and deleting the pod are recorded as upstream's fake clientset records "patch" and
  "delete" actions;
- a recording event sink.

Nothing here sleeps on the real clock; no thread is started. `run_for` advances the fake clock in
steps and works off everything that came due at each step, in the caller's thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import urllib3
from kubernetes.client.rest import ApiException

from controller.clock import FakeClock
from controller.objects import PodView, node_view, pod_view
from controller.tainteviction.api import KubeEvictionActions
from controller.tainteviction.manager import TaintEvictionManager
from controller.workqueue import WorkQueue
from kube.fence import WriteFence
from kube.timestamps import format_time
from shared.taints import NOT_READY, UNREACHABLE
from tests.support.eviction import drain_evictions
from tests.support.fakes import MemoryStore, RecordingEvents
from tests.support.responses import http_response

START = 1_800_000_000.0
NAMESPACE = "default"
LONG_AGO = START - 3600.0  # when the pods of a test were created and bound, unless a row says otherwise

Json = dict[str, Any]


# --- API objects, as raw JSON ------------------------------------------------------------------------


def upstream_taint(index: int, added: float = START) -> Json:
    """Upstream's `createNoExecuteTaint(index)`: key testTaint<i>, value test<i>, NoExecute, added now."""
    return {"key": f"testTaint{index}", "value": f"test{index}", "effect": "NoExecute", "timeAdded": format_time(added)}


def upstream_toleration(index: int, seconds: int | None) -> Json:
    """Upstream's `addToleration(pod, index, duration)`: key/value of testTaint<i>, effect NoExecute,
    no operator (Equal); `None` stands for upstream's negative duration, i.e. no tolerationSeconds."""
    toleration: Json = {"key": f"testTaint{index}", "value": f"test{index}", "effect": "NoExecute"}
    if seconds is not None:
        toleration["tolerationSeconds"] = seconds
    return toleration


def make_pod(
    name: str,
    node: str = "",
    tolerations: Iterable[Json] = (),
    *,
    namespace: str = NAMESPACE,
    uid: str | None = None,
    created: float = LONG_AGO,
    bound: float | None = None,
    terminating: bool = False,
) -> Json:
    """A pod as the API returns it. A pod with a node carries the scheduler's PodScheduled condition,
    whose lastTransitionTime is when it was bound (`bound`, default: when it was created)."""
    conditions: list[Json] = [{"type": "Ready", "status": "True"}]
    if node:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastTransitionTime": format_time(created if bound is None else bound),
            }
        )
    metadata: Json = {
        "namespace": namespace,
        "name": name,
        "uid": uid or f"uid-{namespace}-{name}",
        "creationTimestamp": format_time(created),
    }
    if terminating:
        metadata["deletionTimestamp"] = format_time(START)
    spec: Json = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}
    if node:
        spec["nodeName"] = node
    tolerations = list(tolerations)
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": "Running", "conditions": conditions},
    }


def make_node(name: str = "node1", taints: Iterable[Json] = ()) -> Json:
    """A node with these taints; Ready=True, but for a not-ready or unreachable NoExecute taint, which the
    node lifecycle controller puts only on a node Ready=False or Unknown (upstream's tables give no
    conditions: there the taint manager never looks at them)."""
    taints = list(taints)
    keys = {t.get("key") for t in taints if t.get("effect") == "NoExecute"}
    ready = "Unknown" if UNREACHABLE in keys else "False" if NOT_READY in keys else "True"
    node: Json = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": format_time(LONG_AGO)},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }
    if taints:
        node["spec"]["taints"] = taints
    return node


def pod_key(name: str, namespace: str = NAMESPACE) -> str:
    return f"{namespace}/{name}"


# --- the manager's surroundings --------------------------------------------------------------------------


@dataclass
class ApiCall:
    verb: str  # "get-node", "patch-status", "delete"
    target: str  # node name, or namespace/name of a pod
    at: float  # seconds after START on the fake clock
    uid: str = ""
    body: Any = None


@dataclass
class RecordingCore:
    """Stands in for `kubernetes.client.CoreV1Api`: serves nodes from `nodes`, records every call.

    `before_write` hooks run (once each, then dropped) at the start of the next pod patch or delete,
    to make something happen while an eviction is under way.
    """

    clock: FakeClock
    nodes: dict[str, Json] = field(default_factory=dict)
    calls: list[ApiCall] = field(default_factory=list)
    before_write: list[Callable[[], None]] = field(default_factory=list)

    def _now(self) -> float:
        return self.clock.now() - START

    def read_node(self, name: str, **_: Any) -> SimpleNamespace:
        self.calls.append(ApiCall("get-node", name, self._now()))
        if name not in self.nodes:
            raise ApiException(status=404, reason="Not Found")
        return SimpleNamespace(data=json.dumps(self.nodes[name]).encode())

    def _hooks(self) -> None:
        hooks, self.before_write = self.before_write, []
        for hook in hooks:
            hook()

    def patch_namespaced_pod_status(self, name: str, namespace: str, body: Json, **_: Any) -> urllib3.HTTPResponse:
        self._hooks()
        uid = str(((body or {}).get("metadata") or {}).get("uid") or "")
        self.calls.append(ApiCall("patch-status", f"{namespace}/{name}", self._now(), uid, body))
        return http_response(b"{}")

    def delete_namespaced_pod(
        self, name: str, namespace: str, body: Json | None = None, **_: Any
    ) -> urllib3.HTTPResponse:
        self._hooks()
        uid = str(((body or {}).get("preconditions") or {}).get("uid") or "")
        self.calls.append(ApiCall("delete", f"{namespace}/{name}", self._now(), uid, body))
        return http_response(b"{}")


class Cluster:
    """One taint eviction manager (acting as leader) and everything it talks to, on a fake clock."""

    def __init__(self, events: Any | None = None) -> None:
        self.clock = FakeClock(START)
        self.store: MemoryStore[PodView] = MemoryStore()
        self.core = RecordingCore(self.clock)
        self.actions = KubeEvictionActions.__new__(KubeEvictionActions)
        # the real API edge, on the recording CoreV1Api stand-in
        self.actions._core = self.core  # type: ignore[assignment]  # duck-typed: the methods it calls
        self.actions._fence = WriteFence.without_lease()  # upstream's tables have no lease
        self.actions._clock = self.clock
        self.events = events if events is not None else RecordingEvents()
        self.manager = TaintEvictionManager(
            self.store, self.actions, self.events, clock=self.clock, queue=WorkQueue(self.clock)
        )
        self.manager.activate()
        self._nodes: dict[str, Json] = {}

    # informer deliveries --------------------------------------------------------------------------

    def preload_pods(self, *pods: Json) -> None:
        """Pods already in the informer's store, with no event delivered (upstream's fake clientset)."""
        for pod in pods:
            view = pod_view(pod)
            self.store.items[view.key] = view

    def pod_event(self, old: Json | None, new: Json | None) -> None:
        """An informer add (old None), update, or delete (new None), as the pod handler receives it."""
        old_view = pod_view(old) if old is not None else None
        new_view = pod_view(new) if new is not None else None
        if new_view is not None:
            self.store.items[new_view.key] = new_view
        elif old_view is not None:
            self.store.items.pop(old_view.key, None)
        self.manager.on_pod_change(old_view, new_view)

    def node_event(self, old: Json | None, new: Json | None) -> None:
        """A node add/update/delete. The API (read live before each deletion) agrees with the watch."""
        name = (new or old or {})["metadata"]["name"]
        if new is None:
            self.core.nodes.pop(name, None)
        else:
            self.core.nodes[name] = new
        old_view = node_view(old) if old is not None else None
        new_view = node_view(new) if new is not None else None
        self.manager.on_node_change(old_view, new_view)

    def set_node(self, node: Json) -> None:
        """Deliver `node` as an add or an update of the node last delivered under its name."""
        name = node["metadata"]["name"]
        self.node_event(self._nodes.get(name), node)
        self._nodes[name] = node

    def delete_node(self, name: str) -> None:
        self.node_event(self._nodes.pop(name), None)

    # time ------------------------------------------------------------------------------------------

    def drain(self) -> None:
        """Fire what is due now and work the queue off (what the timer loop and the workers do)."""
        drain_evictions(self.manager)

    def run_for(self, seconds: float, step: float = 0.05) -> None:
        self.clock.run_for(seconds, step, self.drain)

    def now(self) -> float:
        """Seconds since START on the fake clock."""
        return self.clock.now() - START

    # what happened -----------------------------------------------------------------------------------

    def pod_calls(self, key: str) -> list[str]:
        """The verbs sent for pod `key`, in order (upstream's "patch" then "delete")."""
        return [call.verb for call in self.core.calls if call.target == key and call.verb != "get-node"]

    def deletions(self) -> dict[str, list[float]]:
        """Pod key -> the times (seconds after START) it was deleted."""
        deleted: dict[str, list[float]] = {}
        for call in self.core.calls:
            if call.verb == "delete":
                deleted.setdefault(call.target, []).append(call.at)
        return deleted

    def deleted_keys(self) -> set[str]:
        return set(self.deletions())

    def scheduled_at(self, key: str) -> float | None:
        """When the manager means to delete `key` (seconds after START), None if it does not."""
        at = self.manager.scheduled_at(key)
        return None if at is None else at - START
