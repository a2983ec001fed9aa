"""The webhook's /metrics answered only to callers the apiserver authenticates and authorizes
(webhook/metrics_access.py), with the two reviews answered in process; /mutate and the probes to all."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from bench.review import mutation_problem, review_bytes
from kube.reviews import AccessAnswer, Caller, TokenAnswer
from plumbing.auth_settings import AuthSettings
from webhook.app import create_app
from webhook.metrics_access import MetricsAccess
from webhook.settings import WebhookSettings

PROMETHEUS = Caller("system:serviceaccount:monitoring:prometheus", groups=("system:serviceaccounts",))
STRANGER = Caller("system:serviceaccount:default:stranger")
TOKENS = {"prometheus-token": PROMETHEUS, "stranger-token": STRANGER}
UNREACHABLE = "token-while-the-apiserver-is-down"
METRIC = b"taintkeeper_webhook_admission_reviews_total"


@dataclass
class InProcessReviews:
    """The apiserver's answers: TOKENS are authenticated; only PROMETHEUS may get /metrics."""

    asked: list[str] = field(default_factory=list)

    def review_token(self, token: str) -> TokenAnswer:
        self.asked.append("TokenReview")
        if token == UNREACHABLE:
            raise ConnectionRefusedError(111, "Connection refused")
        caller = TOKENS.get(token)
        return TokenAnswer(caller) if caller else TokenAnswer(None, "[invalid bearer token]")

    def review_access(self, caller: Caller, path: str, verb: str) -> AccessAnswer:
        self.asked.append(f"SubjectAccessReview {caller.name} {verb} {path}")
        return AccessAnswer(caller == PROMETHEUS and (path, verb) == ("/metrics", "get"))


@dataclass(frozen=True)
class Case:
    path: str
    headers: dict[str, str]
    status: int
    says: bytes  # in the body
    reviews: bool = True  # False: no cluster client
    always_allow: tuple[str, ...] = AuthSettings().always_allow_paths


NO_CLIENT = "no --kubeconfig given and not running in a cluster"
CASES = {
    "no token: 401": Case("/metrics", {}, 401, b"Unauthorized: a bearer token is needed for /metrics"),
    "another scheme than Bearer: 401": Case("/metrics", {"Authorization": "Basic dXNlcjpwYXNz"}, 401, b"bearer token"),
    "a token the apiserver does not accept: 401": Case(
        "/metrics", {"Authorization": "Bearer garbage"}, 401, b"Unauthorized: [invalid bearer token]"
    ),
    "the apiserver not answering the TokenReview: 401": Case(
        "/metrics", {"Authorization": f"Bearer {UNREACHABLE}"}, 401, b"the token could not be checked"
    ),
    "a caller the apiserver does not authorize: 403": Case(
        "/metrics",
        {"Authorization": "Bearer stranger-token"},
        403,
        b'Forbidden: user "system:serviceaccount:default:stranger" cannot get path "/metrics"',
    ),
    "a caller authorized to get /metrics: 200 with the metrics": Case(
        "/metrics", {"Authorization": "Bearer prometheus-token"}, 200, METRIC
    ),
    "/metrics always allowed: 200 without a token": Case(
        "/metrics", {}, 200, METRIC, always_allow=("/healthz", "/metrics")
    ),
    "/metrics always allowed by a prefix: 200 without a token": Case(
        "/metrics", {}, 200, METRIC, always_allow=("/m*",)
    ),
    "no cluster client: 403 saying why": Case(
        "/metrics", {"Authorization": "Bearer prometheus-token"}, 403, NO_CLIENT.encode(), reviews=False
    ),
    "no cluster client, /metrics always allowed: 200": Case(
        "/metrics", {}, 200, METRIC, reviews=False, always_allow=("/metrics",)
    ),
    "/healthz without a token: 200": Case("/healthz", {}, 200, b"ok"),
    "/readyz without a token: 200": Case("/readyz", {}, 200, b"ok"),
    "/livez without a token: 200": Case("/livez", {}, 200, b"ok"),
    "the probes without a token, none always allowed: 200": Case("/livez", {}, 200, b"ok", always_allow=()),
    "the probes without a token or a cluster client: 200": Case(
        "/healthz", {}, 200, b"ok", reviews=False, always_allow=()
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_who_may_read_the_webhooks_endpoints(case: Case):
    settings = AuthSettings(always_allow_paths=case.always_allow)
    access = MetricsAccess(settings, InProcessReviews() if case.reviews else None, NO_CLIENT)
    response = (
        create_app(WebhookSettings(auth=settings), metrics_access=access)
        .test_client()
        .get(case.path, headers=case.headers)
    )
    assert (response.status_code, case.says in response.data) == (case.status, True), response.data[:300]


def test_mutate_is_answered_without_a_token_and_asks_the_apiserver_nothing():
    reviews = InProcessReviews()
    access = MetricsAccess(AuthSettings(always_allow_paths=()), reviews)
    client = create_app(WebhookSettings(), metrics_access=access).test_client()
    response = client.post("/mutate", data=review_bytes(), content_type="application/json")
    assert response.status_code == 200 and mutation_problem(response.data) is None
    assert reviews.asked == []


def test_a_scrape_every_few_seconds_costs_one_review_of_each_kind_per_ttl():
    reviews = InProcessReviews()
    client = create_app(WebhookSettings(), metrics_access=MetricsAccess(AuthSettings(), reviews)).test_client()
    for _ in range(3):
        assert client.get("/metrics", headers={"Authorization": "Bearer prometheus-token"}).status_code == 200
    assert reviews.asked == ["TokenReview", f"SubjectAccessReview {PROMETHEUS.name} get /metrics"]


def test_outside_a_cluster_without_a_kubeconfig_metrics_are_refused_saying_why(monkeypatch):
    monkeypatch.setattr("webhook.namespaces.in_cluster_available", lambda: False)
    response = create_app(WebhookSettings()).test_client().get("/metrics")
    assert response.status_code == 403
    assert response.data.decode() == (
        "Forbidden: /metrics is answered to callers the apiserver checks, and the webhook has no cluster client "
        f"({NO_CLIENT}); --authorization-always-allow-paths can open it to all"
    )
