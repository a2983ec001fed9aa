"""Per-object histories rebuilt from the audit records: nodes (taints, conditions, labels), pods by
uid (node, tolerations, labels, termination, container statuses), node heartbeats and the
controller's Lease holders.

Every write to these objects is logged at RequestResponse, so each successful write's response
object is the object's whole state after it. The states of one object are ordered by their
resourceVersion; a state's time is when its write completed.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from bench.soak.audit import AuditRecord, JsonObject, parse_timestamp
from bench.soak.config import SoakConfig, replica_of_agent
from bench.soak.tolerations import NO_EXECUTE, Taint, Toleration, is_lifecycle_taint

TaintId = tuple[str, str]  # key, effect: what makes two taints the same taint
NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_GROUP = "coordination.k8s.io"
_LONGEST_REQUEST = 60.0  # seconds: the apiserver's request timeout bounds received -> completed


def taint_id(taint: Taint) -> TaintId:
    return (str(taint.get("key") or ""), str(taint.get("effect") or ""))


def _time(value: Any) -> float | None:
    if not value:
        return None
    try:
        return parse_timestamp(str(value))
    except ValueError:
        return None


def _resource_version(obj: JsonObject) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or -1)
    except ValueError:
        return -1


@dataclass(frozen=True, slots=True)
class Write:
    """Who made a state, and when the apiserver received and completed the request."""

    received: float
    completed: float
    username: str
    replica: str
    by_controller: bool
    verb: str
    subresource: str


def _write(record: AuditRecord, config: SoakConfig) -> Write:
    return Write(
        record.received,
        record.completed,
        record.username,
        replica_of_agent(record.user_agent),
        config.is_controller(record.username),
        record.verb,
        record.subresource,
    )


class _State(Protocol):
    @property
    def resource_version(self) -> int: ...
    @property
    def time(self) -> float: ...


S = TypeVar("S", bound=_State)


def _ordered(states: list[S]) -> list[S]:
    if all(state.resource_version >= 0 for state in states):
        return sorted(states, key=lambda state: (state.resource_version, state.time))
    return sorted(states, key=lambda state: state.time)


def _current_view(ordered: list[S]) -> list[S]:
    """The states in time order, each newer (by resourceVersion) than the one before: what a reader
    of the object saw at each moment."""
    position = {id(state): index for index, state in enumerate(ordered)}
    current: list[S] = []
    for state in sorted(ordered, key=lambda state: state.time):
        if not current or position[id(state)] > position[id(current[-1])]:
            current.append(state)
    return current


# --- nodes ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeState:
    resource_version: int
    time: float
    write: Write
    taints: tuple[Taint, ...]
    conditions: Mapping[str, str]  # condition type -> status
    labels: Mapping[str, str]

    @property
    def ready(self) -> str | None:
        return self.conditions.get("Ready")

    @property
    def taint_ids(self) -> frozenset[TaintId]:
        return frozenset(taint_id(taint) for taint in self.taints)


def node_state(obj: JsonObject, write: Write) -> NodeState:
    spec, status, metadata = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
    conditions = {str(c.get("type")): str(c.get("status")) for c in status.get("conditions") or []}
    return NodeState(
        _resource_version(obj),
        write.completed,
        write,
        tuple(spec.get("taints") or []),
        conditions,
        dict(metadata.get("labels") or {}),
    )


@dataclass(frozen=True, slots=True)
class TaintEpisode:
    """One continuous stretch of a node holding a taint (by key and effect)."""

    taint: Taint  # as first shown
    start: float  # its timeAdded, else when it was first shown
    shown: float  # when the first state showing it completed
    end: float | None  # when the first state without it completed; None: held to the end of the log

    def held_through(self, moment: float) -> bool:
        return self.end is None or self.end >= moment


@dataclass(frozen=True, slots=True)
class HeldTaint:
    """A NoExecute taint in one node state, with the start its deadlines count from."""

    taint: Taint
    episode_start: float  # its own start; for the lifecycle keys the start of the node's unbroken lifecycle episode
    episode_shown: float  # when that episode was first shown


class NodeHistory:
    def __init__(self, name: str, states: list[NodeState]) -> None:
        self.name = name
        self.states = _ordered(states)  # every write's state, by resourceVersion
        self.current = _current_view(self.states)
        self._times = [state.time for state in self.current]
        self.episodes: list[TaintEpisode] = []
        self._held: list[list[HeldTaint]] = []
        self._walk()

    def _walk(self) -> None:
        open_episodes: dict[TaintId, TaintEpisode] = {}
        lifecycle_start: float | None = None
        lifecycle_shown = 0.0
        for state in self.current:
            present = {taint_id(taint): taint for taint in state.taints}
            for identity in [identity for identity in open_episodes if identity not in present]:
                episode = open_episodes.pop(identity)
                self.episodes.append(TaintEpisode(episode.taint, episode.start, episode.shown, state.time))
            for identity, taint in present.items():
                if identity not in open_episodes:
                    added = _time(taint.get("timeAdded"))
                    open_episodes[identity] = TaintEpisode(
                        taint, state.time if added is None else added, state.time, None
                    )
            lifecycle = [open_episodes[taint_id(t)].start for t in present.values() if is_lifecycle_taint(t)]
            # A not-ready <-> unreachable swap keeps the episode: only a state with neither ends it.
            if not lifecycle:
                lifecycle_start = None
            elif lifecycle_start is None:
                lifecycle_start, lifecycle_shown = min(lifecycle), state.time
            self._held.append(
                [
                    HeldTaint(taint, lifecycle_start, lifecycle_shown)
                    if is_lifecycle_taint(taint) and lifecycle_start is not None
                    else HeldTaint(taint, open_episodes[identity].start, open_episodes[identity].shown)
                    for identity, taint in present.items()
                    if taint.get("effect") == NO_EXECUTE
                ]
            )
        self.episodes.extend(open_episodes.values())
        self.episodes.sort(key=lambda episode: episode.shown)

    def _index_at(self, moment: float) -> int:
        return bisect.bisect_right(self._times, moment) - 1

    def _seen_between(self, start: float, end: float) -> list[int]:
        """Every state a reader could have seen from `start` to `end`: the state current at `start`
        and each later one whose write was received by `end`."""
        at_start = self._index_at(start)
        chosen = [at_start] if at_start >= 0 else []
        for index in range(at_start + 1, len(self.current)):
            if self.current[index].time > end + _LONGEST_REQUEST:
                break
            if self.current[index].write.received <= end:
                chosen.append(index)
        return chosen

    def held_between(self, start: float, end: float) -> list[list[HeldTaint]]:
        """The NoExecute taints of every state a reader could have seen from `start` to `end`."""
        return [self._held[index] for index in self._seen_between(start, end)]

    def states_between(self, start: float, end: float) -> list[NodeState]:
        return [self.current[index] for index in self._seen_between(start, end)]

    def first_not_ready(self, start: float, end: float) -> float | None:
        """The first moment from `start` to `end` the node did not report Ready=True (None: Ready
        throughout, or nothing recorded)."""
        return self._first_state(start, end, lambda state: state.ready != "True")

    def first_ready(self, start: float, end: float) -> float | None:
        """The first moment from `start` to `end` the node reported Ready=True."""
        return self._first_state(start, end, lambda state: state.ready == "True")

    def _first_state(self, start: float, end: float, wanted: Callable[[NodeState], bool]) -> float | None:
        at_start = max(self._index_at(start), 0)
        for state in self.current[at_start:]:
            if state.time > end:
                break
            if wanted(state):
                return max(start, state.time)
        return None

    def no_execute_episodes(self) -> list[TaintEpisode]:
        return [episode for episode in self.episodes if episode.taint.get("effect") == NO_EXECUTE]

    def pairs(self) -> Iterable[tuple[NodeState, NodeState]]:
        """Each state with the one before it (by resourceVersion)."""
        return itertools.pairwise(self.states)


# --- pods -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodState:
    resource_version: int
    time: float
    write: Write
    node_name: str
    tolerations: tuple[Toleration, ...]
    labels: Mapping[str, str]
    deletion_timestamp: float | None
    owner_references: tuple[Mapping[str, Any], ...]
    container_statuses: tuple[Mapping[str, Any], ...]
    ready: str | None  # the Ready condition's status


def pod_state(obj: JsonObject, write: Write) -> PodState:
    spec, status, metadata = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
    ready = next((str(c.get("status")) for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    return PodState(
        _resource_version(obj),
        write.completed,
        write,
        str(spec.get("nodeName") or ""),
        tuple(spec.get("tolerations") or []),
        dict(metadata.get("labels") or {}),
        _time(metadata.get("deletionTimestamp")),
        tuple(metadata.get("ownerReferences") or []),
        tuple(status.get("containerStatuses") or []),
        ready,
    )


@dataclass(frozen=True, slots=True)
class Binding:
    node: str
    write: Write


@dataclass(frozen=True, slots=True)
class Removal:
    """A DELETE of the pod, or an Eviction of it (any user, any answer)."""

    write: Write
    code: int
    eviction: bool
    force: bool = False  # a DELETE with gracePeriodSeconds 0

    @property
    def succeeded(self) -> bool:
        return 200 <= self.code < 300


@dataclass
class PodHistory:
    uid: str
    namespace: str
    name: str
    states: list[PodState] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)
    current: list[PodState] = field(default_factory=list)
    _times: list[float] = field(default_factory=list)

    def finish(self) -> None:
        self.states = _ordered(self.states)
        self.current = _current_view(self.states)
        self._times = [state.time for state in self.current]
        self.bindings.sort(key=lambda binding: binding.write.completed)
        self.removals.sort(key=lambda removal: removal.write.received)

    @property
    def label(self) -> str:
        return f"pod {self.namespace}/{self.name} ({self.uid[:8]})"

    @property
    def node(self) -> str:
        if self.bindings:
            return self.bindings[0].node
        return next((state.node_name for state in self.current if state.node_name), "")

    @property
    def bound_at(self) -> float | None:
        """When the pod was surely on its node: its binding answered, else the first state naming the node."""
        if self.bindings:
            return self.bindings[0].write.completed
        return next((state.time for state in self.current if state.node_name), None)

    @property
    def bound_from(self) -> float | None:
        """The earliest the pod may have been on its node: its binding received (the apiserver stamps
        PodScheduled while it handles it, to the second, and a slow one can take seconds to answer), else
        the first state naming the node. "Never early" counts from here, "never late" from `bound_at`."""
        if self.bindings:
            return self.bindings[0].write.received
        return self.bound_at

    def state_at(self, moment: float) -> PodState | None:
        index = bisect.bisect_right(self._times, moment) - 1
        return self.current[index] if index >= 0 else None

    def tolerations_at(self, moment: float) -> tuple[Toleration, ...]:
        """The tolerations as of `moment` (before the first recorded state: those of the first)."""
        state = self.state_at(moment) or (self.current[0] if self.current else None)
        return state.tolerations if state else ()

    def controller_removals(self) -> list[Removal]:
        return [removal for removal in self.removals if removal.write.by_controller]

    def first_controller_removal(self) -> Removal | None:
        return next((removal for removal in self.controller_removals() if removal.succeeded), None)

    def termination(self) -> tuple[float, bool] | None:
        """When the pod began terminating and whether the controller did it: its first successful
        removal, or the first state showing a deletionTimestamp, whichever came first."""
        candidates = [
            (removal.write.received, removal.write.by_controller) for removal in self.removals if removal.succeeded
        ]
        marked = next((state for state in self.current if state.deletion_timestamp is not None), None)
        if marked is not None:
            candidates.append((marked.time, marked.write.by_controller))
        return min(candidates, default=None)


# --- leases -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaseWrite:
    write: Write
    holder: str  # holderIdentity; "" when released
    acquired: str = ""  # acquireTime as written: with the holder, the term (kube/acting_term.py)


# --- the whole run ----------------------------------------------------------------------------


@dataclass
class Timeline:
    records: Sequence[AuditRecord]
    nodes: dict[str, NodeHistory]
    pods: dict[str, PodHistory]  # by uid
    heartbeats: dict[str, list[float]]  # node -> completion times of its kubelet's Lease writes
    lease_writes: list[LeaseWrite]  # the controller's Lease, successful writes by completion
    start: float
    end: float
    # (completion, namespace, name) of each successful EndpointSlice write: when the endpoint
    # controller published a Service's addresses, which is what kube-proxy routes to.
    endpoint_slice_writes: list[tuple[float, str, str]] = field(default_factory=list)
    _lease_times: list[float] = field(default_factory=list)
    # resource -> (received, completed) of each of its writes, by receipt: how promptly the apiserver answered.
    write_times: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lease_times = [lease.write.completed for lease in self.lease_writes]
        times: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for record in self.records:
            if record.is_write:
                times[record.resource].append((record.received, record.completed))
        self.write_times = {resource: sorted(pairs) for resource, pairs in times.items()}

    def pods_named(self, namespace: str, prefix: str) -> list[PodHistory]:
        return [pod for pod in self.pods.values() if pod.namespace == namespace and pod.name.startswith(prefix)]

    def holder_before(self, moment: float) -> LeaseWrite | None:
        """The latest successful Lease write that completed before `moment`."""
        index = bisect.bisect_left(self._lease_times, moment) - 1
        return self.lease_writes[index] if index >= 0 else None

    def endpoints_published(self, namespace: str, prefix: str, since: float) -> float | None:
        """When an EndpointSlice of that name prefix was first written at or after `since`."""
        start = bisect.bisect_left(self.endpoint_slice_writes, (since, "", ""))
        return next(
            (
                completed
                for completed, slice_namespace, name in self.endpoint_slice_writes[start:]
                if slice_namespace == namespace and name.startswith(prefix)
            ),
            None,
        )

    def heartbeat_between(self, node: str, start: float, end: float) -> bool:
        beats = self.heartbeats.get(node, [])
        index = bisect.bisect_left(beats, start)
        return index < len(beats) and beats[index] <= end


def _pod_object(obj: JsonObject | None) -> JsonObject | None:
    """A Pod in a response (a DELETE may answer a Status instead)."""
    if obj and obj.get("kind") in ("Pod", None) and (obj.get("metadata") or {}).get("uid"):
        return obj
    return None


def _pod_objects(record: AuditRecord) -> list[JsonObject]:
    """The pods a response shows: the one a write answers with, or each a deletecollection removed."""
    response = record.response_object or {}
    if record.verb == "deletecollection":
        items = response.get("items")
        return [pod for item in items if (pod := _pod_object(item))] if isinstance(items, list) else []
    pod = _pod_object(response)
    return [pod] if pod else []


def _grace(record: AuditRecord) -> int | None:
    """A removal's gracePeriodSeconds, from its DeleteOptions (an Eviction carries them inside)."""
    request = record.request_object or {}
    options = request.get("deleteOptions") or request
    grace = options.get("gracePeriodSeconds")
    return int(grace) if isinstance(grace, int | float) else None


