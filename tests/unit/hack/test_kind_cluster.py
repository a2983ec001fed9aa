"""hack/kind_cluster.py: a kind cluster as `kind-up DIR` recorded it in DIR/kind.env."""

from __future__ import annotations

from pathlib import Path

from hack.kind_cluster import KindCluster


def test_a_directory_without_kind_env_holds_no_kind_cluster(tmp_path: Path) -> None:
    assert KindCluster.of(tmp_path) is None


def test_kind_env_names_the_cluster_kind_and_the_engine(tmp_path: Path) -> None:
    (tmp_path / "kind.env").write_text(
        "KIND_CLUSTER=taintkeeper-e2e\nKIND_IMAGE=taintkeeper.local/kind-node:v1.37.2\n"
        "KIND_BIN=/cache/kind-0.33.0/bin/kind\nDOCKER_HOST=unix:///d/docker/docker.sock\n"
    )
    assert KindCluster.of(tmp_path) == KindCluster(
        "taintkeeper-e2e", "/cache/kind-0.33.0/bin/kind", "unix:///d/docker/docker.sock"
    )


def test_an_engine_of_the_users_own_is_recorded_empty(tmp_path: Path) -> None:
    (tmp_path / "kind.env").write_text("KIND_CLUSTER=k\nKIND_IMAGE=i\nKIND_BIN=/kind\nDOCKER_HOST=\n")
    cluster = KindCluster.of(tmp_path)
    assert cluster is not None and cluster.docker_host == ""
