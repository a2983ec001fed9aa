"""One version for everything that names one (hack/versions.py), and `make release VERSION=x.y.z`
(hack/release.py), which stamps them together: tried on a copy of the files in tmp_path, never on the tree."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from hack import release, versions
from hack.chart_readme import readme_of

ROOT = Path(__file__).resolve().parents[3]


def copy_of_the_tree(tmp_path: Path) -> Path:
    """What the release stamps: pyproject.toml, the chart and the manifests."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(ROOT / "charts", root / "charts")
    shutil.copytree(ROOT / "manifests", root / "manifests")
    return root


def contents(root: Path) -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(root.rglob("*")) if path.is_file()}


# -- the tree names one version --------------------------------------------------------------------------


def test_every_place_names_pyprojects_version():
    assert versions.disagreements(ROOT) == [], (
        f"pyproject.toml says {versions.project_version(ROOT)}; these say otherwise (make release VERSION=...): "
        + "; ".join(str(place) for place in versions.disagreements(ROOT))
    )


def test_the_places_are_pyproject_the_chart_its_values_and_every_kustomization_with_the_image():
    named = {(str(place.path), place.field) for place in versions.places(ROOT)}
    assert named == {
        ("pyproject.toml", "[project] version"),
        ("charts/taintkeeper/Chart.yaml", "version"),
        ("charts/taintkeeper/Chart.yaml", "appVersion"),
        ("charts/taintkeeper/values.yaml", "image.tag (empty: the appVersion)"),
        *(
            (f"manifests/{directory}kustomization.yaml", "images[taintkeeper].newTag")
            for directory in ("", "admission-policy/", "cert-manager/", "kube-1.20/")
        ),
    }


def test_the_charts_default_tag_is_empty_so_that_it_follows_the_app_version():
    values = yaml.safe_load((ROOT / "charts/taintkeeper/values.yaml").read_text())
    assert values["image"]["tag"] == ""


