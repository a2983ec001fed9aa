"""webhook.fast_paths: one switch; each fast path checks the internal it relies on and, where that has
changed, falls back to the library's plain path, said in one line at start.

Each fallback test takes an internal away (or changes its shape) before the check runs, as a new release
of the library would, and shows the plain path taken. Answering the same both ways is tested where each
fast path is used: test_app.py, test_bookkeeping.py, test_worker_requests.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Response
from gunicorn import util
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser
from prometheus_client import CollectorRegistry, Histogram

from tests.unit.webhook.starting import run_python
from webhook import fast_paths
from webhook.bookkeeping import Bookkeeping
from webhook.fast_paths import (
    BASE_ENVIRON,
    CALLER_LOOKUP,
    CHECKS,
    GUNICORN_SETTINGS,
    HISTOGRAM_BATCH,
    HTTP_DATE,
    LOG_RECORD_TEMPLATE,
    PEER_TRUST,
    WERKZEUG_RESPONSE,
    FastPaths,
)


@pytest.fixture
def unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    """No check has run in this process yet (their answers are kept once per process), nor are any
    log record templates kept; both as they were after the test."""
    monkeypatch.setattr(fast_paths, "_FOUND", {})
    monkeypatch.setattr(fast_paths, "_TEMPLATES", {})


@pytest.fixture
def gunicorns_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """gunicorn's `util.http_date` and `wsgi.base_environ` put back in its modules after the test."""
    monkeypatch.setattr(util, "http_date", util.http_date)
    monkeypatch.setattr(wsgi, "base_environ", wsgi.base_environ)


def test_every_fast_path_is_taken_with_the_libraries_installed(unchecked: None) -> None:
    """The versions pyproject.toml allows are the ones these internals were written for."""
    paths = FastPaths(True)
    assert paths.off == {} and paths.off_lines() == []
    assert all(paths.takes(name) for name in CHECKS)
    assert paths.json_response is fast_paths._json_response_made_directly
    assert paths.observe_all is fast_paths._observe_all_at_once
    assert paths.make_record is fast_paths._record_from_template


