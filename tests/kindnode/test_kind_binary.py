"""kind, built from its Go module (hack/upstream/kind) and cached beside the other binaries, as the kind
cluster's scripts use it (hack/lib/kind.sh): the release every place names, and a working command."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "local-cluster.sh"


def pinned() -> dict[str, str]:
    """The kind release as each place names it."""
    build = (ROOT / "hack" / "lib" / "build.sh").read_text()
    module = (ROOT / "hack" / "upstream" / "kind" / "go.mod").read_text()
    found = {
        "hack/lib/build.sh": re.search(r"^KIND_MODULE_VERSION=(\S+)$", build, re.M),
        "hack/upstream/kind/go.mod": re.search(r"^require sigs\.k8s\.io/kind v(\S+)$", module, re.M),
    }
    return {where: match.group(1) if match else "(none)" for where, match in found.items()}


def test_every_place_names_one_kind_release() -> None:
    assert len(set(pinned().values())) == 1, pinned()


def test_kind_is_built_from_its_module_and_reports_that_release(kind_binary: Path) -> None:
    kind = kind_binary  # built before the first test (tests/conftest.py)
    assert kind.is_file(), kind
    version = subprocess.run([str(kind), "version"], capture_output=True, text=True, timeout=30)
    release = pinned()["hack/lib/build.sh"]
    assert version.stdout.startswith(f"kind v{release} go1."), version
    again = subprocess.run(["bash", str(SCRIPT), "build-kind"], capture_output=True, text=True, timeout=60)
    assert (again.returncode, again.stdout.strip().splitlines()[-1], again.stderr) == (0, str(kind), "")  # cached
