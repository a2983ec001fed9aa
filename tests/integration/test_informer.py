"""The informer against a real kube-apiserver: list+watch of pods and nodes with the nodeName index,
the first LIST from the watch cache, resuming after dropped streams and an apiserver restart, noticing a frozen
apiserver through the client-side read timeout, and the re-list after 410."""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from controller.objects import NodeView, PodView, node_view, pod_view
from controller.pod_protobuf import pod_json
from kube.informer import Informer
from kube.watch_body import batched_body
from tests.integration.kube import LocalCluster, control_plane, raw, wait_for

# -- helpers ----------------------------------------------------------------------------------------


class Changes:
    """Thread-safe record of on_change calls, optionally filtered (other tests share the cluster)."""

    def __init__(self, keep: Callable[[Any], bool] = lambda view: True) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._items: list[tuple[Any, Any]] = []

    def __call__(self, old: Any, new: Any) -> None:
        if self._keep(new or old):
            with self._lock:
                self._items.append((old, new))

    @property
    def items(self) -> list[tuple[Any, Any]]:
        with self._lock:
            return list(self._items)

    def named(self) -> list[tuple[str | None, str | None]]:
        return [(old and old.name, new and new.name) for old, new in self.items]

    def wait_for(self, count: int, timeout: float = 15) -> list[tuple[Any, Any]]:
        """Wait until `count` changes were recorded in total; return them all."""
        return wait_for(
            lambda: self.items if len(self.items) >= count else None, timeout, f"{count} changes (have {self.named()})"
        )


class RecordingCall:
    """Wraps a generated list method, recording each request as (kind, resourceVersion or
    continue token, time) when it is made, before the server answers."""

    def __init__(self, call: Callable[..., Any]) -> None:
        self._call = call
        self.requests: list[tuple[str, str | None, float]] = []
        self.list_versions: list[str | None] = []  # each LIST's resourceVersion parameter

    def __call__(self, **kwargs: Any) -> Any:
        if kwargs.get("watch"):
            self.requests.append(("WATCH", kwargs.get("resource_version"), time.monotonic()))
        else:
            self.requests.append(("LIST", kwargs.get("_continue"), time.monotonic()))
            self.list_versions.append(kwargs.get("resource_version"))
        return self._call(**kwargs)

    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.requests]


def version_number(resource_version: str | None) -> int:
    """A resourceVersion (etcd's revision here) as a number, to compare; a missing one fails the test."""
    assert resource_version is not None, "no resourceVersion"
    return int(resource_version)


@pytest.fixture
def informers() -> Iterator[Callable[..., Informer]]:
    """Start informers; stop each at the end and check its thread really ended."""
    started: list[Informer] = []

    def start(*args: Any, **kwargs: Any) -> Informer:
        informer: Informer = Informer(*args, **kwargs)
        started.append(informer)
        informer.start()
        assert informer.wait_for_sync(15), f"informer {informer.name} did not sync"
        return informer

    yield start
    for informer in started:
        informer.stop(timeout=10)
        assert not informer.running, f"informer {informer.name} did not stop"


def pod_manifest(name: str, node: str | None = None) -> dict:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec}


def create_pod(core: client.CoreV1Api, namespace: str, name: str, node: str | None = None) -> dict:
    return raw(core.create_namespaced_pod, namespace, body=pod_manifest(name, node))


def delete_pod(core: client.CoreV1Api, namespace: str, name: str) -> None:
    # Without a kubelet a graceful delete would wait forever; 0 removes the pod at once.
    raw(core.delete_namespaced_pod, name, namespace, grace_period_seconds=0)


def set_ready(core: client.CoreV1Api, namespace: str, name: str, status: str = "True") -> None:
    raw(
        core.patch_namespaced_pod_status,
        name,
        namespace,
        body={"status": {"conditions": [{"type": "Ready", "status": status}]}},
    )


def in_namespace(namespace: str) -> Callable[[PodView], bool]:
    return lambda pod: pod.namespace == namespace


def keys(views: list[Any]) -> set[str]:
    return {view.key for view in views}


# -- (1) list + watch of pods and nodes ---------------------------------------------------------------


