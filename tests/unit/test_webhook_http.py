"""webhook.app over HTTP (Flask's test client): status codes, errors, metrics, logs."""

import base64
import json
import logging

import pytest

from shared.jsonlog import JsonFormatter
from webhook.app import create_app
from webhook.settings import WebhookSettings


def pod_review(uid="uid-1", tolerations=None):
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "operation": "CREATE", "namespace": "team-a", "name": "web-0",
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "object": {"metadata": {"name": "web-0"}, "spec": spec}}}


CAP = 300_000


@pytest.fixture
def client():
    return create_app(WebhookSettings(max_request_bytes=CAP)).test_client()


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
    ("a body over the size cap", {"data": json.dumps(pod_review(tolerations=[{"key": "k" * CAP}])),
                                  "content_type": "application/json"}, f"larger than {CAP} bytes"),
    ("not an AdmissionReview", {"json": {"kind": "Pod"}}, "apiVersion"),
    ("no request", {"json": {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}}, "request"),
    ("no uid", {"json": {**pod_review(), "request": {**pod_review()["request"], "uid": None}}}, "uid"),
    ("an object that is not an object",
     {"json": {**pod_review(), "request": {**pod_review()["request"], "object": [1]}}}, "request.object"),
    ("JSON nested too deeply to parse", {"data": "[" * 100_000 + "]" * 100_000, "content_type": "application/json"},
     "not valid JSON"),
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


def metric_value(client, name, labels=""):
    for line in client.get("/metrics").data.decode().splitlines():
        if line.startswith(f"{name}{labels} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.split()[-1])
    return 0.0


def test_metrics_count_outcomes_added_tolerations_and_latency(client):
    before_patched = metric_value(client, "taintkeeper_webhook_admission_reviews_total", '{outcome="patched"}')
    before_bad = metric_value(client, "taintkeeper_webhook_admission_reviews_total", '{outcome="bad_request"}')
    before_added = metric_value(client, "taintkeeper_webhook_tolerations_added_total",
                                '{key="node.kubernetes.io/unreachable"}')
    before_count = metric_value(client, "taintkeeper_webhook_admission_duration_seconds_count")
    client.post("/mutate", json=pod_review())
    client.post("/mutate", json=pod_review(tolerations=[{"operator": "Exists"}]))
    client.post("/mutate", data="x", content_type="application/json")
    assert metric_value(client, "taintkeeper_webhook_admission_reviews_total", '{outcome="patched"}') == \
        before_patched + 1
    assert metric_value(client, "taintkeeper_webhook_admission_reviews_total", '{outcome="bad_request"}') == \
        before_bad + 1
    assert metric_value(client, "taintkeeper_webhook_tolerations_added_total",
                        '{key="node.kubernetes.io/unreachable"}') == before_added + 1
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
