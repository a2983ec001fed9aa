"""The node image's preloaded images: a containerd of this machine's own (the same Debian package the node
runs) imports each image archive into a content store under a scratch root, as kind's node-image build does
in its build container (`ctr images import --all-platforms --no-unpack`, the sandbox image pinned; not
kind's --digests, whose extra names would only repeat our images by digest). That store's
/var/lib/containerd becomes one layer: the node's containerd finds the images there at first start and
unpacks each when a pod first uses it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from hack import private_containerd
from hack.image_commands import BuildError, run
from hack.kind_node_debian import PRIVATE_MOUNTS

PINNED = "io.cri-containerd.pinned=pinned"  # what kind labels its preloaded sandbox image with


def _config(root: Path, state: Path, socket: Path) -> str:
    # No CRI: nothing runs here, and the CRI plugin's own set-up (CNI, cgroups) has no business at build time.
    return (
        "version = 2\n"
        f'root = "{root}"\n'
        f'state = "{state}"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{socket}"\n'
    )


def preload(archives: list[Path], pinned: list[str], out: Path, scratch: Path) -> None:
    """A layer tar holding var/lib/containerd with every archive imported into the k8s.io namespace."""
    root = scratch / "preload/var/lib/containerd"
    root.mkdir(parents=True)
    # A socket path must fit in 108 bytes: state under /run, named for this build.
    state = Path(f"/run/tk-kind-preload-{os.getpid()}")
    socket = state / "containerd.sock"
    config = scratch / "preload-containerd.toml"
    config.write_text(_config(root, state, socket))
    try:
        with private_containerd.running(config, str(socket), scratch / "preload-containerd.log", PRIVATE_MOUNTS, 60):
            for archive in archives:
                run_ctr(socket, ["images", "import", "--all-platforms", "--no-unpack", str(archive)])
            for name in pinned:
                run_ctr(socket, ["images", "label", name, PINNED])
    except private_containerd.ContainerdError as error:
        raise BuildError(f"the build's containerd: {error}") from error
    finally:
        shutil.rmtree(state, ignore_errors=True)
    run(["tar", "--numeric-owner", "--sort=name", "--mtime=@0", "-C", str(scratch / "preload"), "-cf", str(out), "var"])
    shutil.rmtree(scratch / "preload")


def run_ctr(socket: Path, args: list[str]) -> subprocess.CompletedProcess:
    return run(["ctr", "--address", str(socket), "--namespace", "k8s.io", *args])
