"""The kind cluster as kind-up made it (tests/e2e/providers.py KindProvider): its shape and the host-specific
settings said where they are set, a second kind-up of its directory a no-op, its name refused to another
directory in one line, and so is a node image the engine does not hold. On the kind provider only: the local
cluster's own are tests/realnodes'."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.cluster import E2ECluster
from tests.e2e.providers import LOCAL_CLUSTER, KindProvider

pytestmark = pytest.mark.e2e


@pytest.fixture
def kind(e2e: E2ECluster) -> KindProvider:
    if not isinstance(e2e.provider, KindProvider):
        pytest.skip("kind-up's cluster: the kind provider only")
    return e2e.provider


def kind_up(directory: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(LOCAL_CLUSTER), "kind-up", str(directory), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env or dict(os.environ),
    )


def node_containers(kind: KindProvider) -> dict[str, str]:
    listed = subprocess.run(
        ["docker", "ps", "--filter", f"label=io.x-k8s.kind.cluster={kind.cluster}", "--format", "{{.Names}} {{.ID}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(line.split() for line in listed.stdout.splitlines())


def test_one_control_plane_and_three_workers_with_the_hosts_settings_said(kind: KindProvider, e2e: E2ECluster):
    assert sorted(node_containers(kind)) == [
        f"{kind.cluster}-control-plane",
        f"{kind.cluster}-worker",
        f"{kind.cluster}-worker2",
        f"{kind.cluster}-worker3",
    ]
    config = (kind.directory / "kind-config.yaml").read_text()
    cgroup_v1 = (
        subprocess.run(["stat", "-fc", "%T", "/sys/fs/cgroup"], capture_output=True, text=True).stdout.strip()
        != "cgroup2fs"
    )
    assert ("failCgroupV1: false" in config) == cgroup_v1


def test_a_second_kind_up_of_its_directory_changes_nothing(kind: KindProvider):
    before = node_containers(kind)
    again = kind_up(kind.directory, "--name", kind.cluster)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1] == str(kind.directory / "kubeconfig")
    assert f"kind cluster {kind.cluster} of {kind.directory} is up" in again.stderr
    assert node_containers(kind) == before


def test_its_name_is_refused_to_another_directory_in_one_line(kind: KindProvider, tmp_path: Path):
    other = tmp_path / "other"
    refused = kind_up(other, "--name", kind.cluster)  # in the same engine: DOCKER_HOST names it
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1] == (
        f"local-cluster: a kind cluster named {kind.cluster} already exists and is not {other}'s: "
        f"delete it (kind delete cluster --name {kind.cluster}) or choose --name"
    )
    assert not (other / "kind.env").exists()


def test_a_node_image_the_engine_does_not_hold_is_refused_in_one_line(kind: KindProvider, tmp_path: Path):
    """`--image` takes only an image already in the engine (no registry is reachable to pull kind's own)."""
    other, name, image = tmp_path / "other", f"{kind.cluster}-other", "taintkeeper.local/absent-node:v0"
    refused = kind_up(other, "--name", name, "--image", image)  # in the same engine: DOCKER_HOST names it
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1] == (
        f"local-cluster: {image} is not in the Docker engine, and no registry is reachable from here: "
        "docker load it first"
    )
    assert not (other / "kind.env").exists()
    assert (
        subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=io.x-k8s.kind.cluster={name}"], capture_output=True, text=True
        ).stdout.strip()
        == ""
    )
