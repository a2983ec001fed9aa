"""The container images a kubeadm cluster of kind nodes runs, made from the binaries built here: the control
plane's static pods, kube-proxy, etcd, CoreDNS, the pod sandbox (pause) and the node's CNI agent. Each under
the name kubeadm 1.37.2 (or kind's containerd config) asks for, so nothing is pulled.

etcd is the project's 3.6.16 (kubeadm 1.37.2 would ask for 3.7.0-0): named for what it is, and the kind
cluster's kubeadm configuration sets `etcd.local.imageTag` to it (hack/kind/cluster.py).
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

from hack.docker_archive import Image
from hack.image_debian import BASE_FILES
from hack.image_layer import LayerWriter

KUBERNETES_VERSION = "v1.37.2"
ETCD_TAG = "3.6.16-0"
COREDNS_TAG = "v1.14.6"
PAUSE_TAG = "3.10"  # kind v0.33's /etc/containerd/config.toml: sandbox_image = "registry.k8s.io/pause:3.10"
CNI_IMAGE = "taintkeeper.local/kind-cni:v1"
LABELS = {"org.opencontainers.image.description": "built by taintkeeper from source (hack/kind_node_images.py)"}


@dataclass(frozen=True)
class Binaries:
    kubernetes: Path  # kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, kubectl, pause
    etcd: Path
    coredns: Path


@dataclass(frozen=True)
class Component:
    tag: str
    files: tuple[tuple[Path, str], ...]  # (source, path in the image)
    on_iptables: bool = False  # on the Debian iptables root (hack/kind_node_debian.py), else on nothing
    entrypoint: tuple[str, ...] | None = None


def components(binaries: Binaries, cni_agent: Path) -> list[Component]:
    kube = binaries.kubernetes
    control_plane = [
        Component(f"registry.k8s.io/{name}:{KUBERNETES_VERSION}", ((kube / name, f"usr/local/bin/{name}"),))
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
    ]
    return [
        *control_plane,
        Component(
            f"registry.k8s.io/kube-proxy:{KUBERNETES_VERSION}",
            ((kube / "kube-proxy", "usr/local/bin/kube-proxy"),),
            on_iptables=True,
        ),
        Component(f"registry.k8s.io/etcd:{ETCD_TAG}", ((binaries.etcd, "usr/local/bin/etcd"),)),
        Component(
            f"registry.k8s.io/coredns/coredns:{COREDNS_TAG}", ((binaries.coredns, "coredns"),), entrypoint=("/coredns",)
        ),
        Component(f"registry.k8s.io/pause:{PAUSE_TAG}", ((kube / "pause", "pause"),), entrypoint=("/pause",)),
        Component(
            CNI_IMAGE,
            ((kube / "kubectl", "usr/local/bin/kubectl"), (cni_agent, "usr/local/bin/kind-cni-agent")),
            on_iptables=True,
            entrypoint=("/usr/local/bin/kind-cni-agent",),
        ),
    ]


def files_layer(component: Component, out: Path) -> None:
    """The component's own files; with the few /etc files every container root has when it has no base."""
    writer = LayerWriter()
    if not component.on_iptables:
        writer.add("tmp", tarfile.DIRTYPE, 0o1777)
        for name, text in BASE_FILES.items():
            writer.add(name, tarfile.REGTYPE, 0o644, text.encode())
    for source, destination in component.files:
        writer.add(destination, tarfile.REGTYPE, 0o755, source)
    writer.write(out, component.tag, compress=False)


def image(component: Component, files: Path, iptables_root: Path) -> Image:
    return Image(
        tags=[component.tag],
        layers=[iptables_root, files] if component.on_iptables else [files],
        entrypoint=list(component.entrypoint) if component.entrypoint else None,
        labels=LABELS,
        comment=f"hack/kind_node_images.py: {component.tag}",
    )
