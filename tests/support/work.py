"""A component's work queue worked off by hand, as its workers would (controller/worker.py), without threads."""

from __future__ import annotations

import logging
from collections.abc import Callable

from controller.worker import After, Done, Retry, Sync, SyncResult, process_next
from controller.workqueue import WorkQueue

log = logging.getLogger("taintkeeper.testing")


def work_off(queue: WorkQueue, sync: Sync, after_each: Callable[[str], object] = lambda _key: None) -> list[SyncResult]:
    """Sync every key due now, acting on each result as a worker does (forget, backoff, delay), until the
    queue has none; `after_each(key)` runs after each sync (an informer catching up). The results, in
    order. An exception a sync raises fails the test: it is raised again here, not only logged."""
    results: list[SyncResult] = []
    synced: list[str] = []
    raised: list[Exception] = []

    def recorded(key: str) -> SyncResult:
        synced.append(key)
        try:
            result = sync(key)
        except Exception as error:
            raised.append(error)
            raise
        results.append(result)
        return result

    while True:
        synced.clear()
        if not process_next(queue, recorded, what="testing", log=log, timeout=0):
            return results
        if raised:
            raise raised[0]
        after_each(synced[0])


def outcome(result: SyncResult) -> str:
    """What a sync did, in a word: a Done's or an After's outcome, "retry" for a Retry."""
    match result:
        case Done(outcome=word) | After(outcome=word):
            return word
        case Retry():
            return "retry"
