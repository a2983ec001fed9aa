"""A leader's components activate one by one, each once the informers it needs have synced.

The node lifecycle monitor needs nodes and Leases only, so at 5,000 nodes it takes over (and lifts
the registration taints) while the 150,000 pods are still being listed; the taint eviction waits
for the pods. A term that ends before a component's caches sync never activates it: every
activation is checked against the term it was started for, under one lock with deactivation.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from controller.component import Component
from kube.informer import Informer

log = logging.getLogger("taintkeeper.controller")


class StagedActivation:
    def __init__(
        self,
        components: Sequence[tuple[Component, Sequence[Informer[Any]]]],
        stop: threading.Event,
        *,
        on_activated: Callable[[Component], None] | None = None,
        poll: float = 1.0,
    ) -> None:
        self._components = list(components)
        self._stop = stop
        self._on_activated = on_activated
        self._poll = poll
        self._lock = threading.Lock()
        self._term = 0  # counts activations and deactivations: a waiter acts only in its own term
        self._leading = False

    def activate(self) -> None:
        """This replica leads: each component now if its caches have synced, else when they have."""
        with self._lock:
            self._term += 1
            self._leading = True
            term = self._term
        for component, caches in self._components:
            if all(informer.has_synced for informer in caches):
                self._activate_in(term, component)
            else:
                threading.Thread(
                    target=self._when_synced,
                    args=(term, component, caches),
                    daemon=True,
                    name=f"activate-{type(component).__name__}",
                ).start()

    def deactivate(self) -> None:
        """Leadership lost or the process stops: every component stops acting, and no waiter starts one."""
        with self._lock:
            self._term += 1
            self._leading = False
            for component, _ in self._components:
                component.deactivate()

    def _when_synced(self, term: int, component: Component, caches: Sequence[Informer[Any]]) -> None:
        waiting = [informer.name for informer in caches if not informer.has_synced]
        log.info("%s waits for caches to sync before acting: %s", type(component).__name__, ", ".join(waiting))
        for informer in caches:
            while not informer.wait_for_sync(self._poll):
                if self._stop.is_set() or not self._in_term(term):
                    return
        self._activate_in(term, component)

    def _in_term(self, term: int) -> bool:
        with self._lock:
            return self._leading and term == self._term

    def _activate_in(self, term: int, component: Component) -> None:
        with self._lock:
            if not (self._leading and term == self._term):
                return
            component.activate()
        if self._on_activated is not None:
            self._on_activated(component)
