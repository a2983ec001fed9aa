"""Time for the controller, injectable so tests run on a fake clock (tests/support/clock.py).

Wall-clock seconds (epoch), because deadlines come from API timestamps (`timeAdded`,
`creationTimestamp`); waiting is done on a condition so a fake clock can wake sleepers.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Wait on `condition` (held by the caller) for at most `timeout` seconds of this clock."""


class RealClock:
    def now(self) -> float:
        return time.time()

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        condition.wait(timeout)
