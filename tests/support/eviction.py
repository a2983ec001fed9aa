"""The taint eviction manager worked off by hand: what its timer loop and workers do, without threads."""

from __future__ import annotations

from controller.tainteviction.manager import TaintEvictionManager


def drain_evictions(manager: TaintEvictionManager) -> None:
    """Fire every timer due now and process the work queue until it is empty, firing again after each key
    (processing one can make another due). In a running controller `run_timers` and the workers do this."""
    manager.fire_due()
    queue = manager.queue
    while (key := queue.get(timeout=0)) is not None:
        try:
            manager.process(key)
        finally:
            queue.done(key)
        manager.fire_due()
