"""The one way an API edge sends a write whose answer it does not need: applied, gone, changed, failed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from kube.client import json_patch_unless_gone, write_unless_gone
from kube.errors import ChangedSinceRead


class Response:
    def __init__(self) -> None:
        self.read_and_released = False

    def read(self) -> bytes:
        return b"{}"

    def release_conn(self) -> None:
        self.read_and_released = True


def answering(status: int | None) -> tuple[Callable[[], Any], Response]:
    response = Response()

    def send() -> Response:
        if status is not None:
            raise ApiException(status=status, reason="from the test")
        return response

    return send, response


@pytest.mark.parametrize(
    ("behaviour", "status", "replaced_is_gone", "expected"),
    [
        ("an applied write is True", None, False, True),
        ("a write to a deleted object is None", 404, False, None),
        ("a write refused by a uid precondition is None when a replacement counts as gone", 409, True, None),
    ],
)
def test_write_unless_gone(behaviour: str, status: int | None, replaced_is_gone: bool, expected: object) -> None:
    send, response = answering(status)
    assert write_unless_gone(send, replaced_is_gone=replaced_is_gone) is expected, behaviour
    assert response.read_and_released is (status is None), "an applied write hands its connection back"


@pytest.mark.parametrize(
    ("behaviour", "status"),
    [
        ("a conflict raises when a replacement is not asked to count as gone", 409),
        ("any other failure raises as it came", 500),
        ("an invalid write raises as it came", 422),
    ],
)
def test_write_unless_gone_raises(behaviour: str, status: int) -> None:
    send, _ = answering(status)
    with pytest.raises(ApiException) as raised:
        write_unless_gone(send)
    assert raised.value.status == status, behaviour


@pytest.mark.parametrize(
    ("behaviour", "status", "raises"),
    [
        ("a conflict means the object changed since it was read", 409, ChangedSinceRead),
        ("a failed test op means the object changed since it was read", 422, ChangedSinceRead),
        ("a server error is no change: it raises as it came", 500, ApiException),
    ],
)
def test_json_patch_unless_gone_raises(behaviour: str, status: int, raises: type[Exception]) -> None:
    send, _ = answering(status)
    with pytest.raises(raises):
        json_patch_unless_gone(send)


def test_json_patch_unless_gone_on_a_deleted_object_is_none() -> None:
    send, _ = answering(404)
    assert json_patch_unless_gone(send) is None
