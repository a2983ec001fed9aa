"""The informer's pure parts: the indexed store and its re-list reconciliation, the line splitter,
the backoff, and the list/watch loop against a scripted fake API (no server)."""

from __future__ import annotations

import functools
import io
import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import urllib3
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client

from controller.objects import PodView, pod_view
from hack.wait import wait_for as _wait_for
from kube.client import REQUEST_RETRIES, ClientConfigError, make_api_client
from kube.identity import CONTROLLER
from kube.informer import Backoff, Informer, iter_lines
from kube.store import ADDED, DELETED, MODIFIED, Store
from tests.support.responses import http_response


@dataclass(frozen=True)
class Pod:
    name: str
    node: str = ""
    ready: bool = False

    @property
    def key(self) -> str:
        return self.name


def by_node(pod: Pod) -> str:
    return pod.node


def store_of(*pods: Pod) -> Store[Pod]:
    store: Store[Pod] = Store(index_by=by_node)
    store.replace(pods)
    return store


def recomputed_index(store: Store[Pod]) -> dict[str, frozenset[str]]:
    index: dict[str, set[str]] = {}
    for pod in store.list():
        index.setdefault(by_node(pod), set()).add(pod.key)
    return {node: frozenset(keys) for node, keys in index.items()}


A = Pod("a", "n1")
A_READY = Pod("a", "n1", ready=True)
A_MOVED = Pod("a", "n2")
B = Pod("b", "n1")


# -- apply: one watch event -----------------------------------------------------------------------

APPLY_CASES = {
    "add of a new key reports (None, new)": ([], ADDED, A, (None, A), [A]),
    "modify of a changed view reports (old, new)": ([A], MODIFIED, A_READY, (A, A_READY), [A_READY]),
    "modify with an equal view is a no-op": ([A], MODIFIED, Pod("a", "n1"), None, [A]),
    "added for a key already stored acts as an update": ([A], ADDED, A_READY, (A, A_READY), [A_READY]),
    "modified for an unknown key acts as an add": ([B], MODIFIED, A, (None, A), [B, A]),
    "delete reports (stored old, None)": ([A, B], DELETED, A_READY, (A, None), [B]),
    "delete of an unknown key reports nothing": ([B], DELETED, A, None, [B]),
}


@pytest.mark.parametrize(
    ("initial", "event_type", "view", "expected_change", "expected_items"),
    list(APPLY_CASES.values()),
    ids=list(APPLY_CASES),
)
def test_apply(
    initial: list[Pod], event_type: str, view: Pod, expected_change: tuple | None, expected_items: list[Pod]
) -> None:
    store = store_of(*initial)
    assert store.apply(event_type, view) == expected_change
    assert store.list() == expected_items
    assert len(store) == len(expected_items)
    assert store.keys() == [pod.key for pod in expected_items]
    assert store.index_snapshot() == recomputed_index(store)


def test_apply_rejects_event_types_that_do_not_change_the_store() -> None:
    with pytest.raises(ValueError, match="BOOKMARK"):
        store_of().apply("BOOKMARK", A)


def test_get_returns_the_stored_view_or_none() -> None:
    store = store_of(A)
    assert store.get("a") is A
    assert store.get("missing") is None


def test_index_follows_a_pod_moving_nodes_and_its_deletion() -> None:
    store = store_of(A, B)
    assert sorted(p.key for p in store.by_index("n1")) == ["a", "b"]
    store.apply(MODIFIED, A_MOVED)
    assert store.by_index("n1") == [B]
    assert store.by_index("n2") == [A_MOVED]
    store.apply(DELETED, A_MOVED)
    assert store.by_index("n2") == []
    assert store.index_snapshot() == {"n1": frozenset({"b"})}  # no empty bucket left behind


def test_index_returns_the_current_view_after_an_update_on_the_same_node() -> None:
    store = store_of(A)
    store.apply(MODIFIED, A_READY)
    assert store.by_index("n1") == [A_READY]


def test_by_index_without_an_index_is_an_error() -> None:
    with pytest.raises(ValueError, match="no index"):
        Store[Pod]().by_index("n1")


