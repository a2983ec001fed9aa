"""controller/outofservice/controller.py on a fake clock, its API edge an in-memory world of raw objects
whose writes are applied for real: a force delete removes the pod (or, held by a finalizer, marks it
deleted), the fencing patch goes through the `jsonpatch` library (a node changed since it was read
fails the patch's `test` op, as the apiserver's 422). The informers catch up after each pass."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import jsonpatch
import pytest
from prometheus_client import REGISTRY

from controller.clock import FakeClock
from controller.fencing import CONFIRMED_AT_ANNOTATION, FENCED_AT_ANNOTATION, FENCED_BY_ANNOTATION
from controller.objects import LeaseView, NodeView, PodView, node_view, pod_view
from controller.outofservice.auto_fence import NO_CONFIRMATION, STALE_CONFIRMATION
from controller.outofservice.controller import AUTO_FENCED_REASON, OutOfServiceController
from controller.outofservice.decision import NODE_REASON, POD_REASON, READY_REASON
from controller.volume_attachments import VolumeAttachmentView, volume_attachment_view
from controller.worker import Done
from controller.workqueue import WorkQueue
from kube.errors import ChangedSinceRead
from kube.fence import WriteFence
from kube.timestamps import format_time
from shared.taints import OUT_OF_SERVICE
from tests.support.fakes import MemoryStore, RecordingEvents
from tests.support.fencing import (
    OUT_OF_SERVICE_TAINT,
    START,
    attachment_json,
    node_json,
    owner,
    pod_json,
    tolerate_out_of_service,
)
from tests.support.health import healthz, wait_until
from tests.support.work import outcome, work_off

Json = dict[str, Any]
UPSTREAM_LABELS = {"namespace": "apps", "reason": "out-of-service"}  # upstream PodGC's metrics


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


class World:
    """The API as the handling's edge (OutOfServiceApi) sees it, in memory."""

    def __init__(self) -> None:
        self.nodes: dict[str, Json] = {}
        self.pods: dict[str, Json] = {}
        self.attachments: dict[str, Json] = {}
        self.calls: list[tuple[str, str]] = []
        self.failing: set[str] = set()  # pod keys or attachment names whose deletion fails (500)
        self.fence: WriteFence | None = None
        self.change_before_patch = False  # someone writes the node between our read and our patch

    def read_node(self, name: str) -> Json | None:
        self.calls.append(("read node", name))
        return copy.deepcopy(self.nodes.get(name))

    def _require(self, action: str, target: str) -> None:
        if self.fence is not None:
            self.fence.require(action, target)

    def force_delete_pod(self, pod: PodView) -> Literal[True] | None:
        self._require("pod-force-deletion", pod.key)
        self.calls.append(("force delete pod", pod.key))
        if pod.key in self.failing:
            raise RuntimeError("500 Internal Server Error")
        raw = self.pods.get(pod.key)
        if raw is None or raw["metadata"]["uid"] != pod.uid:
            return None  # 404, or 409 on the uid precondition
        if raw["metadata"].get("finalizers"):
            raw["metadata"]["deletionTimestamp"] = format_time(START)
        else:
            del self.pods[pod.key]
        return True

    def delete_volume_attachment(self, attachment: VolumeAttachmentView) -> Literal[True] | None:
        self._require("volume-attachment-deletion", attachment.name)
        self.calls.append(("delete volume attachment", attachment.name))
        if attachment.name in self.failing:
            raise RuntimeError("500 Internal Server Error")
        raw = self.attachments.get(attachment.name)
        if raw is None or raw["metadata"]["uid"] != attachment.uid:
            return None
        del self.attachments[attachment.name]
        return True

    def fence_node(self, name: str, ops: Sequence[dict[str, Any]]) -> Literal[True] | None:
        self._require("node-out-of-service-taint", name)
        self.calls.append(("patch node", name))
        if name not in self.nodes:
            return None
        if self.change_before_patch:
            self.change_before_patch = False
            self.nodes[name]["metadata"]["resourceVersion"] += "1"
        try:
            self.nodes[name] = jsonpatch.apply_patch(self.nodes[name], list(ops))
        except jsonpatch.JsonPatchTestFailed as error:
            raise ChangedSinceRead(f"HTTP 422: {error}") from error
        self.nodes[name]["metadata"]["resourceVersion"] += "1"
        return True

    @property
    def writes(self) -> list[tuple[str, str]]:
        return [call for call in self.calls if call[0] != "read node"]


