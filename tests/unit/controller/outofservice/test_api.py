"""controller/outofservice/api.py: what each call sends (a force delete: grace period 0 and the uid as a
precondition), what a 404/409 means (done, not a failure), and that a closed write fence sends nothing.
The generated clients are replaced by recorders of their calls; no server is involved."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from controller.objects import pod_view
from controller.outofservice.api import KubeOutOfServiceApi
from controller.volume_attachments import volume_attachment_view
from kube.errors import ChangedSinceRead
from kube.fence import WriteFence, WriteFenced
from tests.support.fencing import attachment_json, node_json, pod_json
from tests.support.responses import http_response

POD = pod_view(pod_json("web-1"))
ATTACHMENT = volume_attachment_view(attachment_json("csi-1"))


class Recorder:
    """Every call of a generated API class, with its arguments; `status` makes the next write fail so."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.status: int | None = None

    def __call__(self, _api_client: object) -> Recorder:
        return self

    def read_node(self, name: str, **_kwargs: Any) -> object:
        self.calls.append(("read_node", (name,), {}))
        return http_response(json.dumps(node_json(name)).encode())

    def __getattr__(self, method: str) -> Callable[..., object]:
        def call(*args: Any, **kwargs: Any) -> object:
            self.calls.append((method, args, kwargs))
            if self.status is not None:
                raise ApiException(status=self.status, reason="x")
            return http_response(b"{}")

        return call


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recording = Recorder()
    monkeypatch.setattr(client, "CoreV1Api", recording)
    monkeypatch.setattr(client, "StorageV1Api", recording)
    return recording


def edge(open_fence: bool = True) -> KubeOutOfServiceApi:
    fence = WriteFence.without_lease() if open_fence else WriteFence(10.0)
    return KubeOutOfServiceApi(client.ApiClient(client.Configuration()), fence)


def test_a_force_delete_has_grace_period_0_and_the_pods_uid(recorder: Recorder) -> None:
    assert edge().force_delete_pod(POD) is True
    ((method, args, kwargs),) = recorder.calls
    assert (method, args) == ("delete_namespaced_pod", ("web-1", "apps"))
    assert kwargs["body"] == {"gracePeriodSeconds": 0, "preconditions": {"uid": "uid-web-1"}}


def test_a_volume_attachment_is_deleted_with_its_uid(recorder: Recorder) -> None:
    assert edge().delete_volume_attachment(ATTACHMENT) is True
    ((method, args, kwargs),) = recorder.calls
    assert (method, args) == ("delete_volume_attachment", ("csi-1",))
    assert kwargs["body"] == {"preconditions": {"uid": "uid-csi-1"}}


@pytest.mark.parametrize("status", [404, 409], ids=["gone", "replaced (uid precondition)"])
def test_gone_or_replaced_is_done_not_a_failure(recorder: Recorder, status: int) -> None:
    recorder.status = status
    assert edge().force_delete_pod(POD) is None
    assert edge().delete_volume_attachment(ATTACHMENT) is None


def test_any_other_failure_raises(recorder: Recorder) -> None:
    recorder.status = 500
    with pytest.raises(ApiException):
        edge().force_delete_pod(POD)
    with pytest.raises(ApiException):
        edge().delete_volume_attachment(ATTACHMENT)


@pytest.mark.parametrize("status", [409, 422], ids=["conflict", "the resourceVersion test failed"])
def test_a_fencing_patch_on_a_changed_node_is_a_conflict(recorder: Recorder, status: int) -> None:
    recorder.status = status
    with pytest.raises(ChangedSinceRead):
        edge().fence_node("node1", [{"op": "test", "path": "/metadata/resourceVersion", "value": "1"}])


def test_the_fencing_patch_is_a_json_patch(recorder: Recorder) -> None:
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": "1"}]
    assert edge().fence_node("node1", ops) is True
    ((method, args, kwargs),) = recorder.calls
    assert (method, args) == ("patch_node", ("node1", ops))
    assert kwargs["_content_type"] == "application/json-patch+json"


WRITES = {
    "force delete": lambda api: api.force_delete_pod(POD),
    "volume attachment deletion": lambda api: api.delete_volume_attachment(ATTACHMENT),
    "fencing patch": lambda api: api.fence_node("node1", []),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_a_closed_write_fence_sends_nothing(recorder: Recorder, write: Callable[[KubeOutOfServiceApi], object]) -> None:
    with pytest.raises(WriteFenced):
        write(edge(open_fence=False))
    assert recorder.calls == []
