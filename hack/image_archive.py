"""The OCI archive: the image's layers and config written as an OCI image layout in a tar
(`oci-archive`, what `ctr images import` loads), and read back."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from hack.image_layer import EPOCH, Layer
from hack.image_recipe import Recipe, image_config

ARCHITECTURE = "amd64"


def _blob(archive: tarfile.TarFile, data: bytes | Path, seen: set[str]) -> tuple[str, int]:
    if isinstance(data, Path):
        digest = hashlib.sha256()
        with open(data, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        hexdigest, size = digest.hexdigest(), data.stat().st_size
    else:
        hexdigest, size = hashlib.sha256(data).hexdigest(), len(data)
    if hexdigest not in seen:
        seen.add(hexdigest)
        info = tarfile.TarInfo(f"blobs/sha256/{hexdigest}")
        info.size, info.mtime, info.mode = size, EPOCH, 0o644
        if isinstance(data, Path):
            with open(data, "rb") as handle:
                archive.addfile(info, handle)
        else:
            archive.addfile(info, io.BytesIO(data))
    return f"sha256:{hexdigest}", size


def write_oci_archive(out: Path, recipe: Recipe, layers: list[Layer], tag: str) -> dict:
    """An OCI image layout in a tar (`oci-archive`); returns the image config written."""
    config = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(EPOCH)),
        "architecture": ARCHITECTURE,
        "os": "linux",
        "config": image_config(recipe),
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [
            {
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(EPOCH)),
                "created_by": f"hack/image.py: {layer.comment}",
            }
            for layer in layers
        ],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    name = tag if "/" in tag.split(":")[0] else f"docker.io/library/{tag}"
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as archive:
        seen: set[str] = set()

        def put(data: bytes | Path) -> tuple[str, int]:
            return _blob(archive, data, seen)

        for directory in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
            archive.addfile(info)
        config_digest, config_size = put(config_bytes)
        layer_descriptors = []
        for layer in layers:
            digest, size = put(layer.path)
            layer_descriptors.append(
                {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest, "size": size}
            )
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": config_size,
            },
            "layers": layer_descriptors,
        }
        manifest_digest, manifest_size = put(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": manifest_digest,
                    "size": manifest_size,
                    "platform": {"architecture": ARCHITECTURE, "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": tag.rpartition(":")[2],
                    },
                }
            ],
        }
        for filename, data in (
            ("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
            ("index.json", json.dumps(index, sort_keys=True).encode()),
        ):
            info = tarfile.TarInfo(filename)
            info.size, info.mtime, info.mode = len(data), EPOCH, 0o644
            archive.addfile(info, io.BytesIO(data))
    return config


@dataclass(frozen=True)
class BuiltImage:
    archive: Path  # the oci-archive tarball
    reference: str  # docker.io/library/taintkeeper:VERSION: the name `ctr images import` gives it
    digest: str  # sha256:... of the manifest: what `ctr images ls` and the kubelet's imageID show
    config: dict  # the OCI image config (its "config" holds User, Env, Cmd, WorkingDir, ExposedPorts)


def read_archive(archive: Path) -> BuiltImage:
    """Name, manifest digest and config of an archive this builder wrote."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> dict:
            handle = tar.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")
            assert handle is not None
            return json.load(handle)

        index_file = tar.extractfile("index.json")
        assert index_file is not None
        descriptor = json.load(index_file)["manifests"][0]
        config = blob(blob(descriptor["digest"])["config"]["digest"])
    return BuiltImage(archive, descriptor["annotations"]["io.containerd.image.name"], descriptor["digest"], config)


def unpack(archive: Path, root: Path) -> BuiltImage:
    """The image's root filesystem, its layers applied in order, written under root (as the runtime would)."""
    built = read_archive(archive)
    with tarfile.open(archive) as tar:

        def blob(digest: str):
            handle = tar.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")
            assert handle is not None
            return handle

        manifest = json.load(blob(built.digest))
        for descriptor in manifest["layers"]:
            with tarfile.open(fileobj=blob(descriptor["digest"]), mode="r|gz") as layer:
                layer.extractall(root, filter="fully_trusted")  # our own archive; absolute symlinks are meant
    return built
