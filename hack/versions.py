"""taintkeeper's version and every place that names it.

pyproject.toml's `[project] version` is the one source: the package's version (what kube/identity.py reports
in every User-Agent), the chart's `version` and `appVersion`, the image tag the chart installs (values.yaml's
`image.tag`, empty: the appVersion) and the `newTag` of every kustomization that sets taintkeeper's image,
which hack/image.py's default tag follows too. `make release VERSION=x.y.z` (hack/release.py) stamps them
together; tests/unit/hack/test_release.py fails when they disagree.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
IMAGE_NAME = "taintkeeper"  # the image's name in manifests/, the chart's image.repository and hack/image.py's tag
PYPROJECT = Path("pyproject.toml")
CHART = Path("charts/taintkeeper")
MANIFESTS = Path("manifests")


@dataclass(frozen=True)
class Place:
    """One place that names the version: the file (relative to the repository's root), what in it, and the
    version it names now."""

    path: Path
    field: str
    version: str

    def __str__(self) -> str:
        return f"{self.path} {self.field}: {self.version or '(empty)'}"


def project_version(root: Path = ROOT) -> str:
    """pyproject.toml's `[project] version`."""
    return str(tomllib.loads((root / PYPROJECT).read_text())["project"]["version"])


def image_reference(root: Path = ROOT) -> str:
    """The image the manifests and the chart install by default: `taintkeeper:VERSION`."""
    return f"{IMAGE_NAME}:{project_version(root)}"


def image_entry(kustomization: dict) -> dict | None:
    """The `images:` entry of a kustomization that sets taintkeeper's image, if it has one."""
    found = [entry for entry in kustomization.get("images") or [] if entry.get("name") == IMAGE_NAME]
    return found[0] if found else None


def kustomizations(root: Path = ROOT) -> list[Path]:
    """Every kustomization under manifests/ that sets taintkeeper's image (relative to root)."""
    return [
        path.relative_to(root)
        for path in sorted((root / MANIFESTS).rglob("kustomization.yaml"))
        if image_entry(yaml.safe_load(path.read_text()) or {}) is not None
    ]


def places(root: Path = ROOT) -> list[Place]:
    """Every place that names the version, as it reads now. values.yaml's `image.tag` is the tag the chart
    installs: its appVersion when the default is left empty."""
    chart = yaml.safe_load((root / CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((root / CHART / "values.yaml").read_text())
    found = [
        Place(PYPROJECT, "[project] version", project_version(root)),
        Place(CHART / "Chart.yaml", "version", str(chart["version"])),
        Place(CHART / "Chart.yaml", "appVersion", str(chart["appVersion"])),
        Place(
            CHART / "values.yaml",
            "image.tag (empty: the appVersion)",
            str(values["image"]["tag"] or chart["appVersion"]),
        ),
    ]
    for path in kustomizations(root):
        entry = image_entry(yaml.safe_load((root / path).read_text()))
        assert entry is not None  # kustomizations() keeps only these
        found.append(Place(path, f"images[{IMAGE_NAME}].newTag", str(entry.get("newTag", ""))))
    return found


def disagreements(root: Path = ROOT) -> list[Place]:
    """The places that do not name pyproject.toml's version."""
    version = project_version(root)
    return [place for place in places(root) if place.version != version]
