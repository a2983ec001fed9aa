"""The controller's own Prometheus metrics (one process, so the default registry); each controller
keeps its metrics beside it (controller/<controller>/metrics.py).
"""

from __future__ import annotations

from prometheus_client import Gauge

IS_LEADER = Gauge(
    "taintkeeper_leader",
    "1 while this replica holds the leader lease and acts, else 0.",
)
