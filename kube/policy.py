"""The policy API group as taintkeeper uses it: which version the server serves, an Eviction for
it, and where its PodDisruptionBudgets are.

`policy/v1` is served from Kubernetes 1.21; 1.20 serves only `policy/v1beta1`. Both take the
same Eviction (a pods/eviction subresource) and have the same PodDisruptionBudget fields read here.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from kube.errors import is_not_found
from kube.request import Timeout, request_json

V1 = "policy/v1"
V1BETA1 = "policy/v1beta1"
EVICTION_PATH = "/api/v1/namespaces/{namespace}/pods/{name}/eviction"


def served_policy_version(api_client: client.ApiClient, timeout: Timeout) -> str:
    """`policy/v1` if the server serves it, else `policy/v1beta1` (asked once per caller: cache it)."""
    try:
        group = request_json(api_client, "GET", "/apis/policy", timeout=timeout)
    except Exception as error:
        if is_not_found(error):
            return V1BETA1
        raise
    return version_served(group)


def version_served(group: dict[str, Any]) -> str:
    """From the policy group's discovery document (GET /apis/policy): v1 if listed, else v1beta1."""
    versions = {str(version.get("groupVersion")) for version in group.get("versions") or []}
    return V1 if V1 in versions else V1BETA1


def eviction_body(version: str, namespace: str, name: str, uid: str) -> dict[str, Any]:
    """An Eviction of the pod with this uid only: a new pod that took the name is not evicted (409)."""
    return {
        "apiVersion": version,
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}},
    }


def budgets_path(version: str) -> str:
    """The path of a namespace's PodDisruptionBudgets (path parameter `namespace`)."""
    return f"/apis/{version}/namespaces/{{namespace}}/poddisruptionbudgets"
