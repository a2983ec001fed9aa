"""controller.tainteviction.timers and controller.workqueue (upstream timed_workers_test and client-go
workqueue rules)."""

import threading

from hypothesis import given
from hypothesis import strategies as st

from controller.clock import FakeClock
from controller.tainteviction.timers import TimerHeap
from controller.workqueue import ShutDown, WorkQueue


def test_due_keys_come_out_earliest_first():
    timers = TimerHeap()
    for key, at in [("c", 3), ("a", 1), ("b", 2), ("d", 10)]:
        timers.schedule(key, at)
    assert timers.pop_due(5) == ["a", "b", "c"]
    assert timers.next_deadline() == 10


def test_a_cancelled_key_never_fires():
    timers = TimerHeap()
    for key in "abcde":
        timers.schedule(key, 1)
    timers.cancel("b")
    timers.cancel("d")
    assert timers.pop_due(1) == ["a", "c", "e"]


def test_cancel_and_re_add_fires_once():
    timers = TimerHeap()
    timers.schedule("a", 1)
    timers.cancel("a")
    timers.schedule("a", 2)
    assert timers.pop_due(5) == ["a"]
    assert timers.pop_due(5) == []


def test_rescheduling_moves_a_key_both_ways():
    timers = TimerHeap()
    timers.schedule("a", 10)
    timers.schedule("a", 5)
    assert timers.pop_due(6) == ["a"]
    timers.schedule("b", 5)
    timers.schedule("b", 50)
    assert timers.pop_due(10) == []
    assert timers.deadline("b") == 50


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.one_of(st.none(), st.integers(0, 100))), max_size=200))
def test_the_heap_always_agrees_with_the_latest_deadline_of_each_key(operations):
    timers = TimerHeap()
    expected: dict[str, int] = {}
    for key, at in operations:
        if at is None:
            timers.cancel(key)
            expected.pop(key, None)
        else:
            timers.schedule(key, at)
            expected[key] = at
    due = timers.pop_due(50)
    assert sorted(due) == sorted(k for k, at in expected.items() if at <= 50)
    assert [expected[k] for k in due] == sorted(expected[k] for k in due)
    assert len(timers) == sum(1 for at in expected.values() if at > 50)


def test_a_queued_key_is_de_duplicated():
    queue = WorkQueue(FakeClock())
    for _ in range(3):
        queue.add("a")
    queue.add("b")
    assert [queue.get(timeout=0), queue.get(timeout=0), queue.get(timeout=0)] == ["a", "b", None]


def test_a_key_added_while_processing_comes_back_only_after_done():
    queue = WorkQueue(FakeClock())
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a")
    assert queue.get(timeout=0) is None  # never handed to a second worker while the first holds it
    queue.done("a")
    assert queue.get(timeout=0) == "a"


def test_rate_limited_keys_come_back_after_their_backoff():
    clock = FakeClock()
    queue = WorkQueue(clock, base_delay=1, max_delay=8)
    queue.add_rate_limited("a")
    assert queue.get(timeout=0) is None
    clock.advance(1)
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    assert queue.add_rate_limited("a") == 2
    queue.forget("a")
    assert queue.backoff("a") == 1


def test_shut_down_wakes_a_blocked_worker():
    queue = WorkQueue()
    outcome = []

    def worker():
        try:
            queue.get()
        except ShutDown:
            outcome.append("shut down")

    thread = threading.Thread(target=worker)
    thread.start()
    queue.shut_down()
    thread.join(timeout=5)
    assert outcome == ["shut down"]
