"""Real nodes for hack/demo.py --real-nodes, behind the few Simulator methods the demo uses.

The nodes themselves are started by `hack/local-cluster.sh up DIR --nodes N`; here a node "crashes"
when its kubelet is SIGKILLed and "comes back" when it is started again. Pods are real busybox
containers placed with spec.nodeName (on the node the demo picked, not where kube-scheduler would put
them) from the node's local image.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from kubernetes import client

from kube.request import response_json

SCRIPT = Path(__file__).resolve().parents[1] / "local-cluster.sh"


class RealNodes:
    def __init__(self, api_client: client.ApiClient, directory: Path) -> None:
        self.core = client.CoreV1Api(api_client)
        self.directory = directory

    def _script(self, *args: str) -> str:
        result = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"local-cluster.sh {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def nodes(self) -> list[dict]:
        return json.loads(self._script("nodes", str(self.directory)))

    def start(self) -> RealNodes:
        """Until every namespace's `default` ServiceAccount has its token: the complete cluster admits
        pods with ServiceAccount admission, and kube-controller-manager makes them a moment after a
        namespace is created."""
        deadline = time.monotonic() + 60
        while True:
            active = [
                ns.metadata.name
                for ns in self.core.list_namespace().items
                if ns.metadata and ns.metadata.name and ns.status and ns.status.phase == "Active"
            ]
            pending = [name for name in active if not self._has_token(name)]
            if not pending:
                return self
            if time.monotonic() > deadline:
                raise RuntimeError(f"no default ServiceAccount token after 60 s in: {', '.join(pending)}")
            time.sleep(0.2)

    def _has_token(self, namespace: str) -> bool:
        try:
            return bool(self.core.read_namespaced_service_account("default", namespace).secrets)
        except client.ApiException as error:
            if error.status == 404:
                return False
            raise

    def add_nodes(self, count: int, zones: list[str] | None = None) -> list[str]:
        """The nodes `up --nodes N` started (their zones alternate zone-a/zone-b); they cannot be added here."""
        names = [node["name"] for node in self.nodes()]
        if len(names) < count:
            raise RuntimeError(f"{len(names)} real nodes are up, {count} wanted")
        return names[:count]

    def create_pods(
        self,
        node: str,
        count: int,
        *,
        namespace: str,
        tolerations: list[dict] | None = None,
        name_prefix: str = "pod",
        termination_grace_period: int = 2,
    ) -> list[str]:
        image = next(n["busyboxImage"] for n in self.nodes() if n["name"] == node)
        names = []
        for index in range(count):
            spec: dict = {
                "nodeName": node,
                "terminationGracePeriodSeconds": termination_grace_period,
                "containers": [{"name": "c", "image": image, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}],
            }
            if tolerations is not None:
                spec["tolerations"] = tolerations
            name = f"{name_prefix}-{index}"
            self.core.create_namespaced_pod(namespace, body={"metadata": {"name": name}, "spec": spec})  # type: ignore[arg-type]  # a dict body is sent as it is
            names.append(name)
        # Until the containers run: a kubelet killed while it creates a sandbox may never finish that pod.
        deadline = time.monotonic() + 60
        while not all(self._running(namespace, name) for name in names):
            if time.monotonic() > deadline:
                raise RuntimeError(f"pods {names} on {node} not running after 60 s")
            time.sleep(0.2)
        return names

    def _running(self, namespace: str, name: str) -> bool:
        pod = response_json(self.core.read_namespaced_pod(name, namespace, _preload_content=False))
        statuses = pod.get("status", {}).get("containerStatuses") or []
        return bool(statuses) and "running" in statuses[0].get("state", {})

    def stop_heartbeats(self, node: str) -> None:
        self._script("stop-kubelet", str(self.directory), node, "--signal", "KILL")

    def resume_heartbeats(self, node: str) -> None:
        self._script("start-kubelet", str(self.directory), node)

    def stop(self) -> None:
        """Nothing to stop here: `local-cluster.sh down` stops the nodes."""

    def delete_nodes(self) -> None:
        """The Node objects go with the control plane."""

    def close(self) -> None:
        """No client of its own."""
