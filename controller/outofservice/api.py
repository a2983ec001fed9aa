"""The API calls of the out-of-service handling: read a node live, force delete a pod, delete a
VolumeAttachment, and (--auto-fence-after) fence a node.

Every delete carries the object's uid as a precondition, so a new object that took the same name (a
StatefulSet's replacement pod) is never touched. As every API edge of the controller, each call returns
None when its object is gone (404) and raises on failure; a delete answered 409 (replaced) is None too,
so a concurrent force delete (an operator's, upstream PodGC's on 1.26+) is no failure. The fencing patch
tests the node's resourceVersion (controller/fencing.py): a node changed since it was read answers
422, raised as ChangedSinceRead (kube/errors.py) so the caller re-reads and decides again. Each write
asks the write fence first (kube/fence.py): refused, the call raises WriteFenced and nothing is done;
the caller retries.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

from kubernetes import client

from controller.objects import PodView
from controller.volume_attachments import VolumeAttachmentView
from kube.client import JSON_PATCH, WORKER_REQUEST_TIMEOUT, json_patch_unless_gone, read_node_json, write_unless_gone
from kube.fence import WriteFence

log = logging.getLogger("taintkeeper.outofservice")

# What the write fence refused (the `action` label of taintkeeper_fenced_writes_total).
FORCE_DELETION_ACTION = "pod-force-deletion"
DETACH_ACTION = "volume-attachment-deletion"
FENCING_ACTION = "node-out-of-service-taint"


class KubeOutOfServiceApi:
    def __init__(self, api_client: client.ApiClient, fence: WriteFence) -> None:
        self._core = client.CoreV1Api(api_client)
        self._storage = client.StorageV1Api(api_client)
        self._fence = fence

    def read_node(self, name: str) -> dict[str, Any] | None:
        return read_node_json(self._core, name, WORKER_REQUEST_TIMEOUT)

    def force_delete_pod(self, pod: PodView) -> Literal[True] | None:
        """True if this call deleted it; None if it was gone or replaced already."""
        self._fence.require(FORCE_DELETION_ACTION, f"pod {pod.key}")
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": pod.uid}}
        deleted = write_unless_gone(
            lambda: self._core.delete_namespaced_pod(
                pod.name,
                pod.namespace,
                body=body,  # type: ignore[arg-type]  # the client sends a dict body as it is
                _preload_content=False,
                _request_timeout=WORKER_REQUEST_TIMEOUT,
            ),
            replaced_is_gone=True,
        )
        if deleted is None:
            log.info("pod already gone or replaced", extra={"pod": pod.key})
        return deleted

    def delete_volume_attachment(self, attachment: VolumeAttachmentView) -> Literal[True] | None:
        """True if this call deleted it (its driver detaches the volume, then lets it go); None if it was
        gone or replaced already."""
        self._fence.require(DETACH_ACTION, f"volumeattachment {attachment.name}")
        deleted = write_unless_gone(
            lambda: self._storage.delete_volume_attachment(
                attachment.name,
                body={"preconditions": {"uid": attachment.uid}},  # type: ignore[arg-type]
                _preload_content=False,
                _request_timeout=WORKER_REQUEST_TIMEOUT,
            ),
            replaced_is_gone=True,
        )
        if deleted is None:
            log.info("volume attachment already gone or replaced", extra={"volumeattachment": attachment.name})
        return deleted

    def fence_node(self, name: str, ops: Sequence[dict[str, Any]]) -> Literal[True] | None:
        """Apply the fencing JSON patch; None if the node is gone; ChangedSinceRead if it changed since it was read."""
        self._fence.require(FENCING_ACTION, f"node {name}")
        return json_patch_unless_gone(
            lambda: self._core.patch_node(
                name,
                [dict(op) for op in ops],
                _content_type=JSON_PATCH,
                _preload_content=False,
                _request_timeout=WORKER_REQUEST_TIMEOUT,
            )
        )
