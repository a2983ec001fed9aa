"""The chart installs into the release's namespace (`helm install -n NAMESPACE [--create-namespace]`), and
everything that names that namespace follows it: the objects, the webhook's and the policy's skip of their
own namespace, the certificate's DNS names, the Lease, the controller's backfill exclusion, the RBAC
subjects, cert-manager's injection, the certificate sync's and the uninstall hook's arguments, the alerts.

The Namespace object itself is the chart's only with `namespace.create=true` (what manifests/ makes, for
`helm template | kubectl apply` and GitOps tools that apply what a chart renders); by default the operator
or `--create-namespace` makes it, and docs/operating.md says which labels to give it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from tests.chart.helm import by_identity, container_args, render
from tests.chart.programs import controller_options

NAMESPACE = "team-a"
POLICY_SERVED = ("--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")


class Install(NamedTuple):
    name: str
    args: tuple[str, ...]


INSTALLS = [
    Install("the default values", ()),
    Install("cert-manager certificates", ("--set", "certificates.mode=certManager")),
    Install("the admission policy", ("--set", "admission.mode=policy", *POLICY_SERVED)),
    Install(
        "every optional piece",
        (
            *("--set", "prometheusRule.enabled=true", "--set", "grafanaDashboard.enabled=true"),
            *("--set", "networkPolicy.enabled=true", "--set", "networkPolicy.apiserver[0].ipBlock.cidr=192.0.2.0/24"),
        ),
    ),
    Install("the namespace made by the chart", ("--set", "namespace.create=true")),
]

# Cluster-scoped kinds: every other kind the chart renders is namespaced.
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}
# Namespaced objects that belong in another namespace than the release's: the kubelets' heartbeats, and
# `helm test`'s dry-run pod (helmTest.podNamespace).
ELSEWHERE = {
    ("Role", "taintkeeper-controller-node-leases"),
    ("RoleBinding", "taintkeeper-controller-node-leases"),
    ("Role", "taintkeeper-test-pods"),
    ("RoleBinding", "taintkeeper-test-pods"),
}


def in_namespace(helm: Path, *args: str) -> list[dict[str, Any]]:
    return render(helm, "--namespace", NAMESPACE, *args)


@pytest.mark.parametrize("install", INSTALLS, ids=[i.name for i in INSTALLS])
def test_every_namespaced_object_goes_into_the_release_namespace(helm: Path, install: Install):
    docs = in_namespace(helm, *install.args)
    misplaced = [
        (doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace"))
        for doc in docs
        if doc["kind"] not in CLUSTER_SCOPED
        and (doc["kind"], doc["metadata"]["name"]) not in ELSEWHERE
        and doc["metadata"].get("namespace") != NAMESPACE
    ]
    assert misplaced == []


@pytest.mark.parametrize("install", INSTALLS, ids=[i.name for i in INSTALLS])
def test_nothing_names_the_default_namespace(helm: Path, install: Install):
    # Subjects, selectors, DNS names, arguments, annotations, the alerts' words: all of it follows.
    text = yaml.safe_dump_all(in_namespace(helm, *install.args))
    assert "taintkeeper-system" not in text


def test_without_namespace_create_the_chart_makes_no_namespace(helm: Path):
    assert [d for d in in_namespace(helm) if d["kind"] == "Namespace"] == []


def test_namespace_create_makes_the_release_namespace_with_its_labels(helm: Path):
    (namespace,) = [d for d in in_namespace(helm, "--set", "namespace.create=true") if d["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == NAMESPACE
    assert namespace["metadata"]["labels"] == {
        "kubernetes.io/metadata.name": NAMESPACE,
        "taintkeeper.io/skip": "true",
        "app.kubernetes.io/part-of": "taintkeeper",
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }
    assert namespace["metadata"]["annotations"] == {"taintkeeper.io/eviction": "respect-disruption-budget"}


class Follows(NamedTuple):
    name: str
    args: tuple[str, ...]
    kind: str
    object_name: str
    path: tuple[str | int | slice, ...]
    expected: Any


FOLLOWS = [
    Follows(
        "the webhook skips its own namespace",
        (),
        "MutatingWebhookConfiguration",
        "taintkeeper",
        ("webhooks", 0, "namespaceSelector", "matchExpressions", 0, "values"),
        [NAMESPACE],
    ),
    Follows(
        "the apiserver calls the Service in the namespace",
        (),
        "MutatingWebhookConfiguration",
        "taintkeeper",
        ("webhooks", 0, "clientConfig", "service", "namespace"),
        NAMESPACE,
    ),
    Follows(
        "the policy skips its own namespace",
        ("--set", "admission.mode=policy", *POLICY_SERVED),
        "MutatingAdmissionPolicy",
        "taintkeeper-default-tolerations",
        ("spec", "matchConstraints", "namespaceSelector", "matchExpressions", 0, "values"),
        [NAMESPACE],
    ),
    Follows(
        "the policy reads its parameter from the namespace",
        ("--set", "admission.mode=policy", *POLICY_SERVED),
        "MutatingAdmissionPolicyBinding",
        "taintkeeper-default-tolerations",
        ("spec", "paramRef", "namespace"),
        NAMESPACE,
    ),
    Follows(
        "the parameter's guard watches the namespace",
        ("--set", "admission.mode=policy", *POLICY_SERVED),
        "ValidatingAdmissionPolicy",
        "taintkeeper-defaults",
        ("spec", "matchConstraints", "namespaceSelector", "matchExpressions", 0, "values"),
        [NAMESPACE],
    ),
    Follows(
        "cert-manager's certificate names the Service in the namespace",
        ("--set", "certificates.mode=certManager"),
        "Certificate",
        "taintkeeper-webhook-tls",
        ("spec", "dnsNames"),
        [
            "taintkeeper-webhook",
            f"taintkeeper-webhook.{NAMESPACE}",
            f"taintkeeper-webhook.{NAMESPACE}.svc",
            f"taintkeeper-webhook.{NAMESPACE}.svc.cluster.local",
        ],
    ),
    Follows(
        "cert-manager injects the CA from the namespace",
        ("--set", "certificates.mode=certManager"),
        "MutatingWebhookConfiguration",
        "taintkeeper",
        ("metadata", "annotations", "cert-manager.io/inject-ca-from"),
        f"{NAMESPACE}/taintkeeper-webhook-tls",
    ),
    Follows(
        "the controller's binding names its ServiceAccount in the namespace",
        (),
        "ClusterRoleBinding",
        "taintkeeper-controller",
        ("subjects", 0, "namespace"),
        NAMESPACE,
    ),
    Follows(
        "the certificate sync writes the Secret in the namespace",
        (),
        "Job",
        "taintkeeper-certs-sync-1",
        ("spec", "template", "spec", "containers", 0, "args", slice(0, 2)),
        ["--namespace", NAMESPACE],
    ),
    Follows(
        "the renewal writes the Secret in the namespace",
        (),
        "CronJob",
        "taintkeeper-certs-renew",
        ("spec", "jobTemplate", "spec", "template", "spec", "containers", 0, "args", slice(0, 2)),
        ["--namespace", NAMESPACE],
    ),
]


def at(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc


@pytest.mark.parametrize("follows", FOLLOWS, ids=[f.name for f in FOLLOWS])
def test_what_names_the_namespace_follows_it(helm: Path, follows: Follows):
    docs = by_identity(in_namespace(helm, *follows.args))
    (doc,) = [d for (kind, _, name), d in docs.items() if (kind, name) == (follows.kind, follows.object_name)]
    assert at(doc, follows.path) == follows.expected


def test_the_controller_takes_its_lease_and_leaves_its_own_pods_to_themselves_in_the_namespace(helm: Path):
    docs = in_namespace(helm)
    assert f"--leader-elect-resource-namespace={NAMESPACE}" in container_args(docs, "taintkeeper-controller")
    options = controller_options(docs)
    assert options.backfill.excluded_namespaces == frozenset({NAMESPACE, "kube-system"})
