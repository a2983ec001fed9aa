"""kube.leader: the acquire/renew rule (client-go tryAcquireOrRenew), stepping down, release,
and the config checks - against an in-memory Lease store with the apiserver's optimistic concurrency
and an injected clock. The real apiserver is exercised in tests/integration/test_leader.py."""

from __future__ import annotations

import copy
import re
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

import pytest

from kube.leader import (
    LeaderElectionConfig,
    LeaderElector,
    LeaseConflict,
    default_identity,
    micro_time,
)

NAME, NAMESPACE = "taintkeeper-controller", "taintkeeper-system"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15.0, 10.0, 2.0
EPOCH = datetime(2030, 1, 1, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0  # monotonic seconds; the wall clock is EPOCH + the same offset

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return EPOCH + timedelta(seconds=self.now)

    def advance(self, seconds: float) -> None:
        self.now += seconds


class MemoryLeases:
    """Lease API in memory: resourceVersion bumps on every write, a stale one is a 409 (LeaseConflict)."""

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], dict] = {}
        self.version = 0
        self.failure: Exception | None = None  # raised by every call while set
        self.calls: list[str] = []
        self.after_get: Callable[[], object] | None = None  # runs once, right after the next get (a race)

    def get(self, name: str, namespace: str) -> dict | None:
        self.calls.append("get")
        if self.failure:
            raise self.failure
        lease = copy.deepcopy(self.leases.get((namespace, name)))
        if self.after_get:
            interleave, self.after_get = self.after_get, None
            interleave()
        return lease

    def create(self, body: dict) -> dict:
        self.calls.append("create")
        if self.failure:
            raise self.failure
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if key in self.leases:
            raise LeaseConflict("already exists")
        return self._store(key, body)

    def replace(self, body: dict) -> dict:
        self.calls.append("replace")
        if self.failure:
            raise self.failure
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if body["metadata"]["resourceVersion"] != self.leases[key]["metadata"]["resourceVersion"]:
            raise LeaseConflict("the object has been modified")
        return self._store(key, body)

    def put(self, **spec: object) -> dict:
        """Write the Lease directly, as another process would."""
        key = (NAMESPACE, NAME)
        existing = self.leases.get(key, {"metadata": {"name": NAME, "namespace": NAMESPACE}})
        return self._store(key, {**existing, "spec": {**(existing.get("spec") or {}), **spec}})

    @property
    def spec(self) -> dict:
        return self.leases[(NAMESPACE, NAME)]["spec"]

    def _store(self, key: tuple[str, str], body: dict) -> dict:
        self.version += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.leases[key] = stored
        return copy.deepcopy(stored)


@dataclass
class Replica:
    elector: LeaderElector
    events: list[str] = field(default_factory=list)


def replica(
    store: MemoryLeases,
    clock: FakeClock,
    identity: str = "me",
    jitter: float = 0.5,
    on_started: Callable[[], None] | None = None,
    on_stopped: Callable[[], None] | None = None,
    annotations: Callable[[], Mapping[str, str | None]] = lambda: {},
) -> Replica:
    config = LeaderElectionConfig(NAME, NAMESPACE, identity, LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD)
    events: list[str] = []
    elector = LeaderElector(
        config,
        store,
        on_started or (lambda: events.append("started")),
        on_stopped or (lambda: events.append("stopped")),
        monotonic=clock.monotonic,
        wall_clock=clock.wall,
        jitter=lambda: jitter,
        annotations=annotations,
    )
    return Replica(elector, events)


# --- the acquire/renew rule ------------------------------------------------------------------


@dataclass(frozen=True)
class RuleCase:
    holder: str
    renew_time: datetime
    # None: the attempt is our first sight of the Lease. A number: we saw it first, then this many
    # seconds passed (on our clock) without the Lease changing, then the attempt.
    unchanged_for: float | None
    acquired: bool


