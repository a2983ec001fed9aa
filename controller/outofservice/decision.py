"""What the out-of-service handling does with a node: pure decisions on the cached views, with no I/O
(the component is controller.py, its writes api.py).

KEP-2268's semantics, as upstream 1.26+ applies them (PodGC's `gcTerminating`, the attach-detach
controller): once a node carries `node.kubernetes.io/out-of-service` (effect NoExecute, any value)
and its Ready condition is not True, its pods are force deleted (grace period 0) and its volumes
detached. Upstream's taint manager first deletes the pods that do not tolerate the taint, then PodGC
force deletes every terminating pod on the node; here both are one step: a pod is force deleted if
it does not tolerate the taint, or if it is terminating already (a pod tolerating the taint for some
seconds is deleted gracefully by the taint eviction manager when they run out, then force deleted).
A node that is Ready while it still carries the taint gets nothing more done: only a warning.

One actor per pod (`out_of_service_claim`): a pod this handling force deletes is its alone. The taint
eviction manager, which sees the same NoExecute taint, asks the same rule on the node it reads live
before acting and leaves such a pod be, whichever taint made its deadline due (the out-of-service
taint, or a not-ready/unreachable taint whose deadline falls at the same moment).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.describe import taint_text
from controller.fencing import out_of_service_taint
from controller.objects import NodeView, PodView
from controller.tainteviction.tolerations import first_toleration_for_taint
from controller.volume_attachments import VolumeAttachmentView
from shared.taints import OUT_OF_SERVICE, Taint

# The event source (taintkeeper's own: upstream's PodGC records no events) and the reasons.
COMPONENT = "taintkeeper-out-of-service"
POD_REASON = "OutOfServiceForceDelete"  # on each pod force deleted (upstream PodGC logs "force deleting Pod")
NODE_REASON = "NodeOutOfService"  # on the node, after a pass that deleted something
READY_REASON = "OutOfServiceTaintOnReadyNode"  # Warning: the node is Ready again, the taint is still on

# Why a pod is force deleted.
UNTOLERATED = f"it does not tolerate {OUT_OF_SERVICE}"
TERMINATING = "it is terminating"


class NodeState(enum.Enum):
    IN_SERVICE = "in-service"  # no out-of-service taint
    OUT_OF_SERVICE = "out-of-service"  # the taint, and Ready is not True: force delete, detach
    TAINTED_READY = "tainted-ready"  # the taint, but Ready: nothing more is done; a warning


def node_state(node: NodeView) -> NodeState:
    if out_of_service_taint(node.taints) is None:
        return NodeState.IN_SERVICE
    ready = node.ready_condition
    if ready is not None and ready.get("status") == "True":
        return NodeState.TAINTED_READY
    return NodeState.OUT_OF_SERVICE


def force_delete_reason(pod: PodView, taint: Taint) -> str | None:
    """Why the pod on an out-of-service node must be force deleted, or None when it stays."""
    if first_toleration_for_taint(pod.tolerations, taint) is None:
        return UNTOLERATED
    if pod.terminating:
        return TERMINATING
    return None


def out_of_service_claim(node: NodeView, pod: PodView) -> str | None:
    """Which component acts on `pod` on `node`: the one rule that both the out-of-service handling
    (`work_for`) and the taint eviction manager (on the node it reads live just before acting) consult,
    so that never both act on one pod.

    A reason (why the pod is force deleted) when the node is out of service (the out-of-service taint,
    Ready not True) and the pod does not tolerate the taint or is terminating already: the pod is the
    out-of-service handling's, and the taint eviction manager neither deletes nor evicts it, whatever
    taint made its deadline due. None: the taint eviction manager acts on the pod as on any node (a
    Ready node that still carries the taint included)."""
    taint = out_of_service_taint(node.taints)
    if taint is None or node_state(node) is not NodeState.OUT_OF_SERVICE:
        return None
    return force_delete_reason(pod, taint)


@dataclass(frozen=True)
class Work:
    """What one pass over an out-of-service node deletes: pods (with why) and volume attachments."""

    pods: tuple[tuple[PodView, str], ...] = ()
    attachments: tuple[VolumeAttachmentView, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.pods or self.attachments)


def work_for(
    node: NodeView,
    pods: Iterable[PodView],
    attachments: Iterable[VolumeAttachmentView],
    done_pods: Mapping[str, str],
    done_attachments: Mapping[str, str],
) -> Work:
    """What is left to delete on `node`; nothing unless it is out of service. `done_*` (key -> uid)
    are what this controller deleted already: a pod held by a finalizer, or an attachment held by its
    driver's, is not deleted twice, while a new object with the same name is."""
    if node_state(node) is not NodeState.OUT_OF_SERVICE:
        return Work()
    doomed = []
    for pod in pods:
        if pod.node_name != node.name or done_pods.get(pod.key) == pod.uid:
            continue
        reason = out_of_service_claim(node, pod)
        if reason is not None:
            doomed.append((pod, reason))
    detach = tuple(
        a for a in attachments if a.node_name == node.name and not a.deleting and done_attachments.get(a.key) != a.uid
    )
    return Work(tuple(doomed), detach)


def pod_message(pod: PodView, node: str, taint: Taint, reason: str) -> str:
    return (
        f"Force deleting Pod {pod.key}: node {node} is out of service ({taint_text(taint)}) and not ready, and {reason}"
    )


def node_message(node: str, pods: int, attachments: int) -> str:
    return (
        f"Node {node} is out of service and not ready: force deleted {pods} pod(s), deleted {attachments} "
        f"volume attachment(s)"
    )


def ready_message(node: str) -> str:
    return (
        f"Node {node} is Ready but still has the {OUT_OF_SERVICE} taint: nothing more is force deleted; "
        f"remove the taint (kubectl taintkeeper unfence {node})"
    )
