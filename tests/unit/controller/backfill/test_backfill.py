"""controller.backfill: which pods get the default tolerations and the patch (decision.py), and the
component on a fake clock (controller.py).

The API edge is an in-memory pod table that applies the JSON patches for real (the `jsonpatch`
library), so a failed `test` op is a conflict exactly as the apiserver's 422.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import jsonpatch
import pytest

from controller.backfill import metrics
from controller.backfill.controller import BackfillController
from controller.backfill.decision import (
    ALREADY_TOLERATES,
    COMPONENT,
    EVENT_REASON,
    EXCLUDED_NAMESPACE,
    INVALID_ANNOTATION_REASON,
    MIRROR_POD,
    MISSING,
    NAMESPACE_SKIPPED,
    NAMESPACE_UNKNOWN,
    POD_SKIPPED,
    TERMINATING,
    BackfillSettings,
    decide_backfill,
    event_message,
    json_patch,
)
from controller.clock import FakeClock
from controller.objects import NamespaceView, PodView, namespace_view, pod_view
from controller.options import OptionsError, parse_options
from controller.worker import Done, Retry, SyncResult
from controller.workqueue import WorkQueue
from kube.errors import ChangedSinceRead
from shared.defaults import DefaultSeconds
from tests.support.fakes import MemoryStore, RecordingEvents
from tests.support.health import healthz, wait_until
from tests.support.work import outcome, work_off

START = 1_800_000_000.0
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
NR_ANNOTATION = "taintkeeper.io/not-ready-toleration-seconds"
UR_ANNOTATION = "taintkeeper.io/unreachable-toleration-seconds"
CLUSTER = DefaultSeconds(300, 300)
EXCLUDED = frozenset({"kube-system", "taintkeeper-system"})


def default(key: str, seconds: int = 300) -> dict[str, Any]:
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


def raw_pod(
    name: str = "p",
    namespace: str = "apps",
    tolerations: list | None = None,
    labels: dict | None = None,
    annotations: dict | None = None,
    terminating: bool = False,
    rv: str = "10",
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "resourceVersion": rv,
        "creationTimestamp": "2027-01-15T08:00:00Z",
    }
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    if terminating:
        metadata["deletionTimestamp"] = "2027-01-15T08:01:00Z"
    spec: dict[str, Any] = {"nodeName": "node1", "containers": [{"name": "c", "image": "busybox"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": metadata, "spec": spec}


def ns(name: str = "apps", labels: dict | None = None, annotations: dict | None = None) -> NamespaceView:
    return namespace_view({"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}})


# --- which pods, and which tolerations --------------------------------------------------------------------

WHICH_PODS = {
    "missing both gets both, not-ready first": (raw_pod(), ns(), MISSING, [default(NOT_READY), default(UNREACHABLE)]),
    "missing only unreachable gets only unreachable": (
        raw_pod(tolerations=[default(NOT_READY, 60)]),
        ns(),
        MISSING,
        [default(UNREACHABLE)],
    ),
    "missing only not-ready gets only not-ready": (
        raw_pod(tolerations=[default(UNREACHABLE, 0)]),
        ns(),
        MISSING,
        [default(NOT_READY)],
    ),
    "missing none gets nothing": (
        raw_pod(tolerations=[default(NOT_READY, 5), default(UNREACHABLE, 5)]),
        ns(),
        ALREADY_TOLERATES,
        [],
    ),
    "an empty-key Exists toleration tolerates everything": (
        raw_pod(tolerations=[{"operator": "Exists"}]),
        ns(),
        ALREADY_TOLERATES,
        [],
    ),
    "an empty-key NoExecute toleration tolerates both keys": (
        raw_pod(tolerations=[{"operator": "Exists", "effect": "NoExecute"}]),
        ns(),
        ALREADY_TOLERATES,
        [],
    ),
    "a NoSchedule toleration of the key does not count": (
        raw_pod(tolerations=[{"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"}]),
        ns(),
        MISSING,
        [default(NOT_READY), default(UNREACHABLE)],
    ),
    "a key toleration without effect counts, whatever its seconds": (
        raw_pod(tolerations=[{"key": UNREACHABLE, "operator": "Exists"}]),
        ns(),
        MISSING,
        [default(NOT_READY)],
    ),
    "a pod labelled skip is left alone": (raw_pod(labels={"taintkeeper.io/skip": "true"}), ns(), POD_SKIPPED, []),
    "a pod labelled skip=false is backfilled": (
        raw_pod(labels={"taintkeeper.io/skip": "false"}),
        ns(),
        MISSING,
        [default(NOT_READY), default(UNREACHABLE)],
    ),
    "a pod in a namespace labelled skip is left alone": (
        raw_pod(),
        ns(labels={"taintkeeper.io/skip": "true"}),
        NAMESPACE_SKIPPED,
        [],
    ),
    "a pod in an excluded namespace is left alone": (
        raw_pod(namespace="kube-system"),
        ns("kube-system"),
        EXCLUDED_NAMESPACE,
        [],
    ),
    "a terminating pod is left alone": (raw_pod(terminating=True), ns(), TERMINATING, []),
    "a mirror pod is left alone (it cannot be updated)": (
        raw_pod(annotations={"kubernetes.io/config.mirror": "abc"}),
        ns(),
        MIRROR_POD,
        [],
    ),
    "a pod whose namespace is not cached yet waits": (raw_pod(), None, NAMESPACE_UNKNOWN, []),
}


@pytest.mark.parametrize(("pod", "namespace", "reason", "expected"), WHICH_PODS.values(), ids=WHICH_PODS.keys())
def test_which_pods_get_which_tolerations(pod, namespace, reason, expected):
    decision = decide_backfill(pod_view(pod), namespace, CLUSTER, EXCLUDED)
    assert (decision.reason, list(decision.tolerations)) == (reason, expected)
    assert decision.needed == bool(expected)


SECONDS = {
    "the cluster values without annotations": ({}, DefaultSeconds(300, 300), (300, 300), 0),
    "the cluster flags' values": ({}, DefaultSeconds(30, 45), (30, 45), 0),
    "namespace annotations override both": ({NR_ANNOTATION: "60", UR_ANNOTATION: "0"}, CLUSTER, (60, 0), 0),
    "one annotation overrides only its key": ({UR_ANNOTATION: "900"}, DefaultSeconds(30, 45), (30, 900), 0),
    "an invalid annotation falls back to the cluster value, with a warning": (
        {NR_ANNOTATION: "five", UR_ANNOTATION: "12"},
        DefaultSeconds(30, 45),
        (30, 12),
        1,
    ),
    "a negative annotation is invalid": ({UR_ANNOTATION: "-5"}, CLUSTER, (300, 300), 1),
}


@pytest.mark.parametrize(("annotations", "cluster", "expected", "warnings"), SECONDS.values(), ids=SECONDS.keys())
def test_seconds_come_from_the_namespace_then_the_cluster(annotations, cluster, expected, warnings):
    decision = decide_backfill(pod_view(raw_pod()), ns(annotations=annotations), cluster, EXCLUDED)
    assert [t["tolerationSeconds"] for t in decision.tolerations] == list(expected)
    assert len(decision.warnings) == warnings
    if warnings:
        assert "is not a whole number" in decision.warnings[0]


def test_excluded_namespaces_are_whatever_is_configured():
    pod = pod_view(raw_pod(namespace="kube-system"))
    assert decide_backfill(pod, ns("kube-system"), CLUSTER, frozenset()).needed
    assert decide_backfill(pod_view(raw_pod()), ns(), CLUSTER, frozenset({"apps"})).reason == EXCLUDED_NAMESPACE


# --- the patch ----------------------------------------------------------------------------------------------

EXISTING = [
    {"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 7},
]

PATCHES = {
    "no tolerations field: the list is created": (
        raw_pod(),
        [{"op": "add", "path": "/spec/tolerations", "value": [default(NOT_READY), default(UNREACHABLE)]}],
    ),
    "tolerations null: the list is created": (
        raw_pod(tolerations=None) | {"spec": {"tolerations": None}},
        [{"op": "add", "path": "/spec/tolerations", "value": [default(NOT_READY), default(UNREACHABLE)]}],
    ),
    "an empty list: appended from index 0": (
        raw_pod(tolerations=[]),
        [
            {"op": "add", "path": "/spec/tolerations/0", "value": default(NOT_READY)},
            {"op": "add", "path": "/spec/tolerations/1", "value": default(UNREACHABLE)},
        ],
    ),
    "two existing (one NoSchedule): the missing one goes at index 2": (
        raw_pod(tolerations=EXISTING),
        [{"op": "add", "path": "/spec/tolerations/2", "value": default(UNREACHABLE)}],
    ),
}


@pytest.mark.parametrize(("pod", "adds"), PATCHES.values(), ids=PATCHES.keys())
def test_the_patch_tests_uid_and_version_then_only_appends(pod, adds):
    decision = decide_backfill(pod_view(pod), ns(), CLUSTER, EXCLUDED)
    assert decision.needed
    ops = json_patch(pod, decision.tolerations)
    assert ops == [
        {"op": "test", "path": "/metadata/uid", "value": "uid-p"},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "10"},
        *adds,
    ]
    patched = jsonpatch.apply_patch(pod, ops)
    before = pod["spec"].get("tolerations") or []
    after = patched["spec"]["tolerations"]
    assert after[: len(before)] == before  # existing ones unchanged, in order
    assert after[len(before) :] == list(decision.tolerations)


def test_the_patch_is_refused_when_the_pod_changed_since_it_was_read():
    pod = raw_pod(tolerations=list(EXISTING))
    ops = json_patch(pod, [default(UNREACHABLE)])
    changed = copy.deepcopy(pod)
    changed["metadata"]["resourceVersion"] = "11"
    changed["spec"]["tolerations"].insert(0, {"key": "x", "operator": "Exists"})
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(changed, ops)
    replaced = copy.deepcopy(pod)
    replaced["metadata"]["uid"] = "another"
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(replaced, ops)


def test_the_event_message_names_the_keys_and_seconds():
    assert event_message([default(NOT_READY, 60), default(UNREACHABLE, 0)]) == (
        "Added default tolerations the pod was admitted without: "
        "node.kubernetes.io/not-ready:NoExecute for 60s, node.kubernetes.io/unreachable:NoExecute for 0s"
    )
    assert COMPONENT == "taintkeeper-backfill" and EVENT_REASON == "DefaultTolerationsAdded"


def test_views_carry_mirror_and_namespace_fields():
    assert pod_view(raw_pod(annotations={"kubernetes.io/config.mirror": "x"})).mirror
    assert not pod_view(raw_pod(annotations={"other": "x"})).mirror
    view = namespace_view(
        {
            "metadata": {
                "name": "a",
                "labels": {"taintkeeper.io/skip": "true", "l": "v"},
                "annotations": {NR_ANNOTATION: "5", "big": "x" * 1000},
            }
        }
    )
    assert view == NamespaceView("a", True, ((NR_ANNOTATION, "5"),))
    assert view.key == "a"


# --- the component ------------------------------------------------------------------------------------------


class SteppingClock(FakeClock):
    """A fake clock on which waiting moves time forward by the whole timeout, at once: a single
    thread can drive the component and the elapsed fake time is exactly the waits it made."""

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        self._now += 1.0 if timeout is None else timeout


class FakeApi:
    """Pods as the API holds them; patches applied for real, bumping resourceVersion."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.pods: dict[str, dict[str, Any]] = {}
        self.reads: list[float] = []
        self.patches: list[tuple[str, list, float]] = []
        self.change_before_patch: dict[str, int] = {}  # key -> times another writer races us
        self.read_errors = 0

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads.append(self.clock.now())
        if self.read_errors:
            self.read_errors -= 1
            raise RuntimeError("connection refused")
        pod = self.pods.get(f"{namespace}/{name}")
        return copy.deepcopy(pod) if pod is not None else None

    def patch_pod(self, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]) -> Literal[True] | None:
        key = f"{namespace}/{name}"
        self.patches.append((key, list(ops), self.clock.now()))
        if key not in self.pods:
            return None
        if self.change_before_patch.get(key):
            self.change_before_patch[key] -= 1
            self.bump(key)
        try:
            patched = jsonpatch.apply_patch(self.pods[key], list(ops))
        except jsonpatch.JsonPatchTestFailed as error:
            raise ChangedSinceRead(f"HTTP 422: {error}") from error
        self.pods[key] = patched
        self.bump(key)
        return True

    def bump(self, key: str) -> None:
        metadata = self.pods[key]["metadata"]
        metadata["resourceVersion"] = str(int(metadata["resourceVersion"]) + 1)


