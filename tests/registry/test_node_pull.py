"""A node's containerd (Debian's 1.6, as every node here runs) pulls taintkeeper from the project's registry the
way the clusters' nodes are told to trust it: the hosts.toml hack/cluster_registry.py writes, with the
registry's CA. Without it the pull is refused for the certificate; a digest the registry does not hold is
"not found", naming it. (The nodes' CRI reads the same files through its config_path: the deployed suites pull
that way.)
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack import cluster_registry, image_archive, private_containerd, versions
from hack.kind_node_debian import PRIVATE_MOUNTS
from hack.registry import PushedImage, Registry

WRONG_DIGEST = "sha256:" + "0" * 64


def host_address() -> str:
    """An IPv4 address of this host off loopback (the one its default route leaves by, as hack/lib/nodes.sh picks
    the nodes'), as kind's nodes reach the host by its bridge's: containerd speaks plain HTTP to a registry on
    loopback unless told otherwise, which would hide the certificate case."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("1.1.1.1", 9))  # no packet is sent: a UDP connect only picks the route
        except OSError as error:
            pytest.fail(f"this host has no IPv4 route off loopback: {error}", pytrace=False)
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        pytest.fail(f"this host's route leaves by loopback ({address})", pytrace=False)
    return address


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with Registry(tmp_path_factory.mktemp("registry"), host_address()) as running:
        yield running


@pytest.fixture(scope="module")
def pushed(registry: Registry, taintkeeper_image: image_archive.BuiltImage) -> PushedImage:
    return registry.push_image(taintkeeper_image.archive, versions.IMAGE_NAME, versions.project_version())


@pytest.fixture(scope="module")
def containerd(node_packages: None) -> Iterator[str]:
    """A containerd of this module's own (its mounts in a mount namespace of their own); yields its socket."""
    directory = Path(tempfile.mkdtemp(prefix="tk-pull-", dir="/tmp"))  # a short path: unix sockets
    config, socket = private_containerd.write_plain_config(directory)
    try:
        with private_containerd.running(config, socket, directory / "containerd.log", PRIVATE_MOUNTS):
            yield socket
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def pull(socket: str, reference: str, hosts: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ctr", "-a", socket, "-n", "k8s.io", "images", "pull", "--hosts-dir", str(hosts), reference],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def hosts(registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hosts directory as hack/cluster_registry.py writes it for the local cluster's nodes."""
    cluster = tmp_path_factory.mktemp("cluster")
    cluster_registry.trust_local(cluster, registry.address, registry.ca_file)
    return cluster_registry.local_hosts_dir(cluster)


def test_a_node_trusting_the_registry_pulls_the_image_by_its_digest(
    containerd: str, pushed: PushedImage, hosts: Path, taintkeeper_image: image_archive.BuiltImage
) -> None:
    pulled = pull(containerd, pushed.reference, hosts)
    assert pulled.returncode == 0, pulled.stderr
    listed = subprocess.run(
        ["ctr", "-a", containerd, "-n", "k8s.io", "images", "ls", "-q"], capture_output=True, text=True, timeout=60
    )
    assert pushed.reference in listed.stdout.split()
    assert pushed.digest == taintkeeper_image.digest


def test_a_node_not_told_of_the_registry_is_refused_for_its_certificate(
    containerd: str, pushed: PushedImage, tmp_path: Path
) -> None:
    refused = pull(containerd, pushed.tag_reference, tmp_path)  # its config_path: nothing for this registry
    assert refused.returncode != 0
    assert "certificate signed by unknown authority" in refused.stderr, refused.stderr


def test_a_digest_the_registry_does_not_hold_is_not_found_by_name(
    containerd: str, registry: Registry, hosts: Path
) -> None:
    wrong = f"{registry.address}/{versions.IMAGE_NAME}@{WRONG_DIGEST}"
    missing = pull(containerd, wrong, hosts)
    assert missing.returncode != 0
    assert "not found" in missing.stderr and WRONG_DIGEST in missing.stderr, missing.stderr
