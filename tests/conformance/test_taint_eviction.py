"""Conformance: upstream's taint eviction unit tests, ported to taintkeeper's eviction manager.

Ported (rewritten, not copied) from kubernetes/kubernetes:
- pkg/controller/tainteviction/taint_eviction_test.go at commit 003e86297d18a8538c9da3619871393f9703bf70
  (the version after the PodDisruptionConditions gate was dropped, so every eviction patches then
  deletes; the older cb6ff2d8ce3595f88570f82c7d0e6d98910afd3c adds gate-on/gate-off twins of the
  same rows). Behaviour cross-checked against pkg/controller/tainteviction/taint_eviction.go at the
  same commit.
- staging/src/k8s.io/api/core/v1/toleration_test.go at commit 19c6083b5c8b499f3bdd52e5f58a0b6f645d0fd3
  (TestTolerationToleratesTaint).
- pkg/apis/core/v1/helper/helpers_test.go at commit 02abf3411556e13f91cbb0831842017e789da3a7
  (TestTolerationsTolerateTaintsWithFilter). Upstream has no table test of GetMatchingTolerations;
  `test_get_matching_tolerations` is written from that function's code (same file's helpers.go).

Each upstream test function is one test here, each table row one `pytest.param` whose id is the
row's upstream description. Upstream watches a real controller for a few seconds of wall time; here
the real `TaintEvictionManager` runs on a fake clock (tests/conformance/eviction_harness.py), so every
row also pins *when* a pod is deleted, and "not deleted" rows run the clock past the toleration.

Where taintkeeper deliberately differs (docs/architecture.md, "Deliberate differences from upstream"), the row
asserts taintkeeper's behaviour and is listed in DELIBERATE_DIFFERENCES. Rows where taintkeeper is wrong are strict
xfails (reason "conformance: ..."), so they turn into failures once fixed and the mark must go.

Four defects of the eviction manager are fixed in abed3df. The rows that pin them (FIXED_DEFECT_ROWS, each
with what went wrong) were run against the commit before it, 5c16619, where each failed on exactly its
defect. They pass now, so they carry no xfail mark.
"""

from __future__ import annotations

import threading

import pytest
import urllib3

from controller.objects import node_view
from controller.options import TAINT_EVICTION
from controller.tainteviction.api import DISRUPTION_TARGET
from controller.tainteviction.manager import EVENT_REASON
from controller.tainteviction.tolerations import match_tolerations, min_toleration_seconds, tolerates
from kube.events import EventRecorder
from kube.fence import WriteFence
from shared.taints import no_execute_taints
from tests.conformance.eviction_harness import (
    START,
    Cluster,
    make_node,
    make_pod,
    pod_key,
    upstream_taint,
    upstream_toleration,
)
from tests.support.responses import http_response

# (test id, docs/architecture.md entry) for every row that asserts taintkeeper's deliberate difference from upstream.
DELIBERATE_DIFFERENCES: list[tuple[str, str]] = [
    ("test_update_pod[lengthening toleration shouldn't work]", "Toleration edits take effect"),
]

# (test id, what went wrong before abed3df) for the rows that failed on a defect fixed there.
FIXED_DEFECT_ROWS: list[tuple[str, str]] = [
    (
        "test_taint_swap_keeps_the_scheduled_eviction[not-ready swapped for unreachable 100s in: the eviction stays "
        "at 300s]",
        "the swapped-in taint's timeAdded restarted the pod's clock: evicted at 400 s",
    ),
    (
        "test_min_toleration_time_uses_the_first_matching_toleration[unreachable Exists forever before Exists "
        "NoExecute 60s: never evicted]",
        "the smallest seconds of every matching toleration, not of the first per taint: evicted at 60 s",
    ),
    (
        "test_min_toleration_time_uses_the_first_matching_toleration[Exists NoExecute 600s before unreachable Exists "
        "60s: evicted at 600s]",
        "the smallest seconds of every matching toleration, not of the first per taint: evicted at 60 s",
    ),
    (
        "test_a_pod_is_deleted_once[a node update during the eviction's API calls: the pod is deleted once]",
        "the update replaced the firing entry: the pod deleted twice",
    ),
    (
        "test_eventual_consistency[existing pod2 with taint toleration scheduled onto tainted Node]",
        "a pod bound after the taint counted from the taint, not its binding: deleted at 100 s, not 130 s",
    ),
]