class Harness:
    def __init__(
        self,
        rate: float = 10.0,
        active: bool = True,
        dry_run: bool = False,
        cluster: DefaultSeconds = CLUSTER,
        clock: FakeClock | None = None,
    ) -> None:
        self.clock = clock or SteppingClock(START)
        self.pods: MemoryStore[PodView] = MemoryStore()
        self.namespaces: MemoryStore[NamespaceView] = MemoryStore()
        self.api = FakeApi(self.clock)
        self.events = RecordingEvents()
        settings = BackfillSettings(rate=rate, excluded_namespaces=EXCLUDED, cluster_seconds=cluster)
        self.controller = BackfillController(
            self.pods,
            self.namespaces,
            self.api,
            self.events,
            settings,
            clock=self.clock,
            queue=WorkQueue(self.clock),
            dry_run=dry_run,
        )
        self.set_namespace(ns())
        if active:
            self.controller.activate()

    def set_namespace(self, view: NamespaceView) -> None:
        old = self.namespaces.items.get(view.name)
        self.namespaces.items[view.name] = view
        self.controller.on_namespace_change(old, view)

    def add_pod(self, raw: dict[str, Any]) -> PodView:
        """The pod is created in the API and its watch event reaches the informer."""
        view = pod_view(raw)
        self.api.pods[view.key] = copy.deepcopy(raw)
        self.sync(view.key)
        return view

    def sync(self, key: str) -> None:
        """The informer catches up with the API's version of the pod."""
        old = self.pods.items.get(key)
        raw = self.api.pods.get(key)
        new = pod_view(raw) if raw is not None else None
        if new is None:
            self.pods.items.pop(key, None)
        else:
            self.pods.items[key] = new
        if old != new:
            self.controller.on_pod_change(old, new)

    def work(self) -> list[SyncResult]:
        """Work every queued pod (no worker thread); informers catch up after each write."""
        return work_off(self.controller.queue, self.controller.sync, self.sync)

    def drain(self) -> list[str]:
        """`work`, each result in a word."""
        return [outcome(result) for result in self.work()]

    def tolerations(self, key: str) -> list[dict[str, Any]]:
        return self.api.pods[key]["spec"].get("tolerations") or []


