"""bench/soak/: the chaos soak's checker, on hand-made audit logs.

Each scenario is a little cluster's audit log (tests/unit/bench/soak_audit_builders.py) and the
faults injected into it; the table says which violations the checker must count, no more, no less.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from bench.soak import workload
from bench.soak.audit import parse_lines, parse_timestamp, read_files, rotated_files
from bench.soak.check import Judged, judge_run, main
from bench.soak.config import (
    DEFAULT_WORKLOAD_NAMESPACES,
    POLICY_REGISTRATION,
    WEBHOOK_REGISTRATION,
    SoakConfig,
    builtin_config,
    replica_of_agent,
    replica_of_holder,
    soak_config,
    taintkeeper_config,
    term_of_agent,
)
from bench.soak.faults import Fault, FaultLogError, append_fault, overlapping, parse_faults, read_faults
from bench.soak.report import SoakReport, render
from controller.tainteviction.disruption_budget import budget_timeout, opted_in
from tests.unit.bench.soak_audit_builders import (
    BUDGETED,
    CHAOS_TAINT,
    DEFAULTS,
    DRIVER,
    FOREVER,
    NODE_CONTROLLER,
    NOT_READY,
    OUT_OF_SERVICE,
    REPLICA_A,
    REPLICA_B,
    SCHEDULER,
    SYSTEM,
    T0,
    UNREACHABLE,
    WEBHOOK_POD,
    Actor,
    AuditScript,
    controller,
    kubelet,
    timed,
    toleration,
)
from tests.unit.manifests.test_manifests import documents

END = 120.0
A, B = controller(REPLICA_A), controller(REPLICA_B)
STATEFULSET = Actor(
    "system:serviceaccount:kube-system:statefulset-controller",
    "kube-controller-manager/v1.20.2 (linux/amd64) kubernetes/faecb19/system:serviceaccount:"
    "kube-system:statefulset-controller",
)
WEBHOOK_DOWN = (
    'Internal error occurred: failed calling webhook "tolerations.taintkeeper.io": Post '
    '"https://taintkeeper-webhook.taintkeeper-system.svc:443/mutate?timeout=5s": dial tcp 10.0.0.12:443: '
    "connect: connection refused"
)


@dataclass
class World:
    script: AuditScript
    faults: list[Fault] = field(default_factory=list)
    config: SoakConfig = field(default_factory=taintkeeper_config)

    def fault(self, kind: str, target: str, start: float, end: float | None, **detail: object) -> None:
        self.faults.append(
            Fault(len(self.faults) + 1, kind, target, T0 + start, None if end is None else T0 + end, dict(detail))
        )

    def write(self, directory: Path) -> tuple[Path, Path]:
        """The run's files as bench/chaos.py leaves them: the audit log and the fault log."""
        audit, faults = directory / "logs" / "audit.log", directory / "faults.jsonl"
        audit.parent.mkdir(parents=True, exist_ok=True)
        audit.write_text("\n".join(self.script.lines()) + "\n")
        faults.touch()
        for fault in self.faults:
            append_fault(faults, fault)
        return audit, faults

    def judged(self) -> Judged:
        """Judged as a real run is: from the files, through judge_run (what it reads is what it judges)."""
        with tempfile.TemporaryDirectory() as directory:
            return judge_run(*self.write(Path(directory)), self.config)

    def report(self) -> SoakReport:
        return self.judged().report


def base(*, down: tuple[str, ...] = (), leader: bool = True, workload: bool = True, replicas: bool = True) -> World:
    """Three nodes heartbeating (those `down` only once, at 1 s), replica A leading throughout, the
    controller's replicas A and B and a Ready webhook pod running on n3, and on n1 a pod tolerating the
    node failure taints for 5 s and one forever."""
    s = AuditScript()
    if leader:
        s.lead(REPLICA_A, 0.0, END)
    for node in ("n1", "n2", "n3"):
        s.node_up(0.5, node)
        s.heartbeats(node, 1.0, 1.0 if node in down else END)
    for offset, name in [(0.6, WEBHOOK_POD), *([(0.62, REPLICA_A), (0.64, REPLICA_B)] if replicas else [])]:
        s.create_pod(offset, name, DEFAULTS if name == WEBHOOK_POD else FOREVER, namespace=SYSTEM)
        s.bind(offset + 0.1, name, "n3", namespace=SYSTEM)
        s.pod_status(offset + 0.3, name, namespace=SYSTEM)
    s.publish_endpoints(1.0)
    if workload:
        for offset, name, tolerations in ((2.0, "tol5-1", timed(5)), (2.2, "forever-2", FOREVER)):
            s.create_pod(offset, name, tolerations)
            s.bind(offset + 0.1, name, "n1")
            s.pod_status(offset + 1.0, name)
    return World(s)


def n1_fails(
    w: World,
    at: float = 50.0,
    *,
    by: Actor = A,
    key: str = UNREACHABLE,
    kubelet_back: float | None = None,
    workload: bool = True,
) -> None:
    """n1's kubelet killed at 10 s; at `at` the controller marks n1 Unknown and taints it (timeAdded `at`),
    and marks the workload's pods on it NotReady (I11)."""
    w.fault("kubelet-kill", "n1", 10.0, kubelet_back)
    w.script.set_ready(at, "n1", "Unknown", by)
    w.script.add_taint(at + 0.05, "n1", key, by, added=at)
    for name in ("tol5-1", "forever-2") if workload else ():
        w.script.pod_status(at + 0.1, name, ready=False)


def failed_node(delete_at: float | None = 55.2, by: Actor = A, **options: object) -> World:
    w = base(down=("n1",))
    n1_fails(w, **options)  # type: ignore[arg-type]
    if delete_at is not None:
        w.script.delete_pod(delete_at, "tol5-1", by)
    return w


# --- the scenarios --------------------------------------------------------------------------


def node_dies_and_its_pod_goes_on_time() -> World:
    return failed_node(55.2)


def pod_deleted_early() -> World:
    return failed_node(52.0)


def pod_deleted_half_a_second_early() -> World:
    return failed_node(54.5)


def pod_evicted_through_the_eviction_api() -> World:
    w = failed_node(None)
    w.script.delete_pod(55.2, "tol5-1", A, evict=True)
    return w


def pod_deleted_without_a_taint() -> World:
    w = base(down=("n1",))
    w.fault("kubelet-kill", "n1", 10.0, None)
    w.script.delete_pod(50.0, "tol5-1", A)
    return w


def pod_deleted_from_a_healthy_node_without_a_taint() -> World:
    w = base()
    w.script.delete_pod(50.0, "tol5-1", A)
    return w


def swap_keeps_the_start(delete_at: float = 55.2) -> World:
    w = base(down=("n1",))
    w.fault("kubelet-kill", "n1", 10.0, None)
    w.script.set_ready(50.0, "n1", "False", A)
    w.script.add_taint(50.05, "n1", NOT_READY, A, added=50.0)
    for name in ("tol5-1", "forever-2"):  # I11: its pods marked NotReady
        w.script.pod_status(50.1, name, ready=False)
    w.script.swap_taint(53.05, "n1", NOT_READY, UNREACHABLE, A)  # unreachable's timeAdded: 53
    w.script.delete_pod(delete_at, "tol5-1", A)
    return w


def swap_after_a_ready_stretch(delete_at: float) -> World:
    """n1 is tainted not-ready at 50 s and its kubelet reports Ready=True from 51 s to 60 s under the stale
    taint (evicting nothing); at 60 s it is Unknown and the taint swapped for unreachable (timeAdded 60).
    The Ready stretch ends the pending eviction: tol5-1 counts from the swap, due at 65 s."""
    w = base(down=("n1",))
    w.fault("kubelet-kill", "n1", 10.0, None)
    w.script.set_ready(50.0, "n1", "False", A)
    w.script.add_taint(50.05, "n1", NOT_READY, A, added=50.0)
    for name in ("tol5-1", "forever-2"):
        w.script.pod_status(50.1, name, ready=False)
    w.script.set_ready(51.0, "n1", "True", kubelet("n1"))
    w.script.set_ready(60.0, "n1", "Unknown", A)
    w.script.swap_taint(60.05, "n1", NOT_READY, UNREACHABLE, A)
    w.script.delete_pod(delete_at, "tol5-1", A)
    return w


def new_leader_taints_a_dead_node_a_grace_period_after_it_began(taint_at: float) -> World:
    """n1's last heartbeat is at 1 s; A leads until 30 s, B from 31 s and taints n1 at `taint_at`."""
    w = base(down=("n1",), leader=False)
    w.script.lead(REPLICA_A, 0.0, 30.0)
    w.script.lead(REPLICA_B, 31.0, END)
    n1_fails(w, at=taint_at, by=B)
    w.script.delete_pod(taint_at + 5.2, "tol5-1", B)
    return w


def replica_writes_past_its_renew_deadline() -> World:
    """A's last renewal is at 40 s; nobody takes the Lease; A still deletes the pod at 55.2 s."""
    w = base(down=("n1",), leader=False)
    w.script.lead(REPLICA_A, 0.0, 40.0)
    n1_fails(w)
    w.script.delete_pod(55.2, "tol5-1", A)
    return w


def nobody_leads_though_a_replica_runs(takes_over: float) -> World:
    """A stops renewing at 20 s with no fault at all, and B, running all along, takes over at `takes_over`."""
    w = base(workload=False, leader=False)
    w.script.lead(REPLICA_A, 0.0, 20.0)
    w.script.lead(REPLICA_B, takes_over, END)
    return w


def standby_not_ready_until(ready_at: float) -> World:
    """A, paused by the soak at 20 s, stops renewing; B runs but is not Ready (its caches syncing) until
    `ready_at`, and takes the Lease at 50 s."""
    w = base(workload=False, leader=False)
    w.script.lead(REPLICA_A, 0.0, 20.0)
    w.fault("leader-pause", REPLICA_A, 20.5, 70.0)
    w.script.pod_status(10.0, REPLICA_B, namespace=SYSTEM, ready=False)
    w.script.pod_status(ready_at, REPLICA_B, namespace=SYSTEM)
    w.script.lead(REPLICA_B, 50.0, END)
    return w


def leader_killed_under_a_dead_kubelet(reported_back: float) -> World:
    """n3's kubelet is killed at 15 s; A, leading, is killed at 20.5 s and nothing restarts it until its
    kubelet reports it again at `reported_back` (seed 9191); B is paused from 20 s to 70 s. A leads again
    at 62 s."""
    w = base(workload=False, leader=False)
    w.script.lead(REPLICA_A, 0.0, 20.0)
    w.fault("kubelet-kill", "n3", 15.0, None)
    w.fault("leader-kill", REPLICA_A, 20.5, 20.6)
    w.fault("leader-pause", REPLICA_B, 20.0, 70.0)
    w.script.pod_status(reported_back, REPLICA_A, namespace=SYSTEM, restarts=1)
    w.script.lead(REPLICA_A, 62.0, END)
    return w


def scaled_to_zero_while_a_node_dies(leader_kill: bool = False) -> World:
    """A leads until 40 s, when both replicas are deleted (the Deployment scaled to 0) and nobody leads
    again; n1's kubelet was killed at 10 s and n1 is never tainted. `leader_kill`: the soak killed A's
    container at 39 s (it came back at once, and was deleted with the rest)."""
    w = base(down=("n1",), leader=False)
    w.script.lead(REPLICA_A, 0.0, 40.0)
    w.fault("kubelet-kill", "n1", 10.0, None)
    if leader_kill:
        w.fault("leader-kill", REPLICA_A, 39.0, 39.1)
    for name in (REPLICA_A, REPLICA_B):
        w.script.delete_pod(40.5, name, DRIVER, namespace=SYSTEM)
    return w