RULE_CASES = {
    "an expired lease held by another is taken over": RuleCase("other", EPOCH, LEASE_DURATION + 0.1, True),
    "a fresh lease held by another is not": RuleCase("other", EPOCH, LEASE_DURATION - 0.1, False),
    "a lease held by another is not taken at first sight": RuleCase("other", EPOCH, None, False),
    "an empty holder (released) is taken at once": RuleCase("", EPOCH, None, True),
    "our own lease is renewed": RuleCase("me", EPOCH, None, True),
    # Clock skew: the holder's renewTime says nothing to us; only our own observation counts.
    "another's renewTime far in the past does not make its lease expired": RuleCase(
        "other", datetime(1970, 1, 1, tzinfo=UTC), None, False
    ),
    "another's renewTime in the future does not keep its lease alive": RuleCase(
        "other", datetime(2100, 1, 1, tzinfo=UTC), LEASE_DURATION + 0.1, True
    ),
}


@pytest.mark.parametrize("case", RULE_CASES.values(), ids=RULE_CASES.keys())
def test_acquire_rule(case: RuleCase, store: MemoryLeases, clock: FakeClock) -> None:
    acquired_at = micro_time(EPOCH - timedelta(hours=1))
    store.put(
        holderIdentity=case.holder,
        leaseDurationSeconds=15,
        acquireTime=acquired_at,
        renewTime=micro_time(case.renew_time),
        leaseTransitions=4,
    )
    me = replica(store, clock).elector
    if case.unchanged_for is not None:
        assert me.try_acquire_or_renew() is False
        clock.advance(case.unchanged_for)
    version_read = store.leases[(NAMESPACE, NAME)]["metadata"]["resourceVersion"]

    assert me.try_acquire_or_renew() is case.acquired

    if not case.acquired:
        assert store.spec["holderIdentity"] == case.holder
        assert store.leases[(NAMESPACE, NAME)]["metadata"]["resourceVersion"] == version_read  # nothing written
        return
    ours_before = case.holder == "me"
    assert store.spec == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": acquired_at if ours_before else micro_time(clock.wall()),
        "renewTime": micro_time(clock.wall()),
        "leaseTransitions": 4 if ours_before else 5,
    }


def test_a_missing_lease_is_created_with_no_transitions(store: MemoryLeases, clock: FakeClock) -> None:
    me = replica(store, clock).elector
    assert me.try_acquire_or_renew() is True
    now = micro_time(clock.wall())
    assert store.spec == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": now,
        "renewTime": now,
        "leaseTransitions": 0,
    }
    assert me.leader_identity == "me"


def test_renewals_by_the_holder_restart_our_expiry_clock(store: MemoryLeases, clock: FakeClock) -> None:
    store.put(holderIdentity="other", renewTime=micro_time(EPOCH))
    me = replica(store, clock).elector
    assert me.try_acquire_or_renew() is False
    clock.advance(10)
    store.put(renewTime=micro_time(EPOCH + timedelta(seconds=10)))  # the holder renews
    assert me.try_acquire_or_renew() is False  # seen to change now
    clock.advance(LEASE_DURATION - 0.1)
    assert me.try_acquire_or_renew() is False  # 25 s after first sight, but only 14.9 s since the change
    clock.advance(0.2)
    assert me.try_acquire_or_renew() is True


def test_transitions_count_holder_changes(store: MemoryLeases, clock: FakeClock) -> None:
    a, b = replica(store, clock, "a").elector, replica(store, clock, "b").elector
    steps = [
        (a.try_acquire_or_renew, "a", 0),  # created
        (b.try_acquire_or_renew, "a", 0),  # held by a: b waits
        (a.release, "", 0),  # released: nobody holds it, no transition yet
        (b.try_acquire_or_renew, "b", 1),
        (b.try_acquire_or_renew, "b", 1),  # a renewal is no transition
        (b.release, "", 1),
        (a.try_acquire_or_renew, "a", 2),
    ]
    for step, holder, transitions in steps:
        step()
        assert (store.spec["holderIdentity"], store.spec["leaseTransitions"]) == (holder, transitions), step


def test_a_conflicting_write_loses_the_race(store: MemoryLeases, clock: FakeClock) -> None:
    store.put(holderIdentity="", renewTime=micro_time(EPOCH), leaseTransitions=0)
    a, b = replica(store, clock, "a").elector, replica(store, clock, "b").elector
    winner: list[bool] = []
    store.after_get = lambda: winner.append(a.try_acquire_or_renew())  # a writes between b's read and b's write

    assert b.try_acquire_or_renew() is False
    assert winner == [True]
    assert store.spec["holderIdentity"] == "a"
    assert store.calls.count("replace") == 2  # b did write, with the stale resourceVersion, and got a 409
    assert b.try_acquire_or_renew() is False  # and now sees a's fresh lease


