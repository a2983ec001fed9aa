"""The taint eviction manager on a fake clock, with a recording stand-in for its API edge."""

from __future__ import annotations

from typing import Literal

from controller.clock import FakeClock
from controller.objects import NamespaceView, NodeView, PodView
from controller.tainteviction.disruption_budget import BudgetSettings
from controller.tainteviction.manager import BudgetRefused, TaintEvictionManager
from controller.workqueue import WorkQueue
from tests.support.eviction import drain_evictions
from tests.support.fakes import MemoryStore, RecordingEvents

START = 1_800_000_000.0


class Actions:
    """Records evictions; `live` holds what a live GET of each node returns."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.live: dict[str, NodeView] = {}
        self.evicted: list[tuple[str, str, float]] = []
        self.failures_left = 0
        self.node_reads = 0
        self.budget_refusals_left = 0  # Evictions the pod's disruption budget refuses before it allows one
        self.eviction_requests: list[tuple[str, float]] = []

    def live_node(self, node_name: str) -> NodeView | None:
        self.node_reads += 1
        return self.live.get(node_name)

    def evict(self, p: PodView) -> Literal[True] | None:
        if self.failures_left > 0:
            self.failures_left -= 1
            raise RuntimeError("pods is forbidden")
        self.evicted.append((p.key, p.uid, self.clock.now()))
        return True

    def request_eviction(self, p: PodView) -> Literal[True] | None:
        self.eviction_requests.append((p.key, self.clock.now()))
        if self.budget_refusals_left > 0:
            self.budget_refusals_left -= 1
            raise BudgetRefused("The disruption budget web needs 2 healthy pods and has 2 currently")
        return self.evict(p)


class Harness:
    """The manager as the controller runs it by default: beside the out-of-service handling, which owns the
    pods it force deletes (`defer_to_out_of_service`)."""

    def __init__(
        self,
        active: bool = True,
        budgets: BudgetSettings | None = None,
        comparison_operators: bool = False,
        defer_to_out_of_service: bool = True,
    ) -> None:
        self.clock = FakeClock(START)
        self.pods: MemoryStore[PodView] = MemoryStore()
        self.namespaces: MemoryStore[NamespaceView] = MemoryStore()
        self.actions = Actions(self.clock)
        self.events = RecordingEvents()
        self.manager = TaintEvictionManager(
            self.pods,
            self.actions,
            self.events,
            clock=self.clock,
            queue=WorkQueue(self.clock),
            namespaces=self.namespaces,
            budgets=budgets,
            comparison_operators=comparison_operators,
            defer_to_out_of_service=defer_to_out_of_service,
        )
        if active:
            self.manager.activate()

    def add_pod(self, p: PodView) -> None:
        old = self.pods.items.get(p.key)
        self.pods.items[p.key] = p
        self.manager.on_pod_change(old, p)

    def delete_pod(self, key: str) -> None:
        old = self.pods.items.pop(key)
        self.manager.on_pod_change(old, None)

    def set_node(self, n: NodeView, live: bool = True) -> None:
        if live:
            self.actions.live[n.name] = n
        self.manager.on_node_change(None, n)

    def run_for(self, seconds: float, step: float = 0.1) -> None:
        """Advance the fake clock in steps, firing and working off everything due at each step."""
        self.clock.run_for(seconds, step, self.drain)

    def drain(self) -> None:
        drain_evictions(self.manager)

    def evicted_keys(self) -> list[str]:
        return [key for key, _, _ in self.actions.evicted]

    def evicted_at(self, key: str) -> float:
        return next(at for k, _, at in self.actions.evicted if k == key) - START