V = TypeVar("V", NodeView, PodView, VolumeAttachmentView)


def catch_up(
    store: MemoryStore[V],
    world: dict[str, Json],
    view: Callable[[Json], V],
    handler: Callable[[V | None, V | None], None],
) -> None:
    """An informer brings its store to what the API holds, calling the handler for each change."""
    fresh = {v.key: v for v in map(view, world.values())}
    for key in set(store.items) | set(fresh):
        old, new = store.items.get(key), fresh.get(key)
        if new is None:
            store.items.pop(key, None)
        else:
            store.items[key] = new
        if old != new:
            handler(old, new)


class Harness:
    def __init__(self, *, active: bool = True, auto_fence_after: float | None = None, dry_run: bool = False) -> None:
        self.clock = FakeClock(START)
        self.api = World()
        self.events = RecordingEvents()
        self.leases: MemoryStore[LeaseView] = MemoryStore(lambda lease: lease.name)
        self.nodes: MemoryStore[NodeView] = MemoryStore(lambda node: node.name)
        self.pods: MemoryStore[PodView] = MemoryStore()
        self.attachments: MemoryStore[VolumeAttachmentView] = MemoryStore()
        self.controller = OutOfServiceController(
            self.nodes,
            self.pods,
            self.attachments,
            self.api,
            self.events,
            auto_fence_after=auto_fence_after,
            leases=self.leases,
            clock=self.clock,
            queue=WorkQueue(self.clock),
            dry_run=dry_run,
        )
        if active:
            self.controller.activate()

    # the API changes, then the informers catch up
    def put_node(self, raw: Json) -> None:
        self.api.nodes[raw["metadata"]["name"]] = copy.deepcopy(raw)
        self.sync()

    def put_pod(self, raw: Json) -> None:
        view = pod_view(raw)
        self.api.pods[view.key] = copy.deepcopy(raw)
        self.sync()

    def put_attachment(self, raw: Json) -> None:
        self.api.attachments[raw["metadata"]["name"]] = copy.deepcopy(raw)
        self.sync()

    def node_only(self, raw: Json) -> None:
        """The node changes in the API and its informer catches up; the others have not yet."""
        name = raw["metadata"]["name"]
        self.api.nodes[name] = copy.deepcopy(raw)
        old, self.nodes.items[name] = self.nodes.items.get(name), node_view(raw)
        self.controller.on_node_change(old, self.nodes.items[name])

    def sync(self) -> None:
        catch_up(self.nodes, self.api.nodes, node_view, self.controller.on_node_change)
        catch_up(self.pods, self.api.pods, pod_view, self.controller.on_pod_change)
        catch_up(self.attachments, self.api.attachments, volume_attachment_view, self.controller.on_attachment_change)

    def drain(self) -> list[str]:
        """Work every queued node (no worker thread), each result in a word; informers catch up after each."""
        return [outcome(result) for result in work_off(self.controller.queue, self.controller.sync, self.catch_up)]

    def catch_up(self, _key: str) -> None:
        self.sync()

    def pod_events(self) -> list[tuple[str, str, str]]:
        return [(pod, kind, reason) for pod, kind, reason, _ in self.events.recorded]

    def node_events(self) -> list[tuple[str, str, str, str]]:
        return self.events.node_events


