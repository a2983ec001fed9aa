"""The image's virtualenv: wheels from PyPI (or built here from an sdist) installed with pip for the
image's own interpreter and glibc, the venv's skeleton, its console scripts and its bytecode."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from hack.image_cache import cache_dir
from hack.image_commands import BuildError, run


def pip(*args: str, cwd: Path | None = None) -> None:
    # pip's own cache beside the layers: the wheels it builds from sdists here are built without debug
    # information (-g0), which keeps the build paths out of them, so they are the same on every build.
    env = {
        **os.environ,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "PIP_CACHE_DIR": str(cache_dir() / "pip"),
        "CFLAGS": f"{os.environ.get('CFLAGS', '')} -g0".strip(),
    }
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=env, cwd=cwd)
    if result.returncode != 0:
        raise BuildError(f"pip {' '.join(args[:4])}... failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")


def target_flags(python_full: str, glibc: str) -> list[str]:
    """pip's options selecting wheels for the image's interpreter rather than the one running pip:
    manylinux wheels for Debian's glibc, or wheels built here (linux_x86_64, on this same Debian)."""
    major, minor = python_full.split(".")[:2]
    glibc_minor = int(glibc.split(".")[1])
    # pip does not widen manylinux_2_N to the older glibc versions it includes: list them all.
    platforms = [f"manylinux_2_{n}_x86_64" for n in range(glibc_minor, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    return [
        "--only-binary=:all:",
        *(f"--platform={platform}" for platform in platforms),
        "--python-version",
        python_full,
        "--implementation",
        "cp",
        "--abi",
        f"cp{major}{minor}",
        "--no-compile",
        "--no-warn-script-location",
    ]


def relocate_scripts(target: Path, venv: str) -> None:
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


def uninstall(site_packages: Path, names: list[str]) -> None:
    """`pip uninstall -y NAMES` of a --target install: remove what each RECORD lists."""
    for name in names:
        for info in site_packages.glob(f"{re.sub(r'[-_.]+', '_', name)}-*.dist-info"):
            for line in (info / "RECORD").read_text().splitlines():
                path = site_packages / line.split(",")[0]
                if path.is_file() or path.is_symlink():
                    path.unlink()
            shutil.rmtree(info, ignore_errors=True)


def drop_direct_url(site_packages: Path) -> None:
    """pip records where a wheel file came from (a temporary path here): leave it out, so rebuilds agree."""
    for direct_url in site_packages.glob("*.dist-info/direct_url.json"):
        direct_url.unlink()
        record = direct_url.parent / "RECORD"
        entry = f"{direct_url.parent.name}/direct_url.json,"
        lines = record.read_text().splitlines(keepends=True)
        record.write_text("".join(line for line in lines if not line.startswith(entry)))


def bytecode(tree: Path, installed_at: str, compile_: bool) -> None:
    """`pip install --no-compile`: no bytecode. Without it, bytecode that does not depend on the files'
    mtimes (the layers' are fixed), compiled by this same Python X.Y (wheels_for() checked that)."""
    for cache in list(tree.rglob("__pycache__")):
        shutil.rmtree(cache)
    if compile_:
        run(
            [
                sys.executable,
                "-m",
                "compileall",
                "-q",
                "-j0",
                "--invalidation-mode",
                "unchecked-hash",
                "-s",
                str(tree),
                "-p",
                installed_at,
                "-x",
                r"/bin/",
                str(tree),
            ]
        )


def install(requirements: list[str], target: Path, python_full: str, glibc: str, wheels: Path) -> None:
    """pip install --target, only from the wheels in `wheels`, each checked against the image's interpreter."""
    pip(
        "install",
        "--target",
        str(target),
        "--no-index",
        "--find-links",
        str(wheels),
        *target_flags(python_full, glibc),
        *requirements,
    )


def wheels_for(requirements: list[str], wheels: Path, python: str, *, no_deps: bool = False) -> None:
    """The requirements' wheels (and their dependencies'), from PyPI or built here from an sdist.

    pip resolves for the interpreter running it, so that must be the image's Python X.Y (this host and
    the image are both Debian bookworm x86_64: the same wheel tags). install() then checks each wheel
    against the image's own interpreter, Python version and glibc."""
    if sys.version_info[:2] != tuple(int(part) for part in python.split(".")):
        raise BuildError(f"run this with a Python {python} (the image's); this is {sys.version.split()[0]}")
    pip("wheel", "--wheel-dir", str(wheels), *(["--no-deps"] if no_deps else []), *requirements)


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
        f"executable = /usr/bin/python{version}\ncommand = /usr/bin/python{version} -m venv {venv}\n"
    )
