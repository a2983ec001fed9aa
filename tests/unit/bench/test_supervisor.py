"""bench/soak/supervisor.py: the control plane's exited components started again, as a kubelet would."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from bench.soak.cluster import ClusterError
from bench.soak.supervisor import CONTROL_PLANE, CrashLoopBackOff, Supervisor


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


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


CASES = [
    ("nothing exited: nothing started", set(), frozenset(), [], 0),
    ("an exited scheduler is started again", {"kube-scheduler"}, frozenset(), ["kube-scheduler"], 1),
    (
        "an exited kube-controller-manager is started again, the built-ins' too",
        {"kube-controller-manager"},
        frozenset(),
        ["kube-controller-manager"],
        1,
    ),
    (
        "one a fault holds down is left to the fault",
        {"kube-controller-manager"},
        frozenset({"kube-controller-manager"}),
        [],
        0,
    ),
    (
        "every component that exited, in one start",
        {"kube-scheduler", "kube-proxy"},
        frozenset(),
        ["kube-scheduler", "kube-proxy"],
        1,
    ),
]


@pytest.mark.parametrize(("down", "held", "started", "starts"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_first_exit_is_started_again_at_the_next_look(down, held, started, starts):
    cluster = FakeCluster(set(down))
    supervisor = Supervisor(cluster, CONTROL_PLANE, held=lambda: held, clock=Clock())
    assert supervisor.look() == started
    assert len(cluster.asked) == starts


# (exits: seconds after the previous restart each exit comes) -> the waits before each restart
BACKOFF_CASES = [
    ("the first restart is at once, then 10 s, doubled each time", [0, 5, 5, 5, 5], [0, 10, 20, 40, 80]),
    ("the wait stops at 300 s", [0, 1, 1, 1, 1, 1, 1, 1], [0, 10, 20, 40, 80, 160, 300, 300]),
    ("an exit 600 s after the last starts the count again", [0, 5, 5, 700, 5], [0, 10, 20, 0, 10]),
]


@pytest.mark.parametrize(("ran", "waits"), [c[1:] for c in BACKOFF_CASES], ids=[c[0] for c in BACKOFF_CASES])
def test_restarts_wait_out_the_kubelets_crash_loop_back_off(ran, waits):
    backoff, now, seen = CrashLoopBackOff(), 0.0, []
    for running in ran:
        exited_at = now + running
        seen.append(backoff.wait(exited_at))
        backoff.restarted(exited_at)
        now = exited_at + seen[-1]
    assert seen == waits


def test_a_second_exit_waits_ten_seconds_before_its_start():
    cluster, clock = FakeCluster({"kube-controller-manager"}), Clock()
    supervisor = Supervisor(cluster, CONTROL_PLANE, clock=clock)
    assert supervisor.look() == ["kube-controller-manager"]
    clock.now += 30
    cluster.down.add("kube-controller-manager")
    assert supervisor.look() == []  # its exit noticed now: 10 s to wait
    clock.now += 9.9
    assert supervisor.look() == []
    clock.now += 0.2
    assert supervisor.look() == ["kube-controller-manager"]


def test_restarts_are_counted_and_summed_up():
    cluster, clock = FakeCluster({"kube-scheduler"}), Clock()
    supervisor = Supervisor(cluster, CONTROL_PLANE, clock=clock)
    supervisor.look()
    cluster.down.add("kube-scheduler")
    supervisor.look()
    clock.now += 10
    supervisor.look()
    assert supervisor.summary() == "control plane restarts: kube-scheduler 2 (10s down)"
    assert Supervisor(FakeCluster(), CONTROL_PLANE).summary() == "control plane restarts: none"


def test_a_start_that_fails_is_tried_again_at_the_next_look():
    cluster = FakeCluster({"kube-proxy"}, refuse=True)
    supervisor = Supervisor(cluster, CONTROL_PLANE, clock=Clock())
    assert supervisor.look() == []
    cluster.refuse = False
    assert supervisor.look() == ["kube-proxy"]
    assert supervisor.restarts == {"kube-proxy": 1}