def test_real_pod_views_from_identical_json_are_an_update_no_op() -> None:
    raw = {"metadata": {"namespace": "ns", "name": "p", "uid": "u1"}, "spec": {"nodeName": "n1"}}
    store: Store[PodView] = Store(index_by=lambda pod: pod.node_name)
    assert store.apply(ADDED, pod_view(raw)) == (None, pod_view(raw))
    assert store.apply(MODIFIED, pod_view(json.loads(json.dumps(raw)))) is None
    assert [p.key for p in store.by_index("n1")] == ["ns/p"]


# -- replace: a fresh LIST reconciled against the store -------------------------------------------

C = Pod("c", "n2")
D = Pod("d", "n3")

REPLACE_CASES = {
    "first list reports every object as added": ([], [A, B], [(None, A), (None, B)]),
    "identical list reports nothing": ([A, B], [Pod("a", "n1"), B], []),
    "empty list reports every object as removed": ([A, B], [], [(A, None), (B, None)]),
    "mixed list reports removals first, then changes and additions in list order": (
        [A, B, C],
        [D, A_READY, C],
        [(B, None), (None, D), (A, A_READY)],
    ),
    "pod moved during the gap is one change": ([A, B], [A_MOVED, B], [(A, A_MOVED)]),
}


@pytest.mark.parametrize(
    ("initial", "listed", "expected_changes"), list(REPLACE_CASES.values()), ids=list(REPLACE_CASES)
)
def test_replace_yields_exact_differences(initial: list[Pod], listed: list[Pod], expected_changes: list[tuple]) -> None:
    store = store_of(*initial)
    assert store.replace(listed) == expected_changes
    assert {p.key: p for p in store.list()} == {p.key: p for p in listed}
    assert store.index_snapshot() == recomputed_index(store)


# -- property: the index is always what a rebuild would give --------------------------------------

pods = st.builds(Pod, name=st.sampled_from("abcde"), node=st.sampled_from(["", "n1", "n2", "n3"]), ready=st.booleans())
operations = st.one_of(
    st.tuples(st.sampled_from([ADDED, MODIFIED, DELETED]), pods),
    st.tuples(st.just("RELIST"), st.lists(pods, max_size=6)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(operations, max_size=40))
def test_index_and_reported_changes_match_a_model_after_any_operations(ops: list[tuple[str, Any]]) -> None:
    store: Store[Pod] = Store(index_by=by_node)
    model: dict[str, Pod] = {}
    for op, argument in ops:
        if op == "RELIST":
            fresh = {pod.key: pod for pod in argument}
            expected = {
                (model.get(k), fresh.get(k)) for k in model.keys() | fresh.keys() if model.get(k) != fresh.get(k)
            }
            assert set(store.replace(argument)) == expected
            model = fresh
        elif op == DELETED:
            old = model.pop(argument.key, None)
            assert store.apply(op, argument) == (None if old is None else (old, None))
        else:
            old = model.get(argument.key)
            model[argument.key] = argument
            assert store.apply(op, argument) == (None if old == argument else (old, argument))
        assert {p.key: p for p in store.list()} == model
        assert store.index_snapshot() == recomputed_index(store)


# -- line splitting and backoff -------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=3), max_size=6),
    st.lists(st.integers(min_value=1, max_value=30), max_size=20),
)
def test_iter_lines_returns_every_event_whatever_the_chunk_boundaries(events: list[dict], cuts: list[int]) -> None:
    stream = b"".join(json.dumps(event, ensure_ascii=False).encode() + b"\n" for event in events)
    chunks, position = [], 0
    for size in cuts:
        chunks.append(stream[position : position + size])
        position += size
    chunks.append(stream[position:])
    assert [json.loads(line) for line in iter_lines(chunks)] == events


def test_iter_lines_skips_blank_lines_and_keeps_an_unterminated_tail() -> None:
    assert list(iter_lines([b'{"a":1}\n\n', b'  \n{"b"', b":2}"])) == [b'{"a":1}', b'{"b":2}']


def test_iter_lines_splits_a_multibyte_character_across_chunks() -> None:
    line = json.dumps({"name": "päd"}, ensure_ascii=False).encode()
    cut = line.index("ä".encode()) + 1
    assert [json.loads(x) for x in iter_lines([line[:cut], line[cut:] + b"\n"])] == [{"name": "päd"}]


