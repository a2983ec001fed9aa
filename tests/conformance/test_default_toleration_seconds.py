"""Conformance: upstream's DefaultTolerationSeconds admission tests, ported to taintkeeper's webhook.

Ported (rewritten, not copied) from kubernetes/kubernetes
plugin/pkg/admission/defaulttolerationseconds/admission_test.go at commit
238fb922720c3c70e0807e24020a07350ab9d9fb (the version whose plugin takes a Configuration with both
seconds at 300; the rows are those of every release since the alpha-taint rows went, e.g. the older
a91e210b4eaae85b32a1733e79cfa1e1db9401db differs only in key constants and the missing config).

Upstream admits an internal Pod in place and compares its tolerations; here each row goes through
`webhook.admission.review_pod` as an AdmissionReview (v1) for CREATE and for UPDATE, the returned
JSONPatch is applied to the pod, and the resulting tolerations must equal upstream's expected list,
order included (upstream: "the order of tolerations matters"). Upstream wraps its plugin in
`WithReinvocationTesting`, admitting twice; here the patched pod is reviewed again and must need no
further patch. `shared.defaults.missing_default_tolerations` must name exactly the appended tolerations.
"""

from __future__ import annotations

import base64
import copy
import json

import jsonpatch
import pytest

from shared.defaults import missing_default_tolerations
from webhook.admission import review_pod

# (test id, docs/architecture.md entry): taintkeeper's webhook does what the built-in plugin does, exactly.
DELIBERATE_DIFFERENCES: list[tuple[str, str]] = []

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
SECONDS = 300  # the Configuration of upstream's test: both seconds 300


def default(key: str, seconds: int = SECONDS) -> dict:
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


FOO_BAR_NOSCHEDULE_700 = {
    "key": "foo",
    "operator": "Equal",
    "value": "bar",
    "effect": "NoSchedule",
    "tolerationSeconds": 700,
}
UNREACHABLE_ANY_EFFECT_700 = {"key": UNREACHABLE, "operator": "Exists", "tolerationSeconds": 700}
WILDCARD_700 = {"operator": "Exists", "tolerationSeconds": 700}


def admission_review(tolerations: list[dict] | None, operation: str) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}
    if tolerations is not None:
        spec["tolerations"] = copy.deepcopy(tolerations)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "foo", "name": "name"}, "spec": spec}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0a6f0a8c-6b1f-4a5e-9a43-4c5d8c1f2e00",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "foo",
            "name": "name",
            "operation": operation,
            "object": pod,
            "oldObject": copy.deepcopy(pod) if operation == "UPDATE" else None,
        },
    }


def admitted_tolerations(body: dict) -> tuple[list[dict] | None, dict]:
    """Review `body`; return the pod's tolerations after the response's patch, and the response."""
    response = review_pod(body, SECONDS, SECONDS).response["response"]
    assert isinstance(response, dict)
    assert response["uid"] == body["request"]["uid"]
    assert response["allowed"] is True
    pod = copy.deepcopy(body["request"]["object"])
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        pod = jsonpatch.apply_patch(pod, json.loads(base64.b64decode(response["patch"])))
    return pod["spec"].get("tolerations"), response


# --- TestForgivenessAdmission ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        pytest.param(
            None,
            [default(NOT_READY), default(UNREACHABLE)],
            id="pod has no tolerations, expect add tolerations for `not-ready:NoExecute` and `unreachable:NoExecute`",
        ),
        pytest.param(
            [FOO_BAR_NOSCHEDULE_700],
            [FOO_BAR_NOSCHEDULE_700, default(NOT_READY), default(UNREACHABLE)],
            id="pod has tolerations, but none is for taint `not-ready:NoExecute` or `unreachable:NoExecute`, "
            "expect add tolerations for `not-ready:NoExecute` and `unreachable:NoExecute`",
        ),
        pytest.param(
            [default(NOT_READY, 700)],
            [default(NOT_READY, 700), default(UNREACHABLE)],
            id="pod specified a toleration for taint `not-ready:NoExecute`, expect add toleration for "
            "`unreachable:NoExecute`",
        ),
        pytest.param(
            [default(UNREACHABLE, 700)],
            [default(UNREACHABLE, 700), default(NOT_READY)],
            id="pod specified a toleration for taint `unreachable:NoExecute`, expect add toleration for "
            "`not-ready:NoExecute`",
        ),
        pytest.param(
            [default(NOT_READY, 700), default(UNREACHABLE, 700)],
            [default(NOT_READY, 700), default(UNREACHABLE, 700)],
            id="pod specified tolerations for both `not-ready:NoExecute` and `unreachable:NoExecute`, expect no change",
        ),
        pytest.param(
            [UNREACHABLE_ANY_EFFECT_700],
            [UNREACHABLE_ANY_EFFECT_700, default(NOT_READY)],
            id="pod specified toleration for taint `unreachable`, expect add toleration for `not-ready:NoExecute`",
        ),
        pytest.param(
            [WILDCARD_700], [WILDCARD_700], id="pod has wildcard toleration for all kind of taints, expect no change"
        ),
    ],
)
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_forgiveness_admission(requested, expected, operation):
    tolerations, response = admitted_tolerations(admission_review(requested, operation))
    assert tolerations == expected
    assert ("patch" in response) is (expected != (requested or []))
    assert missing_default_tolerations(requested or []) == expected[len(requested or []) :]
    # upstream's reinvocation testing: admitting the admitted pod again changes nothing
    again, response = admitted_tolerations(admission_review(tolerations, operation))
    assert again == expected
    assert "patch" not in response


# --- TestHandles ---------------------------------------------------------------------------------------------
# Upstream asks the plugin which operations it handles; here: does a pod lacking the defaults get them
# under that operation (the same pod object each time, so only the operation differs)?


@pytest.mark.parametrize(
    ("operation", "handles"),
    [
        pytest.param("UPDATE", True, id="Update"),
        pytest.param("CREATE", True, id="Create"),
        pytest.param("DELETE", False, id="Delete"),
        pytest.param("CONNECT", False, id="Connect"),
    ],
)
def test_handles(operation, handles):
    tolerations, response = admitted_tolerations(admission_review(None, operation))
    assert ("patch" in response) is handles
    assert tolerations == ([default(NOT_READY), default(UNREACHABLE)] if handles else None)
