"""webhook.namespaces: a namespace's defaults from its annotations and labels, and the watched cache
behind them (against a scripted fake API: never blocking admission, started once per process)."""

from __future__ import annotations

import functools
import json
import logging
import queue
import threading
import time
from typing import Any

import pytest
import urllib3

from hack.wait import wait_for as _wait_for
from shared.defaults import MAX_TOLERATION_SECONDS, DefaultSeconds
from tests.support.builders import kubeconfig_file
from tests.support.responses import http_response
from webhook import namespaces
from webhook.admission import NamespaceDefaults
from webhook.namespaces import NamespaceCache, client_source, namespace_view, resolve
from webhook.settings import WebhookSettings

NR_ANNOTATION = "taintkeeper.io/not-ready-toleration-seconds"
UR_ANNOTATION = "taintkeeper.io/unreachable-toleration-seconds"
SKIP = "taintkeeper.io/skip"
CLUSTER = DefaultSeconds(301, 302)


# -- resolving one namespace (pure) ----------------------------------------------------------------

ANNOTATION_CASES = [
    ("no annotations: the cluster defaults", {}, (301, 302), []),
    ("the not-ready annotation overrides only not-ready", {NR_ANNOTATION: "30"}, (30, 302), []),
    ("the unreachable annotation overrides only unreachable", {UR_ANNOTATION: "45"}, (301, 45), []),
    ("both annotations override both", {NR_ANNOTATION: "30", UR_ANNOTATION: "45"}, (30, 45), []),
    ("zero is a valid value", {NR_ANNOTATION: "0"}, (0, 302), []),
    ("surrounding spaces are allowed", {UR_ANNOTATION: " 45 "}, (301, 45), []),
    ("unrelated annotations are ignored", {"example.com/x": "y"}, (301, 302), []),
    ("a word is ignored with a warning", {NR_ANNOTATION: "soon"}, (301, 302), [NR_ANNOTATION]),
    ("a negative number is ignored with a warning", {UR_ANNOTATION: "-5"}, (301, 302), [UR_ANNOTATION]),
    ("a fraction is ignored with a warning", {NR_ANNOTATION: "1.5"}, (301, 302), [NR_ANNOTATION]),
    ("an empty value is ignored with a warning", {NR_ANNOTATION: ""}, (301, 302), [NR_ANNOTATION]),
    (
        "a number beyond 2^53-1 is ignored with a warning",
        {NR_ANNOTATION: str(MAX_TOLERATION_SECONDS + 1)},
        (301, 302),
        [NR_ANNOTATION],
    ),
    (
        "the largest number a patch carries exactly is kept",
        {NR_ANNOTATION: str(MAX_TOLERATION_SECONDS)},
        (MAX_TOLERATION_SECONDS, 302),
        [],
    ),
    (
        "one invalid key does not cancel the other",
        {NR_ANNOTATION: "x", UR_ANNOTATION: "45"},
        (301, 45),
        [NR_ANNOTATION],
    ),
    (
        "both invalid: two warnings",
        {NR_ANNOTATION: "x", UR_ANNOTATION: "y"},
        (301, 302),
        [NR_ANNOTATION, UR_ANNOTATION],
    ),
]


@pytest.mark.parametrize(
    ("annotations", "seconds", "warned_about"), [c[1:] for c in ANNOTATION_CASES], ids=[c[0] for c in ANNOTATION_CASES]
)
def test_namespace_annotations_override_the_cluster_defaults_per_key(annotations, seconds, warned_about):
    resolved = resolve({}, annotations, CLUSTER)
    assert (resolved.seconds.not_ready, resolved.seconds.unreachable) == seconds
    assert len(resolved.warnings) == len(warned_about)
    for warning, annotation in zip(resolved.warnings, warned_about, strict=True):
        assert annotation in warning
        assert "using the cluster default" in warning


def test_a_warning_names_the_value_and_the_default_used():
    (warning,) = resolve({}, {UR_ANNOTATION: "soon"}, CLUSTER).warnings
    assert "'soon'" in warning and "302" in warning


def test_a_huge_annotation_value_is_cut_in_the_warning():
    (warning,) = resolve({}, {NR_ANNOTATION: "9" * 10 + "x" * 100_000}, CLUSTER).warnings
    assert len(warning) < 300
    assert "9999999999" in warning


SKIP_CASES = [
    ("labelled skip=true", {SKIP: "true"}, True),
    ("labelled skip=false", {SKIP: "false"}, False),
    ("the value is exact: TRUE is not true", {SKIP: "TRUE"}, False),
    ("not labelled", {"team": "a"}, False),
]


