"""Who may read the deployed pods' /metrics (docs/operating.md, "Who may read the controller's and the
webhook's ports"): each controller and webhook replica, called from the host by its pod IP over TLS.

Anonymous callers and a ServiceAccount without the ClusterRole taintkeeper-metrics-reader are refused (401,
403); one bound to it reads the metrics; the probes' paths answer anyone. The Prometheus of
tests/e2e/test_dashboard.py scrapes both components with such a token.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest

from tests.e2e.cluster import SYSTEM_NAMESPACE, E2ECluster, wait_for
from tests.support.metrics_callers import delete_reader_binding, get_status, service_account_token

PORTS = {"controller": 10257, "webhook": 8443}


@pytest.fixture
def tokens(e2e: E2ECluster, namespace: str) -> Iterator[dict[str, str]]:
    made = {
        "reader": service_account_token(e2e.api_client, namespace, "reader", reader=True),
        "stranger": service_account_token(e2e.api_client, namespace, "stranger", reader=False),
    }
    yield made
    delete_reader_binding(e2e.api_client, namespace, "reader")


def endpoints(e2e: E2ECluster, component: str) -> list[str]:
    pods = e2e.raw(
        e2e.core.list_namespaced_pod, SYSTEM_NAMESPACE, label_selector=f"app.kubernetes.io/component={component}"
    )["items"]
    return [
        f"{pod['status']['podIP']}:{PORTS[component]}"
        for pod in pods
        if pod["status"].get("phase") == "Running" and pod["status"].get("podIP")
    ]


def reads(endpoint: str, path: str, token: str | None) -> bool:
    return get_status(endpoint, path, token) == 200


CALLS = [
    ("no token is 401", "/metrics", None, 401),
    ("a forged token is 401", "/metrics", "forged", 401),
    ("a ServiceAccount without the role is 403", "/metrics", "stranger", 403),
    ("the metrics reader reads them", "/metrics", "reader", 200),
    ("the readiness probe's path answers anyone", "/readyz", None, 200),
    ("the liveness probe's path answers anyone", "/healthz", None, 200),
]


@pytest.mark.parametrize("component", sorted(PORTS))
def test_only_the_metrics_reader_reads_the_metrics(e2e: E2ECluster, tokens: dict[str, str], component: str) -> None:
    found = wait_for(lambda: endpoints(e2e, component) or None, 120, f"a running {component} replica")
    answers = {}
    for endpoint in found:
        for what, path, who, _ in CALLS:
            token = tokens.get(who, who) if who else None
            # RBAC bindings take a moment to reach the authorizer's cache: wait for the reader, never for a refusal
            if who == "reader":
                wait_for(functools.partial(reads, endpoint, path, token), 30, f"{endpoint}{path} as the reader")
            answers[(endpoint, what)] = get_status(endpoint, path, token)
    expected = {(endpoint, what): status for endpoint in found for what, _, _, status in CALLS}
    assert answers == expected
