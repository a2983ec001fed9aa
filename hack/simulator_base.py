"""The base of the Simulator (hack/simulator_api.py): the constructor with the state every part
shares, a node's queued work (its generation, its calls in flight, the heap of its beats), and the
plumbing every part uses: one counted API call, calls in parallel on the pool."""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from concurrent import futures
from typing import Any, TypeVar

from kubernetes import client

from hack.simulator_pool import _PriorityPool
from hack.simulator_state import Json, Stats, _Node, _TerminatingPod
from kube.request import send

T = TypeVar("T")
R = TypeVar("R")


class SimulatorBase:
    """The Simulator's state and the calls on it that registration, heartbeats, pods and the pod
    watch all make. The Simulator class (hack/simulator_api.py) is built on it."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        lease_period: float = 10.0,
        status_period: float = 60.0,
        node_prefix: str = "sim",
        clock: Callable[[], float] = time.time,
        workers: int = 6,
        request_timeout: float = 10.0,
    ) -> None:
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

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Json | None = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str = "application/json",
        stream: bool = False,
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        """One API call with raw JSON (kube/request.py says why not the generated methods), counted."""
        with self._lock:
            self._stats.api_calls += 1
        response = send(
            self.api_client,
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            timeout=timeout or self.request_timeout,
        )
        if stream:
            return response.response
        response.read()
        return json.loads(response.data) if response.data else {}