def test_a_pod_missing_defaults_is_patched_with_an_event(caplog):
    caplog.set_level("DEBUG", logger="taintkeeper.backfill")  # the log lines themselves must not fail
    h = Harness()
    before = metrics.BACKFILLED_PODS._value.get()
    h.add_pod(raw_pod("web", tolerations=[default(NOT_READY, 60)]))
    assert h.drain() == ["patched"]
    assert h.tolerations("apps/web") == [default(NOT_READY, 60), default(UNREACHABLE)]
    assert h.events.recorded == [("apps/web", "Normal", EVENT_REASON, event_message([default(UNREACHABLE)]))]
    assert metrics.BACKFILLED_PODS._value.get() == before + 1
    assert h.drain() == []  # the patched pod's update does not queue it again
    assert "added default tolerations" in caplog.text


def test_dry_run_logs_what_it_would_add(caplog):
    caplog.set_level("INFO", logger="taintkeeper.backfill")
    h = Harness(dry_run=True)
    h.add_pod(raw_pod())
    assert h.drain() == ["dry-run"]
    assert "would add default tolerations" in caplog.text


def test_pods_not_to_backfill_are_never_written():
    h = Harness()
    h.set_namespace(ns("quiet", labels={"taintkeeper.io/skip": "true"}))
    h.set_namespace(ns("kube-system"))
    h.add_pod(raw_pod("skipped", labels={"taintkeeper.io/skip": "true"}))
    h.add_pod(raw_pod("in-skipped-ns", namespace="quiet"))
    h.add_pod(raw_pod("system", namespace="kube-system"))
    h.add_pod(raw_pod("mirror", annotations={"kubernetes.io/config.mirror": "x"}))
    h.add_pod(raw_pod("leaving", terminating=True))
    h.add_pod(raw_pod("fine", tolerations=[default(NOT_READY), default(UNREACHABLE)]))
    assert h.drain() == []
    assert h.controller.resync() == 0
    assert h.api.reads == [] and h.api.patches == [] and h.events.recorded == []


