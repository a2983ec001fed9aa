"""bench/soak/supervisor.py: the control plane's exited components started again, as a kubelet would."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from bench.soak.cluster import ClusterError
from bench.soak.supervisor import BUILTIN_RUN, TAINTKEEPER_RUN, Supervisor


@dataclass
class FakeCluster:
    down: set[str] = field(default_factory=set)
    refuse: bool = False
    asked: list[tuple[str, ...]] = field(default_factory=list)

    def exited(self, component: str) -> bool:
        return component in self.down

    def start_components(self, components: tuple[str, ...]) -> list[str]:
        self.asked.append(components)
        if self.refuse:
            raise ClusterError("start-components: no answer in 180s")
        started = [name for name in components if name in self.down]
        self.down -= set(started)
        return started


CASES = [
    ("nothing exited: nothing started", set(), TAINTKEEPER_RUN, [], 0),
    ("an exited scheduler is started again", {"kube-scheduler"}, TAINTKEEPER_RUN, ["kube-scheduler"], 1),
    (
        "against the built-ins their kube-controller-manager is left to the faults",
        {"kube-controller-manager"},
        BUILTIN_RUN,
        [],
        0,
    ),
    (
        "every supervised component that exited, in one start",
        {"kube-scheduler", "kube-proxy"},
        BUILTIN_RUN,
        ["kube-scheduler", "kube-proxy"],
        1,
    ),
]


@pytest.mark.parametrize(("down", "components", "started", "starts"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_look_starts_exactly_the_supervised_components_that_exited(down, components, started, starts):
    cluster = FakeCluster(set(down))
    supervisor = Supervisor(cluster, components)
    assert supervisor.look() == started
    assert len(cluster.asked) == starts
    assert supervisor.look() == []  # started: nothing left to do


def test_restarts_are_counted_and_summed_up():
    cluster = FakeCluster({"kube-scheduler"})
    supervisor = Supervisor(cluster, TAINTKEEPER_RUN)
    supervisor.look()
    cluster.down.add("kube-scheduler")
    supervisor.look()
    assert supervisor.summary() == "control plane restarts: kube-scheduler 2"
    assert Supervisor(FakeCluster(), TAINTKEEPER_RUN).summary() == "control plane restarts: none"


def test_a_start_that_fails_is_tried_again_at_the_next_look():
    cluster = FakeCluster({"kube-proxy"}, refuse=True)
    supervisor = Supervisor(cluster, TAINTKEEPER_RUN)
    assert supervisor.look() == []
    cluster.refuse = False
    assert supervisor.look() == ["kube-proxy"]
    assert supervisor.restarts == {"kube-proxy": 1}
