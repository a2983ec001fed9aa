"""controller.worker: the one worker contract (Done, Retry, After) acted on by `process_next` alone, and
the heartbeat each component's workers stamp (upstream sample-controller's processNextWorkItem)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from controller.clock import FakeClock, RealClock
from controller.worker import (
    IDLE_WAIT,
    After,
    Done,
    Heartbeat,
    Retry,
    SyncResult,
    Wakeup,
    heartbeat_bound,
    process_next,
    run_loop,
    run_worker,
)
from controller.workqueue import WorkQueue
from kube.acting_term import acting_term
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


# --- the loop contract: run_loop, a step and its Wakeup -----------------------------------------


def test_a_wakeup_notified_before_the_wait_ends_it_at_once():
    wakeup = Wakeup(RealClock())
    wakeup.notify()
    started = time.monotonic()
    wakeup.wait(30)
    assert time.monotonic() - started < 5  # not the 30 s asked: the notice came first
    waiter = threading.Thread(target=wakeup.wait, args=(30,))
    waiter.start()  # the notice was used up: this one waits until notified
    wakeup.notify()
    waiter.join(timeout=5)
    assert not waiter.is_alive()


def run_in_thread(step, heartbeat, crashes):
    stop = threading.Event()
    loop = threading.Thread(
        target=run_loop,
        args=(step, stop),
        kwargs={
            "wakeup": Wakeup(heartbeat._clock),
            "what": "testing",
            "log": log,
            "heartbeat": heartbeat,
            "on_crash": lambda: crashes.append(1),
        },
        name="testing-loop",
    )
    loop.start()
    return stop, loop


def test_a_loop_whose_steps_fail_counts_each_goes_on_and_is_stuck_past_its_bound(caplog):
    clock = FakeClock()
    heartbeat = Heartbeat(clock, 30, "testing", thread_kind="loop")
    crashes: list[int] = []

    def step() -> float:
        raise RuntimeError("a bug")

    stop, loop = run_in_thread(step, heartbeat, crashes)
    try:
        wait_until(lambda: len(crashes) >= 3, "three failed steps")
        clock.advance(31)
        wait_until(lambda: len(crashes) >= 6, "three more")
        assert heartbeat.stuck() == (
            "testing: loop testing-loop has neither finished a step nor waited idle in 31s (limit 30s)"
        )
        assert "testing failed unexpectedly" in caplog.text
    finally:
        stop.set()
        loop.join(timeout=5)
    assert not loop.is_alive()


def test_a_loop_whose_steps_return_is_never_stuck_and_stops_when_told():
    clock = FakeClock()
    heartbeat = Heartbeat(clock, 30, "testing", thread_kind="loop")
    steps: list[float] = []
    stop, loop = run_in_thread(lambda: steps.append(clock.now()) or 10.0, heartbeat, [])
    try:
        for _ in range(3):
            clock.advance(60)
            wait_until(lambda: heartbeat.stuck() is None, "a step's stamp")
    finally:
        stop.set()
        loop.join(timeout=5)
    assert not loop.is_alive() and len(steps) >= 3
    assert heartbeat.stuck() is None  # a loop that returned is not expected to beat


# --- each sync and each step acts for the term current when it started (kube/acting_term.py) ---------


def test_a_sync_acts_for_the_term_it_started_in_however_the_term_changes_while_it_runs():
    queue = WorkQueue(FakeClock())
    queue.add("a")
    held = ["T1"]
    seen: list[str | None] = []

    def sync(_key: str) -> SyncResult:
        seen.append(acting_term())
        held[0] = "T2"  # the Lease lost and won back while the sync hung in a call
        seen.append(acting_term())
        return Done()

    assert process_next(queue, sync, what="testing", log=log, timeout=0, term=lambda: held[0])
    assert seen == ["T1", "T1"]
    assert acting_term() is None  # the worker's own thread acts for no term between syncs


def test_a_loop_step_acts_for_the_term_current_when_it_started():
    clock = FakeClock()
    held: list[str | None] = [None, "T1", "T2"]
    seen: list[str | None] = []
    stop = threading.Event()

    def step() -> float:
        seen.append(acting_term())
        held.pop(0)
        if not held[1:]:
            stop.set()
        return 0.0

    run_loop(
        step,
        stop,
        wakeup=Wakeup(clock),
        what="testing",
        log=log,
        heartbeat=Heartbeat(clock, 30, "testing", thread_kind="loop"),
        term=lambda: held[0],
    )
    assert seen == [None, "T1"]
