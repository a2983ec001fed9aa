"""The chart and the helm that renders it: helm is built from its Go module (hack/upstream/helm) by
`hack/local-cluster.sh build-helm` and cached beside the Kubernetes binaries, once per machine."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from hack.registry import RegistryError, built_helm

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "taintkeeper"
APP_VERSION = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])  # the image's default tag
EXAMPLES = sorted((CHART / "examples").glob("*.yaml"))
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
SCRIPT = ROOT / "hack" / "local-cluster.sh"
RELEASE = "taintkeeper"
NAMESPACE = "taintkeeper-system"  # the release's, as docs/operating.md installs it; a test may give another

Identity = tuple[str, str | None, str]  # kind, namespace, name

_built: dict[str, Path | str] = {}  # "helm": its path, or "error": why it could not be built


def build_helm() -> Path:
    """helm's path, built on the first call of a session (minutes on a machine where it is not cached)."""
    if not _built:
        try:
            _built["helm"] = built_helm()
        except RegistryError as error:
            _built["error"] = str(error)
    if "error" in _built:
        raise RuntimeError(_built["error"])
    return Path(_built["helm"])


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120)


def values_file(directory: Path, values: dict[str, Any], name: str = "values.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


def template(helm: Path, *args: str, chart: Path = CHART) -> subprocess.CompletedProcess[str]:
    """`helm template` of the chart in NAMESPACE with these extra arguments (-f FILE, --set ...; a later
    --namespace wins)."""
    return run_helm(helm, "template", RELEASE, str(chart), "--namespace", NAMESPACE, *args)


def render(helm: Path, *args: str, chart: Path = CHART) -> list[dict[str, Any]]:
    """The objects `helm template` makes; a render that fails fails the test with helm's message."""
    result = template(helm, *args, chart=chart)
    assert result.returncode == 0, f"helm template {' '.join(args)}:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def by_identity(docs: list[dict[str, Any]]) -> dict[Identity, dict[str, Any]]:
    found: dict[Identity, dict[str, Any]] = {}
    for doc in docs:
        key = (doc["kind"], doc["metadata"].get("namespace"), doc["metadata"]["name"])
        assert key not in found, f"{key} rendered twice"
        found[key] = doc
    return found


def container_args(docs: list[dict[str, Any]], deployment: str) -> list[str]:
    """The args of the one container of Deployment `deployment`."""
    (found,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == deployment]
    (container,) = found["spec"]["template"]["spec"]["containers"]
    return [str(arg) for arg in container["args"]]
