"""The offline image build (hack/image.py and its parts, hack/image_*.py) and manifests/Containerfile are one recipe.

The builder reads the Containerfile; these tests check that what it reads is what the Containerfile
says (read again here, more simply), that the manifests' pods fit the image it gives, that the files
it copies are the ones docker's build context lets through, and the builder's own pieces: the cache
key, the ELF check, deterministic layers and the OCI layout. No build, no network.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shlex
import shutil
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml

from hack import image, image_archive, image_cache, image_commands, image_debian, image_elf, image_layer, image_recipe

ROOT = Path(__file__).resolve().parents[3]
CONTAINERFILE = ROOT / "manifests" / "Containerfile"


def final_stage_directives() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Containerfile's last stage, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", CONTAINERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    last_from = max(i for i, line in enumerate(lines) if line.upper().startswith("FROM "))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines[last_from + 1 :]]


def test_config_is_the_containerfiles_final_stage() -> None:
    config = image_recipe.image_config(image_recipe.recipe_from_containerfile())
    env = dict(entry.split("=", 1) for entry in config["Env"])
    seen = set()
    for op, args in final_stage_directives():
        seen.add(op)
        if op == "USER":
            assert config["User"] == args
        elif op == "WORKDIR":
            assert config["WorkingDir"] == args
        elif op == "CMD":
            assert config["Cmd"] == json.loads(args)
        elif op == "ENTRYPOINT":
            assert config["Entrypoint"] == json.loads(args)
        elif op == "EXPOSE":
            assert sorted(config["ExposedPorts"]) == sorted(f"{port}/tcp" for port in args.split())
        elif op == "ENV":
            for pair in shlex.split(args):
                key, value = pair.split("=", 1)
                assert env[key] == value.replace("$PATH", image_recipe.BASE_ENV["PATH"]), key
        elif op == "COPY":
            assert args.startswith("--from=build ")
    assert {"USER", "WORKDIR", "CMD", "EXPOSE", "ENV", "COPY"} <= seen
    # Nothing in the config that the Containerfile (or the python:3.11-slim base's PATH and LANG) does not give.
    assert set(config) <= {"User", "WorkingDir", "Cmd", "Entrypoint", "ExposedPorts", "Env", "Labels"}
    assert set(env) <= set(image_recipe.BASE_ENV) | {
        pair.split("=", 1)[0] for op, args in final_stage_directives() if op == "ENV" for pair in shlex.split(args)
    }


def test_config_values_the_manifests_rely_on() -> None:
    recipe = image_recipe.recipe_from_containerfile()
    config = image_recipe.image_config(recipe)
    env = dict(entry.split("=", 1) for entry in config["Env"])
    assert config["User"] == "65532:65532"
    assert config["WorkingDir"] == "/tmp"
    assert config["Cmd"] == ["python", "-m", "webhook"]
    assert "Entrypoint" not in config
    assert config["ExposedPorts"] == {"8443/tcp": {}, "10257/tcp": {}}
    assert recipe.venv == "/opt/taintkeeper"
    assert env["PATH"].split(":")[0] == "/opt/taintkeeper/bin"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"  # the root filesystem is read-only
    assert env["PYTHONUNBUFFERED"] == "1"
    assert recipe.python == "3.11"
    assert recipe.compile is True  # bytecode in the image: a read-only root cannot take it at run time
    assert recipe.uninstall == ["pip", "setuptools"]


def pod_specs() -> list[dict]:
    specs = []
    for path in sorted((ROOT / "manifests").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict):
                continue
            spec = doc.get("spec") or {}
            if doc.get("kind") in ("Deployment", "Job"):
                specs.append(spec["template"]["spec"])
            elif doc.get("kind") == "CronJob":
                specs.append(spec["jobTemplate"]["spec"]["template"]["spec"])
    return specs


def test_manifests_pods_fit_the_image() -> None:
    """Every taintkeeper container runs a module the image holds, as its user, with a writable WORKDIR
    although the root filesystem is read-only, and listens on a port the image exposes."""
    recipe = image_recipe.recipe_from_containerfile()
    config = image_recipe.image_config(recipe)
    uid, gid = (int(part) for part in config["User"].split(":"))
    containers = [
        (spec, container)
        for spec in pod_specs()
        for container in spec["containers"]
        if container["image"].split(":")[0] == "taintkeeper"  # the files name it untagged
    ]
    assert len(containers) >= 4  # webhook, controller, the certs Job and CronJob
    for spec, container in containers:
        command = container["command"]
        assert command[:2] == ["python", "-m"] and command[2] in recipe.sources, command
        assert spec["securityContext"]["runAsUser"] == uid and spec["securityContext"]["runAsGroup"] == gid
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
        mounts = {mount["mountPath"]: mount["name"] for mount in container.get("volumeMounts", [])}
        assert "emptyDir" in volumes[mounts[config["WorkingDir"]]], f"{container['name']}: no emptyDir on WORKDIR"
        for port in container.get("ports", []):
            assert f"{port['containerPort']}/tcp" in config["ExposedPorts"]


def test_sources_are_the_build_context() -> None:
    """What the builder copies = what Containerfile.dockerignore lets into docker's build context =
    what pyproject packages (plus pyproject.toml and its readme)."""
    recipe = image_recipe.recipe_from_containerfile()
    ignore = (ROOT / "manifests" / "Containerfile.dockerignore").read_text()
    allowed = [line[1:].rstrip("/") for line in ignore.splitlines() if line.startswith("!")]
    assert sorted(recipe.sources) == sorted(allowed)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {pattern.rstrip("*") for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert set(recipe.sources) == packages | {"pyproject.toml", pyproject["project"]["readme"]}


def variant(tmp_path: Path, old: str, new: str) -> Path:
    text = CONTAINERFILE.read_text()
    assert old in text
    path = tmp_path / "Containerfile"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "RUN /opt/taintkeeper/bin/python -m pip uninstall -y pip setuptools",
            "RUN apt-get update",
            "cannot mirror `RUN apt-get update` in the build stage",
        ),
        ('CMD ["python", "-m", "webhook"]', "CMD python -m webhook", "exec (JSON) form"),
        ("FROM python:3.11-slim\n", "FROM debian:bookworm-slim\n", "only python:X.Y-slim"),
        ("USER 65532:65532", "USER 65532:65532\nHEALTHCHECK CMD true", "cannot mirror `HEALTHCHECK CMD true`"),
        (
            "COPY --from=build /opt/taintkeeper /opt/taintkeeper",
            "COPY --from=build /opt/taintkeeper /opt/other",
            "may only `COPY --from=build",
        ),
    ],
)
def test_what_the_builder_cannot_mirror_stops_it(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(image_recipe.RecipeError, match=re.escape(message)):
        image_recipe.recipe_from_containerfile(variant(tmp_path, old, new))


def test_the_recipe_follows_the_containerfile(tmp_path: Path) -> None:
    path = variant(
        tmp_path, "EXPOSE 8443 10257", 'EXPOSE 9443 10258/udp\nENV A=1\nENV A=2 \\\n    B="${A} x"\nLABEL k=v'
    )
    recipe = image_recipe.recipe_from_containerfile(path)
    config = image_recipe.image_config(recipe)
    assert config["ExposedPorts"] == {"9443/tcp": {}, "10258/udp": {}}
    assert config["Env"][-2:] == ["A=2", "B=1 x"]  # docker's rule: one ENV's values see the env before it
    assert config["Labels"] == {"k": "v"}
    path = variant(tmp_path, "COPY certs ./certs\n", "COPY certs ./certs\nCOPY bench ./bench\n")
    assert image_recipe.recipe_from_containerfile(path).sources[-1] == "bench"
    assert image_recipe.recipe_from_containerfile().compile is True
    path = variant(tmp_path, "pip install .", "pip install --no-compile .")
    assert image_recipe.recipe_from_containerfile(path).compile is False


def test_the_build_stages_compiler_is_required_of_the_host(tmp_path: Path) -> None:
    assert image_recipe.recipe_from_containerfile().build_packages == ["gcc", "libc6-dev"]
    path = variant(
        tmp_path,
        "install -y --no-install-recommends gcc libc6-dev",
        "install -y --no-install-recommends gcc libc6-dev no-such-package-here",
    )
    recipe = image_recipe.recipe_from_containerfile(path)
    with pytest.raises(image_commands.BuildError, match="no-such-package-here"):
        image.build(tmp_path / "out.tar", recipe, image.DEFAULT_TAG)


def copy_project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "manifests").mkdir(parents=True)
    shutil.copy(CONTAINERFILE, root / "manifests" / "Containerfile")
    for source in image_recipe.recipe_from_containerfile().sources:
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, root / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / source, root / source)
    return root


def test_cache_key_follows_what_goes_into_the_image(tmp_path: Path) -> None:
    root = copy_project(tmp_path)
    recipe = image_recipe.recipe_from_containerfile(root / "manifests" / "Containerfile")
    key = image_cache.project_key(recipe, "taintkeeper:dev", root)
    assert image_cache.project_key(recipe, "taintkeeper:dev", root) == key
    (root / "webhook" / "__pycache__").mkdir(exist_ok=True)
    (root / "webhook" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"x")
    (root / "tests").mkdir()  # not copied into the image
    (root / "tests" / "new.py").write_text("x = 1\n")
    assert image_cache.project_key(recipe, "taintkeeper:dev", root) == key
    assert image_cache.project_key(recipe, "taintkeeper:other", root) != key
    with (root / "webhook" / "app.py").open("a") as handle:
        handle.write("# one more line\n")
    changed = image_cache.project_key(recipe, "taintkeeper:dev", root)
    assert changed != key
    (root / "shared" / "taints.py").chmod(0o755)
    assert image_cache.project_key(recipe, "taintkeeper:dev", root) != changed


def test_elf_needed_reads_an_extension_module() -> None:
    greenlet = next(Path(sys.prefix).glob("lib/python3.*/site-packages/greenlet/_greenlet*.so"), None)
    if greenlet is None:
        pytest.skip("greenlet is not installed in this environment")
    assert "libstdc++.so.6" in (image_elf.elf_needed(greenlet.read_bytes()) or [])
    assert image_elf.elf_needed(b"#!/bin/sh\n") is None
    with pytest.raises(image_commands.BuildError, match=r"libstdc\+\+\.so\.6 \(needed by greenlet"):
        image_elf.check_needed({"libc.so.6"}, {"libstdc++.so.6": ["greenlet/_greenlet.so"]})
    image_elf.check_needed({"libstdc++.so.6"}, {"libstdc++.so.6": ["greenlet/_greenlet.so"]})


def test_layers_are_deterministic(tmp_path: Path) -> None:
    (tmp_path / "tree" / "pkg").mkdir(parents=True)
    (tmp_path / "tree" / "pkg" / "a.py").write_text("a = 1\n")
    (tmp_path / "tree" / "link").symlink_to("pkg/a.py")
    digests = set()
    for attempt in range(2):
        writer = image_layer.LayerWriter()
        writer.add("etc/passwd", tarfile.REGTYPE, 0o644, b"root:x:0:0::/:/bin/false\n")
        writer.add_tree(tmp_path / "tree", "opt/x")
        (tmp_path / "tree" / "pkg" / "a.py").touch()  # mtimes do not matter
        layer = writer.write(tmp_path / f"layer{attempt}.tar.gz", "test")
        digests.add((layer.digest, layer.diff_id))
    assert len(digests) == 1
    with tarfile.open(tmp_path / "layer0.tar.gz") as tar:
        members = tar.getmembers()
    assert [member.name for member in members] == [
        "etc",
        "etc/passwd",
        "opt",
        "opt/x",
        "opt/x/link",
        "opt/x/pkg",
        "opt/x/pkg/a.py",
    ]
    assert {(member.mtime, member.uid, member.gid) for member in members} == {(0, 0, 0)}


def test_oci_archive_layout(tmp_path: Path) -> None:
    writer = image_layer.LayerWriter()
    writer.add("hello", tarfile.REGTYPE, 0o644, b"hi\n")
    layer = writer.write(tmp_path / "layer.tar.gz", "test")
    recipe = image_recipe.recipe_from_containerfile()
    archive = tmp_path / "image.oci.tar"
    config = image_archive.write_oci_archive(archive, recipe, [layer], "taintkeeper:dev")
    with tarfile.open(archive) as tar:
        files = {member.name: _read(tar, member) for member in tar.getmembers() if member.isfile()}
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    descriptor = json.loads(files["index.json"])["manifests"][0]
    assert descriptor["annotations"]["io.containerd.image.name"] == "docker.io/library/taintkeeper:dev"
    manifest = json.loads(files[f"blobs/sha256/{descriptor['digest'].split(':')[1]}"])
    assert manifest["layers"] == [
        {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer.digest, "size": layer.size}
    ]
    written = json.loads(files[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    assert written == config
    assert written["config"] == image_recipe.image_config(recipe)
    assert written["rootfs"] == {"type": "layers", "diff_ids": [layer.diff_id]}
    with tarfile.open(fileobj=io.BytesIO(files[f"blobs/sha256/{layer.digest.split(':')[1]}"])) as tar:
        assert _read(tar, "hello") == b"hi\n"
    built = image_archive.read_archive(archive)
    assert (built.reference, built.digest, built.config) == (
        "docker.io/library/taintkeeper:dev",
        descriptor["digest"],
        config,
    )


def test_debian_dependencies_are_parsed() -> None:
    assert image_debian._alternatives("libc6 (>= 2.34), media-types | mime-support, libssl3:any (>= 3)") == [
        ["libc6"],
        ["media-types", "mime-support"],
        ["libssl3"],
    ]
    assert image_debian._merged_usr("./lib/x86_64-linux-gnu/libc.so.6") == "usr/lib/x86_64-linux-gnu/libc.so.6"
    assert image_debian._merged_usr("./usr/bin/python3.11") == "usr/bin/python3.11"
    assert image_debian._merged_usr("./etc/ld.so.conf.d/") == "etc/ld.so.conf.d"
    assert image_debian.DROPPED.match("usr/share/doc/libc6/copyright")
    assert not image_debian.DROPPED.match("usr/share/readline/inputrc")


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo | str) -> bytes:
    """A regular file's bytes from the archive."""
    extracted = tar.extractfile(member)
    assert extracted is not None, f"{member} is not a regular file"
    return extracted.read()
