"""The controller at the scalability envelope, side by side with upstream kube-controller-manager.

On the real local kube-apiserver (hack/local-cluster.sh), simulated kubelets (hack/simulator.py)
register N nodes in three zones with P pods each and renew their Leases every 10 s. Then, for each
size and for each controller in turn (taintkeeper's `python -m controller`, then
kube-controller-manager of the cluster's Kubernetes version (1.37 by default, TAINTKEEPER_KUBERNETES=1.20
for the old end) built with the apiserver and running only what taintkeeper replaces (1.37:
`--controllers=node-lifecycle-controller,taint-eviction-controller`; 1.20: `nodelifecycle`, which holds
the taint manager), both with `--node-monitor-period=1s --node-monitor-grace-period=40s`):

1. every node is given back the `node.kubernetes.io/not-ready:NoSchedule` taint the apiserver puts
   on a newly registered node, so each controller starts with the same sweep to do;
2. the controller starts: time until its caches are synced (its own log line), until the sweep is
   done (no Ready node carries not-ready:NoSchedule, seen by this benchmark's watch), and the CPU
   it used until then;
3. after the warm-up, its CPU over the steady window (share of one core) and its RSS;
4. K nodes of zone `a` stop heartbeating: the time from then to each node's NoSchedule and
   NoExecute taint and to each of their pods' deletion (deletionTimestamp), first and last. The
   pods tolerate not-ready/unreachable for --toleration-seconds (10), so evictions come that long
   after the NoExecute taint;
5. the controller stops; the nodes come back, the taints it left are removed, the evicted pods are
   re-created.

One table is printed (and appended to the file --report names, e.g. bench/runs/DATE-envelope.md):

    .venv/bin/python bench/envelope.py [--sizes 1000,2000,5000] [--pods-per-node 30] [--kill 5]
        [--warmup 200] [--steady 60] [--controllers taintkeeper,kube-controller-manager] [--dir DIR]
        [--baseline REV] [--profile SECONDS] [--report PATH] [--down]

The sizes grow one cluster: nodes and pods are added between sizes, never removed. With --dir the
cluster is left up afterwards, for a look at it (unless --down); a later run with the same --dir
starts afresh. A cluster left up keeps etcd and kube-apiserver running from the binary cache:
take it down (`hack/local-cluster.sh down DIR`) before anything that empties that cache.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from hack.deploy import cluster_kubernetes  # noqa: E402
from hack.simulator import Simulator  # noqa: E402
from hack.wait import wait_for  # noqa: E402
from kube.client import release  # noqa: E402
from kube.errors import is_conflict, is_not_found  # noqa: E402
from kube.informer import Informer  # noqa: E402
from kube.request import response_json  # noqa: E402

log = logging.getLogger("envelope")

SCRIPT = ROOT / "hack" / "local-cluster.sh"
TAINTKEEPER = "taintkeeper"
KCM = "kube-controller-manager"
ZONES = ("a", "b", "c")
NOT_READY_NO_SCHEDULE = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
UNREACHABLE = "node.kubernetes.io/unreachable"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
PY_SPY = Path(sys.executable).parent / "py-spy"
# How long refill_pods leaves the evicted pods to the simulator before deleting them itself.
SIMULATOR_DELETION_WAIT = 90.0
# How long the simulator's first pod list may take (158 s at 150,000 pods on a 2-core machine).
SIMULATOR_LIST_WAIT = 600.0


# ----------------------------------------------------------------------------------- the controllers


def controller_manager_binary() -> Path:
    """kube-controller-manager of the Kubernetes version the local cluster runs (built and cached if
    missing): the last path `hack/local-cluster.sh build-node` prints."""
    printed = subprocess.run(["bash", str(SCRIPT), "build-node"], check=True, capture_output=True, text=True).stdout
    return Path(printed.split()[-1])


def controller_command(
    name: str, kubeconfig: Path, monitor_period: str, grace_period: str, kcm: Path | None = None, kcm_minor: int = 0
) -> list[str]:
    common = [
        f"--node-monitor-period={monitor_period}",
        f"--node-monitor-grace-period={grace_period}",
        "--leader-elect=false",
    ]
    if is_taintkeeper(name):
        return [sys.executable, "-m", "controller", "--kubeconfig", str(kubeconfig), "--secure-port=0", *common]
    assert kcm is not None
    if kcm_minor >= 29:  # the taint manager is a controller of its own from 1.29
        replaced = ["--controllers=node-lifecycle-controller,taint-eviction-controller"]
    else:  # and 1.20 serves plain HTTP unless --port=0
        replaced = ["--controllers=nodelifecycle", "--port=0"]
    return [
        str(kcm),
        "--kubeconfig",
        str(kubeconfig),
        *replaced,
        "--secure-port=0",
        "--use-service-account-credentials=false",
        *common,
    ]


# The steady profile is recorded in the steady window's length just before it, and ends this long
# before it starts: py-spy stops all 40 of taintkeeper's threads 100 times a second, and with it in
# the window taintkeeper measured 10.9 % of a core at 1,000 nodes, against 2.2 % without it.
STEADY_PROFILE_MARGIN = 5.0


def record_steady_profile(pid: int, seconds: float, output: Path) -> subprocess.Popen[bytes]:
    """py-spy over `seconds` of the process's steady state, without pausing it (--nonblocking)."""
    return subprocess.Popen(
        [
            str(PY_SPY),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(int(seconds)),
            "--nonblocking",
            "--format",
            "raw",
            "--output",
            str(output),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def is_taintkeeper(name: str) -> bool:
    """`taintkeeper` is this checkout; `taintkeeper@REV` the controller as it was at git revision REV."""
    return name == TAINTKEEPER or name.startswith(TAINTKEEPER + "@")


def checkout(name: str, scratch: Path) -> Path:
    """The directory to run `name` from: this checkout, or a worktree of its revision."""
    if "@" not in name:
        return ROOT
    revision = name.split("@", 1)[1]
    tree = scratch / f"taintkeeper-{revision}"
    if not tree.exists():
        # A worktree whose directory went with an earlier cluster is still registered: forget it first.
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=True, capture_output=True)
        result = subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), revision], capture_output=True, text=True
        )
        if result.returncode != 0:
            raise RuntimeError(f"cannot check out {revision} for {name}: {result.stderr.strip()}")
    return tree


