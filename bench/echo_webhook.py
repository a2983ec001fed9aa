"""A minimal mutating webhook: it echoes each review's uid with a constant patch (the two default
tolerations), reading nothing else of the pod.

bench/admission_latency.py serves it in the cluster exactly as taintkeeper's webhook is served (its
image, gunicorn's gevent workers, webhook/gunicorn_conf.py, TLS, a Service, 2 replicas), mounted from
a ConfigMap, so the latency it adds to a pod creation is kube-apiserver's own cost of calling any
webhook on this stack; taintkeeper's share is what its webhook adds beyond it. Only the standard
library, Flask and the webhook package (both in the image) are imported.

    gunicorn -c python:webhook.gunicorn_conf 'echo_webhook:create_app()'
"""

from __future__ import annotations

import base64
import json

from flask import Flask, Response, request

from webhook.flaskapp import WebhookFlask

PATCH = base64.b64encode(
    json.dumps(
        [
            {
                "op": "add",
                "path": "/spec/tolerations",
                "value": [
                    {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
                ],
            }
        ]
    ).encode()
).decode()


def echo(body: bytes) -> bytes:
    """The AdmissionReview answering `body`: its uid, allowed, the constant patch."""
    uid = json.loads(body)["request"]["uid"]
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": True, "patchType": "JSONPatch", "patch": PATCH},
        }
    ).encode()


def create_app() -> Flask:
    app = WebhookFlask("taintkeeper-bench-echo")

    @app.post("/mutate")
    def mutate() -> Response:
        return Response(echo(request.get_data()), mimetype="application/json")

    @app.get("/readyz")
    @app.get("/healthz")
    def ok() -> Response:
        return Response("ok", mimetype="text/plain")

    return app
