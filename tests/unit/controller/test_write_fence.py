"""The write fence at the controller's API edges (kube/fence.py; the fence's own rule: tests/unit/kube/test_fence.py).

Each edge that acts on a decision (taints, node conditions, node labels, pod NotReady, the eviction's
DisruptionTarget patch and DELETE, the backfill patch) makes no API call while the fence is closed,
and raises WriteFenced, which its callers retry as they retry a failure; the eviction manager and the
backfill retry a fenced write without counting it as an API failure and without counting it done.
The first Eviction asks which policy version the server serves before its fence check, so only the
POST follows the check. The runner's fence counts refusals in taintkeeper_fenced_writes_total and is
open without leader election; its event recorders drop an event queued while leading if the fence has
closed by the time it is to be posted (taintkeeper_events_dropped_total).
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import pytest
import urllib3
from kubernetes import client
from kubernetes.client import rest
from prometheus_client import REGISTRY

from controller.backfill import metrics as backfill_metrics
from controller.backfill.api import KubeBackfillApi
from controller.clock import FakeClock
from controller.nodelifecycle.api import KubeNodeLifecycleApi
from controller.objects import NodeView, node_view
from controller.options import parse_options
from controller.runner import assemble, write_fence
from controller.tainteviction.api import KubeEvictionActions
from controller.tainteviction.manager import TaintEvictionManager
from controller.workqueue import WorkQueue
from kube.fence import WriteFence, WriteFenced
from tests.support.builders import node, pod, taint
from tests.support.eviction import drain_evictions
from tests.support.fakes import MemoryStore, RecordingEvents
from tests.support.responses import http_response
from tests.unit.controller.backfill.test_backfill import Harness as BackfillHarness
from tests.unit.controller.backfill.test_backfill import raw_pod

RENEW_DEADLINE = 10.0
NODE_NAME = "node1"
NOT_READY_NO_SCHEDULE = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
UNKNOWN_READY = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}
WRITES = ("create", "replace", "patch", "delete")


class RecordingCore:
    """Every CoreV1Api call an edge makes, by method name; reads answer with one node or pod."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def read_node(self, name: str, **_kwargs: Any) -> object:
        self.calls.append("read_node")
        return http_response(json.dumps(node_json()).encode())

    def __getattr__(self, method: str) -> Callable[..., object]:
        def call(*_args: Any, **_kwargs: Any) -> object:
            self.calls.append(method)
            return http_response(b"{}")

        return call

    @property
    def writes(self) -> list[str]:
        return [call for call in self.calls if call.startswith(WRITES)]


def node_json() -> dict[str, Any]:
    return {
        "metadata": {"name": NODE_NAME, "uid": "uid-node1", "resourceVersion": "7"},
        "spec": {"taints": [taint()]},
        # Unknown, as a node the lifecycle monitor tainted unreachable is
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]},
    }


def cached_node() -> MemoryStore[NodeView]:
    cache: MemoryStore[NodeView] = MemoryStore()
    cache.items[NODE_NAME] = node_view(node_json())
    return cache


def fence(clock: FakeClock, renewed_ago: float | None) -> WriteFence:
    """A fence on `clock` whose last renewal was `renewed_ago` seconds ago (None: never)."""
    made = WriteFence(RENEW_DEADLINE, monotonic=clock.now)
    if renewed_ago is not None:
        made.renewed(clock.now() - renewed_ago)
    return made


# --- each edge ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EdgeCase:
    write: Callable[[client.ApiClient, WriteFence], object]  # the edge's write, as its caller makes it
    written: object  # what it returns when the write was made
    writes: list[str]  # the API writes it makes then


EDGE_CASES = {
    "taints (swap_taints)": EdgeCase(
        lambda api, f: KubeNodeLifecycleApi(api, f, cache=cached_node()).swap_taints(
            NODE_NAME, [NOT_READY_NO_SCHEDULE], []
        ),
        True,
        ["patch_node"],
    ),
    "node conditions (post_conditions)": EdgeCase(
        lambda api, f: KubeNodeLifecycleApi(api, f).post_conditions(node_view(node_json()), [UNKNOWN_READY]),
        True,
        ["patch_node_status"],
    ),
    "beta OS/arch labels (set_labels)": EdgeCase(
        lambda api, f: KubeNodeLifecycleApi(api, f).set_labels(
            node_view(node_json()), {"beta.kubernetes.io/os": "linux"}
        ),
        True,
        ["patch_node"],
    ),
    "pod NotReady (mark_pod_not_ready)": EdgeCase(
        lambda api, f: KubeNodeLifecycleApi(api, f).mark_pod_not_ready(pod("p")),
        True,
        ["patch_namespaced_pod_status"],
    ),
    "DisruptionTarget and DELETE (evict)": EdgeCase(
        lambda api, f: KubeEvictionActions(api, f).evict(pod("p")),
        True,
        ["patch_namespaced_pod_status", "delete_namespaced_pod"],
    ),
    "backfill patch (patch_pod)": EdgeCase(
        lambda api, f: KubeBackfillApi(api, f).patch_pod("apps", "p", [{"op": "add", "path": "/x", "value": 1}]),
        True,
        ["patch_namespaced_pod"],
    ),
}