NODE = "node1"
POD1 = pod_key("pod1")
POD2 = pod_key("pod2")
POD3 = pod_key("pod3")
HORIZON = 150.0  # seconds of fake time each row runs: past every finite toleration used below
STEP = 0.25  # fake-clock step; deletion times are asserted to within one step
NEVER = None

MARKING = "Marking for deletion Pod {}"
CANCELLING = "Cancelling deletion of Pod {}"


def assert_deletions(cluster: Cluster, expected: dict[str, float | None]) -> None:
    """Each pod in `expected` was deleted exactly once at the given second (patch first, as upstream),
    or never (None)."""
    deleted = cluster.deletions()
    for key, at in expected.items():
        if at is None:
            assert key not in deleted, f"{key} was deleted at {deleted.get(key)} s; expected never"
            assert cluster.scheduled_at(key) is None, f"{key} is still scheduled for deletion"
        else:
            assert key in deleted, f"{key} was never deleted; expected at {at} s"
            assert deleted[key] == [pytest.approx(at, abs=STEP)], f"{key}: deleted at {deleted[key]}, expected {at}"
            assert cluster.pod_calls(key) == ["patch-status", "delete"]
            patch = next(c.body for c in cluster.core.calls if c.target == key and c.verb == "patch-status")
            condition = patch["status"]["conditions"][0]
            assert {k: condition[k] for k in DISRUPTION_TARGET} == DISRUPTION_TARGET


# --- TestFilterNoExecuteTaints ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "taints",
    [
        pytest.param(
            [
                {"key": "one", "value": "one", "effect": "NoExecute"},
                {"key": "two", "value": "two", "effect": "NoSchedule"},
            ],
            id="Filtering keeps only the NoExecute taint",
        ),
    ],
)
def test_filter_no_execute_taints(taints):
    assert [t["key"] for t in no_execute_taints(taints)] == ["one"]
    assert [t["key"] for t in node_view(make_node(NODE, taints)).no_execute_taints] == ["one"]


# --- TestCreatePod -------------------------------------------------------------------------------------
# Upstream injects `taintedNodes` into the controller without any Node object; taintkeeper re-reads the
# node live before deleting (docs/architecture.md: "the node is re-read live"), so the tainted node exists here in
# the watch and in the API alike. "taintedNodes: {}" is an untainted node1.


@pytest.mark.parametrize(
    ("pod", "taints", "expected"),
    [
        pytest.param(make_pod("pod1"), [upstream_taint(1)], NEVER, id="not scheduled - ignore"),
        pytest.param(make_pod("pod1", NODE), [], NEVER, id="scheduled on untainted Node"),
        pytest.param(make_pod("pod1", NODE), [upstream_taint(1)], 0.0, id="schedule on tainted Node"),
        # Upstream only checks nothing happens within its 5 s poll; the pod goes when the 100 s run out.
        pytest.param(
            make_pod("pod1", NODE, [upstream_toleration(1, 100)]),
            [upstream_taint(1)],
            100.0,
            id="schedule on tainted Node with finite toleration",
        ),
        pytest.param(
            make_pod("pod1", NODE, [upstream_toleration(1, None)]),
            [upstream_taint(1)],
            NEVER,
            id="schedule on tainted Node with infinite toleration",
        ),
        pytest.param(
            make_pod("pod1", NODE, [upstream_toleration(2, None)]),
            [upstream_taint(1)],
            0.0,
            id="schedule on tainted Node with infinite invalid toleration",
        ),
    ],
)
def test_create_pod(pod, taints, expected):
    cluster = Cluster()
    cluster.set_node(make_node(NODE, taints))
    cluster.pod_event(None, pod)
    cluster.run_for(HORIZON, STEP)
    assert_deletions(cluster, {POD1: expected})


# --- TestDeletePod ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod("pod1", NODE), id="pod delete event with a tainted node does not panic"),
    ],
)
def test_delete_pod(pod):
    cluster = Cluster()
    cluster.set_node(make_node(NODE, [upstream_taint(1)]))
    cluster.pod_event(pod, None)  # a deletion of a pod the manager never saw
    cluster.run_for(1.0, STEP)
    assert [c for c in cluster.core.calls if c.verb != "get-node"] == []
    assert cluster.events.recorded == []
    assert cluster.manager.pending() == 0


