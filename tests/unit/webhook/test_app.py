"""webhook.app over HTTP (Flask's test client): status codes, errors, metrics, logs; with the fast paths
(webhook/fast_paths.py) on and off, the same."""

import base64
import json
import logging
import threading
import time

import pytest
from flask import Response
from werkzeug.test import EnvironBuilder

from plumbing.auth_settings import ALWAYS_ALLOW_PATHS, AuthSettings
from plumbing.log_formats import JsonFormatter
from shared.defaults import DefaultSeconds
from webhook import codec
from webhook import fast_paths as fast_paths_module
from webhook.app import create_app, namespace_cache_of
from webhook.namespaces import NamespaceCache, namespace_view
from webhook.settings import WebhookSettings


def pod_review(uid="uid-1", tolerations=None):
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "operation": "CREATE",
            "namespace": "team-a",
            "name": "web-0",
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "object": {"metadata": {"name": "web-0"}, "spec": spec},
        },
    }


CAP = 300_000
# These tests read the counts, not who may read them (test_metrics_access.py): /metrics is open to all here.
METRICS_OPEN = AuthSettings(always_allow_paths=(*ALWAYS_ALLOW_PATHS, "/metrics"))


@pytest.fixture
def client(fast_paths):
    return create_app(WebhookSettings(max_request_bytes=CAP, fast_paths=fast_paths, auth=METRICS_OPEN)).test_client()


def test_a_pod_review_is_answered_with_a_patch(client):
    response = client.post("/mutate", json=pod_review())
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert body["response"]["uid"] == "uid-1"
    patch = json.loads(base64.b64decode(body["response"]["patch"]))
    assert [t["key"] for t in patch[0]["value"]] == ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]


BAD_REQUESTS = [
    ("not JSON", {"data": "{not json", "content_type": "application/json"}, "not valid JSON"),
    ("a wrong content type", {"data": json.dumps(pod_review()), "content_type": "text/plain"}, "Content-Type"),
    ("no content type", {"data": json.dumps(pod_review())}, "Content-Type"),
    (
        "a body over the size cap",
        {"data": json.dumps(pod_review(tolerations=[{"key": "k" * CAP}])), "content_type": "application/json"},
        f"larger than {CAP} bytes",
    ),
    ("not an AdmissionReview", {"json": {"kind": "Pod"}}, "apiVersion"),
    ("no request", {"json": {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}}, "request"),
    ("no uid", {"json": {**pod_review(), "request": {**pod_review()["request"], "uid": None}}}, "uid"),
    (
        "an object that is not an object",
        {"json": {**pod_review(), "request": {**pod_review()["request"], "object": [1]}}},
        "request.object",
    ),
    (
        "JSON nested too deeply to parse",
        {"data": "[" * 100_000 + "]" * 100_000, "content_type": "application/json"},
        "not valid JSON",
    ),
    ("invalid UTF-8", {"data": b"\xff\xfe{}", "content_type": "application/json"}, "not valid JSON"),
]


@pytest.mark.parametrize("kwargs,message", [c[1:] for c in BAD_REQUESTS], ids=[c[0] for c in BAD_REQUESTS])
def test_malformed_input_gets_400_with_a_json_message(client, kwargs, message):
    response = client.post("/mutate", **kwargs)
    assert response.status_code == 400
    assert message in response.get_json()["error"]


def test_health_and_readiness(client):
    assert client.get("/healthz").data == b"ok"
    assert client.get("/readyz").data == b"ok"


def test_readiness_is_refused_while_the_namespace_cache_has_not_listed():
    """A replica rolled in by an upgrade takes no admissions before it knows the namespaces' seconds."""
    stalled = threading.Event()

    def hanging_list(**kwargs):
        stalled.wait(30)  # the first LIST never answers while the test runs
        raise ConnectionRefusedError(111, "refused")

    cache = NamespaceCache(DefaultSeconds(300, 300), lambda: hanging_list, "a stalled API")
    app = create_app(namespace_cache=cache)
    try:
        response = app.test_client().get("/readyz")
        assert response.status_code == 503
        assert b"namespace cache not synced yet" in response.data
    finally:
        stalled.set()
        cache.stop()


