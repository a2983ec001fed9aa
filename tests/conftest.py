"""What every test session shares: the hypothesis profile and the host's prerequisites.

The host's prerequisites (Debian packages, the kube-apiserver and kubelet builds) are installed by
`hack/local-cluster.sh deps`, which the fixtures below run before any test uses them, so no test
depends on what an earlier test, run or session happened to install, nor on the order tests run in.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

SCRIPT = Path(__file__).resolve().parents[1] / "hack" / "local-cluster.sh"

# `make test` and CI run on small shared machines whose speed varies several-fold within minutes:
# the same number of examples, but no wall-clock health checks or deadlines that a slow moment trips.
settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.data_too_large,
                                                                       HealthCheck.large_base_example])
settings.register_profile("dev")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def install_host_prerequisites(*args: str) -> None:
    result = subprocess.run(["bash", str(SCRIPT), "deps", *args], capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        pytest.fail(f"hack/local-cluster.sh deps {' '.join(args)} failed:\n{result.stderr[-4000:]}", pytrace=False)


@pytest.fixture(scope="session")
def test_tools() -> None:
    """The test tools from Debian (promtool), without building anything."""
    install_host_prerequisites("--tools")


@pytest.fixture(scope="session")
def host_packages() -> None:
    """The Debian packages of the control plane and the test tools (promtool), and kube-apiserver."""
    install_host_prerequisites()


@pytest.fixture(scope="session")
def node_packages(host_packages: None) -> None:
    """Also what real nodes need: containerd, runc, CNI plugins, iptables, the kubelet and node images."""
    install_host_prerequisites("--nodes")
