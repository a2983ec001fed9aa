"""The node simulator (hack/simulator.py) against a real kube-apiserver: registration, leases,
conditions, pods, the kubelet's part in graceful deletion, the command line and a 200-node run.

Every test uses its own node prefix and deletes its nodes at the end (the cluster is shared).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypedDict, Unpack

import pytest
from kubernetes import client

from hack.simulator import Simulator, parse_args, parse_duration, parse_time
from tests.integration.kube import LocalCluster, raw, wait_for

ROOT = Path(__file__).resolve().parents[2]
LEASES = "kube-node-lease"
STRATEGIC = "application/strategic-merge-patch+json"
SECONDS_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

pytestmark = pytest.mark.version_independent(
    "the subject is the simulator, a test tool: it registers Nodes, renews node Leases (coordination.k8s.io/v1) and "
    "lists and watches pods the same way on every version, and every 1.20 test on simulated nodes runs it there"
)


@pytest.fixture
def core(local_cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(local_cluster.api_client)


@pytest.fixture
def coordination(local_cluster: LocalCluster) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(local_cluster.api_client)


class Periods(TypedDict, total=False):
    """The Simulator's options a test sets (its node prefix is the fixture's)."""

    lease_period: float
    status_period: float


@pytest.fixture
def make_simulator(local_cluster: LocalCluster) -> Iterator[Callable[..., Simulator]]:
    """Simulators with a unique node prefix; stopped, with their nodes deleted, at the end."""
    made: list[Simulator] = []

    def make(**options: Unpack[Periods]) -> Simulator:
        simulator = Simulator(local_cluster.api_client, node_prefix=f"sim-{uuid.uuid4().hex[:6]}", **options)
        made.append(simulator)
        return simulator

    yield make
    for simulator in made:
        simulator.stop()
        simulator.delete_nodes()
        simulator.close()


def node_conditions(core: client.CoreV1Api, name: str) -> dict[str, dict]:
    return {c["type"]: c for c in raw(core.read_node, name)["status"]["conditions"]}


def renew_time(coordination: client.CoordinationV1Api, name: str) -> str:
    """MicroTime strings of one format compare in time order."""
    return raw(coordination.read_namespaced_lease, name, LEASES)["spec"]["renewTime"]


def pod_exists(core: client.CoreV1Api, name: str, namespace: str) -> dict | None:
    try:
        return raw(core.read_namespaced_pod, name, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def assert_for(seconds: float, check: Callable[[], object], what: str) -> None:
    """`check` holds on every poll for `seconds`: for what must NOT happen, there is nothing to wait for."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), what
        time.sleep(0.2)


def test_nodes_register_with_zone_labels_ready_conditions_and_a_lease(make_simulator, core, coordination):
    simulator = make_simulator()
    names = simulator.add_nodes(3, zones=["zone-a", "zone-b"], region="region-1", labels={"pool": "blue"})
    assert names == [f"{simulator.node_prefix}-{i}" for i in range(3)]

    for name, zone in zip(names, ["zone-a", "zone-b", "zone-a"], strict=True):
        node = raw(core.read_node, name)
        labels = node["metadata"]["labels"]
        assert labels["topology.kubernetes.io/zone"] == zone
        assert labels["topology.kubernetes.io/region"] == "region-1"
        assert labels["kubernetes.io/hostname"] == name
        assert labels["kubernetes.io/os"] == "linux"
        assert labels["pool"] == "blue"
        for resources in (node["status"]["capacity"], node["status"]["allocatable"]):
            assert (resources["cpu"], resources["memory"], resources["pods"]) == ("4", "16Gi", "110")
        conditions = {c["type"]: c for c in node["status"]["conditions"]}
        assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("True", "KubeletReady")
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"):
            assert conditions[kind]["status"] == "False", kind
        for condition in conditions.values():
            assert SECONDS_TIME.match(condition["lastHeartbeatTime"]), condition
            assert SECONDS_TIME.match(condition["lastTransitionTime"]), condition

        lease = raw(coordination.read_namespaced_lease, name, LEASES)
        assert lease["spec"]["holderIdentity"] == name
        assert lease["spec"]["leaseDurationSeconds"] == 40
        assert MICRO_TIME.match(lease["spec"]["renewTime"])
        assert lease["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
        ]


