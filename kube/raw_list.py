"""A list-and-watch call for kube/informer.py made with kube/request.py's raw request, for a process
that must not load a generated API class to watch one resource: `CoreV1Api` and its models would take
a large share of each gunicorn worker's memory (the webhook's namespace cache; bench/REPORT.md).

It takes the keyword arguments the informer gives a generated list method and returns, as such a
method does with `_preload_content=False`, the urllib3 response unread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client

from kube.request import send

# the generated methods' keyword -> the API's query parameter
QUERY_PARAMETERS = {
    "watch": "watch",
    "resource_version": "resourceVersion",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "timeout_seconds": "timeoutSeconds",
    "limit": "limit",
    "_continue": "continue",
    "label_selector": "labelSelector",
    "field_selector": "fieldSelector",
}
DEFAULT_TIMEOUT = (5.0, 60.0)


def raw_list_call(api_client: client.ApiClient, path: str) -> Callable[..., Any]:
    """A stand-in for e.g. `CoreV1Api(api_client).list_namespace` that lists `path` (/api/v1/namespaces)."""

    def call(_preload_content: bool = False, _request_timeout: Any = DEFAULT_TIMEOUT, **kwargs: Any) -> Any:
        if _preload_content:
            raise TypeError("raw_list_call only streams: pass _preload_content=False")
        unknown = set(kwargs) - QUERY_PARAMETERS.keys()
        if unknown:
            raise TypeError(f"raw_list_call: unexpected arguments {sorted(unknown)}")
        query = [(QUERY_PARAMETERS[key], _text(value)) for key, value in kwargs.items() if value is not None]
        return send(api_client, "GET", path, timeout=_request_timeout, query=query).response

    return call


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
