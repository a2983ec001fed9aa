"""A chaos soak on the complete local cluster, judged by kube-apiserver's audit log.

    .venv/bin/python bench/chaos.py [--duration 60m] [--seed N] [--faults-per-minute 6]
        [--controller taintkeeper|builtin] [--admission webhook|policy] [--dir DIR] [--keep]
        [--timeline FILE.svg] [--sabotage controller-scaled-to-0|webhook-stopped [--sabotage-after 60s]]
        (make chaos)

1. brings up the complete local cluster with 3 real nodes and the audit log on
   (`hack/local-cluster.sh up DIR --nodes 3 --audit`) and deploys taintkeeper from its image and
   manifests (2 controller replicas, 2 webhook replicas; `--admission policy`: its admission policy instead
   of the webhook, manifests/admission-policy, Kubernetes 1.36+); `--controller builtin` runs the oracle
   instead (`--builtin-node-lifecycle`: kube-controller-manager's own node lifecycle controller and
   taint manager, the apiserver's DefaultTolerationSeconds) and deploys nothing;
2. runs the workload (bench/soak/workload.py: a churn of pods of every kind, a Deployment, a
   StatefulSet) and, on top, faults drawn from a seeded catalogue (bench/soak/injector.py), often
   overlapping, each logged with its start and end to DIR/chaos/faults-SEED.jsonl;
   taintkeeper's pods' logs are copied to DIR/chaos/pod-logs/ as they grow (they outlive their pods);
3. after `--duration`, ends the faults, lets the cluster settle, and hands the audit log and the fault
   log, and nothing else, to the checker (bench/soak/): one row per fault kind, a summary line, each
   violation. While a deadline that began in the run has an allowance past the log's end and nothing
   failed yet, it waits for it (at most MAX_WAIT) and judges again: the run ends when every deadline has
   passed or a violation is found, and a deadline still unjudged fails it. Exits 1 when any invariant
   was violated or a deadline went unjudged, 2 on a bad flag or a cluster that cannot start.
   `--sabotage` scales taintkeeper's controller or webhook to 0 partway through (bench/soak/sabotage.py):
   a run the judge must fail.

`--seed` replays a run's draws (which faults, where, how long; the cluster's own timing still varies).
Without `--keep` the cluster is taken down at the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the project root on the path, as `python -m bench.chaos`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import config
from kubernetes.client import ApiClient
from kubernetes.client.rest import ApiException

from bench.soak.check import Judged, judge_run, soak_config
from bench.soak.cluster import ClusterError, LocalCluster
from bench.soak.config import SoakConfig
from bench.soak.injector import CATALOGUE, Injector
from bench.soak.pod_logs import keep_pod_logs
from bench.soak.sabotage import SABOTAGES, sabotage_after
from bench.soak.supervisor import CONTROL_PLANE, ORACLE_CONTROL_PLANE, Supervisor
from bench.soak.workload import Workload
from kube.request import request_json

DEFAULT_DIR = Path("/tmp/taintkeeper-chaos")
NODES = 3
# The longest a run waits, after its settle, for deadlines still running: a 300 s toleration counted
# from a taint put on in the run's last seconds, with a hand-over and an apiserver restart in between.
MAX_WAIT = 900.0
SYSTEM_NAMESPACE = "taintkeeper-system"
POLICY_OVERLAY = Path(__file__).resolve().parents[1] / "manifests" / "admission-policy"
log = logging.getLogger("chaos")


def duration(text: str) -> float:
    """Seconds from `300`, `300s`, `5m` or `1h`."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: expected seconds, or a number with s, m or h")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, not {text}")
    return value


def svg_path(text: str) -> Path:
    if not text.endswith(".svg"):
        raise argparse.ArgumentTypeError(f"expected a file name ending in .svg, not {text!r}")
    return Path(text)