def test_backoff_doubles_up_to_the_cap_and_resets() -> None:
    backoff = Backoff(0.2, 1.0)
    assert [backoff.next() for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    backoff.reset()
    assert backoff.next() == 0.2


# -- the list/watch loop against a scripted fake API ----------------------------------------------


def pod_json(name: str, node: str = "", rv: str = "1", ready: str | None = None) -> dict:
    pod: dict[str, Any] = {
        "metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}", "resourceVersion": rv},
        "spec": {"nodeName": node},
    }
    if ready is not None:
        pod["status"] = {"conditions": [{"type": "Ready", "status": ready}]}
    return pod


def event(event_type: str, obj: dict) -> dict:
    return {"type": event_type, "object": obj}


class FakeApi:
    """Stands in for a generated list method. Each LIST (a call without a continue token) takes
    the next entry of `lists` (the last one repeats); a continue token is the index of the page
    within it. WATCHes replay `streams` in order; with those used up, a WATCH waits for `release`."""

    def __init__(self, lists: list[list[dict]], streams: list[list[dict] | Exception]) -> None:
        self.lists_left = lists
        self.current_list = lists[0]
        self.streams = streams
        self.calls: list[dict[str, Any]] = []
        self.release = threading.Event()

    def __call__(self, **kwargs: Any) -> urllib3.HTTPResponse:
        self.calls.append(kwargs)
        if not kwargs.get("watch"):
            token = kwargs.get("_continue")
            if not token:
                self.current_list = self.lists_left.pop(0) if self.lists_left else self.current_list
            return http_response(json.dumps(self.current_list[int(token) if token else 0]).encode())
        if not self.streams:
            self.release.wait(10)
            return http_response(b"")
        script = self.streams.pop(0)
        if isinstance(script, Exception):
            raise script
        return http_response(b"".join(json.dumps(e).encode() + b"\n" for e in script))

    def watches(self) -> list[dict[str, Any]]:
        return [call for call in self.calls if call.get("watch")]

    def lists(self) -> list[dict[str, Any]]:
        return [call for call in self.calls if not call.get("watch")]


def page(items: list[dict], rv: str, continue_token: str | None = None) -> dict:
    metadata = {"resourceVersion": rv} | ({"continue": continue_token} if continue_token else {})
    return {"kind": "PodList", "metadata": metadata, "items": items}


wait_for = functools.partial(_wait_for, interval=0.01)


@pytest.fixture
def run_informer() -> Iterator[Callable[..., tuple[Informer[PodView], list[tuple]]]]:
    started: list[tuple[Informer[PodView], FakeApi]] = []

    def run(api: FakeApi, **options: Any) -> tuple[Informer[PodView], list[tuple]]:
        changes: list[tuple] = []
        informer = Informer(
            "pods",
            api,
            pod_view,
            lambda old, new: changes.append((old, new)),
            index_by=lambda pod: pod.node_name,
            sleep=lambda _: None,
            **options,
        )
        started.append((informer, api))
        informer.start()
        return informer, changes

    yield run
    for informer, api in started:
        api.release.set()
        informer.stop()
        assert not informer.running


def test_loop_lists_every_page_then_watches_from_the_list_resource_version(run_informer: Callable) -> None:
    api = FakeApi(
        [[page([pod_json("a", "n1")], "10", "1"), page([pod_json("b", "n1")], "10")]],
        [[event(ADDED, pod_json("c", "n2", rv="11"))]],
    )
    informer, changes = run_informer(api, page_size=1)
    assert informer.wait_for_sync(5)
    wait_for(lambda: len(changes) == 3, 5, "3 changes")
    assert [(old, new.name) for old, new in changes] == [(None, "a"), (None, "b"), (None, "c")]
    assert [c.get("_continue") for c in api.lists()] == [None, "1"]
    assert all(c["limit"] == 1 for c in api.lists())
    first_watch = api.watches()[0]
    assert first_watch["resource_version"] == "10"
    assert first_watch["allow_watch_bookmarks"] is True
    assert first_watch["_request_timeout"][1] == informer.read_timeout
    assert sorted(p.name for p in informer.by_index("n1")) == ["a", "b"]
    wait_for(lambda: informer.last_resource_version == "11", 5, "resourceVersion 11")


