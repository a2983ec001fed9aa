"""kubectl_taintkeeper/forbidden.py: a refused request names the role to bind; any other error is left as it
was. The commands' lines against the real apiserver: tests/integration/test_operator_roles.py."""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from kubectl_taintkeeper.forbidden import FENCER, VIEWER, explained, namespace_viewer

REFUSED = 'nodes "n1" is forbidden: User "alice" cannot patch resource "nodes" in API group "" at the cluster scope'


def api_error(status: int, reason: str, message: str = "") -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps({"kind": "Status", "message": message}) if message else None
    return error


def test_a_refusal_names_the_role_that_grants_it() -> None:
    assert explained(api_error(403, "Forbidden", REFUSED), FENCER) == (
        f"403 Forbidden: {REFUSED} (bind the ClusterRole taintkeeper-fencer)"
    )


def test_the_namespaced_role_is_named_with_its_namespace() -> None:
    assert explained(api_error(403, "Forbidden"), namespace_viewer("ops")) == (
        "403 Forbidden (bind the Role taintkeeper-viewer in ops)"
    )


@pytest.mark.parametrize(
    "error",
    [
        api_error(404, "Not Found", 'nodes "n1" not found'),
        api_error(401, "Unauthorized"),  # no credentials, or stale ones: no role helps
        api_error(500, "Internal Server Error", "etcdserver: request timed out"),
        urllib3.exceptions.MaxRetryError(None, "/api/v1/nodes", "Connection refused"),  # type: ignore[arg-type]
    ],
    ids=["not found", "unauthorized", "a server error", "no answer"],
)
def test_any_other_error_names_no_role(error: BaseException) -> None:
    assert "bind" not in explained(error, VIEWER)
    assert "\n" not in explained(error, VIEWER)