def fault_kind(text: str) -> str:
    if text not in CATALOGUE:
        raise argparse.ArgumentTypeError(f"unknown fault kind {text!r}: one of {', '.join(CATALOGUE)}")
    return text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="chaos", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--duration", type=duration, default=duration("60m"), help="how long faults are injected")
    parser.add_argument("--seed", type=int, default=None, help="replay a run's draws (default: a new seed, printed)")
    parser.add_argument(
        "--faults-per-minute",
        type=positive,
        default=6.0,
        help="the mean rate of fault draws (one that conflicts with a running fault is skipped)",
    )
    parser.add_argument("--controller", choices=("taintkeeper", "builtin"), default="taintkeeper")
    parser.add_argument(
        "--admission",
        choices=("webhook", "policy"),
        default="webhook",
        help="what gives taintkeeper's pods their tolerations: the webhook, or its admission policy (1.36+)",
    )
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the cluster's directory")
    parser.add_argument("--population", type=int, default=48, help="bare pods kept alive by the workload")
    parser.add_argument(
        "--settle",
        type=duration,
        default=duration("90s"),
        help="after the faults end, how long the workload and the controller go on before the check",
    )
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        metavar="KIND",
        type=fault_kind,
        help="leave a fault kind out of the draw (repeatable); a seed drawn before a kind was "
        "added replays with --without KIND",
    )
    parser.add_argument("--keep", action="store_true", help="leave the cluster up at the end")
    parser.add_argument(
        "--timeline",
        type=svg_path,
        metavar="FILE.svg",
        help="also draw the run: nodes, taints, each judged eviction, the faults (installs matplotlib)",
    )
    parser.add_argument(
        "--sabotage",
        choices=sorted(SABOTAGES),
        default=None,
        help="scale taintkeeper's controller or webhook to 0 partway through, by no fault: the judge must "
        "fail the run (bench/soak/sabotage.py)",
    )
    parser.add_argument(
        "--sabotage-after",
        type=duration,
        default=duration("60s"),
        metavar="DURATION",
        help="when the sabotage comes, from the start of the faults (default 60s)",
    )
    args = parser.parse_args(argv)
    if args.sabotage and args.controller == "builtin":
        parser.error("--sabotage acts on taintkeeper; --controller builtin deploys none")
    if args.sabotage == "webhook-stopped" and args.admission == "policy":
        parser.error("--sabotage webhook-stopped needs the webhook; --admission policy deploys none")
    return args


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    table: str
    verdict_after: float  # seconds from the start of the faults to the verdict


def run(args: argparse.Namespace) -> RunResult:
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    builtin = args.controller == "builtin"
    cluster = LocalCluster(args.dir.resolve())
    print(
        f"chaos: seed {seed}, {args.duration:g}s of faults at {args.faults_per_minute:g}/min against "
        f"{'the built-in controllers' if builtin else 'taintkeeper'}; cluster in {cluster.directory}",
        flush=True,
    )
    try:
        table, passed, verdict_after = _soak(args, cluster, seed, builtin)
    finally:  # also on an error or Ctrl-C: one cluster with nodes per host, so never leave it behind
        if not args.keep:
            cluster.down()
    return RunResult(0 if passed else 1, table, verdict_after)


def _soak(args: argparse.Namespace, cluster: LocalCluster, seed: int, builtin: bool) -> tuple[str, bool, float]:
    cluster.up(NODES, builtin=builtin)
    supervisor = Supervisor(cluster, ORACLE_CONTROL_PLANE if builtin else CONTROL_PLANE)
    stop_supervising = threading.Event()
    supervising = threading.Thread(target=supervisor.run, args=(stop_supervising,), name="supervisor", daemon=True)
    supervising.start()
    try:
        return _soak_supervised(args, cluster, seed, builtin, supervisor)
    finally:
        stop_supervising.set()
        supervising.join(timeout=30)