def caches_synced(name: str, log: str) -> bool:
    """Whether the controller's own log says its informers have synced. taintkeeper says it once;
    kube-controller-manager says it per controller ("Caches are synced for taint" on 1.20; on 1.37 the
    contextual logger drops the name): all synced once every "Waiting for caches to sync" has its
    "Caches are synced" (this benchmark runs only the node lifecycle and taint eviction controllers)."""
    if is_taintkeeper(name):
        return "caches synced" in log
    waiting = log.count("Waiting for caches to sync")
    return waiting > 0 and log.count("Caches are synced") >= waiting


class Process:
    """A controller process: its CPU seconds and RSS from /proc, its log as a file."""

    def __init__(self, args: list[str], log_path: Path, cwd: Path) -> None:
        self.log_path = log_path
        with log_path.open("wb") as out:
            self.popen = subprocess.Popen(args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.started = time.monotonic()

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime

    def rss_bytes(self) -> int:
        return int(Path(f"/proc/{self.popen.pid}/statm").read_text().split()[1]) * PAGE_SIZE

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()


# ----------------------------------------------------------------------------------- what the API shows


@dataclass(frozen=True)
class NodeSeen:
    name: str
    zone: str
    taints: frozenset[tuple[str, str]]
    ready: str | None

    @property
    def key(self) -> str:
        return self.name


def node_seen(node: dict[str, Any]) -> NodeSeen:
    metadata, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    return NodeSeen(
        name=metadata["name"],
        zone=(metadata.get("labels") or {}).get("topology.kubernetes.io/zone", ""),
        taints=frozenset((t["key"], t["effect"]) for t in spec.get("taints") or ()),
        ready=ready,
    )


@dataclass(frozen=True)
class PodSeen:
    namespace: str
    name: str
    node: str
    deleting: bool

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_seen(pod: dict[str, Any]) -> PodSeen:
    metadata = pod["metadata"]
    return PodSeen(
        metadata.get("namespace", ""),
        metadata["name"],
        (pod.get("spec") or {}).get("nodeName", ""),
        bool(metadata.get("deletionTimestamp")),
    )


class Observer:
    """Watches every node (taints, Ready) and records when each taint first appeared on each node."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self._lock = threading.Lock()
        self.taint_seen: dict[tuple[str, str, str], float] = {}  # (node, key, effect) -> monotonic time
        self.nodes: Informer[NodeSeen] = Informer("bench-nodes", self.core.list_node, node_seen, self._on_node)
        self.nodes.start()
        if not self.nodes.wait_for_sync(300):
            raise RuntimeError("the benchmark's node watch did not sync")

    def _on_node(self, old: NodeSeen | None, new: NodeSeen | None) -> None:
        if new is None:
            return
        now = time.monotonic()
        with self._lock:
            for key, effect in new.taints - (old.taints if old else frozenset()):
                self.taint_seen.setdefault((new.name, key, effect), now)
            for key, effect in (old.taints if old else frozenset()) - new.taints:
                self.taint_seen.pop((new.name, key, effect), None)

    def first_seen(self, node: str, effect: str, since: float) -> float | None:
        """When `node` was first seen carrying the unreachable taint with `effect` (a stopped kubelet
        makes its node Unknown), if that was after `since`."""
        with self._lock:
            seen = self.taint_seen.get((node, UNREACHABLE, effect))
        return seen if seen is not None and seen >= since else None

    def all_ready(self, count: int) -> bool:
        nodes = self.nodes.list()
        return len(nodes) >= count and all(node.ready == "True" for node in nodes)

    def nodes_with(self, taint: dict[str, str]) -> int:
        return sum(1 for node in self.nodes.list() if (taint["key"], taint["effect"]) in node.taints)

    def stop(self) -> None:
        self.nodes.stop()


class PodDeletions:
    """Watches the pods of some nodes; records when each pod was first seen being deleted."""

    def __init__(self, core: client.CoreV1Api, nodes: Sequence[str]) -> None:
        self.deleting: dict[str, float] = {}
        self._lock = threading.Lock()
        self.informers = [
            Informer(
                f"bench-pods-{node}",
                functools.partial(core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}"),
                pod_seen,
                self._on_pod,
            )
            for node in nodes
        ]
        for informer in self.informers:
            informer.start()
        for informer in self.informers:
            if not informer.wait_for_sync(120):
                raise RuntimeError(f"{informer.name} did not sync")

    def _on_pod(self, old: PodSeen | None, new: PodSeen | None) -> None:
        if (new is None and old is not None) or (new is not None and new.deleting):
            with self._lock:
                self.deleting.setdefault((new or old).key, time.monotonic())  # type: ignore[union-attr]

    def pods(self) -> list[str]:
        return [pod.key for informer in self.informers for pod in informer.list()]

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()


# ----------------------------------------------------------------------------------- the cluster


class Cluster:
    def __init__(self, directory: Path, pods_per_node: int, toleration_seconds: int, workers: int) -> None:
        self.directory = directory
        self.pods_per_node = pods_per_node
        # What DefaultTolerationSeconds (or taintkeeper's webhook) gives a pod, with a shorter time
        # so that evictions come within the run; set explicitly, so taintkeeper's backfill has
        # nothing to add and both controllers evict at the same moment.
        self.tolerations = [
            {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": toleration_seconds}
            for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        ]
        if (directory / "ports").exists():  # a cluster of an earlier run: start afresh
            subprocess.run(["bash", str(SCRIPT), "down", str(directory)], capture_output=True, check=True)
            shutil.rmtree(directory)
        result = subprocess.run(["bash", str(SCRIPT), "up", str(directory)], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"the local cluster did not start:\n{result.stderr[-3000:]}")
        self.kubeconfig = Path(result.stdout.strip().splitlines()[-1])
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=configuration)
        configuration.connection_pool_maxsize = workers + 8
        self.api = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api)
        self.sim = Simulator(self.api, lease_period=10, status_period=60, workers=workers)
        self.pool = futures.ThreadPoolExecutor(workers)

    def grow(self, nodes: int) -> float:
        """Add nodes (three zones) and their pods up to `nodes`; seconds it took, up to the
        simulator's pod list. Heartbeats are stopped meanwhile: at thousands of nodes they would
        starve the registrations."""
        started = time.monotonic()
        self.sim.stop()
        missing = nodes - len(self.sim.nodes)
        if missing > 0:
            names = self.sim.add_nodes(missing, zones=list(ZONES))
            log.info(
                "registered %d nodes in %.0fs; creating %d pods",
                len(names),
                time.monotonic() - started,
                len(names) * self.pods_per_node,
            )
            for done, name in enumerate(names, 1):
                self.sim.create_pods(name, self.pods_per_node, tolerations=self.tolerations)
                if done % 500 == 0:
                    log.info("pods for %d/%d nodes (%.0fs)", done, len(names), time.monotonic() - started)
        self.sim.start()
        # Before any controller starts: the simulator's first pod list loads the apiserver and
        # etcd for minutes at 150,000 pods, and would be counted in that controller's start.
        if not self.sim.wait_for_pod_list(SIMULATOR_LIST_WAIT):
            raise RuntimeError(f"the simulator did not list the pods within {SIMULATOR_LIST_WAIT:.0f}s")
        return time.monotonic() - started

    def nodes_of_zone(self, zone: str, count: int) -> list[str]:
        names = self.sim.nodes
        return [name for index, name in enumerate(names) if ZONES[index % len(ZONES)] == zone][:count]

    def set_taints(self, names: Sequence[str], taints: list[dict[str, str]]) -> None:
        body = {"spec": {"taints": taints or None}}
        list(self.pool.map(lambda name: self.core.patch_node(name, body, _preload_content=False), names))

    def refill_pods(self, names: Sequence[str]) -> None:
        """Bring the pods of `names` back to P each, once the evicted ones are gone. The simulator
        finishes deletions on live nodes; if it has not within SIMULATOR_DELETION_WAIT, the
        benchmark deletes them itself (grace 0, as the simulator would) and says so, so one
        lagging simulator does not end the run. The evictions were measured before this."""
        for name in names:

            def terminating(name: str = name) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
                # From the watch cache (resourceVersion 0): without it, each poll had the apiserver
                # read every pod of the cluster from etcd to pick this node's.
                pods: list[dict[str, Any]] = response_json(
                    self.core.list_pod_for_all_namespaces(
                        field_selector=f"spec.nodeName={name}", resource_version="0", _preload_content=False
                    )
                )["items"]
                return pods, [pod for pod in pods if pod["metadata"].get("deletionTimestamp")]

            try:
                wait_for(
                    lambda: not terminating()[1],
                    SIMULATOR_DELETION_WAIT,
                    f"the simulator to finish the evicted pods of {name}",
                    interval=0.5,
                )
            except TimeoutError:
                left = terminating()[1]
                log.warning(
                    "the simulator has not finished %d evicted pod(s) of %s in %.0fs (it knows %d as "
                    "Terminating; %s); deleting them with grace 0",
                    len(left),
                    name,
                    SIMULATOR_DELETION_WAIT,
                    self.sim.terminating(name),
                    self.sim.stats(),
                )
                for pod in left:
                    self._force_delete(pod)
                wait_for(lambda: not terminating()[1], 60, f"the evicted pods of {name} to be gone", interval=0.5)
            missing = self.pods_per_node - len(terminating()[0])
            if missing > 0:
                self.sim.create_pods(name, missing, tolerations=self.tolerations)

    def _force_delete(self, pod: dict[str, Any]) -> None:
        metadata = pod["metadata"]
        body = client.V1DeleteOptions(grace_period_seconds=0, preconditions=client.V1Preconditions(uid=metadata["uid"]))
        try:
            release(
                self.core.delete_namespaced_pod(
                    metadata["name"], metadata["namespace"], body=body, _preload_content=False
                )
            )
        except ApiException as error:
            if not (is_not_found(error) or is_conflict(error)):  # gone already, or a new pod has the name
                raise

    def close(self, keep: bool) -> None:
        self.sim.close()
        self.pool.shutdown()
        self.api.close()
        if not keep:
            subprocess.run(["bash", str(SCRIPT), "down", str(self.directory)], capture_output=True)


# ----------------------------------------------------------------------------------- one run


@dataclass
class Result:
    controller: str
    nodes: int
    pods: int
    synced: float | None = None
    sweep_done: float | None = None
    startup_cpu: float | None = None  # CPU seconds from start until the sweep was done
    steady_cpu: float | None = None  # share of one core
    sweep_rate: float | None = None  # registration taints lifted per second, from the first to the last
    plain_patch_rate: float | None = None  # the benchmark's own PATCHes per second, just before
    rss_mb: float | None = None
    no_schedule: list[float] = field(default_factory=list)  # seconds after the kill, per node
    no_execute: list[float] = field(default_factory=list)
    evictions: list[float] = field(default_factory=list)  # per pod
    killed_pods: int = 0
    note: str = ""


def run_one(
    cluster: Cluster, observer: Observer, name: str, args: argparse.Namespace, out: Path, kcm: Path | None = None
) -> Result:
    names = cluster.sim.nodes
    result = Result(name, len(names), len(names) * args.pods_per_node)
    killed = cluster.nodes_of_zone("a", args.kill)
    # Every node as a new registration leaves it: not-ready:NoSchedule, and nothing else. Timed: the
    # apiserver's node-PATCH rate under the same heartbeats with a plain client, which bounds any sweep.
    patching = time.monotonic()
    cluster.set_taints(names, [NOT_READY_NO_SCHEDULE])
    result.plain_patch_rate = len(names) / (time.monotonic() - patching)
    wait_for(
        lambda: observer.nodes_with(NOT_READY_NO_SCHEDULE) == len(names),
        120,
        "every node to carry not-ready",
        interval=0.5,
    )
    version = cluster_kubernetes(cluster.directory) or ""  # the kube-controller-manager build-node gave: the same
    command = controller_command(
        name, cluster.kubeconfig, args.monitor_period, args.grace_period, kcm, int(version.partition(".")[2] or 0)
    )
    process = Process(command, out / f"{name}-{len(names)}.log", checkout(name, out))
    profiler = None
    if args.profile and is_taintkeeper(name):  # where the start-up's CPU goes
        profiler = subprocess.Popen(
            [
                str(PY_SPY),
                "record",
                "--pid",
                str(process.popen.pid),
                "--duration",
                str(int(args.profile)),
                "--format",
                "raw",
                "--output",
                str(out / f"{name}-{len(names)}.profile.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    try:
        synced = False
        sweep_started: float | None = None
        steady_profiler: subprocess.Popen[bytes] | None = None
        while time.monotonic() - process.started < args.warmup:
            if not process.alive():
                raise RuntimeError(f"{name} exited; see {process.log_path}")
            now = time.monotonic() - process.started
            if not synced and caches_synced(name, process.log_text()):
                synced, result.synced = True, now
            left = observer.nodes_with(NOT_READY_NO_SCHEDULE)
            if sweep_started is None and left < len(names):
                sweep_started = now
            if result.sweep_done is None and left == 0:
                result.sweep_done, result.startup_cpu = now, process.cpu_seconds()
                if sweep_started is not None and now > sweep_started:
                    result.sweep_rate = len(names) / (now - sweep_started)
            if (
                steady_profiler is None
                and args.profile_steady
                and is_taintkeeper(name)
                and (now >= args.warmup - args.steady - STEADY_PROFILE_MARGIN)
            ):
                steady_profiler = record_steady_profile(
                    process.popen.pid, args.steady, out / f"{name}-{len(names)}.steady.profile.txt"
                )
            time.sleep(0.2)
        if steady_profiler is not None:
            steady_profiler.wait(args.steady + 30)
        cpu_before, window_start = process.cpu_seconds(), time.monotonic()
        time.sleep(args.steady)
        result.steady_cpu = (process.cpu_seconds() - cpu_before) / (time.monotonic() - window_start)
        result.rss_mb = process.rss_bytes() / 1e6

        if killed:
            stop_nodes(cluster, observer, killed, result, args.after_kill)
    finally:
        process.stop()
        if profiler is not None:
            profiler.wait(30)
    if killed:  # back to a healthy cluster for the next run
        cluster.sim.resume_heartbeats(*killed)
        cluster.set_taints(killed, [])
        cluster.refill_pods(killed)
    return result


def stop_nodes(cluster: Cluster, observer: Observer, killed: list[str], result: Result, wait: float) -> None:
    """Stop the kubelets of `killed`; record when their taints and their pods' deletions were seen."""
    deletions = PodDeletions(cluster.core, killed)
    try:
        pods = deletions.pods()
        result.killed_pods = len(pods)
        cluster.sim.stop_heartbeats(*killed)
        kill_time = time.monotonic()
        while time.monotonic() < kill_time + wait:
            tainted = [observer.first_seen(node, "NoExecute", kill_time) for node in killed]
            if all(t is not None for t in tainted) and len(deletions.deleting) >= len(pods):
                break
            time.sleep(0.5)
        for effect, into in (("NoSchedule", result.no_schedule), ("NoExecute", result.no_execute)):
            for node in killed:
                seen = observer.first_seen(node, effect, kill_time)
                if seen is not None:
                    into.append(seen - kill_time)
        result.evictions = sorted(t - kill_time for t in deletions.deleting.values())
    finally:
        deletions.stop()


# ----------------------------------------------------------------------------------- the report


def span(values: list[float], expected: int) -> str:
    if not values:
        return f"none of {expected}"
    text = f"{min(values):.0f} → {max(values):.0f} s" if len(values) > 1 else f"{values[0]:.0f} s"
    return text if len(values) == expected else f"{text} ({len(values)} of {expected})"


def table(results: list[Result], kill: int) -> str:
    lines = [
        "| nodes / pods | controller | caches synced | sweep done | start-up CPU | steady CPU | RSS | "
        f"{kill} nodes stop: NoSchedule | NoExecute | evictions |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.nodes:,} / {r.pods:,} | {r.controller} | {fmt(r.synced, 's')} | {fmt(r.sweep_done, 's')} | "
            f"{fmt(r.startup_cpu, 's')} | {fmt(r.steady_cpu and r.steady_cpu * 100, '%')} | {fmt(r.rss_mb, 'MB', 0)} | "
            f"{span(r.no_schedule, kill)} | {span(r.no_execute, kill)} | {span(r.evictions, r.killed_pods)} |"
        )
    return "\n".join(lines)


def ratios(results: list[Result]) -> str:
    """taintkeeper against kube-controller-manager in the same run, size by size (goal: <= 1.0x for the
    times, <= 0.5x steady CPU, <= 0.2x RSS), and its sweep against the plain client's PATCH rate (>= 90 %)."""
    lines = [
        "| nodes | caches synced | sweep done | first NoExecute after the kill | steady CPU | RSS | "
        "sweep rate / plain client PATCH rate |",
        "|---|---|---|---|---|---|---|",
    ]
    for ours in (r for r in results if r.controller == TAINTKEEPER):
        theirs = next((r for r in results if r.controller == KCM and r.nodes == ours.nodes), Result(KCM, 0, 0))
        cells = [
            _ratio(ours.synced, theirs.synced),
            _ratio(ours.sweep_done, theirs.sweep_done),
            _ratio(min(ours.no_execute, default=None), min(theirs.no_execute, default=None)),
            _ratio(ours.steady_cpu, theirs.steady_cpu),
            _ratio(ours.rss_mb, theirs.rss_mb),
        ]
        sweep = (
            f"{ours.sweep_rate:.0f} / {ours.plain_patch_rate:.0f} per s = {ours.sweep_rate / ours.plain_patch_rate:.0%}"
            if ours.sweep_rate and ours.plain_patch_rate
            else "-"
        )
        lines.append(f"| {ours.nodes:,} | {' | '.join(cells)} | {sweep} |")
    return "\n".join(lines)


def _ratio(mine: float | None, theirs: float | None) -> str:
    return "-" if mine is None or theirs is None or theirs == 0 else f"{mine / theirs:.2f}x"


def fmt(value: float | None, unit: str, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f} {unit}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,2000,5000", type=lambda text: [int(n) for n in text.split(",")])
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument(
        "--toleration-seconds", type=int, default=10, help="the pods' not-ready/unreachable NoExecute tolerationSeconds"
    )
    parser.add_argument("--kill", type=int, default=5, help="nodes of zone a that stop heartbeating")
    parser.add_argument("--warmup", type=float, default=200, help="seconds from start to the steady window")
    parser.add_argument("--steady", type=float, default=60, help="seconds of the steady-state window")
    parser.add_argument("--after-kill", type=float, default=150, help="seconds to wait for taints and evictions")
    parser.add_argument("--monitor-period", default="1s")
    parser.add_argument("--grace-period", default="40s")
    parser.add_argument("--controllers", default=f"{TAINTKEEPER},{KCM}", type=lambda text: text.split(","))
    parser.add_argument(
        "--baseline", metavar="REV", help="at the largest size, also run taintkeeper as it was at git revision REV"
    )
    parser.add_argument(
        "--profile",
        type=float,
        metavar="SECONDS",
        help="record taintkeeper's first SECONDS with py-spy (runs/<name>-<nodes>.profile.txt)",
    )
    parser.add_argument(
        "--profile-steady",
        action="store_true",
        help="record taintkeeper's steady state with py-spy, just before the steady window "
        "(runs/<name>-<nodes>.steady.profile.txt)",
    )
    parser.add_argument("--workers", type=int, default=8, help="the simulator's worker threads")
    parser.add_argument("--dir", type=Path, help="the cluster's directory (kept afterwards, and left up)")
    parser.add_argument(
        "--down", action="store_true", help="take the cluster down at the end even with --dir (its files are kept)"
    )
    parser.add_argument("--report", type=Path, help="append the table to this file (e.g. bench/runs/DATE-envelope.md)")
    args = parser.parse_args(argv)
    if (args.profile or args.profile_steady) and not PY_SPY.exists():
        parser.error(f"--profile needs py-spy ({PY_SPY}): .venv/bin/pip install -e '.[bench]'")
    if args.profile_steady and args.warmup < 2 * args.steady + STEADY_PROFILE_MARGIN:
        parser.error(
            "--profile-steady records the --steady seconds before the window: --warmup must be at least "
            f"twice --steady plus {STEADY_PROFILE_MARGIN:g} s"
        )
    unknown = {name for name in args.controllers if name != KCM and not is_taintkeeper(name)}
    if unknown:
        parser.error(f"unknown controller(s): {', '.join(sorted(unknown))}")
    if args.sizes != sorted(args.sizes) or min(args.sizes) < 3 * args.kill:
        parser.error("--sizes must grow, and each size hold --kill nodes in zone a")
    return args


def leaves_cluster_up(args: argparse.Namespace) -> bool:
    """A cluster in a directory the user named stays up for a look at it, unless --down; a temporary one goes."""
    return args.dir is not None and not args.down


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("taintkeeper").setLevel(logging.WARNING)
    kcm = controller_manager_binary() if KCM in args.controllers else None
    directory = args.dir or Path(tempfile.mkdtemp(prefix="envelope-"))
    cluster = Cluster(directory, args.pods_per_node, args.toleration_seconds, args.workers)
    out = directory / "runs"
    out.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    observer: Observer | None = None
    try:
        for size in args.sizes:
            took = cluster.grow(size)
            log.info("cluster at %d nodes / %d pods (%.0fs)", size, size * args.pods_per_node, took)
            if observer is None:
                observer = Observer(cluster.api)
            wait_for(functools.partial(observer.all_ready, size), 300, "every node Ready", interval=0.5)
            baseline = [f"{TAINTKEEPER}@{args.baseline}"] if args.baseline and size == args.sizes[-1] else []
            for name in baseline + args.controllers:
                log.info("%s at %d nodes", name, size)
                result = run_one(cluster, observer, name, args, out, kcm)
                results.append(result)
                print(table([result], args.kill), flush=True)
    finally:
        if observer is not None:
            observer.stop()
        cluster.close(keep=leaves_cluster_up(args))
    text = f"{table(results, args.kill)}\n\n{ratios(results)}"
    print(text)
    if args.report:
        with args.report.open("a") as report:
            report.write(
                f"\n## The controller at the scalability envelope ({time.strftime('%Y-%m-%d')})\n\n"
                f"`{' '.join(['bench/envelope.py', *sys.argv[1:]])}`\n\n{text}\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
