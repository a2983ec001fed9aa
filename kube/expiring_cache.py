"""A bounded map whose entries expire: the answers of TokenReviews and SubjectAccessReviews, kept for
a few seconds as the apiserver's delegating filters keep them, so a scrape every few seconds costs the
apiserver one review per caller per TTL, not one per request.

Pure: the caller passes `now` (a monotonic reading). At `capacity` entries the oldest is dropped
first, so a flood of distinct tokens cannot grow it without bound.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ExpiringCache(Generic[K, V]):
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K, now: float) -> V | None:
        """The value stored under `key` if it has not expired by `now`."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires_at, value = entry
        if now >= expires_at:
            del self._entries[key]
            return None
        return value

    def put(self, key: K, value: V, ttl: float, now: float) -> None:
        """Keep `value` until `now + ttl`; a ttl of 0 or less keeps nothing."""
        self._entries.pop(key, None)
        if ttl <= 0:
            return
        self._entries[key] = (now + ttl, value)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
