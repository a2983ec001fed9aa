"""Which Kubernetes a suite runs against, for tests whose expectation differs between the versions the
project supports (hack/local-cluster.sh --kubernetes: 1.37 by default, 1.20 the old end)."""

from __future__ import annotations

import functools

from kubernetes import client


@functools.cache
def _minor_of(host: str, api_client: client.ApiClient) -> int:
    info = client.VersionApi(api_client).get_code()
    return int("".join(ch for ch in info.minor if ch.isdigit()))


def server_minor(api_client: client.ApiClient) -> int:
    """The apiserver's minor version (20 for 1.20.2, 37 for 1.37.2), asked once per server."""
    return _minor_of(api_client.configuration.host, api_client)