# --- TestUpdatePod ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prev", "new", "scheduled_first", "expected"),
    [
        pytest.param(make_pod("pod1"), make_pod("pod1", NODE), NEVER, 0.0, id="scheduling onto tainted Node"),
        pytest.param(
            make_pod("pod1", "", [upstream_toleration(1, None)]),
            make_pod("pod1", NODE, [upstream_toleration(1, None)]),
            NEVER,
            NEVER,
            id="scheduling onto tainted Node with toleration",
        ),
        pytest.param(
            make_pod("pod1", NODE, [upstream_toleration(1, 100)]),
            make_pod("pod1", NODE),
            100.0,
            0.0,
            id="removing toleration",
        ),
        # Upstream keeps the eviction scheduled from the 1 s toleration and deletes at 1 s; taintkeeper
        # recomputes the deadline from the new 100 s toleration (docs/architecture.md: "Toleration edits take effect").
        pytest.param(
            make_pod("pod1", NODE, [upstream_toleration(1, 1)]),
            make_pod("pod1", NODE, [upstream_toleration(1, 100)]),
            1.0,
            100.0,
            id="lengthening toleration shouldn't work",
        ),
    ],
)
def test_update_pod(prev, new, scheduled_first, expected):
    cluster = Cluster()
    cluster.set_node(make_node(NODE, [upstream_taint(1)]))
    cluster.pod_event(None, prev)
    # upstream's awaitForScheduledEviction: the first version's eviction is scheduled before the update
    assert cluster.scheduled_at(POD1) == (None if scheduled_first is None else pytest.approx(scheduled_first))
    cluster.pod_event(prev, new)
    cluster.run_for(HORIZON, STEP)
    assert_deletions(cluster, {POD1: expected})


# --- TestCreateNode -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "taints", "expected"),
    [
        pytest.param(make_pod("pod1", NODE), [], NEVER, id="Creating Node matching already assigned Pod"),
        pytest.param(
            make_pod("pod1", NODE), [upstream_taint(1)], 0.0, id="Creating tainted Node matching already assigned Pod"
        ),
        pytest.param(
            make_pod("pod1", NODE, [upstream_toleration(1, None)]),
            [upstream_taint(1)],
            NEVER,
            id="Creating tainted Node matching already assigned tolerating Pod",
        ),
    ],
)
def test_create_node(pod, taints, expected):
    cluster = Cluster()
    cluster.preload_pods(pod)  # in the informer's store already; only the node add is delivered
    cluster.set_node(make_node(NODE, taints))
    cluster.run_for(HORIZON, STEP)
    assert_deletions(cluster, {POD1: expected})


# --- TestDeleteNode -----------------------------------------------------------------------------------------
# Upstream checks the deleted node's entry leaves `taintedNodes`; here, observably: a pod that shows up
# on that node name afterwards is judged against no taints at all.


@pytest.mark.parametrize("taints", [pytest.param([upstream_taint(1)], id="deleted node's taints are forgotten")])
def test_delete_node(taints):
    cluster = Cluster()
    cluster.set_node(make_node(NODE, taints))
    cluster.delete_node(NODE)
    cluster.pod_event(None, make_pod("pod1", NODE))
    cluster.run_for(5.0, STEP)
    assert_deletions(cluster, {POD1: NEVER})


