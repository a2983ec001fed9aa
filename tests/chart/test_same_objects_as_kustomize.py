"""One source of truth: the chart renders what manifests/ installs, object for object and field for field.

With its default values, installed into taintkeeper-system with the namespace made by the chart
(`namespace.create=true`: manifests/ makes it), the chart makes exactly `kubectl kustomize manifests/` (the
self-managed certificates), and each optional piece it turns on makes exactly what its own manifests do.
(tests/chart/test_namespace.py: in another namespace, everything follows it.) A difference is
allowed only when DIFFERENCES lists it with why; a listed difference that no longer exists fails too, so the
list stays true. It is empty: there is none. (What `helm install` adds in the cluster and `helm template`
does not show, Helm's own ownership label and annotations on every object, is no difference of the chart's.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from tests.chart.helm import CHART, Identity, by_identity, render
from tests.unit.manifests.test_manifests import kustomize

MANIFESTS = CHART.parents[1] / "manifests"

# (kind, namespace, name, dotted path) -> why the chart differs from manifests/ there.
DIFFERENCES: dict[tuple[str, str | None, str, str], str] = {}
# An object of manifests/ -> its name in the chart (`helm template`: revision 1), and why it is another.
RENAMED: dict[Identity, tuple[str, str]] = {
    ("Job", "taintkeeper-system", "taintkeeper-certs-sync"): (
        "taintkeeper-certs-sync-1",
        "one certificate Job per release revision: an upgrade changing the image makes a new Job instead of "
        "failing to update the last one's immutable pod template (kubectl apply -k meets it until its TTL)",
    ),
}


# How manifests/ is installed: into taintkeeper-system (tests.chart.helm.NAMESPACE), which it makes itself.
AS_MANIFESTS = ("--set", "namespace.create=true")


def is_hook(doc: dict[str, Any]) -> bool:
    """A Helm hook (templates/uninstall-hook.yaml: it exists only while `helm uninstall` runs, and manifests/
    has no uninstall to match it; tests/chart/test_uninstall_hook.py checks it), or `helm test`'s (its Pod, and
    the ServiceAccount and Roles only that pod uses: manifests/ has no `helm test`; tests/chart/test_helm_test.py)."""
    metadata = doc.get("metadata") or {}
    return (
        "helm.sh/hook" in (metadata.get("annotations") or {})
        or (metadata.get("labels") or {}).get("app.kubernetes.io/component") == "test"
    )


def as_in_manifests(got: dict[Identity, dict[str, Any]]) -> dict[Identity, dict[str, Any]]:
    """The chart's installed objects (hooks left out) under the names manifests/ gives them (RENAMED); a
    listed rename that the chart no longer makes fails, so the list stays true."""
    renamed = {identity: doc for identity, doc in got.items() if not is_hook(doc)}
    for (kind, namespace, name), (chart_name, _why) in RENAMED.items():
        if (kind, namespace, name) in renamed:
            continue  # the chart made it under manifests/' name after all: compared as is, and reported
        doc = renamed.pop((kind, namespace, chart_name), None)
        if doc is not None:
            renamed[(kind, namespace, name)] = {**doc, "metadata": {**doc["metadata"], "name": name}}
    return renamed


def differences(expected: Any, got: Any, path: str = "") -> list[str]:
    """Dotted paths where `got` is not `expected`: missing, extra or different."""
    if isinstance(expected, dict) and isinstance(got, dict):
        found: list[str] = []
        for key in sorted(set(expected) | set(got)):
            where = f"{path}.{key}" if path else key
            if key not in got:
                found.append(f"{where} (missing from the chart)")
            elif key not in expected:
                found.append(f"{where} (only in the chart)")
            else:
                found += differences(expected[key], got[key], where)
        return found
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        pairs = enumerate(zip(expected, got, strict=True))
        return [d for i, (e, g) in pairs for d in differences(e, g, f"{path}[{i}]")]
    return [] if expected == got else [f"{path}: manifests/ has {expected!r:.120}, the chart {got!r:.120}"]


def unexplained(expected: dict[Identity, dict[str, Any]], got: dict[Identity, dict[str, Any]]) -> list[str]:
    """Every difference between the two sets of objects that DIFFERENCES does not list."""
    assert sorted(got) == sorted(expected), "the chart and manifests/ make different objects"
    found = []
    for identity, doc in expected.items():
        for difference in differences(doc, got[identity]):
            path = difference.split(" ")[0].rstrip(":")
            if (*identity, path) not in DIFFERENCES:
                found.append(f"{'/'.join(str(part) for part in identity)}: {difference}")
    return found


def listed_but_gone(expected: dict[Identity, dict[str, Any]], got: dict[Identity, dict[str, Any]]) -> list[str]:
    """DIFFERENCES entries that no longer differ (or name no object)."""
    stale = []
    for kind, namespace, name, path in DIFFERENCES:
        identity = (kind, namespace, name)
        if identity in expected:
            paths = [d.split(" ")[0].rstrip(":") for d in differences(expected[identity], got.get(identity, {}))]
            if path not in paths:
                stale.append(f"{kind}/{name} {path}")
    return stale


def test_default_values_render_the_main_kustomization(helm: Path):
    expected = by_identity(kustomize(MANIFESTS))
    got = as_in_manifests(by_identity(render(helm, *AS_MANIFESTS)))
    assert unexplained(expected, got) == []
    assert listed_but_gone(expected, got) == []


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


class Option(NamedTuple):
    """Values that turn on a piece of the chart, and the manifests that install the same."""

    name: str
    sets: tuple[str, ...]
    manifests: tuple[str, ...]  # kustomization directories or plain files under manifests/


OPTIONS = [
    Option(
        "cert-manager certificates render manifests/cert-manager", ("certificates.mode=certManager",), ("cert-manager",)
    ),
    Option(
        "the PrometheusRule renders manifests/monitoring/prometheusrule.yaml",
        ("prometheusRule.enabled=true",),
        (".", "monitoring/prometheusrule.yaml"),
    ),
    Option(
        "the Grafana dashboard renders manifests/monitoring/grafana",
        ("grafanaDashboard.enabled=true",),
        (".", "monitoring/grafana"),
    ),
    # The manifest's apiserver address is a placeholder the chart makes the operator give.
    Option(
        "the NetworkPolicy renders manifests/network-policy",
        ("networkPolicy.enabled=true", "networkPolicy.apiserver[0].ipBlock.cidr=192.0.2.0/24"),
        (".", "network-policy"),
    ),
]


@pytest.mark.parametrize("option", OPTIONS, ids=[o.name for o in OPTIONS])
def test_each_option_renders_what_its_manifests_install(helm: Path, option: Option):
    expected: list[dict[str, Any]] = []
    for source in option.manifests:
        path = MANIFESTS / source
        expected += kustomize(path) if path.is_dir() else documents(path)
    sets = [arg for value in option.sets for arg in ("--set", value)]
    assert unexplained(by_identity(expected), as_in_manifests(by_identity(render(helm, *AS_MANIFESTS, *sets)))) == []


POLICY_SERVED = ("--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")


@pytest.mark.parametrize(
    "sets",
    [("--set", "admission.mode=policy", *POLICY_SERVED), ("--set", "admission.mode=auto", *POLICY_SERVED)],
    ids=["policy", "auto where the cluster serves the policy"],
)
def test_the_policy_mode_renders_manifests_admission_policy(helm: Path, sets: tuple[str, ...]):
    expected = by_identity(kustomize(MANIFESTS / "admission-policy"))
    assert unexplained(expected, as_in_manifests(by_identity(render(helm, *AS_MANIFESTS, *sets)))) == []


def test_auto_where_the_cluster_lacks_the_policy_renders_the_webhook(helm: Path):
    expected = by_identity(kustomize(MANIFESTS))
    assert (
        unexplained(expected, as_in_manifests(by_identity(render(helm, *AS_MANIFESTS, "--set", "admission.mode=auto"))))
        == []
    )


def test_the_policy_takes_the_seconds_of_the_webhooks_flags(helm: Path):
    docs = render(
        helm,
        *("--set", "admission.mode=policy", *POLICY_SERVED),
        *("--set", "webhook.flags.default-unreachable-toleration-seconds=45"),
        *("--set", "controller.flags.default-unreachable-toleration-seconds=45"),
    )
    (parameter,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "taintkeeper-defaults"]
    assert parameter["data"] == {
        "default-not-ready-toleration-seconds": "300",
        "default-unreachable-toleration-seconds": "45",
    }


def test_without_the_operator_roles_the_chart_renders_the_rest_of_the_main_kustomization(helm: Path):
    roles = by_identity(documents(MANIFESTS / "base" / "operator-rbac.yaml"))
    assert roles, "manifests/base/operator-rbac.yaml has no roles"
    expected = {key: doc for key, doc in by_identity(kustomize(MANIFESTS)).items() if key not in roles}
    assert (
        unexplained(
            expected, as_in_manifests(by_identity(render(helm, *AS_MANIFESTS, "--set", "operatorRoles.create=false")))
        )
        == []
    )


@pytest.mark.parametrize(
    "copy, original",
    [
        ("files/taintkeeper.json", "monitoring/grafana/taintkeeper.json"),
        ("files/taintkeeper-rules.yaml", "monitoring/prometheus/taintkeeper-rules.yaml"),
    ],
    ids=["the dashboard", "the alert rules"],
)
def test_the_chart_carries_exact_copies_of_the_monitoring_files(copy: str, original: str):
    # Helm reads only files inside the chart, and kustomize only files inside its kustomization: each needs
    # its own copy. Update the chart's with: cp manifests/<original> charts/taintkeeper/<copy>
    assert (CHART / copy).read_bytes() == (MANIFESTS / original).read_bytes(), f"cp manifests/{original} {CHART / copy}"