def scaled_to_zero_long() -> World:
    """A leads until 20 s; both replicas deleted at 20.2 s (a Deployment scaled to 0); the log runs to 240 s."""
    w = base(workload=False, leader=False)
    w.script.lead(REPLICA_A, 0.0, 20.0)
    for name in (REPLICA_A, REPLICA_B):
        w.script.delete_pod(20.2, name, DRIVER, namespace=SYSTEM)
    for node in ("n1", "n2", "n3"):
        w.script.heartbeats(node, END, 240.0)
    return w


def replicas_node_powered_off_across_a_store_fault() -> World:
    """Seed 4860 (policy mode, 60 min): both replicas run on n3, powered off from 20 s to 200 s; etcd restarts
    from 150 s to 155 s, inside that absence; n3's kubelet reports A Ready again at 205 s and A leads from
    210 s. The part of the absence after the store fault is still the power-off's doing."""
    w = base(workload=False, leader=False, down=("n3",))
    w.script.lead(REPLICA_A, 0.0, 20.0)
    w.fault("power-off", "n3", 20.0, 200.0)
    w.fault("etcd-restart", "etcd", 150.0, 155.0)
    w.script.silence(150.0, 155.0)
    w.script.heartbeats("n3", 200.0, 240.0)
    w.script.pod_status(205.0, REPLICA_A, namespace=SYSTEM, restarts=1)
    w.script.lead(REPLICA_A, 210.0, 240.0)
    for node in ("n1", "n2"):
        w.script.heartbeats(node, END, 240.0)
    return w


def scaled_to_zero_across_a_store_fault() -> World:
    """Both replicas deleted at 20.2 s (scaled to 0); etcd restarts from 100 s to 105 s; the log runs to 240 s."""
    w = scaled_to_zero_long()
    w.fault("etcd-restart", "etcd", 100.0, 105.0)
    w.script.silence(100.0, 105.0)
    return w


def replicas_gone_after(
    kind: str, target: str, ends: float | None, log_end: float, *, dead_node: bool = False
) -> World:
    """A leads until 20 s, when a `kind` fault on `target` begins (ending at `ends`), and nothing brings a
    replica back: A is not reported again and B is not Ready from 10 s (no fault's doing). The log runs to
    `log_end`; `dead_node`: n1's kubelet is killed at 10 s too, so a taint falls due while nobody leads."""
    w = base(workload=False, leader=False, down=("n1",) if dead_node else ())
    w.script.lead(REPLICA_A, 0.0, 20.0)
    w.script.pod_status(10.0, REPLICA_B, namespace=SYSTEM, ready=False)
    w.fault(kind, target, 20.0, ends)
    if kind in ("etcd-pause", "apiserver-stop", "etcd-restart") and ends is not None:
        w.script.silence(20.0, ends)
    if dead_node:
        w.fault("kubelet-kill", "n1", 10.0, None)
    for node in ("n1", "n2", "n3"):
        if not (dead_node and node == "n1"):
            w.script.heartbeats(node, END, log_end)
    return w


# A replica of the controller running under another ServiceAccount (its user agent names the replica).
ANOTHER_ACCOUNT = Actor(
    "system:serviceaccount:taintkeeper-system:default", f"taintkeeper-controller/0.1.0 (linux/amd64) ({REPLICA_B})"
)


def pod_removed_by_collection(at: float) -> World:
    """The leader removes n1's due pod with one deletecollection at `at`, not a DELETE of the pod."""
    w = failed_node(None)
    w.script.delete_collection(at, ["tol5-1"], A)
    return w


def second_actor_deletes_the_pod(by: Actor, at: float = 56.0) -> World:
    """The leader deletes n1's due pod on time; `by` deletes it again at `at`."""
    w = failed_node(55.2)
    w.script.delete_pod(at, "tol5-1", by)
    return w


def node_tainted_by(by: Actor) -> World:
    """The leader handles n1's failure on time, and `by` adds its own taint to n2, whose kubelet is well."""
    w = failed_node(55.2)
    w.script.add_taint(60.0, "n2", NOT_READY, by)
    w.script.remove_taint(61.0, "n2", NOT_READY, by)
    return w


def pod_status_written_by(by: Actor) -> World:
    """The leader handles n1's failure on time, and `by` writes the status of its pod tolerating forever."""
    w = failed_node(55.2)
    w.script.pod_status(56.0, "forever-2", ready=False, actor=by)
    return w


def leader_stops_after_the_first_fault() -> World:
    """A stops renewing at 30 s, as n1's kubelet is killed; B runs all along and never takes the Lease."""
    w = base(down=("n1",), leader=False)
    w.script.lead(REPLICA_A, 0.0, 30.0)
    w.fault("kubelet-kill", "n1", 10.0, None)
    return w


def pod_left_past_its_deadline() -> World:
    return failed_node(None)


def deletion_after_the_apiserver_returned() -> World:
    w = failed_node(72.0)
    w.fault("apiserver-stop", "kube-apiserver", 54.0, 70.0)
    w.script.silence(54.0, 70.0)
    return w


def deletion_long_after_the_apiserver_returned() -> World:
    w = failed_node(80.0)
    w.fault("apiserver-stop", "kube-apiserver", 54.0, 70.0)
    w.script.silence(54.0, 70.0)
    return w


def deletion_after_slow_pod_writes(slow: bool) -> World:
    """etcd restarted 54-70 s; a pod's deadline (55.2 s) fell in it and it was deleted at 76 s. `slow`: the
    apiserver took 4 s to answer a pod write received at 71 s (seed 7207: its pods watch cache catching up
    after etcd's restart), and its next pod write at 75.5 s was prompt; else that write at 71 s was prompt."""
    w = failed_node(76.0)
    w.fault("etcd-restart", "etcd", 54.0, 70.0)
    w.script.silence(54.0, 70.0)
    w.script.create_pod(71.0, "first-after", took=4.0 if slow else None)
    w.script.create_pod(75.5, "second-after")
    return w


def leader_killed_mid_countdown() -> World:
    w = base(down=("n1",), leader=False)
    w.script.lead(REPLICA_A, 0.0, 52.0)
    w.fault("leader-kill", REPLICA_A, 53.0, 53.2)
    w.script.lead(REPLICA_B, 69.0, END)  # A's Lease expired: B acquires
    n1_fails(w)
    w.script.delete_pod(71.0, "tol5-1", B)
    return w


def self_eviction_handover(delete_at: float) -> World:
    """A releases the Lease at 52 s (its own pod evicted); B, still starting, acquires only at 66 s."""
    w = base(down=("n1",), leader=False)
    w.script.lead(REPLICA_A, 0.0, 50.0)
    w.script.release(52.0, REPLICA_A)
    w.script.lead(REPLICA_B, 66.0, END)
    n1_fails(w)
    w.script.delete_pod(delete_at, "tol5-1", B)
    return w


def taint_lifted_before_a_leader_could_act() -> World:
    """A is killed at 53 s; n1's kubelet is back and its taint lifted at 60 s, before B leads at 69 s."""
    w = base(down=("n1",), leader=False)
    w.script.lead(REPLICA_A, 0.0, 52.0)
    w.fault("leader-kill", REPLICA_A, 53.0, 53.2)
    n1_fails(w, kubelet_back=58.0)
    w.script.remove_taint(60.0, "n1", UNREACHABLE, DRIVER)
    w.script.lead(REPLICA_B, 69.0, END)
    return w


def node_ready_again_before_a_leader_could_act(delete_at: float | None = None) -> World:
    """Seed 7207's case: A is killed at 53 s, n1's deadline (55 s) passes with no leader, its kubelet
    reports Ready=True at 58.5 s, and B, leading from 69 s, lifts the stale taint at 71 s."""
    w = base(down=("n1",), leader=False)
    w.script.lead(REPLICA_A, 0.0, 52.0)
    w.fault("leader-kill", REPLICA_A, 53.0, 53.2)
    n1_fails(w, kubelet_back=58.0)
    w.script.set_ready(58.5, "n1", "True", kubelet("n1"))
    w.script.lead(REPLICA_B, 69.0, END)
    if delete_at is not None:
        w.script.delete_pod(delete_at, "tol5-1", B)
    w.script.remove_taint(71.0, "n1", UNREACHABLE, B)
    return w


def standby_deletes_while_the_leader_holds_the_lease() -> World:
    return failed_node(55.2, by=B)


def replica_wins_the_lease_back(*, taint_term: float, delete_term: float) -> World:
    """A leads from 0 s, B from 21 s, A again from 41 s; A taints n1 at 50 s and deletes its pod at 55.2 s,
    each write made for the term its user agent names (acquired at `taint_term`, `delete_term`)."""
    w = base(down=("n1",), leader=False)
    w.script.lead(REPLICA_A, 0.0, 20.0)
    w.script.lead(REPLICA_B, 21.0, 40.0)
    w.script.lead(REPLICA_A, 41.0, END)
    n1_fails(w, by=controller(REPLICA_A, term=taint_term))
    w.script.delete_pod(55.2, "tol5-1", controller(REPLICA_A, term=delete_term))
    return w


def event_about_a_pod_after_the_lease_changed_hands(by: Actor) -> World:
    """A leads until 40 s, B from 41 s; B taints n1 at 50 s and deletes the pod at 55.2 s, and `by`
    posts its "Marking for deletion" event at 50.1 s."""
    w = base(down=("n1",), leader=False)
    w.script.lead(REPLICA_A, 0.0, 40.0)
    w.script.lead(REPLICA_B, 41.0, END)
    n1_fails(w, by=B)
    w.script.post_event(50.1, "tol5-1", "TaintManagerEviction", by)
    w.script.delete_pod(55.2, "tol5-1", B)
    return w


# --- disruption budgets (I8) and the out-of-service fence (I9) ---


