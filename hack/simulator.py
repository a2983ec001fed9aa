"""Node simulator: plays the kubelets of many Nodes against a kube-apiserver, for the integration
tests, the demo and scale runs. There are no containers: only what a kubelet writes to the API.

What each simulated kubelet does (as a 1.20 kubelet would, in API terms):
* registers its Node (zone/region/hostname/os labels, 4 CPU, 16Gi, 110 pods) and posts its
  status through the status subresource: Ready=True (KubeletReady), Memory/Disk/PID pressure and
  NetworkUnavailable False;
* owns a Lease in kube-node-lease (holder = node, 40 s duration, ownerReference to the Node) and
  renews it every lease period; re-posts its NodeStatus every status period (fresh
  lastHeartbeatTime, statuses kept). Nodes are spread over each period so hundreds of them
  don't renew at once;
* finishes graceful pod deletions: a pod on a live simulated node whose deletionTimestamp has
  passed is deleted with grace 0. On a node whose heartbeats are stopped (a crash or a partition)
  the pod stays Terminating, as in a real cluster, until the heartbeats resume.

Python API (thread-based: one scheduler thread, one pod-watch thread and a small worker pool)::

    sim = Simulator(api_client, lease_period=10, status_period=60, node_prefix="sim")
    sim.start()
    nodes = sim.add_nodes(10, zones=["a", "b"])
    sim.create_pods(nodes[0], 3, namespace="default")
    sim.stop_heartbeats(nodes[0]); ...; sim.resume_heartbeats(nodes[0])
    sim.set_condition(nodes[1], "MemoryPressure", "True")
    sim.stop(); sim.delete_nodes(); sim.close()     # or: with Simulator(...) as sim: ...

The documented command::

    python hack/simulator.py --kubeconfig KUBECONFIG --nodes 10 --zones a,b
        [--prefix sim] [--lease-period 10s] [--status-period 1m] [--pods-per-node N]
        [--namespace default] [--fail NODE,NODE [--fail-after SECONDS] [--recover-after SECONDS]]
        [--duration SECONDS] [--keep] [--verbose]

It creates the nodes (and N running pods per node), then runs until SIGINT/SIGTERM or for
--duration, printing one timestamped line per action and a summary line every 10 s. Periods and
times take seconds ("10", "0.5") or Go-style durations ("10s", "500ms", "1m30s"). --fail names
nodes (full names, or indexes: "0,3" means PREFIX-0,PREFIX-3) whose heartbeats stop
--fail-after seconds after the nodes are up (default 0); --recover-after resumes them that many
seconds after they failed (default: never). On exit the nodes, their leases and the pods it
created are deleted, unless --keep. A bad flag prints one error line and exits 2.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import heapq
import itertools
import json
import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python hack/simulator.py` from anywhere
    sys.path.insert(0, str(ROOT))

from kube.client import MERGE_PATCH, STRATEGIC_MERGE  # noqa: E402
from kube.errors import describe_error, is_conflict, is_not_found  # noqa: E402
from kube.request import send  # noqa: E402
from kube.timestamps import format_micro_time, format_time, parse_time  # noqa: E402
from shared.durations import parse_duration as go_duration  # noqa: E402

log = logging.getLogger("simulator")

Json = dict[str, Any]
T = TypeVar("T")
R = TypeVar("R")

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "taintkeeper-simulator"
# What a healthy kubelet posts, condition by condition (status, reason, message).
HEALTHY_CONDITIONS = {
    "Ready": ("True", "KubeletReady", "kubelet is posting ready status"),
    "MemoryPressure": ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    "NetworkUnavailable": ("False", "RouteCreated", "simulated routes are in place"),
}
# Bound pods only: unscheduled pods are deleted at once by the apiserver and no kubelet owns them.
BOUND_PODS = "spec.nodeName!="
WATCH_SECONDS = 60
LIST_PAGE_SIZE = 500  # pods per page of the relist (an informer's page)
# How often due graceful deletions are looked for; well under the 1 s grace tests use.
DELETION_SWEEP_SECONDS = 0.2

# Work priorities in the pool: heartbeats first, so a bulk pod creation never lets leases expire.
HEARTBEAT, DELETION, BULK = 0, 1, 2
LEASE, STATUS = "lease", "status"


def parse_duration(text: str) -> float:
    """Seconds from "10", "0.5", or a Go duration such as "10s", "500ms", "1m30s" (the controller's parser)."""
    try:
        return float(text.strip())
    except ValueError:
        return go_duration(text)


@dataclass
class Stats:
    """Counters since the Simulator was made; cpu_seconds is the CPU time of its own threads."""

    api_calls: int = 0
    lease_renewals: int = 0
    status_posts: int = 0
    pods_created: int = 0
    pods_removed: int = 0
    errors: int = 0
    cpu_seconds: float = 0.0


@dataclass
class _Condition:
    status: str
    reason: str
    message: str
    last_transition: str


@dataclass
class _Node:
    name: str
    index: int
    uid: str
    labels: dict[str, str]
    # Where in each period this node beats, in (0, 1]: spreads many nodes over the period.
    phase: float
    conditions: dict[str, _Condition]
    alive: bool = True
    # Bumped whenever heartbeats stop or (re)start: queued work of an earlier "life" is dropped.
    generation: int = 0
    in_flight: set[futures.Future[Any]] = field(default_factory=set)
    # Serializes building + sending a status post, so an older post never lands after a newer one.
    status_lock: threading.Lock = field(default_factory=threading.Lock)
    failing: bool = False  # to log an outage once, not on every retry
    pods: list[tuple[str, str]] = field(default_factory=list)  # (namespace, name) it created
    pod_count: int = 0

    @property
    def address(self) -> str:
        return f"172.{16 + (self.index >> 16) % 16}.{(self.index >> 8) & 255}.{self.index & 255}"


@dataclass
class _TerminatingPod:
    namespace: str
    name: str
    uid: str
    node: str
    deadline: float  # epoch seconds: its deletionTimestamp, when the grace period ends
    claimed: bool = False  # a force delete is queued or running
    retry_after: float = 0.0


class _PriorityPool:
    """A fixed set of worker threads taking work by priority (then FIFO). concurrent.futures'
    pool is FIFO only, and heartbeats must not queue behind thousands of pod creations.

    A quarter of the workers (none in a pool of fewer than 4) take the other work first: at
    thousands of nodes the heartbeats alone can keep every worker busy, and pod deletions and
    creations queued behind them would never run (the stalls of the 5,000-node envelope runs)."""

    def __init__(self, workers: int, name: str) -> None:
        self._queues: dict[int, collections.deque[tuple[futures.Future[Any], Callable[[], Any]]]] = {}
        self._ready = threading.Condition()
        self._closing = False
        self._cpu: dict[int, float] = {}
        reserved = workers // 4
        self._threads = [threading.Thread(target=self._work, args=(number, number < reserved),
                                          name=f"{name}-{number}", daemon=True)
                         for number in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, priority: int, call: Callable[[], T]) -> futures.Future[T]:
        future: futures.Future[T] = futures.Future()
        with self._ready:
            if self._closing:
                raise RuntimeError("the pool is shut down")
            self._queues.setdefault(priority, collections.deque()).append((future, call))
            self._ready.notify()
        return future

    def cpu_seconds(self) -> float:
        return sum(self._cpu.values())

    def shutdown(self) -> None:
        """End the workers once the queued work is done."""
        with self._ready:
            self._closing = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join(timeout=30)

    def _take(self, other_work_first: bool) -> tuple[futures.Future[Any], Callable[[], Any]] | None:
        with self._ready:
            while True:
                waiting = sorted(priority for priority, queued in self._queues.items() if queued)
                if waiting:
                    if other_work_first and len(waiting) > 1:
                        waiting = waiting[1:] + waiting[:1]
                    return self._queues[waiting[0]].popleft()
                if self._closing:
                    return None
                self._ready.wait()

    def _work(self, number: int, other_work_first: bool) -> None:
        while (work := self._take(other_work_first)) is not None:
            future, call = work
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as error:
                    future.set_exception(error)
            self._cpu[number] = time.thread_time()


class Simulator:
    """Simulated kubelets for Nodes named f"{node_prefix}-{i}". Thread-safe.

    Heartbeats run between start() and stop(); add_nodes, create_pods, set_condition and the
    rest also work before start(). `clock` gives the wall time written into the API objects and
    compared with deletionTimestamps; the waiting itself uses the monotonic clock.
    """

    def __init__(self, api_client: client.ApiClient, *, lease_period: float = 10.0, status_period: float = 60.0,
                 node_prefix: str = "sim", clock: Callable[[], float] = time.time, workers: int = 6,
                 request_timeout: float = 10.0) -> None:
        if lease_period <= 0 or status_period <= 0:
            raise ValueError("lease_period and status_period must be positive")
        self.api_client = api_client
        self.lease_period = lease_period
        self.status_period = status_period
        self.node_prefix = node_prefix
        self.clock = clock
        self.request_timeout = request_timeout
        self._pool = _PriorityPool(workers, f"{node_prefix}-worker")
        # One lock for all the state below; an RLock because a future's done-callback may run
        # inline, in a thread already holding it.
        self._lock = threading.RLock()
        self._wakeup = threading.Condition(self._lock)
        self._nodes: dict[str, _Node] = {}
        self._next_index = 0
        self._pod_counter = 0
        self._pod_name_counters: dict[str, int] = {}
        self._heap: list[tuple[float, int, str, str, int]] = []  # (due, seq, LEASE|STATUS, node, generation)
        self._sequence = itertools.count()
        self._terminating: dict[tuple[str, str], _TerminatingPod] = {}
        self._running = False
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._thread_cpu: dict[str, float] = {}
        self._watch_response: Any = None
        self._pods_listed = threading.Event()  # the pod watch's list is done: Terminating pods are known
        self._lease_namespace_ready = False
        self._stats = Stats()

    # ----------------------------------------------------------------------------- lifecycle

    def start(self) -> Simulator:
        """Start heartbeats (leases, status posts) and the pod watch that finishes deletions."""
        with self._lock:
            if self._running:
                return self
            self._running = True
            self._stopping.clear()
            self._pods_listed.clear()
            self._heap.clear()
            for node in self._nodes.values():
                if node.alive:
                    self._schedule_first_beats(node)
        self._threads = [threading.Thread(target=self._schedule_loop, name=f"{self.node_prefix}-scheduler",
                                          daemon=True),
                         threading.Thread(target=self._watch_loop, name=f"{self.node_prefix}-pod-watch",
                                          daemon=True)]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop all heartbeats and the pod watch; returns once no simulator call is in flight.
        Nodes keep their is_alive() state: start() again carries on."""
        with self._wakeup:
            if not self._running:
                return
            self._running = False
            self._stopping.set()
            self._heap.clear()
            in_flight = self._invalidate(self._nodes.values())
            response = self._watch_response
            self._wakeup.notify_all()
        if response is not None:
            _unblock(response)
        for thread in self._threads:
            thread.join(timeout=self.request_timeout + 5)
        self._threads = []
        futures.wait(in_flight, timeout=self.request_timeout + 5)

    def close(self) -> None:
        """stop() and end the worker threads. The api_client is the caller's and stays open."""
        self.stop()
        self._pool.shutdown()

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        try:
            self.delete_nodes()
        finally:
            self._pool.shutdown()

    # ----------------------------------------------------------------------------- nodes

    def add_nodes(self, count: int, zones: list[str] | None = None, region: str = "sim-region",
                  labels: dict[str, str] | None = None) -> list[str]:
        """Register `count` Nodes (zones round-robin), post their Ready status, create their Leases."""
        if count < 0:
            raise ValueError("count must be >= 0")
        if count == 0:
            return []
        self._ensure_lease_namespace()
        with self._lock:
            first = self._next_index
            self._next_index += count
        plans = [(first + k, zones[k % len(zones)] if zones else None, (k + 1) / count) for k in range(count)]
        names = self._parallel(BULK, lambda plan: self._register_node(*plan, region=region, labels=labels or {}),
                               plans)
        log.info("registered %d node(s) %s", len(names), _summarize(names))
        return names

    @property
    def nodes(self) -> list[str]:
        with self._lock:
            return [node.name for node in sorted(self._nodes.values(), key=lambda node: node.index)]

    def is_alive(self, name: str) -> bool:
        with self._lock:
            return self._node(name).alive

    def stop_heartbeats(self, *names: str) -> None:
        """A crash or partition: no more lease renewals, status posts or pod deletions for these
        nodes. Returns once none of their calls is in flight, so nothing lands afterwards."""
        with self._lock:
            nodes = [self._node(name) for name in names]
            for node in nodes:
                node.alive = False
            in_flight = self._invalidate(nodes)
        futures.wait(in_flight, timeout=self.request_timeout + 5)
        log.info("heartbeats stopped: %s", _summarize(names))

    def resume_heartbeats(self, *names: str) -> None:
        """The kubelets are back: post status (Ready=True again unless set_condition said otherwise)
        and renew the lease now, then beat as before; their pending pod deletions are finished."""
        with self._lock:
            nodes = [self._node(name) for name in names]
            for node in nodes:
                node.alive = True
            self._invalidate(nodes)
            generations = {node.name: node.generation for node in nodes}
        failures = self._parallel(HEARTBEAT, self._revive, nodes)
        with self._wakeup:
            now = time.monotonic()
            for node, failure in zip(nodes, failures, strict=True):
                if self._running and node.alive and node.generation == generations[node.name]:
                    # A failed first beat is retried at once by the loop, not a whole period later.
                    self._push(now if failure else now + self.lease_period, LEASE, node)
                    self._push(now if failure else now + self.status_period, STATUS, node)
            self._wakeup.notify_all()  # its Terminating pods are due now
        log.info("heartbeats resumed: %s", _summarize(names))
        for failure in failures:
            if failure is not None:
                raise failure

    def set_condition(self, name: str, type: str, status: str, reason: str = "Simulated", message: str = "") -> None:
        """Set a node condition (e.g. Ready False, MemoryPressure True) and post the status now.
        On a node with stopped heartbeats it is only recorded, and posted when they resume."""
        with self._lock:
            node = self._node(name)
            current = node.conditions.get(type)
            transition = (current.last_transition if current is not None and current.status == status
                          else format_time(self.clock()))
            node.conditions[type] = _Condition(status, reason, message, transition)
            alive = node.alive
        if alive:
            self._post_status(node)
        log.info("node %s condition %s=%s (%s)%s", name, type, status, reason, "" if alive else ", posted on resume")

    def delete_nodes(self, *names: str, delete_pods: bool = True) -> None:
        """Delete these simulated nodes (all by default) and their Leases. With delete_pods, the
        pods the simulator created on them are deleted with grace 0, as the pod GC would."""
        with self._lock:
            nodes = ([self._node(name) for name in names] if names
                     else sorted(self._nodes.values(), key=lambda node: node.index))
            for node in nodes:
                node.alive = False
            in_flight = self._invalidate(nodes)
        futures.wait(in_flight, timeout=self.request_timeout + 5)
        if delete_pods:
            pods = [(node, namespace, pod) for node in nodes for namespace, pod in node.pods]
            self._parallel(BULK, lambda item: self._force_delete_pod(item[1], item[2]), pods)
        self._parallel(BULK, self._delete_node_objects, nodes)
        with self._lock:
            for node in nodes:
                self._nodes.pop(node.name, None)
        if nodes:
            log.info("deleted %d node(s) %s and their leases", len(nodes), _summarize([n.name for n in nodes]))

    # ----------------------------------------------------------------------------- pods

    def create_pods(self, node: str, count: int = 1, namespace: str = "default",
                    tolerations: list[Json] | None = None, name_prefix: str | None = None,
                    labels: dict[str, str] | None = None, termination_grace_period: int | None = None) -> list[str]:
        """Pods bound to `node` with one busybox container, status Running and Ready (as a kubelet
        would post it), named f"{name_prefix or node}-{n}"."""
        with self._lock:
            sim_node = self._node(node)
        prefix = name_prefix or node
        names = self._parallel(BULK, lambda _: self._create_pod(sim_node, namespace, prefix, tolerations,
                                                                labels or {}, termination_grace_period),
                               range(count))
        log.info("created %d pod(s) on %s in %s: %s", len(names), node, namespace, _summarize(names))
        return names

    def wait_for_pod_list(self, timeout: float) -> bool:
        """Whether the pod watch has listed the bound pods (since start(), or since the watch last
        failed) within `timeout` seconds. Until then no Terminating pod is finished, and at 150,000
        pods the list itself loads the apiserver and etcd for minutes."""
        return self._pods_listed.wait(timeout)

    def terminating(self, node: str) -> int:
        """How many pods of `node` the simulator knows to be Terminating (its pod watch saw them)."""
        with self._lock:
            return sum(1 for pod in self._terminating.values() if pod.node == node)

    def stats(self) -> Stats:
        with self._lock:
            snapshot = Stats(**vars(self._stats))
            snapshot.cpu_seconds = self._pool.cpu_seconds() + sum(self._thread_cpu.values())
        return snapshot

    # ----------------------------------------------------------------------------- registration

    def _ensure_lease_namespace(self) -> None:
        if self._lease_namespace_ready:
            return
        try:
            self._request("POST", "/api/v1/namespaces", body={"metadata": {"name": LEASE_NAMESPACE}})
        except ApiException as error:
            if not is_conflict(error):
                raise
        self._lease_namespace_ready = True

    def _register_node(self, index: int, zone: str | None, phase: float, *, region: str,
                       labels: dict[str, str]) -> str:
        name = f"{self.node_prefix}-{index}"
        # The beta OS/arch labels too, as a real kubelet sets them: else the controller's label
        # reconciliation would write them, one PATCH per simulated node that real nodes never cost.
        node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                       "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
                       REGION_LABEL: region, **({ZONE_LABEL: zone} if zone else {}), **labels}
        try:
            created = self._request("POST", "/api/v1/nodes", body={
                "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}})
        except ApiException as error:
            if not is_conflict(error):
                raise
            # A restarted kubelet finds its Node registered already and takes it over.
            created = self._request("PATCH", f"/api/v1/nodes/{quote(name)}", body={"metadata": {"labels": node_labels}},
                                    content_type=STRATEGIC_MERGE)
            log.info("node %s existed already: adopted", name)
        now = format_time(self.clock())
        conditions = {kind: _Condition(*healthy, last_transition=now) for kind, healthy in HEALTHY_CONDITIONS.items()}
        node = _Node(name=name, index=index, uid=created["metadata"]["uid"], labels=node_labels, phase=phase,
                     conditions=conditions)
        with self._lock:
            self._nodes[name] = node
        self._post_status(node, initial=True)
        self._create_lease(node)
        with self._wakeup:
            if self._running and node.alive:
                self._schedule_first_beats(node)
                self._wakeup.notify_all()
        return name

    def _create_lease(self, node: _Node) -> None:
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": node.name, "namespace": LEASE_NAMESPACE, "ownerReferences": [
                     {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node.uid}]},
                 "spec": {"holderIdentity": node.name, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                          "renewTime": format_micro_time(self.clock())}}
        try:
            self._request("POST", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases", body=lease)
        except ApiException as error:
            if not is_conflict(error):
                raise
            self._request("PATCH", _lease_path(node.name), body={"metadata": lease["metadata"], "spec": lease["spec"]},
                          content_type=MERGE_PATCH)

    def _delete_node_objects(self, node: _Node) -> None:
        for path in (_lease_path(node.name), f"/api/v1/nodes/{quote(node.name)}"):
            try:
                self._request("DELETE", path)
            except ApiException as error:
                if not is_not_found(error):
                    raise

    # ----------------------------------------------------------------------------- heartbeats

    def _schedule_first_beats(self, node: _Node) -> None:
        now = time.monotonic()
        self._push(now + self.lease_period * node.phase, LEASE, node)
        self._push(now + self.status_period * node.phase, STATUS, node)

    def _push(self, due: float, kind: str, node: _Node) -> None:
        heapq.heappush(self._heap, (due, next(self._sequence), kind, node.name, node.generation))

    def _invalidate(self, nodes: Iterable[_Node]) -> list[futures.Future[Any]]:
        """Drop the queued work of these nodes; return their calls still in flight (lock held)."""
        in_flight: list[futures.Future[Any]] = []
        for node in nodes:
            node.generation += 1
            in_flight.extend(node.in_flight)
        return in_flight

    def _is_current(self, node: _Node, generation: int) -> bool:
        with self._lock:
            return node.alive and node.generation == generation and self._nodes.get(node.name) is node

    def _submit(self, priority: int, node: _Node, call: Callable[[], object]) -> None:
        """Queue a call for a node, tracked so stop_heartbeats can wait for it (lock held)."""
        future = self._pool.submit(priority, call)
        node.in_flight.add(future)
        future.add_done_callback(lambda done: self._forget(node, done))

    def _forget(self, node: _Node, done: futures.Future[Any]) -> None:
        with self._lock:
            node.in_flight.discard(done)

    def _schedule_loop(self) -> None:
        """The only timer: pops due heartbeats and due pod deletions and hands them to the pool."""
        while True:
            with self._wakeup:
                if self._stopping.is_set():
                    break
                now = time.monotonic()
                beats = []
                while self._heap and self._heap[0][0] <= now:
                    due, _, kind, name, generation = heapq.heappop(self._heap)
                    node = self._nodes.get(name)
                    if node is not None and node.alive and node.generation == generation:
                        beats.append((due, kind, node, generation))
                for due, kind, node, generation in beats:
                    self._submit(HEARTBEAT, node, functools.partial(self._beat, due, kind, node, generation))
                deletions = self._claim_due_deletions()
                for node, pod in deletions:
                    self._submit(DELETION, node, functools.partial(self._finish_deletion, node, pod, node.generation))
                if not beats and not deletions:
                    timeout = self._heap[0][0] - now if self._heap else 1.0
                    if any(pod.node in self._nodes for pod in self._terminating.values()):
                        timeout = min(timeout, DELETION_SWEEP_SECONDS)
                    self._wakeup.wait(max(timeout, 0.001))
            self._thread_cpu["scheduler"] = time.thread_time()

    def _beat(self, due: float, kind: str, node: _Node, generation: int) -> None:
        if not self._is_current(node, generation):
            return
        period = self.lease_period if kind == LEASE else self.status_period
        ok = self._renew_lease(node) if kind == LEASE else self._try_post_status(node)
        now = time.monotonic()
        # Fixed rate keeps the spread across nodes; after a failure the kubelet retries sooner.
        next_due = max(due + period, now) if ok else now + min(period / 4, 2.0)
        with self._wakeup:
            if self._running and node.alive and node.generation == generation:
                self._push(next_due, kind, node)
                self._wakeup.notify_all()

    def _renew_lease(self, node: _Node) -> bool:
        try:
            try:
                self._request("PATCH", _lease_path(node.name), content_type=MERGE_PATCH,
                              body={"spec": {"renewTime": format_micro_time(self.clock())}})
            except ApiException as error:
                if not is_not_found(error):
                    raise
                self._create_lease(node)  # someone deleted it: the kubelet makes a new one
                log.info("node %s: lease was missing, created it again", node.name)
        except Exception as error:
            self._note_failure(node, "lease renewal", error)
            return False
        with self._lock:
            self._stats.lease_renewals += 1
        log.debug("node %s: lease renewed", node.name)
        self._note_success(node)
        return True

    def _try_post_status(self, node: _Node) -> bool:
        try:
            self._post_status(node)
        except Exception as error:
            self._note_failure(node, "status post", error)
            return False
        self._note_success(node)
        return True

    def _post_status(self, node: _Node, *, initial: bool = False) -> None:
        with node.status_lock:
            now = format_time(self.clock())
            with self._lock:
                conditions = [{"type": kind, "status": condition.status, "reason": condition.reason,
                               "message": condition.message, "lastHeartbeatTime": now,
                               "lastTransitionTime": condition.last_transition}
                              for kind, condition in node.conditions.items()]
            status: Json = {"conditions": conditions}
            if initial:
                resources = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
                status.update(capacity=resources, allocatable=resources,
                              addresses=[{"type": "InternalIP", "address": node.address},
                                         {"type": "Hostname", "address": node.name}],
                              daemonEndpoints={"kubeletEndpoint": {"Port": 10250}},
                              nodeInfo={"machineID": node.uid.replace("-", ""), "systemUUID": node.uid,
                                        "bootID": node.uid, "kernelVersion": "5.10.0-sim", "osImage": "simulated",
                                        "containerRuntimeVersion": "sim://1.0", "kubeletVersion": "v1.20.2-sim",
                                        "kubeProxyVersion": "v1.20.2-sim", "operatingSystem": "linux",
                                        "architecture": "amd64"})
            self._request("PATCH", f"/api/v1/nodes/{quote(node.name)}/status", body={"status": status},
                          content_type=STRATEGIC_MERGE)
        with self._lock:
            self._stats.status_posts += 1
        log.debug("node %s: status posted", node.name)

    def _revive(self, node: _Node) -> Exception | None:
        """First beat after an outage; the error, if it failed. Meanwhile a lifecycle controller
        may have set conditions to Unknown: as for the kubelet, a status that differs from the
        API's is a transition. Status goes first, so the renewed lease meets a fresh Ready."""
        try:
            current = self._request("GET", f"/api/v1/nodes/{quote(node.name)}")
            on_server = {c["type"]: c.get("status") for c in (current.get("status") or {}).get("conditions") or []}
            now = format_time(self.clock())
            with self._lock:
                for kind, condition in node.conditions.items():
                    if on_server.get(kind) != condition.status:
                        condition.last_transition = now
            self._post_status(node)
        except Exception as error:
            self._note_failure(node, "status post", error)
            return error
        if not self._renew_lease(node):
            return RuntimeError(f"node {node.name}: could not renew its lease")
        return None

    def _note_failure(self, node: _Node, what: str, error: Exception) -> None:
        with self._lock:
            self._stats.errors += 1
            first = not node.failing
            node.failing = True
        if first:  # an apiserver outage would otherwise log every retry of every node
            log.warning("node %s: %s failed, retrying: %s", node.name, what, describe_error(error))

    def _note_success(self, node: _Node) -> None:
        if node.failing:
            with self._lock:
                node.failing = False
            log.info("node %s: heartbeats get through again", node.name)

    # ----------------------------------------------------------------------------- pods

    def _create_pod(self, node: _Node, namespace: str, prefix: str, tolerations: list[Json] | None,
                    labels: dict[str, str], termination_grace_period: int | None) -> str:
        spec: Json = {"nodeName": node.name, "containers": [
            {"name": "app", "image": "busybox", "command": ["sleep", "1000000"]}]}
        if tolerations is not None:
            spec["tolerations"] = tolerations
        if termination_grace_period is not None:
            spec["terminationGracePeriodSeconds"] = termination_grace_period
        for _ in range(100):  # names left over from an earlier run are skipped
            with self._lock:
                number = self._pod_name_counters.get(prefix, 0)
                self._pod_name_counters[prefix] = number + 1
            name = f"{prefix}-{number}"
            body = {"apiVersion": "v1", "kind": "Pod", "spec": spec, "metadata": {
                "name": name, "namespace": namespace, "labels": {**labels, MANAGED_BY_LABEL: MANAGED_BY}}}
            try:
                created = self._request("POST", f"/api/v1/namespaces/{quote(namespace)}/pods", body=body)
                break
            except ApiException as error:
                if not is_conflict(error):
                    raise
        else:
            raise RuntimeError(f"no free pod name with prefix {prefix!r} in {namespace}")
        with self._lock:
            node.pods.append((namespace, name))
            self._pod_counter += 1
            pod_number = self._pod_counter
        # The apiserver resets the status on create; the kubelet's status post makes it Running.
        now = format_time(self.clock())
        ready = [{"type": kind, "status": "True", "lastTransitionTime": now, "lastProbeTime": None}
                 for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]
        pod_ip = f"10.{(pod_number >> 16) & 255}.{(pod_number >> 8) & 255}.{pod_number & 255}"
        status = {"phase": "Running", "conditions": ready, "hostIP": node.address, "podIP": pod_ip,
                  "podIPs": [{"ip": pod_ip}], "startTime": now,
                  "containerStatuses": [{"name": "app", "ready": True, "started": True, "restartCount": 0,
                                         "image": "docker.io/library/busybox:latest",
                                         "imageID": "docker.io/library/busybox@sha256:" + "0" * 64,
                                         "containerID": f"sim://{created['metadata']['uid']}",
                                         "state": {"running": {"startedAt": now}}}]}
        self._request("PATCH", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/status",
                      body={"status": status}, content_type=STRATEGIC_MERGE)
        with self._lock:
            self._stats.pods_created += 1
        return name

    def _force_delete_pod(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """DELETE with grace 0 (only that very pod when uid is given); False if it was gone already."""
        options: Json = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        if uid:
            options["preconditions"] = {"uid": uid}
        try:
            self._request("DELETE", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}", body=options)
        except ApiException as error:
            if is_not_found(error) or is_conflict(error):  # 409: the uid precondition failed, a new pod took the name
                return False
            raise
        return True

    def _claim_due_deletions(self) -> list[tuple[_Node, _TerminatingPod]]:
        """Terminating pods on live simulated nodes whose grace period is over (lock held)."""
        now = self.clock()
        due = []
        for pod in self._terminating.values():
            node = self._nodes.get(pod.node)
            if pod.claimed or node is None or not node.alive or now < pod.deadline or now < pod.retry_after:
                continue
            pod.claimed = True
            due.append((node, pod))
        return due

    def _finish_deletion(self, node: _Node, pod: _TerminatingPod, generation: int) -> None:
        if not self._is_current(node, generation):
            with self._lock:
                pod.claimed = False  # the node died meanwhile: left for its resume
            return
        try:
            removed = self._force_delete_pod(pod.namespace, pod.name, pod.uid)
        except Exception as error:
            with self._lock:
                self._stats.errors += 1
                pod.retry_after = self.clock() + 1.0
                pod.claimed = False
            log.warning("pod %s/%s on %s: deletion failed, retrying: %s", pod.namespace, pod.name, node.name,
                        describe_error(error))
            return
        with self._lock:
            pod.claimed = False
            if self._terminating.get((pod.namespace, pod.name)) is pod:
                del self._terminating[(pod.namespace, pod.name)]
            if removed:
                self._stats.pods_removed += 1
        if removed:
            log.info("pod %s/%s on %s: grace period over, containers stopped, pod deleted", pod.namespace, pod.name,
                     node.name)

    # ----------------------------------------------------------------------------- pod watch

    def _watch_loop(self) -> None:
        """List, then watch bound pods across namespaces, to learn which ones are Terminating."""
        resource_version: str | None = None
        while not self._stopping.is_set():
            try:
                if resource_version is None:
                    resource_version = self._relist()
                resource_version = self._watch(resource_version)
            except Exception as error:
                if self._stopping.is_set():
                    break
                # Seen, not hidden: until the relist ends, no Terminating pod is finished.
                log.warning("pod watch failed, listing again: %s", describe_error(error))
                resource_version = None
                self._pods_listed.clear()
                self._stopping.wait(1.0)
            finally:
                self._thread_cpu["pod-watch"] = time.thread_time()

    def _relist(self) -> str:
        """List the bound pods in pages, as an informer does: in one response the apiserver reads,
        decodes and encodes every pod of the cluster at once. Only the Terminating ones are kept."""
        pods: list[Json] = []
        started = time.monotonic()
        query = [("fieldSelector", BOUND_PODS), ("limit", str(LIST_PAGE_SIZE))]
        while True:
            listed = self._request("GET", "/api/v1/pods", query=query)
            pods.extend(pod for pod in listed.get("items") or () if pod["metadata"].get("deletionTimestamp"))
            continue_token = listed["metadata"].get("continue")
            if not continue_token:
                break
            query = [("fieldSelector", BOUND_PODS), ("limit", str(LIST_PAGE_SIZE)), ("continue", continue_token)]
        with self._wakeup:
            previous = self._terminating
            self._terminating = {}
            for pod in pods:
                self._observe(pod, previous)
            self._wakeup.notify_all()
        self._pods_listed.set()
        log.info("listed the bound pods in %.1fs: %d Terminating", time.monotonic() - started, len(pods))
        return str(listed["metadata"]["resourceVersion"])

    def _watch(self, resource_version: str) -> str | None:
        """One watch request until the server ends it; the resourceVersion to go on from, or None
        when it is too old (410 Gone) and a relist is needed."""
        query = [("fieldSelector", BOUND_PODS), ("watch", "true"), ("resourceVersion", resource_version),
                 ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(WATCH_SECONDS))]
        response = self._request("GET", "/api/v1/pods", query=query, stream=True, timeout=(5, WATCH_SECONDS + 15))
        with self._lock:
            self._watch_response = response
        if self._stopping.is_set():  # stop() came before the response was published: it won't unblock it
            response.close()
            return resource_version
        completed = False
        try:
            for line in iter_resp_lines(response):
                event = json.loads(line)
                pod = event["object"]
                if event["type"] == "ERROR":
                    if pod.get("code") == 410:
                        return None
                    raise RuntimeError(f"watch error: {pod.get('message')}")
                resource_version = pod["metadata"].get("resourceVersion") or resource_version
                if event["type"] == "DELETED":
                    with self._lock:
                        self._terminating.pop((pod["metadata"]["namespace"], pod["metadata"]["name"]), None)
                elif event["type"] != "BOOKMARK":
                    with self._wakeup:
                        self._observe(pod, self._terminating)
                        self._wakeup.notify_all()
            completed = True
            return resource_version
        finally:
            with self._lock:
                self._watch_response = None
            if completed:
                response.release_conn()
            else:
                response.close()

    def _observe(self, pod: Json, known: dict[tuple[str, str], _TerminatingPod]) -> None:
        """Track a pod that has a deletionTimestamp (lock held); `known` keeps claims across relists."""
        metadata = pod["metadata"]
        key = (metadata["namespace"], metadata["name"])
        deletion = metadata.get("deletionTimestamp")
        if not deletion:
            self._terminating.pop(key, None)
            return
        existing = known.get(key)
        if existing is not None and existing.uid == metadata["uid"]:
            existing.deadline = parse_time(deletion) or 0.0  # a second delete may have shortened the grace period
            self._terminating[key] = existing
            return
        self._terminating[key] = _TerminatingPod(namespace=key[0], name=key[1], uid=metadata["uid"],
                                                 node=pod["spec"].get("nodeName") or "",
                                                 deadline=parse_time(deletion) or 0.0)

    # ----------------------------------------------------------------------------- plumbing

    def _node(self, name: str) -> _Node:
        try:
            return self._nodes[name]
        except KeyError:
            raise ValueError(f"{name!r} is not a node of this simulator") from None

    def _parallel(self, priority: int, call: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Run call(item) for each item on the pool; results in order. Every call finishes before
        the first error, if any, is raised, so nothing runs on behind the caller's back."""
        submitted = [self._pool.submit(priority, functools.partial(call, item)) for item in items]
        futures.wait(submitted)
        return [future.result() for future in submitted]

    def _request(self, method: str, path: str, *, body: Json | None = None, query: list[tuple[str, str]] | None = None,
                 content_type: str = "application/json", stream: bool = False,
                 timeout: float | tuple[float, float] | None = None) -> Any:
        """One API call with raw JSON (kube/request.py says why not the generated methods), counted."""
        with self._lock:
            self._stats.api_calls += 1
        response = send(self.api_client, method, path, query=query, body=body, content_type=content_type,
                        timeout=timeout or self.request_timeout)
        if stream:
            return response.response
        response.read()
        return json.loads(response.data) if response.data else {}


def _lease_path(name: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{quote(name)}"


def _unblock(response: Any) -> None:
    """Wake a thread blocked reading a watch stream: shut the socket down under it."""
    try:
        response.shutdown()
    except Exception:  # already closed, or an urllib3 without shutdown()
        with contextlib.suppress(Exception):
            response.close()


def _summarize(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


# --------------------------------------------------------------------------------- command line


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, not argparse's usage block: scripts and tests read the reason.
        print(f"simulator: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _duration(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return seconds


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="simulator", description="Simulated kubelets for many Nodes (see hack/simulator.py).")
    parser.add_argument("--kubeconfig", required=True, type=Path, metavar="FILE")
    parser.add_argument("--nodes", required=True, type=_positive_int, metavar="N", help="how many nodes to simulate")
    parser.add_argument("--zones", default="", metavar="A,B", help="zones, assigned round-robin (default: none)")
    parser.add_argument("--region", default="sim-region")
    parser.add_argument("--prefix", default="sim", help="nodes are named PREFIX-0, PREFIX-1, ... (default: sim)")
    parser.add_argument("--lease-period", type=_duration, default=10.0, metavar="DURATION",
                        help="renew each Lease this often (default: 10s)")
    parser.add_argument("--status-period", type=_duration, default=60.0, metavar="DURATION",
                        help="re-post each NodeStatus this often (default: 1m)")
    parser.add_argument("--pods-per-node", type=_positive_int, default=0, metavar="N",
                        help="running pods to create on each node (default: 0)")
    parser.add_argument("--namespace", default="default", help="the pods' namespace (default: default)")
    parser.add_argument("--fail", default="", metavar="NODE,NODE", help="nodes (names or indexes) to fail")
    parser.add_argument("--fail-after", type=_duration, metavar="SECONDS",
                        help="stop their heartbeats this long after the nodes are up (default: 0)")
    parser.add_argument("--recover-after", type=_duration, metavar="SECONDS",
                        help="resume their heartbeats this long after they failed (default: never)")
    parser.add_argument("--duration", type=_duration, metavar="SECONDS",
                        help="run this long, then clean up and exit (default: until SIGINT/SIGTERM)")
    parser.add_argument("--keep", action="store_true", help="leave the nodes, leases and pods behind on exit")
    parser.add_argument("--verbose", action="store_true", help="also log every lease renewal and status post")
    args = parser.parse_args(argv)

    if args.nodes < 1:
        parser.error("--nodes must be at least 1")
    if not args.kubeconfig.is_file():
        parser.error(f"--kubeconfig: no such file: {args.kubeconfig}")
    args.zones = [zone.strip() for zone in args.zones.split(",") if zone.strip()]
    if args.lease_period <= 0 or args.status_period <= 0:
        parser.error("--lease-period and --status-period must be positive")
    if args.duration is not None and args.duration <= 0:
        parser.error("--duration must be positive")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", args.prefix):
        parser.error(f"--prefix {args.prefix!r} is not a valid DNS label")
    names = [f"{args.prefix}-{i}" for i in range(args.nodes)]
    failing = []
    for item in filter(None, (part.strip() for part in args.fail.split(","))):
        name = f"{args.prefix}-{item}" if item.isdigit() else item
        if name not in names:
            parser.error(f"--fail: {item!r} is not one of the nodes {args.prefix}-0..{args.prefix}-{args.nodes - 1}")
        failing.append(name)
    args.fail = failing
    if not failing and (args.fail_after is not None or args.recover_after is not None):
        parser.error("--fail-after and --recover-after need --fail")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stdout,
                        format="%(asctime)s.%(msecs)03d %(message)s", datefmt="%Y-%m-%dT%H:%M:%S")
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    try:
        api_client = config.new_client_from_config(config_file=str(args.kubeconfig))
    except Exception as error:
        print(f"simulator: error: cannot load {args.kubeconfig}: {error}", file=sys.stderr)
        return 2

    interrupted = threading.Event()

    def on_signal(number: int, _frame: object) -> None:
        log.info("%s received: cleaning up", signal.Signals(number).name)
        interrupted.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    simulator = Simulator(api_client, lease_period=args.lease_period, status_period=args.status_period,
                          node_prefix=args.prefix)
    try:
        simulator.start()
        nodes = simulator.add_nodes(args.nodes, zones=args.zones or None, region=args.region)
        if args.pods_per_node:
            # One caller thread per node keeps the pool busy; create_pods itself parallelizes only per node.
            with futures.ThreadPoolExecutor(4) as callers:
                list(callers.map(lambda node: simulator.create_pods(node, args.pods_per_node, args.namespace), nodes))
        log.info("%d node(s) up (lease every %gs, status every %gs)%s", len(nodes), args.lease_period,
                 args.status_period, "" if args.duration is None else f"; running for {args.duration:g}s")
        _run_timeline(simulator, args, interrupted)
    except KeyboardInterrupt:
        pass
    except Exception as error:
        log.error("failed: %s", describe_error(error))
        return 1
    finally:
        simulator.stop()
        try:
            if args.keep:
                log.info("--keep: leaving %d node(s) behind", len(simulator.nodes))
            else:
                simulator.delete_nodes()
        finally:
            simulator.close()
            api_client.close()
    return 0


def _run_timeline(simulator: Simulator, args: argparse.Namespace, interrupted: threading.Event) -> None:
    started = time.monotonic()
    events: list[tuple[float, str, Callable[[], None]]] = []
    if args.fail:
        fail_at = started + (args.fail_after or 0.0)
        events.append((fail_at, "fail", lambda: simulator.stop_heartbeats(*args.fail)))
        if args.recover_after is not None:
            events.append((fail_at + args.recover_after, "recover", lambda: simulator.resume_heartbeats(*args.fail)))
    end = None if args.duration is None else started + args.duration
    summary_every = 10.0
    next_summary = started + summary_every
    last = simulator.stats()
    last_time = started
    while not interrupted.is_set():
        now = time.monotonic()
        while events and events[0][0] <= now:
            events.pop(0)[2]()
        if end is not None and now >= end:
            log.info("--duration %gs reached", args.duration)
            return
        if now >= next_summary:
            stats = simulator.stats()
            rate = (stats.api_calls - last.api_calls) / (now - last_time)
            log.info("summary: %d lease renewals, %d status posts, %d pods removed, %d errors; %.1f API calls/s; "
                     "CPU %.2fs", stats.lease_renewals, stats.status_posts, stats.pods_removed, stats.errors, rate,
                     stats.cpu_seconds)
            last, last_time, next_summary = stats, now, now + summary_every
        wake = min([next_summary, *(t for t, _, _ in events[:1]), *([end] if end is not None else [])])
        interrupted.wait(max(wake - time.monotonic(), 0.01))


if __name__ == "__main__":
    sys.exit(main())