def test_leases_renew_stop_with_the_heartbeats_and_renew_again_on_resume(make_simulator, coordination):
    simulator = make_simulator(lease_period=1.0).start()
    crashed, healthy = simulator.add_nodes(2)
    registered = renew_time(coordination, crashed)
    wait_for(lambda: renew_time(coordination, crashed) > registered, 5, "the lease renewed")

    simulator.stop_heartbeats(crashed)
    assert not simulator.is_alive(crashed)
    assert simulator.is_alive(healthy)
    frozen = renew_time(coordination, crashed)
    healthy_before = renew_time(coordination, healthy)
    assert_for(3, lambda: renew_time(coordination, crashed) == frozen, "a stopped node's lease was renewed")
    assert renew_time(coordination, healthy) > healthy_before, "the other node stopped renewing too"

    simulator.resume_heartbeats(crashed)
    assert simulator.is_alive(crashed)
    resumed = renew_time(coordination, crashed)
    assert resumed > frozen, "resume_heartbeats renews at once"
    wait_for(lambda: renew_time(coordination, crashed) > resumed, 5, "renewals going on after the resume")


def test_set_condition_is_posted_at_once_and_kept_by_status_reposts(make_simulator, core):
    simulator = make_simulator(status_period=1.0).start()
    (name,) = simulator.add_nodes(1)

    simulator.set_condition(name, "Ready", "False", reason="KubeletNotReady", message="container runtime is down")
    simulator.set_condition(name, "MemoryPressure", "True")
    conditions = node_conditions(core, name)
    ready = conditions["Ready"]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "KubeletNotReady",
        "container runtime is down",
    )
    assert (conditions["MemoryPressure"]["status"], conditions["MemoryPressure"]["reason"]) == ("True", "Simulated")

    wait_for(
        lambda: node_conditions(core, name)["Ready"]["lastHeartbeatTime"] > ready["lastHeartbeatTime"],
        5,
        "a periodic status post",
    )
    reposted = node_conditions(core, name)
    assert reposted["Ready"]["status"] == "False"
    assert reposted["Ready"]["lastTransitionTime"] == ready["lastTransitionTime"]
    assert reposted["MemoryPressure"]["status"] == "True"

    # Heartbeats back after an outage: the kubelet's own view (Ready False) is posted again.
    simulator.stop_heartbeats(name)
    simulator.resume_heartbeats(name)
    assert node_conditions(core, name)["Ready"]["status"] == "False"

    simulator.set_condition(name, "Ready", "True", reason="KubeletReady")
    assert node_conditions(core, name)["Ready"]["status"] == "True"


def test_resume_posts_ready_over_the_unknown_a_lifecycle_controller_set(make_simulator, core):
    simulator = make_simulator().start()
    (name,) = simulator.add_nodes(1)
    simulator.stop_heartbeats(name)
    unknown = {
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastTransitionTime": "2030-01-01T00:00:00Z",
    }
    core.patch_node_status(name, {"status": {"conditions": [unknown]}}, _content_type=STRATEGIC)
    assert node_conditions(core, name)["Ready"]["status"] == "Unknown"

    resumed_at = int(time.time())
    simulator.resume_heartbeats(name)
    ready = node_conditions(core, name)["Ready"]
    assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
    assert parse_time(ready["lastTransitionTime"]) >= resumed_at, "Unknown -> True is a transition"


