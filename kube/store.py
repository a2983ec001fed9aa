"""The informer's cache: views by key, an optional exact index, and the read-only face components see.

`Store` applies watch events and whole LISTs and returns the changes to report instead of calling
handlers, so the caller runs handlers outside the lock and this class needs no server to test.
`StoreReader` is what the controllers read through: the informer, its store, a dry run's overlay
and the tests' in-memory stores all provide it.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, Protocol, TypeVar

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


class Keyed(Protocol):
    @property
    def key(self) -> str: ...


V = TypeVar("V", bound=Keyed)
Change = tuple[V | None, V | None]  # (old, new): old None on add, new None on delete


class StoreReader(Protocol[V]):
    """Read access to a cache of views (an informer's store): what components are given."""

    def get(self, key: str) -> V | None: ...

    def list(self) -> builtins.list[V]: ...

    def by_index(self, value: Hashable) -> builtins.list[V]:
        """Every view whose index value equals `value` (e.g. the pods on a node)."""
        ...


class Store(Generic[V]):
    """Views by key, plus an optional exact index (e.g. pods by node name). Thread-safe.

    `apply` and `replace` return the changes to report instead of calling handlers, so the
    caller can run handlers outside the lock and this class needs no server to test.
    """

    def __init__(self, index_by: Callable[[V], Hashable] | None = None) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, V] = {}
        self._index_by = index_by
        # index value -> keys (a dict as an insertion-ordered set)
        self._index: dict[Hashable, dict[str, None]] = {}

    def get(self, key: str) -> V | None:
        with self._lock:
            return self._items.get(key)

    def list(self) -> builtins.list[V]:
        with self._lock:
            return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def by_index(self, value: Hashable) -> builtins.list[V]:
        """All views whose `index_by` value equals `value` (e.g. every pod on a node)."""
        if self._index_by is None:
            raise ValueError("this store has no index (index_by was not given)")
        with self._lock:
            return [self._items[key] for key in self._index.get(value, ())]

    def index_snapshot(self) -> dict[Hashable, frozenset[str]]:
        """A copy of the whole index (value -> keys), for checks and debugging."""
        with self._lock:
            return {value: frozenset(keys) for value, keys in self._index.items()}

    def apply(self, event_type: str, view: V) -> Change[V] | None:
        """Apply one watch event; return (old, new), or None when nothing a handler could see changed."""
        with self._lock:
            if event_type in (ADDED, MODIFIED):
                return self._put(view)
            if event_type == DELETED:
                return self._remove(view.key)
        raise ValueError(f"not a store event type: {event_type!r}")

    def replace(self, views: Iterable[V]) -> builtins.list[Change[V]]:
        """Make the store hold exactly `views` (a fresh LIST); return the differences: removals
        first, then additions and changes in list order. Unchanged views yield nothing."""
        fresh = {view.key: view for view in views}
        with self._lock:
            changes: builtins.list[Change[V]] = []
            for key in [key for key in self._items if key not in fresh]:
                removed = self._remove(key)
                if removed is not None:
                    changes.append(removed)
            for view in fresh.values():
                change = self._put(view)
                if change is not None:
                    changes.append(change)
            return changes

    def _put(self, view: V) -> Change[V] | None:
        key = view.key
        old = self._items.get(key)
        if old is not None and old == view:
            return None
        self._items[key] = view
        if self._index_by is not None:
            new_value = self._index_by(view)
            if old is not None:
                self._unindex(self._index_by(old), key)
            self._index.setdefault(new_value, {})[key] = None
        return old, view

    def _remove(self, key: str) -> Change[V] | None:
        old = self._items.pop(key, None)
        if old is None:
            return None  # a delete we never saw the object for: nothing to report
        if self._index_by is not None:
            self._unindex(self._index_by(old), key)
        return old, None

    def _unindex(self, value: Hashable, key: str) -> None:
        keys = self._index.get(value)
        if keys is None:
            return
        keys.pop(key, None)
        if not keys:
            del self._index[value]  # no empty buckets: the index stays exactly what a rebuild gives