def test_list_and_watch_report_adds_updates_and_deletes_of_pods_with_the_node_index(
    local_cluster: LocalCluster, namespace: str, informers: Callable[..., Informer]
) -> None:
    core = client.CoreV1Api(local_cluster.api_client)
    node = f"tk-node-{uuid.uuid4().hex[:6]}"
    other = f"{node}-b"
    create_pod(core, namespace, "listed", node)
    changes = Changes(in_namespace(namespace))
    pods: Informer[PodView] = informers(
        "pods", core.list_pod_for_all_namespaces, pod_view, changes, index_by=lambda pod: pod.node_name
    )
    assert pods.has_synced
    assert changes.named() == [(None, "listed")]  # handlers of the first LIST ran before has_synced
    assert keys(pods.by_index(node)) == {f"{namespace}/listed"}

    create_pod(core, namespace, "a", node)
    old, new = changes.wait_for(2)[1]
    assert old is None and (new.name, new.node_name, new.ready) == ("a", node, None)
    assert keys(pods.by_index(node)) == {f"{namespace}/listed", f"{namespace}/a"}

    # A pod without a node, then bound: the index moves it from "" to the node.
    create_pod(core, namespace, "b")
    assert changes.wait_for(3)[2][1].node_name == ""
    assert f"{namespace}/b" in keys(pods.by_index(""))
    raw(
        core.create_namespaced_pod_binding,
        "b",
        namespace,
        body={"metadata": {"name": "b"}, "target": {"kind": "Node", "name": other}},
    )
    old, new = changes.wait_for(4)[3]
    assert (old.name, old.node_name, new.node_name) == ("b", "", other)
    assert keys(pods.by_index(other)) == {f"{namespace}/b"}
    assert f"{namespace}/b" not in keys(pods.by_index(""))

    # A label changes nothing a view holds: no call. The Ready patch after it is the next change.
    raw(core.patch_namespaced_pod, "a", namespace, body={"metadata": {"labels": {"touched": "yes"}}})
    set_ready(core, namespace, "a")
    old, new = changes.wait_for(5)[4]
    assert (old.name, old.ready, new.ready) == ("a", None, "True")
    assert pods.get(f"{namespace}/a") == new

    # Deleting with grace period 0 is two writes: deletionTimestamp is set, then the pod is removed.
    delete_pod(core, namespace, "a")
    terminating, deleted = changes.wait_for(7)[5:7]
    assert (terminating[0].terminating, terminating[1].terminating) == (False, True)
    assert deleted == (terminating[1], None)
    assert keys(pods.by_index(node)) == {f"{namespace}/listed"}
    assert pods.get(f"{namespace}/a") is None
    time.sleep(0.5)  # nothing else may arrive (a duplicate, or a call for the label patch)
    assert len(changes.items) == 7


def test_the_apiservers_watch_is_read_off_the_socket_and_a_batch_brings_the_events_of_its_wait(
    local_cluster: LocalCluster, namespace: str
) -> None:
    core = client.CoreV1Api(local_cluster.api_client)
    version = raw(core.list_namespaced_pod, namespace)["metadata"]["resourceVersion"]
    response: Any = core.list_namespaced_pod(
        namespace,
        watch=True,
        resource_version=version,
        timeout_seconds=30,
        _preload_content=False,
        _request_timeout=(10, 40),
    )
    waits: list[float] = []

    def wait(seconds: float) -> None:  # three pods are created while the informer would wait
        waits.append(seconds)
        for name in ("a", "b", "c"):
            create_pod(core, namespace, name)
        time.sleep(0.5)  # the apiserver's three events reach the socket (the batch's own wait)

    try:
        blocks = batched_body(response, 0.1, wait)
        assert blocks is not None, "the apiserver's watch was not read off the socket (urllib3 read it)"
        lines: list[bytes] = []
        for block in blocks:
            lines += [line for line in block.split(b"\n") if line]
            if len(lines) >= 3:
                break
    finally:
        response.close()
    assert waits == [0.1]  # one wait, then one read for all three events
    assert [(json.loads(line)["type"], json.loads(line)["object"]["metadata"]["name"]) for line in lines] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("ADDED", "c"),
    ]


