"""A simulated kubelet's registration (see hack/simulator.py): its Node, with zone/region/hostname/os
labels, its first status (capacity, addresses, nodeInfo) and its Lease; adopting a Node registered
already; deleting the Node and its Lease."""

from __future__ import annotations

import logging
from urllib.parse import quote

from kubernetes.client.exceptions import ApiException

from hack.simulator_heartbeats import LEASE_NAMESPACE, Heartbeats, _lease_path
from hack.simulator_state import _Condition, _Node
from kube.client import STRATEGIC_MERGE
from kube.errors import is_conflict, is_not_found
from kube.timestamps import format_time

log = logging.getLogger("simulator")

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
# What a healthy kubelet posts, condition by condition (status, reason, message).
HEALTHY_CONDITIONS = {
    "Ready": ("True", "KubeletReady", "kubelet is posting ready status"),
    "MemoryPressure": ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    "NetworkUnavailable": ("False", "RouteCreated", "simulated routes are in place"),
}


class Registration(Heartbeats):
    """Registers and deletes the simulated Nodes and their Leases; their beats start once registered."""

    def _ensure_lease_namespace(self) -> None:
        if self._lease_namespace_ready:
            return
        try:
            self._request("POST", "/api/v1/namespaces", body={"metadata": {"name": LEASE_NAMESPACE}})
        except ApiException as error:
            if not is_conflict(error):
                raise
        self._lease_namespace_ready = True

    def _register_node(self, index: int, zone: str | None, phase: float, *, region: str, labels: dict[str, str]) -> str:
        name = f"{self.node_prefix}-{index}"
        # The beta OS/arch labels too, as a real kubelet sets them: else the controller's label
        # reconciliation would write them, one PATCH per simulated node that real nodes never cost.
        node_labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            REGION_LABEL: region,
            **({ZONE_LABEL: zone} if zone else {}),
            **labels,
        }
        try:
            created = self._request(
                "POST",
                "/api/v1/nodes",
                body={"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}},
            )
        except ApiException as error:
            if not is_conflict(error):
                raise
            # A restarted kubelet finds its Node registered already and takes it over.
            created = self._request(
                "PATCH",
                f"/api/v1/nodes/{quote(name)}",
                body={"metadata": {"labels": node_labels}},
                content_type=STRATEGIC_MERGE,
            )
            log.info("node %s existed already: adopted", name)
        now = format_time(self.clock())
        conditions = {kind: _Condition(*healthy, last_transition=now) for kind, healthy in HEALTHY_CONDITIONS.items()}
        node = _Node(
            name=name,
            index=index,
            uid=created["metadata"]["uid"],
            labels=node_labels,
            phase=phase,
            conditions=conditions,
        )
        with self._lock:
            self._nodes[name] = node
        self._post_status(node, initial=True)
        self._create_lease(node)
        with self._wakeup:
            if self._running and node.alive:
                self._schedule_first_beats(node)
                self._wakeup.notify_all()
        return name

    def _delete_node_objects(self, node: _Node) -> None:
        for path in (_lease_path(node.name), f"/api/v1/nodes/{quote(node.name)}"):
            try:
                self._request("DELETE", path)
            except ApiException as error:
                if not is_not_found(error):
                    raise
