"""Taint writes against the informer's cached node (KubeNodeLifecycleApi.swap_taints), on the real apiserver.

The first attempt writes against the cached view, as upstream's first try reads the apiserver's
cache; a stale view costs a 409 and a fresh read, never a lost edit; a view that sees nothing to
change is not trusted to skip the write.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client

from controller.nodelifecycle.api import KubeNodeLifecycleApi
from controller.objects import NodeView, node_view
from kube.fence import WriteFence
from tests.integration.kube import LocalCluster, raw
from tests.support.fakes import MemoryStore

NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
OPERATOR = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


@dataclass(frozen=True)
class Case:
    name: str
    start_taints: list[dict]
    # Runs after the cache was filled: what happens to the node before our write reaches the API.
    meanwhile: Callable[[client.CoreV1Api, str], None]
    cached: bool
    add: list[dict]
    remove: list[dict]
    want_taints: set[tuple[str, str]]
    want_reads: int


def nothing(core: client.CoreV1Api, name: str) -> None:
    pass


def operator_taints(core: client.CoreV1Api, name: str) -> None:
    node = raw(core.read_node, name)
    core.patch_node(name, {"spec": {"taints": (node["spec"].get("taints") or []) + [OPERATOR]}})


def not_ready_added(core: client.CoreV1Api, name: str) -> None:
    core.patch_node(name, {"spec": {"taints": [NOT_READY]}})


CASES = [
    Case(
        "a fresh cached node is written with one PATCH and no GET",
        [NOT_READY],
        nothing,
        cached=True,
        add=[],
        remove=[NOT_READY],
        want_taints=set(),
        want_reads=0,
    ),
    Case(
        "a stale cached node conflicts and the write is redone on a fresh read, keeping the operator's taint",
        [NOT_READY],
        operator_taints,
        cached=True,
        add=[],
        remove=[NOT_READY],
        want_taints={(OPERATOR["key"], "NoSchedule")},
        want_reads=1,
    ),
    Case(
        "a cached node that needs no write is read live before the write is skipped",
        [],
        not_ready_added,
        cached=True,
        add=[],
        remove=[NOT_READY],
        want_taints=set(),
        want_reads=1,
    ),
    Case(
        "without a cached node the node is read live",
        [NOT_READY],
        nothing,
        cached=False,
        add=[],
        remove=[NOT_READY],
        want_taints=set(),
        want_reads=1,
    ),
]


@pytest.fixture
def core(local_cluster: LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(local_cluster.api_client)


@pytest.fixture
def node_name(core: client.CoreV1Api) -> Iterator[str]:
    name = f"taint-writes-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        core.delete_node(name)
    except client.ApiException as error:
        if error.status != 404:
            raise


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_taint_write_against_the_cache(
    case: Case, local_cluster: LocalCluster, core: client.CoreV1Api, node_name: str
) -> None:
    create_node(core, node_name, case.start_taints)
    cache: MemoryStore[NodeView] = MemoryStore()
    if case.cached:
        cache.items[node_name] = node_view(raw(core.read_node, node_name))
    case.meanwhile(core, node_name)
    api = KubeNodeLifecycleApi(local_cluster.api_client, WriteFence.without_lease(), cache=cache)
    reads = count_calls(api, "read_node")

    assert api.swap_taints(node_name, case.add, case.remove)

    taints = raw(core.read_node, node_name)["spec"].get("taints") or []
    assert {(t["key"], t["effect"]) for t in taints} == case.want_taints
    assert reads() == case.want_reads


def test_a_node_the_api_no_longer_has_is_nothing_to_write(
    local_cluster: LocalCluster, core: client.CoreV1Api, node_name: str
) -> None:
    create_node(core, node_name, [NOT_READY])
    cache: MemoryStore[NodeView] = MemoryStore()
    cache.items[node_name] = node_view(raw(core.read_node, node_name))
    core.delete_node(node_name)
    api = KubeNodeLifecycleApi(local_cluster.api_client, WriteFence.without_lease(), cache=cache)

    assert api.swap_taints(node_name, [], [NOT_READY]) is None


def create_node(core: client.CoreV1Api, name: str, taints: list[dict]) -> None:
    """A node with exactly `taints` (the apiserver's TaintNodesByCondition gives new nodes not-ready)."""
    core.create_node(client.V1Node.model_validate({"metadata": {"name": name}}))
    core.patch_node(name, {"spec": {"taints": taints or None}})
    assert (raw(core.read_node, name)["spec"].get("taints") or []) == taints


def count_calls(api: KubeNodeLifecycleApi, method: str) -> Callable[[], int]:
    """Count the CoreV1Api `method` calls the API edge makes (wrapping its client's bound method)."""
    calls = [0]
    core = api._core  # the edge's own client: the only place its requests can be counted
    real = getattr(core, method)

    def counted(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        return real(*args, **kwargs)

    setattr(core, method, counted)
    return lambda: calls[0]


def test_taint_writes_reuse_the_pools_connection(
    local_cluster: LocalCluster, core: client.CoreV1Api, node_name: str
) -> None:
    """An unread response took its connection with it: every write opened a new TLS connection."""
    create_node(core, node_name, [])
    api = KubeNodeLifecycleApi(local_cluster.api_client, WriteFence.without_lease())
    opened = count_connections(local_cluster.api_client)
    before = opened()
    for _ in range(10):
        assert api.swap_taints(node_name, [NOT_READY], [])
        assert api.swap_taints(node_name, [], [NOT_READY])
    assert opened() - before <= 1


def count_connections(api_client: client.ApiClient) -> Callable[[], int]:
    """Connections urllib3 has opened so far, over every pool of the client."""
    pools = api_client.rest_client.pool_manager.pools
    return lambda: sum(pool.num_connections for pool in pools._container.values())