def refused_every_5s(first: float, last: float) -> tuple[tuple[float, str], ...]:
    count = int((last - first) // 5) + 1
    return tuple((first + 5 * index, "refused") for index in range(count))


def drained_budgeted_pod(
    *, removals: tuple[tuple[float, str], ...], namespace: str = BUDGETED, end: float = END
) -> World:
    """n2 healthy; at 30 s someone taints it with the soak's drain taint; `api-3`, in `namespace` (one whose
    pods respect their disruption budget) and tolerating the taint 5 s, is due at 35 s. `removals`: the
    controller's (time, how) for it: "evict", "refused" (an Eviction the budget refuses) or "delete".
    `end`: the nodes heartbeat (and the log runs) until then."""
    w = base()
    for node in ("n1", "n2", "n3"):
        w.script.heartbeats(node, END + 10.0, end)
    w.script.lead(REPLICA_A, END + 2.0, end)
    w.script.create_pod(3.0, "api-3", [*timed(5), toleration(CHAOS_TAINT, 5)], namespace=namespace)
    w.script.bind(3.1, "api-3", "n2", namespace=namespace)
    w.script.pod_status(4.0, "api-3", namespace=namespace)
    w.fault("manual-taint", "n2", 30.0, None)
    w.script.add_taint(30.0, "n2", CHAOS_TAINT, DRIVER)
    for moment, how in removals:
        w.script.delete_pod(moment, "api-3", A, namespace=namespace, evict=how != "delete", refused=how == "refused")
    return w


def budgeted_pod_on_a_failed_node_deleted() -> World:
    """Node failures are never budgeted: a budgeted pod on a dead node goes with a DELETE at its deadline."""
    w = base(down=("n1",))
    w.script.create_pod(3.0, "api-3", timed(5), namespace=BUDGETED)
    w.script.bind(3.1, "api-3", "n1", namespace=BUDGETED)
    n1_fails(w)
    w.script.delete_pod(55.2, "tol5-1", A)
    w.script.delete_pod(55.2, "api-3", A, namespace=BUDGETED)
    return w


def fenced(
    *, fence_at: float | None = 70.0, force: tuple[str, ...] = ("tol5-1",), at: float = 70.5, fail: bool = True
) -> World:
    """n1 dies (if `fail`): tainted at 50 s, its 5 s pod deleted gracefully at 55.2 s and left Terminating
    (no kubelet to finish it). At `fence_at` an operator adds the out-of-service taint; at `at` the
    controller force-deletes the pods `force`."""
    w = failed_node(55.2) if fail else base()
    if fence_at is not None:
        w.script.add_taint(fence_at, "n1", OUT_OF_SERVICE, DRIVER, value="nodeshutdown")
        if not fail:  # a NoExecute taint like any other: the pod not tolerating it goes at once, gracefully
            w.script.delete_pod(fence_at + 0.2, "tol5-1", A)
    for name in force:
        w.script.delete_pod(at, name, A, final=True)
    return w


def fenced_pod_force_deleted_by_two(answer_first: str) -> World:
    """n1 dies and is fenced; kube-controller-manager's PodGC (on beside taintkeeper) and the out-of-service
    handling both force-delete its terminating pod. `answer_first`: who comes first; the other's answer is
    404 (seed 6061: 17 pods at 07:52:33), or a 504 whose outcome the caller cannot know."""
    w = fenced(force=())
    first, second = (POD_GC, A) if answer_first == "podgc" else (A, POD_GC)
    w.script.delete_pod(70.3, "tol5-1", first, final=True)
    w.script.delete_pod(70.5, "tol5-1", second, final=True)
    return w


def pod_deleted_twice() -> World:
    w = failed_node(55.2)
    w.script.delete_pod(56.0, "tol5-1", A)
    return w


def pod_deleted_again_after_it_was_gone() -> World:
    w = failed_node(55.2)
    w.script.delete_pod(55.5, "tol5-1", DRIVER, final=True)
    w.script.delete_pod(56.0, "tol5-1", A)  # answered 404
    return w


def handover(w: World) -> None:
    """A leads until 50.5 s, B from 51 s."""
    w.script.lead(REPLICA_A, 0.0, 50.5)
    w.script.lead(REPLICA_B, 51.0, END)


def next_leader_repeats_a_taint() -> World:
    w = base(down=("n1",), leader=False, workload=False)
    handover(w)
    n1_fails(w, workload=False)
    w.script.add_taint(52.0, "n1", UNREACHABLE, B)  # already there: nothing changes
    return w


def next_leader_undoes_a_taint() -> World:
    w = base(down=("n1",), leader=False, workload=False)
    handover(w)
    n1_fails(w, workload=False)
    w.script.remove_taint(53.0, "n1", UNREACHABLE, B)
    return w


def next_leader_removes_a_taint_after_the_kubelet_came_back() -> World:
    w = base(down=("n1",), leader=False, workload=False)
    handover(w)
    n1_fails(w, kubelet_back=51.5, workload=False)
    w.script.set_ready(52.0, "n1", "True", kubelet("n1"))
    w.script.remove_taint(53.0, "n1", UNREACHABLE, B)
    return w


def stale_taint_on_a_ready_node(not_ready_again: float | None = None, delete_at: float | None = None) -> World:
    """n1 is tainted unreachable at 50 s and its kubelet reports Ready=True at 52 s; the monitor lifts
    the taint at 70 s. tol5-1's deadline (55 s) passes under a stale taint. With `not_ready_again`, the
    node is marked Unknown again then, under the same taint."""
    w = base(down=("n1",))
    n1_fails(w, kubelet_back=51.5)
    w.script.set_ready(52.0, "n1", "True", kubelet("n1"))
    if not_ready_again is not None:
        w.script.set_ready(not_ready_again, "n1", "Unknown", A)
    if delete_at is not None:
        w.script.delete_pod(delete_at, "tol5-1", A)
    w.script.remove_taint(70.0, "n1", UNREACHABLE, A)
    return w


def next_leader_swaps_the_failure_taint() -> World:
    w = base(down=("n1",), leader=False, workload=False)
    handover(w)
    n1_fails(w, key=NOT_READY, workload=False)
    w.script.swap_taint(53.0, "n1", NOT_READY, UNREACHABLE, B)
    return w


def controller_taints_a_heartbeating_node() -> World:
    w = base(workload=False)
    w.script.add_taint(50.0, "n2", UNREACHABLE, A)
    return w


def controller_marks_a_heartbeating_node_unknown() -> World:
    w = base(workload=False)
    w.script.set_ready(50.0, "n2", "Unknown", A)
    return w


def hand_added_taint_evicts_from_a_healthy_node() -> World:
    w = base()
    w.script.create_pod(2.4, "default-3", DEFAULTS)
    w.script.bind(2.5, "default-3", "n2")
    w.fault("manual-taint", "n2", 30.0, 45.0, key=CHAOS_TAINT, value="417022", effect="NoExecute")
    w.script.add_taint(30.0, "n2", CHAOS_TAINT, DRIVER, added=30.0, value="417022")
    w.script.delete_pod(30.4, "default-3", A)
    w.script.remove_taint(45.0, "n2", CHAOS_TAINT, DRIVER)
    return w


def pod_bound_by_a_slow_apiserver_to_a_drained_node(evicted: float) -> World:
    """The binding took 1.2 s to answer (seed 6061, an etcd pause): the pod was on n2 from its arrival, and
    its 5 s toleration counts from there (PodScheduled is stamped then, to the second)."""
    w = base()
    w.fault("manual-taint", "n2", 10.0, 60.0, key=CHAOS_TAINT, value="080096", effect="NoExecute")
    w.script.add_taint(10.0, "n2", CHAOS_TAINT, DRIVER, added=10.0, value="080096")
    w.script.create_pod(19.5, "default-3", [*DEFAULTS, toleration(CHAOS_TAINT, 5)])
    w.script.bind(20.0, "default-3", "n2", took=1.2)
    w.script.delete_pod(evicted, "default-3", A)
    w.script.remove_taint(60.0, "n2", CHAOS_TAINT, DRIVER)
    return w


def statefulset_reuses_a_pod_name() -> World:
    """chaos-db-0 evicted from n2, replaced by a new chaos-db-0 (a new uid) that is evicted in turn."""
    w = base()
    s = w.script
    s.create_pod(2.4, "chaos-db-0", timed(20), actor=STATEFULSET)
    s.bind(2.5, "chaos-db-0", "n2")
    w.fault("manual-taint", "n2", 30.0, 40.0, key=CHAOS_TAINT)
    s.add_taint(30.0, "n2", CHAOS_TAINT, DRIVER, added=30.0)
    s.delete_pod(30.3, "chaos-db-0", A)
    s.delete_pod(31.5, "chaos-db-0", kubelet("n2"), final=True)
    s.create_pod(32.0, "chaos-db-0", timed(20), actor=STATEFULSET)
    s.remove_taint(40.0, "n2", CHAOS_TAINT, DRIVER)
    s.bind(41.0, "chaos-db-0", "n2")  # only the binding says where the new pod runs
    w.fault("manual-taint", "n2", 60.0, 70.0, key=CHAOS_TAINT)
    s.add_taint(60.0, "n2", CHAOS_TAINT, DRIVER, added=60.0)
    s.delete_pod(60.3, "chaos-db-0", A, evict=True, precondition=False)  # an Eviction names the pod only
    s.remove_taint(70.0, "n2", CHAOS_TAINT, DRIVER)
    return w


def pod_admitted_bare_while_the_webhook_was_ready() -> World:
    w = base()
    w.script.create_pod(20.0, "default-9", None)
    w.script.patch_tolerations(23.0, "default-9", DEFAULTS, A)  # a backfill does not excuse a Ready webhook
    return w


def pod_admitted_bare_when_the_webhook_call_failed_open(backfill_at: float | None) -> World:
    """The apiserver's call to the webhook failed (a replica on a dead node still in the endpoints) and
    was ignored, as its audit annotation says, while the other replica was Ready."""
    w = base()
    w.script.create_pod(20.0, "default-9", None, failed_open="default-tolerations.taintkeeper.io")
    if backfill_at is not None:
        w.script.patch_tolerations(backfill_at, "default-9", DEFAULTS, A)
    return w


def pod_admitted_bare_while_the_webhook_pod_was_ready_but_not_yet_in_its_endpoints() -> World:
    """The webhook pod turned Ready again (after a readiness failure) and the endpoint slice
    controller had not yet published it: kube-apiserver could not reach it."""
    w = base()
    w.script.pod_status(15.0, WEBHOOK_POD, namespace=SYSTEM, ready=False)
    w.script.publish_endpoints(15.1)
    w.script.pod_status(16.0, WEBHOOK_POD, namespace=SYSTEM)
    w.script.create_pod(20.0, "default-9", None)
    w.script.patch_tolerations(23.0, "default-9", DEFAULTS, A)
    w.script.publish_endpoints(25.0)
    return w


def pod_admitted_bare_while_the_webhook_pods_node_was_powered_off(*, back: float | None) -> World:
    """n3, the webhook pod's node, lost power at 15 s: the API still shows the pod Ready. With `back`,
    power returns then and the kubelet reports the pod (restarted) Ready 2 s later."""
    w = base()
    w.fault("power-off", "n3", 15.0, back)
    if back is None:  # the controller marks the dead node and taints it
        w.script.set_ready(55.0, "n3", "Unknown", A)
        w.script.add_taint(55.05, "n3", UNREACHABLE, A, added=55.0)
        for name in (WEBHOOK_POD, REPLICA_A, REPLICA_B):  # I11: its pods marked NotReady
            w.script.pod_status(55.1, name, namespace=SYSTEM, ready=False)
    else:
        w.script.pod_status(back + 2.0, WEBHOOK_POD, namespace=SYSTEM)
        w.script.publish_endpoints(back + 2.1)
    w.script.create_pod(20.0, "default-9", None)
    w.script.patch_tolerations(23.0, "default-9", DEFAULTS, A)
    w.script.create_pod(40.0, "default-10", None)
    w.script.patch_tolerations(43.0, "default-10", DEFAULTS, A)
    return w


def webhook_deleted(*, backfill_at: float | None, bare_at: float = 20.0) -> World:
    """The soak deletes the only webhook pod at 15 s (a fault; no replacement comes); a pod is admitted
    without the defaults at `bare_at`."""
    w = base()
    w.fault("webhook-delete", WEBHOOK_POD, 15.0, 15.0)
    w.script.delete_pod(15.0, WEBHOOK_POD, DRIVER, namespace=SYSTEM)
    w.script.create_pod(bare_at, "default-9", None)
    if backfill_at is not None:
        w.script.patch_tolerations(backfill_at, "default-9", DEFAULTS, A)
    return w


def webhook_stopped(*, bare_at: float) -> World:
    """The webhook's only pod deleted at 15 s by no fault (its Deployment scaled to 0, say); a pod admitted
    without the defaults at `bare_at`, backfilled 3 s later."""
    w = base()
    w.script.delete_pod(15.0, WEBHOOK_POD, DRIVER, namespace=SYSTEM)
    w.script.create_pod(bare_at, "default-9", None)
    w.script.patch_tolerations(bare_at + 3.0, "default-9", DEFAULTS, A)
    return w


def webhook_failing_open(*times: float) -> World:
    """Each pod's webhook call failed open (no fault), its pod backfilled 3 s later."""
    w = base()
    for number, at in enumerate(times):
        w.script.create_pod(at, f"default-{number}", None, failed_open="default-tolerations.taintkeeper.io")
        w.script.patch_tolerations(at + 3.0, f"default-{number}", DEFAULTS, A)
    return w


WEBHOOK_ACCOUNT = Actor(
    "system:serviceaccount:taintkeeper-system:taintkeeper-webhook", "taintkeeper-webhook/0.1.0 (taintkeeper-webhook-1)"
)


def registration_written(
    resource: str, name: str, verb: str, actor: Actor, *, code: int = 200, policy: bool = False
) -> World:
    w = base()
    if policy:
        w.config = soak_config(policy=True)
    w.script.register(30.0, resource, name, verb, actor, code=code)
    return w


def pod_creation_refused_by_the_webhook() -> World:
    w = base()
    w.script.create_pod(20.0, "default-9", None, code=500, message=WEBHOOK_DOWN)
    return w


def opted_out_pod_without_defaults() -> World:
    w = base()
    w.script.create_pod(20.0, "optout-9", None, labels={"taintkeeper.io/skip": "true"})
    return w


def builtin_plugin_missed_a_pod() -> World:
    w = base()
    w.config = builtin_config()
    w.script.create_pod(20.0, "default-9", None)
    return w


def policy_mode_pod_admitted_bare_and_backfilled() -> World:
    """taintkeeper installed with its admission policy: kube-apiserver adds the tolerations in process, so
    a bare pod is a failure even when no webhook pod ran and the backfill caught it in 3 s."""
    w = webhook_deleted(backfill_at=23.0)
    w.config = replace(w.config, webhook=None, in_process_admission="taintkeeper's MutatingAdmissionPolicy")
    return w


POD_GC = Actor(
    "system:serviceaccount:kube-system:pod-garbage-collector",
    "kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/f0e1d2c/system:serviceaccount:"
    "kube-system:pod-garbage-collector",
)


def builtins_delete(*removals: tuple[float, Actor, bool]) -> World:
    """n1 dies; the built-ins taint it at 50 s and remove `tol5-1` by (time, actor, force) each."""
    w = base(down=("n1",))
    w.config = builtin_config()
    n1_fails(w, by=NODE_CONTROLLER)
    for moment, actor, force in removals:
        w.script.delete_pod(moment, "tol5-1", actor, final=force)
    return w


def builtins_paused(delete_at: float) -> World:
    """kube-controller-manager paused from 52 s to 70 s (past its renew deadline: it exits and is started
    again, then waits for its Lease), deleting the pod due at 55 s at `delete_at`."""
    w = builtins_delete((delete_at, NODE_CONTROLLER, False))
    w.fault("leader-pause", "kube-controller-manager", 52.0, 70.0)
    return w


def builtins_lose_their_lease_to_a_store_fault(delete_at: float) -> World:
    """etcd paused from 52 s to 63 s (past kube-controller-manager's renew deadline: it exits, is started
    again and waits for its Lease), deleting the pod due at 55 s at `delete_at`."""
    w = builtins_delete((delete_at, NODE_CONTROLLER, False))
    w.fault("etcd-pause", "etcd", 52.0, 63.0)
    return w


def builtins_drain_a_budgeted_pod_with_a_delete() -> World:
    w = drained_budgeted_pod(removals=())
    w.config = builtin_config()
    w.script.delete_pod(35.2, "api-3", NODE_CONTROLLER, namespace=BUDGETED)
    return w


def controller_pod_crash_loops() -> World:
    w = base(replicas=False)
    name = "taintkeeper-controller-6f7b9c-k2x4q"
    w.script.create_pod(1.0, name, DEFAULTS, namespace=SYSTEM)
    w.script.bind(1.1, name, "n2", namespace=SYSTEM)
    w.script.pod_status(2.0, name, namespace=SYSTEM)
    w.script.pod_status(40.0, name, namespace=SYSTEM, waiting="CrashLoopBackOff", restarts=3)
    return w


def controller_pod_backs_off_after_the_soak_killed_it() -> World:
    w = controller_pod_crash_loops()
    w.fault("leader-kill", "taintkeeper-controller-6f7b9c-k2x4q", 30.0, 30.1)
    return w


def runtime_fails_while_the_kubelet_heartbeats(
    *, marked_at: float | None, ready_again: float | None = None, apiserver_stopped: bool = False
) -> World:
    """n1's containerd is killed at 10 s; its kubelet, still renewing the Lease, reports Ready=False at
    40 s; the controller taints it not-ready at once and deletes the pod tolerating 5 s on time. The pod
    tolerating forever is marked NotReady at `marked_at` (None: never); `ready_again`: the kubelet
    reports Ready=True then; `apiserver_stopped`: from 46 s to 60 s, before the marking was owed."""
    w = base()
    if apiserver_stopped:
        w.fault("apiserver-stop", "kube-apiserver", 46.0, 60.0)
        w.script.silence(46.0, 60.0)
    w.fault("runtime-then-kubelet", "n1", 10.0, None)
    w.script.set_ready(40.0, "n1", "False", kubelet("n1"))
    w.script.add_taint(40.05, "n1", NOT_READY, A, added=40.0)
    w.script.delete_pod(45.2, "tol5-1", A)
    if marked_at is not None:
        w.script.pod_status(marked_at, "forever-2", ready=False)
    if ready_again is not None:
        w.script.set_ready(ready_again, "n1", "True", kubelet("n1"))
        w.script.remove_taint(ready_again + 0.05, "n1", NOT_READY, A)
    return w


def early_deletion_before_the_soak_began() -> World:
    w = pod_deleted_early()
    w.config = replace(w.config, since=T0 + 60.0)
    return w


SCENARIOS: list[tuple[str, Callable[[], World], dict[str, int]]] = [
    (
        "a node dies and its pod with a 5 s toleration goes 5.2 s after the taint; the one tolerating forever stays",
        node_dies_and_its_pod_goes_on_time,
        {},
    ),
    ("I1: a pod deleted 3 s before its toleration runs out is early", pod_deleted_early, {"I1": 1}),
    ("a pod deleted 0.5 s early is within the slack", pod_deleted_half_a_second_early, {}),
    ("a pod evicted through the Eviction API on time is fine", pod_evicted_through_the_eviction_api, {}),
    (
        "I1: a pod deleted from a node without a NoExecute taint has no cause, I2: and that dead node never got one",
        pod_deleted_without_a_taint,
        {"I1": 1, "I2": 1},
    ),
    ("a not-ready -> unreachable swap keeps the eviction's start", swap_keeps_the_start, {}),
    ("I2: after a swap the deadline still counts from the first taint", lambda: swap_keeps_the_start(61.0), {"I2": 1}),
    (
        "a swap after a Ready stretch counts from the swapped-in taint, as the controller does",
        lambda: swap_after_a_ready_stretch(66.0),
        {},
    ),
    (
        "I2: after a swap across a Ready stretch the deadline is the swapped-in taint's",
        lambda: swap_after_a_ready_stretch(72.0),
        {"I2": 1},
    ),
    (
        "I4: a replica writing past its renew deadline while nobody else holds the Lease (the fence); I10: and the "
        "stand-by never took it",
        replica_writes_past_its_renew_deadline,
        {"I4": 1, "I10": 1},
    ),
    (
        "a stand-by that takes the Lease 20 s after the leader stopped is within the hand-over bound",
        lambda: nobody_leads_though_a_replica_runs(40.0),
        {},
    ),
    (
        "I10: a stand-by running all along and taking the Lease only 30 s after the leader stopped",
        lambda: nobody_leads_though_a_replica_runs(50.0),
        {"I10": 1},
    ),
    (
        "a stand-by not Ready (caches syncing) until 40 s, leading at 50 s: within the bound from when it could",
        lambda: standby_not_ready_until(40.0),
        {},
    ),
    (
        "I10: the same stand-by Ready from 25 s and leading only at 50 s",
        lambda: standby_not_ready_until(25.0),
        {"I10": 1},
    ),
    (
        "a leader killed while its kubelet is dead cannot lead until the kubelet reports it again",
        lambda: leader_killed_under_a_dead_kubelet(60.5),
        {},
    ),
    (
        "I10: the killed leader reported back at 30 s and leading only at 62 s",
        lambda: leader_killed_under_a_dead_kubelet(30.0),
        {"I10": 1},
    ),
    (
        "I2 and I10: with the controller scaled to 0 a dead node's taint is late, and the absence itself fails: "
        "absent replicas are no fault's doing",
        scaled_to_zero_while_a_node_dies,
        {"I2": 1, "I10": 1},
    ),
    (
        "I2 and I10: a leader kill just before the scale to 0 excuses only the hand-over bound",
        lambda: scaled_to_zero_while_a_node_dies(leader_kill=True),
        {"I2": 1, "I10": 1},
    ),
    ("I10: the controller scaled to 0 with nothing due fails on the absence alone", scaled_to_zero_long, {"I10": 1}),
    (
        "the replicas' node powered off across a store fault: the absence after the store fault is still the "
        "power-off's",
        replicas_node_powered_off_across_a_store_fault,
        {},
    ),
    (
        "I10: scaled to 0 across a store fault: the store fault does not excuse what follows it",
        scaled_to_zero_across_a_store_fault,
        {"I10": 1},
    ),
    (
        "a leader killed and never back, its stand-by not Ready: the kill excuses the absence for the restart back-off",
        lambda: replicas_gone_after("leader-kill", REPLICA_A, 20.1, 300.0),
        {},
    ),
    (
        "I10: and no longer: past the kill plus the 300 s back-off, the absence is the controller's",
        lambda: replicas_gone_after("leader-kill", REPLICA_A, 20.1, 400.0),
        {"I10": 1},
    ),
    (
        "I2 and I10: a dead node's taint owed during that absence is judged once the excuse ends, not left unjudged",
        lambda: replicas_gone_after("leader-kill", REPLICA_A, 20.1, 400.0, dead_node=True),
        {"I2": 1, "I10": 1},
    ),
    (
        "the replicas' node powered off for good: excused while they wait for their eviction and replacement "
        "(the node's own taint not yet judgeable)",
        lambda: replicas_gone_after("power-off", "n3", None, 650.0),
        {},
    ),
    (
        "I2 and I10: but not past the eviction (50 s grace, 300 s toleration) and a 300 s start elsewhere",
        lambda: replicas_gone_after("power-off", "n3", None, 700.0),
        {"I2": 1, "I10": 1},
    ),
    (
        "I10: a store fault excuses the replicas it cut off only for the back-off after it",
        lambda: replicas_gone_after("etcd-pause", "etcd", 30.0, 400.0),
        {"I10": 1},
    ),
    ("a pod removed on time by a deletecollection is a deletion", lambda: pod_removed_by_collection(55.2), {}),
    ("I1: and one 3 s early is early", lambda: pod_removed_by_collection(52.0), {"I1": 1}),
    (
        "I3: a second actor deleting the pod the controller deleted",
        lambda: second_actor_deletes_the_pod(NODE_CONTROLLER),
        {"I3": 1, "I4": 1},
    ),
    (
        "the soak's driver deleting a pod the controller deleted is its churn",
        lambda: second_actor_deletes_the_pod(DRIVER),
        {},
    ),
    ("the pod's kubelet deleting it last is its termination", lambda: second_actor_deletes_the_pod(kubelet("n1")), {}),
    (
        "I4: a replica deleting a due pod on time as another ServiceAccount",
        lambda: failed_node(55.2, by=ANOTHER_ACCOUNT),
        {"I4": 1},
    ),
    (
        "I4: the built-in node controller tainting a node beside taintkeeper",
        lambda: node_tainted_by(NODE_CONTROLLER),
        {"I4": 2},
    ),
    ("the soak's driver tainting a node is its fault", lambda: node_tainted_by(DRIVER), {}),
    ("I4: a pod's status written by another ServiceAccount", lambda: pod_status_written_by(ANOTHER_ACCOUNT), {"I4": 1}),
    ("the scheduler writing a pod's status is its own", lambda: pod_status_written_by(SCHEDULER), {}),
    (
        "I10 and I2: a controller that stops leading at the first fault, its stand-by running, fails both",
        leader_stops_after_the_first_fault,
        {"I10": 1, "I2": 1},
    ),
    (
        "a new leader gives a dead node a whole grace period from its first sight, as upstream",
        lambda: new_leader_taints_a_dead_node_a_grace_period_after_it_began(84.0),
        {},
    ),
    (
        "I2: a dead node tainted later than a grace period after the leader began",
        lambda: new_leader_taints_a_dead_node_a_grace_period_after_it_began(110.0),
        {"I2": 1},
    ),
    ("I2: a pod left on its failed node past its deadline is late", pod_left_past_its_deadline, {"I2": 1}),
    (
        "a deletion late because the apiserver was stopped counts from its return",
        deletion_after_the_apiserver_returned,
        {},
    ),
    (
        "I2: a deletion beyond the apiserver's return plus the slack is late",
        deletion_long_after_the_apiserver_returned,
        {"I2": 1},
    ),
    (
        "a leader killed mid-countdown: the deadline counts from the new leader's acquisition",
        leader_killed_mid_countdown,
        {},
    ),
    (
        "a budgeted pod under a drain taint leaves through an Eviction at its deadline",
        lambda: drained_budgeted_pod(removals=((35.2, "evict"),)),
        {},
    ),
    (
        "I8: a budgeted pod under a drain taint removed with a DELETE, bypassing its budget",
        lambda: drained_budgeted_pod(removals=((35.2, "delete"),)),
        {"I8": 1},
    ),
    (
        "a budgeted pod whose budget refuses its Eviction waits, asked again every 5 s: not late",
        lambda: drained_budgeted_pod(
            removals=((35.2, "refused"), (40.2, "refused"), (45.2, "refused"), (50.2, "evict"))
        ),
        {},
    ),
    (
        "taintkeeper's own replica under a drain taint waits while its budget refuses: its namespace is budgeted",
        lambda: drained_budgeted_pod(
            removals=((35.2, "refused"), (40.2, "refused"), (45.2, "evict")), namespace=SYSTEM
        ),
        {},
    ),
    (
        "I8: taintkeeper's own replica under a drain taint removed with a DELETE, bypassing its budget",
        lambda: drained_budgeted_pod(removals=((35.2, "delete"),), namespace=SYSTEM),
        {"I8": 1},
    ),
    (
        "I2: a budgeted pod asked once, refused, and never asked again is late",
        lambda: drained_budgeted_pod(removals=((35.2, "refused"),)),
        {"I2": 1},
    ),
    (
        "I2: a budgeted pod asked again only 18 s after its budget refused is late",
        lambda: drained_budgeted_pod(removals=((35.2, "refused"), (40.2, "refused"), (58.0, "evict"))),
        {"I2": 1},
    ),
    (
        "a budgeted pod still refused when its namespace's budget timeout (120 s) runs out is deleted: on time",
        lambda: drained_budgeted_pod(removals=(*refused_every_5s(35.2, 155.0), (155.2, "delete")), end=170.0),
        {},
    ),
    (
        "I2: a budgeted pod still refused 10 s after its budget timeout ran out and never deleted is late",
        lambda: drained_budgeted_pod(removals=refused_every_5s(35.2, 195.0), end=200.0),
        {"I2": 1},
    ),
    (
        "I8: a budgeted pod deleted before its budget timeout ran out bypassed its budget",
        lambda: drained_budgeted_pod(removals=(*refused_every_5s(35.2, 100.0), (100.2, "delete"))),
        {"I8": 1},
    ),
    (
        "I2: a budgeted pod nobody asked to evict is late all the same",
        lambda: drained_budgeted_pod(removals=((60.0, "evict"),)),
        {"I2": 1},
    ),
    (
        "a budgeted pod on a failed node goes with a DELETE: node failures are never budgeted",
        budgeted_pod_on_a_failed_node_deleted,
        {},
    ),
    ("a fenced dead node's terminating pod is force-deleted: not a second deletion", fenced, {}),
    (
        "a fenced node's pod force-deleted by PodGC, then by the out-of-service handling (404): no second action",
        lambda: fenced_pod_force_deleted_by_two("podgc"),
        {},
    ),
    (
        "I9: a force deletion on a dead node nobody fenced (I3: so it is a second deletion too)",
        lambda: fenced(fence_at=None),
        {"I3": 1, "I9": 1},
    ),
    (
        "I9: a force deletion on a fenced node still Ready",
        lambda: fenced(fence_at=30.0, force=("forever-2",), at=30.5, fail=False),
        {"I9": 1},
    ),
    (
        "I9: a force deletion of a pod tolerating the fence and not terminating",
        lambda: fenced(force=("forever-2",)),
        {"I9": 1},
    ),
    ("I3: a pod deleted twice by the controller", pod_deleted_twice, {"I3": 1}),
    (
        "I3: a second deletion answered 404 after the pod was gone still counts",
        pod_deleted_again_after_it_was_gone,
        {"I3": 1},
    ),
    ("I3: the next leader repeating a taint the last one just added", next_leader_repeats_a_taint, {"I3": 1}),
    (
        "I3: the next leader undoing the last one's taint within the lease duration",
        next_leader_undoes_a_taint,
        {"I3": 1},
    ),
    (
        "a node-failure taint on a node Ready again is stale: the deadline passing under it owes nothing",
        stale_taint_on_a_ready_node,
        {},
    ),
    (
        "I2: the stale taint owes the eviction once the node is not Ready again under it",
        lambda: stale_taint_on_a_ready_node(not_ready_again=58.0),
        {"I2": 1},
    ),
    (
        "a node Ready again before a new leader could act owes nothing under its stale taint",
        node_ready_again_before_a_leader_could_act,
        {},
    ),
    (
        "I12: the new leader deleting the pod from the node Ready again under the stale taint (seed 7207)",
        lambda: node_ready_again_before_a_leader_could_act(delete_at=69.3),
        {"I12": 1},
    ),
    (
        "the eviction owed from when the node is not Ready again, made then",
        lambda: stale_taint_on_a_ready_node(not_ready_again=58.0, delete_at=58.3),
        {},
    ),
    (
        "the next leader removing a taint after the kubelet reported Ready is no revert",
        next_leader_removes_a_taint_after_the_kubelet_came_back,
        {},
    ),
    ("the next leader swapping not-ready for unreachable is no revert", next_leader_swaps_the_failure_taint, {}),
    (
        "I4: a standby deleting a pod while the Lease names the leader",
        standby_deletes_while_the_leader_holds_the_lease,
        {"I4": 1},
    ),
    (
        "writes for the term their replica holds, won back from another, are one actor",
        lambda: replica_wins_the_lease_back(taint_term=41.0, delete_term=41.0),
        {},
    ),
    (
        "I4: a replica writing for the term it held before another's, once it leads again (a pass that hung)",
        lambda: replica_wins_the_lease_back(taint_term=41.0, delete_term=0.0),
        {"I4": 1},
    ),
    (
        "I4: every write of a pass of an ended term is one (the Unknown mark and the taint)",
        lambda: replica_wins_the_lease_back(taint_term=0.0, delete_term=41.0),
        {"I4": 2},
    ),
    (
        "the leader's event about the pod it is about to delete is one actor",
        lambda: event_about_a_pod_after_the_lease_changed_hands(B),
        {},
    ),
    (
        "I4: an event about a pod posted by the replica that lost the Lease (a queued one, sent late)",
        lambda: event_about_a_pod_after_the_lease_changed_hands(A),
        {"I4": 1},
    ),
    ("I5: the controller tainting a heartbeating node", controller_taints_a_heartbeating_node, {"I5": 1}),
    ("I5: the controller marking a heartbeating node Unknown", controller_marks_a_heartbeating_node_unknown, {"I5": 1}),
    (
        "I5 (and I1): a pod deleted from a heartbeating node without a taint",
        pod_deleted_from_a_healthy_node_without_a_taint,
        {"I1": 1, "I5": 1},
    ),
    (
        "a hand-added NoExecute taint may evict at once from a healthy node",
        hand_added_taint_evicts_from_a_healthy_node,
        {},
    ),
    ("a StatefulSet pod name used twice is two pods", statefulset_reuses_a_pod_name, {}),
    (
        "a store fault lasts until the apiserver answers pod writes promptly again: deleted 0.5 s after, on time",
        lambda: deletion_after_slow_pod_writes(True),
        {},
    ),
    (
        "I2: the same deletion when pod writes were prompt from the fault's end is late",
        lambda: deletion_after_slow_pod_writes(False),
        {"I2": 1},
    ),
    (
        "a pod's toleration counts from its binding's arrival, not its slow answer",
        lambda: pod_bound_by_a_slow_apiserver_to_a_drained_node(24.1),
        {},
    ),
    (
        "I1: a pod deleted 1.5 s before its toleration ran out from its binding's arrival is early",
        lambda: pod_bound_by_a_slow_apiserver_to_a_drained_node(23.5),
        {"I1": 1},
    ),
    (
        "I6: a pod admitted without the defaults while a webhook pod was Ready",
        pod_admitted_bare_while_the_webhook_was_ready,
        {"I6": 1},
    ),
    (
        "a call the apiserver says failed open (1.37's audit annotation) is the backfill's turn: backfilled, fine",
        lambda: pod_admitted_bare_when_the_webhook_call_failed_open(23.0),
        {},
    ),
    (
        "I6: a call that failed open and a pod not backfilled within the slack",
        lambda: pod_admitted_bare_when_the_webhook_call_failed_open(None),
        {"I6": 1},
    ),
    (
        "a webhook pod Ready but not yet in its Service's endpoints cannot be called: a backfilled pod is fine",
        pod_admitted_bare_while_the_webhook_pod_was_ready_but_not_yet_in_its_endpoints,
        {},
    ),
    (
        "a webhook pod on a powered-off node cannot be called though the API shows it Ready",
        lambda: pod_admitted_bare_while_the_webhook_pods_node_was_powered_off(back=None),
        {},
    ),
    (
        "I6: a webhook pod counts again once its node is back and its kubelet reported it Ready",
        lambda: pod_admitted_bare_while_the_webhook_pods_node_was_powered_off(back=30.0),
        {"I6": 1},
    ),
    (
        "a pod admitted without the defaults while no webhook pod was Ready and backfilled in 3 s is fine",
        lambda: webhook_deleted(backfill_at=23.0),
        {},
    ),
    (
        "I6: a webhook pod's deletion excuses its absence only 30 s: a bare pod 45 s later, backfilled, fails",
        lambda: webhook_deleted(backfill_at=63.0, bare_at=60.0),
        {"I6": 1},
    ),
    (
        "I6: a pod admitted without the defaults and not backfilled within the slack",
        lambda: webhook_deleted(backfill_at=None),
        {"I6": 1},
    ),
    (
        "I6: the webhook stopped by no fault: a pod admitted bare 45 s later is a violation, backfilled or not",
        lambda: webhook_stopped(bare_at=60.0),
        {"I6": 1},
    ),
    (
        "a bare pod 15 s after the webhook stopped, backfilled: within the outage allowed",
        lambda: webhook_stopped(bare_at=30.0),
        {},
    ),
    (
        "I6: the webhook failing open with no fault for over 30 s, every pod backfilled",
        lambda: webhook_failing_open(20.0, 40.0, 60.0),
        {"I6": 1},
    ),
    ("the webhook failing open for 20 s, its pods backfilled", lambda: webhook_failing_open(20.0, 40.0), {}),
    (
        "I6: the webhook configuration deleted by no fault",
        lambda: registration_written("mutatingwebhookconfigurations", "taintkeeper", "delete", DRIVER),
        {"I6": 1},
    ),
    (
        "I6: the webhook configuration changed by someone else (its failure policy, say)",
        lambda: registration_written("mutatingwebhookconfigurations", "taintkeeper", "patch", DRIVER),
        {"I6": 1},
    ),
    (
        "taintkeeper's certificate rotation writing the webhook configuration's caBundle is its own",
        lambda: registration_written("mutatingwebhookconfigurations", "taintkeeper", "patch", WEBHOOK_ACCOUNT),
        {},
    ),
    (
        "installing the webhook configuration (a server-side apply answered 201) is no change",
        lambda: registration_written("mutatingwebhookconfigurations", "taintkeeper", "patch", DRIVER, code=201),
        {},
    ),
    (
        "I6: the admission policy's binding deleted in the policy mode",
        lambda: registration_written(
            "mutatingadmissionpolicybindings", "taintkeeper-default-tolerations", "delete", DRIVER, policy=True
        ),
        {"I6": 1},
    ),
    (
        "I6: a pod creation refused because the webhook could not be called",
        pod_creation_refused_by_the_webhook,
        {"I6": 1},
    ),
    ("a pod labelled taintkeeper.io/skip needs no defaults", opted_out_pod_without_defaults, {}),
    ("I6: with the built-in plugin every pod must carry the defaults", builtin_plugin_missed_a_pod, {"I6": 1}),
    (
        "I6: with the admission policy every pod must carry the defaults, backfilled or not",
        policy_mode_pod_admitted_bare_and_backfilled,
        {"I6": 1},
    ),
    (
        "the built-ins' taint manager deleting a pod again (each taint change) is upstream's design: no I3",
        lambda: builtins_delete((55.2, NODE_CONTROLLER, False), (56.0, NODE_CONTROLLER, False)),
        {},
    ),
    (
        "I3: the built-ins removing one pod by two actors (the taint manager, then PodGC on an unfenced node)",
        lambda: builtins_delete((55.2, NODE_CONTROLLER, False), (56.0, POD_GC, True)),
        {"I3": 1},
    ),
    (
        "the built-ins, leader-elected, act again within the hand-over bound (22 s) after a pause's end",
        lambda: builtins_paused(90.0),
        {},
    ),
    (
        "I2: the built-ins acting past the hand-over bound after a pause's end are late",
        lambda: builtins_paused(99.0),
        {"I2": 1},
    ),
    (
        "the built-ins act again within the hand-over bound (22 s) after a store fault took their Lease",
        lambda: builtins_lose_their_lease_to_a_store_fault(84.0),
        {},
    ),
    (
        "I2: the built-ins acting past the hand-over bound after a store fault's end are late",
        lambda: builtins_lose_their_lease_to_a_store_fault(92.0),
        {"I2": 1},
    ),
    (
        "the built-ins' DELETE of a pod in a budget-respecting namespace: I8 is taintkeeper's, reported beside",
        builtins_drain_a_budgeted_pod_with_a_delete,
        {},
    ),
    ("I7: a controller pod in CrashLoopBackOff", controller_pod_crash_loops, {"I7": 1}),
    (
        "pods on a node whose kubelet reports it not Ready (its runtime down, its Lease renewed) are marked",
        lambda: runtime_fails_while_the_kubelet_heartbeats(marked_at=41.0),
        {},
    ),
    (
        "I11: a pod left Ready on a node its kubelet reports not Ready (kubernetes#125618)",
        lambda: runtime_fails_while_the_kubelet_heartbeats(marked_at=None),
        {"I11": 1},
    ),
    (
        "I11: a pod marked past the allowance",
        lambda: runtime_fails_while_the_kubelet_heartbeats(marked_at=56.0),
        {"I11": 1},
    ),
    (
        "after an outage the returning controller has the whole marking allowance again (its first pass)",
        lambda: runtime_fails_while_the_kubelet_heartbeats(marked_at=68.0, apiserver_stopped=True),
        {},
    ),
    (
        "I11: a pod marked past the allowance after the outage",
        lambda: runtime_fails_while_the_kubelet_heartbeats(marked_at=72.0, apiserver_stopped=True),
        {"I11": 1},
    ),
    (
        "a node Ready again before the marking was owed leaves its pods to judge nothing",
        lambda: runtime_fails_while_the_kubelet_heartbeats(marked_at=None, ready_again=45.0),
        {},
    ),
    (
        "the kubelet's back-off right after the soak killed the container is no crash loop",
        controller_pod_backs_off_after_the_soak_killed_it,
        {},
    ),
    (
        "a leader that evicts its own pod and releases the Lease: deadlines count from the next acquisition",
        lambda: self_eviction_handover(67.0),
        {},
    ),
    ("I2: the next leader late beyond the slack after acquiring", lambda: self_eviction_handover(75.0), {"I2": 1}),
    (
        "a taint lifted before any leader could act on it leaves nothing to judge",
        taint_lifted_before_a_leader_could_act,
        {},
    ),
    ("a violation before the soak's window does not count", early_deletion_before_the_soak_began, {}),
]


@pytest.mark.parametrize(("build", "expected"), [s[1:] for s in SCENARIOS], ids=[s[0] for s in SCENARIOS])
def test_each_scenario_counts_exactly_its_violations(build, expected):
    report = build().report()
    assert Counter(v.invariant for v in report.violations) == Counter(expected), render(report)


EVICTIONS = [
    ("the pod deleted on time", node_dies_and_its_pod_goes_on_time, 1),
    ("the pod left past its deadline", pod_left_past_its_deadline, 1),
    ("both pods of one StatefulSet name", statefulset_reuses_a_pod_name, 2),
    ("a pod deleted early is judged by I1, not counted twice", pod_deleted_early, 1),
    ("no node failed", pod_admitted_bare_while_the_webhook_was_ready, 0),
]


@pytest.mark.parametrize(("build", "expected"), [e[1:] for e in EVICTIONS], ids=[e[0] for e in EVICTIONS])
def test_every_pod_with_a_deadline_counts_as_an_eviction_checked(build, expected):
    assert build().report().evictions_checked == expected


def test_a_violation_names_the_faults_active_at_its_time():
    w = pod_left_past_its_deadline()
    w.fault("zone-relabel", "n2", 30.0, 100.0, **{"from": "zone-a", "to": "zone-c"})
    (violation,) = w.report().violations
    assert (violation.invariant, violation.time, violation.faults) == ("I2", T0 + 55.0, (1, 2))
    assert violation.subject.startswith("pod chaos-workload/tol5-1 ")


def test_the_controller_pods_most_restarts_are_reported():
    assert controller_pod_crash_loops().report().max_controller_restarts == 3
    assert node_dies_and_its_pod_goes_on_time().report().max_controller_restarts == 0
    assert base(replicas=False).report().max_controller_restarts is None


def test_the_checker_budgets_every_namespace_the_manifests_and_the_workload_annotate():
    """The audit log records namespaces without their annotations, so the checker's list is kept in step here."""
    annotated = {
        doc["metadata"]["name"]
        for _, _, doc in documents()
        if doc.get("kind") == "Namespace" and opted_in({}, doc["metadata"].get("annotations") or {})
    }
    annotated |= {
        namespace for namespace, annotations in workload.NAMESPACE_ANNOTATIONS.items() if opted_in({}, annotations)
    }
    assert annotated == {"taintkeeper-system", workload.BUDGETED_NAMESPACE}
    assert taintkeeper_config().budgeted_namespaces == annotated


def test_the_checker_knows_each_budgeted_namespaces_budget_timeout():
    annotations = {
        doc["metadata"]["name"]: doc["metadata"].get("annotations") or {}
        for _, _, doc in documents()
        if doc.get("kind") == "Namespace"
    }
    annotations.update(workload.NAMESPACE_ANNOTATIONS)
    # The controller's own reading, with the manifests' --disruption-budget-timeout (none: 0, no ceiling).
    timeouts = {
        namespace: budget_timeout({}, annotations[namespace], None)[0]
        for namespace in taintkeeper_config().budgeted_namespaces
    }
    assert (
        timeouts
        == taintkeeper_config().budget_timeouts
        == {workload.BUDGETED_NAMESPACE: 120.0, "taintkeeper-system": None}
    )


def test_the_checker_gives_taintkeepers_pods_on_a_failed_node_the_toleration_they_have():
    tolerations = {
        doc["metadata"]["name"]: {
            toleration["key"]: toleration["tolerationSeconds"]
            for toleration in doc["spec"]["template"]["spec"]["tolerations"]
        }
        for path, _, doc in documents()
        if path.startswith("base/") and doc.get("kind") == "Deployment"
    }
    seconds = dict.fromkeys((NOT_READY, UNREACHABLE), taintkeeper_config().slack.pod_toleration)
    assert tolerations == {"taintkeeper-controller": seconds, "taintkeeper-webhook": seconds}


def test_the_checker_watches_the_objects_the_manifests_register_admission_with():
    resources = {
        "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
        "MutatingAdmissionPolicy": "mutatingadmissionpolicies",
        "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings",
    }
    registered = {
        (resources[doc["kind"]], doc["metadata"]["name"])
        for path, _, doc in documents()
        if path.startswith(("base/", "admission-policy/")) and doc.get("kind") in resources
    }
    assert registered == {*WEBHOOK_REGISTRATION, *POLICY_REGISTRATION}
    assert taintkeeper_config().admission_registration == WEBHOOK_REGISTRATION
    assert soak_config(policy=True).admission_registration == POLICY_REGISTRATION
    assert builtin_config().admission_registration == ()


def test_one_actor_is_not_applicable_without_a_lease():
    report = builtin_plugin_missed_a_pod().report()
    assert not report.one_actor_checked
    assert "| n/a |" in render(report)


def test_the_builtins_are_judged_by_upstreams_promises_with_taintkeepers_own_reported_beside():
    report = builtins_delete((55.2, NODE_CONTROLLER, False), (56.0, POD_GC, True)).report()
    assert [v.invariant for v in report.beside] == ["I9"]  # a force deletion on a node nobody fenced
    assert report.not_applicable == {"I4", "I8", "I9", "I10", "I11", "I12"}
    header = render(report).splitlines()[:3]
    assert "not applicable to upstream, reported beside the verdict: I8 0, I9 1, I11 0, I12 0" in header
    assert builtins_drain_a_budgeted_pod_with_a_delete().report().passed


# --- the fault table --------------------------------------------------------------------------


def test_the_fault_table_counts_faults_overlapping_another():
    w = failed_node(72.0, kubelet_back=100.0)  # n1's kubelet killed from 10 to 100 s
    w.fault("apiserver-stop", "kube-apiserver", 54.0, 70.0)
    w.script.silence(54.0, 70.0)
    w.fault("manual-taint", "n3", 200.0, 210.0, key=CHAOS_TAINT)
    w.fault("etcd-restart", "etcd", 300.0, 301.0)
    report = w.report()
    rows = {row.kind: row for row in report.rows}
    assert [(kind, rows[kind].injected, rows[kind].overlapping) for kind in rows] == [
        ("apiserver-stop", 1, 1),
        ("etcd-restart", 1, 0),
        ("kubelet-kill", 1, 1),
        ("manual-taint", 1, 0),
        ("none", 0, 0),
    ]
    assert (report.total.injected, report.total.overlapping) == (4, 2)
    evictions = (rows["kubelet-kill"].evictions, rows["apiserver-stop"].evictions, rows["etcd-restart"].evictions)
    assert evictions == (1, 1, 0)
    assert render(report).splitlines()[-1] == "4 faults (2 overlapping), 1 evictions checked, 0 violations: PASS"


def test_violations_with_no_fault_active_go_to_the_none_row():
    report = controller_marks_a_heartbeating_node_unknown().report()
    none = next(row for row in report.rows if row.kind == "none")
    assert none.violations["I5"] == 1
    assert report.total.violations["I5"] == 1


def test_a_failing_report_names_the_counts_and_each_violation():
    lines = render(pod_deleted_early().report()).splitlines()
    assert lines[-2] == "1 faults (0 overlapping), 1 evictions checked, 1 violations (I1 1): FAIL"
    assert lines[-1].startswith(
        "I1 2023-11-14T22:14:12.000000Z pod chaos-workload/tol5-1 (00000004): deleted by "
        f"{REPLICA_A} 3.0s before its deadline"
    )
    assert lines[-1].endswith("[faults: 1]")


OVERLAPS = [
    ("two windows sharing a moment overlap", [(0, 10), (10, 20)], {1, 2}),
    ("disjoint windows do not", [(0, 10), (11, 20)], set()),
    ("short faults inside a long one each overlap it", [(0, 100), (10, 20), (30, 40)], {1, 2, 3}),
    ("a fault lasting to the end overlaps every later one", [(0, None), (50, 60), (500, 501)], {1, 2, 3}),
    ("the order of the log does not matter", [(30, 40), (0, 100), (200, 300)], {1, 2}),
    ("a single fault overlaps nothing", [(0, 10)], set()),
]


@pytest.mark.parametrize(("windows", "expected"), [o[1:] for o in OVERLAPS], ids=[o[0] for o in OVERLAPS])
def test_overlapping_faults(windows, expected):
    faults = [Fault(i, "kubelet-kill", "n1", start, end) for i, (start, end) in enumerate(windows, start=1)]
    assert overlapping(faults) == expected


# --- the fault log ----------------------------------------------------------------------------


def test_the_drivers_fault_lines_read_back(tmp_path: Path):
    path = tmp_path / "faults.jsonl"
    written = [
        Fault(1, "manual-taint", "n2", T0 + 1.5, T0 + 9.0, {"key": CHAOS_TAINT, "effect": "NoExecute"}),
        Fault(2, "apiserver-stop", "kube-apiserver", T0 + 3.0, None),
    ]
    for fault in written:
        append_fault(path, fault)
    assert read_faults(path) == written


def test_a_later_line_of_the_same_fault_replaces_the_first():
    lines = [
        '{"id": 3, "kind": "kubelet-pause", "target": "n1", "start": 10.0, "end": null, "detail": {}}',
        "",
        '{"id": 3, "kind": "kubelet-pause", "target": "n1", "start": 10.0, "end": 25.5, "detail": {}}',
    ]
    assert parse_faults(lines) == [Fault(3, "kubelet-pause", "n1", 10.0, 25.5)]


BAD_FAULT_LINES = [
    ("not JSON", "{oops", "line 1: not JSON"),
    ("an id that is no integer", '{"id": "7", "kind": "leader-kill", "start": 1}', "line 1: id is not an integer"),
    ("a start that is no number", '{"id": 7, "kind": "leader-kill", "start": "now"}', "start is not a number"),
    ("no kind", '{"id": 7, "start": 1}', "kind is not a string"),
]


@pytest.mark.parametrize(("line", "message"), [b[1:] for b in BAD_FAULT_LINES], ids=[b[0] for b in BAD_FAULT_LINES])
def test_a_bad_fault_line_is_refused_with_its_line_number(line, message):
    with pytest.raises(FaultLogError, match=message):
        parse_faults([line])


# --- the audit log ----------------------------------------------------------------------------

# A controller's graceful DELETE exactly as kube-apiserver 1.20 logs it (level RequestResponse).
REAL_LINE = (
    '{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse",'
    '"auditID":"5c2f6d1e-93a4-4b7e-8f0a-2d6c1b9e7a43","stage":"ResponseComplete",'
    '"requestURI":"/api/v1/namespaces/chaos-workload/pods/tol5-17-3fa2c1","verb":"delete",'
    '"user":{"username":"system:serviceaccount:taintkeeper-system:taintkeeper-controller",'
    '"uid":"0f5a8a8e-3e0b-4d0e-9c51-7d1f6f2b9e10","groups":["system:serviceaccounts",'
    '"system:serviceaccounts:taintkeeper-system","system:authenticated"]},"sourceIPs":["10.88.0.14"],'
    '"userAgent":"taintkeeper-controller/0.1.0 (taintkeeper-controller-6f7b9c-k2x4q)",'
    '"objectRef":{"resource":"pods","namespace":"chaos-workload","name":"tol5-17-3fa2c1","apiVersion":"v1"},'
    '"responseStatus":{"metadata":{},"code":200},'
    '"requestObject":{"kind":"DeleteOptions","apiVersion":"v1",'
    '"preconditions":{"uid":"9d3e4c2a-1b7f-4e8d-a6c5-0f2b3a4d5e6f"}},'
    '"responseObject":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"tol5-17-3fa2c1",'
    '"namespace":"chaos-workload","uid":"9d3e4c2a-1b7f-4e8d-a6c5-0f2b3a4d5e6f","resourceVersion":"48213",'
    '"creationTimestamp":"2023-11-14T22:13:22Z","deletionTimestamp":"2023-11-14T22:14:46Z",'
    '"deletionGracePeriodSeconds":30,"labels":{"app.kubernetes.io/part-of":"chaos"}},'
    '"spec":{"containers":[{"name":"pause","image":"taintkeeper.local/pause:3.2"}],"nodeName":"n1",'
    '"tolerations":[{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute",'
    '"tolerationSeconds":5}]},"status":{"phase":"Running"}},'
    '"requestReceivedTimestamp":"2023-11-14T22:14:15.200118Z","stageTimestamp":"2023-11-14T22:14:15.209876Z",'
    '"annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed by '
    'ClusterRoleBinding \\"taintkeeper-controller\\" of ClusterRole \\"taintkeeper-controller\\" to ServiceAccount '
    '\\"taintkeeper-controller/taintkeeper-system\\""}}'
)
# A Metadata-level request (no objects) and a watch's ResponseStarted, which carries no answer yet.
METADATA_LINE = (
    '{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"7a1d","stage":"ResponseComplete",'
    '"requestURI":"/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication","verb":"get",'
    '"user":{"username":"system:kube-scheduler","groups":["system:authenticated"]},"sourceIPs":["127.0.0.1"],'
    '"userAgent":"kube-scheduler/v1.20.2","objectRef":{"resource":"configmaps","namespace":"kube-system",'
    '"name":"extension-apiserver-authentication","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},'
    '"requestReceivedTimestamp":"2023-11-14T22:14:10.000001Z","stageTimestamp":"2023-11-14T22:14:10.000900Z"}'
)
STARTED_LINE = METADATA_LINE.replace('"stage":"ResponseComplete"', '"stage":"ResponseStarted"').replace("7a1d", "7a1e")


def test_a_real_audit_line_becomes_a_slim_record():
    (record,) = parse_lines([REAL_LINE]).records
    assert (record.verb, record.username, record.user_agent) == (
        "delete",
        "system:serviceaccount:taintkeeper-system:taintkeeper-controller",
        "taintkeeper-controller/0.1.0 (taintkeeper-controller-6f7b9c-k2x4q)",
    )
    assert (record.resource, record.subresource, record.namespace, record.name, record.api_group) == (
        "pods",
        "",
        "chaos-workload",
        "tol5-17-3fa2c1",
        "",
    )
    assert (record.code, record.message, record.succeeded) == (200, "", True)
    assert record.received == pytest.approx(T0 + 55.200118, abs=1e-6)
    assert record.completed == pytest.approx(T0 + 55.209876, abs=1e-6)
    assert record.request_object == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "preconditions": {"uid": "9d3e4c2a-1b7f-4e8d-a6c5-0f2b3a4d5e6f"},
    }
    assert record.response_object is not None and record.response_object["spec"]["nodeName"] == "n1"