def _precondition_uid(record: AuditRecord) -> str:
    request = record.request_object or {}
    options = request.get("deleteOptions") or request  # an Eviction carries its DeleteOptions
    return str((options.get("preconditions") or {}).get("uid") or "")


class _PodIndex:
    """Pods by uid, and which uid a namespace/name meant at a moment (StatefulSets reuse names)."""

    def __init__(self, records: Sequence[AuditRecord]) -> None:
        self.pods: dict[str, PodHistory] = {}
        names: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
        for record in records:
            for obj in _pod_objects(record) if record.resource == "pods" else ():
                metadata = obj["metadata"]
                uid = str(metadata["uid"])
                if uid not in self.pods:
                    namespace = str(metadata.get("namespace") or record.namespace)
                    name = str(metadata.get("name") or record.name)
                    self.pods[uid] = PodHistory(uid, namespace, name)
                    names[(namespace, name)].append((record.completed, uid))
        self._names = {key: sorted(value) for key, value in names.items()}

    def uid_at(self, namespace: str, name: str, moment: float) -> str:
        """The pod of that name that existed at `moment`: the latest first seen by then (a pod seen
        only later stands for itself when none was)."""
        seen = self._names.get((namespace, name), [])
        index = bisect.bisect_right([first for first, _ in seen], moment) - 1
        return seen[max(index, 0)][1] if seen else ""