def test_two_missing_lease_creations_have_one_winner(store: MemoryLeases, clock: FakeClock) -> None:
    a, b = replica(store, clock, "a").elector, replica(store, clock, "b").elector
    store.after_get = lambda: a.try_acquire_or_renew()  # both saw no Lease; a creates it first
    assert b.try_acquire_or_renew() is False
    assert store.spec["holderIdentity"] == "a"


def test_an_api_error_counts_as_not_acquired(store: MemoryLeases, clock: FakeClock) -> None:
    store.failure = ConnectionError("apiserver unreachable")
    assert replica(store, clock).elector.try_acquire_or_renew() is False


# --- leading, stepping down, campaigning again -----------------------------------------------


def test_the_first_successful_attempt_starts_leading(store: MemoryLeases, clock: FakeClock) -> None:
    me = replica(store, clock)
    assert me.elector.tick() == RETRY_PERIOD
    assert me.elector.is_leader
    assert me.events == ["started"]


def test_campaign_attempts_are_jittered_up_to_20_percent(store: MemoryLeases, clock: FakeClock) -> None:
    store.put(holderIdentity="other", renewTime=micro_time(EPOCH))
    assert replica(store, clock, jitter=0.0).elector.tick() == pytest.approx(RETRY_PERIOD)
    assert replica(store, clock, jitter=1.0).elector.tick() == pytest.approx(RETRY_PERIOD * 1.2)


def test_renewal_failing_for_the_renew_deadline_loses_leadership(store: MemoryLeases, clock: FakeClock) -> None:
    me = replica(store, clock)
    delay = me.elector.tick()
    led_from = clock.now
    store.failure = ConnectionError("apiserver unreachable")
    while me.elector.is_leader:
        clock.advance(delay)
        delay = me.elector.tick()
    assert clock.now - led_from == pytest.approx(RENEW_DEADLINE)
    assert me.events == ["started", "stopped"]
    assert store.calls.count("get") == 1 + 4  # renewals tried at +2, +4, +6, +8; at +10 it stops without trying

    # It campaigns again (unlike the Python client's elector, which returns): the Lease still
    # names it and is unchanged, so it is renewed at once.
    store.failure = None
    clock.advance(delay)
    me.elector.tick()
    assert me.elector.is_leader
    assert me.events == ["started", "stopped", "started"]


def test_leadership_ends_at_the_renew_deadline_not_at_the_next_retry(store: MemoryLeases, clock: FakeClock) -> None:
    me = replica(store, clock)
    delays = [me.elector.tick()]
    led_from = clock.now

    def slow_failing_get(name: str, namespace: str) -> dict | None:
        clock.advance(0.3)
        raise ConnectionError("apiserver unreachable")

    store.get = slow_failing_get  # type: ignore[method-assign]
    while me.elector.is_leader:
        clock.advance(delays[-1])
        delays.append(me.elector.tick())
    # Attempts at +2, +4.3, +6.6, +8.9 each fail 0.3 s later; the last wait is cut to the deadline.
    assert delays[:-1] == [2.0, 2.0, 2.0, 2.0, pytest.approx(0.8)]
    assert clock.now - led_from == pytest.approx(RENEW_DEADLINE)


def test_a_renewal_that_returns_after_the_deadline_is_not_written(store: MemoryLeases, clock: FakeClock) -> None:
    me = replica(store, clock)
    me.elector.tick()
    clock.advance(RETRY_PERIOD)
    store.after_get = lambda: clock.advance(RENEW_DEADLINE)  # a read that hangs past the deadline
    me.elector.tick()
    assert "replace" not in store.calls
    assert me.events == ["started", "stopped"]


def test_a_lease_taken_by_another_ends_leadership_at_once(store: MemoryLeases, clock: FakeClock) -> None:
    me = replica(store, clock)
    me.elector.tick()
    store.put(holderIdentity="intruder", renewTime=micro_time(clock.wall()))
    clock.advance(RETRY_PERIOD)
    me.elector.tick()
    assert me.events == ["started", "stopped"]
    assert me.elector.leader_identity == "intruder"
    assert store.spec["holderIdentity"] == "intruder"


