"""The node lifecycle controller's Prometheus metrics: upstream's (subsystem node_collector), then
what taintkeeper adds for operators' alerts (taintkeeper_*)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from controller.zones import ZoneState, zone_label

ZONE_HEALTH = Gauge("node_collector_zone_health", "Percentage of healthy nodes per zone.", ["zone"])
ZONE_SIZE = Gauge("node_collector_zone_size", "Number of nodes per zone (excluded nodes not counted).", ["zone"])
UNHEALTHY_NODES = Gauge("node_collector_unhealthy_nodes_in_zone", "Number of not-Ready nodes per zone.", ["zone"])
ZONE_EVICTIONS = Counter(
    "node_collector_evictions_total",
    "NoExecute not-ready/unreachable taints written by the node lifecycle monitor, per zone.",
    ["zone"],
)
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

# --- what taintkeeper adds for operators' alerts ---------------------------------------------------------
ZONE_STATE = Gauge(
    "taintkeeper_zone_state",
    "1 for the zone's current disruption state (Initial, Normal, PartialDisruption, FullDisruption), else 0.",
    ["zone", "state"],
)
TAINTED_NODES = Gauge(
    "taintkeeper_tainted_nodes",
    "Nodes carrying a taint the node lifecycle controller manages, by effect: NoExecute (not-ready, unreachable) "
    "and NoSchedule (the condition taints, unschedulable), as of the last monitor pass.",
    ["effect"],
)
MASTER_DISRUPTION_MODE = Gauge(
    "taintkeeper_master_disruption_mode",
    "1 while every zone is fully disrupted and NoExecute tainting is stopped (upstream's master disruption mode).",
)
NODE_MONITOR_ERRORS = Counter(
    "taintkeeper_node_monitor_errors_total",
    "Nodes whose health check failed within a monitor pass (the other nodes were still checked).",
)
LEASE_CACHE_BEHIND = Counter(
    "taintkeeper_node_lease_cache_behind_total",
    "Nodes not marked Unknown because their Lease, read live, had a renewal the informer had not delivered.",
)
MONITOR_PASS_FAILURES = Counter(
    "taintkeeper_monitor_pass_failures_total",
    "Monitor or tainting passes that stopped on an error.",
)
LAST_MONITOR_PASS = Gauge(
    "taintkeeper_last_monitor_pass_timestamp_seconds",
    "When the node lifecycle monitor last completed a pass (Unix time).",
)


def set_zone_state(zone: str, state: ZoneState | None) -> None:
    """taintkeeper_zone_state: 1 for the zone's state, 0 for the others (all 0: the zone is gone)."""
    for each in ZoneState:
        ZONE_STATE.labels(zone_label(zone), each.value).set(1 if each is state else 0)
