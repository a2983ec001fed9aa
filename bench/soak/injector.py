"""The soak's faults: a seeded catalogue drawn at random, each run on its own thread so that faults
overlap, each logged (kind, target, start, end) to the fault log the checker reads.

A few rules keep the cluster a cluster: at most two nodes lose their kubelet (or their power) at once
(of three), one
control-plane fault (apiserver, etcd) and one controller fault at a time, one fault of a kind per
node. A drawn fault that breaks a rule, or cannot start (the apiserver is down, the leader is
unknown), is not logged: only what happened is.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from bench.soak.cluster import ORACLE_CONTROLLER_MANAGERS, LocalCluster
from bench.soak.faults import WEBHOOK_FAULTS, Fault, append_fault
from bench.soak.workload import CHAOS_TAINT, OUT_OF_SERVICE
from kube.request import request_json
from kube.timestamps import format_time

log = logging.getLogger("chaos.faults")

CONTROLLER_NAMESPACE = "taintkeeper-system"
LEASE = "taintkeeper-controller"
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0  # the controller's --leader-elect-renew-deadline default (controller/options.py)
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
MAX_NODES_DOWN = 2
NODE_FAULTS = ("kubelet-kill", "kubelet-pause", "power-off", "runtime-then-kubelet")  # each takes a kubelet away
CALL_TIMEOUT = (3, 10)
# power-off: how long the operator waits for the node to be marked not Ready before fencing it anyway
FENCE_PATIENCE = 120.0
# runtime-then-kubelet: the runtime down alone this long first; the kubelet reports it about 30 s in.
RUNTIME_ALONE = 60.0
FENCED_AT_ONCE = 0.25  # the share of power-offs fenced at once, while the node may still look Ready

# kind -> weight in the draw
CATALOGUE: dict[str, int] = {
    "kubelet-kill": 3,
    "manual-taint": 4,
    "kubelet-pause": 2,
    "leader-kill": 1,
    "leader-pause": 1,
    "webhook-delete": 1,
    "apiserver-stop": 1,
    "etcd-restart": 1,
    "zone-relabel": 1,
    "power-off": 1,
    "etcd-pause": 1,  # its hold drawn apart: a seed drawn without it (--without) replays as before
    "runtime-then-kubelet": 2,  # the same: drawn without it, a seed replays as before
}


Outcome = tuple[str, float, dict[str, Any]]  # what a fault hit, when it started, its details
Begin = Callable[[str, float, dict[str, Any]], None]  # logs a fault that took effect: (target, start, detail)
FaultAction = Callable[[str, float, float, threading.Event, Begin], Outcome]  # (target, hold, pick, stop, begin)


class FaultNotStarted(Exception):
    """The fault could not be injected now (one line); nothing was changed."""


@dataclass
class Injector:
    cluster: LocalCluster
    api_client: client.ApiClient
    fault_log: Any  # a path: bench.soak.faults.append_fault writes to it
    rng: random.Random
    builtin: bool = False
    webhook: bool = True  # taintkeeper's webhook is deployed (not: the built-ins, or its admission policy)
    without: frozenset[str] = frozenset()  # kinds left out of the draw
    injected: int = 0
    not_started: int = 0
    _busy: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _stopped: set[int] = field(default_factory=set)  # pids a fault has SIGSTOPped and not yet continued
    _held: set[str] = field(default_factory=set)  # components a fault holds down and starts again itself

    def __post_init__(self) -> None:
        self._node_names = sorted(self.cluster.nodes())

    def held(self) -> frozenset[str]:
        """The control-plane components a running fault holds down: the supervisor leaves them to it."""
        with self._lock:
            return frozenset(self._held)

    def catalogue(self) -> dict[str, int]:
        return {
            kind: weight
            for kind, weight in CATALOGUE.items()
            if not ((self.builtin or not self.webhook) and kind in WEBHOOK_FAULTS) and kind not in self.without
        }

    def run(self, stop: threading.Event, faults_per_minute: float) -> None:
        """Draw faults as a Poisson process until `stop`; then let every running fault end."""
        kinds = self.catalogue()
        while not stop.wait(self.rng.expovariate(faults_per_minute / 60.0)):
            kind = self.rng.choices(list(kinds), weights=list(kinds.values()))[0]
            self._launch(kind, stop)
        for thread in self._threads:
            thread.join(timeout=300)

    def _launch(self, kind: str, stop: threading.Event) -> None:
        # A node fault goes to a node free of that kind of fault, when one is (drawn on this thread: replayable).
        with self._lock:
            free = [node for node in self._node_names if not self._resources(kind, node) & self._busy]
        target = self.rng.choice(free or self._node_names)
        # The random values a fault uses are drawn here, on the one drawing thread, so a seed replays them.
        hold = {
            "kubelet-kill": self.rng.uniform(10, 120),
            "kubelet-pause": self.rng.uniform(10, 90),
            "power-off": self.rng.uniform(10, 60),
            "manual-taint": self.rng.uniform(5, 60),
            "leader-pause": LEASE_DURATION + self.rng.uniform(3, 15),
            "apiserver-stop": self.rng.uniform(5, 20),
            "zone-relabel": self.rng.uniform(20, 90),
            "leader-kill": self.rng.uniform(1, 10),
        }.get(kind, 0.0)
        if kind == "etcd-pause":  # past the renew deadline: the leader's calls hang and it steps down, briefly
            hold = RENEW_DEADLINE + self.rng.uniform(0.5, 2.0)
        if kind == "runtime-then-kubelet":  # the kubelet dead this long, after RUNTIME_ALONE with its runtime down
            hold = self.rng.uniform(10, 60)
        pick = self.rng.random()
        resources = self._resources(kind, target)
        with self._lock:
            nodes_down = len({r for r in self._busy if r.startswith("kubelet:")})
            if resources & self._busy or (kind in NODE_FAULTS and nodes_down >= MAX_NODES_DOWN):
                log.info("skipped %s on %s: a conflicting fault is running", kind, target)
                return
            self._busy |= resources
            fault_id = next(self._ids)
        thread = threading.Thread(
            target=self._run_fault,
            args=(fault_id, kind, target, hold, pick, resources, stop),
            name=f"fault-{fault_id}",
            daemon=True,
        )
        self._threads.append(thread)
        thread.start()

    @staticmethod
    def _resources(kind: str, target: str) -> set[str]:
        if kind in NODE_FAULTS:
            return {f"kubelet:{target}"}
        if kind in ("apiserver-stop", "etcd-restart", "etcd-pause"):
            return {"control-plane"}
        if kind in ("leader-kill", "leader-pause"):
            return {"leader"}
        return {f"{kind}:{target}"}

    def _run_fault(
        self,
        fault_id: int,
        kind: str,
        target: str,
        hold: float,
        pick: float,
        resources: set[str],
        stop: threading.Event,
    ) -> None:
        begun: list[Fault] = []

        def begin(what: str, start: float, detail: dict[str, Any]) -> None:
            """Logged (with no end) once the fault took effect, so a fault whose end fails still counts."""
            fault = Fault(id=fault_id, kind=kind, target=what, start=start, end=None, detail=detail)
            append_fault(self.fault_log, fault)
            begun.append(fault)

        ended = False
        try:
            action: FaultAction = getattr(self, f"_{kind.replace('-', '_')}")
            target, start, detail = action(target, hold, pick, stop, begin)
            ended = True
            end = time.time()
            append_fault(
                self.fault_log, Fault(id=fault_id, kind=kind, target=target, start=start, end=end, detail=detail)
            )
            log.info("fault %d %s on %s: %.1fs", fault_id, kind, target, end - start)
        except Exception as error:  # the API or the cluster refused (or the apiserver is down on purpose)
            log.info("fault %s on %s %s: %s", kind, target, "did not end" if begun else "not injected", _line(error))
        finally:
            with self._lock:
                self.injected += bool(begun)
                self.not_started += not begun
                if ended or not begun:  # a fault that did not end keeps its resource: the run's sweep undoes it
                    self._busy -= resources

    # --- the faults: each returns (target, start, detail) once it has ended. Each undo runs in a
    # `finally`, retried through other faults (the apiserver down): a fault must never outlive the run.

    def _kubelet_kill(self, node: str, hold: float, _pick: float, stop: threading.Event, begin: Begin) -> Outcome:
        start = time.time()
        try:
            self.cluster.stop_kubelet(node)
            begin(node, start, {})
            stop.wait(hold)
        finally:
            self._retry(lambda: self.cluster.start_kubelet(node))
        return node, start, {}

    def _runtime_then_kubelet(
        self, node: str, hold: float, _pick: float, stop: threading.Event, begin: Begin
    ) -> Outcome:
        """kubernetes#112733 as it happens: the node's container runtime fails (containerd SIGKILLed: the
        containers run on, the kubelet reports Ready=False and keeps renewing its Lease) and, RUNTIME_ALONE
        later, its kubelet dies too (Unknown); `hold` after that, both are back."""
        start = time.time()
        detail: dict[str, Any] = {}
        try:
            self.cluster.stop_runtime(node)
            begin(node, start, {})
            if not stop.wait(RUNTIME_ALONE):
                self.cluster.stop_kubelet(node)
                detail["kubelet_stopped"] = time.time()
                stop.wait(hold)
        finally:
            self._retry(lambda: self.cluster.start_runtime(node))
            self._retry(lambda: self.cluster.start_kubelet(node))
        return node, start, detail

    def _power_off(self, node: str, hold: float, pick: float, stop: threading.Event, begin: Begin) -> Outcome:
        """The machine loses power (`stop-node`: kubelet, containerd, containers) and an operator fences
        it with the out-of-service taint: once it is marked not Ready, or (FENCED_AT_ONCE of the time)
        at once, while it may still look Ready, which must change nothing. Fenced for `hold`; then the
        machine is back, Ready, and unfenced."""
        start = time.time()
        detail: dict[str, Any] = {}
        try:
            self.cluster.stop_node(node)
            begin(node, start, {})
            patience = time.time() + (0 if pick < FENCED_AT_ONCE else FENCE_PATIENCE)
            while time.time() < patience and self._ready(node) == "True" and not stop.wait(2):
                pass
            if not stop.is_set():
                fenced = time.time()
                taint = {
                    "key": OUT_OF_SERVICE,
                    "value": "nodeshutdown",
                    "effect": "NoExecute",
                    "timeAdded": format_time(fenced),
                }
                # through another fault (the apiserver down), as an operator would try again
                self._retry(lambda: self._edit_taints(node, lambda taints: [*_without(taints, OUT_OF_SERVICE), taint]))
                detail["fenced"] = fenced
                stop.wait(hold)
        finally:
            self._retry(lambda: self.cluster.start_node(node))
            self._retry(lambda: self._edit_taints(node, lambda taints: _without(taints, OUT_OF_SERVICE)))
        return node, start, detail

    def _ready(self, node: str) -> str | None:
        """The node's Ready status; None when it cannot be read (the apiserver down)."""
        try:
            conditions = (self._get(f"/api/v1/nodes/{node}").get("status") or {}).get("conditions") or []
        except Exception:
            return None
        return next((str(c.get("status")) for c in conditions if c.get("type") == "Ready"), None)

    def _kubelet_pause(self, node: str, hold: float, _pick: float, stop: threading.Event, begin: Begin) -> Outcome:
        pid = self.cluster.kubelet_pid(node)
        start = time.time()
        try:
            self._stop_process(pid)
            begin(node, start, {})
            stop.wait(hold)
        finally:
            self._continue_process(pid)
        return node, start, {}

    def _apiserver_stop(self, _node: str, hold: float, _pick: float, stop: threading.Event, begin: Begin) -> Outcome:
        start = time.time()
        try:
            self.cluster.stop_apiserver()
            begin("kube-apiserver", start, {})
            stop.wait(hold)
        finally:
            self._retry(self.cluster.start_apiserver)
        return "kube-apiserver", start, {}

    def _etcd_restart(self, _node: str, _hold: float, _pick: float, _stop: threading.Event, begin: Begin) -> Outcome:
        start = time.time()
        begin("etcd", start, {})  # first: a restart that fails its health wait still happened
        self._retry(self.cluster.restart_etcd)
        return "etcd", start, {}

    def _etcd_pause(self, _node: str, hold: float, _pick: float, stop: threading.Event, begin: Begin) -> Outcome:
        """etcd stopped (SIGSTOP) and continued: every API call that reaches the store hangs meanwhile, the
        leader's renewals among them, so it loses the Lease at its renew deadline with its calls in flight,
        and takes it again within a retry period of etcd's return: the race the monitor's term tokens
        close (controller/nodelifecycle/monitor.py)."""
        pid = self.cluster.etcd_pid()
        start = time.time()
        try:
            self._stop_process(pid)
            begin("etcd", start, {})
            stop.wait(hold)
        finally:
            self._continue_process(pid)
        return "etcd", start, {}

    def _leader_kill(self, _node: str, hold: float, _pick: float, stop: threading.Event, begin: Begin) -> Outcome:
        if (
            self.builtin
        ):  # the leading kube-controller-manager: killed, started again as a kubelet restarts a static pod
            replica = self._leading_controller_manager()
            pid = self.cluster.controller_manager_pid(replica)
            start = time.time()
            with self._lock:
                self._held.add(replica)
            try:
                _signal(pid, signal.SIGKILL)
                begin(replica, start, {})
                stop.wait(hold)
            finally:
                self._retry(functools.partial(self.cluster.start_controller_manager, replica))
                with self._lock:
                    self._held.discard(replica)
            return replica, start, {}
        pod, node, container = self._leader_container()
        start = time.time()
        self.cluster.kill_container(node, container)
        begin(pod, start, {"node": node})
        return pod, start, {"node": node}

    def _leader_pause(self, _node: str, hold: float, _pick: float, stop: threading.Event, begin: Begin) -> Outcome:
        if self.builtin:
            target, detail = self._leading_controller_manager(), {}
            pid = self.cluster.controller_manager_pid(target)
        else:
            pod, node, container = self._leader_container()
            pid, target, detail = self.cluster.container_pid(node, container), pod, {"node": node}
        start = time.time()
        try:
            self._stop_process(pid)
            begin(target, start, detail)
            stop.wait(hold)
        finally:
            # kube-controller-manager, leader-elected, exits on resuming past its renew deadline: the
            # supervisor starts it again (bench/soak/supervisor.py).
            self._continue_process(pid)
        return target, start, detail

    def _webhook_delete(self, _node: str, _hold: float, pick: float, _stop: threading.Event, begin: Begin) -> Outcome:
        pods = self._get(
            f"/api/v1/namespaces/{CONTROLLER_NAMESPACE}/pods",
            query=[("labelSelector", "app.kubernetes.io/component=webhook")],
        )["items"]
        live = sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))
        if not live:
            raise FaultNotStarted("no webhook pod to delete")
        name = live[int(pick * len(live))]
        start = time.time()
        request_json(
            self.api_client, "DELETE", f"/api/v1/namespaces/{CONTROLLER_NAMESPACE}/pods/{name}", timeout=CALL_TIMEOUT
        )
        begin(name, start, {})
        return name, start, {}

    def _manual_taint(self, node: str, hold: float, pick: float, stop: threading.Event, begin: Begin) -> Outcome:
        start = time.time()
        taint = {"key": CHAOS_TAINT, "value": f"{pick:.6f}"[2:], "effect": "NoExecute", "timeAdded": format_time(start)}
        try:
            self._edit_taints(node, lambda taints: [*_without(taints, CHAOS_TAINT), taint])
            begin(node, start, dict(taint))
            stop.wait(hold)
        finally:
            self._retry(lambda: self.remove_chaos_taint(node))
        return node, start, dict(taint)

    def _zone_relabel(self, node: str, hold: float, _pick: float, stop: threading.Event, begin: Begin) -> Outcome:
        labels = self._get(f"/api/v1/nodes/{node}")["metadata"].get("labels") or {}
        old = {label: labels.get(label) for label in ZONE_LABELS}  # None: absent, removed again at the end
        new = "zone-c" if old[ZONE_LABELS[0]] != "zone-c" else "zone-a"
        start = time.time()
        try:
            self._set_labels(node, dict.fromkeys(ZONE_LABELS, new))
            begin(node, start, {"from": old[ZONE_LABELS[0]] or "", "to": new})
            stop.wait(hold)
        finally:
            self._retry(lambda: self._set_labels(node, old))
        return node, start, {"from": old[ZONE_LABELS[0]] or "", "to": new}

    def _stop_process(self, pid: int) -> None:
        with self._lock:
            self._stopped.add(pid)
        _signal(pid, signal.SIGSTOP)

    def _continue_process(self, pid: int) -> None:
        _continue(pid)
        with self._lock:
            self._stopped.discard(pid)

    def sweep(self) -> None:
        """Undo whatever a fault may have left, whatever happened to its thread: every process a fault
        stopped continued, kube-apiserver (and, for the oracle, kube-controller-manager) running, every
        node powered and its kubelet running, no node with the soak's taint or fenced. Called once the
        faults have stopped."""
        with self._lock:
            stopped = set(self._stopped)
        for pid in stopped:
            self._continue_process(pid)
        self._retry(self.cluster.start_apiserver)
        for replica in ORACLE_CONTROLLER_MANAGERS if self.builtin else ():
            self._retry(functools.partial(self.cluster.start_controller_manager, replica))
        for node, entry in self.cluster.nodes().items():
            if entry["pids"]["containerd"] is None:  # powered off
                self._retry(functools.partial(self.cluster.start_node, node))
            elif entry["pids"]["kubelet"] is None:
                self._retry(functools.partial(self.cluster.start_kubelet, node))
            else:
                _continue(int(entry["pids"]["kubelet"]))
            self._retry(functools.partial(self.remove_chaos_taint, node))
            self._retry(functools.partial(self._edit_taints, node, lambda taints: _without(taints, OUT_OF_SERVICE)))

    def remove_chaos_taint(self, node: str) -> None:
        self._edit_taints(node, lambda taints: _without(taints, CHAOS_TAINT))

    # --- helpers ---

    def _leading_controller_manager(self) -> str:
        """The oracle's kube-controller-manager replica holding kube-system's Lease (its hostname names it), if
        it runs: one that lost the Lease and exited may still be named while the other has not taken it."""
        lease = self._get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager")
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "").rsplit("_", 1)[0]
        if holder not in ORACLE_CONTROLLER_MANAGERS:
            raise FaultNotStarted(f"no kube-controller-manager replica holds the Lease (holder {holder or 'none'})")
        if self.cluster.exited(holder):
            raise FaultNotStarted(f"the Lease names {holder}, which is not running")
        return holder

    def _leader_container(self) -> tuple[str, str, str]:
        """(pod, node, containerID) of the controller replica holding the Lease."""
        lease = self._get(f"/apis/coordination.k8s.io/v1/namespaces/{CONTROLLER_NAMESPACE}/leases/{LEASE}")
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "").rsplit("_", 1)[0]
        if not holder:
            raise FaultNotStarted("the Lease has no holder")
        pod = self._get(f"/api/v1/namespaces/{CONTROLLER_NAMESPACE}/pods/{holder}")
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        node = (pod.get("spec") or {}).get("nodeName")
        if not statuses or not statuses[0].get("containerID") or not node:
            raise FaultNotStarted(f"the leader {holder} has no running container")
        return holder, str(node), str(statuses[0]["containerID"])

    def _edit_taints(self, node: str, edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
        """Read-modify-write of the node's taints guarded by its resourceVersion: never clobbers the controller's."""
        for _ in range(20):
            raw = self._get(f"/api/v1/nodes/{node}")
            taints = list((raw.get("spec") or {}).get("taints") or [])
            patch = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": raw["metadata"]["resourceVersion"]},
                {
                    "op": "add" if "taints" not in (raw.get("spec") or {}) else "replace",
                    "path": "/spec/taints",
                    "value": edit(taints),
                },
            ]
            try:
                request_json(
                    self.api_client,
                    "PATCH",
                    f"/api/v1/nodes/{node}",
                    body=patch,
                    content_type="application/json-patch+json",
                    timeout=CALL_TIMEOUT,
                )
                return
            except ApiException as error:
                if error.status not in (409, 422):
                    raise
        raise FaultNotStarted(f"the taints of {node} kept changing")

    def _set_labels(self, node: str, labels: dict[str, str | None]) -> None:
        """A merge of labels; None removes one."""
        request_json(
            self.api_client,
            "PATCH",
            f"/api/v1/nodes/{node}",
            body={"metadata": {"labels": labels}},
            content_type="application/strategic-merge-patch+json",
            timeout=CALL_TIMEOUT,
        )

    def _get(self, path: str, query: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        answer: dict[str, Any] = request_json(self.api_client, "GET", path, query=query, timeout=CALL_TIMEOUT)
        return answer

    @staticmethod
    def _retry(action: Callable[[], object], attempts: int = 60, pause: float = 2.0) -> None:
        """Undo a fault even through another fault (the apiserver down): retry for up to 2 minutes."""
        for attempt in range(attempts):
            try:
                action()
                return
            except Exception as error:  # urllib3's connection errors too: the apiserver may be down on purpose
                if attempt + 1 == attempts:
                    raise
                log.info("retrying a fault's end: %s", _line(error))
                time.sleep(pause)


def _without(taints: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [taint for taint in taints if taint.get("key") != key]


def _line(error: BaseException) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0][:200]


def _signal(pid: int, signum: signal.Signals) -> None:
    os.kill(pid, signum)


def _continue(pid: int) -> None:
    """SIGCONT a process a fault stopped: the same pid (a new lookup could fail); gone is fine."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
