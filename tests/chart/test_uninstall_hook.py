"""The uninstall's first step: a pre-delete hook that deletes the MutatingWebhookConfiguration before Helm
deletes the webhook's pods (tests/helm_release/ shows the order in the audit log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chart.helm import by_identity, render

HOOK_OBJECTS = [
    ("ServiceAccount", "taintkeeper-system", "taintkeeper-unregister"),
    ("ClusterRole", None, "taintkeeper-unregister"),
    ("ClusterRoleBinding", None, "taintkeeper-unregister"),
    ("Job", "taintkeeper-system", "taintkeeper-unregister"),
]


@pytest.mark.parametrize("mode", ["selfManaged", "certManager"])
def test_every_install_carries_a_pre_delete_hook_that_unregisters_the_webhook(helm: Path, mode: str):
    docs = by_identity(render(helm, "--set", f"certificates.mode={mode}"))
    hooks = {
        key: doc
        for key, doc in docs.items()
        if (doc["metadata"].get("annotations") or {}).get("helm.sh/hook") == "pre-delete"
    }
    assert sorted(hooks, key=str) == sorted(HOOK_OBJECTS, key=str)
    for doc in hooks.values():
        annotations = doc["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "pre-delete"
        assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    weights = {key[0]: int(doc["metadata"]["annotations"]["helm.sh/hook-weight"]) for key, doc in hooks.items()}
    assert weights["Job"] > max(w for kind, w in weights.items() if kind != "Job"), "the Job runs once it may"
    job = hooks[("Job", "taintkeeper-system", "taintkeeper-unregister")]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "-m", "certs", "unregister", "--webhook-configuration", "taintkeeper"]
    (rule,) = hooks[("ClusterRole", None, "taintkeeper-unregister")]["rules"]
    assert rule["resourceNames"] == ["taintkeeper"] and rule["verbs"] == ["delete"]
