"""kube/identity.py on the real apiserver: every request each process makes names the process and its
replica, `COMPONENT/VERSION (POD_NAME)`, as kube-apiserver's own audit log records it.

Each case runs one process's API client (in this process, with a POD_NAME of its own) against the
session's apiserver with the admin kubeconfig; a request answered 403 or 404 counts as much as one
answered 200. Then the audit log (tests/integration/conftest.py starts the apiserver with `--audit`)
must hold at least one request with exactly that User-Agent, and no request naming that POD_NAME
in any other form.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from kubernetes import client

import certs.sync
import kubectl_taintkeeper.explain
from controller.options import parse_options
from controller.runner import controller_api_client
from kube.identity import CERTS, CONTROLLER, EXPLAIN, WEBHOOK
from kube.leader import LeaseClient
from kube.request import request_json
from tests.integration.kube import LocalCluster, audit_events
from webhook.namespaces import client_source
from webhook.settings import WebhookSettings


@dataclass(frozen=True)
class Target:
    kubeconfig: str  # the session's admin kubeconfig
    namespace: str  # the test's own: whatever a process writes goes there
    missing: str  # a name no object has


def controller_requests(target: Target) -> None:
    api = controller_api_client(parse_options(["--kubeconfig", target.kubeconfig]))
    try:  # the informers, event recorders and API edges all share this one client
        with contextlib.suppress(client.ApiException):  # 404: the request was made, that is all
            request_json(api, "GET", f"/api/v1/nodes/{target.missing}", timeout=5)
    finally:
        api.close()


def leader_election_requests(target: Target) -> None:
    api = controller_api_client(parse_options(["--kubeconfig", target.kubeconfig]))
    lease_client = LeaseClient(api)  # its own ApiClient, copied from the controller's
    try:
        assert lease_client.get(target.missing, target.namespace) is None
    finally:
        lease_client.close()
        api.close()


def webhook_requests(target: Target) -> None:
    factory, _source = client_source(WebhookSettings(namespace_cache=True, kubeconfig=target.kubeconfig))
    assert factory is not None
    api = factory()  # what the namespace cache lists and watches with
    try:
        client.CoreV1Api(api).list_namespace(limit=1, _request_timeout=5)
    finally:
        api.close()


def certs_sync_requests(target: Target) -> None:
    # The Secret is written into the test's namespace; the webhook configuration does not exist: one round, failed.
    assert (
        certs.sync.main(
            [
                "--kubeconfig",
                target.kubeconfig,
                "--namespace",
                target.namespace,
                "--webhook-configuration",
                target.missing,
            ]
        )
        == 1
    )


def explain_requests(target: Target) -> None:
    # no such node: exit 1
    assert kubectl_taintkeeper.explain.main(["--node", target.missing, "--kubeconfig", target.kubeconfig]) == 1


@dataclass(frozen=True)
class ProcessCase:
    requests: Callable[[Target], None]
    component: str


PROCESS_CASES = {
    "the controller": ProcessCase(controller_requests, CONTROLLER),
    "the controller's leader election (its own ApiClient)": ProcessCase(leader_election_requests, CONTROLLER),
    "the webhook's namespace cache": ProcessCase(webhook_requests, WEBHOOK),
    "python -m certs sync": ProcessCase(certs_sync_requests, CERTS),
    "python -m controller explain": ProcessCase(explain_requests, EXPLAIN),
}


@pytest.mark.parametrize("case", PROCESS_CASES.values(), ids=PROCESS_CASES.keys())
def test_every_request_a_process_makes_names_it_and_its_replica(
    case: ProcessCase, local_cluster: LocalCluster, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    replica = f"ua-{uuid.uuid4().hex}"
    monkeypatch.setenv("POD_NAME", replica)
    case.requests(Target(str(local_cluster.kubeconfig), namespace, f"absent-{uuid.uuid4().hex[:10]}"))
    expected = f"{case.component}/{importlib.metadata.version('taintkeeper')} ({replica})"
    seen = [
        (event["verb"], event["requestURI"], event["responseStatus"]["code"], event["userAgent"])
        for event in audit_events(local_cluster, replica)
    ]
    print("\n".join(f"{verb} {uri} -> {code}: {agent}" for verb, uri, code, agent in seen))
    assert seen, f"no request in the audit log names {replica}"
    assert {agent for _verb, _uri, _code, agent in seen} == {expected}