def test_the_namespace_annotations_set_the_seconds_and_an_invalid_one_warns():
    h = Harness(cluster=DefaultSeconds(30, 40))
    h.set_namespace(ns("slow", annotations={NR_ANNOTATION: "600", UR_ANNOTATION: "soon"}))
    h.add_pod(raw_pod("p", namespace="slow"))
    assert h.drain() == ["patched"]
    assert h.tolerations("slow/p") == [default(NOT_READY, 600), default(UNREACHABLE, 40)]
    (warning, normal) = h.events.recorded
    assert warning[:3] == ("slow/p", "Warning", INVALID_ANNOTATION_REASON)
    assert "taintkeeper.io/unreachable-toleration-seconds='soon'" in warning[3] and "40" in warning[3]
    assert normal[1:3] == ("Normal", EVENT_REASON)


def test_a_concurrent_change_is_re_read_and_retried_later():
    h = Harness()
    failures = metrics.BACKFILL_FAILURES._value.get()
    h.add_pod(raw_pod("raced", tolerations=[{"key": "a", "operator": "Exists"}]))
    h.api.change_before_patch["apps/raced"] = 1
    (conflict,) = h.work()
    assert isinstance(conflict, Retry) and conflict.why.startswith("the pod changed meanwhile: HTTP 422")
    assert metrics.BACKFILL_FAILURES._value.get() == failures + 1
    assert h.tolerations("apps/raced") == [{"key": "a", "operator": "Exists"}]  # nothing half-applied
    h.clock.advance(0.25)  # the work queue's first backoff
    assert h.drain() == ["patched"]
    assert len(h.api.reads) == 2  # re-read before the second attempt
    assert h.tolerations("apps/raced") == [{"key": "a", "operator": "Exists"}, default(NOT_READY), default(UNREACHABLE)]


