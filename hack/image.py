"""Build taintkeeper's container image offline: an OCI archive from Debian's packages and PyPI.

    python hack/image.py [--tag taintkeeper:dev] [--force] [--print-config]      (`make image`)

prints the path of an `oci-archive` tarball that `ctr -n k8s.io images import FILE` loads. No
Docker engine, no registry and no base image: the root filesystem is made of Debian bookworm's
.deb files (`apt-get download`, unpacked with `dpkg-deb`, no maintainer scripts run), and the
virtualenv of wheels from PyPI for the image's own interpreter (cp311, manylinux x86_64; a
dependency published only as an sdist is built into a wheel here, by this same Python 3.11).
From Python: `ensure_image()` returns the archive, its image name and manifest digest, building
it first when stale.

One recipe: everything the image says about itself comes from manifests/Containerfile, the file
`docker build` reads too. The final stage gives the config (ENV, USER, WORKDIR, EXPOSE, CMD,
ENTRYPOINT, LABEL) and the virtualenv it copies; the build stage gives the files COPY'd into
it, whether pip compiles, and what is uninstalled. `python:X.Y-slim` becomes Debian's pythonX.Y.
A Containerfile instruction this builder cannot mirror stops the build (RecipeError), so the two
cannot drift apart silently.

Three layers, each cached: Debian (python3.11 and the libraries it and the wheels link to), the
dependencies' virtualenv, and taintkeeper itself. The archive is cached under
${TAINTKEEPER_CACHE:-~/.cache/taintkeeper}/images/, keyed on a hash of this file, the
Containerfile and every file it COPYs: a warm build returns at once, a change to the project
rebuilds only the taintkeeper layer (the dependencies are installed again only when pyproject's
dependencies change, Debian's layer only when its packages' versions do). Builds are
deterministic (fixed mtimes and owners), so the same inputs give the same image ID.
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import stat
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTAINERFILE = ROOT / "manifests" / "Containerfile"
DEFAULT_TAG = "taintkeeper:dev"

# What `FROM python:X.Y-slim` is made of here: Debian's interpreter and standard library, and
# libstdc++ (greenlet's extension links it; python:3.11-slim has it too). Their Depends and
# Pre-Depends are followed; check_needed() fails the build if a wheel links to a library missing here.
DEBIAN_PACKAGES = ("python{v}-minimal", "libpython{v}-stdlib", "libstdc++6")
# Never unpacked: readline-common wants dpkg (or install-info) to register its info page, which is dropped.
NOT_FOLLOWED = {"dpkg", "install-info"}
# The environment python:X.Y-slim starts from, which the Containerfile's `ENV PATH=...:$PATH` extends.
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
# Left out of Debian's layer: documentation and translations, and gdb's pretty-printers (libstdc++6).
DROPPED = re.compile(r"^usr/share/(doc|man|info|locale|lintian|bug|gdb|gcc)(/|$)")
# Debian bookworm's root is merged-/usr: these are symlinks into usr/ and the packages' files go there.
MERGED = ("bin", "sbin", "lib", "lib64")
# Mount points and files every container root has (the runtime mounts over them), /tmp world-writable.
BASE_DIRECTORIES = {"dev": 0o755, "proc": 0o555, "sys": 0o555, "etc": 0o755, "run": 0o755, "root": 0o700,
                    "tmp": 0o1777, "opt": 0o755, "var": 0o755, "var/tmp": 0o1777}
BASE_FILES = {
    "etc/passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                  "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "etc/group": "root:x:0:\nnogroup:x:65534:\n",
    "etc/nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
    "etc/hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
}
EPOCH = 0  # every file's mtime, and the image's creation time
ARCHITECTURE = "amd64"


class RecipeError(Exception):
    """The Containerfile says something this builder cannot do (so the two would drift)."""


class BuildError(Exception):
    """A step of the build failed."""


def log(message: str) -> None:
    print(f"image: {message}", file=sys.stderr, flush=True)


# --- the recipe: manifests/Containerfile ---------------------------------------------------------------


@dataclass
class Instruction:
    op: str
    args: str
    line: int


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)


@dataclass
class Recipe:
    python: str  # "3.11", from FROM python:3.11-slim
    venv: str  # /opt/taintkeeper
    sources: list[str]  # what the build stage COPYs: pyproject.toml, README.md, the packages
    compile: bool  # pip install without --no-compile
    uninstall: list[str]  # pip uninstall -y ...
    env: list[tuple[str, str]]  # the final stage's environment, in order, $VARs expanded
    user: str | None = None
    workdir: str = "/"
    exposed: list[str] = field(default_factory=list)  # "8443/tcp"
    cmd: list[str] | None = None
    entrypoint: list[str] | None = None
    build_packages: list[str] = field(default_factory=list)  # Debian packages the build stage installs (a compiler)
    labels: dict[str, str] = field(default_factory=dict)


def parse_containerfile(text: str) -> list[Stage]:
    """The stages and their instructions; continuation lines joined, comments dropped."""
    stages: list[Stage] = []
    logical, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not logical and (not stripped or stripped.startswith("#")):
            continue
        if logical and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not logical:
            start = number
        if stripped.endswith("\\"):
            logical += stripped[:-1] + " "
            continue
        logical += stripped
        op, _, args = logical.partition(" ")
        op, args, logical = op.upper(), args.strip(), ""
        if op == "FROM":
            words = args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            if len(words) not in (1, 3) or (len(words) == 3 and name is None):
                raise RecipeError(f"line {start}: cannot read FROM {args}")
            stages.append(Stage(base=words[0], name=name))
        elif not stages:
            if op != "ARG":
                raise RecipeError(f"line {start}: {op} before the first FROM")
        else:
            stages[-1].instructions.append(Instruction(op, args, start))
    if logical:
        raise RecipeError("the Containerfile ends inside a continued line")
    if not stages:
        raise RecipeError("no FROM in the Containerfile")
    return stages


def _exec_form(instruction: Instruction) -> list[str]:
    try:
        value = json.loads(instruction.args)
    except json.JSONDecodeError:
        value = None
    if not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
        raise RecipeError(f"line {instruction.line}: {instruction.op} must be in exec (JSON) form: "
                          "the image has no /bin/sh")
    return value


def _expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", lambda m: env.get(m.group(1) or m.group(2), ""), value)


def _pairs(instruction: Instruction, env: dict[str, str]) -> list[tuple[str, str]]:
    """ENV/LABEL key=value pairs (or the legacy `ENV key value`), quotes removed, $VARs expanded."""
    words = shlex.split(instruction.args)
    if words and "=" not in words[0]:
        return [(words[0], _expand(instruction.args.split(None, 1)[1].strip(), env))]
    pairs = []
    for word in words:
        key, sep, value = word.partition("=")
        if not sep:
            raise RecipeError(f"line {instruction.line}: cannot read {instruction.op} {instruction.args}")
        pairs.append((key, _expand(value, env)))
    return pairs


def _copy_args(instruction: Instruction) -> tuple[dict[str, str], list[str], str]:
    words = _exec_form(instruction) if instruction.args.startswith("[") else shlex.split(instruction.args)
    flags = dict(word[2:].partition("=")[::2] for word in words if word.startswith("--"))
    paths = [word for word in words if not word.startswith("--")]
    if len(paths) < 2:
        raise RecipeError(f"line {instruction.line}: cannot read COPY {instruction.args}")
    return flags, paths[:-1], paths[-1]


def _python_version(base: str, line: str) -> str:
    match = re.fullmatch(r"(?:docker\.io/)?(?:library/)?python:(\d+\.\d+)-slim(?:-bookworm)?", base)
    if not match:
        raise RecipeError(f"{line}: the offline build makes only python:X.Y-slim (from Debian's pythonX.Y), not {base}")
    return match.group(1)


def recipe_from_containerfile(path: Path = CONTAINERFILE) -> Recipe:
    """What the image must be, read from the Containerfile's two stages."""
    stages = parse_containerfile(path.read_text())
    if len(stages) != 2 or stages[0].name is None:
        raise RecipeError("expected two stages: `FROM python:X.Y-slim AS build`, then the final one")
    build, final = stages
    python = _python_version(build.base, "the build stage")
    if _python_version(final.base, "the final stage") != python:
        raise RecipeError("the two stages use different Pythons")

    venv: str | None = None
    sources: list[str] = []
    compile_, uninstall, build_packages = True, [], []
    apt_install = ["apt-get", "update", "&&", "apt-get", "install", "-y", "--no-install-recommends"]
    for instruction in build.instructions:
        op, args = instruction.op, instruction.args
        words = shlex.split(args)
        if op in ("ENV", "ARG"):
            continue  # pip's own settings in the build stage; nothing of them reaches the image
        if op == "WORKDIR":
            continue  # where the sources are copied to: the wheel is built from a copy of them
        elif op == "COPY":
            flags, srcs, _dest = _copy_args(instruction)
            if flags:
                raise RecipeError(f"line {instruction.line}: COPY {args}: flags are not mirrored in the build stage")
            sources.extend(src.rstrip("/").removeprefix("./") for src in srcs)
        elif op == "RUN" and words[:3] == ["python", "-m", "venv"] and len(words) == 4:
            venv = words[3]
        elif op == "RUN" and venv and words[:2] == [f"{venv}/bin/pip", "install"] and words[-1] == "." \
                and set(words[2:-1]) <= {"--no-compile"}:
            compile_ = "--no-compile" not in words
        elif op == "RUN" and venv and words[:5] == [f"{venv}/bin/python", "-m", "pip", "uninstall", "-y"]:
            uninstall.extend(words[5:])
        elif op == "RUN" and words[:len(apt_install)] == apt_install and len(words) > len(apt_install) \
                and all(re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", word) for word in words[len(apt_install):]):
            # Build tools (a compiler for a dependency published only as an sdist): here they are the
            # host's own, which the same Debian release provides; nothing of them reaches the image.
            build_packages.extend(words[len(apt_install):])
        else:
            raise RecipeError(f"line {instruction.line}: the offline build (hack/image.py) cannot mirror "
                              f"`{op} {args}` in the build stage; teach it, or change the Containerfile")
    if venv is None:
        raise RecipeError("the build stage makes no virtualenv (`RUN python -m venv DIR`)")

    env = dict(BASE_ENV)
    recipe = Recipe(python=python, venv="", sources=sources, compile=compile_, uninstall=uninstall, env=[],
                    build_packages=build_packages)
    for instruction in final.instructions:
        op, args = instruction.op, instruction.args
        if op == "COPY":
            flags, srcs, dest = _copy_args(instruction)
            if flags != {"from": build.name} or srcs != [venv] or dest.rstrip("/") != venv:
                raise RecipeError(f"line {instruction.line}: the final stage may only `COPY --from={build.name} "
                                  f"{venv} {venv}`, not COPY {args}")
            recipe.venv = venv
        elif op == "ENV":
            env.update(_pairs(instruction, env))
        elif op == "LABEL":
            recipe.labels.update(_pairs(instruction, env))
        elif op == "USER":
            recipe.user = args
        elif op == "WORKDIR":
            recipe.workdir = os.path.normpath(os.path.join(recipe.workdir, _expand(args, env)))
        elif op == "EXPOSE":
            recipe.exposed.extend(port if "/" in port else f"{port}/tcp" for port in args.split())
        elif op == "CMD":
            recipe.cmd = _exec_form(instruction)
        elif op == "ENTRYPOINT":
            recipe.entrypoint = _exec_form(instruction)
        else:
            raise RecipeError(f"line {instruction.line}: the offline build (hack/image.py) cannot mirror "
                              f"`{op} {args}` in the final stage; teach it, or change the Containerfile")
    if not recipe.venv:
        raise RecipeError(f"the final stage does not copy the virtualenv {venv}")
    recipe.env = list(env.items())
    return recipe


def image_config(recipe: Recipe) -> dict:
    """The OCI image config's `config` object (what the runtime starts the container with)."""
    config: dict = {"Env": [f"{key}={value}" for key, value in recipe.env], "WorkingDir": recipe.workdir}
    if recipe.user:
        config["User"] = recipe.user
    if recipe.exposed:
        config["ExposedPorts"] = {port: {} for port in recipe.exposed}
    if recipe.entrypoint is not None:
        config["Entrypoint"] = recipe.entrypoint
    if recipe.cmd is not None:
        config["Cmd"] = recipe.cmd
    if recipe.labels:
        config["Labels"] = recipe.labels
    return config


# --- cache keys --------------------------------------------------------------------------------------


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
    _hash_tree(digest, Path(__file__).resolve(), "hack/image.py")
    _hash_tree(digest, root / "manifests" / "Containerfile", "manifests/Containerfile")
    for source in recipe.sources:
        if not (root / source).exists():
            raise BuildError(f"the Containerfile copies {source}, which does not exist")
        _hash_tree(digest, root / source, source)
    return digest.hexdigest()


def cache_dir() -> Path:
    base = os.environ.get("TAINTKEEPER_CACHE") or str(Path.home() / ".cache" / "taintkeeper")
    return Path(base) / "images"


# --- Debian ----------------------------------------------------------------------------------------


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise BuildError(f"{' '.join(cmd[:6])}... failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


def _stanzas(text: str) -> Iterator[dict[str, str]]:
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = None
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" in fields:
            yield fields


def _show(names: Iterable[str]) -> dict[str, dict[str, str]]:
    """apt's candidate stanza of each (real, not purely virtual) package among names."""
    result = subprocess.run(["apt-cache", "show", "--no-all-versions", *sorted(set(names))],
                            capture_output=True, text=True)
    return {fields["Package"]: fields for fields in _stanzas(result.stdout)}


def _alternatives(relation: str) -> list[list[str]]:
    groups = []
    for clause in relation.split(","):
        names = [re.split(r"[\s(:]", alt.strip(), maxsplit=1)[0] for alt in clause.split("|")]
        if names and names[0]:
            groups.append(names)
    return groups


def _depends_closure(packages: list[str]) -> set[str]:
    """Every package name apt's (over-wide: all alternatives) Depends/Pre-Depends closure reaches: one call."""
    result = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                             "--no-breaks", "--no-replaces", "--no-enhances", *packages],
                            capture_output=True, text=True)
    return {line.strip("<>") for line in result.stdout.splitlines() if line and not line[0].isspace()}


