"""A docker-archive (what `docker load` and `ctr images import` read) made from plain layer tars.

Docker 20.10, the engine hack/lib/docker.sh installs, loads no OCI layout, so images a Docker engine
must load are written in its own format: manifest.json, the config, one uncompressed tar per layer.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

CREATED = "1970-01-01T00:00:00Z"  # fixed, so the same layers and config give the same image ID
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


@dataclass
class Image:
    tags: list[str]  # registry.k8s.io/kube-apiserver:v1.37.2 ...
    layers: list[Path]  # uncompressed tars, base first
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    env: list[str] = field(default_factory=lambda: [f"PATH={PATH}"])
    stop_signal: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    comment: str = "hack/docker_archive.py"

    def config(self, diff_ids: list[str]) -> bytes:
        runtime: dict = {"Env": self.env, "WorkingDir": "/"}
        for key, value in (
            ("Entrypoint", self.entrypoint),
            ("Cmd", self.cmd),
            ("StopSignal", self.stop_signal),
            ("Labels", self.labels or None),
        ):
            if value is not None:
                runtime[key] = value
        config = {
            "architecture": "amd64",
            "os": "linux",
            "created": CREATED,
            "config": runtime,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created": CREATED, "created_by": self.comment} for _ in diff_ids],
        }
        return json.dumps(config, sort_keys=True, separators=(",", ":")).encode()

    def image_id(self, diff_ids: list[str]) -> str:
        """What `docker image inspect -f {{.Id}}` reports once loaded: the config's digest."""
        return f"sha256:{hashlib.sha256(self.config(diff_ids)).hexdigest()}"


def _info(name: str, size: int = 0, directory: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime, info.size = 0, size
    info.type, info.mode = (tarfile.DIRTYPE, 0o755) if directory else (tarfile.REGTYPE, 0o644)
    return info


def write(out, image: Image, diff_ids: Iterable[str] | None = None) -> str:
    """Write the archive to `out` (a path or a writable binary stream, e.g. `docker load`'s stdin);
    returns the image ID. diff_ids may be given when the layers' digests are already known (cached)."""
    ids = list(diff_ids) if diff_ids is not None else [file_digest(layer) for layer in image.layers]
    config = image.config(ids)
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    names = [f"{diff_id.split(':', 1)[1]}/layer.tar" for diff_id in ids]
    manifest = json.dumps([{"Config": config_name, "RepoTags": image.tags, "Layers": names}]).encode()
    kwargs = {"name": out, "mode": "w"} if isinstance(out, (str, Path)) else {"fileobj": out, "mode": "w|"}
    with tarfile.open(format=tarfile.PAX_FORMAT, **kwargs) as archive:
        seen: set[str] = set()
        for name, layer in zip(names, image.layers, strict=True):
            if name in seen:
                continue
            seen.add(name)
            archive.addfile(_info(name.split("/")[0], directory=True))
            with open(layer, "rb") as handle:
                archive.addfile(_info(name, layer.stat().st_size), handle)
        for name, data in ((config_name, config), ("manifest.json", manifest)):
            archive.addfile(_info(name, len(data)), io.BytesIO(data))
    return image.image_id(ids)
