"""The apiserver dates what it stores by its own clock, and the controller measures that clock:
what a new leader judges a silent node by (controller/nodelifecycle/node_health.py `first_heard`)."""

from __future__ import annotations

import time

from kubernetes import client

from controller.objects import last_stamped, lease_view
from kube import server_clock
from kube.request import request_json
from kube.timestamps import format_micro_time, parse_time
from tests.integration.kube import LocalCluster, wait_for


def test_the_apiservers_clock_is_measured_within_a_second_and_a_half_and_bounds_the_truth(local_cluster: LocalCluster):
    clock = server_clock.measure(local_cluster.api_client, 10)
    offset = clock.offset
    assert offset is not None
    assert offset.uncertainty < 1.5
    assert offset.low <= 0.0 <= offset.high  # one machine, one clock


def test_a_lease_renewal_is_re_dated_exactly_when_the_apiservers_version_says_so(
    local_cluster: LocalCluster, namespace: str
):
    """A renewal changes only renewTime's value: 1.25+ re-dates the kubelet's managedFields entry, older
    servers keep the creation's stamp, and the controller trusts the stamps by the version it reads."""
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    lease = request_json(
        local_cluster.api_client,
        "POST",
        path,
        timeout=10,
        body={
            "metadata": {"name": "node-x"},
            "spec": {"holderIdentity": "node-x", "renewTime": format_micro_time(1.0)},
        },
    )
    created = parse_time(lease_view(lease).stamped)
    assert created is not None
    # the stamps are whole seconds: renew once the creation's second is over, so a re-dating shows
    wait_for(lambda: time.time() >= created + 1.5, 5, "the creation's second over", interval=0.1)
    lease["spec"]["renewTime"] = format_micro_time(time.time())
    before = time.time()
    renewed = request_json(local_cluster.api_client, "PUT", f"{path}/node-x", timeout=10, body=lease)
    after = time.time()
    stamped = parse_time(lease_view(renewed).stamped)
    assert stamped is not None and lease_view(renewed).stamped == last_stamped(renewed["metadata"])
    if server_clock.measure(local_cluster.api_client, 10).dates_every_change:
        assert before - 1.0 <= stamped <= after  # whole seconds, this machine's clock
    else:
        assert stamped == created


def test_a_nodes_status_writes_are_stamped_apart_from_its_other_writes(local_cluster: LocalCluster):
    core = client.CoreV1Api(local_cluster.api_client)
    name = f"stamped-{int(time.time() * 1000)}"
    # Created with a field to manage, as a kubelet registers a node: an object created without one is never
    # given managedFields by later writes either.
    request_json(
        local_cluster.api_client,
        "POST",
        "/api/v1/nodes",
        timeout=10,
        body={"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}},
    )
    try:
        status = {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    }
                ]
            }
        }
        before = time.time()
        node = request_json(
            local_cluster.api_client,
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            timeout=10,
            body=status,
            content_type="application/strategic-merge-patch+json",
        )
        stamped = parse_time(last_stamped(node["metadata"], "status"))
        assert stamped is not None and before - 1.0 <= stamped <= time.time()
    finally:
        core.delete_node(name)
