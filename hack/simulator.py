"""Node simulator: plays the kubelets of many Nodes against a kube-apiserver, for the integration
tests, the demo and scale runs. There are no containers: only what a kubelet writes to the API.

What each simulated kubelet does (as a 1.20 kubelet would, in API terms):
* registers its Node (zone/region/hostname/os labels, 4 CPU, 16Gi, 110 pods) and posts its
  status through the status subresource: Ready=True (KubeletReady), Memory/Disk/PID pressure and
  NetworkUnavailable False;
* owns a Lease in kube-node-lease (holder = node, 40 s duration, ownerReference to the Node) and
  renews it every lease period; re-posts its NodeStatus every status period (fresh
  lastHeartbeatTime, statuses kept). Nodes are spread over each period so hundreds of them
  don't renew at once;
* finishes graceful pod deletions: a pod on a live simulated node whose deletionTimestamp has
  passed is deleted with grace 0. On a node whose heartbeats are stopped (a crash or a partition)
  the pod stays Terminating, as in a real cluster, until the heartbeats resume.

Python API (thread-based: one scheduler thread, one pod-watch thread and a small worker pool)::

    sim = Simulator(api_client, lease_period=10, status_period=60, node_prefix="sim")
    sim.start()
    nodes = sim.add_nodes(10, zones=["a", "b"])
    sim.create_pods(nodes[0], 3, namespace="default")
    sim.stop_heartbeats(nodes[0]); ...; sim.resume_heartbeats(nodes[0])
    sim.set_condition(nodes[1], "MemoryPressure", "True")
    sim.stop(); sim.delete_nodes(); sim.close()     # or: with Simulator(...) as sim: ...

The documented command::

    python hack/simulator.py --kubeconfig KUBECONFIG --nodes 10 --zones a,b
        [--prefix sim] [--lease-period 10s] [--status-period 1m] [--pods-per-node N]
        [--namespace default] [--fail NODE,NODE [--fail-after SECONDS] [--recover-after SECONDS]]
        [--duration SECONDS] [--keep] [--verbose]

It creates the nodes (and N running pods per node), then runs until SIGINT/SIGTERM or for
--duration, printing one timestamped line per action and a summary line every 10 s. Periods and
times take seconds ("10", "0.5") or Go-style durations ("10s", "500ms", "1m30s"). --fail names
nodes (full names, or indexes: "0,3" means PREFIX-0,PREFIX-3) whose heartbeats stop
--fail-after seconds after the nodes are up (default 0); --recover-after resumes them that many
seconds after they failed (default: never). On exit the nodes, their leases and the pods it
created are deleted, unless --keep. A bad flag prints one error line and exits 2.

The parts, one job each: this file is the command line, and the names importers take from
hack.simulator (Simulator, parse_args, parse_duration, ...). The Simulator class and its public
API are in hack/simulator_api.py, built on hack/simulator_base.py (its state and plumbing);
hack/simulator_registration.py registers and deletes Nodes, hack/simulator_heartbeats.py renews
Leases and posts NodeStatus, hack/simulator_pods.py creates pods and finishes deletions,
hack/simulator_pod_watch.py lists and watches the Terminating pods, hack/simulator_pool.py is the
worker pool and hack/simulator_state.py what is kept per node and per pod.
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from pathlib import Path

from kubernetes import config

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python hack/simulator.py` from anywhere
    sys.path.insert(0, str(ROOT))

from hack.simulator_api import Simulator  # noqa: E402
from hack.simulator_pool import BULK, DELETION, HEARTBEAT, _PriorityPool  # noqa: E402
from hack.simulator_state import Stats  # noqa: E402
from kube.errors import describe_error  # noqa: E402
from kube.timestamps import parse_time  # noqa: E402
from plumbing.arguments import OneLineErrorParser  # noqa: E402
from plumbing.durations import parse_duration as go_duration  # noqa: E402

# What importers take from hack.simulator; the pool's names for tests/unit/hack/test_simulator_pool.py.
__all__ = [
    "BULK",
    "DELETION",
    "HEARTBEAT",
    "Simulator",
    "Stats",
    "_PriorityPool",
    "main",
    "parse_args",
    "parse_duration",
    "parse_time",
]

log = logging.getLogger("simulator")


def parse_duration(text: str) -> float:
    """Seconds from "10", "0.5", or a Go duration such as "10s", "500ms", "1m30s" (the controller's parser)."""
    try:
        return float(text.strip())
    except ValueError:
        return go_duration(text)


# --------------------------------------------------------------------------------- command line


def _duration(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return seconds


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineErrorParser(
        prog="simulator", description="Simulated kubelets for many Nodes (see hack/simulator.py)."
    )
    parser.add_argument("--kubeconfig", required=True, type=Path, metavar="FILE")
    parser.add_argument("--nodes", required=True, type=_positive_int, metavar="N", help="how many nodes to simulate")
    parser.add_argument("--zones", default="", metavar="A,B", help="zones, assigned round-robin (default: none)")
    parser.add_argument("--region", default="sim-region")
    parser.add_argument("--prefix", default="sim", help="nodes are named PREFIX-0, PREFIX-1, ... (default: sim)")
    parser.add_argument(
        "--lease-period",
        type=_duration,
        default=10.0,
        metavar="DURATION",
        help="renew each Lease this often (default: 10s)",
    )
    parser.add_argument(
        "--status-period",
        type=_duration,
        default=60.0,
        metavar="DURATION",
        help="re-post each NodeStatus this often (default: 1m)",
    )
    parser.add_argument(
        "--pods-per-node",
        type=_positive_int,
        default=0,
        metavar="N",
        help="running pods to create on each node (default: 0)",
    )
    parser.add_argument("--namespace", default="default", help="the pods' namespace (default: default)")
    parser.add_argument("--fail", default="", metavar="NODE,NODE", help="nodes (names or indexes) to fail")
    parser.add_argument(
        "--fail-after",
        type=_duration,
        metavar="SECONDS",
        help="stop their heartbeats this long after the nodes are up (default: 0)",
    )
    parser.add_argument(
        "--recover-after",
        type=_duration,
        metavar="SECONDS",
        help="resume their heartbeats this long after they failed (default: never)",
    )
    parser.add_argument(
        "--duration",
        type=_duration,
        metavar="SECONDS",
        help="run this long, then clean up and exit (default: until SIGINT/SIGTERM)",
    )
    parser.add_argument("--keep", action="store_true", help="leave the nodes, leases and pods behind on exit")
    parser.add_argument("--verbose", action="store_true", help="also log every lease renewal and status post")
    args = parser.parse_args(argv)

    if args.nodes < 1:
        parser.error("--nodes must be at least 1")
    if not args.kubeconfig.is_file():
        parser.error(f"--kubeconfig: no such file: {args.kubeconfig}")
    args.zones = [zone.strip() for zone in args.zones.split(",") if zone.strip()]
    if args.lease_period <= 0 or args.status_period <= 0:
        parser.error("--lease-period and --status-period must be positive")
    if args.duration is not None and args.duration <= 0:
        parser.error("--duration must be positive")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", args.prefix):
        parser.error(f"--prefix {args.prefix!r} is not a valid DNS label")
    names = [f"{args.prefix}-{i}" for i in range(args.nodes)]
    failing = []
    for item in filter(None, (part.strip() for part in args.fail.split(","))):
        name = f"{args.prefix}-{item}" if item.isdigit() else item
        if name not in names:
            parser.error(f"--fail: {item!r} is not one of the nodes {args.prefix}-0..{args.prefix}-{args.nodes - 1}")
        failing.append(name)
    args.fail = failing
    if not failing and (args.fail_after is not None or args.recover_after is not None):
        parser.error("--fail-after and --recover-after need --fail")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        stream=sys.stdout,
        format="%(asctime)s.%(msecs)03d %(message)s",
        datefmt="%Y-%m-%dT%H:%M:%S",
    )
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    try:
        api_client = config.new_client_from_config(config_file=str(args.kubeconfig))
    except Exception as error:
        print(f"simulator: error: cannot load {args.kubeconfig}: {error}", file=sys.stderr)
        return 2

    interrupted = threading.Event()

    def on_signal(number: int, _frame: object) -> None:
        log.info("%s received: cleaning up", signal.Signals(number).name)
        interrupted.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    simulator = Simulator(
        api_client, lease_period=args.lease_period, status_period=args.status_period, node_prefix=args.prefix
    )
    try:
        simulator.start()
        nodes = simulator.add_nodes(args.nodes, zones=args.zones or None, region=args.region)
        if args.pods_per_node:
            # One caller thread per node keeps the pool busy; create_pods itself parallelizes only per node.
            with futures.ThreadPoolExecutor(4) as callers:
                list(callers.map(lambda node: simulator.create_pods(node, args.pods_per_node, args.namespace), nodes))
        log.info(
            "%d node(s) up (lease every %gs, status every %gs)%s",
            len(nodes),
            args.lease_period,
            args.status_period,
            "" if args.duration is None else f"; running for {args.duration:g}s",
        )
        _run_timeline(simulator, args, interrupted)
    except KeyboardInterrupt:
        pass
    except Exception as error:
        log.error("failed: %s", describe_error(error))
        return 1
    finally:
        simulator.stop()
        try:
            if args.keep:
                log.info("--keep: leaving %d node(s) behind", len(simulator.nodes))
            else:
                simulator.delete_nodes()
        finally:
            simulator.close()
            api_client.close()
    return 0


def _run_timeline(simulator: Simulator, args: argparse.Namespace, interrupted: threading.Event) -> None:
    started = time.monotonic()
    events: list[tuple[float, str, Callable[[], None]]] = []
    if args.fail:
        fail_at = started + (args.fail_after or 0.0)
        events.append((fail_at, "fail", lambda: simulator.stop_heartbeats(*args.fail)))
        if args.recover_after is not None:
            events.append((fail_at + args.recover_after, "recover", lambda: simulator.resume_heartbeats(*args.fail)))
    end = None if args.duration is None else started + args.duration
    summary_every = 10.0
    next_summary = started + summary_every
    last = simulator.stats()
    last_time = started
    while not interrupted.is_set():
        now = time.monotonic()
        while events and events[0][0] <= now:
            events.pop(0)[2]()
        if end is not None and now >= end:
            log.info("--duration %gs reached", args.duration)
            return
        if now >= next_summary:
            stats = simulator.stats()
            rate = (stats.api_calls - last.api_calls) / (now - last_time)
            log.info(
                "summary: %d lease renewals, %d status posts, %d pods removed, %d errors; %.1f API calls/s; CPU %.2fs",
                stats.lease_renewals,
                stats.status_posts,
                stats.pods_removed,
                stats.errors,
                rate,
                stats.cpu_seconds,
            )
            last, last_time, next_summary = stats, now, now + summary_every
        wake = min([next_summary, *(t for t, _, _ in events[:1]), *([end] if end is not None else [])])
        interrupted.wait(max(wake - time.monotonic(), 0.01))


if __name__ == "__main__":
    sys.exit(main())
