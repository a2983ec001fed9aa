"""Every manifest document applied to the real local kube-apiserver (1.20.2) with server-side apply
and `dryRun=All`: the server's own validation and defaulting, nothing persisted (except the
Namespace, which namespaced dry runs need and which is applied for real first).

1.20 predates what the manifests target (they are validated offline against 1.28-1.33), so a few
documents cannot be tried here. They are skipped only when discovery shows the server does not
serve their kind, and only if they are listed in UNSERVED with the reason; anything else unserved
fails. A field the server silently drops (1.20 has no strict field validation) fails too, unless
it is listed in DROPPED with the reason and the server is older than the release that keeps it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from tests.integration.kube import LocalCluster
from tests.unit.manifests.test_manifests import manifest_files

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
FIELD_MANAGER = "taintkeeper-tests"

# (apiVersion, kind) -> why a 1.20 apiserver does not serve it.
UNSERVED = {
    ("policy/v1", "PodDisruptionBudget"): "policy/v1 PodDisruptionBudget is served from Kubernetes 1.21 on "
                                          "(1.20 has only policy/v1beta1)",
    ("batch/v1", "CronJob"): "batch/v1 CronJob is served from Kubernetes 1.21 on (1.20 has only batch/v1beta1)",
    ("cert-manager.io/v1", "Issuer"): "cert-manager's CRDs are not installed on the local apiserver",
    ("cert-manager.io/v1", "Certificate"): "cert-manager's CRDs are not installed on the local apiserver",
}
# (apiVersion, kind, dotted field) -> (first minor version that keeps it, why an older one drops it).
DROPPED = {
    ("batch/v1", "Job", "spec.ttlSecondsAfterFinished"): (
        21, "the TTLAfterFinished feature gate is alpha (off) in 1.20 and beta (on) from 1.21"),
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
def dynamic(local_cluster: LocalCluster) -> DynamicClient:
    return DynamicClient(local_cluster.api_client)


@pytest.fixture(scope="module")
def server_minor(local_cluster: LocalCluster) -> int:
    info = client.VersionApi(local_cluster.api_client).get_code()
    return int("".join(ch for ch in info.minor if ch.isdigit()))


@pytest.fixture(scope="module")
def manifest_namespaces(dynamic: DynamicClient) -> Iterator[None]:
    """Namespaced dry runs need their namespace to exist: apply the Namespace manifests for real.
    They are left in place (nothing finalizes a deleted namespace without a controller-manager)."""
    for _, _, doc in DOCUMENTS:
        if doc["kind"] == "Namespace":
            server_side_apply(dynamic, doc, dry_run=False)
    yield


@pytest.mark.parametrize(("rel", "index", "doc"), [pytest.param(r, i, d, id=doc_id(r, i, d)) for r, i, d in DOCUMENTS])
def test_manifest_is_accepted_by_the_apiserver(dynamic: DynamicClient, server_minor: int, manifest_namespaces: None,
                                               rel: str, index: int, doc: dict[str, Any]):
    key = (doc["apiVersion"], doc["kind"])
    try:
        dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    except ResourceNotFoundError:
        if key not in UNSERVED:
            pytest.fail(f"the apiserver (1.{server_minor}) does not serve {key} and no reason is recorded")
        pytest.skip(f"{doc['kind']}/{doc['metadata']['name']} not tried on 1.{server_minor}: {UNSERVED[key]}")
    stored = server_side_apply(dynamic, doc, dry_run=True)
    lost = lost_fields(doc, stored)
    allowed = {field for (api_version, kind, field), (kept_from, _) in DROPPED.items()
               if (api_version, kind) == key and server_minor < kept_from}
    assert sorted(set(lost) - allowed) == [], f"the apiserver dropped or changed {sorted(set(lost) - allowed)}"
    assert stored["metadata"]["name"] == doc["metadata"]["name"]


def test_the_recorded_exceptions_still_apply(dynamic: DynamicClient, server_minor: int, manifest_namespaces: None):
    """A skip or a tolerated dropped field that no longer happens (a newer apiserver) is removed here."""
    for (api_version, kind), reason in UNSERVED.items():
        assert any((d["apiVersion"], d["kind"]) == (api_version, kind) for _, _, d in DOCUMENTS), reason
        with pytest.raises(ResourceNotFoundError):
            dynamic.resources.get(api_version=api_version, kind=kind)
    for (api_version, kind, field), (kept_from, _) in DROPPED.items():
        assert server_minor < kept_from
        docs = [d for _, _, d in DOCUMENTS if (d["apiVersion"], d["kind"]) == (api_version, kind)]
        assert docs, field
        for doc in docs:
            assert field in lost_fields(doc, server_side_apply(dynamic, doc, dry_run=True))


# The version 1.20 serves of each kind it skips above, with the same fields.
OLDER_API_VERSIONS = {("policy/v1", "PodDisruptionBudget"): "policy/v1beta1", ("batch/v1", "CronJob"): "batch/v1beta1"}


@pytest.mark.parametrize(("api_version", "kind"), list(OLDER_API_VERSIONS))
def test_the_skipped_documents_are_accepted_in_the_older_api_version(dynamic: DynamicClient,
                                                                    manifest_namespaces: None,
                                                                    api_version: str, kind: str):
    """The skipped PodDisruptionBudgets and CronJob, tried as the beta version 1.20 serves: their
    fields (unchanged between the two versions) are checked there."""
    docs = [d for _, _, d in DOCUMENTS if (d["apiVersion"], d["kind"]) == (api_version, kind)]
    assert docs
    for doc in docs:
        older = {**doc, "apiVersion": OLDER_API_VERSIONS[(api_version, kind)]}
        stored = server_side_apply(dynamic, older, dry_run=True)
        assert lost_fields(older, stored) == []
