"""Time for the controller, injectable so tests and benchmarks run on a fake clock (`FakeClock`).

Wall-clock seconds (epoch), because deadlines come from API timestamps (`timeAdded`,
`creationTimestamp`); waiting is done on a condition so a fake clock can wake sleepers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...

    def monotonic(self) -> float:
        """Seconds that only move forward, for how long something took or has been silent (a heartbeat):
        a wall clock stepped back or forward must not make a hung thread look alive, or a live one hung."""

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Wait on `condition` (held by the caller) for at most `timeout` seconds of this clock."""

    def sleep(self, seconds: float) -> None:
        """Pause the calling thread for `seconds` of this clock (a retry's pause)."""


class RealClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        condition.wait(timeout)


class FakeClock:
    """A clock that moves only when told; `advance` wakes every waiter so it re-checks. For tests and
    benchmarks (like upstream's k8s.io/utils/clock/testing); the controller itself runs on RealClock."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._conditions: set[threading.Condition] = set()
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        """The fake time itself: a test moves it forward."""
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds
        with self._lock:
            conditions = list(self._conditions)
        for condition in conditions:
            with condition:
                condition.notify_all()

    def sleep(self, seconds: float) -> None:
        """A pause on a fake clock passes its time at once: the sleeper moves the clock itself."""
        self.advance(seconds)

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        with self._lock:
            self._conditions.add(condition)
        # A short real wait too, so a waiter whose deadline passed by `advance` re-checks promptly.
        condition.wait(0.05 if timeout is None else min(timeout, 0.05))

    def run_for(self, seconds: float, step: float, each_step: Callable[[], None]) -> None:
        """Move `seconds` forward in steps of at most `step`, calling `each_step` before each and at the end
        (a test's stand-in for the loops that would run meanwhile)."""
        end = self._now + seconds
        while True:
            each_step()
            if self._now >= end - 1e-9:
                return
            self.advance(min(step, end - self._now))
