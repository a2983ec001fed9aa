"""Where the end-to-end suite's cluster comes from: kind (where Docker runs) or the local cluster.

Both run taintkeeper from its own image and manifests, on real kubelets, with upstream's
DefaultTolerationSeconds plugin and node lifecycle controller off. The tests are the same on
both; what differs is only how a node is stopped and started again, how a container is killed,
how the control plane's flags are read, and which image test pods run:

- `kind` (TAINTKEEPER_E2E_PROVIDER=kind, set by hack/kind-e2e.sh): `hack/local-cluster.sh kind-up DIR`
  (Kubernetes 1.37 on kind v0.33, the node image built here; KIND_NODE_IMAGE: another one the Docker
  engine holds) and the same deploy as the local cluster's with tests/e2e/overlay/kind; a node is a
  Docker container, stopped with `docker stop`;
- `local` (the default): `hack/local-cluster.sh up DIR --nodes 3` (Kubernetes 1.37 built from Go
  modules, or 1.20 from Debian's source with TAINTKEEPER_KUBERNETES=1.20) and `hack/local-cluster.sh
  deploy DIR --overlay tests/e2e/overlay/local` (the main kustomization; `local-1.20`, manifests/kube-1.20,
  on 1.20); a node is stopped by killing its kubelet (its containers keep running, as in a network partition).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from kubernetes import client, config

from hack.deploy import cluster_kubernetes
from kube.request import response_json
from kube.timestamps import parse_time

ROOT = Path(__file__).resolve().parents[2]
LOCAL_CLUSTER = ROOT / "hack" / "local-cluster.sh"
LOCAL_OVERLAY = ROOT / "tests" / "e2e" / "overlay" / "local"
KIND_OVERLAY = ROOT / "tests" / "e2e" / "overlay" / "kind"
OLDER_LOCAL_OVERLAYS = {"1.20": ROOT / "tests" / "e2e" / "overlay" / "local-1.20"}
LOCAL_NODES = 3


def run(argv: list[str], timeout: float = 180) -> str:
    # PYTHON: hack/local-cluster.sh deploy runs hack/deploy.py with this interpreter (the test venv's).
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False, env={**os.environ, "PYTHON": sys.executable}
    )
    if result.returncode != 0:
        detail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-5:]
        raise AssertionError(f"{' '.join(argv)} failed ({result.returncode}): {' / '.join(detail)}")
    return result.stdout.strip()


class Provider(Protocol):
    name: str
    directory: Path  # the cluster's (its kubeconfig, its registry)
    pod_image: str  # an image every node holds: test pods start without a registry

    @property
    def victim(self) -> str: ...

    @property
    def bystander(self) -> str: ...

    def kubeconfig(self) -> Path: ...

    def stop_node(self, node: str) -> None:
        """Stop the node's kubelet (no more Lease renewals or status): the node fails."""

    def start_node(self, node: str) -> None: ...

    def node_running(self, node: str) -> bool: ...

    def kill_container(self, node: str, container_id: str) -> None:
        """SIGKILL one container (a `containerd://ID` from a pod's status) on `node`."""

    def apiserver_flag(self, name: str) -> str | None: ...

    def controller_manager_flag(self, name: str) -> str | None: ...

    def apiserver_starts(self) -> list[float]:
        """When kube-apiserver started (epoch seconds), by records it keeps itself: until its RBAC cache has
        synced, a freshly started apiserver refuses every client with a 403."""


def _flag(argv: list[str], name: str) -> str | None:
    """The value of `--name=value` or `--name value` in a command line; the last one wins."""
    found = None
    for i, argument in enumerate(argv):
        if argument.startswith(f"--{name}="):
            found = argument.split("=", 1)[1]
        elif argument == f"--{name}" and i + 1 < len(argv):
            found = argv[i + 1]
    return found


def _container(container_id: str) -> str:
    runtime, _, cid = container_id.partition("://")
    assert runtime == "containerd" and cid, f"not a containerd container: {container_id!r}"
    return cid


