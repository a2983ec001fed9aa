"""The Grafana dashboard's queries against a real Prometheus while a node fails: Debian's Prometheus
scrapes the deployed controller and webhook pods every 2 s, a worker is stopped and started again,
and each panel's query must return the series that panel is meant to show (the pending evictions
rise above 0 and fall back, one leader at every sample, ...). The queries are the dashboard file's
own (tests/support/dashboard.py), with $__rate_interval set to 30s."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.cluster import SYSTEM_NAMESPACE, UNREACHABLE, E2ECluster, toleration, wait_for
from tests.e2e.prometheus import PROMETHEUS, Prometheus
from tests.support.dashboard import Query, queries
from tests.support.metrics_callers import delete_reader_binding, service_account_token

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("webhook_ready")]

RATE_INTERVAL = "30s"
SECONDS = 20  # the victim's pods tolerate unreachable this long
Series = list[tuple[dict[str, str], float]]


@dataclass(frozen=True)
class Sample:
    phase: str  # "healthy", "down" (the worker stopped), "back" (Ready and untainted again)
    series: Series


History = list[Sample]


def values(history: History, **labels: str) -> list[float]:
    return [
        value
        for sample in history
        for metric, value in sample.series
        if all(metric.get(k) == v for k, v in labels.items())
    ]


def last(history: History, **labels: str) -> list[float]:
    return [value for metric, value in history[-1].series if all(metric.get(k) == v for k, v in labels.items())]


def finite(history: History) -> list[float]:
    return [value for value in values(history) if not math.isnan(value)]


def always_zero(history: History) -> bool:
    return all(len(sample.series) == 1 for sample in history) and set(values(history)) == {0.0}


def rises_and_falls_back(history: History, **labels: str) -> bool:
    return max(values(history, **labels), default=0) > 0 and last(history, **labels) == [0.0]


def one_leader_at_every_sample(history: History) -> bool:
    return all(len(sample.series) == 2 and sorted(v for _, v in sample.series) == [0.0, 1.0] for sample in history)


# (panel, legend) -> what its query must have returned over the failure
EXPECTED: dict[tuple[str, str], tuple[str, Callable[[History], bool]]] = {
    ("Zone states", "{{zone}}: {{state}}"): (
        "each zone in one state at every sample",
        lambda h: all(len(s.series) >= 1 for s in h) and all(v == 1 for v in values(h)),
    ),
    ("All-zones brake", "brake"): ("never braked (one worker of three down)", always_zero),
    ("Tainted nodes", "{{effect}}"): (
        "NoExecute rises to 1 while the worker is down, 0 once it is back",
        lambda h: (
            max(values(h, effect="NoExecute")) == 1
            and last(h, effect="NoExecute") == [0.0]
            and bool(values(h, effect="NoSchedule"))
        ),
    ),
    ("Not-ready nodes by zone", "{{zone}}"): (
        "a not-ready node while down, none at the end",
        lambda h: max(values(h)) >= 1 and set(last(h)) == {0.0},
    ),
    ("Evictions per minute", "pods deleted or evicted"): (
        "above 0 once the pods are evicted",
        lambda h: max(values(h)) > 0,
    ),
    ("Evictions per minute", "of which through a disruption budget"): ("0: no pod opted in", always_zero),
    ("Pending evictions", "scheduled, deadline not yet come"): ("rises above 0, falls back to 0", rises_and_falls_back),
    ("Pending evictions", "due, waiting for a disruption budget"): ("0: no pod opted in", always_zero),
    ("Eviction lateness (p99)", "p99"): ("a number once pods were evicted", lambda h: bool(finite(h))),
    ("Eviction lateness (p99)", "p50"): ("a number once pods were evicted", lambda h: bool(finite(h))),
    ("Deletion failures per minute", "failed deletions"): ("0: every deletion succeeded", always_zero),
    ("Monitor pass age", "seconds since the leader's last pass"): (
        "under 3 monitor periods at every sample",
        lambda h: all(len(s.series) == 1 for s in h) and max(values(h)) < 3 * 2 + 4,
    ),
    ("Leader", "{{instance}}"): ("two replicas, one leader, at every sample", one_leader_at_every_sample),
    ("Webhook reviews by outcome", "{{outcome}}"): ("pods patched", lambda h: max(values(h, outcome="patched")) > 0),
    ("Webhook latency", "p50"): ("a number above 0", lambda h: max(finite(h), default=0) > 0),
    ("Webhook latency", "p99"): ("a number above 0", lambda h: max(finite(h), default=0) > 0),
    ("Webhook namespace cache synced", "{{instance}}"): (
        "both replicas synced at every sample",
        lambda h: all(len(s.series) == 2 for s in h) and set(values(h)) == {1.0},
    ),
}


def metrics_endpoints(e2e: E2ECluster, component: str, port: int) -> list[str]:
    pods = e2e.raw(
        e2e.core.list_namespaced_pod, SYSTEM_NAMESPACE, label_selector=f"app.kubernetes.io/component={component}"
    )["items"]
    running = [pod for pod in pods if pod["status"].get("phase") == "Running" and pod["status"].get("podIP")]
    return [f"{pod['status']['podIP']}:{port}" for pod in running]


@pytest.fixture
def prometheus(e2e: E2ECluster, namespace: str, tmp_path: Path, test_tools: None) -> Iterator[Prometheus]:
    if not PROMETHEUS.is_file():
        pytest.fail(
            f"{PROMETHEUS} is missing after `hack/local-cluster.sh deps` (Debian package prometheus)", pytrace=False
        )

    def both_replicas(component: str, port: int) -> list[str] | None:
        found = metrics_endpoints(e2e, component, port)
        return found if len(found) == 2 else None

    controllers = wait_for(lambda: both_replicas("controller", 10257), 120, "both controller replicas Running")
    webhooks = wait_for(lambda: both_replicas("webhook", 8443), 120, "both webhook replicas Running")
    token_file = tmp_path / "token"
    token_file.write_text(service_account_token(e2e.api_client, namespace, "prometheus", reader=True))
    server = Prometheus(tmp_path, controllers, webhooks, token_file).start()
    try:
        wait_for(server.targets_up, 60, f"Prometheus scraping {controllers + webhooks}", interval=1)
        wait_for(
            lambda: server.rates_computable(RATE_INTERVAL),
            60,
            f"two scrapes of every target within {RATE_INTERVAL}",
            interval=1,
        )
        yield server
    finally:
        server.stop()
        delete_reader_binding(e2e.api_client, namespace, "prometheus")


class Recorder:
    """Every dashboard query, run at each poll while waiting for something to happen."""

    def __init__(self, server: Prometheus) -> None:
        self.server = server
        self.history: dict[Query, History] = {query: [] for query in queries()}

    def record(self, phase: str) -> None:
        for query, samples in self.history.items():
            samples.append(Sample(phase, self.server.query(query.runnable(RATE_INTERVAL))))

    def latest(self, panel: str, legend: str, **labels: str) -> list[float]:
        (samples,) = [h for q, h in self.history.items() if (q.panel, q.legend) == (panel, legend)]
        return last(samples, **labels) if samples else []

    def until(self, condition: Callable[[], bool], timeout: float, what: str, phase: str) -> None:
        def recorded() -> bool:
            self.record(phase)
            return condition()

        wait_for(recorded, timeout, what, interval=2)


@pytest.mark.timeout(900)
def test_every_panel_shows_a_node_failure(e2e: E2ECluster, namespace: str, victim: str, prometheus: Prometheus):
    recorder = Recorder(prometheus)
    assert {(q.panel, q.legend) for q in recorder.history} == set(EXPECTED), "a panel without an expectation"
    pods = [f"short-{number}" for number in range(3)]
    for name in pods:  # admitted through the webhook (reviews, latency), evicted SECONDS after the taint
        e2e.create_pod(namespace, name, node=victim, tolerations=[toleration(UNREACHABLE, SECONDS)])
    wait_for(lambda: all(e2e.pod_phase(namespace, name) == "Running" for name in pods), 180, "the pods Running")
    recorder.until(
        lambda: max(recorder.latest("Webhook reviews by outcome", "{{outcome}}", outcome="patched"), default=0) > 0,
        60,
        "Prometheus to see the webhook's reviews",
        "healthy",
    )

    e2e.provider.stop_node(victim)
    recorder.until(
        lambda: (
            all(e2e.evicted(namespace, name) for name in pods)
            and recorder.latest("Pending evictions", "scheduled, deadline not yet come") == [0.0]
            and max(recorder.latest("Evictions per minute", "pods deleted or evicted"), default=0) > 0
        ),
        20 + 60 + SECONDS + 60,
        "the victim's pods evicted, and Prometheus to see it",
        "down",
    )

    e2e.provider.start_node(victim)
    recorder.until(
        lambda: (
            e2e.ready(victim) == "True"
            and e2e.lifecycle_taints(victim) == []
            and recorder.latest("Tainted nodes", "{{effect}}", effect="NoExecute") == [0.0]
            and set(recorder.latest("Not-ready nodes by zone", "{{zone}}")) == {0.0}
        ),
        240,
        f"{victim} Ready and untainted again, and Prometheus to see it",
        "back",
    )

    failures = []
    history = recorder.history
    for query, samples in history.items():
        what, holds = EXPECTED[(query.panel, query.legend)]
        if not holds(samples):
            seen = [(s.phase, [(m, v) for m, v in s.series]) for s in samples[:: max(1, len(samples) // 8)]]
            failures.append(f"{query.panel} / {query.legend}: expected {what}; got {seen}")
    checked = sum(len(samples) for samples in history.values())
    print(
        f"\ndashboard: {len(history)} queries of {len({q.panel for q in history})} panels, "
        f"{checked} instant queries over the failure, "
        f"{sum(len(s.series) for samples in history.values() for s in samples)} series values seen"
    )
    assert not failures, "\n".join(failures)
