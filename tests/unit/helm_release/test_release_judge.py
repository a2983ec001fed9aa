"""tests/helm_release/judge.py on hand-made audit records: each judgment the release suite makes must be
able to fail, and must not be fooled by someone else's writes."""

from __future__ import annotations

from typing import Any

from bench.soak.audit import AuditRecord
from tests.helm_release import judge

T0 = 1_700_000_000.0
OLD, NEW = "0.1.0", "0.1.0+next"
DEFAULTS = [
    {"key": judge.NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": judge.UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]


def record(
    at: float,
    verb: str,
    resource: str,
    name: str,
    *,
    agent: str = f"taintkeeper-controller/{OLD} (taintkeeper-controller-a)",
    username: str = "someone",
    namespace: str = "load",
    code: int = 200,
    subresource: str = "",
    response: dict[str, Any] | None = None,
) -> AuditRecord:
    return AuditRecord(
        verb=verb,
        username=username,
        user_agent=agent,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
        api_group="",
        code=code,
        message="",
        received=T0 + at - 0.01,
        completed=T0 + at,
        request_object=None,
        response_object=response,
    )


def pod(name: str, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"tolerations": tolerations or []}}


def lease(at: float, holder: str, version: str) -> AuditRecord:
    return record(
        at,
        "update",
        "leases",
        "taintkeeper-controller",
        namespace="taintkeeper-system",
        agent=f"taintkeeper-controller/{version} ({holder or 'x'})",
        response={"spec": {"holderIdentity": holder}},
    )


def test_the_user_agent_names_component_version_and_pod():
    assert judge.agent(record(0, "patch", "pods", "p")) == judge.Agent(
        "taintkeeper-controller", OLD, "taintkeeper-controller-a"
    )
    assert judge.agent(record(0, "patch", "pods", "p", agent="kubectl/v1.37.2 (linux/amd64) kubernetes/abc")) is None


def test_admission_tells_the_webhooks_work_from_the_backfills_and_ignores_other_writers():
    records = [
        record(1, "create", "pods", "mutated", code=201, agent="load/1", response=pod("mutated", DEFAULTS)),
        record(2, "create", "pods", "bare", code=201, agent="load/1", response=pod("bare")),
        record(3, "create", "pods", "patched-by-kubectl", code=201, agent="load/1", response=pod("patched-by-kubectl")),
        record(4, "patch", "pods", "patched-by-kubectl", agent="kubectl/v1.37.2", response=pod("x", DEFAULTS)),
        record(5, "patch", "pods", "bare", response=pod("bare", DEFAULTS)),
        record(6, "create", "pods", "refused", code=500, agent="load/1"),
    ]
    admitted = judge.admissions(records, "load")
    assert sorted(admitted) == ["bare", "mutated", "patched-by-kubectl"]
    assert admitted["mutated"].by_webhook and admitted["mutated"].backfilled is None
    assert not admitted["bare"].by_webhook and admitted["bare"].backfilled == T0 + 5
    assert admitted["patched-by-kubectl"].backfilled is None, "only the controller's write is a backfill"


def test_a_pod_created_while_no_one_leads_is_given_its_bound_from_the_new_leaders_start():
    holdings = judge.lease_holdings([lease(10, "a", OLD), lease(20, "", OLD), lease(24, "b", NEW)])
    stretches = judge.leaderless(holdings, T0, T0 + 100)
    assert stretches == [(T0 + 20, T0 + 24)]
    assert judge.backfill_limit(T0 + 22, stretches, 10) == T0 + 34
    assert judge.backfill_limit(T0 + 30, stretches, 10) == T0 + 40


def test_an_old_builds_write_after_the_new_build_took_the_lease_is_late():
    records = [
        lease(10, "a", OLD),
        record(12, "patch", "nodes", "node-3"),
        lease(20, "", OLD),
        lease(21, "b", NEW),
        record(25, "delete", "pods", "countdown", agent=f"taintkeeper-controller/{NEW} (b)"),
        record(26, "create", "events", "e1"),  # a queued event of the old leader, posted too late
        record(27, "patch", "pods", "x", agent=f"taintkeeper-controller/{OLD} (a)", code=409),  # refused: no write
    ]
    took_over = judge.takeover(judge.lease_holdings(records), NEW, T0 + 15)
    assert took_over == T0 + 21
    writes = judge.writes_around(records, T0, T0 + 100, took_over, OLD)
    assert [(r.resource, r.name) for r in writes.late] == [("events", "e1")]
    assert writes.before == {OLD: 3} and writes.after == {NEW: 2, OLD: 1}


def test_no_takeover_by_a_build_that_never_held_the_lease():
    holdings = judge.lease_holdings([lease(10, "a", OLD), lease(20, "", OLD), lease(21, "c", OLD)])
    assert judge.takeover(holdings, NEW, T0) is None


def test_every_successful_removal_of_a_pod_but_its_kubelets_last_counts_as_a_deletion():
    records = [
        record(1, "delete", "pods", "countdown"),
        record(2, "create", "pods", "countdown", subresource="eviction", code=201),
        record(3, "delete", "pods", "countdown", code=404),
        record(4, "delete", "pods", "other"),
        record(5, "delete", "pods", "countdown", agent="kubelet/v1.37.2", username="system:node:node-3"),
    ]
    assert [r.completed for r in judge.deletions(records, "load", "countdown")] == [T0 + 1, T0 + 2]
