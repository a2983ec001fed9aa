"""Build taintkeeper's container image offline: an OCI archive from Debian's packages and PyPI.

    python hack/image.py [--tag taintkeeper:VERSION] [--version V] [--force] [--print-config]      (`make image`)

prints the path of an `oci-archive` tarball that `ctr -n k8s.io images import FILE` loads. No
Docker engine, no registry and no base image: the root filesystem is made of Debian bookworm's
.deb files (`apt-get download`, unpacked with `dpkg-deb`, no maintainer scripts run), and the
virtualenv of wheels from PyPI for the image's own interpreter (cp311, manylinux x86_64; a
dependency published only as an sdist is built into a wheel here, by this same Python 3.11).
From Python: `ensure_image()` returns the archive, its image name and manifest digest, building
it first when stale.

One recipe: everything the image says about itself comes from manifests/Containerfile, the file
`docker build` reads too (hack/image_recipe.py reads it). A Containerfile instruction this builder
cannot mirror stops the build (RecipeError), so the two cannot drift apart silently.

Three layers, each cached: Debian (python3.11 and the libraries it and the wheels link to), the
dependencies' virtualenv, and taintkeeper itself. The archive is cached under
${TAINTKEEPER_CACHE:-~/.cache/taintkeeper}/images/, keyed on a hash of this builder, the
Containerfile and every file it COPYs: a warm build returns at once, a change to the project
rebuilds only the taintkeeper layer (the dependencies are installed again only when pyproject's
dependencies change, Debian's layer only when its packages' versions do). Builds are
deterministic (fixed mtimes and owners), so the same inputs give the same image ID.

This file runs the build; each of its parts has a file of its own in hack/:
    image_recipe.py    manifests/Containerfile read as a Recipe, and the image config it gives
    image_debian.py    Debian's layer: apt's packages and their closure, unpacked from the .debs
    image_venv.py      the virtualenv's layers: wheels from PyPI installed for the image's interpreter
    image_elf.py       every shared library the wheels link to must be in Debian's layer
    image_layer.py     one deterministic layer tar, and its digests
    image_cache.py     the cache: its directory, the keys, cached layers, pruning
    image_archive.py   the OCI archive: written, read back, unpacked
    image_commands.py  BuildError, the log line, running a command
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python hack/image.py` from anywhere
    sys.path.insert(0, str(ROOT))

from hack.image_archive import BuiltImage, read_archive, write_oci_archive  # noqa: E402
from hack.image_cache import builder_digest, cache_dir, cached_layer, project_key, prune  # noqa: E402
from hack.image_commands import BuildError, log, run  # noqa: E402
from hack.image_debian import DEBIAN_PACKAGES, debian_layer, download_debs, resolve_debian  # noqa: E402
from hack.image_elf import check_needed, libraries, needed_by  # noqa: E402
from hack.image_layer import LayerWriter  # noqa: E402
from hack.image_recipe import Recipe, RecipeError, image_config, recipe_from_containerfile  # noqa: E402
from hack.image_venv import (  # noqa: E402
    bytecode,
    drop_direct_url,
    install,
    pip,
    relocate_scripts,
    target_flags,
    uninstall,
    venv_skeleton,
    wheels_for,
)
from hack.versions import image_reference  # noqa: E402

DEFAULT_TAG = image_reference()  # taintkeeper:VERSION, pyproject's version: what the manifests and the chart ask for


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
        raise BuildError(
            f"the build stage needs the Debian packages {' '.join(missing)} on this host "
            "(hack/local-cluster.sh deps installs them)"
        )
    wanted = [name.format(v=recipe.python) for name in DEBIAN_PACKAGES]
    try:
        packages = resolve_debian(wanted)
    except BuildError as error:  # no package lists yet
        log(f"{error}: running apt-get update")
        run(["apt-get", "-o", "DPkg::Lock::Timeout=900", "update", "-q"])
        packages = resolve_debian(wanted)
    builder_hash = builder_digest()

    def base_key() -> str:
        versions = "".join(f"{name}={fields['Version']}\n" for name, fields in sorted(packages.items()))
        return "debian-" + hashlib.sha256(f"{builder_hash}\n{versions}".encode()).hexdigest()[:32]

    if not (cache / "layers" / f"{base_key()}.json").exists():
        try:
            download_debs(packages, cache / "debs")
        except BuildError as error:  # stale package lists: the mirror has moved on to newer versions
            log(f"{str(error).splitlines()[0]}: running apt-get update")
            run(["apt-get", "-o", "DPkg::Lock::Timeout=900", "update", "-q"])
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

        base, base_meta = cached_layer(
            cache / "layers", base_key(), f"Debian bookworm: {' '.join(sorted(packages))}", make_base
        )

        pyproject = tomllib.loads((root / "pyproject.toml").read_text())["project"]
        dependencies = list(pyproject.get("dependencies", []))
        venv_rel = recipe.venv.strip("/")
        site = f"lib/python{recipe.python}/site-packages"
        deps_key = (
            "venv-"
            + hashlib.sha256(
                json.dumps(
                    [builder_hash, python_full, glibc, dependencies, recipe.venv, recipe.compile, recipe.uninstall]
                ).encode()
            ).hexdigest()[:32]
        )

        def make_deps() -> tuple[LayerWriter, dict]:
            log(f"installing {len(dependencies)} dependencies from PyPI (cp{recipe.python}, glibc {glibc})")
            tree = scratch / "deps"
            venv_skeleton(tree, recipe.venv, python_full)
            target, wheels = scratch / "deps-target", scratch / "deps-wheels"
            wheels_for(dependencies, wheels, recipe.python)
            install(dependencies, target, python_full, glibc, wheels)
            uninstall(target, recipe.uninstall)
            relocate_scripts(target, recipe.venv)
            bytecode(target, f"{recipe.venv}/{site}", recipe.compile)
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

        deps, deps_meta = cached_layer(
            cache / "layers", deps_key, f"{recipe.venv}: {' '.join(dependencies)}", make_deps
        )
        check_needed(set(base_meta["libraries"]), deps_meta["needed"])

        log("building taintkeeper's wheel")
        wheels = scratch / "wheels"
        wheels_for([str(snapshot(root, recipe, scratch / "src"))], wheels, recipe.python, no_deps=True)
        wheel = next(wheels.glob("*.whl"))
        target = scratch / "app-target"
        pip("install", "--target", str(target), "--no-deps", *target_flags(python_full, glibc), str(wheel))
        relocate_scripts(target, recipe.venv)
        drop_direct_url(target)
        bytecode(target, f"{recipe.venv}/{site}", recipe.compile)
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


def set_version(project: Path, version: str) -> None:
    """Give the snapshot's package another version (pyproject's [project] version): what its processes
    report (kube/identity.py's User-Agent), e.g. for an upgrade between two builds of the same code."""
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    current = tomllib.loads(text)["project"]["version"]
    line = f'version = "{current}"'
    if text.count(line) != 1:
        raise BuildError(f"pyproject.toml: cannot find its version line ({line})")
    pyproject.write_text(text.replace(line, f'version = "{version}"'))


def ensure_image(
    tag: str = DEFAULT_TAG, *, force: bool = False, root: Path = ROOT, version: str | None = None
) -> BuiltImage:
    """taintkeeper's image, built first if the project changed since the cached archive (or with force);
    `version`: the package's version in the image instead of pyproject's."""
    recipe = recipe_from_containerfile(root / "manifests" / "Containerfile")
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", tag)
    with open(cache / ".build.lock", "w") as lock, tempfile.TemporaryDirectory(prefix="src-", dir=cache) as copy:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; a second waits, then finds it cached
        source = snapshot(root, recipe, Path(copy) / "project")
        if version is not None:
            set_version(source, version)
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
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Prints the archive's path. Import: ctr -n k8s.io images import PATH",
    )
    parser.add_argument("--tag", default=DEFAULT_TAG, help=f"the image's name (default {DEFAULT_TAG})")
    parser.add_argument("--force", action="store_true", help="build again even if the cached archive is current")
    parser.add_argument(
        "--version", default=None, help="the package version inside the image (default: pyproject.toml's)"
    )
    parser.add_argument(
        "--print-config", action="store_true", help="print the image config the Containerfile gives, and build nothing"
    )
    args = parser.parse_args()
    try:
        if args.print_config:
            print(json.dumps(image_config(recipe_from_containerfile()), indent=2))
            return 0
        print(ensure_image(args.tag, force=args.force, version=args.version).archive)
    except (RecipeError, BuildError) as error:
        print(f"image: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