def out_of_service_node(name: str = "node1", ready: str = "Unknown") -> Json:
    return node_json(name, ready, taints=[OUT_OF_SERVICE_TAINT])


def dead_node_with_work(h: Harness) -> None:
    h.put_pod(pod_json("web-1", owners=[owner("StatefulSet", "web")]))
    h.put_pod(pod_json("agent", namespace="kube-system", tolerations=[{"operator": "Exists"}]))
    h.put_pod(pod_json("old", tolerations=[tolerate_out_of_service()], terminating=True))
    h.put_pod(pod_json("elsewhere", node="node2"))
    h.put_attachment(attachment_json("csi-1"))
    h.put_attachment(attachment_json("csi-2", node="node2"))
    h.put_node(node_json("node2", "True"))


# --- the out-of-service node ----------------------------------------------------------------------------


def test_an_out_of_service_node_loses_its_untolerating_and_terminating_pods_and_its_attachments():
    h = Harness()
    dead_node_with_work(h)
    pods_before = sample("taintkeeper_out_of_service_pods_deleted_total")
    attachments_before = sample("taintkeeper_out_of_service_volume_attachments_deleted_total")
    upstream_before = sample("pod_gc_collector_force_delete_pods_total", UPSTREAM_LABELS)
    h.put_node(out_of_service_node())
    assert h.drain() == ["deleted"]
    assert sorted(h.api.writes[:2]) == [("force delete pod", "apps/old"), ("force delete pod", "apps/web-1")]
    assert h.api.writes[2:] == [("delete volume attachment", "csi-1")]  # volumes after the pods
    assert sorted(h.api.pods) == ["apps/elsewhere", "kube-system/agent"]
    assert sorted(h.api.attachments) == ["csi-2"]
    assert sorted(h.pod_events()) == [("apps/old", "Normal", POD_REASON), ("apps/web-1", "Normal", POD_REASON)]
    assert h.node_events() == [
        (
            "node1",
            "Normal",
            NODE_REASON,
            "Node node1 is out of service and not ready: force deleted 2 pod(s), deleted 1 volume attachment(s)",
        )
    ]
    assert sample("taintkeeper_out_of_service_pods_deleted_total") == pods_before + 2
    assert sample("taintkeeper_out_of_service_volume_attachments_deleted_total") == attachments_before + 1
    assert sample("pod_gc_collector_force_delete_pods_total", UPSTREAM_LABELS) == upstream_before + 2
    assert h.drain() == []  # nothing queued again: done


def test_the_pod_event_says_why():
    h = Harness()
    h.put_pod(pod_json("web-1"))
    h.put_node(out_of_service_node())
    h.drain()
    assert [message for _, _, _, message in h.events.recorded] == [
        "Force deleting Pod apps/web-1: node node1 is out of service "
        "(node.kubernetes.io/out-of-service=nodeshutdown:NoExecute) and not ready, and it does not tolerate "
        "node.kubernetes.io/out-of-service"
    ]


def test_a_not_ready_node_with_the_taint_is_out_of_service_too():
    h = Harness()
    h.put_pod(pod_json("web-1"))
    h.put_node(out_of_service_node(ready="False"))
    assert h.drain() == ["deleted"]
    assert h.api.pods == {}


def test_a_concurrent_force_delete_is_done_not_a_failure():
    """Someone else (an operator, upstream PodGC on 1.26+) force deleted the pod and the attachment first."""
    h = Harness()
    h.put_pod(pod_json("web-1"))
    h.put_attachment(attachment_json("csi-1"))
    del h.api.pods["apps/web-1"]  # gone in the API; the informer has not heard yet
    del h.api.attachments["csi-1"]
    failures = sample("taintkeeper_out_of_service_failures_total")
    deleted = sample("taintkeeper_out_of_service_pods_deleted_total")
    h.node_only(out_of_service_node())
    assert h.drain() == ["deleted"]
    assert h.api.writes == [("force delete pod", "apps/web-1"), ("delete volume attachment", "csi-1")]
    assert sample("taintkeeper_out_of_service_failures_total") == failures
    assert sample("taintkeeper_out_of_service_pods_deleted_total") == deleted
    assert h.events.recorded == [] and h.node_events() == []  # nothing was deleted by us
    assert h.drain() == []


