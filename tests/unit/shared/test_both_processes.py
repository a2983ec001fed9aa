"""shared/ holds only the taint and toleration logic both processes compute alike: every module in it is
imported by webhook/ and by controller/, directly or through other modules (kube/, another shared/
module), at run time (an import under `if TYPE_CHECKING:` loads nothing and does not count). A module
only one of them uses belongs in that package, or in plumbing/ or kube/ by its kind."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[3]
PROCESSES = ("webhook", "controller")
SHARED_MODULES = sorted(f"shared.{path.stem}" for path in (ROOT / "shared").glob("*.py") if path.stem != "__init__")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        "shared", "kube", "plumbing", *PROCESSES, exclude_type_checking_imports=True, cache_dir=None
    )


def importers_of(graph: grimp.ImportGraph, module: str) -> list[str]:
    """The processes whose package imports `module`, through any chain of imports."""
    return [process for process in PROCESSES if graph.chain_exists(process, module, as_packages=True)]


IMPORTS_SEEN = [
    ("imported by both directly", [("webhook.app", "shared.a"), ("controller.runner", "shared.a")], PROCESSES),
    (
        "through kube/ and another shared module",
        [("webhook.app", "shared.b"), ("shared.b", "shared.a"), ("controller.x", "kube.y"), ("kube.y", "shared.a")],
        PROCESSES,
    ),
    ("by the controller alone", [("controller.options", "shared.a")], ("controller",)),
    ("an import the other way round does not count", [("shared.a", "webhook.app")], ()),
]


@pytest.mark.parametrize(("imports", "importers"), [c[1:] for c in IMPORTS_SEEN], ids=[c[0] for c in IMPORTS_SEEN])
def test_a_process_imports_a_module_through_any_chain(imports, importers) -> None:
    graph = grimp.ImportGraph()
    for package in ("webhook", "controller", "shared.a"):
        graph.add_module(package)
    for importer, imported in imports:
        graph.add_import(importer=importer, imported=imported)
    assert importers_of(graph, "shared.a") == list(importers)


def test_shared_has_modules() -> None:
    assert SHARED_MODULES, "no module found in shared/: is ROOT right?"


@pytest.mark.parametrize("module", SHARED_MODULES)
def test_every_shared_module_is_imported_by_both_processes(graph: grimp.ImportGraph, module: str) -> None:
    assert importers_of(graph, module) == list(PROCESSES), (
        f"{module} is not imported by both webhook/ and controller/: move it to the package that uses it "
        "(or to plumbing/ or kube/ by its kind)"
    )
