"""Real nodes for the tests: hack/local-cluster.sh's node subcommands and the host's view of them."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client

from tests.integration.kube import wait_for
from tests.support.kubernetes_version import server_minor

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "local-cluster.sh"
# What `up` says when the kernel lacks something real nodes cannot do without.
FUNDAMENTAL = ("real nodes need overlayfs", "real nodes need cgroup v1")


def script(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


def checked(*args: str, timeout: float = 120) -> str:
    result = script(*args, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"local-cluster.sh {' '.join(args)} failed:\n{result.stderr[-4000:]}")
    return result.stdout


@dataclass
class RealCluster:
    directory: Path
    kubeconfig: Path
    api_client: client.ApiClient
    up_seconds: float = 0.0
    nodes: dict[str, dict] = field(default_factory=dict)

    def refresh(self) -> dict[str, dict]:
        self.nodes = {node["name"]: node for node in json.loads(checked("nodes", str(self.directory)))}
        return self.nodes

    def names(self, zone: str | None = None) -> list[str]:
        return sorted(name for name, node in self.refresh().items() if zone is None or node["zone"] == zone)

    def kubelet_pid(self, node: str) -> int | None:
        return self.refresh()[node]["pids"]["kubelet"]

    def stop_kubelet(self, node: str, sig: str = "KILL") -> float:
        """Stop one kubelet; returns the time.time() at which the signal was sent."""
        assert self.kubelet_pid(node), f"kubelet of {node} is not running"
        sent = time.time()
        checked("stop-kubelet", str(self.directory), node, "--signal", sig)  # waits until it has exited
        return sent

    def start_kubelet(self, node: str) -> None:
        checked("start-kubelet", str(self.directory), node)

    def stop_node(self, node: str) -> float:
        """A power-off: SIGKILL the node's kubelet, containerd and containers; returns when it was sent."""
        sent = time.time()
        checked("stop-node", str(self.directory), node)
        return sent

    def start_node(self, node: str) -> None:
        """containerd and the kubelet again; returns once the node is Ready."""
        checked("start-node", str(self.directory), node, timeout=240)

    def tasks(self, node: str) -> dict[str, tuple[int, str]]:
        """containerd's view on the host: container id -> (pid, status) in the node's k8s.io namespace."""
        socket = self.refresh()[node]["containerdSocket"]
        output = subprocess.run(
            ["ctr", "-a", socket, "-n", "k8s.io", "tasks", "ls"], capture_output=True, text=True, check=True, timeout=30
        ).stdout
        tasks = {}
        for line in output.splitlines()[1:]:
            task_id, pid, status = line.split()
            tasks[task_id] = (int(pid), status)
        return tasks


def wait_default_service_account(core: client.CoreV1Api, namespace: str, timeout: float = 60) -> None:
    """`up --nodes N` admits pods with ServiceAccount admission: a pod can be created in a new namespace
    once kube-controller-manager has given it its `default` ServiceAccount and, before 1.24, that one its
    token Secret (later releases issue each pod's token when it starts)."""
    needs_secret = server_minor(core.api_client) < 24

    def has_token() -> bool:
        try:
            account = core.read_namespaced_service_account("default", namespace)
        except client.ApiException as error:
            if error.status == 404:
                return False
            raise
        return bool(account.secrets) or not needs_secret

    wait_for(has_token, timeout, f"the default ServiceAccount of {namespace} and its token")


def component_pid(directory: Path, name: str) -> int | None:
    """The live pid of a control-plane component `up --nodes N` started (kube-proxy, kube-scheduler, ...)."""
    try:
        pid = int((directory / f"{name}.pid").read_text())
    except (OSError, ValueError):
        return None
    return pid if process_running(pid) and str(directory) in " ".join(cmdline(pid)) else None


def process_running(pid: int) -> bool:
    """A live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def descendants(pid: int) -> list[int]:
    """pid and every process below it."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            found.extend(descendants(int(child)))
    return found
