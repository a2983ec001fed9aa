"""Every port the product opens, against the real apiserver's TokenReview and SubjectAccessReview and
hostile callers (tests/support/hostile.py): the controller's --secure-port (controller/serving.py) and the
webhook's TLS port (gunicorn with the webhook's worker; /metrics checked by webhook/metrics_access.py).

Each runs as its own process on loopback, with its admin kubeconfig for the reviews; its callers are
ServiceAccounts of the test's namespace with tokens from the TokenRequest API, one bound to the ClusterRole
taintkeeper-metrics-reader as the manifest defines it. Each row says what the caller must get and within
how long; the last test holds 1,000 idle connections open while the probe's path is asked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from controller.serving import CONNECTION_DEADLINE, HANDSHAKE_TIMEOUT
from hack.servers import ControllerProcess, WebhookServer, free_port, make_certs
from kube.request import request_json
from tests.integration.kube import LocalCluster, wait_for
from tests.support import hostile
from tests.support.hostile import CLOSED, Outcome
from tests.support.metrics_callers import READER_ROLE, service_account_token

ROOT = Path(__file__).resolve().parents[2]
CONTROLLER_RBAC = ROOT / "manifests" / "base" / "controller-rbac.yaml"


# The webhook's worker closes a connection that has not sent its request within --request-timeout (10 s)
WEBHOOK_REQUEST_TIMEOUT = 10.0


@dataclass
class Served:
    component: str
    port: int
    pid: int
    tokens: dict[str, str]


def reader_role() -> dict:
    (role,) = [
        doc
        for doc in yaml.safe_load_all(CONTROLLER_RBAC.read_text())
        if doc and doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == READER_ROLE
    ]
    return role


@pytest.fixture(params=["controller", "webhook"])
def served(
    local_cluster: LocalCluster, namespace: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Served]:
    api = local_cluster.api_client
    rbac = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    try:
        request_json(api, "POST", rbac, body=reader_role(), timeout=30)
    except client.ApiException as error:
        if error.status != 409:
            raise
    tokens = {
        "reader": service_account_token(api, namespace, "reader", reader=True),
        "stranger": service_account_token(api, namespace, "stranger", reader=False),
        "revoked": service_account_token(api, namespace, "revoked", reader=False),
    }
    client.CoreV1Api(api).delete_namespaced_service_account("revoked", namespace)
    port = free_port()
    server: ControllerProcess | WebhookServer
    if request.param == "controller":
        server = ControllerProcess(
            local_cluster.kubeconfig,
            tmp_path / "controller.log",
            "--leader-elect=false",
            "--controllers=nodelifecycle",
            f"--secure-port={port}",
        ).start()
    else:
        make_certs(tmp_path / "certs")
        server = WebhookServer(
            tmp_path / "certs", tmp_path / "webhook.log", port=port, kubeconfig=local_cluster.kubeconfig
        )
        server.start()
    try:
        # The authorizer sees the new binding through its informers, a moment later.
        wait_for(
            lambda: hostile.tls_request(port, hostile.get("/metrics", tokens["reader"])).answer == "200",
            30,
            "the reader allowed",
        )
        assert server.process is not None
        yield Served(request.param, port, server.process.pid, tokens)
    finally:
        if isinstance(server, ControllerProcess):
            server.kill()
        else:
            server.stop()
        request_json(
            api, "DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{namespace}-reader", timeout=30
        )


# what is sent, what must come back, within how many seconds
ROWS = [
    ("no token", lambda s: hostile.tls_request(s.port, hostile.get("/metrics")), "401", 2),
    ("a forged token", lambda s: hostile.tls_request(s.port, hostile.get("/metrics", "forged.token.value")), "401", 2),
    (
        "a token whose ServiceAccount was deleted",
        lambda s: hostile.tls_request(s.port, hostile.get("/metrics", s.tokens["revoked"])),
        "401",
        2,
    ),
    (
        "a ServiceAccount without the role",
        lambda s: hostile.tls_request(s.port, hostile.get("/metrics", s.tokens["stranger"])),
        "403",
        2,
    ),
    (
        "the metrics reader",
        lambda s: hostile.tls_request(s.port, hostile.get("/metrics", s.tokens["reader"])),
        "200",
        2,
    ),
    ("a probe, no token", lambda s: hostile.tls_request(s.port, hostile.get("/healthz")), "200", 2),
    ("a probe, /livez", lambda s: hostile.tls_request(s.port, hostile.get("/livez")), "200", 2),
    ("a probe, /readyz", lambda s: hostile.tls_request(s.port, hostile.get("/readyz")), "200", 2),
    ("plain HTTP to the TLS port", lambda s: hostile.plain_http(s.port), CLOSED, 2),
    (
        "a TLS handshake that never comes",
        lambda s: hostile.silent_handshake(s.port),
        CLOSED,
        {"controller": HANDSHAKE_TIMEOUT + 2, "webhook": WEBHOOK_REQUEST_TIMEOUT + 2},
    ),
    (
        "101 headers",
        lambda s: hostile.tls_request(s.port, hostile.get("/healthz", extra=b"X-A: b\r\n" * 101)),
        "431",
        2,
    ),
    (
        "a 1 MiB header",
        lambda s: hostile.tls_request(s.port, hostile.get("/healthz", extra=b"X-A: " + b"b" * 2**20 + b"\r\n")),
        "431",
        2,
    ),
    (
        "a 1 GiB body announced, 1 MiB sent",
        lambda s: hostile.tls_request(
            s.port,
            f"POST {'/metrics' if s.component == 'controller' else '/mutate'} HTTP/1.1\r\nHost: x\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n"
            + b"x" * 2**20,
        ),
        {"controller": "405", "webhook": "400"},  # the controller serves no POST; /mutate's body is over its limit
        2,
    ),
    (
        "a request line past 64 KiB",
        lambda s: hostile.tls_request(s.port, b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n"),
        "414",
        2,
    ),
]


@pytest.mark.parametrize(("send", "answer", "within"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_each_caller_gets_its_answer_in_time(served: Served, send, answer, within) -> None:
    expected = answer[served.component] if isinstance(answer, dict) else answer
    limit = within[served.component] if isinstance(within, dict) else within
    outcome: Outcome = send(served)
    assert (outcome.answer, outcome.seconds < limit) == (expected, True), outcome


def test_a_thousand_idle_connections_leave_the_probes_answered_and_memory_bounded(served: Served) -> None:
    pid = served.pid
    before = hostile.rss_kib(pid)
    idle = hostile.idle_connections(served.port, 1000)
    try:
        assert len(idle) == 1000
        probes = [hostile.tls_request(served.port, hostile.get("/healthz")) for _ in range(5)]
        during = hostile.rss_kib(pid)
        reader = hostile.tls_request(served.port, hostile.get("/metrics", served.tokens["reader"]))
    finally:
        closed_by_server = [threading.Event() for _ in idle]

        def wait_closed(sock, event) -> None:
            sock.settimeout(CONNECTION_DEADLINE + 5)
            try:
                if sock.recv(1) == b"":
                    event.set()
            except OSError:
                event.set()
            finally:
                sock.close()

        started = time.monotonic()
        waiters = [threading.Thread(target=wait_closed, args=p) for p in zip(idle, closed_by_server, strict=True)]
        for waiter in waiters:
            waiter.start()
        for waiter in waiters:
            waiter.join()
        all_closed_in = time.monotonic() - started
    after = hostile.rss_kib(pid)
    print(
        f"\n{served.component}: 1,000 idle connections: probes {[p.answer for p in probes]} in at most "
        f"{max(p.seconds for p in probes):.2f}s; the reader's /metrics {reader.answer} in {reader.seconds:.2f}s; "
        f"RSS {before} KiB before, {during} during, {after} after; all closed by the server within "
        f"{all_closed_in:.1f}s"
    )
    assert [p.answer for p in probes] == ["200"] * 5 and max(p.seconds for p in probes) < 2
    assert reader.answer == "200"
    assert all(event.is_set() for event in closed_by_server)
    deadline = HANDSHAKE_TIMEOUT if served.component == "controller" else WEBHOOK_REQUEST_TIMEOUT
    assert all_closed_in < deadline + 5
    assert during - before < 64 * 1024, "1,000 idle connections cost at most 64 MiB"