def test_a_replacement_with_the_same_name_is_never_touched():
    """The uid precondition: the StatefulSet's new web-1 (another uid) answers 409, which counts as done."""
    h = Harness()
    h.put_pod(pod_json("web-1", uid="old"))
    h.api.pods["apps/web-1"] = pod_json("web-1", node="node2", uid="new")  # replaced before the informer knew
    h.node_only(out_of_service_node())
    assert h.drain() == ["deleted"]
    assert h.api.pods["apps/web-1"]["metadata"]["uid"] == "new"


def test_a_failed_deletion_is_retried_and_the_volumes_wait_for_the_pods():
    h = Harness()
    h.put_pod(pod_json("web-1"))
    h.put_attachment(attachment_json("csi-1"))
    h.api.failing.add("apps/web-1")
    failures = sample("taintkeeper_out_of_service_failures_total")
    upstream_errors = sample("pod_gc_collector_force_delete_pod_errors_total", UPSTREAM_LABELS)
    h.put_node(out_of_service_node())
    assert h.drain() == ["retry"]
    assert h.api.writes == [("force delete pod", "apps/web-1")]  # the attachment waits
    assert sample("taintkeeper_out_of_service_failures_total") == failures + 1
    assert sample("pod_gc_collector_force_delete_pod_errors_total", UPSTREAM_LABELS) == upstream_errors + 1
    h.api.failing.clear()
    h.clock.advance(1)
    assert h.drain() == ["deleted"]
    assert h.api.pods == {} and h.api.attachments == {}


def test_a_write_the_fence_refuses_is_retried_and_not_counted_as_a_failure():
    h = Harness()
    h.api.fence = WriteFence(10.0, monotonic=h.clock.now)  # never renewed: closed
    h.put_pod(pod_json("web-1"))
    failures = sample("taintkeeper_out_of_service_failures_total")
    h.put_node(out_of_service_node())
    assert h.drain() == ["retry"]
    assert h.api.writes == []
    assert sample("taintkeeper_out_of_service_failures_total") == failures
    h.api.fence.renewed(h.clock.now())
    h.clock.advance(1)
    assert h.drain() == ["deleted"]


def test_the_node_is_read_live_before_anything_is_deleted():
    """The cache says out of service; the node was unfenced meanwhile: nothing is deleted."""
    h = Harness()
    h.put_pod(pod_json("web-1"))
    h.api.nodes["node1"] = node_json("node1", "Unknown")  # unfenced in the API
    h.nodes.items["node1"] = node_view(out_of_service_node())  # the informer is behind
    h.controller.on_node_change(None, h.nodes.items["node1"])
    assert h.controller.sync("node1") == Done("not out of service")
    assert h.api.writes == []


def test_a_pod_that_arrives_later_is_force_deleted_too():
    h = Harness()
    h.put_node(out_of_service_node())
    assert h.drain() == ["nothing to do"]
    h.put_pod(pod_json("late", annotations={"kubernetes.io/config.mirror": "x"}))
    assert h.drain() == ["deleted"]
    assert h.api.pods == {}


def test_a_pod_a_finalizer_keeps_is_force_deleted_once():
    h = Harness()
    raw = pod_json("web-1")
    raw["metadata"]["finalizers"] = ["example.com/keep"]
    h.put_pod(raw)
    h.put_node(out_of_service_node())
    assert h.drain() == ["deleted", "nothing to do"]  # its update (now terminating) queued the node again
    assert h.api.writes == [("force delete pod", "apps/web-1")]
    assert h.api.pods["apps/web-1"]["metadata"]["deletionTimestamp"]