def test_list_and_watch_report_adds_updates_and_deletes_of_nodes(
    local_cluster: LocalCluster, informers: Callable[..., Informer]
) -> None:
    core = client.CoreV1Api(local_cluster.api_client)
    prefix = f"tk-node-{uuid.uuid4().hex[:6]}"
    raw(core.create_node, body={"metadata": {"name": f"{prefix}-listed"}})
    changes = Changes(lambda node: node.name.startswith(prefix))
    nodes: Informer[NodeView] = informers("nodes", core.list_node, node_view, changes)
    try:
        assert changes.named() == [(None, f"{prefix}-listed")]

        raw(core.create_node, body={"metadata": {"name": f"{prefix}-new"}})
        assert changes.wait_for(2)[1][0] is None

        taint = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
        raw(core.patch_node, f"{prefix}-new", body={"spec": {"taints": [taint]}})
        old, new = changes.wait_for(3)[2]
        assert old.no_execute_taints == () and [t["key"] for t in new.no_execute_taints] == [taint["key"]]
        assert nodes.get(f"{prefix}-new") == new

        raw(core.delete_node, f"{prefix}-new")
        old, new = changes.wait_for(4)[3]
        assert new is None and old.no_execute_taints
        assert nodes.get(f"{prefix}-new") is None
        assert {n.name for n in nodes.list() if n.name.startswith(prefix)} == {f"{prefix}-listed"}
    finally:
        for name in (f"{prefix}-listed", f"{prefix}-new"):
            try:
                raw(core.delete_node, name)
            except client.ApiException as error:
                assert error.status == 404


# -- (2) the first list ----------------------------------------------------------------------------------


def test_the_first_list_comes_from_the_watch_cache_and_holds_every_pod(
    local_cluster: LocalCluster, namespace: str, informers: Callable[..., Informer]
) -> None:
    core = client.CoreV1Api(local_cluster.api_client)
    for number in range(23):
        create_pod(core, namespace, f"p{number:02d}", node=f"node-{number % 3}")
    calls = RecordingCall(functools.partial(core.list_namespaced_pod, namespace))
    changes = Changes()
    pods: Informer[PodView] = informers(
        "pods", calls, pod_view, changes, index_by=lambda pod: pod.node_name, page_size=5
    )
    assert len(pods) == 23
    assert calls.list_versions[0] == "0"  # served from the apiserver's watch cache, etcd not read
    lists = [token for kind, token, _ in calls.requests if kind == "LIST"]
    assert all(lists[1:])  # further pages (an apiserver that pages its cache) followed continue tokens
    assert sorted(new.name for old, new in changes.items if old is None) == [f"p{n:02d}" for n in range(23)]
    assert len(pods.by_index("node-0")) == 8
    assert pods.list_count == 1


PROTOBUF_POD_SHAPES: dict[str, dict[str, Any]] = {
    "bare": {"metadata": {}, "spec": {}},
    "bound, tolerating for a while": {
        "metadata": {},
        "spec": {
            "nodeName": "node-a",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 0,
                },
            ],
        },
    },
    "tolerating for ever, every effect": {
        "metadata": {},
        "spec": {
            "nodeName": "node-b",
            "tolerations": [
                {"operator": "Exists"},
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute"},
                {"key": "k", "value": "v", "effect": "NoSchedule"},
                {"key": "negative", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -5},
            ],
        },
    },
    "labelled to be skipped": {"metadata": {"labels": {"taintkeeper.io/skip": "true", "app": "x"}}, "spec": {}},
    "a static pod's mirror": {
        "metadata": {"annotations": {"kubernetes.io/config.mirror": "abc", "note": ""}},
        "spec": {"nodeName": "node-a"},
    },
}


def test_pods_listed_in_protobuf_have_the_views_of_pods_listed_in_json(
    local_cluster: LocalCluster, namespace: str, informers: Callable[..., Informer]
) -> None:
    """The oracle for controller/pod_protobuf.py's field numbers: the real apiserver's protobuf."""
    core = client.CoreV1Api(local_cluster.api_client)
    for number, manifest in enumerate(PROTOBUF_POD_SHAPES.values()):
        pod = json.loads(json.dumps(manifest))
        pod["metadata"]["name"] = f"shape-{number}"
        pod["spec"]["containers"] = [{"name": "c", "image": "busybox"}]
        raw(core.create_namespaced_pod, namespace, body=pod)
    set_ready(core, namespace, "shape-1", "False")
    raw(
        core.patch_namespaced_pod_status,
        "shape-2",
        namespace,
        body={
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-23T10:00:00Z"},
                    {"type": "Ready", "status": "True"},
                ]
            }
        },
    )
    raw(core.patch_namespaced_pod, "shape-0", namespace, body={"metadata": {"finalizers": ["test/hold"]}})
    raw(core.delete_namespaced_pod, "shape-0", namespace)  # Terminating: held by its finalizer
    decoded: list[bytes] = []

    def pod_json_noted(data: bytes) -> dict[str, Any]:
        decoded.append(data)
        return pod_json(data)

    list_pods = functools.partial(core.list_namespaced_pod, namespace)
    try:
        from_json: Informer[PodView] = informers("pods-json", list_pods, pod_view)
        from_protobuf: Informer[PodView] = informers("pods-protobuf", list_pods, pod_view, protobuf_item=pod_json_noted)
        assert len(decoded) == len(PROTOBUF_POD_SHAPES)  # read as protobuf, not JSON
        assert {pod.key: pod for pod in from_protobuf.list()} == {pod.key: pod for pod in from_json.list()}
        terminating = from_protobuf.get(f"{namespace}/shape-0")
        assert terminating is not None and terminating.terminating
        assert len(from_protobuf) == len(PROTOBUF_POD_SHAPES)
    finally:
        raw(core.patch_namespaced_pod, "shape-0", namespace, body={"metadata": {"finalizers": None}})


