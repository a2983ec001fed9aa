"""The control plane's supervisor during a soak: what the kubelet is to static pods and systemd to
services on a real control-plane node, which the local cluster's plain processes lack.

kube-scheduler exits by design when it finds its cache corrupted (upstream's scheduler cache: a pod
updated on another node than it was added to, which the soak's apiserver and etcd faults can cause)
and relies on its supervisor to start it again. Without one, a run went on for 29 minutes without a
scheduler: no replacement of an evicted controller or webhook pod was ever placed.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from bench.soak.cluster import ClusterError

log = logging.getLogger("chaos.supervisor")

CHECK_EVERY = 2.0  # seconds between looks: the kubelet's restart of a static pod takes about as long
# kube-controller-manager is the built-ins' under test, which the faults kill, pause and restart
# themselves (bench/soak/injector.py); against taintkeeper it is one of the supervised.
TAINTKEEPER_RUN = ("kube-scheduler", "kube-controller-manager", "kube-proxy")
BUILTIN_RUN = ("kube-scheduler", "kube-proxy")


class Components(Protocol):
    def exited(self, component: str) -> bool: ...

    def start_components(self, components: tuple[str, ...]) -> list[str]: ...


@dataclass
class Supervisor:
    cluster: Components
    components: tuple[str, ...]
    restarts: Counter[str] = field(default_factory=Counter)

    def look(self) -> list[str]:
        """Start whatever exited; the names started."""
        if not any(self.cluster.exited(name) for name in self.components):
            return []
        try:
            started = self.cluster.start_components(self.components)
        except ClusterError as error:  # tried again at the next look
            log.warning("could not start the control plane's exited components: %s", error)
            return []
        self.restarts.update(started)
        if started:
            log.info("%s exited; started again, as its supervisor would", ", ".join(started))
        return started

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(CHECK_EVERY):
            self.look()

    def summary(self) -> str:
        restarts = ", ".join(f"{name} {count}" for name, count in sorted(self.restarts.items()))
        return f"control plane restarts: {restarts or 'none'}"
