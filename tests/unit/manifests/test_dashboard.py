"""manifests/monitoring/grafana/: the Grafana dashboard has the panels an operator needs during a node
failure, every query parses (promtool) and names only series taintkeeper exports, and kustomize makes
it a ConfigMap the Grafana sidecar picks up. The e2e suite runs the queries against a real Prometheus
(tests/e2e/test_dashboard.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.dashboard import DASHBOARD, dashboard, queries
from tests.support.exported_metrics import exported_series, series_named
from tests.unit.manifests.test_alert_rules import PROMTOOL, run_promtool
from tests.unit.manifests.test_manifests import kustomize

# What the person on call looks for, each answered by one panel.
PANELS = {
    "Zone states": "which zones are disrupted",
    "All-zones brake": "whether the controller has braked",
    "Tainted nodes": "nodes tainted NoExecute and NoSchedule",
    "Not-ready nodes by zone": "where the failing nodes are",
    "Evictions per minute": "how fast pods are going",
    "Pending evictions": "what will go, and what waits for a budget",
    "Eviction lateness (p99)": "whether evictions are on time",
    "Deletion failures per minute": "whether deletions fail",
    "Monitor pass age": "whether the monitor runs",
    "Leader": "which replica acts",
    "Webhook reviews by outcome": "what the webhook does",
    "Webhook latency": "the webhook's p50 and p99",
    "Webhook namespace cache synced": "whether namespace annotations are honoured",
}


def test_the_dashboard_has_a_panel_for_each_question():
    assert [panel["title"] for panel in dashboard()["panels"]] == list(PANELS)


def test_every_panel_reads_the_chosen_prometheus_and_says_what_it_shows():
    board = dashboard()
    assert board["uid"] == "taintkeeper"
    assert [variable["name"] for variable in board["templating"]["list"]] == ["datasource"]
    for panel in board["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["description"], panel["title"]
        assert panel["targets"] and all(target["expr"] for target in panel["targets"]), panel["title"]


def test_panels_do_not_overlap():
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard()["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_the_queries_name_only_series_taintkeeper_exports():
    exported = exported_series()
    for query in queries():
        named = series_named(query.expr)
        assert named, f"{query.panel}: {query.expr} reads none of taintkeeper's series"
        assert named <= exported, f"{query.panel}: not exported: {named - exported}"


def test_every_query_parses(test_tools: None, tmp_path: Path):
    if not PROMTOOL.is_file():
        pytest.fail(
            f"{PROMTOOL} is missing after `hack/local-cluster.sh deps` (Debian package prometheus)", pytrace=False
        )
    # promtool parses PromQL in rules files: each query becomes a recording rule
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{number}", "expr": query.runnable()}
                    for number, query in enumerate(queries())
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    checked = run_promtool("check", "rules", str(path))
    assert checked.returncode == 0, f"promtool check rules:\n{checked.stdout}\n{checked.stderr}"
    assert f"{len(queries())} rules found" in checked.stdout


def test_kustomize_makes_it_a_configmap_the_grafana_sidecar_loads():
    (configmap,) = kustomize(DASHBOARD.parent)
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["name"] == "taintkeeper-grafana-dashboard"  # no hash: a stable name to replace
    assert json.loads(configmap["data"]["taintkeeper.json"]) == dashboard()