# --- a Ready node that still has the taint --------------------------------------------------------------


def test_a_ready_node_with_the_taint_gets_nothing_more_done_and_one_warning_per_stretch():
    h = Harness()
    h.put_pod(pod_json("web-1"))
    h.put_node(out_of_service_node(ready="True"))
    assert h.drain() == ["ready"]
    assert h.api.writes == [] and "apps/web-1" in h.api.pods
    warning = (
        "node1",
        "Warning",
        READY_REASON,
        "Node node1 is Ready but still has the "
        "node.kubernetes.io/out-of-service taint: nothing more is force deleted; remove the taint "
        "(kubectl taintkeeper unfence node1)",
    )
    assert h.node_events() == [warning]
    h.put_node(
        {
            **out_of_service_node(ready="True"),
            "metadata": {**out_of_service_node()["metadata"], "resourceVersion": "11"},
        }
    )
    assert h.drain() == ["ready"]
    assert h.node_events() == [warning]  # once per stretch
    h.put_node(node_json("node1", "True"))  # unfenced: the stretch ends
    assert h.drain() == ["in service"]
    h.put_node(out_of_service_node(ready="True"))  # fenced again while Ready: a new stretch
    assert h.drain() == ["ready"]
    assert h.node_events() == [warning, warning]


def test_the_gauge_counts_tainted_nodes_by_readiness():
    h = Harness()
    h.put_node(out_of_service_node("a"))
    h.put_node(out_of_service_node("b", ready="True"))
    h.put_node(node_json("c"))
    assert (
        sample("taintkeeper_out_of_service_nodes", {"ready": "false"}),
        sample("taintkeeper_out_of_service_nodes", {"ready": "true"}),
    ) == (1, 1)
    h.put_node(node_json("b", "True"))
    del h.api.nodes["a"]
    h.sync()
    assert (
        sample("taintkeeper_out_of_service_nodes", {"ready": "false"}),
        sample("taintkeeper_out_of_service_nodes", {"ready": "true"}),
    ) == (0, 0)


# --- leadership, dry run ------------------------------------------------------------------------------


def test_nothing_is_done_while_inactive_and_everything_on_activation():
    h = Harness(active=False)
    h.put_pod(pod_json("web-1"))
    h.put_node(out_of_service_node())
    assert h.drain() == []
    h.controller.activate()
    assert h.drain() == ["deleted"]
    assert h.api.pods == {}


def test_a_pass_stops_when_leadership_is_lost():
    h = Harness()
    h.put_node(out_of_service_node())
    h.put_pod(pod_json("web-1"))
    h.controller.deactivate()
    assert h.controller.sync("node1") == Done("inactive")
    assert h.api.writes == []


UNFENCED_MID_PASS = [
    ("the operator lifts the fence", lambda: node_json("node1", "Unknown")),
    ("the kubelet reports Ready again", lambda: node_json("node1", "True", taints=[OUT_OF_SERVICE_TAINT])),
]


@pytest.mark.parametrize("back", [case[1] for case in UNFENCED_MID_PASS], ids=[case[0] for case in UNFENCED_MID_PASS])
def test_a_node_back_in_service_mid_pass_loses_no_more_pods(back: Callable[[], Json]):
    """Seen in a soak: a node powered on and unfenced while a pass force-deleted its 50 pods one by one
    lost the rest too, their containers running again on it. Each deletion asks the node's cache first."""
    h = Harness()
    h.put_node(out_of_service_node())
    for name in ("a-1", "a-2", "a-3"):
        h.put_pod(pod_json(name))
    deleting = h.api.force_delete_pod

    def delete_then_the_node_comes_back(pod: PodView) -> Literal[True] | None:
        deleted = deleting(pod)
        h.node_only(back())  # the informer brings the change before the next deletion
        return deleted

    h.api.force_delete_pod = delete_then_the_node_comes_back  # type: ignore[method-assign]
    assert h.controller.sync("node1") == Done("not out of service")
    assert [call for call in h.api.writes if call[0] == "force delete pod"] == [("force delete pod", "apps/a-1")]


