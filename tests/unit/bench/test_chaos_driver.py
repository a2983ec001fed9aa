"""bench/chaos.py's flags and the injector's seeded draws (no cluster: the draws only)."""

from __future__ import annotations

import argparse
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from bench import chaos
from bench.soak import injector as injector_module
from bench.soak.faults import WEBHOOK_FAULTS
from bench.soak.injector import CATALOGUE, RENEW_DEADLINE, Injector


@pytest.mark.parametrize(("text", "seconds"), [("300", 300), ("300s", 300), ("5m", 300), ("1.5m", 90), ("1h", 3600)])
def test_a_duration_is_seconds_or_a_number_with_a_unit(text: str, seconds: float):
    assert chaos.duration(text) == seconds


@pytest.mark.parametrize("text", ["0", "-5", "5x", "m", "", "5 m s"])
def test_a_bad_duration_is_refused_with_a_message(text: str):
    with pytest.raises(argparse.ArgumentTypeError, match="invalid duration"):
        chaos.duration(text)


def test_a_bad_flag_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        chaos.parse_args(["--faults-per-minute", "0"])
    assert exit_info.value.code == 2
    assert "must be greater than 0" in capsys.readouterr().err


class FakeCluster:
    def nodes(self) -> dict[str, dict[str, Any]]:
        return {name: {} for name in ("node-1", "node-2", "node-3")}


class RecordingInjector(Injector):
    """Records each fault it would run, and ends it at once."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.drawn: dict[int, tuple[str, str, float]] = {}  # by fault id: the threads finish in any order

    def _run_fault(
        self,
        fault_id: int,
        kind: str,
        target: str,
        hold: float,
        pick: float,
        resources: set[str],
        stop: threading.Event,
    ) -> None:
        self.drawn[fault_id] = (kind, target, round(hold, 6))
        with self._lock:
            self._busy -= resources


def draws(
    seed: int, builtin: bool = False, count: int = 60, without: frozenset[str] = frozenset(), webhook: bool = True
) -> list[tuple[str, str, float]]:
    injector = RecordingInjector(
        FakeCluster(),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        Path("/dev/null"),
        random.Random(seed),
        builtin=builtin,
        webhook=webhook,
        without=without,
    )
    stop = threading.Event()
    for _ in range(count):
        kinds = injector.catalogue()
        injector._launch(injector.rng.choices(list(kinds), weights=list(kinds.values()))[0], stop)
    for thread in injector._threads:
        thread.join()
    return [injector.drawn[fault_id] for fault_id in sorted(injector.drawn)]


def test_the_same_seed_replays_the_same_faults_on_the_same_targets_for_the_same_time():
    assert draws(7) == draws(7)
    assert draws(7) != draws(8)


def test_every_kind_of_fault_is_drawn():
    assert {kind for kind, _, _ in draws(1, count=300)} == set(CATALOGUE)


def test_the_oracle_gets_no_webhook_faults():
    assert not {kind for kind, _, _ in draws(1, builtin=True, count=300)} & WEBHOOK_FAULTS


def test_the_policy_mode_gets_no_webhook_faults_and_every_other_kind():
    drawn = {kind for kind, _, _ in draws(1, webhook=False, count=300)}
    assert drawn == set(CATALOGUE) - WEBHOOK_FAULTS


@pytest.mark.parametrize(("argv", "admission"), [([], "webhook"), (["--admission", "policy"], "policy")])
def test_the_admission_mode_is_chosen_by_a_flag(argv: list[str], admission: str):
    assert chaos.parse_args(argv).admission == admission


def test_an_unknown_admission_mode_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exited:
        chaos.parse_args(["--admission", "both"])
    assert exited.value.code == 2
    assert "--admission: invalid choice: 'both'" in capsys.readouterr().err


LATER_KINDS = [("etcd-pause",), ("runtime-then-kubelet",), ("etcd-pause", "runtime-then-kubelet")]


@pytest.mark.parametrize("later", LATER_KINDS, ids=["+".join(kinds) for kinds in LATER_KINDS])
def test_a_seed_drawn_before_a_kind_existed_replays_without_it(monkeypatch: pytest.MonkeyPatch, later: tuple[str]):
    today = draws(9090, count=200, without=frozenset(later))
    monkeypatch.setattr("bench.soak.injector.CATALOGUE", {k: w for k, w in CATALOGUE.items() if k not in later})
    assert draws(9090, count=200) == today


def test_an_etcd_pause_outlasts_the_leaders_renew_deadline():
    holds = [hold for kind, _, hold in draws(3, count=400) if kind == "etcd-pause"]
    assert holds and all(RENEW_DEADLINE < hold < RENEW_DEADLINE + 2 for hold in holds)


def test_an_unknown_fault_kind_to_leave_out_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        chaos.parse_args(["--without", "etcd-nap"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "unknown fault kind 'etcd-nap'" in err


ORACLE_PIDS = {"kube-controller-manager": 4321, "kube-controller-manager-2": 4322}


class KcmCluster(FakeCluster):
    """The oracle's two kube-controller-manager replicas, as processes the leader faults kill and start again."""

    down: frozenset[str] = frozenset()  # the replicas whose process is gone

    def __init__(self) -> None:
        self.started: list[str] = []

    def controller_manager_pid(self, replica: str) -> int:
        return ORACLE_PIDS[replica]

    def start_controller_manager(self, replica: str) -> None:
        self.started.append(replica)

    def exited(self, component: str) -> bool:
        return component in self.down


