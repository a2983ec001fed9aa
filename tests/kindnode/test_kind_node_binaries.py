"""What a kind node runs beside the Kubernetes binaries, built from Go modules and cached (hack/local-cluster.sh
build-kind-node): kubeadm, crictl and CoreDNS, each the release it names, CoreDNS the one kubeadm deploys."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "local-cluster.sh"
BUILD = (ROOT / "hack" / "lib" / "build.sh").read_text()


def pinned(name: str) -> str:
    match = re.search(rf"^{name}_MODULE_VERSION=(\S+)$", BUILD, re.M)
    assert match, name
    return match.group(1)


WRAPPERS = [
    ("crictl", "CRICTL", r"^require sigs\.k8s\.io/cri-tools v(\S+)$"),
    ("coredns", "COREDNS", r"^require github\.com/coredns/coredns v(\S+)$"),
]


@pytest.mark.parametrize(("wrapper", "name", "require"), WRAPPERS, ids=[w[0] for w in WRAPPERS])
def test_the_wrapper_module_requires_the_release_build_sh_names(wrapper: str, name: str, require: str):
    module = (ROOT / "hack" / "upstream" / wrapper / "go.mod").read_text()
    match = re.search(require, module, re.M)
    assert match and match.group(1) == pinned(name)


@pytest.fixture(scope="module")
def built(kind_node_binaries: list[Path]) -> dict[str, Path]:
    """build-kind-node's binaries (built before the first test: tests/conftest.py), by name."""
    assert [path.name for path in kind_node_binaries] == ["kubeadm", "crictl", "coredns"], kind_node_binaries
    return {path.name: path for path in kind_node_binaries}


def run(path: Path, *args: str) -> str:
    return subprocess.run([str(path), *args], capture_output=True, text=True, timeout=60, check=True).stdout


def test_each_binary_reports_its_release(built: dict[str, Path]):
    kubernetes = re.search(r"KUBERNETES_RELEASES=\(\[1\.37\]=(\S+?) ", BUILD)
    assert kubernetes, "build.sh names no 1.37 release"
    assert run(built["kubeadm"], "version", "-o", "short").strip() == f"v{kubernetes.group(1)}"
    assert run(built["crictl"], "--version").strip() == f"crictl version {pinned('CRICTL')}"
    assert run(built["coredns"], "-version").splitlines()[0] == f"CoreDNS-{pinned('COREDNS')}"


def test_coredns_is_the_release_kubeadm_deploys(built: dict[str, Path]):
    images = run(
        built["kubeadm"],
        "config",
        "images",
        "list",
        "--kubernetes-version",
        run(built["kubeadm"], "version", "-o", "short").strip(),
    )
    assert f"registry.k8s.io/coredns/coredns:v{pinned('COREDNS')}" in images.splitlines(), images


def test_a_second_build_finds_them_cached(built: dict[str, Path]):
    again = subprocess.run(["bash", str(SCRIPT), "build-kind-node"], capture_output=True, text=True, timeout=120)
    assert (again.returncode, again.stderr) == (0, "")
    assert again.stdout.split() == [str(path) for path in built.values()]
