"""What every test session shares: the hypothesis profile and the host's prerequisites.

The host's prerequisites (Debian packages, the kube-apiserver and kubelet builds) are installed by
`hack/local-cluster.sh deps`, and helm and kind's builds made by its `build-*` commands (BUILDS), which the
fixtures below run before any test uses them (once the tests are collected: outside every test's timeout), so
no test depends on what an earlier test, run or session happened to install, nor on the order tests run in.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.chart.helm import build_helm
from tests.support import suite_times

SCRIPT = Path(__file__).resolve().parents[1] / "hack" / "local-cluster.sh"

# `make test` and CI run on small shared machines whose speed varies several-fold within minutes:
# the same number of examples, but no wall-clock health checks or deadlines that a slow moment trips.
settings.register_profile(
    "ci",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
settings.register_profile("dev")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# `make test` sets TAINTKEEPER_TEST_TIMES to a folder: each session records there where its time went, for the
# table the run ends with (tests/support/suite_times.py).
_times = suite_times.Recorder(suite_times.session_label(), suite_times.session_lane())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _times.add(report.nodeid, report.when, report.duration, report.outcome)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    directory = os.environ.get("TAINTKEEPER_TEST_TIMES")
    if directory and not session.config.option.collectonly:
        _times.write(Path(directory))


# What each fixture needs from `hack/local-cluster.sh deps`, least first.
PREREQUISITE_LEVELS = {"test_tools": "--tools", "host_packages": "", "node_packages": "--nodes"}
_installed: dict[str, str | None] = {}  # deps argument -> None when done, else why it failed
_image: dict[str, Any] = {}  # "built": the BuiltImage, or "error": why it could not be built
# What a fixture of that name has `hack/local-cluster.sh` build (the fixture reads its value from the output);
# kind's node image includes kubeadm, crictl and CoreDNS, so a cold machine waits for the 1.37 build first.
BUILDS = {
    "kind_binary": ("build-kind",),
    "kind_node_binaries": ("build-kind-node",),
    "kind_node_image": ("build-kind-node-image",),
}
_built: dict[str, subprocess.CompletedProcess[str]] = {}


def install_host_prerequisites(level: str) -> None:
    """Run `deps LEVEL` once per session (a cold machine builds kube-apiserver and the kubelet here)."""
    if level not in _installed:
        args = [level] if level else []
        result = subprocess.run(["bash", str(SCRIPT), "deps", *args], capture_output=True, text=True, timeout=3600)
        _installed[level] = (
            None if result.returncode == 0 else (f"hack/local-cluster.sh deps {level} failed:\n{result.stderr[-4000:]}")
        )
    failure = _installed[level]
    if failure:
        pytest.fail(failure, pytrace=False)


def build_image() -> Any:
    """taintkeeper's image (hack/image.py), built once per session if stale: a BuiltImage."""
    if not _image:
        from hack import image

        try:
            _image["built"] = image.ensure_image()
        except Exception as error:  # the builder says why in one message
            _image["error"] = f"the image could not be built: {error}"
    if "error" in _image:
        pytest.fail(_image["error"], pytrace=False)
    return _image["built"]


def build(fixture: str) -> subprocess.CompletedProcess[str]:
    """`hack/local-cluster.sh BUILDS[fixture]`, run once per session; failed, the fixture fails with its error."""
    if fixture not in _built:
        argv = ["bash", str(SCRIPT), *BUILDS[fixture]]
        try:
            _built[fixture] = subprocess.run(argv, capture_output=True, text=True, timeout=3600, check=False)
        except subprocess.TimeoutExpired:
            _built[fixture] = subprocess.CompletedProcess(argv, 124, "", "still building after an hour")
    done = _built[fixture]
    if done.returncode != 0:
        pytest.fail(f"hack/local-cluster.sh {' '.join(BUILDS[fixture])} failed:\n{done.stderr[-4000:]}", pytrace=False)
    return done


def pytest_collection_finish(session: pytest.Session) -> None:
    """Install what the selected tests need, and build the image, before the first of them starts:
    outside every test's timeout (the first build on a machine takes minutes), in any test order."""

    def wanted_by_some(fixture: str) -> bool:
        return any(fixture in getattr(item, "fixturenames", ()) for item in session.items)

    if session.config.option.collectonly:
        return
    wanted = [level for fixture, level in PREREQUISITE_LEVELS.items() if wanted_by_some(fixture)]
    try:
        if wanted:
            install_host_prerequisites(wanted[-1])
            for level in wanted[:-1]:  # a larger level includes the smaller ones
                _installed.setdefault(level, None)
        if wanted_by_some("taintkeeper_image"):
            build_image()
    except pytest.fail.Exception:
        pass  # the fixtures report it, on each test that needs it
    for fixture in BUILDS:
        if wanted_by_some(fixture):
            with contextlib.suppress(pytest.fail.Exception):  # the fixture reports it
                build(fixture)
    if wanted_by_some("helm"):
        with contextlib.suppress(RuntimeError):  # the fixture reports it, on each test that needs helm
            build_helm()


@pytest.fixture(scope="session")
def test_tools() -> None:
    """The test tools from Debian (promtool), without building anything."""
    install_host_prerequisites("--tools")


@pytest.fixture(scope="session")
def host_packages() -> None:
    """The Debian packages of the control plane and the test tools (promtool), and kube-apiserver."""
    install_host_prerequisites("")


@pytest.fixture(scope="session")
def node_packages(host_packages: None) -> None:
    """Also what real nodes need: containerd, runc, CNI plugins, iptables, the kubelet and node images."""
    install_host_prerequisites("--nodes")


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm binary built from hack/upstream/helm (`hack/local-cluster.sh build-helm`)."""
    try:
        return build_helm()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def kind_binary() -> Path:
    """kind, built from its module (hack/upstream/kind) and cached."""
    return Path(build("kind_binary").stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def kind_node_binaries(node_packages: None) -> list[Path]:
    """kubeadm, crictl and CoreDNS for kind's node image, built from Go modules and cached."""
    return [Path(line) for line in build("kind_node_binaries").stdout.strip().splitlines()]


@pytest.fixture(scope="session")
def kind_node_image(node_packages: None) -> str:
    """kind's node image built offline and cached (not loaded into any engine): `--describe`'s JSON."""
    return build("kind_node_image").stdout


@pytest.fixture(scope="session")
def taintkeeper_image(node_packages: None) -> Any:
    """taintkeeper's image as an OCI archive (hack.image.BuiltImage), built offline if stale. The node
    packages include the compiler its build stage needs (gcc, for a dependency published as source)."""
    return build_image()
