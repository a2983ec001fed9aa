"""The end-to-end suite's cluster: taintkeeper deployed from its image and manifests on real kubelets.

The provider (tests/e2e/providers.py) is TAINTKEEPER_E2E_PROVIDER: `local` (the default) brings up
the complete local cluster (`hack/local-cluster.sh up DIR --nodes 3`) and deploys taintkeeper
into it (`hack/local-cluster.sh deploy DIR --overlay tests/e2e/overlay/local`), then takes the
cluster down at the end; with TAINTKEEPER_E2E_CLUSTER_DIR=DIR it uses (or makes) the cluster in
DIR and leaves it running, for quick reruns (`hack/local-cluster.sh down DIR` when done).
`kind` does the same on a kind cluster (`hack/local-cluster.sh kind-up DIR`: the Docker engine, kind and
its node image are the project's own where none is installed), taken down with `kind-down DIR`.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.conftest import build
from tests.e2e.cluster import VICTIM_LABEL, E2ECluster, default_tolerations, wait_for
from tests.e2e.providers import KindProvider, LocalProvider, Provider

PROVIDER = os.environ.get("TAINTKEEPER_E2E_PROVIDER", "local")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """This suite's tests marked `last` run after its others (they read what the suite left, e.g. the
    logs), in the order of the mark's rank (`last(1)` after `last`); every other test keeps its place."""
    here = Path(__file__).parent

    def rank(item: pytest.Item) -> tuple[bool, int]:
        mark = item.get_closest_marker("last")
        return (mark is not None, mark.args[0] if mark is not None and mark.args else 0)

    places = [i for i, item in enumerate(items) if here in Path(item.fspath).parents]
    ours = sorted((items[i] for i in places), key=rank)
    for place, item in zip(places, ours, strict=True):
        items[place] = item


def _cluster(provider: LocalProvider | KindProvider, kept: bool) -> Generator[Provider, None, None]:
    try:
        provider.up()
        with config.new_client_from_config(config_file=str(provider.kubeconfig())) as api_client:
            # Before the deployment: its placement keeps taintkeeper's pods off this node.
            client.CoreV1Api(api_client).patch_node(provider.victim, {"metadata": {"labels": {VICTIM_LABEL: "true"}}})
        provider.deploy()
        yield provider
    finally:
        if not kept:
            provider.down()


def _provider(tmp_path_factory: pytest.TempPathFactory) -> Generator[Provider, None, None]:
    kept = os.environ.get("TAINTKEEPER_E2E_CLUSTER_DIR")
    directory = Path(kept) if kept else tmp_path_factory.mktemp(f"e2e-{PROVIDER}")
    provider = LocalProvider(directory) if PROVIDER == "local" else KindProvider(directory)
    return _cluster(provider, bool(kept))


@pytest.hookimpl(trylast=True)  # after tests/conftest.py's: the node packages (gcc, busybox) installed first
def pytest_collection_finish(session: pytest.Session) -> None:
    """On kind, its node image built before the first test (tests/conftest.py builds what fixtures ask for; this
    suite asks only on kind): outside every test's timeout, so `kind-up` then only loads it."""
    here = Path(__file__).parent
    ours = any(here in Path(item.fspath).parents for item in session.items)
    if PROVIDER == "kind" and ours and not session.config.option.collectonly:
        with contextlib.suppress(pytest.fail.Exception):  # provider_prerequisites reports it
            build("kind_node_image")


@pytest.fixture(scope="package")
def provider_prerequisites(taintkeeper_image: object) -> None:
    """The local cluster's binaries and taintkeeper's image, and on kind its node image, built before the first
    test (tests/conftest.py); `kind-up` loads the node image into the engine."""
    if PROVIDER == "kind":
        build("kind_node_image")  # built at collection: a failure is said here


@pytest.fixture(scope="package")  # down before the next suite: one cluster with nodes per host at a time
def e2e(tmp_path_factory: pytest.TempPathFactory, provider_prerequisites: None) -> Iterator[E2ECluster]:
    """The running cluster with taintkeeper deployed and Available (the provider waits for it)."""
    if PROVIDER not in ("local", "kind"):
        pytest.fail(f"TAINTKEEPER_E2E_PROVIDER={PROVIDER!r}: expected local or kind", pytrace=False)
    providers = _provider(tmp_path_factory)
    provider = next(providers)
    try:
        api_client = config.new_client_from_config(config_file=str(provider.kubeconfig()))
        try:
            yield E2ECluster(
                provider=provider,
                kubeconfig=provider.kubeconfig(),
                api_client=api_client,
                victim=provider.victim,
                bystander=provider.bystander,
            )
        finally:
            api_client.close()
    finally:
        providers.close()


@pytest.fixture(autouse=True)
def _needs_cluster(e2e: E2ECluster) -> None:
    """Every test here needs the cluster, whether or not it asks for it: this is where they skip."""


@pytest.fixture(scope="package")
def webhook_ready(e2e: E2ECluster) -> None:
    """Wait until the webhook answers admission through its Service.

    failurePolicy is Ignore, so a webhook that is not reachable yet lets pods through unchanged;
    server-side dry-run creates show when it starts adding tolerations.
    """
    name = f"e2e-ready-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(e2e.api_client)
    core.create_namespace(
        client.V1Namespace.model_validate({"metadata": {"name": name, "labels": {"taintkeeper-e2e": "true"}}})
    )
    try:

        def mutated() -> bool:
            pod = e2e.create_pod(name, "webhook-probe", dry_run=True)
            return pod["spec"].get("tolerations") == default_tolerations()

        wait_for(mutated, 180, "the webhook to add default tolerations (dry-run pod create)", interval=2)
    finally:
        core.delete_namespace(name)


@pytest.fixture
def namespace(e2e: E2ECluster) -> Iterator[str]:
    """A fresh namespace per test, ready for pods; deleted afterwards without waiting for it to go."""
    name = f"e2e-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(e2e.api_client)
    core.create_namespace(
        client.V1Namespace.model_validate({"metadata": {"name": name, "labels": {"taintkeeper-e2e": "true"}}})
    )
    # Until kube-controller-manager has made the namespace's `default` ServiceAccount (and, before
    # Kubernetes 1.24, its token Secret): ServiceAccount admission refuses pods until then.
    wait_for(
        lambda: e2e.create_pod(name, "service-account-probe", dry_run=True),
        60,
        f"pods admitted in namespace {name}",
        interval=0.5,
    )
    yield name
    with contextlib.suppress(client.ApiException):
        core.delete_namespace(name, grace_period_seconds=0)


@pytest.fixture
def victim(e2e: E2ECluster) -> Iterator[str]:
    """The worker to stop; started again (and waited for) however the test ends."""
    assert e2e.provider.node_running(e2e.victim), f"{e2e.victim} is not running before the test"
    wait_for(
        lambda: e2e.ready(e2e.victim) == "True" and e2e.lifecycle_taints(e2e.victim) == [],
        120,
        f"{e2e.victim} Ready and untainted before the test",
    )
    try:
        yield e2e.victim
    finally:
        if not e2e.provider.node_running(e2e.victim):
            e2e.provider.start_node(e2e.victim)
            wait_for(lambda: e2e.ready(e2e.victim) == "True", 300, f"{e2e.victim} Ready again (cleanup)", interval=2)
