"""Every shared library a wheel links to must be in the image: the ELF files' DT_NEEDED, checked
against the libraries Debian's layer provides."""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable
from pathlib import Path

from hack.image_commands import BuildError


def elf_needed(data: bytes) -> list[str] | None:
    """DT_NEEDED of a 64-bit little-endian ELF file, None if data is not one."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
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
                needed.append(data[strtab + value : end].decode())
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
        raise BuildError(
            f"shared libraries the wheels link to are not in the image: {detail}. "
            f"Add their Debian packages to DEBIAN_PACKAGES in hack/image_debian.py"
        )
