"""How one piece of a component's work ended, in the words both of its contracts use (controller/worker.py):
a worker's sync of a key, and a zone queue's action on a node (controller/nodelifecycle/rate_limited_queue.py).
Pure data, so the pure decisions and queues can answer in it too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias


@dataclass(frozen=True)
class Done:
    """The key is finished: its backoff is forgotten. `outcome` says what the sync did, in a word (the
    tests read it)."""

    outcome: str = "done"


@dataclass(frozen=True)
class Retry:
    """The sync failed: the key comes back after its backoff, and `why` is logged."""

    why: str


@dataclass(frozen=True)
class After:
    """The key is finished for now: its backoff is forgotten and it comes back in `delay` seconds.
    `outcome` says why, in a word (the tests read it)."""

    delay: float
    outcome: str = "later"


SyncResult: TypeAlias = Done | Retry | After
