"""The cluster is what the suite claims: upstream's pieces are off, and taintkeeper runs as its
users run it (Deployments from its image, the certificate Job's Secret and caBundle, the Lease).

Without these, a passing node-failure test could be kube-controller-manager's work, and a
passing webhook test the built-in admission plugin's.
"""

from __future__ import annotations

import base64

import pytest
from kubernetes import client

from hack import cluster_registry, image_archive, versions
from tests.e2e.cluster import NOT_READY, SYSTEM_NAMESPACE, UNREACHABLE, E2ECluster, wait_for
from tests.support.kubernetes_version import server_minor

pytestmark = pytest.mark.e2e

DEPLOYMENTS = ("taintkeeper-webhook", "taintkeeper-controller")


def test_the_built_in_default_toleration_seconds_plugin_is_off(e2e: E2ECluster):
    disabled = e2e.provider.apiserver_flag("disable-admission-plugins") or ""
    assert "DefaultTolerationSeconds" in disabled.split(","), disabled


def test_kube_controller_manager_runs_no_node_lifecycle_or_taint_eviction(e2e: E2ECluster):
    controllers = (e2e.provider.controller_manager_flag("controllers") or "*").split(",")
    assert "-node-lifecycle-controller" in controllers or "-nodelifecycle" in controllers, controllers
    # 1.29 split the taint manager out of the node lifecycle controller; 1.20 has it inside.
    if server_minor(e2e.api_client) >= 29:
        assert "-taint-eviction-controller" in controllers, controllers


def test_both_deployments_are_available_and_run_non_root_on_a_read_only_root(
    e2e: E2ECluster, taintkeeper_image: image_archive.BuiltImage
):
    apps = client.AppsV1Api(e2e.api_client)
    for name in DEPLOYMENTS:
        deployment = e2e.raw(apps.read_namespaced_deployment, name, SYSTEM_NAMESPACE)
        available = next(c for c in deployment["status"]["conditions"] if c["type"] == "Available")
        assert available["status"] == "True", (name, available)
        assert deployment["status"].get("availableReplicas") == deployment["spec"]["replicas"] == 2, name
    pods = e2e.raw(
        e2e.core.list_namespaced_pod,
        SYSTEM_NAMESPACE,
        label_selector="app.kubernetes.io/component in (webhook,controller)",
    )["items"]
    running = [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    assert len(running) >= 4, [p["metadata"]["name"] for p in pods]
    for pod in running:
        pod_context = pod["spec"].get("securityContext") or {}
        for container in pod["spec"]["containers"]:
            context = {**pod_context, **(container.get("securityContext") or {})}
            assert context.get("runAsNonRoot") is True, (pod["metadata"]["name"], context)
            assert context.get("runAsUser", 0) != 0, (pod["metadata"]["name"], context)
            assert context.get("readOnlyRootFilesystem") is True, (pod["metadata"]["name"], context)
        # What the kubelet really runs: the image of our archive, pulled from the cluster's registry by the digest
        # it was built with (a side-loaded one would be docker.io/library's), every container ready.
        pulled = f"{cluster_registry.address(e2e.provider.directory)}/{versions.IMAGE_NAME}@{taintkeeper_image.digest}"
        statuses = pod["status"]["containerStatuses"]
        assert all(s["ready"] and s["imageID"] == pulled for s in statuses), statuses


def test_the_webhook_is_called_through_its_service_with_the_certificate_jobs_ca_bundle(e2e: E2ECluster):
    admission = client.AdmissionregistrationV1Api(e2e.api_client)
    configuration = e2e.raw(admission.read_mutating_webhook_configuration, "taintkeeper")
    secret = e2e.raw(e2e.core.read_namespaced_secret, "taintkeeper-webhook-tls", SYSTEM_NAMESPACE)
    batch = client.BatchV1Api(e2e.api_client)
    jobs = e2e.raw(batch.list_namespaced_job, SYSTEM_NAMESPACE, label_selector="app.kubernetes.io/component=certs")
    # manifests/ names it taintkeeper-certs-sync; the chart taintkeeper-certs-sync-REVISION
    (job,) = [j for j in jobs["items"] if j["metadata"]["name"].startswith("taintkeeper-certs-sync")]
    assert job["status"].get("succeeded") == 1, job["status"]
    for webhook in configuration["webhooks"]:
        assert webhook["clientConfig"]["service"] == {
            "namespace": SYSTEM_NAMESPACE,
            "name": "taintkeeper-webhook",
            "path": "/mutate",
            "port": 443,
        }
        assert "url" not in webhook["clientConfig"]
        # The Job wrote both: the CA it keeps in the Secret is the one the apiserver trusts.
        assert base64.b64decode(webhook["clientConfig"]["caBundle"]) == base64.b64decode(secret["data"]["ca.crt"])


def test_one_controller_replica_holds_the_lease(e2e: E2ECluster):
    coordination = client.CoordinationV1Api(e2e.api_client)

    def holder() -> str | None:
        lease = e2e.raw(coordination.read_namespaced_lease, "taintkeeper-controller", SYSTEM_NAMESPACE)
        return lease["spec"].get("holderIdentity")

    identity = wait_for(holder, 60, "a holder of the Lease taintkeeper-system/taintkeeper-controller")
    pods = e2e.raw(
        e2e.core.list_namespaced_pod, SYSTEM_NAMESPACE, label_selector="app.kubernetes.io/component=controller"
    )["items"]
    names = [p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Running"]
    assert sum(identity.startswith(f"{name}_") for name in names) == 1, (identity, names)


def test_taintkeeper_runs_nowhere_near_the_node_the_tests_stop(e2e: E2ECluster):
    pods = e2e.raw(e2e.core.list_namespaced_pod, SYSTEM_NAMESPACE)["items"]
    on_victim = [
        p["metadata"]["name"]
        for p in pods
        if p["spec"].get("nodeName") == e2e.victim
        and not p["metadata"].get("deletionTimestamp")
        and p["status"].get("phase") not in ("Succeeded", "Failed")
    ]
    assert on_victim == [], f"taintkeeper pods on {e2e.victim}: the overlay's placement patch is not in effect"


def test_a_ready_node_loses_the_not_ready_taint_new_nodes_start_with(e2e: E2ECluster):
    # The apiserver gives every new node node.kubernetes.io/not-ready:NoSchedule; with upstream's
    # node lifecycle controller off, only taintkeeper's controller takes it away again. Put it back
    # on a Ready node (the local cluster lifts it from its nodes at start, so nothing is left there
    # to watch): taintkeeper must lift it.
    nodes = e2e.nodes()
    wait_for(lambda: all(e2e.ready(n) == "True" for n in nodes), 120, "all nodes Ready")
    wait_for(
        lambda: all(e2e.lifecycle_taints(n) == [] for n in nodes),
        60,
        f"no {NOT_READY} or {UNREACHABLE} taints on Ready nodes",
    )
    node = e2e.bystander
    taints = [*e2e.taints(node), {"key": NOT_READY, "effect": "NoSchedule"}]
    patched = e2e.raw(e2e.core.patch_node, node, {"spec": {"taints": taints}})
    # The write's own answer shows the taint: a read after it may come after taintkeeper lifted it.
    assert {"key": NOT_READY, "effect": "NoSchedule"} in [
        {"key": t["key"], "effect": t["effect"]} for t in patched["spec"].get("taints") or []
    ]
    wait_for(lambda: e2e.lifecycle_taints(node) == [], 30, f"taintkeeper to lift {NOT_READY}:NoSchedule from {node}")
