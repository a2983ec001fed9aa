"""kind-up and kind-down on bad input (hack/lib/kind.sh): each a one-line error or a no-op, nothing left
running. A second kind-up and a cluster name another directory holds need a running cluster: those are
tests/e2e/test_kind_cluster.py's."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "local-cluster.sh"
NOBODY = 65534


def script(*args: str, env: dict[str, str] | None = None, user: int | None = None) -> subprocess.CompletedProcess[str]:
    prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] if user is not None else []
    return subprocess.run(
        [*prefix, "bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=300, env=env or dict(os.environ)
    )


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    return result.stderr.strip().splitlines()[-1]


@pytest.mark.skipif(os.geteuid() != 0, reason="runs kind-up as another user (setpriv): as root")
def test_without_an_engine_and_without_root_kind_up_stops_at_once_in_one_line():
    home = Path(tempfile.mkdtemp(prefix="kind-up-nobody-"))  # pytest's own tmp_path is root's alone
    try:
        os.chown(home, NOBODY, NOBODY)
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "DOCKER_HOST": f"unix://{home}/no-engine.sock"}
        result = script("kind-up", str(home / "cluster"), env=env, user=NOBODY)
        assert result.returncode == 1
        assert last_line(result) == (
            "local-cluster: starting a Docker engine needs root; or start one and point DOCKER_HOST at it"
        )
        assert not (home / "cluster" / "kind.env").exists()
        assert not any(home.glob(".cache/taintkeeper/kind-*"))  # nothing built before the engine was there
    finally:
        shutil.rmtree(home)


def test_kind_down_of_a_directory_without_a_cluster_says_so_and_does_nothing(tmp_path: Path):
    result = script("kind-down", str(tmp_path))
    assert result.returncode == 0
    assert result.stderr.strip().splitlines() == [
        f"local-cluster: no kind cluster in {tmp_path}",
        f"local-cluster: no Docker engine of the project's in {tmp_path}: nothing to stop",
    ]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--image"], "local-cluster: --image needs an image (e.g. kindest/node:v1.37.0)"),
        (["--name"], "local-cluster: --name needs a cluster name"),
        (["--nodes", "3"], "local-cluster: kind-up: unknown option '--nodes' (expected --image IMAGE, --name NAME)"),
    ],
    ids=["image without a value", "name without a value", "an option of up's"],
)
def test_a_bad_option_is_refused_before_anything_starts(tmp_path: Path, args: list[str], error: str):
    result = script("kind-up", str(tmp_path / "cluster"), *args)
    assert (result.returncode, last_line(result)) == (1, error)
    assert not (tmp_path / "cluster").exists()


def test_kind_up_on_the_old_end_is_refused_in_one_line(tmp_path: Path):
    result = script("kind-up", str(tmp_path / "cluster"), "--kubernetes", "1.20")
    assert result.returncode == 1
    assert last_line(result).startswith("local-cluster: kind v0.33.0 runs no Kubernetes 1.20 node")
    assert not (tmp_path / "cluster").exists()
