"""A judged soak run as a timeline picture (`bench/chaos.py --timeline FILE.svg`): each node's Ready
status and taints as the audit log recorded them, each eviction the checker judged (I2) as a bar
from its taint to the controller's deletion with its deadline, and each fault as a tick."""

from __future__ import annotations

from bench.soak.check import Judged
from bench.soak.timeline import NodeHistory
from hack.incident import Incident, NodeTrack, PodBar, Span, Tick, soonest_first


def incident_of(judged: Judged) -> Incident:
    timeline = judged.timeline
    start, end = timeline.start, timeline.end
    nodes = tuple(_track(history, end) for _, history in sorted(timeline.nodes.items()))
    pods = soonest_first(PodBar(check.subject, check.node, check.taint_start, check.deadline, check.deleted)
                         for check in judged.findings.evictions)
    events = tuple(Tick(fault.start, f"{fault.kind} {fault.target}") for fault in judged.faults)
    return Incident(start, end, nodes, pods, events)


def _track(history: NodeHistory, end: float) -> NodeTrack:
    ready: list[Span] = []
    current: tuple[str, float] | None = None
    for state in history.current:
        status = state.ready or "unknown"
        if current is not None and current[0] != status:
            ready.append(Span(current[0], current[1], state.time))
        if current is None or current[0] != status:
            current = (status, state.time)
    if current is not None:
        ready.append(Span(current[0], current[1], end))
    taints = tuple(Span(f"{episode.taint.get('key')}:{episode.taint.get('effect')}", episode.start,
                        episode.end if episode.end is not None else end) for episode in history.episodes)
    return NodeTrack(history.name, tuple(ready), tuple(sorted(taints, key=lambda span: (span.label, span.start))))
