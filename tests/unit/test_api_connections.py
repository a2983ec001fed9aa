"""The controller's connection pool is sized to the threads that call the API (runner.api_connections)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.kube.client import make_api_client
from controller.node_lifecycle import NO_SCHEDULE_WORKERS, POD_WORKERS
from controller.options import parse_options
from controller.runner import api_connections
from tests.unit.test_informer_store import KUBECONFIG

# Threads besides the workers: an informer per resource (nodes, pods, leases, + namespaces with the
# backfill), an event recorder per controller, the leader elector.
CASES = [
    ("every controller", [], 4 + 3 + 1 + (8 + 1) + (NO_SCHEDULE_WORKERS + POD_WORKERS + 1) + 1),
    ("more eviction workers, more connections", ["--taint-eviction-workers=20"],
     4 + 3 + 1 + (20 + 1) + (NO_SCHEDULE_WORKERS + POD_WORKERS + 1) + 1),
    ("the taint eviction controller alone", ["--controllers=taint-eviction-controller",
                                             "--backfill-default-tolerations=false"], 3 + 1 + 1 + (8 + 1)),
    ("node lifecycle alone", ["--controllers=nodelifecycle", "--backfill-default-tolerations=false"],
     3 + 1 + 1 + (NO_SCHEDULE_WORKERS + POD_WORKERS + 1)),
]


@pytest.mark.parametrize(("flags", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_the_pool_holds_a_connection_for_every_thread_that_calls_the_api(flags: list[str], expected: int) -> None:
    assert api_connections(parse_options(flags)) == expected


def test_the_client_keeps_as_many_connections_as_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    api = make_api_client(str(path), connections=37)
    try:
        assert api.rest_client.pool_manager.connection_pool_kw["maxsize"] == 37
    finally:
        api.close()
