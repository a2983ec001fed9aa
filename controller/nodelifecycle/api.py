"""The writes the node lifecycle monitor makes: taints, node conditions, beta OS/arch labels, pod readiness.

Every taint write patches the whole taint list together with the resourceVersion it was computed
from, so an edit made in between (by an operator, another controller) is never overwritten: the
apiserver answers 409 and the write is redone on a fresh read (k8s #113136). The first attempt
starts from the informer's cached node when one is given, as upstream's first try reads the
apiserver's cache: a start-up sweep over thousands of nodes then costs one PATCH per node, not a
GET and a PATCH. NoExecute taints get `timeAdded`, which the eviction manager counts from.

As every API edge of the controller, each call returns None when its object is gone (404; a pod
replaced, 409 on its uid, too) and raises on failure. Every write first asks the write fence
(kube/fence.py); a refused write raises WriteFenced, so the monitor retries it as it retries a failure.
"""

from __future__ import annotations

import builtins
import logging
import random
import threading
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Generic, Literal, NamedTuple, TypeVar

from kubernetes import client
from kubernetes.client.rest import ApiException

from controller.clock import Clock, RealClock
from controller.nodelifecycle.decision import TAINT_WRITE_ATTEMPTS, taints_to_write, updated_taints
from controller.objects import NodeView, PodView, node_view
from kube import server_clock
from kube.client import WORKER_REQUEST_TIMEOUT, read_node_json, release, strategic_merge, write_unless_gone
from kube.clock_offset import ServerClock
from kube.errors import is_conflict, is_not_found
from kube.fence import WriteFence
from kube.request import request_json
from kube.store import Keyed, StoreReader
from kube.timestamps import format_time
from shared.taints import NO_EXECUTE, Taint

log = logging.getLogger("taintkeeper.nodelifecycle")

CONFLICT_BACKOFF = 0.1  # upstream UpdateTaintBackoff: 100 ms with jitter between attempts


NODE_LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"

# What the write fence refused (the `action` label of taintkeeper_fenced_writes_total).
TAINTS_ACTION = "node-taints"
CONDITIONS_ACTION = "node-conditions"
LABELS_ACTION = "node-labels"
POD_NOT_READY_ACTION = "pod-not-ready"


def label_pairs(labels: Mapping[str, str]) -> list[str]:
    """`key=value` for each label: how the logs name them."""
    return [f"{key}={value}" for key, value in labels.items()]


def taint_swap_fields(node_name: str, add: Sequence[Taint], remove: Sequence[Taint]) -> dict[str, Any]:
    """The log fields of a taint swap: the node, and `key:effect` for each taint added and removed."""
    return {
        "node": node_name,
        "added": [f"{t['key']}:{t['effect']}" for t in add],
        "removed": [f"{t['key']}:{t['effect']}" for t in remove],
    }


class TaintWrite(NamedTuple):
    """A node's whole taint list to write, and the resourceVersion it was computed from."""

    taints: list[dict[str, Any]]
    resource_version: str


