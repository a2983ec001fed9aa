"""bench/admission_latency.py's parts against a real kube-apiserver of their own: the fixed-rate
creates (bench/create_load.py) and configuration b, kube-apiserver restarted for one start with the
built-in DefaultTolerationSeconds plugin (`start-apiserver DIR --default-toleration-seconds`)."""

from __future__ import annotations

import subprocess

from kubernetes import client

from bench.admission_latency import has_defaults, pod_body
from bench.create_load import Endpoint, create_at_rate
from tests.integration.kube import SCRIPT, LocalCluster, control_plane, raw


def test_creates_at_a_fixed_rate_are_each_timed_and_left_unmutated_without_the_plugin(
    private_cluster: LocalCluster, private_namespace: str
) -> None:
    endpoint = Endpoint.from_kubeconfig(str(private_cluster.kubeconfig))
    outcome = create_at_rate(endpoint, private_namespace, pod_body, rate=20, seconds=1.0, mutated=has_defaults)
    assert len(outcome.latencies) == 20 and outcome.failures == {} and outcome.mutated == 0
    assert 0 < outcome.p50 <= outcome.p99 <= outcome.max < 5
    pods = raw(client.CoreV1Api(private_cluster.api_client).list_namespaced_pod, private_namespace)["items"]
    assert sorted(pod["metadata"]["name"] for pod in pods) == sorted(f"create-{i}" for i in range(20))
    assert all("nodeName" not in pod["spec"] for pod in pods)  # no scheduler by that name: never placed


def test_a_refused_create_is_counted_as_a_failure_not_a_latency(private_cluster: LocalCluster) -> None:
    endpoint = Endpoint.from_kubeconfig(str(private_cluster.kubeconfig))
    outcome = create_at_rate(endpoint, "no-such-namespace", pod_body, rate=20, seconds=0.5, mutated=has_defaults)
    assert outcome.latencies == []
    assert outcome.failures == {'404: namespaces "no-such-namespace" not found': 10}


def test_the_built_in_plugin_is_on_for_one_start_of_the_apiserver_only(
    private_cluster: LocalCluster, private_namespace: str
) -> None:
    directory = private_cluster.directory
    endpoint = Endpoint.from_kubeconfig(str(private_cluster.kubeconfig))
    control_plane("stop-apiserver", directory)
    control_plane("start-apiserver", directory, "--default-toleration-seconds")
    with_plugin = create_at_rate(
        endpoint, private_namespace, lambda i: pod_body(100 + i), rate=20, seconds=0.5, mutated=has_defaults
    )
    control_plane("stop-apiserver", directory)
    control_plane("start-apiserver", directory)
    without = create_at_rate(
        endpoint, private_namespace, lambda i: pod_body(200 + i), rate=20, seconds=0.5, mutated=has_defaults
    )
    assert (len(with_plugin.latencies), with_plugin.mutated) == (10, 10)
    assert (len(without.latencies), without.mutated) == (10, 0)


def test_start_apiserver_refuses_an_unknown_option(private_cluster: LocalCluster) -> None:
    result = subprocess.run(
        ["bash", str(SCRIPT), "start-apiserver", str(private_cluster.directory), "--plugin"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "start-apiserver: expected DIR [--default-toleration-seconds]" in result.stderr