def resolve_debian(packages: list[str]) -> dict[str, dict[str, str]]:
    """The packages and their Depends/Pre-Depends closure (first installable alternative), apt's candidates."""
    known = _show(_depends_closure(packages) | set(packages))  # one apt-cache call for (nearly) all
    asked = set(known)
    chosen: dict[str, dict[str, str]] = {}
    pending: list[list[str]] = [[name] for name in packages]
    while pending:
        unseen = {name for group in pending for name in group} - asked
        if unseen:
            known.update(_show(unseen))
            asked |= unseen
        next_pending: list[list[str]] = []
        for group in pending:
            if any(name in chosen or name in NOT_FOLLOWED for name in group):
                continue
            name = next((name for name in group if name in known), None)
            if name is None:
                raise BuildError(f"no Debian package for {' | '.join(group)} (apt-get update?)")
            chosen[name] = known[name]
            for relation in ("Pre-Depends", "Depends"):
                next_pending.extend(_alternatives(known[name].get(relation, "")))
        pending = next_pending
    return chosen


def download_debs(packages: dict[str, dict[str, str]], debs: Path) -> list[Path]:
    debs.mkdir(parents=True, exist_ok=True)
    files = {name: debs / Path(fields["Filename"]).name for name, fields in packages.items()}
    missing = [f"{name}={packages[name]['Version']}" for name, path in files.items() if not path.exists()]
    if missing:
        log(f"downloading {len(missing)} Debian packages")
        _run(["apt-get", "-q", "-o", "APT::Sandbox::User=root", "download", *missing], cwd=debs)
        for name, path in files.items():  # apt-get names the file with the epoch (1%3a...), the pool without
            fields = packages[name]
            downloaded = debs / f"{name}_{fields['Version'].replace(':', '%3a')}_{fields['Architecture']}.deb"
            if not path.exists() and downloaded.exists():
                downloaded.rename(path)
    for name, path in files.items():
        expected = packages[name].get("SHA256")
        if expected and hashlib.sha256(path.read_bytes()).hexdigest() != expected:
            path.unlink()
            raise BuildError(f"{path.name}: SHA256 does not match apt's; removed it, build again")
    return [files[name] for name in sorted(files)]


