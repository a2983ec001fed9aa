"""`helm test`: a test hook Pod runs `python -m kubectl_taintkeeper.release_check` from taintkeeper's own image
(no other image: a cluster may reach no registry) under a ServiceAccount that may only create pods in the
namespace it checks (dry-run) and read the controller's Lease. Only the Pod is a test hook (Helm's `--logs`
reads every test hook's log as a pod's), kept after it passed for `--logs` and replaced at the next run;
the ServiceAccount and its Roles are installed with the release."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pytest

from kubectl_taintkeeper.release_check import build_parser
from tests.chart.helm import APP_VERSION, render

POLICY_SERVED = ("--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")


def helm_test_objects(docs: list[dict[str, Any]]) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    """The test hook and the objects only it uses (labelled app.kubernetes.io/component=test)."""
    return {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
        for d in docs
        if (d["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "test"
    }


class Case(NamedTuple):
    name: str
    args: tuple[str, ...]
    namespace: str  # the release's
    pod_namespace: str
    seconds: tuple[int, int]


CASES = [
    Case("the default values", (), "taintkeeper-system", "default", (300, 300)),
    Case(
        "another namespace, another checked namespace, other seconds",
        (
            *("--namespace", "team-a", "--set", "helmTest.podNamespace=apps"),
            *("--set", "webhook.flags.default-unreachable-toleration-seconds=45"),
            *("--set", "controller.flags.default-unreachable-toleration-seconds=45"),
        ),
        "team-a",
        "apps",
        (300, 45),
    ),
    Case(
        "the admission policy",
        ("--set", "admission.mode=policy", *POLICY_SERVED),
        "taintkeeper-system",
        "default",
        (300, 300),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_helm_test_checks_a_pods_tolerations_and_the_lease_with_least_privilege(helm: Path, case: Case):
    hooks = helm_test_objects(render(helm, *case.args))
    ns = case.namespace
    assert sorted(hooks) == sorted(
        [
            ("ServiceAccount", ns, "taintkeeper-test"),
            ("Role", ns, "taintkeeper-test-lease"),
            ("RoleBinding", ns, "taintkeeper-test-lease"),
            ("Role", case.pod_namespace, "taintkeeper-test-pods"),
            ("RoleBinding", case.pod_namespace, "taintkeeper-test-pods"),
            ("Pod", ns, "taintkeeper-test"),
        ]
    )
    pod_key = ("Pod", ns, "taintkeeper-test")
    for identity, doc in hooks.items():
        annotations = doc["metadata"].get("annotations") or {}
        if identity == pod_key:  # kept after it passed, so `helm test --logs` still finds it
            assert annotations["helm.sh/hook"] == "test"
            assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation"
        else:  # installed with the release: a test hook would be read as a pod by `--logs`
            assert "helm.sh/hook" not in annotations, identity

    (lease_rule,) = hooks[("Role", ns, "taintkeeper-test-lease")]["rules"]
    assert lease_rule == {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": ["taintkeeper-controller"],
        "verbs": ["get"],
    }
    (pods_rule,) = hooks[("Role", case.pod_namespace, "taintkeeper-test-pods")]["rules"]
    assert pods_rule == {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}
    for binding in ("taintkeeper-test-lease", "taintkeeper-test-pods"):
        (found,) = [d for (kind, _, name), d in hooks.items() if (kind, name) == ("RoleBinding", binding)]
        assert found["subjects"] == [{"kind": "ServiceAccount", "name": "taintkeeper-test", "namespace": ns}]

    spec = hooks[pod_key]["spec"]
    assert spec["restartPolicy"] == "Never" and spec["serviceAccountName"] == "taintkeeper-test"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    assert container["image"] == f"taintkeeper:{APP_VERSION}"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["command"][:3] == ["python", "-m", "kubectl_taintkeeper.release_check"]
    # What the checker is told, read by its own parser.
    args = build_parser().parse_args(container["command"][3:])
    assert (args.lease_namespace, args.lease_name, args.pod_namespace) == (
        ns,
        "taintkeeper-controller",
        case.pod_namespace,
    )
    assert (args.not_ready_seconds, args.unreachable_seconds) == case.seconds
    assert args.image == f"taintkeeper:{APP_VERSION}"


def test_helm_test_can_be_left_out(helm: Path):
    assert helm_test_objects(render(helm, "--set", "helmTest.enabled=false")) == {}
