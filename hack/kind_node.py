"""Build the kind node image offline, cached by content, and load it into a Docker engine.

    python -m hack.kind_node --kubernetes-bin DIR --etcd BIN --coredns BIN --crictl BIN --kind-files DIR
                             --cache DIR [--tag taintkeeper.local/kind-node:v1.37.2] [--load] [--describe]

What kind v0.33 expects of a kindest/node image (its node-image build, which pulls, cannot run here):
kind's base root (hack/kind_node_debian.py), kubeadm, kubelet and kubectl in /usr/bin, crictl,
/kind/version, /kind/manifests/default-cni.yaml, and every image the cluster runs already in containerd's
store (hack/kind_node_images.py, hack/kind_node_preload.py). Three layers, each cached under --cache by a key
of everything it is made from; a build writes NAME.partial and renames it, so a failed build leaves no entry.
--load loads the image unless the engine (DOCKER_HOST) already holds this exact image ID. Prints the tag
(--describe: the tag, image ID and layers as JSON).
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from hack import docker_archive, kind_node_debian, kind_node_images, kind_node_preload
from hack.image_commands import BuildError
from hack.image_layer import LayerWriter

HERE = Path(__file__).resolve().parent
TAG = f"taintkeeper.local/kind-node:{kind_node_images.KUBERNETES_VERSION}"
CNI_MANIFEST = HERE / "kind/default-cni.yaml"
CNI_AGENT = HERE / "kind/cni-agent.sh"


def log(message: str) -> None:
    print(f"kind-node: {message}", file=sys.stderr, flush=True)


def _digest_of(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _sources(*modules: str) -> list[str]:
    return [hashlib.sha256((HERE / module).read_bytes()).hexdigest() for module in modules]


def _tree(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        digest.update(str(path.relative_to(directory)).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


class Cache:
    """Layers by key: DIR/NAME-KEY.tar with its diff_id beside it (NAME-KEY.tar.diffid)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.used: set[Path] = set()
        directory.mkdir(parents=True, exist_ok=True)

    def prune(self) -> None:
        """Remove the layers this build did not use (an older tree's): each is hundreds of MB."""
        for path in self.directory.glob("*.tar*"):
            if path not in self.used and path.with_name(path.name.removesuffix(".diffid")) not in self.used:
                path.unlink()

    def layer(self, name: str, key: str, build: Callable[[Path], object]) -> tuple[Path, str]:
        path = self.directory / f"{name}-{key}.tar"
        self.used.add(path)
        marker = path.with_name(path.name + ".diffid")
        if path.is_file() and marker.is_file():
            return path, marker.read_text().strip()
        partial = path.with_name(path.name + ".partial")
        partial.unlink(missing_ok=True)
        log(f"building {name} ({key})")
        try:
            build(partial)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        diff_id = docker_archive.file_digest(partial)
        partial.rename(path)
        marker.write_text(diff_id + "\n")
        return path, diff_id


def file_digests(paths: list[Path]) -> list[str]:
    return [docker_archive.file_digest(path) for path in paths]


def node_files(out: Path, kubernetes_bin: Path, crictl: Path) -> None:
    writer = LayerWriter()
    for name in ("kubeadm", "kubelet", "kubectl"):
        writer.add(f"usr/bin/{name}", tarfile.REGTYPE, 0o755, kubernetes_bin / name)
    writer.add("usr/local/bin/crictl", tarfile.REGTYPE, 0o755, crictl)
    writer.add("kind/version", tarfile.REGTYPE, 0o644, f"{kind_node_images.KUBERNETES_VERSION}\n".encode())
    writer.add("kind/manifests/default-cni.yaml", tarfile.REGTYPE, 0o644, CNI_MANIFEST)
    writer.write(out, "the Kubernetes binaries and kind's files", compress=False)


