"""The Debian roots of a kind node image: the node's own root (kind v0.33's base image, made from Debian
bookworm here: kind's is trixie, which this machine's apt does not serve) and the small iptables root
kube-proxy and the node's CNI agent run on.

Both are made by mmdebstrap from the machine's own apt sources (so no mirror is written into this
repository), with maintainer scripts run (the iptables alternatives, systemd's users), then packed as one
plain layer tar with numeric owners.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from hack.image_commands import BuildError, run

# kind's base image installs these (images/base/Dockerfile) less what a cluster here never uses (NFS,
# iSCSI, fuse-overlayfs for rootless, curl), plus what kind builds from source there and Debian ships:
# containerd, runc and the CNI plugins. dbus lets systemd-run and runc's systemd driver talk to systemd.
NODE_PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "conntrack",
    "iptables",
    "nftables",
    "iproute2",
    "ethtool",
    "util-linux",
    "mount",
    "kmod",
    "libseccomp2",
    "pigz",
    "e2fsprogs",
    "bash",
    "ca-certificates",
    "jq",
    "procps",
    "socat",
    "containerd",
    "runc",
    "containernetworking-plugins",
)
# What kube-proxy (iptables mode: iptables-restore, conntrack) and the CNI agent (ip, sh) exec.
IPTABLES_PACKAGES = ("iptables", "iproute2", "conntrack")
# The CNI plugins kind's base image puts in /opt/cni/bin; Debian's package keeps them in /usr/lib/cni.
CNI_PLUGINS = ("host-local", "loopback", "ptp", "portmap")
SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
# A build's mounts (mmdebstrap's /proc and /dev in the root it makes, containerd's overlay probe) stay in a
# mount namespace of its own: the host's mount table, which the host-restore test compares, never shows them.
PRIVATE_MOUNTS = ("unshare", "--mount", "--propagation", "private")
NOT_PACKED = ("./dev/*", "./proc/*", "./sys/*", "./run/*", "./tmp/*", "./var/lib/apt/lists/*", "./var/cache/apt/*")


def apt_sources() -> Path:
    """The machine's own apt sources, as mmdebstrap's mirror argument."""
    if SOURCES.is_file():
        return SOURCES
    legacy = Path("/etc/apt/sources.list")
    if legacy.is_file():
        return legacy
    raise BuildError("no apt sources found (/etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list)")


def debootstrap(root: Path, variant: str, packages: tuple[str, ...]) -> None:
    """Debian bookworm with `packages` into the empty directory root (mmdebstrap, as root)."""
    run(
        [
            *PRIVATE_MOUNTS,
            "mmdebstrap",
            "--quiet",
            f"--variant={variant}",
            f"--include={','.join(packages)}",
            "--dpkgopt=path-exclude=/usr/share/{doc,man,info,locale}/*",
            "--dpkgopt=path-include=/usr/share/doc/*/copyright",
            "bookworm",
            str(root),
            str(apt_sources()),
        ]
    )


def pack(root: Path, out: Path) -> None:
    """root as one plain layer tar (owners numeric, mount points kept empty)."""
    excludes = [f"--exclude={pattern}" for pattern in NOT_PACKED]
    run(["tar", "--numeric-owner", "--sort=name", "--mtime=@0", *excludes, "-C", str(root), "-cf", str(out), "."])


def _symlink(link: Path, target: str) -> None:
    if link.is_symlink() or link.exists():
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def kind_base_steps(root: Path, kind_files: Path) -> None:
    """What kind's images/base/Dockerfile does on top of its packages: its files, its systemd set-up, the
    containerd base runtime spec, and the paths its files expect of binaries Debian puts elsewhere."""
    shutil.copytree(kind_files, root, symlinks=True, dirs_exist_ok=True)
    # The module cache's files are read-only: give them the modes kind's Dockerfile does (COPY --chmod).
    for source in kind_files.rglob("*"):
        copied = root / source.relative_to(kind_files)
        executable = source.is_dir() or source.parent.name == "bin"  # usr/local/bin, kind/bin
        copied.chmod(0o755 if executable else 0o644)
    systemd = root / "lib/systemd/system"
    for pattern in (
        "sysinit.target.wants/systemd-tmpfiles-setup.service",
        "multi-user.target.wants/*",
        "local-fs.target.wants/*",
        "sockets.target.wants/*udev*",
        "sockets.target.wants/*initctl*",
        "basic.target.wants/*",
    ):
        for path in systemd.glob(pattern):
            path.unlink()
    for path in (root / "etc/systemd/system").glob("*.wants/*"):
        path.unlink()
    with open(root / "etc/systemd/journald.conf", "a") as journald:
        journald.write("ReadKMsg=no\n")
    _symlink(root / "sbin/init", "/usr/lib/systemd/systemd")
    wants = root / "etc/systemd/system/multi-user.target.wants"
    for unit in ("kubelet.service", "containerd.service", "undo-mount-hacks.service"):
        _symlink(wants / unit, f"/etc/systemd/system/{unit}")
    _symlink(root / "etc/systemd/system/systemd-binfmt.service", "/dev/null")
    (root / "etc/kubernetes/manifests").mkdir(parents=True, exist_ok=True)
    # kind's units and entrypoint name kind's own build paths: /usr/local/bin/containerd, /opt/cni/bin.
    _symlink(root / "usr/local/bin/containerd", "/usr/bin/containerd")
    for plugin in CNI_PLUGINS:
        _symlink(root / "opt/cni/bin" / plugin, f"/usr/lib/cni/{plugin}")
    (root / "etc/containerd/cri-base.json").write_text(json.dumps(cri_base_spec(), indent=2) + "\n")


def cri_base_spec() -> dict:
    """`ctr oci spec` (this machine's containerd: the same Debian package the node runs) with kind's
    createContainer hook (the product_uuid mount) and without rlimits, as kind's Dockerfile makes it."""
    spec = json.loads(run(["ctr", "oci", "spec"]).stdout)
    spec.setdefault("hooks", {}).setdefault("createContainer", []).append({"path": "/kind/bin/mount-product-files.sh"})
    spec.get("process", {}).pop("rlimits", None)
    return spec


def node_root(out: Path, kind_files: Path, scratch: Path) -> None:
    root = scratch / "node-root"
    debootstrap(root, "minbase", NODE_PACKAGES)
    kind_base_steps(root, kind_files)
    pack(root, out)
    shutil.rmtree(root)


def iptables_root(out: Path, scratch: Path) -> None:
    root = scratch / "iptables-root"
    debootstrap(root, "essential", IPTABLES_PACKAGES)
    pack(root, out)
    shutil.rmtree(root)


def mmdebstrap_version() -> str:
    return subprocess.run(["mmdebstrap", "--version"], capture_output=True, text=True, check=False).stdout.strip()
