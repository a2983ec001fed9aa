"""controller.worker: the one worker contract (Done, Retry, After) acted on by `process_next` alone, and
the heartbeat each component's workers stamp (upstream sample-controller's processNextWorkItem)."""

from __future__ import annotations

import logging
import threading

import pytest

from controller.clock import FakeClock
from controller.worker import (
    IDLE_WAIT,
    After,
    Done,
    Heartbeat,
    Retry,
    SyncResult,
    heartbeat_bound,
    process_next,
    run_worker,
)
from controller.workqueue import WorkQueue
from tests.support.health import wait_until

log = logging.getLogger("taintkeeper.testing")


def process(queue: WorkQueue, result: SyncResult) -> bool:
    return process_next(queue, lambda _key: result, what="testing", log=log, timeout=0)


def test_retry_requeues_with_a_doubling_backoff_and_logs_why(caplog):
    clock = FakeClock()
    queue = WorkQueue(clock, base_delay=1, max_delay=8)
    queue.add("a")
    assert process(queue, Retry("the API said no"))
    assert "testing of a will be retried in 1.00s: the API said no" in caplog.text
    assert queue.get(timeout=0) is None
    clock.advance(1)
    assert process(queue, Retry("again"))
    clock.advance(1)
    assert queue.get(timeout=0) is None  # the second failure waits 2 s
    clock.advance(1)
    assert process(queue, Done())
    assert queue.backoff("a") == 1  # Done forgot the failures
    assert queue.get(timeout=0) is None


def test_after_forgets_the_backoff_and_comes_back_after_its_delay():
    clock = FakeClock()
    queue = WorkQueue(clock, base_delay=1, max_delay=8)
    queue.add("a")
    assert process(queue, Retry("failed"))
    clock.advance(1)
    assert process(queue, After(5, "too soon"))
    assert queue.backoff("a") == 1
    clock.advance(4.9)
    assert queue.get(timeout=0) is None
    clock.advance(0.1)
    assert queue.get(timeout=0) == "a"


def test_no_key_within_the_timeout_is_no_sync():
    queue = WorkQueue(FakeClock())
    calls: list[str] = []
    assert not process_next(queue, lambda key: calls.append(key) or Done(), what="testing", log=log, timeout=0)
    assert calls == []


def test_the_worker_loop_retries_a_crashed_key_and_stops_on_shut_down(caplog):
    queue = WorkQueue(base_delay=0.01, max_delay=0.02)
    heartbeat = Heartbeat(FakeClock(), 60, "testing")
    seen: list[str] = []
    crashes: list[int] = []

    def sync(key: str) -> SyncResult:
        seen.append(key)
        if seen.count(key) == 1:
            raise RuntimeError("a bug")
        return Done()

    stop = threading.Event()
    worker = threading.Thread(
        target=run_worker,
        args=(queue, sync, stop),
        kwargs={"what": "testing", "log": log, "heartbeat": heartbeat, "on_crash": lambda: crashes.append(1)},
    )
    worker.start()
    queue.add("a")
    wait_until(lambda: seen.count("a") == 2, "the retry")
    queue.shut_down()
    worker.join(timeout=5)
    assert not worker.is_alive()
    assert seen == ["a", "a"]
    assert crashes == [1]
    assert "testing of a failed unexpectedly" in caplog.text
    assert heartbeat.stuck() is None  # a worker that returned is not expected to beat


@pytest.fixture
def hanging_worker():
    """A worker on a fake clock whose sync of "hang" waits until the test lets it go."""
    clock = FakeClock()
    queue = WorkQueue(clock)
    heartbeat = Heartbeat(clock, 30, "testing")
    entered, release = threading.Event(), threading.Event()

    def sync(key: str) -> SyncResult:
        if key == "hang":
            entered.set()
            release.wait(10)
        return Done()

    stop = threading.Event()
    worker = threading.Thread(
        target=run_worker,
        args=(queue, sync, stop),
        kwargs={"what": "testing", "log": log, "heartbeat": heartbeat},
        name="testing-worker",
    )
    worker.start()
    yield clock, queue, heartbeat, entered, release
    release.set()
    stop.set()
    queue.shut_down()
    worker.join(timeout=5)


def test_a_worker_in_a_sync_longer_than_the_bound_is_stuck_until_it_finishes(hanging_worker):
    clock, queue, heartbeat, entered, release = hanging_worker
    queue.add("hang")
    assert entered.wait(5)
    clock.advance(30)
    assert heartbeat.stuck() is None  # at the bound: not yet
    clock.advance(1)
    assert heartbeat.stuck() == (
        "testing: worker testing-worker has neither finished a sync nor waited idle in 31s (limit 30s)"
    )
    release.set()
    wait_until(lambda: heartbeat.stuck() is None, "the finished sync's stamp")


def test_an_idle_worker_is_never_stuck(hanging_worker):
    clock, _queue, heartbeat, _entered, _release = hanging_worker
    for _ in range(5):  # minutes with nothing to do: each idle wait ends with a stamp
        clock.advance(60)
        wait_until(lambda: heartbeat.stuck() is None, "the idle wait's stamp")


def test_a_heartbeat_bound_covers_every_request_at_its_timeouts_then_an_idle_wait():
    assert heartbeat_bound(2, waiting=0.5) == 2 * (5 + 15) + 0.5 + IDLE_WAIT + 10
