"""Every manifest document applied to the real local kube-apiserver (1.37 by default, 1.20 the old
end) with server-side apply and `dryRun=All`: the server's own validation and defaulting, nothing
persisted (except the Namespace, which namespaced dry runs need and which is applied for real first).

1.20 predates what the manifests target, so a few documents cannot be tried there: they are
skipped only when discovery shows the server does not serve their kind, and only if they are listed
in UNSERVED with the release that serves them and the reason; anything else unserved fails, and on
a server that release or newer nothing listed may be skipped. A field the server silently drops
(1.20 has no strict field validation) fails too, unless it is listed in DROPPED with the reason and
the server is older than the release that keeps it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from kube.discovery import dynamic_client
from tests.integration.kube import SCRIPT, LocalCluster, wait_for
from tests.support.kubernetes_version import server_minor as minor_of
from tests.unit.manifests.test_manifests import manifest_files

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
FIELD_MANAGER = "taintkeeper-tests"

# cert-manager's CustomResourceDefinitions (from its Go module: `hack/local-cluster.sh crds cert-manager`)
# are installed on servers of the releases cert-manager 1.21 supports, and validate manifests/cert-manager/.
CERT_MANAGER_FROM = 25
CERT_MANAGER_UNSERVED = "cert-manager 1.21's CRDs (CEL validation rules) are installed from Kubernetes 1.25 on"
CERT_MANAGER_CRDS = (
    "cert-manager.io_issuers.yaml",
    "cert-manager.io_clusterissuers.yaml",
    "cert-manager.io_certificates.yaml",
    "cert-manager.io_certificaterequests.yaml",
)

# admission-policy/ is the installation for the servers that have it (the others install the webhook).
POLICY_UNSERVED = "MutatingAdmissionPolicy v1 is served from Kubernetes 1.36 on"
VALIDATING_POLICY_UNSERVED = "ValidatingAdmissionPolicy v1 is served from Kubernetes 1.30 on"

# (apiVersion, kind) -> (the first minor version that serves it, or None for a custom resource
# never installed here; why an older apiserver does not serve it).
UNSERVED: dict[tuple[str, str], tuple[int | None, str]] = {
    ("policy/v1", "PodDisruptionBudget"): (
        21,
        "policy/v1 PodDisruptionBudget is served from Kubernetes 1.21 on (1.20 has only policy/v1beta1)",
    ),
    ("batch/v1", "CronJob"): (21, "batch/v1 CronJob is served from Kubernetes 1.21 on (1.20 has only batch/v1beta1)"),
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy"): (36, POLICY_UNSERVED),
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicyBinding"): (36, POLICY_UNSERVED),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): (30, VALIDATING_POLICY_UNSERVED),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): (30, VALIDATING_POLICY_UNSERVED),
    ("cert-manager.io/v1", "Issuer"): (CERT_MANAGER_FROM, CERT_MANAGER_UNSERVED),
    ("cert-manager.io/v1", "Certificate"): (CERT_MANAGER_FROM, CERT_MANAGER_UNSERVED),
}


def unserved_on(minor: int) -> dict[tuple[str, str], str]:
    """The kinds a server of this minor version is expected not to serve, with why."""
    return {key: why for key, (served_from, why) in UNSERVED.items() if served_from is None or minor < served_from}


# (apiVersion, kind, dotted field) -> (first minor version that keeps it, why an older one drops it).
DROPPED = {
    ("batch/v1", "Job", "spec.ttlSecondsAfterFinished"): (
        21,
        "the TTLAfterFinished feature gate is alpha (off) in 1.20 and beta (on) from 1.21",
    ),
}


def manifest_documents() -> list[tuple[str, int, dict[str, Any]]]:
    """(path relative to manifests/, index in the file, document) for every document."""
    found = []
    for path in manifest_files():  # monitoring/ is not installed here (it needs the Prometheus operator)
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc is not None:
                found.append((str(path.relative_to(MANIFESTS)), index, doc))
    return found


def server_side_apply(dynamic: DynamicClient, doc: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
    """Apply `doc` as the tests' field manager; the object as the server has (or would have) it."""
    resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    kwargs: dict[str, Any] = {"field_manager": FIELD_MANAGER, "force_conflicts": True}
    if dry_run:
        kwargs["dry_run"] = "All"
    result = dynamic.server_side_apply(resource, body=doc, namespace=doc["metadata"].get("namespace"), **kwargs)
    return result.to_dict()


def lost_fields(sent: Any, got: Any, path: str = "") -> list[str]:
    """Dotted paths of what was sent but is absent or different in what the server returned."""
    if isinstance(sent, dict):
        if not isinstance(got, dict):
            return [path or "."]
        lost: list[str] = []
        for key, value in sent.items():
            where = f"{path}.{key}" if path else key
            lost += lost_fields(value, got[key], where) if key in got else [where]
        return lost
    if isinstance(sent, list):
        if not isinstance(got, list) or len(got) != len(sent):
            return [path]
        return [p for i, (s, g) in enumerate(zip(sent, got, strict=True)) for p in lost_fields(s, g, f"{path}[{i}]")]
    return [] if sent == got else [path]


def doc_id(rel: str, index: int, doc: dict[str, Any]) -> str:
    return f"{rel}#{index}:{doc['kind']}/{doc['metadata']['name']}"


DOCUMENTS = manifest_documents()


@pytest.fixture(scope="module")
def server_minor(local_cluster: LocalCluster) -> int:
    return minor_of(local_cluster.api_client)


