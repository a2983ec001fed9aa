"""A work queue like client-go's: keys are de-duplicated and never worked on concurrently.

A key added while it is being processed is marked dirty and handed out again once `done` is
called, so the latest state is always processed and no two workers hold the same key. Failed
keys come back after a capped exponential backoff (`add_rate_limited`); `forget` resets it. A
component's workers take its keys and act on how each sync ended through controller/worker.py.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque

from controller.clock import Clock, RealClock


class ShutDown(Exception):
    """The queue was shut down; the worker should return."""


class WorkQueue:
    def __init__(self, clock: Clock | None = None, base_delay: float = 0.25, max_delay: float = 30.0) -> None:
        self._clock = clock or RealClock()
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._condition = threading.Condition()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._failures: dict[str, int] = {}
        self._delayed: list[tuple[float, int, str]] = []
        self._sequence = itertools.count()
        self._shutting_down = False

    def add(self, key: str) -> None:
        with self._condition:
            self._add_locked(key)

    def _add_locked(self, key: str) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._condition.notify()

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._condition:
            heapq.heappush(self._delayed, (self._clock.now() + delay, next(self._sequence), key))
            self._condition.notify()

    def backoff(self, key: str) -> float:
        """The delay the next `add_rate_limited(key)` will use."""
        failures = self._failures.get(key, 0)
        return min(self._max_delay, self._base_delay * (2**failures))

    def add_rate_limited(self, key: str) -> float:
        """Re-add `key` after its backoff, which doubles per failure up to the cap; returns it."""
        with self._condition:
            delay = self.backoff(key)
            self._failures[key] = self._failures.get(key, 0) + 1
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        with self._condition:
            self._failures.pop(key, None)

    def get(self, timeout: float | None = None) -> str | None:
        """The next key to work on (None on timeout); raises ShutDown once shut down and drained."""
        with self._condition:
            deadline = None if timeout is None else self._clock.now() + timeout
            while True:
                self._promote_delayed_locked()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                if self._shutting_down:
                    raise ShutDown
                now = self._clock.now()
                if deadline is not None and now >= deadline:
                    return None
                wake = [t for t in (deadline, self._delayed[0][0] if self._delayed else None) if t is not None]
                self._clock.wait(self._condition, (min(wake) - now) if wake else None)

    def done(self, key: str) -> None:
        with self._condition:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._condition.notify()

    def shut_down(self) -> None:
        with self._condition:
            self._shutting_down = True
            self._condition.notify_all()

    def __len__(self) -> int:
        with self._condition:
            return len(self._queue) + len(self._delayed)

    def _promote_delayed_locked(self) -> None:
        now = self._clock.now()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            self._add_locked(key)