def test_lines_that_are_no_event_are_counted_and_stages_without_an_answer_left_out():
    panic = json.loads(METADATA_LINE) | {"stage": "Panic", "auditID": "7a1f", "responseStatus": {"metadata": {}}}
    log = parse_lines(
        ["", "not json", "[1, 2]", '{"stage": "ResponseComplete"}', STARTED_LINE, METADATA_LINE, json.dumps(panic)]
    )
    assert log.unreadable_lines == 4
    assert [(record.verb, record.code, record.request_object) for record in log.records] == [
        ("get", 200, None),
        ("get", 500, None),
    ]


def test_rotated_files_are_read_as_one_log_ordered_by_completion(tmp_path: Path):
    s = pod_deleted_early().script
    lines = s.lines()
    (tmp_path / "audit-2023-11-14T22-14-00.000.log").write_text("\n".join(lines[1::2]) + "\n")
    (tmp_path / "audit.log").write_text("\n".join([*lines[::2], lines[1]]) + "\n")  # one line in both
    files = rotated_files(tmp_path / "audit.log")
    assert [file.name for file in files] == ["audit-2023-11-14T22-14-00.000.log", "audit.log"]
    log = read_files(files)
    assert [record.completed for record in log.records] == sorted(record.completed for record in s.records())
    assert len(log.records) == len(lines)


