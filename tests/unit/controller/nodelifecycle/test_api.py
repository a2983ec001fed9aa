"""Taint writes against the informer's cached node (api.py's KubeNodeLifecycleApi.swap_taints), on a fake API.

The same cases as tests/integration/test_node_taint_writes.py, without an apiserver: the first attempt
writes against the cached view (one PATCH, no GET); a stale view costs a 409 and a fresh read; a view
that sees nothing to change is read live before the write is skipped; without a cache the node is
read live; a node gone from the API is nothing to write.

Label writes (set_labels): one strategic-merge PATCH of the labels with the cached resourceVersion,
none while the write fence is closed, and none in a dry run (which shows the node as labelled).

Pods in a dry run (DryRunPods): a pod the monitor would have marked NotReady reads NotReady until the real
pod changes, and what it keeps for that stays bounded by the pods still unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from controller.clock import FakeClock
from controller.nodelifecycle import api as api_module
from controller.nodelifecycle.api import DryRunNodeLifecycleApi, DryRunPods, KubeNodeLifecycleApi
from controller.nodelifecycle.decision import TAINT_WRITE_ATTEMPTS, labels_to_reconcile
from controller.objects import NodeView, PodView, node_view
from kube.client import STRATEGIC_MERGE
from kube.fence import WriteFence, WriteFenced
from tests.support.fakes import MemoryStore
from tests.support.responses import http_response

NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
OPERATOR = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}
NAME = "node1"


@dataclass
class FakeCore:
    """The two CoreV1Api calls a taint write makes, against one node held as JSON; a PATCH whose
    resourceVersion is not the node's answers 409, as the apiserver does."""

    taints: list[dict[str, Any]] | None
    version: int = 1
    reads: int = 0
    patches: list[dict[str, Any]] = field(default_factory=list)

    def node(self) -> dict[str, Any]:
        if self.taints is None:
            raise ApiException(status=404, reason="Not Found")
        return {
            "metadata": {"name": NAME, "uid": "uid-1", "resourceVersion": str(self.version)},
            "spec": {"taints": list(self.taints)},
        }

    def read_node(self, name: str, **_kwargs: Any) -> object:
        self.reads += 1
        return http_response(json.dumps(self.node()).encode())

    def patch_node(self, name: str, body: Mapping[str, Any], **_kwargs: Any) -> object:
        self.node()  # 404 when gone
        self.patches.append(dict(body))
        if body["metadata"]["resourceVersion"] != str(self.version):
            raise ApiException(status=409, reason="Conflict")
        self.taints = list(body["spec"]["taints"])
        self.version += 1
        return http_response(b"{}")

    def someone_else_writes(self, taints: list[dict[str, Any]]) -> None:
        self.taints = taints
        self.version += 1


@dataclass(frozen=True)
class Case:
    name: str
    start_taints: list[dict[str, Any]]
    cached: bool
    meanwhile: list[dict[str, Any]] | None  # the node's taints after the cache was filled, if changed
    add: list[dict[str, Any]]
    remove: list[dict[str, Any]]
    want_taints: list[dict[str, Any]]
    want_reads: int
    want_patches: int


CASES = [
    Case(
        "a fresh cached node is written with one PATCH and no GET",
        [NOT_READY],
        cached=True,
        meanwhile=None,
        add=[],
        remove=[NOT_READY],
        want_taints=[],
        want_reads=0,
        want_patches=1,
    ),
    Case(
        "a stale cached node conflicts and the write is redone on a fresh read, keeping the operator's taint",
        [NOT_READY],
        cached=True,
        meanwhile=[NOT_READY, OPERATOR],
        add=[],
        remove=[NOT_READY],
        want_taints=[OPERATOR],
        want_reads=1,
        want_patches=2,
    ),
    Case(
        "a cached node that needs no write is read live before the write is skipped",
        [],
        cached=True,
        meanwhile=[NOT_READY],
        add=[],
        remove=[NOT_READY],
        want_taints=[],
        want_reads=1,
        want_patches=1,
    ),
    Case(
        "a cached node and the live one both need no write: nothing is written",
        [],
        cached=True,
        meanwhile=None,
        add=[],
        remove=[NOT_READY],
        want_taints=[],
        want_reads=1,
        want_patches=0,
    ),
    Case(
        "without a cached node the node is read live",
        [NOT_READY],
        cached=False,
        meanwhile=None,
        add=[],
        remove=[NOT_READY],
        want_taints=[],
        want_reads=1,
        want_patches=1,
    ),
]


