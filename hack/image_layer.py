"""One layer of the image: a deterministic gzipped tar (sorted entries, fixed mtimes, owned by root)
and its digests."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

EPOCH = 0  # every file's mtime, and the image's creation time


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

    def write(self, out: Path, comment: str, compress: bool = True) -> Layer:
        """The layer as a gzipped tar (what an OCI archive holds), or a plain one (compress=False: what
        Docker 20.10 loads fastest, hack/docker_archive.py), its digest then its diff_id."""
        with open(out, "wb") as raw:
            compressed = _Hashing(raw)
            with (
                gzip.GzipFile(filename="", mode="wb", fileobj=compressed, compresslevel=6, mtime=0)
                if compress
                else contextlib.nullcontext(compressed)
            ) as gz:
                plain = _Hashing(gz)
                with tarfile.open(fileobj=plain, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                    for name in sorted(self.entries):
                        info, data = self.entries[name]
                        if isinstance(data, Path):
                            with open(data, "rb") as handle:
                                tar.addfile(info, handle)
                        else:
                            tar.addfile(info, io.BytesIO(data) if data is not None else None)
        return Layer(
            out, f"sha256:{compressed.sha.hexdigest()}", f"sha256:{plain.sha.hexdigest()}", compressed.size, comment
        )
