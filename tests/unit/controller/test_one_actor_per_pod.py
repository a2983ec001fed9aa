"""One actor per pod: the out-of-service handling and the taint eviction manager never both act
on the same pod. One rule decides (controller/outofservice/decision.py `out_of_service_claim`): on a node
that is out of service (the out-of-service taint, Ready not True), a pod that does not tolerate the taint
or is terminating already is force deleted by the out-of-service handling, and the taint eviction manager
leaves it, whatever taint made its deadline due; every other pod is the taint eviction manager's, as on any
node. Each row is checked against the rule and against both components, run as their unit tests run them.
"""

from __future__ import annotations

import pytest

from controller.objects import node_view, pod_view
from controller.outofservice.decision import out_of_service_claim, work_for
from kube.timestamps import format_time
from shared.taints import NO_EXECUTE, UNREACHABLE
from tests.support.fencing import OUT_OF_SERVICE_TAINT, START, node_json, pod_json, tolerate_out_of_service
from tests.unit.controller.tainteviction.harness import Harness

OUT_OF_SERVICE = "the out-of-service handling"
TAINT_EVICTION = "the taint eviction manager"

# The node lifecycle's taint on a node unreachable for 10 minutes, and the webhook's default toleration
# of it: the pod's unreachable deadline (300 s) has passed.
UNREACHABLE_TAINT = {"key": UNREACHABLE, "effect": NO_EXECUTE, "timeAdded": format_time(START - 600)}
DEFAULT_TOLERATION = {"key": UNREACHABLE, "operator": "Exists", "effect": NO_EXECUTE, "tolerationSeconds": 300}
FENCED = node_json(taints=[UNREACHABLE_TAINT, OUT_OF_SERVICE_TAINT])  # Ready Unknown, fenced

OWNERS = {
    "a fenced node that is not Ready, a pod that does not tolerate the fence: the out-of-service handling": (
        FENCED,
        pod_json("p", tolerations=[DEFAULT_TOLERATION]),
        OUT_OF_SERVICE,
    ),
    "a fenced node that is Ready: the taint eviction manager (nothing is force deleted there)": (
        node_json("node1", "True", taints=[OUT_OF_SERVICE_TAINT]),
        pod_json("p", tolerations=[DEFAULT_TOLERATION]),
        TAINT_EVICTION,
    ),
    "a pod tolerating the fence, not terminating, its unreachable deadline due: the taint eviction manager": (
        FENCED,
        pod_json("p", tolerations=[DEFAULT_TOLERATION, tolerate_out_of_service()]),
        TAINT_EVICTION,
    ),
    "a pod tolerating the fence for 30 s: the taint eviction manager, when they run out": (
        node_json(taints=[OUT_OF_SERVICE_TAINT]),
        pod_json("p", tolerations=[tolerate_out_of_service(30)]),
        TAINT_EVICTION,
    ),
    "a terminating pod on a fenced node, though it tolerates the fence: the out-of-service handling": (
        FENCED,
        pod_json("p", tolerations=[tolerate_out_of_service()], terminating=True),
        OUT_OF_SERVICE,
    ),
    "no fence: the taint eviction manager": (
        node_json(taints=[UNREACHABLE_TAINT]),
        pod_json("p", tolerations=[DEFAULT_TOLERATION]),
        TAINT_EVICTION,
    ),
}


@pytest.mark.parametrize(("node", "pod", "owner"), OWNERS.values(), ids=OWNERS.keys())
def test_one_rule_says_which_component_owns_a_pod(node, pod, owner):
    claim = out_of_service_claim(node_view(node), pod_view(pod))
    assert (OUT_OF_SERVICE if claim is not None else TAINT_EVICTION) == owner


@pytest.mark.parametrize(("node", "pod", "owner"), OWNERS.values(), ids=OWNERS.keys())
def test_the_out_of_service_handling_force_deletes_only_the_pods_it_owns(node, pod, owner):
    work = work_for(node_view(node), [pod_view(pod)], [], {}, {})
    assert [p.key for p, _ in work.pods] == (["apps/p"] if owner == OUT_OF_SERVICE else [])


@pytest.mark.parametrize(("node", "pod", "owner"), OWNERS.values(), ids=OWNERS.keys())
def test_the_taint_eviction_manager_deletes_only_the_pods_it_owns(node, pod, owner):
    h = Harness()
    h.set_node(node_view(node))
    h.add_pod(pod_view(pod))
    h.run_for(31)  # past every deadline of the table
    assert h.evicted_keys() == (["apps/p"] if owner == TAINT_EVICTION else [])
    assert h.manager.pending() == 0  # what it leaves, it does not keep asking about