TIMESTAMPS = [
    ("microseconds", "2023-11-14T22:13:20.123456Z", T0 + 0.123456),
    ("whole seconds", "2023-11-14T22:13:20Z", T0),
    ("nanoseconds are cut to microseconds", "2023-11-14T22:13:20.123456789Z", T0 + 0.123456),
    ("a numeric offset", "2023-11-14T23:13:20.5+01:00", T0 + 0.5),
]


@pytest.mark.parametrize(("text", "expected"), [t[1:] for t in TIMESTAMPS], ids=[t[0] for t in TIMESTAMPS])
def test_audit_timestamps_read_as_epoch_seconds(text, expected):
    assert parse_timestamp(text) == pytest.approx(expected, abs=1e-6)


# --- who made a write -------------------------------------------------------------------------

AGENTS = [
    (
        "taintkeeper's agent names its pod",
        "taintkeeper-controller/0.1.0 (taintkeeper-controller-6f7b9c-k2x4q)",
        "taintkeeper-controller-6f7b9c-k2x4q",
    ),
    ("the last parentheses count", "taintkeeper-controller/0.1.0 (linux) (pod-b)", "pod-b"),
    (
        "any other agent is its own replica",
        "kube-controller-manager/v1.20.2 (linux/amd64) kubernetes/faecb19",
        "kube-controller-manager/v1.20.2 (linux/amd64) kubernetes/faecb19",
    ),
    ("taintkeeper's agent without a pod is itself", "taintkeeper-controller/0.1.0", "taintkeeper-controller/0.1.0"),
    (
        "a write's term follows the pod",
        "taintkeeper-controller/0.1.0 (taintkeeper-controller-6f7b9c-k2x4q; term 2026-11-29T01:00:00.123456Z)",
        "taintkeeper-controller-6f7b9c-k2x4q",
    ),
]

