"""The API calls one eviction makes: read the node live, mark the pod, delete or evict it.

Deleting is two calls, as upstream: patch the `DisruptionTarget` condition through the status
subresource, then a graceful delete. Evicting (a pod that respects its disruption budget,
disruption_budget.py) creates an Eviction first and marks the pod only once it is admitted: a
refused pod keeps running and must not look disrupted. Every call carries the pod's uid as a
precondition, so a new pod that took the same name is never touched. As every API edge of the
controller, each call returns None when its object is gone (404; a pod replaced, 409 on the uid, too)
and raises on failure. Each write asks the write fence first (kube/fence.py): refused, the call raises
WriteFenced and the pod is not done; the manager retries it.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from kubernetes import client
from kubernetes.client.rest import ApiException

from controller.clock import Clock, RealClock
from controller.objects import NodeView, PodView, node_view
from controller.tainteviction.disruption_budget import refusal_reason
from controller.tainteviction.manager import BudgetRefused
from kube.client import WORKER_REQUEST_TIMEOUT, read_node_json, release, strategic_merge
from kube.errors import is_conflict, is_not_found, status_body, status_code
from kube.fence import WriteFence, WriteFenced
from kube.policy import EVICTION_PATH, eviction_body, served_policy_version
from kube.request import request_json
from kube.timestamps import format_time

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
EVICTION_ACTION = "pod-eviction"
TOO_MANY_REQUESTS = 429


def disruption_target_patch(uid: str, now: float, generation: int = 0) -> dict[str, Any]:
    """Strategic merge patch for pods/status: conditions merge by type, the uid is a precondition.
    On a server that tracks pod generations (1.33+; locked on from 1.35) the condition names the
    generation it was written for, as upstream's taint eviction controller writes it."""
    condition: dict[str, Any] = {**DISRUPTION_TARGET, "lastTransitionTime": format_time(now)}
    if generation:
        condition["observedGeneration"] = generation
    return {"metadata": {"uid": uid}, "status": {"conditions": [condition]}}


class KubeEvictionActions:
    def __init__(self, api_client: client.ApiClient, fence: WriteFence, clock: Clock | None = None) -> None:
        self._clock = clock or RealClock()  # the manager's: the DisruptionTarget condition's time
        self._api = api_client
        self._core = client.CoreV1Api(api_client)
        self._fence = fence
        self._policy_version: str | None = None  # asked of the server at the first eviction

    def live_node(self, node_name: str) -> NodeView | None:
        node = read_node_json(self._core, node_name, WORKER_REQUEST_TIMEOUT)
        return None if node is None else node_view(node)

    def evict(self, pod: PodView) -> Literal[True] | None:
        target = f"pod {pod.key}"
        try:
            self._mark(pod, target)
            self._fence.require(DELETION_ACTION, target)  # the patch may have taken its whole timeout
            release(
                self._core.delete_namespaced_pod(
                    pod.name,
                    pod.namespace,
                    body={"preconditions": {"uid": pod.uid}},  # type: ignore[arg-type]  # the client sends a dict body as it is (its types want a model)
                    _preload_content=False,
                    _request_timeout=WORKER_REQUEST_TIMEOUT,
                )
            )
        except ApiException as error:
            if is_not_found(error):
                log.info("pod already gone", extra={"pod": pod.key})
                return None
            if is_conflict(error):
                log.info("pod was replaced by another with the same name; not deleting it", extra={"pod": pod.key})
                return None
            raise
        return True

    def request_eviction(self, pod: PodView) -> Literal[True] | None:
        """Create an Eviction for the pod; True once admitted, None if the pod is gone or replaced. Its
        disruption budget refusing it (429) raises BudgetRefused, saying why; any other failure raises."""
        target = f"pod {pod.key}"
        if self._policy_version is None:  # before the fence check: only the POST may follow it
            self._policy_version = served_policy_version(self._api, WORKER_REQUEST_TIMEOUT)
        self._fence.require(EVICTION_ACTION, target)
        try:
            request_json(
                self._api,
                "POST",
                EVICTION_PATH,
                path_params={"namespace": pod.namespace, "name": pod.name},
                body=eviction_body(self._policy_version, pod.namespace, pod.name, pod.uid),
                timeout=WORKER_REQUEST_TIMEOUT,
            )
        except ApiException as error:
            if is_not_found(error) or is_conflict(error):
                log.info("pod already gone or replaced; not evicting it", extra={"pod": pod.key})
                return None
            refused = refusal_reason(status_body(error)) if status_code(error) == TOO_MANY_REQUESTS else None
            if refused is None:
                raise
            raise BudgetRefused(refused) from error
        try:  # admitted: the pod is terminating now; say why, as the apiserver itself does from 1.26
            self._mark(pod, target)
        except WriteFenced:
            pass  # the fence logged it; the eviction itself was admitted while this replica led
        except ApiException as error:
            if not (is_not_found(error) or is_conflict(error)):
                log.warning("evicted pod %s, but could not set its DisruptionTarget condition: %s", pod.key, error)
        return True

    def _mark(self, pod: PodView, target: str) -> None:
        self._fence.require(DISRUPTION_TARGET_ACTION, target)
        body = disruption_target_patch(pod.uid, self._clock.now(), pod.generation)
        release(strategic_merge(self._core.patch_namespaced_pod_status, pod.name, pod.namespace, body=body))