class KubeNodeLifecycleApi:
    def __init__(
        self,
        api_client: client.ApiClient,
        fence: WriteFence,
        clock: Clock | None = None,
        cache: StoreReader[NodeView] | None = None,
    ) -> None:
        self._core = client.CoreV1Api(api_client)
        self._fence = fence
        self.clock = clock or RealClock()  # the monitor's: timeAdded, lastTransitionTime and the backoff
        self._cache = cache

    def read_node(self, node_name: str) -> NodeView | None:
        node = read_node_json(self._core, node_name, WORKER_REQUEST_TIMEOUT)
        return None if node is None else node_view(node)

    def read_lease_renew_time(self, node_name: str) -> str | None:
        try:
            lease = request_json(
                self._core.api_client,
                "GET",
                NODE_LEASE_PATH,
                path_params={"name": node_name},
                timeout=WORKER_REQUEST_TIMEOUT,
            )
        except ApiException as error:
            if is_not_found(error):
                return None
            raise
        return str((lease.get("spec") or {}).get("renewTime") or "") or None

    def measure_server_clock(self) -> ServerClock:
        return server_clock.measure(self._core.api_client, WORKER_REQUEST_TIMEOUT)

    def swap_taints(self, node_name: str, add: Sequence[Taint], remove: Sequence[Taint]) -> Literal[True] | None:
        cached = self._cache.get(node_name) if self._cache is not None else None
        attempt = 1
        while True:
            write = self._cached_write(cached, add, remove)
            cached = None  # after a conflict, always a fresh read
            if write is None:
                node = read_node_json(self._core, node_name, WORKER_REQUEST_TIMEOUT)
                if node is None:
                    return None  # the node is gone: nothing to taint
                write = self._fresh_write(node, add, remove)
                if write is None:
                    return True  # the node has them already
            self._fence.require(TAINTS_ACTION, f"node {node_name}")
            body = {"metadata": {"resourceVersion": write.resource_version}, "spec": {"taints": write.taints}}
            try:
                release(strategic_merge(self._core.patch_node, node_name, body=body))
            except ApiException as error:
                if is_not_found(error):
                    return None
                if is_conflict(error) and attempt < TAINT_WRITE_ATTEMPTS:
                    attempt += 1
                    self.clock.sleep(CONFLICT_BACKOFF * (1 + random.random()))
                    continue
                raise
            log.info("updated taints", extra=taint_swap_fields(node_name, add, remove))
            return True

    def _cached_write(
        self, cached: NodeView | None, add: Sequence[Taint], remove: Sequence[Taint]
    ) -> TaintWrite | None:
        """The taint list to write against the cached view, or None: read the node live. A cached view is
        trusted to write against (a stale one costs a 409), not to skip a write: the caller may know it is
        behind (a taint written this pass that the informer has not delivered yet), so a cache that sees
        nothing to change is read live."""
        if cached is None or not cached.resource_version:
            return None
        wanted = taints_to_write(cached.taints, add, remove, self.clock.now())
        return None if wanted is None else TaintWrite(wanted, cached.resource_version)

    def _fresh_write(self, node: dict[str, Any], add: Sequence[Taint], remove: Sequence[Taint]) -> TaintWrite | None:
        """The taint list to write against the node read live; None when it has it already."""
        wanted = taints_to_write((node.get("spec") or {}).get("taints") or [], add, remove, self.clock.now())
        return None if wanted is None else TaintWrite(wanted, node["metadata"]["resourceVersion"])

    def post_conditions(self, node: NodeView, conditions: Sequence[dict[str, Any]]) -> Literal[True] | None:
        # Against the cached resourceVersion: if the kubelet posted since, our Unknown must not win (409).
        self._fence.require(CONDITIONS_ACTION, f"node {node.name}")
        body = {"metadata": {"resourceVersion": node.resource_version}, "status": {"conditions": list(conditions)}}
        if not write_unless_gone(lambda: strategic_merge(self._core.patch_node_status, node.name, body=body)):
            return None
        log.info(
            "node conditions set to Unknown", extra={"node": node.name, "conditions": [c["type"] for c in conditions]}
        )
        return True

    def set_labels(self, node: NodeView, labels: Mapping[str, str]) -> Literal[True] | None:
        # Against the cached resourceVersion the labels were computed from: a node changed since
        # (its GA labels too, perhaps) fails with 409 and is reconciled again from the fresh view.
        self._fence.require(LABELS_ACTION, f"node {node.name}")
        body = {"metadata": {"resourceVersion": node.resource_version, "labels": dict(labels)}}
        if not write_unless_gone(lambda: strategic_merge(self._core.patch_node, node.name, body=body)):
            return None  # the node is gone: nothing to label
        log.info("updated labels", extra={"node": node.name, "labels": label_pairs(labels)})
        return True

    def mark_pod_not_ready(self, pod: PodView) -> Literal[True] | None:
        self._fence.require(POD_NOT_READY_ACTION, f"pod {pod.key}")
        body = {
            "metadata": {"uid": pod.uid},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "False", "lastTransitionTime": format_time(self.clock.now())}
                ]
            },
        }
        return write_unless_gone(
            lambda: strategic_merge(self._core.patch_namespaced_pod_status, pod.name, pod.namespace, body=body),
            replaced_is_gone=True,  # the uid in the body: another pod with the same name is left alone
        )


V = TypeVar("V", bound=Keyed)


class OverlaidStore(Generic[V]):
    """A store read through `_overlaid`: each view as the dry run's logged writes would have left it.

    `_recorded` holds, by key, what a logged write left; it stands until the real view moves on.
    """

    def __init__(self, store: StoreReader[V]) -> None:
        self._store = store
        self._recorded: dict[str, V] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> V | None:
        return self._overlaid(self._store.get(key))

    def list(self) -> builtins.list[V]:
        return [view for view in map(self._overlaid, self._store.list()) if view is not None]

    def by_index(self, value: Hashable) -> builtins.list[V]:
        return [view for view in map(self._overlaid, self._store.by_index(value)) if view is not None]

    def _overlaid(self, view: V | None) -> V | None:
        if view is None:
            return None
        with self._lock:
            recorded = self._recorded.get(view.key)
            if recorded is None:
                return view
            if self._moved_on(view, recorded):  # the real view changed since the write was logged: it wins
                del self._recorded[view.key]
                return view
        return self._as_written(view, recorded)

    def _moved_on(self, real: V, recorded: V) -> bool:
        raise NotImplementedError

    def _as_written(self, real: V, recorded: V) -> V:
        raise NotImplementedError