def _merged_usr(name: str) -> str:
    name = name.removeprefix("./").rstrip("/")
    top = name.split("/", 1)[0]
    return f"usr/{name}" if top in MERGED else name


# --- layers --------------------------------------------------------------------------------------------


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to `target`."""

    def __init__(self, target) -> None:
        self.target, self.sha, self.size = target, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.sha.update(data)
        self.size += len(data)
        self.target.write(data)
        return len(data)


@dataclass
class Layer:
    path: Path  # the gzipped tar
    digest: str  # sha256:... of the gzipped tar
    diff_id: str  # sha256:... of the tar
    size: int
    comment: str

    def meta(self) -> dict:
        return {"digest": self.digest, "diff_id": self.diff_id, "size": self.size, "comment": self.comment}


class LayerWriter:
    """A deterministic gzipped layer: entries added in any order are written sorted, owned by root."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[tarfile.TarInfo, bytes | Path | None]] = {}

    def add(self, name: str, kind: bytes, mode: int, data: bytes | Path | None = None, link: str = "") -> None:
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.mtime, info.linkname = kind, mode, EPOCH, link
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        if kind == tarfile.REGTYPE:
            info.size = len(data) if isinstance(data, bytes) else Path(data).stat().st_size  # type: ignore[arg-type]
        self.entries[name] = (info, data)
        self.parents(name)

    def parents(self, name: str) -> None:
        parent = os.path.dirname(name)
        while parent and parent not in self.entries:
            info = tarfile.TarInfo(parent)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
            self.entries[parent] = (info, None)
            parent = os.path.dirname(parent)

    def add_tree(self, directory: Path, prefix: str, exclude: tuple[str, ...] = ()) -> None:
        """Everything under directory, as prefix/..., modes kept (but the top-level names in exclude)."""
        for dirpath, dirnames, filenames in os.walk(directory):
            if Path(dirpath) == directory:
                dirnames[:] = [name for name in dirnames if name not in exclude]
                filenames = [name for name in filenames if name not in exclude]
            dirnames.sort()
            for entry in sorted(dirnames + filenames):
                path = Path(dirpath) / entry
                name = f"{prefix}/{path.relative_to(directory)}"
                st = path.lstat()
                if stat.S_ISLNK(st.st_mode):
                    self.add(name, tarfile.SYMTYPE, 0o777, link=os.readlink(path))
                elif stat.S_ISDIR(st.st_mode):
                    self.add(name, tarfile.DIRTYPE, stat.S_IMODE(st.st_mode))
                elif stat.S_ISREG(st.st_mode):
                    self.add(name, tarfile.REGTYPE, stat.S_IMODE(st.st_mode), path)

    def write(self, out: Path, comment: str) -> Layer:
        with open(out, "wb") as raw:
            compressed = _Hashing(raw)
            with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, compresslevel=6, mtime=0) as gz:
                plain = _Hashing(gz)
                with tarfile.open(fileobj=plain, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                    for name in sorted(self.entries):
                        info, data = self.entries[name]
                        if isinstance(data, Path):
                            with open(data, "rb") as handle:
                                tar.addfile(info, handle)
                        else:
                            tar.addfile(info, io.BytesIO(data) if data is not None else None)
        return Layer(out, f"sha256:{compressed.sha.hexdigest()}", f"sha256:{plain.sha.hexdigest()}",
                     compressed.size, comment)


def _cached_layer(layers: Path, key: str, comment: str, build) -> tuple[Layer, dict]:
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


def debian_layer(debs: list[Path]) -> LayerWriter:
    """The packages' files (no maintainer scripts), merged-/usr, minus docs, plus a few /etc files."""
    writer = LayerWriter()
    for directory, mode in BASE_DIRECTORIES.items():
        writer.add(directory, tarfile.DIRTYPE, mode)
    for top in MERGED:
        writer.add(f"usr/{top}", tarfile.DIRTYPE, 0o755)
        writer.add(top, tarfile.SYMTYPE, 0o777, link=f"usr/{top}")
    for name, text in BASE_FILES.items():
        writer.add(name, tarfile.REGTYPE, 0o644, text.encode())
    for deb in debs:
        stream = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
        assert stream.stdout is not None
        with tarfile.open(fileobj=stream.stdout, mode="r|") as tar:
            for member in tar:
                name = _merged_usr(member.name)
                if not name or name in MERGED or DROPPED.match(name) or name in BASE_FILES:
                    continue
                mode = member.mode & 0o7777
                if member.isdir():
                    writer.add(name, tarfile.DIRTYPE, mode)
                elif member.issym():
                    writer.add(name, tarfile.SYMTYPE, 0o777, link=member.linkname)
                elif member.islnk():
                    writer.add(name, tarfile.LNKTYPE, mode, link=_merged_usr(member.linkname))
                elif member.isfile():
                    handle = tar.extractfile(member)
                    assert handle is not None
                    writer.add(name, tarfile.REGTYPE, mode, handle.read())
        if stream.wait() != 0:
            raise BuildError(f"dpkg-deb --fsys-tarfile {deb.name} failed")
    _stdlib_bytecode(writer)
    return writer


def _stdlib_bytecode(writer: LayerWriter) -> None:
    """The standard library's bytecode, which Debian's packages leave to their maintainer scripts (not
    run here) and python:X.Y-slim ships: without it every process compiles what it imports, at each
    start (the root is read-only), and holds on to the memory that took (+70 MB for `certs sync`,
    which then outgrew its 128 MiB limit). Unchecked-hash .pyc files, so the fixed mtimes do not matter."""
    sources = {name: data for name, (info, data) in writer.entries.items()
               if re.fullmatch(r"usr/lib/python3\.\d+/.+\.py", name) and "/site-packages/" not in name
               and isinstance(data, bytes)}
    if not sources:
        return
    with tempfile.TemporaryDirectory(prefix="stdlib-") as scratch_name:
        scratch = Path(scratch_name)
        for name, data in sources.items():
            (scratch / name).parent.mkdir(parents=True, exist_ok=True)
            (scratch / name).write_bytes(data)
        stdlib = next(iter(sources)).split("/")[:3]  # usr, lib, python3.X
        # Files that are not valid Python 3 (test data, lib2to3 fixtures) are skipped, as py3compile does.
        subprocess.run([sys.executable, "-m", "compileall", "-q", "-j0", "--invalidation-mode", "unchecked-hash",
                        "-s", str(scratch), "-p", "/", str(scratch / "/".join(stdlib))], capture_output=True,
                       check=False)
        for path in sorted(scratch.rglob("*.pyc")):
            writer.add(str(path.relative_to(scratch)), tarfile.REGTYPE, 0o644, path.read_bytes())


# --- ELF: every shared library a wheel links to must be in the image ------------------------------------


def elf_needed(data: bytes) -> list[str] | None:
    """DT_NEEDED of a 64-bit little-endian ELF file, None if data is not one."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    needed = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != 6:  # SHT_DYNAMIC
            continue
        strtab = sections[link][4]
        for position in range(offset, offset + size, entsize or 16):
            tag, value = struct.unpack_from("<qQ", data, position)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                end = data.index(b"\0", strtab + value)
                needed.append(data[strtab + value:end].decode())
    return needed


def libraries(names: Iterable[str]) -> set[str]:
    """The shared-library file names among paths."""
    return {os.path.basename(name) for name in names if re.search(r"\.so(\.|$)", os.path.basename(name))}


def needed_by(tree: Path) -> dict[str, list[str]]:
    """{library: [files needing it]} for the ELF files under tree, less the libraries tree itself has."""
    own = libraries(str(path) for path in tree.rglob("*"))
    needed: dict[str, list[str]] = {}
    for path in sorted(tree.rglob("*.so*")):
        if path.is_file() and not path.is_symlink():
            for library in elf_needed(path.read_bytes()) or []:
                if library not in own:
                    needed.setdefault(library, []).append(str(path.relative_to(tree)))
    return needed


def check_needed(provided: set[str], needed: dict[str, list[str]]) -> None:
    missing = {library: users for library, users in needed.items() if library not in provided}
    if missing:
        detail = "; ".join(f"{lib} (needed by {', '.join(users[:3])})" for lib, users in sorted(missing.items()))
        raise BuildError(f"shared libraries the wheels link to are not in the image: {detail}. "
                         f"Add their Debian packages to DEBIAN_PACKAGES in hack/image.py")


# --- Python ----------------------------------------------------------------------------------------------


def _pip(*args: str, cwd: Path | None = None) -> None:
    # pip's own cache beside the layers: the wheels it builds from sdists here are built without debug
    # information (-g0), which keeps the build paths out of them, so they are the same on every build.
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1",
           "PIP_CACHE_DIR": str(cache_dir() / "pip"), "CFLAGS": f"{os.environ.get('CFLAGS', '')} -g0".strip()}
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=env, cwd=cwd)
    if result.returncode != 0:
        raise BuildError(f"pip {' '.join(args[:4])}... failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")


def _target_flags(python_full: str, glibc: str) -> list[str]:
    """pip's options selecting wheels for the image's interpreter rather than the one running pip:
    manylinux wheels for Debian's glibc, or wheels built here (linux_x86_64, on this same Debian)."""
    major, minor = python_full.split(".")[:2]
    glibc_minor = int(glibc.split(".")[1])
    # pip does not widen manylinux_2_N to the older glibc versions it includes: list them all.
    platforms = [f"manylinux_2_{n}_x86_64" for n in range(glibc_minor, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    return ["--only-binary=:all:", *(f"--platform={platform}" for platform in platforms),
            "--python-version", python_full, "--implementation", "cp", "--abi", f"cp{major}{minor}",
            "--no-compile", "--no-warn-script-location"]


def _relocate_scripts(target: Path, venv: str) -> None:
    """pip --target puts console scripts in target/bin with the host's interpreter: point them at the venv's."""
    bin_dir = target / "bin"
    if not bin_dir.is_dir():
        return
    for script in bin_dir.iterdir():
        data = script.read_bytes()
        if data.startswith(b"#!/bin/sh\n'''exec' "):  # distlib's form for long interpreter paths
            data = data.split(b"\n", 3)[3]
        elif data.startswith(b"#!"):
            data = data.split(b"\n", 1)[1]
        else:
            continue
        script.write_bytes(f"#!{venv}/bin/python\n".encode() + data)
        script.chmod(0o755)


def _uninstall(site_packages: Path, names: list[str]) -> None:
    """`pip uninstall -y NAMES` of a --target install: remove what each RECORD lists."""
    for name in names:
        for info in site_packages.glob(f"{re.sub(r'[-_.]+', '_', name)}-*.dist-info"):
            for line in (info / "RECORD").read_text().splitlines():
                path = site_packages / line.split(",")[0]
                if path.is_file() or path.is_symlink():
                    path.unlink()
            shutil.rmtree(info, ignore_errors=True)


def _drop_direct_url(site_packages: Path) -> None:
    """pip records where a wheel file came from (a temporary path here): leave it out, so rebuilds agree."""
    for direct_url in site_packages.glob("*.dist-info/direct_url.json"):
        direct_url.unlink()
        record = direct_url.parent / "RECORD"
        entry = f"{direct_url.parent.name}/direct_url.json,"
        lines = record.read_text().splitlines(keepends=True)
        record.write_text("".join(line for line in lines if not line.startswith(entry)))


def _bytecode(tree: Path, installed_at: str, compile_: bool) -> None:
    """`pip install --no-compile`: no bytecode. Without it, bytecode that does not depend on the files'
    mtimes (the layers' are fixed), compiled by this same Python X.Y (wheels_for() checked that)."""
    for cache in list(tree.rglob("__pycache__")):
        shutil.rmtree(cache)
    if compile_:
        _run([sys.executable, "-m", "compileall", "-q", "-j0", "--invalidation-mode", "unchecked-hash",
              "-s", str(tree), "-p", installed_at, "-x", r"/bin/", str(tree)])


def install(requirements: list[str], target: Path, python_full: str, glibc: str, wheels: Path) -> None:
    """pip install --target, only from the wheels in `wheels`, each checked against the image's interpreter."""
    _pip("install", "--target", str(target), "--no-index", "--find-links", str(wheels),
         *_target_flags(python_full, glibc), *requirements)


def wheels_for(requirements: list[str], wheels: Path, python: str, *, no_deps: bool = False) -> None:
    """The requirements' wheels (and their dependencies'), from PyPI or built here from an sdist.

    pip resolves for the interpreter running it, so that must be the image's Python X.Y (this host and
    the image are both Debian bookworm x86_64: the same wheel tags). install() then checks each wheel
    against the image's own interpreter, Python version and glibc."""
    if sys.version_info[:2] != tuple(int(part) for part in python.split(".")):
        raise BuildError(f"run this with a Python {python} (the image's); this is {sys.version.split()[0]}")
    _pip("wheel", "--wheel-dir", str(wheels), *(["--no-deps"] if no_deps else []), *requirements)


def venv_skeleton(root: Path, venv: str, python_full: str) -> None:
    """What `python -m venv` makes, for the image's /usr/bin/pythonX.Y (no pip, no activate scripts)."""
    version = ".".join(python_full.split(".")[:2])
    (root / "bin").mkdir(parents=True)
    (root / "bin" / f"python{version}").symlink_to(f"/usr/bin/python{version}")
    (root / "bin" / "python3").symlink_to(f"python{version}")
    (root / "bin" / "python").symlink_to(f"python{version}")
    (root / "lib" / f"python{version}" / "site-packages").mkdir(parents=True)
    (root / "lib64").symlink_to("lib")
    (root / "include").mkdir()
    (root / "pyvenv.cfg").write_text(
        f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {python_full}\n"
        f"executable = /usr/bin/python{version}\ncommand = /usr/bin/python{version} -m venv {venv}\n")


# --- the archive ----------------------------------------------------------------------------------------


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
        "architecture": ARCHITECTURE, "os": "linux",
        "config": image_config(recipe),
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [{"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(EPOCH)),
                     "created_by": f"hack/image.py: {layer.comment}"} for layer in layers],
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
            layer_descriptors.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                      "digest": digest, "size": size})
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                               "digest": config_digest, "size": config_size},
                    "layers": layer_descriptors}
        manifest_digest, manifest_size = put(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())
        index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                 "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                "digest": manifest_digest, "size": manifest_size,
                                "platform": {"architecture": ARCHITECTURE, "os": "linux"},
                                "annotations": {"io.containerd.image.name": name,
                                                "org.opencontainers.image.ref.name": tag.rpartition(":")[2]}}]}
        for filename, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                               ("index.json", json.dumps(index, sort_keys=True).encode())):
            info = tarfile.TarInfo(filename)
            info.size, info.mtime, info.mode = len(data), EPOCH, 0o644
            archive.addfile(info, io.BytesIO(data))
    return config