TERMS = [
    (
        "a write of a unit of work names its term",
        "taintkeeper-controller/0.1.0 (pod-a; term 2026-11-29T01:00:00.123456Z)",
        "2026-11-29T01:00:00.123456Z",
    ),
    ("the elector's, or an older controller's, names none", "taintkeeper-controller/0.1.0 (pod-a)", None),
    ("another agent's names none", "kube-controller-manager/v1.20.2 (linux/amd64; term x)", None),
]


@pytest.mark.parametrize(("agent", "expected"), [a[1:] for a in TERMS], ids=[a[0] for a in TERMS])
def test_the_term_of_a_write_comes_from_its_user_agent(agent, expected):
    assert term_of_agent(agent) == expected


@pytest.mark.parametrize(("agent", "expected"), [a[1:] for a in AGENTS], ids=[a[0] for a in AGENTS])
def test_the_replica_of_a_write_comes_from_its_user_agent(agent, expected):
    assert replica_of_agent(agent) == expected


HOLDERS = [
    (
        "pod name and uuid",
        "taintkeeper-controller-6f7b9c-k2x4q_0f5a8a8e3e0b4d0e9c517d1f6f2b9e10",
        "taintkeeper-controller-6f7b9c-k2x4q",
    ),
    ("an underscore in the name keeps all but the last part", "my_pod_abc", "my_pod"),
    ("no underscore", "solo", "solo"),
    ("released", "", ""),
]


