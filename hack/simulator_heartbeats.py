"""A simulated kubelet's heartbeats (see hack/simulator.py): its Lease in kube-node-lease, created
and renewed every lease period; its NodeStatus, posted every status period (fresh
lastHeartbeatTime, statuses kept); the first beat after an outage; one warning per outage."""

from __future__ import annotations

import logging
import time
from urllib.parse import quote

from kubernetes.client.exceptions import ApiException

from hack.simulator_base import SimulatorBase
from hack.simulator_state import Json, _Node
from kube.client import MERGE_PATCH, STRATEGIC_MERGE
from kube.errors import describe_error, is_conflict, is_not_found
from kube.timestamps import format_micro_time, format_time

log = logging.getLogger("simulator")

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
LEASE, STATUS = "lease", "status"


class Heartbeats(SimulatorBase):
    """Leases and status posts of the simulated nodes, each beat queued by the scheduler
    (Simulator._schedule_loop) at its node's phase of the period."""

    def _schedule_first_beats(self, node: _Node) -> None:
        now = time.monotonic()
        self._push(now + self.lease_period * node.phase, LEASE, node)
        self._push(now + self.status_period * node.phase, STATUS, node)

    def _create_lease(self, node: _Node) -> None:
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": node.name,
                "namespace": LEASE_NAMESPACE,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node.uid}],
            },
            "spec": {
                "holderIdentity": node.name,
                "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                "renewTime": format_micro_time(self.clock()),
            },
        }
        try:
            self._request("POST", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases", body=lease)
        except ApiException as error:
            if not is_conflict(error):
                raise
            self._request(
                "PATCH",
                _lease_path(node.name),
                body={"metadata": lease["metadata"], "spec": lease["spec"]},
                content_type=MERGE_PATCH,
            )

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
                self._request(
                    "PATCH",
                    _lease_path(node.name),
                    content_type=MERGE_PATCH,
                    body={"spec": {"renewTime": format_micro_time(self.clock())}},
                )
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
                conditions = [
                    {
                        "type": kind,
                        "status": condition.status,
                        "reason": condition.reason,
                        "message": condition.message,
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": condition.last_transition,
                    }
                    for kind, condition in node.conditions.items()
                ]
            status: Json = {"conditions": conditions}
            if initial:
                resources = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
                status.update(
                    capacity=resources,
                    allocatable=resources,
                    addresses=[
                        {"type": "InternalIP", "address": node.address},
                        {"type": "Hostname", "address": node.name},
                    ],
                    daemonEndpoints={"kubeletEndpoint": {"Port": 10250}},
                    nodeInfo={
                        "machineID": node.uid.replace("-", ""),
                        "systemUUID": node.uid,
                        "bootID": node.uid,
                        "kernelVersion": "5.10.0-sim",
                        "osImage": "simulated",
                        "containerRuntimeVersion": "sim://1.0",
                        "kubeletVersion": "v1.20.2-sim",
                        "kubeProxyVersion": "v1.20.2-sim",
                        "operatingSystem": "linux",
                        "architecture": "amd64",
                    },
                )
            self._request(
                "PATCH",
                f"/api/v1/nodes/{quote(node.name)}/status",
                body={"status": status},
                content_type=STRATEGIC_MERGE,
            )
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


def _lease_path(name: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{quote(name)}"