# --- TestUpdateNode -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pods", "old_taints", "new_taints", "expected"),
    [
        pytest.param(
            [make_pod("pod1", NODE)],
            [],
            [upstream_taint(1)],
            {POD1: 0.0},
            id="Added taint, expect node patched and deleted",
        ),
        # upstream watches 5 s only; the 100 s toleration runs out at 100 s
        pytest.param(
            [make_pod("pod1", NODE, [upstream_toleration(1, 100)])],
            [],
            [upstream_taint(1)],
            {POD1: 100.0},
            id="Added tolerated taint",
        ),
        pytest.param(
            [make_pod("pod1", NODE, [upstream_toleration(1, 100)])],
            [],
            [upstream_taint(1), upstream_taint(2)],
            {POD1: 0.0},
            id="Only one added taint tolerated",
        ),
        # Upstream hands over (tainted -> untainted) to a controller that never saw the taint. Here the
        # tainted node is delivered first, so the 1 s eviction is really scheduled, and the removal 0.5 s
        # later must cancel it.
        pytest.param(
            [make_pod("pod1", NODE, [upstream_toleration(1, 1)])],
            [upstream_taint(1)],
            [],
            {POD1: NEVER},
            id="Taint removed",
        ),
        pytest.param(
            [make_pod("pod1", NODE, [upstream_toleration(1, 1), upstream_toleration(2, 100)])],
            [],
            [upstream_taint(1), upstream_taint(2)],
            {POD1: 1.0},
            id="Pod with multiple tolerations are evicted when first one runs out",
        ),
    ],
)
def test_update_node(pods, old_taints, new_taints, expected):
    cluster = Cluster()
    cluster.preload_pods(*pods)
    cluster.set_node(make_node(NODE, old_taints))
    if old_taints:
        cluster.run_for(0.5, STEP)
        assert cluster.scheduled_at(POD1) is not None
    cluster.set_node(make_node(NODE, new_taints))
    cluster.run_for(HORIZON, STEP)
    assert_deletions(cluster, expected)
    if old_taints and not new_taints:
        assert cluster.events.recorded == [(POD1, "Normal", EVENT_REASON, CANCELLING.format(POD1))]


# --- TestUpdateNodeWithMultipleTaints -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "tolerations",
    [
        pytest.param(
            [
                {"key": "testTaint1", "operator": "Exists", "effect": "NoExecute"},
                {"key": "testTaint2", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
            ],
            id="no taint -> infinitely tolerated -> temporarily tolerated -> infinitely tolerated",
        ),
    ],
)
def test_update_node_with_multiple_taints(tolerations):
    cluster = Cluster()
    cluster.preload_pods(make_pod("pod1", NODE, tolerations))
    taint1, taint2 = upstream_taint(1), upstream_taint(2)

    cluster.set_node(make_node(NODE))
    assert cluster.scheduled_at(POD1) is None, "queued for deletion with no taints"
    cluster.set_node(make_node(NODE, [taint1]))
    assert cluster.scheduled_at(POD1) is None, "queued for deletion with a permanently tolerated taint"
    cluster.set_node(make_node(NODE, [taint1, taint2]))
    assert cluster.scheduled_at(POD1) == pytest.approx(60.0), "not queued after a temporarily tolerated taint"
    cluster.set_node(make_node(NODE, [taint1]))
    assert cluster.scheduled_at(POD1) is None, "still queued after the temporarily tolerated taint went"
    cluster.run_for(HORIZON, 1.0)
    assert_deletions(cluster, {POD1: NEVER})


# --- TestUpdateNodeWithMultiplePods -------------------------------------------------------------------------

THREE_PODS = [
    make_pod("pod1", NODE),
    make_pod("pod2", NODE, [upstream_toleration(1, 1)]),
    make_pod("pod3", NODE, [upstream_toleration(1, None)]),
]


@pytest.mark.parametrize(
    ("pods", "new_taints", "expected"),
    [
        pytest.param(
            THREE_PODS,
            [upstream_taint(1)],
            {POD1: 0.0, POD2: 1.0, POD3: NEVER},
            id="Pods with different toleration times are evicted appropriately",
        ),
        pytest.param(
            THREE_PODS,
            [upstream_taint(1), upstream_taint(2)],
            {POD1: 0.0, POD2: 0.0, POD3: 0.0},
            id="Evict all pods not matching all taints instantly",
        ),
    ],
)
def test_update_node_with_multiple_pods(pods, new_taints, expected):
    cluster = Cluster()
    cluster.preload_pods(*pods)
    cluster.set_node(make_node(NODE))
    cluster.set_node(make_node(NODE, new_taints))
    cluster.run_for(HORIZON, STEP)
    assert_deletions(cluster, expected)


# --- TestGetMinTolerationTime -------------------------------------------------------------------------------
# Upstream: 0 = evict now, -1 = tolerated forever (taintkeeper: None), else the smallest seconds.


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param([], 0, id="no tolerations -> 0"),
        pytest.param([{}], None, id="one toleration without seconds -> -1 (forever)"),
        pytest.param([{"tolerationSeconds": 1}, {"tolerationSeconds": 2}], 1, id="1s and 2s -> 1s"),
        pytest.param([{"tolerationSeconds": 1}, {}], 1, id="1s and no seconds -> 1s"),
        pytest.param([{}, {"tolerationSeconds": 1}], 1, id="no seconds and 1s -> 1s"),
    ],
)
def test_get_min_toleration_time(tolerations, expected):
    assert min_toleration_seconds(tolerations) == expected