@pytest.fixture
def core(monkeypatch: pytest.MonkeyPatch) -> RecordingCore:
    recording = RecordingCore()
    monkeypatch.setattr(client, "CoreV1Api", lambda _api_client: recording)
    return recording


@pytest.mark.parametrize("case", EDGE_CASES.values(), ids=EDGE_CASES.keys())
def test_an_open_fence_lets_the_write_through(case: EdgeCase, core: RecordingCore) -> None:
    clock = FakeClock()
    assert case.write(client.ApiClient(client.Configuration()), fence(clock, renewed_ago=2)) == case.written
    assert core.writes == case.writes


@pytest.mark.parametrize("renewed_ago", [RENEW_DEADLINE + 0.5, None], ids=["renewal too old", "never renewed"])
@pytest.mark.parametrize("case", EDGE_CASES.values(), ids=EDGE_CASES.keys())
def test_a_closed_fence_makes_no_api_call(case: EdgeCase, renewed_ago: float | None, core: RecordingCore) -> None:
    clock = FakeClock()
    with pytest.raises(WriteFenced):
        case.write(client.ApiClient(client.Configuration()), fence(clock, renewed_ago))
    assert core.calls == []


def test_an_eviction_whose_patch_outlasts_the_deadline_sends_no_delete(core: RecordingCore) -> None:
    clock = FakeClock()
    write_fence = fence(clock, renewed_ago=2)

    def slow_patch(*_args: Any, **_kwargs: Any) -> object:
        core.calls.append("patch_namespaced_pod_status")
        clock.advance(RENEW_DEADLINE)  # the patch took its whole read timeout, and the renewals failed meanwhile
        return http_response(b"{}")

    core.patch_namespaced_pod_status = slow_patch  # type: ignore[attr-defined]  # __getattr__ answers the rest
    with pytest.raises(WriteFenced):
        KubeEvictionActions(client.ApiClient(client.Configuration()), write_fence).evict(pod("p"))
    assert core.writes == ["patch_namespaced_pod_status"]


# --- the Eviction: nothing but the POST after the fence check ------------------------------------------------

POLICY_GROUP = {"kind": "APIGroup", "name": "policy", "versions": [{"groupVersion": "policy/v1", "version": "v1"}]}


class RecordingFence(WriteFence):
    """An open fence that records each check in `calls`, among the requests it guards."""

    def __init__(self, clock: FakeClock, calls: list[str]) -> None:
        super().__init__(RENEW_DEADLINE, monotonic=clock.now)
        self.renewed(clock.now())
        self.calls = calls

    def permits(self, action: str, target: str) -> bool:
        self.calls.append(f"fence {action}")
        return super().permits(action, target)


