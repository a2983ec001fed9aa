"""The API calls one toleration backfill makes: read the pod live, apply a JSON patch to it.

The patch (controller/backfill.py `json_patch`) tests the pod's uid and resourceVersion, so a pod
changed since the read is refused: the apiserver answers 422 for a failed `test` op (409 on a
write conflict), reported as `Conflict` so the caller re-reads and retries. Gone (404) is done.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from controller.backfill import Conflict
from controller.kube.client import release

log = logging.getLogger("taintkeeper.backfill")

REQUEST_TIMEOUT = (5, 15)
# The client defaults PATCH to json-patch already; say so explicitly, it is what the ops are.
JSON_PATCH = "application/json-patch+json"


class KubeBackfillApi:
    def __init__(self, api_client: client.ApiClient) -> None:
        self._core = client.CoreV1Api(api_client)

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            response = self._core.read_namespaced_pod(name, namespace, _preload_content=False,
                                                      _request_timeout=REQUEST_TIMEOUT)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return json.loads(response.data)

    def patch_pod(self, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]) -> bool:
        try:
            release(self._core.patch_namespaced_pod(name, namespace, [dict(op) for op in ops],
                                                    _content_type=JSON_PATCH, _preload_content=False,
                                                    _request_timeout=REQUEST_TIMEOUT))
        except ApiException as error:
            if error.status == 404:
                log.info("pod already gone", extra={"pod": f"{namespace}/{name}"})
                return False
            if error.status in (409, 422):
                raise Conflict(f"HTTP {error.status}: {_message(error)}") from error
            raise
        return True


def _message(error: ApiException) -> str:
    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)
    except (ValueError, AttributeError):
        return str(error.reason)
