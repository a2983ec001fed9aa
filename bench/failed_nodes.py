"""Upstream's failed-node bugs, timed for taintkeeper and for kube-controller-manager in one run, on the
complete local cluster with real kubelets.

    .venv/bin/python bench/failed_nodes.py [--dir DIR] [--kubernetes 1.37|1.20]

Both run with their defaults (node monitor period 5 s, grace 50 s on 1.32+, 40 s before), one after the
other on the same three nodes: taintkeeper's controller as a process (built-ins off), then the
cluster switched to the built-ins (`up --builtin-node-lifecycle`). Two scenarios each:

- runtime then kubelet (kubernetes#125618, #112733): node-1's containerd killed; the kubelet reports
  Ready=False and keeps its Lease; RUNTIME_ALONE later its kubelet killed too. When was the pod on it
  marked Ready=False, counted from the node's Ready=False (never: by the end of the watch)?
- a hand-over 12 s into a node's silence: node-2's kubelet killed with the controller (taintkeeper's
  process; kube-controller-manager, its Lease deleted so the next one leads at once), the controller
  started again 12 s later. When was the node marked Unknown and tainted unreachable:NoExecute,
  counted from its last heartbeat?

Prints one table. Not part of the suite (about 10 minutes): tests/realnodes/test_failed_nodes.py holds
the behaviour with short grace periods.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import config  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from hack.servers import ControllerProcess  # noqa: E402
from hack.wait import wait_for  # noqa: E402
from kube.request import request_json  # noqa: E402
from kube.timestamps import parse_time  # noqa: E402
from tests.realnodes.nodes import script  # noqa: E402

NAMESPACE = "failed-nodes"
RUNTIME_ALONE = 60.0  # seconds the pod is watched after the kubelet reported Ready=False, before it is killed
WATCH_AFTER_UNKNOWN = 30.0  # how long the pod is watched once the node is Unknown
HAND_OVER_AFTER = 12.0
FOREVER = [
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
]


@dataclass
class Timings:
    pod_marked_after_false: float | None = None  # None: never, while the kubelet was alive
    pod_marked_after_unknown: float | None = None  # None: never, once the kubelet was gone too; 0: already
    unknown_after_heartbeat: float = 0.0
    tainted_after_heartbeat: float = 0.0


def checked(*args: str, timeout: float = 300) -> str:
    result = script(*args, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"failed_nodes: local-cluster.sh {' '.join(args[:2])} failed: {result.stderr.strip()[-500:]}")
    return result.stdout


class Cluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.api = config.new_client_from_config(config_file=str(directory / "kubeconfig"))

    def get(self, path: str) -> dict[str, Any]:
        return request_json(self.api, "GET", path, timeout=10)

    def ready(self, node: str) -> str | None:
        conditions = self.get(f"/api/v1/nodes/{node}").get("status", {}).get("conditions") or []
        return next((c["status"] for c in conditions if c["type"] == "Ready"), None)

    def no_execute(self, node: str) -> bool:
        taints = self.get(f"/api/v1/nodes/{node}").get("spec", {}).get("taints") or []
        return any(t["key"] == "node.kubernetes.io/unreachable" and t["effect"] == "NoExecute" for t in taints)

    def lease_renewed(self, node: str) -> float:
        renewed = parse_time(
            self.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}")["spec"]["renewTime"]
        )
        assert renewed is not None
        return renewed

    def pod_ready(self, name: str) -> str | None:
        conditions = self.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}").get("status", {}).get("conditions") or []
        return next((c["status"] for c in conditions if c["type"] == "Ready"), None)

    def create(self, path: str, body: dict[str, Any]) -> None:
        request_json(self.api, "POST", path, timeout=10, body=body)

    def run_pod(self, node: str) -> str:
        name = f"web-{uuid.uuid4().hex[:5]}"
        image = next(n for n in self.nodes() if n["name"] == node)["busyboxImage"]
        container = {"name": "c", "image": image, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}
        spec = {"nodeName": node, "terminationGracePeriodSeconds": 1, "tolerations": FOREVER, "containers": [container]}
        self.create(f"/api/v1/namespaces/{NAMESPACE}/pods", {"metadata": {"name": name}, "spec": spec})
        wait_for(lambda: self.pod_ready(name) == "True", 120, f"{name} Ready")
        return name

    def nodes(self) -> list[dict[str, Any]]:
        return list(json.loads(checked("nodes", str(self.directory))))

    def whole_again(self, node: str) -> None:
        checked("start-runtime", str(self.directory), node)
        checked("start-kubelet", str(self.directory), node)
        wait_for(lambda: self.ready(node) == "True", 180, f"{node} Ready again")
        wait_for(lambda: not self.no_execute(node), 120, f"{node} untainted")


def first_time(condition: Callable[[], bool], timeout: float) -> float | None:
    """When `condition` first held (polled every 0.2 s), or None within `timeout`."""
    until = time.time() + timeout
    while time.time() < until:
        if condition():
            return time.time()
        time.sleep(0.2)
    return None


def runtime_then_kubelet(cluster: Cluster, timings: Timings) -> None:
    node = "node-1"
    pod = cluster.run_pod(node)
    checked("stop-runtime", str(cluster.directory), node)
    false_at = wait_for(lambda: first_time(lambda: cluster.ready(node) == "False", 5), 120, "Ready=False")
    marked = first_time(lambda: cluster.pod_ready(pod) == "False", false_at + RUNTIME_ALONE - time.time())
    timings.pod_marked_after_false = None if marked is None else marked - false_at
    checked("stop-kubelet", str(cluster.directory), node, "--signal", "KILL")
    unknown_at = wait_for(lambda: first_time(lambda: cluster.ready(node) == "Unknown", 5), 120, "Ready=Unknown")
    if marked is None:
        marked = first_time(lambda: cluster.pod_ready(pod) == "False", WATCH_AFTER_UNKNOWN)
        timings.pod_marked_after_unknown = None if marked is None else marked - unknown_at
    else:
        timings.pod_marked_after_unknown = 0.0
    cluster.whole_again(node)


def hand_over(
    cluster: Cluster, timings: Timings, stop_controller: Callable[[], None], start: Callable[[], None]
) -> None:
    node = "node-2"
    stop_controller()
    checked("stop-kubelet", str(cluster.directory), node, "--signal", "KILL")
    killed = time.time()
    last = cluster.lease_renewed(node)
    time.sleep(max(0.0, killed + HAND_OVER_AFTER - time.time()))  # the scenario: a hand-over this far in
    start()
    unknown = wait_for(lambda: first_time(lambda: cluster.ready(node) == "Unknown", 5), 180, "Ready=Unknown")
    tainted = wait_for(lambda: first_time(lambda: cluster.no_execute(node), 5), 180, "unreachable:NoExecute")
    timings.unknown_after_heartbeat = unknown - last
    timings.tainted_after_heartbeat = tainted - last
    cluster.whole_again(node)


def taintkeeper_run(cluster: Cluster, logs: Path) -> Timings:
    with contextlib.suppress(ApiException):  # 409: there already
        cluster.create("/api/v1/namespaces", {"metadata": {"name": "taintkeeper-system"}})
    flags = ("--leader-elect=true", "--backfill-default-tolerations=false")
    controllers: list[ControllerProcess] = []

    def start() -> None:
        controllers.append(ControllerProcess(cluster.directory / "kubeconfig", logs / "controller.log", *flags).start())

    def stop() -> None:
        for controller in controllers:
            controller.terminate()

    timings = Timings()
    start()
    try:
        runtime_then_kubelet(cluster, timings)
        hand_over(cluster, timings, stop, start)
    finally:
        stop()
    return timings


def builtin_run(cluster: Cluster, version: str) -> Timings:
    checked(
        "up", str(cluster.directory), "--kubernetes", version, "--nodes", "3", "--builtin-node-lifecycle", timeout=900
    )

    def stop() -> None:
        for pidfile in cluster.directory.glob("kube-controller-manager*.pid"):  # every replica: none takes over
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
        with contextlib.suppress(ApiException):  # killed, it released nothing: the next one leads at once
            path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"
            request_json(cluster.api, "DELETE", path, timeout=10)

    def start() -> None:
        checked("start-controller-manager", str(cluster.directory))

    timings = Timings()
    runtime_then_kubelet(cluster, timings)
    hand_over(cluster, timings, stop, start)
    return timings


def seconds(value: float | None) -> str:
    if value is None:
        return "never"
    return "already" if value == 0.0 else f"{value:.1f} s"


def table(version: str, ours: Timings, theirs: Timings) -> str:
    rows = [
        ("pods NotReady after the kubelet reports Ready=False (runtime down, Lease kept)", "pod_marked_after_false"),
        ("then, the kubelet gone too: pods NotReady after Ready=Unknown", "pod_marked_after_unknown"),
        ("a hand-over 12 s into the silence: Unknown after the last heartbeat", "unknown_after_heartbeat"),
        ("the same: unreachable:NoExecute after the last heartbeat", "tainted_after_heartbeat"),
    ]
    lines = [
        f"Kubernetes {version}, defaults (monitor period 5 s)",
        "",
        "| scenario | taintkeeper | kube-controller-manager |",
        "|---|---:|---:|",
    ]
    lines += [f"| {what} | {seconds(getattr(ours, key))} | {seconds(getattr(theirs, key))} |" for what, key in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/failed_nodes.py", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="the cluster's directory (default: a new one)")
    parser.add_argument("--kubernetes", choices=("1.37", "1.20"), default="1.37")
    args = parser.parse_args(argv)
    directory = (args.dir or Path(tempfile.mkdtemp(prefix="failed-nodes-"))).resolve()
    checked("up", str(directory), "--kubernetes", args.kubernetes, "--nodes", "3", timeout=1800)
    try:
        cluster = Cluster(directory)
        cluster.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        wait_for(
            lambda: cluster.get(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts")["items"],
            60,
            "the default ServiceAccount",
        )
        ours = taintkeeper_run(cluster, directory)
        request_json(
            cluster.api,
            "DELETE",
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            timeout=30,
            query=[("gracePeriodSeconds", "0")],
        )
        theirs = builtin_run(cluster, args.kubernetes)
        print(table(args.kubernetes, ours, theirs), flush=True)
    finally:
        script("down", str(directory), timeout=300)
    return 0


if __name__ == "__main__":
    sys.exit(main())