@pytest.mark.parametrize(("holder", "expected"), [h[1:] for h in HOLDERS], ids=[h[0] for h in HOLDERS])
def test_the_lease_holder_names_a_replica(holder, expected):
    assert replica_of_holder(holder) == expected


def test_the_default_workload_namespaces_are_the_drivers():
    assert workload.NAMESPACES == DEFAULT_WORKLOAD_NAMESPACES


def test_the_drivers_configuration_chooses_the_oracle_and_the_window():
    config = soak_config(builtin=True, since=T0, until=T0 + 60)
    assert (config.lease, config.webhook, config.since, config.until) == (None, None, T0, T0 + 60)
    assert config.is_controller("system:serviceaccount:kube-system:node-controller")
    assert soak_config().lease == ("taintkeeper-system", "taintkeeper-controller")


# --- the command line -------------------------------------------------------------------------


def write_run(tmp_path: Path, w: World) -> list[str]:
    audit, faults = w.write(tmp_path)
    return ["--audit", str(audit), "--faults", str(faults)]


COMMANDS = [
    ("a clean run exits 0", node_dies_and_its_pod_goes_on_time, 0, "0 violations: PASS"),
    ("a run with a violation exits 1", pod_deleted_early, 1, "(I1 1): FAIL"),
]


@pytest.mark.parametrize(("build", "code", "summary"), [c[1:] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
def test_the_command_exits_by_its_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str], build, code, summary):
    assert main(write_run(tmp_path, build())) == code
    assert summary in capsys.readouterr().out


