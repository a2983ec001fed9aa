"""bench/admission_latency.py in short, on the deployed cluster: each of its configurations does what it
says through kube-apiserver (no mutation; the built-in plugin after a restart with it on; taintkeeper's
webhook and the echo webhook behind their Services; taintkeeper's admission policy and a constant-patch
one, where the server serves them), so its latency table compares what it claims to."""

from __future__ import annotations

import pytest

from bench.admission_latency import (
    ECHO,
    WEBHOOK,
    check_mutations,
    install,
    measure,
    policy_served,
    render,
    uninstall,
)
from bench.soak.cluster import LocalCluster
from tests.e2e.cluster import E2ECluster
from tests.e2e.providers import LocalProvider


def test_each_admission_configuration_mutates_as_it_says_and_is_timed(e2e: E2ECluster) -> None:
    provider = e2e.provider
    if not isinstance(provider, LocalProvider):
        pytest.skip("restarts kube-apiserver with the built-in plugin on: the local cluster only")
    install(e2e.api_client, provider.directory)
    policy = policy_served(e2e.api_client)
    try:
        measured = measure(LocalCluster(provider.directory), [20.0], 2.0, 1, policy)
    finally:
        uninstall(e2e.api_client)
    assert check_mutations(measured) == []
    for name in "abcdef" if policy else "abcd":
        outcome = measured.outcomes[(20.0, name)]
        assert (len(outcome.latencies), outcome.failures) == (40, {}), name
    assert {(name, len(memory)) for name, memory in measured.memory.items()} == {(WEBHOOK, 2), (ECHO, 2)}
    assert measured.admitted == {WEBHOOK: 40, ECHO: 40} and all(cpu > 0 for cpu in measured.cpu.values())
    table = render(measured, [20.0], 2.0, 1)
    assert "| 20/s | c. taintkeeper webhook (Service) | 40 |" in table
    assert all(measured.apiserver_cpu[name] > 0 for name in measured.created)
    if policy:
        assert "| 20/s | e. taintkeeper admission policy (in process) | 40 |" in table
        assert "| 20/s | f. constant-patch admission policy (in process) | 40 |" in table
