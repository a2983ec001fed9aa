"""On kind, taintkeeper installed the second way its users install it: the chart. After every other test
(and after test_logs has read the kustomization's pods), the kustomization is deleted, its namespace with it,
and the chart is installed with Helm into the namespace Helm makes (tests/e2e/helm_install.py, the suite's
settings as values): both Deployments Available, a new pod given the default tolerations through the
webhook's Service, and `helm test` (the chart's own check: a dry-run pod's tolerations, the Lease held).
The local cluster's Helm installs are tests/helm_release's."""

from __future__ import annotations

import subprocess

import pytest

from hack.deploy import kubectl
from tests.chart.helm import build_helm
from tests.e2e import helm_install
from tests.e2e.cluster import E2ECluster, default_tolerations, wait_for
from tests.e2e.providers import KIND_OVERLAY, KindProvider

pytestmark = [pytest.mark.e2e, pytest.mark.last(1)]


@pytest.mark.timeout(900)
def test_the_chart_installs_on_kind_admits_with_the_defaults_and_passes_helm_test(e2e: E2ECluster, namespace: str):
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
    helm_install.install(e2e.provider.directory, helm)  # helm upgrade --install --create-namespace --wait

    def defaulted() -> bool:
        pod = e2e.create_pod(namespace, "after-helm", dry_run=True)
        return pod["spec"].get("tolerations") == default_tolerations()

    wait_for(defaulted, 120, "the chart's webhook to add the default tolerations")
    tested = subprocess.run(
        helm_install.helm_command(helm, e2e.kubeconfig, "test", helm_install.RELEASE, "--logs", "--timeout", "5m"),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert tested.returncode == 0, tested.stdout[-2000:] + tested.stderr[-2000:]
    assert "Phase:          Succeeded" in tested.stdout, tested.stdout
