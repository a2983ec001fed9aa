"""The control plane's supervisor during a soak: what the kubelet is to static pods and systemd to
services on a real control-plane node, which the local cluster's plain processes lack.

kube-scheduler exits by design when it finds its cache corrupted (upstream's scheduler cache: a pod
updated on another node than it was added to, which the soak's apiserver and etcd faults can cause)
and relies on its supervisor to start it again. Without one, a run went on for 29 minutes without a
scheduler: no replacement of an evicted controller or webhook pod was ever placed. kube-controller-manager
exits whenever it loses its Lease (a store fault past its renew deadline does it): against the built-ins,
left exited until the next leader fault, it was gone 5 minutes after its first loss, which no kubelet does.

An exited component is started again with the kubelet's crash-loop back-off (pkg/kubelet, 1.37 defaults):
at once the first time, then 10 s after its exit, doubled each time up to 300 s, and from the start again
once an exit comes 600 s after the last.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from bench.soak.cluster import ORACLE_CONTROLLER_MANAGERS, ClusterError

log = logging.getLogger("chaos.supervisor")

CHECK_EVERY = 2.0  # seconds between looks: the kubelet's restart of a static pod takes about as long
CONTROL_PLANE = ("kube-scheduler", "kube-controller-manager", "kube-proxy")
ORACLE_CONTROL_PLANE = ("kube-scheduler", *ORACLE_CONTROLLER_MANAGERS, "kube-proxy")  # the built-ins: two replicas
INITIAL_BACKOFF = 10.0  # pkg/kubelet initialCrashLoopBackOff
MAX_BACKOFF = 300.0  # pkg/kubelet MaxCrashLoopBackOff
BACKOFF_RESET = 2 * MAX_BACKOFF  # client-go flowcontrol.Backoff: an entry expires after twice the maximum


@dataclass
class CrashLoopBackOff:
    """One component's restart delay, as the kubelet keeps it for a container."""

    backoff: float | None = None
    last_exit: float | None = None

    def _expired(self, exited_at: float) -> bool:
        return self.backoff is None or self.last_exit is None or exited_at - self.last_exit >= BACKOFF_RESET

    def wait(self, exited_at: float) -> float:
        """Seconds from an exit to its restart."""
        return 0.0 if self._expired(exited_at) else float(self.backoff or 0.0)

    def restarted(self, exited_at: float) -> None:
        self.backoff = INITIAL_BACKOFF if self._expired(exited_at) else min(2 * (self.backoff or 0.0), MAX_BACKOFF)
        self.last_exit = exited_at


class Components(Protocol):
    def exited(self, component: str) -> bool: ...

    def start_components(self, components: tuple[str, ...]) -> list[str]: ...


def _nothing_held() -> frozenset[str]:
    return frozenset()


@dataclass
class Supervisor:
    cluster: Components
    components: tuple[str, ...] = CONTROL_PLANE
    # The components a running fault holds down and starts again itself (bench/soak/injector.py).
    held: Callable[[], frozenset[str]] = _nothing_held
    clock: Callable[[], float] = time.monotonic
    restarts: Counter[str] = field(default_factory=Counter)
    down_seconds: dict[str, float] = field(default_factory=dict)  # from each exit seen to its start
    _backoffs: dict[str, CrashLoopBackOff] = field(default_factory=dict)
    _exited_at: dict[str, float] = field(default_factory=dict)

    def look(self) -> list[str]:
        """Start whatever exited and has waited out its back-off; the names started."""
        now, held = self.clock(), self.held()
        due = []
        for name in self.components:
            if name in held or not self.cluster.exited(name):
                self._exited_at.pop(name, None)
                continue
            exited_at = self._exited_at.setdefault(name, now)
            if now - exited_at >= self._backoffs.setdefault(name, CrashLoopBackOff()).wait(exited_at):
                due.append(name)
        if not due:
            return []
        try:
            started = self.cluster.start_components(tuple(due))
        except ClusterError as error:  # tried again at the next look
            log.warning("could not start the control plane's exited components: %s", error)
            return []
        for name in started:
            exited_at = self._exited_at.pop(name, now)
            self._backoffs[name].restarted(exited_at)
            self.down_seconds[name] = self.down_seconds.get(name, 0.0) + now - exited_at
        self.restarts.update(started)
        if started:
            log.info("%s exited; started again, as its kubelet would", ", ".join(started))
        return started

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(CHECK_EVERY):
            self.look()

    def summary(self) -> str:
        restarts = ", ".join(
            f"{name} {count} ({self.down_seconds.get(name, 0.0):,.0f}s down)"
            for name, count in sorted(self.restarts.items())
        )
        return f"control plane restarts: {restarts or 'none'}"