def test_the_command_judges_a_policy_mode_run_as_chaos_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A bare pod the backfill caught is excused while the webhook's pods were gone, never in the policy mode."""
    argv = write_run(tmp_path, webhook_deleted(backfill_at=23.0))
    assert main(argv) == 0
    assert main([*argv, "--admission", "policy"]) == 1
    assert "taintkeeper's MutatingAdmissionPolicy" in capsys.readouterr().out


def test_the_command_refuses_the_policy_for_the_builtins(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    argv = write_run(tmp_path, node_dies_and_its_pod_goes_on_time())
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--builtin", "--admission", "policy"])
    assert exit_info.value.code == 2
    assert "--admission policy judges taintkeeper's policy" in capsys.readouterr().err


BAD_INPUT = [
    ("no audit log", lambda path: (path / "logs" / "audit.log").unlink(), "no audit log at"),
    ("no fault log", lambda path: (path / "faults.jsonl").unlink(), "no fault log at"),
    ("a broken fault log", lambda path: (path / "faults.jsonl").write_text("{oops\n"), "line 1: not JSON"),
    (
        "an audit log with no event",
        lambda path: (path / "logs" / "audit.log").write_text("junk\n"),
        "no audit events in",
    ),
]


@pytest.mark.parametrize(("spoil", "message"), [b[1:] for b in BAD_INPUT], ids=[b[0] for b in BAD_INPUT])
def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], spoil, message):
    argv = write_run(tmp_path, node_dies_and_its_pod_goes_on_time())
    spoil(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_the_seconds_without_a_leader_count_an_open_stretch_to_the_logs_end_and_say_why():
    report = scaled_to_zero_while_a_node_dies().report()
    (stretch,) = report.leaderless
    assert stretch.still_open and stretch.end > T0 + 110  # the last heartbeat, at 111 s: the log's end
    line = render(report).splitlines()[1]
    assert line.startswith(f"no leader 1 times, {stretch.seconds:,.1f}s in all")
    assert "(the last still open when the log ended)" in line
    absent = f"{stretch.no_replica:,.1f}s"
    assert f"no replica able to lead {absent} ({absent} of it no fault's doing)" in line


def new_leader_killed_before_its_kubelet_reported_it() -> World:
    """Seed 9191: A and B run on n3, powered off from 20.5 s to 140 s; the kubelet back reports both not Ready
    (restarting) at 141 s; etcd restarts at 150 s. B takes the Lease at 160 s, before its kubelet reports it
    Ready, and is killed at 161 s; A is reported Ready at 175 s and leads from 180 s. More than
    REPLICA_FAULT_LEAD after either was last shown Ready: only B's Lease write shows the kill took a replica
    able to lead."""
    w = base(workload=False, leader=False)
    w.script.lead(REPLICA_A, 0.0, 20.0)
    w.fault("power-off", "n3", 20.5, 140.0)
    for name in (REPLICA_A, REPLICA_B):
        w.script.pod_status(141.0, name, namespace=SYSTEM, ready=False, restarts=1)
    w.fault("etcd-restart", "etcd", 150.0, 152.0)
    w.script.silence(150.0, 152.0)
    w.script.lead(REPLICA_B, 160.0, 160.0)
    w.fault("leader-kill", REPLICA_B, 161.0, 161.1)
    w.script.pod_status(175.0, REPLICA_A, namespace=SYSTEM, restarts=1)
    w.script.lead(REPLICA_A, 180.0, 240.0)
    for node in ("n1", "n2", "n3"):
        w.script.heartbeats(node, END, 240.0)
    return w


def leader_restarted_without_a_fault() -> World:
    """A's container dies at 21 s with no fault (its kubelet reports it not Ready, restarted), is Ready again
    at 35 s and takes the Lease back at 36 s, as the same holder identity; B is not Ready from 10 s."""
    w = base(workload=False, leader=False)
    w.script.lead(REPLICA_A, 0.0, 20.0)
    w.script.pod_status(10.0, REPLICA_B, namespace=SYSTEM, ready=False)
    w.script.pod_status(21.0, REPLICA_A, namespace=SYSTEM, ready=False, restarts=1)
    w.script.pod_status(35.0, REPLICA_A, namespace=SYSTEM, restarts=1)
    w.script.lead(REPLICA_A, 36.0, END)
    return w


ABSENCES = [
    (
        "a new leader killed before its kubelet reported it Ready: the wait for the next is the kill's doing",
        new_leader_killed_before_its_kubelet_reported_it,
        0.0,
    ),
    (
        "a leader that crashed with no fault and took the Lease back: no fault's doing in between",
        leader_restarted_without_a_fault,
        14.0,
    ),
    ("replicas deleted (scaled to 0) are no fault's doing, however long", scaled_to_zero_long, 240.0 - 20.0),
]


@pytest.mark.parametrize(("build", "unexplained"), [a[1:] for a in ABSENCES], ids=[a[0] for a in ABSENCES])
def test_whose_doing_the_last_absence_of_replicas_is(build, unexplained):
    stretch = build().report().leaderless[-1]
    assert sum(end - start for start, end in stretch.unexplained_absence) == pytest.approx(unexplained, abs=1.0)


def test_a_deadline_the_log_ended_too_soon_to_judge_is_reported_and_fails_the_run():
    w = failed_node(55.2)
    w.script.create_pod(3.0, "default-3", DEFAULTS)  # 300 s: due at 350 s, the log ends at 111 s
    w.script.bind(3.1, "default-3", "n1")
    report = w.report()
    assert not report.violations
    (unjudged,) = report.unjudged
    assert unjudged.subject.startswith("pod chaos-workload/default-3 ")
    assert (unjudged.due, unjudged.limit) == (T0 + 350.0, T0 + 355.0)
    assert not report.passed
    text = render(report)
    assert "(1 deadlines unjudged): FAIL" in text and "unjudged 2023-11-14T22:19:10.000000Z pod" in text


def test_the_policy_mode_names_the_policy_in_its_violation_and_is_what_chaos_judges_with():
    [violation] = policy_mode_pod_admitted_bare_and_backfilled().report().violations
    assert "taintkeeper's MutatingAdmissionPolicy" in violation.explanation
    config = soak_config(policy=True)
    assert config.webhook is None and config.in_process_admission == "taintkeeper's MutatingAdmissionPolicy"


def test_the_report_names_everyone_who_removed_pods_or_changed_taints():
    w = second_actor_deletes_the_pod(NODE_CONTROLLER)
    w.script.delete_pod(58.0, "tol5-1", kubelet("n1"), final=True)
    report = w.report()
    assert report.actors == {
        "pods removed": {A.username: 1, NODE_CONTROLLER.username: 1, "kubelets": 1},
        "node taints changed": {A.username: 1},
    }
    assert (
        f"who acted: pods removed by {A.username} 1, {NODE_CONTROLLER.username} 1, kubelets 1; "
        f"node taints changed by {A.username} 1"
    ) in render(report)