def _add_pod_record(index: _PodIndex, record: AuditRecord, config: SoakConfig) -> None:
    write = _write(record, config)
    if record.verb == "deletecollection":  # a deletion of each pod it removed, with the collection's options
        for removed in _pod_objects(record) if record.succeeded else ():
            pod = index.pods[str(removed["metadata"]["uid"])]
            pod.removals.append(Removal(write, record.code, False, _grace(record) == 0))
            pod.states.append(pod_state(removed, write))
        return
    obj = _pod_object(record.response_object)
    if record.subresource == "binding":
        request = record.request_object or {}
        uid = str((request.get("metadata") or {}).get("uid") or "")
        uid = uid if uid in index.pods else index.uid_at(record.namespace, record.name, record.received)
        node = str((request.get("target") or {}).get("name") or "")
        if uid and node and record.succeeded:
            index.pods[uid].bindings.append(Binding(node, write))
        return
    removal = record.verb == "delete" or (record.verb == "create" and record.subresource == "eviction")
    uid = str(obj["metadata"]["uid"]) if obj else ""
    if not uid and removal:
        uid = _precondition_uid(record) or index.uid_at(record.namespace, record.name, record.received)
    if uid not in index.pods:
        return
    pod = index.pods[uid]
    if removal:
        pod.removals.append(Removal(write, record.code, record.subresource == "eviction", _grace(record) == 0))
    if obj and record.succeeded:
        pod.states.append(pod_state(obj, write))


