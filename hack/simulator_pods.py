"""A simulated kubelet's pods (see hack/simulator.py): creating pods bound to a node and posting them
Running and Ready; force-deleting a pod; finishing graceful deletions whose grace period is over,
on live nodes only."""

from __future__ import annotations

import logging
from urllib.parse import quote

from kubernetes.client.exceptions import ApiException

from hack.simulator_base import SimulatorBase
from hack.simulator_state import Json, _Node, _TerminatingPod
from kube.client import STRATEGIC_MERGE
from kube.errors import describe_error, is_conflict, is_not_found
from kube.timestamps import format_time

log = logging.getLogger("simulator")

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "taintkeeper-simulator"


class Pods(SimulatorBase):
    """Pod creation and the deletions the scheduler (Simulator._schedule_loop) hands to the pool."""

    def _create_pod(
        self,
        node: _Node,
        namespace: str,
        prefix: str,
        tolerations: list[Json] | None,
        labels: dict[str, str],
        termination_grace_period: int | None,
    ) -> str:
        spec: Json = {
            "nodeName": node.name,
            "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "1000000"]}],
        }
        if tolerations is not None:
            spec["tolerations"] = tolerations
        if termination_grace_period is not None:
            spec["terminationGracePeriodSeconds"] = termination_grace_period
        for _ in range(100):  # names left over from an earlier run are skipped
            with self._lock:
                number = self._pod_name_counters.get(prefix, 0)
                self._pod_name_counters[prefix] = number + 1
            name = f"{prefix}-{number}"
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "spec": spec,
                "metadata": {"name": name, "namespace": namespace, "labels": {**labels, MANAGED_BY_LABEL: MANAGED_BY}},
            }
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
        ready = [
            {"type": kind, "status": "True", "lastTransitionTime": now, "lastProbeTime": None}
            for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]
        pod_ip = f"10.{(pod_number >> 16) & 255}.{(pod_number >> 8) & 255}.{pod_number & 255}"
        status = {
            "phase": "Running",
            "conditions": ready,
            "hostIP": node.address,
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": now,
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "image": "docker.io/library/busybox:latest",
                    "imageID": "docker.io/library/busybox@sha256:" + "0" * 64,
                    "containerID": f"sim://{created['metadata']['uid']}",
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
        self._request(
            "PATCH",
            f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/status",
            body={"status": status},
            content_type=STRATEGIC_MERGE,
        )
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
            log.warning(
                "pod %s/%s on %s: deletion failed, retrying: %s",
                pod.namespace,
                pod.name,
                node.name,
                describe_error(error),
            )
            return
        with self._lock:
            pod.claimed = False
            if self._terminating.get((pod.namespace, pod.name)) is pod:
                del self._terminating[(pod.namespace, pod.name)]
            if removed:
                self._stats.pods_removed += 1
        if removed:
            log.info(
                "pod %s/%s on %s: grace period over, containers stopped, pod deleted",
                pod.namespace,
                pod.name,
                node.name,
            )
