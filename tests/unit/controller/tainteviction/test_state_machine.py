"""The taint eviction manager driven by random interleavings of informer events, timers, workers and
leadership (hypothesis' stateful testing): after every step its state keeps its invariants
(controller/tainteviction/state.py) and its gauges agree with it; no pod is ever deleted twice, while the
replica does not lead, from a node that does not call for it, or when the out-of-service handling owns it;
and once the API stops failing, every pod that is due is deleted.

The API's objects are the truth; the informers deliver them to the manager's cache now, later, or while
the manager reads a node live or deletes a pod outside its lock (an interleaving inside a sync). A
delivery brings the cache up to the API's object as it is then, so events never arrive out of order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from controller.clock import FakeClock
from controller.objects import NamespaceView, NodeView, PodView, node_view
from controller.outofservice.decision import out_of_service_claim
from controller.tainteviction import metrics
from controller.tainteviction.disruption_budget import BudgetSettings
from controller.tainteviction.manager import BudgetRefused, TaintEvictionManager
from controller.tainteviction.verdict import EvictionRule, pod_verdict
from controller.workqueue import WorkQueue
from kube.timestamps import format_time
from tests.support.api_json import node_json
from tests.support.builders import NOT_READY, UNREACHABLE, pod, taint, toleration
from tests.support.fakes import MemoryStore, RecordingEvents
from tests.support.fencing import OUT_OF_SERVICE_TAINT
from tests.support.work import work_off

START = 1_800_000_000.0
NODES = ("n1", "n2")
PODS = ("a", "b", "c")
DRAIN = "example.com/drain"  # a taint whose evictions respect disruption budgets (BUDGETS)
BUDGETS = BudgetSettings(taint_keys=frozenset({DRAIN}), timeout=20.0)
TAINT_KEYS = (NOT_READY, UNREACHABLE, DRAIN)
DELIVERED = st.sampled_from(("now", "later", "during the next call", "during the call after"))
TOLERATIONS = {
    "none": (),
    "unreachable 10 s": (toleration(UNREACHABLE, 10),),
    "not-ready and unreachable 30 s": (toleration(NOT_READY, 30), toleration(UNREACHABLE, 30)),
    "unreachable forever": (toleration(UNREACHABLE),),
    "everything 5 s": (toleration(None, 5),),
}


def calls_for(node: NodeView, p: PodView) -> bool:
    """The test's own reading of when a node's taints call for a pod's deletion at some time: a NoExecute
    taint it does not tolerate forever, but a not-ready or unreachable one while the node is Ready."""
    ready = next((c.get("status") for c in node.conditions if c.get("type") == "Ready"), None)
    for t in node.taints:
        if t.get("effect") != "NoExecute" or (ready == "True" and t.get("key") in (NOT_READY, UNREACHABLE)):
            continue
        forever = any(
            tol.get("key") in (None, t.get("key")) and "tolerationSeconds" not in tol for tol in p.tolerations
        )
        if not forever:
            return True
    return False


class Api:
    """The manager's API edge over the API's objects (`live` nodes, `pods`): the deletions made, injected
    failures and refusals, and informer deliveries made while a call is in flight."""

    def __init__(self, machine: EvictionMachine) -> None:
        self.machine = machine
        self.live: dict[str, NodeView] = {}
        self.pods: dict[str, PodView] = {}
        self.failing = False
        self.refusing = False
        self.meanwhile: list[Callable[[], None]] = []

    def _in_flight(self) -> None:
        """One delivery queued "during a call" is made per call, so a later one lands in a later call."""
        if self.meanwhile:
            self.meanwhile.pop(0)()

    def live_node(self, node_name: str) -> NodeView | None:
        if self.failing:
            raise RuntimeError("the apiserver is down")
        node = self.live.get(node_name)
        self._in_flight()
        return node

    def evict(self, p: PodView) -> Literal[True] | None:
        self._in_flight()
        if self.failing:
            raise RuntimeError("the apiserver is down")
        self.machine.deletion_asked(p)
        current = self.pods.get(p.key)
        if current is None or current.uid != p.uid:
            return None  # gone or replaced meanwhile: the API's uid precondition refuses the DELETE
        del self.pods[p.key]
        return True

    def request_eviction(self, p: PodView) -> Literal[True] | None:
        self._in_flight()
        if self.refusing:  # after the call's delivery: the refusal answers a pod replaced meanwhile
            raise BudgetRefused("The disruption budget web needs 2 healthy pods and has 2 currently")
        return self.evict(p)


class EvictionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock(START)
        self.pods: MemoryStore[PodView] = MemoryStore()
        self.api = Api(self)
        self.manager = TaintEvictionManager(
            self.pods,
            self.api,
            RecordingEvents(),
            clock=self.clock,
            queue=WorkQueue(self.clock),
            namespaces=MemoryStore[NamespaceView](),
            budgets=BUDGETS,
            defer_to_out_of_service=True,
        )
        self.cached_nodes: dict[str, NodeView] = {}
        self.deletions: list[tuple[str, str]] = []  # (key, uid) the manager asked to delete, in order
        self.uids = 0
        self.problems: list[str] = []

    # --- what the API edge saw ------------------------------------------------------------------

    def deletion_asked(self, p: PodView) -> None:
        """The manager deletes a pod: judged against the API's objects at this moment."""
        live = self.api.live.get(p.node_name)
        if (p.key, p.uid) in self.deletions:
            self.problems.append(f"{p.key} ({p.uid}) deleted twice")
        if not self.manager.active:
            self.problems.append(f"{p.key} deleted while not leading")
        if live is None:
            self.problems.append(f"{p.key} deleted from node {p.node_name}, which is gone")
        else:
            if out_of_service_claim(live, p) is not None:
                self.problems.append(f"{p.key} deleted though the out-of-service handling owns it")
            if not calls_for(live, p):
                self.problems.append(
                    f"{p.key} deleted from {p.node_name}, whose taints {live.taints} do not call for it"
                )
        self.deletions.append((p.key, p.uid))

    # --- informer events --------------------------------------------------------------------------

    def _node(self, name: str, ready: str, keys: tuple[str, ...], out_of_service: bool) -> NodeView:
        taints: list[dict[str, Any]] = [taint(key, added=self.clock.now()) for key in keys]
        if out_of_service:  # with a timeAdded too, so the test's own judgement needs no first-seen time
            taints.append({**OUT_OF_SERVICE_TAINT, "timeAdded": format_time(self.clock.now())})
        previous = self.api.live.get(name)
        for kept in previous.no_execute_taints if previous else ():
            for i, new in enumerate(taints):
                if new["key"] == kept.get("key"):
                    taints[i] = dict(kept)  # a taint still there keeps its timeAdded
        return node_view(node_json(name, ready, *taints))

    def _deliver_node(self, name: str) -> None:
        node = self.api.live[name]
        old = self.cached_nodes.get(name)
        if old is node:
            return
        self.cached_nodes[name] = node
        self.manager.on_node_change(old, node)

    def _deliver_pod(self, key: str) -> None:
        """The pod informer's event for `key`, bringing the cache to the API's pod as it is now."""
        new = self.api.pods.get(key)
        old = self.pods.items.get(key)
        if old is new:
            return
        if new is None:
            del self.pods.items[key]
        else:
            self.pods.items[key] = new
        self.manager.on_pod_change(old, new)

    def _deliver(self, delivery: Callable[[], None], when: str) -> None:
        if when == "now":
            delivery()
        elif when == "during the next call":
            self.api.meanwhile.append(delivery)
        elif when == "during the call after":  # a sync's second call: its Eviction or DELETE
            self.api.meanwhile += [lambda: None, delivery]

    @initialize(
        lead=st.booleans(),
        failing_node=st.sampled_from(("Unknown", "False", "True")),
        failing_keys=st.lists(st.sampled_from(TAINT_KEYS), unique=True, min_size=1, max_size=2).map(tuple),
        placed=st.lists(
            st.tuples(st.sampled_from(NODES), st.sampled_from(sorted(TOLERATIONS)), st.booleans()),
            min_size=len(PODS),
            max_size=len(PODS),
        ),
    )
    def start(
        self, lead: bool, failing_node: str, failing_keys: tuple[str, ...], placed: list[tuple[str, str, bool]]
    ) -> None:
        """Two nodes, the first already tainted (a failure under way), and the pods spread over them."""
        self.api.live[NODES[0]] = self._node(NODES[0], failing_node, failing_keys, False)
        self.api.live[NODES[1]] = self._node(NODES[1], "True", (), False)
        for name in NODES:
            self._deliver_node(name)
        for name, (node, tolerations, respects_budget) in zip(PODS, placed, strict=True):
            self.pod_changes(name, node, tolerations, True, respects_budget, "now")
        if lead:
            self.manager.activate()

    @rule(
        name=st.sampled_from(NODES),
        ready=st.sampled_from(("True", "False", "Unknown")),
        keys=st.lists(st.sampled_from(TAINT_KEYS), unique=True, min_size=1, max_size=2).map(tuple) | st.just(()),
        out_of_service=st.booleans(),
        delivered=DELIVERED,
    )
    def node_changes(self, name: str, ready: str, keys: tuple[str, ...], out_of_service: bool, delivered: str) -> None:
        """The node changes in the API; its informer event comes now, later, or while a call is in flight."""
        self.api.live[name] = self._node(name, ready, keys, out_of_service)
        self._deliver(lambda: self._deliver_node(name), delivered)

    @rule()
    def the_informers_catch_up(self) -> None:
        for name in NODES:
            self._deliver_node(name)
        for key in {*self.api.pods, *self.pods.items}:
            self._deliver_pod(key)

    @rule(
        name=st.sampled_from(PODS),
        node=st.sampled_from(NODES),
        tolerations=st.sampled_from(sorted(TOLERATIONS)),
        new_pod=st.booleans(),
        respects_budget=st.booleans(),
        delivered=DELIVERED,
    )
    def pod_changes(
        self, name: str, node: str, tolerations: str, new_pod: bool, respects_budget: bool, delivered: str
    ) -> None:
        """A pod is created, replaced by a new one of the same name (a new uid), or its tolerations edited."""
        key = f"default/{name}"
        current = self.api.pods.get(key)
        created: float | None
        if current is None or new_pod:
            self.uids += 1
            uid, node_name, created = f"uid-{self.uids}", node, self.clock.now()
        else:
            uid, node_name, created = current.uid, current.node_name, current.arrived
        annotations = {"taintkeeper.io/eviction": "respect-disruption-budget"} if respects_budget else None
        self.api.pods[key] = pod(
            name, TOLERATIONS[tolerations], node=node_name, uid=uid, created=created, annotations=annotations
        )
        self._deliver(lambda: self._deliver_pod(key), delivered)

    @rule(name=st.sampled_from(PODS), terminating=st.booleans(), delivered=DELIVERED)
    def pod_goes(self, name: str, terminating: bool, delivered: str) -> None:
        """A pod is deleted by someone else, or starts terminating."""
        key = f"default/{name}"
        current = self.api.pods.get(key)
        if current is None:
            return
        if terminating:
            self.api.pods[key] = replace(current, terminating=True)
        else:
            del self.api.pods[key]
        self._deliver(lambda: self._deliver_pod(key), delivered)

    # --- timers, workers, leadership, the API's health --------------------------------------------

    @rule(seconds=st.sampled_from((0.0, 0.5, 3.0, 7.0, 15.0, 40.0)))
    def time_passes(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.manager.step()

    @rule()
    def workers_work_off_the_queue(self) -> None:
        """Each key due is synced, the invariants checked after each sync, not only after the rule."""
        work_off(self.manager.queue, self.manager.sync, lambda _key: (self.check(), self.manager.fire_due()))

    @rule(seconds=st.sampled_from((0.0, 3.0, 7.0, 15.0, 40.0)))
    def the_controller_runs(self, seconds: float) -> None:
        """Time passes with the timer loop and the workers keeping up."""
        self.clock.advance(seconds)
        self.manager.step()
        self.workers_work_off_the_queue()

    @rule(lead=st.booleans())
    def leadership_changes(self, lead: bool) -> None:
        if lead:
            self.manager.activate()
        else:
            self.manager.deactivate()

    @rule(failing=st.booleans(), refusing=st.booleans())
    def the_api_changes_health(self, failing: bool, refusing: bool) -> None:
        self.api.failing, self.api.refusing = failing, refusing

    # --- what must always hold ------------------------------------------------------------------------

    @invariant()
    def check(self) -> None:
        """The state keeps its invariants, the gauges agree with it, every eviction scheduled is of a pod the
        cache holds under that uid, and no deletion was wrong."""
        assert self.manager.state.violations() == []
        for p in self.pods.list():
            entry = self.manager.state.scheduled(p.key)
            assert entry is None or (entry.uid == p.uid and not p.terminating), f"{p.key}: {entry}"
        for name in PODS:
            key = f"default/{name}"
            assert self.pods.get(key) is not None or self.manager.state.scheduled(key) is None, key
        assert metrics.PENDING_EVICTIONS._value.get() == self.manager.state.pending()
        assert metrics.WAITING_FOR_BUDGET._value.get() == self.manager.state.waiting()
        assert self.problems == []

    def teardown(self) -> None:
        """The API heals, every informer catches up and the replica leads: every due pod is deleted."""
        self.api.failing = self.api.refusing = False
        self.api.meanwhile.clear()
        self.the_informers_catch_up()
        self.manager.activate()
        for _ in range(40):  # 200 s: past every toleration, refusal ceiling and retry backoff here
            self.manager.step()
            self.workers_work_off_the_queue()
            self.the_informers_catch_up()
            self.clock.advance(5)
        self.manager.step()
        self.workers_work_off_the_queue()
        now = self.clock.now()
        for p in self.api.pods.values():
            if p.terminating:
                continue
            node = self.api.live[p.node_name]
            decision = pod_verdict(p, node, lambda _t: now, now, EvictionRule()).decision
            assert decision.at is None or decision.at > now, f"{p.key} is due since {decision.at} and was not deleted"


TestEvictionManagerStateMachine = EvictionMachine.TestCase
TestEvictionManagerStateMachine.settings = settings(max_examples=300, stateful_step_count=50, deadline=None)


def test_a_budget_refusal_answering_a_pod_replaced_meanwhile_leaves_no_record_for_the_new_pod():
    """The Eviction of pod a is refused while a new pod a (another uid) replaces it: the refusal is the
    old pod's, so nothing waits for a budget under the new pod's name."""
    machine = EvictionMachine()
    machine.start(True, "True", (DRAIN,), [("n1", "none", False)] * len(PODS))
    machine.the_api_changes_health(failing=False, refusing=True)
    machine.pod_changes("a", "n1", "none", True, False, "during the call after")
    machine.manager.fire_due()
    work_off(machine.manager.queue, machine.manager.sync, lambda key: machine.check() if key == "default/a" else None)
    machine.check()