def build_timeline(records: Sequence[AuditRecord], config: SoakConfig) -> Timeline:
    node_states: dict[str, list[NodeState]] = defaultdict(list)
    heartbeats: dict[str, list[float]] = defaultdict(list)
    lease_writes: list[LeaseWrite] = []
    endpoint_slice_writes: list[tuple[float, str, str]] = []
    pods = _PodIndex(records)
    handlers: dict[str, Callable[[AuditRecord], None]] = {}

    def on_node(record: AuditRecord) -> None:
        obj = record.response_object
        if record.succeeded and obj and obj.get("kind") in ("Node", None) and record.verb != "delete":
            name = str((obj.get("metadata") or {}).get("name") or record.name)
            node_states[name].append(node_state(obj, _write(record, config)))

    def on_lease(record: AuditRecord) -> None:
        if not (record.succeeded and record.is_write and record.api_group in ("", LEASE_GROUP)):
            return
        if record.namespace == NODE_LEASE_NAMESPACE and record.username == f"system:node:{record.name}":
            heartbeats[record.name].append(record.completed)
        elif config.lease == (record.namespace, record.name) and record.response_object:
            spec = record.response_object.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            lease_writes.append(LeaseWrite(_write(record, config), holder, str(spec.get("acquireTime") or "")))

    def on_endpoint_slice(record: AuditRecord) -> None:
        if record.succeeded and record.is_write:
            endpoint_slice_writes.append((record.completed, record.namespace, record.name))

    handlers.update(
        nodes=on_node,
        leases=on_lease,
        endpointslices=on_endpoint_slice,
        pods=lambda record: _add_pod_record(pods, record, config),
    )
    for record in records:
        handler = handlers.get(record.resource)
        if handler is not None:
            handler(record)
    for pod in pods.pods.values():
        pod.finish()
    for beats in heartbeats.values():
        beats.sort()
    lease_writes.sort(key=lambda lease: lease.write.completed)
    return Timeline(
        records=records,
        nodes={name: NodeHistory(name, states) for name, states in node_states.items()},
        pods=pods.pods,
        heartbeats=dict(heartbeats),
        lease_writes=lease_writes,
        start=min((record.received for record in records), default=0.0),
        end=max((record.completed for record in records), default=0.0),
        endpoint_slice_writes=sorted(endpoint_slice_writes),
    )
