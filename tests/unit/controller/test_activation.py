"""controller/activation.py: a leader's components activate one by one, each once its caches have
synced, and never in a term that has ended."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from controller.activation import StagedActivation


class Cache:
    """An informer as StagedActivation reads it: a name, has_synced and wait_for_sync."""

    def __init__(self, name: str, synced: bool) -> None:
        self.name = name
        self._synced = threading.Event()
        if synced:
            self._synced.set()

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def sync(self) -> None:
        self._synced.set()


class Recorder:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.activated = threading.Event()

    def activate(self) -> None:
        self.log.append(f"{self.name} on")
        self.activated.set()

    def deactivate(self) -> None:
        self.log.append(f"{self.name} off")


def staged(*components: tuple[Recorder, list[Cache]]) -> tuple[StagedActivation, threading.Event]:
    stop = threading.Event()
    pairs: list[Any] = list(components)
    return StagedActivation(pairs, stop, poll=0.01), stop


def wait_idle() -> None:
    for thread in threading.enumerate():
        if thread.name.startswith("activate-"):
            thread.join(timeout=2)


def test_a_component_whose_caches_have_synced_activates_with_the_term_at_once():
    log: list[str] = []
    monitor = Recorder("monitor", log)
    activation, _ = staged((monitor, [Cache("nodes", True), Cache("leases", True)]))
    activation.activate()
    assert log == ["monitor on"]


def test_the_monitor_acts_while_the_pods_are_listed_and_the_eviction_once_they_are():
    log: list[str] = []
    monitor, eviction = Recorder("monitor", log), Recorder("eviction", log)
    nodes, pods = Cache("nodes", True), Cache("pods", False)
    activation, stop = staged((monitor, [nodes]), (eviction, [nodes, pods]))
    activation.activate()
    assert log == ["monitor on"]
    pods.sync()
    assert eviction.activated.wait(2)
    assert log == ["monitor on", "eviction on"]
    stop.set()


@pytest.mark.parametrize("then", ["lost", "lost and led again"])
def test_a_term_that_ends_before_the_caches_sync_never_activates_the_component_in_it(then: str):
    log: list[str] = []
    eviction = Recorder("eviction", log)
    pods = Cache("pods", False)
    activation, stop = staged((eviction, [pods]))
    activation.activate()
    activation.deactivate()
    if then == "lost and led again":
        activation.activate()
    pods.sync()
    wait_idle()
    expected = ["eviction off"] + (["eviction on"] if then == "lost and led again" else [])
    assert log == expected  # once per term: the first term's waiter never activates it
    stop.set()


def test_stopping_ends_a_wait_for_caches_that_never_sync():
    log: list[str] = []
    eviction = Recorder("eviction", log)
    activation, stop = staged((eviction, [Cache("pods", False)]))
    activation.activate()
    stop.set()
    wait_idle()
    assert not any(thread.name.startswith("activate-") for thread in threading.enumerate())
    assert log == []
