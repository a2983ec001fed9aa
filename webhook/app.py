"""The webhook's HTTP layer: routes, body checks, logging and metrics around `admission`.

`create_app()` with no arguments reads its settings from the environment (see settings.py). The
namespace cache (namespaces.py) is made here but started in the serving process: by gunicorn's
`post_worker_init` hook, or else by the first review.
"""

from __future__ import annotations

import json
import logging
import time

from flask import Flask, Response, request

from webhook import metrics
from webhook.admission import PATCHED, REPLACED, MalformedReview, review_pod
from webhook.namespaces import NamespaceCache
from webhook.settings import WebhookSettings

log = logging.getLogger("taintkeeper.webhook")

NAMESPACE_CACHE_EXTENSION = "taintkeeper.namespace_cache"


def _json(body: object, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


def namespace_cache_of(app: object) -> NamespaceCache | None:
    """The namespace cache of an app made by create_app (None for any other WSGI app)."""
    extensions = getattr(app, "extensions", None)
    return extensions.get(NAMESPACE_CACHE_EXTENSION) if isinstance(extensions, dict) else None


def create_app(settings: WebhookSettings | None = None, namespace_cache: NamespaceCache | None = None) -> Flask:
    settings = settings or WebhookSettings.from_env()
    cache = namespace_cache or NamespaceCache.from_settings(settings)
    app = Flask("taintkeeper-webhook")
    app.extensions[NAMESPACE_CACHE_EXTENSION] = cache
    not_ready_seconds, unreachable_seconds = settings.not_ready_seconds, settings.unreachable_seconds
    replace_builtin_seconds = settings.replace_builtin_seconds

    def bad_request(message: str) -> Response:
        metrics.REVIEWS.labels(metrics.BAD_REQUEST).inc()
        log.warning("refused admission request: %s", message, extra={"remote": request.remote_addr})
        return _json({"error": message}, 400)

    @app.post("/mutate")
    def mutate() -> Response:
        started = time.perf_counter()
        if request.mimetype != "application/json":
            return bad_request(f"Content-Type must be application/json, got {request.mimetype or 'none'!r}")
        cap = settings.max_request_bytes
        if request.content_length is not None and request.content_length > cap:
            return bad_request(f"request body is larger than {cap} bytes")
        body = request.stream.read(cap + 1)
        if len(body) > cap:
            return bad_request(f"request body is larger than {cap} bytes")
        cache.ensure_started()  # a no-op but for the first review of a process that has not started it
        try:
            verdict = review_pod(json.loads(body), not_ready_seconds, unreachable_seconds,
                                 namespace_defaults=cache.lookup, replace_builtin_seconds=replace_builtin_seconds)
        except (ValueError, RecursionError) as error:  # JSONDecodeError and MalformedReview are ValueErrors
            reason = str(error) if isinstance(error, MalformedReview) else "the body is not valid JSON"
            return bad_request(reason)
        metrics.REVIEWS.labels(verdict.outcome).inc()
        for key in verdict.added:
            metrics.TOLERATIONS_ADDED.labels(key).inc()
        for key in verdict.replaced:
            metrics.TOLERATIONS_REPLACED.labels(key).inc()
        metrics.REVIEW_DURATION.observe(time.perf_counter() - started)
        facts = {"uid": verdict.uid, "operation": verdict.operation, "namespace": verdict.namespace, "pod": verdict.pod}
        if verdict.warnings:
            log.warning("ignored namespace annotation: %s", "; ".join(verdict.warnings), extra=facts)
        if verdict.outcome == REPLACED:
            log.info("replaced the built-in default tolerationSeconds of %s%s", ",".join(verdict.replaced),
                     f"; added default tolerations {','.join(verdict.added)}" if verdict.added else "", extra=facts)
        elif verdict.outcome == PATCHED:
            log.info("added default tolerations %s", ",".join(verdict.added), extra=facts)
        else:
            log.debug("admitted without a patch (%s%s)", verdict.outcome,
                      f": {verdict.reason}" if verdict.reason else "", extra=facts)
        return _json(verdict.response)

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok", mimetype="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        # Settings were validated when the app was made; nothing else gates admission.
        return Response("ok", mimetype="text/plain")

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        payload, content_type = metrics.exposition()
        return Response(payload, content_type=content_type)

    return app
