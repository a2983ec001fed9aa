"""The Simulator class, the simulated kubelets' Python API (see hack/simulator.py): start and stop,
nodes (add, stop and resume heartbeats, set conditions, delete), pods (create, Terminating ones,
the pod list), stats; and the scheduler thread, the only timer, which hands due heartbeats and
due pod deletions to the pool. Its parts: hack/simulator_registration.py,
hack/simulator_heartbeats.py, hack/simulator_pods.py, hack/simulator_pod_watch.py, on
hack/simulator_base.py."""

from __future__ import annotations

import functools
import heapq
import logging
import threading
import time
from collections.abc import Sequence
from concurrent import futures

from hack.simulator_heartbeats import LEASE, STATUS
from hack.simulator_pod_watch import PodWatch, _unblock
from hack.simulator_pods import Pods
from hack.simulator_pool import BULK, DELETION, HEARTBEAT
from hack.simulator_registration import Registration
from hack.simulator_state import Json, Stats, _Condition
from kube.timestamps import format_time

log = logging.getLogger("simulator")

# How often due graceful deletions are looked for; well under the 1 s grace tests use.
DELETION_SWEEP_SECONDS = 0.2


class Simulator(Registration, Pods, PodWatch):
    """Simulated kubelets for Nodes named f"{node_prefix}-{i}". Thread-safe.

    Heartbeats run between start() and stop(); add_nodes, create_pods, set_condition and the
    rest also work before start(). `clock` gives the wall time written into the API objects and
    compared with deletionTimestamps; the waiting itself uses the monotonic clock.
    """

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
        self._threads = [
            threading.Thread(target=self._schedule_loop, name=f"{self.node_prefix}-scheduler", daemon=True),
            threading.Thread(target=self._watch_loop, name=f"{self.node_prefix}-pod-watch", daemon=True),
        ]
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

    def add_nodes(
        self,
        count: int,
        zones: list[str] | None = None,
        region: str = "sim-region",
        labels: dict[str, str] | None = None,
    ) -> list[str]:
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
        names = self._parallel(BULK, lambda plan: self._register_node(*plan, region=region, labels=labels or {}), plans)
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
            transition = (
                current.last_transition
                if current is not None and current.status == status
                else format_time(self.clock())
            )
            node.conditions[type] = _Condition(status, reason, message, transition)
            alive = node.alive
        if alive:
            self._post_status(node)
        log.info("node %s condition %s=%s (%s)%s", name, type, status, reason, "" if alive else ", posted on resume")

    def delete_nodes(self, *names: str, delete_pods: bool = True) -> None:
        """Delete these simulated nodes (all by default) and their Leases. With delete_pods, the
        pods the simulator created on them are deleted with grace 0, as the pod GC would."""
        with self._lock:
            nodes = (
                [self._node(name) for name in names]
                if names
                else sorted(self._nodes.values(), key=lambda node: node.index)
            )
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

    def create_pods(
        self,
        node: str,
        count: int = 1,
        namespace: str = "default",
        tolerations: list[Json] | None = None,
        name_prefix: str | None = None,
        labels: dict[str, str] | None = None,
        termination_grace_period: int | None = None,
    ) -> list[str]:
        """Pods bound to `node` with one busybox container, status Running and Ready (as a kubelet
        would post it), named f"{name_prefix or node}-{n}"."""
        with self._lock:
            sim_node = self._node(node)
        prefix = name_prefix or node
        names = self._parallel(
            BULK,
            lambda _: self._create_pod(
                sim_node, namespace, prefix, tolerations, labels or {}, termination_grace_period
            ),
            range(count),
        )
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


def _summarize(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")
