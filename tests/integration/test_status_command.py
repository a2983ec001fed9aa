"""`kubectl taintkeeper status` (kubectl_taintkeeper/status_command.py) against the real apiserver.

Nodes (taints, zone labels, a Ready condition written through the status subresource), pods bound
to them by spec.nodeName and the leader's Lease are written through the API; the command runs in
this process and its output is read. Which requests it made is read from the apiserver's own audit
log by the command's User-Agent, `taintkeeper-status/VERSION (POD_NAME)`, with a POD_NAME of each
run's own. Without a kubelet or a controller nothing changes what a test wrote; a test writes the
Lease as a leader would, with or without the last monitor pass a leader publishes on it
(controller/nodelifecycle/lease_annotation.py).

Last, on simulated nodes with the controller running: the deadline the command shows for a pod is
when the controller deletes it.
"""

from __future__ import annotations

import importlib.metadata
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from kubernetes import client

from controller.describe import describe_duration
from controller.nodelifecycle.lease_annotation import LAST_MONITOR_PASS_ANNOTATION
from controller.zones import LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE
from kube.client import MERGE_PATCH, STRATEGIC_MERGE
from kube.timestamps import format_micro_time, format_time, parse_time
from kubectl_taintkeeper import status_command
from tests.integration.kube import LocalCluster, audit_events, raw, wait_for
from tests.integration.simulated import UR, Cluster, unreachable
from tests.support.kubernetes_version import server_minor

# A Lease written by a controller older than the command, or by a leader whose monitor has not passed yet.
NO_LAST_PASS = (
    f"the Lease has no {LAST_MONITOR_PASS_ANNOTATION} annotation (the leader has not completed a monitor pass "
    "yet, runs without the nodelifecycle controller, or is older than this command)"
)
WEBHOOK_USER = "system:serviceaccount:taintkeeper-system:taintkeeper-webhook"
EVERY_VERSION = (("resourceVersion", "0"),)  # a LIST served from the apiserver's watch cache

Query = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Run:
    """One run of the command."""

    code: int
    out: str
    err: str
    replica: str  # the POD_NAME its User-Agent carried

    def document(self) -> dict[str, Any]:
        assert (self.code, self.err) == (0, ""), self.err
        document: dict[str, Any] = json.loads(self.out)
        return document


@dataclass(frozen=True)
class Request:
    """One request as the audit log has it."""

    verb: str
    path: str
    query: Query
    code: int
    user: str