def build(args: argparse.Namespace, scratch: Path) -> tuple[docker_archive.Image, list[str]]:
    """The node image and its layers' diff_ids, every layer built or found in the cache."""
    cache = Cache(args.cache)
    apt = kind_node_debian.apt_sources().read_text()
    versions = (kind_node_debian.mmdebstrap_version(), _containerd_version())
    node_root, root_id = cache.layer(
        "node-root",
        _digest_of(
            _sources("kind_node_debian.py"), kind_node_debian.NODE_PACKAGES, apt, _tree(args.kind_files), versions
        ),
        lambda out: kind_node_debian.node_root(out, args.kind_files, scratch),
    )
    iptables_root, iptables_id = cache.layer(
        "iptables-root",
        _digest_of(_sources("kind_node_debian.py"), kind_node_debian.IPTABLES_PACKAGES, apt, versions),
        lambda out: kind_node_debian.iptables_root(out, scratch),
    )
    binaries = kind_node_images.Binaries(args.kubernetes_bin, args.etcd, args.coredns)
    images: list[tuple[docker_archive.Image, list[str]]] = []
    for component in kind_node_images.components(binaries, CNI_AGENT):
        contents = file_digests([source for source, _ in component.files])
        files, files_id = cache.layer(
            "files",
            _digest_of(_sources("kind_node_images.py", "image_layer.py"), component, contents),
            functools.partial(kind_node_images.files_layer, component),
        )
        image = kind_node_images.image(component, files, iptables_root)
        images.append((image, [iptables_id, files_id] if component.on_iptables else [files_id]))

    def preload(out: Path) -> None:
        archives = []
        for number, (image, diff_ids) in enumerate(images):
            archive = scratch / f"image-{number}.tar"
            docker_archive.write(archive, image, diff_ids)
            archives.append(archive)
        pause = f"registry.k8s.io/pause:{kind_node_images.PAUSE_TAG}"
        kind_node_preload.preload(archives, [pause], out, scratch)
        for archive in archives:
            archive.unlink()

    ids = sorted(image.image_id(diff_ids) + " " + " ".join(image.tags) for image, diff_ids in images)
    preloaded, preload_id = cache.layer(
        "preload", _digest_of(_sources("kind_node_preload.py"), ids, versions[1]), preload
    )
    kube_bin = [args.kubernetes_bin / name for name in ("kubeadm", "kubelet", "kubectl")]
    files, files_id = cache.layer(
        "node-files",
        _digest_of(
            _sources("kind_node.py", "image_layer.py"),
            file_digests([*kube_bin, args.crictl, CNI_MANIFEST]),
            kind_node_images.KUBERNETES_VERSION,
        ),
        lambda out: node_files(out, args.kubernetes_bin, args.crictl),
    )
    node = docker_archive.Image(
        tags=[args.tag],
        layers=[node_root, files, preloaded],
        entrypoint=["/usr/local/bin/entrypoint", "/sbin/init"],
        env=[f"PATH={docker_archive.PATH}", "container=docker"],
        stop_signal="SIGRTMIN+3",
        labels=kind_node_images.LABELS,
        comment="hack/kind_node.py",
    )
    cache.prune()
    return node, [root_id, files_id, preload_id]


def _containerd_version() -> str:
    return subprocess.run(["containerd", "--version"], capture_output=True, text=True, check=False).stdout.strip()


def _tagged(tag: str) -> str:
    """The ID of the image `tag` names in the engine, or "" when it names none."""
    present = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True)
    return present.stdout.strip() if present.returncode == 0 else ""


def load(node: docker_archive.Image, diff_ids: list[str]) -> None:
    wanted = node.image_id(diff_ids)
    before = _tagged(node.tags[0])
    if before == wanted:
        log(f"{node.tags[0]} is loaded ({wanted[:19]})")
        return
    log(f"loading {node.tags[0]} into Docker ({wanted[:19]})")
    loader = subprocess.Popen(["docker", "load", "--quiet"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert loader.stdin is not None
    try:
        docker_archive.write(loader.stdin, node, diff_ids)
    finally:
        loader.stdin.close()
    if loader.wait() != 0:
        raise BuildError(f"docker load of {node.tags[0]} failed")
    # The tag's previous image, untagged by the load: 1.3 GB left in the engine at every rebuild. Only when the
    # tag now names another (an engine whose IDs are not the config's digest reloads the same image).
    if before and _tagged(node.tags[0]) not in ("", before):
        removed = subprocess.run(["docker", "image", "rm", before], capture_output=True, text=True)
        said = "removed" if removed.returncode == 0 else f"kept ({removed.stderr.strip()})"
        log(f"the image {node.tags[0]} named before ({before[:19]}) {said}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubernetes-bin", type=Path, required=True)
    parser.add_argument("--etcd", type=Path, required=True)
    parser.add_argument("--coredns", type=Path, required=True)
    parser.add_argument("--crictl", type=Path, required=True)
    parser.add_argument("--kind-files", type=Path, required=True, help="kind's images/base/files")
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--tag", default=TAG)
    parser.add_argument("--load", action="store_true", help="into the Docker engine DOCKER_HOST points at")
    parser.add_argument("--describe", action="store_true", help="print the image as JSON: tag, ID, layers")
    args = parser.parse_args(argv)
    needed = [
        *(args.kubernetes_bin / name for name in ("kubeadm", "kubelet", "kubectl", "kube-proxy", "pause")),
        args.etcd,
        args.coredns,
        args.crictl,
    ]
    missing = [str(path) for path in needed if not path.is_file()]
    if missing:
        parser.error(f"not built yet: {', '.join(missing)}")
    if not (args.kind_files / "usr/local/bin/entrypoint").is_file():
        parser.error(f"{args.kind_files} is not kind's images/base/files (no usr/local/bin/entrypoint)")
    for tool in ("mmdebstrap", "containerd", "ctr", "tar"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} not found (hack/local-cluster.sh build-kind-node-image installs it)")
    return args


def ensure(args: argparse.Namespace) -> tuple[docker_archive.Image, list[str]]:
    """The node image, from the cache or built: one build per cache at a time (parallel sessions share it)."""
    args.cache.mkdir(parents=True, exist_ok=True)
    with open(args.cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with tempfile.TemporaryDirectory(prefix="kind-node-", dir=args.cache) as scratch:
            return build(args, Path(scratch))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        node, diff_ids = ensure(args)
        if args.load:
            load(node, diff_ids)
    except BuildError as error:
        print(f"kind-node: error: {error}", file=sys.stderr)
        return 1
    if args.describe:
        layers = [{"path": str(path), "diffId": diff_id} for path, diff_id in zip(node.layers, diff_ids, strict=True)]
        print(json.dumps({"tag": args.tag, "id": node.image_id(diff_ids), "layers": layers}))
    else:
        print(args.tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