@pytest.fixture(scope="module")
def dynamic(local_cluster: LocalCluster, server_minor: int) -> DynamicClient:
    """A dynamic client whose discovery already sees cert-manager's kinds where they are installed."""
    if server_minor >= CERT_MANAGER_FROM:
        install_cert_manager_crds(dynamic_client(local_cluster.api_client))
    return dynamic_client(local_cluster.api_client)


def install_cert_manager_crds(dynamic: DynamicClient) -> None:
    found = subprocess.run(["bash", str(SCRIPT), "crds", "cert-manager"], capture_output=True, text=True, timeout=600)
    assert found.returncode == 0, f"hack/local-cluster.sh crds cert-manager failed: {found.stderr[-2000:]}"
    directory = Path(found.stdout.strip())
    definitions = dynamic.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    for name in CERT_MANAGER_CRDS:
        crd = yaml.safe_load((directory / name).read_text())
        dynamic.server_side_apply(definitions, body=crd, field_manager=FIELD_MANAGER, force_conflicts=True)

        def established(crd_name: str = crd["metadata"]["name"]) -> bool:
            conditions = (definitions.get(name=crd_name).to_dict().get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        wait_for(established, 60, f"CustomResourceDefinition {crd['metadata']['name']} Established")


@pytest.fixture(scope="module")
def manifest_namespaces(dynamic: DynamicClient) -> Iterator[None]:
    """Namespaced dry runs need their namespace to exist: apply the Namespace manifests for real.
    They are left in place (nothing finalizes a deleted namespace without a controller-manager)."""
    for _, _, doc in DOCUMENTS:
        if doc["kind"] == "Namespace":
            server_side_apply(dynamic, doc, dry_run=False)
    yield


@pytest.mark.parametrize(("rel", "index", "doc"), [pytest.param(r, i, d, id=doc_id(r, i, d)) for r, i, d in DOCUMENTS])
def test_manifest_is_accepted_by_the_apiserver(
    dynamic: DynamicClient, server_minor: int, manifest_namespaces: None, rel: str, index: int, doc: dict[str, Any]
):
    key = (doc["apiVersion"], doc["kind"])
    try:
        dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    except ResourceNotFoundError:
        expected = unserved_on(server_minor)
        if key not in expected:
            pytest.fail(f"the apiserver (1.{server_minor}) does not serve {key} and no reason is recorded")
        pytest.skip(f"{doc['kind']}/{doc['metadata']['name']} not tried on 1.{server_minor}: {expected[key]}")
    stored = server_side_apply(dynamic, doc, dry_run=True)
    lost = lost_fields(doc, stored)
    allowed = {
        field
        for (api_version, kind, field), (kept_from, _) in DROPPED.items()
        if (api_version, kind) == key and server_minor < kept_from
    }
    assert sorted(set(lost) - allowed) == [], f"the apiserver dropped or changed {sorted(set(lost) - allowed)}"
    assert stored["metadata"]["name"] == doc["metadata"]["name"]


def test_the_recorded_exceptions_still_apply(dynamic: DynamicClient, server_minor: int, manifest_namespaces: None):
    """A skip or a tolerated dropped field that no longer happens (a newer apiserver) is removed here."""
    for (api_version, kind), reason in unserved_on(server_minor).items():
        assert any((d["apiVersion"], d["kind"]) == (api_version, kind) for _, _, d in DOCUMENTS), reason
        with pytest.raises(ResourceNotFoundError):
            dynamic.resources.get(api_version=api_version, kind=kind)
    for (api_version, kind, field), (kept_from, _) in DROPPED.items():
        if server_minor >= kept_from:
            continue  # kept: test_manifest_is_accepted_by_the_apiserver checks the field is there
        docs = [d for _, _, d in DOCUMENTS if (d["apiVersion"], d["kind"]) == (api_version, kind)]
        assert docs, field
        for doc in docs:
            assert field in lost_fields(doc, server_side_apply(dynamic, doc, dry_run=True))


# The version 1.20 serves of each kind it skips above, with the same fields, and the release that removed it.
OLDER_API_VERSIONS = {
    ("policy/v1", "PodDisruptionBudget"): ("policy/v1beta1", 25),
    ("batch/v1", "CronJob"): ("batch/v1beta1", 25),
}


@pytest.mark.parametrize(("api_version", "kind"), list(OLDER_API_VERSIONS))
def test_the_skipped_documents_are_accepted_in_the_older_api_version(
    dynamic: DynamicClient, server_minor: int, manifest_namespaces: None, api_version: str, kind: str
):
    """On 1.20, the skipped PodDisruptionBudgets and CronJob tried as the beta version it serves: their
    fields (unchanged between the two versions) are checked there. A server that removed the beta
    version serves the documents as written (test_manifest_is_accepted_by_the_apiserver applies them)."""
    docs = [d for _, _, d in DOCUMENTS if (d["apiVersion"], d["kind"]) == (api_version, kind)]
    assert docs
    older_version, removed_in = OLDER_API_VERSIONS[(api_version, kind)]
    if server_minor >= removed_in:
        with pytest.raises(ResourceNotFoundError):
            dynamic.resources.get(api_version=older_version, kind=kind)
        dynamic.resources.get(api_version=api_version, kind=kind)
        return
    for doc in docs:
        older = {**doc, "apiVersion": older_version}
        stored = server_side_apply(dynamic, older, dry_run=True)
        assert lost_fields(older, stored) == []
