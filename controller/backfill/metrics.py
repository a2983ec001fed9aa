"""The toleration backfill's Prometheus metrics (taintkeeper's own: upstream has no backfill)."""

from __future__ import annotations

from prometheus_client import Counter

BACKFILLED_PODS = Counter(
    "taintkeeper_backfilled_pods_total",
    "Pods given the default not-ready/unreachable tolerations they were admitted without.",
)
BACKFILL_FAILURES = Counter(
    "taintkeeper_backfill_failures_total",
    "Failed backfill attempts (conflicts with a concurrent change included); each is retried with backoff.",
)
