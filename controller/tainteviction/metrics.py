"""The taint eviction controller's Prometheus metrics: upstream's names (subsystem
taint_eviction_controller) where upstream has the metric, taintkeeper_* for what it adds."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

POD_DELETIONS = Counter(
    "taint_eviction_controller_pod_deletions_total",
    "Pods deleted by the taint eviction controller since it started.",
)
# Upstream's metric is meant in seconds but observes nanoseconds (k8s #141311); this one is seconds.
POD_DELETION_DURATION = Histogram(
    "taint_eviction_controller_pod_deletion_duration_seconds",
    "Seconds from a pod's eviction deadline to its deletion by the taint eviction controller.",
    buckets=(0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240),
)
POD_DELETION_FAILURES = Counter(
    "taintkeeper_pod_deletion_failures_total",
    "Failed attempts to delete a pod that is due for eviction (each is retried with backoff).",
)
PENDING_EVICTIONS = Gauge(
    "taintkeeper_pending_evictions",
    "Pods with a scheduled eviction whose deadline has not come yet.",
)
REFUSED_BY_BUDGET = Counter(
    "taintkeeper_evictions_refused_by_disruption_budget_total",
    "Evictions (of pods that respect their disruption budget) the budget refused; each is retried.",
)
WAITING_FOR_BUDGET = Gauge(
    "taintkeeper_pods_waiting_for_disruption_budget",
    "Pods due for eviction whose last Eviction their disruption budget refused.",
)
BUDGET_EVICTIONS = Counter(
    "taintkeeper_disruption_budget_evictions_total",
    "Pods evicted through the Eviction API (their disruption budget allowed it).",
)
BUDGET_TIMEOUTS = Counter(
    "taintkeeper_disruption_budget_timeouts_total",
    "Pods deleted because their disruption budget refused their eviction past its ceiling.",
)