# --- TestEventualConsistency --------------------------------------------------------------------------------
# The node update reaches the manager before pod2's update does (it lists only pod1). Upstream's rows
# deliver pod2's "delayed update" right away; here it comes DELAY seconds later on the fake clock, as
# when the watch lags or the scheduler binds pod2 then, so the row also pins when pod2's clock starts:
# upstream counts a tolerating pod2 from when its update arrives (its binding), i.e. DELAY + 100 s.

DELAY = 30.0


@pytest.mark.parametrize(
    ("prev", "new", "pod2_at"),
    [
        pytest.param(
            make_pod("pod2"),
            make_pod("pod2", NODE, bound=START + DELAY),
            DELAY,
            id="existing pod2 scheduled onto tainted Node",
        ),
        pytest.param(
            make_pod("pod2", "", [upstream_toleration(1, 100)]),
            make_pod("pod2", NODE, [upstream_toleration(1, 100)], bound=START + DELAY),
            DELAY + 100,
            id="existing pod2 with taint toleration scheduled onto tainted Node",
        ),  # counted from the pod's binding, not the taint (FIXED_DEFECT_ROWS)
        pytest.param(None, make_pod("pod2", NODE, created=START + DELAY), DELAY, id="new pod2 created on tainted Node"),
        pytest.param(
            None,
            make_pod("pod2", NODE, [upstream_toleration(1, 100)], created=START + DELAY),
            DELAY + 100,
            id="new pod2 with tait toleration created on tainted Node",
        ),
    ],
)
def test_eventual_consistency(prev, new, pod2_at):
    cluster = Cluster()
    cluster.preload_pods(make_pod("pod1", NODE))
    if prev is not None:
        cluster.pod_event(None, prev)
    cluster.set_node(make_node(NODE))
    cluster.set_node(make_node(NODE, [upstream_taint(1)]))
    cluster.drain()
    assert_deletions(cluster, {POD1: 0.0})  # the node update alone deletes pod1
    assert POD2 not in cluster.deletions()
    cluster.run_for(DELAY, STEP)
    cluster.pod_event(prev, new)  # pod2's delayed update
    cluster.run_for(HORIZON, STEP)
    assert_deletions(cluster, {POD1: 0.0, POD2: pod2_at})


# --- TestPodDeletionEvent -----------------------------------------------------------------------------------
# The exact events, as the real recorder posts them (upstream's fake recorder compares whole Events).


class EventsApi:
    def __init__(self) -> None:
        self.created: list[tuple[str, dict]] = []

    def create_namespaced_event(self, namespace: str, body: dict, **_: object) -> urllib3.HTTPResponse:
        self.created.append((namespace, body))
        return http_response(b"{}")


@pytest.mark.parametrize(
    ("toleration_seconds", "message"),
    [
        pytest.param(None, MARKING.format("test/test"), id="emitPodDeletionEvent"),
        pytest.param(10, CANCELLING.format("test/test"), id="emitCancelPodDeletionEvent"),
    ],
)
def test_pod_deletion_event(toleration_seconds, message):
    recorder = EventRecorder(None, TAINT_EVICTION, WriteFence.without_lease())
    api = EventsApi()
    recorder._core = api  # the real recorder posting to a recording stand-in for CoreV1Api
    cluster = Cluster(events=recorder)
    tolerations = [upstream_toleration(1, toleration_seconds)] if toleration_seconds else []
    cluster.set_node(make_node(NODE, [upstream_taint(1)]))
    cluster.pod_event(None, make_pod("test", NODE, tolerations, namespace="test"))
    cluster.run_for(1.0, STEP)
    if toleration_seconds:
        cluster.set_node(make_node(NODE))  # the taint goes before the toleration runs out
        cluster.run_for(1.0, STEP)
    stop = threading.Event()
    stop.set()
    recorder.run(stop)  # posts everything queued, then returns
    assert len(api.created) == 1, api.created
    namespace, event = api.created[0]
    assert namespace == "test"
    assert event["metadata"]["namespace"] == "test"
    assert {k: event["involvedObject"][k] for k in ("kind", "apiVersion", "namespace", "name")} == {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": "test",
        "name": "test",
    }
    assert (event["reason"], event["type"], event["count"], event["message"]) == (
        "TaintManagerEviction",
        "Normal",
        1,
        message,
    )
    assert event["source"]["component"] == TAINT_EVICTION  # upstream: the controller's name