def metric_value(client, name, labels=""):
    response = client.get("/metrics")
    assert response.status_code == 200, response.data
    for line in response.data.decode().splitlines():
        if line.startswith(f"{name}{labels} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.split()[-1])
    return 0.0


def test_metrics_count_outcomes_added_tolerations_and_latency(client):
    before_patched = metric_value(client, "taintkeeper_webhook_admission_reviews_total", '{outcome="patched"}')
    before_bad = metric_value(client, "taintkeeper_webhook_admission_reviews_total", '{outcome="bad_request"}')
    before_added = metric_value(
        client, "taintkeeper_webhook_tolerations_added_total", '{key="node.kubernetes.io/unreachable"}'
    )
    before_count = metric_value(client, "taintkeeper_webhook_admission_duration_seconds_count")
    client.post("/mutate", json=pod_review())
    client.post("/mutate", json=pod_review(tolerations=[{"operator": "Exists"}]))
    client.post("/mutate", data="x", content_type="application/json")
    assert (
        metric_value(client, "taintkeeper_webhook_admission_reviews_total", '{outcome="patched"}') == before_patched + 1
    )
    assert (
        metric_value(client, "taintkeeper_webhook_admission_reviews_total", '{outcome="bad_request"}') == before_bad + 1
    )
    assert (
        metric_value(client, "taintkeeper_webhook_tolerations_added_total", '{key="node.kubernetes.io/unreachable"}')
        == before_added + 1
    )
    assert metric_value(client, "taintkeeper_webhook_admission_duration_seconds_count") == before_count + 2


def test_a_mutation_is_logged_with_uid_namespace_and_pod(client, caplog):
    caplog.set_level(logging.INFO, logger="taintkeeper.webhook")
    client.post("/mutate", json=pod_review(uid="abc-123"))
    record = next(r for r in caplog.records if r.name == "taintkeeper.webhook")
    entry = json.loads(JsonFormatter().format(record))
    assert entry["uid"] == "abc-123"
    assert entry["namespace"] == "team-a"
    assert entry["pod"] == "web-0"
    assert entry["severity"] == "info"
    assert "not-ready" in entry["message"]


# -- per-namespace defaults through the namespace cache --------------------------------------------

NR = "node.kubernetes.io/not-ready"
UR = "node.kubernetes.io/unreachable"
NR_ANNOTATION = "taintkeeper.io/not-ready-toleration-seconds"
UR_ANNOTATION = "taintkeeper.io/unreachable-toleration-seconds"
CLUSTER = DefaultSeconds(301, 302)


class SyncedCache(NamespaceCache):
    """A namespace cache that has synced these namespaces (no watch: views are put in its store)."""

    def __init__(self, namespaces: dict[str, dict]) -> None:
        super().__init__(CLUSTER, None, "a test")
        self.views = {
            name: namespace_view({"metadata": {"name": name, **metadata}}, CLUSTER)
            for name, metadata in namespaces.items()
        }
        self.starts = 0

    def ensure_started(self) -> None:
        self.starts += 1

    def lookup(self, namespace: str):
        view = self.views.get(namespace)
        return None if view is None else view.defaults


def app_with(cache, fast_paths=True):
    return create_app(
        WebhookSettings(
            not_ready_seconds=CLUSTER.not_ready,
            unreachable_seconds=CLUSTER.unreachable,
            fast_paths=fast_paths,
            auth=METRICS_OPEN,
        ),
        namespace_cache=cache,
    ).test_client()


def added_tolerations(body):
    if "patch" not in body["response"]:
        return None
    patch = json.loads(base64.b64decode(body["response"]["patch"]))
    return {t["key"]: t["tolerationSeconds"] for t in patch[0]["value"]}


NAMESPACE_CASES = [
    (
        "both annotations override both keys",
        {"annotations": {NR_ANNOTATION: "30", UR_ANNOTATION: "45"}},
        {NR: 30, UR: 45},
        0,
    ),
    ("the not-ready annotation overrides only not-ready", {"annotations": {NR_ANNOTATION: "30"}}, {NR: 30, UR: 302}, 0),
    (
        "the unreachable annotation overrides only unreachable",
        {"annotations": {UR_ANNOTATION: "45"}},
        {NR: 301, UR: 45},
        0,
    ),
    (
        "an invalid annotation falls back to the cluster default with a warning",
        {"annotations": {NR_ANNOTATION: "soon", UR_ANNOTATION: "45"}},
        {NR: 301, UR: 45},
        1,
    ),
    ("a namespace labelled skip=true gets no patch", {"labels": {"taintkeeper.io/skip": "true"}}, None, 0),
    ("a namespace the cache has not seen gets the cluster defaults", None, {NR: 301, UR: 302}, 0),
]


@pytest.mark.parametrize(
    ("metadata", "added", "warnings"), [c[1:] for c in NAMESPACE_CASES], ids=[c[0] for c in NAMESPACE_CASES]
)
def test_namespace_defaults_over_http(metadata, added, warnings, fast_paths):
    client = app_with(SyncedCache({} if metadata is None else {"team-a": metadata}), fast_paths)
    body = client.post("/mutate", json=pod_review()).get_json()
    assert added_tolerations(body) == added
    assert len(body["response"].get("warnings", [])) == warnings


def test_an_invalid_annotation_is_a_response_warning_and_a_warning_log_line(caplog, fast_paths):
    caplog.set_level(logging.INFO, logger="taintkeeper.webhook")
    client = app_with(SyncedCache({"team-a": {"annotations": {UR_ANNOTATION: "-5"}}}), fast_paths)
    body = client.post("/mutate", json=pod_review(uid="uid-7")).get_json()
    (warning,) = body["response"]["warnings"]
    assert UR_ANNOTATION in warning and "'-5'" in warning and "302" in warning
    record = next(r for r in caplog.records if r.levelno == logging.WARNING and r.name == "taintkeeper.webhook")
    entry = json.loads(JsonFormatter().format(record))
    assert (entry["uid"], entry["namespace"], entry["pod"]) == ("uid-7", "team-a", "web-0")
    assert UR_ANNOTATION in entry["message"]


def test_a_skipped_namespace_counts_as_skipped(fast_paths):
    client = app_with(SyncedCache({"team-a": {"labels": {"taintkeeper.io/skip": "true"}}}), fast_paths)
    before = metric_value(client, "taintkeeper_webhook_admission_reviews_total", '{outcome="skipped"}')
    client.post("/mutate", json=pod_review())
    assert metric_value(client, "taintkeeper_webhook_admission_reviews_total", '{outcome="skipped"}') == before + 1


def test_a_pod_labelled_skip_true_gets_no_patch(fast_paths):
    review = pod_review()
    review["request"]["object"]["metadata"]["labels"] = {"taintkeeper.io/skip": "true"}
    body = app_with(SyncedCache({}), fast_paths).post("/mutate", json=review).get_json()
    assert body["response"] == {"uid": "uid-1", "allowed": True}


def test_a_cache_that_has_not_synced_gives_the_cluster_defaults_without_warnings_or_waiting():
    calls = threading.Event()

    def refused(**kwargs):
        calls.set()
        raise ConnectionRefusedError(111, "Connection refused")

    cache = NamespaceCache(CLUSTER, lambda: refused, "an unreachable API")
    client = app_with(cache)
    try:
        started = time.perf_counter()
        body = client.post("/mutate", json=pod_review()).get_json()
        assert time.perf_counter() - started < 1
        assert calls.wait(5)  # the first review started the watch, which is failing
        body = client.post("/mutate", json=pod_review()).get_json()
        assert added_tolerations(body) == {NR: 301, UR: 302}
        assert "warnings" not in body["response"]
        assert not cache.synced
    finally:
        cache.stop()


def test_making_the_app_starts_no_watch_the_first_review_does():
    cache = SyncedCache({})
    client = app_with(cache)
    assert cache.starts == 0
    client.post("/mutate", json=pod_review())
    assert cache.starts == 1


def test_a_test_app_has_no_namespace_cache():
    assert namespace_cache_of(create_app(WebhookSettings())).enabled is False


# -- the answer and the body, made and read without Flask's proxies and werkzeug's checks --------------------

ANSWERS = [
    (
        "a verdict",
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": "u", "allowed": True, "patchType": "JSONPatch", "patch": "W10="},
        },
        200,
    ),
    ("an error", {"error": "request body is larger than 3 bytes"}, 400),
    ("non-ASCII", {"error": "ünï ✓"}, 400),
    ("an empty object", {}, 200),
    ("a status made the usual way", {"error": "x"}, 500),
]


