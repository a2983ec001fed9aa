"""Simulated kubelets (hack/simulator.py) against the real kube-apiserver, with the controller as a
process on short grace periods: the world of the node lifecycle integration tests.

Each test has its own nodes (a unique prefix) and deletes them at the end: the controller sees
every node in the cluster, so nodes left behind would change other tests' zone states.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from hack.servers import ControllerProcess
from hack.simulator import Simulator
from tests.integration.kube import LocalCluster, raw

UR = "node.kubernetes.io/unreachable"
NR = "node.kubernetes.io/not-ready"
# The backfill is off: these pods deliberately lack the default tolerations.
FAST = (
    "--leader-elect=false",
    "--node-monitor-period=1s",
    "--node-monitor-grace-period=4s",
    "--node-startup-grace-period=10s",
    "--backfill-default-tolerations=false",
)


class Cluster:
    def __init__(self, local: LocalCluster, namespace: str, tmp_path: Path) -> None:
        self.local = local
        self.core = client.CoreV1Api(local.api_client)
        self.namespace = namespace
        self.tmp_path = tmp_path
        self.sim = Simulator(
            local.api_client, lease_period=1.0, status_period=30.0, node_prefix=f"n{uuid.uuid4().hex[:5]}"
        ).start()
        self.controller: ControllerProcess | None = None

    def start_controller(self, *args: str) -> ControllerProcess:
        self.controller = ControllerProcess(self.local.kubeconfig, self.tmp_path / "controller.log", *FAST, *args)
        return self.controller.start()

    def node(self, name: str) -> dict:
        return raw(self.core.read_node, name)

    def taints(self, name: str, effect: str) -> list[str]:
        return sorted(t["key"] for t in self.node(name)["spec"].get("taints") or [] if t["effect"] == effect)

    def taint(self, name: str, key: str, effect: str) -> dict | None:
        return next(
            (t for t in self.node(name)["spec"].get("taints") or [] if t["key"] == key and t["effect"] == effect), None
        )

    def condition(self, name: str, condition_type: str) -> dict:
        return next(c for c in self.node(name)["status"]["conditions"] if c["type"] == condition_type)

    def pod(self, name: str) -> dict:
        return raw(self.core.read_namespaced_pod, name, self.namespace)

    def pod_ready(self, name: str) -> str | None:
        return next(
            (c["status"] for c in self.pod(name)["status"].get("conditions") or [] if c["type"] == "Ready"), None
        )

    def deleted(self, name: str) -> bool:
        try:
            return bool(self.pod(name)["metadata"].get("deletionTimestamp"))
        except client.ApiException as error:
            return error.status == 404

    def pods(self, node: str, tolerations: list[dict] | None, prefix: str) -> str:
        return self.sim.create_pods(node, 1, namespace=self.namespace, tolerations=tolerations, name_prefix=prefix)[0]

    def close(self) -> None:
        if self.controller is not None:
            self.controller.kill()
        self.sim.stop()
        self.sim.delete_nodes()
        self.sim.close()


def unreachable(seconds: int | None) -> list[dict]:
    toleration: dict[str, Any] = {"key": UR, "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        toleration["tolerationSeconds"] = seconds
    return [toleration]
