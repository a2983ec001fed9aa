"""The taint eviction manager's memory, as one object whose methods keep its invariants.

Per node: its evicting NoExecute taints (decision.py `evicting_taints`), when this controller first saw
each of its NoExecute taints, and whether it is out of service. Per pod key: its scheduled eviction and
timer, and where its deletion stands: marked (its "Marking for deletion" event sent), evicting (a worker
is deleting it, outside the manager's lock), waiting (its disruption budget refused its Eviction) and
executed (deleted, its DELETED event not yet seen). Every record of a pod carries the pod's uid, so a new
pod of the same name is never taken for the old one.

The invariants, which `violations` checks (the manager's property test does, after every step):
1. a timer runs only for a scheduled pod, at its deadline; a scheduled pod without one has fired (it is in
   the work queue, or waits for this replica to lead again);
2. a pod is marked or waiting only while its eviction, of the same uid, is scheduled;
3. no pod is both executed and scheduled under the same uid;
4. a node's evicting taints have first-seen times.
(A pod may stay evicting after its schedule is gone: its DELETED event can come during the deletion.)

Pure: no lock, thread or clock. The manager calls it under its lock and passes `now`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from controller.tainteviction.decision import EvictionDecision
from controller.tainteviction.timers import TimerHeap
from shared.taints import Taint, taint_identity

Identity = tuple[str, str]  # a taint's (key, effect)


@dataclass
class ScheduledEviction:
    uid: str
    node_name: str
    at: float
    taint: Taint | None = None  # the taint whose toleration runs out, and since when it counts
    started: float | None = None


class EvictionState:
    def __init__(self) -> None:
        self._node_taints: dict[str, tuple[Taint, ...]] = {}
        self._first_seen: dict[str, dict[Identity, float]] = {}
        self._out_of_service: set[str] = set()
        self._timers = TimerHeap()
        self._scheduled: dict[str, ScheduledEviction] = {}
        self._marked: dict[str, str] = {}
        self._evicting: dict[str, str] = {}
        self._waiting: dict[str, str] = {}
        self._executed: dict[str, str] = {}

    # --- nodes ------------------------------------------------------------------------------------

    def update_node(
        self, name: str, evicting: tuple[Taint, ...], no_execute: Iterable[Taint], out_of_service: bool, now: float
    ) -> tuple[bool, bool]:
        """Record a node's evicting taints, the identities of all its NoExecute taints (first seen now
        unless seen before; stale ones too, so a Ready blip under a taint without timeAdded keeps its
        clock) and whether it is out of service. (whether its taints changed, whether its being out of
        service did); nothing is recorded when neither did."""
        identities = {taint_identity(t) for t in no_execute}
        taints_changed = (
            self._node_taints.get(name, ()) != evicting or set(self._first_seen.get(name, {})) != identities
        )
        service_changed = out_of_service != (name in self._out_of_service)
        if not taints_changed and not service_changed:
            return False, False
        if out_of_service:
            self._out_of_service.add(name)
        else:
            self._out_of_service.discard(name)
        seen_before = self._first_seen.pop(name, {})
        if identities:
            self._first_seen[name] = {i: seen_before.get(i, now) for i in identities}
        if evicting:
            self._node_taints[name] = evicting
        else:
            self._node_taints.pop(name, None)
        return taints_changed, service_changed

    def forget_node(self, name: str) -> None:
        self._node_taints.pop(name, None)
        self._first_seen.pop(name, None)
        self._out_of_service.discard(name)

    def taints_of(self, node_name: str) -> tuple[Taint, ...]:
        return self._node_taints.get(node_name, ())

    def tainted_nodes(self) -> list[str]:
        return list(self._node_taints)

    def first_seen_on(self, node_name: str, now: float) -> Callable[[Taint], float]:
        """When this controller first saw each taint of the node (now for one it has not seen)."""
        seen = self._first_seen.get(node_name, {})

        def first_seen(taint: Taint) -> float:
            return seen.get(taint_identity(taint), now)

        return first_seen

    # --- scheduling -------------------------------------------------------------------------------

    def scheduled(self, key: str) -> ScheduledEviction | None:
        return self._scheduled.get(key)

    def pending(self) -> int:
        return len(self._scheduled)

    def is_deleted_or_deleting(self, key: str, uid: str) -> bool:
        """Whether this very pod was deleted already, or is being deleted now: never twice."""
        return self._executed.get(key) == uid or self._evicting.get(key) == uid

    def schedule(self, key: str, uid: str, node_name: str, decision: EvictionDecision) -> bool:
        """Set the pod's eviction to `decision` (which evicts); False if it was already exactly that."""
        assert decision.at is not None
        if self._executed.get(key) not in (None, uid):
            del self._executed[key]  # the same name, a new pod
        entry = self._scheduled.get(key)
        if entry is not None and entry.uid == uid and entry.at == decision.at and entry.taint == decision.taint:
            return False
        self._scheduled[key] = ScheduledEviction(uid, node_name, decision.at, decision.taint, decision.started)
        self._timers.schedule(key, decision.at)
        return True

    def reschedule(self, key: str, entry: ScheduledEviction, decision: EvictionDecision) -> None:
        """Move the pending eviction `entry` of `key` to `decision`'s later deadline."""
        assert decision.at is not None and self._scheduled.get(key) is entry
        entry.at, entry.taint, entry.started = decision.at, decision.taint, decision.started
        self._timers.schedule(key, decision.at)

    def unschedule(self, key: str) -> bool:
        """Drop the pod's eviction and where its deletion stood (but a deletion in flight); True if one was
        scheduled."""
        self._marked.pop(key, None)
        self._waiting.pop(key, None)
        if self._scheduled.pop(key, None) is None:
            return False
        self._timers.cancel(key)
        return True

    def pod_deleted(self, key: str) -> None:
        """The pod's DELETED event: nothing of it is kept but a deletion in flight."""
        self.unschedule(key)
        self._executed.pop(key, None)

    def pop_due(self, now: float) -> list[str]:
        return self._timers.pop_due(now)

    def next_deadline(self) -> float | None:
        return self._timers.next_deadline()

    def rearm_fired(self) -> None:
        """Set the timers again of evictions that fired while this replica did not lead."""
        for key, entry in self._scheduled.items():
            if key not in self._timers:
                self._timers.schedule(key, entry.at)

    # --- deleting ---------------------------------------------------------------------------------

    def begin_deletion(self, key: str, entry: ScheduledEviction) -> tuple[bool, bool]:
        """A worker deletes the pod of `entry` now. (whether this is its first attempt, whether its budget
        had refused it before)."""
        assert self._scheduled.get(key) is entry
        first_attempt = self._marked.get(key) != entry.uid
        self._marked[key] = entry.uid
        self._evicting[key] = entry.uid
        return first_attempt, key in self._waiting

    def stop_waiting(self, key: str) -> None:
        self._waiting.pop(key, None)

    def deletion_failed(self, key: str) -> None:
        self._evicting.pop(key, None)

    def refused(self, key: str, uid: str) -> bool:
        """The pod's budget refused its Eviction; True the first time for this pod. Nothing is recorded for
        a pod whose eviction was dropped or replaced meanwhile."""
        self._evicting.pop(key, None)
        entry = self._scheduled.get(key)
        if entry is None or entry.uid != uid:
            return False
        first = self._waiting.get(key) != uid
        self._waiting[key] = uid
        return first

    def deleted(self, key: str, entry: ScheduledEviction, still_cached: bool) -> None:
        """The pod of `entry` was deleted (or the dry run says it would be). `still_cached`: its DELETED
        event has not come yet (that event clears what is kept here)."""
        if still_cached:
            self._executed[key] = entry.uid
        self._marked.pop(key, None)
        self._evicting.pop(key, None)
        self._waiting.pop(key, None)
        current = self._scheduled.get(key)
        if current is not None and current.uid == entry.uid:  # the same pod, even if re-scheduled meanwhile
            del self._scheduled[key]
            self._timers.cancel(key)

    def waiting(self) -> int:
        return len(self._waiting)

    # --- the invariants ---------------------------------------------------------------------------

    def violations(self) -> list[str]:
        """Every invariant of the module docstring that does not hold, in words; [] when all hold."""
        found = []
        for key in self._scheduled:
            at = self._timers.deadline(key)
            if at is not None and at != self._scheduled[key].at:
                found.append(f"1: {key}'s timer is at {at}, its eviction at {self._scheduled[key].at}")
        found += [f"1: a timer runs for {key}, not scheduled" for key in self._timers.keys() - set(self._scheduled)]
        for name, records in (("marked", self._marked), ("waiting", self._waiting)):
            for key, uid in records.items():
                entry = self._scheduled.get(key)
                if entry is None or entry.uid != uid:
                    found.append(f"2: {key} ({uid}) is {name} without its eviction scheduled")
        for key, uid in self._executed.items():
            entry = self._scheduled.get(key)
            if entry is not None and entry.uid == uid:
                found.append(f"3: {key} ({uid}) is both deleted and scheduled")
        for name, taints in self._node_taints.items():
            seen = self._first_seen.get(name, {})
            found += [
                f"4: {name}'s taint {taint_identity(t)} has no first-seen time"
                for t in taints
                if taint_identity(t) not in seen
            ]
        return found
