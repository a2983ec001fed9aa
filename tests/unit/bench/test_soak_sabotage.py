"""The judge must fail every sabotage: a recorded soak (tests/unit/bench/recordings/, cut by
bench/soak/recording.py from a real run on the complete local cluster) passes as it was recorded, and
fails, with the invariant named, once a sabotage is written into its audit log two minutes in.
"""

from __future__ import annotations

import bisect
import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from bench.soak import recording
from bench.soak.audit import FAILED_OPEN, parse_lines, parse_timestamp
from bench.soak.check import CHECKED_RESOURCES, judge
from bench.soak.config import (
    POLICY_REGISTRATION,
    SOAK_DRIVER_USER,
    TAINTKEEPER_CONTROLLER_USER,
    TAINTKEEPER_LEASE,
    WEBHOOK_REGISTRATION,
    replica_of_agent,
    replica_of_holder,
    soak_config,
)
from bench.soak.faults import read_faults
from bench.soak.report import SoakReport, render
from bench.soak.tolerations import LIFECYCLE_KEYS
from kube.acting_term import stamped_user_agent

Event = dict[str, Any]
RECORDINGS = Path(__file__).parent / "recordings"
# Each recording: its directory, and whether the run had the admission policy instead of the webhook.
RUNS = {"webhook": "soak-webhook-26", "policy": "soak-policy-26"}
SABOTAGE_AFTER = 120.0  # seconds after the run's start
SYSTEM = "taintkeeper-system"
WORKLOAD = "chaos-workload"
REPLICASET_CONTROLLER = "system:serviceaccount:kube-system:replicaset-controller"
ANOTHER_ACCOUNT = "system:serviceaccount:taintkeeper-system:default"


@cache
def _recorded(mode: str) -> tuple[tuple[Event, ...], float]:
    directory = RECORDINGS / RUNS[mode]
    return tuple(recording.read_events(directory)), recording.since(directory)


def judged(mode: str, events: list[Event]) -> SoakReport:
    directory = RECORDINGS / RUNS[mode]
    log = parse_lines((json.dumps(event) for event in events), CHECKED_RESOURCES)
    config = soak_config(policy=mode == "policy", since=recording.since(directory))
    return judge(log.records, read_faults(directory / "faults.jsonl"), config).report


def _received(event: Event) -> float:
    return parse_timestamp(event["requestReceivedTimestamp"])


