"""Real kubelets beside the local control plane (hack/local-cluster.sh up DIR --nodes 3).

The nodes are brought up once per session. If they cannot be, the tests FAIL (never skip), except
when the kernel lacks something fundamental (overlayfs, cgroup v1), which skips with the reason.
Deselect the suite with `-m "not realnodes"`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import config

from tests.realnodes.nodes import FUNDAMENTAL, RealCluster, script

NODE_COUNT = 3


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "realnodes: needs real kubelets beside the local kube-apiserver "
        "(hack/local-cluster.sh up DIR --nodes N); CI runs these",
    )


# Runs before any other test of this suite, whatever the file names: it brings up nodes of its own and
# compares the host before and after, so the suite's shared cluster must not be up yet.
FIRST = "test_host_restore.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    places = [i for i, item in enumerate(items) if here in Path(item.fspath).parents]
    for place in places:
        items[place].add_marker(pytest.mark.realnodes)
    ours = sorted((items[i] for i in places), key=lambda item: Path(item.fspath).name != FIRST)
    for place, item in zip(places, ours, strict=True):
        items[place] = item


def bring_up(directory: Path, nodes: int) -> tuple[Path, float]:
    started = time.monotonic()
    result = script("up", str(directory), "--nodes", str(nodes), timeout=1800)
    if result.returncode != 0:
        reason = next((line for line in result.stderr.splitlines() if any(f in line for f in FUNDAMENTAL)), None)
        script("down", str(directory))
        if reason:
            pytest.skip(f"this kernel cannot run real nodes: {reason}")
        pytest.fail(f"real nodes did not come up:\n{result.stderr[-4000:]}", pytrace=False)
    return Path(result.stdout.strip().splitlines()[-1]), time.monotonic() - started


@pytest.fixture(scope="package")  # down before the next suite: one cluster with nodes per host at a time (tests/soak)
def real_cluster(tmp_path_factory: pytest.TempPathFactory, node_packages: None) -> Iterator[RealCluster]:
    directory = tmp_path_factory.mktemp("realnodes")
    kubeconfig, seconds = bring_up(directory, NODE_COUNT)
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    cluster = RealCluster(directory=directory, kubeconfig=kubeconfig, api_client=api_client, up_seconds=seconds)
    cluster.refresh()
    try:
        yield cluster
    finally:
        api_client.close()
        result = script("down", str(directory))
        if result.returncode != 0:
            print(f"local-cluster.sh down failed:\n{result.stderr}")
