"""webhook.bookkeeping: a review's log lines and metrics, batched off the request path once started."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from shared.jsonlog import JsonFormatter
from webhook.app import bookkeeping_of, create_app
from webhook.bookkeeping import Bookkeeping, log_at
from webhook.settings import WebhookSettings

from .test_app import metric_value, pod_review


def wait_for(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)  # polling interval of the condition
    return True


def test_not_started_everything_is_done_at_once():
    done = []
    Bookkeeping().submit(done.append, 1)
    assert done == [1]


def test_started_items_are_done_in_order_by_the_thread_soon_after():
    bookkeeping = Bookkeeping(interval=0.01)
    bookkeeping.start()
    done: list[int] = []
    threads: set[str] = set()

    def note(n: int) -> None:
        done.append(n)
        threads.add(threading.current_thread().name)

    for n in range(100):
        bookkeeping.submit(note, n)
    assert wait_for(lambda: len(done) == 100), done
    assert done == list(range(100))
    assert threads == {"webhook-bookkeeping"}
    bookkeeping.submit(note, 100)  # the thread waits for new items after a batch
    assert wait_for(lambda: len(done) == 101)


def test_a_failing_item_is_logged_and_the_rest_still_done(caplog):
    bookkeeping = Bookkeeping(interval=3600)  # drained by hand below
    bookkeeping.start()
    done = []
    bookkeeping.submit(lambda: 1 / 0)
    bookkeeping.submit(done.append, "after")
    bookkeeping.drain()
    assert done == ["after"]
    assert any("bookkeeping of a review failed" in r.getMessage() and r.exc_info for r in caplog.records)


def test_a_line_logged_later_keeps_the_time_level_and_fields_of_its_review(caplog):
    caplog.set_level(logging.INFO, logger="taintkeeper.webhook")
    logger = logging.getLogger("taintkeeper.webhook")
    created = time.time() - 0.25
    log_at(logger, created, logging.INFO, "added default tolerations %s", "a,b",
           extra={"uid": "u-1", "namespace": "team-a", "pod": "web-0"})
    log_at(logger, created, logging.DEBUG, "not logged at INFO")
    (record,) = [r for r in caplog.records if r.name == "taintkeeper.webhook"]
    assert record.created == created and record.msecs == int((created - int(created)) * 1000)
    entry = json.loads(JsonFormatter().format(record))
    assert (entry["severity"], entry["message"], entry["uid"], entry["namespace"], entry["pod"]) == (
        "info", "added default tolerations a,b", "u-1", "team-a", "web-0")


def test_a_started_app_logs_after_the_answer_and_its_metrics_are_exact_when_scraped(caplog):
    caplog.set_level(logging.INFO, logger="taintkeeper.webhook")
    app = create_app(WebhookSettings())
    bookkeeping = bookkeeping_of(app)
    bookkeeping.interval = 3600  # nothing is drained by the thread in this test
    bookkeeping.start()
    client = app.test_client()
    before = metric_value(client, "taintkeeper_webhook_admission_reviews_total", '{outcome="patched"}')
    requested = time.time()
    for uid in ("later-1", "later-2", "later-3"):
        assert client.post("/mutate", json=pod_review(uid=uid)).status_code == 200
    assert not [r for r in caplog.records if getattr(r, "uid", None) == "later-1"]  # queued, not yet logged
    # /metrics drains the queue first: the counts (added up per batch) are there, and so are the lines.
    assert metric_value(client, "taintkeeper_webhook_admission_reviews_total", '{outcome="patched"}') == before + 3
    assert [r.uid for r in caplog.records if getattr(r, "uid", "").startswith("later-")] == [
        "later-1", "later-2", "later-3"]
    (record,) = [r for r in caplog.records if getattr(r, "uid", None) == "later-1"]
    assert requested <= record.created <= time.time()
    assert (record.namespace, record.pod, record.levelno) == ("team-a", "web-0", logging.INFO)


def test_a_record_made_by_log_at_is_the_one_logging_makes():
    logger = logging.getLogger("taintkeeper.webhook.test-record")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        created = time.time() - 1.5
        log_at(logger, created, logging.WARNING, "refused %s", "x", extra={"uid": "u-1", "remote": "10.0.0.1"})
        made = logger.makeRecord(logger.name, logging.WARNING, "(unknown file)", 0, "refused %s", ("x",), None,
                                 extra={"uid": "u-1", "remote": "10.0.0.1"})
        with pytest.raises(KeyError):
            log_at(logger, created, logging.INFO, "m", extra={"levelname": "oops"})
    finally:
        logger.removeHandler(handler)
    (record,) = records
    formatted = {"message", "asctime"}  # set on the record when a handler formats it
    ours = {name: value for name, value in vars(record).items() if name not in formatted}
    theirs = {name: value for name, value in vars(made).items() if name not in formatted}
    assert list(ours) == list(theirs)  # the same attributes, in the same order (extras last)
    differing = {name for name in ours if ours[name] != theirs[name]}
    assert differing <= {"created", "msecs", "relativeCreated"}
    assert record.created == created and record.msecs == int((created - int(created)) * 1000)
    assert abs(record.relativeCreated - (made.relativeCreated - (made.created - created) * 1000)) < 0.01
    assert record.getMessage() == "refused x"


def test_a_batch_of_observations_fills_a_histogram_as_observing_each_does():
    from prometheus_client import CollectorRegistry, Histogram

    values = [0.0001, 0.0005, 0.0007, 0.003, 0.003, 0.2, 5.0, 0.0, 1.0]
    samples = []
    for batched in (False, True):
        histogram = Histogram("t_seconds", "t", buckets=(0.0005, 0.001, 0.0025, 0.005, 0.25, 1.0),
                              registry=CollectorRegistry())
        bookkeeping = Bookkeeping(interval=3600)
        bookkeeping.start()
        for value in values:
            if batched:
                bookkeeping.submit(bookkeeping.observe, histogram, value)
            else:
                histogram.observe(value)
        bookkeeping.drain()
        samples.append({(s.name, s.labels.get("le")): round(s.value, 9) for s in histogram.collect()[0].samples
                        if not s.name.endswith("_created")})
    assert samples[0] == samples[1]
    assert samples[1][("t_seconds_count", None)] == len(values)