def test_a_read_error_is_retried_and_a_gone_pod_is_done():
    h = Harness()
    h.add_pod(raw_pod("flaky"))
    h.api.read_errors = 1
    assert h.drain() == ["retry"]
    h.clock.advance(0.25)
    assert h.drain() == ["patched"]
    h.add_pod(raw_pod("vanishing"))
    del h.api.pods["apps/vanishing"]  # deleted before the worker got to it; the cache still has it
    assert h.controller.sync("apps/vanishing") == Done("gone")
    assert [key for key, _, _ in h.api.patches] == ["apps/flaky"]


def test_the_live_pod_decides_not_the_cache():
    h = Harness()
    h.add_pod(raw_pod("late"))
    h.api.pods["apps/late"]["spec"]["tolerations"] = [default(NOT_READY, 1), default(UNREACHABLE, 1)]
    assert h.drain() == ["unneeded"]  # someone else (the webhook on an update) added them meanwhile
    assert h.api.patches == []


def test_a_pod_seen_before_its_namespace_is_backfilled_when_the_namespace_arrives():
    h = Harness()
    h.add_pod(raw_pod("early", namespace="new"))
    assert h.drain() == []
    h.set_namespace(ns("new", annotations={NR_ANNOTATION: "5"}))
    assert h.drain() == ["patched"]
    assert h.tolerations("new/early")[0]["tolerationSeconds"] == 5


def test_removing_a_namespace_skip_label_queues_its_pods():
    h = Harness()
    h.set_namespace(ns("opted-out", labels={"taintkeeper.io/skip": "true"}))
    h.add_pod(raw_pod("p", namespace="opted-out"))
    assert h.drain() == []
    h.set_namespace(ns("opted-out"))
    assert h.drain() == ["patched"]


def test_dry_run_reads_but_never_writes():
    h = Harness(dry_run=True)
    h.add_pod(raw_pod())
    assert h.drain() == ["dry-run"]
    assert h.api.patches == [] and h.events.recorded == []


@pytest.mark.parametrize(
    ("count", "rate"), [(50, 10.0), (10, 2.0), (3, 0.5)], ids=["50 at 10/s", "10 at 2/s", "3 at 0.5/s"]
)
def test_n_pods_at_rate_r_take_about_n_over_r_seconds(count, rate):
    h = Harness(rate=rate, active=False)
    for i in range(count):
        h.add_pod(raw_pod(f"p{i}"))
    h.controller.activate()  # an outage left `count` pods behind; all are queued at once
    assert len(h.controller.queue) == count
    start = h.clock.now()
    assert h.drain() == ["patched"] * count
    elapsed = h.clock.now() - start
    assert elapsed == pytest.approx((count - 1) / rate, abs=1e-4)  # the first goes at once (burst 1)
    gaps = [b - a for a, b in zip(h.api.reads, h.api.reads[1:], strict=False)]
    assert min(gaps) >= 1 / rate - 1e-6  # never faster than the rate, not even in a burst


