"""The registry the project starts (hack/registry.py): taintkeeper's image pushed from its OCI archive and
pinned by the digest it was built with, its chart pushed with `helm push` and read back with `helm show`,
both over TLS trusted through the registry's own CA; and what a user is told when a digest, a tag or a
chart version is not there, or the registry is down.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack import cluster_registry, image_archive, release, versions
from hack.registry import Registry, RegistryError
from tests.chart.helm import CHART

WRONG_DIGEST = "sha256:" + "0" * 64


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with Registry(tmp_path_factory.mktemp("registry")) as running:
        yield running


@pytest.fixture(scope="module")
def packaged(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("chart")
    result = subprocess.run(
        [str(helm), "package", str(CHART), "-d", str(out)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    (archive,) = out.glob("taintkeeper-*.tgz")
    return archive


def helm_run(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120)


def test_the_image_is_pushed_and_pinned_by_the_digest_it_was_built_with(
    registry: Registry, taintkeeper_image: image_archive.BuiltImage
) -> None:
    version = versions.project_version()
    pushed = registry.push_image(taintkeeper_image.archive, "taintkeeper", version)
    assert pushed.digest == taintkeeper_image.digest  # the registry stores the manifest as built
    assert pushed.reference == f"{registry.address}/taintkeeper@{taintkeeper_image.digest}"
    config = registry.crane("config", pushed.reference, timeout=60)
    assert '"User"' in config and taintkeeper_image.config["config"]["User"] in config
    assert registry.crane("digest", pushed.tag_reference, timeout=60) == pushed.digest


def test_a_digest_or_tag_that_is_not_there_is_one_clear_line(registry: Registry) -> None:
    with pytest.raises(RegistryError, match=r"^crane manifest: .*(MANIFEST_UNKNOWN|unknown manifest)"):
        registry.crane("manifest", f"{registry.address}/taintkeeper@{WRONG_DIGEST}", timeout=60)
    with pytest.raises(RegistryError, match=r"^crane manifest: .*(MANIFEST_UNKNOWN|unknown manifest|NAME_UNKNOWN)"):
        registry.crane("manifest", f"{registry.address}/taintkeeper:no-such-tag", timeout=60)


def test_the_chart_is_pushed_and_read_back_over_tls_by_its_version(
    registry: Registry, helm: Path, packaged: Path
) -> None:
    chart = registry.push_chart(helm, packaged)
    assert chart.reference == f"oci://{registry.address}/charts/taintkeeper"
    assert chart.version == versions.project_version()
    assert chart.digest.startswith("sha256:")
    shown = helm_run(
        helm, "show", "chart", chart.reference, "--version", chart.version, "--ca-file", str(registry.ca_file)
    )
    assert shown.returncode == 0, shown.stderr
    assert f"version: {chart.version}" in shown.stdout and "name: taintkeeper" in shown.stdout
    untrusted = helm_run(helm, "show", "chart", chart.reference, "--version", chart.version)
    assert untrusted.returncode != 0 and "certificate" in untrusted.stderr  # TLS, not plain HTTP
    missing = helm_run(helm, "show", "chart", chart.reference, "--version", "9.9.9", "--ca-file", str(registry.ca_file))
    assert missing.returncode != 0 and "9.9.9" in missing.stderr and "not found" in missing.stderr


def test_a_registry_that_is_down_is_said_so(tmp_path: Path, helm: Path) -> None:
    stopped = Registry(tmp_path).start()
    address = stopped.address
    stopped.stop()
    with pytest.raises(RegistryError, match=r"^crane digest: .*connection refused"):
        stopped.crane("digest", f"{address}/taintkeeper:x", timeout=60)
    down = helm_run(
        helm,
        "show",
        "chart",
        f"oci://{address}/charts/taintkeeper",
        "--version",
        "0.1.0",
        "--ca-file",
        str(stopped.ca_file),
    )
    assert down.returncode != 0 and "connection refused" in down.stderr


def test_make_release_pushes_the_image_and_the_chart_and_prints_their_digests(
    tmp_path: Path, taintkeeper_image: image_archive.BuiltImage, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make release VERSION=<the version stamped> PUSH=DIR`: nothing to stamp, the image built as before, both
    pushed to DIR's registry, which it starts; the printed install names them by digest."""
    version = versions.project_version()
    try:
        assert release.main([version, "--push", str(tmp_path)]) == 0
    finally:
        running = Registry.attach(cluster_registry.registry_directory(tmp_path))
        if running is not None:
            running.stop()
    said = dict(line.partition(" ")[::2] for line in capsys.readouterr().out.splitlines() if " " in line)
    address = (cluster_registry.registry_directory(tmp_path) / "address").read_text().strip()
    assert said["digest"] == taintkeeper_image.digest
    assert said["pushed"] == f"{address}/taintkeeper@{taintkeeper_image.digest}"
    reference, chart_version, chart_digest = said["chart"].split()
    assert (reference, chart_version) == (f"oci://{address}/charts/taintkeeper", version)
    assert chart_digest.startswith("sha256:")
    assert f"--set image.digest={taintkeeper_image.digest}" in said["install:"]
    assert Registry.attach(cluster_registry.registry_directory(tmp_path)) is None  # stopped