def test_a_dry_run_deletes_nothing(caplog):
    caplog.set_level("INFO", logger="taintkeeper.outofservice")
    h = Harness(dry_run=True)
    h.put_pod(pod_json("web-1"))
    h.put_attachment(attachment_json("csi-1"))
    h.put_node(out_of_service_node())
    assert h.drain() == ["dry-run"]
    assert h.api.writes == []
    assert "dry run: would force delete pod" in caplog.text
    assert "dry run: would delete volume attachment" in caplog.text


# --- the heartbeat and /healthz ----------------------------------------------------------------------------


def test_a_handling_whose_worker_hangs_is_stuck_and_fails_healthz_and_an_idle_one_is_not():
    h = Harness()
    bound = h.controller.heartbeat.bound  # a live read and one deletion at their timeouts, and slack
    assert bound == 2 * 20 + 1 + 10
    entered, release = threading.Event(), threading.Event()
    reading = h.api.read_node

    def hanging_read(name: str) -> Json | None:
        entered.set()
        release.wait(10)
        return reading(name)

    stop = threading.Event()
    h.controller.start(stop)
    try:
        for _ in range(3):  # idle for three bounds: each idle wait ends with a stamp
            h.clock.advance(bound)
            wait_until(lambda: h.controller.stuck() is None, "the idle worker's stamp")
        assert healthz([h.controller]) == (200, "ok")

        h.api.read_node = hanging_read
        h.put_pod(pod_json("web-1"))
        h.put_node(out_of_service_node())
        assert entered.wait(5)
        h.clock.advance(bound + 1)
        reason = h.controller.stuck() or ""
        assert reason.startswith(
            "out-of-service handling: worker out-of-service-worker has neither finished a sync nor waited idle in"
        )
        assert healthz([h.controller]) == (500, reason)
    finally:
        release.set()
        stop.set()
        h.controller.stop()


def test_a_long_pass_stamps_the_heartbeat_after_each_deletion():
    """A node with many pods in a slow apiserver: the pass takes longer than the bound, but is not stuck."""
    h = Harness()
    h.put_node(out_of_service_node())
    for name in ("a-1", "a-2", "a-3"):
        h.put_pod(pod_json(name))
    bound = h.controller.heartbeat.bound
    deleting = h.api.force_delete_pod
    stuck_during: list[str | None] = []

    def slow_delete(pod: PodView) -> Literal[True] | None:
        h.clock.advance(bound - 1)  # each deletion takes nearly the whole bound
        stuck_during.append(h.controller.stuck())
        return deleting(pod)

    h.api.force_delete_pod = slow_delete
    h.controller.heartbeat.beat()  # this thread stands for the worker, which stamps before each sync
    assert h.controller.sync("node1") == Done("deleted")
    assert stuck_during == [None, None, None]


# --- --auto-fence-after -------------------------------------------------------------------------------

AFTER = 300.0


def unreachable(
    since: float, confirmed_at: float | None = None, heartbeat: float | None = None, rv: str = "10"
) -> Json:
    annotations = {CONFIRMED_AT_ANNOTATION: format_time(confirmed_at)} if confirmed_at is not None else {}
    return node_json(
        "node1",
        "Unknown",
        since=since,
        heartbeat=heartbeat if heartbeat is not None else since - 40,
        annotations=annotations,
        taints=[],
        rv=rv,
    )


def test_without_a_confirmation_an_unreachable_node_is_never_fenced(caplog):
    caplog.set_level("INFO", logger="taintkeeper.outofservice")
    h = Harness(auto_fence_after=AFTER)
    h.put_pod(pod_json("web-1"))
    h.put_node(unreachable(since=START - 3600))
    assert h.drain() == [NO_CONFIRMATION]
    assert h.api.writes == [] and h.node_events() == []
    assert f"not fencing unreachable node node1: {NO_CONFIRMATION}" in caplog.text


