"""kind's node image built offline (hack/local-cluster.sh build-kind-node-image, hack/kind_node.py): kind's base
root, the Kubernetes binaries and kind's files where kind looks for them, and every image a kubeadm cluster
of 1.37.2 runs already in containerd's store, under the names kubeadm and kind's containerd config ask for."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from hack import private_containerd
from hack.kind_node_debian import PRIVATE_MOUNTS

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "local-cluster.sh"
CACHE = Path(os.environ.get("TAINTKEEPER_CACHE", Path.home() / ".cache" / "taintkeeper"))


def build() -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), "build-kind-node-image"], capture_output=True, text=True, timeout=3600)


@pytest.fixture(scope="module")
def image(kind_node_image: str) -> dict:
    """build-kind-node-image's description (built before the first test: tests/conftest.py)."""
    return json.loads(kind_node_image)


def members(layer: str) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(layer) as tar:
        return {member.name.removeprefix("./"): member for member in tar}


def read(layer: str, name: str) -> bytes:
    with tarfile.open(layer) as tar:
        for member in tar:
            if member.name.removeprefix("./") == name:
                handle = tar.extractfile(member)
                assert handle is not None
                return handle.read()
    raise AssertionError(f"{name} not in {layer}")


def test_kind_finds_its_version_binaries_and_cni_manifest(image: dict) -> None:
    files = image["layers"][1]["path"]
    assert read(files, "kind/version") == b"v1.37.2\n"  # one line: kind picks kubeadm's config API from it
    names = members(files)
    for binary in ("usr/bin/kubeadm", "usr/bin/kubelet", "usr/bin/kubectl", "usr/local/bin/crictl"):
        assert names[binary].mode & 0o111, binary
    manifest = read(files, "kind/manifests/default-cni.yaml").decode()
    assert "would you kindly patch this file" in manifest and "taintkeeper.local/kind-cni:v1" in manifest


def test_the_root_is_kinds_base_with_its_systemd_set_up(image: dict) -> None:
    root = image["layers"][0]["path"]
    names = members(root)
    assert names["sbin"].linkname == "usr/sbin"  # bookworm's merged /usr
    assert names["usr/sbin/init"].linkname == "/usr/lib/systemd/systemd"
    assert names["usr/local/bin/entrypoint"].mode & 0o111
    wants = "etc/systemd/system/multi-user.target.wants"
    assert {f"{wants}/{unit}" for unit in ("kubelet.service", "containerd.service", "undo-mount-hacks.service")} <= set(
        names
    )
    assert names["etc/systemd/system/systemd-binfmt.service"].linkname == "/dev/null"
    assert names["usr/local/bin/containerd"].linkname == "/usr/bin/containerd"
    assert names["opt/cni/bin/ptp"].linkname == "/usr/lib/cni/ptp"
    spec = json.loads(read(root, "etc/containerd/cri-base.json"))
    assert {"path": "/kind/bin/mount-product-files.sh"} in spec["hooks"]["createContainer"]
    assert "rlimits" not in spec["process"]
    assert not [name for name in names if name.startswith("dev/") or name.startswith("var/lib/apt/lists/")]


def kubeadm_images() -> set[str]:
    kubeadm = CACHE / "kubernetes-1.37.2" / "bin" / "kubeadm"
    listed = subprocess.run(
        [str(kubeadm), "config", "images", "list", "--kubernetes-version", "v1.37.2"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(listed.stdout.split())


def preloaded(layer: str, scratch: Path) -> dict[str, str]:
    """The images in the layer's content store, name -> labels, as the node's containerd will see them."""
    with tarfile.open(layer) as tar:
        tar.extractall(scratch, filter="fully_trusted")
    state = Path(f"/run/tk-test-preload-{os.getpid()}")
    socket = state / "containerd.sock"
    config = scratch / "containerd.toml"
    config.write_text(
        f'version = 2\nroot = "{scratch}/var/lib/containerd"\nstate = "{state}"\n'
        f'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n[grpc]\n  address = "{socket}"\n'
    )
    ctr = ["ctr", "--address", str(socket), "--namespace", "k8s.io"]
    try:
        # In a mount namespace of its own, as the build's (its overlay probe never reaches the host's mount table).
        with private_containerd.running(config, str(socket), scratch / "containerd.log", PRIVATE_MOUNTS):
            listed = subprocess.run([*ctr, "images", "ls"], capture_output=True, text=True, check=True).stdout
    finally:
        shutil.rmtree(state, ignore_errors=True)
    rows = [line.split() for line in listed.splitlines()[1:]]
    return {row[0]: row[-1] for row in rows}


def test_every_image_of_the_cluster_is_preloaded_under_the_name_asked_for(image: dict, tmp_path: Path) -> None:
    images = preloaded(image["layers"][2]["path"], tmp_path)
    # Two names differ from kubeadm's list, each on purpose: the sandbox image is the one kind's containerd
    # config names (kind's own build does the same), and etcd is the project's 3.6.16, whose tag the kind
    # cluster's kubeadm config sets (hack/lib/kind.sh).
    wanted = {
        name.replace("pause:3.10.2", "pause:3.10").replace("etcd:3.7.0-0", "etcd:3.6.16-0") for name in kubeadm_images()
    }
    assert wanted | {"taintkeeper.local/kind-cni:v1"} == set(images)
    assert "io.cri-containerd.pinned=pinned" in images["registry.k8s.io/pause:3.10"]


def test_a_second_build_finds_every_layer_cached(image: dict) -> None:
    again = build()
    assert again.returncode == 0 and "building" not in again.stderr, again.stderr
    assert json.loads(again.stdout) == image
