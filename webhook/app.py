"""The webhook's HTTP layer: routes, body checks, logging and metrics around `admission`.

`create_app()` with no arguments reads its settings from the environment (see settings.py). The
namespace cache (namespaces.py) is made here but started in the serving process: by gunicorn's
`post_worker_init` hook, or else by the first review. So is each review's bookkeeping (its log
lines and metrics, bookkeeping.py): done at once, until `post_worker_init` starts it in batches.

Per review, the request is read through the request object itself rather than Flask's proxy of it
(`_current_request`). The JSON answer, the metrics and the log lines are made the ways the settings'
`fast_paths` switch chooses (webhook/fast_paths.py): the same answers either way.

/metrics is answered to callers the apiserver checks (metrics_access.py); /mutate and the probes to all.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import Flask, Request, Response, request

from webhook import codec, metrics
from webhook.admission import PATCHED, REPLACED, MalformedReview, Verdict, review_pod
from webhook.bookkeeping import Bookkeeping
from webhook.fast_paths import FastPaths
from webhook.flaskapp import WebhookFlask
from webhook.metrics_access import MetricsAccess
from webhook.namespaces import NamespaceCache
from webhook.settings import WebhookSettings

log = logging.getLogger("taintkeeper.webhook")

NAMESPACE_CACHE_EXTENSION = "taintkeeper.namespace_cache"
BOOKKEEPING_EXTENSION = "taintkeeper.bookkeeping"
JSON = codec.CONTENT_TYPE


class _Children(dict[str, Any]):
    """A metric's labelled children, made on first use (as `labels()` would) and then only looked up
    (`labels()` checks its arguments, builds a key and takes a lock on every call)."""

    def __init__(self, metric: object) -> None:
        super().__init__()
        self.metric = metric

    def __missing__(self, label: str) -> object:
        child = self[label] = self.metric.labels(label)  # type: ignore[attr-defined]
        return child


def _current_request() -> Request:
    """The request itself, not Flask's proxy of it: each attribute read through the proxy costs more
    than reading the body from the WSGI environ (`_get_current_object` is the proxy's documented way)."""
    return request._get_current_object()  # type: ignore[attr-defined]


def _read_body(current: Request, cap: int) -> bytes | str:
    """The body of the `current` request, or why it is refused (a str).

    The usual request (Content-Type exactly application/json, a Content-Length, no Transfer-Encoding)
    is read straight from the WSGI environ; anything else goes through werkzeug's parsing.
    """
    environ = current.environ
    content_type = environ.get("CONTENT_TYPE")
    if content_type != JSON and current.mimetype != JSON:
        return f"Content-Type must be application/json, got {current.mimetype or 'none'!r}"
    length = environ.get("CONTENT_LENGTH", "")
    if length.isdigit() and length.isascii() and "HTTP_TRANSFER_ENCODING" not in environ:
        size = int(length)
        if size > cap:
            return f"request body is larger than {cap} bytes"
        return environ["wsgi.input"].read(size)
    if current.content_length is not None and current.content_length > cap:
        return f"request body is larger than {cap} bytes"
    body = current.stream.read(cap + 1)
    if len(body) > cap:
        return f"request body is larger than {cap} bytes"
    return body


def namespace_cache_of(app: object) -> NamespaceCache | None:
    """The namespace cache of an app made by create_app (None for any other WSGI app)."""
    extensions = getattr(app, "extensions", None)
    return extensions.get(NAMESPACE_CACHE_EXTENSION) if isinstance(extensions, dict) else None


def bookkeeping_of(app: object) -> Bookkeeping | None:
    """The bookkeeping (batched log lines and metrics) of an app made by create_app, else None."""
    extensions = getattr(app, "extensions", None)
    return extensions.get(BOOKKEEPING_EXTENSION) if isinstance(extensions, dict) else None


def create_app(
    settings: WebhookSettings | None = None,
    namespace_cache: NamespaceCache | None = None,
    metrics_access: MetricsAccess | None = None,
) -> Flask:
    settings = settings or WebhookSettings.from_env()
    cache = namespace_cache or NamespaceCache.from_settings(settings)
    access = metrics_access or MetricsAccess.from_settings(settings)
    app = WebhookFlask("taintkeeper-webhook")
    app.extensions[NAMESPACE_CACHE_EXTENSION] = cache
    fast_paths = FastPaths(settings.fast_paths)
    bookkeeping = app.extensions[BOOKKEEPING_EXTENSION] = Bookkeeping(fast_paths=fast_paths)
    json_response, log_at = fast_paths.json_response, bookkeeping.log_at
    not_ready_seconds, unreachable_seconds = settings.not_ready_seconds, settings.unreachable_seconds
    replace_builtin_seconds = settings.replace_builtin_seconds

    cap = settings.max_request_bytes
    # Each labelled series still appears on its first use, as with labels() on every review.
    reviews, added_total, replaced_total = (
        _Children(metrics.REVIEWS),
        _Children(metrics.TOLERATIONS_ADDED),
        _Children(metrics.TOLERATIONS_REPLACED),
    )

    def refused(created: float, message: str, remote: str | None) -> None:
        bookkeeping.count(reviews[metrics.BAD_REQUEST])
        log_at(log, created, logging.WARNING, "refused admission request: %s", message, extra={"remote": remote})

    def answered(created: float, duration: float, verdict: Verdict) -> None:
        bookkeeping.count(reviews[verdict.outcome])
        for key in verdict.added:
            bookkeeping.count(added_total[key])
        for key in verdict.replaced:
            bookkeeping.count(replaced_total[key])
        bookkeeping.observe(metrics.REVIEW_DURATION, duration)
        facts = {"uid": verdict.uid, "operation": verdict.operation, "namespace": verdict.namespace, "pod": verdict.pod}
        if verdict.warnings:
            log_at(
                log,
                created,
                logging.WARNING,
                "ignored namespace annotation: %s",
                "; ".join(verdict.warnings),
                extra=facts,
            )
        if verdict.outcome == REPLACED:
            log_at(
                log,
                created,
                logging.INFO,
                "replaced the built-in default tolerationSeconds of %s%s",
                ",".join(verdict.replaced),
                f"; added default tolerations {','.join(verdict.added)}" if verdict.added else "",
                extra=facts,
            )
        elif verdict.outcome == PATCHED:
            log_at(log, created, logging.INFO, "added default tolerations %s", ",".join(verdict.added), extra=facts)
        else:
            log_at(
                log,
                created,
                logging.DEBUG,
                "admitted without a patch (%s%s)",
                verdict.outcome,
                f": {verdict.reason}" if verdict.reason else "",
                extra=facts,
            )

    def bad_request(current: Request, message: str) -> Response:
        bookkeeping.submit(refused, time.time(), message, current.remote_addr)
        return json_response(codec.dumps({"error": message}), 400)

    @app.post("/mutate")
    def mutate() -> Response:
        started = time.perf_counter()
        current = _current_request()
        body = _read_body(current, cap)
        if isinstance(body, str):
            return bad_request(current, body)
        cache.ensure_started()  # a no-op but for the first review of a process that has not started it
        try:
            verdict = review_pod(
                codec.loads(body),
                not_ready_seconds,
                unreachable_seconds,
                namespace_defaults=cache.lookup,
                replace_builtin_seconds=replace_builtin_seconds,
            )
        except (ValueError, RecursionError) as error:  # JSONDecodeError and MalformedReview are ValueErrors
            reason = str(error) if isinstance(error, MalformedReview) else "the body is not valid JSON"
            return bad_request(current, reason)
        bookkeeping.submit(answered, time.time(), time.perf_counter() - started, verdict)
        return json_response(codec.dumps(verdict.response), 200)

    @app.get("/healthz")
    @app.get("/livez")
    def healthz() -> Response:
        return Response("ok", mimetype="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        # Settings were validated when the app was made; TLS answering means the certificate is loaded.
        cache.ensure_started()
        reason = cache.unready_reason(time.monotonic())
        if reason is not None:
            return Response(reason, status=503, mimetype="text/plain")
        return Response("ok", mimetype="text/plain")

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        current = _current_request()
        refusal = access.check(current.path, current.method, current.headers.get("Authorization"))
        if refusal is not None:
            return Response(refusal.message, status=refusal.status, mimetype="text/plain")
        bookkeeping.drain()  # this worker's counts exact; the other workers' at most a batch interval behind
        payload, content_type = metrics.exposition()
        return Response(payload, content_type=content_type)

    return app
