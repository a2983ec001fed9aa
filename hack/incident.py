"""What happened to nodes and their pods during a failure: the record a timeline picture
(hack/timeline_svg.py) is drawn from.

The demo records one node as it polls the API (IncidentRecorder): the node's Ready status and
taints, its pods (with the deadline the taint eviction manager's own decision gives them) and their
deletion, and moments worth a tick (events). The chaos soak builds one for the whole run from the
audit log (bench/soak/picture.py). Times are epoch seconds; whatever is still open when the record
is closed ends there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.objects import NodeView
from controller.tainteviction.decision import decide_eviction, evicting_taints, taint_start
from shared.taints import NO_EXECUTE


@dataclass(frozen=True)
class Span:
    """A state held from `start` to `end`: the node's Ready status, or one of its taints."""

    label: str
    start: float
    end: float


@dataclass(frozen=True)
class PodBar:
    """A pod from the NoExecute taint that set its deadline to its deletion (None: not deleted)."""

    name: str
    node: str
    start: float
    deadline: float | None  # None: it tolerates the taint forever
    deleted: float | None


@dataclass(frozen=True)
class Tick:
    at: float
    label: str


@dataclass(frozen=True)
class NodeTrack:
    name: str
    ready: tuple[Span, ...]
    taints: tuple[Span, ...]


@dataclass(frozen=True)
class Incident:
    start: float
    end: float
    nodes: tuple[NodeTrack, ...]
    pods: tuple[PodBar, ...]  # soonest deadline first, those tolerating forever last
    events: tuple[Tick, ...]


@dataclass
class _OpenPod:
    start: float | None = None
    deadline: float | None = None
    deleted: float | None = None


@dataclass
class IncidentRecorder:
    """Collects observations in time order and closes them into an Incident."""

    node: str
    start: float
    _ready: list[Span] = field(default_factory=list)
    _ready_open: tuple[str, float] | None = None
    _taints: list[Span] = field(default_factory=list)
    _taints_open: dict[str, float] = field(default_factory=dict)
    _pods: dict[str, _OpenPod] = field(default_factory=dict)
    _events: list[Tick] = field(default_factory=list)

    def ready(self, status: str | None, at: float) -> None:
        label = status or "unknown"
        if self._ready_open is not None and self._ready_open[0] == label:
            return
        if self._ready_open is not None:
            self._ready.append(Span(self._ready_open[0], self._ready_open[1], at))
        self._ready_open = (label, at)

    def taints(self, taints: Iterable[Mapping[str, Any]], at: float) -> None:
        """The node's taints now; each starts at its timeAdded when it has one."""
        now = {f"{t.get('key')}:{t.get('effect')}": t for t in taints}
        for name in [name for name in self._taints_open if name not in now]:
            self._taints.append(Span(name, self._taints_open.pop(name), at))
        for name, taint in now.items():
            if name not in self._taints_open:
                self._taints_open[name] = taint_start(taint, at, at)

    def pod(
        self,
        name: str,
        tolerations: Sequence[Mapping[str, Any]],
        taints: Iterable[Mapping[str, Any]],
        deleting: bool,
        at: float,
    ) -> None:
        """A pod on the node now: its deadline from the node's NoExecute taints, and whether it is going.
        A node-failure taint on a node that reports Ready=True is stale and evicts nothing, as the
        eviction manager decides (`evicting_taints`); call `ready` first."""
        pod = self._pods.setdefault(name, _OpenPod())
        no_execute = self._evicting(taints) if pod.start is None else ()
        if no_execute:
            decision = decide_eviction(tolerations, no_execute, lambda taint: at, None, at)
            started = decision.started
            pod.start = started if started is not None else min(taint_start(t, at, at) for t in no_execute)
            pod.deadline = decision.at
        if deleting and pod.deleted is None:
            pod.deleted = at

    def _evicting(self, taints: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
        ready = () if self._ready_open is None else ({"type": "Ready", "status": self._ready_open[0]},)
        no_execute = tuple(dict(t) for t in taints if t.get("effect") == NO_EXECUTE)
        return evicting_taints(NodeView(self.node, "", no_execute, conditions=ready))

    def event(self, label: str, at: float) -> None:
        self._events.append(Tick(at, label))

    def close(self, at: float) -> Incident:
        ready = list(self._ready)
        if self._ready_open is not None:
            ready.append(Span(self._ready_open[0], self._ready_open[1], at))
        taints = self._taints + [Span(name, start, at) for name, start in self._taints_open.items()]
        pods = [
            PodBar(name, self.node, pod.start, pod.deadline, pod.deleted)
            for name, pod in self._pods.items()
            if pod.start is not None
        ]
        track = NodeTrack(self.node, tuple(ready), tuple(sorted(taints, key=lambda s: s.start)))
        return Incident(self.start, at, (track,), soonest_first(pods), tuple(self._events))


def soonest_first(pods: Iterable[PodBar]) -> tuple[PodBar, ...]:
    return tuple(sorted(pods, key=lambda p: (p.deadline is None, p.deadline or 0, p.name)))
