"""bench/admission_latency.py's parts against a real kube-apiserver of their own: the fixed-rate
creates (bench/create_load.py) and configuration b, kube-apiserver restarted for one start with the
built-in DefaultTolerationSeconds plugin (`start-apiserver DIR --default-toleration-seconds`)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from bench.admission_latency import has_defaults, pod_body
from bench.create_load import Endpoint, create_at_rate
from tests.integration.kube import LocalCluster, raw

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "local-cluster.sh"


def control_plane(*args: str) -> None:
    result = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory, host_packages: None) -> Iterator[LocalCluster]:
    """A control plane of its own: these tests restart kube-apiserver."""
    directory = tmp_path_factory.mktemp("admission-cluster")
    result = subprocess.run(["bash", str(SCRIPT), "up", str(directory)], capture_output=True, text=True,
                            timeout=1800)
    try:
        if result.returncode != 0:
            pytest.fail(f"control plane did not start:\n{result.stderr[-4000:]}", pytrace=False)
        kubeconfig = Path(result.stdout.strip().splitlines()[-1])
        api_client = config.new_client_from_config(config_file=str(kubeconfig))
        try:
            yield LocalCluster(directory=directory, kubeconfig=kubeconfig, api_client=api_client)
        finally:
            api_client.close()
    finally:
        subprocess.run(["bash", str(SCRIPT), "down", str(directory)], capture_output=True, timeout=120)


@pytest.fixture
def own_namespace(own_cluster: LocalCluster) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    raw(client.CoreV1Api(own_cluster.api_client).create_namespace, body={"metadata": {"name": name}})
    return name


def test_creates_at_a_fixed_rate_are_each_timed_and_left_unmutated_without_the_plugin(
        own_cluster: LocalCluster, own_namespace: str) -> None:
    endpoint = Endpoint.from_kubeconfig(str(own_cluster.kubeconfig))
    outcome = create_at_rate(endpoint, own_namespace, pod_body, rate=20, seconds=1.0, mutated=has_defaults)
    assert len(outcome.latencies) == 20 and outcome.failures == {} and outcome.mutated == 0
    assert 0 < outcome.p50 <= outcome.p99 <= outcome.max < 5
    pods = raw(client.CoreV1Api(own_cluster.api_client).list_namespaced_pod, own_namespace)["items"]
    assert sorted(pod["metadata"]["name"] for pod in pods) == sorted(f"create-{i}" for i in range(20))
    assert all("nodeName" not in pod["spec"] for pod in pods)  # no scheduler by that name: never placed


def test_a_refused_create_is_counted_as_a_failure_not_a_latency(own_cluster: LocalCluster) -> None:
    endpoint = Endpoint.from_kubeconfig(str(own_cluster.kubeconfig))
    outcome = create_at_rate(endpoint, "no-such-namespace", pod_body, rate=20, seconds=0.5, mutated=has_defaults)
    assert outcome.latencies == []
    assert outcome.failures == {'404: namespaces "no-such-namespace" not found': 10}


def test_the_built_in_plugin_is_on_for_one_start_of_the_apiserver_only(
        own_cluster: LocalCluster, own_namespace: str) -> None:
    directory = str(own_cluster.directory)
    endpoint = Endpoint.from_kubeconfig(str(own_cluster.kubeconfig))
    control_plane("stop-apiserver", directory)
    control_plane("start-apiserver", directory, "--default-toleration-seconds")
    with_plugin = create_at_rate(endpoint, own_namespace, lambda i: pod_body(100 + i), rate=20, seconds=0.5,
                                 mutated=has_defaults)
    control_plane("stop-apiserver", directory)
    control_plane("start-apiserver", directory)
    without = create_at_rate(endpoint, own_namespace, lambda i: pod_body(200 + i), rate=20, seconds=0.5,
                             mutated=has_defaults)
    assert (len(with_plugin.latencies), with_plugin.mutated) == (10, 10)
    assert (len(without.latencies), without.mutated) == (10, 0)


def test_start_apiserver_refuses_an_unknown_option(own_cluster: LocalCluster) -> None:
    result = subprocess.run(["bash", str(SCRIPT), "start-apiserver", str(own_cluster.directory), "--plugin"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "start-apiserver: expected DIR [--default-toleration-seconds]" in result.stderr
