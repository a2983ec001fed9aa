"""A judged soak run as a timeline picture (`bench/chaos.py --timeline FILE.svg`): each node's Ready
status and taints as the audit log recorded them, each eviction the checker judged (I2) as a bar
from its taint to the controller's deletion with its deadline, and each fault as a tick."""

from __future__ import annotations

from bench.soak.check import Judged
from bench.soak.timeline import NodeHistory
from hack.incident import Incident, IncidentRecorder, NodeTrack, PodBar, Tick, soonest_first


def incident_of(judged: Judged) -> Incident:
    timeline = judged.timeline
    start, end = timeline.start, timeline.end
    nodes = tuple(_track(history, start, end) for _, history in sorted(timeline.nodes.items()))
    pods = soonest_first(
        PodBar(check.subject, check.node, check.taint_start, check.deadline, check.deleted)
        for check in judged.findings.evictions
    )
    events = tuple(Tick(fault.start, f"{fault.kind} {fault.target}") for fault in judged.faults)
    return Incident(start, end, nodes, pods, events)


def _track(history: NodeHistory, start: float, end: float) -> NodeTrack:
    """The node's states as the audit log recorded them, fed to the demo's recorder."""
    record = IncidentRecorder(history.name, start)
    for state in history.current:
        record.ready(state.ready, state.time)
        record.taints(state.taints, state.time)
    (track,) = record.close(end).nodes
    return track
