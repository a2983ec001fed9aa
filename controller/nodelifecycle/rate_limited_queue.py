"""The per-zone NoExecute tainting queue: upstream scheduler/rate_limited_queue.go, without threads.

A unique queue of nodes ordered by when they are due, drained through a token bucket so that a
zone's nodes are tainted at most `qps` per second. Pure: the caller passes `now` (seconds) to
every call that reads time, and drives `try_process` from its own tick (upstream: every 100 ms).

The one surprise kept on purpose: a processed node's name stays in the queue's name set, so
`add` refuses it until someone calls `remove` (the controller does when the node is Ready
again, or before re-queueing it for a different taint). That is what stops a node that is
still NotReady from being re-tainted on every health pass.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import assert_never

from controller.sync_result import After, Done, Retry, SyncResult
from controller.token_bucket import EVICTION_RATE_LIMITER_BURST, TokenBucket

# `now` is epoch seconds, where a double resolves only ~0.2 us, and refill is summed over many
# small ticks; without a little slack a token due at exactly t+10 s could show up a tick late.
# A millionth of a token is 10 us early at 0.1 qps: nothing anyone could observe.

# Upstream `scheduler.EvictionRateLimiterBurst`.

ActionFunc = Callable[[str, str], SyncResult]
"""fn(name, uid), answered as a worker's sync is (controller/sync_result.py): Done, the node is processed;
After(delay), it is re-queued `delay` seconds from now; Retry(why), the action failed and it is re-queued
now, behind the nodes already due (upstream re-adds it 1 ns later)."""


@dataclass(order=True)
class _Entry:
    process_at: float
    sequence: int
    name: str = field(compare=False)
    uid: str = field(compare=False)


class RateLimitedTimedQueue:
    """Upstream `RateLimitedTimedQueue`: a `UniqueQueue` (heap + name set) behind a token bucket.

    The heap is ordered by (process_at, insertion order); a retried node is re-inserted, so it
    goes behind nodes already due at the same instant (upstream's heap leaves ties unordered).
    """

    def __init__(self, qps: float, now: float, burst: int = EVICTION_RATE_LIMITER_BURST) -> None:
        self._burst = burst
        self._limiter = TokenBucket(qps, burst, now=now)
        self._heap: list[_Entry] = []
        self._queued: dict[str, _Entry] = {}
        self._names: set[str] = set()
        self._sequence = itertools.count()

    def __len__(self) -> int:
        """Nodes waiting to be processed (not the processed names still held in the set)."""
        return len(self._heap)

    def names(self) -> frozenset[str]:
        """Every name `add` would refuse: waiting ones and processed ones not yet removed."""
        return frozenset(self._names)

    def queued(self) -> list[str]:
        """The waiting names in the order they would be processed."""
        return [entry.name for entry in sorted(self._heap)]

    @property
    def qps(self) -> float:
        return self._limiter.qps

    @property
    def limiter(self) -> TokenBucket:
        return self._limiter

    def add(self, name: str, uid: str, now: float) -> bool:
        """Queue `name`, due at `now`; False (and no change) if the name is already in the set."""
        if name in self._names:
            return False
        self._names.add(name)
        self._push(_Entry(now, next(self._sequence), name, uid))
        return True

    @property
    def names_set(self) -> set[str]:
        """The names in the set, without a copy (read-only use: cheap membership tests)."""
        return self._names

    def waiting(self, name: str) -> bool:
        """Whether `name` is queued and not yet processed."""
        return name in self._queued

    def remove(self, name: str) -> bool:
        """Forget `name` so it can be added again; True only if it was still waiting.

        As upstream `UniqueQueue.Remove`: the name leaves the set either way, but a name that
        was already processed (in the set, not in the heap) reports False.
        """
        self._names.discard(name)
        entry = self._queued.get(name)
        if entry is None:
            return False
        self._drop(entry)
        return True

    def clear(self) -> None:
        """Drop every waiting node and every remembered name."""
        self._heap.clear()
        self._queued.clear()
        self._names.clear()

    def try_process(self, fn: ActionFunc, now: float) -> None:
        """Offer due nodes to `fn`, earliest first, one limiter token each.

        Mirrors upstream `Try` order exactly: each round takes a token *before* looking at the
        head's due time, so a head that is not yet due still spends a token (and ends the
        pass). An empty queue spends none. fn -> Done: the node leaves the heap but its name stays
        in the set. fn -> After(wait): it is re-queued at now + wait; Retry: at now (upstream adds
        1 ns). If fn removes the node itself, its answer for that node is ignored.
        With burst 1 and a fixed `now`, one pass handles at most one node.
        """
        while self._heap:
            if not self._limiter.try_accept(now):
                return
            head = self._heap[0]
            if now < head.process_at:
                return
            result = fn(head.name, head.uid)
            if self._queued.get(head.name) is not head:
                continue  # fn removed (or replaced) it while we were processing it
            self._drop(head)
            match result:
                case Done():
                    continue
                case After(delay=wait):
                    pass
                case Retry():
                    wait = 0.0
                case _:
                    assert_never(result)
            head.process_at = now + wait
            head.sequence = next(self._sequence)
            self._push(head)

    def swap_limiter(self, qps: float, now: float) -> None:
        """Change the rate, upstream `SwapLimiter` (called when the zone changes state).

        Same qps: keep the current bucket and its tokens. qps <= 0: the never limiter. Else a
        fresh bucket with this queue's burst (upstream: always 1); if the old limiter has no
        token available right now, one token of the new bucket is spent, so changing the rate
        never hands out a free burst (and leaving the never limiter starts with an empty bucket).
        """
        if qps == self._limiter.qps:
            return
        if qps <= 0:
            self._limiter = TokenBucket(0.0, self._burst, now=now)
            return
        new_limiter = TokenBucket(qps, self._burst, now=now)
        if not self._limiter.try_accept(now):
            new_limiter.try_accept(now)
        self._limiter = new_limiter

    def _push(self, entry: _Entry) -> None:
        self._queued[entry.name] = entry
        heapq.heappush(self._heap, entry)

    def _drop(self, entry: _Entry) -> None:
        del self._queued[entry.name]
        index = next(i for i, candidate in enumerate(self._heap) if candidate is entry)
        last = self._heap.pop()
        if index < len(self._heap):
            self._heap[index] = last
            heapq.heapify(self._heap)
