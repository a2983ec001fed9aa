"""bench/soak/picture.py: a judged run as the timeline picture's record, from a hand-made audit log
(the checker's own scenario: n1's kubelet killed, n1 tainted at 50 s, its 5 s pod deleted at 55.2 s)."""

from __future__ import annotations

from pathlib import Path

from bench.soak.check import judge
from bench.soak.picture import incident_of
from hack.incident import Incident
from hack.timeline_svg import draw
from tests.unit.bench.soak_audit_builders import T0, UNREACHABLE
from tests.unit.bench.test_soak_checker import failed_node


def run() -> Incident:
    world = failed_node(55.2)
    return incident_of(judge(world.script.records(), world.faults, world.config))


TABLE = [
    ("every node of the log gets a track, by name", lambda i: [n.name for n in i.nodes] == ["n1", "n2", "n3"]),
    (
        "the failed node is Ready from its registration, then Unknown from the controller's write",
        lambda i: (
            [(s.label, round(s.start - T0, 1), round(s.end - T0, 1)) for s in i.nodes[0].ready]
            == [("True", 0.5, 50.0), ("Unknown", 50.0, 120.0)]
        ),
    ),
    (
        "its NoExecute taint is held from its timeAdded to the end of the log",
        lambda i: (
            [(s.label, s.start, s.end) for s in i.nodes[0].taints] == [(f"{UNREACHABLE}:NoExecute", T0 + 50.0, i.end)]
        ),
    ),
    (
        "the judged eviction is a bar from the taint, deadline 5 s later, deleted when the controller deleted it",
        lambda i: (
            [(p.node, p.start, p.deadline, round(p.deleted - T0, 1) if p.deleted else None) for p in i.pods]
            == [("n1", T0 + 50.0, T0 + 55.0, 55.2)]
        ),
    ),
    ("the kubelet kill is a tick", lambda i: [(t.at, t.label) for t in i.events] == [(T0 + 10.0, "kubelet-kill n1")]),
]


def test_a_judged_run_as_a_timeline() -> None:
    incident = run()
    failed = [name for name, holds in TABLE if not holds(incident)]
    assert not failed, (failed, incident)


def test_it_draws(tmp_path: Path) -> None:
    svg = draw(run(), tmp_path / "soak.svg").read_text()
    for text in ("n1 Ready", "n2 Ready", "unreachable:NoExecute", "kubelet-kill n1", "deleted +0.2s from its deadline"):
        assert text in svg, text
