"""kube.identity: the User-Agent `COMPONENT/VERSION (POD_NAME)`, and that no API client can be made
without naming its component. That every client each process builds sends it on its requests is
an integration test against the real apiserver (tests/integration/test_user_agent.py)."""

from __future__ import annotations

import importlib.metadata
import socket
from pathlib import Path

import pytest

from kube import identity
from kube.client import make_api_client
from kube.identity import CERTS, CONTROLLER, WEBHOOK, user_agent
from tests.support.builders import kubeconfig_file

POD = "taintkeeper-controller-7d9f8-abcde"


# --- the string --------------------------------------------------------------------------------

HEADER_CASES = {
    "the pod's name from the downward API": ({"POD_NAME": POD}, POD),
    "outside a pod, the hostname": ({}, socket.gethostname()),
    "an empty POD_NAME is no name: the hostname": ({"POD_NAME": ""}, socket.gethostname()),
}


@pytest.mark.parametrize(("environ", "replica"), HEADER_CASES.values(), ids=HEADER_CASES.keys())
def test_the_user_agent_names_component_version_and_replica(environ: dict[str, str], replica: str) -> None:
    version = importlib.metadata.version("taintkeeper")
    assert user_agent(CONTROLLER, environ) == f"taintkeeper-controller/{version} ({replica})"


def test_the_user_agent_reads_pod_name_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", POD)
    assert user_agent(WEBHOOK).endswith(f" ({POD})")


def test_a_source_tree_never_installed_reports_version_0_0_0(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(_name: str) -> str:
        raise importlib.metadata.PackageNotFoundError("taintkeeper")

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    identity.package_version.cache_clear()
    try:
        assert user_agent(CERTS, {"POD_NAME": "p"}) == "taintkeeper-certs/0.0.0 (p)"
    finally:
        identity.package_version.cache_clear()


# --- every client names its component ----------------------------------------------------------
# That each process's clients send the User-Agent on real requests is shown against the real
# apiserver, by its audit log: tests/integration/test_user_agent.py.


def test_a_client_cannot_be_made_without_naming_its_component(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="component"):
        make_api_client(str(kubeconfig_file(tmp_path)))  # type: ignore[call-arg]
