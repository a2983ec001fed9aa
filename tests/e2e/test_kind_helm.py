"""On kind, taintkeeper installed the second way its users install it: the chart. After every other test
(and after test_logs has read the kustomization's pods), the kustomization is deleted, its namespace with it,
and the chart is installed as users receive it: pushed with the image to the cluster's registry, and installed
with `helm install oci://...` by the image's digest into the namespace Helm makes (tests/e2e/helm_install.py,
the suite's settings as values): every pod's image pulled from the registry, both Deployments Available, a
new pod given the default tolerations through the webhook's Service, and `helm test` (the chart's own check: a
dry-run pod's tolerations, the Lease held); then an upgrade to the next build (pushed beside it) and a rollback,
each rolling every pod to its image by digest and followed by `helm test`. The local cluster's Helm installs
under load are tests/helm_release's."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest
from kubernetes import client

from hack import cluster_registry
from hack.deploy import kubectl, publish_image
from tests.chart.helm import build_helm
from tests.e2e import helm_install
from tests.e2e.cluster import E2ECluster, default_tolerations, wait_for
from tests.e2e.providers import KIND_OVERLAY, KindProvider

pytestmark = [pytest.mark.e2e, pytest.mark.last(1)]


@pytest.mark.timeout(1500)
def test_the_chart_from_the_registry_installs_upgrades_and_rolls_back_on_kind_passing_helm_test_each_time(
    e2e: E2ECluster, namespace: str
):
    if not isinstance(e2e.provider, KindProvider):
        pytest.skip("the kustomization replaced by the chart: the kind provider only (local: tests/helm_release)")
    kubeconfig = str(e2e.kubeconfig)
    deleted = subprocess.run(
        [kubectl(), "--kubeconfig", kubeconfig, "delete", "-k", str(KIND_OVERLAY), "--wait=true", "--timeout=300s"],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert deleted.returncode == 0, deleted.stderr[-2000:]

    helm = build_helm()
    pushed = helm_install.install(e2e.provider.directory, helm)  # helm upgrade --install --create-namespace --wait

    def defaulted() -> bool:
        pod = e2e.create_pod(namespace, "after-helm", dry_run=True)
        return pod["spec"].get("tolerations") == default_tolerations()

    address = cluster_registry.address(e2e.provider.directory)
    pods = e2e.raw(e2e.core.list_namespaced_pod, helm_install.RELEASE_NAMESPACE)["items"]
    pulled = {status["imageID"] for pod in pods for status in pod["status"].get("containerStatuses") or ()}
    # The kubelet names the image by the repository it pulled it from: side-loaded, it would be docker.io/library.
    assert pulled and all(image_id.startswith(f"{address}/taintkeeper@sha256:") for image_id in pulled), pulled
    wait_for(defaulted, 120, "the chart's webhook to add the default tolerations")
    helm_test(helm, e2e)

    # An upgrade to the next build (pushed beside it, by digest), then a rollback to the first revision: the
    # pods roll to each image, and `helm test` passes after each.
    next_digest = publish_image(e2e.provider.directory, helm_install.next_build()).digest
    assert next_digest != current_digest(e2e, address) == pushed.digest
    for step, action, digest in (
        (
            "upgrade",
            [
                *("upgrade", helm_install.RELEASE, *helm_install.from_registry(e2e.provider.directory, helm, pushed)),
                *("--reuse-values", "--set", f"image.digest={next_digest}", "--wait", "--timeout", "10m"),
            ],
            next_digest,
        ),
        ("rollback", ["rollback", helm_install.RELEASE, "1", "--wait", "--timeout", "10m"], pushed.digest),
    ):
        done = subprocess.run(
            helm_install.helm_command(helm, e2e.kubeconfig, *action), capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, f"helm {step}: {done.stderr[-2000:]}"
        wait_for(functools.partial(on_digest, e2e, address, digest), 300, f"every pod on the {step}'s image")
        helm_test(helm, e2e)


def helm_test(helm: Path, e2e: E2ECluster) -> None:
    tested = subprocess.run(
        helm_install.helm_command(helm, e2e.kubeconfig, "test", helm_install.RELEASE, "--logs", "--timeout", "5m"),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert tested.returncode == 0, tested.stdout[-2000:] + tested.stderr[-2000:]
    assert "Phase:          Succeeded" in tested.stdout, tested.stdout


def on_digest(e2e: E2ECluster, address: str, digest: str) -> bool:
    return current_digest(e2e, address) == digest


def current_digest(e2e: E2ECluster, address: str) -> str | None:
    """The one image digest every Deployment's pod template asks for from the registry, else None."""
    apps = client.AppsV1Api(e2e.api_client)
    deployments = e2e.raw(apps.list_namespaced_deployment, helm_install.RELEASE_NAMESPACE)["items"]
    images = {c["image"] for d in deployments for c in d["spec"]["template"]["spec"]["containers"]}
    pods = e2e.raw(e2e.core.list_namespaced_pod, helm_install.RELEASE_NAMESPACE)["items"]
    running = {  # the Deployments' pods: the certificate Job's and helm test's have finished
        c["image"]
        for p in pods
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        for c in p["spec"]["containers"]
    }
    (only,) = images if len(images) == 1 else (None,)
    if only is None or running != images or not only.startswith(f"{address}/taintkeeper@"):
        return None
    return only.partition("@")[2]