def snapshot(root: Path, recipe: Recipe, dest: Path) -> Path:
    """A copy of what goes into the image (the Containerfile and what it COPYs): what the key is computed
    from and the wheel built from, so edits made meanwhile cannot slip in between (nor setuptools'
    build/ and egg-info into the checkout)."""
    (dest / "manifests").mkdir(parents=True)
    shutil.copy2(root / "manifests" / "Containerfile", dest / "manifests" / "Containerfile")
    for name in recipe.sources:
        path = root / name
        if not path.exists():
            raise BuildError(f"the Containerfile copies {name}, which does not exist")
        if path.is_dir():
            shutil.copytree(path, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        else:
            shutil.copy2(path, dest / name)
    return dest


def _installed(package: str) -> bool:
    shown = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, check=False)
    return shown.stdout.endswith("install ok installed")


def build(out: Path, recipe: Recipe, tag: str, root: Path = ROOT) -> dict:
    """Build the archive at `out` (the layers come from the cache when their inputs are unchanged)."""
    cache = cache_dir()
    started = time.monotonic()
    missing = [name for name in recipe.build_packages if not _installed(name)]
    if missing:
        raise BuildError(f"the build stage needs the Debian packages {' '.join(missing)} on this host "
                         "(hack/local-cluster.sh deps installs them)")
    wanted = [name.format(v=recipe.python) for name in DEBIAN_PACKAGES]
    try:
        packages = resolve_debian(wanted)
    except BuildError as error:  # no package lists yet
        log(f"{error}: running apt-get update")
        _run(["apt-get", "-o", "DPkg::Lock::Timeout=900", "update", "-q"])
        packages = resolve_debian(wanted)
    builder_hash = hashlib.sha256(Path(__file__).resolve().read_bytes()).hexdigest()

    def base_key() -> str:
        versions = "".join(f"{name}={fields['Version']}\n" for name, fields in sorted(packages.items()))
        return "debian-" + hashlib.sha256(f"{builder_hash}\n{versions}".encode()).hexdigest()[:32]

    if not (cache / "layers" / f"{base_key()}.json").exists():
        try:
            download_debs(packages, cache / "debs")
        except BuildError as error:  # stale package lists: the mirror has moved on to newer versions
            log(f"{str(error).splitlines()[0]}: running apt-get update")
            _run(["apt-get", "-o", "DPkg::Lock::Timeout=900", "update", "-q"])
            packages = resolve_debian(wanted)
    python_full = packages[f"python{recipe.python}-minimal"]["Version"].split("-")[0].split(":")[-1]
    glibc = ".".join(packages["libc6"]["Version"].split("-")[0].split(".")[:2])
    if not python_full.startswith(recipe.python + "."):
        raise BuildError(f"Debian's python{recipe.python}-minimal is {python_full}")

    with tempfile.TemporaryDirectory(prefix="build-", dir=cache) as scratch_name:
        scratch = Path(scratch_name)

        def make_base() -> tuple[LayerWriter, dict]:
            debs = download_debs(packages, cache / "debs")
            log(f"unpacking {len(debs)} Debian packages (python {python_full}, glibc {glibc})")
            writer = debian_layer(debs)
            versions = [f"{name}={fields['Version']}" for name, fields in sorted(packages.items())]
            return writer, {"libraries": sorted(libraries(writer.entries)), "packages": versions}

        base, base_meta = _cached_layer(cache / "layers", base_key(),
                                        f"Debian bookworm: {' '.join(sorted(packages))}", make_base)

        pyproject = tomllib.loads((root / "pyproject.toml").read_text())["project"]
        dependencies = list(pyproject.get("dependencies", []))
        venv_rel = recipe.venv.strip("/")
        site = f"lib/python{recipe.python}/site-packages"
        deps_key = "venv-" + hashlib.sha256(json.dumps(
            [builder_hash, python_full, glibc, dependencies, recipe.venv, recipe.compile, recipe.uninstall]
        ).encode()).hexdigest()[:32]

        def make_deps() -> tuple[LayerWriter, dict]:
            log(f"installing {len(dependencies)} dependencies from PyPI (cp{recipe.python}, glibc {glibc})")
            tree = scratch / "deps"
            venv_skeleton(tree, recipe.venv, python_full)
            target, wheels = scratch / "deps-target", scratch / "deps-wheels"
            wheels_for(dependencies, wheels, recipe.python)
            install(dependencies, target, python_full, glibc, wheels)
            _uninstall(target, recipe.uninstall)
            _relocate_scripts(target, recipe.venv)
            _bytecode(target, f"{recipe.venv}/{site}", recipe.compile)
            if (target / "bin").exists():
                for script in (target / "bin").iterdir():
                    script.rename(tree / "bin" / script.name)
                (target / "bin").rmdir()
            (tree / site).rmdir()
            target.rename(tree / site)
            writer = LayerWriter()
            writer.add_tree(tree, venv_rel)
            installed = sorted(info.name.removesuffix(".dist-info") for info in (tree / site).glob("*.dist-info"))
            return writer, {"needed": needed_by(tree), "installed": installed}

        deps, deps_meta = _cached_layer(cache / "layers", deps_key,
                                        f"{recipe.venv}: {' '.join(dependencies)}", make_deps)
        check_needed(set(base_meta["libraries"]), deps_meta["needed"])

        log("building taintkeeper's wheel")
        wheels = scratch / "wheels"
        wheels_for([str(snapshot(root, recipe, scratch / "src"))], wheels, recipe.python, no_deps=True)
        wheel = next(wheels.glob("*.whl"))
        target = scratch / "app-target"
        _pip("install", "--target", str(target), "--no-deps", *_target_flags(python_full, glibc), str(wheel))
        _relocate_scripts(target, recipe.venv)
        _drop_direct_url(target)
        _bytecode(target, f"{recipe.venv}/{site}", recipe.compile)
        check_needed(set(base_meta["libraries"]), needed_by(target))
        app = LayerWriter()
        if (target / "bin").exists():
            app.add_tree(target / "bin", f"{venv_rel}/bin")
        app.add_tree(target, f"{venv_rel}/{site}", exclude=("bin",))

        layer = app.write(scratch / "app.tar.gz", f"{recipe.venv}: {wheel.name}")
        partial = out.with_name(out.name + ".partial")
        config = write_oci_archive(partial, recipe, [base, deps, layer], tag)
        partial.rename(out)
    log(f"built {out} ({out.stat().st_size / 1e6:.1f} MB) in {time.monotonic() - started:.0f} s")
    return config


