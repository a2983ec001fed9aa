"""The AdmissionReview every benchmark request carries, and the check that a reply mutated it.

One shared definition keeps the three servers honest: the static app precomputes its reply from
this review, and each server must answer it with a patch that adds both default tolerations
before it is measured.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch

from shared.defaults import missing_default_tolerations

REVIEW_UID = "705ab4f5-6393-11e8-b7cc-42010a800002"


def typical_review() -> dict[str, Any]:
    """A ~1.2 KB admission.k8s.io/v1 CREATE of an ordinary pod without tolerations, so it is always mutated."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "web-7d4b9c8f6d-",
            "namespace": "shop",
            "labels": {"app": "web", "tier": "frontend", "pod-template-hash": "7d4b9c8f6d"},
        },
        "spec": {
            "containers": [
                {
                    "name": "web",
                    "image": "registry.example.com/shop/web:1.24.3",
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "256Mi"},
                        "limits": {"cpu": "1", "memory": "512Mi"},
                    },
                    "env": [
                        {"name": "LOG_LEVEL", "value": "info"},
                        {"name": "DB_HOST", "value": "postgres.shop.svc.cluster.local"},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    ],
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
        },
        "status": {},
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": REVIEW_UID,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
            },
            "object": pod,
            "oldObject": None,
            "dryRun": False,
        },
    }


def review_bytes() -> bytes:
    """The request body exactly as POSTed (compact JSON)."""
    return json.dumps(typical_review(), separators=(",", ":")).encode()


def mutation_problem(response_body: bytes) -> str | None:
    """Why a reply does not add both default tolerations to the typical pod; None when it does."""
    try:
        reply = json.loads(response_body)
        response = reply["response"]
    except (ValueError, KeyError, TypeError) as error:
        return f"not an AdmissionReview reply: {error!r}"
    if response.get("uid") != REVIEW_UID or response.get("allowed") is not True:
        return f"uid/allowed wrong: {response!r}"
    if response.get("patchType") != "JSONPatch" or not response.get("patch"):
        return f"no JSONPatch in reply: {response!r}"
    try:
        patch = json.loads(base64.b64decode(response["patch"]))
        pod = jsonpatch.apply_patch(typical_review()["request"]["object"], patch)
    except (ValueError, jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
        return f"patch does not apply: {error!r}"
    tolerations = pod["spec"].get("tolerations") or []
    if missing_default_tolerations(tolerations) or len(tolerations) != 2:
        return f"patched pod has the wrong tolerations: {tolerations!r}"
    return None