class DownKcmCluster(KcmCluster):
    down = frozenset({"kube-controller-manager-2"})


def _oracle_injector(
    monkeypatch: pytest.MonkeyPatch, holder: str | None, cluster: KcmCluster | None = None
) -> tuple[Injector, KcmCluster]:
    """An injector for the built-ins whose kube-system Lease names `holder` (None: no holder)."""
    cluster = cluster or KcmCluster()
    injector = Injector(cluster, None, Path("/dev/null"), random.Random(1), builtin=True)  # type: ignore[arg-type]
    lease_path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"

    def get(path: str, query: object = None) -> dict[str, Any]:
        assert path == lease_path
        return {"spec": {"holderIdentity": holder} if holder else {}}

    monkeypatch.setattr(injector, "_get", get)
    return injector, cluster


class HeldLookingStop(threading.Event):
    """A fault's stop event whose wait ends at once, recording what the injector held meanwhile."""

    def __init__(self, injector: Injector) -> None:
        super().__init__()
        self.injector, self.held_during = injector, list[frozenset[str]]()

    def wait(self, timeout: float | None = None) -> bool:
        self.held_during.append(self.injector.held())
        return True


ORACLE_LEADER_KILLS = [
    ("the first replica leading: it is the one killed and started again", "kube-controller-manager_9f1c", 4321),
    ("the second replica leading: it is the one killed and started again", "kube-controller-manager-2_77aa", 4322),
]


@pytest.mark.parametrize(
    ("holder", "pid"), [row[1:] for row in ORACLE_LEADER_KILLS], ids=[r[0] for r in ORACLE_LEADER_KILLS]
)
def test_the_builtins_leader_kill_kills_the_replica_the_lease_names_and_holds_it_from_the_supervisor(
    monkeypatch: pytest.MonkeyPatch, holder: str, pid: int
):
    killed: list[int] = []
    monkeypatch.setattr(injector_module, "_signal", lambda pid, _signum: killed.append(pid))
    injector, cluster = _oracle_injector(monkeypatch, holder)
    replica = holder.rsplit("_", 1)[0]
    stop = HeldLookingStop(injector)
    outcome = injector._leader_kill("node-1", 5.0, 0.0, stop, lambda *_args: None)
    assert outcome[0] == replica
    assert killed == [pid]
    assert stop.held_during == [frozenset({replica})]
    assert injector.held() == frozenset()
    assert cluster.started == [replica]


def test_the_builtins_leader_pause_stops_the_replica_the_lease_names(monkeypatch: pytest.MonkeyPatch):
    signals: list[tuple[int, int]] = []
    monkeypatch.setattr(injector_module, "_signal", lambda pid, signum: signals.append((pid, signum)))
    monkeypatch.setattr(injector_module, "_continue", lambda pid: signals.append((pid, 0)))
    injector, _ = _oracle_injector(monkeypatch, "kube-controller-manager-2_77aa")
    outcome = injector._leader_pause("node-1", 5.0, 0.0, HeldLookingStop(injector), lambda *_args: None)
    assert outcome[0] == "kube-controller-manager-2"
    assert [pid for pid, _ in signals] == [4322, 4322]