def test_loop_resumes_a_dropped_stream_from_the_last_resource_version_without_listing(run_informer: Callable) -> None:
    api = FakeApi(
        [[page([], "10")]],
        [
            [event(ADDED, pod_json("a", rv="11"))],
            urllib3.exceptions.ProtocolError("connection broken"),
            [event("BOOKMARK", {"metadata": {"resourceVersion": "15"}})],
            urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"),  # type: ignore[arg-type]  # no pool here
        ],
    )
    informer, _ = run_informer(api)
    wait_for(lambda: len(api.watches()) == 5, 5, "5 watches")
    assert [w["resource_version"] for w in api.watches()] == ["10", "11", "11", "15", "15"]
    assert informer.list_count == 1
    assert informer.error_count == 2
    assert "ReadTimeoutError" in (informer.last_error or "")


def test_loop_relists_on_a_410_error_event_and_reports_the_differences(run_informer: Callable) -> None:
    gone = event("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"})
    api = FakeApi(
        [
            [page([pod_json("a", "n1"), pod_json("b", "n1")], "10")],
            [page([pod_json("b", "n1", ready="True"), pod_json("c", "n2")], "20")],
        ],
        [[gone]],
    )
    informer, changes = run_informer(api)
    wait_for(lambda: informer.list_count == 2 and len(api.watches()) == 2, 5, "a second LIST and watch")
    assert [(old and old.name, new and new.name) for old, new in changes[2:]] == [("a", None), ("b", "b"), (None, "c")]
    assert informer.expired_count == 1
    assert api.watches()[1]["resource_version"] == "20"
    assert informer.by_index("n1")[0].ready == "True"


def test_loop_relists_on_http_410(run_informer: Callable) -> None:
    from kubernetes.client.exceptions import ApiException

    api = FakeApi([[page([], "10")]], [ApiException(status=410, reason="Gone")])
    informer, _ = run_informer(api)
    wait_for(lambda: informer.list_count == 2, 5, "the relist after 410")
    assert informer.expired_count == 1
    assert informer.error_count == 0


def test_the_first_list_reads_the_watch_cache_and_a_relist_after_410_reads_etcd_in_pages(
    run_informer: Callable,
) -> None:
    from kubernetes.client.exceptions import ApiException

    first = [page([pod_json("a")], "10")]
    relist = [page([pod_json("a")], "20", "1"), page([pod_json("b")], "20")]
    api = FakeApi([first, relist], [ApiException(status=410, reason="Gone")])
    informer, _ = run_informer(api, page_size=1)
    wait_for(lambda: informer.list_count == 2, 5, "the relist after 410")
    assert [call.get("resource_version") for call in api.lists()] == ["0", None, None]
    assert [call.get("_continue") for call in api.lists()] == [None, None, "1"]
    assert sorted(informer.keys()) == ["ns/a", "ns/b"]


