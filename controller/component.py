"""What every controller is to the runner (controller/runner.py), which drives each the same way.

In order: `register` its handlers with the shared informers (before they start), `start` its
threads, then `activate` and `deactivate` as this replica gains and loses leadership (every
replica keeps warm caches; only the leader acts), and `stop` its queues at the end. A leader
activates each component once the informers it names in `caches` have synced
(controller/activation.py), so the node lifecycle monitor need not wait for the pods' LIST. `stuck`
feeds /healthz, so a process whose loop no longer moves is restarted.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # only types here: the informers themselves are made by the runner
    from controller.informers import SharedInformers
    from kube.informer import Informer


class Component(Protocol):
    def register(self, informers: SharedInformers) -> None:
        """Add its handlers to the informers it watches."""

    def caches(self, informers: SharedInformers) -> list[Informer[Any]]:
        """The informers whose caches must have synced before it acts (among those it registered with)."""

    def start(self, stop: threading.Event) -> None:
        """Start its threads; they run until `stop` is set and act only while active."""

    def activate(self) -> None:
        """This replica leads: start acting (resync what was missed)."""

    def deactivate(self) -> None:
        """Leadership is lost or the process stops: stop acting at once."""

    def stop(self) -> None:
        """Shut its queues down so its workers return."""

    def stuck(self) -> str | None:
        """Why one of its loops or workers looks stuck, or None: a worker that has neither finished a sync
        nor waited idle within its heartbeat's bound (controller/worker.py `Heartbeat`)."""