def test_a_confirmation_older_than_the_last_heartbeat_is_not_enough():
    h = Harness(auto_fence_after=AFTER)
    h.put_node(unreachable(since=START - 3600, confirmed_at=START - 7200, heartbeat=START - 3640))
    assert h.drain() == [STALE_CONFIRMATION]
    assert h.api.writes == []


def test_a_confirmation_older_than_the_last_lease_renewal_is_not_enough():
    """Its kubelet renewed its Lease after the confirmation: it was alive then, whatever its status said."""
    h = Harness(auto_fence_after=AFTER)
    h.leases.items["node1"] = LeaseView("node1", "2027-01-15T07:00:30.000000Z")
    h.put_node(unreachable(since=START - 3000, confirmed_at=START - 3600, heartbeat=START - 4000))
    assert h.drain() == [STALE_CONFIRMATION]
    assert h.api.writes == []


def test_a_confirmed_node_is_fenced_once_unreachable_long_enough_then_its_pods_go():
    h = Harness(auto_fence_after=AFTER)
    fenced_before = sample("taintkeeper_auto_fenced_nodes_total")
    h.put_pod(pod_json("web-1"))
    h.put_node(unreachable(since=START - 100, confirmed_at=START - 10))
    assert h.drain() == ["too soon"]
    assert h.api.writes == []
    h.clock.advance(AFTER - 100 - 1)
    assert h.drain() == []
    h.clock.advance(1)
    assert h.drain() == ["fenced", "deleted"]  # the taint's update queues the node: out of service now
    node = h.api.nodes["node1"]
    (taint,) = node["spec"]["taints"]
    assert (taint["key"], taint["value"], taint["effect"]) == (OUT_OF_SERVICE, "nodeshutdown", "NoExecute")
    assert node["metadata"]["annotations"][FENCED_BY_ANNOTATION] == "taintkeeper-controller (--auto-fence-after 5m0s)"
    assert node["metadata"]["annotations"][FENCED_AT_ANNOTATION] == format_time(h.clock.now())
    assert [reason for _, _, reason, _ in h.node_events()] == [AUTO_FENCED_REASON, NODE_REASON]
    assert h.api.pods == {}
    assert sample("taintkeeper_auto_fenced_nodes_total") == fenced_before + 1


def test_a_confirmation_that_arrives_later_is_acted_on():
    h = Harness(auto_fence_after=AFTER)
    h.put_node(unreachable(since=START - 3600))
    assert h.drain() == [NO_CONFIRMATION]
    h.put_node(unreachable(since=START - 3600, confirmed_at=START - 5, rv="11"))  # the fencing agent writes it
    assert h.drain() == ["fenced", "nothing to do"]


def test_a_node_changed_between_the_read_and_the_patch_is_read_again():
    h = Harness(auto_fence_after=AFTER)
    h.api.change_before_patch = True
    h.put_node(unreachable(since=START - 3600, confirmed_at=START - 5))
    assert h.drain() == ["retry", "fenced", "nothing to do"]  # the informer brings the change: read again
    assert h.api.writes == [("patch node", "node1"), ("patch node", "node1")]


def test_without_the_flag_a_confirmed_node_is_not_fenced():
    h = Harness(auto_fence_after=None)  # --auto-fence-after's default
    h.put_node(unreachable(since=START - 3600, confirmed_at=START - 5))
    assert h.drain() == []
    assert h.api.calls == []


def test_a_dry_run_fences_nothing():
    h = Harness(auto_fence_after=AFTER, dry_run=True)
    h.put_node(unreachable(since=START - 3600, confirmed_at=START - 5))
    assert h.drain() == ["dry-run"]
    assert h.api.writes == []
