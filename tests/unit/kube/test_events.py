"""kube.events: which refusals of an event upstream's recorder expects (client-go record/event.go: V(5), not an
error), and the recorder's own thread posting an event only while the write fence is open."""

from __future__ import annotations

import json
import logging
import threading
from typing import NamedTuple

import pytest
from kubernetes import client

from kube.acting_term import acting_for, acting_term
from kube.events import FENCED, QUEUE_FULL, EventRecorder, expected_rejection
from kube.fence import WriteFence
from tests.support.responses import http_response
from tests.unit.kube.test_leader import RENEW_DEADLINE, FakeClock


def api_error(status: int, body: object) -> client.ApiException:
    error = client.ApiException(status=status, reason="x")
    error.body = body if isinstance(body, str) or body is None else json.dumps(body)
    return error


TERMINATING = {
    "kind": "Status",
    "reason": "Forbidden",
    "code": 403,
    "details": {"kind": "events", "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]},
}


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (api_error(403, TERMINATING), True),  # the namespace of the pod is being deleted
        (api_error(409, {"reason": "AlreadyExists", "code": 409}), True),
        (api_error(403, {"reason": "Forbidden", "code": 403, "details": {"kind": "events"}}), False),  # RBAC
        (api_error(403, "not json"), False),
        (api_error(403, None), False),
        (api_error(422, {"details": {"causes": [{"reason": "FieldValueInvalid"}]}}), False),
        (api_error(500, {"details": {"causes": "not a list"}}), False),
        (TimeoutError("read timed out"), False),
    ],
)
def test_only_the_refusals_upstream_expects_are_quiet(error: BaseException, expected: bool):
    assert expected_rejection(error) is expected


# --- the recorder posts only while the write fence is open -----------------------------------------------


class PodRef(NamedTuple):
    namespace: str
    name: str
    uid: str


class Recording:
    """The recorder with a recording stand-in for CoreV1Api, its fence on a fake clock, and its drops."""

    def __init__(self, fence: WriteFence | None = None, max_queued: int = 10_000) -> None:
        self.clock = FakeClock()
        self.fence = fence or WriteFence(RENEW_DEADLINE, monotonic=self.clock.monotonic)
        self.dropped: list[str] = []
        self.recorder = EventRecorder(
            None,  # type: ignore[arg-type]
            "taint-eviction-controller",
            self.fence,
            on_dropped=self.dropped.append,
            max_queued=max_queued,
        )
        self.posted: list[str] = []
        self.posted_as: list[str | None] = []  # the term each was posted for (its User-Agent names it)
        self.recorder._core = self  # type: ignore[assignment]

    def create_namespaced_event(self, namespace: str, body: dict, **_: object) -> object:
        self.posted.append(body["involvedObject"]["name"])
        self.posted_as.append(acting_term())
        return http_response(b"{}")

    def queue(self, *names: str) -> None:
        for name in names:
            self.recorder.pod_event(
                PodRef("default", name, f"uid-{name}"),
                "TaintManagerEviction",
                f"Marking for deletion Pod default/{name}",
            )

    def post_queued(self) -> None:
        drain = threading.Event()
        drain.set()  # `run` posts what is queued, then returns
        self.recorder.run(drain)


def test_events_are_dropped_while_the_fence_is_closed_with_one_warning_per_run(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="taintkeeper.events")
    r = Recording()
    r.fence.renewed(r.clock.now)
    r.queue("a")
    r.post_queued()
    r.queue("b", "c", "d")  # queued while leading ...
    r.clock.advance(RENEW_DEADLINE)  # ... posted once the last renewal is as old as the renew deadline
    r.post_queued()
    r.fence.renewed(r.clock.now)
    r.queue("e")
    r.post_queued()
    r.fence.close()  # stepped down
    r.queue("f")
    r.post_queued()

    assert r.posted == ["a", "e"]
    assert r.dropped == [FENCED] * 4
    assert [(rec.levelname, rec.getMessage()) for rec in caplog.records] == [
        (
            "WARNING",
            "write fence closed: not posting events until this replica leads again; dropped "
            "TaintManagerEviction (Marking for deletion Pod default/b) and any that follow",
        ),
        ("INFO", "posting events again; 3 dropped while the write fence was closed"),
        (
            "WARNING",
            "write fence closed: not posting events until this replica leads again; dropped "
            "TaintManagerEviction (Marking for deletion Pod default/f) and any that follow",
        ),
    ]


def test_an_event_goes_out_as_its_terms_and_not_once_that_term_has_ended():
    r = Recording()
    r.fence.renewed(r.clock.now, term="T1")
    with acting_for("T1"):
        r.queue("a", "b")
    r.post_queued()  # both posted within T1
    with acting_for("T1"):
        r.queue("c")  # queued in T1 ...
    r.fence.close()
    r.fence.renewed(r.clock.now, term="T2")  # ... the Lease lost and won back before it is posted
    with acting_for("T2"):
        r.queue("d")
    r.post_queued()

    assert list(zip(r.posted, r.posted_as, strict=True)) == [("a", "T1"), ("b", "T1"), ("d", "T2")]
    assert r.dropped == [FENCED]


def test_without_leader_election_every_event_is_posted():
    r = Recording(WriteFence.without_lease())
    r.queue("a", "b")
    r.post_queued()
    assert (r.posted, r.dropped) == (["a", "b"], [])


def test_an_event_that_finds_the_queue_full_is_counted_as_dropped():
    r = Recording(WriteFence.without_lease(), max_queued=1)
    r.queue("a", "b")
    r.post_queued()
    assert (r.posted, r.dropped) == (["a"], [QUEUE_FULL])
