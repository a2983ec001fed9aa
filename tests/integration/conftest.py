"""A real kube-apiserver + etcd on loopback for the integration tests (hack/local-cluster.sh).

The control plane is started once per session and stopped at the end; a test module that restarts or
freezes the apiserver takes one of its own (`private_cluster`). If one cannot start, the tests that
need it fail (they never skip): deselect them with `-m "not apiserver"` instead.
Set TAINTKEEPER_TEST_CLUSTER_DIR to reuse a control plane across runs (it is then left up).

The apiserver writes its audit log (`up --audit`: DIR/logs/audit.log, blocking), so a test can
read which requests a process made, as the apiserver saw them (tests/integration/kube.py
`audit_events`). A reused DIR started without it gets its apiserver restarted with it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from kube.client import make_api_client
from kube.identity import CONTROLLER
from tests.integration.kube import LocalCluster, control_plane, control_plane_up, raw
from tests.integration.simulated import Cluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.apiserver)


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory, host_packages: None) -> Iterator[LocalCluster]:
    reuse = os.environ.get("TAINTKEEPER_TEST_CLUSTER_DIR")
    directory = Path(reuse) if reuse else tmp_path_factory.mktemp("cluster")
    kubeconfig = control_plane_up(directory, "--audit")
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield LocalCluster(directory=directory, kubeconfig=kubeconfig, api_client=api_client)
    finally:
        api_client.close()
        if not reuse:
            control_plane("down", directory, check=False)


@pytest.fixture
def namespace(local_cluster: LocalCluster) -> Iterator[str]:
    """A fresh namespace per test, labelled so test-scoped webhooks can select it. Without a
    controller-manager nothing finalizes namespaces, so its pods are deleted explicitly."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(local_cluster.api_client)
    raw(core.create_namespace, body={"metadata": {"name": name, "labels": {"taintkeeper-test": name}}})
    yield name
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


@pytest.fixture
def cluster(local_cluster: LocalCluster, namespace: str, tmp_path: Path) -> Iterator[Cluster]:
    """Simulated nodes in the real apiserver; the test starts the controller (`cluster.start_controller`)."""
    world = Cluster(local_cluster, namespace, tmp_path)
    yield world
    world.close()


@pytest.fixture(scope="module")
def private_cluster(tmp_path_factory: pytest.TempPathFactory, host_packages: None) -> Iterator[LocalCluster]:
    """A control plane of the test module's own, for tests that restart or freeze the apiserver."""
    directory = tmp_path_factory.mktemp("private-cluster")
    try:
        kubeconfig = control_plane_up(directory)
        # Built as the controller builds its client: its retries are part of what the informer tests test.
        api_client = make_api_client(str(kubeconfig), component=CONTROLLER)
        try:
            yield LocalCluster(directory=directory, kubeconfig=kubeconfig, api_client=api_client)
        finally:
            api_client.close()
    finally:
        control_plane("down", directory, check=False)  # also after a failed start: what did start is stopped


@pytest.fixture
def private_namespace(private_cluster: LocalCluster) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    raw(client.CoreV1Api(private_cluster.api_client).create_namespace, body={"metadata": {"name": name}})
    return name
