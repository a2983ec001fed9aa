"""The simulator's worker pool: a fixed set of threads taking work by priority, heartbeats first
(see hack/simulator.py). Every API call of the simulated kubelets runs on it."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any, TypeVar

T = TypeVar("T")

# Work priorities in the pool: heartbeats first, so a bulk pod creation never lets leases expire.
HEARTBEAT, DELETION, BULK = 0, 1, 2


class _PriorityPool:
    """A fixed set of worker threads taking work by priority (then FIFO). concurrent.futures'
    pool is FIFO only, and heartbeats must not queue behind thousands of pod creations.

    A quarter of the workers (none in a pool of fewer than 4) take the other work first: at
    thousands of nodes the heartbeats alone can keep every worker busy, and pod deletions and
    creations queued behind them would never run (the stalls of the 5,000-node envelope runs)."""

    def __init__(self, workers: int, name: str) -> None:
        self._queues: dict[int, collections.deque[tuple[futures.Future[Any], Callable[[], Any]]]] = {}
        self._ready = threading.Condition()
        self._closing = False
        self._cpu: dict[int, float] = {}
        reserved = workers // 4
        self._threads = [
            threading.Thread(target=self._work, args=(number, number < reserved), name=f"{name}-{number}", daemon=True)
            for number in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, priority: int, call: Callable[[], T]) -> futures.Future[T]:
        future: futures.Future[T] = futures.Future()
        with self._ready:
            if self._closing:
                raise RuntimeError("the pool is shut down")
            self._queues.setdefault(priority, collections.deque()).append((future, call))
            self._ready.notify()
        return future

    def cpu_seconds(self) -> float:
        return sum(self._cpu.values())

    def shutdown(self) -> None:
        """End the workers once the queued work is done."""
        with self._ready:
            self._closing = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join(timeout=30)

    def _take(self, other_work_first: bool) -> tuple[futures.Future[Any], Callable[[], Any]] | None:
        with self._ready:
            while True:
                waiting = sorted(priority for priority, queued in self._queues.items() if queued)
                if waiting:
                    if other_work_first and len(waiting) > 1:
                        waiting = waiting[1:] + waiting[:1]
                    return self._queues[waiting[0]].popleft()
                if self._closing:
                    return None
                self._ready.wait()

    def _work(self, number: int, other_work_first: bool) -> None:
        while (work := self._take(other_work_first)) is not None:
            future, call = work
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as error:
                    future.set_exception(error)
            self._cpu[number] = time.thread_time()