def edge(monkeypatch: pytest.MonkeyPatch, core: FakeCore, cache: MemoryStore[NodeView] | None) -> KubeNodeLifecycleApi:
    monkeypatch.setattr(api_module.client, "CoreV1Api", lambda _api_client: core)
    return KubeNodeLifecycleApi(
        client.ApiClient(client.Configuration()), WriteFence.without_lease(), clock=FakeClock(), cache=cache
    )


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_taint_write_against_the_cache(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    core = FakeCore(list(case.start_taints))
    cache: MemoryStore[NodeView] = MemoryStore()
    if case.cached:
        cache.items[NAME] = node_view(core.node())
    if case.meanwhile is not None:
        core.someone_else_writes(list(case.meanwhile))

    assert edge(monkeypatch, core, cache).swap_taints(NAME, case.add, case.remove)

    assert core.taints == case.want_taints
    assert (core.reads, len(core.patches)) == (case.want_reads, case.want_patches)


def test_a_node_the_api_no_longer_has_is_nothing_to_write(monkeypatch: pytest.MonkeyPatch) -> None:
    core = FakeCore([NOT_READY])
    cache: MemoryStore[NodeView] = MemoryStore()
    cache.items[NAME] = node_view(core.node())
    core.taints = None  # deleted

    assert edge(monkeypatch, core, cache).swap_taints(NAME, [], [NOT_READY]) is None


def test_conflicts_on_every_attempt_give_up_after_the_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    core = FakeCore([NOT_READY])
    real_patch = core.patch_node

    def always_behind(name: str, body: Mapping[str, Any], **kwargs: Any) -> object:
        core.someone_else_writes(list(core.taints or []))
        return real_patch(name, body, **kwargs)

    monkeypatch.setattr(core, "patch_node", always_behind)
    with pytest.raises(ApiException) as failed:
        edge(monkeypatch, core, None).swap_taints(NAME, [], [NOT_READY])
    assert failed.value.status == 409
    assert len(core.patches) == TAINT_WRITE_ATTEMPTS


# --- label writes (set_labels) ----------------------------------------------------------------------

GA_LABELS = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
BETA_LABELS = {"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}


def labelled_node(version: str = "7") -> NodeView:
    return node_view({"metadata": {"name": NAME, "uid": "uid-1", "resourceVersion": version, "labels": GA_LABELS}})


@dataclass
class LabelCore:
    """patch_node, recorded with its body and content type; answers `status` when one is set."""

    status: int | None = None
    patches: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)

    def patch_node(self, name: str, body: Mapping[str, Any], **kwargs: Any) -> object:
        self.patches.append((name, dict(body), kwargs.get("_content_type", "")))
        if self.status is not None:
            raise ApiException(status=self.status, reason="answered")
        return http_response(b"{}")

    def __getattr__(self, method: str) -> Any:
        raise AssertionError(f"a label write called {method}")


def closed_fence() -> WriteFence:
    return WriteFence(10.0)  # never renewed: this replica does not hold the lease


@dataclass(frozen=True)
class LabelCase:
    name: str
    fence: WriteFence
    status: int | None  # what the apiserver answers the PATCH with, None: 200
    answer: object  # what set_labels returns (True: written, None: the node is gone), or the exception it raises
    patched: bool  # whether a PATCH was sent


LABEL_CASES = [
    LabelCase(
        "one PATCH sets the labels against the cached resourceVersion",
        WriteFence.without_lease(),
        None,
        answer=True,
        patched=True,
    ),
    LabelCase(
        "a closed write fence sends nothing and fails, so the node is retried",
        closed_fence(),
        None,
        answer=WriteFenced,
        patched=False,
    ),
    LabelCase(
        "a node changed since it was cached (409) fails, so it is reconciled again",
        WriteFence.without_lease(),
        409,
        answer=ApiException,
        patched=True,
    ),
    LabelCase("a node gone (404) is nothing to label", WriteFence.without_lease(), 404, answer=None, patched=True),
    LabelCase(
        "any other API error fails, so the node is retried",
        WriteFence.without_lease(),
        500,
        answer=ApiException,
        patched=True,
    ),
]


@pytest.mark.parametrize("case", LABEL_CASES, ids=[case.name for case in LABEL_CASES])
def test_label_write(case: LabelCase, monkeypatch: pytest.MonkeyPatch) -> None:
    core = LabelCore(status=case.status)
    monkeypatch.setattr(api_module.client, "CoreV1Api", lambda _api_client: core)
    edge = KubeNodeLifecycleApi(client.ApiClient(client.Configuration()), case.fence)

    if isinstance(case.answer, type):
        with pytest.raises(case.answer):
            edge.set_labels(labelled_node(version="7"), BETA_LABELS)
    else:
        assert edge.set_labels(labelled_node(version="7"), BETA_LABELS) is case.answer

    want = [(NAME, {"metadata": {"resourceVersion": "7", "labels": BETA_LABELS}}, STRATEGIC_MERGE)]
    assert core.patches == (want if case.patched else [])


def test_a_dry_run_sends_no_label_write_and_shows_the_node_labelled(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    core = LabelCore()
    monkeypatch.setattr(api_module.client, "CoreV1Api", lambda _api_client: core)
    nodes: MemoryStore[NodeView] = MemoryStore()
    nodes.items[NAME] = labelled_node()
    dry = DryRunNodeLifecycleApi(
        KubeNodeLifecycleApi(client.ApiClient(client.Configuration()), WriteFence.without_lease()), nodes
    )

    with caplog.at_level("INFO", logger="taintkeeper.nodelifecycle"):
        assert dry.set_labels(labelled_node(), BETA_LABELS)

    assert core.patches == []
    assert [r.getMessage() for r in caplog.records] == ["dry run: would update labels"]
    shown = dry.get(NAME)
    assert shown is not None and shown.label_map == GA_LABELS | BETA_LABELS
    assert labels_to_reconcile(shown.label_map) == {}  # so the next update of the node announces nothing


# (what the store holds after the dry run's label write, whether the node is still shown labelled)
NODE_OVERLAY_ROWS = [
    pytest.param(labelled_node("7"), True, id="a new view of the same resourceVersion still shows the write"),
    pytest.param(labelled_node("8"), False, id="a node changed since (a new resourceVersion) is shown as it is"),
]


@pytest.mark.parametrize(("real", "shown_labelled"), NODE_OVERLAY_ROWS)
def test_a_dry_run_shows_the_node_written_until_the_real_node_changes(
    real: NodeView, shown_labelled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api_module.client, "CoreV1Api", lambda _api_client: LabelCore())
    nodes: MemoryStore[NodeView] = MemoryStore()
    nodes.items[NAME] = labelled_node("7")
    dry = DryRunNodeLifecycleApi(
        KubeNodeLifecycleApi(client.ApiClient(client.Configuration()), WriteFence.without_lease()), nodes
    )
    dry.set_labels(nodes.items[NAME], BETA_LABELS)

    nodes.items[NAME] = real
    shown = dry.get(NAME)
    assert shown is not None and shown.label_map == (GA_LABELS | BETA_LABELS if shown_labelled else GA_LABELS)
    assert [n.label_map for n in dry.list()] == [shown.label_map]


def _pod(name: str, generation: int = 1) -> PodView:
    return PodView("default", name, f"uid-{name}", NAME, (), 0.0, False, "True", generation=generation)


def test_a_dry_run_shows_a_pod_it_would_have_marked_not_ready_until_the_real_pod_changes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(api_module.client, "CoreV1Api", lambda _api_client: object())  # any call would fail
    pods: MemoryStore[PodView] = MemoryStore()
    pods.items["default/p"] = _pod("p")
    overlay = DryRunPods(pods)
    dry = DryRunNodeLifecycleApi(
        KubeNodeLifecycleApi(client.ApiClient(client.Configuration()), WriteFence.without_lease()),
        MemoryStore(),
        overlay,
    )

    with caplog.at_level("INFO", logger="taintkeeper.nodelifecycle"):
        dry.mark_pod_not_ready(pods.items["default/p"])

    assert [r.getMessage() for r in caplog.records] == ["dry run: would mark pod NotReady"]
    assert pods.items["default/p"].ready == "True"  # nothing written
    assert [p.ready for p in overlay.by_index(NAME)] == ["False"]
    shown = overlay.get("default/p")
    assert shown is not None and shown.ready == "False"
    pods.items["default/p"] = _pod("p", generation=2)  # the real pod moved on: it wins
    assert [p.ready for p in overlay.by_index(NAME)] == ["True"]


def test_a_dry_runs_pod_overlay_forgets_pods_changed_or_deleted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DryRunPods, "SWEEP_FLOOR", 4)
    pods: MemoryStore[PodView] = MemoryStore()
    overlay = DryRunPods(pods)
    for i in range(20):  # each marked, then deleted before it is read again
        pods.items[f"default/p{i}"] = _pod(f"p{i}")
        overlay.would_mark(pods.items[f"default/p{i}"])
        del pods.items[f"default/p{i}"]
    assert len(overlay._recorded) <= 4 + 1
    pods.items["default/q"] = _pod("q")
    overlay.would_mark(_pod("q"))  # an equal view, but not the store's: still the pod the store holds
    shown = overlay.get("default/q")
    assert shown is not None and shown.ready == "False"
