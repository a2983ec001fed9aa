"""The simulator's worker pool: heartbeats first, without starving deletions and pod creations."""

from __future__ import annotations

import functools
import threading
import time
from concurrent import futures

import pytest

from hack.simulator import BULK, DELETION, HEARTBEAT, _PriorityPool

WAIT = 10.0  # seconds a test waits for work it expects to run


def test_a_deletion_runs_while_heartbeats_keep_every_worker_busy() -> None:
    pool = _PriorityPool(4, "test")
    try:
        heartbeats_done: list[int] = []
        lock = threading.Lock()

        def heartbeat(number: int) -> None:
            time.sleep(0.005)
            with lock:
                heartbeats_done.append(number)

        heartbeats = [pool.submit(HEARTBEAT, functools.partial(heartbeat, number)) for number in range(400)]

        def deletion() -> int:
            with lock:
                return len(heartbeats_done)

        heartbeats_before_deletion = pool.submit(DELETION, deletion).result(WAIT)
        futures.wait(heartbeats, WAIT)
        # In priority order alone it would have waited for all 400.
        assert heartbeats_before_deletion < 200
        assert len(heartbeats_done) == 400
    finally:
        pool.shutdown()


@pytest.mark.parametrize("workers", [1, 2, 3], ids=lambda workers: f"{workers} worker(s)")
def test_below_four_workers_work_is_taken_strictly_by_priority(workers: int) -> None:
    pool = _PriorityPool(workers, "test")
    try:
        gate = threading.Event()
        blockers = [pool.submit(HEARTBEAT, lambda: gate.wait(WAIT)) for _ in range(workers)]
        order: list[str] = []
        submitted = [
            pool.submit(priority, functools.partial(order.append, label))
            for priority, label in [
                (BULK, "bulk"),
                (DELETION, "deletion"),
                (HEARTBEAT, "heartbeat"),
                (BULK, "bulk 2"),
                (HEARTBEAT, "heartbeat 2"),
            ]
        ]
        # Every worker is held on a blocker, so nothing above has started yet.
        assert order == []
        gate.set()
        futures.wait(blockers, WAIT)
        futures.wait(submitted, WAIT)
        if workers == 1:
            assert order == ["heartbeat", "heartbeat 2", "deletion", "bulk", "bulk 2"]
        else:
            assert sorted(order) == sorted(["heartbeat", "heartbeat 2", "deletion", "bulk", "bulk 2"])
    finally:
        pool.shutdown()


@pytest.mark.parametrize(
    ("freed_worker", "expected"),
    [
        ("test-0", ["deletion", "bulk", "heartbeat"]),  # the reserved one: other work first
        ("test-1", ["heartbeat", "deletion", "bulk"]),
        ("test-3", ["heartbeat", "deletion", "bulk"]),
    ],
    ids=[
        "a reserved worker takes deletions, then bulk work, then heartbeats",
        "an ordinary worker takes heartbeats first",
        "the last ordinary worker takes heartbeats first",
    ],
)
def test_which_work_a_freed_worker_takes(freed_worker: str, expected: list[str]) -> None:
    pool = _PriorityPool(4, "test")
    gates: dict[str, threading.Event] = {}
    all_held = threading.Condition()

    def hold() -> None:
        gate = threading.Event()
        with all_held:
            gates[threading.current_thread().name] = gate
            all_held.notify_all()
        gate.wait(WAIT)

    try:
        blockers = [pool.submit(HEARTBEAT, hold) for _ in range(4)]
        with all_held:
            assert all_held.wait_for(lambda: len(gates) == 4, WAIT)
        order: list[str] = []
        submitted = [
            pool.submit(priority, functools.partial(order.append, label))
            for priority, label in [(HEARTBEAT, "heartbeat"), (BULK, "bulk"), (DELETION, "deletion")]
        ]
        gates[freed_worker].set()
        futures.wait(submitted, WAIT)
        assert order == expected  # the freed worker ran all three while the others were held
    finally:
        for gate in gates.values():
            gate.set()
        futures.wait(blockers, WAIT)
        pool.shutdown()


def test_shutdown_finishes_the_queued_work_first() -> None:
    pool = _PriorityPool(2, "test")
    done: list[int] = []
    submitted = [pool.submit(BULK, functools.partial(done.append, number)) for number in range(50)]
    pool.shutdown()
    assert all(future.done() for future in submitted)
    assert sorted(done) == list(range(50))


def test_work_submitted_after_shutdown_is_refused() -> None:
    pool = _PriorityPool(2, "test")
    pool.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(HEARTBEAT, lambda: None)


def test_a_failing_call_sets_its_future_and_the_worker_goes_on() -> None:
    pool = _PriorityPool(1, "test")
    try:

        def fail() -> None:
            raise ValueError("boom")

        failed = pool.submit(DELETION, fail)
        with pytest.raises(ValueError, match="boom"):
            failed.result(WAIT)
        assert pool.submit(DELETION, lambda: 42).result(WAIT) == 42
    finally:
        pool.shutdown()
