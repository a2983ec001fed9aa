"""manifests/monitoring/grafana/taintkeeper.json read as tests need it: each panel's queries, with
Grafana's $__rate_interval given a value so that Prometheus (and promtool) can run them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[2] / "manifests" / "monitoring" / "grafana" / "taintkeeper.json"
RATE_INTERVAL = "$__rate_interval"


@dataclass(frozen=True)
class Query:
    panel: str
    legend: str
    expr: str  # as written in the dashboard

    def runnable(self, rate_interval: str = "1m") -> str:
        return self.expr.replace(RATE_INTERVAL, rate_interval)


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def queries() -> list[Query]:
    return [
        Query(panel["title"], target.get("legendFormat", ""), target["expr"])
        for panel in dashboard()["panels"]
        for target in panel["targets"]
    ]
