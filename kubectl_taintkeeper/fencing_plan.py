"""What `fence NODE` will cause, before it is done: the pods taintkeeper's controller will force delete
(with their owners, which will recreate them elsewhere), the pods that stay, and the volume attachments
that will be deleted. Pure: the node, its pods and the VolumeAttachments as raw JSON in; the plan and
its text out. The pods are chosen by the controller's own decision (controller/outofservice/decision.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.describe import describe_duration, taint_text
from controller.fencing import fence_taint, node_name, ready_condition
from controller.objects import MIRROR_ANNOTATION, pod_view
from controller.outofservice.decision import force_delete_reason
from controller.volume_attachments import volume_attachment_view
from kube.timestamps import format_time, parse_time

Json = Mapping[str, Any]  # API JSON

SPLIT_BRAIN = (
    "Fence only a node that is powered off, cut off from the network, or whose workloads are known to be "
    "stopped: if its pods still run, a StatefulSet gets a second pod with the same identity writing the "
    "same volume."
)


@dataclass(frozen=True)
class PlannedPod:
    key: str  # namespace/name
    owner: str  # `StatefulSet/web`, or what stands for it
    why: str  # why it is force deleted (empty for a pod that stays)


@dataclass(frozen=True)
class PlannedAttachment:
    name: str
    volume: str
    attacher: str


@dataclass(frozen=True)
class FencePlan:
    node: str
    ready: str  # the Ready condition's status
    down_since: float | None
    taint: dict[str, Any]
    force_deleted: tuple[PlannedPod, ...]
    staying: tuple[PlannedPod, ...]
    attachments: tuple[PlannedAttachment, ...]
    attachments_unreadable: str = ""  # why the VolumeAttachments could not be read ("" when they could)


def owner_text(pod: Json) -> str:
    """The pod's controller as `Kind/name` (its first owner if none is marked controller); a static
    pod's mirror and a bare pod say so, as nothing recreates them elsewhere."""
    metadata = pod.get("metadata") or {}
    owners = metadata.get("ownerReferences") or []
    owner = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
    if owner is not None:
        return f"{owner.get('kind')}/{owner.get('name')}"
    if MIRROR_ANNOTATION in (metadata.get("annotations") or {}):
        return "static pod (its kubelet recreates it when the node is back)"
    return "no owner (nothing recreates it)"


def fence_plan(
    node: Json, pods: Iterable[Json], attachments: Iterable[Json], now: float, attachments_unreadable: str = ""
) -> FencePlan:
    name = node_name(node)
    taint = fence_taint(now)
    doomed: list[PlannedPod] = []
    staying: list[PlannedPod] = []
    for raw in pods:
        view = pod_view(dict(raw))
        if view.node_name != name:
            continue
        why = force_delete_reason(view, taint)
        (doomed if why is not None else staying).append(PlannedPod(view.key, owner_text(raw), why or ""))
    planned = []
    for raw in attachments:
        attachment = volume_attachment_view(dict(raw))
        if attachment.node_name == name and not attachment.deleting:
            planned.append(
                PlannedAttachment(
                    attachment.name, attachment.persistent_volume or "(inline volume)", attachment.attacher
                )
            )
    ready = ready_condition(node) or {}
    return FencePlan(
        name,
        str(ready.get("status") or "absent"),
        parse_time(ready.get("lastTransitionTime")),
        taint,
        tuple(sorted(doomed, key=lambda p: p.key)),
        tuple(sorted(staying, key=lambda p: p.key)),
        tuple(sorted(planned, key=lambda a: a.name)),
        attachments_unreadable,
    )


def _table(rows: Iterable[tuple[str, ...]]) -> list[str]:
    """Rows as aligned columns, two spaces in."""
    listed = list(rows)
    if not listed:
        return []
    widths = [max(len(row[i]) for row in listed) for i in range(len(listed[0]))]
    return [
        "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in listed
    ]


def render_plan(plan: FencePlan, now: float) -> str:
    since = (
        f" since {format_time(plan.down_since)}, {describe_duration(now - plan.down_since)} ago"
        if plan.down_since is not None
        else ""
    )
    lines = [f"Node {plan.node} (Ready {plan.ready}{since}) will get the taint {taint_text(plan.taint)}."]
    if plan.ready == "False":
        lines.append("Caution: its kubelet still reports (Ready False, not Unknown): its containers may still run.")
    lines.append("")
    if plan.force_deleted:
        lines.append(
            f"taintkeeper's controller will then force delete (grace period 0) {len(plan.force_deleted)} "
            f"pod(s); their owners recreate them elsewhere:"
        )
        lines += _table([("POD", "OWNER", "WHY"), *((p.key, p.owner, p.why) for p in plan.force_deleted)])
    else:
        lines.append("No pod will be force deleted.")
    lines.append("")
    if plan.attachments_unreadable:
        lines.append(
            f"The volume attachments could not be read ({plan.attachments_unreadable}); taintkeeper's "
            f"controller deletes the node's anyway."
        )
    elif plan.attachments:
        lines.append(f"and delete {len(plan.attachments)} volume attachment(s), detaching their volumes from the node:")
        lines += _table(
            [("VOLUMEATTACHMENT", "VOLUME", "DRIVER"), *((a.name, a.volume, a.attacher) for a in plan.attachments)]
        )
    else:
        lines.append("No volume attachment will be deleted.")
    if plan.staying:
        lines += ["", f"{len(plan.staying)} pod(s) tolerate the taint and stay:"]
        lines += _table([("POD", "OWNER"), *((p.key, p.owner) for p in plan.staying)])
    lines += ["", SPLIT_BRAIN]
    return "\n".join(lines)
