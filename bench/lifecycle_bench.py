"""From a node's last heartbeat to its NoExecute taint and its pods' deletions, on a real apiserver.

200 simulated nodes in two zones (hack/simulator.py) heartbeat against the local kube-apiserver;
the controller runs as a process with the given grace period; then `--dead` nodes stop
heartbeating. For each dead node: last Lease renewal -> NoExecute taint (timeAdded, and when it
was seen), against the grace period; for each of its pods (tolerating `--toleration` seconds):
last renewal -> deletionTimestamp seen, against grace + toleration. Prints one table.

    .venv/bin/python bench/lifecycle_bench.py [--nodes 200] [--dead 6] [--grace 10] [--toleration 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402

from bench.run_reports import append_run_report  # noqa: E402
from hack.servers import ControllerProcess  # noqa: E402
from hack.simulator import Simulator  # noqa: E402
from kube.timestamps import parse_time  # noqa: E402

UR = "node.kubernetes.io/unreachable"


def timestamp(text: str) -> float:
    """An API timestamp the apiserver wrote (so always well-formed) as epoch seconds."""
    parsed = parse_time(text)
    if parsed is None:
        raise ValueError(f"not an API timestamp: {text!r}")
    return parsed


def read(call, *args, **kwargs) -> dict:
    return json.loads(call(*args, _preload_content=False, **kwargs).data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--dead", type=int, default=6)
    parser.add_argument("--pods-per-node", type=int, default=3)
    parser.add_argument("--grace", type=float, default=10.0, help="--node-monitor-grace-period, seconds")
    parser.add_argument("--period", type=float, default=1.0, help="--node-monitor-period, seconds")
    parser.add_argument("--lease-period", type=float, default=2.0, help="simulated kubelets' lease renewal period")
    parser.add_argument("--toleration", type=int, default=5)
    parser.add_argument("--eviction-rate", type=float, default=1.0)
    parser.add_argument("--cluster-dir", type=Path, default=None, help="reuse a running control plane")
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()

    directory = args.cluster_dir or Path(tempfile.mkdtemp(prefix="tk-lifecycle-bench-"))
    script = ROOT / "hack" / "local-cluster.sh"
    up = subprocess.run(["bash", str(script), "up", str(directory)], capture_output=True, text=True, check=True)
    kubeconfig = Path(up.stdout.strip().splitlines()[-1])
    api = config.new_client_from_config(config_file=str(kubeconfig))
    core = client.CoreV1Api(api)
    coordination = client.CoordinationV1Api(api)
    namespace = f"bench-{int(time.time())}"
    core.create_namespace(body={"metadata": {"name": namespace}})  # type: ignore[arg-type]  # sent as it is
    sim = Simulator(api, lease_period=args.lease_period, status_period=60, node_prefix="bench").start()
    controller = None
    try:
        names = sim.add_nodes(args.nodes, zones=["a", "b"])
        dead = names[: args.dead]
        toleration = [{"key": UR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": args.toleration}]
        pods = {
            name: sim.create_pods(name, args.pods_per_node, namespace=namespace, tolerations=toleration)
            for name in dead
        }
        controller = ControllerProcess(
            kubeconfig,
            directory / "bench-controller.log",
            "--leader-elect=false",
            f"--node-monitor-period={args.period}s",
            f"--node-monitor-grace-period={args.grace}s",
            f"--node-eviction-rate={args.eviction_rate}",
        ).start()
        time.sleep(2 * args.lease_period)  # every node renews at least once under the running controller
        sim.stop_heartbeats(*dead)
        last_renewal = {
            name: timestamp(read(coordination.read_namespaced_lease, name, "kube-node-lease")["spec"]["renewTime"])
            for name in dead
        }
        taint_added: dict[str, float] = {}
        taint_seen: dict[str, float] = {}
        deleted_seen: dict[str, float] = {}
        deadline = time.time() + args.grace + args.toleration + 120
        while time.time() < deadline and (
            len(taint_seen) < len(dead) or len(deleted_seen) < len(dead) * args.pods_per_node
        ):
            now = time.time()
            for name in dead:
                if name not in taint_seen:
                    node = read(core.read_node, name)
                    taint = next(
                        (t for t in node["spec"].get("taints") or [] if t["key"] == UR and t["effect"] == "NoExecute"),
                        None,
                    )
                    if taint:
                        taint_seen[name], taint_added[name] = now, timestamp(taint["timeAdded"])
            for pod in read(core.list_namespaced_pod, namespace)["items"]:
                if pod["metadata"].get("deletionTimestamp") and pod["metadata"]["name"] not in deleted_seen:
                    deleted_seen[pod["metadata"]["name"]] = now
            time.sleep(0.2)
    finally:
        if controller is not None:
            controller.kill()
        sim.stop()
        sim.delete_nodes()
        sim.close()
        core.delete_namespace(namespace)
        api.close()
        if args.cluster_dir is None:
            subprocess.run(["bash", str(script), "down", str(directory)], capture_output=True)

    taint_delay = [taint_seen[n] - last_renewal[n] for n in taint_seen]
    pod_delay = [deleted_seen[p] - last_renewal[n] for n, names in pods.items() for p in names if p in deleted_seen]
    expected_taint = args.grace
    expected_pod = args.grace + args.toleration

    def stats(values: list[float], expected: float) -> str:
        if not values:
            return "none seen | | |"
        return (
            f"{statistics.median(values):.1f} s | {max(values):.1f} s | "
            f"+{statistics.median(values) - expected:.1f} s / +{max(values) - expected:.1f} s"
        )

    lines = [
        f"| {args.nodes} simulated nodes, {args.dead} stop heartbeating | median | max | overshoot median / max |",
        "|---|---|---|---|",
        f"| last heartbeat -> NoExecute taint (grace {args.grace:g} s) | {stats(taint_delay, expected_taint)} |",
        f"| last heartbeat -> pod deletion (grace + {args.toleration} s toleration) | "
        f"{stats(pod_delay, expected_pod)} |",
        f"| taints seen / pods deleted | {len(taint_seen)}/{len(dead)} | "
        f"{len(deleted_seen)}/{len(dead) * args.pods_per_node} | |",
        f"| settings | monitor period {args.period:g} s, lease period {args.lease_period:g} s, "
        f"eviction rate {args.eviction_rate:g}/s per zone | | |",
    ]
    table = "\n".join(lines)
    print(table)
    if args.report:
        written = append_run_report(
            "lifecycle",
            f"Node failure to taint and eviction on the local apiserver ({time.strftime('%Y-%m-%d')})",
            f"Command: `.venv/bin/python bench/lifecycle_bench.py --nodes {args.nodes} --dead "
            f"{args.dead} --grace {args.grace:g} --toleration {args.toleration}`\n\n{table}",
        )
        print(f"report appended to {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
