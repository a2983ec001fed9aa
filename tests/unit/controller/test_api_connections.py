"""The controller's connection pool is sized to the threads that call the API (runner.api_connections).

The table spells the count out; the second test holds it to the threads the runner really starts
(assemble + Assembly.start, with Thread.start recorded instead of run), so a new worker pool, informer
or recorder that the count misses fails here.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from controller.nodelifecycle.monitor import NO_SCHEDULE_WORKERS, POD_WORKERS
from controller.options import parse_options
from controller.runner import api_connections, assemble
from kube.client import make_api_client
from kube.fence import WriteFence
from kube.identity import CONTROLLER
from tests.unit.kube.test_informer_store import KUBECONFIG

NODE_LIFECYCLE_THREADS = 1 + NO_SCHEDULE_WORKERS + POD_WORKERS  # the monitor loop and its two worker pools
OUT_OF_SERVICE_THREADS = 1 + 1 + 1  # its VolumeAttachment informer, its event recorder, its worker
# Started by the runner but never calling the API: the taint eviction's timer loop only queues keys.
API_SILENT_THREADS = {"eviction-timers"}

# Besides the controllers' own threads: an informer per resource (nodes and pods; + node Leases
# with the node lifecycle, + namespaces with the backfill or the taint eviction, + VolumeAttachments with the
# out-of-service handling), an event recorder per controller, the leader elector (with --leader-elect, the default).
CASES = [
    ("every controller", [], 4 + 3 + 1 + NODE_LIFECYCLE_THREADS + 8 + 1 + OUT_OF_SERVICE_THREADS),
    (
        "more eviction workers, more connections",
        ["--taint-eviction-workers=20"],
        4 + 3 + 1 + NODE_LIFECYCLE_THREADS + 20 + 1 + OUT_OF_SERVICE_THREADS,
    ),
    (
        "without leader election",
        ["--leader-elect=false"],
        4 + 3 + NODE_LIFECYCLE_THREADS + 8 + 1 + OUT_OF_SERVICE_THREADS,
    ),
    (
        "the taint eviction controller alone",
        ["--controllers=taint-eviction-controller", "--backfill-default-tolerations=false"],
        3 + 1 + 1 + 8,
    ),
    (
        "node lifecycle alone",
        ["--controllers=nodelifecycle", "--backfill-default-tolerations=false"],
        3 + 1 + 1 + NODE_LIFECYCLE_THREADS,
    ),
    ("the backfill alone", ["--controllers=toleration-backfill"], 3 + 1 + 1 + 1),
    (
        "the out-of-service handling alone",
        ["--controllers=out-of-service", "--backfill-default-tolerations=false"],
        2 + 1 + OUT_OF_SERVICE_THREADS,
    ),
    (
        "the out-of-service handling alone, auto-fencing: + node Leases",
        ["--controllers=out-of-service", "--backfill-default-tolerations=false", "--auto-fence-after=10m"],
        2 + 1 + OUT_OF_SERVICE_THREADS + 1,
    ),
    (
        "every controller, auto-fencing: the node Leases are watched already",
        ["--auto-fence-after=10m"],
        4 + 3 + 1 + NODE_LIFECYCLE_THREADS + 8 + 1 + OUT_OF_SERVICE_THREADS,
    ),
]
FLAGS = [case[1:] for case in CASES]
IDS = [case[0] for case in CASES]


@pytest.mark.parametrize(("flags", "expected"), FLAGS, ids=IDS)
def test_the_pool_holds_a_connection_for_every_thread_that_calls_the_api(flags: list[str], expected: int) -> None:
    assert api_connections(parse_options(flags)) == expected


@pytest.mark.parametrize(("flags", "expected"), FLAGS, ids=IDS)
def test_the_count_is_the_threads_the_runner_starts(
    flags: list[str], expected: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = parse_options(flags)
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    api = make_api_client(str(path), component=CONTROLLER, connections=api_connections(options))
    started: list[str] = []
    monkeypatch.setattr(threading.Thread, "start", lambda thread: started.append(thread.name))
    try:
        assembly = assemble(api, options, WriteFence.without_lease())
        assembly.start(threading.Event())
        calling = [name for name in started if name not in API_SILENT_THREADS]
        leader_elector = 1 if options.leader_elect else 0  # runs on the main thread
        assert len(calling) + leader_elector == api_connections(options) == expected
        assert len([name for name in started if name.startswith("informer-")]) == len(assembly.informers.all())
        assert api.rest_client.pool_manager.connection_pool_kw["maxsize"] == expected
    finally:
        api.close()
