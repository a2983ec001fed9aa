"""Upstream's failed-node bugs, fixed, on real kubelets: the controller as a process, three
real nodes; each test breaks one node and leaves it whole again.

- kubernetes#125618: a node whose container runtime fails keeps renewing its Lease while its kubelet
  reports Ready=False ("container runtime is down"); upstream marks its pods NotReady only when the
  Lease lapses, so their endpoints keep receiving traffic. taintkeeper marks them within a pass.
- kubernetes#112733: the runtime first, then the kubelet (Ready False, then Unknown): upstream marks
  nothing, ever, as it marks only on a transition from True.
- `--mark-pods-not-ready-on-transition-only` restores upstream's rule: the same story leaves the pods
  Ready, which is how these tests would fail on upstream's code.
- A new leader 12 s into a node's silence: dated by the apiserver's stamps on 1.25 and later, so the
  node is marked at its grace counted from its last heartbeat, not from the new leader's first look
  (on 1.20 the stamps cannot date a renewal, and the first look it is, as upstream).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client

from hack.servers import ControllerProcess
from kube.clock_offset import dates_every_change
from kube.timestamps import parse_time
from tests.integration.kube import raw, wait_for
from tests.realnodes.nodes import RealCluster, checked, wait_default_service_account

GRACE = 20
PERIOD = 1
HAND_OVER_AFTER = 12  # seconds into the node's silence
CONTROLLER_FLAGS = (
    "--leader-elect=true",
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
    f"--node-monitor-period={PERIOD}s",
    f"--node-monitor-grace-period={GRACE}s",
    "--node-startup-grace-period=30s",
    "--backfill-default-tolerations=false",
)
TRANSITION_ONLY = "--mark-pods-not-ready-on-transition-only"
# The pods stay through Unknown and False: what is judged is their Ready condition, not an eviction.
FOREVER = [
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
]
RUNTIME_DOWN_WITHIN = 120  # the kubelet reports a runtime it cannot reach after about 30 s
MARKED_WITHIN = PERIOD + 5  # a pass, the pod's status write, and our poll


@dataclass
class Story:
    cluster: RealCluster
    namespace: str
    tmp: Path
    controllers: list[ControllerProcess] = field(default_factory=list)
    broken: set[str] = field(default_factory=set)  # nodes to make whole again

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.cluster.api_client)

    def start_controller(self, *flags: str) -> ControllerProcess:
        controller = ControllerProcess(
            self.cluster.kubeconfig, self.tmp / f"controller-{len(self.controllers)}.log", *CONTROLLER_FLAGS, *flags
        )
        self.controllers.append(controller.start())
        controller.wait_for_metric("taintkeeper_leader", 1, 20)
        return controller

    def stop_controllers(self) -> None:
        for controller in self.controllers:
            controller.terminate()  # releases the Lease: the next one leads at once

    def node_ready(self, name: str) -> dict:
        node = raw(self.core.read_node, name)
        return next(c for c in node["status"]["conditions"] if c["type"] == "Ready")

    def lease_renewed(self, name: str) -> float:
        lease = raw(client.CoordinationV1Api(self.cluster.api_client).read_namespaced_lease, name, "kube-node-lease")
        renewed = parse_time(lease["spec"]["renewTime"])
        assert renewed is not None
        return renewed

    def run_pod(self, node: str) -> str:
        name = f"web-{uuid.uuid4().hex[:5]}"
        spec = {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "tolerations": FOREVER,
            "containers": [
                {
                    "name": "c",
                    "image": self.cluster.nodes[node]["busyboxImage"],
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                }
            ],
        }
        raw(self.core.create_namespaced_pod, self.namespace, body={"metadata": {"name": name}, "spec": spec})
        wait_for(lambda: self.pod_ready(name) == "True", 90, f"{name} Ready")
        return name

    def pod_ready(self, name: str) -> str | None:
        pod = raw(self.core.read_namespaced_pod, name, self.namespace)
        return next((c["status"] for c in pod["status"].get("conditions") or [] if c["type"] == "Ready"), None)

    def break_runtime(self, node: str) -> None:
        self.broken.add(node)
        checked("stop-runtime", str(self.cluster.directory), node)

    def stop_kubelet(self, node: str) -> float:
        self.broken.add(node)
        return self.cluster.stop_kubelet(node, "KILL")

    def make_whole(self, node: str) -> None:
        checked("start-runtime", str(self.cluster.directory), node)
        self.cluster.start_kubelet(node)
        wait_for(lambda: self.node_ready(node)["status"] == "True", 120, f"{node} Ready again")
        self.broken.discard(node)


@pytest.fixture
def story(real_cluster: RealCluster, tmp_path: Path) -> Iterator[Story]:
    core = client.CoreV1Api(real_cluster.api_client)
    namespace = f"failed-{uuid.uuid4().hex[:6]}"
    core.create_namespace(body=client.V1Namespace.model_validate({"metadata": {"name": namespace}}))
    wait_default_service_account(core, namespace)
    try:  # the controller's Lease lives there
        core.create_namespace(body=client.V1Namespace.model_validate({"metadata": {"name": "taintkeeper-system"}}))
    except client.ApiException as error:
        if error.status != 409:
            raise
    real_cluster.refresh()
    made = Story(real_cluster, namespace, tmp_path)
    try:
        yield made
    finally:
        made.stop_controllers()
        for node in sorted(made.broken):
            made.make_whole(node)
        core.delete_namespace(namespace, grace_period_seconds=0)
        print(f"controller logs: {[str(c.log_path) for c in made.controllers]}")


def holds(condition: Callable[[], bool], seconds: float) -> bool:
    """Whether `condition` stays true for `seconds` (polled): the absence of a change, shown."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if not condition():
            return False
        time.sleep(0.5)
    return True