def _soak_supervised(
    args: argparse.Namespace, cluster: LocalCluster, seed: int, builtin: bool, supervisor: Supervisor
) -> tuple[str, bool, float]:
    api_client = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    try:
        if builtin and _namespace_exists(api_client, SYSTEM_NAMESPACE):
            raise ClusterError(
                f"{cluster.directory} has taintkeeper deployed ({SYSTEM_NAMESPACE}): it would act "
                "beside the built-in controllers; use another --dir for --controller builtin"
            )
        if not builtin:
            cluster.deploy(POLICY_OVERLAY if args.admission == "policy" else None)
        runs = cluster.directory / "chaos"
        runs.mkdir(exist_ok=True)
        fault_log = runs / f"faults-{seed}.jsonl"
        fault_log.unlink(missing_ok=True)
        rng = random.Random(seed)
        workload = Workload(api_client, random.Random(rng.random()), population=args.population)
        injector = Injector(
            cluster,
            api_client,
            fault_log,
            random.Random(rng.random()),
            builtin=builtin,
            webhook=not builtin and args.admission == "webhook",
            without=frozenset(args.without),
        )
        supervisor.held = injector.held
        workload.install()
        started = time.time()
        stop_workload, stop_faults = threading.Event(), threading.Event()
        workload_thread = threading.Thread(target=workload.run, args=(stop_workload,), name="workload", daemon=True)
        faults_thread = threading.Thread(
            target=injector.run, args=(stop_faults, args.faults_per_minute), name="faults", daemon=True
        )
        # taintkeeper's pods' logs, copied as they grow: the kubelet deletes them with their pods
        logs_thread = threading.Thread(
            target=keep_pod_logs,
            args=(cluster.directory / "nodes", SYSTEM_NAMESPACE, runs / "pod-logs", stop_workload),
            name="pod-logs",
            daemon=True,
        )
        workload_thread.start()
        faults_thread.start()
        logs_thread.start()
        if args.sabotage:
            threading.Thread(
                target=sabotage_after,
                args=(api_client, args.sabotage, args.sabotage_after, stop_faults),
                name="sabotage",
                daemon=True,
            ).start()
        try:
            stop_faults.wait(args.duration)
        finally:
            stop_faults.set()
            faults_thread.join()
            injector.sweep()
        print(
            f"chaos: {injector.injected} faults injected ({injector.not_started} could not start); "
            f"settling {args.settle:g}s",
            flush=True,
        )
        try:
            time.sleep(args.settle)
        finally:
            stop_workload.set()
            workload_thread.join(timeout=30)
            logs_thread.join(timeout=30)
    finally:
        api_client.close()
    judged = _judge_when_every_deadline_passed(
        cluster.directory / "logs" / "audit.log",
        fault_log,
        soak_config(builtin=builtin, policy=args.admission == "policy", since=started),
    )
    report = judged.report
    verdict_after = time.time() - started
    table = f"{report.render()}\n{supervisor.summary()}"
    print(table, flush=True)
    (runs / f"report-{seed}.txt").write_text(table + "\n")
    # What a later judgement (`python -m bench.soak.check --since`, a recording) needs to judge the same window.
    (runs / f"window-{seed}.json").write_text(json.dumps({"since": started}) + "\n")
    if args.timeline is not None:
        from bench.soak.picture import incident_of
        from hack.timeline_svg import draw

        print(f"chaos: timeline picture {draw(incident_of(judged), args.timeline.resolve())}", flush=True)
    return table, report.passed, verdict_after


def _judge_when_every_deadline_passed(audit_log: Path, fault_log: Path, config: SoakConfig) -> Judged:
    """The run ends when every deadline that began in it has passed, or when it already failed: judged, and
    while some deadline's allowance still runs past the log's end and nothing failed yet, waited for (at most
    MAX_WAIT) and judged again."""
    judged = judge_run(audit_log, fault_log, config)
    waited = 0.0
    # Waiting can only judge what is still open: a run already failed ends at once.
    while judged.report.unjudged and not judged.report.violations and waited < MAX_WAIT:
        pause = min(max(u.limit for u in judged.report.unjudged) - time.time() + 2.0, MAX_WAIT - waited)
        if pause <= 0:  # allowances over, but no record after them yet: a heartbeat comes within 10 s
            pause = 10.0
        print(f"chaos: {len(judged.report.unjudged)} deadlines still running; waiting {pause:.0f}s", flush=True)
        time.sleep(pause)
        waited += pause
        judged = judge_run(audit_log, fault_log, config)
    return judged


def _namespace_exists(api_client: ApiClient, name: str) -> bool:
    try:
        request_json(api_client, "GET", f"/api/v1/namespaces/{name}", timeout=(3, 10))
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # its retries while the apiserver is down on purpose
    args = parse_args(argv)
    try:
        return run(args).exit_code
    except ClusterError as error:
        print(f"chaos: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
