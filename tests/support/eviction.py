"""The taint eviction manager worked off by hand: what its timer loop and workers do, without threads."""

from __future__ import annotations

from controller.tainteviction.manager import TaintEvictionManager
from tests.support.work import work_off


def drain_evictions(manager: TaintEvictionManager) -> None:
    """Fire every timer due now and work the queue off until it is empty, firing again after each key
    (syncing one can make another due). In a running controller the timer loop (`step`) and the workers do this."""
    manager.fire_due()
    work_off(manager.queue, manager.sync, lambda _key: manager.fire_due())