class World:
    """A test's nodes, pods and Lease in the real apiserver, and the command run against them."""

    def __init__(
        self, local: LocalCluster, namespace: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        self.local = local
        self.core = client.CoreV1Api(local.api_client)
        self.coordination = client.CoordinationV1Api(local.api_client)
        self.monkeypatch = monkeypatch
        self.capsys = capsys
        self.namespace = namespace
        prefix = f"st-{uuid.uuid4().hex[:8]}"
        self.dead, self.healthy = f"{prefix}-dead", f"{prefix}-ok"
        self.zone = f"{prefix}-region::a"  # as the command names a zone: region::zone
        self.labels = {LABEL_TOPOLOGY_REGION: f"{prefix}-region", LABEL_TOPOLOGY_ZONE: "a"}
        # The controller's Lease in a namespace of the test's own, held by a replica whose pod is there.
        self.lease_namespace, self.lease_name = f"{prefix}-system", "taintkeeper-controller"
        self.leader = f"{prefix}-controller-7d9f8-abcde"
        self.holder = f"{self.leader}_{uuid.uuid4().hex}"
        raw(self.core.create_namespace, body={"metadata": {"name": self.lease_namespace}})
        self.nodes: list[str] = []
        self.pods: dict[str, dict[str, Any]] = {}  # name -> the pod as created

    # --- the objects ---

    def node(self, name: str, ready: str, since: float, taints: list[dict[str, Any]]) -> None:
        raw(self.core.create_node, body={"metadata": {"name": name, "labels": self.labels}})
        self.nodes.append(name)
        # kube-apiserver's TaintNodesByCondition admission gives every new node not-ready:NoSchedule (the
        # node lifecycle controller takes it off once the node is Ready): the taints are set afterwards.
        self.core.patch_node(name, {"spec": {"taints": taints}}, _content_type=MERGE_PATCH)
        condition = {
            "type": "Ready",
            "status": ready,
            "reason": "NodeStatusUnknown" if ready == "Unknown" else "KubeletReady",
            "lastHeartbeatTime": format_time(since),
            "lastTransitionTime": format_time(since),
        }
        self.core.patch_node_status(name, {"status": {"conditions": [condition]}}, _content_type=STRATEGIC_MERGE)

    def pod(self, namespace: str, name: str, node: str, tolerations: list[dict[str, Any]], app: str) -> None:
        body = {
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"nodeName": node, "tolerations": tolerations, "containers": [{"name": "c", "image": "busybox"}]},
        }
        self.pods[name] = raw(self.core.create_namespaced_pod, namespace, body=body)

    def scene(self, *, no_execute: bool = True, lease: bool = True, last_pass: float | None = None) -> float:
        """A zone of two nodes, one dead for a minute (unreachable:NoSchedule, and unreachable:NoExecute
        if `no_execute`); on it `web` (app=web, tolerating unreachable 300 s) and `db` (app=db, no
        tolerations) in the test's namespace, and the leader's pod in the Lease's namespace; the Lease
        held and just renewed if `lease`, annotated with the leader's `last_pass` if given. Returns when
        the node died (the taint's timeAdded)."""
        died = float(int(time.time()) - 60)
        taints = [{"key": UR, "effect": "NoSchedule"}]
        if no_execute:
            taints.append({"key": UR, "effect": "NoExecute", "timeAdded": format_time(died)})
        self.node(self.dead, "Unknown", died, taints)
        self.node(self.healthy, "True", died - 3600, [])
        self.pod(self.namespace, "web", self.dead, unreachable(300), "web")
        self.pod(self.namespace, "db", self.dead, [], "db")
        self.pod(self.lease_namespace, self.leader, self.dead, [], "taintkeeper-controller")
        if lease:
            renewed = format_micro_time(time.time())
            published = {} if last_pass is None else {LAST_MONITOR_PASS_ANNOTATION: format_micro_time(last_pass)}
            raw(
                self.coordination.create_namespaced_lease,
                self.lease_namespace,
                body={
                    "metadata": {"name": self.lease_name, "annotations": published},
                    "spec": {
                        "holderIdentity": self.holder,
                        "leaseDurationSeconds": 15,
                        "acquireTime": renewed,
                        "renewTime": renewed,
                    },
                },
            )
        return died

    def fill(self, text: str) -> str:
        """`text` with {ns}, {lease_ns}, {lease}, {leader} and {policy} (the budgets' group version the
        server serves: policy/v1beta1 on 1.20, policy/v1 from 1.21) filled in."""
        policy = "policy/v1beta1" if server_minor(self.local.api_client) < 21 else "policy/v1"
        return text.format(
            ns=self.namespace, lease_ns=self.lease_namespace, lease=self.lease_name, leader=self.leader, policy=policy
        )

    # --- the command and what it asked ---

    def status(self, *argv: str, kubeconfig: Path | None = None) -> Run:
        replica = f"status-{uuid.uuid4().hex}"
        self.monkeypatch.setenv("POD_NAME", replica)
        self.capsys.readouterr()
        code = status_command.main(
            [
                *argv,
                "--kubeconfig",
                str(kubeconfig or self.local.kubeconfig),
                "--lease-namespace",
                self.lease_namespace,
                "--lease-name",
                self.lease_name,
            ]
        )
        captured = self.capsys.readouterr()
        return Run(code, captured.out, captured.err, replica)

    def requests(self, run: Run) -> list[Request]:
        """The run's requests in the order they were answered; each named the command and the run."""
        events = audit_events(self.local, run.replica)
        expected = f"taintkeeper-status/{importlib.metadata.version('taintkeeper')} ({run.replica})"
        assert {event["userAgent"] for event in events} == {expected}
        found = []
        for event in events:
            uri = urlsplit(event["requestURI"])
            found.append(
                Request(
                    event["verb"],
                    uri.path,
                    tuple(parse_qsl(uri.query)),
                    int(event["responseStatus"]["code"]),
                    event["user"]["username"],
                )
            )
        return found

    def ours(self, document: dict[str, Any], section: str) -> list[dict[str, Any]]:
        """The entries of the report's `section` about this test's nodes (the report covers every node)."""
        key = "name" if section == "nodes" else "node"
        return [entry for entry in document[section] if entry[key] in self.nodes]

    def close(self) -> None:
        self.core.delete_collection_namespaced_pod(self.lease_namespace, grace_period_seconds=0)
        for name in self.nodes:
            self.core.delete_node(name)