NO_ORACLE_LEADER = [
    ("nobody holds the Lease", None),
    ("a holder that is none of the oracle's replicas", "vm_0123"),
]


@pytest.mark.parametrize("holder", [row[1] for row in NO_ORACLE_LEADER], ids=[row[0] for row in NO_ORACLE_LEADER])
def test_the_builtins_leader_faults_do_not_start_without_a_replica_leading(
    monkeypatch: pytest.MonkeyPatch, holder: str | None
):
    monkeypatch.setattr(injector_module, "_signal", lambda *_args: pytest.fail("nothing may be signalled"))
    injector, cluster = _oracle_injector(monkeypatch, holder)
    for fault in (injector._leader_kill, injector._leader_pause):
        with pytest.raises(injector_module.FaultNotStarted, match="no kube-controller-manager replica holds"):
            fault("node-1", 5.0, 0.0, HeldLookingStop(injector), lambda *_args: None)
    assert cluster.started == [] and injector.held() == frozenset()


SABOTAGE_REFUSALS = [
    (["--sabotage", "controller-scaled-to-0", "--controller", "builtin"], "--controller builtin deploys none"),
    (["--sabotage", "webhook-stopped", "--admission", "policy"], "--admission policy deploys none"),
    (["--sabotage", "everything"], "--sabotage: invalid choice: 'everything'"),
]


@pytest.mark.parametrize(("argv", "message"), SABOTAGE_REFUSALS, ids=[" ".join(a) for a, _ in SABOTAGE_REFUSALS])
def test_a_sabotage_with_nothing_to_sabotage_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
):
    with pytest.raises(SystemExit) as exited:
        chaos.parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_sabotage_comes_a_minute_in_unless_told():
    args = chaos.parse_args(["--sabotage", "controller-scaled-to-0"])
    assert (args.sabotage, args.sabotage_after) == ("controller-scaled-to-0", 60.0)
    assert chaos.parse_args(["--sabotage", "webhook-stopped", "--sabotage-after", "2m"]).sabotage_after == 120.0


class _Report:
    def __init__(self, violations: list[str], unjudged: list[Any]) -> None:
        self.violations, self.unjudged = violations, unjudged


class _Judged:
    def __init__(self, report: _Report) -> None:
        self.report = report


class _Unjudged:
    limit = 1e12  # far in the future: waiting for it would take the longest wait


def test_a_run_that_already_failed_stops_waiting_for_its_open_deadlines(monkeypatch: pytest.MonkeyPatch):
    judgements = [_Judged(_Report(["I10"], [_Unjudged()]))]
    monkeypatch.setattr(chaos, "judge_run", lambda *_: judgements[0])
    monkeypatch.setattr(chaos.time, "sleep", lambda _: pytest.fail("waited though the run had failed"))
    judged: object = chaos._judge_when_every_deadline_passed(Path("a"), Path("f"), chaos.soak_config())
    assert judged is judgements[0]


def test_a_run_still_passing_waits_for_its_open_deadlines_then_judges_again(monkeypatch: pytest.MonkeyPatch):
    judgements = iter([_Judged(_Report([], [_Unjudged()])), _Judged(_Report([], []))])
    slept: list[float] = []
    monkeypatch.setattr(chaos, "judge_run", lambda *_: next(judgements))
    monkeypatch.setattr(chaos.time, "sleep", slept.append)
    chaos._judge_when_every_deadline_passed(Path("a"), Path("f"), chaos.soak_config())
    assert slept == [chaos.MAX_WAIT]


def test_the_builtins_leader_faults_do_not_start_on_a_replica_the_lease_names_that_is_not_running(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(injector_module, "_signal", lambda *_args: pytest.fail("nothing may be signalled"))
    injector, cluster = _oracle_injector(monkeypatch, "kube-controller-manager-2_77aa", DownKcmCluster())
    for fault in (injector._leader_kill, injector._leader_pause):
        with pytest.raises(
            injector_module.FaultNotStarted, match="names kube-controller-manager-2, which is not running"
        ):
            fault("node-1", 5.0, 0.0, HeldLookingStop(injector), lambda *_args: None)
    assert cluster.started == []
