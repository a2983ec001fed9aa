"""The controller's informers: one per resource, made when a component first asks for it, and shared.

Every component watching pods reads the same store and adds its own handler (kube/informer.py
calls each in turn), so a resource is listed and watched once however many controllers run.
The views are controller/objects.py's (VolumeAttachments': controller/volume_attachments.py); pods and
VolumeAttachments are indexed by node, and pods listed in protobuf (controller/pod_protobuf.py): the
largest LIST, encoded several times faster than as JSON.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from kubernetes import client

from controller.objects import (
    LeaseView,
    NamespaceView,
    NodeView,
    PodView,
    lease_view,
    namespace_view,
    node_view,
    pod_view,
)
from controller.pod_protobuf import pod_json
from controller.volume_attachments import VolumeAttachmentView, volume_attachment_view
from kube.informer import Informer

# Where kubelets renew their heartbeat Leases.
NODE_LEASE_NAMESPACE = "kube-node-lease"
# Leases and Nodes change with every heartbeat (5,000 nodes: 500 Lease renewals and 83 status posts a
# second): their events are read in batches, at most this late; every grace period is tens of seconds.
HEARTBEAT_BATCH_SECONDS = 0.1


class SharedInformers:
    def __init__(self, api_client: client.ApiClient) -> None:
        self._core = client.CoreV1Api(api_client)
        self._coordination = client.CoordinationV1Api(api_client)
        self._storage = client.StorageV1Api(api_client)
        self._made: dict[str, Informer[Any]] = {}

    @property
    def nodes(self) -> Informer[NodeView]:
        return self._informer(
            "nodes", lambda: Informer("nodes", self._core.list_node, node_view, batch_seconds=HEARTBEAT_BATCH_SECONDS)
        )

    @property
    def pods(self) -> Informer[PodView]:
        return self._informer(
            "pods",
            lambda: Informer(
                "pods",
                self._core.list_pod_for_all_namespaces,
                pod_view,
                index_by=lambda pod: pod.node_name,
                protobuf_item=pod_json,
            ),
        )

    @property
    def leases(self) -> Informer[LeaseView]:
        """The nodes' heartbeat Leases."""
        list_leases = functools.partial(self._coordination.list_namespaced_lease, NODE_LEASE_NAMESPACE)
        return self._informer(
            "leases", lambda: Informer("leases", list_leases, lease_view, batch_seconds=HEARTBEAT_BATCH_SECONDS)
        )

    @property
    def namespaces(self) -> Informer[NamespaceView]:
        return self._informer("namespaces", lambda: Informer("namespaces", self._core.list_namespace, namespace_view))

    @property
    def volume_attachments(self) -> Informer[VolumeAttachmentView]:
        """VolumeAttachments (storage.k8s.io/v1), indexed by node: an out-of-service node's are deleted."""
        return self._informer(
            "volumeattachments",
            lambda: Informer(
                "volumeattachments",
                self._storage.list_volume_attachment,
                volume_attachment_view,
                index_by=lambda attachment: attachment.node_name,
            ),
        )

    def all(self) -> list[Informer[Any]]:
        """Every informer made so far, in the order they were first asked for."""
        return list(self._made.values())

    def _informer(self, name: str, make: Callable[[], Informer[Any]]) -> Informer[Any]:
        informer = self._made.get(name)
        if informer is None:
            informer = self._made[name] = make()
        return informer
