"""controller.nodelifecycle.rate_limited_queue: upstream rate_limited_queue_test, plus rate behaviour on an
injected clock.

Upstream's tests use a fake "always" limiter; here a bucket with a large burst plays that role
(a pure queue at a fixed `now` gets exactly `burst` tokens per pass).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.nodelifecycle.rate_limited_queue import RateLimitedTimedQueue
from controller.sync_result import After, Done
from controller.token_bucket import TokenBucket

T0 = 1_800_000_000.0
ALWAYS = {"qps": 1000.0, "burst": 1000}  # enough tokens for every test pass at a fixed now


def queue_of(*names, now=T0, **limits):
    queue = RateLimitedTimedQueue(now=now, **(limits or ALWAYS))
    for offset, name in enumerate(names):  # upstream's fake now() ticks once per Add
        assert queue.add(name, f"uid-{name}", now + offset)
    return queue


def process_all(queue, now):
    processed = []

    def fn(name, uid):
        processed.append(name)
        return Done()

    queue.try_process(fn, now)
    return processed


def test_added_nodes_queue_in_order():  # upstream TestAddNode
    queue = queue_of("first", "second", "third")
    assert queue.queued() == ["first", "second", "third"]
    assert queue.names() == {"first", "second", "third"}
    assert len(queue) == 3


def test_adding_a_queued_name_again_is_refused():
    queue = queue_of("first")
    assert not queue.add("first", "another-uid", T0 + 5)
    assert queue.queued() == ["first"]


DEL_CASES = [  # upstream TestDelNode
    ("removing the head", "first", ["second", "third"]),
    ("removing the middle", "second", ["first", "third"]),
    ("removing the tail", "third", ["first", "second"]),
]


@pytest.mark.parametrize(("removed", "remaining"), [c[1:] for c in DEL_CASES], ids=[c[0] for c in DEL_CASES])
def test_removed_node_leaves_queue_and_set(removed, remaining):
    queue = queue_of("first", "second", "third")
    assert queue.remove(removed)
    assert queue.queued() == remaining
    assert queue.names() == set(remaining)
    assert queue.add(removed, "uid-again", T0 + 10)  # and may come back


def test_removing_an_unknown_name_reports_false():
    assert not queue_of("first").remove("nope")


def test_try_processes_every_due_node_but_removed_ones():  # upstream TestTry
    queue = queue_of("first", "second", "third")
    queue.remove("second")
    assert sorted(process_all(queue, T0 + 10)) == ["first", "third"]
    assert len(queue) == 0


def test_fn_receives_the_uid_given_to_add():
    queue = queue_of("first")
    seen = []

    def fn(name, uid):
        seen.append((name, uid))
        return Done()

    queue.try_process(fn, T0)
    assert seen == [("first", "uid-first")]


def test_a_retried_node_goes_behind_and_comes_back_after_its_wait():  # upstream TestTryOrdering
    queue = queue_of("first", "second", "third")
    now = T0 + 3
    order, calls = [], []

    def fn(name, uid):
        calls.append(name)
        if name == "second" and calls.count("second") == 1:
            return After(2.0)
        order.append(name)
        return Done()

    queue.try_process(fn, now)
    assert order == ["first", "third"]
    assert len(calls) == 3  # second was offered once, then was not due
    assert queue.queued() == ["second"]
    queue.try_process(fn, now + 1.999)
    assert order == ["first", "third"]
    queue.try_process(fn, now + 2.0)
    assert order == ["first", "third", "second"]


def test_a_node_removed_while_being_processed_is_not_retried():  # upstream TestTryRemovingWhileTry
    queue = queue_of("first", "second", "third")
    order, calls = [], []

    def fn(name, uid):
        calls.append(name)
        if name == "second":
            assert queue.remove("second")
            return After(0.001)
        order.append(name)
        return Done()

    queue.try_process(fn, T0 + 3)
    queue.try_process(fn, T0 + 10)
    assert order == ["first", "third"]
    assert len(calls) == 3
    assert len(queue) == 0
    assert queue.names() == {"first", "third"}


def test_clear_empties_heap_and_set():  # upstream TestClear
    queue = queue_of("first", "second", "third")
    assert process_all(queue, T0) == ["first"]  # processed: out of the heap, name still held
    queue.clear()
    assert len(queue) == 0
    assert queue.names() == frozenset()
    assert queue.add("first", "uid", T0 + 5)


def test_swap_limiter_changes_qps_and_keeps_the_bucket_for_the_same_qps():  # upstream TestSwapLimiter
    queue = RateLimitedTimedQueue(qps=1000.0, now=T0)
    assert queue.qps == 1000.0
    queue.swap_limiter(0, T0)
    assert queue.qps == 0
    queue.swap_limiter(5.5, T0)
    assert queue.qps == 5.5
    before = queue.limiter
    queue.swap_limiter(5.5, T0 + 1)
    assert queue.limiter is before


SWAP_DRAIN_CASES = [
    # (name, qps before, consume the old token first?, qps after, processed at swap time, at swap + 1/qps_after)
    ("swapping while the old bucket had a token gives a full new bucket", 1.0, False, 2.0, ["a"], ["b"]),
    ("swapping while the old bucket was empty starts the new one empty", 1.0, True, 2.0, [], ["a"]),
    ("leaving the never limiter starts with an empty bucket", 0.0, False, 2.0, [], ["a"]),
]


@pytest.mark.parametrize(
    ("qps_before", "drain_first", "qps_after", "at_swap", "one_interval_later"),
    [c[1:] for c in SWAP_DRAIN_CASES],
    ids=[c[0] for c in SWAP_DRAIN_CASES],
)
def test_swapping_the_limiter_grants_no_free_burst(qps_before, drain_first, qps_after, at_swap, one_interval_later):
    queue = RateLimitedTimedQueue(qps=qps_before, now=T0)
    if drain_first:
        queue.add("drain", "uid", T0)
        assert process_all(queue, T0) == ["drain"]
    queue.add("a", "uid-a", T0)
    queue.add("b", "uid-b", T0)
    swap_at = T0 + 0.1
    queue.swap_limiter(qps_after, swap_at)
    assert process_all(queue, swap_at) == at_swap
    assert process_all(queue, swap_at + 1 / qps_after) == one_interval_later


def test_swapping_to_zero_stops_processing():
    queue = queue_of("a")
    queue.swap_limiter(0, T0)
    assert process_all(queue, T0 + 3600) == []
    assert queue.queued() == ["a"]


def test_a_processed_name_is_not_processed_again_without_remove():  # upstream TestAddAfterTry
    queue = queue_of("first", "second", "third")
    queue.remove("second")
    assert sorted(process_all(queue, T0 + 10)) == ["first", "third"]
    assert not queue.add("first", "uid-first", T0 + 11)
    assert process_all(queue, T0 + 20) == []
    assert not queue.remove("first")  # it was no longer waiting ...
    assert queue.add("first", "uid-first", T0 + 21)  # ... but remove still lets it back in
    assert process_all(queue, T0 + 21) == ["first"]


def test_a_retried_node_waits_for_the_next_token_not_just_its_delay():
    queue = RateLimitedTimedQueue(qps=0.1, now=T0)
    queue.add("a", "uid-a", T0)
    results = iter([After(0.05), Done()])
    calls = []

    def fn(name, uid):
        calls.append(name)
        return next(results)

    queue.try_process(fn, T0)  # spends the only token; a is re-queued 50 ms later
    queue.try_process(fn, T0 + 0.1)  # a is due, but no token until T0 + 10
    assert calls == ["a"]
    queue.try_process(fn, T0 + 10)
    assert calls == ["a", "a"]
    assert len(queue) == 0


def test_a_not_yet_due_head_still_spends_a_token():
    """Upstream Try takes the token before it checks ProcessAt."""
    queue = RateLimitedTimedQueue(qps=0.1, now=T0)
    queue.add("future", "uid", T0 + 0.05)
    assert process_all(queue, T0) == []  # token spent on a head that was not due
    assert process_all(queue, T0 + 5) == []
    assert process_all(queue, T0 + 10) == ["future"]


def test_an_empty_queue_spends_no_tokens():
    queue = RateLimitedTimedQueue(qps=0.1, now=T0)
    assert process_all(queue, T0) == []
    queue.add("a", "uid-a", T0 + 1)
    assert process_all(queue, T0 + 1) == ["a"]


def test_a_qps_of_0_1_lets_one_node_through_every_10_s():
    queue = RateLimitedTimedQueue(qps=0.1, now=T0)
    for name in "abcde":
        queue.add(name, f"uid-{name}", T0)
    processed_at_tick = {}
    for tick in range(351):  # the controller's 100 ms tainting pass, for 35 s
        for name in process_all(queue, T0 + tick / 10):
            processed_at_tick[name] = tick
    assert processed_at_tick == {"a": 0, "b": 100, "c": 200, "d": 300}


def test_burst_1_does_not_accumulate_tokens_while_idle():
    queue = RateLimitedTimedQueue(qps=0.1, now=T0)
    for name in "abc":
        queue.add(name, f"uid-{name}", T0 + 100)
    assert process_all(queue, T0 + 100) == ["a"]  # 100 s idle saved up one token, not ten
    assert process_all(queue, T0 + 105) == []
    assert process_all(queue, T0 + 110) == ["b"]


TICK_CASES = [  # (name, clock start, qps); without slack, float refill sums land these a tick late
    ("0.1 qps from a zero clock", 0.0, 0.1),
    ("0.2 qps from a zero clock", 0.0, 0.2),
    ("the default secondary rate 0.01 qps on an epoch clock", T0, 0.01),
]


@pytest.mark.parametrize(("start", "qps"), [c[1:] for c in TICK_CASES], ids=[c[0] for c in TICK_CASES])
def test_a_token_due_on_a_tick_arrives_on_that_tick(start, qps):
    bucket = TokenBucket(qps, now=start)
    period = round(10 / qps)  # in 100 ms ticks
    accepted = [tick for tick in range(5 * period + 1) if bucket.try_accept(start + tick / 10)]
    assert accepted == [n * period for n in range(6)]


BUCKET_CASES = [
    # (name, qps, burst, accept attempts as offsets from T0, expected answers)
    ("starts full with burst tokens", 1.0, 3, [0, 0, 0, 0], [True, True, True, False]),
    ("refills at qps", 2.0, 1, [0, 0, 0.25, 0.5], [True, False, False, True]),
    ("never stores more than burst", 1.0, 2, [0, 0, 100, 100, 100], [True, True, True, True, False]),
    ("qps 0 never accepts", 0.0, 1, [0, 10, 1000], [False, False, False]),
    ("negative qps never accepts", -1.0, 1, [0, 10], [False, False]),
    ("time going backwards refills nothing", 1.0, 1, [10, 9, 10.5, 11], [True, False, False, True]),
]


@pytest.mark.parametrize(
    ("qps", "burst", "offsets", "expected"), [c[1:] for c in BUCKET_CASES], ids=[c[0] for c in BUCKET_CASES]
)
def test_token_bucket(qps, burst, offsets, expected):
    bucket = TokenBucket(qps, burst, now=T0)
    assert [bucket.try_accept(T0 + offset) for offset in offsets] == expected


@pytest.mark.parametrize(
    ("qps", "burst"), [(float("inf"), 1), (float("nan"), 1), (1.0, 0)], ids=["infinite qps", "NaN qps", "zero burst"]
)
def test_token_bucket_rejects_bad_parameters(qps, burst):
    with pytest.raises(ValueError):
        TokenBucket(qps, burst, now=T0)


def test_never_bucket_reports_qps_0():
    assert TokenBucket(-3.0, now=T0).qps == 0.0
    assert TokenBucket(0.5, now=T0).qps == 0.5


operation = st.one_of(
    st.tuples(st.just("add"), st.sampled_from("abcd")),
    st.tuples(st.just("remove"), st.sampled_from("abcd")),
    st.tuples(st.just("try"), st.just("")),
)


@given(st.lists(operation, max_size=60))
def test_the_queue_agrees_with_a_fifo_model_of_unique_names(operations):
    """One second per operation at qps 1, burst 1: each try processes the oldest waiting name."""
    queue = RateLimitedTimedQueue(qps=1.0, now=T0)
    waiting: list[str] = []
    held: set[str] = set()
    for step, (op, name) in enumerate(operations, start=1):
        now = T0 + step
        if op == "add":
            assert queue.add(name, "uid", now) == (name not in held)
            if name not in held:
                held.add(name)
                waiting.append(name)
        elif op == "remove":
            assert queue.remove(name) == (name in waiting)
            held.discard(name)
            if name in waiting:
                waiting.remove(name)
        else:
            assert process_all(queue, now) == waiting[:1]
            del waiting[:1]
        assert queue.queued() == waiting
        assert queue.names() == held
        assert len(queue) == len(waiting)