# --- toleration helpers: TestTolerationToleratesTaint -------------------------------------------------------
# Rows 7-14 are the Gt/Lt comparison operators (KEP-5471, alpha in 1.35 behind the
# TaintTolerationComparisonOperators gate), which upstream's table runs with the gate on: so does this
# one (--feature-gates=TaintTolerationComparisonOperators=true). With the gate off (the default) such
# a toleration tolerates nothing: test_comparison_operators_tolerate_nothing_with_the_gate_off.


def _tol(key, operator, value=None):
    toleration = {"key": key, "operator": operator, "effect": "NoSchedule"}
    if value is not None:
        toleration["value"] = value
    return toleration


def _taint(key, value=None, effect="NoSchedule"):
    taint = {"key": key, "effect": effect}
    if value is not None:
        taint["value"] = value
    return taint


SLA = "node.kubernetes.io/sla"


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        pytest.param(
            _tol("foo", "Exists"),
            _taint("foo"),
            True,
            id="toleration and taint have the same key and effect, and operator is Exists, and taint has no "
            "value, expect tolerated",
        ),
        pytest.param(
            _tol("foo", "Exists"),
            _taint("foo", "bar"),
            True,
            id="toleration and taint have the same key and effect, and operator is Exists, and taint has some "
            "value, expect tolerated",
        ),
        pytest.param(
            _tol("", "Exists"),
            _taint("foo", "bar"),
            True,
            id="toleration and taint have the same effect, toleration has empty key and operator is Exists, "
            "means match all taints, expect tolerated",
        ),
        pytest.param(
            _tol("foo", "Equal", "bar"),
            _taint("foo", "bar"),
            True,
            id="toleration and taint have the same key, effect and value, and operator is Equal, expect tolerated",
        ),
        pytest.param(
            _tol("foo", "Equal", "value1"),
            _taint("foo", "value2"),
            False,
            id="toleration and taint have the same key and effect, but different values, and operator is "
            "Equal, expect not tolerated",
        ),
        pytest.param(
            _tol("foo", "Equal", "bar"),
            _taint("foo", "bar", "NoExecute"),
            False,
            id="toleration and taint have the same key and value, but different effects, and operator is "
            "Equal, expect not tolerated",
        ),
        pytest.param(
            _tol(SLA, "Gt", "950"),
            _taint(SLA, "800"),
            False,
            id="toleration with Gt operator - taint value less than toleration value, expect not tolerated",
        ),
        pytest.param(
            _tol(SLA, "Gt", "750"),
            _taint(SLA, "950"),
            True,
            id="toleration with Gt operator - taint value greater than toleration value, expect tolerated",
        ),
        pytest.param(
            _tol(SLA, "Lt", "800"),
            _taint(SLA, "950"),
            False,
            id="toleration with Lt operator - taint value greater than toleration value, expect not tolerated",
        ),
        pytest.param(
            _tol(SLA, "Lt", "950"),
            _taint(SLA, "800"),
            True,
            id="toleration with Lt operator - taint value less than toleration value, expect tolerated",
        ),
        pytest.param(
            _tol(SLA, "Gt", "950"),
            _taint(SLA, "950"),
            False,
            id="toleration with Gt operator and taint with equal numeric value, expect not tolerated",
        ),
        pytest.param(
            _tol(SLA, "Gt", "950"),
            _taint(SLA, "high"),
            False,
            id="toleration with Gt operator and taint with non-numeric value, expect not tolerated",
        ),
        pytest.param(
            _tol("test-key", "Gt", "-100"),
            _taint("test-key", "-200"),
            False,
            id="toleration with Gt operator and negative numeric values - taint value less than threshold, "
            "expect not tolerated",
        ),
        pytest.param(
            _tol("test-key", "Gt", "9223372036854775806"),
            _taint("test-key", "100"),
            False,
            id="toleration with Gt operator and large int64 values - taint value less than threshold, expect "
            "not tolerated",
        ),
    ],
)
def test_toleration_tolerates_taint(toleration, taint, expected):
    assert tolerates(toleration, taint, comparison_operators=True) is expected


