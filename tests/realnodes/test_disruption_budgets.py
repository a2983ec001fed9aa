"""The disruption-budget scenario (tests/support/budget_scenario.py) on real kubelets, against a
taintkeeper controller process, with kube-controller-manager's own disruption controller computing
the budget's allowed disruptions (1.20: policy/v1beta1)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from hack.servers import ControllerProcess
from tests.realnodes.nodes import RealCluster, wait_default_service_account
from tests.support import budget_scenario
from tests.support.budget_scenario import Budgeted


@pytest.fixture(scope="module")
def budgeted(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Budgeted]:
    tmp = tmp_path_factory.mktemp("budgets")
    core = client.CoreV1Api(real_cluster.api_client)
    namespace = f"pdb-{uuid.uuid4().hex[:6]}"
    core.create_namespace(body=client.V1Namespace.model_validate({"metadata": {"name": namespace}}))
    wait_default_service_account(core, namespace)
    node, other = real_cluster.names()[:2]
    image = real_cluster.nodes[node]["busyboxImage"]

    def pod_spec(on: str) -> dict:
        return {
            "nodeSelector": {"kubernetes.io/hostname": on},
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": image, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}],
        }

    made = Budgeted(real_cluster.api_client, real_cluster.kubeconfig, namespace, node, other, pod_spec)
    controller = ControllerProcess(
        real_cluster.kubeconfig,
        tmp / "controller.log",
        "--leader-elect=false",
        "--controllers=taint-eviction-controller",
        "--backfill-default-tolerations=false",
    )
    controller.start()
    try:
        yield made
    finally:
        controller.kill()
        made.set_drain_taint(False)
        core.delete_namespace(namespace)
        print(f"controller log: {tmp / 'controller.log'}")


def test_a_budget_holds_a_drain_taint_until_a_third_replica_is_ready_elsewhere_then_one_goes(budgeted: Budgeted):
    figures = budget_scenario.run(budgeted)
    assert figures["held_seconds"] >= budget_scenario.HELD_FOR