@pytest.mark.parametrize(("labels", "skipped"), [c[1:] for c in SKIP_CASES], ids=[c[0] for c in SKIP_CASES])
def test_the_namespace_skip_label(labels, skipped):
    assert resolve(labels, {}, CLUSTER).skipped is skipped


def namespace(name, labels=None, annotations=None, rv="1"):
    metadata: dict[str, Any] = {"name": name, "resourceVersion": rv, "uid": f"uid-{name}"}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata,
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def test_the_view_keeps_only_the_skip_label_and_the_two_annotations():
    view = namespace_view(
        namespace("team-a", labels={SKIP: "true", "team": "a"}, annotations={NR_ANNOTATION: "30", "other": "x" * 1000}),
        CLUSTER,
    )
    assert view.key == "team-a"
    assert (view.skip_label, view.not_ready_annotation, view.unreachable_annotation) == ("true", "30", None)
    assert view.defaults == NamespaceDefaults(DefaultSeconds(30, 302), (), True)
    assert namespace_view(namespace("team-a"), CLUSTER).defaults == NamespaceDefaults(CLUSTER)


# -- the watched cache, against a fake API ---------------------------------------------------------


class FakeNamespaces:
    """A generated `list_namespace` stand-in: LIST answers `items`; a WATCH returns the events put in
    `events` (or ends empty after a while, as a server's watch timeout does)."""

    def __init__(self, *items: dict) -> None:
        self.items = list(items)
        self.events: queue.Queue[dict] = queue.Queue()
        self.lists = 0

    def __call__(self, **kwargs: Any) -> urllib3.HTTPResponse:
        if not kwargs.get("watch"):
            self.lists += 1
            return http_response(
                json.dumps(
                    {"kind": "NamespaceList", "metadata": {"resourceVersion": "1"}, "items": self.items}
                ).encode()
            )
        try:
            event = self.events.get(timeout=1.2)
        except queue.Empty:
            return http_response(b"")
        return http_response(json.dumps(event).encode() + b"\n")


wait_for = functools.partial(_wait_for, interval=0.01)


@pytest.fixture
def caches():
    made: list[NamespaceCache] = []
    yield made
    for cache in made:
        cache.stop()


def make_cache(caches, connect, **options):
    cache = NamespaceCache(CLUSTER, connect, "a fake API", **options)
    caches.append(cache)
    return cache


def test_a_synced_cache_answers_each_namespace_from_its_annotations_and_labels(caches):
    api = FakeNamespaces(
        namespace("annotated", annotations={NR_ANNOTATION: "30", UR_ANNOTATION: "45"}),
        namespace("opted-out", labels={SKIP: "true"}),
        namespace("plain"),
    )
    cache = make_cache(caches, lambda: api)
    assert cache.lookup("annotated") is None  # not started: nothing known
    cache.ensure_started()
    wait_for(lambda: cache.synced, 10, "the cache synced")
    assert cache.lookup("annotated") == NamespaceDefaults(DefaultSeconds(30, 45))
    assert cache.lookup("opted-out").skipped is True
    assert cache.lookup("plain") == NamespaceDefaults(CLUSTER)
    assert cache.lookup("never-seen") is None


def test_an_annotation_change_is_picked_up_from_the_watch(caches):
    api = FakeNamespaces(namespace("team-a", annotations={NR_ANNOTATION: "30"}))
    cache = make_cache(caches, lambda: api)
    cache.ensure_started()
    wait_for(lambda: cache.synced, 10, "the cache synced")
    api.events.put({"type": "MODIFIED", "object": namespace("team-a", annotations={NR_ANNOTATION: "60"}, rv="2")})
    wait_for(lambda: cache.lookup("team-a").seconds.not_ready == 60, 10, "team-a's new annotation")
    api.events.put({"type": "DELETED", "object": namespace("team-a", rv="3")})
    wait_for(lambda: cache.lookup("team-a") is None, 10, "team-a forgotten")


def test_an_unreachable_api_leaves_the_cache_unsynced_and_lookups_immediate(caches):
    attempts = threading.Event()

    def refused(**kwargs: Any) -> Any:
        attempts.set()
        raise urllib3.exceptions.MaxRetryError(None, "/api/v1/namespaces", ConnectionRefusedError(111, "refused"))  # type: ignore[arg-type]  # no pool here

    cache = make_cache(caches, lambda: refused)
    cache.ensure_started()
    assert attempts.wait(5)
    started = time.perf_counter()
    for _ in range(1000):
        assert cache.lookup("team-a") is None
    assert time.perf_counter() - started < 0.5
    assert not cache.synced