def test_with_the_switch_off_no_check_runs_and_every_path_is_the_librarys(
    unchecked: None, gunicorns_own: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def touched() -> str | None:
        raise AssertionError("a check ran with the switch off")

    monkeypatch.setattr(fast_paths, "CHECKS", dict.fromkeys(CHECKS, touched))
    monkeypatch.setattr(logging, "_srcfile", logging._srcfile)
    own = util.http_date, wsgi.base_environ, logging._srcfile
    paths = FastPaths(False)
    assert paths.off == {} and paths.off_lines() == []
    assert not any(paths.takes(name) for name in CHECKS)
    assert paths.json_response is fast_paths.json_response
    assert paths.observe_all is fast_paths.observe_each
    assert paths.make_record is fast_paths.record_made_by_logging
    cfg = Config()
    assert paths.settled(cfg) is cfg
    assert type(paths.request_parser(cfg, [b"GET / HTTP/1.1\r\n\r\n"], ("10.0.0.7", 1))) is RequestParser
    paths.install_in_gunicorn()
    paths.skip_caller_lookup()
    assert (util.http_date, wsgi.base_environ, logging._srcfile) == own


def test_a_check_that_fails_to_look_turns_its_fast_path_off(unchecked: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> str | None:
        raise RuntimeError("no such thing")

    monkeypatch.setitem(fast_paths.CHECKS, WERKZEUG_RESPONSE, broken)
    paths = FastPaths(True)
    assert paths.off == {WERKZEUG_RESPONSE: "its check failed: RuntimeError: no such thing"}
    assert paths.off_lines() == [
        "fast path werkzeug-response is off: its check failed: RuntimeError: no such thing; "
        "the library's plain path is taken"
    ]


def test_the_checks_run_once_per_process(unchecked: None, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[str] = []

    def counted(name: str, check: Callable[[], str | None]) -> Callable[[], str | None]:
        def run() -> str | None:
            runs.append(name)
            return check()

        return run

    for name, check in CHECKS.items():
        monkeypatch.setitem(fast_paths.CHECKS, name, counted(name, check))
    FastPaths(True)
    FastPaths(True)
    assert sorted(runs) == sorted(CHECKS)


# -- each fast path's internal taken away ----------------------------------------------------------------------


def _defining_class(cls: type, name: str) -> type:
    return next(klass for klass in cls.__mro__ if name in vars(klass))


def test_gunicorns_settings_resolved_otherwise_leave_the_worker_gunicorns_config(
    unchecked: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = Config()
    monkeypatch.delattr(Config, "__getattr__")
    paths = FastPaths(True)
    assert set(paths.off) == {GUNICORN_SETTINGS, BASE_ENVIRON, PEER_TRUST}  # the two keep their memory on it
    assert paths.off[GUNICORN_SETTINGS] == "gunicorn.config.Config no longer resolves its settings in __getattr__"
    assert paths.off[PEER_TRUST] == "it keeps what it remembers on gunicorn-settings, which is off"
    assert paths.settled(cfg) is cfg


@pytest.mark.parametrize(
    ("replacement", "why"),
    [
        (None, "gunicorn.util has no http_date"),
        (lambda: "Thu, 01 Jan 1970", "gunicorn.util.http_date takes [], not (timestamp=None)"),
    ],
    ids=["gone", "another signature"],
)
def test_without_gunicorns_http_date_the_date_header_is_left_to_gunicorn(
    unchecked: None, gunicorns_own: None, monkeypatch: pytest.MonkeyPatch, replacement: Any, why: str
) -> None:
    if replacement is None:
        monkeypatch.delattr(util, "http_date")
    else:
        monkeypatch.setattr(util, "http_date", replacement)
    paths = FastPaths(True)
    assert paths.off == {HTTP_DATE: why}
    paths.install_in_gunicorn()
    assert getattr(util, "http_date", None) is replacement
    assert hasattr(wsgi.base_environ, "__wrapped__")  # the other fast paths are taken


def test_without_gunicorns_base_environ_the_environ_is_left_to_gunicorn(
    unchecked: None, gunicorns_own: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(wsgi, "base_environ")
    paths = FastPaths(True)
    assert paths.off == {BASE_ENVIRON: "gunicorn.http.wsgi has no base_environ"}
    paths.install_in_gunicorn()
    assert not hasattr(wsgi, "base_environ")


def test_without_gunicorns_peer_trust_method_requests_are_gunicorns(
    unchecked: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(_defining_class(Request, "_peer_is_trusted_proxy"), "_peer_is_trusted_proxy")
    paths = FastPaths(True)
    assert paths.off == {PEER_TRUST: "gunicorn's Request has no _peer_is_trusted_proxy"}
    cfg = paths.settled(Config())
    assert type(paths.request_parser(cfg, [b"GET / HTTP/1.1\r\n\r\n"], ("10.0.0.7", 1))) is RequestParser


def test_a_response_werkzeug_makes_otherwise_is_made_by_werkzeug(
    unchecked: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A werkzeug whose Response constructor sets one more attribute: the direct way would miss it."""
    constructor = Response.__init__

    def newer(self: Response, *args: Any, **kwargs: Any) -> None:
        constructor(self, *args, **kwargs)
        vars(self)["added_by_a_newer_werkzeug"] = True

    monkeypatch.setattr(Response, "__init__", newer)
    paths = FastPaths(True)
    assert paths.off == {WERKZEUG_RESPONSE: "werkzeug makes a 200 Response unlike the one made directly"}
    assert getattr(paths.json_response(b"{}", 200), "added_by_a_newer_werkzeug", False) is True


def _observing_each(values: list[float]) -> Callable[..., None]:
    def observe(self: Any, amount: float, exemplar: Any = None) -> None:  # keeps its buckets elsewhere
        values.append(amount)

    return observe


@pytest.mark.parametrize("taken_away", ["observe", "_raise_if_not_observable"])
def test_a_histogram_kept_otherwise_is_given_each_value(
    unchecked: None, monkeypatch: pytest.MonkeyPatch, taken_away: str
) -> None:
    observed: list[float] = []
    if taken_away == "observe":
        monkeypatch.setattr(Histogram, "observe", _observing_each(observed))
        why = (
            "prometheus_client's Histogram.observe no longer uses _buckets, _raise_if_not_observable, "
            "_sum, _upper_bounds, inc"
        )
    else:
        monkeypatch.delattr(_defining_class(Histogram, taken_away), taken_away)
        monkeypatch.setattr(Histogram, "observe", _observing_each(observed))
        why = "prometheus_client's Histogram has no _raise_if_not_observable"
    paths = FastPaths(True)
    assert paths.off == {HISTOGRAM_BATCH: why}
    histogram = Histogram("t_seconds", "t", registry=CollectorRegistry())
    bookkeeping = Bookkeeping(interval=3600, fast_paths=paths)
    bookkeeping.start()
    for value in (0.1, 0.2, 0.3):
        bookkeeping.submit(bookkeeping.observe, histogram, value)
    bookkeeping.drain()
    assert observed == [0.1, 0.2, 0.3]


def test_a_log_record_made_otherwise_is_made_by_logging(unchecked: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python whose records get an attribute of their own each (a serial number): a template cannot copy it."""
    constructor = logging.LogRecord.__init__
    serials = iter(range(1_000_000))

    def numbered(self: logging.LogRecord, *args: Any, **kwargs: Any) -> None:
        constructor(self, *args, **kwargs)
        vars(self)["serial"] = next(serials)

    monkeypatch.setattr(logging.LogRecord, "__init__", numbered)
    paths = FastPaths(True)
    assert paths.off == {LOG_RECORD_TEMPLATE: "a LogRecord made from a template differs from logging's in serial"}
    logger = logging.getLogger("taintkeeper.webhook.test-fallback")
    first, second = (paths.make_record(logger, 1.5, 500.0, logging.INFO, "m", (), {}) for _ in range(2))
    assert getattr(second, "serial", None) == getattr(first, "serial", 0) + 1  # each from LogRecord's constructor


def test_without_logging_srcfile_the_caller_lookup_is_left_alone(
    unchecked: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(logging, "_srcfile")
    paths = FastPaths(True)
    assert paths.off == {CALLER_LOOKUP: "logging has no _srcfile"}
    paths.skip_caller_lookup()
    assert not hasattr(logging, "_srcfile")


def test_with_the_switch_on_records_skip_the_caller_lookup(unchecked: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging, "_srcfile", logging._srcfile)  # put back after the test
    FastPaths(True).skip_caller_lookup()
    assert logging._srcfile is None


# -- at start --------------------------------------------------------------------------------------------------

START_WITH_A_NEWER_WERKZEUG = """
from flask import Response

constructor = Response.__init__


def newer(self, *args, **kwargs):
    constructor(self, *args, **kwargs)
    self.added_by_a_newer_werkzeug = True


Response.__init__ = newer
import webhook.gunicorn_conf as conf

conf.on_starting(None)
"""


WERKZEUG_RESPONSE_OFF = (
    " WARNING taintkeeper.webhook.fast_paths: fast path werkzeug-response is off: werkzeug makes a 200 "
    "Response unlike the one made directly; the library's plain path is taken"
)
GUNICORNS_WORKER_SERVES = (
    " WARNING taintkeeper.webhook.fast_paths: fast paths off: gunicorn's own gevent worker serves, without "
    "--request-timeout; a renewed certificate is served once the workers restart"
)


@pytest.mark.parametrize(
    ("switch", "said"),
    [("true", WERKZEUG_RESPONSE_OFF), ("false", GUNICORNS_WORKER_SERVES)],
    ids=["fast paths on", "fast paths off"],
)
def test_the_start_says_in_one_line_which_fast_path_is_off_and_why(tmp_path: Path, switch: str, said: str) -> None:
    """In a subprocess: the gunicorn config's on_starting (the master's, once), as a newer werkzeug would have it.
    With the switch off no fast path is checked, and the line says what gunicorn's own worker leaves out."""
    settings = {"TAINTKEEPER_FAST_PATHS": switch, "TAINTKEEPER_NAMESPACE_CACHE": "false"}
    result = run_python(START_WITH_A_NEWER_WERKZEUG, tmp_path, settings)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "fast path" in line]
    assert len(lines) == 1, result.stderr
    assert lines[0].endswith(said)
