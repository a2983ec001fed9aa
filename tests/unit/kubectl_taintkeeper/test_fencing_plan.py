"""kubectl_taintkeeper/fencing_plan.py: what `fence` prints before it fences: the pods that will be force deleted
with their owners, the pods that stay, the volume attachments; chosen by the controller's own decision."""

from __future__ import annotations

import pytest

from controller.outofservice.decision import TERMINATING, UNTOLERATED
from kubectl_taintkeeper.fencing_plan import (
    SPLIT_BRAIN,
    FencePlan,
    PlannedAttachment,
    PlannedPod,
    fence_plan,
    owner_text,
    render_plan,
)
from tests.support.fencing import START, attachment_json, node_json, owner, pod_json, tolerate_out_of_service

NOW = START

OWNERS = {
    "a StatefulSet's pod": (pod_json("web-1", owners=[owner("StatefulSet", "web")]), "StatefulSet/web"),
    "the controlling owner, not the first": (
        pod_json("p", owners=[owner("ConfigMap", "c", controller=False), owner("ReplicaSet", "rs")]),
        "ReplicaSet/rs",
    ),
    "no controller: the first owner": (pod_json("p", owners=[owner("Job", "j", controller=False)]), "Job/j"),
    "a static pod's mirror": (
        pod_json("p", annotations={"kubernetes.io/config.mirror": "x"}),
        "static pod (its kubelet recreates it when the node is back)",
    ),
    "a bare pod": (pod_json("p"), "no owner (nothing recreates it)"),
}


@pytest.mark.parametrize(("pod", "expected"), OWNERS.values(), ids=OWNERS.keys())
def test_owners(pod, expected):
    assert owner_text(pod) == expected


NODE = node_json("node1", "Unknown", since=NOW - 600)
PODS = [
    pod_json("web-1", owners=[owner("StatefulSet", "web")]),
    pod_json(
        "agent-x", namespace="kube-system", tolerations=[{"operator": "Exists"}], owners=[owner("DaemonSet", "agent")]
    ),
    pod_json("db-0", owners=[owner("StatefulSet", "db")], tolerations=[tolerate_out_of_service()], terminating=True),
    pod_json("elsewhere", node="node2"),
]
ATTACHMENTS = [
    attachment_json("csi-b", volume="pvc-2"),
    attachment_json("csi-a", volume="pvc-1"),
    attachment_json("csi-gone", deleting=True),
    attachment_json("csi-other", node="node2"),
]


def test_the_plan_lists_what_goes_and_what_stays_as_the_controller_decides():
    plan = fence_plan(NODE, PODS, ATTACHMENTS, NOW)
    assert plan == FencePlan(
        node="node1",
        ready="Unknown",
        down_since=NOW - 600,
        taint={
            "key": "node.kubernetes.io/out-of-service",
            "value": "nodeshutdown",
            "effect": "NoExecute",
            "timeAdded": "2027-01-15T08:00:00Z",
        },
        force_deleted=(
            PlannedPod("apps/db-0", "StatefulSet/db", TERMINATING),
            PlannedPod("apps/web-1", "StatefulSet/web", UNTOLERATED),
        ),
        staying=(PlannedPod("kube-system/agent-x", "DaemonSet/agent", ""),),
        attachments=(
            PlannedAttachment("csi-a", "pvc-1", "csi.example.com"),
            PlannedAttachment("csi-b", "pvc-2", "csi.example.com"),
        ),
    )


def test_the_plan_as_printed():
    text = render_plan(fence_plan(NODE, PODS, ATTACHMENTS, NOW), NOW)
    assert text.splitlines() == [
        "Node node1 (Ready Unknown since 2027-01-15T07:50:00Z, 10m0s ago) will get the taint "
        "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute.",
        "",
        "taintkeeper's controller will then force delete (grace period 0) 2 pod(s); their owners recreate them "
        "elsewhere:",
        "  POD         OWNER            WHY",
        "  apps/db-0   StatefulSet/db   it is terminating",
        "  apps/web-1  StatefulSet/web  it does not tolerate node.kubernetes.io/out-of-service",
        "",
        "and delete 2 volume attachment(s), detaching their volumes from the node:",
        "  VOLUMEATTACHMENT  VOLUME  DRIVER",
        "  csi-a             pvc-1   csi.example.com",
        "  csi-b             pvc-2   csi.example.com",
        "",
        "1 pod(s) tolerate the taint and stay:",
        "  POD                  OWNER",
        "  kube-system/agent-x  DaemonSet/agent",
        "",
        SPLIT_BRAIN,
    ]


def test_an_empty_node():
    text = render_plan(fence_plan(node_json("node1", "False", since=NOW - 3600), [], [], NOW), NOW)
    assert text.splitlines()[:6] == [
        "Node node1 (Ready False since 2027-01-15T07:00:00Z, 1h0s ago) will get the taint "
        "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute.",
        "Caution: its kubelet still reports (Ready False, not Unknown): its containers may still run.",
        "",
        "No pod will be force deleted.",
        "",
        "No volume attachment will be deleted.",
    ]
    assert text.endswith(SPLIT_BRAIN)
