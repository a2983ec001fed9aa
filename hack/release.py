"""`make release VERSION=x.y.z` (python hack/release.py [--dry-run] VERSION): one version everywhere, and the
image built under it.

Stamps VERSION into every place that names taintkeeper's version (hack/versions.py): pyproject.toml's
`[project] version`, the chart's `version` and `appVersion` (its `image.tag` defaults to empty, the
appVersion), every kustomization's `newTag` for the image, and makes the chart's README again (it names the
version). Then builds the image `taintkeeper:VERSION` (hack/image.py, `make image`) and prints its reference,
its manifest digest and the archive. `--push DIR` (`make release VERSION=... PUSH=DIR`) then pushes the image
and the packaged chart to the registry of the cluster in DIR (hack/cluster_registry.py: started if it is not
running) and prints the image's reference by digest, the chart's, and the `helm install` that installs them.
`--dry-run` prints what would change and builds nothing.

VERSION must be a semantic version (https://semver.org) that is also a Python package version (PEP 440) and
an image tag: MAJOR.MINOR.PATCH with an optional pre-release (1.0.0-rc.1), no build metadata (`+`). Anything
else is refused in one line, exit status 2, before a file is touched.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python hack/release.py` from anywhere
    sys.path.insert(0, str(ROOT))

from hack import chart_readme, cluster_registry, image, versions  # noqa: E402
from hack.image_commands import BuildError  # noqa: E402
from hack.image_recipe import RecipeError  # noqa: E402
from hack.registry import RegistryError, built_helm  # noqa: E402
from hack.wait import WaitTimeout  # noqa: E402

# https://semver.org/#is-there-a-suggested-regular-expression-regex-to-check-a-semver-string
SEMVER = re.compile(
    r"(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<prerelease>(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+(?P<buildmetadata>[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?",
    re.ASCII,
)
README = versions.CHART / "README.md"
PUSHING = (
    "Without --push, a node imports the archive (ctr -n k8s.io images import ARCHIVE); with it, the nodes of "
    "DIR's cluster pull the image from DIR's registry (hack/local-cluster.sh registry DIR)"
)


def refusal(version: str) -> str | None:
    """Why VERSION cannot be released, or None."""
    found = SEMVER.fullmatch(version)
    if found is None:
        return f"VERSION {version!r} is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE], https://semver.org)"
    if found["buildmetadata"] is not None:
        return f"VERSION {version!r} has build metadata: an image tag cannot carry '+'"
    try:
        Version(version)
    except InvalidVersion:
        return (
            f"VERSION {version!r} is not a Python package version (PEP 440), which pyproject.toml must carry: "
            "a pre-release is aN, bN or rcN (1.0.0-rc.1)"
        )
    return None


@dataclass(frozen=True)
class Change:
    path: Path  # relative to the repository's root
    field: str
    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.path} {self.field}: {self.old} -> {self.new}"


def _replace_line(text: str, path: Path, pattern: str, line: str) -> tuple[str, str]:
    """The text with the one line matching `pattern` replaced by `line` (`{indent}` the line's own), and the
    value the line had (the pattern's group `old`, unquoted)."""
    found = list(re.finditer(pattern, text, flags=re.MULTILINE))
    if len(found) != 1:
        raise ValueError(f"{path}: {len(found)} lines match {pattern!r}, not one")
    match = found[0]
    new_line = line.format(indent=match.groupdict().get("indent") or "")
    return text[: match.start()] + new_line + text[match.end() :], match["old"].strip("\"'")


@dataclass(frozen=True)
class Stamp:
    changes: list[Change]  # each place whose version changes
    texts: dict[Path, str]  # the new text of each file that changes (relative to the root): the README too


def stamped(root: Path, version: str) -> Stamp:
    """What stamping VERSION changes, and the files' new texts; nothing written. Each new text is read back:
    an edited line that does not give the version there is an error."""
    changes: list[Change] = []
    texts: dict[Path, str] = {}

    def edit(path: Path, field: str, pattern: str, line: str) -> None:
        new_text, old = _replace_line(texts.get(path, (root / path).read_text()), path, pattern, line)
        if old != version:
            changes.append(Change(path, field, old, version))
            texts[path] = new_text

    edit(versions.PYPROJECT, "[project] version", r'^version = (?P<old>"[^"\n]*")$', f'version = "{version}"')
    chart_yaml = versions.CHART / "Chart.yaml"
    edit(chart_yaml, "version", r"^version: (?P<old>.*)$", f"version: {version}")
    edit(chart_yaml, "appVersion", r"^appVersion: (?P<old>.*)$", f'appVersion: "{version}"')
    for path in versions.kustomizations(root):
        field = f"images[{versions.IMAGE_NAME}].newTag"
        edit(path, field, r"^(?P<indent>[ \t]*)newTag: (?P<old>.*)$", "{indent}newTag: " + version)

    if versions.PYPROJECT in texts and tomllib.loads(texts[versions.PYPROJECT])["project"]["version"] != version:
        raise ValueError(f"{versions.PYPROJECT}: stamped, its [project] version is not {version}")
    if chart_yaml in texts:
        chart = yaml.safe_load(texts[chart_yaml])
        if (str(chart["version"]), str(chart["appVersion"])) != (version, version):
            raise ValueError(f"{chart_yaml}: stamped, it reads version {chart['version']}, {chart['appVersion']}")
        readme = chart_readme.readme(
            texts[chart_yaml],
            json.loads((root / versions.CHART / "values.schema.json").read_text()),
            (root / versions.CHART / "values.yaml").read_text(),
        )
        if readme != (root / README).read_text():
            texts[README] = readme
    for path, text in texts.items():
        if path.name == "kustomization.yaml":
            entry = versions.image_entry(yaml.safe_load(text))
            if entry is None or str(entry.get("newTag")) != version:
                raise ValueError(f"{path}: stamped, its {versions.IMAGE_NAME} image reads {entry}")
    return Stamp(changes, texts)


def stamp(root: Path, version: str) -> Stamp:
    """Write VERSION into every place (and the chart's README made again); what changed."""
    result = stamped(root, version)
    for path, text in result.texts.items():
        (root / path).write_text(text)
    left = versions.disagreements(root)
    if left:
        raise ValueError("stamped, these still disagree: " + "; ".join(str(place) for place in left))
    return result


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(
        prog="hack/release.py",
        description=(
            "Stamp VERSION into every place that names taintkeeper's version (pyproject.toml, Chart.yaml, the "
            "kustomizations' newTag, the chart's README), then build the image taintkeeper:VERSION and print its "
            "digest."
        ),
        epilog=PUSHING,
    )
    made.add_argument("version", metavar="VERSION", help="the version to release: MAJOR.MINOR.PATCH[-PRERELEASE]")
    made.add_argument(
        "--dry-run", action="store_true", help="print what would change and what would be built; write nothing"
    )
    made.add_argument(
        "--push",
        metavar="DIR",
        type=Path,
        help="push the image and the chart to the registry of the cluster in DIR and print their digests",
    )
    return made


def push(directory: Path, built: image.BuiltImage, version: str, root: Path) -> None:
    """The image and the chart into DIR's registry; what was pushed, and how to install it, printed."""
    registry = cluster_registry.ensure(directory)
    pushed = registry.push_image(built.archive, versions.IMAGE_NAME, version)
    chart = cluster_registry.publish_chart(directory, built_helm(), root / versions.CHART)
    print(f"pushed {pushed.reference}")
    print(f"chart {chart.reference} {chart.version} {chart.digest}")
    print(
        f"install: helm install taintkeeper {chart.reference} --version {chart.version} "
        f"--ca-file {registry.ca_file} -n taintkeeper-system --create-namespace "
        f"--set image.repository={pushed.repository} --set image.digest={pushed.digest}"
    )


def main(argv: Sequence[str] | None = None, root: Path = ROOT) -> int:
    args = parser().parse_args(argv)
    version: str = args.version
    why = refusal(version)
    if why is not None:
        print(f"release: error: {why}", file=sys.stderr)
        return 2
    if args.push is not None and not args.push.is_dir():
        print(
            f"release: error: --push {args.push}: no such directory (a cluster's: hack/local-cluster.sh up)",
            file=sys.stderr,
        )
        return 2
    old = versions.project_version(root)
    tag = f"{versions.IMAGE_NAME}:{version}"
    try:
        result = stamped(root, version) if args.dry_run else stamp(root, version)
    except (OSError, ValueError) as error:
        print(f"release: error: {error}", file=sys.stderr)
        return 1
    print(f"release: {old} -> {version}" + (" (dry run: nothing written, nothing built)" if args.dry_run else ""))
    for change in result.changes:
        print(change)
    if README in result.texts:
        print(f"{README}: made again (hack/chart_readme.py)")
    if not result.texts:
        print(f"every place names {version} already")
    if args.dry_run:
        print(f"would build {tag} (hack/image.py)" + (f" and push it to {args.push}'s registry" if args.push else ""))
        return 0
    try:
        built = image.ensure_image(tag, root=root)
    except (RecipeError, BuildError) as error:
        print(f"release: error: the image could not be built ({error}); the files name {version}", file=sys.stderr)
        return 1
    print(f"image {built.reference}")
    print(f"digest {built.digest}")
    print(f"archive {built.archive}")
    if args.push is not None:
        try:
            push(args.push.resolve(), built, version, root)
        except (RegistryError, WaitTimeout) as error:
            print(f"release: error: nothing more pushed: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
