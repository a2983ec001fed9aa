"""hack/incident.py and hack/timeline_svg.py: what the demo records of a node failure, and the picture
drawn from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hack.incident import Incident, IncidentRecorder, NodeTrack, PodBar, Span
from hack.timeline_svg import NAMED_PODS, draw, rows_of
from kube.timestamps import format_time

T0 = 1_700_000_000.0
UNREACHABLE = "node.kubernetes.io/unreachable"


def taint(key: str, effect: str, added: float | None = None) -> dict[str, Any]:
    return {"key": key, "effect": effect, **({"timeAdded": format_time(added)} if added is not None else {})}


def tolerating(seconds: int | None) -> list[dict[str, Any]]:
    toleration: dict[str, Any] = {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        toleration["tolerationSeconds"] = seconds
    return [toleration]


def failure() -> IncidentRecorder:
    """Ready until 10 s, Unknown until 40 s; the NoExecute taint added at 12 s, lifted at 41 s; a 5 s pod
    deleted at 17.5 s, a pod tolerating it forever, and one already deleting before the taint."""
    record = IncidentRecorder("n1", T0)
    record.ready("True", T0)
    record.pod("early", tolerating(5), [], True, T0 + 1)
    for second in (10, 12, 17.5, 41):
        now = T0 + second
        down = 10 <= second < 41
        record.ready("Unknown" if down else "True", now)
        taints = (
            [taint(UNREACHABLE, "NoSchedule"), taint(UNREACHABLE, "NoExecute", T0 + 12)] if 12 <= second < 41 else []
        )
        record.taints(taints, now)
        record.pod("short", tolerating(5), taints, second >= 17.5, now)
        record.pod("forever", tolerating(None), taints, False, now)
    record.event("kubelet stops", T0 + 2)
    return record


TABLE = [
    (
        "the Ready status is one band per status",
        lambda i: (
            i.nodes[0].ready
            == (Span("True", T0, T0 + 10), Span("Unknown", T0 + 10, T0 + 41), Span("True", T0 + 41, T0 + 50))
        ),
    ),
    (
        "a NoExecute taint starts at its timeAdded and ends when it is lifted",
        lambda i: Span(f"{UNREACHABLE}:NoExecute", T0 + 12, T0 + 41) in i.nodes[0].taints,
    ),
    (
        "a pod's bar runs from the taint, its deadline that taint plus its seconds, to its deletion",
        lambda i: PodBar("short", "n1", T0 + 12, T0 + 17, T0 + 17.5) in i.pods,
    ),
    (
        "a pod tolerating the taint forever has no deadline and no deletion",
        lambda i: PodBar("forever", "n1", T0 + 12, None, None) in i.pods,
    ),
    ("a pod that never saw a NoExecute taint is not drawn", lambda i: "early" not in {p.name for p in i.pods}),
    ("the soonest deadline comes first, forever last", lambda i: [p.name for p in i.pods] == ["short", "forever"]),
]


def test_the_record_of_a_node_failure() -> None:
    incident = failure().close(T0 + 50)
    failed = [name for name, holds in TABLE if not holds(incident)]
    assert not failed, (failed, incident)


@pytest.mark.parametrize(
    ("statuses", "drawn"),
    [
        pytest.param(["True", "True"], None, id="a stale failure taint on a Ready node gives no deadline"),
        pytest.param(
            ["True", "Unknown"],
            PodBar("stale", "n1", T0, T0 + 5, None),
            id="a node not Ready again under it counts from the taint's timeAdded",
        ),
    ],
)
def test_a_stale_failure_taint_is_drawn_as_the_controller_decides(statuses: list[str], drawn: PodBar | None) -> None:
    record = IncidentRecorder("n1", T0)
    stale = [taint(UNREACHABLE, "NoExecute", T0)]
    for second, status in zip((1, 20), statuses, strict=True):
        record.ready(status, T0 + second)
        record.taints(stale, T0 + second)
        record.pod("stale", tolerating(5), stale, False, T0 + second)
    pods = record.close(T0 + 30).pods
    assert pods == (() if drawn is None else (drawn,))


def test_the_picture_shows_the_node_its_taints_each_pod_and_the_events(tmp_path: Path) -> None:
    svg = draw(failure().close(T0 + 50), tmp_path / "failure.svg").read_text()
    assert svg.startswith("<?xml") and "</svg>" in svg
    for text in (
        "n1 Ready",
        "unreachable:NoExecute",
        "unreachable:NoSchedule",
        "pod short",
        "pod forever",
        "tolerates forever",
        "deleted +0.5s from its deadline",
        "kubelet stops",
    ):
        assert text in svg, text


def soak(pods: int) -> Incident:
    """One node, `pods` pods each tainted 10 s before its deletion, one starting every 4 s (negative:
    that many, all at once)."""
    step = 4 if pods > 0 else 0
    bars = tuple(PodBar(f"p{n}", "n1", T0 + step * n, T0 + step * n + 8, T0 + step * n + 10) for n in range(abs(pods)))
    pods = abs(pods)
    return Incident(T0, T0 + 4 * pods + 20, (NodeTrack("n1", (Span("True", T0, T0 + 4 * pods + 20),), ()),), bars, ())


ROWS = [
    ("a few pods get a labelled row each", NAMED_PODS, NAMED_PODS, f"pod p{NAMED_PODS - 1}"),
    (
        "more are packed: a pod takes the first row free at its start (10 s bars, one every 4 s: 3 rows)",
        NAMED_PODS + 1,
        3,
        "pods on n1",
    ),
    ("a soak's hundreds still fit in 3 rows", 500, 3, "pods on n1"),
    ("a burst (every pod at once) overlaps in at most 8 rows", -40, 8, "pods on n1"),
]


@pytest.mark.parametrize(
    ("pods", "pod_rows", "first_label"), [case[1:] for case in ROWS], ids=[case[0] for case in ROWS]
)
def test_pod_rows(pods: int, pod_rows: int, first_label: str) -> None:
    rows = rows_of(soak(pods))[1:]  # after the Ready row
    assert len(rows) == pod_rows
    assert rows[0 if first_label == "pods on n1" else -1].label == first_label
    assert sum(len(row.pods) for row in rows) == abs(pods)
