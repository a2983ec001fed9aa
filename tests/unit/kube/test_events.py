"""Which refusals of an event upstream's recorder expects (client-go record/event.go: V(5), not an error)."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from kube.events import expected_rejection


def api_error(status: int, body: object) -> client.ApiException:
    error = client.ApiException(status=status, reason="x")
    error.body = body if isinstance(body, str) or body is None else json.dumps(body)
    return error


TERMINATING = {"kind": "Status", "reason": "Forbidden", "code": 403, "details": {
    "kind": "events", "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]}}


@pytest.mark.parametrize(("error", "expected"), [
    (api_error(403, TERMINATING), True),  # the namespace of the pod is being deleted
    (api_error(409, {"reason": "AlreadyExists", "code": 409}), True),
    (api_error(403, {"reason": "Forbidden", "code": 403, "details": {"kind": "events"}}), False),  # RBAC
    (api_error(403, "not json"), False),
    (api_error(403, None), False),
    (api_error(422, {"details": {"causes": [{"reason": "FieldValueInvalid"}]}}), False),
    (api_error(500, {"details": {"causes": "not a list"}}), False),
    (TimeoutError("read timed out"), False),
])
def test_only_the_refusals_upstream_expects_are_quiet(error: BaseException, expected: bool):
    assert expected_rejection(error) is expected
