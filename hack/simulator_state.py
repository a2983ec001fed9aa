"""What the simulator keeps (see hack/simulator.py): per simulated node, per Terminating pod it
knows of, and its counters."""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]


@dataclass
class Stats:
    """Counters since the Simulator was made; cpu_seconds is the CPU time of its own threads."""

    api_calls: int = 0
    lease_renewals: int = 0
    status_posts: int = 0
    pods_created: int = 0
    pods_removed: int = 0
    errors: int = 0
    cpu_seconds: float = 0.0


@dataclass
class _Condition:
    status: str
    reason: str
    message: str
    last_transition: str


@dataclass
class _Node:
    name: str
    index: int
    uid: str
    labels: dict[str, str]
    # Where in each period this node beats, in (0, 1]: spreads many nodes over the period.
    phase: float
    conditions: dict[str, _Condition]
    alive: bool = True
    # Bumped whenever heartbeats stop or (re)start: queued work of an earlier "life" is dropped.
    generation: int = 0
    in_flight: set[futures.Future[Any]] = field(default_factory=set)
    # Serializes building + sending a status post, so an older post never lands after a newer one.
    status_lock: threading.Lock = field(default_factory=threading.Lock)
    failing: bool = False  # to log an outage once, not on every retry
    pods: list[tuple[str, str]] = field(default_factory=list)  # (namespace, name) it created
    pod_count: int = 0

    @property
    def address(self) -> str:
        return f"172.{16 + (self.index >> 16) % 16}.{(self.index >> 8) & 255}.{self.index & 255}"


@dataclass
class _TerminatingPod:
    namespace: str
    name: str
    uid: str
    node: str
    deadline: float  # epoch seconds: its deletionTimestamp, when the grace period ends
    claimed: bool = False  # a force delete is queued or running
    retry_after: float = 0.0
