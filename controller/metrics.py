"""The controller's Prometheus metrics (one process, so the default registry).

Upstream names where upstream has the metric; taintkeeper_* for what it adds.
"""

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
IS_LEADER = Gauge(
    "taintkeeper_leader",
    "1 while this replica holds the leader lease and acts, else 0.",
)

# --- node lifecycle (upstream subsystem node_collector) ----------------------------------------------
ZONE_HEALTH = Gauge("node_collector_zone_health", "Percentage of healthy nodes per zone.", ["zone"])
ZONE_SIZE = Gauge("node_collector_zone_size", "Number of nodes per zone (excluded nodes not counted).", ["zone"])
UNHEALTHY_NODES = Gauge("node_collector_unhealthy_nodes_in_zone", "Number of not-Ready nodes per zone.", ["zone"])
ZONE_EVICTIONS = Counter("node_collector_evictions_total",
                         "NoExecute not-ready/unreachable taints written by the node lifecycle monitor, per zone.",
                         ["zone"])
UPDATE_NODE_HEALTH_DURATION = Histogram(
    "node_collector_update_node_health_duration_seconds",
    "Duration in seconds for the node lifecycle monitor to update the health of a single node.",
    buckets=tuple(0.001 * 4**i for i in range(8)),
)
UPDATE_ALL_NODES_HEALTH_DURATION = Histogram(
    "node_collector_update_all_nodes_health_duration_seconds",
    "Duration in seconds for the node lifecycle monitor to update the health of all nodes.",
    buckets=tuple(0.01 * 4**i for i in range(8)),
)

# --- default toleration backfill ---------------------------------------------------------------------
BACKFILLED_PODS = Counter(
    "taintkeeper_backfilled_pods_total",
    "Pods given the default not-ready/unreachable tolerations they were admitted without.",
)
BACKFILL_FAILURES = Counter(
    "taintkeeper_backfill_failures_total",
    "Failed backfill attempts (conflicts with a concurrent change included); each is retried with backoff.",
)

# --- node lifecycle: what taintkeeper adds for operators' alerts -------------------------------------
ZONE_STATE = Gauge(
    "taintkeeper_zone_state",
    "1 for the zone's current disruption state (Initial, Normal, PartialDisruption, FullDisruption), else 0.",
    ["zone", "state"],
)
MASTER_DISRUPTION_MODE = Gauge(
    "taintkeeper_master_disruption_mode",
    "1 while every zone is fully disrupted and NoExecute tainting is stopped (upstream's master disruption mode).",
)
NODE_MONITOR_ERRORS = Counter(
    "taintkeeper_node_monitor_errors_total",
    "Nodes whose health check failed within a monitor pass (the other nodes were still checked).",
)
MONITOR_PASS_FAILURES = Counter(
    "taintkeeper_monitor_pass_failures_total",
    "Monitor or tainting passes that stopped on an error.",
)
LAST_MONITOR_PASS = Gauge(
    "taintkeeper_last_monitor_pass_timestamp_seconds",
    "When the node lifecycle monitor last completed a pass (Unix time).",
)