@dataclass
class KindProvider:
    """A kind cluster (`hack/local-cluster.sh kind-up DIR`): a control plane and three workers, nodes as
    Docker containers, in the project's own Docker engine (or the one that answers), from the node image
    built here; taintkeeper pushed to the cluster's registry, pulled by the nodes, and deployed as on the local
    cluster."""

    directory: Path
    cluster: str = field(default_factory=lambda: os.environ.get("TAINTKEEPER_KIND_CLUSTER", "taintkeeper-e2e"))
    pod_image: str = field(
        default_factory=lambda: os.environ.get("TAINTKEEPER_E2E_POD_IMAGE", "registry.k8s.io/pause:3.10")
    )
    name: str = "kind"

    @property
    def control_plane(self) -> str:
        return f"{self.cluster}-control-plane"

    @property
    def victim(self) -> str:
        return f"{self.cluster}-worker"

    @property
    def bystander(self) -> str:
        return f"{self.cluster}-worker2"

    def up(self) -> None:
        image = os.environ.get("KIND_NODE_IMAGE")
        extra = ["--image", image] if image else []
        run(["bash", str(LOCAL_CLUSTER), "kind-up", str(self.directory), "--name", self.cluster, *extra], timeout=2400)
        self._use_engine()

    def _use_engine(self) -> None:
        """The docker CLI of every later step talks to the engine the cluster runs in."""
        for line in (self.directory / "kind.env").read_text().splitlines():
            if line.startswith("DOCKER_HOST="):
                if line.partition("=")[2]:
                    os.environ["DOCKER_HOST"] = line.partition("=")[2]
                else:
                    os.environ.pop("DOCKER_HOST", None)

    def deploy(self) -> None:
        """As LocalProvider.deploy: the kustomization (tests/e2e/overlay/kind) or, with
        TAINTKEEPER_E2E_INSTALL=helm, the chart; the image pushed to the cluster's registry and pulled by the nodes."""
        if os.environ.get("TAINTKEEPER_E2E_INSTALL", "kustomize") == "helm":
            from tests.chart.helm import build_helm
            from tests.e2e import helm_install

            helm_install.install(self.directory, build_helm())
            return
        run(["bash", str(LOCAL_CLUSTER), "deploy", str(self.directory), "--overlay", str(KIND_OVERLAY)], timeout=1800)

    def down(self) -> None:
        """kind-down, then what it must have left: no node container of the cluster, and of an engine the
        project started, no process and no container at all (pass or fail: the fixture calls this)."""
        docker_host = os.environ.get("DOCKER_HOST", "")
        run(["bash", str(LOCAL_CLUSTER), "kind-down", str(self.directory)], timeout=600)
        if docker_host.startswith(f"unix://{self.directory.resolve()}/"):
            alive = subprocess.run(["pgrep", "-f", docker_host.removeprefix("unix://")], capture_output=True, text=True)
            assert alive.stdout.strip() == "", f"the project's Docker engine still runs after kind-down: {alive.stdout}"
            os.environ.pop("DOCKER_HOST", None)
            return
        left = run(["docker", "ps", "-aq", "--filter", f"label=io.x-k8s.kind.cluster={self.cluster}"])
        assert left == "", f"kind-down left the containers of {self.cluster}: {left}"

    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    # The ways kind's users make a node fail besides `docker stop` (tests/e2e/test_kind_node_failures.py).
    FAILURES = ("pause", "disconnect", "kubelet")

    def fail_node(self, node: str, how: str) -> None:
        """pause: the container frozen (`docker pause`); disconnect: cut off from kind's network (`docker
        network disconnect`); kubelet: its kubelet stopped inside it (`systemctl stop kubelet`)."""
        if how == "pause":
            run(["docker", "pause", node])
        elif how == "disconnect":
            run(["docker", "network", "disconnect", "kind", node])
        elif how == "kubelet":
            run(["docker", "exec", node, "systemctl", "stop", "kubelet"])
        else:
            raise ValueError(f"no node failure {how!r} (one of {', '.join(self.FAILURES)})")

    def node_address(self, node: str) -> str:
        return run(["docker", "inspect", "--format", '{{(index .NetworkSettings.Networks "kind").IPAddress}}', node])

    def restore_node(self, node: str, how: str, address: str) -> None:
        """Undo fail_node; the node keeps its address on kind's network (its certificates and routes name it)."""
        if how == "pause":
            run(["docker", "unpause", node])
        elif how == "disconnect":
            run(["docker", "network", "connect", "--ip", address, "kind", node])
        elif how == "kubelet":
            run(["docker", "exec", node, "systemctl", "start", "kubelet"])

    def stop_node(self, node: str) -> None:
        run(["docker", "stop", node])

    def start_node(self, node: str) -> None:
        run(["docker", "start", node])

    def node_running(self, node: str) -> bool:
        return run(["docker", "inspect", "--format", "{{.State.Running}}", node]) == "true"

    def kill_container(self, node: str, container_id: str) -> None:
        run(["docker", "exec", node, "ctr", "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", _container(container_id)])

    def _static_pod_flag(self, component: str, name: str) -> str | None:
        with config.new_client_from_config(config_file=str(self.kubeconfig())) as api_client:
            pod = client.CoreV1Api(api_client).read_namespaced_pod(
                f"{component}-{self.control_plane}", "kube-system", _preload_content=False, _request_timeout=30
            )
            container = response_json(pod)["spec"]["containers"][0]
        return _flag([*container.get("command", []), *container.get("args", [])], name)

    def apiserver_flag(self, name: str) -> str | None:
        return self._static_pod_flag("kube-apiserver", name)

    def controller_manager_flag(self, name: str) -> str | None:
        return self._static_pod_flag("kube-controller-manager", name)

    def apiserver_starts(self) -> list[float]:
        with config.new_client_from_config(config_file=str(self.kubeconfig())) as api_client:
            pod = client.CoreV1Api(api_client).read_namespaced_pod(
                f"kube-apiserver-{self.control_plane}", "kube-system", _preload_content=False, _request_timeout=30
            )
            statuses = response_json(pod)["status"].get("containerStatuses") or []
        started = [
            parse_time(((status.get("state") or {}).get("running") or {}).get("startedAt")) for status in statuses
        ]
        return [moment for moment in started if moment is not None]


