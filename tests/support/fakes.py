"""In-memory stand-ins for what components read and write through: an informer's store, the event sink."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


def _node_name(view: Any) -> Hashable:
    return view.node_name


class MemoryStore(Generic[V]):
    """A `kube.store.StoreReader` over a plain dict a test fills (`items`, by key); `by_index` scans
    with `index_by` (default: a pod's node name), as the pod informer's index answers."""

    def __init__(self, index_by: Callable[[V], Hashable] = _node_name) -> None:
        self.items: dict[str, V] = {}
        self._index_by = index_by

    def get(self, key: str) -> V | None:
        return self.items.get(key)

    def list(self) -> builtins.list[V]:
        return list(self.items.values())

    def by_index(self, value: Hashable) -> builtins.list[V]:
        return [view for view in self.items.values() if self._index_by(view) == value]


class RecordingEvents:
    """A `kube.events.EventSink` that keeps what it is given: pod events as (namespace/name, type,
    reason, message), node events as (node, type, reason, message)."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str, str]] = []
        self.node_events: list[tuple[str, str, str, str]] = []

    def pod_event(self, pod: Any, reason: str, message: str, event_type: str = "Normal") -> None:
        self.recorded.append((f"{pod.namespace}/{pod.name}", event_type, reason, message))

    def node_event(self, name: str, uid: str, reason: str, message: str, event_type: str = "Normal") -> None:
        self.node_events.append((name, event_type, reason, message))
