"""A controller clock (controller/clock.py's `Clock`) that moves only when a test says so."""

from __future__ import annotations

import threading


class FakeClock:
    """A clock that moves only when told; `advance` wakes every waiter so it re-checks."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._conditions: set[threading.Condition] = set()
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds
        with self._lock:
            conditions = list(self._conditions)
        for condition in conditions:
            with condition:
                condition.notify_all()

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        with self._lock:
            self._conditions.add(condition)
        # A short real wait too, so a waiter whose deadline passed by `advance` re-checks promptly.
        condition.wait(0.05 if timeout is None else min(timeout, 0.05))