@pytest.mark.parametrize(("body", "status"), [c[1:] for c in ANSWERS], ids=[c[0] for c in ANSWERS])
def test_a_json_answer_is_the_response_werkzeug_makes(body, status, fast_paths):
    make = fast_paths_module.FastPaths(fast_paths).json_response
    made = make(codec.dumps(body), status)
    expected = Response(codec.dumps(body), status=status, content_type="application/json")
    # so the direct way is the one tested with the switch on
    assert (make is fast_paths_module._json_response_made_directly) is fast_paths
    assert type(made) is type(expected)
    assert list(made.headers.items()) == list(expected.headers.items())  # in order
    assert {k: v for k, v in vars(made).items() if k != "headers"} == {
        k: v for k, v in vars(expected).items() if k != "headers"
    }
    environ = EnvironBuilder(method="POST", path="/mutate").get_environ()
    assert made.get_wsgi_response(environ)[1:] == expected.get_wsgi_response(environ)[1:]
    assert made.get_data() == expected.get_data()


def test_a_json_answer_is_not_shared_between_requests(fast_paths):
    make = fast_paths_module.FastPaths(fast_paths).json_response
    first, second = make(b'{"a":1}', 200), make(b'{"a":1}', 200)
    first.headers["X-Changed"] = "1"
    first.call_on_close(lambda: None)
    assert "X-Changed" not in second.headers and second._on_close == []