def test_pods_are_created_running_and_ready_on_their_node(make_simulator, core, namespace):
    simulator = make_simulator()
    (node,) = simulator.add_nodes(1)
    toleration = {"key": "example.com/x", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
    names = simulator.create_pods(node, 3, namespace=namespace, tolerations=[toleration], labels={"app": "web"})
    assert names == [f"{node}-0", f"{node}-1", f"{node}-2"]
    assert simulator.create_pods(node, namespace=namespace, name_prefix="web") == ["web-0"]

    for name in names:
        pod = raw(core.read_namespaced_pod, name, namespace)
        assert pod["spec"]["nodeName"] == node
        assert [c["image"] for c in pod["spec"]["containers"]] == ["busybox"]
        assert toleration in pod["spec"]["tolerations"]
        assert pod["metadata"]["labels"]["app"] == "web"
        assert pod["status"]["phase"] == "Running"
        conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert {kind: conditions[kind] for kind in ("Ready", "ContainersReady", "PodScheduled")} == {
            "Ready": "True",
            "ContainersReady": "True",
            "PodScheduled": "True",
        }
        assert pod["status"]["containerStatuses"][0]["ready"] is True


def test_a_graceful_deletion_on_a_live_node_ends_when_the_grace_period_does(make_simulator, core, namespace):
    simulator = make_simulator().start()
    (node,) = simulator.add_nodes(1)
    (name,) = simulator.create_pods(node, namespace=namespace, termination_grace_period=1)

    deleting = raw(core.delete_namespaced_pod, name, namespace)  # the default grace: the pod's 1 s
    assert deleting["metadata"]["deletionGracePeriodSeconds"] == 1
    grace_ends = parse_time(deleting["metadata"]["deletionTimestamp"])
    # Still there until its deletionTimestamp (whole seconds, so up to 1 s after the request)...
    while time.time() < grace_ends - 0.15:
        assert pod_exists(core, name, namespace), "the pod was removed before its grace period ended"
        time.sleep(0.05)
    # ...and removed right after it.
    wait_for(lambda: not pod_exists(core, name, namespace), 5, "the simulated kubelet to remove the pod")
    assert time.time() - grace_ends < 5
    # The simulator counts the removal after its DELETE returns, a moment after the pod is gone.
    wait_for(lambda: simulator.stats().pods_removed == 1, 5, "the removal to be counted")
    assert simulator.stats().pods_removed == 1


def test_a_pod_terminating_before_the_start_is_found_on_a_later_page_of_the_relist(
    make_simulator, core, namespace, monkeypatch
):
    monkeypatch.setattr("hack.simulator_pod_watch.LIST_PAGE_SIZE", 1)  # every bound pod a page of its own
    simulator = make_simulator()
    (node,) = simulator.add_nodes(1)
    names = simulator.create_pods(node, count=3, namespace=namespace, termination_grace_period=1)
    last = max(names)  # pods are listed in key order: this one is not on the first page
    raw(core.delete_namespaced_pod, last, namespace)  # no simulator runs yet: it stays Terminating

    simulator.start()  # its relist (three pages at least) must find it; the watch only brings later changes
    wait_for(lambda: not pod_exists(core, last, namespace), 10, "the simulated kubelet to remove the pod")
    assert all(pod_exists(core, name, namespace) for name in names if name != last)


def test_a_pod_on_a_stopped_node_stays_terminating_until_its_heartbeats_resume(make_simulator, core, namespace):
    simulator = make_simulator().start()
    (node,) = simulator.add_nodes(1)
    (name,) = simulator.create_pods(node, namespace=namespace, termination_grace_period=1)
    simulator.stop_heartbeats(node)

    deleting = raw(core.delete_namespaced_pod, name, namespace)
    grace_ends = parse_time(deleting["metadata"]["deletionTimestamp"])
    seconds = max(grace_ends - time.time(), 0) + 3
    assert_for(
        seconds,
        lambda: (pod_exists(core, name, namespace) or {}).get("metadata", {}).get("deletionTimestamp"),
        "a pod on a dead node was removed (or lost its deletionTimestamp)",
    )

    simulator.resume_heartbeats(node)
    wait_for(lambda: not pod_exists(core, name, namespace), 5, "the pod removed once the node is back")


def test_200_nodes_renew_every_lease_spread_over_the_period(make_simulator, coordination, capsys):
    simulator = make_simulator(lease_period=10.0).start()
    prefix = simulator.node_prefix + "-"

    def leases() -> dict[str, str]:
        listed = raw(coordination.list_namespaced_lease, LEASES)["items"]
        return {
            lease["metadata"]["name"]: lease["spec"]["renewTime"]
            for lease in listed
            if lease["metadata"]["name"].startswith(prefix)
        }

    started = time.monotonic()
    names = simulator.add_nodes(200, zones=["a", "b", "c"])
    registration_seconds = time.monotonic() - started
    created = leases()
    assert sorted(created) == sorted(names)

    window_start, before = time.monotonic(), simulator.stats()
    wait_for(
        lambda: all(renewed > created[name] for name, renewed in leases().items()),
        20,
        "every lease renewed at least once",
        interval=0.5,
    )
    first_round_seconds = time.monotonic() - window_start
    time.sleep(max(0.0, 15 - (time.monotonic() - window_start)))  # a fixed window: this measures a rate
    after, window = simulator.stats(), time.monotonic() - window_start

    calls_per_second = (after.api_calls - before.api_calls) / window
    cpu = after.cpu_seconds - before.cpu_seconds
    with capsys.disabled():
        print(
            f"\n200 nodes: registered in {registration_seconds:.1f}s ({before.api_calls} API calls); every lease "
            f"renewed within {first_round_seconds:.1f}s; over {window:.1f}s: {calls_per_second:.1f} API calls/s "
            f"({after.lease_renewals - before.lease_renewals} renewals, {after.status_posts - before.status_posts}"
            f" status posts), simulator CPU {cpu:.2f}s ({100 * cpu / window:.1f}% of a core)"
        )
    assert after.errors == 0
    # 200 leases every 10 s plus 200 status posts every 60 s is about 23 calls/s.
    assert 15 <= calls_per_second <= 35
    # Spread: the latest renewals fall all over the period, not in one burst.
    per_second = Counter(renewed[:19] for renewed in leases().values())
    assert max(per_second.values()) <= 60, per_second


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "x"], "--nodes: not a whole number"),
        (["--nodes", "0"], "--nodes must be at least 1"),
        (["--nodes", "2", "--lease-period", "soon"], "--lease-period: invalid duration 'soon'"),
        (["--nodes", "2", "--fail", "sim-7"], "--fail: 'sim-7' is not one of the nodes"),
        (["--nodes", "2", "--fail-after", "3"], "--fail-after and --recover-after need --fail"),
        (["--nodes", "2", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(local_cluster, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        parse_args(["--kubeconfig", str(local_cluster.kubeconfig), *argv])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("simulator: error: "), error
    assert message in error


def test_durations_take_seconds_or_go_style():
    assert [parse_duration(text) for text in ("10", "0.5", "10s", "500ms", "1m30s", "1h")] == [
        10,
        0.5,
        10,
        0.5,
        90,
        3600,
    ]
    with pytest.raises(ValueError):
        parse_duration("10 seconds")


def test_the_command_fails_and_recovers_a_node_on_schedule_then_cleans_up(local_cluster, core, namespace):
    prefix = f"cli-{uuid.uuid4().hex[:6]}"
    result = subprocess.run(
        [
            sys.executable,
            "hack/simulator.py",
            "--kubeconfig",
            str(local_cluster.kubeconfig),
            "--nodes",
            "2",
            "--zones",
            "a,b",
            "--prefix",
            prefix,
            "--lease-period",
            "500ms",
            "--pods-per-node",
            "1",
            "--namespace",
            namespace,
            "--fail",
            "1",
            "--fail-after",
            "1",
            "--recover-after",
            "1",
            "--duration",
            "3",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} ", line) for line in lines), lines
    expected = [
        f"registered 2 node(s) {prefix}-0, {prefix}-1",
        f"created 1 pod(s) on {prefix}-0",
        f"heartbeats stopped: {prefix}-1",
        f"heartbeats resumed: {prefix}-1",
        "--duration 3s reached",
        f"deleted 2 node(s) {prefix}-0, {prefix}-1",
    ]
    positions = [next((i for i, line in enumerate(lines) if text in line), -1) for text in expected]
    assert -1 not in positions and positions == sorted(positions), result.stdout
    nodes = raw(core.list_node)["items"]
    assert not [n for n in nodes if n["metadata"]["name"].startswith(prefix)], "nodes left behind"
    assert not raw(core.list_namespaced_pod, namespace)["items"], "pods left behind"


def test_the_command_cleans_up_on_sigterm(local_cluster, core, tmp_path):
    prefix = f"cli-{uuid.uuid4().hex[:6]}"
    output = tmp_path / "simulator.out"
    with output.open("w") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "hack/simulator.py",
                "--kubeconfig",
                str(local_cluster.kubeconfig),
                "--nodes",
                "3",
                "--prefix",
                prefix,
            ],
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: "3 node(s) up" in output.read_text(), 30, "the nodes up")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, output.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    assert "SIGTERM received" in output.read_text()
    nodes = raw(core.list_node)["items"]
    assert not [n for n in nodes if n["metadata"]["name"].startswith(prefix)], "nodes left behind"
