"""The webhook's /metrics through the real kube-apiserver's TokenReview and SubjectAccessReview: only a caller
whose token the apiserver accepts and whom RBAC lets `get` the non-resource URL /metrics reads it; /mutate
and the probes are answered to all, without a token.

The webhook runs as `python -m webhook` with the admin kubeconfig (its own ServiceAccount's
system:auth-delegator binding is the manifests' concern, tests/integration/test_rbac.py); the callers are
ServiceAccounts with tokens from the TokenRequest API.
"""

from __future__ import annotations

import http.client
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client

from bench.review import mutation_problem, review_bytes
from hack.servers import WebhookServer, make_certs
from kube.client import REQUEST_TIMEOUT
from kube.request import request_json
from tests.integration.kube import LocalCluster, raw, wait_for

METRIC = "# TYPE taintkeeper_webhook_admission_duration_seconds histogram"


@pytest.fixture(scope="module")
def webhook(local_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    directory: Path = tmp_path_factory.mktemp("webhook-metrics-access")
    make_certs(directory)
    with WebhookServer(directory, directory / "webhook.log", kubeconfig=local_cluster.kubeconfig) as server:
        yield server


@pytest.fixture(scope="module")
def metrics_reader(local_cluster: LocalCluster) -> Iterator[str]:
    """A ClusterRole that may get the non-resource URL /metrics (as a Prometheus's role grants it)."""
    rbac = client.RbacAuthorizationV1Api(local_cluster.api_client)
    name = f"taintkeeper-test-metrics-reader-{uuid.uuid4().hex[:6]}"
    raw(
        rbac.create_cluster_role,
        body={"metadata": {"name": name}, "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
    )
    try:
        yield name
    finally:
        rbac.delete_cluster_role(name)


def allowed_metrics(local_cluster: LocalCluster, user: str) -> bool:
    review = request_json(
        local_cluster.api_client,
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "nonResourceAttributes": {"path": "/metrics", "verb": "get"}},
        },
        timeout=REQUEST_TIMEOUT,
    )
    return bool(review["status"].get("allowed"))


class Callers:
    """Tokens of new ServiceAccounts in `namespace`; the ClusterRoleBindings made for them deleted by `close`."""

    def __init__(self, local_cluster: LocalCluster, namespace: str) -> None:
        self.local_cluster, self.namespace = local_cluster, namespace
        self.core = client.CoreV1Api(local_cluster.api_client)
        self.rbac = client.RbacAuthorizationV1Api(local_cluster.api_client)
        self.bindings: list[str] = []

    def token(self, cluster_role: str | None) -> str:
        """A new ServiceAccount's token, the account bound to `cluster_role` (once the authorizer knows it)."""
        account = f"caller-{uuid.uuid4().hex[:6]}"
        raw(self.core.create_namespaced_service_account, self.namespace, body={"metadata": {"name": account}})
        if cluster_role is not None:
            binding = f"{self.namespace}-{account}"
            raw(
                self.rbac.create_cluster_role_binding,
                body={
                    "metadata": {"name": binding},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
                    "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": self.namespace}],
                },
            )
            self.bindings.append(binding)
            user = f"system:serviceaccount:{self.namespace}:{account}"
            # The authorizer sees a new binding through its informers, a moment later; asked before, the
            # webhook would keep the refusal for --authorization-webhook-cache-unauthorized-ttl.
            wait_for(lambda: allowed_metrics(self.local_cluster, user), 10, f"{user} allowed to get /metrics")
        return str(
            request_json(
                self.local_cluster.api_client,
                "POST",
                f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{account}/token",
                body={
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {"expirationSeconds": 600},
                },
                timeout=REQUEST_TIMEOUT,
            )["status"]["token"]
        )

    def close(self) -> None:
        for binding in self.bindings:
            self.rbac.delete_cluster_role_binding(binding)


@pytest.fixture
def callers(local_cluster: LocalCluster, namespace: str) -> Iterator[Callers]:
    made = Callers(local_cluster, namespace)
    try:
        yield made
    finally:
        made.close()


def get(webhook: WebhookServer, path: str, token: str | None) -> tuple[int, str]:
    connection = http.client.HTTPSConnection("127.0.0.1", webhook.port, context=webhook.ssl_context(), timeout=15)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


@dataclass(frozen=True)
class Case:
    path: str
    caller: str  # "none": no token; "garbage": a token no one issued; "account": a ServiceAccount's; "reader": bound
    status: int
    says: str


CASES = {
    "no token: 401": Case("/metrics", "none", 401, "Unauthorized: a bearer token is needed for /metrics"),
    "a token no one issued: 401": Case("/metrics", "garbage", 401, "Unauthorized"),
    "a ServiceAccount without the role: 403": Case("/metrics", "account", 403, 'cannot get path "/metrics"'),
    "a ServiceAccount allowed to get /metrics: 200 with the metrics": Case("/metrics", "reader", 200, METRIC),
    "/healthz without a token: 200": Case("/healthz", "none", 200, "ok"),
    "/readyz without a token: 200": Case("/readyz", "none", 200, "ok"),
    "/livez without a token: 200": Case("/livez", "none", 200, "ok"),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_who_may_read_the_webhooks_endpoints(webhook: WebhookServer, callers: Callers, metrics_reader: str, case: Case):
    token = {
        "none": lambda: None,
        "garbage": lambda: "not-a-token-anyone-issued",
        "account": lambda: callers.token(None),
        "reader": lambda: callers.token(metrics_reader),
    }[case.caller]()
    status, body = get(webhook, case.path, token)
    assert (status, case.says in body) == (case.status, True), body[:500]


def test_mutate_is_answered_without_a_token(webhook: WebhookServer):
    connection = http.client.HTTPSConnection("127.0.0.1", webhook.port, context=webhook.ssl_context(), timeout=15)
    try:
        connection.request("POST", "/mutate", body=review_bytes(), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200 and mutation_problem(response.read()) is None
    finally:
        connection.close()