READINESS_CASES = [
    # name, the API, seconds since the informer started -> /readyz's reason (None: ready)
    ("a synced cache is ready", "answers", None, None),
    ("an unsynced cache is not ready at first", "refuses", 0.5, "namespace cache not synced yet (0.5s of 10s)"),
    ("an unsynced cache is ready once the wait is over", "refuses", 10.0, None),
    ("a cache that never started is ready (nothing to wait for)", "off", None, None),
]


@pytest.mark.parametrize(
    "api_state,waited,reason", [c[1:] for c in READINESS_CASES], ids=[c[0] for c in READINESS_CASES]
)
def test_readiness_waits_for_the_first_list_for_a_bounded_time(caches, api_state, waited, reason):
    def refused(**kwargs: Any) -> Any:
        raise urllib3.exceptions.MaxRetryError(None, "/api/v1/namespaces", ConnectionRefusedError(111, "refused"))  # type: ignore[arg-type]  # no pool here

    connect = {"answers": lambda: FakeNamespaces(namespace("plain")), "refuses": lambda: refused, "off": None}[
        api_state
    ]
    cache = make_cache(caches, connect)
    cache.ensure_started()
    if api_state == "answers":
        wait_for(lambda: cache.synced, 10, "the cache synced")
    started_at = cache._started_at if cache._started_at is not None else 0.0
    assert cache.unready_reason(started_at + (waited or 0.0)) == reason


def test_an_api_client_that_cannot_be_built_turns_the_cache_off_with_an_error_log(caches, caplog):
    def broken() -> Any:
        raise ValueError("invalid kubeconfig")

    cache = make_cache(caches, broken)
    with caplog.at_level(logging.ERROR, logger="taintkeeper.webhook.namespaces"):
        cache.ensure_started()
    assert cache.lookup("team-a") is None
    assert "namespace cache off" in caplog.text and "invalid kubeconfig" in caplog.text


def test_a_disabled_cache_knows_nothing_and_starts_nothing(caches):
    cache = make_cache(caches, None)
    threads = threading.active_count()
    cache.ensure_started()
    assert not cache.enabled
    assert cache.lookup("team-a") is None
    assert threading.active_count() == threads


def test_the_watch_starts_once_per_process_and_again_after_fork(caches, monkeypatch):
    connects: list[FakeNamespaces] = []

    def connect() -> FakeNamespaces:
        connects.append(FakeNamespaces(namespace("team-a")))
        return connects[-1]

    cache = make_cache(caches, connect)
    assert connects == []  # making the cache starts nothing: create_app may run before fork
    cache.ensure_started()
    cache.ensure_started()
    assert len(connects) == 1
    inherited = cache._informer
    # A forked worker has another pid: the inherited informer has no thread there and is replaced.
    monkeypatch.setattr(namespaces.os, "getpid", lambda: -1)
    cache.ensure_started()
    assert len(connects) == 2
    assert cache._informer is not inherited
    wait_for(lambda: connects[1].lists == 1, 10, "the new informer's LIST")
    cache.stop()
    inherited.stop()  # in a real fork its thread would not exist in the child


# -- where the cache reads the API from --------------------------------------------------------------


def test_no_namespace_cache_when_turned_off():
    factory, why = client_source(WebhookSettings(namespace_cache=False, kubeconfig="/some/kubeconfig"))
    assert factory is None and "--namespace-cache=false" in why


def test_no_namespace_cache_without_a_kubeconfig_outside_a_cluster(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setenv("KUBECONFIG", "/dev/null")  # a kubeconfig in the environment is NOT used
    factory, why = client_source(WebhookSettings(namespace_cache=True))
    assert factory is None and "not running in a cluster" in why
    assert NamespaceCache.from_settings(WebhookSettings(namespace_cache=True)).enabled is False


def test_a_given_kubeconfig_is_used(tmp_path):
    kubeconfig = kubeconfig_file(tmp_path)
    factory, source = client_source(WebhookSettings(namespace_cache=True, kubeconfig=str(kubeconfig)))
    assert factory is not None and str(kubeconfig) in source
    api = factory()  # loads the file; connects to nothing
    assert api.configuration.host == "https://127.0.0.1:1"
    api.close()
