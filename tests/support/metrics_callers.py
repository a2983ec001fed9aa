"""Callers of a server's /metrics: ServiceAccounts of a test's namespace with a token from the
TokenRequest API, bound to the ClusterRole taintkeeper-metrics-reader or to nothing."""

from __future__ import annotations

import contextlib
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from kube.request import request_json

READER_ROLE = "taintkeeper-metrics-reader"


def service_account_token(api_client: Any, namespace: str, name: str, *, reader: bool) -> str:
    """A ServiceAccount `name` in `namespace` (bound to taintkeeper-metrics-reader if `reader`) and a token for it.
    Its other bindings are the caller's (`bind`)."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount.model_validate({"metadata": {"name": name}})
    )
    if reader:
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{namespace}-{name}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }
        request_json(
            api_client, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body=binding, timeout=30
        )
    answer = request_json(
        api_client,
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
        timeout=30,
    )
    return str(answer["status"]["token"])


def bind(api_client: Any, namespace: str, account: str, kind: str, role: str, where: str | None = None) -> str:
    """Bind the ServiceAccount to a ClusterRole (cluster-wide) or a Role in `where`; returns the binding's path."""
    name = f"{namespace}-{account}-{role}"
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    collection = (
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
        if kind == "ClusterRole"
        else f"/apis/rbac.authorization.k8s.io/v1/namespaces/{where}/rolebindings"
    )
    request_json(api_client, "POST", collection, body=binding, timeout=30)
    return f"{collection}/{name}"


def delete_reader_binding(api_client: Any, namespace: str, name: str) -> None:
    with contextlib.suppress(Exception):
        request_json(
            api_client,
            "DELETE",
            f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{namespace}-{name}",
            timeout=30,
        )


def get_status(endpoint: str, path: str, token: str | None) -> int:
    """The status of GET https://endpoint/path (the certificate not checked: it names no pod IP)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    request = urllib.request.Request(f"https://{endpoint}{path}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def token_kubeconfig(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    """A kubeconfig at `path` for the admin's cluster with `token` as its only credential."""
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = admin["clusters"][0]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": "caller", "user": {"token": token}}],
                "contexts": [{"name": "caller", "context": {"cluster": cluster["name"], "user": "caller"}}],
                "current-context": "caller",
            }
        )
    )
    return path
