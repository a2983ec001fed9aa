"""The API calls one toleration backfill makes: read the pod live, apply a JSON patch to it.

The patch (decision.py `json_patch`) tests the pod's uid and resourceVersion, so a pod changed since
the read is refused: the apiserver answers 422 for a failed `test` op (409 on a write conflict),
raised as `ChangedSinceRead` (kube/errors.py) so the caller re-reads and retries. As every API edge of
the controller, each call returns None when the pod is gone (404) and raises on any other failure; a
patch the write fence refuses (kube/fence.py) raises WriteFenced: retried, never done.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from kubernetes import client
from kubernetes.client.rest import ApiException

from kube.client import JSON_PATCH, WORKER_REQUEST_TIMEOUT, json_patch_unless_gone
from kube.errors import is_not_found
from kube.fence import WriteFence
from kube.request import response_json

log = logging.getLogger("taintkeeper.backfill")

# What the write fence refused (the `action` label of taintkeeper_fenced_writes_total).
TOLERATIONS_ACTION = "pod-tolerations"


class KubeBackfillApi:
    def __init__(self, api_client: client.ApiClient, fence: WriteFence) -> None:
        self._core = client.CoreV1Api(api_client)
        self._fence = fence

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            response = self._core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=WORKER_REQUEST_TIMEOUT
            )
        except ApiException as error:
            if is_not_found(error):
                return None
            raise
        pod: dict[str, Any] = response_json(response)
        return pod

    def patch_pod(self, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]) -> Literal[True] | None:
        self._fence.require(TOLERATIONS_ACTION, f"pod {namespace}/{name}")
        patched = json_patch_unless_gone(
            lambda: self._core.patch_namespaced_pod(
                name,
                namespace,
                [dict(op) for op in ops],
                _content_type=JSON_PATCH,
                _preload_content=False,
                _request_timeout=WORKER_REQUEST_TIMEOUT,
            )
        )
        if patched is None:
            log.info("pod already gone", extra={"pod": f"{namespace}/{name}"})
        return patched