def test_loop_survives_a_failing_handler_and_an_untransformable_object(
    run_informer: Callable, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []

    def flaky(old: PodView | None, new: PodView | None) -> None:
        calls.append((new or old).name)  # type: ignore[union-attr]
        raise RuntimeError("handler bug")

    api = FakeApi(
        [[page([pod_json("a")], "10")]],
        [[event(ADDED, {"metadata": "not a dict"}), event(ADDED, pod_json("b", rv="12"))]],
    )
    informer = Informer("pods", api, pod_view, flaky, sleep=lambda _: None)
    with caplog.at_level(logging.ERROR, logger="taintkeeper.informer"):
        informer.start()
        try:
            wait_for(lambda: calls == ["a", "b"], 5, "both handlers called")
            assert informer.running
        finally:
            api.release.set()
            informer.stop()
    assert "handler failed for ns/a" in caplog.text
    assert "cannot transform" in caplog.text


def test_loop_backs_off_exponentially_while_failing_and_resets_after_an_event() -> None:
    delays: list[float] = []
    refused = urllib3.exceptions.NewConnectionError(None, "connection refused")  # type: ignore[arg-type]
    api = FakeApi([[page([], "10")]], [refused, refused, refused, [event(ADDED, pod_json("a", rv="11"))], refused])
    informer = Informer("pods", api, pod_view, lambda old, new: None, sleep=delays.append, backoff_max=0.5)
    informer.start()
    try:
        wait_for(lambda: len(delays) == 4, 5, "4 backoff delays")
    finally:
        api.release.set()
        informer.stop()
    assert delays[:4] == [0.2, 0.4, 0.5, 0.2]


def test_an_apiserver_back_from_an_outage_is_found_within_4_seconds() -> None:
    """The default backoff stops doubling at 4 s (client-go's 30 s made evictions late after an outage)."""
    delays: list[float] = []
    refused = urllib3.exceptions.NewConnectionError(None, "connection refused")  # type: ignore[arg-type]
    watches: list[list[dict[Any, Any]] | Exception] = [refused] * 8
    api = FakeApi([[page([], "10")]], [*watches, [event(ADDED, pod_json("a", rv="11"))]])
    informer = Informer("pods", api, pod_view, lambda old, new: None, sleep=delays.append)
    informer.start()
    try:
        wait_for(lambda: len(delays) >= 8, 5, "8 backoff delays")
    finally:
        api.release.set()
        informer.stop()
    assert delays[:8] == [0.2, 0.4, 0.8, 1.6, 3.2, 4.0, 4.0, 4.0]


def test_stop_interrupts_a_blocked_read_promptly() -> None:
    reader_blocked = threading.Event()

    class BlockingBody(io.RawIOBase):
        def __init__(self) -> None:
            self.closed_by_stop = threading.Event()

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            reader_blocked.set()
            self.closed_by_stop.wait(10)
            self.close()  # as a socket shut down for reading: end of stream
            return 0

    body = BlockingBody()

    class Connection:  # what urllib3 needs of the connection to shut its socket down
        def close(self) -> None:
            pass

    def list_call(**kwargs: Any) -> urllib3.HTTPResponse:
        if not kwargs.get("watch"):
            return http_response(json.dumps(page([], "1")).encode())
        return urllib3.HTTPResponse(
            body=body,
            preload_content=False,
            connection=Connection(),  # type: ignore[arg-type]
            sock_shutdown=lambda how: body.closed_by_stop.set(),
        )

    informer = Informer("pods", list_call, pod_view, lambda old, new: None)
    informer.start()
    assert reader_blocked.wait(5)
    informer.stop(timeout=2)
    assert not informer.running
    assert body.closed_by_stop.is_set()


# -- client construction ----------------------------------------------------------------------------

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: secret}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_make_api_client_reads_the_given_kubeconfig_into_its_own_configuration(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    api = make_api_client(str(path), component=CONTROLLER)
    try:
        assert api.configuration.host == "https://127.0.0.1:6443"
        assert api.configuration.retries == REQUEST_RETRIES
        assert client.Configuration.get_default_copy().host != api.configuration.host  # no global state
    finally:
        api.close()


def test_the_client_keeps_as_many_connections_as_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    api = make_api_client(str(path), component=CONTROLLER, connections=37)
    try:
        assert api.rest_client.pool_manager.connection_pool_kw["maxsize"] == 37
    finally:
        api.close()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        ("clusters: [unclosed", "invalid kubeconfig"),
        ("apiVersion: v1\nkind: Config\n", "invalid kubeconfig"),
    ],
    ids=["missing file", "broken yaml", "no current context"],
)
def test_make_api_client_reports_a_bad_kubeconfig_in_one_line(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ClientConfigError, match=message) as raised:
        make_api_client(str(path), component=CONTROLLER)
    assert "\n" not in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_make_api_client_outside_a_cluster_falls_back_to_kubeconfig_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(ClientConfigError, match="not running in a cluster"):
        make_api_client(None, component=CONTROLLER)
    (tmp_path / "present").write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "present"))
    api = make_api_client(None, component=CONTROLLER)
    api.close()
    assert api.configuration.host == "https://127.0.0.1:6443"
