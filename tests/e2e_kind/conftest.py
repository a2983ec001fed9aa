"""The kind end-to-end suite's cluster handle, and the checks that decide whether it can run.

The suite needs a Docker engine, the kind cluster hack/kind-e2e.sh creates, and taintkeeper
deployed in it. When any of that is missing every test here is *skipped* with the reason (so a
plain `pytest` on a machine without Docker reports them as skipped, not failed). Under
hack/kind-e2e.sh (TAINTKEEPER_KIND_E2E=1) a missing prerequisite *fails* instead: there the
cluster must exist, and a skip would pass CI without testing anything.

The cluster is found through KUBECONFIG, else through `kind get kubeconfig`; its name is
TAINTKEEPER_KIND_CLUSTER (default taintkeeper-e2e).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest
from kubernetes import client, config

from tests.e2e_kind.cluster import SYSTEM_NAMESPACE, KindCluster, default_tolerations, wait_for

CLUSTER = os.environ.get("TAINTKEEPER_KIND_CLUSTER", "taintkeeper-e2e")
REQUIRED = os.environ.get("TAINTKEEPER_KIND_E2E") == "1"
HOW_TO_RUN = "run the suite with hack/kind-e2e.sh on a machine with a Docker engine (see tests/e2e_kind/README.md)"


def _unavailable(reason: str) -> NoReturn:
    """Skip (or, under hack/kind-e2e.sh, fail) every test of the suite."""
    if REQUIRED:
        pytest.fail(f"kind e2e prerequisites missing: {reason}", pytrace=False)
    pytest.skip(f"kind e2e suite skipped: {reason}; {HOW_TO_RUN}")


def _run(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _check_docker() -> None:
    if shutil.which("docker") is None:
        _unavailable("the docker CLI is not installed (kind runs its nodes as Docker containers)")
    try:
        info = _run("docker", "info", "--format", "{{.ServerVersion}}")
    except subprocess.TimeoutExpired:
        _unavailable("`docker info` did not answer within 30 s (no Docker engine reachable)")
    if info.returncode != 0:
        _unavailable(f"no Docker engine is running (`docker info` failed: {_last_line(info.stderr)})")


def _check_cluster_containers(names: list[str]) -> None:
    for name in names:
        state = _run("docker", "inspect", "--format", "{{.State.Status}}", name)
        if state.returncode != 0:
            _unavailable(f"kind cluster {CLUSTER!r} not found (no container {name}); "
                         "create it with hack/kind-e2e.sh --keep")


def _kubeconfig(tmp_dir: Path) -> Path:
    if os.environ.get("KUBECONFIG"):
        path = Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
        if not path.is_file():
            _unavailable(f"KUBECONFIG={path} does not exist")
        return path
    if shutil.which("kind") is None:
        _unavailable("KUBECONFIG is not set and the kind CLI is not installed to export the cluster's kubeconfig")
    exported = _run("kind", "get", "kubeconfig", "--name", CLUSTER)
    if exported.returncode != 0:
        _unavailable(f"`kind get kubeconfig --name {CLUSTER}` failed: {_last_line(exported.stderr)}")
    path = tmp_dir / "kubeconfig"
    path.write_text(exported.stdout)
    path.chmod(0o600)
    return path


@pytest.fixture(scope="session")
def kind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KindCluster]:
    """The running kind cluster with taintkeeper deployed; skips (or fails) the suite otherwise."""
    nodes = [f"{CLUSTER}-control-plane", f"{CLUSTER}-worker", f"{CLUSTER}-worker2"]
    _check_docker()
    _check_cluster_containers(nodes)
    kubeconfig = _kubeconfig(tmp_path_factory.mktemp("kind"))
    try:
        api_client = config.new_client_from_config(config_file=str(kubeconfig))
    except Exception as error:  # not a kubeconfig, no current context, ...
        _unavailable(f"cannot use the kubeconfig {kubeconfig}: {error}")
    try:
        core = client.CoreV1Api(api_client)
        try:
            found = {node.metadata.name for node in core.list_node(_request_timeout=20).items}
        except Exception as error:  # unreachable, wrong credentials, ...
            _unavailable(f"the cluster in {kubeconfig} does not answer: {error}")
        if not set(nodes) <= found:
            _unavailable(f"{kubeconfig} is not the kind cluster {CLUSTER!r} (nodes {sorted(found)}, "
                         f"expected {nodes}); unset KUBECONFIG or point it at that cluster")
        apps = client.AppsV1Api(api_client)
        for deployment in ("taintkeeper-webhook", "taintkeeper-controller"):
            try:
                apps.read_namespaced_deployment(deployment, SYSTEM_NAMESPACE, _request_timeout=20)
            except client.ApiException as error:
                if error.status != 404:
                    raise
                _unavailable(f"taintkeeper is not deployed in {CLUSTER!r} (no deployment {SYSTEM_NAMESPACE}/"
                             f"{deployment}); hack/kind-e2e.sh deploys it")
        yield KindCluster(name=CLUSTER, kubeconfig=kubeconfig, api_client=api_client,
                          control_plane=nodes[0], victim=nodes[1], bystander=nodes[2])
    finally:
        api_client.close()


@pytest.fixture(autouse=True)
def _needs_kind(kind: KindCluster) -> None:
    """Every test here needs the cluster, whether or not it asks for it: this is where they skip."""


@pytest.fixture(scope="session")
def webhook_ready(kind: KindCluster) -> None:
    """Wait until the webhook answers admission (its Secret and caBundle come from the certs Job).

    failurePolicy is Ignore, so a webhook that is not reachable yet lets pods through unchanged;
    server-side dry-run creates show when it starts adding tolerations.
    """
    name = f"e2e-ready-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(kind.api_client)
    core.create_namespace({"metadata": {"name": name, "labels": {"taintkeeper-e2e": "true"}}})
    try:
        def mutated() -> bool:
            pod = kind.create_pod(name, "webhook-probe", dry_run=True)
            return pod["spec"].get("tolerations") == default_tolerations()

        wait_for(mutated, 180, "the webhook to add default tolerations (dry-run pod create)", interval=2)
    finally:
        core.delete_namespace(name)


@pytest.fixture
def namespace(kind: KindCluster) -> Iterator[str]:
    """A fresh namespace per test; deleted afterwards without waiting for it to go."""
    name = f"e2e-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(kind.api_client)
    core.create_namespace({"metadata": {"name": name, "labels": {"taintkeeper-e2e": "true"}}})
    yield name
    with contextlib.suppress(client.ApiException):
        core.delete_namespace(name, grace_period_seconds=0)