@pytest.mark.parametrize(
    ("toleration", "taint"),
    [
        pytest.param(_tol(SLA, "Gt", "750"), _taint(SLA, "950"), id="Gt, a greater taint value"),
        pytest.param(_tol(SLA, "Lt", "950"), _taint(SLA, "800"), id="Lt, a smaller taint value"),
    ],
)
def test_comparison_operators_tolerate_nothing_with_the_gate_off(toleration, taint):
    assert tolerates(toleration, taint) is False


# --- toleration helpers: TestTolerationsTolerateTaintsWithFilter --------------------------------------------
# "All filtered taints are tolerated" is what makes the manager wait rather than evict at once; the
# manager's own filter is NoExecute (`no_execute_taints`), used for the last row.

FOO_EXISTS_NOSCHEDULE = {"key": "foo", "operator": "Exists", "effect": "NoSchedule"}


def _apply(taints, keep):
    if keep is None:
        return list(taints)
    if keep == "NoExecute":
        return no_execute_taints(taints)
    return [t for t in taints if keep(t)]


@pytest.mark.parametrize(
    ("tolerations", "taints", "keep", "expected"),
    [
        pytest.param([], [], lambda t: True, True, id="empty tolerations tolerate empty taints"),
        pytest.param(
            [FOO_EXISTS_NOSCHEDULE], [], lambda t: True, True, id="non-empty tolerations tolerate empty taints"
        ),
        pytest.param(
            [FOO_EXISTS_NOSCHEDULE],
            [{"key": "foo", "effect": "NoSchedule"}],
            lambda t: True,
            True,
            id="tolerations match all taints, expect tolerated",
        ),
        pytest.param(
            [FOO_EXISTS_NOSCHEDULE],
            [{"key": "bar", "effect": "NoSchedule"}],
            lambda t: False,
            True,
            id="tolerations don't match taints, but no taints apply to the filter, expect tolerated",
        ),
        pytest.param(
            [FOO_EXISTS_NOSCHEDULE],
            [{"key": "bar", "effect": "NoSchedule"}],
            None,
            False,
            id="no filterFunc indicated, means all taints apply to the filter, tolerations don't match taints, "
            "expect untolerated",
        ),
        pytest.param(
            [{"key": "foo", "operator": "Exists", "effect": "NoExecute"}],
            [{"key": "foo", "effect": "NoExecute"}, {"key": "bar", "effect": "NoSchedule"}],
            "NoExecute",
            True,
            id="tolerations match taints, expect tolerated",
        ),
    ],
)
def test_tolerations_tolerate_taints_with_filter(tolerations, taints, keep, expected):
    assert match_tolerations(_apply(taints, keep), tolerations).all_tolerated is expected


# --- GetMatchingTolerations (no upstream table: rows from pkg/apis/core/v1/helper/helpers.go) ---------------
# For each taint, the FIRST toleration that tolerates it is the one used; later ones are ignored, and
# the pod's time is the smallest seconds among the used ones. The last two rows run that through the
# manager (FIXED_DEFECT_ROWS).

UNREACHABLE_TAINT = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
UNREACHABLE_FOREVER = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}
UNREACHABLE_60 = {**UNREACHABLE_FOREVER, "tolerationSeconds": 60}
ANY_NOEXECUTE_60 = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
ANY_NOEXECUTE_600 = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600}


