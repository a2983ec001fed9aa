"""kube.identity: the User-Agent `COMPONENT/VERSION (POD_NAME)`, and that every API client each
process builds sends it - checked on real requests to a local HTTP server that records their headers."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes import client

import certs.sync
import controller.explain
from controller.options import parse_options
from controller.runner import controller_api_client
from kube import identity
from kube.client import make_api_client
from kube.identity import CERTS, CONTROLLER, EXPLAIN, WEBHOOK, user_agent
from kube.leader import LeaseClient
from kube.request import request_json
from webhook.namespaces import client_source
from webhook.settings import WebhookSettings

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


# --- every client each process builds sends it -------------------------------------------------

class RecordingServer(ThreadingHTTPServer):
    """Answers every request 404 (a Kubernetes Status) and keeps each request's User-Agent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), RecordingHandler)
        self.user_agents: list[str] = []


class RecordingHandler(BaseHTTPRequestHandler):
    server: RecordingServer

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.user_agents.append(self.headers.get("User-Agent", ""))
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                           "code": 404, "message": "not found"}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:  # quiet: pytest shows what a test logs
        pass


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    recording = RecordingServer()
    thread = threading.Thread(target=recording.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield recording
    recording.shutdown()
    recording.server_close()
    thread.join()


@pytest.fixture
def kubeconfig(tmp_path: Path, server: RecordingServer) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    return str(path)


def get_a_node(api: client.ApiClient) -> None:
    with contextlib.suppress(client.ApiException):  # 404: the request was made, that is all
        request_json(api, "GET", "/api/v1/nodes/n", timeout=5)


def controller_requests(kubeconfig: str) -> None:
    api = controller_api_client(parse_options(["--kubeconfig", kubeconfig]))
    try:
        get_a_node(api)  # informers, event recorders and the API edges share this client
    finally:
        api.close()


def leader_election_requests(kubeconfig: str) -> None:
    api = controller_api_client(parse_options(["--kubeconfig", kubeconfig]))
    lease_client = LeaseClient(api)  # its own ApiClient, copied from the controller's
    try:
        assert lease_client.get("taintkeeper-controller", "taintkeeper-system") is None
    finally:
        lease_client.close()
        api.close()


def webhook_requests(kubeconfig: str) -> None:
    factory, _source = client_source(WebhookSettings(namespace_cache=True, kubeconfig=kubeconfig))
    assert factory is not None
    api = factory()  # what the namespace cache lists and watches with
    try:
        with pytest.raises(client.ApiException):
            client.CoreV1Api(api).list_namespace(_request_timeout=5)
    finally:
        api.close()


def certs_sync_requests(kubeconfig: str) -> None:
    assert certs.sync.main(["--kubeconfig", kubeconfig]) == 1  # the Secret cannot be written: one round, failed


def explain_requests(kubeconfig: str) -> None:
    assert controller.explain.main(["--node", "n", "--kubeconfig", kubeconfig]) == 1  # no such node


@dataclass(frozen=True)
class ProcessCase:
    requests: Callable[[str], None]
    component: str


PROCESS_CASES = {
    "the controller": ProcessCase(controller_requests, CONTROLLER),
    "the controller's leader election (its own ApiClient)": ProcessCase(leader_election_requests, CONTROLLER),
    "the webhook's namespace cache": ProcessCase(webhook_requests, WEBHOOK),
    "python -m certs sync": ProcessCase(certs_sync_requests, CERTS),
    "python -m controller explain": ProcessCase(explain_requests, EXPLAIN),
}


@pytest.mark.parametrize("case", PROCESS_CASES.values(), ids=PROCESS_CASES.keys())
def test_every_request_a_process_makes_names_it_and_its_replica(case: ProcessCase, server: RecordingServer,
                                                                kubeconfig: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", POD)
    case.requests(kubeconfig)
    expected = f"{case.component}/{importlib.metadata.version('taintkeeper')} ({POD})"
    assert server.user_agents and set(server.user_agents) == {expected}


def test_a_client_cannot_be_made_without_naming_its_component(kubeconfig: str) -> None:
    with pytest.raises(TypeError, match="component"):
        make_api_client(kubeconfig)  # type: ignore[call-arg]