REQUESTS = [
    ("a pod to patch", {"json": pod_review()}),
    ("a pod left alone", {"json": pod_review(tolerations=[{"operator": "Exists"}])}),
    ("not JSON", {"data": "{not json", "content_type": "application/json"}),
    ("a wrong content type", {"data": "{}", "content_type": "text/plain"}),
    ("a body over the size cap", {"data": "x" * (CAP + 1), "content_type": "application/json"}),
]


def test_every_answer_is_the_same_with_the_fast_paths_on_and_off():
    """Status, headers in order, and body: byte for byte."""
    clients = {
        switch: create_app(WebhookSettings(max_request_bytes=CAP, fast_paths=switch)).test_client()
        for switch in (True, False)
    }
    for name, kwargs in REQUESTS:
        on, off = (clients[switch].post("/mutate", **kwargs) for switch in (True, False))
        assert (on.status, on.headers.to_wsgi_list(), on.data) == (off.status, off.headers.to_wsgi_list(), off.data), (
            name
        )


ACCEPTED_BODIES = [
    ("the usual request", {"content_type": "application/json"}),
    ("a charset in the content type", {"content_type": "application/json; charset=utf-8"}),
    (
        "chunked, without a length (de-chunked by the server, as gunicorn does)",
        {
            "content_type": "application/json",
            "headers": {"Transfer-Encoding": "chunked"},
            "environ_overrides": {"wsgi.input_terminated": True},
        },
    ),
]


@pytest.mark.parametrize("kwargs", [c[1] for c in ACCEPTED_BODIES], ids=[c[0] for c in ACCEPTED_BODIES])
def test_a_body_is_read_however_it_is_sent(client, kwargs):
    response = client.post("/mutate", data=json.dumps(pod_review()).encode(), **kwargs)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert added_tolerations(response.get_json()) == {NR: 300, UR: 300}


def test_a_refused_request_is_logged_with_its_remote_address(client, caplog):
    caplog.set_level(logging.WARNING, logger="taintkeeper.webhook")
    response = client.post("/mutate", data="x", content_type="text/plain", environ_base={"REMOTE_ADDR": "10.1.2.3"})
    assert response.status_code == 400
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Content-Length"] == str(len(response.data))
    (record,) = [r for r in caplog.records if r.name == "taintkeeper.webhook"]
    assert record.remote == "10.1.2.3" and "Content-Type must be application/json" in record.getMessage()