@pytest.mark.parametrize(
    ("taints", "tolerations", "all_tolerated", "used"),
    [
        pytest.param([], [FOO_EXISTS_NOSCHEDULE], True, [], id="no taints: tolerated, nothing used"),
        pytest.param([UNREACHABLE_TAINT], [], False, None, id="a taint and no tolerations: not tolerated"),
        pytest.param(
            [UNREACHABLE_TAINT],
            [UNREACHABLE_FOREVER, ANY_NOEXECUTE_60],
            True,
            [UNREACHABLE_FOREVER],
            id="the first tolerating toleration is used, a later one is not",
        ),
        pytest.param(
            [UNREACHABLE_TAINT, upstream_taint(1)],
            [upstream_toleration(1, 5), ANY_NOEXECUTE_600],
            True,
            [ANY_NOEXECUTE_600, upstream_toleration(1, 5)],
            id="each taint uses its own first tolerating toleration",
        ),
        pytest.param(
            [UNREACHABLE_TAINT, upstream_taint(1)],
            [UNREACHABLE_60],
            False,
            None,
            id="one taint untolerated: not tolerated",
        ),
    ],
)
def test_get_matching_tolerations(taints, tolerations, all_tolerated, used):
    match = match_tolerations(taints, tolerations)
    assert match.all_tolerated is all_tolerated
    if used is not None:
        assert match.used == used


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param(
            [UNREACHABLE_FOREVER, ANY_NOEXECUTE_60],
            NEVER,
            id="unreachable Exists forever before Exists NoExecute 60s: never evicted",
        ),
        pytest.param(
            [ANY_NOEXECUTE_600, UNREACHABLE_60],
            600.0,
            id="Exists NoExecute 600s before unreachable Exists 60s: evicted at 600s",
        ),
    ],
)
def test_min_toleration_time_uses_the_first_matching_toleration(tolerations, expected):
    cluster = Cluster()
    cluster.set_node(make_node(NODE, [{**UNREACHABLE_TAINT, "timeAdded": upstream_taint(1)["timeAdded"]}]))
    cluster.pod_event(None, make_pod("pod1", NODE, tolerations))
    cluster.run_for(700.0, 0.5)
    deleted = cluster.deletions()
    if expected is None:
        assert POD1 not in deleted
    else:
        assert deleted[POD1] == [pytest.approx(expected, abs=0.5)]


# --- scenarios that upstream's code implies but no upstream table row pins ----------------------------------

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATIONS = [
    {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]


def _node_taint(key: str, added: float) -> dict:
    return {"key": key, "effect": "NoExecute", "timeAdded": upstream_taint(1, added)["timeAdded"]}


@pytest.mark.parametrize(
    "swap_after",
    [
        # before abed3df: evicted at 400 s, the swapped-in taint's timeAdded restarting the clock
        pytest.param(100.0, id="not-ready swapped for unreachable 100s in: the eviction stays at 300s"),
    ],
)
def test_taint_swap_keeps_the_scheduled_eviction(swap_after):
    # Upstream processPodOnNode: a pod with a scheduled eviction keeps its start when the taints change.
    cluster = Cluster()
    cluster.set_node(make_node(NODE, [_node_taint(NOT_READY, START)]))
    cluster.pod_event(None, make_pod("pod1", NODE, DEFAULT_TOLERATIONS))
    cluster.run_for(swap_after, 1.0)
    cluster.set_node(make_node(NODE, [_node_taint(UNREACHABLE, START + swap_after)]))
    cluster.run_for(450.0 - swap_after, 1.0)
    assert cluster.deletions() == {POD1: [pytest.approx(300.0, abs=1.0)]}


@pytest.mark.parametrize(
    "extra_taint",
    [
        # before abed3df: the update replaced the firing entry and the pod was deleted twice
        pytest.param(upstream_taint(2), id="a node update during the eviction's API calls: the pod is deleted once"),
    ],
)
def test_a_pod_is_deleted_once(extra_taint):
    cluster = Cluster()
    cluster.set_node(make_node(NODE, [upstream_taint(1)]))
    cluster.pod_event(None, make_pod("pod1", NODE, [upstream_toleration(1, 5)]))

    def node_changes_meanwhile() -> None:
        cluster.clock.advance(0.5)  # the API call takes a while; the node's watch delivers an update
        cluster.set_node(make_node(NODE, [upstream_taint(1), extra_taint]))

    cluster.core.before_write.append(node_changes_meanwhile)
    cluster.run_for(10.0, STEP)
    assert cluster.deletions() == {POD1: [pytest.approx(5.5, abs=STEP)]}


# --- the lists above name real rows -------------------------------------------------------------------------


def test_listed_rows_exist():
    ids = set()
    for name, function in list(globals().items()):
        for mark in getattr(function, "pytestmark", []) if name.startswith("test_") else []:
            if mark.name == "parametrize":
                ids.update(f"{name}[{param.id}]" for param in mark.args[1])
    listed = [row for row, _ in DELIBERATE_DIFFERENCES] + [row for row, _ in FIXED_DEFECT_ROWS]
    assert [row for row in listed if row not in ids] == []
