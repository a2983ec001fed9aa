"""The API calls one eviction makes: read the node live, mark the pod, delete it.

Deleting is two calls, as upstream: patch the `DisruptionTarget` condition through the status
subresource, then a graceful delete. Both carry the pod's uid as a precondition, so a new pod
that took the same name is never touched. Gone (404) or replaced (409 on the uid) counts as done.
Each of the two asks the write fence first (kube/fence.py): refused, `evict` raises WriteFenced
and the pod is not done; the manager retries it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from controller.objects import PodView
from kube.client import STRATEGIC_MERGE, WORKER_REQUEST_TIMEOUT, read_node_json, release
from kube.errors import is_conflict, is_not_found
from kube.fence import WriteFence
from kube.timestamps import format_time
from shared.taints import no_execute_taints, node_taints

log = logging.getLogger("taintkeeper.eviction")

DISRUPTION_TARGET = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "DeletionByTaintManager",
    "message": "Taint manager: deleting due to NoExecute taint",
}
# What the write fence refused (the `action` label of taintkeeper_fenced_writes_total).
DISRUPTION_TARGET_ACTION = "pod-disruption-target"
DELETION_ACTION = "pod-deletion"


def disruption_target_patch(uid: str, now: float) -> dict[str, Any]:
    """Strategic merge patch for pods/status: conditions merge by type, the uid is a precondition."""
    condition = {**DISRUPTION_TARGET, "lastTransitionTime": format_time(now)}
    return {"metadata": {"uid": uid}, "status": {"conditions": [condition]}}


class KubeEvictionActions:
    def __init__(self, api_client: client.ApiClient, fence: WriteFence) -> None:
        self._core = client.CoreV1Api(api_client)
        self._fence = fence

    def live_no_execute_taints(self, node_name: str) -> Sequence[Mapping[str, Any]] | None:
        node = read_node_json(self._core, node_name, WORKER_REQUEST_TIMEOUT)
        return None if node is None else no_execute_taints(node_taints(node))

    def evict(self, pod: PodView) -> None:
        target = f"pod {pod.key}"
        try:
            self._fence.require(DISRUPTION_TARGET_ACTION, target)
            release(self._core.patch_namespaced_pod_status(
                pod.name, pod.namespace, disruption_target_patch(pod.uid, time.time()),
                _content_type=STRATEGIC_MERGE, _preload_content=False, _request_timeout=WORKER_REQUEST_TIMEOUT))
            self._fence.require(DELETION_ACTION, target)  # the patch may have taken its whole timeout
            release(self._core.delete_namespaced_pod(
                pod.name, pod.namespace, body={"preconditions": {"uid": pod.uid}},  # type: ignore[arg-type]  # the client sends a dict body as it is (its types want a model)
                _preload_content=False, _request_timeout=WORKER_REQUEST_TIMEOUT))
        except ApiException as error:
            if is_not_found(error):
                log.info("pod already gone", extra={"pod": pod.key})
                return
            if is_conflict(error):
                log.info("pod was replaced by another with the same name; not deleting it", extra={"pod": pod.key})
                return
            raise
