"""hack/local-cluster.sh's Kubernetes version choice refuses what it cannot do, in one line, before
it starts or builds anything."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "hack" / "local-cluster.sh"

REFUSALS = {
    "a version the project does not build": (
        ["up", "{dir}", "--kubernetes", "1.19"],
        {},
        "Kubernetes 1.19 is not supported here (expected one of: 1.37 1.20)",
    ),
    "--kubernetes without a version": (["up", "{dir}", "--kubernetes"], {}, "--kubernetes needs a version"),
    "an unsupported TAINTKEEPER_KUBERNETES": (
        ["build"],
        {"TAINTKEEPER_KUBERNETES": "2.0"},
        "Kubernetes 2.0 is not supported here",
    ),
    "another version than the one DIR's data is": (
        ["up", "{dir}", "--kubernetes", "1.37"],
        {},
        "holds a Kubernetes 1.20 cluster, not 1.37 (run: down",
    ),
    "the environment asking for another version than DIR's": (
        ["up", "{dir}"],
        {"TAINTKEEPER_KUBERNETES": "1.37"},
        "holds a Kubernetes 1.20 cluster, not 1.37",
    ),
}


@pytest.mark.parametrize(("argv", "environment", "message"), REFUSALS.values(), ids=REFUSALS.keys())
def test_a_version_that_cannot_be_run_is_refused_in_one_line(
    tmp_path: Path, argv: list[str], environment: dict[str, str], message: str
) -> None:
    (tmp_path / "kubernetes.env").write_text("KUBERNETES=1.20\n")
    result = subprocess.run(
        ["bash", str(SCRIPT), *(arg.format(dir=tmp_path) for arg in argv)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**{k: v for k, v in os.environ.items() if k != "TAINTKEEPER_KUBERNETES"}, **environment},
    )
    assert result.returncode == 1
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kubernetes.env"]  # nothing started or written


def test_without_a_version_asked_a_dir_keeps_its_own(tmp_path: Path) -> None:
    (tmp_path / "kubernetes.env").write_text("KUBERNETES=1.20\n")
    result = subprocess.run(
        ["bash", str(SCRIPT), "status", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
        env={k: v for k, v in os.environ.items() if k != "TAINTKEEPER_KUBERNETES"},
    )
    assert (result.returncode, result.stdout.strip()) == (1, "stopped")  # no refusal: DIR's 1.20 is used