class DryRunPods(OverlaidStore[PodView]):
    """--dry-run: the pods as the monitor's logged NotReady marks would have left them.

    A pod the monitor would have marked reads Ready=False until the real pod changes (the store hands
    out a new view), so a pod on a node that stays not ready is announced once, not on every pass.
    """

    SWEEP_FLOOR = 1024  # entries kept before the first sweep of pods changed or gone

    def __init__(self, pods: StoreReader[PodView]) -> None:
        super().__init__(pods)  # `_recorded`: pod key -> the real view it would have been marked from
        self._pods = pods
        self._sweep_at = self.SWEEP_FLOOR

    def would_mark(self, pod: PodView) -> None:
        real = self._pods.get(pod.key)
        if real is None or real.uid != pod.uid:
            return  # gone, or replaced by another pod with the same name: nothing would have been written
        with self._lock:
            self._recorded[pod.key] = real
            if len(self._recorded) > self._sweep_at:  # forget the pods changed or deleted since (amortized O(1))
                self._recorded = {key: view for key, view in self._recorded.items() if self._pods.get(key) is view}
                self._sweep_at = max(self.SWEEP_FLOOR, 2 * len(self._recorded))

    def _moved_on(self, real: PodView, recorded: PodView) -> bool:
        return recorded is not real  # the store hands out a new view when the pod changes

    def _as_written(self, real: PodView, recorded: PodView) -> PodView:
        return replace(real, ready="False")


class DryRunNodeLifecycleApi(OverlaidStore[NodeView]):
    """--dry-run: the monitor decides as usual, but its writes are logged, not made.

    The monitor reads its nodes through this too (`get`, `list`): each node as it would be had the
    writes been made, until the real node changes (a new resourceVersion), so a dry run announces
    each transition once instead of on every pass; and its pods through `DryRunPods`, given here,
    which shows each pod it would have marked NotReady as marked. Beside the built-in node lifecycle
    controller (a managed cluster), this observes without fighting it.
    """

    def __init__(
        self, real: KubeNodeLifecycleApi, nodes: StoreReader[NodeView], pods: DryRunPods | None = None
    ) -> None:
        super().__init__(nodes)  # `_recorded`: by name, with the resourceVersion of the node it was made from
        self._real = real
        self._nodes = nodes
        self._pods = pods

    def _moved_on(self, real: NodeView, recorded: NodeView) -> bool:
        return recorded.resource_version != real.resource_version

    def _as_written(self, real: NodeView, recorded: NodeView) -> NodeView:
        return recorded

    def read_node(self, node_name: str) -> NodeView | None:
        return self._overlaid(self._real.read_node(node_name))

    def read_lease_renew_time(self, node_name: str) -> str | None:
        return self._real.read_lease_renew_time(node_name)  # a read: made for real

    def measure_server_clock(self) -> ServerClock:
        return self._real.measure_server_clock()  # reads: made for real

    def swap_taints(self, node_name: str, add: Sequence[Taint], remove: Sequence[Taint]) -> Literal[True] | None:
        node = self.get(node_name)
        if node is None:
            return None
        taints = tuple(updated_taints(node.taints, add, remove, self._real.clock.now()))
        no_execute = tuple(t for t in taints if t.get("effect") == NO_EXECUTE)
        with self._lock:
            self._recorded[node_name] = replace(node, taints=taints, no_execute_taints=no_execute)
        log.info("dry run: would update taints", extra=taint_swap_fields(node_name, add, remove))
        return True

    def post_conditions(self, node: NodeView, conditions: Sequence[dict[str, Any]]) -> Literal[True] | None:
        current = self.get(node.name) or node
        by_type = {c["type"]: c for c in current.conditions} | {c["type"]: dict(c) for c in conditions}
        with self._lock:
            self._recorded[node.name] = replace(current, conditions=tuple(by_type.values()))
        log.info(
            "dry run: would set node conditions to Unknown",
            extra={"node": node.name, "conditions": [c["type"] for c in conditions]},
        )
        return True

    def set_labels(self, node: NodeView, labels: Mapping[str, str]) -> Literal[True] | None:
        current = self.get(node.name) or node
        with self._lock:
            self._recorded[node.name] = replace(current, labels=tuple((current.label_map | dict(labels)).items()))
        log.info("dry run: would update labels", extra={"node": node.name, "labels": label_pairs(labels)})
        return True

    def mark_pod_not_ready(self, pod: PodView) -> Literal[True] | None:
        if self._pods is not None:
            self._pods.would_mark(pod)
        log.info("dry run: would mark pod NotReady", extra={"pod": pod.key, "node": pod.node_name})
        return True
