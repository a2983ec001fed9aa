"""The release suite's cluster: the complete local cluster (hack/local-cluster.sh up DIR --nodes 3 --audit)
with its registry holding taintkeeper's image in two builds and the chart, and helm; taintkeeper itself is
installed from there (`helm install oci://... --version V`, the image by its digest), upgraded, rolled back and
uninstalled by the tests, with `helm` as an operator runs it; the nodes pull the image.

The two builds are the same code under two package versions (hack/image.py --version), so the audit log's
User-Agents say which build made each write: the release's own, tagged with the version (pyproject's, the
chart's appVersion, which the install leaves image.tag to), and the next, that version with the build
metadata `+next` (PEP 440's local version), tagged as Helm tags an OCI chart whose version has a '+': with
`_`. With TAINTKEEPER_E2E_CLUSTER_DIR=DIR the cluster in DIR is used (or made) and left running, as in
tests/e2e/.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from packaging.version import Version

from hack import versions
from hack.deploy import publish_image
from hack.registry import PushedImage
from tests.e2e import helm_install
from tests.e2e.cluster import VICTIM_LABEL, E2ECluster, wait_for
from tests.e2e.providers import LocalProvider
from tests.support.kubernetes_version import server_minor

CURRENT_VERSION, NEXT_VERSION = helm_install.CURRENT_VERSION, helm_install.NEXT_VERSION
CURRENT_TAG, NEXT_TAG = helm_install.CURRENT_TAG, helm_install.NEXT_TAG
# policy/v1 PodDisruptionBudgets and batch/v1 CronJobs, which the chart installs, are served from 1.21.
HELM_MINIMUM_MINOR = 21


@dataclass
class ReleaseCluster:
    e2e: E2ECluster
    directory: Path
    helm: Path
    values: Path  # -f for every install and upgrade
    chart: list[str]  # the chart in the registry, the current build's image by digest: what install takes
    images: dict[str, PushedImage]  # image tag -> that build in the registry
    versions: dict[str, str]  # image tag -> the package version its processes report

    @property
    def audit_log(self) -> Path:
        return self.directory / "logs" / "audit.log"

    def helm_args(self, *args: str) -> list[str]:
        return helm_install.helm_command(self.helm, self.e2e.kubeconfig, *args)


@pytest.fixture(scope="package")  # down before the next suite: one cluster with nodes per host at a time
def release_cluster(
    tmp_path_factory: pytest.TempPathFactory, taintkeeper_image: Any, helm: Path
) -> Iterator[ReleaseCluster]:
    next_image = helm_install.next_build()
    assert taintkeeper_image.reference.endswith(f"/{versions.IMAGE_NAME}:{CURRENT_TAG}"), taintkeeper_image.reference
    kept = os.environ.get("TAINTKEEPER_E2E_CLUSTER_DIR")
    directory = Path(kept) if kept else tmp_path_factory.mktemp("release-cluster")
    provider = LocalProvider(directory, audit=True)
    try:
        provider.up()
        images = {
            tag: publish_image(directory, built)
            for tag, built in ((CURRENT_TAG, taintkeeper_image), (NEXT_TAG, next_image))
        }
        chart = helm_install.from_registry(directory, helm, images[CURRENT_TAG])
        api_client = config.new_client_from_config(config_file=str(provider.kubeconfig()))
        try:
            if server_minor(api_client) < HELM_MINIMUM_MINOR:
                pytest.skip(
                    f"the chart (kubeVersion >=1.{HELM_MINIMUM_MINOR}) installs policy/v1 and batch/v1 objects; "
                    "this cluster is older: manifests/kube-1.20 installs there (README: Supported Kubernetes versions)"
                )
            # Before the install: the placement keeps taintkeeper's pods off this node.
            client.CoreV1Api(api_client).patch_node(provider.victim, {"metadata": {"labels": {VICTIM_LABEL: "true"}}})
            values = directory / "release-values.yaml"
            # No image.tag: the chart's default, its appVersion, is the current build's tag.
            values.write_text(yaml.safe_dump(helm_install.values(), sort_keys=False))
            e2e = E2ECluster(provider, provider.kubeconfig(), api_client, provider.victim, provider.bystander)
            yield ReleaseCluster(
                e2e,
                directory,
                helm,
                values,
                chart,
                images,
                # What each build's User-Agent says: the package's version, as setuptools normalizes it.
                {CURRENT_TAG: str(Version(CURRENT_VERSION)), NEXT_TAG: str(Version(NEXT_VERSION))},
            )
        finally:
            api_client.close()
    finally:
        if not kept:
            provider.down()


@pytest.fixture
def load_namespace(release_cluster: ReleaseCluster) -> Iterator[str]:
    """A fresh namespace for the load's pods, ready for them; deleted afterwards without waiting."""
    e2e = release_cluster.e2e
    name = f"load-{uuid.uuid4().hex[:8]}"
    e2e.core.create_namespace(
        client.V1Namespace.model_validate({"metadata": {"name": name, "labels": {"taintkeeper-e2e": "true"}}})
    )
    wait_for(lambda: e2e.create_pod(name, "sa-probe", dry_run=True), 60, f"pods admitted in {name}", interval=0.5)
    yield name
    with contextlib.suppress(client.ApiException):
        e2e.core.delete_namespace(name, grace_period_seconds=0)