def recording_requests(calls: list[str]) -> client.ApiClient:
    """An ApiClient whose raw requests (kube/request.py) are recorded in `calls` as "METHOD path" and answered
    200: the policy group's discovery document for GET /apis/policy, else {}."""
    api = client.ApiClient(client.Configuration())

    def request(
        method: str,
        url: str,
        headers: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> rest.RESTResponse:
        path = urlsplit(url).path
        calls.append(f"{method} {path}")
        body = POLICY_GROUP if path == "/apis/policy" else {}
        return rest.RESTResponse(
            urllib3.HTTPResponse(body=json.dumps(body).encode(), status=200, preload_content=False)
        )

    api.rest_client.request = request  # type: ignore[method-assign]
    return api


def test_the_first_eviction_sends_nothing_but_its_post_after_the_fence_check(core: RecordingCore) -> None:
    """The served policy version is asked before the check: a discovery GET between the check and the POST
    (which could take its whole timeout) would let the POST go out after the renew deadline."""
    calls = core.calls  # the CoreV1Api calls (the DisruptionTarget patch) in the same list
    actions = KubeEvictionActions(recording_requests(calls), RecordingFence(FakeClock(), calls))
    eviction = "POST /api/v1/namespaces/default/pods/p/eviction"

    assert actions.request_eviction(pod("p")) is True
    assert calls == [
        "GET /apis/policy",
        "fence pod-eviction",
        eviction,
        "fence pod-disruption-target",
        "patch_namespaced_pod_status",
    ]
    calls.clear()
    assert actions.request_eviction(pod("p")) is True  # the version is asked once
    assert calls == ["fence pod-eviction", eviction, "fence pod-disruption-target", "patch_namespaced_pod_status"]


# --- the eviction manager and the backfill retry it, and count it neither done nor failed -----------------


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def sample_of(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_fenced_eviction_is_retried_not_done_and_not_an_api_failure(core: RecordingCore) -> None:
    clock = FakeClock()
    write_fence = fence(clock, renewed_ago=RENEW_DEADLINE + 1)  # woke from a pause, not renewed yet
    pods: MemoryStore = MemoryStore()
    manager = TaintEvictionManager(
        pods,
        KubeEvictionActions(client.ApiClient(client.Configuration()), write_fence),
        RecordingEvents(),
        clock=clock,
        queue=WorkQueue(clock),
    )
    manager.activate()
    failures = sample("taintkeeper_pod_deletion_failures_total")
    deletions = sample("taint_eviction_controller_pod_deletions_total")
    drain = functools.partial(drain_evictions, manager)

    manager.on_node_change(None, node(NODE_NAME, taint()))
    pods.items["default/p"] = pod("p")
    manager.on_pod_change(None, pods.items["default/p"])
    clock.run_for(5, 0.25, drain)

    assert core.writes == []
    assert manager.scheduled_at("default/p") is not None  # still due: not done
    assert sample("taintkeeper_pod_deletion_failures_total") == failures
    assert sample("taint_eviction_controller_pod_deletions_total") == deletions

    write_fence.renewed(clock.now())  # the elector renewed: the retry goes through
    clock.run_for(35, 0.25, drain)  # the backoff doubles up to 30 s
    assert core.writes == ["patch_namespaced_pod_status", "delete_namespaced_pod"]
    assert manager.scheduled_at("default/p") is None
    assert sample("taint_eviction_controller_pod_deletions_total") == deletions + 1


def test_a_fenced_backfill_is_retried_not_done_and_not_an_api_failure() -> None:
    h = BackfillHarness()
    write_fence = fence(h.clock, renewed_ago=None)
    real_patch = h.api.patch_pod

    def fenced_patch(
        namespace: str, name: str, ops: Any
    ) -> Literal[True] | None:  # as KubeBackfillApi.patch_pod asks first
        write_fence.require("pod-tolerations", f"pod {namespace}/{name}")
        return real_patch(namespace, name, ops)

    h.api.patch_pod = fenced_patch  # type: ignore[method-assign]
    failures = backfill_metrics.BACKFILL_FAILURES._value.get()
    h.add_pod(raw_pod("web"))
    assert h.drain() == ["retry"]
    assert h.api.patches == []
    assert backfill_metrics.BACKFILL_FAILURES._value.get() == failures

    write_fence.renewed(h.clock.now())
    h.clock.advance(1)
    assert h.drain() == ["patched"]


# --- the runner's fence ------------------------------------------------------------------------------


def test_without_leader_election_the_runners_fence_is_always_open() -> None:
    assert write_fence(parse_options(["--leader-elect=false"])).permits("node-taints", "node node1")


def test_the_runners_fence_counts_each_refused_write_by_action() -> None:
    runner_fence = write_fence(parse_options([]))  # leader election on: closed until the first acquire
    before = REGISTRY.get_sample_value("taintkeeper_fenced_writes_total", {"action": "pod-deletion"}) or 0.0
    assert not runner_fence.permits("pod-deletion", "pod default/p")
    assert not runner_fence.permits("pod-deletion", "pod default/q")
    assert REGISTRY.get_sample_value("taintkeeper_fenced_writes_total", {"action": "pod-deletion"}) == before + 2


def test_an_event_queued_while_leading_is_not_posted_once_the_fence_has_closed(core: RecordingCore) -> None:
    """Events are posted from the recorder's own thread, later than they were queued: the fence is asked then.
    A leader's "Marking for deletion" queued just before it lost the Lease never appears under its name."""
    clock = FakeClock()
    leading = fence(clock, renewed_ago=0)
    recorder = assemble(client.ApiClient(client.Configuration()), parse_options([]), leading).recorders[1]
    assert recorder.component == "taint-eviction-controller"
    drain = threading.Event()
    drain.set()  # `run` posts what is queued, then returns
    dropped = sample_of("taintkeeper_events_dropped_total", reason="fenced")

    recorder.pod_event(pod("p"), "TaintManagerEviction", "Marking for deletion Pod default/p")
    clock.advance(RENEW_DEADLINE)  # no renewal since: the replica may no longer lead
    recorder.run(drain)
    assert core.calls == []
    assert sample_of("taintkeeper_events_dropped_total", reason="fenced") == dropped + 1

    leading.renewed(clock.now())  # it leads again: what it queues now is posted
    recorder.pod_event(pod("q"), "TaintManagerEviction", "Marking for deletion Pod default/q")
    recorder.run(drain)
    assert core.calls == ["create_namespaced_event"]


def test_every_component_writes_through_the_runners_fence() -> None:
    """assemble gives the one fence to every API edge and event recorder: with it closed, no component writes."""
    closed = WriteFence(RENEW_DEADLINE)
    api = client.ApiClient(client.Configuration())
    assembly = assemble(api, parse_options([]), closed)
    monitor, eviction, backfill, out_of_service = assembly.components
    edges = [monitor._api, eviction._actions, backfill._api, out_of_service._api]  # type: ignore[attr-defined]
    assert [edge._fence for edge in edges] == [closed, closed, closed, closed]
    assert [recorder._fence for recorder in assembly.recorders] == [closed, closed, closed, closed]