def runtime_reported_down(story: Story, node: str) -> float:
    """Wait for the kubelet to report Ready=False; returns when it was first seen."""
    wait_for(lambda: story.node_ready(node)["status"] == "False", RUNTIME_DOWN_WITHIN, f"{node} Ready=False")
    return time.time()


def test_a_failed_runtime_gets_its_pods_marked_not_ready_while_the_kubelet_keeps_its_lease(story: Story):
    """kubernetes#125618, then kubernetes#112733: Ready False (the kubelet alive), then Unknown."""
    node = "node-1"
    story.start_controller()
    pod = story.run_pod(node)
    story.break_runtime(node)
    reported = runtime_reported_down(story, node)
    ready = story.node_ready(node)
    renewed = story.lease_renewed(node)
    wait_for(lambda: story.pod_ready(pod) == "False", MARKED_WITHIN, f"{pod} marked Ready=False")
    marked = time.time()
    wait_for(lambda: story.lease_renewed(node) > renewed, 10, "the kubelet still renewing its Lease")
    print(
        f"\nruntime down: node {ready['reason']!r} ({ready['message'][:80]}); pod marked {marked - reported:.1f}s later"
    )

    story.stop_kubelet(node)  # and now the kubelet too: Unknown after the grace
    wait_for(lambda: story.node_ready(node)["status"] == "Unknown", GRACE + 15, f"{node} Ready=Unknown")
    assert holds(lambda: story.pod_ready(pod) == "False", 3 * PERIOD + 2), "the pod Ready again on an Unknown node"


@pytest.mark.version_independent(
    "the flag is taintkeeper's own rule over the same report; the 1.20 kubelet's runtime-down report it reads is "
    "test_a_failed_runtime_gets_its_pods_marked_not_ready_while_the_kubelet_keeps_its_lease's, kept"
)
def test_the_transition_only_flag_leaves_the_pods_ready_as_upstream_does(story: Story):
    """The same story under upstream's rule: no transition from True is ever seen by the monitor."""
    node = "node-2"
    story.start_controller(TRANSITION_ONLY)
    pod = story.run_pod(node)
    story.break_runtime(node)
    runtime_reported_down(story, node)
    assert holds(lambda: story.pod_ready(pod) == "True", 3 * PERIOD + 5), "marked under upstream's rule"
    story.stop_kubelet(node)
    wait_for(lambda: story.node_ready(node)["status"] == "Unknown", GRACE + 15, f"{node} Ready=Unknown")
    assert holds(lambda: story.pod_ready(pod) == "True", 3 * PERIOD + 5), "marked under upstream's rule"


def test_a_new_leader_dates_a_nodes_silence_from_its_last_heartbeat(story: Story):
    node = "node-3"
    silenced = story.stop_kubelet(node)  # SIGKILL: nothing reported; the Lease stops being renewed
    last_heartbeat = story.lease_renewed(node)  # the kubelet's clock: this machine's
    time.sleep(max(0.0, silenced + HAND_OVER_AFTER - time.time()))  # the scenario: a hand-over this far in
    took_over = time.time()
    story.start_controller()
    wait_for(lambda: story.node_ready(node)["status"] == "Unknown", HAND_OVER_AFTER + GRACE + 15, "Ready=Unknown")
    marked = time.time()
    version = client.VersionApi(story.cluster.api_client).get_code().git_version
    print(
        f"\n{version}: silent {silenced - last_heartbeat:.1f}s before the kill, new leader {took_over - silenced:.1f}s "
        f"in, marked Unknown {marked - last_heartbeat:.1f}s after the last heartbeat (grace {GRACE}s)"
    )
    assert marked - last_heartbeat >= GRACE - 1.0, "marked before the grace ran out (stamps are whole seconds)"
    if dates_every_change(version):
        assert marked - last_heartbeat <= GRACE + PERIOD + 4.0, "the silence before the hand-over was not counted"
    else:  # upstream's first look: the whole grace after the new leader started
        assert marked - took_over >= GRACE - 1.0
