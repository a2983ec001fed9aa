"""The controller's own Prometheus metrics (one process, so the default registry); each controller
keeps its metrics beside it (controller/<controller>/metrics.py).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

IS_LEADER = Gauge(
    "taintkeeper_leader",
    "1 while this replica holds the leader lease and acts, else 0.",
)
FENCED_WRITES = Counter(
    "taintkeeper_fenced_writes_total",
    "Writes not made because this replica's last lease renewal was older than --leader-elect-renew-deadline "
    "(or it no longer held the lease), by what the write was.",
    ["action"],
)
EVENTS_DROPPED = Counter(
    "taintkeeper_events_dropped_total",
    "Events not posted, by why: fenced (when it was to be posted, this replica's last lease renewal was older "
    "than --leader-elect-renew-deadline, or it no longer held the lease), queue-full (10,000 events waiting).",
    ["reason"],
)
