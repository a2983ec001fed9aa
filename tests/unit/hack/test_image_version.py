"""hack/image.py's --version: the package inside the image says another version, all else the same."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from hack.image import set_version
from hack.image_commands import BuildError

ROOT = Path(__file__).resolve().parents[3]


def test_another_version_replaces_only_the_projects_version_line(tmp_path: Path):
    original = (ROOT / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(original)
    set_version(tmp_path, "0.1.0+next")
    changed = (tmp_path / "pyproject.toml").read_text()
    assert tomllib.loads(changed)["project"]["version"] == "0.1.0+next"
    assert [line for line in changed.splitlines() if line not in original.splitlines()] == ['version = "0.1.0+next"']


def test_a_pyproject_without_a_plain_version_line_is_refused(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion  =  "1"\n')
    with pytest.raises(BuildError, match="cannot find its version line"):
        set_version(tmp_path, "2")
