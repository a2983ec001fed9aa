# Conformance port of upstream's RateLimitedTimedQueue unit tests, in taintkeeper's own code and words.
#
# Upstream file: kubernetes/kubernetes pkg/controller/nodelifecycle/scheduler/rate_limited_queue_test.go
#   at commit 5ce22905a86fca8fa196524c760bb403c57dca17 (the newer of the two stored versions: generic sets,
#   klog logger passed to Try, and TestSwapLimiter's "same QPS keeps the limiter" check).
#
# Mapping: upstream's package-level `now` (replaced by fake clocks in some tests) is the `now` argument that
# taintkeeper's queue takes on every call; flowcontrol.NewFakeAlwaysRateLimiter (QPS() == 1, accepts every
# call) is a token bucket of 1 qps whose burst is far larger than any test needs; ActionFunc receives
# (name, uid) instead of a TimedValue, so AddedAt/ProcessAt are checked through the queue's behaviour
# (what is due when) rather than read from the value.

from __future__ import annotations

import pytest

from controller.nodelifecycle.rate_limited_queue import RateLimitedTimedQueue
from controller.sync_result import After, Done, SyncResult

T0 = 1_800_000_000.0
MS = 0.001
ALWAYS_QPS = 1.0  # flowcontrol FakeAlwaysRateLimiter.QPS()
ALWAYS_BURST = 1_000_000


def always_queue(now: float = T0) -> RateLimitedTimedQueue:
    return RateLimitedTimedQueue(ALWAYS_QPS, now, burst=ALWAYS_BURST)


def three(queue: RateLimitedTimedQueue, start: float = T0, step: float = MS) -> None:
    """Add first, second, third, one step apart (upstream: 11111, 22222, 33333 as uids)."""
    for i, (name, uid) in enumerate((("first", "11111"), ("second", "22222"), ("third", "33333"))):
        assert queue.add(name, uid, start + (i + 1) * step)


class Recorder:
    """An ActionFunc that records what it was handed and answers `done`."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, name: str, uid: str) -> SyncResult:
        self.seen.append((name, uid))
        return Done()


def test_add_node():
    queue = always_queue()
    three(queue)
    assert len(queue) == 3
    assert queue.queued() == ["first", "second", "third"]
    assert queue.names() == {"first", "second", "third"}


@pytest.mark.parametrize(
    ("removed", "left"),
    [
        pytest.param("first", ["second", "third"], id="Remove first"),
        pytest.param("second", ["first", "third"], id="Remove second"),
        pytest.param("third", ["first", "second"], id="Remove third"),
    ],
)
def test_del_node(removed, left):
    queue = always_queue()
    three(queue, step=1.0)  # upstream's tick clock: one second per call
    assert queue.remove(removed) is True
    assert len(queue) == len(left)
    assert queue.queued() == left
    assert queue.names() == set(left)


def test_try():
    queue = always_queue()
    three(queue)
    queue.remove("second")
    record = Recorder()
    queue.try_process(record, T0 + 4 * MS)
    assert {name for name, _ in record.seen} == {"first", "third"}
    assert record.seen == [("first", "11111"), ("third", "33333")]


def test_try_ordering():
    queue = always_queue()
    three(queue)  # added at 1, 2, 3 ms
    order: list[str] = []
    calls: list[str] = []
    retried = False

    def fn(name: str, uid: str) -> SyncResult:
        nonlocal retried
        calls.append(name)
        if name == "second" and not retried:
            retried = True
            return After(2 * MS)  # retry 2 ms later: behind "third", which is already due
        order.append(name)
        return Done()

    queue.try_process(fn, T0 + 4 * MS)
    assert order == ["first", "third"]
    assert len(calls) == 3
    assert queue.queued() == ["second"]  # waiting for its retry time, still in the set
    # its retry is due at 4 ms + 2 ms (upstream checks ProcessAt == 6 ms on the retried value)
    queue.try_process(fn, T0 + 6 * MS - 0.1 * MS)
    assert len(calls) == 3
    queue.try_process(fn, T0 + 6 * MS)
    assert order == ["first", "third", "second"]
    assert len(calls) == 4


def test_try_removing_while_try():
    queue = always_queue()
    three(queue)
    order: list[str] = []
    calls: list[str] = []
    removed = False

    def fn(name: str, uid: str) -> SyncResult:
        nonlocal removed
        calls.append(name)
        if name == "second" and not removed:
            # upstream removes "second" from another goroutine while Try is processing it
            removed = True
            queue.remove("second")
            return After(MS)
        order.append(name)
        return Done()

    queue.try_process(fn, T0 + 4 * MS)
    assert order == ["first", "third"]
    assert len(calls) == 3
    assert "second" not in queue.names()
    assert queue.queued() == []
    queue.try_process(fn, T0 + 10 * MS)  # and it never comes back
    assert len(calls) == 3


def test_clear():
    queue = always_queue()
    three(queue)
    queue.clear()
    assert len(queue) == 0
    assert queue.queued() == []
    assert queue.names() == frozenset()


def test_swap_limiter():
    queue = always_queue()
    assert queue.qps == ALWAYS_QPS  # the limiter it was created with

    queue.swap_limiter(0, T0)
    assert queue.qps == 0.0  # flowcontrol FakeNeverRateLimiter.QPS()
    queue.add("first", "11111", T0)
    record = Recorder()
    queue.try_process(record, T0 + 3600)
    assert record.seen == []  # the never limiter lets nothing through

    queue.swap_limiter(5.5, T0 + 3600)
    assert queue.qps == pytest.approx(5.5)

    before = queue.limiter
    queue.swap_limiter(5.5, T0 + 3600)
    assert queue.limiter is before  # same QPS: the limiter (and its tokens) is kept


def test_add_after_try():
    queue = always_queue()
    three(queue)
    queue.remove("second")
    record = Recorder()
    queue.try_process(record, T0 + 4 * MS)
    assert {name for name, _ in record.seen} == {"first", "third"}

    assert queue.add("first", "11111", T0 + 5 * MS) is False  # processed but never explicitly removed
    again = Recorder()
    queue.try_process(again, T0 + 3600)
    assert again.seen == []  # the same value is not processed again without an explicit remove
