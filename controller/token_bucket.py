"""A token bucket on an injected clock, like client-go's `NewTokenBucketRateLimiter`.

Used by the per-zone NoExecute tainting queues (which only ask "may I now?") and by the
toleration backfill (which asks "how long until I may?", to sleep exactly that long).
"""

from __future__ import annotations

import math

_TOKEN_EPSILON = 1e-6
EVICTION_RATE_LIMITER_BURST = 1


class TokenBucket:
    """A token bucket like client-go's `NewTokenBucketRateLimiter`, on an injected clock.

    Starts full (`burst` tokens) and refills at `qps` tokens per second, never above `burst`,
    so an idle bucket saves up at most `burst` actions. qps <= 0 is upstream's "never" limiter:
    it accepts nothing and reports qps 0. A `now` earlier than the last one refills nothing.
    """

    def __init__(self, qps: float, burst: int = EVICTION_RATE_LIMITER_BURST, *, now: float) -> None:
        if math.isnan(qps) or math.isinf(qps):
            raise ValueError(f"qps must be finite, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self._qps = qps if qps > 0 else 0.0
        self._burst = burst
        self._tokens = float(burst) if self._qps > 0 else 0.0
        self._last = now

    @property
    def qps(self) -> float:
        return self._qps

    @property
    def burst(self) -> int:
        return self._burst

    def try_accept(self, now: float) -> bool:
        """Take one token if one is available at `now`; never waits."""
        return self.reserve(now) == 0.0

    def reserve(self, now: float) -> float:
        """Take a token and return 0, or return the seconds until one is available (taking none).

        A waiter can sleep exactly that long instead of polling; with qps <= 0 it is forever (inf).
        """
        if self._qps <= 0:
            return math.inf
        if now > self._last:
            self._tokens = min(float(self._burst), self._tokens + (now - self._last) * self._qps)
            self._last = now
        if self._tokens >= 1.0 - _TOKEN_EPSILON:
            self._tokens -= 1.0
            return 0.0
        return max((1.0 - self._tokens) / self._qps, 1e-6)
