"""The disruption-budget scenario (tests/support/budget_scenario.py) through the deployed controller:
a drain taint waits for the pods' PodDisruptionBudget, which kube-controller-manager's disruption
controller computes."""

from __future__ import annotations

import pytest

from tests.e2e.cluster import E2ECluster
from tests.support import budget_scenario
from tests.support.budget_scenario import Budgeted

pytestmark = [pytest.mark.e2e]


@pytest.mark.timeout(600)
def test_the_deployed_controller_holds_a_drain_taint_for_a_budget_then_evicts_one(e2e: E2ECluster, namespace: str):
    def pod_spec(on: str) -> dict:
        return {
            "nodeSelector": {"kubernetes.io/hostname": on},
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "pause", "image": e2e.provider.pod_image, "imagePullPolicy": "IfNotPresent"}],
        }

    scenario = Budgeted(e2e.api_client, e2e.kubeconfig, namespace, e2e.victim, e2e.bystander, pod_spec)
    try:
        figures = budget_scenario.run(scenario)
    finally:
        scenario.set_drain_taint(False)
    assert figures["held_seconds"] >= budget_scenario.HELD_FOR