# -- (3) resuming: ended streams and an apiserver restart ----------------------------------------------


def test_ended_streams_resume_from_the_last_resource_version_without_listing(
    local_cluster: LocalCluster, namespace: str, informers: Callable[..., Informer]
) -> None:
    core = client.CoreV1Api(local_cluster.api_client)
    calls = RecordingCall(functools.partial(core.list_namespaced_pod, namespace))
    changes = Changes()
    # The server ends every watch after 1 s: each following WATCH must resume, not re-list.
    pods: Informer[PodView] = informers("pods", calls, pod_view, changes, watch_timeout_seconds=1)
    create_pod(core, namespace, "first")
    changes.wait_for(1)
    wait_for(lambda: pods.watch_count >= 4, 15, "four watch streams")
    create_pod(core, namespace, "second")
    changes.wait_for(2)
    assert changes.named() == [(None, "first"), (None, "second")]
    assert pods.list_count == 1 and calls.kinds().count("LIST") == 1
    watched_from = [version_number(rv) for kind, rv, _ in calls.requests if kind == "WATCH"]
    assert watched_from == sorted(watched_from)  # never back to an older resourceVersion


def test_watch_resumes_after_an_apiserver_restart(
    private_cluster: LocalCluster, private_namespace: str, informers: Callable[..., Informer]
) -> None:
    core = client.CoreV1Api(private_cluster.api_client)
    calls = RecordingCall(functools.partial(core.list_namespaced_pod, private_namespace))
    changes = Changes()
    pods: Informer[PodView] = informers("pods", calls, pod_view, changes, backoff_max=1)
    create_pod(core, private_namespace, "before")
    changes.wait_for(1)
    resource_version = pods.last_resource_version
    requests_before, errors_before, expired_before = len(calls.requests), pods.error_count, pods.expired_count

    control_plane("stop-apiserver", private_cluster.directory)
    wait_for(lambda: pods.error_count > errors_before, 15, "the informer to notice the apiserver is gone")
    control_plane("start-apiserver", private_cluster.directory)
    create_pod(core, private_namespace, "after")
    changes.wait_for(2, timeout=30)

    assert changes.named() == [(None, "before"), (None, "after")]
    assert pods.running
    after = calls.requests[requests_before:]
    # A broken connection is resumed from the last resourceVersion (a bookmark may advance it), never
    # answered with a LIST...
    assert after[0][0] == "WATCH" and version_number(after[0][1]) >= version_number(resource_version)
    # ...and a LIST follows only when the restarted server said 410: its new watch cache starts at
    # etcd's current revision, so any write during the restart (the apiserver makes its own) expires
    # the old resourceVersion. Then exactly one re-list, which reports nothing (nothing changed).
    expired = pods.expired_count - expired_before
    assert expired <= 1
    assert [kind for kind, _, _ in after].count("LIST") == expired
    assert pods.list_count == 1 + expired
    assert keys(pods.list()) == {f"{private_namespace}/before", f"{private_namespace}/after"}


# -- (4) a frozen apiserver is noticed by the read timeout ----------------------------------------------


