"""hack/docker_archive.py: an image Docker 20.10 loads (`docker load`) made from plain layer tars."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from hack.docker_archive import Image, file_digest, write


def _layer(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def layers(tmp_path: Path) -> list[Path]:
    return [
        _layer(tmp_path / "base.tar", {"etc/passwd": b"root:x:0:0::/:/bin/sh\n"}),
        _layer(tmp_path / "app.tar", {"app": b"#!/bin/sh\n"}),
    ]


def _read(archive: Path) -> tuple[dict, dict, dict[str, bytes]]:
    """The archive's manifest entry, its config, and every file in it by name."""
    with tarfile.open(archive) as tar:
        files = {member.name: tar.extractfile(member).read() for member in tar if member.isfile()}  # type: ignore[union-attr]
    manifest = json.loads(files["manifest.json"])[0]
    return manifest, json.loads(files[manifest["Config"]]), files


def test_the_config_names_each_layer_by_its_uncompressed_digest(tmp_path: Path, layers: list[Path]) -> None:
    write(tmp_path / "image.tar", Image(tags=["example.local/app:v1"], layers=layers, entrypoint=["/app"]))
    manifest, config, files = _read(tmp_path / "image.tar")
    assert manifest["RepoTags"] == ["example.local/app:v1"]
    assert config["rootfs"]["diff_ids"] == [file_digest(layer) for layer in layers]
    for name, layer in zip(manifest["Layers"], layers, strict=True):
        assert files[name] == layer.read_bytes()
    assert config["config"]["Entrypoint"] == ["/app"]


def test_the_image_id_is_the_configs_digest_as_docker_reports_it(tmp_path: Path, layers: list[Path]) -> None:
    image = Image(tags=["example.local/app:v1"], layers=layers)
    image_id = write(tmp_path / "image.tar", image)
    manifest, _, files = _read(tmp_path / "image.tar")
    assert image_id == f"sha256:{hashlib.sha256(files[manifest['Config']]).hexdigest()}"
    assert manifest["Config"] == f"{image_id.split(':')[1]}.json"


def test_the_same_layers_give_the_same_image_id(tmp_path: Path, layers: list[Path]) -> None:
    first = write(tmp_path / "a.tar", Image(tags=["x:1"], layers=layers))
    again = write(tmp_path / "b.tar", Image(tags=["x:1"], layers=layers))
    assert first == again
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


def test_known_digests_are_used_as_given_and_a_changed_layer_changes_the_id(tmp_path: Path, layers: list[Path]) -> None:
    image = Image(tags=["x:1"], layers=layers)
    digests = [file_digest(layer) for layer in layers]
    assert write(tmp_path / "a.tar", image, digests) == image.image_id(digests)
    _layer(layers[1], {"app": b"#!/bin/sh\nexit 1\n"})
    assert write(tmp_path / "b.tar", image) != image.image_id(digests)


def test_a_layer_given_twice_is_stored_once(tmp_path: Path, layers: list[Path]) -> None:
    write(tmp_path / "image.tar", Image(tags=["x:1"], layers=[layers[0], layers[0]]))
    manifest, _, files = _read(tmp_path / "image.tar")
    assert len(manifest["Layers"]) == 2 and len(set(manifest["Layers"])) == 1
    assert len([name for name in files if name.endswith("layer.tar")]) == 1


def test_an_archive_streams_to_a_pipe(tmp_path: Path, layers: list[Path]) -> None:
    stream = io.BytesIO()
    image_id = write(stream, Image(tags=["x:1"], layers=layers, stop_signal="SIGRTMIN+3", env=["container=docker"]))
    (tmp_path / "piped.tar").write_bytes(stream.getvalue())
    manifest, config, _ = _read(tmp_path / "piped.tar")
    assert manifest["Config"] == f"{image_id.split(':')[1]}.json"
    assert config["config"]["StopSignal"] == "SIGRTMIN+3" and config["config"]["Env"] == ["container=docker"]
