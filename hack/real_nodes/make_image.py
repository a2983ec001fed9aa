"""Build a single-layer docker-archive image (what `ctr images import` reads) without a registry.

    make_image.py --tag NAME:TAG --out image.tar [--file SRC:/path ...] [--busybox /bin/busybox]
                  [--entrypoint /path] [--cmd ARG ...]

--busybox puts a static busybox at /bin/busybox plus a symlink for each of its applets.
The archive is deterministic (fixed mtimes), so a rebuild gives the same image ID.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path


def _info(name: str, kind: bytes, mode: int, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name.lstrip("/"))
    info.type, info.mode, info.size, info.linkname, info.mtime = kind, mode, size, link, 0
    return info


def layer(files: list[tuple[Path, str]], busybox: Path | None) -> bytes:
    buffer = io.BytesIO()
    directories: set[str] = {"tmp", "etc", "proc", "sys", "dev"}
    entries: list[tuple[str, Path | None, str]] = [(dest, src, "") for src, dest in files]
    if busybox is not None:
        entries.append(("/bin/busybox", busybox, ""))
        applets = subprocess.run([str(busybox), "--list-full"], capture_output=True, text=True, check=True)
        for applet in applets.stdout.split():
            if applet != "bin/busybox":
                entries.append(("/" + applet, None, "/bin/busybox"))
    for dest, _src, _link in entries:
        parent = Path(dest.lstrip("/")).parent
        while str(parent) != ".":
            directories.add(str(parent))
            parent = parent.parent
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for directory in sorted(directories):
            tar.addfile(_info(directory, tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755))
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
        tar.addfile(_info("etc/passwd", tarfile.REGTYPE, 0o644, len(passwd)), io.BytesIO(passwd))
        for dest, src, link in sorted(entries, key=lambda entry: entry[0]):
            if src is None:
                tar.addfile(_info(dest, tarfile.SYMTYPE, 0o777, link=link))
            else:
                data = src.read_bytes()
                tar.addfile(_info(dest, tarfile.REGTYPE, 0o755, len(data)), io.BytesIO(data))
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--file", action="append", default=[], metavar="SRC:/DEST")
    parser.add_argument("--busybox", type=Path)
    parser.add_argument("--entrypoint", action="append", default=[])
    parser.add_argument("--cmd", action="append", default=[])
    args = parser.parse_args()
    files = [(Path(spec.split(":", 1)[0]), spec.split(":", 1)[1]) for spec in args.file]
    layer_tar = layer(files, args.busybox)
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {
            "Entrypoint": args.entrypoint or None,
            "Cmd": args.cmd or None,
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "WorkingDir": "/",
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "hack/real_nodes/make_image.py"}],
    }
    config_bytes = json.dumps(image_config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [args.tag], "Layers": ["layer.tar"]}]).encode()
    with tarfile.open(args.out, "w", format=tarfile.GNU_FORMAT) as archive:
        for name, data in (("layer.tar", layer_tar), (config_name, config_bytes), ("manifest.json", manifest)):
            archive.addfile(_info(name, tarfile.REGTYPE, 0o644, len(data)), io.BytesIO(data))


if __name__ == "__main__":
    main()
