"""What the soak does to the complete local cluster from outside: hack/local-cluster.sh's commands,
signals to kubelets, etcd and containers, and the container processes of taintkeeper's pods.

Every call is bounded in time; a failure raises ClusterError with one line.
"""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LOCAL_CLUSTER = ROOT / "hack" / "local-cluster.sh"


class ClusterError(RuntimeError):
    """A command against the local cluster failed (one line)."""


# One start of a control-plane component at a time: a fault's own restart and the supervisor's
# (bench/soak/supervisor.py) must not both see it exited and start two.
_STARTING = threading.Lock()

# The oracle's kube-controller-manager replicas (`up --builtin-node-lifecycle`): each its own process,
# pidfile DIR/<name>.pid and hostname, so the Lease's holderIdentity names the one leading
# (hack/lib/control-plane.sh controller_managers).
ORACLE_CONTROLLER_MANAGERS = ("kube-controller-manager", "kube-controller-manager-2")


def _run(argv: list[str], timeout: float = 180) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as error:
        raise ClusterError(f"{' '.join(argv[:4])}: no answer in {timeout:g}s") from error
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise ClusterError(f"{' '.join(argv[:4])}: {last}")
    return result.stdout


@dataclass(frozen=True)
class LocalCluster:
    """The complete local cluster in `directory` (hack/local-cluster.sh up DIR --nodes N)."""

    directory: Path

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    def script(self, *args: str, timeout: float = 180) -> str:
        return _run(["bash", str(LOCAL_CLUSTER), *args], timeout=timeout)

    def up(self, nodes: int, *, builtin: bool, audit: bool = True) -> None:
        self.script(
            "up",
            str(self.directory),
            "--nodes",
            str(nodes),
            *(["--audit"] if audit else []),
            *(["--builtin-node-lifecycle"] if builtin else []),
            timeout=1800,
        )

    def deploy(self, overlay: Path | None = None) -> None:
        """taintkeeper from its image and the main kustomization, or the `overlay` given."""
        self.script("deploy", str(self.directory), *(("--overlay", str(overlay)) if overlay else ()), timeout=1800)

    def down(self) -> None:
        self.script("down", str(self.directory), timeout=300)

    def nodes(self) -> dict[str, dict[str, Any]]:
        """name -> `local-cluster.sh nodes` entry (zone, pids, containerd socket, ...)."""
        return {node["name"]: node for node in json.loads(self.script("nodes", str(self.directory)))}

    def stop_kubelet(self, node: str) -> None:
        self.script("stop-kubelet", str(self.directory), node, "--signal", "KILL")

    def start_kubelet(self, node: str) -> None:
        self.script("start-kubelet", str(self.directory), node)

    def stop_runtime(self, node: str) -> None:
        """The container runtime fails: the node's containerd SIGKILLed; its kubelet and containers run on."""
        self.script("stop-runtime", str(self.directory), node)

    def start_runtime(self, node: str) -> None:
        self.script("start-runtime", str(self.directory), node)

    def stop_node(self, node: str) -> None:
        """A power-off: the node's kubelet, containerd and every container on it, SIGKILLed."""
        self.script("stop-node", str(self.directory), node)

    def start_node(self, node: str) -> None:
        """containerd and the kubelet again, until the node is Ready (at most 2 minutes)."""
        self.script("start-node", str(self.directory), node, timeout=300)

    def kubelet_pid(self, node: str) -> int:
        pid = self.nodes()[node]["pids"]["kubelet"]
        if pid is None:
            raise ClusterError(f"the kubelet of {node} is not running")
        return int(pid)

    def stop_apiserver(self) -> None:
        self.script("stop-apiserver", str(self.directory))

    def start_apiserver(self, *, default_toleration_seconds: bool = False) -> None:
        """Only kube-apiserver again; with `default_toleration_seconds`, this once with the built-in plugin on."""
        self.script(
            "start-apiserver",
            str(self.directory),
            *(["--default-toleration-seconds"] if default_toleration_seconds else []),
        )

    def restart_etcd(self) -> None:
        self.script("restart-etcd", str(self.directory))

    def etcd_pid(self) -> int:
        return int((self.directory / "etcd.pid").read_text().strip())

    def controller_manager_pid(self, replica: str) -> int:
        """The pid of a kube-controller-manager replica of the oracle (kube-controller-manager, ...-2)."""
        return int((self.directory / f"{replica}.pid").read_text().strip())

    def start_controller_manager(self, replica: str) -> None:
        self.start_components((replica,))

    def exited(self, component: str) -> bool:
        """Whether a control-plane component `up` started (kube-scheduler, ...) is no longer running."""
        try:
            pid = int((self.directory / f"{component}.pid").read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return True
        return str(self.directory).encode() not in cmdline

    def start_components(self, components: tuple[str, ...]) -> list[str]:
        """Start whichever of `components` exited; the names started."""
        with _STARTING:
            return self.script("start-components", str(self.directory), *components).split()

    def container_pid(self, node: str, container_id: str) -> int:
        """The host pid of a container's main process (containerd's task list on that node)."""
        socket = self.nodes()[node]["containerdSocket"]
        bare = container_id.split("://", 1)[-1]
        for line in _run(["ctr", "-a", socket, "-n", "k8s.io", "tasks", "ls"], timeout=30).splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 2 and fields[0] == bare:
                return int(fields[1])
        raise ClusterError(f"no running task {bare[:12]} on {node}")

    def kill_container(self, node: str, container_id: str) -> None:
        socket = self.nodes()[node]["containerdSocket"]
        _run(
            ["ctr", "-a", socket, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", container_id.split("://", 1)[-1]],
            timeout=30,
        )
