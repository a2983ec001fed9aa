"""Slim VolumeAttachment views (storage.k8s.io/v1, served since 1.13): only what the out-of-service
handling and `fence` read. Built straight from the API's JSON, as controller/objects.py's views are.

A VolumeAttachment says that a CSI volume is (to be) attached to a node; the attach-detach
controller creates it and the CSI driver's external-attacher attaches and detaches. Deleting it
detaches the volume (the external-attacher's finalizer holds it until the driver has done so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class VolumeAttachmentView:
    name: str
    uid: str
    node_name: str
    attacher: str  # the CSI driver's name
    persistent_volume: str  # spec.source.persistentVolumeName ("" for an inline volume)
    attached: bool  # status.attached
    deleting: bool  # has a deletionTimestamp: its detach is under way

    @property
    def key(self) -> str:
        return self.name


def volume_attachment_view(attachment: Json) -> VolumeAttachmentView:
    metadata = attachment.get("metadata") or {}
    spec = attachment.get("spec") or {}
    return VolumeAttachmentView(
        name=metadata.get("name") or "",
        uid=metadata.get("uid") or "",
        node_name=spec.get("nodeName") or "",
        attacher=spec.get("attacher") or "",
        persistent_volume=(spec.get("source") or {}).get("persistentVolumeName") or "",
        attached=bool((attachment.get("status") or {}).get("attached")),
        deleting=bool(metadata.get("deletionTimestamp")),
    )
