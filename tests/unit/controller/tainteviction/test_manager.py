"""controller.tainteviction.manager on a fake clock, with recording stand-ins for the API edge.

Covers upstream taint-eviction unit scenarios (adjusted for taintkeeper's differences) and each
deliberate difference: deadlines from the taint, toleration edits, re-use of a name, retries,
the live re-read, one timer structure.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from controller.clock import FakeClock
from controller.objects import NodeView, PodView, node_view
from controller.tainteviction.manager import TaintEvictionManager
from controller.workqueue import WorkQueue
from tests.support.builders import UNREACHABLE, node, pod, taint, toleration
from tests.support.fencing import OUT_OF_SERVICE_TAINT, node_json
from tests.support.health import healthz, wait_until
from tests.unit.controller.tainteviction.harness import START, Harness

CANCELLED_P = ("default/p", "Normal", "TaintManagerEviction", "Cancelling deletion of Pod default/p")


@pytest.fixture
def h() -> Harness:
    return Harness()


# --- upstream TestCreatePod / TestUpdatePod / TestCreateNode / TestUpdateNode, adjusted -----------


def test_a_pod_not_bound_to_a_node_is_ignored(h):
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p", node=""))
    h.run_for(1)
    assert h.evicted_keys() == []


def test_a_pod_on_an_untainted_node_is_left_alone(h):
    h.set_node(node("node1"))
    h.add_pod(pod("p"))
    h.run_for(1)
    assert h.evicted_keys() == []


@pytest.mark.parametrize("order", ["pod first", "node first"])
def test_an_untolerating_pod_on_a_tainted_node_is_deleted_at_once(h, order):
    if order == "pod first":
        h.add_pod(pod("p"))
        h.set_node(node("node1", taint()))
    else:
        h.set_node(node("node1", taint()))
        h.add_pod(pod("p"))
    h.drain()
    assert h.evicted_keys() == ["default/p"]
    assert h.evicted_at("default/p") == 0


def test_a_pod_tolerating_for_a_while_is_deleted_when_it_runs_out(h):
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p", [toleration(seconds=5)]))
    h.run_for(4.9)
    assert h.evicted_keys() == []
    h.run_for(0.2)
    assert h.evicted_keys() == ["default/p"]
    assert h.evicted_at("default/p") == pytest.approx(5, abs=0.11)


def test_a_pod_tolerating_forever_is_never_deleted(h):
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p", [toleration()]))
    h.run_for(600, step=10)
    assert h.evicted_keys() == []
    assert h.manager.pending() == 0


def test_a_forever_toleration_of_another_taint_does_not_help(h):
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p", [toleration("other")]))
    h.drain()
    assert h.evicted_keys() == ["default/p"]


# --feature-gates=TaintTolerationComparisonOperators: a Gt toleration of an SLA taint (upstream KEP-5471).
SLA = "example.com/sla"
GATED_CASES = {
    "with the gate on, a Gt toleration of a greater taint value keeps the pod for its seconds": (True, "950", 30),
    "with the gate on, a Gt toleration of a smaller taint value tolerates nothing": (True, "800", 0),
    "with the gate off, a Gt toleration tolerates nothing (as on an apiserver whose gate is off)": (False, "950", 0),
}


@pytest.mark.parametrize(("gate", "taint_value", "evicted_after"), GATED_CASES.values(), ids=GATED_CASES.keys())
def test_comparison_operator_tolerations_follow_the_feature_gate(gate, taint_value, evicted_after):
    h = Harness(comparison_operators=gate)
    h.set_node(node("node1", {**taint(SLA, added=START), "value": taint_value}))
    h.add_pod(pod("p", [{**toleration(SLA, 30, operator="Gt"), "value": "900"}]))
    h.run_for(evicted_after - 1 if evicted_after else 0)
    assert h.evicted_keys() == ([] if evicted_after else ["default/p"])
    if evicted_after:
        h.run_for(2)
        assert h.evicted_keys() == ["default/p"]


def test_removing_a_toleration_deletes_at_once(h):
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p", [toleration(seconds=100)]))
    h.run_for(1)
    h.add_pod(pod("p", []))
    h.drain()
    assert h.evicted_keys() == ["default/p"]


def test_a_pod_deleted_while_scheduled_is_forgotten_without_event(h):
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p", [toleration(seconds=10)]))
    h.delete_pod("default/p")
    h.run_for(20, step=1)
    assert h.evicted_keys() == []
    assert h.events.recorded == []


def test_only_one_of_two_taints_tolerated_means_now(h):
    h.add_pod(pod("p", [toleration(seconds=100)]))
    h.set_node(node("node1", taint(), taint("example.com/other")))
    h.drain()
    assert h.evicted_keys() == ["default/p"]


def test_removing_the_taint_cancels_the_eviction_with_an_event(h):
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p", [toleration(seconds=1)]))
    h.run_for(0.5)
    h.set_node(node("node1"))
    h.run_for(1.5)
    assert h.evicted_keys() == []
    assert h.events.recorded == [CANCELLED_P]


def test_with_several_tolerations_the_first_to_run_out_counts(h):
    h.set_node(node("node1", taint(), taint("node.kubernetes.io/not-ready")))
    h.add_pod(pod("p", [toleration(seconds=100), toleration("node.kubernetes.io/not-ready", 1)]))
    h.run_for(1.1)
    assert h.evicted_keys() == ["default/p"]


def test_multiple_taints_infinite_then_finite_then_infinite_again_never_deletes(h):
    h.add_pod(pod("p", [toleration(), toleration("example.com/finite", 60)]))
    h.set_node(node("node1", taint()))
    assert h.manager.scheduled_at("default/p") is None
    h.set_node(node("node1", taint(), taint("example.com/finite")))
    assert h.manager.scheduled_at("default/p") == pytest.approx(START + 60)
    h.run_for(10, step=1)
    h.set_node(node("node1", taint()))
    assert h.manager.scheduled_at("default/p") is None
    h.run_for(120, step=5)
    assert h.evicted_keys() == []


def test_pods_with_different_tolerations_are_evicted_each_at_their_time(h):
    h.add_pod(pod("none"))
    h.add_pod(pod("one-second", [toleration(seconds=1)]))
    h.add_pod(pod("forever", [toleration()]))
    h.set_node(node("node1", taint()))
    h.run_for(2)
    assert h.evicted_keys() == ["default/none", "default/one-second"]
    assert h.evicted_at("default/none") == 0
    assert h.evicted_at("default/one-second") == pytest.approx(1, abs=0.11)


def test_a_pod_appearing_after_the_node_update_is_still_handled(h):  # TestEventualConsistency
    h.set_node(node("node1", taint()))
    h.run_for(1)
    h.add_pod(pod("late", [toleration(seconds=100)], created=h.clock.now()))
    h.add_pod(pod("late-untolerating"))
    h.drain()
    assert h.evicted_keys() == ["default/late-untolerating"]
    assert h.manager.scheduled_at("default/late") == pytest.approx(h.clock.now() + 100)


def test_marking_for_deletion_event_is_exact(h):  # TestPodDeletionEvent
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p"))
    h.drain()
    assert h.events.recorded == [("default/p", "Normal", "TaintManagerEviction", "Marking for deletion Pod default/p")]


def test_terminating_pods_are_left_alone(h):
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p", terminating=True))
    h.drain()
    assert h.evicted_keys() == []


def test_deleting_the_node_cancels_pending_evictions(h):
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p", [toleration(seconds=30)]))
    h.manager.on_node_change(node("node1", taint()), None)
    h.run_for(40, step=1)
    assert h.evicted_keys() == []


# --- difference 1: deadlines come from the taint --------------------------------------------------


def test_a_restarted_controller_keeps_the_original_deadline():
    first = Harness()
    tainted = node("node1", taint(added=START))
    first.set_node(tainted)
    first.add_pod(pod("p", [toleration(seconds=30)], created=START - 100))
    first.run_for(20, step=1)
    second = Harness()  # a new process (or a new leader), 20 s later
    second.clock.advance(20)
    second.set_node(tainted)
    second.add_pod(pod("p", [toleration(seconds=30)], created=START - 100))
    assert second.manager.scheduled_at("default/p") == pytest.approx(START + 30)
    second.run_for(11)
    assert second.evicted_at("default/p") == pytest.approx(30, abs=0.11)


def test_without_time_added_the_clock_starts_when_the_taint_was_first_seen(h):
    h.set_node(node("node1", taint()))
    h.run_for(3)
    h.add_pod(pod("p", [toleration(seconds=10)], created=START - 100))
    assert h.manager.scheduled_at("default/p") == pytest.approx(START + 10)


def test_a_standby_that_becomes_leader_fires_what_came_due_meanwhile():
    h = Harness(active=False)
    h.set_node(node("node1", taint(added=START)))
    h.add_pod(pod("p", [toleration(seconds=5)], created=START - 1))
    h.run_for(10)
    assert h.evicted_keys() == []
    assert h.events.recorded == []
    h.manager.activate()
    h.drain()
    assert h.evicted_keys() == ["default/p"]


def test_a_replica_that_loses_leadership_stops_acting_at_once(h):
    h.set_node(node("node1", taint(added=START)))
    h.add_pod(pod("p", [toleration(seconds=5)], created=START - 1))
    h.run_for(2)
    h.manager.deactivate()
    h.run_for(10)
    assert h.evicted_keys() == []


# --- difference 2: toleration edits take effect -------------------------------------------------------


def test_shortening_a_toleration_brings_the_eviction_forward(h):
    h.set_node(node("node1", taint(added=START)))
    h.add_pod(pod("p", [toleration(seconds=100)], created=START - 1))
    h.run_for(2)
    h.add_pod(pod("p", [toleration(seconds=5)], created=START - 1))
    h.run_for(3.1)
    assert h.evicted_at("default/p") == pytest.approx(5, abs=0.11)


def test_shortening_below_the_time_already_passed_evicts_now(h):
    h.set_node(node("node1", taint(added=START)))
    h.add_pod(pod("p", [toleration(seconds=100)], created=START - 1))
    h.run_for(10, step=1)
    h.add_pod(pod("p", [toleration(seconds=5)], created=START - 1))
    h.drain()
    assert h.evicted_at("default/p") == pytest.approx(10)


def test_lengthening_a_toleration_pushes_the_eviction_back(h):
    h.set_node(node("node1", taint(added=START)))
    h.add_pod(pod("p", [toleration(seconds=5)], created=START - 1))
    h.run_for(2)
    h.add_pod(pod("p", [toleration(seconds=20)], created=START - 1))
    h.run_for(10)
    assert h.evicted_keys() == []
    h.run_for(8.1)
    assert h.evicted_at("default/p") == pytest.approx(20, abs=0.11)


def test_tolerating_forever_cancels_the_eviction(h):
    h.set_node(node("node1", taint(added=START)))
    h.add_pod(pod("p", [toleration(seconds=5)], created=START - 1))
    h.run_for(2)
    # the Exists wildcard has no seconds
    h.add_pod(pod("p", [toleration(seconds=5), toleration(None)], created=START - 1))
    assert h.manager.scheduled_at("default/p") == pytest.approx(START + 5)  # min over matching still 5
    h.add_pod(pod("p", [toleration()], created=START - 1))
    h.run_for(30, step=1)
    assert h.evicted_keys() == []
    assert CANCELLED_P in h.events.recorded


def test_adding_a_taint_brings_the_eviction_forward(h):
    h.set_node(node("node1", taint(added=START)))
    h.add_pod(pod("p", [toleration(seconds=100), toleration("example.com/maintenance", 3)], created=START - 1))
    h.run_for(1)
    h.set_node(node("node1", taint(added=START), taint("example.com/maintenance", added=START + 1)))
    h.run_for(3.1)
    assert h.evicted_at("default/p") == pytest.approx(4, abs=0.11)


# --- difference 3: executed work never blocks a later eviction ---------------------------------------


def test_a_new_pod_with_the_same_name_is_evicted_too(h):
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p", uid="first"))
    h.drain()
    h.delete_pod("default/p")
    h.add_pod(pod("p", uid="second"))
    h.drain()
    assert h.actions.evicted == [("default/p", "first", START), ("default/p", "second", START)]


def test_a_pod_evicted_once_is_not_evicted_again_before_it_terminates(h):
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p"))
    h.drain()
    # a node update before the pod's update arrives
    h.set_node(node("node1", taint(), taint("example.com/x")))
    h.drain()
    assert h.evicted_keys() == ["default/p"]


def test_retainting_a_node_evicts_a_recreated_pod(h):  # k8s #107543 / #125332
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p", uid="a"))
    h.drain()
    h.delete_pod("default/p")
    h.set_node(node("node1"))
    h.add_pod(pod("p", uid="b"))
    h.set_node(node("node1", taint()))
    h.drain()
    assert [uid for _, uid, _ in h.actions.evicted] == ["a", "b"]


# --- difference 4: deletion is retried until it succeeds or is no longer wanted -------------------


def test_a_refused_deletion_is_retried_with_backoff_until_it_succeeds(h):
    h.actions.failures_left = 6
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p"))
    h.run_for(60, step=0.25)
    assert h.evicted_keys() == ["default/p"]
    # 0.25 + 0.5 + 1 + 2 + 4 + 8 = 15.75 s of backoff before the seventh try
    assert h.evicted_at("default/p") == pytest.approx(15.75, abs=0.3)
    marks = [e for e in h.events.recorded if e[3].startswith("Marking")]
    assert len(marks) == 1


def test_retries_stop_when_the_eviction_is_no_longer_wanted(h):
    h.actions.failures_left = 1000
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p"))
    h.run_for(5, step=0.25)
    h.set_node(node("node1"))
    tries = h.actions.failures_left
    h.run_for(120, step=1)
    assert h.actions.failures_left == tries  # no more attempts
    h.actions.failures_left = 0
    h.set_node(node("node1", taint()))  # tainted again later: evicted again, not blocked
    h.drain()
    assert h.evicted_keys() == ["default/p"]


def test_retry_backoff_is_capped():
    queue = WorkQueue(FakeClock(), base_delay=0.25, max_delay=30)
    delays = [queue.add_rate_limited("k") for _ in range(12)]
    assert delays[:4] == [0.25, 0.5, 1, 2]
    assert max(delays) == 30


# --- difference 5: the node is re-read live before deleting --------------------------------------------


def test_a_stale_cache_does_not_evict_a_pod_whose_taint_is_gone(h):
    h.set_node(node("node1", taint()))
    h.actions.live["node1"] = node("node1")  # the taint was removed; the watch has not delivered it yet
    h.add_pod(pod("p"))
    h.drain()
    assert h.evicted_keys() == []
    assert h.actions.node_reads == 1
    assert h.events.recorded == [CANCELLED_P]


def test_a_live_node_with_a_longer_deadline_reschedules_instead_of_deleting(h):
    h.set_node(node("node1", taint("example.com/short", added=START)))
    h.actions.live["node1"] = node("node1", taint(added=START))
    h.add_pod(pod("p", [toleration("example.com/short", 1), toleration(seconds=10)], created=START - 1))
    h.run_for(1.1)
    assert h.evicted_keys() == []
    assert h.manager.scheduled_at("default/p") == pytest.approx(START + 10)


# --- difference 6: one timer structure, never a thread per pod ---------------------------------------


def test_scheduling_thousands_of_pods_starts_no_threads(h):
    h.set_node(node("node1", taint(added=START)))
    threads_before = threading.active_count()
    for i in range(5000):
        h.add_pod(pod(f"p{i}", [toleration(seconds=60 + i % 100)], created=START - 1))
    assert h.manager.pending() == 5000
    assert threading.active_count() == threads_before


# --- the heartbeat and /healthz ----------------------------------------------------------------------------


def test_a_manager_whose_worker_hangs_is_stuck_and_fails_healthz_and_an_idle_one_is_not(h):
    bound = h.manager.heartbeat.bound  # the live node, the Eviction's discovery, POST and patch, and slack
    assert bound == 4 * 20 + 1 + 10
    entered, release = threading.Event(), threading.Event()
    hung: list[str] = []
    reading = h.actions.live_node

    def hanging_read(node_name: str) -> NodeView | None:
        hung.append(threading.current_thread().name)
        entered.set()
        release.wait(10)
        return reading(node_name)

    stop = threading.Event()
    h.manager.start(stop)
    try:
        for _ in range(3):  # idle for three bounds: each idle wait (and each timer loop) ends with a stamp
            h.clock.advance(bound)
            wait_until(lambda: h.manager.stuck() is None, "the idle workers' stamps")
        assert healthz([h.manager]) == (200, "ok")

        h.actions.live_node = hanging_read
        h.set_node(node("node1", taint()))
        h.add_pod(pod("p"))  # due now: the timer loop queues it, a worker reads its node live
        assert entered.wait(5)
        h.clock.advance(bound + 1)  # the idle threads stamp again at once; the hung one cannot
        silent = f"taint eviction manager: worker {hung[0]} has neither finished a sync nor waited idle in 92s"
        wait_until(lambda: (h.manager.stuck() or "").startswith(silent), "the hung worker to be the silent one")
        reason = h.manager.stuck() or ""
        assert hung[0].startswith("eviction-worker-")
        assert healthz([h.manager]) == (500, reason)
    finally:
        release.set()
        stop.set()
        h.manager.stop()
    wait_until(lambda: h.evicted_keys() == ["default/p"], "the hung sync to finish")


# --- dry run -----------------------------------------------------------------------------------------------


def test_dry_run_records_the_event_and_deletes_nothing():
    h = Harness()
    h.manager = TaintEvictionManager(h.pods, h.actions, h.events, clock=h.clock, dry_run=True, queue=WorkQueue(h.clock))
    h.manager.activate()
    h.set_node(node("node1", taint()))
    h.add_pod(pod("p"))
    h.drain()
    h.set_node(node("node1", taint(), taint("example.com/x")))
    h.drain()
    assert h.evicted_keys() == []
    assert h.events.recorded == [("default/p", "Normal", "TaintManagerEviction", "Marking for deletion Pod default/p")]


# --- taint swaps, updates during a deletion, late binding: corners upstream handles ------------------------

NOT_READY = "node.kubernetes.io/not-ready"


def test_a_not_ready_unreachable_swap_does_not_restart_the_eviction_clock(h):
    """Even when whoever swapped gave the new taint a fresh timeAdded (upstream does)."""
    h.set_node(node("node1", taint(NOT_READY, added=START)))
    h.add_pod(pod("p", [toleration(NOT_READY, 30), toleration(UNREACHABLE, 30)]))
    h.run_for(20)
    h.set_node(node("node1", taint(UNREACHABLE, added=START + 20)))
    h.run_for(9.8)
    assert h.evicted_keys() == []
    h.run_for(0.4)
    assert h.evicted_keys() == ["default/p"]
    assert h.evicted_at("default/p") == pytest.approx(30, abs=0.11)


def test_a_pod_that_tolerated_the_old_taint_forever_counts_from_the_swap(h):
    """Nothing was counting down for it before the swap, so nothing is carried (as upstream)."""
    h.set_node(node("node1", taint(NOT_READY, added=START)))
    h.add_pod(pod("p", [toleration(NOT_READY), toleration(UNREACHABLE, 30)]))
    h.run_for(1000, step=10)
    h.set_node(node("node1", taint(UNREACHABLE, added=START + 1000)))
    h.run_for(29.8)
    assert h.evicted_keys() == []
    h.run_for(0.4)
    assert h.evicted_at("default/p") == pytest.approx(1030, abs=0.11)


def test_a_node_that_recovers_in_between_starts_a_new_clock(h):
    h.set_node(node("node1", taint(NOT_READY, added=START)))
    h.add_pod(pod("p", [toleration(NOT_READY, 30), toleration(UNREACHABLE, 30)]))
    h.run_for(20)
    h.set_node(node("node1"))  # Ready again: the failure is over
    h.run_for(5)
    h.set_node(node("node1", taint(UNREACHABLE, added=START + 25)))
    h.run_for(29.8)
    assert h.evicted_keys() == []
    h.run_for(0.4)
    assert h.evicted_at("default/p") == pytest.approx(55, abs=0.11)


def test_a_pod_is_deleted_once_even_when_an_update_reschedules_it_during_the_delete(h):
    """A reconcile that replaces the scheduled entry while the DELETE runs must not make a second deletion."""
    h.set_node(node("node1", taint(added=START)))
    h.add_pod(pod("p", [toleration(seconds=5)]))
    real_evict = h.actions.evict

    def evict_while_the_pod_changes(p: PodView) -> None:
        real_evict(p)
        h.add_pod(pod("p", [toleration(seconds=1)]))  # an update lands before the deletion is seen

    h.actions.evict = evict_while_the_pod_changes
    h.run_for(10)
    assert h.evicted_keys() == ["default/p"]
    assert [e for e in h.events.recorded if "Marking" in e[3]] == [
        ("default/p", "Normal", "TaintManagerEviction", "Marking for deletion Pod default/p")
    ]
    assert h.manager.pending() == 0


def test_a_pod_bound_after_the_taint_counts_from_its_binding_not_its_creation(h):
    """Created before the taint (it waited unscheduled), bound to the node after it."""
    h.set_node(node("node1", taint(added=START)))
    late = PodView(
        "default", "p", "uid-p", "node1", (toleration(seconds=30),), START - 600, False, None, bound=START + 10
    )
    h.clock.advance(10)
    h.add_pod(late)
    h.run_for(29.8)
    assert h.evicted_keys() == []
    h.run_for(0.4)
    assert h.evicted_at("default/p") == pytest.approx(40, abs=0.11)


# --- one actor per pod (controller/outofservice/decision.py `out_of_service_claim`) -------------------------

UNREACHABLE_SINCE_START = taint(UNREACHABLE, added=START)
FENCED = node_view(node_json(taints=[UNREACHABLE_SINCE_START, OUT_OF_SERVICE_TAINT]))  # Ready Unknown


def test_a_pod_due_after_its_node_was_fenced_is_left_to_the_out_of_service_handling(h):
    """The soak's seed 9090: the node was fenced while the pod's unreachable toleration ran; the
    out-of-service handling force deleted the pod, and 26 ms later this manager deleted it again."""
    h.set_node(node_view(node_json(taints=[UNREACHABLE_SINCE_START])))
    h.add_pod(pod("p", [toleration(seconds=300)], created=START - 1))
    h.run_for(200, step=1)
    h.actions.live["node1"] = FENCED  # fenced; the watch has not delivered it when the deadline fires
    h.run_for(101, step=1)
    assert h.evicted_keys() == []
    assert h.events.recorded == []
    assert h.manager.pending() == 0  # dropped, not retried
    reads = h.actions.node_reads
    h.set_node(FENCED)  # the watch delivers the fence: due at once (untolerated), left again
    h.run_for(600, step=10)
    assert h.evicted_keys() == []
    assert h.actions.node_reads == reads + 1
    assert h.manager.pending() == 0


BACK_IN_SERVICE = {
    "unfenced": node_view(node_json(taints=[UNREACHABLE_SINCE_START])),
    "Ready again, still fenced (no taint changes)": node_view(
        node_json("node1", "True", taints=[UNREACHABLE_SINCE_START, OUT_OF_SERVICE_TAINT])
    ),
}


@pytest.mark.parametrize("back", BACK_IN_SERVICE.values(), ids=BACK_IN_SERVICE.keys())
def test_a_pod_left_to_the_out_of_service_handling_is_deleted_here_once_its_node_is_back_in_service(h, back):
    h.clock.advance(600)  # the pod's unreachable deadline has passed
    h.set_node(FENCED)
    h.add_pod(pod("p", [toleration(seconds=300)], created=START - 1))
    h.run_for(1)
    assert h.evicted_keys() == []
    h.set_node(back)
    h.drain()
    assert h.evicted_keys() == ["default/p"]


def test_without_the_out_of_service_handling_a_fenced_nodes_pods_are_deleted_here():
    """--controllers=-out-of-service: upstream's split, PodGC force deletes what this manager deleted."""
    h = Harness(defer_to_out_of_service=False)
    h.set_node(FENCED)
    h.add_pod(pod("p"))
    h.drain()
    assert h.evicted_keys() == ["default/p"]


