"""Prometheus metrics of the webhook, correct under several gunicorn workers.

Under gunicorn each worker is a process; with PROMETHEUS_MULTIPROC_DIR set (the gunicorn config
sets it before prometheus_client is first imported), every scrape merges all workers' files.
Without it (tests, a single process) the default registry is used.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

REVIEWS = Counter(
    "taintkeeper_webhook_admission_reviews_total",
    "AdmissionReviews answered, by outcome: patched, replaced (the built-in plugin's default tolerationSeconds "
    "replaced, --replace-builtin-defaults), unchanged, skipped (not a pod create/update, or a pod or namespace "
    "labelled taintkeeper.io/skip=true) or bad_request.",
    ["outcome"],
)
TOLERATIONS_ADDED = Counter(
    "taintkeeper_webhook_tolerations_added_total",
    "Default NoExecute tolerations added to pods, by taint key.",
    ["key"],
)
TOLERATIONS_REPLACED = Counter(
    "taintkeeper_webhook_tolerations_replaced_total",
    "Tolerations added by the built-in DefaultTolerationSeconds plugin whose seconds were replaced, by taint key.",
    ["key"],
)
REVIEW_DURATION = Histogram(
    "taintkeeper_webhook_admission_duration_seconds",
    "Time to answer one AdmissionReview, from request body read to response built.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)
# livemin: 1 only when every live worker's cache has synced (a worker that has not answers with the
# cluster defaults); gunicorn's child_exit hook removes a dead worker's value. 0 when the cache is off.
NAMESPACE_CACHE_SYNCED = Gauge(
    "taintkeeper_webhook_namespace_cache_synced",
    "1 when the namespace cache of every worker has synced; until then namespaces get the cluster defaults.",
    multiprocess_mode="livemin",
)

BAD_REQUEST = "bad_request"


def exposition() -> tuple[bytes, str]:
    """The current metrics in Prometheus text format, and its content type."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
