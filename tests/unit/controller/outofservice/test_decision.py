"""controller/outofservice/decision.py: which nodes are out of service, which of their pods are force
deleted and which of their volume attachments deleted (KEP-2268, as upstream's PodGC and taint manager)."""

from __future__ import annotations

import pytest

from controller.objects import node_view, pod_view
from controller.outofservice.decision import (
    TERMINATING,
    UNTOLERATED,
    NodeState,
    force_delete_reason,
    node_message,
    node_state,
    pod_message,
    ready_message,
    work_for,
)
from controller.volume_attachments import volume_attachment_view
from shared.taints import NO_EXECUTE, NO_SCHEDULE, OUT_OF_SERVICE, UNREACHABLE
from tests.support.fencing import (
    OUT_OF_SERVICE_TAINT,
    attachment_json,
    node_json,
    pod_json,
    tolerate_out_of_service,
)

UNREACHABLE_TAINT = {"key": UNREACHABLE, "effect": NO_EXECUTE}

STATES = {
    "no taint: in service": (node_json(taints=[UNREACHABLE_TAINT]), NodeState.IN_SERVICE),
    "no taints at all: in service": (node_json(), NodeState.IN_SERVICE),
    "the taint and Ready Unknown: out of service": (node_json(taints=[OUT_OF_SERVICE_TAINT]), NodeState.OUT_OF_SERVICE),
    "the taint and Ready False: out of service": (
        node_json("n", "False", taints=[OUT_OF_SERVICE_TAINT]),
        NodeState.OUT_OF_SERVICE,
    ),
    "the taint and no Ready condition: out of service (not Ready)": (
        node_json("n", None, taints=[OUT_OF_SERVICE_TAINT]),
        NodeState.OUT_OF_SERVICE,
    ),
    "the taint with any value": (
        node_json(taints=[{"key": OUT_OF_SERVICE, "value": "x", "effect": NO_EXECUTE}]),
        NodeState.OUT_OF_SERVICE,
    ),
    "the taint without a value": (
        node_json(taints=[{"key": OUT_OF_SERVICE, "effect": NO_EXECUTE}]),
        NodeState.OUT_OF_SERVICE,
    ),
    "the key with effect NoSchedule is not the taint": (
        node_json(taints=[{"key": OUT_OF_SERVICE, "effect": NO_SCHEDULE}]),
        NodeState.IN_SERVICE,
    ),
    "the taint on a Ready node: nothing more is done": (
        node_json("n", "True", taints=[OUT_OF_SERVICE_TAINT]),
        NodeState.TAINTED_READY,
    ),
}


@pytest.mark.parametrize(("node", "expected"), STATES.values(), ids=STATES.keys())
def test_a_node_is_out_of_service_with_the_taint_while_not_ready(node, expected):
    assert node_state(node_view(node)) is expected


WHICH_PODS = {
    "no tolerations: force deleted": (pod_json("p"), UNTOLERATED),
    "the default not-ready/unreachable tolerations do not tolerate it": (
        pod_json("p", tolerations=[{**UNREACHABLE_TAINT, "operator": "Exists", "tolerationSeconds": 300}]),
        UNTOLERATED,
    ),
    "tolerating it forever: stays": (pod_json("p", tolerations=[tolerate_out_of_service()]), None),
    "tolerating it for some seconds: stays (the taint eviction manager deletes it when they run out)": (
        pod_json("p", tolerations=[tolerate_out_of_service(30)]),
        None,
    ),
    "an Exists toleration of every key: stays": (pod_json("p", tolerations=[{"operator": "Exists"}]), None),
    "an Exists NoExecute toleration of every key: stays": (
        pod_json("p", tolerations=[{"operator": "Exists", "effect": NO_EXECUTE}]),
        None,
    ),
    "Equal with another value does not tolerate it": (
        pod_json(
            "p", tolerations=[{"key": OUT_OF_SERVICE, "operator": "Equal", "value": "other", "effect": NO_EXECUTE}]
        ),
        UNTOLERATED,
    ),
    "Equal with the taint's value tolerates it": (
        pod_json("p", tolerations=[{"key": OUT_OF_SERVICE, "operator": "Equal", "value": "nodeshutdown"}]),
        None,
    ),
    "a NoSchedule toleration of the key does not tolerate it": (
        pod_json("p", tolerations=[{"key": OUT_OF_SERVICE, "operator": "Exists", "effect": NO_SCHEDULE}]),
        UNTOLERATED,
    ),
    "terminating and untolerating: force deleted as untolerating": (pod_json("p", terminating=True), UNTOLERATED),
    "terminating though tolerating: force deleted (upstream PodGC's gcTerminating)": (
        pod_json("p", tolerations=[tolerate_out_of_service()], terminating=True),
        TERMINATING,
    ),
    "a static pod's mirror is force deleted too (its kubelet recreates it)": (
        pod_json("p", annotations={"kubernetes.io/config.mirror": "x"}),
        UNTOLERATED,
    ),
}