def ready(n: NodeView, status: str) -> NodeView:
    return replace(n, conditions=({"type": "Ready", "status": status},))


def test_a_new_leader_leaves_a_ready_nodes_pods_alone_under_its_stale_not_ready_taint():
    """Seed 7207: node-2 Ready again for 51 s under the not-ready taint it got while its runtime was down; a
    new leader took the Lease, its manager deleted a 60 s pod 1.9 s before its monitor lifted the taint."""
    h = Harness(active=False)
    stale = taint("node.kubernetes.io/not-ready", added=START - 130)
    h.set_node(ready(node("node1", stale), "True"))
    h.add_pod(pod("p", [toleration("node.kubernetes.io/not-ready", 60)]))
    h.manager.activate()
    h.run_for(5)
    assert h.evicted_keys() == []
    h.set_node(ready(node("node1", stale), "False"))  # not Ready after all: the taint's clock holds, long past
    h.drain()
    assert h.evicted_keys() == ["default/p"]


def test_a_ready_blip_under_a_taint_without_time_added_keeps_its_clock(h):
    """The taint's clock counts from when the manager first saw it, stale or not: Ready=True for a second
    at 30 s does not push a 60 s eviction to 91 s."""
    unreachable = taint()  # no timeAdded: counted from first seen
    h.set_node(ready(node("node1", unreachable), "Unknown"))
    h.add_pod(pod("p", [toleration(seconds=60)], created=START - 1))
    h.run_for(30)
    h.set_node(ready(node("node1", unreachable), "True"))
    h.run_for(1)
    h.set_node(ready(node("node1", unreachable), "Unknown"))
    assert h.manager.scheduled_at("default/p") == pytest.approx(START + 60, abs=0.2)
    h.run_for(30)
    assert h.evicted_keys() == ["default/p"]
