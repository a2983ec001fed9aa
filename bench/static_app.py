"""The ceiling of the serving stack: the webhook's gunicorn + Flask setup answering a constant.

Served exactly like the webhook (`gunicorn -c python:webhook.gunicorn_conf
'bench.static_app:create_app()'` with the same TAINTKEEPER_* variables) and made with the webhook's
Flask class (webhook/flaskapp.py), so a throughput gap between the two is what taintkeeper's own
request handling costs. The reply is the webhook's
real answer to the benchmark review, computed once at start, so it carries the same patch.
"""

from __future__ import annotations

import json

from flask import Flask, Response, request

from bench.review import typical_review
from shared.defaults import DEFAULT_TOLERATION_SECONDS
from webhook.admission import review_pod
from webhook.flaskapp import WebhookFlask


def constant_reply() -> bytes:
    """The webhook's reply to the benchmark review, serialised once."""
    verdict = review_pod(typical_review(), DEFAULT_TOLERATION_SECONDS, DEFAULT_TOLERATION_SECONDS)
    return json.dumps(verdict.response).encode()


def create_app() -> Flask:
    """Flask app with the webhook's routes, whose /mutate skips all per-request work but reading the body."""
    reply = constant_reply()
    app = WebhookFlask("taintkeeper-static")

    @app.post("/mutate")
    def mutate() -> Response:
        request.get_data()  # the real handler reads the body too; keep the socket work equal
        return Response(reply, mimetype="application/json")

    @app.get("/readyz")
    def readyz() -> Response:
        return Response("ok", mimetype="text/plain")

    return app