def test_a_frozen_apiserver_is_noticed_and_the_watch_recovers(
    private_cluster: LocalCluster,
    private_namespace: str,
    informers: Callable[..., Informer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = client.CoreV1Api(private_cluster.api_client)
    calls = RecordingCall(functools.partial(core.list_namespaced_pod, private_namespace))
    changes = Changes()
    # The server would keep the stream open for 300 s; only the 2 s client-side read timeout can
    # notice that nothing arrives any more.
    pods: Informer[PodView] = informers(
        "pods", calls, pod_view, changes, read_timeout=2, watch_timeout_seconds=300, backoff_max=1
    )
    create_pod(core, private_namespace, "before")
    changes.wait_for(1)
    apiserver = int((private_cluster.directory / "apiserver.pid").read_text())
    errors_before = pods.error_count
    caplog.set_level(logging.WARNING, logger="taintkeeper.informer")

    os.kill(apiserver, signal.SIGSTOP)
    try:
        frozen_at = time.monotonic()
        wait_for(lambda: pods.error_count > errors_before, 5, "a read timeout on the frozen apiserver")
        assert "timed out" in (pods.last_error or "").lower()
        wait_for(
            lambda: any(kind == "WATCH" and at > frozen_at for kind, _, at in calls.requests), 5, "a reconnect attempt"
        )
        assert any("watch failed" in record.getMessage() for record in caplog.records)
    finally:
        os.kill(apiserver, signal.SIGCONT)

    create_pod(core, private_namespace, "after")
    changes.wait_for(2, timeout=30)
    assert changes.named() == [(None, "before"), (None, "after")]
    assert pods.list_count == 1  # the resourceVersion stayed valid: resumed, not re-listed


# -- (5) 410: a full re-list reconciled against the store --------------------------------------------


class ExpiredStream:
    """A watch response carrying only an ERROR 410 event, as the server sends for a too-old
    resourceVersion. Only what the informer reads of a urllib3 response is provided."""

    def __init__(self) -> None:
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": 410,
            "reason": "Expired",
            "message": "too old resource version: 1 (2)",
        }
        self._payload = json.dumps({"type": "ERROR", "object": status}).encode() + b"\n"

    def stream(self, amt: int | None = None, decode_content: bool = True) -> Iterator[bytes]:
        # Split mid-line, as chunks may be.
        yield self._payload[:17]
        yield self._payload[17:]

    def close(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


class BlindThenExpired:
    """The first WATCH does not reach the server: it blocks until `release`, then answers 410.
    Whatever is changed meanwhile can only be learned from the re-list."""

    def __init__(self, call: Callable[..., Any]) -> None:
        self._call = call
        self.blind = threading.Event()
        self.release = threading.Event()
        self._used = False

    def __call__(self, **kwargs: Any) -> Any:
        if kwargs.get("watch") and not self._used:
            self._used = True
            self.blind.set()
            self.release.wait(30)
            return ExpiredStream()
        return self._call(**kwargs)


def test_410_relists_and_reports_exact_differences(
    local_cluster: LocalCluster, namespace: str, informers: Callable[..., Informer]
) -> None:
    core = client.CoreV1Api(local_cluster.api_client)
    for name in ("gone", "changed", "same"):
        create_pod(core, namespace, name, node="n1")
    # The informer's first LIST is served from the watch cache (resourceVersion 0), which may not hold a pod
    # created a moment ago on a loaded machine: wait until it does, so the first list is known.
    wait_for(
        lambda: len(raw(core.list_namespaced_pod, namespace, resource_version="0")["items"]) == 3,
        10,
        "the watch cache holding the three pods",
    )
    gate = BlindThenExpired(functools.partial(core.list_namespaced_pod, namespace))
    changes = Changes()
    try:
        pods: Informer[PodView] = informers("pods", gate, pod_view, changes, index_by=lambda pod: pod.node_name)
        assert sorted(changes.named()) == [(None, "changed"), (None, "gone"), (None, "same")]
        assert gate.blind.wait(5)

        delete_pod(core, namespace, "gone")
        set_ready(core, namespace, "changed")
        raw(core.patch_namespaced_pod, "same", namespace, body={"metadata": {"labels": {"view": "unchanged"}}})
        create_pod(core, namespace, "new", node="n2")
    finally:
        gate.release.set()

    relisted = changes.wait_for(6)[3:]
    assert [(old and old.name, new and new.name) for old, new in relisted] == [
        ("gone", None),
        ("changed", "changed"),
        (None, "new"),
    ]  # removals first, then in list order
    old, new = relisted[1]
    assert (old.ready, new.ready) == (None, "True")
    assert pods.list_count == 2 and pods.expired_count == 1
    assert keys(pods.by_index("n1")) == {f"{namespace}/changed", f"{namespace}/same"}
    assert keys(pods.by_index("n2")) == {f"{namespace}/new"}

    # The watch after the re-list is real and starts from the re-list's resourceVersion.
    create_pod(core, namespace, "later")
    assert changes.wait_for(7)[6] == (None, pods.get(f"{namespace}/later"))
    time.sleep(0.5)
    assert len(changes.items) == 7
