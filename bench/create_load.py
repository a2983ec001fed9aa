"""Pod creations through kube-apiserver at a fixed rate, each one timed: an open-loop load (a slow
answer does not delay the next send), so the latencies are what a client sending at that rate sees.

One raw HTTPS connection per sender thread, kept alive, with the kubeconfig's CA and credentials:
the client's own cost stays small and the same for every configuration measured with it.
"""

from __future__ import annotations

import http.client
import json
import queue
import ssl
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client, config


@dataclass(frozen=True)
class Endpoint:
    """Where and as whom to send: the kubeconfig's server, CA and Authorization header."""

    host: str
    port: int
    context: ssl.SSLContext
    headers: dict[str, str]

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str) -> Endpoint:
        configuration = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        server = urlsplit(configuration.host)
        context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        if configuration.cert_file:
            context.load_cert_chain(configuration.cert_file, configuration.key_file)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        token = configuration.api_key.get("authorization") or configuration.api_key.get("BearerToken")
        if token:
            headers["Authorization"] = token if token.startswith("Bearer ") else f"Bearer {token}"
        return cls(server.hostname or "127.0.0.1", server.port or 443, context, headers)

    def connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=30)


@dataclass
class Outcome:
    """The creations of one load: each one's latency, and how many answers were not 201 or carried
    which tolerations."""

    latencies: list[float] = field(default_factory=list)  # seconds, of each 201
    failures: dict[str, int] = field(default_factory=dict)  # "status: message" -> count
    mutated: int = 0  # 201s whose pod came back with the default tolerations
    late_sends: int = 0  # sends that left more than 10 ms after their slot (the client fell behind)

    def percentile(self, share: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies) if self.latencies else float("nan")

    @property
    def p99(self) -> float:
        return self.percentile(0.99)

    @property
    def max(self) -> float:
        return max(self.latencies, default=float("nan"))

    def merge(self, other: Outcome) -> None:
        self.latencies += other.latencies
        for key, count in other.failures.items():
            self.failures[key] = self.failures.get(key, 0) + count
        self.mutated += other.mutated
        self.late_sends += other.late_sends


def create_at_rate(
    endpoint: Endpoint,
    namespace: str,
    body: Callable[[int], dict[str, Any]],
    *,
    rate: float,
    seconds: float,
    senders: int = 8,
    mutated: Callable[[dict[str, Any]], bool],
) -> Outcome:
    """POST `rate` pods a second to `namespace` for `seconds`: pod i is `body(i)`, sent at start + i/rate."""
    slots: queue.Queue[tuple[int, float] | None] = queue.Queue()
    outcome = Outcome()
    lock = threading.Lock()
    path = f"/api/v1/namespaces/{namespace}/pods"

    def sender() -> None:
        connection = endpoint.connect()
        mine = Outcome()
        try:
            while (slot := slots.get()) is not None:
                index, due = slot
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                elif wait < -0.010:
                    mine.late_sends += 1
                payload = json.dumps(body(index)).encode()
                started = time.perf_counter()
                try:
                    connection.request("POST", path, payload, endpoint.headers)
                    response = connection.getresponse()
                    answer = response.read()
                except (OSError, http.client.HTTPException) as error:
                    connection.close()
                    connection = endpoint.connect()
                    key = f"connection: {type(error).__name__}"
                    mine.failures[key] = mine.failures.get(key, 0) + 1
                    continue
                took = time.perf_counter() - started
                if response.status == 201:
                    mine.latencies.append(took)
                    mine.mutated += mutated(json.loads(answer))
                else:
                    key = f"{response.status}: {json.loads(answer).get('message', '')[:120]}"
                    mine.failures[key] = mine.failures.get(key, 0) + 1
        finally:
            connection.close()
            with lock:
                outcome.merge(mine)

    threads = [threading.Thread(target=sender, name=f"sender-{n}", daemon=True) for n in range(senders)]
    for thread in threads:
        thread.start()
    start = time.perf_counter() + 0.05
    total = int(rate * seconds)
    for index in range(total):
        slots.put((index, start + index / rate))
    for _ in threads:
        slots.put(None)
    for thread in threads:
        thread.join()
    return outcome
