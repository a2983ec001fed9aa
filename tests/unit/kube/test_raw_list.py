"""kube/raw_list.py: the informer's keyword arguments become the API's query parameters; only streaming
is offered. (tests/integration/test_namespace_defaults.py runs it against the real apiserver, under
the webhook's namespace cache.)"""

from __future__ import annotations

from typing import Any

import pytest

import kube.raw_list
from kube.raw_list import raw_list_call

CASES = [
    (
        "the first LIST, from the watch cache",
        {"limit": 500, "resource_version": "0"},
        [("limit", "500"), ("resourceVersion", "0")],
    ),
    ("a next page", {"limit": 500, "_continue": "token"}, [("limit", "500"), ("continue", "token")]),
    (
        "a WATCH with bookmarks",
        {"watch": True, "resource_version": "42", "allow_watch_bookmarks": True, "timeout_seconds": 300},
        [("watch", "true"), ("resourceVersion", "42"), ("allowWatchBookmarks", "true"), ("timeoutSeconds", "300")],
    ),
    (
        "None is left out",
        {"label_selector": None, "field_selector": "metadata.name=x"},
        [("fieldSelector", "metadata.name=x")],
    ),
]


class Sent:
    response = "the urllib3 response"


@pytest.mark.parametrize(("kwargs", "query"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_the_query(kwargs: dict[str, Any], query: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[Any, ...]] = []

    def send(api_client: object, method: str, path: str, *, timeout: object, query: list[tuple[str, str]]) -> Sent:
        sent.append((method, path, timeout, query))
        return Sent()

    monkeypatch.setattr(kube.raw_list, "send", send)
    answer = raw_list_call(object(), "/api/v1/namespaces")(_preload_content=False, _request_timeout=(1, 2), **kwargs)  # type: ignore[arg-type]
    assert answer == "the urllib3 response"
    assert sent == [("GET", "/api/v1/namespaces", (1, 2), query)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"_preload_content": True}, "only streams"), ({"pretty": "true"}, "unexpected arguments ['pretty']")],
)
def test_what_it_does_not_do_is_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        raw_list_call(object(), "/api/v1/namespaces")(**kwargs)  # type: ignore[arg-type]
