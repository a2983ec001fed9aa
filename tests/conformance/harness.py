"""An in-memory cluster for the node lifecycle conformance ports (tests/conformance/test_node_lifecycle_controller.py).

Upstream's tests drive `monitorNodeHealth` / `doNoExecuteTaintingPass` against a fake clientset
and a fixed `nc.now`; this harness does the same for taintkeeper's `NodeLifecycleMonitor`:

- objects are kept as raw API JSON (camelCase dicts) and handed to the monitor as the slim views
  `controller.objects` builds from them (`node_view`, `pod_view`, `lease_view`), as the informers do;
- the clock is `controller.clock.FakeClock`, set to upstream's `fakeNow` and moved by its `timeToPass`;
- the API edge applies every write to the stored JSON (so the next pass sees it, like upstream's
  `syncNodeStore` after an update) and records it; failures can be injected per call;
- events are recorded as `Event` tuples.

Nothing here decides anything: all decisions are the monitor's.
"""

from __future__ import annotations

import builtins
import copy
import inspect
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from controller.clock import FakeClock
from controller.nodelifecycle.decision import MonitorSettings
from controller.nodelifecycle.monitor import NodeLifecycleMonitor
from controller.objects import LeaseView, NodeView, PodView, lease_view, node_view, pod_view
from kube.clock_offset import ClockOffset, ServerClock
from kube.events import PodRef
from kube.timestamps import format_micro_time, format_time
from tests.support.work import work_off

Json = dict[str, Any]

READY = "Ready"
NO_EXECUTE = "NoExecute"
NO_SCHEDULE = "NoSchedule"
NOT_READY_KEY = "node.kubernetes.io/not-ready"
UNREACHABLE_KEY = "node.kubernetes.io/unreachable"

# The upstream test file's constants (node_lifecycle_controller_test.go, 1.32+): grace 50 s,
# startup grace 60 s, period 5 s, every rate 100000/s, large-cluster threshold 20, threshold 0.55.
UPSTREAM_TEST_SETTINGS = MonitorSettings(
    node_monitor_period=5.0,
    node_monitor_grace_period=50.0,
    node_startup_grace_period=60.0,
    node_eviction_rate=100000.0,
    secondary_node_eviction_rate=100000.0,
    large_cluster_size_threshold=20,
    unhealthy_zone_threshold=0.55,
)


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    """metav1.Date(...) in UTC, as epoch seconds (the fake clock's unit)."""
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


def zone_id(region: str, zone: str) -> str:
    """Upstream testutil.CreateZoneID: region, a NUL between colons, zone."""
    return f"{region}:\x00:{zone}"


def zone_labels(region: str, zone: str) -> dict[str, str]:
    """The four failure-domain labels upstream's nodes carry (stable topology.* and beta failure-domain.*)."""
    return {
        "topology.kubernetes.io/region": region,
        "topology.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/region": region,
        "failure-domain.beta.kubernetes.io/zone": zone,
    }


def condition(condition_type: str, status: str, heartbeat: float, transition: float) -> Json:
    return {
        "type": condition_type,
        "status": status,
        "lastHeartbeatTime": format_time(heartbeat),
        "lastTransitionTime": format_time(transition),
    }


def ready(status: str, heartbeat: float, transition: float) -> Json:
    return condition(READY, status, heartbeat, transition)


def node_json(
    name: str,
    *,
    created: float,
    conditions: Iterable[Json] = (),
    labels: dict[str, str] | None = None,
    uid: str | None = None,
    taints: Iterable[Json] = (),
    unschedulable: bool = False,
) -> Json:
    spec: Json = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid or f"uid-{name}",
            "creationTimestamp": format_time(created),
            "labels": dict(labels or {}),
        },
        "spec": spec,
        "status": {"conditions": [dict(c) for c in conditions]},
    }


def pod_json(name: str, node: str, *, namespace: str = "default", ready_status: str | None = "True") -> Json:
    """Upstream testutil.NewPod: a pod bound to `node` whose Ready condition is True."""
    conditions = [] if ready_status is None else [{"type": "Ready", "status": ready_status}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": {"nodeName": node},
        "status": {"conditions": conditions},
    }