@pytest.fixture
def world(
    local_cluster: LocalCluster, namespace: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[World]:
    scene = World(local_cluster, namespace, monkeypatch, capsys)
    yield scene
    scene.close()


# --- the requests -------------------------------------------------------------------------------------

NODES = ("/api/v1/nodes", EVERY_VERSION)
LEASE = ("/apis/coordination.k8s.io/v1/namespaces/{lease_ns}/leases/{lease}", ())
# Who adds the default tolerations: the webhook's configuration, the policy's binding and its parameter.
ADMISSION = (
    ("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/taintkeeper", ()),
    ("/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings/taintkeeper-default-tolerations", ()),
    ("/api/v1/namespaces/{lease_ns}/configmaps/taintkeeper-defaults", ()),
)
# With pods to report: what their evictions may wait for (the namespaces' annotations, every budget).
BUDGETS = (
    ("/api/v1/namespaces", EVERY_VERSION),
    ("/apis/policy", ()),
    ("/apis/{policy}/poddisruptionbudgets", EVERY_VERSION),
)


@dataclass(frozen=True)
class RequestsCase:
    argv: tuple[str, ...]
    expected: tuple[tuple[str, Query], ...]  # (path, query) in order; {ns}, {lease_ns}, ... filled in
    no_execute: bool = True  # the dead node has its NoExecute taint
    lease: bool = True  # the Lease exists


REQUESTS = {
    "a NoExecute taint: the nodes, the pods (filtered in the LIST), the budgets, the Lease": RequestsCase(
        ("-n", "{ns}", "-l", "app=web"),
        (
            NODES,
            ("/api/v1/namespaces/{ns}/pods", (*EVERY_VERSION, ("labelSelector", "app=web"))),
            *BUDGETS,
            LEASE,
            *ADMISSION,
        ),
    ),
    "no filters: the pods of every namespace": RequestsCase(
        (), (NODES, ("/api/v1/pods", EVERY_VERSION), *BUDGETS, LEASE, *ADMISSION)
    ),
    "no NoExecute taint on any node: no eviction is pending, the pods are not listed": RequestsCase(
        ("-n", "{ns}"), (NODES, LEASE, *ADMISSION), no_execute=False
    ),
    "no Lease: no leader": RequestsCase(
        ("-n", "{ns}"),
        (NODES, ("/api/v1/namespaces/{ns}/pods", EVERY_VERSION), *BUDGETS, LEASE, *ADMISSION),
        lease=False,
    ),
}


@pytest.mark.parametrize("case", REQUESTS.values(), ids=REQUESTS.keys())
def test_the_requests_the_command_makes(case: RequestsCase, world: World) -> None:
    world.scene(no_execute=case.no_execute, lease=case.lease)
    if not case.no_execute:
        others = [
            node["metadata"]["name"]
            for node in raw(world.core.list_node)["items"]
            if any(t.get("effect") == "NoExecute" for t in node["spec"].get("taints") or [])
        ]
        assert not others, f"nodes left behind with a NoExecute taint make the command list the pods: {others}"
    run = world.status(*(world.fill(arg) for arg in case.argv), "-o", "json")
    run.document()
    assert [(r.path, r.query) for r in world.requests(run)] == [
        (world.fill(path), query) for path, query in case.expected
    ]


# --- the report -------------------------------------------------------------------------------------

FILTERS = {  # argv: (the untolerating pods, due now; the pods tolerating for a while)
    "no filters: the pods of every namespace": ((), ["{ns}/db", "{lease_ns}/{leader}"], ["{ns}/web"]),
    "-n: that namespace's pods": (("-n", "{ns}"), ["{ns}/db"], ["{ns}/web"]),
    "-n and -l: the pods matching the selector": (("-n", "{ns}", "-l", "app=web"), [], ["{ns}/web"]),
    "-l alone: the matching pods of every namespace": (
        ("-l", "app in (web,taintkeeper-controller)"),
        ["{lease_ns}/{leader}"],
        ["{ns}/web"],
    ),
}


@pytest.mark.parametrize(("argv", "due_now", "later"), FILTERS.values(), ids=FILTERS.keys())
def test_the_pending_evictions_are_those_of_the_pods_the_filters_select(
    argv: tuple[str, ...], due_now: list[str], later: list[str], world: World
) -> None:
    world.scene()
    document = world.status(*(world.fill(arg) for arg in argv), "-o", "json").document()
    pending = [f"{p['namespace']}/{p['pod']}" for p in world.ours(document, "pendingEvictions")]
    # Soonest first: the untolerating pods now, by namespace and name; then `web`, after its 300 s.
    assert pending == sorted(world.fill(name) for name in due_now) + [world.fill(name) for name in later]


def test_the_json_report(world: World) -> None:
    died = world.scene()
    before = time.time()
    document = world.status("-n", world.namespace, "-o", "json").document()
    after = time.time()
    assert list(document) == ["zones", "brake", "nodes", "leader", "pendingEvictions", "admission"]

    zone = next(z for z in document["zones"] if z["zone"] == world.zone)
    assert zone == {
        "zone": world.zone,
        "state": "Normal",
        "nodes": sorted(world.nodes),
        "excluded": [],
        "size": 2,
        "notReady": 1,
        "evictionRate": 0.1,
        "evictionRateReason": "--node-eviction-rate",
    }
    assert document["brake"] is False  # this zone is not fully disrupted

    [node] = world.ours(document, "nodes")  # the healthy node carries no taint of taintkeeper's
    ages = [taint.pop("ageSeconds") for taint in node["taints"]]
    assert node == {
        "name": world.dead,
        "zone": world.zone,
        "ready": "Unknown",
        "taints": [
            {"key": UR, "effect": "NoExecute", "since": format_time(died), "sinceSource": "timeAdded"},
            {"key": UR, "effect": "NoSchedule", "since": format_time(died), "sinceSource": "Ready.lastTransitionTime"},
        ],
    }
    assert all(before - died - 1 <= age <= after - died + 1 for age in ages), ages

    db, web = world.ours(document, "pendingEvictions")
    assert (db["pod"], db["taint"], db["secondsLeft"]) == ("db", f"{UR}:NoExecute", 0)  # not tolerated: now
    created = parse_time(world.pods["web"]["metadata"]["creationTimestamp"])
    assert created is not None and created > died  # bound after the taint: its 300 s count from then
    assert (web["namespace"], web["pod"], web["node"]) == (world.namespace, "web", world.dead)
    assert web["deadline"] == format_time(created + 300)
    assert created + 300 - after - 1 <= web["secondsLeft"] <= created + 300 - before + 1

    leader = document["leader"]
    assert leader.pop("lastMonitorPassError") == NO_LAST_PASS
    renewed, renewed_ago = parse_time(leader.pop("renewTime")), leader.pop("renewedSecondsAgo")
    assert leader == {
        "lease": f"{world.lease_namespace}/{world.lease_name}",
        "holder": world.holder,
        "pod": world.leader,
        "leaseDurationSeconds": 15,
        "expired": False,
        "error": None,
        "lastMonitorPass": None,
        "lastMonitorPassSecondsAgo": None,
    }
    assert renewed is not None and before - 5 <= renewed <= after  # written by scene(), whole seconds
    assert 0 <= renewed_ago <= after - renewed + 1


def test_the_last_monitor_pass_is_read_from_the_leases_annotation(world: World) -> None:
    passed = time.time() - 90.25
    world.scene(last_pass=passed)
    before = time.time()
    run = world.status("-n", world.namespace)
    document = world.status("-n", world.namespace, "-o", "json").document()
    after = time.time()
    assert (run.code, run.err) == (0, "")
    said = [line for line in run.out.splitlines() if line.startswith("  last monitor pass")]
    ages = range(int(before - passed), int(after - passed) + 2)
    assert len(said) == 1 and said[0] in {f"  last monitor pass {describe_duration(age)} ago" for age in ages}, said
    leader = document["leader"]
    assert (leader["lastMonitorPass"], leader["lastMonitorPassError"]) == (format_time(passed), None)
    assert int(before - passed) <= leader["lastMonitorPassSecondsAgo"] <= int(after - passed) + 1
    # From the Lease alone: no request to the leader's pod.
    assert [r.path for r in world.requests(run)].count(world.fill(LEASE[0])) == 1
    assert not [r.path for r in world.requests(run) if "/pods/" in r.path]


def test_a_lease_without_the_last_pass_is_one_line_of_the_report(world: World) -> None:
    world.scene()
    run = world.status("-n", world.namespace)
    assert (run.code, run.err) == (0, "")
    lines = run.out.splitlines()
    [said_leader] = [line for line in lines if line.startswith("LEADER")]
    assert said_leader.startswith(
        f"LEADER  {world.leader} (Lease {world.lease_namespace}/{world.lease_name} held by {world.holder}, renewed "
    ), said_leader
    said = [line for line in lines if line.startswith("  last monitor pass")]
    assert said == ["  last monitor pass: cannot tell: " + NO_LAST_PASS]


def test_metrics_port_is_ignored_with_one_line_on_stderr(world: World) -> None:
    world.scene(last_pass=time.time() - 5)
    run = world.status("-n", world.namespace, "-o", "json", "--metrics-port", "10258")
    assert run.code == 0
    assert run.err.splitlines() == [
        "status: warning: --metrics-port is deprecated and ignored: the last monitor pass is read from the "
        "leader's Lease"
    ]
    assert json.loads(run.out)["leader"]["lastMonitorPassError"] is None


def test_no_lease_means_no_leader(world: World) -> None:
    world.scene(lease=False)
    run = world.status("-n", world.namespace)
    assert (run.code, run.err) == (0, "")
    assert f"LEADER  none (the Lease {world.lease_namespace}/{world.lease_name} does not exist)" in run.out.splitlines()
    assert world.status("-n", world.namespace, "-o", "json").document()["leader"] == {
        "lease": f"{world.lease_namespace}/{world.lease_name}",
        "holder": None,
        "pod": None,
        "renewTime": None,
        "renewedSecondsAgo": None,
        "leaseDurationSeconds": None,
        "expired": False,
        "error": None,
        "lastMonitorPass": None,
        "lastMonitorPassSecondsAgo": None,
        "lastMonitorPassError": "no leader",
    }


def test_an_api_error_is_one_line_and_exit_1(world: World) -> None:
    # A ServiceAccount token the apiserver knows; in the plain control plane no RBAC grants it nodes.
    kubeconfig = world.local.directory / "kubeconfig-taintkeeper-webhook"
    assert kubeconfig.is_file(), f"hack/local-cluster.sh wrote no {kubeconfig}"
    run = world.status("-o", "json", kubeconfig=kubeconfig)
    assert (run.code, run.out) == (1, "")
    assert run.err.splitlines() == [
        f'status: error: cannot read the cluster: 403 Forbidden: nodes is forbidden: User "{WEBHOOK_USER}" cannot '
        'list resource "nodes" in API group "" at the cluster scope (bind the ClusterRole taintkeeper-viewer)'
    ]
    assert world.requests(run) == [Request("list", *NODES, 403, WEBHOOK_USER)]  # and nothing after it


def test_watch_in_json_prints_one_document_per_line(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.scene()
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:  # the interval between frames; Ctrl-C after the second frame
        sleeps.append(seconds)
        if len(sleeps) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr("kubectl_taintkeeper.status_command.time.sleep", sleep)
    run = world.status("-n", world.namespace, "-o", "json", "--watch")
    assert (run.code, run.err) == (0, "")
    documents = [json.loads(line) for line in run.out.splitlines()]
    assert len(documents) == 2
    assert all([p["pod"] for p in world.ours(d, "pendingEvictions")] == ["db", "web"] for d in documents)
    assert [r.path for r in world.requests(run)].count("/api/v1/nodes") == 2  # each frame read afresh


# --- the deadline shown is the deletion -------------------------------------------------------------


@pytest.mark.version_independent(
    "the deadline shown against the controller's own timing; the command's reads are the tests above's, "
    "and the controller's on simulated nodes test_node_lifecycle's, all kept on 1.20"
)
def test_a_pod_is_deleted_at_the_deadline_the_command_shows(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dead, *_healthy = cluster.sim.add_nodes(3, zones=["a"])
    pod = cluster.pods(dead, unreachable(20), "twenty")
    cluster.start_controller()  # --leader-elect=false: the command finds no Lease, which is fine here
    cluster.sim.stop_heartbeats(dead)
    taint = wait_for(lambda: cluster.taint(dead, UR, "NoExecute"), 20, "unreachable:NoExecute")

    monkeypatch.setenv("POD_NAME", f"status-{uuid.uuid4().hex}")
    capsys.readouterr()
    assert (
        status_command.main(
            [
                "-n",
                cluster.namespace,
                "-o",
                "json",
                "--kubeconfig",
                str(cluster.local.kubeconfig),
                "--lease-namespace",
                cluster.namespace,
                "--lease-name",
                "no-such-lease",
            ]
        )
        == 0
    )
    shown = [p for p in json.loads(capsys.readouterr().out)["pendingEvictions"] if p["pod"] == pod]
    assert len(shown) == 1 and (shown[0]["node"], shown[0]["taint"]) == (dead, f"{UR}:NoExecute"), shown
    deadline = parse_time(shown[0]["deadline"])
    assert deadline is not None and deadline == (parse_time(taint["timeAdded"]) or 0) + 20
    assert 0 < shown[0]["secondsLeft"] <= 20

    poll = 0.1
    wait_for(lambda: cluster.deleted(pod), deadline - time.time() + 15, f"pod {pod} deleted", interval=poll)
    seen = time.time()
    print(
        f"deadline shown {shown[0]['deadline']} ({deadline:.3f}, {shown[0]['secondsLeft']} s left); "
        f"pod first seen terminating or gone at {seen:.3f}: {seen - deadline:+.3f} s"
    )
    assert abs(seen - deadline) <= 1.0 + poll
