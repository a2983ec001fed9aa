"""One API request with raw JSON in and out, for callers the generated methods do not serve.

The generated methods push bodies through the client's pydantic models, which cost CPU and
rewrite timestamps: a MicroTime whose microseconds are zero is re-serialised as `...:05+00:00`,
which the apiserver refuses (400). This sends the body as given and parses the answer as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, Required, TypedDict, Unpack, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

JSON = "application/json"

Timeout = float | tuple[float, float]


class RawResponse(Protocol):
    @property
    def data(self) -> bytes: ...


def response_json(response: object) -> Any:
    """The JSON of a generated method's answer when called with `_preload_content=False`. The
    client's types promise a model object then; what comes back is the raw response, body unparsed."""
    return json.loads(cast(RawResponse, response).data)


def send(
    api_client: client.ApiClient,
    method: str,
    path: str,
    *,
    timeout: Timeout,
    path_params: Mapping[str, str] | None = None,
    query: Sequence[tuple[str, str]] | None = None,
    body: Any = None,
    content_type: str = JSON,
) -> Any:
    """Send one request and return the client's response unread: its `.response` is the urllib3
    stream (for a watch).

    A response that is not 2xx is read and raised as the client's ApiException (kube/errors.py
    tells what it means), so a caller only ever streams a successful answer.
    """
    request = api_client.param_serialize(
        method=method,
        resource_path=path,
        path_params=dict(path_params or {}),
        query_params=list(query or []),
        header_params={"Accept": JSON, "Content-Type": content_type},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api_client.call_api(*request, _request_timeout=timeout)
    if not 200 <= response.status <= 299:
        response.read()
        raise ApiException.from_response(http_resp=response, body=None, data=None)
    return response


class SendOptions(TypedDict, total=False):
    """`send`'s keyword arguments, as `request_json` takes them on."""

    timeout: Required[Timeout]
    path_params: Mapping[str, str] | None
    query: Sequence[tuple[str, str]] | None
    body: Any
    content_type: str


def request_json(api_client: client.ApiClient, method: str, path: str, **options: Unpack[SendOptions]) -> Any:
    """Send one request (`send`) and return its JSON answer ({} for an empty body); raise ApiException if not 2xx."""
    response = send(api_client, method, path, **options)
    response.read()
    return json.loads(response.data) if response.data else {}