def test_only_the_leader_acts():
    h = Harness(active=False)
    h.add_pod(raw_pod("a"))
    assert len(h.controller.queue) == 0  # events are ignored while not leading
    assert h.controller.sync("apps/a") == Done("inactive")
    h.controller.activate()  # becoming leader: a full resync
    h.add_pod(raw_pod("b"))
    assert h.drain() == ["patched", "patched"]
    h.controller.deactivate()
    h.add_pod(raw_pod("c"))
    h.controller.queue.add("apps/c")  # queued before leadership was lost
    assert h.drain() == ["inactive"]
    assert [key for key, _, _ in h.api.patches] == ["apps/a", "apps/b"]


class DeposingClock(SteppingClock):
    """Leadership is lost while the worker waits for a token."""

    def __init__(self, start: float) -> None:
        super().__init__(start)
        self.on_wait: list = []

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        for hook in self.on_wait:
            hook()
        super().wait(condition, timeout)


def test_losing_leadership_while_waiting_for_a_token_gives_up():
    clock = DeposingClock(START)
    h = Harness(rate=0.01, clock=clock)
    h.add_pod(raw_pod("first"))
    h.add_pod(raw_pod("second"))
    assert h.controller.sync("apps/first") == Done("patched")  # the bucket's one token
    clock.on_wait.append(h.controller.deactivate)
    waited_from = clock.now()
    assert h.controller.sync("apps/second") == Done("inactive")
    assert clock.now() - waited_from <= 1.0  # gave up after one wait, not the 100 s to the next token
    assert [k for k, _, _ in h.api.patches] == ["apps/first"] and len(h.api.reads) == 1


def test_a_worker_thread_patches_and_stops_on_shutdown():
    h = Harness(clock=FakeClock(START))
    stop = threading.Event()
    h.controller.start(stop)
    thread = next(thread for thread in threading.enumerate() if thread.name == "backfill-worker")
    h.add_pod(raw_pod("threaded"))
    for _ in range(200):
        if h.api.patches:
            break
        threading.Event().wait(0.01)
    assert [key for key, _, _ in h.api.patches] == ["apps/threaded"]
    stop.set()
    h.controller.stop()
    thread.join(5)
    assert not thread.is_alive()


def test_a_backfill_whose_worker_hangs_is_stuck_and_fails_healthz_and_an_idle_one_is_not():
    h = Harness(clock=FakeClock(START))
    bound = h.controller.heartbeat.bound  # one token at 10/s, a read and a patch at their timeouts, and slack
    assert bound == pytest.approx(0.1 + 2 * 20 + 1 + 10)
    entered, release = threading.Event(), threading.Event()
    reading = h.api.read_pod

    def hanging_read(namespace: str, name: str) -> dict[str, Any] | None:
        entered.set()
        release.wait(10)
        return reading(namespace, name)

    stop = threading.Event()
    h.controller.start(stop)
    try:
        for _ in range(3):  # idle for three bounds: each idle wait ends with a stamp
            h.clock.advance(bound)
            wait_until(lambda: h.controller.stuck() is None, "the idle worker's stamp")
        assert healthz([h.controller]) == (200, "ok")

        h.api.read_pod = hanging_read
        h.add_pod(raw_pod("hung"))
        assert entered.wait(5)
        h.clock.advance(bound + 1)
        reason = h.controller.stuck() or ""
        assert reason.startswith(
            "toleration backfill: worker backfill-worker has neither finished a sync nor waited idle in"
        )
        assert healthz([h.controller]) == (500, reason)
    finally:
        release.set()
        stop.set()
        h.controller.stop()
    wait_until(lambda: h.api.patches, "the hung sync to finish")


# --- flags --------------------------------------------------------------------------------------------------


CONTROLLER_SELECTION = {
    "on by default": ([], True),
    "the flag turns it off": (["--backfill-default-tolerations=false"], False),
    "--controllers without it turns it off": (["--controllers=taint-eviction-controller"], False),
    "--controllers can disable it by name": (["--controllers=*,-toleration-backfill"], False),
    "--controllers can run it alone": (["--controllers=toleration-backfill"], True),
}


@pytest.mark.parametrize(("argv", "enabled"), CONTROLLER_SELECTION.values(), ids=CONTROLLER_SELECTION.keys())
def test_the_backfill_runs_when_the_flag_and_controllers_select_it(argv, enabled):
    options = parse_options(argv)
    assert options.backfill.enabled is enabled
    assert ("toleration-backfill" in options.controllers) is enabled


def test_turning_off_the_only_selected_controller_is_an_error():
    with pytest.raises(OptionsError, match="no controller left"):
        parse_options(["--controllers=toleration-backfill", "--backfill-default-tolerations=false"])