@dataclass
class LocalProvider:
    """The complete local cluster: hack/local-cluster.sh up DIR --nodes 3, then deploy DIR."""

    directory: Path
    name: str = "local"
    victim: str = f"node-{LOCAL_NODES}"  # zone-a, like node-1 (nodes alternate between zone-a and zone-b)
    bystander: str = "node-1"
    pod_image: str = "taintkeeper.local/pause:3.2"  # hack/local-cluster.sh imports it into every node
    audit: bool = False  # kube-apiserver writes DIR/logs/audit.log (`up --audit`)

    def up(self) -> None:
        audit = ["--audit"] if self.audit else []
        run(["bash", str(LOCAL_CLUSTER), "up", str(self.directory), "--nodes", str(LOCAL_NODES), *audit], timeout=1800)

    def deploy(self) -> None:
        """The main kustomization with the suite's settings; with TAINTKEEPER_E2E_INSTALL=helm, the chart with
        the same settings as values (tests/e2e/helm_install.py)."""
        if os.environ.get("TAINTKEEPER_E2E_INSTALL", "kustomize") == "helm":
            from tests.chart.helm import build_helm  # helm is built only for this way
            from tests.e2e import helm_install

            helm_install.install(self.directory, build_helm())
            return
        overlay = OLDER_LOCAL_OVERLAYS.get(cluster_kubernetes(self.directory) or "", LOCAL_OVERLAY)
        run(["bash", str(LOCAL_CLUSTER), "deploy", str(self.directory), "--overlay", str(overlay)], timeout=1800)

    def down(self) -> None:
        run(["bash", str(LOCAL_CLUSTER), "down", str(self.directory)], timeout=300)

    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    def _nodes(self) -> dict[str, dict]:
        return {
            node["name"]: node for node in json.loads(run(["bash", str(LOCAL_CLUSTER), "nodes", str(self.directory)]))
        }

    def stop_node(self, node: str) -> None:
        run(["bash", str(LOCAL_CLUSTER), "stop-kubelet", str(self.directory), node, "--signal", "KILL"])

    def start_node(self, node: str) -> None:
        run(["bash", str(LOCAL_CLUSTER), "start-kubelet", str(self.directory), node])

    def node_running(self, node: str) -> bool:
        return self._nodes()[node]["pids"]["kubelet"] is not None

    def kill_container(self, node: str, container_id: str) -> None:
        socket = self._nodes()[node]["containerdSocket"]
        run(["ctr", "-a", socket, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", _container(container_id)])

    def _cmdline(self, pidfile: str) -> list[str]:
        pid = (self.directory / pidfile).read_text().strip()
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")

    def apiserver_flag(self, name: str) -> str | None:
        return _flag(self._cmdline("apiserver.pid"), name)

    def controller_manager_flag(self, name: str) -> str | None:
        return _flag(self._cmdline("kube-controller-manager.pid"), name)

    def apiserver_starts(self) -> list[float]:
        # Every start appends to one log (hack/lib/control-plane.sh), and each opens with the version line.
        log = (self.directory / "logs" / "kube-apiserver.log").read_text(errors="replace")
        return [_klog_time(match[1], match[2]) for match in KLOG_VERSION_LINE.finditer(log)]


# klog's header: severity, month and day, local time of day; the year is not written.
KLOG_VERSION_LINE = re.compile(
    r"^[IWEF](\d{4}) (\d{2}:\d{2}:\d{2}\.\d+) +\d+ server\.go:\d+\] Version: v", re.MULTILINE
)


def _klog_time(month_day: str, time_of_day: str, now: float | None = None) -> float:
    """A klog header's month, day and time -> epoch seconds, in the latest year that is not in the future."""
    now = time.time() if now is None else now
    year = datetime.fromtimestamp(now).year
    moment = datetime.strptime(f"{year}{month_day} {time_of_day}", "%Y%m%d %H:%M:%S.%f")
    if moment.timestamp() > now + 86400:
        moment = moment.replace(year=year - 1)
    return moment.timestamp()
