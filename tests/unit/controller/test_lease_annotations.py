"""controller/runner.py `lease_annotations`: what the leader elector publishes on the controller's Lease at
each acquire and renewal. The elector's merge is tests/unit/kube/test_leader.py's; a controller process
leading on the real apiserver is tests/integration/test_leader.py's."""

from __future__ import annotations

import pytest
from kubernetes import client

from controller.nodelifecycle.monitor import NodeLifecycleMonitor
from controller.options import parse_options
from controller.runner import assemble, lease_annotations
from kube.fence import WriteFence

PASS = 1_800_000_000.5  # 2027-01-15T08:00:00.5Z

CASES = {
    "the monitor completed a pass this term: its time, as a MicroTime": (
        [],
        PASS,
        {"taintkeeper.io/last-monitor-pass": "2027-01-15T08:00:00.500000Z"},
    ),
    "no pass this term (a stand-by, a new leader): the annotation removed": (
        [],
        None,
        {"taintkeeper.io/last-monitor-pass": None},
    ),
    "the nodelifecycle controller off: the annotation removed": (
        ["--controllers=*,-nodelifecycle"],
        PASS,
        {"taintkeeper.io/last-monitor-pass": None},
    ),
}


@pytest.mark.parametrize(("flags", "last_pass", "expected"), CASES.values(), ids=CASES.keys())
def test_the_leader_publishes_its_monitors_last_pass(
    flags: list[str], last_pass: float | None, expected: dict[str, str | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(NodeLifecycleMonitor, "last_pass", property(lambda _monitor: last_pass))
    assembly = assemble(client.ApiClient(client.Configuration()), parse_options(flags), WriteFence.without_lease())
    assert lease_annotations(assembly.components)() == expected