def _stamp(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _event(verb: str, user: str, resource: str, namespace: str, name: str, at: float, **extra: Any) -> Event:
    ref = {"resource": resource, "namespace": namespace, "name": name, "apiVersion": "v1"}
    if resource.startswith("mutating"):
        ref.update(apiGroup="admissionregistration.k8s.io", namespace="")
    return {
        "auditID": f"sabotage-{verb}-{resource}-{name}-{at}",
        "stage": "ResponseComplete",
        "verb": verb,
        "user": {"username": user},
        "userAgent": "sabotage",
        "objectRef": ref,
        "responseStatus": {"code": 200},
        "requestReceivedTimestamp": _stamp(at),
        "stageTimestamp": _stamp(at + 0.01),
        **extra,
    }


def _latest_pods(events: list[Event], namespace: str, at: float) -> dict[str, Event]:
    """Each pod of the namespace as the last response before `at` showed it, if not yet removed then."""
    pods: dict[str, Event] = {}
    for event in events:
        if _received(event) >= at or event["objectRef"].get("resource") != "pods":
            continue
        obj = event.get("responseObject") or {}
        name = str(event["objectRef"].get("name") or (obj.get("metadata") or {}).get("name") or "")
        if event["verb"] == "delete" and event["objectRef"].get("namespace") == namespace:
            pods.pop(name, None)
        elif obj.get("kind") == "Pod" and (obj.get("metadata") or {}).get("namespace") == namespace:
            pods[name] = obj
    return {name: pod for name, pod in pods.items() if not pod["metadata"].get("deletionTimestamp")}


def _controller_pods(events: list[Event]) -> set[str]:
    return {
        event["objectRef"]["name"]
        for event in events
        if event["objectRef"].get("resource") == "pods"
        and event["objectRef"].get("namespace") == SYSTEM
        and (event["objectRef"].get("name") or "").startswith("taintkeeper-controller-")
    }


# --- the sabotages: (events, when) -> events ---------------------------------------------------


def controller_scaled_to_zero(events: list[Event], at: float) -> list[Event]:
    """The controller's Deployment scaled to 0: its pods deleted, and nothing from its ServiceAccount after."""
    kept = [e for e in events if not (e["user"]["username"] == TAINTKEEPER_CONTROLLER_USER and _received(e) >= at)]
    return kept + [
        _event("delete", REPLICASET_CONTROLLER, "pods", SYSTEM, name, at) for name in _controller_pods(events)
    ]


def replica_as_another_account(events: list[Event], at: float) -> list[Event]:
    """The controller's pod deletions and evictions sent under another ServiceAccount."""
    changed = []
    for event in events:
        ref = event["objectRef"]
        removal = ref.get("resource") == "pods" and (event["verb"] == "delete" or ref.get("subresource") == "eviction")
        if removal and event["user"]["username"] == TAINTKEEPER_CONTROLLER_USER and _received(event) >= at:
            event = {**event, "user": {"username": ANOTHER_ACCOUNT}}
        changed.append(event)
    return changed


def pods_removed_by_collection(events: list[Event], at: float) -> list[Event]:
    """The controller removing the workload's pods with one deletecollection."""
    removed = []
    for pod in _latest_pods(events, WORKLOAD, at).values():
        pod = copy.deepcopy(pod)
        pod["metadata"]["deletionTimestamp"] = _stamp(at + 30)
        removed.append(pod)
    collection = _event(
        "deletecollection",
        TAINTKEEPER_CONTROLLER_USER,
        "pods",
        WORKLOAD,
        "",
        at,
        requestObject={"kind": "DeleteOptions", "apiVersion": "v1"},
        responseObject={"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": removed},
    )
    assert removed, "no workload pod to remove at the sabotage's time"
    return [*events, collection]


def registration_deleted(events: list[Event], at: float, registration: tuple[tuple[str, str], ...]) -> list[Event]:
    resource, name = registration[-1]
    return [*events, _event("delete", SOAK_DRIVER_USER, resource, "", name, at)]


def webhook_failing_open_and_stopped(events: list[Event], at: float) -> list[Event]:
    """The webhook's pods deleted (its Deployment scaled to 0) and every call failing open from then on:
    each pod created as it was asked for, without the webhook's tolerations."""
    webhook_pods = {
        event["objectRef"]["name"]
        for event in events
        if event["objectRef"].get("namespace") == SYSTEM
        and (event["objectRef"].get("name") or "").startswith("taintkeeper-webhook-")
    }
    changed = []
    for event in events:
        ref = event["objectRef"]
        if (ref.get("resource"), ref.get("subresource", ""), event["verb"]) == ("pods", "", "create") and _received(
            event
        ) >= at:
            event = copy.deepcopy(event)
            asked = ((event.get("requestObject") or {}).get("spec") or {}).get("tolerations") or []
            spec = (event.get("responseObject") or {}).get("spec")
            if spec is not None:
                spec["tolerations"] = [
                    t for t in spec.get("tolerations") or [] if t in asked or t.get("key") not in LIFECYCLE_KEYS
                ]
            event["annotations"] = {f"{FAILED_OPEN}round_0_index_0": "default-tolerations.taintkeeper.io"}
        changed.append(event)
    return changed + [_event("delete", REPLICASET_CONTROLLER, "pods", SYSTEM, name, at) for name in webhook_pods]


def _is_controller_lease_write(event: Event) -> bool:
    ref = event["objectRef"]
    return (
        (ref.get("resource"), ref.get("namespace"), ref.get("name")) == ("leases", *TAINTKEEPER_LEASE)
        and event["verb"] in ("create", "update")
        and event["responseStatus"]["code"] < 300
        and bool(event.get("responseObject"))
    )


def _holder(event: Event) -> str:
    return str(event["responseObject"]["spec"].get("holderIdentity") or "")


def with_terms(events: list[Event], won_back_at: float | None = None) -> tuple[list[Event], set[str]]:
    """The recording as today's controller writes it (kube/acting_term.py): each Lease write carries its term's
    acquireTime (that of the write that began the holder's run), and each of the controller's other requests
    names, in its user agent, the term its replica held when it was received. With `won_back_at`, the leader
    wins the Lease back at its first renewal from then (a new acquireTime, as after another holder) while its
    writes go on naming the term before (the product's term checks switched off). Returns the events and the
    auditIDs of those writes."""
    leases = sorted(
        (e for e in events if _is_controller_lease_write(e)), key=lambda e: parse_timestamp(e["stageTimestamp"])
    )
    terms: list[tuple[float, str, str]] = []  # (completed, holder, acquireTime) of each Lease write
    holder, acquired = "", ""
    won_back: tuple[str, str] | None = None  # (the term before, the term won back)
    for lease in leases:
        received = _received(lease)
        if _holder(lease) != holder:
            holder, acquired = _holder(lease), _stamp(received)
        elif won_back_at is not None and won_back is None and holder and received >= won_back_at:
            won_back = (acquired, _stamp(received))
            acquired = won_back[1]
        lease["responseObject"]["spec"]["acquireTime"] = acquired
        terms.append((parse_timestamp(lease["stageTimestamp"]), holder, acquired))
    completions = [completed for completed, _, _ in terms]
    stale: set[str] = set()
    for event in events:
        agent = event.get("userAgent") or ""
        if event["user"]["username"] != TAINTKEEPER_CONTROLLER_USER or _is_controller_lease_write(event):
            continue
        index = bisect.bisect_left(completions, _received(event)) - 1
        if index < 0 or replica_of_holder(terms[index][1]) != replica_of_agent(agent):
            continue
        term = terms[index][2]
        if won_back is not None and term == won_back[1] and event["verb"] not in ("get", "list", "watch"):
            term = won_back[0]
            stale.add(event["auditID"])
        event["userAgent"] = stamped_user_agent(agent, term)
    return events, stale


def written_for_an_ended_term(events: list[Event], at: float) -> list[Event]:
    """The leader wins its Lease back at `at` (a new term) while its writes go on naming the term it held
    before: what a pass that hung across the hand-over writes when the term checks are dropped."""
    changed, stale = with_terms(events, won_back_at=at)
    assert stale, "no write by the leader after the sabotage's time"
    return changed


Sabotage = Callable[[list[Event], float], list[Event]]
# (what was done, the recordings it is written into, the sabotage, the invariant that must name it)
SABOTAGES: list[tuple[str, tuple[str, ...], Sabotage, str]] = [
    ("the controller scaled to 0", ("webhook", "policy"), controller_scaled_to_zero, "I10"),
    ("a replica deleting pods under another ServiceAccount", ("webhook", "policy"), replica_as_another_account, "I4"),
    ("the workload's pods removed with one deletecollection", ("webhook", "policy"), pods_removed_by_collection, "I1"),
    (
        "the webhook's configuration deleted",
        ("webhook",),
        lambda events, at: registration_deleted(events, at, WEBHOOK_REGISTRATION),
        "I6",
    ),
    ("the webhook failing open and stopped", ("webhook",), webhook_failing_open_and_stopped, "I6"),
    (
        "the leader writing for the term it held before it won the Lease back",
        ("webhook", "policy"),
        written_for_an_ended_term,
        "I4",
    ),
    (
        "the admission policy's binding deleted",
        ("policy",),
        lambda events, at: registration_deleted(events, at, POLICY_REGISTRATION),
        "I6",
    ),
]
CASES = [
    pytest.param(mode, sabotage, invariant, id=f"{what} ({mode})")
    for what, modes, sabotage, invariant in SABOTAGES
    for mode in modes
    if mode in RUNS
]


@pytest.mark.parametrize("mode", sorted(RUNS))
def test_the_recorded_run_passes_as_it_was_recorded(mode: str):
    events, _ = _recorded(mode)
    report = judged(mode, list(events))
    assert report.passed, render(report)
    assert report.evictions_checked > 50


@pytest.mark.parametrize("mode", sorted(RUNS))
def test_the_recorded_run_with_each_write_naming_its_term_passes(mode: str):
    events, _ = _recorded(mode)
    stamped, stale = with_terms(copy.deepcopy(list(events)))
    assert stale == set()
    assert any("; term " in (event.get("userAgent") or "") for event in stamped)
    report = judged(mode, stamped)
    assert report.passed, render(report)


@pytest.mark.parametrize(("mode", "sabotage", "invariant"), CASES)
def test_each_sabotage_fails_the_run_with_its_invariant_named(mode: str, sabotage: Sabotage, invariant: str):
    events, since = _recorded(mode)
    report = judged(mode, sabotage(copy.deepcopy(list(events)), since + SABOTAGE_AFTER))
    assert not report.passed
    assert invariant in {violation.invariant for violation in report.violations}, render(report)