def set_line(path: str, pattern: str, line: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        text = (root / path).read_text()
        changed, count = re.subn(pattern, line, text, count=1, flags=re.MULTILINE)
        assert count == 1, (path, pattern)
        (root / path).write_text(changed)

    return change


def add_kustomization(directory: str, text: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        (root / "manifests" / directory).mkdir()
        (root / "manifests" / directory / "kustomization.yaml").write_text(text)

    return change


class Disagreement(NamedTuple):
    name: str
    change: Callable[[Path], None]
    place: tuple[str, str]  # the place named as disagreeing


DISAGREEMENTS = [
    Disagreement(
        "pyproject moved on alone: every other place disagrees, the message names pyproject's",
        set_line("pyproject.toml", r'^version = ".*"$', 'version = "9.9.9"'),
        ("charts/taintkeeper/Chart.yaml", "version"),
    ),
    Disagreement(
        "the chart's version",
        set_line("charts/taintkeeper/Chart.yaml", r"^version: .*$", "version: 9.9.9"),
        ("charts/taintkeeper/Chart.yaml", "version"),
    ),
    Disagreement(
        "the chart's appVersion, which the empty image.tag follows",
        set_line("charts/taintkeeper/Chart.yaml", r"^appVersion: .*$", 'appVersion: "9.9.9"'),
        ("charts/taintkeeper/values.yaml", "image.tag (empty: the appVersion)"),
    ),
    Disagreement(
        "a tag set in values.yaml",
        set_line("charts/taintkeeper/values.yaml", r"^  tag: .*$", "  tag: dev"),
        ("charts/taintkeeper/values.yaml", "image.tag (empty: the appVersion)"),
    ),
    Disagreement(
        "one kustomization's newTag",
        set_line("manifests/kube-1.20/kustomization.yaml", r"^  newTag: .*$", "  newTag: dev"),
        ("manifests/kube-1.20/kustomization.yaml", "images[taintkeeper].newTag"),
    ),
    Disagreement(
        "a new kustomization that sets the image",
        add_kustomization("extra", "resources: [../base]\nimages:\n- name: taintkeeper\n  newTag: dev\n"),
        ("manifests/extra/kustomization.yaml", "images[taintkeeper].newTag"),
    ),
]


@pytest.mark.parametrize("case", DISAGREEMENTS, ids=[case.name for case in DISAGREEMENTS])
def test_a_place_that_disagrees_is_named(tmp_path: Path, case: Disagreement):
    root = copy_of_the_tree(tmp_path)
    assert versions.disagreements(root) == []
    case.change(root)
    named = [(str(place.path), place.field) for place in versions.disagreements(root)]
    assert case.place in named


# -- make release VERSION=... ----------------------------------------------------------------------------


class Refused(NamedTuple):
    version: str
    says: str


REFUSED = [
    Refused("", "not a semantic version"),  # make release without VERSION=
    Refused("1.2", "not a semantic version"),
    Refused("v1.2.3", "not a semantic version"),
    Refused("01.2.3", "not a semantic version"),
    Refused("1.2.3-", "not a semantic version"),
    Refused("1.2.3 ", "not a semantic version"),
    Refused("1.2.3\n", "not a semantic version"),
    Refused("1.2.3+build.5", "an image tag cannot carry"),
    Refused("1.2.3-alpha.beta", "not a Python package version"),
]


@pytest.mark.parametrize("case", REFUSED, ids=[repr(case.version) for case in REFUSED])
def test_a_version_that_is_not_semver_is_refused_in_one_line_and_nothing_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: Refused
):
    root = copy_of_the_tree(tmp_path)
    before = contents(root)
    assert release.main([case.version], root=root) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith("release: error: ") and case.says in err, err
    assert contents(root) == before


@pytest.mark.parametrize("version", ["0.2.0", "1.0.0-rc.1", "10.20.30"])
def test_a_semantic_version_is_taken(version: str):
    assert release.refusal(version) is None


def test_the_script_exits_2_on_a_bad_version():
    """As `make release VERSION=1.2` runs it: the process's exit code and its one line."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "hack/release.py"), "--dry-run", "1.2"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1, result.stderr


def test_a_dry_run_prints_each_change_and_writes_and_builds_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    root = copy_of_the_tree(tmp_path)
    before = contents(root)
    old = versions.project_version(root)
    assert release.main(["--dry-run", "2.3.4"], root=root) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert contents(root) == before
    lines = out.splitlines()
    for place in versions.places(root):
        if place.field.startswith("image.tag"):
            continue  # empty: it follows the appVersion, nothing to write
        assert f"{place.path} {place.field}: {old} -> 2.3.4" in lines, out
    assert "charts/taintkeeper/README.md: made again (hack/chart_readme.py)" in lines
    assert "would build taintkeeper:2.3.4 (hack/image.py)" in lines
    assert "dry run" in lines[0]


def test_stamping_makes_every_place_name_the_new_version_and_touches_nothing_else(tmp_path: Path):
    root = copy_of_the_tree(tmp_path)
    before = contents(root)
    result = release.stamp(root, "2.3.4")
    assert versions.project_version(root) == "2.3.4"
    assert versions.disagreements(root) == []
    assert (root / "charts/taintkeeper/README.md").read_text() == readme_of(root / "charts/taintkeeper")
    assert "Chart 2.3.4, taintkeeper 2.3.4." in (root / "charts/taintkeeper/README.md").read_text()
    after = contents(root)
    changed = {path.relative_to(root) for path in after if after[path] != before[path]}
    assert changed == set(result.texts)
    assert {change.path for change in result.changes} == changed - {Path("charts/taintkeeper/README.md")}
    for path in changed:  # one line per place, or the README made again
        if path.name == "README.md":
            continue
        old_lines, new_lines = before[root / path].splitlines(), after[root / path].splitlines()
        assert len(old_lines) == len(new_lines)
        differing = [new for old, new in zip(old_lines, new_lines, strict=True) if old != new]
        assert differing and all("2.3.4" in line for line in differing), (path, differing)


def test_stamping_the_same_version_again_changes_nothing(tmp_path: Path):
    root = copy_of_the_tree(tmp_path)
    release.stamp(root, "2.3.4")
    stamped = contents(root)
    again = release.stamp(root, "2.3.4")
    assert (again.changes, again.texts) == ([], {})
    assert contents(root) == stamped


def test_a_push_to_a_directory_that_is_not_there_is_refused_before_a_file_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    root = copy_of_the_tree(tmp_path)
    before = contents(root)
    assert release.main(["2.3.4", "--push", str(tmp_path / "no-cluster")], root=root) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "no-cluster: no such directory" in err, err
    assert contents(root) == before and not (tmp_path / "no-cluster").exists()