def test_stop_while_leading_releases_the_lease_then_stops(store: MemoryLeases, clock: FakeClock) -> None:
    seen_when_stopped: list[dict] = []
    me = replica(store, clock, on_stopped=lambda: seen_when_stopped.append(copy.deepcopy(store.spec)))
    me.elector.tick()
    transitions = store.spec["leaseTransitions"]
    clock.advance(1)
    stop = threading.Event()
    stop.set()

    me.elector.run(stop)

    released = {
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "acquireTime": micro_time(clock.wall()),
        "renewTime": micro_time(clock.wall()),
        "leaseTransitions": transitions,
    }
    assert store.spec == released
    assert seen_when_stopped == [released]  # released first, then on_stopped_leading
    assert not me.elector.is_leader
    assert me.elector.leader_identity == ""


def test_release_leaves_a_lease_someone_else_wrote_alone(store: MemoryLeases, clock: FakeClock) -> None:
    me = replica(store, clock).elector
    me.try_acquire_or_renew()
    store.put(holderIdentity="other")
    assert me.release() is False
    assert store.spec["holderIdentity"] == "other"


# --- the holder's annotations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AnnotationCase:
    before: dict[str, str] | None  # the Lease's annotations before the write; None: no Lease yet
    holder: str  # the Lease's holder before the write
    published: dict[str, str | None]  # what the annotations callback returns
    after: dict[str, str] | None  # the Lease's annotations after the write; None: no annotations field


ANNOTATION_CASES = {
    "a created Lease carries them": AnnotationCase(None, "", {"a/b": "1"}, {"a/b": "1"}),
    "a renewal updates ours and keeps the others": AnnotationCase(
        {"a/b": "1", "kept": "x"}, "me", {"a/b": "2"}, {"a/b": "2", "kept": "x"}
    ),
    "a new holder's None withdraws what the last one published": AnnotationCase(
        {"a/b": "1", "kept": "x"}, "", {"a/b": None}, {"kept": "x"}
    ),
    "withdrawing the only one leaves no annotations field": AnnotationCase({"a/b": "1"}, "me", {"a/b": None}, None),
    "None on a Lease without it changes nothing": AnnotationCase(None, "", {"a/b": None}, None),
    "nothing published: the annotations are left alone": AnnotationCase({"kept": "x"}, "me", {}, {"kept": "x"}),
}


@pytest.mark.parametrize("case", ANNOTATION_CASES.values(), ids=ANNOTATION_CASES.keys())
def test_each_acquire_or_renewal_merges_the_published_annotations(
    case: AnnotationCase, store: MemoryLeases, clock: FakeClock
) -> None:
    if case.before is not None:
        store.put(holderIdentity=case.holder, renewTime=micro_time(EPOCH))
        if case.before:
            store.leases[(NAMESPACE, NAME)]["metadata"]["annotations"] = dict(case.before)
    me = replica(store, clock, annotations=lambda: case.published).elector

    assert me.try_acquire_or_renew() is True

    assert store.leases[(NAMESPACE, NAME)]["metadata"].get("annotations") == case.after
    assert store.spec["holderIdentity"] == "me"


def test_the_annotations_are_asked_for_each_write_and_only_then(store: MemoryLeases, clock: FakeClock) -> None:
    """No extra request: the annotations ride on the acquire and renewal writes; a release leaves them."""
    asked: list[int] = []

    def published() -> dict[str, str]:
        asked.append(len(asked))
        return {"pass": str(len(asked))}

    other = replica(store, clock, "other").elector
    other.try_acquire_or_renew()
    me = replica(store, clock, annotations=published).elector
    assert me.try_acquire_or_renew() is False  # held by another: nothing written, nothing asked
    assert asked == []
    clock.advance(LEASE_DURATION + 0.1)
    calls = len(store.calls)
    assert me.try_acquire_or_renew() is True  # taken over
    assert me.try_acquire_or_renew() is True  # renewed
    assert store.calls[calls:] == ["get", "replace", "get", "replace"]
    assert store.leases[(NAMESPACE, NAME)]["metadata"]["annotations"] == {"pass": "2"}
    assert me.release() is True
    assert store.spec["holderIdentity"] == ""
    assert store.leases[(NAMESPACE, NAME)]["metadata"]["annotations"] == {"pass": "2"}
    assert asked == [0, 1]


