"""The `version_independent` mark: `make test` runs a test so marked on 1.37 only (its old-end pass on 1.20
deselects it), so each mark says why what the test checks is the same on every Kubernetes version.

The marks are read from the source of every test module, in every form (a decorator, a module's
`pytestmark`, a mark kept in a name and applied to several tests), without importing the suites: the
reason is one non-empty string written at the mark, where a reader of the test sees it.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MARK = "version_independent"


def has_reason(call: ast.Call) -> bool:
    if call.keywords or len(call.args) != 1:
        return False
    reason = call.args[0]
    return isinstance(reason, ast.Constant) and isinstance(reason.value, str) and bool(reason.value.strip())


def reasonless(source: str) -> list[int]:
    """The lines where `source` uses the mark without its reason."""
    tree = ast.parse(source)
    calls = {id(node.func): node for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == MARK
        and not ((call := calls.get(id(node))) is not None and has_reason(call))
    )


SOURCES = {
    "a decorator with its reason": (
        '@pytest.mark.version_independent("the same on every version")\ndef test_a(): ...',
        [],
    ),
    "a module's pytestmark with its reason": ('pytestmark = pytest.mark.version_independent("the same")', []),
    "a mark kept in a name, then applied": (
        'SAME = pytest.mark.version_independent("the same")\n@SAME\ndef test_a(): ...',
        [],
    ),
    "another mark": ("@pytest.mark.apiserver\ndef test_a(): ...", []),
    "a bare decorator": ("@pytest.mark.version_independent\ndef test_a(): ...", [1]),
    "no reason": ("pytestmark = pytest.mark.version_independent()", [1]),
    "an empty reason": ('\n@pytest.mark.version_independent("  ")\ndef test_a(): ...', [2]),
    "a reason kept elsewhere": ("pytestmark = pytest.mark.version_independent(WHY)", [1]),
    "a reason given by keyword": ('pytestmark = pytest.mark.version_independent(reason="the same")', [1]),
    "two reasons": ('pytestmark = pytest.mark.version_independent("the same", "twice")', [1]),
}


@pytest.mark.parametrize(("source", "lines"), SOURCES.values(), ids=SOURCES.keys())
def test_a_mark_without_one_reason_is_found(source: str, lines: list[int]) -> None:
    assert reasonless(source) == lines


def test_every_version_independent_test_says_why() -> None:
    missing = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if (lines := reasonless(path.read_text()))
    }
    assert missing == {}, "each version_independent mark takes one reason: why the test is the same on every version"


def test_the_old_end_pass_deselects_the_mark_pyproject_registers() -> None:
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert [m for m in markers if m.startswith(f"{MARK}(reason): ")], f"pyproject.toml registers no {MARK}(reason)"
    assert f'OLD_END_SELECT ?= -m "not {MARK}"' in (ROOT / "Makefile").read_text().splitlines()
