"""The webhook's bookkeeping of each review (its log lines and metrics), done in batches off the request path.

A review's log line and metric updates run a lot of Python's logging's and prometheus_client's
code, which runs slower in between requests (the caches hold gunicorn's and Flask's code then) than
a batch of them does in a row. So, once `start`ed in the serving process (gunicorn's
post_worker_init), a review only queues its bookkeeping, and a thread (a greenlet under the gevent
worker) does what has queued every INTERVAL seconds:

- each log line keeps the time of its review (`created`), its level, message and fields, and the
  order of the lines of one worker; lines reach the log at most INTERVAL later (and a worker that
  is killed outright loses at most that much; one that stops drains the queue first);
- metrics are updated in the same pass (counters once per batch, with what the batch added up:
  `count`; a histogram's observations at the end of the batch: `observe`), and `drain()` runs before every
  /metrics answer, so a worker's own counts are exact when it is scraped and the others' at most
  INTERVAL behind;
- the batch's log lines are written to the log in one go (`plumbing.log_lines.held_lines`), and each
  is made without a LogRecord when nothing but that handler would see the record (`log_at`).

How a batch's histogram observations and log records are made is the fast paths' choice
(webhook/fast_paths.py): the same counts, sums and lines either way.

Not started (tests, the Flask test client, any other WSGI server), everything is done at once.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from plumbing.log_lines import held_lines, hold_line
from webhook.fast_paths import FastPaths, RecordMaker, record_made_by_logging

INTERVAL = 0.05  # seconds between two batches

log = logging.getLogger("taintkeeper.webhook.bookkeeping")


class Bookkeeping:
    """Runs each submitted `(function, args)` now, or, once started in this process, in the next batch.

    Histograms are observed and log records made the ways `fast_paths` chooses (by default, the
    switch's default: on).
    """

    def __init__(self, interval: float = INTERVAL, fast_paths: FastPaths | None = None) -> None:
        self.interval = interval
        paths = FastPaths(switch=True) if fast_paths is None else fast_paths
        self._observe_all = paths.observe_all
        self._make_record = paths.make_record
        self._queue: collections.deque[tuple[Callable[..., None], tuple[Any, ...]]] = collections.deque()
        self._started_in: int | None = None  # the pid whose thread drains the queue
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._draining = threading.Lock()  # one batch at a time: the thread's, or /metrics'
        self._counts: dict[Any, float] = collections.defaultdict(float)  # counter child -> amount, this batch
        self._observed: dict[Any, list[float]] = {}  # histogram -> its observations, this batch

    def observe(self, histogram: Any, value: float) -> None:
        """`histogram.observe(value)` at the end of this batch; with the prometheus-histogram-batch fast path,
        the batch's observations go into each bucket and the sum at once (two updates of the multiprocess
        files per batch instead of two per review). Only from functions run by `submit`."""
        self._observed.setdefault(histogram, []).append(value)

    def count(self, counter: Any, amount: float = 1) -> None:
        """`counter.inc(amount)` at the end of this batch, added up with the batch's other increments.
        Only from functions run by `submit`."""
        self._counts[counter] += amount

    def log_at(
        self,
        logger: logging.Logger,
        created: float,
        level: int,
        message: str,
        *args: object,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        """`log_at`, with records made the way this bookkeeping's fast paths choose."""
        log_at(logger, created, level, message, *args, extra=extra, make_record=self._make_record)

    @property
    def started(self) -> bool:
        return self._started_in == os.getpid()

    def start(self) -> None:
        """Batch from now on in this process (idempotent; a forked child must start its own)."""
        with self._lock:
            if self.started:
                return
            self._queue.clear()  # inherited through fork: the parent does these
            self._started_in = os.getpid()
            threading.Thread(target=self._run, name="webhook-bookkeeping", daemon=True).start()

    def submit(self, function: Callable[..., None], *args: Any) -> None:
        if not self.started:
            with self._draining:
                self._do(function, args)
                self._add_up()
            return
        self._queue.append((function, args))
        if not self._wake.is_set():
            self._wake.set()

    def drain(self) -> None:
        """Do everything queued so far, in order (from any thread: one batch at a time)."""
        with self._draining, held_lines():  # the batch's log lines written in one go
            queue = self._queue
            while queue:
                self._do(*queue.popleft())
            self._add_up()

    def _do(self, function: Callable[..., None], args: tuple[Any, ...]) -> None:
        try:
            function(*args)
        except Exception:  # one bad item must not stop the others, nor the thread
            log.exception("bookkeeping of a review failed")

    def _add_up(self) -> None:
        counts, self._counts = self._counts, collections.defaultdict(float)
        for counter, amount in counts.items():
            try:
                counter.inc(amount)
            except Exception:
                log.exception("bookkeeping of a review failed")
        observed, self._observed = self._observed, {}
        for histogram, values in observed.items():
            try:
                self._observe_all(histogram, values)
            except Exception:
                log.exception("bookkeeping of a review failed")

    def _run(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(self.interval)  # let a batch gather
            self._wake.clear()
            self.drain()


_RESERVED_NAMES = frozenset(vars(logging.LogRecord("", logging.INFO, "(unknown file)", 0, "", (), None))) | {
    "message",
    "asctime",
}  # what Logger.makeRecord refuses in `extra`
_NO_EXTRA: Mapping[str, object] = {}


def log_at(
    logger: logging.Logger,
    created: float,
    level: int,
    message: str,
    *args: object,
    extra: Mapping[str, object] | None = None,
    make_record: RecordMaker = record_made_by_logging,
) -> None:
    """`logger.log(level, message, *args, extra=extra)` as if called at `created` (a time.time()).

    While the root's LineHandler holds a batch and nothing else would see the record, no record is
    made: its line is held directly (`plumbing.log_lines.hold_line`), the very line the record would
    give, without the record's making. Otherwise the record is `make_record`'s (webhook/fast_paths.py),
    for the unknown caller (logging does not look it up: the line is logged later than it happened);
    a custom LogRecord factory gets its own records, from `logger.makeRecord`.
    """
    if not logger.isEnabledFor(level):
        return
    extra = extra or _NO_EXTRA
    msecs = int((created - int(created)) * 1000) + 0.0  # as LogRecord has it
    if logging.getLogRecordFactory() is not logging.LogRecord:
        logger.handle(record_made_by_logging(logger, created, msecs, level, message, args, extra))
        return
    _refuse_reserved_names(extra)
    if not hold_line(logger, level, created, msecs, message, args, extra):
        logger.handle(make_record(logger, created, msecs, level, message, args, extra))


def _refuse_reserved_names(extra: Mapping[str, object]) -> None:
    for key in extra:  # as Logger.makeRecord
        if key in _RESERVED_NAMES:
            raise KeyError(f"Attempt to overwrite {key!r} in LogRecord")