def test_stop_while_campaigning_writes_nothing(store: MemoryLeases, clock: FakeClock) -> None:
    store.put(holderIdentity="other", renewTime=micro_time(EPOCH))
    me = replica(store, clock)
    me.elector.tick()
    stop = threading.Event()
    stop.set()
    me.elector.run(stop)
    assert me.events == []
    assert store.spec["holderIdentity"] == "other"
    assert "replace" not in store.calls


def test_a_failing_on_started_leading_releases_the_lease_and_ends_run(store: MemoryLeases, clock: FakeClock) -> None:
    def broken() -> None:
        raise RuntimeError("cannot start")

    me = replica(store, clock, on_started=broken).elector
    with pytest.raises(RuntimeError, match="cannot start"):
        me.run(threading.Event())
    assert not me.is_leader
    assert store.spec["holderIdentity"] == ""


def test_transitions_are_logged(store: MemoryLeases, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="taintkeeper.leader")
    other = replica(store, clock, "other").elector
    me = replica(store, clock).elector
    other.tick()
    me.tick()
    other.release()
    me.tick()
    store.failure = ConnectionError("down")
    clock.advance(RENEW_DEADLINE)
    me.tick()
    messages = [record.getMessage() for record in caplog.records if record.name == "taintkeeper.leader"]
    assert any(message.startswith("new leader observed: other") for message in messages)
    assert any(message.startswith("released lease") for message in messages)
    assert any(message.startswith("became leader") for message in messages)
    assert any(message.startswith("lost leadership") for message in messages)


# --- config, identity, time format -----------------------------------------------------------


def test_the_defaults_are_client_gos() -> None:
    config = LeaderElectionConfig("name", "namespace", "me")
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15, 10, 2)


INVALID_CONFIGS = {
    "lease duration not above the renew deadline": ((10, 10, 2), "--leader-elect-lease-duration"),
    "renew deadline not above 1.2 x the retry period": ((15, 2.4, 2), "--leader-elect-renew-deadline"),
    "a zero retry period": ((15, 10, 0), "--leader-elect-retry-period"),
    "a negative lease duration": ((-1, 10, 2), "--leader-elect-lease-duration"),
}


@pytest.mark.parametrize(("timings", "flag"), INVALID_CONFIGS.values(), ids=INVALID_CONFIGS.keys())
def test_invalid_timings_are_rejected_naming_the_flag(timings: tuple[float, float, float], flag: str) -> None:
    with pytest.raises(ValueError, match=re.escape(flag)) as error:
        LeaderElectionConfig("name", "namespace", "me", *timings)
    assert "\n" not in str(error.value)


def test_just_valid_timings_are_accepted() -> None:
    LeaderElectionConfig("name", "namespace", "me", 3, 2, 1.6)


@pytest.mark.parametrize(
    "fields",
    [("", "ns", "me"), ("name", "", "me"), ("name", "ns", "")],
    ids=["no lease name", "no namespace", "no identity"],
)
def test_empty_names_are_rejected(fields: tuple[str, str, str]) -> None:
    with pytest.raises(ValueError):
        LeaderElectionConfig(*fields)


def test_the_lease_duration_is_written_in_whole_seconds_rounded_up() -> None:
    assert LeaderElectionConfig("n", "ns", "me", 3.2, 2, 0.5).lease_duration_seconds == 4


def test_default_identity_is_hostname_and_a_fresh_uuid() -> None:
    first, second = default_identity(), default_identity()
    assert re.fullmatch(re.escape(socket.gethostname()) + "_[0-9a-f]{32}", first)
    assert first != second


def test_micro_time_always_has_six_digits_and_z() -> None:
    assert micro_time(datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2030-01-02T03:04:05.000000Z"
    plus_two = timezone(timedelta(hours=2))
    assert micro_time(datetime(2030, 1, 2, 5, 4, 5, 7, tzinfo=plus_two)) == "2030-01-02T03:04:05.000007Z"
