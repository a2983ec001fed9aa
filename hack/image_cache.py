"""The build's cache: where it lives, the keys archives and layers are stored under, and pruning.

${TAINTKEEPER_CACHE:-~/.cache/taintkeeper}/images/ holds the archives (keyed on project_key(): this
builder, the Containerfile and every file it COPYs) and the layers (keyed on their own inputs).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from hack.image_commands import BuildError
from hack.image_layer import Layer
from hack.image_recipe import ROOT, Recipe

HACK = Path(__file__).resolve().parent


def builder_files() -> list[Path]:
    """This builder: hack/image.py and the hack/image_*.py modules it is made of."""
    return sorted(HACK.glob("image*.py"))


def builder_digest() -> str:
    """Hash of this builder's files: a change to any of them builds every layer again."""
    digest = hashlib.sha256()
    for path in builder_files():
        _hash_tree(digest, path, f"hack/{path.name}")
    return digest.hexdigest()


def _hash_tree(digest: hashlib._Hash, path: Path, name: str) -> None:
    if path.is_dir() and not path.is_symlink():
        for child in sorted(path.iterdir()):
            if child.name != "__pycache__" and child.suffix != ".pyc" and not child.name.endswith(".egg-info"):
                _hash_tree(digest, child, f"{name}/{child.name}")
    elif path.is_symlink():
        digest.update(f"L {name} {os.readlink(path)}\n".encode())
    else:
        digest.update(f"F {name} {path.stat().st_mode & 0o111:o} {path.stat().st_size}\n".encode())
        digest.update(path.read_bytes())


def project_key(recipe: Recipe, tag: str, root: Path = ROOT) -> str:
    """Hash of everything the image is made from: this builder, the Containerfile, the COPY'd files."""
    digest = hashlib.sha256(f"{tag}\n".encode())
    for path in builder_files():
        _hash_tree(digest, path, f"hack/{path.name}")
    _hash_tree(digest, root / "manifests" / "Containerfile", "manifests/Containerfile")
    for source in recipe.sources:
        if not (root / source).exists():
            raise BuildError(f"the Containerfile copies {source}, which does not exist")
        _hash_tree(digest, root / source, source)
    return digest.hexdigest()


def cache_dir() -> Path:
    base = os.environ.get("TAINTKEEPER_CACHE") or str(Path.home() / ".cache" / "taintkeeper")
    return Path(base) / "images"


def cached_layer(layers: Path, key: str, comment: str, build) -> tuple[Layer, dict]:
    """The layer stored under key, else build() -> (LayerWriter, extra metadata) written and stored."""
    path, meta = layers / f"{key}.tar.gz", layers / f"{key}.json"
    if path.exists() and meta.exists():
        data = json.loads(meta.read_text())
        os.utime(meta)  # most recently used: what prune() keeps
        return Layer(path, data["digest"], data["diff_id"], data["size"], data["comment"]), data["extra"]
    layers.mkdir(parents=True, exist_ok=True)
    partial = layers / f"{key}.tar.gz.partial"
    writer, extra = build()
    layer = writer.write(partial, comment)
    partial.rename(path)
    layer.path = path
    meta.write_text(json.dumps({**layer.meta(), "extra": extra}))
    return layer, extra


def prune(cache: Path, keep: int = 3) -> None:
    """Keep the `keep` newest archives of each tag and the `keep` most recently used layers of each kind."""
    groups: dict[str, list[Path]] = {}
    for archive in cache.glob("*.oci.tar"):
        groups.setdefault("archive:" + archive.name.rsplit("-", 1)[0], []).append(archive)
    for meta in (cache / "layers").glob("*.json"):
        groups.setdefault("layer:" + meta.name.split("-", 1)[0], []).append(meta)
    for paths in groups.values():
        for old in sorted(paths, key=lambda path: path.stat().st_mtime)[:-keep]:
            for path in (old, old.with_suffix(".tar.gz")):
                path.unlink(missing_ok=True)
    for scratch in [*cache.glob("build-*"), *cache.glob("src-*")]:  # left by a build that was killed
        if time.time() - scratch.stat().st_mtime > 86400:
            shutil.rmtree(scratch, ignore_errors=True)
