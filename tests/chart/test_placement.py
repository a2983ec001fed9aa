"""Where taintkeeper's pods run: the chart's spread and NoExecute tolerations always, and what an operator
adds (tolerations, nodeSelector, nodeAffinity) beside them, never instead of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.chart.helm import render, values_file

DEPLOYMENTS = ("taintkeeper-controller", "taintkeeper-webhook")
CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
NOT_VICTIM = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "example.com/victim", "operator": "DoesNotExist"}]}]
    }
}


def pod_spec(docs: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == deployment]
    return found["spec"]["template"]["spec"]


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_by_default_the_pods_spread_and_tolerate_only_node_failures_for_300s(helm: Path, deployment: str):
    spec = pod_spec(render(helm), deployment)
    assert [(t["key"], t.get("tolerationSeconds")) for t in spec["tolerations"]] == [
        ("node.kubernetes.io/not-ready", 300),
        ("node.kubernetes.io/unreachable", 300),
    ]
    assert "nodeSelector" not in spec
    assert list(spec["affinity"]) == ["podAntiAffinity"]


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_an_operators_placement_is_added_beside_the_charts(helm: Path, tmp_path: Path, deployment: str):
    component = deployment.removeprefix("taintkeeper-")
    placement = {
        "tolerations": [CONTROL_PLANE],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "nodeAffinity": NOT_VICTIM,
    }
    spec = pod_spec(render(helm, "-f", str(values_file(tmp_path, {component: placement}))), deployment)
    assert spec["tolerations"][2:] == [CONTROL_PLANE] and len(spec["tolerations"]) == 3
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["affinity"]["nodeAffinity"] == NOT_VICTIM
    assert "podAntiAffinity" in spec["affinity"]
    other = pod_spec(
        render(helm, "-f", str(values_file(tmp_path, {component: placement}))),
        *(d for d in DEPLOYMENTS if d != deployment),
    )
    assert len(other["tolerations"]) == 2 and "nodeAffinity" not in other["affinity"], "set for one component only"
