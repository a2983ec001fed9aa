"""webhook.bookkeeping: a review's log lines and metrics, batched off the request path once started; with the
fast paths (webhook/fast_paths.py) on and off, the same lines and values."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from hack.wait import wait_for as _wait_for
from plumbing.log_formats import JsonFormatter, PlainFormatter
from plumbing.log_lines import LineHandler, held_lines
from webhook.app import bookkeeping_of, create_app
from webhook.bookkeeping import Bookkeeping
from webhook.fast_paths import FastPaths
from webhook.settings import WebhookSettings

from .test_app import METRICS_OPEN, metric_value, pod_review

wait_for = functools.partial(_wait_for, interval=0.01)


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
    wait_for(lambda: len(done) == 100, 5, "the 100 items done")
    assert done == list(range(100))
    assert threads == {"webhook-bookkeeping"}
    bookkeeping.submit(note, 100)  # the thread waits for new items after a batch
    wait_for(lambda: len(done) == 101, 5, "the 101st item done")


def test_a_failing_item_is_logged_and_the_rest_still_done(caplog):
    bookkeeping = Bookkeeping(interval=3600)  # drained by hand below
    bookkeeping.start()
    done = []
    bookkeeping.submit(lambda: 1 / 0)
    bookkeeping.submit(done.append, "after")
    bookkeeping.drain()
    assert done == ["after"]
    assert any("bookkeeping of a review failed" in r.getMessage() and r.exc_info for r in caplog.records)


def test_a_line_logged_later_keeps_the_time_level_and_fields_of_its_review(caplog, fast_paths):
    caplog.set_level(logging.INFO, logger="taintkeeper.webhook")
    logger = logging.getLogger("taintkeeper.webhook")
    log_at = Bookkeeping(fast_paths=FastPaths(fast_paths)).log_at
    created = time.time() - 0.25
    log_at(
        logger,
        created,
        logging.INFO,
        "added default tolerations %s",
        "a,b",
        extra={"uid": "u-1", "namespace": "team-a", "pod": "web-0"},
    )
    log_at(logger, created, logging.DEBUG, "not logged at INFO")
    (record,) = [r for r in caplog.records if r.name == "taintkeeper.webhook"]
    assert record.created == created and record.msecs == int((created - int(created)) * 1000)
    entry = json.loads(JsonFormatter().format(record))
    assert (entry["severity"], entry["message"], entry["uid"], entry["namespace"], entry["pod"]) == (
        "info",
        "added default tolerations a,b",
        "u-1",
        "team-a",
        "web-0",
    )


def test_a_started_app_logs_after_the_answer_and_its_metrics_are_exact_when_scraped(caplog, fast_paths):
    caplog.set_level(logging.INFO, logger="taintkeeper.webhook")
    app = create_app(WebhookSettings(fast_paths=fast_paths, auth=METRICS_OPEN))
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
        "later-1",
        "later-2",
        "later-3",
    ]
    (record,) = [r for r in caplog.records if getattr(r, "uid", None) == "later-1"]
    assert requested <= record.created <= time.time()
    assert (record.namespace, record.pod, record.levelno) == ("team-a", "web-0", logging.INFO)


def test_a_record_made_by_log_at_is_the_one_logging_makes(fast_paths):
    log_at = Bookkeeping(fast_paths=FastPaths(fast_paths)).log_at
    logger = logging.getLogger("taintkeeper.webhook.test-record")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        created = time.time() - 1.5
        log_at(logger, created, logging.WARNING, "refused %s", "x", extra={"uid": "u-1", "remote": "10.0.0.1"})
        made = logger.makeRecord(
            logger.name,
            logging.WARNING,
            "(unknown file)",
            0,
            "refused %s",
            ("x",),
            None,
            extra={"uid": "u-1", "remote": "10.0.0.1"},
        )
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


def test_a_batch_of_observations_fills_a_histogram_as_observing_each_does(fast_paths):
    from prometheus_client import CollectorRegistry, Histogram

    values = [0.0001, 0.0005, 0.0007, 0.003, 0.003, 0.2, 5.0, 0.0, 1.0]
    samples = []
    for batched in (False, True):
        histogram = Histogram(
            "t_seconds", "t", buckets=(0.0005, 0.001, 0.0025, 0.005, 0.25, 1.0), registry=CollectorRegistry()
        )
        bookkeeping = Bookkeeping(interval=3600, fast_paths=FastPaths(fast_paths))
        bookkeeping.start()
        for value in values:
            if batched:
                bookkeeping.submit(bookkeeping.observe, histogram, value)
            else:
                histogram.observe(value)
        bookkeeping.drain()
        samples.append(
            {
                (s.name, s.labels.get("le")): round(s.value, 9)
                for s in histogram.collect()[0].samples
                if not s.name.endswith("_created")
            }
        )
    assert samples[0] == samples[1]
    assert samples[1][("t_seconds_count", None)] == len(values)


# -- a held line made without its record ---------------------------------------------------------------------

FORMATS = {"plain": PlainFormatter, "json": JsonFormatter}
NOW = 1_750_000_000.0
FACTS = {"uid": "u-1", "operation": "CREATE", "namespace": "team-a", "pod": "web-0"}
LOG_AT_CASES = [
    ("a patched pod", logging.INFO, NOW + 0.25, "added default tolerations %s", ("a,b",), FACTS),
    ("a refused request", logging.WARNING, NOW, "refused admission request: %s", ("x",), {"remote": None}),
    ("an admitted pod at debug", logging.DEBUG, NOW, "admitted without a patch (%s%s)", ("skipped", ": why"), FACTS),
    ("no extra", logging.ERROR, NOW, "m", (), None),
    ("an unnamed level", 25, NOW, "m", (), {}),
    ("a private extra", logging.INFO, NOW, "m", (), {"_private": 1, "uid": "u"}),
    ("extras that are not strings", logging.INFO, NOW, "m", (), {"n": 3, "nested": {"a": [1]}}),
    ("extras named like the JSON line's fields", logging.INFO, NOW, "m", (), {"time": "t", "logger": "l"}),
    ("a mapping as the one argument", logging.INFO, NOW, "got %s", ({"a": 1},), {}),
    ("characters JSON escapes", logging.INFO, NOW, '"ü" %s', ("\n\x00✓",), {"pod": '\\"日本'}),
    ("a time that rounds up to the next second", logging.INFO, NOW + 0.9999996, "m", (), {}),
]


@contextlib.contextmanager
def root_writing_to(log_format: str) -> Iterator[io.StringIO]:
    """The root's one handler a LineHandler in `log_format` writing to the returned stream (pytest's own capture
    handlers set aside), every level on."""
    handler = LineHandler()
    handler.stream = stream = io.StringIO()
    handler.setFormatter(FORMATS[log_format]())
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


def logged(stream: io.StringIO, held: bool, action) -> str:
    stream.seek(0)
    stream.truncate()
    with held_lines() if held else contextlib.nullcontext():
        action()
    return stream.getvalue()


@pytest.mark.parametrize("held", [True, False], ids=["held", "not held"])
@pytest.mark.parametrize("log_format", FORMATS)
@pytest.mark.parametrize(
    ("level", "created", "message", "args", "extra"), [c[1:] for c in LOG_AT_CASES], ids=[c[0] for c in LOG_AT_CASES]
)
def test_log_at_writes_the_line_its_record_gives(
    log_format, held, level, created, message, args, extra, fast_paths, monkeypatch
):
    bookkeeping = Bookkeeping(fast_paths=FastPaths(fast_paths))
    make_record = bookkeeping._make_record
    made: list[logging.LogRecord] = []
    monkeypatch.setattr(bookkeeping, "_make_record", lambda *a: made.append(make_record(*a)) or made[-1])
    logger = logging.getLogger("taintkeeper.webhook.test-direct")
    with root_writing_to(log_format) as stream:
        direct = logged(stream, held, lambda: bookkeeping.log_at(logger, created, level, message, *args, extra=extra))
        assert len(made) == (0 if held else 1)  # held: no record made
        logger.addFilter(lambda record: True)  # lets every record through, and makes log_at make them
        try:
            full = logged(stream, held, lambda: bookkeeping.log_at(logger, created, level, message, *args, extra=extra))
        finally:
            logger.filters.clear()
    assert direct == full
    assert direct.endswith("\n")  # a line was written


def test_log_at_writes_nothing_below_the_levels_or_while_logging_is_disabled(fast_paths):
    log_at = Bookkeeping(fast_paths=FastPaths(fast_paths)).log_at
    logger = logging.getLogger("taintkeeper.webhook.test-levels")
    with root_writing_to("json") as stream:
        handler = logging.getLogger().handlers[0]
        try:
            logger.setLevel(logging.WARNING)
            assert logged(stream, True, lambda: log_at(logger, NOW, logging.INFO, "below the logger's")) == ""
            logger.setLevel(logging.NOTSET)
            handler.setLevel(logging.ERROR)
            assert logged(stream, True, lambda: log_at(logger, NOW, logging.WARNING, "below the handler's")) == ""
            handler.setLevel(logging.NOTSET)
            logging.disable(logging.WARNING)
            assert logged(stream, True, lambda: log_at(logger, NOW, logging.WARNING, "disabled")) == ""
            logging.disable(logging.NOTSET)
            assert "enabled" in logged(stream, True, lambda: log_at(logger, NOW, logging.WARNING, "enabled"))
        finally:
            logging.disable(logging.NOTSET)
            logger.setLevel(logging.NOTSET)


def test_log_at_makes_records_with_a_custom_record_factory_even_while_lines_are_held(fast_paths):
    log_at = Bookkeeping(fast_paths=FastPaths(fast_paths)).log_at
    made = []
    factory = logging.getLogRecordFactory()

    def counting(*args, **kwargs):
        record = factory(*args, **kwargs)
        made.append(record)
        return record

    logger = logging.getLogger("taintkeeper.webhook.test-factory")
    with root_writing_to("plain") as stream:
        logging.setLogRecordFactory(counting)
        try:
            text = logged(stream, True, lambda: log_at(logger, NOW, logging.INFO, "m %s", "x", extra={"uid": "u"}))
        finally:
            logging.setLogRecordFactory(factory)
    assert len(made) == 1 and text.endswith(": m x uid=u\n")


def test_log_at_refuses_an_extra_that_would_overwrite_a_record_attribute_on_either_path(fast_paths):
    log_at = Bookkeeping(fast_paths=FastPaths(fast_paths)).log_at
    logger = logging.getLogger("taintkeeper.webhook.test-reserved")
    with root_writing_to("json") as stream:
        for held in (True, False):
            for name in ("message", "asctime", "levelname", "msg"):
                with pytest.raises(KeyError, match=name):
                    logged(stream, held, lambda name=name: log_at(logger, NOW, logging.INFO, "m", extra={name: 1}))
        assert stream.getvalue() == ""
