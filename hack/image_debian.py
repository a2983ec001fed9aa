"""The image's Debian layer: python:X.Y-slim made of Debian bookworm's .deb files.

The packages and their Depends/Pre-Depends closure come from apt (`apt-cache`), are downloaded with
`apt-get download` and unpacked with `dpkg-deb` (no maintainer scripts run) into a merged-/usr root,
without documentation, plus the few /etc files and mount points every container root has, and the
standard library's bytecode.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from hack.image_commands import BuildError, log, run
from hack.image_layer import LayerWriter

# What `FROM python:X.Y-slim` is made of here: Debian's interpreter and standard library, and
# libstdc++ (greenlet's extension links it; python:3.11-slim has it too). Their Depends and
# Pre-Depends are followed; check_needed() fails the build if a wheel links to a library missing here.
DEBIAN_PACKAGES = ("python{v}-minimal", "libpython{v}-stdlib", "libstdc++6")
# Never unpacked: readline-common wants dpkg (or install-info) to register its info page, which is dropped.
NOT_FOLLOWED = {"dpkg", "install-info"}
# Left out of Debian's layer: documentation and translations, and gdb's pretty-printers (libstdc++6).
DROPPED = re.compile(r"^usr/share/(doc|man|info|locale|lintian|bug|gdb|gcc)(/|$)")
# Debian bookworm's root is merged-/usr: these are symlinks into usr/ and the packages' files go there.
MERGED = ("bin", "sbin", "lib", "lib64")
# Mount points and files every container root has (the runtime mounts over them), /tmp world-writable.
BASE_DIRECTORIES = {
    "dev": 0o755,
    "proc": 0o555,
    "sys": 0o555,
    "etc": 0o755,
    "run": 0o755,
    "root": 0o700,
    "tmp": 0o1777,
    "opt": 0o755,
    "var": 0o755,
    "var/tmp": 0o1777,
}
BASE_FILES = {
    "etc/passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "etc/group": "root:x:0:\nnogroup:x:65534:\n",
    "etc/nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
    "etc/hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
}


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
    result = subprocess.run(
        ["apt-cache", "show", "--no-all-versions", *sorted(set(names))], capture_output=True, text=True
    )
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
    result = subprocess.run(
        [
            "apt-cache",
            "depends",
            "--recurse",
            "--no-recommends",
            "--no-suggests",
            "--no-conflicts",
            "--no-breaks",
            "--no-replaces",
            "--no-enhances",
            *packages,
        ],
        capture_output=True,
        text=True,
    )
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
        run(["apt-get", "-q", "-o", "APT::Sandbox::User=root", "download", *missing], cwd=debs)
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
    sources = {
        name: data
        for name, (info, data) in writer.entries.items()
        if re.fullmatch(r"usr/lib/python3\.\d+/.+\.py", name)
        and "/site-packages/" not in name
        and isinstance(data, bytes)
    }
    if not sources:
        return
    with tempfile.TemporaryDirectory(prefix="stdlib-") as scratch_name:
        scratch = Path(scratch_name)
        for name, data in sources.items():
            (scratch / name).parent.mkdir(parents=True, exist_ok=True)
            (scratch / name).write_bytes(data)
        stdlib = next(iter(sources)).split("/")[:3]  # usr, lib, python3.X
        # Files that are not valid Python 3 (test data, lib2to3 fixtures) are skipped, as py3compile does.
        subprocess.run(
            [
                sys.executable,
                "-m",
                "compileall",
                "-q",
                "-j0",
                "--invalidation-mode",
                "unchecked-hash",
                "-s",
                str(scratch),
                "-p",
                "/",
                str(scratch / "/".join(stdlib)),
            ],
            capture_output=True,
            check=False,
        )
        for path in sorted(scratch.rglob("*.pyc")):
            writer.add(str(path.relative_to(scratch)), tarfile.REGTYPE, 0o644, path.read_bytes())
