"""The local demo (`make demo`): taintkeeper handling a node failure, narrated, in about a minute.

A real kube-apiserver on loopback; the webhook over TLS, registered as a mutating webhook; the
controller with short grace periods; four simulated nodes in two zones (hack/simulator.py) with
pods of different tolerations. One node stops heartbeating: the narration shows its conditions
going Unknown, its taints, its pods marked NotReady and evicted each on its own schedule, then the
node coming back and its taints going. Everything it starts is stopped at the end.

Flags: --keep leaves it all running (Ctrl-C stops it); --dir DIR puts the control plane's files
somewhere other than .local/demo; --real-nodes runs the same story on three real kubelets (real
containers; the node "crashes" when its kubelet is killed) instead of the simulated nodes;
--deployed (`make demo-deployed`) runs it on the complete local cluster (three real nodes,
kube-scheduler, kube-controller-manager, kube-proxy) with taintkeeper deployed as its users deploy
it: from its own image and manifests (`hack/local-cluster.sh deploy`), as two Deployments behind a
MutatingWebhookConfiguration, the controller's replicas sharing a Lease.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402

from hack.deploy import cluster_kubernetes  # noqa: E402
from hack.incident import IncidentRecorder  # noqa: E402
from hack.servers import ControllerProcess, WebhookServer, make_certs  # noqa: E402
from hack.simulator import Simulator  # noqa: E402
from webhook.registration import mutating_webhook_configuration  # noqa: E402

if TYPE_CHECKING:
    from hack.real_nodes.demo_nodes import RealNodes

SCRIPT = ROOT / "hack" / "local-cluster.sh"
NAMESPACE = "demo"
GRACE = 8  # --node-monitor-grace-period for the demo (50 s by default)
DEPLOYED_GRACE = 20  # the same, as hack/demo-overlay deploys the controller
DEPLOYED_OVERLAY = ROOT / "hack" / "demo-overlay"
OLDER_DEPLOYED_OVERLAYS = {"1.20": DEPLOYED_OVERLAY / "kube-1.20"}  # the cluster's version -> its overlay
VICTIM_LABEL = "taintkeeper.io/e2e-victim"  # the overlay keeps taintkeeper's pods off the node so labelled
NAMESPACE_SECONDS = 20  # the demo namespace's own default tolerationSeconds (the cluster's stays 300 s)
STARTED = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:5.1f}s] {message}", flush=True)


def raw(call: Any, *args: Any, **kwargs: Any) -> dict:
    return json.loads(call(*args, _preload_content=False, **kwargs).data)


class Narrator:
    """Polls the API and tells what changed on the watched node and its pods, recording it all for
    the timeline picture (--timeline)."""

    def __init__(self, core: client.CoreV1Api, node: str) -> None:
        self.core = core
        self.node = node
        self.record = IncidentRecorder(node, time.time())
        self.ready: str | None = None
        self.taints: set[str] = set()
        self.pods: dict[str, tuple[str | None, bool]] = {}
        self.quiet = True  # the first look only records how things are

    def look(self) -> None:
        node = raw(self.core.read_node, self.node)
        now = time.time()
        node_taints = node["spec"].get("taints") or []
        ready: dict[str, Any] = next((c for c in node["status"].get("conditions") or [] if c["type"] == "Ready"), {})
        if ready.get("status") != self.ready:
            if self.ready is not None:
                say(
                    f"node {self.node}: Ready {self.ready} -> {ready.get('status')} ({ready.get('reason')}: "
                    f"{ready.get('message')})"
                )
                self.record.event(f"Ready {ready.get('status')}", now)
            self.ready = ready.get("status")
        self.record.ready(ready.get("status"), now)
        self.record.taints(node_taints, now)
        taints = {
            f"{t['key']}:{t['effect']}" + (f" (timeAdded {t['timeAdded']})" if t.get("timeAdded") else "")
            for t in node_taints
        }
        for taint in sorted(taints - self.taints) if not self.quiet else ():
            say(f"node {self.node}: taint added   {taint}")
        for taint in sorted(self.taints - taints):
            say(f"node {self.node}: taint removed {taint}")
        self.taints = taints
        self.quiet = False
        listed = raw(self.core.list_namespaced_pod, NAMESPACE, field_selector=f"spec.nodeName={self.node}")
        seen = set()
        for pod in listed["items"]:
            name = pod["metadata"]["name"]
            seen.add(name)
            pod_ready = next((c["status"] for c in pod["status"].get("conditions") or [] if c["type"] == "Ready"), None)
            deleting = bool(pod["metadata"].get("deletionTimestamp"))
            self.record.pod(name, pod["spec"].get("tolerations") or [], node_taints, deleting, now)
            before = self.pods.get(name)
            if before is not None and before[0] == "True" and pod_ready == "False":
                say(f"pod {name}: marked NotReady (its node is not ready)")
            if before is not None and not before[1] and deleting:
                reason = next(
                    (c.get("reason") for c in pod["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"),
                    None,
                )
                say(f"pod {name}: EVICTED (DisruptionTarget {reason}; Terminating until the node's kubelet returns)")
            self.pods[name] = (pod_ready, deleting)
        for name in sorted(set(self.pods) - seen):
            say(f"pod {name}: removed by the returning kubelet")
            del self.pods[name]

    def watch(self, seconds: float, until: Any = None) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.look()
            if until is not None and until():
                return
            time.sleep(0.25)


def tolerations_text(pod: dict) -> str:
    parts = []
    for t in pod["spec"].get("tolerations") or []:
        seconds = f" {t['tolerationSeconds']}s" if "tolerationSeconds" in t else " forever"
        parts.append(f"{t.get('key', '*').removeprefix('node.kubernetes.io/')}{seconds}")
    return ", ".join(parts) or "none"


def start_processes(
    admission: client.AdmissionregistrationV1Api, directory: Path, kubeconfig: Path, registration: str
) -> tuple[WebhookServer, ControllerProcess]:
    """The webhook serving and registered, and the controller (not started yet: the nodes come first),
    as host processes."""
    ca_bundle = make_certs(directory / "webhook-certs")
    webhook = WebhookServer(
        directory / "webhook-certs", directory / "webhook.log", workers=2, kubeconfig=kubeconfig
    ).start()
    say(f"webhook serving over TLS at {webhook.url} (log {directory / 'webhook.log'})")
    with _ignore_missing():
        admission.delete_mutating_webhook_configuration(registration)
    admission.create_mutating_webhook_configuration(
        body=mutating_webhook_configuration(  # type: ignore[arg-type]  # a dict body is sent as it is
            ca_bundle, url=webhook.url, name=registration, failure_policy="Fail"
        )
    )
    controller = ControllerProcess(
        kubeconfig,
        directory / "controller.log",
        "--node-monitor-period=1s",
        f"--node-monitor-grace-period={GRACE}s",
        "--node-eviction-rate=1",
        "--leader-elect-retry-period=1s",
        "--leader-elect-renew-deadline=4s",
        "--leader-elect-lease-duration=6s",
    )
    return webhook, controller


def deploy(core: client.CoreV1Api, directory: Path) -> None:
    """taintkeeper from its image and manifests, as Deployments on the real nodes (hack/local-cluster.sh deploy)."""
    victim = raw(core.list_node)["items"][-1]["metadata"]["name"]
    core.patch_node(victim, {"metadata": {"labels": {VICTIM_LABEL: "true"}}})
    say(
        f"deploying taintkeeper from its own image and manifests, off {victim} (the node that will fail; "
        "the first run builds the image: minutes)"
    )
    overlay = OLDER_DEPLOYED_OVERLAYS.get(cluster_kubernetes(directory) or "", DEPLOYED_OVERLAY)
    deployed = subprocess.run(["bash", str(SCRIPT), "deploy", str(directory), "--overlay", str(overlay)], text=True)
    if deployed.returncode != 0:
        raise SystemExit("demo: taintkeeper could not be deployed (see the messages above)")
    for pod in raw(core.list_namespaced_pod, "taintkeeper-system")["items"]:
        if pod["status"].get("phase") == "Running":
            say(f"  {pod['metadata']['name']:<45} on {pod['spec'].get('nodeName')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=ROOT / ".local" / "demo")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--real-nodes",
        action="store_true",
        help="three real kubelets + containerd (hack/local-cluster.sh up DIR --nodes 3)",
    )
    parser.add_argument(
        "--deployed",
        action="store_true",
        help="taintkeeper deployed from its image and manifests into the complete local cluster",
    )
    parser.add_argument(
        "--timeline",
        type=Path,
        metavar="FILE.svg",
        help="draw the node failure as a timeline picture (installs matplotlib if missing)",
    )
    args = parser.parse_args()
    if args.timeline is not None and args.timeline.suffix != ".svg":
        parser.error(f"--timeline {args.timeline}: expected a file name ending in .svg")
    args.real_nodes = args.real_nodes or args.deployed
    grace = DEPLOYED_GRACE if args.deployed else GRACE
    directory: Path = args.dir.resolve()
    directory.mkdir(parents=True, exist_ok=True)

    # A demo starts from an empty cluster every time: whatever an earlier run left is dropped.
    subprocess.run(["bash", str(SCRIPT), "down", str(directory)], capture_output=True)
    shutil.rmtree(directory / "etcd-data", ignore_errors=True)
    (directory / "kubernetes.env").unlink(missing_ok=True)  # the version too: TAINTKEEPER_KUBERNETES picks it
    # which version: local-cluster.sh says (TAINTKEEPER_KUBERNETES, else its default)
    say("starting etcd + kube-apiserver on loopback (the first run on a machine builds them: minutes)")
    if args.real_nodes:
        say("and three real nodes: containerd + kubelet each (the first run builds the kubelet: minutes)")
    up = subprocess.run(
        ["bash", str(SCRIPT), "up", str(directory), *(["--nodes", "3"] if args.real_nodes else [])],
        text=True,
        stdout=subprocess.PIPE,
    )
    if up.returncode != 0:
        print("demo: the local control plane did not start (see the messages above)", file=sys.stderr)
        return 1
    kubeconfig = Path(up.stdout.strip().splitlines()[-1])
    api = config.new_client_from_config(config_file=str(kubeconfig))
    core = client.CoreV1Api(api)
    admission = client.AdmissionregistrationV1Api(api)
    webhook = controller = None
    sim: RealNodes | Simulator | None = None
    registration = "taintkeeper-demo"
    try:
        say(f"control plane ready; kubeconfig {kubeconfig}")
        if args.deployed:
            deploy(core, directory)
        else:
            webhook, controller = start_processes(admission, directory, kubeconfig, registration)
        with _ignore_missing(409):
            core.create_namespace(body={"metadata": {"name": "taintkeeper-system"}})  # type: ignore[arg-type]  # a dict body is sent as it is
        annotated = {
            "metadata": {
                "name": NAMESPACE,
                "annotations": {
                    "taintkeeper.io/not-ready-toleration-seconds": str(NAMESPACE_SECONDS),
                    "taintkeeper.io/unreachable-toleration-seconds": str(NAMESPACE_SECONDS),
                },
            }
        }
        try:
            core.create_namespace(body=annotated)  # type: ignore[arg-type]  # a dict body is sent as it is
        except client.ApiException as error:
            if error.status != 409:
                raise
            core.patch_namespace(NAMESPACE, annotated, _content_type="application/merge-patch+json")
        for leftover in raw(core.list_namespaced_pod, NAMESPACE)["items"]:  # from an earlier run in this --dir
            core.delete_namespaced_pod(leftover["metadata"]["name"], NAMESPACE, grace_period_seconds=0)
        say(
            f"namespace {NAMESPACE} annotated: its pods get {NAMESPACE_SECONDS}s default tolerations "
            "(the cluster-wide default stays 300s)"
        )

        if args.real_nodes:
            from hack.real_nodes.demo_nodes import RealNodes

            sim = RealNodes(api, directory).start()
            nodes = sim.add_nodes(3)
            say(f"3 real nodes: {', '.join(nodes)} in zone-a and zone-b, each a kubelet + containerd")
        else:
            sim = Simulator(api, lease_period=1.0, status_period=30.0, node_prefix="demo").start()
            nodes = sim.add_nodes(4, zones=["zone-a", "zone-b"])
            say(f"4 simulated nodes: {', '.join(nodes)} in zone-a and zone-b, renewing their Leases every second")
        if controller is not None:
            controller.start()
            say(f"controller running: grace period {GRACE}s (log {directory / 'controller.log'})")

        victim = nodes[-1] if args.deployed else nodes[0]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the apiserver calls the webhook and its namespace cache has synced
            probe = raw(
                core.create_namespaced_pod,
                NAMESPACE,
                body={"metadata": {"name": "probe"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                dry_run="All",
            )
            if any(t.get("tolerationSeconds") == NAMESPACE_SECONDS for t in probe["spec"].get("tolerations") or []):
                break
            time.sleep(0.2)
        unreachable = "node.kubernetes.io/unreachable"
        plans = [
            ("api", None),
            ("batch", [{"key": unreachable, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]),
            ("cache", [{"key": unreachable, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}]),
            ("log-agent", [{"operator": "Exists"}]),
        ]
        for name, tolerations in plans:
            sim.create_pods(
                victim, 1, namespace=NAMESPACE, tolerations=tolerations, name_prefix=name, termination_grace_period=2
            )
        say(f"pods on {victim} (the webhook added the namespace's defaults where a pod had none):")
        for pod in raw(core.list_namespaced_pod, NAMESPACE)["items"]:
            print(f"         {pod['metadata']['name']:<12} tolerations: {tolerations_text(pod)}", flush=True)

        narrator = Narrator(core, victim)
        narrator.look()
        # New nodes get not-ready:NoSchedule from the apiserver (TaintNodesByCondition); the controller
        # lifts it once they are Ready. Start the story from a clean node.
        narrator.watch(15, until=lambda: not narrator.taints)
        say(
            f"{victim} crashes: its kubelet "
            + ("is killed (SIGKILL; its containers keep running)" if args.real_nodes else "stops heartbeating")
        )
        sim.stop_heartbeats(victim)
        narrator.record.event("kubelet stops", time.time())

        def evicted() -> int:
            return sum(1 for _, deleting in narrator.pods.values() if deleting)

        # Mid-failure, while the namespace-default pod still counts down: the whole cluster's view.
        narrator.watch(grace + 30, until=lambda: evicted() >= 2)
        status = subprocess.run(
            [sys.executable, "-m", "controller", "status", "--kubeconfig", str(kubeconfig)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        say("`kubectl taintkeeper status` (python -m controller status) says:")
        print("\n".join("         " + line for line in (status.stdout or status.stderr).splitlines()), flush=True)
        narrator.watch(
            NAMESPACE_SECONDS + 15,
            until=lambda: (
                evicted() >= 3 and "log-agent" not in {n.rsplit("-", 1)[0] for n, (r, d) in narrator.pods.items() if d}
            ),
        )
        explain = subprocess.run(
            [sys.executable, "-m", "controller", "explain", "--node", victim, "--kubeconfig", str(kubeconfig)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        say("`python -m controller explain --node " + victim + "` says:")
        print("\n".join("         " + line for line in explain.stdout.splitlines()), flush=True)
        say(f"{victim} comes back")
        sim.resume_heartbeats(victim)
        narrator.record.event("kubelet back", time.time())
        narrator.watch(
            60 if args.real_nodes else 20,
            until=lambda: (
                not any(t.startswith(unreachable) for t in narrator.taints)
                and not any(d for _, d in narrator.pods.values())
            ),
        )
        kept = [name for name, (_, deleting) in narrator.pods.items() if not deleting]
        say(f"the node is healthy again; still running on it: {', '.join(kept) or 'nothing'}")
        if args.timeline is not None:
            from hack.timeline_svg import draw

            say(f"timeline picture: {draw(narrator.record.close(time.time()), args.timeline.resolve())}")
        if args.keep:
            say("--keep: leaving everything running; Ctrl-C to stop")
            while True:
                time.sleep(3600)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        if controller is not None:
            controller.kill()
        if sim is not None:
            sim.stop()
            sim.delete_nodes()
            sim.close()
        if webhook is not None:
            webhook.stop()
        with _ignore_missing():
            admission.delete_mutating_webhook_configuration(registration)
        api.close()
        subprocess.run(["bash", str(SCRIPT), "down", str(directory)], capture_output=True)
        say("stopped the controller, the nodes, the webhook and the control plane")


class _ignore_missing:
    """Ignore an API error with the given status (404 by default) inside a `with` block."""

    def __init__(self, status: int = 404) -> None:
        self.status = status

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, _trace: Any) -> bool:
        return isinstance(error, client.ApiException) and error.status == self.status


if __name__ == "__main__":
    sys.exit(main())