@pytest.mark.parametrize(("pod", "expected"), WHICH_PODS.values(), ids=WHICH_PODS.keys())
def test_which_pods_are_force_deleted(pod, expected):
    assert force_delete_reason(pod_view(pod), OUT_OF_SERVICE_TAINT) == expected


OUT = node_view(node_json(taints=[OUT_OF_SERVICE_TAINT]))
WEB = pod_view(pod_json("web-1", owners=[]))
DAEMON = pod_view(pod_json("agent", tolerations=[{"operator": "Exists"}]))
ELSEWHERE = pod_view(pod_json("other", node="node2"))
ATTACHED = volume_attachment_view(attachment_json("va-1"))
DETACHING = volume_attachment_view(attachment_json("va-2", deleting=True))
OTHER_NODE_VA = volume_attachment_view(attachment_json("va-3", node="node2"))

WORK = {
    "an out-of-service node: its untolerating pods and its attachments": (
        OUT,
        [WEB, DAEMON, ELSEWHERE],
        [ATTACHED, DETACHING, OTHER_NODE_VA],
        {},
        {},
        ["apps/web-1"],
        ["va-1"],
    ),
    "what was deleted already is not deleted again": (
        OUT,
        [WEB],
        [ATTACHED],
        {"apps/web-1": WEB.uid},
        {"va-1": ATTACHED.uid},
        [],
        [],
    ),
    "a new pod with the same name is": (
        OUT,
        [WEB],
        [ATTACHED],
        {"apps/web-1": "uid-of-the-old-one"},
        {"va-1": "uid-old"},
        ["apps/web-1"],
        ["va-1"],
    ),
    "a node in service: nothing": (node_view(node_json()), [WEB], [ATTACHED], {}, {}, [], []),
    "a Ready node with the taint: nothing": (
        node_view(node_json("node1", "True", taints=[OUT_OF_SERVICE_TAINT])),
        [WEB],
        [ATTACHED],
        {},
        {},
        [],
        [],
    ),
}


@pytest.mark.parametrize(
    ("node", "pods", "attachments", "done_pods", "done_attachments", "pod_keys", "names"),
    WORK.values(),
    ids=WORK.keys(),
)
def test_the_work_of_a_pass(node, pods, attachments, done_pods, done_attachments, pod_keys, names):
    work = work_for(node, pods, attachments, done_pods, done_attachments)
    assert [pod.key for pod, _ in work.pods] == pod_keys
    assert [a.name for a in work.attachments] == names
    assert bool(work) == bool(pod_keys or names)


def test_the_event_messages_say_what_and_why():
    assert pod_message(WEB, "node1", OUT_OF_SERVICE_TAINT, UNTOLERATED) == (
        "Force deleting Pod apps/web-1: node node1 is out of service "
        "(node.kubernetes.io/out-of-service=nodeshutdown:NoExecute) and not ready, and it does not tolerate "
        "node.kubernetes.io/out-of-service"
    )
    assert node_message("node1", 2, 1) == (
        "Node node1 is out of service and not ready: force deleted 2 pod(s), deleted 1 volume attachment(s)"
    )
    assert ready_message("node1") == (
        "Node node1 is Ready but still has the node.kubernetes.io/out-of-service taint: nothing more is force "
        "deleted; remove the taint (kubectl taintkeeper unfence node1)"
    )
