"""One timer heap for every scheduled eviction (never a timer thread per pod).

A min-heap of (deadline, sequence, key) with lazy invalidation: rescheduling or cancelling a
key only updates `_deadlines`; stale heap entries are skipped when they surface. Pure data
structure: no threads, no clock; the caller passes `now`.
"""

from __future__ import annotations

import heapq
import itertools


class TimerHeap:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str]] = []
        self._deadlines: dict[str, tuple[float, int]] = {}
        self._sequence = itertools.count()

    def __len__(self) -> int:
        return len(self._deadlines)

    def __contains__(self, key: str) -> bool:
        return key in self._deadlines

    def keys(self) -> set[str]:
        """Every key with a deadline."""
        return set(self._deadlines)

    def deadline(self, key: str) -> float | None:
        entry = self._deadlines.get(key)
        return entry[0] if entry else None

    def schedule(self, key: str, at: float) -> None:
        """Set (or move) the deadline of `key`; earlier and later both work."""
        entry = self._deadlines.get(key)
        if entry is not None and entry[0] == at:
            return
        sequence = next(self._sequence)
        self._deadlines[key] = (at, sequence)
        heapq.heappush(self._heap, (at, sequence, key))
        self._compact_if_stale()

    def cancel(self, key: str) -> bool:
        """Forget `key`; True if it was scheduled."""
        return self._deadlines.pop(key, None) is not None

    def next_deadline(self) -> float | None:
        self._drop_stale_head()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[str]:
        """Remove and return every key whose deadline is <= now, earliest first."""
        due: list[str] = []
        while True:
            self._drop_stale_head()
            if not self._heap or self._heap[0][0] > now:
                return due
            _, _, key = heapq.heappop(self._heap)
            del self._deadlines[key]
            due.append(key)

    def _drop_stale_head(self) -> None:
        while self._heap:
            at, sequence, key = self._heap[0]
            if self._deadlines.get(key) == (at, sequence):
                return
            heapq.heappop(self._heap)

    def _compact_if_stale(self) -> None:
        # Many reschedules leave stale entries behind; rebuild when they dominate the heap.
        if len(self._heap) > 1024 and len(self._heap) > 4 * len(self._deadlines):
            self._heap = [(at, seq, key) for key, (at, seq) in self._deadlines.items()]
            heapq.heapify(self._heap)