@dataclass(frozen=True)
class BuiltImage:
    archive: Path  # the oci-archive tarball
    reference: str  # docker.io/library/taintkeeper:dev: the name `ctr images import` gives it
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


def ensure_image(tag: str = DEFAULT_TAG, *, force: bool = False, root: Path = ROOT) -> BuiltImage:
    """taintkeeper's image, built first if the project changed since the cached archive (or with force)."""
    recipe = recipe_from_containerfile(root / "manifests" / "Containerfile")
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", tag)
    with open(cache / ".build.lock", "w") as lock, tempfile.TemporaryDirectory(prefix="src-", dir=cache) as copy:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; a second waits, then finds it cached
        source = snapshot(root, recipe, Path(copy) / "project")
        recipe = recipe_from_containerfile(source / "manifests" / "Containerfile")
        key = project_key(recipe, tag, source)
        out = cache / f"{safe}-{key[:16]}.oci.tar"
        if force or not out.exists():
            build(out, recipe, tag, source)
            prune(cache)
        else:
            os.utime(out)
    return read_archive(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Prints the archive's path. Import: ctr -n k8s.io images import PATH")
    parser.add_argument("--tag", default=DEFAULT_TAG, help=f"the image's name (default {DEFAULT_TAG})")
    parser.add_argument("--force", action="store_true", help="build again even if the cached archive is current")
    parser.add_argument("--print-config", action="store_true",
                        help="print the image config the Containerfile gives, and build nothing")
    args = parser.parse_args()
    try:
        if args.print_config:
            print(json.dumps(image_config(recipe_from_containerfile()), indent=2))
            return 0
        print(ensure_image(args.tag, force=args.force).archive)
    except (RecipeError, BuildError) as error:
        print(f"image: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