def lease_json(node: str, renew: float) -> Json:
    """Upstream createNodeLease: the node's Lease in kube-node-lease, renewed at `renew`."""
    return {
        "metadata": {"name": node, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": node, "renewTime": format_micro_time(renew)},
    }


@dataclass(frozen=True)
class Event:
    kind: str  # "Node" or "Pod"
    name: str  # node name, or namespace/name of the pod
    uid: str
    reason: str
    message: str
    type: str


@dataclass(frozen=True)
class Write:
    what: str  # "status" | "taints" | "labels" | "pod-status"
    name: str
    detail: Any
    ok: bool = True


class _Nodes:
    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def get(self, key: str) -> NodeView | None:
        return self._cluster.node_views.get(key)

    def list(self) -> builtins.list[NodeView]:
        return list(self._cluster.node_views.values())

    def by_index(self, value: Hashable) -> builtins.list[NodeView]:
        raise AssertionError("the node store has no index")


class _Leases:
    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def get(self, key: str) -> LeaseView | None:
        return self._cluster.lease_views.get(key)

    def list(self) -> builtins.list[LeaseView]:
        return list(self._cluster.lease_views.values())

    def by_index(self, value: Hashable) -> builtins.list[LeaseView]:
        raise AssertionError("the lease store has no index")


class _Pods:
    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def get(self, key: str) -> PodView | None:
        return self._cluster.pod_views.get(key)

    def list(self) -> builtins.list[PodView]:
        return list(self._cluster.pod_views.values())

    def by_index(self, value: Hashable) -> builtins.list[PodView]:
        node_name = str(value)
        cluster = self._cluster
        if cluster.fail_pod_lists > 0:
            cluster.fail_pod_lists -= 1
            raise RuntimeError(f"failed to get Pods assigned to node {node_name}")
        return [cluster.pod_views[key] for key in sorted(cluster.pods_by_node.get(node_name, ()))]


class _Api:
    """The monitor's write edge (NodeLifecycleApi) and event sink, applied to the stored JSON."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def read_node(self, node_name: str) -> NodeView | None:
        return self._cluster.node_views.get(node_name)

    def read_lease_renew_time(self, node_name: str) -> str | None:
        lease = self._cluster.lease_views.get(node_name)  # the informer's view is the API's here
        return lease.renew_time if lease is not None else None

    def measure_server_clock(self) -> ServerClock:
        # offset None (the default): nodes first seen are judged as upstream
        return ServerClock(self._cluster.server_clock, self._cluster.server_version)

    def post_conditions(self, node: NodeView, conditions: Sequence[dict[str, Any]]) -> Literal[True] | None:
        cluster = self._cluster
        raw = cluster.nodes.get(node.name)
        posted = [dict(c) for c in conditions]
        if raw is None:
            cluster.writes.append(Write("status", node.name, posted, ok=False))
            return None
        if cluster.fail_status_writes > 0 or raw["metadata"]["resourceVersion"] != node.resource_version:
            if cluster.fail_status_writes > 0:
                cluster.fail_status_writes -= 1
            cluster.writes.append(Write("status", node.name, posted, ok=False))
            raise RuntimeError("fake error")
        current = raw["status"].setdefault("conditions", [])
        for new in posted:
            for i, old in enumerate(current):
                if old.get("type") == new["type"]:
                    current[i] = dict(new)
                    break
            else:
                current.append(dict(new))
        cluster.store_node(raw)
        cluster.writes.append(Write("status", node.name, posted))
        return True

    def swap_taints(
        self, node_name: str, add: Sequence[Mapping[str, Any]], remove: Sequence[Mapping[str, Any]]
    ) -> Literal[True] | None:
        cluster = self._cluster
        raw = cluster.nodes.get(node_name)
        detail = (
            tuple(sorted(f"{t['key']}:{t['effect']}" for t in add)),
            tuple(sorted(f"{t['key']}:{t['effect']}" for t in remove)),
        )
        if raw is None:
            cluster.writes.append(Write("taints", node_name, detail, ok=False))
            return None
        if cluster.fail_taint_writes > 0:
            cluster.fail_taint_writes -= 1
            cluster.writes.append(Write("taints", node_name, detail, ok=False))
            raise RuntimeError("fake error")
        gone = {(t["key"], t["effect"]) for t in remove}
        taints = [t for t in raw["spec"].get("taints") or [] if (t.get("key"), t.get("effect")) not in gone]
        for taint in add:
            if any((t.get("key"), t.get("effect")) == (taint["key"], taint["effect"]) for t in taints):
                continue
            new = {"key": taint["key"], "effect": taint["effect"]}
            if taint.get("value"):
                new["value"] = taint["value"]
            if taint["effect"] == NO_EXECUTE:
                new["timeAdded"] = format_time(cluster.clock.now())
            taints.append(new)
        raw["spec"]["taints"] = taints
        cluster.store_node(raw)
        cluster.writes.append(Write("taints", node_name, detail))
        return True

    def set_labels(self, node: NodeView, labels: Mapping[str, str]) -> Literal[True] | None:
        cluster = self._cluster
        raw = cluster.nodes.get(node.name)
        if raw is None:
            cluster.writes.append(Write("labels", node.name, dict(labels), ok=False))
            return None
        if raw["metadata"]["resourceVersion"] != node.resource_version:
            cluster.writes.append(Write("labels", node.name, dict(labels), ok=False))
            raise RuntimeError("fake conflict")
        raw["metadata"].setdefault("labels", {}).update(labels)
        cluster.store_node(raw)
        cluster.writes.append(Write("labels", node.name, dict(labels)))
        return True

    def mark_pod_not_ready(self, pod: PodView) -> Literal[True] | None:
        cluster = self._cluster
        if cluster.fail_pod_status_writes > 0:
            cluster.fail_pod_status_writes -= 1
            cluster.writes.append(Write("pod-status", pod.key, "Ready=False", ok=False))
            raise RuntimeError("fake error")
        raw = cluster.pods[pod.key]
        conditions = raw["status"].setdefault("conditions", [])
        for c in conditions:
            if c.get("type") == "Ready":
                c["status"] = "False"
                break
        else:
            conditions.append({"type": "Ready", "status": "False"})
        cluster.store_pod(raw)
        cluster.writes.append(Write("pod-status", pod.key, "Ready=False"))
        return True

    def node_event(self, name: str, uid: str, reason: str, message: str, event_type: str = "Normal") -> None:
        self._cluster.events.append(Event("Node", name, uid, reason, message, event_type))

    def pod_event(self, pod: PodRef, reason: str, message: str, event_type: str = "Normal") -> None:
        self._cluster.events.append(Event("Pod", f"{pod.namespace}/{pod.name}", pod.uid, reason, message, event_type))


class Cluster:
    """Stores, API edge and clock around one NodeLifecycleMonitor (active, as the leader)."""

    def __init__(self, now: float, settings: MonitorSettings = UPSTREAM_TEST_SETTINGS) -> None:
        self.clock = FakeClock(now)
        self.nodes: dict[str, Json] = {}
        self.node_views: dict[str, NodeView] = {}
        self.lease_views: dict[str, LeaseView] = {}
        self.pods: dict[str, Json] = {}
        self.pod_views: dict[str, PodView] = {}
        self.pods_by_node: dict[str, set[str]] = {}
        self.writes: list[Write] = []
        self.events: list[Event] = []
        self.pass_errors: list[Exception] = []
        self.fail_status_writes = 0
        self.fail_taint_writes = 0
        self.fail_pod_status_writes = 0
        self.fail_pod_lists = 0
        self.server_clock: ClockOffset | None = None  # what the API edge's clock measurement answers
        self.server_version = "v1.37.2"  # and the version it reads
        self._version = 0
        self.settings = settings
        self.monitor = self._new_monitor()

    def _new_monitor(self) -> NodeLifecycleMonitor:
        api = _Api(self)
        options: dict[str, Any] = {"clock": self.clock}
        if "sleep" in inspect.signature(NodeLifecycleMonitor).parameters:
            options["sleep"] = lambda seconds: None  # retries within a pass must not sleep for real
        monitor = NodeLifecycleMonitor(_Nodes(self), _Leases(self), _Pods(self), api, api, self.settings, **options)
        monitor.activate()
        return monitor

    def restart(self) -> None:
        """The controller restarts: a new monitor, with nothing of the old one's memory, leads at once."""
        self.monitor = self._new_monitor()

    def hand_over(self) -> None:
        """The Lease is lost and won again (a new term): the same monitor starts from a clean state."""
        self.monitor.deactivate()
        self.monitor.activate()

    # -- the objects (what a kubelet, a user or upstream's fake clientset changes) ------------------------

    def store_node(self, raw: Json) -> None:
        self._version += 1
        raw["metadata"]["resourceVersion"] = str(self._version)
        self.nodes[raw["metadata"]["name"]] = raw
        self.node_views[raw["metadata"]["name"]] = node_view(raw)

    def put_node(self, raw: Json) -> None:
        """Create or replace a whole node (upstream fakeNodeHandler.Update / Existing = ...)."""
        self.store_node(copy.deepcopy(raw))

    def set_conditions(self, name: str, conditions: Iterable[Json]) -> None:
        """Replace a node's status conditions (upstream `Existing[i].Status = newStatus`)."""
        raw = self.nodes[name]
        raw["status"] = {"conditions": [dict(c) for c in conditions]}
        self.store_node(raw)

    def delete_node(self, name: str) -> None:
        self.nodes.pop(name)
        self.node_views.pop(name)

    def put_lease(self, raw: Json | None) -> None:
        if raw is not None:
            self.lease_views[raw["metadata"]["name"]] = lease_view(raw)

    def store_pod(self, raw: Json) -> None:
        key = f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"
        old = self.pod_views.get(key)
        if old is not None:
            self.pods_by_node.get(old.node_name, set()).discard(key)
        self.pods[key] = raw
        view = pod_view(raw)
        self.pod_views[key] = view
        self.pods_by_node.setdefault(view.node_name, set()).add(key)

    def put_pod(self, raw: Json) -> PodView:
        self.store_pod(copy.deepcopy(raw))
        return self.pod_views[f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"]

    # -- time and the controller's loops ----------------------------------------------------------------

    def advance_to(self, when: float) -> None:
        assert when >= self.clock.now(), "the fake clock only moves forward"
        self.clock.advance(when - self.clock.now())

    def monitor_pass(self, *, as_the_loop_does: bool = False) -> None:
        """One monitorNodeHealth. With `as_the_loop_does`, an exception is logged and kept, as `run()` does."""
        if not as_the_loop_does:
            self.monitor.monitor_pass()
            return
        try:
            self.monitor.monitor_pass()
        except Exception as error:
            self.pass_errors.append(error)

    def tainting_passes(self, rounds: int = 20, step: float = 1e-5) -> None:
        """doNoExecuteTaintingPass until the queues are drained.

        Upstream's limiter runs on the real clock, so at 100000/s a single Try hands out a token per
        node; taintkeeper's bucket reads the fake clock, so the clock moves 10 us (one token at
        100000/s) between passes. 20 rounds are 200 us: far below the 50 ms retry of a node without
        a Ready condition, and far below any grace period.
        """
        for _ in range(rounds):
            self.monitor.tainting_pass()
            self.clock.advance(step)

    def no_schedule_sync(self, name: str) -> None:
        """Upstream doNoScheduleTaintingPass for one node; raises as its error."""
        self.monitor.sync_no_schedule_taints(name)

    def reconcile_labels(self, name: str) -> None:
        """Upstream reconcileNodeLabels for one node; raises as its error."""
        self.monitor.reconcile_node_labels(name)

    def deliver_pod_event(self, old: PodView | None, new: PodView | None) -> bool:
        """Hand a pod informer event to the monitor (upstream podUpdated + processPod); False if it has no handler."""
        handler = getattr(self.monitor, "on_pod_change", None)
        if handler is None:
            return False
        handler(old, new)
        work_off(self.monitor.pod_queue, self.monitor.sync_pod)
        return True

    # -- what to look at ------------------------------------------------------------------------------------

    def taints(self, name: str, effect: str | None = None) -> builtins.list[tuple[str, str]]:
        return sorted(
            (t["key"], t["effect"])
            for t in self.nodes[name]["spec"].get("taints") or []
            if effect is None or t.get("effect") == effect
        )

    def no_execute_keys(self, name: str) -> builtins.list[str]:
        return [key for key, _ in self.taints(name, NO_EXECUTE)]

    def conditions(self, name: str) -> builtins.list[Json]:
        return [dict(c) for c in self.nodes[name]["status"].get("conditions") or []]

    def ready_status(self, name: str) -> str | None:
        return next((c["status"] for c in self.conditions(name) if c["type"] == READY), None)

    def labels(self, name: str) -> dict[str, str]:
        return dict(self.nodes[name]["metadata"].get("labels") or {})

    def label_writes(self) -> builtins.list[Write]:
        return [w for w in self.writes if w.what == "labels"]

    def status_writes(self, name: str | None = None) -> builtins.list[Write]:
        return [w for w in self.writes if w.what == "status" and (name is None or w.name == name)]

    def pod_status_attempts(self) -> builtins.list[Write]:
        """Every pods/status update the monitor sent, failed ones included (upstream counts actions)."""
        return [w for w in self.writes if w.what == "pod-status"]

    def pods_marked_not_ready(self) -> builtins.list[str]:
        return sorted(key for key, view in self.pod_views.items() if view.ready == "False")
