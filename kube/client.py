"""Build the Kubernetes API client, and the timeouts and content types every call should carry.

Each ApiClient gets its own Configuration: the client's loaders would otherwise write into a
process-wide default, which tests and a second cluster connection would silently share. Each also
gets the User-Agent of the process that makes it (kube/identity.py): `component` is required, so
no client of ours goes out as the generator's anonymous `OpenAPI-Generator/...`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from kubernetes import client, config

from kube.acting_term import acting_term, stamped_user_agent
from kube.errors import ChangedSinceRead, api_message, describe_error, is_conflict, is_invalid, is_not_found
from kube.fence import WriteFence
from kube.identity import user_agent
from kube.request import response_json

# Without a client-side timeout a request to an unreachable or frozen apiserver blocks forever.
CONNECT_TIMEOUT = 5
# (connect, read) for ordinary calls; pass as `_request_timeout=REQUEST_TIMEOUT`.
REQUEST_TIMEOUT = (CONNECT_TIMEOUT, 30)
# (connect, read) for the calls a controller's loop or worker waits on (writes, live reads, events):
# during an apiserver brownout one call must not hold a monitor pass or a worker for long.
WORKER_REQUEST_TIMEOUT = (CONNECT_TIMEOUT, 15)
# (connect, read) for a LIST that may be large (every pod of a node, in one page).
LIST_REQUEST_TIMEOUT = (CONNECT_TIMEOUT, 60)
# urllib3 retries inside one call. Its default (3) repeats connect failures and timed-out GETs
# silently, so a frozen apiserver would hold a call for 4 x 5 s before it failed; one retry still covers a
# keep-alive connection the server closed while idle. Callers (the informer) back off themselves.
REQUEST_RETRIES = 1

# PATCH content types (`_content_type=`).
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


def read_node_json(
    core: client.CoreV1Api, name: str, timeout: tuple[float, float] = REQUEST_TIMEOUT
) -> dict[str, Any] | None:
    """The Node as the API has it now, as raw JSON; None when it is gone (404); other errors raise."""
    try:
        response = core.read_node(name, _preload_content=False, _request_timeout=timeout)
    except client.ApiException as error:
        if is_not_found(error):
            return None
        raise
    node: dict[str, Any] = response_json(response)
    return node


def release(response: Any) -> None:
    """Read what is left of a response asked for with `_preload_content=False` and hand its connection
    back to the pool. Left unread, the connection goes with the response and the next request opens
    a new TLS connection: a handshake for every taint write, event and pod deletion."""
    response.read()
    response.release_conn()


def strategic_merge(patch: Callable[..., Any], *names: str, body: dict[str, Any]) -> Any:
    """`patch(*names, body)`, a generated patch method, as a controller's worker writes: a strategic
    merge patch within WORKER_REQUEST_TIMEOUT, its answer left unread (`release` or `write_unless_gone`)."""
    return patch(
        *names, body, _content_type=STRATEGIC_MERGE, _preload_content=False, _request_timeout=WORKER_REQUEST_TIMEOUT
    )


def write_unless_gone(send: Callable[[], Any], *, replaced_is_gone: bool = False) -> Literal[True] | None:
    """Send a write whose answer is not needed (a generated method called with
    `_preload_content=False`): True once applied; None when the object is gone (404), or with
    `replaced_is_gone` also when a uid precondition failed (409: another object has the name now);
    any other failure raises."""
    try:
        release(send())
    except client.ApiException as error:
        if is_not_found(error) or (replaced_is_gone and is_conflict(error)):
            return None
        raise
    return True


def json_patch_unless_gone(send: Callable[[], Any]) -> Literal[True] | None:
    """`write_unless_gone` for a JSON patch read-then-written: a 409, or a 422 from its failed `test`
    op, raises ChangedSinceRead so the caller reads the object again and decides afresh."""
    try:
        return write_unless_gone(send)
    except client.ApiException as error:
        if is_conflict(error) or is_invalid(error):
            raise ChangedSinceRead(f"HTTP {error.status}: {api_message(error)}") from error
        raise


class ClientConfigError(ValueError):
    """The client configuration (kubeconfig or in-cluster) could not be loaded."""


def make_api_client(
    kubeconfig: str | None, *, component: str, connections: int | None = None, stamp_terms: bool = False
) -> client.ApiClient:
    """An ApiClient from `kubeconfig` if given; else the in-cluster service account; else
    $KUBECONFIG or ~/.kube/config. Raises ClientConfigError with a one-line message.

    `component`: the process, as its User-Agent names it (kube/identity.py, e.g. CONTROLLER).

    `connections`: how many requests the process may have in flight at once (its threads that call
    the API). urllib3 keeps only that many connections open; the client's default (5 per CPU) is
    smaller than a controller's workers plus its watches, and a request beyond it opens a TLS
    connection that is thrown away afterwards.

    `stamp_terms`: each request names, in its User-Agent, the leadership term its unit of work acts for
    (kube/acting_term.py), for the controller, whose writes the audit log judges by term."""
    configuration = client.Configuration()
    if connections is not None:
        configuration.connection_pool_maxsize = connections
    if kubeconfig:
        _load_kubeconfig(kubeconfig, configuration)
        return _api_client(configuration, component, stamp_terms)
    try:
        config.load_incluster_config(client_configuration=configuration)
        return _api_client(configuration, component, stamp_terms)
    except config.ConfigException as in_cluster_error:
        # Read KUBECONFIG now: the client's own default is frozen when the module is imported.
        fallback = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        if not _any_file(fallback):
            raise ClientConfigError(
                f"not running in a cluster ({describe_error(in_cluster_error)}) and no kubeconfig at {fallback}"
            ) from in_cluster_error
        _load_kubeconfig(fallback, configuration)
        return _api_client(configuration, component, stamp_terms)


def kubeconfig_user(kubeconfig: str | None) -> str | None:
    """The user of the current context of `kubeconfig` (else $KUBECONFIG, else ~/.kube/config), to say who
    made a change; None when there is no such file or it names none. Reads the file only; never connects."""
    paths = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    first = next((path for path in paths.split(os.pathsep) if path and Path(path).is_file()), None)
    if first is None:
        return None
    try:
        _contexts, current = config.list_kube_config_contexts(config_file=first)
    except Exception:  # the loader raises YAML, key and type errors as well as ConfigException
        return None
    user = ((current or {}).get("context") or {}).get("user")
    return str(user) if user else None


def in_cluster_available() -> bool:
    """Whether this process runs in a pod with a service account (reads files only; never connects)."""
    try:
        config.load_incluster_config(client_configuration=client.Configuration())
    except config.ConfigException:
        return False
    return True


def make_in_cluster_client(*, component: str) -> client.ApiClient:
    """An ApiClient from the pod's service account only (no kubeconfig fallback); raises ConfigException."""
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)
    return _api_client(configuration, component)


READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class TermStampingApiClient(client.ApiClient):
    """An ApiClient whose requests name the term their unit of work acts for in the User-Agent. The
    generated client lets no request override a default header, so the stamp is added after them.

    With `fence` set (the controller's write fence), each write of a unit of work passes it at the moment it
    is sent and is counted until answered, so the elector releases the Lease only once none is on its way
    (kube/fence.py). Reads, and requests of no unit of work (the elector's own), go as they are."""

    fence: WriteFence | None = None

    def param_serialize(self, *args: Any, **kwargs: Any) -> Any:
        method, url, headers, body, post_params = super().param_serialize(*args, **kwargs)
        term = acting_term()
        if term is not None and headers:
            headers = {**headers, "User-Agent": stamped_user_agent(headers.get("User-Agent", ""), term)}
        return method, url, headers, body, post_params

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        fence = self.fence
        if fence is None or method.upper() in READ_METHODS or acting_term() is None:
            return super().call_api(method, url, header_params, body, post_params, _request_timeout)
        with fence.sending(f"{method.upper()} {urlsplit(url).path}"):
            return super().call_api(method, url, header_params, body, post_params, _request_timeout)


def _api_client(configuration: client.Configuration, component: str, stamp_terms: bool = False) -> client.ApiClient:
    configuration.retries = REQUEST_RETRIES
    api_client = (TermStampingApiClient if stamp_terms else client.ApiClient)(configuration)
    api_client.user_agent = user_agent(component)
    return api_client


def _any_file(paths: str) -> bool:
    """KUBECONFIG may list several files (merged by the loader); one must exist."""
    return any(Path(path).is_file() for path in paths.split(os.pathsep) if path)


def _load_kubeconfig(paths: str, configuration: client.Configuration) -> None:
    if not _any_file(paths):
        raise ClientConfigError(f"kubeconfig {paths} does not exist or is not a file")
    try:
        # persist_config=False: never write refreshed credentials back into the user's file.
        config.load_kube_config(config_file=paths, client_configuration=configuration, persist_config=False)
    except Exception as error:  # the loader raises YAML, key and type errors as well as ConfigException
        raise ClientConfigError(f"invalid kubeconfig {paths}: {describe_error(error)}") from error
